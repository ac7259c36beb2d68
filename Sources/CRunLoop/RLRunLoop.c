/*
 * RLRunLoop.c — the run loop: modes, memberships, the iteration, waiting,
 * wake-ups, perform requests, per-thread storage and teardown.
 *
 * Mechanisms (see runloop_internal.h for the locking rule):
 *   - one epoll fd, one eventfd and one timerfd per loop, however many modes;
 *     the fds of fd sources are in the epoll set only while the loop runs a
 *     mode that contains them and a callback is enabled;
 *   - WakeUp sets `wake_pending`, then writes the eventfd only if the loop
 *     is `sleeping`; the loop sets `sleeping`, then blocks only if no wake is
 *     pending. Both sides use sequentially consistent atomics, so one of them
 *     always sees the other: no wake-up is lost, and waking an awake loop
 *     costs no system call;
 *   - timers sit in two heaps per mode (by fire date, and by fire date +
 *     tolerance); the timerfd is armed at the earliest deadline, and every
 *     timer already past its fire date fires on that wake-up. The timerfd is
 *     edge-triggered and never read: each expiry is one event, and arming it
 *     again (as every wait that blocks does first) clears the last one;
 *   - a signalled source's memberships go on their modes' ready lists;
 *   - perform requests go into the loop's perform queue (RLRunLoopPerform.c),
 *     which the loop runs through rl__perform_run and the other calls of
 *     RLRunLoopPerformInternal.h.
 */
#include "runloop_internal.h"
#include "RLRunLoopPerformInternal.h"
#include "rl_spin.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

const RLRunLoopMode kRLRunLoopDefaultMode = "kRLRunLoopDefaultMode";
const RLRunLoopMode kRLRunLoopCommonModes = "kRLRunLoopCommonModes";

/* ------------------------------------------------------------------ */
/* structures                                                          */

/* One activation of RunInMode, innermost first. */
typedef struct rl_frame {
    rl_mode *mode;
    bool stopped;
    double deadline; /* monotonic seconds; INFINITY for none */
    struct rl_frame *outer;
} rl_frame;

typedef struct rl_common_name {
    char *name;
} rl_common_name;

/* The items added to kRLRunLoopCommonModes: a dense array (walked when a
 * mode becomes common, in the order the items came) and an open-addressing
 * index over it, so that adding, finding and removing one costs O(1)
 * however many there are. */
typedef struct rl_citem {
    void *item;
    rl_kind kind;
} rl_citem;

/* The fd sources of this loop on one fd, indexed by fd. Several
 * RLFileDescriptor objects may wrap the same fd, but epoll holds one
 * registration per fd: it watches the union of what they want, and a
 * readiness goes to each of them whose enabled callbacks match. What each
 * source wants is kept here (want[i]), updated under the source's item
 * lock, so that the union needs no other source's lock.
 *
 * Registrations are one-shot (EPOLLONESHOT), like the callbacks: after
 * reporting once, the kernel keeps the registration but reports nothing
 * until the loop re-arms it. epoll keys a registration by the fd number
 * and the file it named when it was added; if the user closes the fd
 * while a dup keeps that file open, the registration outlives the number
 * and the loop can neither change nor remove it. One-shot, it reports at
 * most once more, and each registration's events carry a tag (`gen`) so
 * that such a leftover is recognised and ignored: a loop never spins on
 * a registration it cannot serve. */
typedef struct rl_fdreg {
    struct RLRunLoopSource **srcs; /* in registration order; not retained (their memberships are) */
    uint32_t *want;                /* per source: the epoll events it wants now */
    uint32_t nsrcs, capsrcs;       /* nsrcs 0: free slot */
    uint32_t armed;  /* events the loop waits for (armed in the kernel, or served as always ready); 0: none */
    uint32_t gen;    /* the tag of the fd's registration in the kernel; 0: none */
    bool always;     /* epoll refuses the fd (EPERM: a regular file, /dev/null): ready whenever watched */
} rl_fdreg;

/* Fields that other threads touch on hot paths are kept on separate cache
 * lines (padding, since calloc gives no 64-byte alignment): read-mostly
 * identity, the wake-up flags, and the perform queue. */
#define RL_LINE 64

struct RLRunLoop {
    rl__object base;
    pthread_t thread;
    _Atomic bool dead; /* torn down: its thread exited */
    unsigned fork_gen; /* rl__fork_gen() at creation: another one means inherited by a fork() child */
    struct RLRunLoop *inherited_next; /* in a fork() child: on rl_inherited_mains */
    int epfd, evfd, tfd;
    char pad0[RL_LINE];

    _Atomic int wake_pending;
    _Atomic int ignore_wakeups; /* as CF: from each wake until the next pass starts */
    _Atomic int sleeping;
    _Atomic int waker_cpu; /* the CPU of the last wake-up that counted; -1: none yet */
    _Atomic int cpu;       /* the CPU the loop last went to wait on; -1: none yet */
    rl__spin spin;         /* how long the loop spins for a wake-up before it sleeps */
    char pad1[RL_LINE];

    rl__perform_queue pq;    /* perform requests (RLRunLoopPerform.c; pads itself) */
    char pad2[RL_LINE];

    /* The loop lock, next to what it guards: uncontended while one thread
     * uses its own loop, and shared with no other loop. */
    rl__mutex lock;
    rl_mode **modes;
    size_t nmodes, capmodes;
    rl_mode *last_mode; /* lookup cache */
    rl_common_name *common;
    size_t ncommon, capcommon;
    rl_citem *citems;
    size_t nci, capci;
    size_t *cidx; /* citems index + 1 by the item's hash (linear probing); 0: empty */
    size_t capcidx; /* a power of two, at least twice nci; 0: none yet */

    uint32_t pass_ran; /* requests run since the loop last waited; the loop's thread only */
    /* rl_do_timers' array of due timers, kept between passes so that a
     * wake-up for a timer does not pay for an allocation; the loop's thread
     * only (a nested run finds it taken and uses its own). */
    rl_memb **due;
    size_t capdue;
    rl_frame *frame;
    rl_mode *armed_mode; /* the mode whose fds are in the epoll set */
    double armed_at;     /* monotonic time the timerfd is armed for; INFINITY: disarmed */

    rl_fdreg *fdtab;
    size_t nfdtab;
    size_t nfd_armed; /* user fds with events armed (always-ready ones included) */
    size_t nalways;   /* of those, always ready: the loop polls instead of sleeping */
    uint32_t fdgen;   /* the last registration tag handed out */

    /* Timers and observers whose home this loop is (runloop_internal.h). */
    TAILQ_HEAD(, RLRunLoopTimer) homed_timers;
    uint64_t timer_seq; /* the last stamp count given here (rl__timer_stamp_locked) */
    TAILQ_HEAD(, RLRunLoopObserver) homed_observers;
};

/* ------------------------------------------------------------------ */
/* the loop lock, sequence numbers, deferred work                      */

/* Inline: every add and remove takes it once, and a call into libc's mutex
 * was a measurable part of a 10 ns timer add. */
__attribute__((always_inline)) static inline void rl_lock(RLRunLoopRef rl) {
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockclass_take(RL_LOCKCLASS_LOOP, __builtin_return_address(0));
    if (RL__UNLIKELY(!rl__mutex_trylock(&rl->lock)))
        rl__mutex_lock_slow(&rl->lock, NULL);
}

__attribute__((always_inline)) static inline void rl_unlock(RLRunLoopRef rl) {
    rl__mutex_unlock(&rl->lock);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockclass_drop(RL_LOCKCLASS_LOOP);
}

/* A try-lock: the one way a loop lock may be taken under an item lock (it
 * cannot deadlock). */
static inline bool rl_trylock(RLRunLoopRef rl) {
    if (!rl__mutex_trylock(&rl->lock))
        return false;
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockclass_took(RL_LOCKCLASS_LOOP, __builtin_return_address(0));
    return true;
}

void rl__loop_lock(RLRunLoopRef rl) { rl_lock(rl); }
void rl__loop_unlock(RLRunLoopRef rl) { rl_unlock(rl); }

/* Tie-break stamps of timers (runloop_internal.h). The epoch is the one
 * process-wide counter, and only timers in no loop (at creation, or moved
 * while in none) write it; a timer at home in a loop is stamped under that
 * loop's lock from the loop's own counter, so moving and refiring timers
 * writes nothing another loop reads.
 *
 * Stamps compare as (epoch, count): a stamp given after another one on any
 * thread has a larger epoch, or the same epoch and a larger count. A
 * homeless stamp takes a new epoch (count 0), larger than every epoch any
 * earlier stamp read; a loop stamp reads the epoch (it saw every earlier
 * homeless stamp) and takes the next count of its loop, and a loop's
 * counter is raised to the count of each timer that comes home to it, so
 * its later stamps are larger than that timer's. (A timer stamped in one
 * loop and brought to another keeping its date may sort before a timer
 * stamped in the other loop while it was on its way, as CF, which orders
 * by insertion, puts it after.) */
static _Atomic uint64_t rl_seq_epoch;

void rl__timer_stamp_locked(struct RLRunLoopTimer *t) {
    RLRunLoopRef h = atomic_load_explicit(&t->home, memory_order_relaxed);
    if (!h) {
        t->seq_epoch = atomic_fetch_add_explicit(&rl_seq_epoch, 1, memory_order_relaxed) + 1;
        t->seq = 0;
    } else {
        t->seq_epoch = atomic_load_explicit(&rl_seq_epoch, memory_order_relaxed);
        t->seq = ++h->timer_seq;
    }
}

void rl__defer_init(rl_defer *d) {
    d->e = d->inline_e;
    d->n = 0;
    d->cap = sizeof d->inline_e / sizeof d->inline_e[0];
}

static void rl_defer_add(rl_defer *d, rl_defer_entry e) {
    if (d->n == d->cap) {
        size_t cap = d->cap * 2;
        rl_defer_entry *a = malloc(cap * sizeof *a);
        if (!a)
            abort(); /* losing a release would corrupt reference counts */
        memcpy(a, d->e, d->n * sizeof *a);
        if (d->e != d->inline_e)
            free(d->e);
        d->e = a;
        d->cap = cap;
    }
    d->e[d->n++] = e;
}

static void rl_retain_raw(void *obj) {
    atomic_fetch_add_explicit(&((rl__object *)obj)->rc, 1, memory_order_relaxed);
}

/* A reference the loop keeps for a membership (or a common-modes item):
 * marked as the library's (RLBase.c), so that a caller who releases once
 * too often is refused instead of freeing what the loop still uses. */
static void rl_hold_raw(void *obj) {
    atomic_fetch_add_explicit(&((rl__object *)obj)->rc, 1 + RL__HELD_ONE, memory_order_relaxed);
}

void rl__defer_push(rl_defer *d, int what, void *obj, RLRunLoopRef rl, const char *mode) {
    if (obj)
        rl_retain_raw(obj);
    if (rl)
        rl_retain_raw(rl);
    rl_defer_add(d, (rl_defer_entry){what, obj, rl, mode, NULL, NULL});
}

void rl__defer_release(rl_defer *d, void *obj) {
    rl_defer_add(d, (rl_defer_entry){RL_DEFER_RELEASE, obj, NULL, NULL, NULL, NULL});
}

/* Queues the drop of a reference taken with rl_hold_raw. */
static void rl_defer_unhold(rl_defer *d, void *obj) {
    rl_defer_add(d, (rl_defer_entry){RL_DEFER_UNHOLD, obj, NULL, NULL, NULL, NULL});
}

void rl__defer_ctx_release(rl_defer *d, void (*release)(const void *), const void *info) {
    if (release)
        rl_defer_add(d, (rl_defer_entry){RL_DEFER_CTX_RELEASE, NULL, NULL, NULL, release, info});
}

static void rl_defer_call(rl_defer_entry *e) {
    struct RLRunLoopSource *s = e->obj;
    switch (e->what) {
    case RL_DEFER_SCHEDULE:
        if (s->ctx.schedule)
            s->ctx.schedule(s->ctx.info, e->rl, e->mode);
        break;
    case RL_DEFER_CANCEL:
        if (s->ctx.cancel)
            s->ctx.cancel(s->ctx.info, e->rl, e->mode);
        break;
    case RL_DEFER_CTX_RELEASE:
        e->cfn(e->carg);
        break;
    default:
        break;
    }
}

void rl__defer_run(rl_defer *d) {
    for (size_t i = 0; i < d->n; i++) {
        rl_defer_entry *e = &d->e[i];
        if (e->what != RL_DEFER_RELEASE && e->what != RL_DEFER_UNHOLD)
            rl_defer_call(e);
        if (e->obj && e->what == RL_DEFER_UNHOLD)
            rl__object_unhold(e->obj);
        else if (e->obj)
            RLRelease(e->obj);
        if (e->rl)
            RLRelease(e->rl);
    }
    if (d->e != d->inline_e)
        free(d->e);
    rl__defer_init(d);
}

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static bool rl_mode_name_ok(RLRunLoopMode mode, const char *fn) {
    if (mode == NULL)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL mode");
    if (mode[0] == '\0')
        return rl__fail(kRLErrorInvalidArgument, fn, "empty mode name");
    return true;
}

static bool rl_is_common(RLRunLoopMode mode) {
    if (mode == kRLRunLoopDefaultMode)
        return false;
    return mode == kRLRunLoopCommonModes || (mode[0] == 'k' && strcmp(mode, kRLRunLoopCommonModes) == 0);
}

/* A loop inherited across fork() is refused by every public function: its
 * kernel objects are the parent's, and its thread does not exist here. */
static bool rl_check_loop(RLRunLoopRef rl, const char *fn) {
    if (!rl__object_check(rl, &rl__runloop_class, fn))
        return false;
    if (rl__fork_inherited(rl->fork_gen))
        return rl__fork_fail(fn, "run loop");
    return true;
}

/* Whether rl was made in this process, not inherited across fork(). The
 * internal paths that reach its epoll fd, eventfd or timerfd from an item
 * (a timer moved, an fd source removed, in a child, of a loop it
 * inherited) check this: those kernel objects are shared with the parent,
 * whose loop they would disturb. So do the callout loops of a run, which
 * a fork() from a callout leaves in the child: the rest of what they
 * collected is the parent's work. */
static inline bool rl_of_this_process(RLRunLoopRef rl) { return !rl__fork_inherited(rl->fork_gen); }

static double rl_mono_now(void) { return RLMonotonicTimeGetCurrent(); }

struct rl_membq *rl__item_membs(void *item, rl_kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return &((struct RLRunLoopSource *)item)->membs;
    case RL_KIND_TIMER:
        return &((struct RLRunLoopTimer *)item)->membs;
    default:
        return &((struct RLRunLoopObserver *)item)->membs;
    }
}

static inline rl_memb *rl_memb_find(void *item, rl_kind kind, rl_mode *mode) {
    if (kind == RL_KIND_TIMER) {
        /* Most timers are in one mode, their inline membership: found
         * without first loading the list head. */
        struct RLRunLoopTimer *t = item;
        if (t->inline_used && t->inline_memb.mode == mode)
            return &t->inline_memb;
    }
    rl_memb *m;
    TAILQ_FOREACH(m, rl__item_membs(item, kind), item_link) {
        if (m->mode == mode)
            return m;
    }
    return NULL;
}

bool rl__memb_in_mode(void *item, rl_kind kind, rl_mode *mode) { return rl_memb_find(item, kind, mode) != NULL; }

static bool rl_item_in_loop(void *item, rl_kind kind, RLRunLoopRef rl) {
    rl_memb *m;
    TAILQ_FOREACH(m, rl__item_membs(item, kind), item_link) {
        if (m->rl == rl)
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------ */
/* homes (runloop_internal.h) and item locks                           */

/* The calling thread's run loop (its reference: the loop lives as long as
 * this is set), NULL before RLRunLoopGetCurrent and after teardown. */
static __thread RLRunLoopRef rl_tls;

static inline rl__olock *rl_item_olock(void *item, rl_kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return &((struct RLRunLoopSource *)item)->lock;
    case RL_KIND_TIMER:
        return &((struct RLRunLoopTimer *)item)->lock;
    default:
        return &((struct RLRunLoopObserver *)item)->lock;
    }
}

static inline _Atomic(RLRunLoopRef) *rl_item_home(void *item, rl_kind kind) {
    return kind == RL_KIND_TIMER ? &((struct RLRunLoopTimer *)item)->home
                                 : &((struct RLRunLoopObserver *)item)->home;
}

static inline RLRunLoopRef rl_home_get(void *item, rl_kind kind) {
    return atomic_load_explicit(rl_item_home(item, kind), memory_order_relaxed);
}

/* rl becomes the home of item; rl locked, item lock held, no home yet. */
static void rl_home_set_locked(RLRunLoopRef rl, void *item, rl_kind kind) {
    atomic_store_explicit(rl_item_home(item, kind), rl, memory_order_relaxed);
    if (kind == RL_KIND_TIMER) {
        struct RLRunLoopTimer *t = item;
        TAILQ_INSERT_TAIL(&rl->homed_timers, t, home_link);
        if (t->seq > rl->timer_seq)
            rl->timer_seq = t->seq; /* stamps given here from now on come after its own */
    } else
        TAILQ_INSERT_TAIL(&rl->homed_observers, (struct RLRunLoopObserver *)item, home_link);
}

/* item leaves rl, its home; rl locked. Its state goes under its item lock. */
static void rl_home_clear_locked(RLRunLoopRef rl, void *item, rl_kind kind) {
    rl__olock *ol = rl_item_olock(item, kind);
    rl__olock_lock(ol);
    atomic_store_explicit(rl_item_home(item, kind), NULL, memory_order_relaxed);
    rl__olock_unlock(ol);
    if (kind == RL_KIND_TIMER)
        TAILQ_REMOVE(&rl->homed_timers, (struct RLRunLoopTimer *)item, home_link);
    else
        TAILQ_REMOVE(&rl->homed_observers, (struct RLRunLoopObserver *)item, home_link);
}

RLRunLoopRef rl__item_lock(void *item, rl_kind kind) {
    rl__olock *ol = rl_item_olock(item, kind);
    RLRunLoopRef mine = rl_tls;
    for (;;) {
        RLRunLoopRef h = rl_home_get(item, kind);
        if (h && h == mine) {
            /* The caller's own loop (the usual case: a timer moved from
             * its callout) cannot go away meanwhile. */
            rl_lock(h);
            if (rl_home_get(item, kind) == h)
                return h;
            rl_unlock(h);
            continue;
        }
        rl__olock_lock(ol);
        h = rl_home_get(item, kind);
        if (!h)
            return NULL; /* homeless, and stays so while the item lock is held */
        /* A home is cleared only under the item lock (by a thread that holds
         * its own reference on the loop), so h is alive here. */
        rl_retain_raw(h);
        rl__olock_unlock(ol);
        rl_lock(h);
        if (rl_home_get(item, kind) == h) {
            /* Still home, so h's teardown has not cleared it yet, and h's
             * thread still holds its reference: ours cannot be the last. */
            atomic_fetch_sub_explicit(&((rl__object *)h)->rc, 1, memory_order_release);
            return h;
        }
        rl_unlock(h);
        RLRelease(h);
    }
}

void rl__item_unlock(void *item, rl_kind kind, RLRunLoopRef home) {
    if (home)
        rl_unlock(home);
    else
        rl__olock_unlock(rl_item_olock(item, kind));
}

void rl__item_leave_home(void *item, rl_kind kind) {
    RLRunLoopRef h = rl__item_lock(item, kind);
    if (h)
        rl_home_clear_locked(h, item, kind);
    rl__item_unlock(item, kind, h);
}

/* Adding item to `to` found it at home in another loop: it moves out if it
 * is in none of that loop's modes (the caller then tries again); false
 * (error set) if it is, as CF refuses a timer or an observer in a second
 * loop. No lock held. */
static bool rl_item_move_out(void *item, rl_kind kind, RLRunLoopRef to, const char *fn) {
    RLRunLoopRef h = rl__item_lock(item, kind);
    bool ok = true;
    if (h && h != to) {
        if (!TAILQ_EMPTY(rl__item_membs(item, kind)))
            ok = rl__fail(kRLErrorInvalidState, fn, "the %s is already in another run loop",
                          kind == RL_KIND_TIMER ? "timer" : "observer");
        else
            rl_home_clear_locked(h, item, kind);
    }
    rl__item_unlock(item, kind, h);
    return ok;
}

/* The distinct loops a source is in (its item lock held when collected),
 * retained, except the caller's own loop: visited one at a time after the
 * item lock is dropped. */
typedef struct rl_loopset {
    RLRunLoopRef *a;
    size_t n, cap;
    RLRunLoopRef mine;
    RLRunLoopRef inl[4];
} rl_loopset;

static void rl_loopset_init(rl_loopset *ls) {
    ls->a = ls->inl;
    ls->n = 0;
    ls->cap = sizeof ls->inl / sizeof ls->inl[0];
    ls->mine = rl_tls;
}

static void rl_loopset_collect(rl_loopset *ls, struct RLRunLoopSource *s, RLRunLoopRef except) {
    rl_memb *m;
    TAILQ_FOREACH(m, &s->membs, item_link) {
        if (m->rl == except)
            continue;
        bool seen = false;
        for (size_t i = 0; i < ls->n && !seen; i++)
            seen = ls->a[i] == m->rl;
        if (seen)
            continue;
        if (ls->n == ls->cap) {
            size_t cap = ls->cap * 2;
            RLRunLoopRef *a = malloc(cap * sizeof *a);
            if (!a)
                abort(); /* a loop left out would miss a signal or keep an invalid source */
            memcpy(a, ls->a, ls->n * sizeof *a);
            if (ls->a != ls->inl)
                free(ls->a);
            ls->a = a;
            ls->cap = cap;
        }
        if (m->rl != ls->mine)
            rl_retain_raw(m->rl);
        ls->a[ls->n++] = m->rl;
    }
}

static void rl_loopset_free(rl_loopset *ls) {
    for (size_t i = 0; i < ls->n; i++) {
        if (ls->a[i] != ls->mine)
            RLRelease(ls->a[i]);
    }
    if (ls->a != ls->inl)
        free(ls->a);
    rl_loopset_init(ls);
}

/* ------------------------------------------------------------------ */
/* modes                                                               */

static rl_mode *rl_mode_find_slow(RLRunLoopRef rl, const char *name) {
    for (size_t i = 0; i < rl->nmodes; i++) {
        if (strcmp(rl->modes[i]->name, name) == 0)
            return rl->last_mode = rl->modes[i];
    }
    return NULL;
}

__attribute__((always_inline)) static inline rl_mode *rl_mode_find(RLRunLoopRef rl, const char *name) {
    /* Programs mostly touch one mode at a time: try the last one found. The
     * default mode's constant is recognised by its address. */
    rl_mode *last = rl->last_mode;
    if (last && (name == kRLRunLoopDefaultMode ? last->is_default : strcmp(last->name, name) == 0))
        return last;
    return rl_mode_find_slow(rl, name);
}

static rl_common_name *rl_common_find(RLRunLoopRef rl, const char *name) {
    for (size_t i = 0; i < rl->ncommon; i++) {
        if (strcmp(rl->common[i].name, name) == 0)
            return &rl->common[i];
    }
    return NULL;
}

static void *rl_grow(void *a, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return a;
    size_t c = *cap ? *cap * 2 : 8;
    while (c < need)
        c *= 2;
    void *b = realloc(a, c * elem);
    if (b)
        *cap = c;
    return b;
}

static rl_mode *rl_mode_new(RLRunLoopRef rl, const char *name, const char *fn) {
    rl_mode **a = rl_grow(rl->modes, &rl->capmodes, rl->nmodes + 1, sizeof *a);
    rl_mode *m = calloc(1, sizeof *m);
    char *copy = strdup(name);
    if (!a || !m || !copy) {
        if (a)
            rl->modes = a;
        free(m);
        free(copy);
        rl__fail(kRLErrorNoMemory, fn, "out of memory creating mode %s", name);
        return NULL;
    }
    rl->modes = a;
    m->name = copy;
    m->is_default = strcmp(name, kRLRunLoopDefaultMode) == 0;
    m->rl = rl;
    TAILQ_INIT(&m->sources);
    TAILQ_INIT(&m->ready);
    TAILQ_INIT(&m->observers);
    rl__tset_init(&m->timers);
    rl_common_name *c = rl_common_find(rl, name);
    if (c)
        m->common = true;
    rl->modes[rl->nmodes++] = m;
    return m;
}

/* The mode named `name`, created if needed; NULL (error set) on OOM. */
__attribute__((always_inline)) static inline rl_mode *rl_mode_get(RLRunLoopRef rl, const char *name,
                                                                  const char *fn) {
    rl_mode *m = rl_mode_find(rl, name);
    return m ? m : rl_mode_new(rl, name, fn);
}

static void rl_mode_free(rl_mode *m) {
    rl__tset_free(&m->timers);
    free(m->sbuckets);
    free(m->name);
    free(m);
}

static void rl_mode_recompute_mask(rl_mode *m) {
    RLOptionFlags mask = 0;
    rl_memb *x;
    TAILQ_FOREACH(x, &m->observers, mode_link) {
        mask |= ((struct RLRunLoopObserver *)x->item)->activities;
    }
    atomic_store_explicit(&m->observer_mask, mask, memory_order_relaxed);
}

/* ------------------------------------------------------------------ */
/* wake-ups and the timerfd                                            */

static void rl_drain(int fd);

/* The eventfd is in the epoll set edge-triggered: every write is an event,
 * so the loop never reads it back (one system call less per wake-up). Its
 * counter only grows; in the unlikely case that it is full (2^64 - 2
 * wake-ups), the write fails with EAGAIN: drain it and write again. */
static void rl_write_eventfd(RLRunLoopRef rl) {
    if (!rl_of_this_process(rl))
        return;
    uint64_t one = 1;
    ssize_t r;
    do {
        r = write(rl->evfd, &one, sizeof one);
        if (r < 0 && errno == EAGAIN) {
            rl_drain(rl->evfd);
            errno = EINTR; /* and again */
        }
    } while (r < 0 && errno == EINTR);
}

static void rl_wake(RLRunLoopRef rl) {
    /* A load first keeps producers from bouncing the cache line while a
     * wake-up is pending. Seeing 1 here is enough: that store came after the
     * loop last cleared the flag, so the loop will look at its queues again.
     * Both loads are sequentially consistent (plain loads on x86): the loop
     * peeks at its perform queue without a lock (rl_pq_maybe_queued), and
     * it is this ordering that makes it see what the caller queued. */
    if (atomic_load(&rl->wake_pending))
        return;
    /* CF ignores wake-ups from the moment the loop wakes (or while it is not
     * running) until its next pass begins: that pass looks at every queue
     * anyway. Seeing a stale 1 here is safe for the same reason as above. */
    if (atomic_load(&rl->ignore_wakeups))
        return;
    /* Where the waker runs tells the loop whether spinning for the next
     * wake-up can pay (rl_spin_for_wake); stored only when it changes. */
    int cpu = rl__spin_cpu();
    if (atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&rl->waker_cpu, cpu, memory_order_relaxed);
    if (atomic_exchange(&rl->wake_pending, 1) != 0)
        return; /* a wake-up is already on its way */
    if (atomic_load(&rl->sleeping))
        rl_write_eventfd(rl);
}

/* Arms the timerfd for monotonic time `at` (INFINITY disarms); no system
 * call when it is already armed there. Loop lock held. */
static void rl_arm_timerfd(RLRunLoopRef rl, double at) {
    if (at == rl->armed_at || !rl_of_this_process(rl))
        return;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (isfinite(at)) {
        its.it_value = rl__timespec_from_seconds(at);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1; /* zero would disarm */
    }
    timerfd_settime(rl->tfd, TFD_TIMER_ABSTIME, &its, NULL);
    rl->armed_at = at;
}

/* When the innermost run must wake next: its deadline or its mode's
 * earliest timer deadline, as monotonic time. Loop lock held. */
static double rl_next_wake(RLRunLoopRef rl, rl_frame *f) {
    double at = f->deadline;
    double date;
    if (rl__tset_earliest_deadline(&f->mode->timers, &date)) {
        double rel = date - RLAbsoluteTimeGetCurrent();
        double t = rl_mono_now() + (rel > 0 ? rel : 0);
        if (t < at)
            at = t;
    }
    return at;
}

/* A timer of rl moved or was added/removed: if rl is waiting, re-arm its
 * timerfd so it neither oversleeps nor wakes for nothing. */
static void rl_rearm_if_waiting(RLRunLoopRef rl) {
    if (rl && rl->frame && atomic_load(&rl->sleeping))
        rl_arm_timerfd(rl, rl_next_wake(rl, rl->frame));
}

/* Timer t joined `mode` of rl. Adding can only bring the wake-up forward:
 * a sleeping loop running that mode is re-armed only if t is due before the
 * armed time, and nothing else (no clock read, no heap order) is needed. */
static void rl_rearm_for_added_timer_slow(RLRunLoopRef rl, const struct RLRunLoopTimer *t) {
    if (t->firing)
        return; /* not a wake-up reason until its callout returns (rl__tset_earliest_deadline) */
    double rel = t->fire_date + t->tolerance - RLAbsoluteTimeGetCurrent();
    double at = rl_mono_now() + (rel > 0 ? rel : 0);
    if (at < rl->armed_at)
        rl_arm_timerfd(rl, at);
}

static inline void rl_rearm_for_added_timer(RLRunLoopRef rl, rl_mode *mode, const struct RLRunLoopTimer *t) {
    if (rl->frame && rl->frame->mode == mode && atomic_load(&rl->sleeping))
        rl_rearm_for_added_timer_slow(rl, t);
}

/* ------------------------------------------------------------------ */
/* fd registrations                                                    */

/* What src wants the loop to watch its fd for. The loop lock and src's
 * item lock held. */
static uint32_t rl_fd_desired(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    struct RLFileDescriptor *f = src->fdobj;
    if (!src->valid || !f || !rl__peek(f->valid) || rl__peek(f->stale) || !rl->armed_mode)
        return 0;
    if (!rl__memb_in_mode(src, RL_KIND_SOURCE, rl->armed_mode))
        return 0;
    RLOptionFlags enabled = atomic_load_explicit(&f->enabled, memory_order_relaxed);
    uint32_t ev = 0;
    if (enabled & kRLFileDescriptorReadCallBack)
        ev |= EPOLLIN;
    if (enabled & kRLFileDescriptorWriteCallBack)
        ev |= EPOLLOUT;
    return ev;
}

/* The union of what the sources on r want: their wishes as last read under
 * each one's item lock (rl_fd_update), so no other source's lock is needed. */
static uint32_t rl_fd_want(RLRunLoopRef rl, const rl_fdreg *r) {
    (void)rl;
    uint32_t want = 0;
    for (uint32_t i = 0; i < r->nsrcs; i++)
        want |= r->want[i];
    return want;
}

/* An event's data: the registration's tag above the fd (the loop's own
 * eventfd and timerfd have tag 0). */
static inline uint64_t rl_ev_data(int fd, uint32_t gen) { return (uint64_t)gen << 32 | (uint32_t)fd; }
static inline int rl_ev_fd(const struct epoll_event *ev) { return (int)(uint32_t)ev->data.u64; }
static inline uint32_t rl_ev_gen(const struct epoll_event *ev) { return (uint32_t)(ev->data.u64 >> 32); }

/* 0, or the errno of the failed epoll_ctl. */
static int rl_fd_ctl(RLRunLoopRef rl, int op, int fd, uint32_t events, uint32_t gen) {
    if (RL__UNLIKELY(!rl_of_this_process(rl)))
        return 0; /* a fork() child never touches its parent's epoll set */
    struct epoll_event ev = {.events = events, .data.u64 = rl_ev_data(fd, gen)};
    return epoll_ctl(rl->epfd, op, fd, &ev) == 0 ? 0 : errno;
}

static void rl_fd_set_armed(RLRunLoopRef rl, rl_fdreg *r, uint32_t armed) {
    if ((r->armed == 0) != (armed == 0)) {
        if (armed) {
            rl->nfd_armed++;
            rl->nalways += r->always;
        } else {
            rl->nfd_armed--;
            rl->nalways -= r->always;
        }
    }
    r->armed = armed;
}

/* The objects on r (but `fresh`) no longer name the file they were made
 * for, or cannot be watched (err): they are not watched again, and say so
 * when enabled (RLFileDescriptor.c). */
static void rl_fd_mark_stale(rl_fdreg *r, struct RLRunLoopSource *fresh, int err) {
    for (uint32_t i = 0; i < r->nsrcs; i++) {
        struct RLFileDescriptor *f = r->srcs[i]->fdobj;
        if (r->srcs[i] != fresh && f && !rl__peek(f->stale)) {
            rl__poke(f->stale, err);
            atomic_store_explicit(&f->enabled, 0, memory_order_relaxed);
            r->want[i] = 0;
        }
    }
}

/* Marks stale the objects on r made for another file than fd names now
 * (the number was closed and reused behind their backs). */
static void rl_fd_check_identity(rl_fdreg *r, int fd) {
    struct stat st;
    int err = fstat(fd, &st) == 0 ? 0 : errno;
    for (uint32_t i = 0; i < r->nsrcs; i++) {
        struct RLFileDescriptor *f = r->srcs[i]->fdobj;
        if (f && !rl__peek(f->stale) && (err || f->dev != st.st_dev || f->ino != st.st_ino)) {
            rl__poke(f->stale, err ? err : ENOENT);
            atomic_store_explicit(&f->enabled, 0, memory_order_relaxed);
            r->want[i] = 0;
        }
    }
}

/* Adds fd to the epoll set, under a new tag, for what its objects that
 * still name its file want. */
static void rl_fd_add(RLRunLoopRef rl, rl_fdreg *r, int fd) {
    rl_fd_check_identity(r, fd);
    uint32_t want = rl_fd_want(rl, r);
    if (want == 0)
        return;
    uint32_t gen = ++rl->fdgen ? rl->fdgen : ++rl->fdgen;
    int err = rl_fd_ctl(rl, EPOLL_CTL_ADD, fd, want | EPOLLONESHOT, gen);
    if (err == EEXIST) /* in the set under a tag given up on: take it over */
        err = rl_fd_ctl(rl, EPOLL_CTL_MOD, fd, want | EPOLLONESHOT, gen);
    if (err == 0) {
        r->gen = gen;
        rl_fd_set_armed(rl, r, want);
    } else if (err == EPERM) {
        /* A file that is always ready (poll says so; epoll refuses it). */
        r->always = true;
        rl_fd_set_armed(rl, r, want);
    } else {
        /* EBADF: the fd is closed. ENOMEM, ENOSPC (the user's watch limit):
         * the loop cannot watch it. Reported, never silently dropped. */
        rl_fd_mark_stale(r, NULL, err);
    }
}

/* Brings the kernel in line with what fd should be watched for (the union
 * over its sources). `verify`: ask the kernel even if nothing changed,
 * because `fresh`, a new object on this fd number, joins: an error then
 * says that the registration was made for a file the number no longer
 * names (ENOENT: closed and reused; EBADF: closed), and the objects
 * there before are stale. Loop lock held. */
static void rl_fd_sync_ex(RLRunLoopRef rl, int fd, bool verify, struct RLRunLoopSource *fresh) {
    if (fd < 0 || (size_t)fd >= rl->nfdtab)
        return;
    rl_fdreg *r = &rl->fdtab[fd];
    uint32_t want = rl_fd_want(rl, r);
    if (r->always) {
        if (!verify || want == 0) {
            rl_fd_set_armed(rl, r, want);
            return;
        }
        /* Does epoll still refuse what the number names now? */
        rl_fd_set_armed(rl, r, 0);
        r->always = false;
        rl_fd_add(rl, r, fd);
        if (r->always || r->gen == 0)
            return;
        rl_fd_mark_stale(r, fresh, ENOENT); /* a watchable file now: not the one they were made for */
        verify = false;
        want = rl_fd_want(rl, r);
        if (want == r->armed)
            return;
    }
    if (want == r->armed && !verify)
        return;
    if (r->gen == 0) {
        if (want)
            rl_fd_add(rl, r, fd);
        return;
    }
    int err = 0;
    if (want) {
        err = rl_fd_ctl(rl, EPOLL_CTL_MOD, fd, want | EPOLLONESHOT, r->gen);
    } else if (r->armed || verify) {
        /* Nobody listens: out of the set, not left armed with no events
         * (epoll would still report hang-ups). A registration the kernel
         * disarmed after reporting stays, to be re-armed cheaply. */
        err = rl_fd_ctl(rl, EPOLL_CTL_DEL, fd, 0, 0);
        if (err == 0)
            r->gen = 0;
    }
    if (err == 0) {
        rl_fd_set_armed(rl, r, want);
        return;
    }
    /* Whatever the kernel still holds under the old tag reports at most
     * once more (one-shot) and is ignored by its tag. */
    r->gen = 0;
    rl_fd_set_armed(rl, r, 0);
    rl_fd_mark_stale(r, err == ENOENT || err == EBADF ? fresh : NULL, err);
    rl_fd_add(rl, r, fd);
}

static void rl_fd_sync(RLRunLoopRef rl, int fd) { rl_fd_sync_ex(rl, fd, false, NULL); }

/* Files src under its fd. False: out of memory (nothing changed). src's
 * item lock held. */
static bool rl_fd_register(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = src->fdobj ? src->fdobj->fd : -1;
    if (fd < 0)
        return true;
    if ((size_t)fd >= rl->nfdtab) {
        size_t n = rl->nfdtab ? rl->nfdtab : 16;
        while (n <= (size_t)fd)
            n *= 2;
        rl_fdreg *t = realloc(rl->fdtab, n * sizeof *t);
        if (!t)
            return false;
        memset(t + rl->nfdtab, 0, (n - rl->nfdtab) * sizeof *t);
        rl->fdtab = t;
        rl->nfdtab = n;
    }
    rl_fdreg *r = &rl->fdtab[fd];
    for (uint32_t i = 0; i < r->nsrcs; i++) {
        if (r->srcs[i] == src)
            return true;
    }
    if (r->nsrcs == r->capsrcs) {
        uint32_t cap = r->capsrcs ? r->capsrcs * 2 : 1;
        struct RLRunLoopSource **a = realloc(r->srcs, cap * sizeof *a);
        if (!a)
            return false;
        r->srcs = a;
        uint32_t *w = realloc(r->want, cap * sizeof *w);
        if (!w)
            return false;
        r->want = w;
        r->capsrcs = cap;
    }
    r->srcs[r->nsrcs] = src;
    r->want[r->nsrcs++] = rl_fd_desired(rl, src);
    /* The number may have been closed and reused since the object (or the
     * others on it) were made. The kernel's registration, if there is one,
     * is asked too: it tells apart files that share an identity (eventfds). */
    rl_fd_check_identity(r, fd);
    if (r->gen != 0 || r->always)
        rl_fd_sync_ex(rl, fd, true, src);
    return true;
}

static void rl_fd_unregister(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = src->fdobj ? src->fdobj->fd : -1;
    if (fd < 0 || (size_t)fd >= rl->nfdtab)
        return;
    rl_fdreg *r = &rl->fdtab[fd];
    for (uint32_t i = 0; i < r->nsrcs; i++) {
        if (r->srcs[i] == src) {
            memmove(&r->srcs[i], &r->srcs[i + 1], (r->nsrcs - i - 1) * sizeof *r->srcs);
            memmove(&r->want[i], &r->want[i + 1], (r->nsrcs - i - 1) * sizeof *r->want);
            r->nsrcs--;
            /* The union of the others; none left: out of the set (errors
             * mean it is gone already). */
            rl_fd_sync_ex(rl, fd, r->nsrcs == 0 && r->gen != 0, NULL);
            if (r->nsrcs == 0) {
                rl_fd_set_armed(rl, r, 0);
                r->gen = 0;
                r->always = false;
            }
            return;
        }
    }
}

/* Re-reads what src wants (rl_fd_desired: src's item lock held) and re-arms
 * its fd. */
static void rl_fd_update(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = src->fdobj ? src->fdobj->fd : -1;
    if (fd < 0 || (size_t)fd >= rl->nfdtab)
        return;
    rl_fdreg *r = &rl->fdtab[fd];
    for (uint32_t i = 0; i < r->nsrcs; i++) {
        if (r->srcs[i] == src) {
            r->want[i] = rl_fd_desired(rl, src);
            rl_fd_sync(rl, fd);
            return;
        }
    }
}

/* The armed mode changed: every source's wish is read again, each under its
 * item lock in turn. Loop lock held, no item lock. */
static void rl_fd_sync_all(RLRunLoopRef rl) {
    for (size_t i = 0; i < rl->nfdtab; i++) {
        rl_fdreg *r = &rl->fdtab[i];
        if (!r->nsrcs)
            continue;
        for (uint32_t k = 0; k < r->nsrcs; k++) {
            struct RLRunLoopSource *src = r->srcs[k];
            rl__olock_lock(&src->lock);
            r->want[k] = rl_fd_desired(rl, src);
            rl__olock_unlock(&src->lock);
        }
        rl_fd_sync(rl, (int)i);
    }
}

/* Right after epoll_wait: each reported registration is disarmed now (one-
 * shot), and a report under a tag the loop gave up on (left behind by a
 * closed fd) is blanked, to be ignored. Loop lock held. */
static void rl_fd_note_events(RLRunLoopRef rl, struct epoll_event *ev, int n) {
    for (int i = 0; i < n; i++) {
        int fd = rl_ev_fd(&ev[i]);
        uint32_t gen = rl_ev_gen(&ev[i]);
        if (gen == 0)
            continue; /* the loop's own eventfd or timerfd */
        rl_fdreg *r = fd >= 0 && (size_t)fd < rl->nfdtab ? &rl->fdtab[fd] : NULL;
        if (r && r->gen == gen)
            rl_fd_set_armed(rl, r, 0);
        else
            ev[i].events = 0;
    }
}

/* Re-arms the fd of s in every loop s is in but `except`. No lock held. */
static void rl_fd_resync_except(struct RLRunLoopSource *s, RLRunLoopRef except) {
    rl_loopset ls;
    rl_loopset_init(&ls);
    rl__olock_lock(&s->lock);
    rl_loopset_collect(&ls, s, except);
    rl__olock_unlock(&s->lock);
    for (size_t i = 0; i < ls.n; i++) {
        RLRunLoopRef rl = ls.a[i];
        rl_lock(rl);
        rl__olock_lock(&s->lock);
        rl_fd_update(rl, s);
        rl__olock_unlock(&s->lock);
        rl_unlock(rl);
    }
    rl_loopset_free(&ls);
}

void rl__source_fd_resync(struct RLRunLoopSource *s) { rl_fd_resync_except(s, NULL); }

/* ------------------------------------------------------------------ */
/* the ready list                                                      */

/* Each membership of a source is on its mode's ready list at most once:
 * the flag, not a scan, says whether it is already there. The list holds no
 * reference (the membership does, and leaves the list when removed). The
 * loop lock of m's loop held. */
static void rl_ready_push(rl_memb *m) {
    if (m->queued)
        return;
    m->queued = true;
    TAILQ_INSERT_TAIL(&m->mode->ready, m, ready_link);
    m->mode->nready++;
}

static void rl_ready_unlink(rl_memb *m) {
    if (!m->queued)
        return;
    m->queued = false;
    TAILQ_REMOVE(&m->mode->ready, m, ready_link);
    m->mode->nready--;
}

/* The memberships of s in rl go on their modes' ready lists. rl locked, s's
 * item lock held. */
static void rl_ready_push_source(RLRunLoopRef rl, struct RLRunLoopSource *s) {
    rl_memb *m;
    TAILQ_FOREACH(m, &s->membs, item_link) {
        if (m->rl == rl)
            rl_ready_push(m);
    }
}

/* The loops are noted under the source's item lock and visited after it,
 * each under its own lock and then the item lock again (its memberships
 * there may have changed meanwhile: a loop the source has left has none to
 * push; a loop it joins meanwhile sees `signalled` when it adds it,
 * rl_add_locked). */
bool rl__source_signal(struct RLRunLoopSource *s) {
    rl_loopset ls;
    rl_loopset_init(&ls);
    rl__olock_lock(&s->lock);
    bool ok = s->valid;
    if (ok && !s->signalled) {
        rl__poke(s->signalled, true);
        /* The usual source is in one loop: its lock, tried while the item
         * lock is still held, saves noting the loop and a second round of
         * the item lock. Busy: the general way. */
        rl_memb *first = TAILQ_FIRST(&s->membs), *m;
        RLRunLoopRef one = first ? first->rl : NULL;
        for (m = first; m && one; m = TAILQ_NEXT(m, item_link))
            if (m->rl != one)
                one = NULL;
        if (one && rl_trylock(one)) {
            rl_ready_push_source(one, s);
            rl_unlock(one);
        } else {
            rl_loopset_collect(&ls, s, NULL);
        }
    }
    rl__olock_unlock(&s->lock);
    for (size_t i = 0; i < ls.n; i++) {
        rl_lock(ls.a[i]);
        rl__olock_lock(&s->lock);
        if (s->signalled)
            rl_ready_push_source(ls.a[i], s);
        rl__olock_unlock(&s->lock);
        rl_unlock(ls.a[i]);
    }
    rl_loopset_free(&ls);
    return ok;
}

/* ------------------------------------------------------------------ */
/* memberships                                                         */

static void rl_observer_insert(rl_mode *mode, rl_memb *m) {
    struct RLRunLoopObserver *o = m->item;
    rl_memb *x;
    TAILQ_FOREACH(x, &mode->observers, mode_link) {
        if (((struct RLRunLoopObserver *)x->item)->order > o->order) {
            TAILQ_INSERT_BEFORE(x, m, mode_link);
            return;
        }
    }
    TAILQ_INSERT_TAIL(&mode->observers, m, mode_link);
}

/* A timer's first membership lives inside the timer: no allocation, and
 * one cache miss less when 100k timers come and go. */
/* ---- source equality ----
 * A mode holds at most one of a set of equal sources (as CF's set of
 * sources): adding a source equal to one already there does nothing, and
 * Contains/Remove find the one there. Candidates are found through the
 * mode's buckets, keyed by what equal sources share. */

static size_t rl_source_key(const struct RLRunLoopSource *s) {
    uint64_t x = (uint64_t)s->hash ^ ((uint64_t)s->order * 0x9E3779B97F4A7C15ull) ^
                 (uint64_t)(uintptr_t)s->ctx.perform ^ ((uint64_t)(uintptr_t)s->fdobj << 1);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

/* Room in mode's buckets for one more source; false only if there are none
 * and none can be had (a full table keeps working with longer chains). */
static bool rl_sbuckets_reserve(rl_mode *mode) {
    if (mode->nsources < mode->nsbuckets)
        return true;
    size_t nb = mode->nsbuckets ? mode->nsbuckets * 2 : 8;
    rl_memb **b = calloc(nb, sizeof *b);
    if (!b)
        return mode->nsbuckets > 0;
    for (size_t i = 0; i < mode->nsbuckets; i++) {
        rl_memb *m = mode->sbuckets[i];
        while (m) {
            rl_memb *next = m->snext;
            size_t k = rl_source_key(m->item) & (nb - 1);
            m->snext = b[k];
            b[k] = m;
            m = next;
        }
    }
    free(mode->sbuckets);
    mode->sbuckets = b;
    mode->nsbuckets = nb;
    return true;
}

static void rl_sbucket_insert(rl_mode *mode, rl_memb *m) {
    rl_memb **head = &mode->sbuckets[rl_source_key(m->item) & (mode->nsbuckets - 1)];
    m->snext = *head;
    *head = m;
}

static void rl_sbucket_remove(rl_mode *mode, rl_memb *m) {
    rl_memb **p = &mode->sbuckets[rl_source_key(m->item) & (mode->nsbuckets - 1)];
    while (*p && *p != m)
        p = &(*p)->snext;
    if (*p)
        *p = m->snext;
}

/* The verdicts of a source's equal callback, asked without the lock before
 * an add, remove or contains (rl_eq_prepare), for the locked part to read:
 * the callback is user code and never runs under the lock. */
typedef struct rl_eq_verdict {
    struct RLRunLoopSource *other; /* retained */
    bool equal;
} rl_eq_verdict;

typedef struct rl_eq_state {
    const struct RLRunLoopSource *s;
    rl_eq_verdict *v;
    size_t n;
    struct rl_eq_state *prev; /* an add from inside an equal callback has its own */
} rl_eq_state;

static __thread rl_eq_state *rl_eq_cur;

/* The loop lock held (what is compared never changes after creation). */
static bool rl_sources_equal_locked(const struct RLRunLoopSource *s, const struct RLRunLoopSource *c) {
    if (c == s)
        return true;
    if (!rl__source_same_shape(s, c))
        return false;
    if (!s->ctx.equal)
        return s->ctx.info == c->ctx.info;
    const rl_eq_state *st = rl_eq_cur;
    if (st && st->s == s) {
        for (size_t i = 0; i < st->n; i++) {
            if (st->v[i].other == c)
                return st->v[i].equal;
        }
    }
    /* Added by another thread after the verdicts were taken: taken as
     * different (two threads adding equal sources at once may both succeed). */
    return false;
}

/* The membership of s, or of a source equal to s, in mode: found through
 * the mode's buckets (s's own membership is there too), so that the loop
 * lock alone suffices, not s's item lock. */
static rl_memb *rl_source_find_locked(struct RLRunLoopSource *s, rl_mode *mode) {
    rl_memb *m;
    if (!mode->nsbuckets)
        return NULL;
    for (m = mode->sbuckets[rl_source_key(s) & (mode->nsbuckets - 1)]; m; m = m->snext) {
        if (rl_sources_equal_locked(s, m->item))
            return m;
    }
    return NULL;
}

static void rl_eq_collect_locked(rl_eq_state *st, rl_mode *mode, struct RLRunLoopSource *s) {
    if (!mode || !mode->nsbuckets)
        return;
    for (rl_memb *m = mode->sbuckets[rl_source_key(s) & (mode->nsbuckets - 1)]; m; m = m->snext) {
        struct RLRunLoopSource *c = m->item;
        if (c == s || !rl__source_same_shape(s, c))
            continue;
        bool seen = false;
        for (size_t i = 0; i < st->n && !seen; i++)
            seen = st->v[i].other == c;
        if (seen)
            continue;
        rl_eq_verdict *v = realloc(st->v, (st->n + 1) * sizeof *v);
        if (!v)
            return; /* out of memory: the rest count as different */
        st->v = v;
        rl_retain_raw(c);
        st->v[st->n++] = (rl_eq_verdict){c, false};
    }
}

/* Before an add, remove or contains of source s in `mode` (every common
 * mode for kRLRunLoopCommonModes): if s has an equal callback, asks it,
 * without the lock, about every source of the same shape there, for the
 * locked part to read (rl_sources_equal_locked). */
static void rl_eq_prepare(rl_eq_state *st, RLRunLoopRef rl, struct RLRunLoopSource *s, RLRunLoopMode mode) {
    *st = (rl_eq_state){s, NULL, 0, rl_eq_cur};
    if (!s->ctx.equal)
        return;
    rl_lock(rl);
    if (rl_is_common(mode)) {
        for (size_t i = 0; i < rl->ncommon; i++)
            rl_eq_collect_locked(st, rl_mode_find(rl, rl->common[i].name), s);
    } else {
        rl_eq_collect_locked(st, rl_mode_find(rl, mode), s);
    }
    rl_unlock(rl);
    for (size_t i = 0; i < st->n; i++)
        st->v[i].equal = s->ctx.equal(s->ctx.info, st->v[i].other->ctx.info);
    rl_eq_cur = st;
}

static void rl_eq_finish(rl_eq_state *st) {
    rl_eq_cur = st->prev;
    for (size_t i = 0; i < st->n; i++)
        RLRelease(st->v[i].other);
    free(st->v);
}

static rl_memb *rl_memb_alloc(void *item, rl_kind kind) {
    if (kind == RL_KIND_TIMER) {
        struct RLRunLoopTimer *t = item;
        if (!t->inline_used) {
            t->inline_used = true;
            /* Not mode_link, which timers never use: it would be one more
             * cache line per add. */
            memset(&t->inline_memb, 0, offsetof(rl_memb, mode_link));
            return &t->inline_memb;
        }
    }
    return calloc(1, sizeof(rl_memb));
}

static void rl_memb_free(rl_memb *m) {
    if (m->kind == RL_KIND_TIMER) {
        struct RLRunLoopTimer *t = m->item;
        if (m == &t->inline_memb) {
            t->inline_used = false;
            return;
        }
    }
    free(m);
}

/* Adds item to mode (no-op if present). The loop lock and what guards the
 * item held (its item lock for a source; for a timer or an observer, rl is
 * its home). Inlined where
 * the kind is a constant: adding a timer is a hot path. */
__attribute__((always_inline)) static inline bool rl_add_locked(RLRunLoopRef rl, void *item, rl_kind kind,
                                                               rl_mode *mode, rl_defer *d, const char *fn) {
    if (kind == RL_KIND_SOURCE) {
        if (rl_source_find_locked(item, mode))
            return true; /* it, or a source equal to it, is there */
        if (!rl_sbuckets_reserve(mode))
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    } else if (rl_memb_find(item, kind, mode)) {
        return true;
    }
    rl_memb *m = rl_memb_alloc(item, kind);
    if (!m)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    m->item = item;
    m->kind = kind;
    m->rl = rl;
    m->mode = mode;
    if (kind == RL_KIND_TIMER) {
        if (!rl__tset_add(&mode->timers, m)) {
            rl_memb_free(m);
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        }
    } else if (kind == RL_KIND_SOURCE && !rl_fd_register(rl, item)) {
        rl_memb_free(m);
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    }
    rl_hold_raw(item);
    TAILQ_INSERT_TAIL(rl__item_membs(item, kind), m, item_link);
    if (kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_INSERT_TAIL(&mode->sources, m, mode_link);
        rl_sbucket_insert(mode, m);
        mode->nsources++;
        if (s->fdobj)
            rl_fd_update(rl, s); /* registered above; now in the mode: its wish may grow */
        if (s->signalled)
            rl_ready_push(m);
        rl__defer_push(d, RL_DEFER_SCHEDULE, s, rl, mode->name);
    } else if (kind == RL_KIND_OBSERVER) {
        rl_observer_insert(mode, m);
        mode->nobservers++;
        atomic_fetch_or_explicit(&mode->observer_mask, ((struct RLRunLoopObserver *)item)->activities,
                                 memory_order_relaxed);
    } else {
        rl_rearm_for_added_timer(rl, mode, item);
    }
    return true;
}

/* Removes one membership; defers the cancel callout and the release. A
 * source's cancel goes to `cancel_for`: the source the caller named, which
 * may be one equal to the source in the mode (as CF). The loop lock held,
 * and for a source the item lock of the member (m->item). */
static void rl_remove_memb_as_locked(rl_memb *m, void *cancel_for, rl_defer *d) {
    void *item = m->item;
    RLRunLoopRef rl = m->rl;
    rl_mode *mode = m->mode;
    TAILQ_REMOVE(rl__item_membs(item, m->kind), m, item_link);
    if (m->kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_REMOVE(&mode->sources, m, mode_link);
        rl_sbucket_remove(mode, m);
        mode->nsources--;
        rl_ready_unlink(m);
        if (s->fdobj) {
            if (!rl_item_in_loop(s, RL_KIND_SOURCE, rl))
                rl_fd_unregister(rl, s);
            else
                rl_fd_update(rl, s);
        }
        rl__defer_push(d, RL_DEFER_CANCEL, cancel_for, rl, mode->name);
    } else if (m->kind == RL_KIND_OBSERVER) {
        TAILQ_REMOVE(&mode->observers, m, mode_link);
        mode->nobservers--;
        rl_mode_recompute_mask(mode);
    } else {
        rl__tset_remove(&mode->timers, m);
        rl_rearm_if_waiting(rl);
    }
    if (m->kind == RL_KIND_OBSERVER && ((struct RLRunLoopObserver *)item)->pins)
        ((struct RLRunLoopObserver *)item)->held_releases++; /* see rl_do_observers */
    else
        rl_defer_unhold(d, item);
    rl_memb_free(m);
}

static void rl_remove_memb_locked(rl_memb *m, rl_defer *d) { rl_remove_memb_as_locked(m, m->item, d); }

static size_t rl_citem_hash(const void *item) {
    uint64_t x = (uint64_t)(uintptr_t)item; /* mixed: the low bits of a pointer are mostly zero */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* The index slot that holds item, or the empty slot where it would go.
 * The index is never full (rl_citem_reserve). */
static size_t rl_citem_slot(RLRunLoopRef rl, const void *item) {
    size_t mask = rl->capcidx - 1;
    for (size_t i = rl_citem_hash(item) & mask;; i = (i + 1) & mask) {
        size_t v = rl->cidx[i];
        if (v == 0 || rl->citems[v - 1].item == item)
            return i;
    }
}

static bool rl_citem_has(RLRunLoopRef rl, void *item) {
    return rl->capcidx && rl->cidx[rl_citem_slot(rl, item)] != 0;
}

/* Room for `need` items with the index at most half full. */
static bool rl_citem_reserve(RLRunLoopRef rl, size_t need) {
    if (need * 2 <= rl->capcidx)
        return true;
    size_t cap = rl->capcidx ? rl->capcidx * 2 : 16;
    while (cap < need * 2)
        cap *= 2;
    size_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return false;
    free(rl->cidx);
    rl->cidx = idx;
    rl->capcidx = cap;
    for (size_t k = 0; k < rl->nci; k++)
        rl->cidx[rl_citem_slot(rl, rl->citems[k].item)] = k + 1;
    return true;
}

/* Remembers item (not yet present); retains nothing. */
static bool rl_citem_add(RLRunLoopRef rl, void *item, rl_kind kind) {
    rl_citem *a = rl_grow(rl->citems, &rl->capci, rl->nci + 1, sizeof *a);
    if (a)
        rl->citems = a;
    if (!a || !rl_citem_reserve(rl, rl->nci + 1))
        return false;
    rl->citems[rl->nci] = (rl_citem){item, kind};
    rl->cidx[rl_citem_slot(rl, item)] = ++rl->nci;
    return true;
}

/* Forgets item if present, deferring the release of its reference. */
static void rl_citem_remove(RLRunLoopRef rl, void *item, rl_defer *d) {
    if (!rl->capcidx)
        return;
    size_t hole = rl_citem_slot(rl, item);
    size_t v = rl->cidx[hole];
    if (v == 0)
        return;
    rl_defer_unhold(d, item);
    /* Linear probing without tombstones: later entries of the same run
     * move back into the hole unless that would put them before their
     * home slot. */
    size_t mask = rl->capcidx - 1;
    for (size_t j = (hole + 1) & mask; rl->cidx[j] != 0; j = (j + 1) & mask) {
        size_t home = rl_citem_hash(rl->citems[rl->cidx[j] - 1].item) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            rl->cidx[hole] = rl->cidx[j];
            hole = j;
        }
    }
    rl->cidx[hole] = 0;
    /* The array stays dense: its last item moves into the gap. */
    size_t k = v - 1, last = --rl->nci;
    if (k != last) {
        rl->citems[k] = rl->citems[last];
        rl->cidx[rl_citem_slot(rl, rl->citems[k].item)] = k + 1;
    }
}

/* A source's per-loop part of invalidation: m->rl locked, item lock held. */
static void rl_remove_source_from_loop_locked(struct RLRunLoopSource *s, RLRunLoopRef rl, rl_defer *d) {
    rl_memb *m, *next;
    bool any = false;
    for (m = TAILQ_FIRST(&s->membs); m; m = next) {
        next = TAILQ_NEXT(m, item_link);
        if (m->rl == rl) {
            any = true;
            rl_remove_memb_locked(m, d);
        }
    }
    if (any)
        rl_citem_remove(rl, s, d);
}

void rl__source_invalidate(struct RLRunLoopSource *s, rl_defer *d) {
    rl_loopset ls;
    rl_loopset_init(&ls);
    rl__olock_lock(&s->lock);
    bool was = s->valid;
    if (was) {
        /* From here no loop adds it (rl_add_item checks under this lock),
         * so the loops noted now are all it is in. */
        rl__poke(s->valid, false);
        rl__poke(s->signalled, false);
        rl_loopset_collect(&ls, s, NULL);
    }
    rl__olock_unlock(&s->lock);
    for (size_t i = 0; i < ls.n; i++) {
        RLRunLoopRef rl = ls.a[i];
        rl_lock(rl);
        rl__olock_lock(&s->lock);
        rl_remove_source_from_loop_locked(s, rl, d);
        rl__olock_unlock(&s->lock);
        rl_unlock(rl);
    }
    rl_loopset_free(&ls);
}

void rl__remove_item_everywhere_locked(void *item, rl_kind kind, rl_defer *d) {
    struct rl_membq *q = rl__item_membs(item, kind);
    while (!TAILQ_EMPTY(q)) {
        rl_memb *m = TAILQ_FIRST(q);
        rl_citem_remove(m->rl, item, d);
        rl_remove_memb_locked(m, d);
    }
}

void rl__timer_moved_locked(struct RLRunLoopTimer *t) {
    rl_memb *m;
    TAILQ_FOREACH(m, &t->membs, item_link) {
        if (!rl__tset_update(&m->mode->timers, m))
            abort(); /* out of memory re-filing a timer: its heaps would lie */
    }
    rl_rearm_if_waiting(rl__timer_loop(t));
}

/* Adds item to the common pseudo-mode: remembered, and added to every
 * common mode (modes named common but not yet created are created, as CF). */
static bool rl_add_common_locked(RLRunLoopRef rl, void *item, rl_kind kind, rl_defer *d, const char *fn) {
    if (!rl_citem_has(rl, item)) {
        if (!rl_citem_add(rl, item, kind))
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        rl_hold_raw(item);
    }
    for (size_t i = 0; i < rl->ncommon; i++) {
        rl_mode *m = rl_mode_get(rl, rl->common[i].name, fn);
        if (!m || !rl_add_locked(rl, item, kind, m, d, fn))
            return false;
    }
    return true;
}

static void rl_remove_common_locked(RLRunLoopRef rl, void *item, rl_kind kind, rl_defer *d) {
    if (!rl_citem_has(rl, item))
        return;
    rl_citem_remove(rl, item, d);
    for (size_t i = 0; i < rl->ncommon; i++) {
        rl_mode *m = rl_mode_find(rl, rl->common[i].name);
        rl_memb *x = m ? rl_memb_find(item, kind, m) : NULL;
        if (x)
            rl_remove_memb_locked(x, d);
    }
}

/* ------------------------------------------------------------------ */
/* public add / remove / contains                                      */

static bool rl_item_valid(void *item, rl_kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return ((struct RLRunLoopSource *)item)->valid;
    case RL_KIND_TIMER:
        return ((struct RLRunLoopTimer *)item)->valid;
    default:
        return ((struct RLRunLoopObserver *)item)->valid;
    }
}

static const rl__class *rl_kind_class(rl_kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return &rl__source_class;
    case RL_KIND_TIMER:
        return &rl__timer_class;
    default:
        return &rl__observer_class;
    }
}

static bool rl_args_ok(RLRunLoopRef rl, void *item, rl_kind kind, RLRunLoopMode mode, const char *fn) {
    return rl_check_loop(rl, fn) && rl__object_check(item, rl_kind_class(kind), fn) && rl_mode_name_ok(mode, fn);
}

/* Adds a valid item to `mode` (or the common modes) of rl; rl locked and
 * what guards the item held. */
__attribute__((always_inline)) static inline bool rl_add_to_mode_locked(RLRunLoopRef rl, void *item, rl_kind kind,
                                                                       RLRunLoopMode mode, rl_defer *d,
                                                                       const char *fn) {
    if (rl_is_common(mode))
        return rl_add_common_locked(rl, item, kind, d, fn);
    rl_mode *m = rl_mode_get(rl, mode, fn);
    return m && rl_add_locked(rl, item, kind, m, d, fn);
}

/* A timer or an observer not at home in rl (rl locked): rl becomes its home
 * if it has none (1 or 0 as rl_add_item_locked); -1 if it has another. Out
 * of line: the usual add finds the item at home already. */
__attribute__((noinline)) static int rl_add_item_claim(RLRunLoopRef rl, void *item, rl_kind kind, RLRunLoopMode mode,
                                                       rl_defer *d, const char *fn) {
    /* Its home becomes rl only under rl's lock, which is held: a home seen
     * here is someone else's. */
    if (rl_home_get(item, kind))
        return -1;
    rl__olock *ol = rl_item_olock(item, kind);
    rl__olock_lock(ol);
    int r;
    if (rl_home_get(item, kind)) {
        r = -1;
    } else if (!rl_item_valid(item, kind)) {
        r = rl__fail(kRLErrorInvalidObject, fn, "%p has been invalidated", item);
    } else {
        rl_home_set_locked(rl, item, kind);
        r = rl_add_to_mode_locked(rl, item, kind, mode, d, fn);
    }
    rl__olock_unlock(ol);
    return r;
}

/* The add proper, rl locked: 1 done, 0 failed (error set), -1 the item
 * (a timer or an observer) is at home in another loop: the caller unlocks,
 * moves it out (rl_item_move_out) and tries again. */
__attribute__((always_inline)) static inline int rl_add_item_locked(RLRunLoopRef rl, void *item, rl_kind kind,
                                                                   RLRunLoopMode mode, rl_defer *d,
                                                                   const char *fn) {
    if (atomic_load_explicit(&rl->dead, memory_order_relaxed))
        return rl__fail(kRLErrorInvalidState, fn, "the run loop's thread has exited");
    rl__olock *ol = NULL;
    if (kind == RL_KIND_SOURCE) {
        ol = rl_item_olock(item, kind);
        rl__olock_lock(ol);
    } else if (RL__UNLIKELY(rl_home_get(item, kind) != rl)) {
        return rl_add_item_claim(rl, item, kind, mode, d, fn);
    }
    bool ok;
    if (!rl_item_valid(item, kind))
        ok = rl__fail(kRLErrorInvalidObject, fn, "%p has been invalidated", item);
    else
        ok = rl_add_to_mode_locked(rl, item, kind, mode, d, fn);
    if (ol)
        rl__olock_unlock(ol);
    return ok;
}

__attribute__((always_inline)) static inline bool rl_add_item(RLRunLoopRef rl, void *item, rl_kind kind,
                                                              RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_eq_state eq;
    if (kind == RL_KIND_SOURCE)
        rl_eq_prepare(&eq, rl, item, mode);
    rl_defer d;
    rl__defer_init(&d);
    int r;
    for (;;) {
        rl_lock(rl);
        r = rl_add_item_locked(rl, item, kind, mode, &d, fn);
        rl_unlock(rl);
        if (RL__LIKELY(r >= 0) || !rl_item_move_out(item, kind, rl, fn))
            break;
    }
    if (d.n)
        rl__defer_run(&d);
    if (kind == RL_KIND_SOURCE)
        rl_eq_finish(&eq);
    return r > 0;
}

/* Locks what guards item's memberships in rl, rl locked: a source's item
 * lock (returned), nothing for a timer or observer at home in rl; false if
 * it is at home elsewhere (so in none of rl's modes). */
static inline bool rl_item_guard(RLRunLoopRef rl, void *item, rl_kind kind, rl__olock **ol) {
    *ol = NULL;
    if (kind != RL_KIND_SOURCE)
        return rl_home_get(item, kind) == rl;
    *ol = rl_item_olock(item, kind);
    rl__olock_lock(*ol);
    return true;
}

__attribute__((always_inline)) static inline bool rl_remove_item(RLRunLoopRef rl, void *item, rl_kind kind,
                                                                 RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_eq_state eq;
    if (kind == RL_KIND_SOURCE)
        rl_eq_prepare(&eq, rl, item, mode);
    rl_defer d;
    rl__defer_init(&d);
    rl_lock(rl);
    if (kind == RL_KIND_SOURCE && !rl_is_common(mode)) {
        /* The member found may be a source equal to this one: its item
         * lock, not this one's, guards the membership. */
        rl_mode *m = rl_mode_find(rl, mode);
        rl_memb *x = m ? rl_source_find_locked(item, m) : NULL;
        if (x) {
            struct RLRunLoopSource *member = x->item;
            rl__olock_lock(&member->lock);
            rl_remove_memb_as_locked(x, item, &d);
            rl__olock_unlock(&member->lock);
        }
    } else {
        rl__olock *ol;
        if (rl_item_guard(rl, item, kind, &ol)) {
            if (rl_is_common(mode)) {
                rl_remove_common_locked(rl, item, kind, &d);
            } else {
                rl_mode *m = rl_mode_find(rl, mode);
                rl_memb *x = m ? rl_memb_find(item, kind, m) : NULL;
                if (x)
                    rl_remove_memb_locked(x, &d);
            }
        }
        if (ol)
            rl__olock_unlock(ol);
    }
    rl_unlock(rl);
    if (d.n)
        rl__defer_run(&d);
    if (kind == RL_KIND_SOURCE)
        rl_eq_finish(&eq);
    return true;
}

static bool rl_contains_item(RLRunLoopRef rl, void *item, rl_kind kind, RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_eq_state eq;
    if (kind == RL_KIND_SOURCE)
        rl_eq_prepare(&eq, rl, item, mode);
    rl_lock(rl);
    bool has = false;
    if (rl_is_common(mode)) {
        has = rl_citem_has(rl, item);
    } else if (kind == RL_KIND_SOURCE) {
        rl_mode *m = rl_mode_find(rl, mode);
        has = m && rl_source_find_locked(item, m); /* the mode's buckets: the loop lock */
    } else if (rl_home_get(item, kind) == rl) {
        rl_mode *m = rl_mode_find(rl, mode);
        has = m && rl_memb_find(item, kind, m);
    }
    rl_unlock(rl);
    if (kind == RL_KIND_SOURCE)
        rl_eq_finish(&eq);
    return has;
}

bool RLRunLoopAddSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return rl_add_item(rl, s, RL_KIND_SOURCE, mode, "RLRunLoopAddSource");
}
bool RLRunLoopRemoveSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return rl_remove_item(rl, s, RL_KIND_SOURCE, mode, "RLRunLoopRemoveSource");
}
bool RLRunLoopContainsSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return rl_contains_item(rl, s, RL_KIND_SOURCE, mode, "RLRunLoopContainsSource");
}
bool RLRunLoopAddTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    return rl_add_item(rl, t, RL_KIND_TIMER, mode, "RLRunLoopAddTimer");
}
bool RLRunLoopRemoveTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    return rl_remove_item(rl, t, RL_KIND_TIMER, mode, "RLRunLoopRemoveTimer");
}
bool RLRunLoopContainsTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    return rl_contains_item(rl, t, RL_KIND_TIMER, mode, "RLRunLoopContainsTimer");
}
bool RLRunLoopAddObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return rl_add_item(rl, o, RL_KIND_OBSERVER, mode, "RLRunLoopAddObserver");
}
bool RLRunLoopRemoveObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return rl_remove_item(rl, o, RL_KIND_OBSERVER, mode, "RLRunLoopRemoveObserver");
}
bool RLRunLoopContainsObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return rl_contains_item(rl, o, RL_KIND_OBSERVER, mode, "RLRunLoopContainsObserver");
}

/* ------------------------------------------------------------------ */
/* modes: public                                                       */

bool RLRunLoopAddCommonMode(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = "RLRunLoopAddCommonMode";
    if (!rl_check_loop(rl, fn) || !rl_mode_name_ok(mode, fn))
        return false;
    if (rl_is_common(mode))
        return rl__fail(kRLErrorInvalidArgument, fn, "kRLRunLoopCommonModes cannot itself be a common mode");
    rl_defer d;
    rl__defer_init(&d);
    rl_lock(rl);
    bool ok = true;
    if (!rl_common_find(rl, mode)) {
        rl_common_name *a = rl_grow(rl->common, &rl->capcommon, rl->ncommon + 1, sizeof *a);
        char *copy = strdup(mode);
        if (!a || !copy) {
            if (a)
                rl->common = a;
            free(copy);
            ok = rl__fail(kRLErrorNoMemory, fn, "out of memory");
        } else {
            rl->common = a;
            rl->common[rl->ncommon++] = (rl_common_name){copy};
            rl_mode *m = rl_mode_find(rl, mode);
            if (m)
                m->common = true;
            /* Like CF, the mode itself comes into being only when an item
             * lands in it. */
            for (size_t i = 0; ok && i < rl->nci; i++) {
                void *item = rl->citems[i].item;
                rl_kind kind = rl->citems[i].kind;
                rl__olock *ol;
                if (!rl_item_guard(rl, item, kind, &ol))
                    continue; /* moved to another loop since */
                rl_mode *mm = rl_mode_get(rl, mode, fn);
                ok = mm && rl_add_locked(rl, item, kind, mm, &d, fn);
                if (ol)
                    rl__olock_unlock(ol);
            }
        }
    }
    rl_unlock(rl);
    rl__defer_run(&d);
    return ok;
}

RLStringRef RLRunLoopCopyCurrentMode(RLRunLoopRef rl) {
    if (!rl_check_loop(rl, __func__))
        return NULL;
    rl_lock(rl);
    RLStringRef s = rl->frame ? RLStringCreateWithCString(NULL, rl->frame->mode->name, kRLStringEncodingUTF8) : NULL;
    rl_unlock(rl);
    return s;
}

RLArrayRef RLRunLoopCopyAllModes(RLRunLoopRef rl) {
    if (!rl_check_loop(rl, __func__))
        return NULL;
    RLArrayRef out = NULL;
    rl_lock(rl);
    const char **names = malloc((rl->nmodes + 1) * sizeof *names);
    if (names) {
        for (size_t i = 0; i < rl->nmodes; i++)
            names[i] = rl->modes[i]->name;
        out = RLArrayCreate(NULL, names, (RLIndex)rl->nmodes);
    }
    rl_unlock(rl);
    free(names);
    if (!names)
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    return out;
}

RLAbsoluteTime RLRunLoopGetNextTimerFireDate(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = "RLRunLoopGetNextTimerFireDate";
    if (!rl_check_loop(rl, fn) || !rl_mode_name_ok(mode, fn))
        return 0;
    rl_lock(rl);
    rl_mode *m = rl_mode_find(rl, mode);
    RLAbsoluteTime date = 0;
    if (!m || !rl__tset_earliest_fire(&m->timers, &date))
        date = 0;
    rl_unlock(rl);
    return date;
}

/* ------------------------------------------------------------------ */
/* wake-up, stop, waiting                                              */

bool RLRunLoopIsWaiting(RLRunLoopRef rl) {
    if (!rl_check_loop(rl, "RLRunLoopIsWaiting"))
        return false;
    return atomic_load(&rl->sleeping) != 0;
}

bool RLRunLoopWakeUp(RLRunLoopRef rl) {
    if (!rl_check_loop(rl, "RLRunLoopWakeUp"))
        return false;
    rl_wake(rl);
    return true;
}

bool RLRunLoopStop(RLRunLoopRef rl) {
    if (!rl_check_loop(rl, "RLRunLoopStop"))
        return false;
    rl_lock(rl);
    /* As CF: only a running loop can be stopped; the innermost run returns. */
    if (rl->frame)
        rl->frame->stopped = true;
    rl_unlock(rl);
    rl_wake(rl);
    return true;
}

/* ------------------------------------------------------------------ */
/* perform requests (the queue is RLRunLoopPerform.c's)                */

rl__perform_queue *rl__runloop_perform_queue(RLRunLoopRef rl, const char *fname) {
    return rl_check_loop(rl, fname) ? &rl->pq : NULL;
}

bool rl__runloop_mode_create(RLRunLoopRef rl, RLRunLoopMode mode, const char *fname) {
    rl_lock(rl);
    bool ok = rl_mode_get(rl, mode, fname) != NULL;
    rl_unlock(rl);
    return ok;
}

static bool rl_do_blocks(RLRunLoopRef rl, rl_mode *m) {
    uint32_t n = rl__perform_run(&rl->pq, m);
    rl->pass_ran += n;
    return n > 0;
}

/* Pacing a stream of requests from another thread, before the loop waits
 * (rl->pass_ran: requests run since it last waited).
 *
 * The last thread that woke the loop runs on this CPU: it is runnable right
 * now (this loop preempted it when the wake-up's write made this thread
 * runnable) and cannot run while this loop does. If the loop sleeps at
 * once, that thread's next request wakes it again (an eventfd write), and
 * the loop preempts it again: a few requests per two context switches and
 * two system calls. Yielding first lets it run on; its requests find the
 * loop awake (no system call on its side), and the next pass takes them
 * all. Measured: 1e6 requests from a producer on the same CPU went from
 * ~1500 wake-ups to under 20, and ~35 to ~50 M/s; a same-CPU round trip
 * gains too (the sender's next request needs no write). When nothing else
 * is runnable here the yield returns at once.
 *
 * The waker runs on another CPU, the pass ran many requests and more are
 * queued already: every pass costs the producer a few cache-line transfers
 * (the queue's lock, the wake-up flags), so passes that take a few dozen
 * requests each slow it down. A pause of a couple of microseconds lets the
 * next batch grow. A round trip (one request between waits) never pauses. */
static void rl_pace_requests(RLRunLoopRef rl) {
    enum { RL_STREAM_MIN = 32, RL_STREAM_PAUSE_NS = 2000 };
    if (!RL_TRICK_PACE || rl->pass_ran == 0)
        return;
    int cpu = rl__spin_cpu();
    int waker = atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed);
    if (cpu < 0 || waker < 0)
        return;
    if (waker == cpu) {
        sched_yield();
        return;
    }
    if (rl->pass_ran < RL_STREAM_MIN || !atomic_load_explicit(&rl->wake_pending, memory_order_relaxed))
        return;
    int64_t until = rl__spin_now() + RL_STREAM_PAUSE_NS;
    while (rl__spin_now() < until)
        rl__cpu_relax();
}

/* ------------------------------------------------------------------ */
/* the iteration                                                       */

static bool rl_mode_is_empty(RLRunLoopRef rl, rl_mode *m) {
    rl_lock(rl);
    bool empty = m->nsources == 0 && rl__tset_count(&m->timers) == 0;
    rl_unlock(rl);
    return empty && !rl__perform_has_for(&rl->pq, m);
}

/* What guards o held (its home's lock). */
static void rl_observer_unpin(struct RLRunLoopObserver *o, rl_defer *d) {
    if (--o->pins > 0)
        return;
    for (; o->held_releases > 0; o->held_releases--)
        rl_defer_unhold(d, o);
}

/* After o's callout (if `went`): unpins it, and invalidates a one-shot
 * observer. rl locked; o normally at home in rl, but a callout may have
 * moved it to another loop: then its home's lock is taken instead, rl's
 * dropped meanwhile (never both). */
static void rl_observer_after(RLRunLoopRef rl, struct RLRunLoopObserver *o, bool went, rl_defer *d) {
    RLRunLoopRef h = rl;
    if (RL__UNLIKELY(rl_home_get(o, RL_KIND_OBSERVER) != rl)) {
        rl_unlock(rl);
        h = rl__item_lock(o, RL_KIND_OBSERVER);
    }
    if (went) {
        o->firing = false;
        if (!o->repeats && o->valid)
            rl__observer_invalidate_locked(o, d);
    }
    rl_observer_unpin(o, d);
    if (RL__UNLIKELY(h != rl)) {
        rl__item_unlock(o, RL_KIND_OBSERVER, h);
        rl_lock(rl);
    }
}

static void rl_do_observers(RLRunLoopRef rl, rl_mode *m, RLRunLoopActivity act) {
    struct RLRunLoopObserver *small[16], **list = small;
    size_t n = 0;
    /* Most passes have no observer for most activities: skip the lock. A
     * stale read only means an observer added from another thread this very
     * moment is called from the next activity on. */
    if (!(atomic_load_explicit(&m->observer_mask, memory_order_relaxed) & act))
        return;
    rl_defer d;
    rl__defer_init(&d);
    rl_lock(rl);
    if (m->nobservers > 16)
        list = malloc(m->nobservers * sizeof *list);
    rl_memb *x;
    TAILQ_FOREACH(x, &m->observers, mode_link) {
        struct RLRunLoopObserver *o = x->item;
        if (list && o->valid && (o->activities & act) && !o->firing) {
            /* Pinned, not retained: the mode's reference on o stays (or is
             * held back) until o is unpinned, without two atomic
             * operations per callout. */
            o->pins++;
            list[n++] = o;
        }
    }
    /* One lock round per callout: the state after one callout and the check
     * before the next share it. An earlier callout may have invalidated a
     * later observer, which is then skipped. */
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopObserver *o = list[i];
        bool go = rl_home_get(o, RL_KIND_OBSERVER) == rl && o->valid && !o->firing;
        if (go)
            o->firing = true;
        rl_unlock(rl);
        if (go)
            o->callout(o, act, o->ctx.info);
        rl_lock(rl);
        rl_observer_after(rl, o, go, &d);
        /* As CF: a one-shot observer gives its context back right after
         * its own callout, before the next observer is called. */
        if (d.n) {
            rl_unlock(rl);
            rl__defer_run(&d);
            rl_lock(rl);
        }
    }
    rl_unlock(rl);
    if (d.n)
        rl__defer_run(&d);
    if (list != small)
        free(list);
}

/* A source and its order side by side: sorting compares keys in the array,
 * not through 100k pointers into the sources (a cache miss each). */
typedef struct rl_okey {
    RLIndex order;
    struct RLRunLoopSource *s;
} rl_okey;

/* Stable merge of the sorted runs k[lo, mid) and k[mid, hi) through tmp. */
static void rl_merge_keys(rl_okey *k, rl_okey *tmp, size_t lo, size_t mid, size_t hi) {
    size_t i = lo, j = mid, o = lo;
    while (i < mid && j < hi)
        tmp[o++] = k[j].order < k[i].order ? k[j++] : k[i++];
    while (i < mid)
        tmp[o++] = k[i++];
    while (j < hi)
        tmp[o++] = k[j++];
    memcpy(k + lo, tmp + lo, (hi - lo) * sizeof *k);
}

/* Sorts by order, keeping signal order among equals (as the perform order
 * is defined): O(n) when already in order, the usual case (one order for
 * all), a bottom-up merge sort, O(n log n), otherwise. */
static void rl_sort_sources(struct RLRunLoopSource **a, size_t n) {
    size_t i = 1;
    while (i < n && a[i - 1]->order <= a[i]->order)
        i++;
    if (i >= n)
        return;
    rl_okey *k = malloc(2 * n * sizeof *k);
    if (!k) {
        /* Out of memory: the same order, by insertion (slow, but right). */
        for (; i < n; i++) {
            struct RLRunLoopSource *s = a[i];
            size_t j = i;
            for (; j > 0 && a[j - 1]->order > s->order; j--)
                a[j] = a[j - 1];
            a[j] = s;
        }
        return;
    }
    for (size_t j = 0; j < n; j++)
        k[j] = (rl_okey){a[j]->order, a[j]};
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo + w < n; lo += 2 * w)
            rl_merge_keys(k, k + n, lo, lo + w, lo + 2 * w < n ? lo + 2 * w : n);
    }
    for (size_t j = 0; j < n; j++)
        a[j] = k[j].s;
    free(k);
}

/* Takes the signalled sources of mode m off its ready list (retained), in
 * perform order. Entries of sources no longer signalled (performed through
 * another mode or loop) or invalid are dropped. Loop lock held. */
static size_t rl_take_ready(rl_mode *m, struct RLRunLoopSource ***out, struct RLRunLoopSource **small,
                            size_t nsmall) {
    size_t n = 0;
    struct RLRunLoopSource **a = m->nready <= nsmall ? small : malloc(m->nready * sizeof *a);
    if (!a)
        return 0; /* out of memory: they stay listed for the next pass */
    rl_memb *x;
    while ((x = TAILQ_FIRST(&m->ready)) != NULL) {
        struct RLRunLoopSource *s = x->item;
        rl_ready_unlink(x);
        /* Read without the item lock: the pass checks again under it before
         * performing, and a signal that this read misses pushes the
         * membership again after this loop lock is released. */
        if (rl__peek(s->valid) && rl__peek(s->signalled)) {
            rl_retain_raw(s);
            a[n++] = s;
        }
    }
    rl_sort_sources(a, n);
    *out = a;
    return n;
}

/* What a pass of a mode took off its ready list and has not performed yet:
 * a[next..n). As in CF, a source keeps its signal until its own perform, so
 * a run of the same mode nested in an earlier perform must see them. */
struct rl_inflight {
    struct RLRunLoopSource **a;
    size_t next, n;
    bool requeued; /* a nested pass put a[next..n) back on the ready list */
    struct rl_inflight *outer;
};

/* Puts the still signalled sources that enclosing passes of m took and have
 * not reached back at the head of m's ready list, in their order, for a
 * pass of m nested in one of their performs. Loop lock held. */
static void rl_requeue_inflight(rl_mode *m) {
    for (struct rl_inflight *fl = m->inflight; fl; fl = fl->outer) {
        for (size_t j = fl->n; j-- > fl->next;) {
            struct RLRunLoopSource *s = fl->a[j];
            rl__olock_lock(&s->lock);
            rl_memb *x = s->signalled && s->valid ? rl_memb_find(s, RL_KIND_SOURCE, m) : NULL;
            rl__olock_unlock(&s->lock);
            if (x && !x->queued) {
                x->queued = true;
                TAILQ_INSERT_HEAD(&m->ready, x, ready_link);
                m->nready++;
            }
        }
        fl->requeued = true;
    }
}

static bool rl_do_sources0(RLRunLoopRef rl, rl_mode *m, bool stop_after_handle) {
    struct RLRunLoopSource *small[16], **a = small;
    rl_lock(rl);
    if (RL__UNLIKELY(m->inflight != NULL))
        rl_requeue_inflight(m); /* nested in a perform of an outer pass of m */
    size_t n = m->nready ? rl_take_ready(m, &a, small, 16) : 0;
    rl_unlock(rl);
    if (n == 0) {
        if (a != small)
            free(a);
        return false;
    }
    /* Only this thread reads m->inflight. */
    struct rl_inflight fl = {a, 0, n, false, m->inflight};
    m->inflight = &fl;
    bool handled = false;
    size_t i = 0;
    for (; i < n; i++) {
        if (RL__UNLIKELY(!rl_of_this_process(rl)))
            break; /* a callout forked: the rest is the parent's */
        struct RLRunLoopSource *s = a[i];
        fl.next = i + 1;
        bool requeued = fl.requeued;
        if (RL__UNLIKELY(requeued))
            rl_lock(rl);
        rl__olock_lock(&s->lock);
        /* Skipped if a nested run performed it meanwhile (signal gone) or
         * it was invalidated. */
        bool go = s->signalled && s->valid;
        if (go)
            rl__poke(s->signalled, false);
        rl_memb *x = go && requeued ? rl_memb_find(s, RL_KIND_SOURCE, m) : NULL;
        rl__olock_unlock(&s->lock);
        if (RL__UNLIKELY(requeued)) {
            /* A nested pass put it back on the list: it leaves again. */
            if (x)
                rl_ready_unlink(x);
            rl_unlock(rl);
        }
        if (go && s->ctx.perform) {
            s->ctx.perform(s->ctx.info);
            handled = true;
        } else if (go) {
            handled = true;
        }
        RLRelease(s);
        if (stop_after_handle && handled) {
            i++;
            break;
        }
    }
    m->inflight = fl.outer;
    /* Sources not reached keep their signal for the next pass, ahead of
     * those signalled since (put back at the head, last first). */
    if (i < n) {
        rl_lock(rl);
        for (size_t j = n; j-- > i;) {
            rl__olock_lock(&a[j]->lock);
            rl_memb *x = a[j]->signalled && a[j]->valid ? rl_memb_find(a[j], RL_KIND_SOURCE, m) : NULL;
            rl__olock_unlock(&a[j]->lock);
            if (x && !x->queued) {
                x->queued = true;
                TAILQ_INSERT_HEAD(&m->ready, x, ready_link);
                m->nready++;
            }
        }
        rl_unlock(rl);
    }
    for (size_t j = i; j < n; j++)
        RLRelease(a[j]);
    if (a != small)
        free(a);
    return handled;
}

static int rl_cmp_timer_memb(const void *x, const void *y) {
    const struct RLRunLoopTimer *a = (*(rl_memb *const *)x)->item, *b = (*(rl_memb *const *)y)->item;
    if (a->fire_date != b->fire_date)
        return a->fire_date < b->fire_date ? -1 : 1;
    return rl__timer_stamp_before(a, b) ? -1 : rl__timer_stamp_before(b, a);
}

static void rl_fire_timer(RLRunLoopRef rl, rl_mode *m, struct RLRunLoopTimer *t) {
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    rl_lock(rl);
    /* Only at home in rl is its state under rl's lock (a callout may have
     * moved it meanwhile); m is a mode of rl: a membership in m means t is
     * in rl. */
    bool go = rl_home_get(t, RL_KIND_TIMER) == rl && t->valid && !t->firing && t->fire_date <= now &&
              rl__memb_in_mode(t, RL_KIND_TIMER, m);
    if (go) {
        t->firing = true;
        t->moved_in_fire = false;
        t->ctx_pinned = t->ctx.retain != NULL;
    }
    rl_unlock(rl);
    if (!go)
        return;
    /* As CF: the callout holds its own reference on info (the context's
     * retain and release around it), so it may invalidate and release its
     * own timer and still use info. The context is fixed at creation; what
     * could free info meanwhile, an invalidation, waits for the pin. */
    void *info = t->ctx.info;
    if (t->ctx.retain) {
        info = (void *)t->ctx.retain(info);
        rl_defer pd;
        rl__defer_init(&pd);
        RLRunLoopRef ph = rl__item_lock(t, RL_KIND_TIMER); /* rl, unless the retain callback moved it */
        t->ctx_pinned = false;
        if (t->ctx_release_held) {
            t->ctx_release_held = false;
            rl__defer_ctx_release(&pd, t->ctx.release, t->ctx.info);
        }
        rl__item_unlock(t, RL_KIND_TIMER, ph);
        if (pd.n)
            rl__defer_run(&pd);
    }
    if (t->callout) /* a timer without a callout keeps its mode alive and does nothing */
        t->callout(t, info);
    if (t->ctx.retain && t->ctx.release)
        t->ctx.release(info);
    rl_defer d;
    rl__defer_init(&d);
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER); /* rl, unless the callout moved it */
    t->firing = false;
    rl__timer_after_fire_locked(t, RLAbsoluteTimeGetCurrent(), &d);
    rl__item_unlock(t, RL_KIND_TIMER, h);
    rl__defer_run(&d);
}

static void rl_do_timers(RLRunLoopRef rl, rl_mode *m) {
    rl_lock(rl);
    if (rl__tset_count(&m->timers) == 0) {
        rl_unlock(rl); /* no clock read for a mode without timers */
        return;
    }
    rl_memb **due = rl->due;
    size_t n = 0, cap = rl->capdue;
    rl->due = NULL;
    rl->capdue = 0;
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    rl__tset_collect_due(&m->timers, now, &due, &n, &cap);
    if (n > 1)
        qsort(due, n, sizeof *due, rl_cmp_timer_memb);
    for (size_t i = 0; i < n; i++) {
        due[i] = due[i]->item; /* keep the timer, not the membership */
        rl_retain_raw(due[i]);
    }
    rl_unlock(rl);
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopTimer *t = (struct RLRunLoopTimer *)due[i];
        if (RL__LIKELY(rl_of_this_process(rl))) /* else a callout forked: the parent fires the rest */
            rl_fire_timer(rl, m, t);
        RLRelease(t);
    }
    /* Kept for the next pass unless a nested run kept its own meanwhile,
     * or a burst made it large. */
    if (!rl->due && cap <= 1024) {
        rl->due = due;
        rl->capdue = cap;
    } else {
        free(due);
    }
}

typedef struct rl_fd_fire {
    struct RLRunLoopSource *src;
    RLOptionFlags types;
} rl_fd_fire;

/* Turns an epoll event into the callbacks to deliver, for each source on
 * fd (at most max) whose enabled callbacks match; one-shot: the delivered
 * types are disabled before the callout (each enabled type goes to one
 * loop only, should the source be in several). Returns how many went to
 * out; the caller re-arms the fd in the source's other loops. Loop lock
 * held. */
static size_t rl_fd_take(RLRunLoopRef rl, rl_mode *m, int fd, uint32_t events, rl_fd_fire *out, size_t max) {
    if (fd < 0 || (size_t)fd >= rl->nfdtab)
        return 0;
    rl_fdreg *r = &rl->fdtab[fd];
    RLOptionFlags ready = 0;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
        ready |= kRLFileDescriptorReadCallBack;
    if (events & (EPOLLOUT | EPOLLERR))
        ready |= kRLFileDescriptorWriteCallBack;
    size_t n = 0;
    for (uint32_t i = 0; i < r->nsrcs && n < max; i++) {
        struct RLRunLoopSource *s = r->srcs[i];
        struct RLFileDescriptor *f = s->fdobj;
        RLOptionFlags types = f ? ready & atomic_load_explicit(&f->enabled, memory_order_relaxed) : 0;
        if (!types)
            continue;
        rl__olock_lock(&s->lock);
        if (s->valid && rl__peek(f->valid) && rl__memb_in_mode(s, RL_KIND_SOURCE, m)) {
            types &= atomic_fetch_and_explicit(&f->enabled, ~types, memory_order_relaxed);
            r->want[i] = rl_fd_desired(rl, s);
        } else {
            types = 0;
        }
        rl__olock_unlock(&s->lock);
        if (!types)
            continue;
        rl_retain_raw(s);
        out[n].src = s;
        out[n].types = types;
        n++;
    }
    rl_fd_sync(rl, fd);
    return n;
}

/* Room in *fire (inline buffer inl at first) for need entries. */
static bool rl_fd_fire_reserve(rl_fd_fire **fire, rl_fd_fire *inl, size_t *cap, size_t n, size_t need) {
    if (need <= *cap)
        return true;
    size_t c = *cap * 2 > need ? *cap * 2 : need;
    rl_fd_fire *a = *fire == inl ? malloc(c * sizeof *a) : realloc(*fire, c * sizeof *a);
    if (!a)
        return false;
    if (*fire == inl)
        memcpy(a, inl, n * sizeof *a);
    *fire = a;
    *cap = c;
    return true;
}

static bool rl_do_fds(RLRunLoopRef rl, rl_mode *m, struct epoll_event *ev, int nev, bool stop_after_handle) {
    rl_fd_fire inl[64], *fire = inl;
    size_t n = 0, cap = 64;
    rl_lock(rl);
    for (int i = 0; i < nev; i++) {
        int fd = rl_ev_fd(&ev[i]);
        if (rl_ev_gen(&ev[i]) == 0)
            continue; /* the loop's own eventfd or timerfd */
        if (stop_after_handle && n == 1) {
            rl_fd_sync(rl, fd); /* re-armed: it reports again */
            continue;
        }
        size_t k = fd >= 0 && (size_t)fd < rl->nfdtab ? rl->fdtab[fd].nsrcs : 0;
        if (!rl_fd_fire_reserve(&fire, inl, &cap, n, n + k))
            k = cap - n; /* out of memory: the rest stay enabled and report again */
        n += rl_fd_take(rl, m, fd, ev[i].events, fire + n, stop_after_handle ? 1 : k);
    }
    /* Always-ready fds (epoll refuses them) are ready whenever armed. */
    for (size_t fd = 0; rl->nalways && fd < rl->nfdtab; fd++) {
        rl_fdreg *r = &rl->fdtab[fd];
        if (!r->always || !r->armed || (stop_after_handle && n == 1))
            continue;
        size_t k = r->nsrcs;
        if (!rl_fd_fire_reserve(&fire, inl, &cap, n, n + k))
            k = cap - n;
        n += rl_fd_take(rl, m, (int)fd, r->armed, fire + n, stop_after_handle ? 1 : k);
    }
    rl_unlock(rl);
    for (size_t i = 1; i < n; i++) { /* insertion sort by order */
        rl_fd_fire x = fire[i];
        size_t j = i;
        while (j > 0 && fire[j - 1].src->order > x.src->order) {
            fire[j] = fire[j - 1];
            j--;
        }
        fire[j] = x;
    }
    bool handled = false;
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopSource *s = fire[i].src;
        rl_fd_resync_except(s, rl); /* what it delivered here is off in its other loops too */
        struct RLFileDescriptor *f = s->fdobj;
        bool go = rl__peek(s->valid) && f && rl__peek(f->valid);
        if (go) {
            f->callout(f, fire[i].types, f->ctx.info);
            handled = true;
        }
        RLRelease(s);
    }
    if (fire != inl)
        free(fire);
    return handled;
}

static void rl_drain(int fd) {
    uint64_t v;
    ssize_t r;
    do {
        r = read(fd, &v, sizeof v);
    } while (r < 0 && errno == EINTR);
}

/* Stores only if the value changes: wakers read these flags on every
 * WakeUp, and an unchanged line stays in their caches. */
static inline void rl_flag_set(_Atomic int *flag, int v) {
    if (atomic_load_explicit(flag, memory_order_relaxed) != v)
        atomic_store(flag, v);
}

/* A poll with no user fd to look at has nothing to ask the kernel: due
 * timers are found by the clock, and an expiry of the edge-triggered
 * timerfd needs no draining (the next arming clears it). */
static bool rl_poll_needs_no_syscall(RLRunLoopRef rl) { return rl->nfd_armed == 0; }

/* Whether the loop, about to block, may spin for a wake-up first: only if
 * the last wake-up came from another CPU (a waker on this CPU cannot run
 * while the loop spins). Also records the loop's CPU for waiters
 * (rl__runloop_cpu). */
static bool rl_spin_eligible(RLRunLoopRef rl) {
    int cpu = rl__spin_cpu();
    if (atomic_load_explicit(&rl->cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&rl->cpu, cpu, memory_order_relaxed);
    int waker = atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed);
    return cpu >= 0 && waker >= 0 && waker != cpu;
}

/* Spins until a wake-up is pending or `until` (rl__spin_now nanoseconds)
 * passes. Called without the loop lock and with `sleeping` clear, so a
 * waker only sets wake_pending: no eventfd write, no system call. */
static void rl_spin_for_wake(RLRunLoopRef rl, int64_t until) {
    do {
        for (int i = 0; i < 16; i++) {
            if (atomic_load_explicit(&rl->wake_pending, memory_order_relaxed))
                return;
            rl__cpu_relax();
        }
    } while (rl__spin_now() < until);
}

int rl__runloop_cpu(RLRunLoopRef rl) { return atomic_load_explicit(&rl->cpu, memory_order_relaxed); }

/* Blocks until an event, a timer deadline or the run's deadline; with
 * `poll`, only looks. Returns the number of events in ev.
 *
 * Before blocking, a loop whose wake-ups come from another CPU spins for
 * the next one within its learnt budget (rl_spin.h), so a request that
 * follows a reply closely finds the loop awake; an idle loop, or one woken
 * only by timers and fds, has no budget and never spins. */
static int rl_wait(RLRunLoopRef rl, rl_frame *f, bool poll, struct epoll_event *ev, int maxev) {
    rl_lock(rl);
    if (rl->armed_mode != f->mode) {
        rl->armed_mode = f->mode;
        rl_fd_sync_all(rl);
    }
    /* A stop that came after this pass's own check may have found wake-ups
     * still ignored (between that check and the start of this pass): seen
     * here, under the lock the stopper set it under, it is not slept on. */
    if (f->stopped)
        poll = true;
    if (rl->nalways)
        poll = true; /* an always-ready fd is armed: served on this pass */
    int timeout = 0;
    int64_t learn_from = 0; /* the start of a wait the spin budget learns from; 0: none */
    if (!poll) {
        double at = rl_next_wake(rl, f);
        double now = rl_mono_now();
        if (at > now && !atomic_load(&rl->wake_pending) && rl_spin_eligible(rl)) {
            learn_from = rl__spin_now();
            uint32_t budget = rl__spin_budget(&rl->spin);
            if (budget > 0) {
                rl_unlock(rl);
                double left = (at - now) * 1e9;
                rl_spin_for_wake(rl, learn_from + (left < budget ? (int64_t)left : (int64_t)budget));
                rl_lock(rl);
                at = rl_next_wake(rl, f); /* a timer may have come meanwhile */
            }
        }
        if (at > rl_mono_now()) {
            rl_arm_timerfd(rl, at);
            timeout = -1;
        }
    } else if (rl_poll_needs_no_syscall(rl)) {
        rl_unlock(rl);
        rl_flag_set(&rl->ignore_wakeups, 1);
        rl_flag_set(&rl->wake_pending, 0);
        return 0;
    }
    /* A wake-up already pending turns the wait into a poll, and a poll with
     * nothing to ask the kernel needs no system call. */
    if (atomic_load(&rl->wake_pending) && rl_poll_needs_no_syscall(rl)) {
        rl_unlock(rl);
        rl_flag_set(&rl->ignore_wakeups, 1);
        rl_flag_set(&rl->wake_pending, 0);
        if (learn_from)
            rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, true);
        return 0;
    }
    atomic_store(&rl->sleeping, 1);
    rl_unlock(rl);
    if (atomic_load(&rl->wake_pending))
        timeout = 0;
    int n;
    do {
        n = epoll_wait(rl->epfd, ev, maxev, timeout);
    } while (n < 0 && errno == EINTR);
    rl_flag_set(&rl->ignore_wakeups, 1);
    atomic_store(&rl->sleeping, 0);
    bool woken = atomic_load(&rl->wake_pending) != 0;
    rl_flag_set(&rl->wake_pending, 0);
    bool user_fds = false;
    for (int i = 0; i < n; i++) {
        if (rl_ev_gen(&ev[i]) != 0) {
            user_fds = true;
        } else if (rl_ev_fd(&ev[i]) == rl->evfd) {
            woken = true; /* edge-triggered: nothing to read back */
        } else if (rl_ev_fd(&ev[i]) == rl->tfd) {
            /* Edge-triggered: nothing to read back (a system call less
             * between the wake-up and the timer's callout). */
            rl_lock(rl);
            rl->armed_at = INFINITY;
            rl_unlock(rl);
        }
    }
    if (user_fds) {
        rl_lock(rl);
        rl_fd_note_events(rl, ev, n);
        rl_unlock(rl);
    }
    if (learn_from)
        rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, woken);
    return n < 0 ? 0 : n;
}

/* A fork() from a callout leaves the child inside a run of a loop it
 * inherited: the run ends there (kRLRunLoopRunFinished, error set) before
 * it waits on the parent's kernel objects or runs more of the parent's
 * work. */
static bool rl_left_by_fork(RLRunLoopRef rl) {
    if (RL__LIKELY(rl_of_this_process(rl)))
        return false;
    rl__fork_fail("RLRunLoopRunInMode", "run loop");
    return true;
}

static RLRunLoopRunResult rl_run_frame(RLRunLoopRef rl, rl_frame *f, bool poll_only, bool stop_after_handle) {
    struct epoll_event ev[64];
    rl_mode *m = f->mode;
    for (;;) {
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        rl_flag_set(&rl->ignore_wakeups, 0);
        rl_do_observers(rl, m, kRLRunLoopBeforeTimers);
        rl_do_observers(rl, m, kRLRunLoopBeforeSources);
        rl_do_blocks(rl, m);
        bool handled = rl_do_sources0(rl, m, stop_after_handle);
        if (handled)
            rl_do_blocks(rl, m);
        bool poll = handled || poll_only;
        if (!poll) {
            rl_pace_requests(rl);
            rl__perform_trim(&rl->pq, rl->pass_ran > 0);
            rl_do_observers(rl, m, kRLRunLoopBeforeWaiting);
        }
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        int n = rl_wait(rl, f, poll, ev, 64);
        if (!poll)
            rl->pass_ran = 0; /* counted from each wait on */
        if (!poll)
            rl_do_observers(rl, m, kRLRunLoopAfterWaiting);
        rl_do_timers(rl, m);
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        if (rl_do_fds(rl, m, ev, n, stop_after_handle && !handled))
            handled = true;
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        rl_do_blocks(rl, m);

        if (handled && stop_after_handle)
            return kRLRunLoopRunHandledSource;
        if (poll_only || rl_mono_now() >= f->deadline)
            return kRLRunLoopRunTimedOut;
        rl_lock(rl);
        bool stopped = f->stopped;
        f->stopped = false;
        rl_unlock(rl);
        if (stopped)
            return kRLRunLoopRunStopped;
        if (rl_mode_is_empty(rl, m))
            return kRLRunLoopRunFinished;
    }
}

typedef struct rl_run_state {
    RLRunLoopRef rl;
    rl_frame *f;
    int outer_ignore;
    RLRunLoopRunResult result;
} rl_run_state;

/* The end of a run, also when a callout ends the thread (RLThreadExit
 * unwinds through here): the frame leaves the loop's stack of runs, so
 * that nothing reaches it once it is gone. */
static void rl_run_leave(void *p) {
    rl_run_state *st = p;
    rl_lock(st->rl);
    st->rl->frame = st->f->outer;
    rl_unlock(st->rl);
    /* Back in the outer run's pass (or out of any run): its wake-up state. */
    atomic_store(&st->rl->ignore_wakeups, st->outer_ignore);
}

/* The mode to run, NULL if none or the loop is gone. Out of line: inlined
 * into rl_run, whose cleanup handler is a setjmp, gcc warns that the
 * lookup's locals might be clobbered. */
__attribute__((noinline)) static rl_mode *rl_run_mode(RLRunLoopRef rl, const char *mode) {
    rl_lock(rl);
    rl_mode *m = atomic_load(&rl->dead) ? NULL : rl_mode_find(rl, mode);
    rl_unlock(rl);
    return m;
}

static RLRunLoopRunResult rl_run(RLRunLoopRef rl, const char *mode, RLTimeInterval seconds, bool stop_after_handle) {
    rl_mode *m = rl_run_mode(rl, mode);
    if (!m || rl_mode_is_empty(rl, m))
        return kRLRunLoopRunFinished;
    /* As CF, whose wake-up state belongs to each run: wake-ups count from
     * the start of this run (its Entry observers included), and one still
     * pending from the enclosing run's pass (given before that pass's wait)
     * is kept, so this run's first wait returns at once. A wake-up given
     * while no run is going on was dropped when it was given (ignored
     * outside runs). */
    int outer_ignore = atomic_exchange(&rl->ignore_wakeups, 0);
    bool poll_only = !(seconds > 0);
    double deadline = poll_only ? 0 : (seconds > 1e10 ? INFINITY : rl_mono_now() + seconds);
    rl_frame f = {m, false, deadline, NULL};
    rl_lock(rl);
    f.outer = rl->frame;
    rl->frame = &f;
    rl_unlock(rl);

    rl_run_state st = {rl, &f, outer_ignore, 0};
    pthread_cleanup_push(rl_run_leave, &st);
    rl__cleanup_arg_escapes(&st);
    rl_do_observers(rl, m, kRLRunLoopEntry);
    /* As CF: a stop requested by an Entry observer ends the run before its
     * first pass. */
    rl_lock(rl);
    bool stopped = f.stopped;
    f.stopped = false;
    rl_unlock(rl);
    st.result = stopped ? kRLRunLoopRunStopped : rl_run_frame(rl, &f, poll_only, stop_after_handle);
    if (rl_of_this_process(rl)) /* else a fork() child left the parent's run */
        rl_do_observers(rl, m, kRLRunLoopExit);
    pthread_cleanup_pop(1);
    return st.result;
}

/* A run that cannot start returns kRLRunLoopRunFinished, as CF does for
 * the common pseudo-mode: a result is always one of the enum's values, so
 * a switch over it never falls through; the error says why. */
RLRunLoopRunResult RLRunLoopRunInMode(RLRunLoopMode mode, RLTimeInterval seconds, bool returnAfterSourceHandled) {
    const char *fn = "RLRunLoopRunInMode";
    if (!rl_mode_name_ok(mode, fn))
        return kRLRunLoopRunFinished;
    if (rl_is_common(mode)) {
        rl__fail(kRLErrorInvalidArgument, fn, "kRLRunLoopCommonModes is not a mode one can run in");
        return kRLRunLoopRunFinished;
    }
    if (isnan(seconds)) {
        rl__fail(kRLErrorInvalidArgument, fn, "NaN interval");
        return kRLRunLoopRunFinished;
    }
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    if (!rl)
        return kRLRunLoopRunFinished;
    return rl_run(rl, mode, seconds, returnAfterSourceHandled);
}

bool RLRunLoopIsFinished(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = "RLRunLoopIsFinished";
    if (!rl_check_loop(rl, fn) || !rl_mode_name_ok(mode, fn))
        return true;
    if (!pthread_equal(rl->thread, pthread_self())) {
        rl__fail(kRLErrorWrongThread, fn, "not the calling thread's run loop");
        return true;
    }
    if (rl_is_common(mode))
        return true;
    /* The same test as the start of a run (rl_run). */
    rl_mode *m = rl_run_mode(rl, mode);
    return !m || rl_mode_is_empty(rl, m);
}

RLRunLoopRunResult RLRunLoopRun(void) {
    RLRunLoopRunResult r;
    do {
        r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e10, false);
    } while (r != kRLRunLoopRunStopped && r != kRLRunLoopRunFinished);
    return r;
}

/* ------------------------------------------------------------------ */
/* creation, per-thread storage, teardown                              */

static void rl_finalize(void *obj);

const rl__class rl__runloop_class = {"RLRunLoop", rl_finalize, NULL, NULL};

static void rl_close(int fd) {
    if (fd >= 0)
        close(fd);
}

static void rl_finalize(void *obj) {
    RLRunLoopRef rl = obj;
    free(rl->due);
    for (size_t i = 0; i < rl->nmodes; i++)
        rl_mode_free(rl->modes[i]);
    free(rl->modes);
    for (size_t i = 0; i < rl->ncommon; i++)
        free(rl->common[i].name);
    free(rl->common);
    free(rl->citems);
    free(rl->cidx);
    for (size_t i = 0; i < rl->nfdtab; i++) {
        free(rl->fdtab[i].srcs);
        free(rl->fdtab[i].want);
    }
    free(rl->fdtab);
    /* In a fork() child, an inherited loop's requests are the parent's (it
     * runs them): their release functions are not called here. */
    if (rl_of_this_process(rl))
        rl__perform_destroy(&rl->pq);
    rl_close(rl->epfd);
    rl_close(rl->evfd);
    rl_close(rl->tfd);
}

static bool rl_watch(RLRunLoopRef rl, int fd, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.u64 = rl_ev_data(fd, 0)};
    return epoll_ctl(rl->epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

static RLRunLoopRef rl_create(pthread_t thread) {
    const char *fn = "RLRunLoopGetCurrent";
    RLRunLoopRef rl = rl__object_alloc(&rl__runloop_class, sizeof *rl, fn);
    if (!rl)
        return NULL;
    rl->thread = thread;
    rl->fork_gen = rl__fork_gen();
    rl->pq.fork_gen = rl->fork_gen;
    rl->armed_at = INFINITY;
    TAILQ_INIT(&rl->homed_timers);
    TAILQ_INIT(&rl->homed_observers);
    atomic_init(&rl->ignore_wakeups, 1); /* not running */
    atomic_init(&rl->waker_cpu, -1);
    atomic_init(&rl->cpu, -1);
    rl->epfd = epoll_create1(EPOLL_CLOEXEC);
    rl->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    rl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (rl->epfd < 0 || rl->evfd < 0 || rl->tfd < 0 || !rl_watch(rl, rl->evfd, EPOLLIN | EPOLLET) ||
        !rl_watch(rl, rl->tfd, EPOLLIN | EPOLLET)) {
        int err = errno;
        RLRelease(rl);
        rl__fail_errno(err, fn, "cannot create the run loop's descriptors");
        return NULL;
    }
    /* The default mode exists from the start and is common, as in CF. */
    rl_lock(rl);
    rl->common = calloc(1, sizeof *rl->common);
    rl_mode *m = NULL;
    if (rl->common && (rl->common[0].name = strdup(kRLRunLoopDefaultMode))) {
        rl->capcommon = rl->ncommon = 1;
        m = rl_mode_get(rl, kRLRunLoopDefaultMode, fn);
    }
    rl_unlock(rl);
    if (!m) {
        RLRelease(rl);
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    return rl;
}

static pthread_t rl_main_thread;
static RLRunLoopRef rl_main_loop;
static pthread_mutex_t rl_main_mutex = PTHREAD_MUTEX_INITIALIZER;
static bool rl_main_exited; /* the main thread tore its loop down (RLThreadExit); rl_main_mutex */
static pthread_key_t rl_key;
static pthread_once_t rl_key_once = PTHREAD_ONCE_INIT;

__attribute__((constructor)) static void rl_record_main_thread(void) { rl_main_thread = pthread_self(); }

static void rl_teardown(RLRunLoopRef rl);

static void rl_threadtab_forget_self(RLRunLoopRef mine);

static void rl_key_destructor(void *v) {
    RLRunLoopRef rl = v;
    rl_tls = NULL;
    rl_teardown(rl);
    rl_threadtab_forget_self(rl);
    rl__object_unhold(rl);
}

static bool rl_key_made; /* rl_key exists (set once, under rl_key_once) */

static void rl_make_key(void) { rl_key_made = pthread_key_create(&rl_key, rl_key_destructor) == 0; }

/* ==== BEGIN run loops by thread (lazy loops for RLThread / RLPerform) ====
 * CF's _CFRunLoopGet0(pthread_t): a table from thread to run loop, so that
 * another thread can obtain (creating it if needed) the loop of a thread
 * that has not asked for it yet, and that thread later gets the same loop
 * from RLRunLoopGetCurrent. Threads therefore need no loop up front. The
 * table holds one reference per entry; a thread's entry goes when the
 * thread tears its loop down (rl__runloop_teardown_current_thread or the
 * pthread-key destructor). The main thread's loop is rl_main_loop, not in
 * the table. Lock order: table mutex, then a loop lock (rl_create). */
typedef struct rl_thread_entry {
    struct rl_thread_entry *next;
    pthread_t thread;
    RLRunLoopRef rl;
} rl_thread_entry;

enum { RL_THREADTAB_BUCKETS = 256 };
static pthread_mutex_t rl_threadtab_mutex = PTHREAD_MUTEX_INITIALIZER;
static rl_thread_entry *rl_threadtab[RL_THREADTAB_BUCKETS];
static _Atomic size_t rl_threadtab_count; /* lets exiting threads skip the mutex */

static rl_thread_entry **rl_threadtab_link_locked(pthread_t thread) {
    uintptr_t h = (uintptr_t)thread;
    h ^= h >> 12;
    h ^= h >> 21;
    rl_thread_entry **link = &rl_threadtab[h % RL_THREADTAB_BUCKETS];
    while (*link && !pthread_equal((*link)->thread, thread))
        link = &(*link)->next;
    return link;
}

/* The table's loop for `thread` (borrowed), created on first use. */
static RLRunLoopRef rl_threadtab_get(pthread_t thread) {
    pthread_mutex_lock(&rl_threadtab_mutex);
    rl_thread_entry **link = rl_threadtab_link_locked(thread);
    RLRunLoopRef rl = *link ? (*link)->rl : NULL;
    if (!rl) {
        rl_thread_entry *e = malloc(sizeof *e);
        rl = e ? rl_create(thread) : NULL;
        if (rl) {
            rl__object_hold(rl); /* the table's reference */
            e->next = NULL;
            e->thread = thread;
            e->rl = rl;
            *link = e;
            atomic_fetch_add(&rl_threadtab_count, 1);
        } else {
            free(e);
            if (!e)
                rl__fail(kRLErrorNoMemory, "RLRunLoopGetCurrent", "out of memory");
        }
    }
    pthread_mutex_unlock(&rl_threadtab_mutex);
    return rl;
}

/* On a thread that is done with its loop `mine` (torn down already, or
 * NULL): removes the thread's entry and tears down the entry's loop if it
 * is another one (made by another thread after an earlier teardown). */
static void rl_threadtab_forget_self(RLRunLoopRef mine) {
    if (atomic_load(&rl_threadtab_count) == 0)
        return;
    pthread_mutex_lock(&rl_threadtab_mutex);
    rl_thread_entry **link = rl_threadtab_link_locked(pthread_self());
    rl_thread_entry *e = *link;
    if (e) {
        *link = e->next;
        atomic_fetch_sub(&rl_threadtab_count, 1);
    }
    pthread_mutex_unlock(&rl_threadtab_mutex);
    if (!e)
        return;
    if (e->rl != mine)
        rl_teardown(e->rl);
    rl__object_unhold(e->rl);
    free(e);
}

RLRunLoopRef rl__runloop_get_for_thread(pthread_t thread) {
    if (pthread_equal(thread, rl_main_thread))
        return RLRunLoopGetMain();
    return rl_threadtab_get(thread);
}

/* ==== END run loops by thread ==== */

/* ---- fork() (rl_fork.c): the main loop's mutex, the thread table and
 * every loop's lock are held across it. The child never runs an inherited
 * loop (rl_of_this_process), but a timer or observer made in the parent
 * may still have one as its home, and locks it to be refused: so no loop
 * lock may be left held by a thread that does not exist in the child.
 * Taking them all here breaks the one-loop-lock-at-a-time rule safely: no
 * other thread holds two, and this one waits for nothing else while it
 * holds them (raw futex calls, so the lock-order detector sees nothing). */
static rl_thread_entry *rl_inherited;   /* in a fork() child: the parent's loops, kept, never used */
static RLRunLoopRef rl_inherited_mains; /* the same for its main loops (linked by inherited_next) */

/* Every loop the thread table or the main-loop slot knows, each once:
 * lock (true) or unlock (false) it. */
static void rl_fork_each_loop(bool lock) {
    RLRunLoopRef main = rl_main_loop;
    bool main_seen = false;
    for (size_t b = 0; b < RL_THREADTAB_BUCKETS; b++)
        for (rl_thread_entry *e = rl_threadtab[b]; e; e = e->next) {
            main_seen = main_seen || e->rl == main;
            if (lock)
                rl__mutex_lock_slow(&e->rl->lock, NULL);
            else
                rl__mutex_unlock(&e->rl->lock);
        }
    if (main && !main_seen) {
        if (lock)
            rl__mutex_lock_slow(&main->lock, NULL);
        else
            rl__mutex_unlock(&main->lock);
    }
}

void rl__runloop_fork_prepare(void) {
    pthread_mutex_lock(&rl_main_mutex);
    pthread_mutex_lock(&rl_threadtab_mutex);
    rl_fork_each_loop(true);
}

void rl__runloop_fork_parent(void) {
    rl_fork_each_loop(false);
    pthread_mutex_unlock(&rl_threadtab_mutex);
    pthread_mutex_unlock(&rl_main_mutex);
}

/* Keeps a parent's loop referenced (and reachable) in the child: its
 * finalizer must not run here, where its requests are the parent's. */
static void rl_inherited_keep(rl_thread_entry *e) {
    e->next = rl_inherited;
    rl_inherited = e;
}

/* Every loop known so far is the parent's. The forking thread is the
 * child's only thread, and its main thread: GetCurrent and GetMain make it
 * a new loop with its own kernel objects on first use. */
void rl__runloop_fork_child(void) {
    rl__runloop_fork_parent();
    for (size_t b = 0; b < RL_THREADTAB_BUCKETS; b++) {
        while (rl_threadtab[b]) {
            rl_thread_entry *e = rl_threadtab[b];
            rl_threadtab[b] = e->next;
            rl_inherited_keep(e);
        }
    }
    atomic_store(&rl_threadtab_count, 0);
    if (rl_main_loop) { /* linked through the loop itself: no allocation in a child handler */
        rl_main_loop->inherited_next = rl_inherited_mains;
        rl_inherited_mains = rl_main_loop;
        rl_main_loop = NULL;
    }
    rl_main_thread = pthread_self();
    /* The thread's reference (rl_tls) stays with the loop, kept above; the
     * key's destructor would tear the parent's loop down when the child's
     * thread ends. */
    if (rl_tls) {
        rl_tls = NULL;
        if (rl_key_made)
            pthread_setspecific(rl_key, NULL);
    }
}

RLRunLoopRef RLRunLoopGetMain(void) {
    pthread_mutex_lock(&rl_main_mutex);
    if (!rl_main_loop) {
        rl_main_loop = rl_create(rl_main_thread);
        if (rl_main_loop)
            rl__object_hold(rl_main_loop); /* kept for the life of the process */
        /* Made after the main thread exited: as if torn down with it, so
         * that it refuses requests no thread would run. */
        if (rl_main_loop && rl_main_exited)
            rl_teardown(rl_main_loop);
    }
    RLRunLoopRef rl = rl_main_loop;
    pthread_mutex_unlock(&rl_main_mutex);
    return rl;
}

RLRunLoopRef RLRunLoopGetCurrent(void) {
    if (RL__LIKELY(rl_tls != NULL))
        return rl_tls;
    pthread_once(&rl_key_once, rl_make_key);
    RLRunLoopRef rl;
    if (pthread_equal(pthread_self(), rl_main_thread)) {
        rl = RLRunLoopGetMain();
        if (rl) {
            RLRetain(rl); /* the thread's reference; the global one stays */
            rl__object_hold(rl);
        }
    } else {
        /* The table keeps its reference; this one is the thread's. */
        rl = rl_threadtab_get(pthread_self());
        if (rl) {
            RLRetain(rl);
            rl__object_hold(rl);
        }
    }
    if (!rl)
        return NULL;
    rl_tls = rl;
    pthread_setspecific(rl_key, rl);
    return rl;
}

/* CF's way: every source is removed from every mode (cancel runs here, on
 * the exiting thread), then observers and timers; queued requests are
 * dropped (blocks released). */
static void rl_teardown(RLRunLoopRef rl) {
    rl_defer d;
    rl__defer_init(&d);
    rl_lock(rl);
    atomic_store(&rl->dead, true);
    for (int kind = RL_KIND_SOURCE; kind <= RL_KIND_OBSERVER; kind++) {
        for (size_t i = 0; i < rl->nmodes; i++) {
            rl_mode *m = rl->modes[i];
            if (kind == RL_KIND_SOURCE) {
                while (!TAILQ_EMPTY(&m->sources)) {
                    rl_memb *x = TAILQ_FIRST(&m->sources);
                    struct RLRunLoopSource *s = x->item;
                    rl__olock_lock(&s->lock);
                    rl_remove_memb_locked(x, &d);
                    rl__olock_unlock(&s->lock);
                }
            } else if (kind == RL_KIND_OBSERVER) {
                while (!TAILQ_EMPTY(&m->observers))
                    rl_remove_memb_locked(TAILQ_FIRST(&m->observers), &d);
            } else {
                rl_memb *x;
                while ((x = rl__tset_any(&m->timers)) != NULL)
                    rl_remove_memb_locked(x, &d);
            }
        }
    }
    for (size_t i = 0; i < rl->nci; i++)
        rl_defer_unhold(&d, rl->citems[i].item);
    rl->nci = 0;
    if (rl->capcidx)
        memset(rl->cidx, 0, rl->capcidx * sizeof *rl->cidx);
    /* Timers and observers at home here but in no mode now go homeless, so
     * that none keeps a pointer to this loop. */
    struct RLRunLoopTimer *t;
    while ((t = TAILQ_FIRST(&rl->homed_timers)) != NULL)
        rl_home_clear_locked(rl, t, RL_KIND_TIMER);
    struct RLRunLoopObserver *o;
    while ((o = TAILQ_FIRST(&rl->homed_observers)) != NULL)
        rl_home_clear_locked(rl, o, RL_KIND_OBSERVER);
    rl_unlock(rl);
    rl__defer_run(&d);

    rl__perform_close(&rl->pq);
}

void rl__runloop_teardown_current_thread(void) {
    RLRunLoopRef rl = rl_tls;
    if (rl) {
        rl_tls = NULL;
        pthread_once(&rl_key_once, rl_make_key);
        pthread_setspecific(rl_key, NULL);
        rl_teardown(rl);
    }
    /* Also a loop another thread made for this one (never run here): the
     * main thread's is the main loop. */
    if (pthread_equal(pthread_self(), rl_main_thread)) {
        pthread_mutex_lock(&rl_main_mutex);
        RLRunLoopRef main_loop = rl_main_loop;
        rl_main_exited = true;
        pthread_mutex_unlock(&rl_main_mutex);
        if (main_loop && main_loop != rl)
            rl_teardown(main_loop);
    }
    rl_threadtab_forget_self(rl);
    if (rl)
        rl__object_unhold(rl);
}
