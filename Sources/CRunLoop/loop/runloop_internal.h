/*
 * runloop_internal.h — the run loop's private structures (the loop, its
 * modes, memberships, sources, timers, observers, fd objects and fd
 * table) and the small inline helpers over them, shared by every run-loop
 * file. It calls nothing of theirs: each room's functions are declared in
 * the room's own header (rl_lock.h, rl_loop.h, rl_wake.h, rl_fdtab.h,
 * rl_ready.h, RLRunLoopMode.h, RLRunLoopMembership.h, rl_heap.h,
 * RLRunLoopPerformInternal.h); docs/architecture.md maps the rooms.
 *
 * Locking (the whole protocol, as a table: docs/locking.md): each run loop
 * has its own lock (the loop lock) over its modes, memberships, timer heaps,
 * ready list and fd table; nothing is shared between loops. A source, which
 * may sit in several loops, has its own item lock over its membership list
 * and state. A timer or an observer belongs to one loop at a time, its home:
 * its state is under the home loop's lock, and under its item lock only
 * while it has no home. Order: a loop lock before an item lock; never two
 * loop locks, never two item locks at once. An operation that starts at a
 * source and reaches several loops (signal, invalidate) notes the loops
 * under the item lock, drops it, then visits them one at a time. No lock is
 * held while user code runs: functions collect what to call (retaining
 * what they collect), unlock, then call. The per-loop perform queue has its
 * own spin lock, and wake-ups use two atomic flags only.
 */
#ifndef CRUNLOOP_RUNLOOP_INTERNAL_H
#define CRUNLOOP_RUNLOOP_INTERNAL_H

#include "RLLockInternal.h"
#include "RLBase.h"
#include "rl_callout.h"
#include "rl_fork.h"
#include "rl_spin.h"
#include "rl_poll.h"
#include "rl_pqueue.h"
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>
#include <crunloop/RLRunLoopObserver.h>
#include <crunloop/RLRunLoopSource.h>
#include <crunloop/RLRunLoopTimer.h>

#include <bsd/sys/queue.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/types.h>

typedef struct rl__mode rl__mode;
typedef struct rl__memb rl__memb;
typedef struct rl__defer rl__defer; /* work done after unlocking (rl_lock.h) */

/* A link of a circular doubly linked list whose head is a link too (a
 * timer set's pending list): inserting and unlinking take no branch, and
 * unlinking needs no head. */
typedef struct rl__ring {
    struct rl__ring *next, *prev;
} rl__ring;

typedef enum rl__kind { RL_KIND_SOURCE = 0, RL_KIND_TIMER = 1, RL_KIND_OBSERVER = 2 } rl__kind;

/* What COALESCE's nap has done for a loop's reads (rl_waitpolicy.h,
 * rl__coalesce_due): the bytes read per socket in passes after a wait
 * without a nap and after a nap, as running means, and how many bulk
 * passes to wait without napping before the nap is tried again. The
 * loop's thread only. */
typedef struct rl__nap {
    uint32_t plain;   /* bytes per socket read in bulk after a wait without a nap; 0: not measured yet */
    uint32_t napped;  /* the same after a nap; 0: not measured since the nap was last tried */
    uint16_t skip;    /* bulk passes left that wait without a nap */
    uint16_t backoff; /* the next skip's length: doubled by each try that brought no more bytes */
    uint8_t streak;   /* naps since the last pass measured without one */
    bool last;        /* the wait before the pass now running napped */
} rl__nap;

/* An item lock (see "locks" below). */
typedef struct rl__olock {
    _Atomic uint32_t word;
} rl__olock;

/* One item (source, timer or observer) in one mode of one run loop. The
 * membership holds one reference on the item. A timer's first membership
 * lives inside the timer and is only the part before item_link
 * (RL__TIMER_MEMB_SIZE bytes: what the timer heaps use); a timer's further
 * memberships, rare, are whole ones on its extension's list, linked through
 * item_link. So code that may see a timer's membership reads its loop as
 * m->mode->rl, never m->rl, and never touches anything from item_link on
 * unless m is on a list. */
struct rl__memb {
    void *item;
    rl__mode *mode;
    /* What one kind only uses: 80 bytes a membership, not 96 (a source
     * carries one inline). */
    union {
        size_t hidx[2];                 /* timers: slots in the mode's heaps */
        rl__ring plink;                 /* strict timers while `pending` */
        TAILQ_ENTRY(rl__memb) ready_link; /* sources while `queued`: the mode's ready list */
    };
    rl__kind kind;
    bool lax;                       /* timers: filed as tolerant (tolerance > 0) */
    bool pending;                   /* strict timers: on the set's pending list, not in the heap */
    /* Sources: on the mode's ready list (signalled, not yet taken). One
     * entry per membership makes a signal O(1) per mode it is in, and a
     * removed membership leaves the list with it. */
    bool queued;
    /* The item's memberships (a timer's: beyond its inline one): a timer
     * extension's TAILQ, a source's or an observer's rl__itemq. */
    TAILQ_ENTRY(rl__memb) item_link;
    TAILQ_ENTRY(rl__memb) mode_link; /* the mode's sources or observers */
    struct rl__memb *snext;          /* sources: next in the mode's equality bucket */
};
/* 80 bytes (before: 88, with the loop, which is mode->rl). */
_Static_assert(sizeof(rl__memb) == 80, "membership: 80 bytes");
#define RL__TIMER_MEMB_SIZE offsetof(rl__memb, item_link)
TAILQ_HEAD(rl_membq, rl__memb);

/* A source's or an observer's memberships, in the order they were made:
 * a list through item_link, with one pointer for a head (a TAILQ's head
 * is two), so an item in one mode pays 8 bytes for it. Its few entries
 * are walked to add at the end. Read with RL_ITEMQ_FIRST/RL_ITEMQ_NEXT. */
struct rl__itemq {
    rl__memb *first;
};
#define RL_ITEMQ_FIRST(q) ((q)->first)
#define RL_ITEMQ_NEXT(m) ((m)->item_link.tqe_next)
#define RL_ITEMQ_FOREACH(m, q) for ((m) = RL_ITEMQ_FIRST(q); (m); (m) = RL_ITEMQ_NEXT(m))
static inline void rl__itemq_insert_tail(struct rl__itemq *q, rl__memb *m) {
    rl__memb **p = &q->first;
    while (*p)
        p = &(*p)->item_link.tqe_next;
    m->item_link.tqe_next = NULL;
    m->item_link.tqe_prev = p;
    *p = m;
}
static inline void rl__itemq_remove(rl__memb *m) {
    rl__memb *next = m->item_link.tqe_next;
    if (next)
        next->item_link.tqe_prev = m->item_link.tqe_prev;
    *m->item_link.tqe_prev = next;
}

/* A 4-ary min-heap of timer memberships; each entry carries its key so that
 * sifting touches only the array (ties, rare, compare the timers' stamps).
 * a[0, hn) is heap-ordered, a[hn, n) holds entries added since the order
 * was last needed (rl_heap.c). */
typedef struct rl__hent {
    double key;
    rl__memb *m;
} rl__hent;

typedef struct rl__heap {
    rl__hent *a;
    size_t n, hn, cap;
    int slot;  /* which rl__memb.hidx holds the entry's index */
    int keyed; /* 0: fire date, 1: fire date + tolerance */
} rl__heap;

/* A mode's timers. Strict ones (no tolerance, the usual case) sit in one
 * heap by fire date; tolerant ones in two, by fire date (are they due?) and
 * by fire date + tolerance (when must the loop wake?). */
typedef struct rl__timerset {
    rl__heap strict;
    rl__heap lax_fire;
    rl__heap lax_deadline;
    /* Strict timers added since the order was last needed, linked through
     * their memberships' plink: adding writes the membership only, not the
     * array (rl_heap.c). */
    rl__ring pending; /* its head (never moved: a mode is not); no count: the mode keeps one (rl__mode.counts) */
} rl__timerset;

struct rl__mode {
    char *name;
    RLRunLoopRef rl;
    bool common;
    bool is_default; /* saves a string compare per perform request */
    struct rl_membq sources;
    size_t nsources;
    /* The sources by equality key (rl__source_key), so that adding a source
     * equal to one already in the mode is found without a scan; chained
     * through rl__memb.snext, nsbuckets a power of two (0: none yet). */
    rl__memb **sbuckets;
    size_t nsbuckets;
    struct rl_membq ready;     /* signalled sources' memberships, in signal order */
    size_t nready;
    /* The sources a pass of this mode took and is performing (the loop's
     * thread only; NULL outside rl_do_sources0): a run of this mode nested
     * in one of their performs puts the unreached ones back (rl_requeue). */
    struct rl__inflight *inflight;
    struct rl_membq observers; /* sorted by order */
    size_t nobservers;
    _Atomic RLOptionFlags observer_mask; /* read without the lock on the fast path */
    /* How many timers (the low 32 bits: one instruction moves the count)
     * and sources (the high 32, RL__MODE_SOURCE_ONE each) are in the mode,
     * in one word so that adding or removing a timer moves one count: written under the loop lock
     * (RLRunLoopMembership.c), read by the loop's thread without it, so
     * that a pass asks "any timer?" and "is the mode empty?" without taking
     * the lock (RLRunLoopRun.c; rl__mode_empty, rl__mode_has_timers). */
    _Atomic uint64_t counts;
    rl__timerset timers;
};

#define RL__MODE_SOURCE_ONE ((uint64_t)1 << 32)
/* Whether m holds no source and no timer / some timer, by its counts. */
static inline bool rl__mode_empty(rl__mode *m, memory_order mo) { return atomic_load_explicit(&m->counts, mo) == 0; }
static inline bool rl__mode_has_timers(rl__mode *m, memory_order mo) {
    return (uint32_t)atomic_load_explicit(&m->counts, mo) != 0;
}

/* The loop of membership m. */
static inline RLRunLoopRef rl__memb_rl(const rl__memb *m) { return m->mode->rl; }


/* ---- sources ---- */

/* What a source made by RLRunLoopSourceCreate has after it: first, the
 * last field (snext) of its inline membership, which the source itself
 * ends before (see below). */
typedef struct rl__source_tail {
    struct rl__memb *inline_snext;
    /* Its place on a loop's inbox of signals from other threads (rl_ready.c):
     * the loop (NULL: on none) and the source after it there. The item lock;
     * in the line a cross-thread signal writes anyway, not the context's. */
    struct RLRunLoop *inbox_rl;
    struct RLRunLoopSource *inbox_next;
    /* The loop its memberships are all in: NULL if none, RL__HOME_MANY if
     * they are in several (the item lock; rl__source_home_*): a signal
     * reads it here, not through its memberships' modes. */
    struct RLRunLoop *home;
    RLRunLoopSourceContext ctx;
    RLHashCode hash; /* ctx.hash(info), or info: computed once, at creation */
} rl__source_tail;

/* A source made by RLRunLoopSourceCreate is this and its context after
 * it (a line-aligned pool block of 256 bytes); an fd source (an RLSocket's,
 * an RLFileDescriptor's) has no context, every callback of it being NULL,
 * and is this and its fd state (RL__FDSOURCE_SIZE: 144 bytes, in its owner's
 * block; before: 128, its own block, and a separate fd object):
 * read the context through rl__source_ctx. Its first membership is inside
 * it (inline_memb, rl__source_inline_memb, as a timer's): a source in one
 * mode, the usual case, costs no other allocation. A membership's last
 * field, snext, chains it in its mode's equality buckets, where only a
 * program's sources are (an fd source is equal to itself only: it is
 * found through its own memberships, rl__memb_find): so an fd source's
 * inline membership ends before snext, and a program's source's snext is
 * the first field of its tail, right after. */
struct RLRunLoopSource {
    rl__object base;
    rl__olock lock; /* the item lock: membs, valid, signalled, inline_used */
    /* Beside the lock and the object header, in the line a signal from
     * another thread reads (the header's check, then `signalled` without
     * the lock while it is set: rl__source_signal): one line, not two, that
     * the loop's perform writes and the signalling thread then misses. */
    bool valid;     /* written under the item lock; read without it as a hint */
    bool signalled;
    bool has_ctx;     /* tail[0] is there (fixed at creation) */
    bool inline_used; /* inline_memb is a membership (the item lock) */
    RLIndex order;
    struct rl__itemq membs;
    _Alignas(rl__memb) unsigned char inline_memb[offsetof(rl__memb, snext)];
    rl__source_tail tail[]; /* has_ctx: one; else the fd state (RL__FDSOURCE_SIZE) */
};
_Static_assert(sizeof(struct RLRunLoopSource) == 112, "a source less its tail: 112 bytes");
_Static_assert(offsetof(struct RLRunLoopSource, tail) + offsetof(rl__source_tail, inline_snext) ==
                   offsetof(struct RLRunLoopSource, inline_memb) + offsetof(rl__memb, snext),
               "a program's source's inline membership ends in its tail");
_Static_assert(offsetof(rl__memb, snext) + sizeof(struct rl__memb *) == sizeof(rl__memb), "snext is last");

#define RL__HOME_MANY ((struct RLRunLoop *)(uintptr_t)1)

/* A program's source s got a membership in rl: its home (the item lock). */
static inline void rl__source_home_add(struct RLRunLoopSource *s, struct RLRunLoop *rl) {
    struct RLRunLoop *h = s->tail[0].home;
    s->tail[0].home = h == NULL || h == rl ? rl : RL__HOME_MANY;
}

/* s lost a membership: its home again, from those left (the item lock). */
RL__HIDDEN void rl__source_home_recompute(struct RLRunLoopSource *s);

static inline rl__memb *rl__source_inline_memb(struct RLRunLoopSource *s) {
    return (rl__memb *)(void *)s->inline_memb;
}

/* What a source without a context reads as its context: zeros. */
RL__HIDDEN extern const RLRunLoopSourceContext rl__source_no_ctx;

static inline const RLRunLoopSourceContext *rl__source_ctx(const struct RLRunLoopSource *s) {
    return s->has_ctx ? &s->tail[0].ctx : &rl__source_no_ctx;
}

/* Its equality hash (see rl__source_tail); a source without a context: 0. */
static inline RLHashCode rl__source_hash(const struct RLRunLoopSource *s) { return s->has_ctx ? s->tail[0].hash : 0; }

/* Two sources are equal as in CF: same order, the same callbacks and, by
 * the context's equal callback (without one: the same info), equal infos.
 * fd sources only by identity. What can be compared without calling user
 * code (everything but `equal`): */
static inline bool rl__source_same_shape(const struct RLRunLoopSource *a, const struct RLRunLoopSource *b) {
    const RLRunLoopSourceContext *ac = rl__source_ctx(a), *bc = rl__source_ctx(b);
    return a->order == b->order && rl__source_hash(a) == rl__source_hash(b) && ac->equal == bc->equal && ac->hash == bc->hash &&
           ac->perform == bc->perform && ac->schedule == bc->schedule && ac->cancel == bc->cancel &&
           (a == b || (a->has_ctx && b->has_ctx));
}

/* ---- timers ---- */

/* A timer is a block of 128 bytes (RL__TIMER_SIZE), two cache lines (120
 * of them its fields, 8 spare since the object header is 16): what every
 * timer needs, its first membership inline, and a pointer to an extension
 * that holds what most timers do without, made when a timer first needs
 * it (rl__timer_ext_make): a repeating timer's grid, a tolerance, an
 * order, the context's retain, release and copyDescription callbacks, the
 * memberships beyond the first. A one-shot timer in one mode
 * with no tolerance, the usual case, has none. What adding or removing a
 * timer touches is its first 80 bytes: the object header, home, flags,
 * stamp thread, home slot and its inline membership. The loop a timer is
 * in (a timer is in at most one) is its home (see "homes" below), where
 * its memberships are. */
typedef struct rl__timer_ext {
    struct rl_membq membs; /* memberships beyond the inline one; the home's lock */
    /* A repeating timer's grid: fire_date is anchor + ticks * interval,
     * computed from the anchor each time (one rounding, never an
     * accumulation of one per tick). The anchor is the date given at
     * creation or by the last SetNextFireDate. What guards the timer. */
    RLAbsoluteTime anchor;
    uint64_t ticks;
    RLTimeInterval tolerance; /* what guards the timer */
    RLTimeInterval interval;  /* fixed at creation, as the next two */
    RLIndex order;
    /* The context's retain and release when the process has named more
     * than RL__TIMER_CBS pairs (see cbs); read through
     * rl__timer_ctx_retain and _release. */
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
    char *(*copyDescription)(const void *info);
} rl__timer_ext;

/* The pairs of context callbacks (retain, release) that timers have, each
 * named by a number (rl__timer_cbs; RLRunLoopTimer.c) so that a timer
 * keeps one byte for them instead of two pointers: a program has a few
 * such pairs (the block timers' one, Swift's RLTimer's one), not one a
 * timer. Entries are written once, before any timer names them. */
#define RL__TIMER_CBS 256
typedef struct rl__timer_cbs {
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
} rl__timer_cbs;
RL__HIDDEN extern rl__timer_cbs rl__timer_cbs_table[RL__TIMER_CBS];

struct RLRunLoopTimer {
    rl__object base;
    _Atomic(RLRunLoopRef) home; /* whose loop lock guards the rest; NULL: `lock` does */
    rl__olock lock;
    bool valid;
    bool firing;
    /* Its context's retain and release: their pair's number in
     * rl__timer_cbs_table, 0 if it has none (or they are in the extension). */
    uint8_t cbs;
    /* Flags written only under what guards the timer, so they share a
     * byte; the hot paths set them to constants (one instruction each). */
    /* The fire path is taking its reference on info (the context's
     * retain, called without the lock): an invalidation meanwhile leaves
     * the context's release to it (ctx_release_held), so that info cannot
     * go before it is retained. */
    bool ctx_pinned : 1;
    /* inline_memb is a membership. It holds the loop's reference on the
     * timer virtually: counted in no rl__object.rc, so that adding and
     * removing a timer make no atomic operation (the further memberships
     * and the common-modes item hold real ones, rl__hold_raw). Written and
     * read under the home's loop lock (the timer's last_release and
     * count_extra, RLRunLoopTimer.c): the timer's last counted reference
     * going while it is set leaves the count at 0 and the timer alive, the
     * loop's (an orphan), finalized when the membership ends
     * (rl__timer_vref_drop_locked). */
    bool inline_used : 1;
    bool multi : 1;       /* the extension's list holds memberships */
    bool tolerant : 1;    /* tolerance > 0: filed in the lax heaps (rl_heap.c) */
    bool moved_in_fire : 1;
    bool ctx_release_held : 1;
    bool repeats : 1;     /* interval > 0 (fixed at creation; its grid is in the extension) */
    bool listed : 1;      /* in its home's array (home_idx) */
    /* Its slot in its home's array of listed timers (RLRunLoop.homed; see
     * "a loop's idle timers"), and the number of the thread that gave its
     * stamp (see seq). */
    uint32_t home_idx;
    uint32_t seq_by;
    /* The first membership, without an allocation: an rl__memb's first
     * RL__TIMER_MEMB_SIZE bytes (rl__timer_inline_memb). */
    _Alignas(rl__memb) unsigned char inline_memb[RL__TIMER_MEMB_SIZE];
    RLAbsoluteTime fire_date;
    /* Tie-break: equal dates fire in the order the timers got them
     * (created, moved, refired): the stamp `seq` that RLRunLoopTimer.c
     * gives, by the thread numbered seq_by (rl__timer_arrive_locked). */
    uint64_t seq;
    RLRunLoopTimerCallBack callout;
    /* The context's info (retained); its callbacks are in the extension. */
    void *info;
    /* NULL until needed; then set once (release) and kept to the end, so
     * that the fields fixed at creation are read without a lock. */
    rl__timer_ext *_Atomic ext;
};
#define RL__TIMER_SIZE 128
_Static_assert(sizeof(struct RLRunLoopTimer) <= RL__TIMER_SIZE, "timer: 128 bytes at most, two lines (a pool class)");
_Static_assert(RL__TIMER_MEMB_SIZE == 40, "membership: a timer's inline part is 40 bytes");
_Static_assert(offsetof(struct RLRunLoopTimer, fire_date) + sizeof(double) <= 96,
               "timer: what adding it reads and writes is in its first 96 bytes");
_Static_assert(offsetof(struct RLRunLoopSource, signalled) < 64, "source: a signal reads one line");

static inline rl__memb *rl__timer_inline_memb(struct RLRunLoopTimer *t) { return (rl__memb *)(void *)t->inline_memb; }

/* t's extension, or NULL (see ext). */
static inline rl__timer_ext *rl__timer_ext_of(const struct RLRunLoopTimer *t) {
    return atomic_load_explicit(&((struct RLRunLoopTimer *)t)->ext, memory_order_acquire);
}

/* t's extension, made (with interval, order, copyDescription 0) if it has
 * none; NULL if memory is short. What guards t held, or t not yet shared.
 * Here, not in RLRunLoopTimer.c: the membership file makes one for a
 * timer's second mode, and calls nothing else of the timer file's, which
 * calls it (no circle between the two). */
static inline rl__timer_ext *rl__timer_ext_make(struct RLRunLoopTimer *t) {
    rl__timer_ext *x = rl__timer_ext_of(t);
    if (x)
        return x;
    x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    TAILQ_INIT(&x->membs);
    x->anchor = t->fire_date;
    atomic_store_explicit(&t->ext, x, memory_order_release);
    return x;
}

static inline RLTimeInterval rl__timer_interval(const struct RLRunLoopTimer *t) {
    const rl__timer_ext *x = rl__timer_ext_of(t);
    return x ? x->interval : 0;
}

/* Its tolerance; what guards t held. */
static inline RLTimeInterval rl__timer_tolerance(const struct RLRunLoopTimer *t) {
    const rl__timer_ext *x = rl__timer_ext_of(t);
    return x ? x->tolerance : 0;
}

/* The context's retain and release callbacks (NULL: none): by their
 * pair's number, or from the extension (see cbs). Fixed at creation. */
static inline const void *(*rl__timer_ctx_retain(const struct RLRunLoopTimer *t))(const void *) {
    if (RL__LIKELY(t->cbs))
        return rl__timer_cbs_table[t->cbs].retain;
    const rl__timer_ext *x = rl__timer_ext_of(t);
    return x ? x->retain : NULL;
}
static inline void (*rl__timer_ctx_release(const struct RLRunLoopTimer *t))(const void *) {
    if (RL__LIKELY(t->cbs))
        return rl__timer_cbs_table[t->cbs].release;
    const rl__timer_ext *x = rl__timer_ext_of(t);
    return x ? x->release : NULL;
}

/* Whether a's tie-break stamp is before b's (their dates being equal). */
static inline bool rl__timer_stamp_before(const struct RLRunLoopTimer *a, const struct RLRunLoopTimer *b) {
    return a->seq != b->seq ? a->seq < b->seq : a->seq_by < b->seq_by;
}

/* Some membership of t, or NULL: in no mode. Its home's lock held. */
static inline rl__memb *rl__timer_any_memb(struct RLRunLoopTimer *t) {
    if (t->inline_used)
        return rl__timer_inline_memb(t);
    return t->multi ? TAILQ_FIRST(&rl__timer_ext_of(t)->membs) : NULL;
}

/* The one loop timer t is in (its home, where its memberships are), or
 * NULL. Its home's lock held. */
static inline RLRunLoopRef rl__timer_loop(struct RLRunLoopTimer *t) {
    return t->inline_used || t->multi ? atomic_load_explicit(&t->home, memory_order_relaxed) : NULL;
}

/* ---- observers ---- */

struct RLRunLoopObserver {
    rl__object base;
    _Atomic(RLRunLoopRef) home; /* as a timer's */
    rl__olock lock;
    TAILQ_ENTRY(RLRunLoopObserver) home_link;
    RLOptionFlags activities;
    bool repeats;
    bool valid;
    bool firing;
    /* Pinned by a pass about to call it: instead of a retain/release pair
     * per callout, memberships removed meanwhile keep their reference until
     * the last unpin (held_releases). The home's lock. */
    unsigned pins;
    unsigned held_releases;
    RLIndex order;
    RLRunLoopObserverCallBack callout;
    RLRunLoopObserverContext ctx;
    struct rl__itemq membs;
};

/* ---- file descriptors ---- */

/* A program's fd object's context less its version (always 0):
 * RLFileDescriptorGetContext puts it back together. And the owner such an
 * object may have (see rl__fd_owner), and how to name that owner's
 * callout: the library object that made the fd object for its own
 * callouts (a port, a signal source), NULL for a program's; the
 * slow-callout report names the owner's callout (rl__fd_set_owner,
 * rl_health.c). */
typedef struct rl__fdctx {
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
    char *(*copyDescription)(const void *info);
    /* The owner (an object, so 8-aligned: NULL for a program's) and, in
     * its lowest bit, whether the fd is closed on invalidation (fixed at
     * creation): rl__fd_owner, rl__fd_closes. One word, so that an
     * RLFileDescriptor fits its RL__FD_OWNER_SIZE bytes. */
    uintptr_t owner_close;
    void *info; /* what its callouts get: the context's, retained */
    const struct rl__callout_owner *owner_how;
    RLFileDescriptorCallBack callout;
} rl__fdctx;

/* What the loops read of the fd an fd source watches: its fd state. It
 * sits in the source, right after its inline membership (an fd source
 * never uses a membership's last field, snext: see struct RLRunLoopSource),
 * so an fd source is 144 bytes with it (RL__FDSOURCE_SIZE, below).
 * Before: a separate fd object (64 or 120 bytes, with an object header,
 * a lock, a pointer to its source) that the source pointed to. */
typedef struct rl__fdstate {
    int fd;
    _Atomic uint32_t enabled; /* changed by atomic or/and: the loops clear what they deliver */
    /* The file fd named when the owner was made (fstat): a number that
     * names another file now was closed and reused behind its back. Files
     * without an identity of their own (eventfds share one inode) are
     * told apart by the kernel's registration instead (rl_fdtab.c). The
     * device in 32 bits (rl__fd_dev32): the kernel's device numbers are
     * 32-bit, so glibc's 64-bit st_dev of them fits. */
    ino_t ino;
    uint32_t dev;
    /* Not 0: the errno with which the loop found that fd no longer refers to
     * the file this object was made for (closed, or its number reused), or
     * cannot watch it (errno values are below 256). The fd is not watched
     * again; see the header. Set by the loops (under their lock), read
     * anywhere: relaxed atomics. */
    uint8_t stale;
    /* The owner's fd is valid (not invalidated): written under the
     * source's item lock, read without it by the loops. */
    bool valid;
    /* The callback types the owner enables again after each callout that
     * got them (an RLSocket's auto-re-enabled read type): a loop may leave
     * them enabled through the callout instead of turning them off and
     * back on (rl_fdtab.c, "kept"). A hint: an owner that does otherwise
     * after all changes `enabled`, and the loop sees that. Relaxed atomic. */
    _Atomic uint8_t kept;
    /* The kept types of a callout in progress: no loop delivers them, or
     * watches for them, until it returns. Under the source's item lock. */
    uint8_t firing;
} rl__fdstate;
_Static_assert(sizeof(rl__fdstate) == 24, "an fd state: 24 bytes");

/* An fd source (RL__FDSOURCE_SIZE): a source without a context and the fd
 * state of its owner after it (where a program's source has its tail),
 * always a part of the owner's block, right after the owner's
 * RL__FD_OWNER_SIZE bytes (an RLSocket's; an RLFileDescriptor's): one
 * block of 208 bytes for both (a packed pool class; before: 224, with
 * 24-byte object headers; 240, with a 96-byte owner; before that the owner
 * and its fd object, 160 or 128 bytes, and the source, 128).
 *
 * Ownership. The owner makes its source with it (rl__fdsrc_init), asleep:
 * no reference counts it, and it is in no loop. The owner's
 * CreateRunLoopSource wakes it (rl__fdsrc_wake: one reference, the
 * caller's), or, while it is awake, retains it (one source per owner, as
 * before). An awake source holds a reference on its owner, so the owner
 * outlives every loop and callout that holds the source. When its last
 * reference goes, its finalizer puts it to sleep again (under its item
 * lock, the magic RL__MAGIC_ASLEEP) and then releases the owner; a later
 * CreateRunLoopSource wakes it anew, with the order then given. The
 * block goes with the owner (its finalizer runs only once no awake
 * source holds it: the source is asleep then), the way a single object
 * goes. The fd state is the owner's, asleep or awake: it is valid from
 * the owner's creation until the owner invalidates it
 * (rl__fdsrc_invalidate), after which no loop calls out for it; an
 * RLSocket also holds a reference on itself while valid (as CF keeps
 * every valid socket), an RLFileDescriptor does not (a program's, freed
 * when released, as before). */
#define RL__FDSOURCE_SIZE 136
#define RL__FD_OWNER_SIZE 72
_Static_assert(sizeof(struct RLRunLoopSource) + sizeof(rl__fdstate) == RL__FDSOURCE_SIZE, "an fd source: 136 bytes");
_Static_assert(sizeof(struct RLRunLoopSource) % _Alignof(rl__fdstate) == 0, "the fd state follows the source");

/* A magic an asleep fd source has (RLBase.h's are ALIVE and DEAD): not an
 * object to any check, told apart from a dying one (DEAD, its finalizer
 * not done yet) by its owner's wake. */
#define RL__MAGIC_ASLEEP 0x534c5052u /* "RPLS" */

/* Whether s is an fd source (made by its owner; one without a context). */
static inline bool rl__source_is_fd(const struct RLRunLoopSource *s) { return !s->has_ctx; }

/* The fd state of fd source s. */
static inline rl__fdstate *rl__fdst(struct RLRunLoopSource *s) {
    return (rl__fdstate *)(void *)((char *)s + sizeof(struct RLRunLoopSource));
}

/* The owner of fd source s: the first object of its block. */
static inline void *rl__fdsrc_owner(const struct RLRunLoopSource *s) {
    return (void *)((const char *)s - RL__FD_OWNER_SIZE);
}

/* An RLFileDescriptor made by RLFileDescriptorCreate: its context, and its
 * fd source after it in its block (rl__fd_source). */
struct RLFileDescriptor {
    rl__object base;
    rl__fdctx ctx;
};
_Static_assert(sizeof(struct RLFileDescriptor) <= RL__FD_OWNER_SIZE, "an RLFileDescriptor fits before its source");

/* The class of RLFileDescriptor (RLFileDescriptor.c): an fd source whose
 * owner is of another class has a part's owner (an RLSocket). */
RL__HIDDEN extern const rl__class rl__fd_class;

/* How the owner of every other fd source names its callout (such owners
 * are RLSocket's only): set by rl__fdsrc_init, the same every time.
 * Relaxed atomic. */
RL__HIDDEN extern const struct rl__callout_owner *rl__fd_part_how;

/* The fd source of RLFileDescriptor f. */
static inline struct RLRunLoopSource *rl__fd_source(const struct RLFileDescriptor *f) {
    return (struct RLRunLoopSource *)(void *)((char *)f + RL__FD_OWNER_SIZE);
}

/* A device number as the fd state holds it. */
static inline uint32_t rl__fd_dev32(dev_t dev) { return (uint32_t)dev; }

/* Whether fd source s is an RLFileDescriptor's (else an RLSocket's). */
static inline bool rl__fdsrc_of_program(const struct RLRunLoopSource *s) {
    return rl__is_class(rl__fdsrc_owner(s), &rl__fd_class);
}

/* The library object that made fd source s for its callouts, or NULL (a
 * program's): not a reference; it outlives the source's callouts. */
static inline const void *rl__fd_owner(const struct RLRunLoopSource *s) {
    return rl__fdsrc_of_program(s)
               ? (const void *)(((const struct RLFileDescriptor *)rl__fdsrc_owner(s))->ctx.owner_close & ~(uintptr_t)1)
               : rl__fdsrc_owner(s);
}

/* How to name the callout of that owner, or NULL (a program's). */
static inline const struct rl__callout_owner *rl__fd_owner_how(const struct RLRunLoopSource *s) {
    return rl__fdsrc_of_program(s) ? ((const struct RLFileDescriptor *)rl__fdsrc_owner(s))->ctx.owner_how
                                   : __atomic_load_n(&rl__fd_part_how, __ATOMIC_RELAXED);
}

/* ---- the run loop object (made in RLRunLoop.c, freed in rl_loop.c) ---- */

/* One activation of RunInMode, innermost first. */
typedef struct rl__frame {
    rl__mode *mode;
    _Atomic bool stopped; /* set under the loop lock (RLRunLoopStop); the pass's end reads it without */
    double deadline; /* monotonic seconds; INFINITY for none */
    struct rl__frame *outer;
} rl__frame;

typedef struct rl__common_name {
    char *name;
} rl__common_name;

/* The items added to kRLRunLoopCommonModes: a dense array (walked when a
 * mode becomes common, in the order the items came) and an open-addressing
 * index over it, so that adding, finding and removing one costs O(1)
 * however many there are. */
typedef struct rl__citem {
    void *item;
    rl__kind kind;
} rl__citem;

/* The sources on an fd past one (rl__fdreg.srcs.many), in a block of its
 * own: how many there are and room for, then `cap` source pointers, then
 * `cap` wishes of a byte each (rl_fdtab.c's reg_srcs, reg_want). */
typedef struct rl__fdsrcs {
    uint32_t n, cap;
    struct RLRunLoopSource *src[];
} rl__fdsrcs;

/* The bytes of a block with room for cap sources. */
static inline size_t rl__fdsrcs_bytes(uint32_t cap) {
    return sizeof(rl__fdsrcs) + (size_t)cap * (sizeof(struct RLRunLoopSource *) + 1);
}

/* The fd sources of this loop on one fd, indexed by fd. Several
 * RLFileDescriptor objects may wrap the same fd, but epoll holds one
 * registration per fd: it watches the union of what they want, and a
 * readiness goes to each of them whose enabled callbacks match. What each
 * source wants is kept here (want[i]), updated under the source's item
 * lock, so that the union needs no other source's lock.
 *
 * A registration starts one-shot (EPOLLONESHOT), like the callbacks: after
 * reporting once, the kernel keeps it but reports nothing until the loop
 * re-arms it. When the callouts a report led to enable again just what it
 * had armed (an RLSocket re-enabling itself, a callout that enables its own
 * callback), re-arming would cost a system call per wake-up for nothing:
 * the loop makes the registration persistent (level-triggered) instead and
 * leaves it alone while that interest stays; it asks the kernel again only
 * when the interest changes (disabled, the mode it runs does not hold the
 * fd, removed). Delivered callbacks are still switched off before their
 * callout and the fd is brought in line after it (`postponed`), before the
 * loop waits again, so a callback nobody enabled again is never served.
 *
 * epoll keys a registration by the fd number and the file it named when
 * it was added; if the user closes the fd while a dup keeps that file
 * open, the registration outlives the number and the loop can neither
 * change nor remove it. Each registration's events carry a tag (`gen`) so
 * that such a leftover is recognised and ignored: a one-shot one reports
 * at most once more; a persistent one would report for as long as its file
 * is ready, so the loop replaces its epoll set when one of those reports
 * (rl_fdtab.c): a loop never spins on a registration it cannot serve. A
 * persistent registration is also re-checked against the kernel every few
 * dozen deliveries, so that a number closed behind the loop's back while
 * its callouts keep it enabled is found out. */
typedef struct rl__fdreg {
    /* The sources on the fd, in registration order, not retained (their
     * memberships are), and per source what it wants watched now: a fd has
     * one source mostly (an RLSocket's), held here with no allocation
     * (`many` clear: `one`, NULL for none, and `want1`, 0 then); more live
     * in a block (`many` set: rl__fdsrcs, which counts them). 16 bytes an
     * entry (before: 24, and 32 before that): the table has one per fd
     * number from the lowest watched to the highest. */
    union {
        struct RLRunLoopSource *one;
        rl__fdsrcs *many;
    } srcs;
    uint32_t gen; /* the tag of the fd's registration in the kernel; 0: none */
    /* The rest in four bytes (the loop lock guards them all). A wish
     * (`want1`, a block's), `armed` and `fired` take two bits (rl_fdtab.c's
     * RL_FDW_READ: EPOLLIN with EPOLLRDHUP, RL_FDW_WRITE: EPOLLOUT), the
     * only events the loop asks for; the kernel call turns them into
     * epoll's, with EPOLLONESHOT if one-shot (before: epoll's bits, 16 a
     * field, and the two counts in the entry). Those read on every
     * delivery have a byte each. */
    uint8_t want1;
    uint8_t armed; /* what the loop waits for (armed in the kernel, or served as always ready); 0: none */
    uint8_t runs;  /* deliveries through the persistent registration since the kernel last saw it */
    unsigned always : 1;    /* epoll refuses the fd (EPERM: a regular file, /dev/null): ready whenever watched */
    unsigned level : 1;     /* the registration is persistent (not one-shot) */
    unsigned postponed : 1; /* delivered in this pass: brought in line with `want` after the callouts */
    unsigned many : 1;      /* the sources are in a block (srcs.many) */
    unsigned fired : 2;     /* a one-shot registration that reported: what it had armed */
} rl__fdreg;
_Static_assert(sizeof(rl__fdreg) == 16, "an fd table entry: 16 bytes");

/* Fields that other threads touch on hot paths are kept on separate cache
 * lines (padding, since calloc gives no 64-byte alignment): read-mostly
 * identity, the wake-up flags, and the perform queue. */
#define RL_LINE 64

/* A loop's statistics counts (rl_stats.c): its thread writes them with
 * relaxed stores, any thread reads them. Times in nanoseconds. */
typedef struct rl__loop_counters {
    _Atomic uint64_t passes, sleeps;
    _Atomic uint64_t wakeups[kRLWakeUpCauseCount];
    _Atomic uint64_t callouts[kRLCalloutKindCount];
    _Atomic uint64_t asleep_ns, busy_ns;
} rl__loop_counters;

/* The loop lock's owner bias (rl_bias.c; the protocol: rl_lock.h and
 * docs/locking.md). `in`: the loop's thread is inside by the bias (written
 * by that thread only); `on`: the lock is biased (changed under the mutex
 * only); `run`, `need`: the owner's acquisitions by the mutex since another
 * thread's last one, and how many make the lock biased again (under the
 * mutex). */
typedef struct rl__bias {
    _Atomic uint32_t in;
    _Atomic uint32_t on;
    uint32_t run, need;
} rl__bias;

struct RLRunLoop {
    rl__object base;
    pthread_t thread;
    _Atomic bool dead; /* torn down: its thread exited */
    unsigned fork_gen; /* rl__fork_gen() at creation: another one means inherited by a fork() child */
    struct RLRunLoop *inherited_next; /* in a fork() child: on rl_inherited_mains */
    rl__poller kern; /* its kernel objects and backend (kernel/rl_poll.h) */
    /* The main dispatch queue (rl_mainqueue.c): whether the loop serves
     * one (the main loop of a process that loaded libdispatch; set before
     * the loop is published), and its handle, -1 until a wait first needs
     * it. Here, written once, beside what other threads only read: the
     * loop's own fields after the lock stay within a 1 KiB pool slot. */
    bool mainq;
    int mainq_fd;
    /* Room for a wait's events past the few on the run's frame, made by
     * the loop's thread the first time a wait filled those (run_frame,
     * RLRunLoopRun.c); written once, freed with the loop. */
    struct epoll_event *ev_big;
    /* To the wake-up fields' line (the assertions after the struct): 56
     * with a 16-byte object header (48 with the 24-byte one). */
    char pad0[RL_LINE - 8];

    _Atomic int wake_pending;
    _Atomic int ignore_wakeups; /* as CF: from each wake until the next pass starts */
    _Atomic int sleeping;
    _Atomic int coalescing; /* in rl__sleep_unless_woken: a wake-up ends it (futex on wake_pending) */
    _Atomic int waker_cpu; /* the CPU of the last wake-up that counted; -1: none yet */
    _Atomic int cpu;       /* the CPU the loop last went to wait on; -1: none yet */
    /* The inbox (rl_ready.c): sources signalled by other threads, newest
     * first, not on their modes' ready lists yet. Beside wake_pending: a
     * producer that signals and wakes writes this one line, which the loop
     * reads once a pass. */
    struct RLRunLoopSource *_Atomic inbox;
    rl__spin spin;         /* how long the loop spins for a wake-up before it sleeps */
    /* COALESCE's measure (rl_waitpolicy.h), on the spin's line, which only
     * the loop's thread writes: the bytes of the bulk reads since the loop
     * last waited (rl__wait_note_bulk_read), and what naps did. */
    uint64_t pass_bulk_bytes;
    rl__nap nap;
    /* Enough that the perform queue starts on a line after the wake-up
     * fields (the assertion after the struct): not a whole line more. */
    char pad1[RL_LINE - sizeof(void *) - sizeof(uint64_t) - sizeof(rl__nap)];

    rl__perform_queue pq;    /* perform requests (RLRunLoopPerform.c; pads itself) */
    char pad2[RL_LINE - sizeof(rl__bias)];
    /* The loop lock's owner bias (rl_bias.c; rl_lock.h): in the padding
     * before the lock's line, which no other thread writes. */
    rl__bias bias;

    /* The loop lock, next to what it guards: uncontended while one thread
     * uses its own loop, and shared with no other loop. */
    rl__mutex lock;
    rl__mode **modes;
    size_t nmodes, capmodes;
    rl__mode *last_mode; /* lookup cache */
    /* The default mode while the loop is live (made, and the loop not torn
     * down), else NULL: the timer hot paths' one look for "the default
     * mode of a live loop" (RLRunLoopMembership.c). Under the lock. */
    rl__mode *timer_mode;
    rl__common_name *common;
    size_t ncommon, capcommon;
    rl__citem *citems;
    size_t nci, capci;
    size_t *cidx; /* citems index + 1 by the item's hash (linear probing); 0: empty */
    size_t capcidx; /* a power of two, at least twice nci; 0: none yet */

    uint32_t pass_ran; /* requests run, and looks after a pass that performed a source, since the loop last waited (rl_waitpolicy.h); the loop's thread only */
    uint32_t pass_bulk;    /* sockets read in bulk since the loop last waited (rl__wait_note_bulk_read); its thread only */
    const void *bulk_last; /* the last of them */
    unsigned long ncoalesced; /* waits the loop coalesced before (tests read it: rl__loop_coalesced_waits) */
    /* rl_do_timers' array of due timers, kept between passes so that a
     * wake-up for a timer does not pay for an allocation; the loop's thread
     * only (a nested run finds it taken and uses its own). */
    struct rl__memb **due;
    size_t capdue;
    rl__frame *frame;
    rl__mode *armed_mode; /* the mode whose fds are in the epoll set */
    double armed_at;     /* monotonic time the timerfd is armed for; INFINITY: disarmed; NaN: unknown (arming failed) */

    rl__fdreg *fdtab; /* fdtab[i]: the registration of fd fdlo + i (rl_fdtab.c) */
    uint32_t nfdtab;
    uint32_t fdlo;
    size_t nfd_armed; /* user fds with events armed (always-ready ones included) */
    size_t nalways;   /* of those, always ready: the loop polls instead of sleeping */
    uint32_t fdgen;   /* the last registration tag handed out */
    uint32_t npostponed; /* fds with `postponed` set */
    unsigned long nctl; /* epoll_ctl calls on epfd for user fds (tests read it: rl__fd_ctl_calls) */
    unsigned long nkept; /* callouts made kept (rl_fdtab.c; tests read it: rl__fd_kept_calls) */
    uint64_t nwaits;     /* epoll_waits so far; the loop's thread only */
    /* While an fd callout runs: how many more fd callouts this pass has
     * still to make (rl__fd_pass_left). The loop's thread only. */
    size_t fd_pass_left;
    /* The fd source whose callout the loop's thread is making, NULL when
     * none: an enable that callout makes of its own fd leaves this loop's
     * copy of the wishes as it is, for the loop reads them all again after
     * the callouts (rl__source_fd_resync, rl__fd_after_callout); and it
     * needs no reference on the source, which the loop keeps for the
     * callout. The loop's thread only. */
    struct RLRunLoopSource *src_in_callout;
    /* While that callout runs: the report it serves had no hang-up and no
     * error in it (rl__fd_fire.quiet; rl__fd_report_quiet). */
    bool fd_quiet;
    bool lost_level;     /* a persistent registration could not be changed: it may be left in the set */
    bool rebuild;        /* such a leftover reported: the loop moves to a new epoll set before it waits */
    /* The main dispatch queue's handle (mainq, mainq_fd above): whether
     * it is in the epoll set, reported and not served yet, being served.
     * The loop's thread only. */
    bool mainq_armed, mainq_ready, mainq_serving;
    /* The last wait reported the timerfd's expiry, not noted in armed_at
     * yet (the next wait does, under the loop lock); whether it reported
     * user fds (their events are in the fd table). The loop's thread only. */
    bool tfd_expired, wait_fds;

    /* Timers and observers whose home this loop is (runloop_internal.h):
     * the timers at home here and in none of its modes in an array (each
     * knows its slot, home_idx; see "a loop's idle timers"), the others
     * reached through their modes. */
    struct RLRunLoopTimer **homed;
    uint32_t nhomed, caphomed;
    TAILQ_HEAD(, RLRunLoopObserver) homed_observers;
    uint64_t timer_seq; /* the largest stamp given or brought here (RLRunLoopTimer.c) */
    /* Loop health. The loop's own slow-callout threshold in seconds, 0:
     * the process's (rl_health.c; set by any thread, read by the loop's).
     * Its statistics (rl_stats.c): the counts, written by the loop's thread
     * only and read by any (relaxed); whether it slept and made no callout
     * since (the cause of that wake-up not known yet), the monotonic time
     * its busy time counts from and how deep in runs it is (the loop's
     * thread); its histograms, made when timing is first turned on and
     * freed with the loop; the counts at the last reset (under rl_stats.c's
     * lock). */
    _Atomic double slow_threshold;
    rl__loop_counters counters;
    bool woke;
    /* The loop's thread only: ev_big holds a wait's events not served yet
     * (a run nested in a callout waits with its own few); the loop's
     * modes that are common do not finish while empty (rl__loop_keep_alive). */
    bool ev_big_busy, keep_alive;
    _Atomic bool timing_on; /* here, not by `timing`: no hole (the loop fits 1 KiB, test_loop_memory) */
    unsigned run_depth;
    double busy_from;
    struct rl__loop_timing *_Atomic timing;
    struct rl__stats_base *stats_base;
};

/* The lines the loop's layout is made of (a pool slot starts on a line):
 * the wake-up fields on one, the perform queue and the lock each from the
 * start of one (the queue pads its producer side from its consumer's).
 * A change in the object header or anything before moves them: these
 * fail then (the perform rows lost 2-3x when they went 8 bytes off). */
_Static_assert(offsetof(struct RLRunLoop, wake_pending) / RL_LINE ==
                   (offsetof(struct RLRunLoop, inbox) + sizeof(void *) - 1) / RL_LINE,
               "the loop's wake-up fields and inbox share one line");
_Static_assert(offsetof(struct RLRunLoop, pq) % RL_LINE == 0, "the perform queue starts a line");
_Static_assert(offsetof(struct RLRunLoop, lock) % RL_LINE == 0, "the loop lock starts a line");
_Static_assert(sizeof(struct RLRunLoop) <= 1024, "a loop fits a 1 KiB pool slot");
/* The wake-up fields (written by other threads' signals and wake-ups) and
 * the perform queue's producer side do not share a line. */
_Static_assert(offsetof(struct RLRunLoop, pq) / RL_LINE >
                   (offsetof(struct RLRunLoop, spin) + sizeof(rl__spin) - 1) / RL_LINE,
               "the perform queue starts on a line after the loop's wake-up fields");

/* Fields read without the lock that guards them (hints, re-checked under
 * it): relaxed atomic accesses, so that the sanitizers see them as such. */
#define rl__peek(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define rl__poke(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)

/* ---- the item classes (their object files) ---- */

RL__HIDDEN extern const rl__class rl__source_class;
RL__HIDDEN extern const rl__class rl__timer_class;
RL__HIDDEN extern const rl__class rl__observer_class;

/* ---- small helpers every run-loop file may use ---- */


/* Whether rl was made in this process, not inherited across fork(). The
 * internal paths that reach its epoll fd, eventfd or timerfd from an item
 * (a timer moved, an fd source removed, in a child, of a loop it
 * inherited) check this: those kernel objects are shared with the parent,
 * whose loop they would disturb. So do the callout loops of a run, which
 * a fork() from a callout leaves in the child: the rest of what they
 * collected is the parent's work. */
static inline bool rl__of_this_process(RLRunLoopRef rl) { return !rl__fork_inherited(rl->fork_gen); }

static inline double rl__mono_now(void) { return RLMonotonicTimeGetCurrent(); }

/* The CPU on which loop rl last went to wait (-1: not yet; recorded by the
 * wait policy, rl_waitpolicy.h): a thread that waits for a reply from rl
 * spins first only if rl runs elsewhere. */
static inline int rl__runloop_cpu(RLRunLoopRef rl) { return atomic_load_explicit(&rl->cpu, memory_order_relaxed); }

static inline struct rl__itemq *rl__item_membs(void *item, rl__kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return &((struct RLRunLoopSource *)item)->membs;
    default: /* not for timers: rl__timer_any_memb, rl__memb_find */
        return &((struct RLRunLoopObserver *)item)->membs;
    }
}

static inline rl__memb *rl__memb_find(void *item, rl__kind kind, rl__mode *mode) {
    rl__memb *m;
    if (kind == RL_KIND_TIMER) {
        /* Most timers are in one mode, their inline membership. */
        struct RLRunLoopTimer *t = item;
        m = rl__timer_inline_memb(t);
        if (t->inline_used && m->mode == mode)
            return m;
        if (RL__LIKELY(!t->multi))
            return NULL;
        TAILQ_FOREACH(m, &rl__timer_ext_of(t)->membs, item_link) {
            if (m->mode == mode)
                return m;
        }
        return NULL;
    }
    RL_ITEMQ_FOREACH(m, rl__item_membs(item, kind)) {
        if (m->mode == mode)
            return m;
    }
    return NULL;
}

/* Does the mode of rl contain item? Item lock (sources) or home lock held. */
static inline bool rl__memb_in_mode(void *item, rl__kind kind, rl__mode *mode) {
    return rl__memb_find(item, kind, mode) != NULL;
}

/* A timer's or an observer's home (rl_lock.h says what it guards). */
static inline _Atomic(RLRunLoopRef) *rl__item_home(void *item, rl__kind kind) {
    return kind == RL_KIND_TIMER ? &((struct RLRunLoopTimer *)item)->home
                                 : &((struct RLRunLoopObserver *)item)->home;
}

static inline RLRunLoopRef rl__home_get(void *item, rl__kind kind) {
    return atomic_load_explicit(rl__item_home(item, kind), memory_order_relaxed);
}


/* ---- timers (RLRunLoopTimer.c) ---- */

/* The callout of timer t ran (on its loop's thread): reschedule or
 * invalidate it as CF does. What guards t held (rl__item_lock). */
RL__HIDDEN void rl__timer_after_fire_locked(struct RLRunLoopTimer *t, RLAbsoluteTime now, rl__defer *d);
RL__HIDDEN void rl__observer_invalidate_locked(struct RLRunLoopObserver *o, rl__defer *d);

#endif /* CRUNLOOP_RUNLOOP_INTERNAL_H */
