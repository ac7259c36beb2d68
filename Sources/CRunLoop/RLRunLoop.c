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
 *     timer already past its fire date fires on that wake-up;
 *   - signalled sources go on a per-loop ready list;
 *   - perform requests go into chained chunks of 16-byte slots behind a spin
 *     lock (rl_pqueue.h: no allocation per request, chunks reused) that the
 *     loop takes in one step.
 */
#include "runloop_internal.h"
#include "rl_pqueue.h"
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

typedef struct rl_citem {
    void *item;
    rl_kind kind;
} rl_citem;

/* The fd sources of this loop on one fd, indexed by fd. Several
 * RLFileDescriptor objects may wrap the same fd, but epoll holds one
 * registration per fd: it watches the union of what they want, and a
 * readiness goes to each of them whose enabled callbacks match. */
typedef struct rl_fdreg {
    struct RLRunLoopSource **srcs; /* in registration order; not retained (their memberships are) */
    uint32_t nsrcs, capsrcs;       /* nsrcs 0: free slot */
    uint32_t armed;                /* epoll events currently watched; 0: not in the set */
} rl_fdreg;

/* Fields that other threads touch on hot paths are kept on separate cache
 * lines (padding, since calloc gives no 64-byte alignment): read-mostly
 * identity, the wake-up flags, and the perform queue. */
#define RL_LINE 64

struct RLRunLoop {
    rl__object base;
    pthread_t thread;
    _Atomic bool dead; /* torn down: its thread exited */
    int epfd, evfd, tfd;
    char pad0[RL_LINE];

    _Atomic int wake_pending;
    _Atomic int ignore_wakeups; /* as CF: from each wake until the next pass starts */
    _Atomic int sleeping;
    _Atomic int waker_cpu; /* the CPU of the last wake-up that counted; -1: none yet */
    _Atomic int cpu;       /* the CPU the loop last went to wait on; -1: none yet */
    rl__spin spin;         /* how long the loop spins for a wake-up before it sleeps */
    char pad1[RL_LINE];

    rl_pqueue pq;            /* perform requests (see "perform requests") */
    struct rl_bslab *bcur;   /* block slots (RLRunLoopPerformBlock): the slab being filled */
    unsigned bcur_used;      /* its bytes handed out */
    rl_flist bcache;         /* empty slabs kept for reuse */
    char pad2[RL_LINE];

    rl_mode **modes;
    size_t nmodes, capmodes;
    rl_mode *last_mode; /* lookup cache */
    rl_common_name *common;
    size_t ncommon, capcommon;
    rl_citem *citems;
    size_t nci, capci;

    rl_pchain held;    /* requests taken from pq for other modes; the loop's thread only */
    rl_pchunk *spent; /* chunks a batch is done with, given back with the next take; ditto */
    bool trim_due;    /* chunks or slabs went back to the pools since the loop last slept; ditto */
    uint32_t pass_ran; /* requests run since the loop last waited; ditto */
    int64_t trimmed_at; /* rl__spin_now() of the last rl_perform_trim that trimmed; ditto */
    rl_frame *frame;
    rl_mode *armed_mode; /* the mode whose fds are in the epoll set */
    double armed_at;     /* monotonic time the timerfd is armed for; INFINITY: disarmed */

    struct RLRunLoopSource **ready; /* retained */
    size_t nready, capready;

    rl_fdreg *fdtab;
    size_t nfdtab;
    size_t nfd_armed; /* user fds in the epoll set */
};

/* ------------------------------------------------------------------ */
/* the graph lock, sequence numbers, deferred work                     */

rl__mutex rl__graph_mutex;

static _Atomic uint64_t rl_seq;
uint64_t rl__next_seq(void) { return atomic_fetch_add_explicit(&rl_seq, 1, memory_order_relaxed) + 1; }

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
        if (e->what != RL_DEFER_RELEASE)
            rl_defer_call(e);
        if (e->obj)
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

static bool rl_check_loop(RLRunLoopRef rl, const char *fn) {
    return rl__object_check(rl, &rl__runloop_class, fn);
}

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
 * call when it is already armed there. Graph lock held. */
static void rl_arm_timerfd(RLRunLoopRef rl, double at) {
    if (at == rl->armed_at)
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
 * earliest timer deadline, as monotonic time. Graph lock held. */
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

static uint32_t rl_fd_desired(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    struct RLFileDescriptor *f = src->fdobj;
    if (!src->valid || !f || !f->valid || !rl->armed_mode)
        return 0;
    if (!rl__memb_in_mode(src, RL_KIND_SOURCE, rl->armed_mode))
        return 0;
    uint32_t ev = 0;
    if (f->enabled & kRLFileDescriptorReadCallBack)
        ev |= EPOLLIN;
    if (f->enabled & kRLFileDescriptorWriteCallBack)
        ev |= EPOLLOUT;
    return ev;
}

/* Brings the epoll set in line with what fd should be watched for (the
 * union over its sources). An fd nobody listens to is removed from the set,
 * not left with no events: epoll reports hang-ups even then, which would
 * spin the loop. */
static void rl_fd_sync(RLRunLoopRef rl, int fd) {
    if (fd < 0 || (size_t)fd >= rl->nfdtab)
        return;
    rl_fdreg *r = &rl->fdtab[fd];
    uint32_t want = 0;
    for (uint32_t i = 0; i < r->nsrcs; i++)
        want |= rl_fd_desired(rl, r->srcs[i]);
    if (want == r->armed)
        return;
    struct epoll_event ev = {.events = want, .data.fd = fd};
    int op = r->armed == 0 ? EPOLL_CTL_ADD : (want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD);
    epoll_ctl(rl->epfd, op, fd, &ev);
    rl->nfd_armed += (r->armed == 0) - (want == 0);
    r->armed = want;
}

static void rl_fd_register(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = src->fdobj ? src->fdobj->fd : -1;
    if (fd < 0)
        return;
    if ((size_t)fd >= rl->nfdtab) {
        size_t n = rl->nfdtab ? rl->nfdtab : 16;
        while (n <= (size_t)fd)
            n *= 2;
        rl_fdreg *t = realloc(rl->fdtab, n * sizeof *t);
        if (!t)
            return;
        memset(t + rl->nfdtab, 0, (n - rl->nfdtab) * sizeof *t);
        rl->fdtab = t;
        rl->nfdtab = n;
    }
    rl_fdreg *r = &rl->fdtab[fd];
    for (uint32_t i = 0; i < r->nsrcs; i++) {
        if (r->srcs[i] == src)
            return;
    }
    if (r->nsrcs == r->capsrcs) {
        uint32_t cap = r->capsrcs ? r->capsrcs * 2 : 1;
        struct RLRunLoopSource **a = realloc(r->srcs, cap * sizeof *a);
        if (!a)
            return;
        r->srcs = a;
        r->capsrcs = cap;
    }
    r->srcs[r->nsrcs++] = src;
    rl_fd_sync(rl, fd);
}

static void rl_fd_unregister(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = src->fdobj ? src->fdobj->fd : -1;
    if (fd < 0 || (size_t)fd >= rl->nfdtab)
        return;
    rl_fdreg *r = &rl->fdtab[fd];
    for (uint32_t i = 0; i < r->nsrcs; i++) {
        if (r->srcs[i] == src) {
            memmove(&r->srcs[i], &r->srcs[i + 1], (r->nsrcs - i - 1) * sizeof *r->srcs);
            r->nsrcs--;
            rl_fd_sync(rl, fd); /* the union of the others; none left: out of the set */
            return;
        }
    }
}

static void rl_fd_sync_all(RLRunLoopRef rl) {
    for (size_t i = 0; i < rl->nfdtab; i++) {
        if (rl->fdtab[i].nsrcs)
            rl_fd_sync(rl, (int)i);
    }
}

void rl__fd_changed_locked(struct RLFileDescriptor *f) {
    struct RLRunLoopSource *src = f->source;
    if (!src)
        return;
    rl_memb *m;
    TAILQ_FOREACH(m, &src->membs, item_link) {
        rl_fd_sync(m->rl, f->fd);
    }
}

/* ------------------------------------------------------------------ */
/* the ready list                                                      */

static void rl_ready_push(RLRunLoopRef rl, struct RLRunLoopSource *s) {
    for (size_t i = 0; i < rl->nready; i++) {
        if (rl->ready[i] == s)
            return;
    }
    struct RLRunLoopSource **a = rl_grow(rl->ready, &rl->capready, rl->nready + 1, sizeof *a);
    if (!a)
        return;
    rl->ready = a;
    rl_retain_raw(s);
    rl->ready[rl->nready++] = s;
}

void rl__source_mark_ready_locked(struct RLRunLoopSource *src, rl_defer *d) {
    (void)d;
    rl_memb *m;
    TAILQ_FOREACH(m, &src->membs, item_link) {
        rl_ready_push(m->rl, src);
    }
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

/* Adds item to mode (no-op if present). Graph lock held. Inlined where
 * the kind is a constant: adding a timer is a hot path. */
__attribute__((always_inline)) static inline bool rl_add_locked(RLRunLoopRef rl, void *item, rl_kind kind,
                                                               rl_mode *mode, rl_defer *d, const char *fn) {
    if (rl_memb_find(item, kind, mode))
        return true;
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
    }
    rl_retain_raw(item);
    TAILQ_INSERT_TAIL(rl__item_membs(item, kind), m, item_link);
    if (kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_INSERT_TAIL(&mode->sources, m, mode_link);
        mode->nsources++;
        if (s->fdobj) {
            rl_fd_register(rl, s);
            rl_fd_sync(rl, s->fdobj->fd);
        }
        if (s->signalled)
            rl_ready_push(rl, s);
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

/* Removes one membership; defers the cancel callout and the release. */
static void rl_remove_memb_locked(rl_memb *m, rl_defer *d) {
    void *item = m->item;
    RLRunLoopRef rl = m->rl;
    rl_mode *mode = m->mode;
    TAILQ_REMOVE(rl__item_membs(item, m->kind), m, item_link);
    if (m->kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_REMOVE(&mode->sources, m, mode_link);
        mode->nsources--;
        if (s->fdobj) {
            if (!rl_item_in_loop(s, RL_KIND_SOURCE, rl))
                rl_fd_unregister(rl, s);
            else
                rl_fd_sync(rl, s->fdobj->fd);
        }
        rl__defer_push(d, RL_DEFER_CANCEL, s, rl, mode->name);
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
        rl__defer_release(d, item);
    rl_memb_free(m);
}

static void rl_citem_remove(RLRunLoopRef rl, void *item, rl_defer *d) {
    for (size_t i = 0; i < rl->nci; i++) {
        if (rl->citems[i].item == item) {
            rl__defer_release(d, item);
            rl->citems[i] = rl->citems[--rl->nci];
            return;
        }
    }
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

static bool rl_citem_has(RLRunLoopRef rl, void *item) {
    for (size_t i = 0; i < rl->nci; i++) {
        if (rl->citems[i].item == item)
            return true;
    }
    return false;
}

/* Adds item to the common pseudo-mode: remembered, and added to every
 * common mode (modes named common but not yet created are created, as CF). */
static bool rl_add_common_locked(RLRunLoopRef rl, void *item, rl_kind kind, rl_defer *d, const char *fn) {
    if (!rl_citem_has(rl, item)) {
        rl_citem *a = rl_grow(rl->citems, &rl->capci, rl->nci + 1, sizeof *a);
        if (!a)
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        rl->citems = a;
        rl_retain_raw(item);
        rl->citems[rl->nci++] = (rl_citem){item, kind};
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

__attribute__((always_inline)) static inline bool rl_add_item(RLRunLoopRef rl, void *item, rl_kind kind,
                                                              RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_defer d;
    rl__defer_init(&d);
    rl__graph_lock();
    bool ok;
    if (atomic_load(&rl->dead))
        ok = rl__fail(kRLErrorInvalidState, fn, "the run loop's thread has exited");
    else if (!rl_item_valid(item, kind))
        ok = rl__fail(kRLErrorInvalidObject, fn, "%p has been invalidated", item);
    else if (kind == RL_KIND_TIMER && rl__timer_loop(item) && rl__timer_loop(item) != rl)
        ok = rl__fail(kRLErrorInvalidState, fn, "the timer is already in another run loop");
    else if (rl_is_common(mode))
        ok = rl_add_common_locked(rl, item, kind, &d, fn);
    else {
        rl_mode *m = rl_mode_get(rl, mode, fn);
        ok = m && rl_add_locked(rl, item, kind, m, &d, fn);
    }
    rl__graph_unlock();
    if (d.n)
        rl__defer_run(&d);
    return ok;
}

__attribute__((always_inline)) static inline bool rl_remove_item(RLRunLoopRef rl, void *item, rl_kind kind,
                                                                 RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_defer d;
    rl__defer_init(&d);
    rl__graph_lock();
    if (rl_is_common(mode)) {
        rl_remove_common_locked(rl, item, kind, &d);
    } else {
        rl_mode *m = rl_mode_find(rl, mode);
        rl_memb *x = m ? rl_memb_find(item, kind, m) : NULL;
        if (x)
            rl_remove_memb_locked(x, &d);
    }
    rl__graph_unlock();
    rl__defer_run(&d);
    return true;
}

static bool rl_contains_item(RLRunLoopRef rl, void *item, rl_kind kind, RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl__graph_lock();
    bool has;
    if (rl_is_common(mode)) {
        has = rl_citem_has(rl, item);
    } else {
        rl_mode *m = rl_mode_find(rl, mode);
        has = m && rl_memb_find(item, kind, m);
    }
    rl__graph_unlock();
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
    rl__graph_lock();
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
                rl_mode *mm = rl_mode_get(rl, mode, fn);
                ok = mm && rl_add_locked(rl, rl->citems[i].item, rl->citems[i].kind, mm, &d, fn);
            }
        }
    }
    rl__graph_unlock();
    rl__defer_run(&d);
    return ok;
}

char *RLRunLoopCopyCurrentMode(RLRunLoopRef rl) {
    if (!rl_check_loop(rl, "RLRunLoopCopyCurrentMode"))
        return NULL;
    rl__graph_lock();
    char *s = rl->frame ? strdup(rl->frame->mode->name) : NULL;
    rl__graph_unlock();
    return s;
}

char **RLRunLoopCopyAllModes(RLRunLoopRef rl, RLIndex *count) {
    const char *fn = "RLRunLoopCopyAllModes";
    if (!rl_check_loop(rl, fn))
        return NULL;
    rl__graph_lock();
    size_t bytes = (rl->nmodes + 1) * sizeof(char *);
    for (size_t i = 0; i < rl->nmodes; i++)
        bytes += strlen(rl->modes[i]->name) + 1;
    char **out = malloc(bytes);
    if (out) {
        char *p = (char *)(out + rl->nmodes + 1);
        for (size_t i = 0; i < rl->nmodes; i++) {
            size_t len = strlen(rl->modes[i]->name) + 1;
            memcpy(p, rl->modes[i]->name, len);
            out[i] = p;
            p += len;
        }
        out[rl->nmodes] = NULL;
        if (count)
            *count = (RLIndex)rl->nmodes;
    }
    rl__graph_unlock();
    if (!out)
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
    return out;
}

RLAbsoluteTime RLRunLoopGetNextTimerFireDate(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = "RLRunLoopGetNextTimerFireDate";
    if (!rl_check_loop(rl, fn) || !rl_mode_name_ok(mode, fn))
        return 0;
    rl__graph_lock();
    rl_mode *m = rl_mode_find(rl, mode);
    RLAbsoluteTime date = 0;
    if (!m || !rl__tset_earliest_fire(&m->timers, &date))
        date = 0;
    rl__graph_unlock();
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
    rl__graph_lock();
    /* As CF: only a running loop can be stopped; the innermost run returns. */
    if (rl->frame)
        rl->frame->stopped = true;
    rl__graph_unlock();
    rl_wake(rl);
    return true;
}

/* ------------------------------------------------------------------ */
/* perform requests                                                    */

/* A request is a slot {fn, info} of the loop's queue (rl_pqueue.h), run
 * in the default mode. A request for other modes comes after a prefix slot
 * whose fn is NULL (no request has a NULL function) and whose arg is
 * rl_pmode_common (the common modes, as they are when it runs) or its
 * malloc'ed mode name. What disposes of a request that never runs follows
 * from its function (rl_preq_drop). */
static char rl_pmode_common[] = "";

static void rl_owned_call_run(void *p);
static void rl_owned_call_drop(void *p);

static void rl_qlock(RLRunLoopRef rl) { rl_pq_lock(&rl->pq); }
static void rl_qunlock(RLRunLoopRef rl) { rl_pq_unlock(&rl->pq); }

static bool rl_pname_matches(const char *name, const rl_mode *m) {
    if (!name)
        return m->is_default;
    if (name == rl_pmode_common)
        return m->common; /* as CF: the common modes when the request runs */
    return strcmp(m->name, name) == 0;
}

static void rl_pname_free(char *name) {
    if (name && name != rl_pmode_common) /* no free(NULL) call per request */
        free(name);
}

/* As CF, queuing a block for a named mode brings that mode into being
 * (so that running it performs the block). */
static bool rl_mode_create(RLRunLoopRef rl, const char *mode, const char *fn) {
    rl__graph_lock();
    bool ok = rl_mode_get(rl, mode, fn) != NULL;
    rl__graph_unlock();
    return ok;
}

/* Checks a request; *name gets its mode prefix (NULL for the default
 * mode; see above). Nothing queued. */
static bool rl_preq_check(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *), const char *fname, char **name) {
    if (!rl_check_loop(rl, fname) || !rl_mode_name_ok(mode, fname))
        return false;
    if (!fn)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
    if (atomic_load_explicit(&rl->dead, memory_order_relaxed))
        return rl__fail(kRLErrorInvalidState, fname, "the run loop's thread has exited");
    *name = NULL;
    if (mode != kRLRunLoopDefaultMode && strcmp(mode, kRLRunLoopDefaultMode) != 0) {
        if (rl_is_common(mode)) {
            *name = rl_pmode_common;
        } else {
            *name = strdup(mode);
            if (!*name)
                return rl__fail(kRLErrorNoMemory, fname, "out of memory");
            if (!rl_mode_create(rl, mode, fname)) {
                free(*name);
                return false;
            }
        }
    }
    return true;
}

/* Appends a request and its prefix; false if that needs a new chunk.
 * Queue lock held. */
static inline bool rl_preq_push_locked(RLRunLoopRef rl, char *name, void (*fn)(void *), void *info) {
    rl_pslot s[2] = {{NULL, name}, {fn, info}};
    return name ? rl_pq_push_locked(&rl->pq, s, 2) : rl_pq_push_locked(&rl->pq, s + 1, 1);
}

/* Queues a checked request; false if memory is short (nothing queued,
 * name not freed). */
static bool rl_preq_push(RLRunLoopRef rl, char *name, void (*fn)(void *), void *info) {
    for (;;) {
        rl_qlock(rl);
        bool ok = rl_preq_push_locked(rl, name, fn, info);
        rl_qunlock(rl);
        if (ok)
            return true;
        if (!rl_pq_grow(&rl->pq))
            return false;
    }
}

static bool rl_enqueue(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *), void *info, const char *fname) {
    char *name;
    if (!rl_preq_check(rl, mode, fn, fname, &name))
        return false;
    if (rl_preq_push(rl, name, fn, info))
        return true;
    rl_pname_free(name);
    return rl__fail(kRLErrorNoMemory, fname, "out of memory");
}

bool RLRunLoopPerformFunction(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *info), void *info) {
    return rl_enqueue(rl, mode, fn, info, "RLRunLoopPerformFunction");
}

#if __BLOCKS__
/* Runs a block; rl_do_blocks releases it (with the others of the batch). */
static void rl_call_block(void *b) { ((void (^)(void))b)(); }
static void rl_release_block(void *b) { Block_release((void (^)(void))b); }
/* Runs a global block: nothing to release. */
static void rl_call_global(void *b) { ((void (^)(void))b)(); }

/* Small stack blocks are queued without Block_copy's malloc (and without
 * the free on the loop's thread, which was most of a request's cost).
 *
 * The block ABI, as clang's "Block Implementation Specification" describes
 * it, as far as the queue reads it: a block is an isa, a 32-bit flags word,
 * a 32-bit reserved word, its invoke function and a descriptor pointer,
 * followed by the captured variables. The descriptor holds a reserved word,
 * the size of the whole block, and, when BLOCK_HAS_COPY_DISPOSE is set, the
 * copy helper (dst, src) and dispose helper (block) with which Block_copy
 * and Block_release retain and release the captures (__block variables,
 * captured blocks, Swift contexts). Block_copy of a stack block is: copy
 * descriptor->size bytes to new memory, then call the copy helper on
 * (new, old); the last Block_release calls the dispose helper, then frees.
 * A stack block of at most RL_BCOPY_MAX bytes without C++ captures is
 * copied the same way into the loop's own memory (slabs, below), runs from
 * there, and then gets its dispose helper and its space goes back. Nothing
 * but the queue ever sees that copy (it keeps the stack block's isa and
 * flags), and it never moves. Anything else takes the general
 * path: a global block is queued as it is (Block_copy would return it
 * unchanged), a heap block (from Swift, or copied already) and an unusual
 * block (C++ captures, a bigger one, another isa) go through Block_copy,
 * which for a heap block only increments its reference count. */
enum {
    RL_BLOCK_NEEDS_FREE = 1 << 24,       /* a heap block: reference counted */
    RL_BLOCK_HAS_COPY_DISPOSE = 1 << 25, /* the descriptor has the helpers */
    RL_BLOCK_HAS_CTOR = 1 << 26,         /* the helpers run C++ code */
    RL_BLOCK_IS_GC = 1 << 27,
    RL_BLOCK_IS_GLOBAL = 1 << 28, /* static storage: never copied */
};

typedef struct rl_block_descriptor {
    unsigned long reserved;
    unsigned long size; /* of the whole block, captures included */
    /* Only with RL_BLOCK_HAS_COPY_DISPOSE: */
    void (*copy_helper)(void *dst, void *src);
    void (*dispose_helper)(void *block);
} rl_block_descriptor;

typedef struct rl_block_layout {
    void *isa;
    int flags;
    int reserved;
    void (*invoke)(void *block);
    rl_block_descriptor *descriptor;
} rl_block_layout;

/* The BlocksRuntime's isa of block literals on the stack. */
extern void *_NSConcreteStackBlock[];

/* Block copies are packed in 16-byte granules (what malloc gives the
 * runtime's copies) into 16 KiB slabs, handed out in order under the queue
 * lock. A slab whose copies have all come back is reused (a few are kept)
 * or freed: memory follows the backlog, and a loop that keeps up with its
 * producers cycles through the same few slabs without any malloc. A slab is
 * found from a copy by alignment. Giving copies back takes no lock: each
 * slab counts down `remaining`, which starts at RL_BSLAB_BIAS; returns
 * subtract their sizes, and the producer that fills the slab subtracts
 * RL_BSLAB_BIAS minus the bytes it handed out, so the count reaches zero
 * exactly once, after the last of both, and whoever takes it there
 * recycles the slab. */
enum {
    RL_BCOPY_MAX = 64, /* the biggest block copied into a slab */
    RL_BGRAIN = 16,
    RL_BSLAB_SIZE = 16384,
    RL_BSLAB_CACHE = 64,     /* kept while the loop runs (1 MiB) */
    RL_BSLAB_CACHE_IDLE = 4, /* kept while it sleeps (rl_perform_trim) */
    RL_BSLAB_BIAS = 1 << 30,
};
typedef struct rl_bslab {
    struct rl_bslab *next; /* in the cache (an rl_flist: must come first) */
    RLRunLoopRef rl;       /* the owner (not retained: slabs go with it) */
    _Atomic unsigned remaining; /* see above */
    _Alignas(64) unsigned char data[RL_BSLAB_SIZE - 64];
} rl_bslab;
_Static_assert(sizeof(rl_bslab) == RL_BSLAB_SIZE, "a slab is RL_BSLAB_SIZE bytes");

static rl_bslab *rl_bslab_of(void *copy) { return (rl_bslab *)((uintptr_t)copy & ~(uintptr_t)(RL_BSLAB_SIZE - 1)); }
static unsigned rl_bcopy_size(size_t size) { return (unsigned)((size + RL_BGRAIN - 1) & ~(size_t)(RL_BGRAIN - 1)); }

/* Runs a block from its copy; rl_do_blocks disposes of it and gives the
 * space back (with the others of the batch). */
static void rl_call_bslot(void *s) { ((void (^)(void))s)(); }

static void rl_bslot_dispose_captures(void *s) {
    rl_block_layout *b = s;
    if (b->flags & RL_BLOCK_HAS_COPY_DISPOSE)
        b->descriptor->dispose_helper(b);
}

/* Takes `bytes` off a slab's count; true if that made it zero: the caller
 * recycles it. */
static bool rl_bslab_sub(rl_bslab *sl, unsigned bytes) {
    return atomic_fetch_sub_explicit(&sl->remaining, bytes, memory_order_acq_rel) == bytes;
}

/* Empties slab sl, whose count reached zero, and keeps it in rl's cache or
 * frees it. Queue lock not held. */
static void rl_bslab_recycle(RLRunLoopRef rl, rl_bslab *sl) {
    atomic_store_explicit(&sl->remaining, RL_BSLAB_BIAS, memory_order_relaxed);
    rl_qlock(rl);
    bool keep = rl->bcache.n < RL_BSLAB_CACHE;
    if (keep)
        rl_flist_push(&rl->bcache, sl);
    rl_qunlock(rl);
    if (!keep)
        free(sl);
}

/* Gives back n copies (their captures disposed of already). Runs of copies
 * from one slab (the usual case: they were handed out in order) cost one
 * atomic operation. */
static void rl_bslots_put(void *const *copies, size_t n) {
    for (size_t i = 0; i < n;) {
        rl_bslab *sl = rl_bslab_of(copies[i]);
        unsigned bytes = 0;
        for (; i < n && rl_bslab_of(copies[i]) == sl; i++)
            bytes += rl_bcopy_size(((rl_block_layout *)copies[i])->descriptor->size);
        if (rl_bslab_sub(sl, bytes))
            rl_bslab_recycle(sl->rl, sl);
    }
}

/* Space for a copy of `size` bytes, queue lock held; NULL if a slab is
 * needed. */
static void *rl_bslot_take_locked(RLRunLoopRef rl, size_t size) {
    unsigned need = rl_bcopy_size(size);
    rl_bslab *sl = rl->bcur;
    if (sl && rl->bcur_used + need > sizeof sl->data) {
        /* Full. If all its copies are back already, start over in it. */
        rl->bcur = NULL;
        if (rl_bslab_sub(sl, RL_BSLAB_BIAS - rl->bcur_used)) {
            atomic_store_explicit(&sl->remaining, RL_BSLAB_BIAS, memory_order_relaxed);
            rl->bcur = sl;
            rl->bcur_used = 0;
        } else {
            sl = NULL;
        }
    }
    if (!sl) {
        sl = rl_flist_pop(&rl->bcache);
        if (!sl)
            return NULL;
        rl->bcur = sl;
        rl->bcur_used = 0;
    }
    void *s = sl->data + rl->bcur_used;
    rl->bcur_used += need;
    return s;
}

/* Gives a new slab to the loop (to its cache); false if memory is short. */
static bool rl_bslab_add(RLRunLoopRef rl) {
    rl_bslab *sl = aligned_alloc(RL_BSLAB_SIZE, sizeof *sl);
    if (!sl)
        return false;
    /* Fault its pages in now, not under the queue's lock with a copy. */
    for (size_t off = 0; off < sizeof *sl; off += 4096)
        ((volatile unsigned char *)sl)[off] = 0;
    sl->rl = rl;
    atomic_init(&sl->remaining, RL_BSLAB_BIAS);
    rl_qlock(rl);
    rl_flist_push(&rl->bcache, sl);
    rl_qunlock(rl);
    return true;
}

/* The item's release, for a request dropped without running (teardown,
 * finalization): disposes of the captures, gives the space back. */
static void rl_bslot_dispose(void *s) {
    rl_bslot_dispose_captures(s);
    rl_bslots_put(&s, 1);
}

/* Copies a block of `size` bytes (a multiple of 8, at least the 32-byte
 * header, at most RL_BCOPY_MAX) word by word, inline: compilers turn a
 * switch of fixed-size memcpy calls back into one library call. */
static inline void rl_bcopy_bytes(void *dst, const void *src, size_t size) {
    typedef uint64_t __attribute__((may_alias, aligned(1))) rl_word;
    rl_word *d = dst;
    const rl_word *s = src;
    d[0] = s[0];
    d[1] = s[1];
    d[2] = s[2];
    d[3] = s[3];
    switch (size / 8) {
    case 8: d[7] = s[7]; /* fall through */
    case 7: d[6] = s[6]; /* fall through */
    case 6: d[5] = s[5]; /* fall through */
    case 5: d[4] = s[4]; /* fall through */
    default: break;
    }
}

/* Queues a copy of the stack block b, in a slot, for the mode `name`;
 * false if memory is short (nothing queued, name not freed). Without
 * helpers the copy is a few stores, made under the queue's lock with the
 * push; with them, the slot is taken, filled (the copy helper is runtime
 * code that may allocate) and then pushed. */
static bool rl_enqueue_bslot(RLRunLoopRef rl, char *name, const rl_block_layout *b) {
    size_t size = b->descriptor->size;
    bool helpers = (b->flags & RL_BLOCK_HAS_COPY_DISPOSE) != 0;
    void *s;
    for (;;) {
        rl_qlock(rl);
        if (!rl_pq_has_room_locked(&rl->pq, name ? 2 : 1)) {
            rl_qunlock(rl);
            if (!rl_pq_grow(&rl->pq))
                return false;
            continue;
        }
        s = rl_bslot_take_locked(rl, size);
        if (s)
            break;
        rl_qunlock(rl);
        if (!rl_bslab_add(rl))
            return false;
    }
    if (!helpers) {
        rl_bcopy_bytes(s, b, size);
        rl_preq_push_locked(rl, name, rl_call_bslot, s); /* room checked above */
        rl_qunlock(rl);
        return true;
    }
    rl_qunlock(rl);
    rl_bcopy_bytes(s, b, size);
    b->descriptor->copy_helper(s, (void *)b);
    if (rl_preq_push(rl, name, rl_call_bslot, s))
        return true;
    rl_bslot_dispose(s);
    return false;
}

bool RLRunLoopPerformBlock(RLRunLoopRef rl, RLRunLoopMode mode, void (^block)(void)) {
    const char *fn = "RLRunLoopPerformBlock";
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL block");
    const rl_block_layout *b = (const void *)block;
    /* Atomic: a heap block's reference count lives in its flags. */
    int flags = __atomic_load_n(&b->flags, __ATOMIC_RELAXED);
    if (flags & RL_BLOCK_IS_GLOBAL)
        return rl_enqueue(rl, mode, rl_call_global, (void *)b, fn);
    size_t size = b->descriptor->size;
    if (b->isa == (void *)_NSConcreteStackBlock &&
        !(flags & (RL_BLOCK_NEEDS_FREE | RL_BLOCK_HAS_CTOR | RL_BLOCK_IS_GC)) && size <= RL_BCOPY_MAX &&
        size >= 32 && size % 8 == 0) {
        char *name;
        if (!rl_preq_check(rl, mode, rl_call_bslot, fn, &name))
            return false;
        if (rl_enqueue_bslot(rl, name, b))
            return true;
        rl_pname_free(name);
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    }
    void *copy = (void *)Block_copy(block);
    if (!rl_enqueue(rl, mode, rl_call_block, copy, fn)) {
        Block_release((void (^)(void))copy);
        return false;
    }
    return true;
}
#endif

/* The loop is going to sleep: memory kept for a backlog goes back. Only
 * after passes that gave chunks or slabs back (the pools grow no other way
 * but for rare failure paths, which the next trim catches up with), and
 * not more often than every RL_TRIM_EVERY_NS while requests keep coming: a
 * loop that sleeps between the parts of a stream would otherwise free
 * chunks that the producer mallocs again at once, contending with it for
 * malloc's arena lock. A pass that ran no request trims at once. */
static void rl_perform_trim(RLRunLoopRef rl) {
    enum { RL_PQ_POOL_IDLE = 16 };
    const int64_t RL_TRIM_EVERY_NS = 100 * 1000 * 1000;
    if (!rl->trim_due)
        return;
    int64_t now = rl__spin_now();
    if (rl->pass_ran > 0 && now - rl->trimmed_at < RL_TRIM_EVERY_NS)
        return;
    rl->trimmed_at = now;
    rl->trim_due = false;
    rl_pchunk *spent = rl->spent;
    rl->spent = NULL;
    rl_qlock(rl); /* one lock round for both pools */
    spent = rl_pq_recycle_locked(&rl->pq, spent);
    void *chunks = rl_flist_cut(&rl->pq.pool, RL_PQ_POOL_IDLE);
#if __BLOCKS__
    void *slabs = rl_flist_cut(&rl->bcache, RL_BSLAB_CACHE_IDLE);
#endif
    rl_qunlock(rl);
    rl_flist_free(spent);
    rl_flist_free(chunks);
#if __BLOCKS__
    rl_flist_free(slabs);
#endif
}

/* Frees the slabs of block slots (the loop's finalization). */
static void rl_bslabs_free(RLRunLoopRef rl) {
#if __BLOCKS__
    free(rl->bcur);
    rl_flist_free(rl_flist_cut(&rl->bcache, 0));
#else
    (void)rl;
#endif
}

/* Disposes of a request that will not run (teardown, finalization). */
static void rl_preq_drop(rl_pslot s) {
#if __BLOCKS__
    if (s.fn == rl_call_bslot) {
        rl_bslot_dispose(s.arg);
        return;
    }
    if (s.fn == rl_call_block) {
        rl_release_block(s.arg);
        return;
    }
#endif
    if (s.fn == rl_owned_call_run)
        rl_owned_call_drop(s.arg);
}

/* Disposes of every request of chain c and gives its chunks back. */
static void rl_pchain_drop(RLRunLoopRef rl, rl_pchain c) {
    rl_pcur r = {c.head, 0};
    rl_pslot s;
    while (rl_pcur_read(&r, &s)) {
        if (s.fn)
            rl_preq_drop(s);
        else
            rl_pname_free(s.arg);
    }
    rl_pq_recycle(&rl->pq, c.head);
}

static bool rl_pchain_has_for(rl_pchain c, const rl_mode *m) {
    rl_pcur r = {c.head, 0};
    rl_pslot s;
    while (rl_pcur_read(&r, &s)) {
        if (s.fn) {
            if (m->is_default)
                return true;
        } else {
            if (rl_pname_matches(s.arg, m))
                return true;
            rl_pcur_read(&r, &s); /* its request */
        }
    }
    return false;
}

/* On the loop's thread. */
static bool rl_has_blocks_for(RLRunLoopRef rl, rl_mode *m) {
    if (rl_pchain_has_for(rl->held, m))
        return true;
    if (!rl_pq_maybe_queued(&rl->pq))
        return false;
    rl_qlock(rl);
    bool has = rl_pchain_has_for(rl->pq.q, m);
    rl_qunlock(rl);
    return has;
}

/* A batch of requests being run (rl_do_blocks), where a thread unwinding
 * from one of them finds it. The batch's chain is compacted as it is read:
 * requests for other modes are written back at w, in order, with their
 * prefixes, and stay queued (rl->held) for the modes they are for. */
typedef struct rl_batch {
    RLRunLoopRef rl;
    uint32_t nrun; /* requests run */
    rl_pchain chain;
    rl_pcur r, w;
    rl_pslot cur;   /* the request running */
    char *cur_name; /* and its mode prefix */
    bool running;   /* cur's function is running */
#if __BLOCKS__
    /* Blocks that ran are released in batches, after running: the frees
     * (of memory the producer's thread allocated) come together instead of
     * interleaving with the calls. */
    void *ran[64]; /* block copies; slots (rl_call_bslot) tagged with bit 0 */
    size_t nran;
#endif
} rl_batch;

#if __BLOCKS__
/* Releases the blocks that ran: a copy by Block_release; a slot by its
 * dispose helper, the slots then going back to the pool in one step. */
static void rl_ran_flush(rl_batch *b) {
    size_t n = b->nran, nslots = 0;
    b->nran = 0; /* before any release: one could end the thread */
    void *slots[sizeof b->ran / sizeof b->ran[0]];
    for (size_t k = 0; k < n; k++) {
        uintptr_t p = (uintptr_t)b->ran[k];
        if (p & 1) {
            slots[nslots] = (void *)(p - 1);
            rl_bslot_dispose_captures(slots[nslots++]);
        } else {
            rl_release_block((void *)p);
        }
    }
    if (nslots) {
        rl_bslots_put(slots, nslots);
        b->rl->trim_due = true; /* a slab may have gone back to the cache */
    }
}

/* Notes that request s ran (its block is released in a batch). */
static void rl_ran_add(rl_batch *b, rl_pslot s) {
    if (s.fn == rl_call_block)
        b->ran[b->nran++] = s.arg;
    else if (s.fn == rl_call_bslot)
        b->ran[b->nran++] = (void *)((uintptr_t)s.arg | 1);
    else
        return;
    if (b->nran == sizeof b->ran / sizeof b->ran[0])
        rl_ran_flush(b);
}
#endif

/* Reads the next request: *s and its mode prefix *name; false at the end. */
static bool rl_batch_next(rl_batch *b, rl_pslot *s, char **name) {
    if (!rl_pcur_read(&b->r, s))
        return false;
    *name = NULL;
    if (!s->fn) {
        *name = s->arg;
        rl_pcur_read(&b->r, s); /* a prefix is always followed by its request */
    }
    return true;
}

static void rl_batch_keep(rl_batch *b, rl_pslot s, char *name) {
    if (name)
        rl_pcur_write(&b->w, (rl_pslot){NULL, name});
    rl_pcur_write(&b->w, s);
}

/* The kept requests go in front of any that a nested run kept meanwhile
 * (those came later); the chunks no longer needed go back to the queue
 * with the next take (one lock round a pass, not two). */
static void rl_batch_finish(rl_batch *b) {
    rl_pchunk *rest;
    rl_pchain kept = rl_pcur_finish(b->chain, b->w, &rest);
    b->rl->held = rl_pchain_cat(kept, b->rl->held);
    if (rest) {
        rl_pchunk *last = rest;
        while (last->next)
            last = last->next;
        last->next = b->rl->spent;
        b->rl->spent = rest;
        b->rl->trim_due = true;
    }
}

static bool rl_run_batch(rl_batch *b, rl_mode *m) {
    bool did = false;
    rl_pslot s;
    char *name;
    while (rl_batch_next(b, &s, &name)) {
        /* The requests were written on other threads: fetch a few ahead
         * (a block is read to run it, and written to release it). */
        if (b->r.c && b->r.i + 4 < b->r.c->n)
            __builtin_prefetch(b->r.c->s[b->r.i + 4].arg, 1);
        if (!rl_pname_matches(name, m)) {
            rl_batch_keep(b, s, name);
            continue;
        }
        b->cur = s;
        b->cur_name = name;
        b->running = true;
        s.fn(s.arg);
        b->running = false;
        rl_pname_free(name);
        b->nrun++;
        did = true;
#if __BLOCKS__
        rl_ran_add(b, s);
#endif
    }
#if __BLOCKS__
    rl_ran_flush(b);
#endif
    return did;
}

/* RLThreadExit (pthread_exit) from a request unwinds through here: the
 * running request counts as run (a block is released, with those that ran
 * before it), and the requests not yet looked at stay queued with the kept
 * ones, where the thread's teardown disposes of them. */
static void rl_batch_unwind(void *p) {
    rl_batch *b = p;
    /* Not running: a release of a block that ran ended the thread; the
     * request was done with already. */
    if (b->running) {
        b->running = false;
        rl_pname_free(b->cur_name);
#if __BLOCKS__
        rl_ran_add(b, b->cur); /* b->nran < 64 here: rl_ran_add flushes when full */
#endif
    }
#if __BLOCKS__
    rl_ran_flush(b);
#endif
    rl_pslot s;
    char *name;
    while (rl_batch_next(b, &s, &name))
        rl_batch_keep(b, s, name);
    rl_batch_finish(b);
}

/* Runs the queued requests for mode m: those kept from earlier passes
 * first (they are older), then all that came since, each once; requests
 * queued while these run wait for the next pass, as in CF. */
static bool rl_do_blocks(RLRunLoopRef rl, rl_mode *m) {
    if (!rl->held.head && !rl_pq_maybe_queued(&rl->pq))
        return false;
    rl_qlock(rl);
    rl_pchain in = rl_pq_take_locked(&rl->pq);
    rl_pchunk *spent = rl->spent ? rl_pq_recycle_locked(&rl->pq, rl->spent) : NULL;
    rl_qunlock(rl);
    rl->spent = NULL;
    rl_flist_free(spent);
    if (!in.head && !rl->held.head)
        return false;
    rl_batch b;
    b.rl = rl;
    b.chain = rl_pchain_cat(rl->held, in);
    rl->held = (rl_pchain){NULL, NULL};
    b.r = b.w = (rl_pcur){b.chain.head, 0};
    b.running = false;
    b.nrun = 0;
#if __BLOCKS__
    b.nran = 0;
#endif
    bool did;
    pthread_cleanup_push(rl_batch_unwind, &b);
    rl__cleanup_arg_escapes(&b);
    did = rl_run_batch(&b, m);
    pthread_cleanup_pop(0);
    rl_batch_finish(&b);
    rl->pass_ran += b.nrun;
    return did;
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
    rl__graph_lock();
    bool empty = m->nsources == 0 && rl__tset_count(&m->timers) == 0;
    rl__graph_unlock();
    return empty && !rl_has_blocks_for(rl, m);
}

/* Graph lock held. */
static void rl_observer_unpin(struct RLRunLoopObserver *o, rl_defer *d) {
    if (--o->pins > 0)
        return;
    for (; o->held_releases > 0; o->held_releases--)
        rl__defer_release(d, o);
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
    rl__graph_lock();
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
        bool go = o->valid && !o->firing;
        o->firing = go;
        rl__graph_unlock();
        if (go)
            o->callout(o, act, o->ctx.info);
        rl__graph_lock();
        if (go) {
            o->firing = false;
            if (!o->repeats && o->valid)
                rl__observer_invalidate_locked(o, &d);
        }
        rl_observer_unpin(o, &d);
    }
    rl__graph_unlock();
    if (d.n)
        rl__defer_run(&d);
    if (list != small)
        free(list);
}

static void rl_sort_sources(struct RLRunLoopSource **a, size_t n) {
    for (size_t i = 1; i < n; i++) {
        struct RLRunLoopSource *s = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1]->order > s->order) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = s;
    }
}

/* Takes the signalled sources of mode m off the ready list (retained), in
 * perform order. Stale entries (unsignalled or invalid) are dropped. */
static size_t rl_take_ready(RLRunLoopRef rl, rl_mode *m, struct RLRunLoopSource ***out, struct RLRunLoopSource **small,
                            size_t nsmall, rl_defer *d) {
    size_t n = 0, keep = 0;
    struct RLRunLoopSource **a = rl->nready <= nsmall ? small : malloc(rl->nready * sizeof *a);
    for (size_t i = 0; i < rl->nready; i++) {
        struct RLRunLoopSource *s = rl->ready[i];
        if (!s->valid || !s->signalled || !rl_item_in_loop(s, RL_KIND_SOURCE, rl))
            rl__defer_release(d, s);
        else if (a && rl__memb_in_mode(s, RL_KIND_SOURCE, m))
            a[n++] = s; /* the ready list's reference moves to `a` */
        else
            rl->ready[keep++] = s;
    }
    rl->nready = keep;
    rl_sort_sources(a, n);
    *out = a;
    return n;
}

static bool rl_do_sources0(RLRunLoopRef rl, rl_mode *m, bool stop_after_handle) {
    rl_defer d;
    rl__defer_init(&d);
    struct RLRunLoopSource *small[16], **a = small;
    rl__graph_lock();
    size_t n = rl->nready ? rl_take_ready(rl, m, &a, small, 16, &d) : 0;
    rl__graph_unlock();
    rl__defer_run(&d);
    if (n == 0) {
        if (a != small)
            free(a);
        return false;
    }
    bool handled = false;
    size_t i = 0;
    for (; i < n; i++) {
        struct RLRunLoopSource *s = a[i];
        rl__graph_lock();
        bool go = s->signalled && s->valid;
        if (go)
            s->signalled = false;
        rl__graph_unlock();
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
    /* Sources not reached keep their signal for the next pass. */
    rl__graph_lock();
    for (size_t j = i; j < n; j++) {
        if (a[j]->signalled && a[j]->valid)
            rl_ready_push(rl, a[j]);
    }
    rl__graph_unlock();
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
    return a->seq < b->seq ? -1 : (a->seq > b->seq);
}

static void rl_fire_timer(RLRunLoopRef rl, rl_mode *m, struct RLRunLoopTimer *t) {
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    rl__graph_lock();
    /* m is a mode of rl: a membership in m means t is in rl. */
    bool go = t->valid && !t->firing && t->fire_date <= now && rl__memb_in_mode(t, RL_KIND_TIMER, m);
    if (go) {
        t->firing = true;
        t->moved_in_fire = false;
    }
    rl__graph_unlock();
    if (!go)
        return;
    t->callout(t, t->ctx.info);
    rl_defer d;
    rl__defer_init(&d);
    rl__graph_lock();
    t->firing = false;
    rl__timer_after_fire_locked(t, RLAbsoluteTimeGetCurrent(), &d);
    rl__graph_unlock();
    rl__defer_run(&d);
}

static void rl_do_timers(RLRunLoopRef rl, rl_mode *m) {
    rl_memb **due = NULL;
    size_t n = 0, cap = 0;
    rl__graph_lock();
    if (rl__tset_count(&m->timers) == 0) {
        rl__graph_unlock(); /* no clock read for a mode without timers */
        return;
    }
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    rl__tset_collect_due(&m->timers, now, &due, &n, &cap);
    if (n > 1)
        qsort(due, n, sizeof *due, rl_cmp_timer_memb);
    for (size_t i = 0; i < n; i++) {
        due[i] = due[i]->item; /* keep the timer, not the membership */
        rl_retain_raw(due[i]);
    }
    rl__graph_unlock();
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopTimer *t = (struct RLRunLoopTimer *)due[i];
        rl_fire_timer(rl, m, t);
        RLRelease(t);
    }
    free(due);
}

typedef struct rl_fd_fire {
    struct RLRunLoopSource *src;
    RLOptionFlags types;
} rl_fd_fire;

/* Turns an epoll event into the callbacks to deliver, for each source on
 * fd (at most max) whose enabled callbacks match; one-shot: the delivered
 * types are disabled before the callout. Returns how many went to out.
 * Graph lock held. */
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
        RLOptionFlags types = f ? ready & f->enabled : 0;
        if (!types || !s->valid || !f->valid || !rl__memb_in_mode(s, RL_KIND_SOURCE, m))
            continue;
        f->enabled &= ~types;
        rl__fd_changed_locked(f); /* re-syncs fd here and in its other loops; r->srcs unchanged */
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
    rl__graph_lock();
    for (int i = 0; i < nev; i++) {
        int fd = ev[i].data.fd;
        if (fd == rl->evfd || fd == rl->tfd)
            continue;
        if (stop_after_handle && n == 1)
            break; /* the others stay armed and report again */
        size_t k = fd >= 0 && (size_t)fd < rl->nfdtab ? rl->fdtab[fd].nsrcs : 0;
        if (!rl_fd_fire_reserve(&fire, inl, &cap, n, n + k))
            k = cap - n; /* out of memory: the rest stay enabled and report again */
        n += rl_fd_take(rl, m, fd, ev[i].events, fire + n, stop_after_handle ? 1 : k);
    }
    rl__graph_unlock();
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
        rl__graph_lock();
        struct RLFileDescriptor *f = s->fdobj;
        bool go = s->valid && f && f->valid;
        rl__graph_unlock();
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

/* A poll with no user fd to look at and no timerfd expiry to drain has
 * nothing to ask the kernel: due timers are found by the clock. */
static bool rl_poll_needs_no_syscall(RLRunLoopRef rl) {
    return rl->nfd_armed == 0 && (rl->armed_at == INFINITY || !(rl->armed_at <= rl_mono_now()));
}

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
 * passes. Called without the graph lock and with `sleeping` clear, so a
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
    rl__graph_lock();
    if (rl->armed_mode != f->mode) {
        rl->armed_mode = f->mode;
        rl_fd_sync_all(rl);
    }
    /* A stop that came after this pass's own check may have found wake-ups
     * still ignored (between that check and the start of this pass): seen
     * here, under the lock the stopper set it under, it is not slept on. */
    if (f->stopped)
        poll = true;
    int timeout = 0;
    int64_t learn_from = 0; /* the start of a wait the spin budget learns from; 0: none */
    if (!poll) {
        double at = rl_next_wake(rl, f);
        double now = rl_mono_now();
        if (at > now && !atomic_load(&rl->wake_pending) && rl_spin_eligible(rl)) {
            learn_from = rl__spin_now();
            uint32_t budget = rl__spin_budget(&rl->spin);
            if (budget > 0) {
                rl__graph_unlock();
                double left = (at - now) * 1e9;
                rl_spin_for_wake(rl, learn_from + (left < budget ? (int64_t)left : (int64_t)budget));
                rl__graph_lock();
                at = rl_next_wake(rl, f); /* a timer may have come meanwhile */
            }
        }
        if (at > rl_mono_now()) {
            rl_arm_timerfd(rl, at);
            timeout = -1;
        }
    } else if (rl_poll_needs_no_syscall(rl)) {
        rl__graph_unlock();
        rl_flag_set(&rl->ignore_wakeups, 1);
        rl_flag_set(&rl->wake_pending, 0);
        return 0;
    }
    /* A wake-up already pending turns the wait into a poll, and a poll with
     * nothing to ask the kernel needs no system call. */
    if (atomic_load(&rl->wake_pending) && rl_poll_needs_no_syscall(rl)) {
        rl__graph_unlock();
        rl_flag_set(&rl->ignore_wakeups, 1);
        rl_flag_set(&rl->wake_pending, 0);
        if (learn_from)
            rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, true);
        return 0;
    }
    atomic_store(&rl->sleeping, 1);
    rl__graph_unlock();
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
    for (int i = 0; i < n; i++) {
        if (ev[i].data.fd == rl->evfd) {
            woken = true; /* edge-triggered: nothing to read back */
        } else if (ev[i].data.fd == rl->tfd) {
            rl_drain(rl->tfd);
            rl__graph_lock();
            rl->armed_at = INFINITY;
            rl__graph_unlock();
        }
    }
    if (learn_from)
        rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, woken);
    return n < 0 ? 0 : n;
}

static RLRunLoopRunResult rl_run_frame(RLRunLoopRef rl, rl_frame *f, bool poll_only, bool stop_after_handle) {
    struct epoll_event ev[64];
    rl_mode *m = f->mode;
    for (;;) {
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
            rl_perform_trim(rl);
            rl_do_observers(rl, m, kRLRunLoopBeforeWaiting);
        }
        int n = rl_wait(rl, f, poll, ev, 64);
        if (!poll)
            rl->pass_ran = 0; /* counted from each wait on */
        if (!poll)
            rl_do_observers(rl, m, kRLRunLoopAfterWaiting);
        rl_do_timers(rl, m);
        if (rl_do_fds(rl, m, ev, n, stop_after_handle && !handled))
            handled = true;
        rl_do_blocks(rl, m);

        if (handled && stop_after_handle)
            return kRLRunLoopRunHandledSource;
        if (poll_only || rl_mono_now() >= f->deadline)
            return kRLRunLoopRunTimedOut;
        rl__graph_lock();
        bool stopped = f->stopped;
        f->stopped = false;
        rl__graph_unlock();
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
    rl__graph_lock();
    st->rl->frame = st->f->outer;
    rl__graph_unlock();
    /* Back in the outer run's pass (or out of any run): its wake-up state. */
    atomic_store(&st->rl->ignore_wakeups, st->outer_ignore);
}

static RLRunLoopRunResult rl_run(RLRunLoopRef rl, const char *mode, RLTimeInterval seconds, bool stop_after_handle) {
    rl__graph_lock();
    rl_mode *m = atomic_load(&rl->dead) ? NULL : rl_mode_find(rl, mode);
    rl__graph_unlock();
    if (!m || rl_mode_is_empty(rl, m))
        return kRLRunLoopRunFinished;
    /* As CF: a wake-up given while no run was going on is dropped. Nothing
     * is lost by it: what the waker queued or signalled is seen by the first
     * pass of this run anyway. */
    atomic_store(&rl->wake_pending, 0);
    int outer_ignore = atomic_exchange(&rl->ignore_wakeups, 1);
    bool poll_only = !(seconds > 0);
    double deadline = poll_only ? 0 : (seconds > 1e10 ? INFINITY : rl_mono_now() + seconds);
    rl_frame f = {m, false, deadline, NULL};
    rl__graph_lock();
    f.outer = rl->frame;
    rl->frame = &f;
    rl__graph_unlock();

    rl_run_state st = {rl, &f, outer_ignore, 0};
    pthread_cleanup_push(rl_run_leave, &st);
    rl__cleanup_arg_escapes(&st);
    rl_do_observers(rl, m, kRLRunLoopEntry);
    st.result = rl_run_frame(rl, &f, poll_only, stop_after_handle);
    rl_do_observers(rl, m, kRLRunLoopExit);
    pthread_cleanup_pop(1);
    return st.result;
}

RLRunLoopRunResult RLRunLoopRunInMode(RLRunLoopMode mode, RLTimeInterval seconds, bool returnAfterSourceHandled) {
    const char *fn = "RLRunLoopRunInMode";
    if (!rl_mode_name_ok(mode, fn))
        return 0;
    if (rl_is_common(mode))
        return (RLRunLoopRunResult)rl__fail(kRLErrorInvalidArgument, fn,
                                            "kRLRunLoopCommonModes is not a mode one can run in");
    if (isnan(seconds))
        return (RLRunLoopRunResult)rl__fail(kRLErrorInvalidArgument, fn, "NaN interval");
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    if (!rl)
        return 0;
    return rl_run(rl, mode, seconds, returnAfterSourceHandled);
}

RLRunLoopRunResult RLRunLoopRun(void) {
    RLRunLoopRunResult r;
    do {
        r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e10, false);
    } while (r != kRLRunLoopRunStopped && r != kRLRunLoopRunFinished && r != 0);
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
    for (size_t i = 0; i < rl->nmodes; i++)
        rl_mode_free(rl->modes[i]);
    free(rl->modes);
    for (size_t i = 0; i < rl->ncommon; i++)
        free(rl->common[i].name);
    free(rl->common);
    free(rl->citems);
    free(rl->ready);
    for (size_t i = 0; i < rl->nfdtab; i++)
        free(rl->fdtab[i].srcs);
    free(rl->fdtab);
    rl_pchain_drop(rl, rl_pchain_cat(rl->held, rl_pq_take_locked(&rl->pq)));
    rl->held = (rl_pchain){NULL, NULL};
    rl_flist_free(rl->spent);
    rl->spent = NULL;
    rl_pq_destroy(&rl->pq);
    rl_bslabs_free(rl);
    rl_close(rl->epfd);
    rl_close(rl->evfd);
    rl_close(rl->tfd);
}

static bool rl_watch(RLRunLoopRef rl, int fd, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.fd = fd};
    return epoll_ctl(rl->epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

static RLRunLoopRef rl_create(pthread_t thread) {
    const char *fn = "RLRunLoopGetCurrent";
    RLRunLoopRef rl = rl__object_alloc(&rl__runloop_class, sizeof *rl, fn);
    if (!rl)
        return NULL;
    rl->thread = thread;
    rl->armed_at = INFINITY;
    atomic_init(&rl->ignore_wakeups, 1); /* not running */
    atomic_init(&rl->waker_cpu, -1);
    atomic_init(&rl->cpu, -1);
    rl->epfd = epoll_create1(EPOLL_CLOEXEC);
    rl->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    rl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (rl->epfd < 0 || rl->evfd < 0 || rl->tfd < 0 || !rl_watch(rl, rl->evfd, EPOLLIN | EPOLLET) ||
        !rl_watch(rl, rl->tfd, EPOLLIN)) {
        int err = errno;
        RLRelease(rl);
        rl__fail_errno(err, fn, "cannot create the run loop's descriptors");
        return NULL;
    }
    /* The default mode exists from the start and is common, as in CF. */
    rl__graph_lock();
    rl->common = calloc(1, sizeof *rl->common);
    rl_mode *m = NULL;
    if (rl->common && (rl->common[0].name = strdup(kRLRunLoopDefaultMode))) {
        rl->capcommon = rl->ncommon = 1;
        m = rl_mode_get(rl, kRLRunLoopDefaultMode, fn);
    }
    rl__graph_unlock();
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
static pthread_key_t rl_key;
static pthread_once_t rl_key_once = PTHREAD_ONCE_INIT;
static __thread RLRunLoopRef rl_tls;

__attribute__((constructor)) static void rl_record_main_thread(void) { rl_main_thread = pthread_self(); }

static void rl_teardown(RLRunLoopRef rl);

static void rl_threadtab_forget_self(RLRunLoopRef mine);

static void rl_key_destructor(void *v) {
    RLRunLoopRef rl = v;
    rl_tls = NULL;
    rl_teardown(rl);
    rl_threadtab_forget_self(rl);
    RLRelease(rl);
}

static void rl_make_key(void) { pthread_key_create(&rl_key, rl_key_destructor); }

/* ==== BEGIN run loops by thread (lazy loops for RLThread / RLPerform) ====
 * CF's _CFRunLoopGet0(pthread_t): a table from thread to run loop, so that
 * another thread can obtain (creating it if needed) the loop of a thread
 * that has not asked for it yet, and that thread later gets the same loop
 * from RLRunLoopGetCurrent. Threads therefore need no loop up front. The
 * table holds one reference per entry; a thread's entry goes when the
 * thread tears its loop down (rl__runloop_teardown_current_thread or the
 * pthread-key destructor). The main thread's loop is rl_main_loop, not in
 * the table. Lock order: table mutex, then the graph lock. */
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
    RLRelease(e->rl);
    free(e);
}

RLRunLoopRef rl__runloop_get_for_thread(pthread_t thread) {
    if (pthread_equal(thread, rl_main_thread))
        return RLRunLoopGetMain();
    return rl_threadtab_get(thread);
}

/* RLRunLoopPerformFunctionWithRelease (kept in this block, apart from the
 * hot perform path above): the request carries a small record, so the
 * queue's items stay as they are. */
typedef struct rl_owned_call {
    void (*fn)(void *);
    void *info;
    RLPerformReleaseCallBack release;
} rl_owned_call;

static void rl_owned_call_release(void *p) {
    rl_owned_call *c = p;
    c->release(c->info);
}

static void rl_owned_call_run(void *p) {
    rl_owned_call c = *(rl_owned_call *)p;
    free(p);
    /* Released also when c.fn ends the thread (RLThreadExit unwinds). */
    pthread_cleanup_push(rl_owned_call_release, &c);
    rl__cleanup_arg_escapes(&c);
    c.fn(c.info);
    pthread_cleanup_pop(1);
}

static void rl_owned_call_drop(void *p) {
    rl_owned_call c = *(rl_owned_call *)p;
    free(p);
    c.release(c.info);
}

bool RLRunLoopPerformFunctionWithRelease(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *info), void *info,
                                         RLPerformReleaseCallBack release) {
    const char *fname = "RLRunLoopPerformFunctionWithRelease";
    if (!release)
        return rl_enqueue(rl, mode, fn, info, fname);
    rl_owned_call *c = malloc(sizeof *c);
    bool ok;
    if (!c) {
        ok = rl__fail(kRLErrorNoMemory, fname, "out of memory");
    } else {
        *c = (rl_owned_call){fn, info, release};
        /* A NULL fn is refused by rl_enqueue, after the loop and mode. */
        ok = rl_enqueue(rl, mode, fn ? rl_owned_call_run : NULL, c, fname);
    }
    if (!ok) {
        free(c);
        release(info); /* refused: ownership was passed all the same */
    }
    return ok;
}
/* ==== END run loops by thread ==== */

RLRunLoopRef RLRunLoopGetMain(void) {
    pthread_mutex_lock(&rl_main_mutex);
    if (!rl_main_loop) {
        rl_main_loop = rl_create(rl_main_thread);
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
        if (rl)
            RLRetain(rl); /* the thread's reference; the global one stays */
    } else {
        /* The table keeps its reference; this one is the thread's. */
        rl = rl_threadtab_get(pthread_self());
        if (rl)
            RLRetain(rl);
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
    rl__graph_lock();
    atomic_store(&rl->dead, true);
    for (int kind = RL_KIND_SOURCE; kind <= RL_KIND_OBSERVER; kind++) {
        for (size_t i = 0; i < rl->nmodes; i++) {
            rl_mode *m = rl->modes[i];
            if (kind == RL_KIND_SOURCE) {
                while (!TAILQ_EMPTY(&m->sources))
                    rl_remove_memb_locked(TAILQ_FIRST(&m->sources), &d);
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
        rl__defer_release(&d, rl->citems[i].item);
    rl->nci = 0;
    for (size_t i = 0; i < rl->nready; i++)
        rl__defer_release(&d, rl->ready[i]);
    rl->nready = 0;
    rl__graph_unlock();
    rl__defer_run(&d);

    rl_qlock(rl);
    rl_pchain q = rl_pq_take_locked(&rl->pq);
    rl_qunlock(rl);
    rl_pchain held = rl->held;
    rl->held = (rl_pchain){NULL, NULL};
    rl_pchain_drop(rl, rl_pchain_cat(held, q));
}

void rl__runloop_teardown_current_thread(void) {
    RLRunLoopRef rl = rl_tls;
    if (rl) {
        rl_tls = NULL;
        pthread_once(&rl_key_once, rl_make_key);
        pthread_setspecific(rl_key, NULL);
        rl_teardown(rl);
    }
    /* Also a loop another thread made for this one (never run here). */
    rl_threadtab_forget_self(rl);
    if (rl)
        RLRelease(rl);
}
