/*
 * runloop_internal.h — the run loop's private structures, shared by
 * RLRunLoop.c, RLRunLoopSource.c, RLRunLoopTimer.c, RLRunLoopObserver.c and
 * RLFileDescriptor.c.
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
#include "internal.h"
#include "rl_lockclass.h"

#include <bsd/sys/queue.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#if __BLOCKS__
/* The BlocksRuntime entry points (what <Block.h> wraps); declared here
 * because Block.h is not on the default include path of every toolchain. */
extern void *_Block_copy(const void *block);
extern void _Block_release(const void *block);
#define Block_copy(b) ((__typeof__(b))_Block_copy((const void *)(b)))
#define Block_release(b) _Block_release((const void *)(b))
#endif

typedef struct rl_mode rl_mode;
typedef struct rl_memb rl_memb;

typedef enum rl_kind { RL_KIND_SOURCE = 0, RL_KIND_TIMER = 1, RL_KIND_OBSERVER = 2 } rl_kind;

/* An item lock (see "locks" below). */
typedef struct rl__olock {
    _Atomic uint32_t word;
} rl__olock;

/* One item (source, timer or observer) in one mode of one run loop. The
 * membership holds one reference on the item. Timers never use mode_link,
 * so it comes last: what adding or removing a timer touches is the first
 * 64 bytes (one cache line for a timer's inline membership). */
struct rl_memb {
    void *item;
    rl_mode *mode;
    TAILQ_ENTRY(rl_memb) item_link; /* the item's memberships */
    union {
        size_t hidx[2];                 /* timers: slots in the mode's heaps */
        TAILQ_ENTRY(rl_memb) plink;     /* strict timers while `pending` */
    };
    RLRunLoopRef rl;
    rl_kind kind;
    bool lax;                       /* timers: filed as tolerant (tolerance > 0) */
    bool pending;                   /* strict timers: on the set's pending list, not in the heap */
    TAILQ_ENTRY(rl_memb) mode_link; /* the mode's sources or observers */
    struct rl_memb *snext;          /* sources: next in the mode's equality bucket */
    /* Sources: on the mode's ready list (signalled, not yet taken). One
     * entry per membership makes a signal O(1) per mode it is in, and a
     * removed membership leaves the list with it. */
    bool queued;
    TAILQ_ENTRY(rl_memb) ready_link;
};
TAILQ_HEAD(rl_membq, rl_memb);

/* A 4-ary min-heap of timer memberships; each entry carries its key so that
 * sifting touches only the array (ties, rare, compare the timers' seq).
 * a[0, hn) is heap-ordered, a[hn, n) holds entries added since the order
 * was last needed (rl_heap.c). */
typedef struct rl_hent {
    double key;
    rl_memb *m;
} rl_hent;

typedef struct rl_heap {
    rl_hent *a;
    size_t n, hn, cap;
    int slot;  /* which rl_memb.hidx holds the entry's index */
    int keyed; /* 0: fire date, 1: fire date + tolerance */
} rl_heap;

/* A mode's timers. Strict ones (no tolerance, the usual case) sit in one
 * heap by fire date; tolerant ones in two, by fire date (are they due?) and
 * by fire date + tolerance (when must the loop wake?). */
typedef struct rl_timerset {
    rl_heap strict;
    rl_heap lax_fire;
    rl_heap lax_deadline;
    /* Strict timers added since the order was last needed, linked through
     * their memberships' plink: adding writes the membership only, not the
     * array (rl_heap.c). */
    TAILQ_HEAD(, rl_memb) pending;
    size_t npending;
} rl_timerset;

struct rl_mode {
    char *name;
    RLRunLoopRef rl;
    bool common;
    bool is_default; /* saves a string compare per perform request */
    struct rl_membq sources;
    size_t nsources;
    /* The sources by equality key (rl__source_key), so that adding a source
     * equal to one already in the mode is found without a scan; chained
     * through rl_memb.snext, nsbuckets a power of two (0: none yet). */
    rl_memb **sbuckets;
    size_t nsbuckets;
    struct rl_membq ready;     /* signalled sources' memberships, in signal order */
    size_t nready;
    /* The sources a pass of this mode took and is performing (the loop's
     * thread only; NULL outside rl_do_sources0): a run of this mode nested
     * in one of their performs puts the unreached ones back (rl_requeue). */
    struct rl_inflight *inflight;
    struct rl_membq observers; /* sorted by order */
    size_t nobservers;
    _Atomic RLOptionFlags observer_mask; /* read without the lock on the fast path */
    rl_timerset timers;
};

/* ---- sources ---- */

struct RLFileDescriptor;

struct RLRunLoopSource {
    rl__object base;
    rl__olock lock; /* the item lock: membs, valid, signalled */
    RLIndex order;
    RLHashCode hash; /* ctx.hash(info), or info: computed once, at creation */
    RLRunLoopSourceContext ctx;
    bool valid;     /* written under the item lock; read without it as a hint */
    bool signalled;
    struct rl_membq membs;
    struct RLFileDescriptor *fdobj; /* fd sources: retained */
};

/* Two sources are equal as in CF: same order, the same callbacks and, by
 * the context's equal callback (without one: the same info), equal infos.
 * fd sources only by identity. What can be compared without calling user
 * code (everything but `equal`): */
static inline bool rl__source_same_shape(const struct RLRunLoopSource *a, const struct RLRunLoopSource *b) {
    return a->order == b->order && a->hash == b->hash && a->ctx.equal == b->ctx.equal &&
           a->ctx.hash == b->ctx.hash && a->ctx.perform == b->ctx.perform && a->ctx.schedule == b->ctx.schedule &&
           a->ctx.cancel == b->ctx.cancel && a->fdobj == b->fdobj;
}

/* ---- timers ---- */

/* What adding or removing a timer touches is the first 128 bytes: the
 * object header, home, flags and membership list in the first 64, the
 * inline membership's hot part in the next 64 (so 100k timers come and go
 * at memory speed). The loop a timer is in (a timer is in at most one) is
 * its home (see "homes" below), where its memberships are. */
struct RLRunLoopTimer {
    rl__object base;
    _Atomic(RLRunLoopRef) home; /* whose loop lock guards the rest; NULL: `lock` does */
    rl__olock lock;
    bool valid;
    bool firing;
    bool moved_in_fire;
    bool inline_used;
    RLTimeInterval tolerance;
    struct rl_membq membs;
    rl_memb inline_memb; /* the first membership, without an allocation */
    RLAbsoluteTime fire_date;
    uint64_t seq; /* tie-break: equal dates fire in creation/move order */
    TAILQ_ENTRY(RLRunLoopTimer) home_link; /* in the home loop's list */
    /* A repeating timer's grid: fire_date is anchor + ticks * interval,
     * computed from the anchor each time (one rounding, never an
     * accumulation of one per tick). The anchor is the date given at
     * creation or by the last SetNextFireDate. */
    RLAbsoluteTime anchor;
    uint64_t ticks;
    /* The fire path is taking its reference on ctx.info (the context's
     * retain, called without the lock): an invalidation meanwhile leaves
     * the context's release to it (ctx_release_held), so that info cannot
     * go before it is retained. What guards the timer (its home's lock). */
    bool ctx_pinned;
    bool ctx_release_held;
    RLTimeInterval interval;
    RLIndex order;
    RLRunLoopTimerCallBack callout;
    RLRunLoopTimerContext ctx;
};
_Static_assert(offsetof(struct RLRunLoopTimer, inline_memb) == 64, "timer: hot part is the first line");
_Static_assert(offsetof(rl_memb, mode_link) <= 64, "membership: a timer's part fits one line");

/* The one loop timer t is in, or NULL. Its home's lock held. */
static inline RLRunLoopRef rl__timer_loop(const struct RLRunLoopTimer *t) {
    const rl_memb *m = TAILQ_FIRST(&t->membs);
    return m ? m->rl : NULL;
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
    struct rl_membq membs;
};

/* ---- file descriptors ---- */

struct RLFileDescriptor {
    rl__object base;
    rl__olock lock; /* an item lock: source, and the writes of valid and enabled */
    int fd;
    bool close_on_invalidate;
    bool valid;                     /* read without the lock by the loops */
    _Atomic RLOptionFlags enabled;  /* changed by atomic or/and: the loops clear what they deliver */
    /* Not 0: the errno with which the loop found that fd no longer refers to
     * the file this object was made for (closed, or its number reused), or
     * cannot watch it. The object is not watched again; see the header.
     * Set by the loops (under their lock), read anywhere: relaxed atomics. */
    int stale;
    /* The file fd named when the object was made (fstat): a number that
     * names another file now was closed and reused behind its back. Files
     * without an identity of their own (eventfds share one inode) are
     * told apart by the kernel's registration instead (RLRunLoop.c). */
    dev_t dev;
    ino_t ino;
    RLFileDescriptorCallBack callout;
    RLFileDescriptorContext ctx;
    struct RLRunLoopSource *source; /* weak; cleared when the source goes */
};

/* ---- locks (rl_lock.c) ---- */

/* The loop and item locks report to the lock-order detector as the
 * classes RL_LOCKCLASS_LOOP and RL_LOCKCLASS_ITEM (rl_lockclass.h), so that
 * the protocol (loop before item; never two of a class) is checked for all
 * loops and items at once. */

/* The item lock: a 32-bit futex word (0 free, 1 held, 2 held with
 * sleepers), so that it fits in a timer's first cache line. Held for a few
 * stores at a time. */
RL__HIDDEN void rl__olock_lock_slow(rl__olock *l);
__attribute__((always_inline)) static inline void rl__olock_lock(rl__olock *l) {
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockclass_take(RL_LOCKCLASS_ITEM, __builtin_return_address(0));
    uint32_t expected = 0;
    if (RL__UNLIKELY(!atomic_compare_exchange_strong_explicit(&l->word, &expected, 1, memory_order_acquire,
                                                              memory_order_relaxed)))
        rl__olock_lock_slow(l);
}
__attribute__((always_inline)) static inline void rl__olock_unlock(rl__olock *l) {
    if (RL__UNLIKELY(atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2))
        rl__futex_wake(&l->word, 1);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockclass_drop(RL_LOCKCLASS_ITEM);
}

/* A run loop's lock, for the object files (RLRunLoop.c inlines its own). */
RL__HIDDEN void rl__loop_lock(RLRunLoopRef rl);
RL__HIDDEN void rl__loop_unlock(RLRunLoopRef rl);

/* Fields read without the lock that guards them (hints, re-checked under
 * it): relaxed atomic accesses, so that the sanitizers see them as such. */
#define rl__peek(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define rl__poke(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)

/* ---- homes: what guards a timer's or an observer's state ----
 * The home is the loop the item was last added to. It stays when the item
 * leaves the loop's modes (so adding and removing it again costs the loop
 * lock only) and goes when the item joins another loop, when the loop is
 * torn down, and when the item is freed. The home pointer changes only
 * under both the home loop's lock and the item lock. */

/* Locks what guards item (a timer or an observer): returns its home,
 * locked, or NULL with the item lock held. rl__item_unlock undoes it. */
RL__HIDDEN RLRunLoopRef rl__item_lock(void *item, rl_kind kind);
RL__HIDDEN void rl__item_unlock(void *item, rl_kind kind, RLRunLoopRef home);
/* The item is being freed: it leaves its home's list. */
RL__HIDDEN void rl__item_leave_home(void *item, rl_kind kind);

/* Work collected under a lock and done after unlocking: cancel and
 * schedule callouts, context releases and object releases. */
typedef struct rl_defer_entry {
    int what; /* RL_DEFER_* */
    void *obj;
    RLRunLoopRef rl;
    const char *mode;
    void (*cfn)(const void *); /* RL_DEFER_CTX_RELEASE: cfn(carg) */
    const void *carg;
} rl_defer_entry;
enum { RL_DEFER_RELEASE = 0, RL_DEFER_CANCEL = 1, RL_DEFER_SCHEDULE = 2, RL_DEFER_CTX_RELEASE = 3, RL_DEFER_UNHOLD = 4 };

typedef struct rl_defer {
    rl_defer_entry *e;
    size_t n, cap;
    rl_defer_entry inline_e[8];
} rl_defer;

RL__HIDDEN void rl__defer_init(rl_defer *d);
/* Queues an entry; retains obj (and rl) so they outlive the unlock. */
RL__HIDDEN void rl__defer_push(rl_defer *d, int what, void *obj, RLRunLoopRef rl, const char *mode);
/* Queues the release of a reference the caller already owns (no retain). */
RL__HIDDEN void rl__defer_release(rl_defer *d, void *obj);
/* Queues a context release callout, release(info). */
RL__HIDDEN void rl__defer_ctx_release(rl_defer *d, void (*release)(const void *), const void *info);
/* Runs the entries in order, without locks, and frees d. */
RL__HIDDEN void rl__defer_run(rl_defer *d);

/* ---- memberships (RLRunLoop.c) ---- */

RL__HIDDEN extern const rl__class rl__source_class;
RL__HIDDEN extern const rl__class rl__timer_class;
RL__HIDDEN extern const rl__class rl__observer_class;
RL__HIDDEN extern const rl__class rl__runloop_class;
RL__HIDDEN extern const rl__class rl__fd_class;

RL__HIDDEN struct rl_membq *rl__item_membs(void *item, rl_kind kind);
/* Removes every membership of a timer or an observer (all in its home),
 * deferring the releases. Its home's lock held. */
RL__HIDDEN void rl__remove_item_everywhere_locked(void *item, rl_kind kind, rl_defer *d);
/* Signals s: false if it is invalid. Its loops get it on their ready
 * lists, one loop lock at a time. No lock held. */
RL__HIDDEN bool rl__source_signal(struct RLRunLoopSource *s);
/* Invalidates s and removes it from every mode of every loop (cancel
 * callouts deferred to d). No lock held. */
RL__HIDDEN void rl__source_invalidate(struct RLRunLoopSource *s, rl_defer *d);
/* Timers: the date moved; fix its heap slots and re-arm a sleeping home.
 * What guards t held (rl__item_lock). */
RL__HIDDEN void rl__timer_moved_locked(struct RLRunLoopTimer *t);
/* fd sources: what the fd object of s wants changed (enabled callbacks);
 * re-arms its fd in every loop s is in. No lock held. */
RL__HIDDEN void rl__source_fd_resync(struct RLRunLoopSource *s);
/* Does the mode of rl contain item? Item lock (sources) or home lock held. */
RL__HIDDEN bool rl__memb_in_mode(void *item, rl_kind kind, rl_mode *mode);

/* Monotonically increasing sequence for timer ties. */
RL__HIDDEN uint64_t rl__next_seq(void);

/* ---- timer heaps (rl_heap.c), the loop lock held ---- */

RL__HIDDEN void rl__tset_init(rl_timerset *ts);
RL__HIDDEN void rl__tset_free(rl_timerset *ts);
RL__HIDDEN size_t rl__tset_count(const rl_timerset *ts);
RL__HIDDEN bool rl__tset_add_slow(rl_timerset *ts, rl_memb *m);
/* Files a new membership (pending: no heap order yet, see rl_heap.c).
 * The common case, a strict timer, is inline and cannot fail: it goes on
 * the pending list, a few stores into the membership. */
static inline bool rl__tset_add(rl_timerset *ts, rl_memb *m) {
    const struct RLRunLoopTimer *t = m->item;
    if (RL__UNLIKELY(t->tolerance > 0))
        return rl__tset_add_slow(ts, m);
    m->lax = false;
    m->pending = true;
    TAILQ_INSERT_TAIL(&ts->pending, m, plink);
    ts->npending++;
    return true;
}
RL__HIDDEN void rl__tset_remove(rl_timerset *ts, rl_memb *m);
/* The timer's date or tolerance changed. */
RL__HIDDEN bool rl__tset_update(rl_timerset *ts, rl_memb *m);
/* Some membership (to empty the set), or NULL. */
RL__HIDDEN rl_memb *rl__tset_any(const rl_timerset *ts);
/* Earliest fire date (every timer) / earliest wake deadline (fire date +
 * tolerance) of the timers not being fired: a timer whose callout is running
 * is past its date, and letting it arm the wake-up would make a nested run
 * of the same mode spin until the callout returns (CF skips it too); it is
 * re-filed after its callout. False if there is none. */
RL__HIDDEN bool rl__tset_earliest_fire(rl_timerset *ts, double *date);
RL__HIDDEN bool rl__tset_earliest_deadline(rl_timerset *ts, double *date);
/* Appends to *out every membership whose fire date is <= now. */
RL__HIDDEN void rl__tset_collect_due(rl_timerset *ts, RLAbsoluteTime now, rl_memb ***out, size_t *n,
                                     size_t *cap);

/* ---- timers (RLRunLoopTimer.c) ---- */

/* The callout of timer t ran (on its loop's thread): reschedule or
 * invalidate it as CF does. What guards t held (rl__item_lock). */
RL__HIDDEN void rl__timer_after_fire_locked(struct RLRunLoopTimer *t, RLAbsoluteTime now, rl_defer *d);
/* Invalidates; what guards the item held (rl__item_lock). */
RL__HIDDEN void rl__timer_invalidate_locked(struct RLRunLoopTimer *t, rl_defer *d);
RL__HIDDEN void rl__observer_invalidate_locked(struct RLRunLoopObserver *o, rl_defer *d);

#endif /* CRUNLOOP_RUNLOOP_INTERNAL_H */
