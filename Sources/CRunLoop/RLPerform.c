/* RLPerform.c — perform requests onto a thread's run loop, and delayed
 * performs on the current thread.
 *
 * Each thread keeps its own FIFO of requests under its lock. The run loop
 * only ever holds "drain" calls (RLRunLoopPerformFunction) whose info is a
 * drain record owned by the thread, one per mode key with at most one call
 * outstanding: a drain runs, on the target thread, every request queued
 * before it started that is eligible in the mode the loop is running. The
 * requests themselves never sit in the run loop, so a thread that finishes
 * can release every waiter and free every request, and nothing leaks when
 * a loop is torn down with drain calls still queued. */
#include "RLLockInternal.h"
#include "RLThreadInternal.h"
#include "rl_spin.h"
#include <crunloop/RLPerform.h>

#include <bsd/sys/queue.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if __BLOCKS__
extern void *_Block_copy(const void *block);
extern void _Block_release(const void *block);
#endif

/* A waitUntilDone sender's completion word, on its stack: PENDING until
 * the request ran (DONE) or was dropped (FAILED); SLEEPING while the sender
 * is (about to be) asleep on it in the kernel. */
enum { RL__WAIT_PENDING = 0, RL__WAIT_SLEEPING = 1, RL__WAIT_DONE = 2, RL__WAIT_FAILED = 3 };

typedef struct rl__perform_waiter {
    _Atomic uint32_t state;
} rl__perform_waiter;

/* Tells the waiter its request ran (DONE) or will not (FAILED). Called with
 * no lock held, after the request was freed. Once the exchange is done the
 * waiter may return and its record (on its stack) be gone: only the address
 * is used after it, by a private FUTEX_WAKE, which never touches the memory
 * (at worst a spurious wake-up of whatever sleeps there later, and every
 * futex sleeper re-checks its word). The futex call is made only if the
 * waiter went to sleep; a waiter that has not yet finds the word changed. */
static void rl__waiter_complete(rl__perform_waiter *w, uint32_t status) {
    if (atomic_exchange_explicit(&w->state, status, memory_order_acq_rel) == RL__WAIT_SLEEPING)
        rl__futex_wake(&w->state, 1);
}

/* Spins while the request is pending, until `until` (rl__spin_now
 * nanoseconds); true if it completed meanwhile. */
static bool rl__waiter_spin(rl__perform_waiter *w, int64_t until) {
    do {
        for (int i = 0; i < 16; i++) {
            if (atomic_load_explicit(&w->state, memory_order_relaxed) != RL__WAIT_PENDING)
                return true;
            rl__cpu_relax();
        }
    } while (rl__spin_now() < until);
    return false;
}

/* Yields the CPU a few times while the request is pending. */
static void rl__waiter_yield(rl__perform_waiter *w) {
    if (!RL_TRICK_YIELD)
        return;
    for (int i = 0; i < 4 && atomic_load_explicit(&w->state, memory_order_relaxed) == RL__WAIT_PENDING; i++)
        sched_yield();
}

/* Blocks until the request is done or dropped; returns DONE or FAILED.
 * With `spin` (the target's loop runs on another CPU), it first spins
 * within that budget (rl_spin.h): a request the target runs at once then
 * completes with neither thread sleeping, where a sleep would have made
 * the reply wait for this CPU to wake up. On the target's own CPU
 * (`same_cpu`, or not known to be another) spinning would keep the target
 * from running: the sender
 * yields instead, which hands the target the CPU at once; it runs the
 * request and yields back (rl_pace_requests), and the reply comes with no
 * futex wait or wake (a same-CPU round trip: ~5.8 -> ~4 us here). A few
 * yields at most: if the target is busy with something else, the sender
 * sleeps as usual. */
static uint32_t rl__waiter_wait(rl__perform_waiter *w, rl__spin *spin, bool same_cpu) {
    int64_t t0 = spin ? rl__spin_now() : 0;
    uint32_t budget = spin ? rl__spin_budget(spin) : 0;
    if (budget > 0)
        rl__waiter_spin(w, t0 + budget);
    else if (same_cpu)
        rl__waiter_yield(w);
    uint32_t s = RL__WAIT_PENDING;
    if (atomic_compare_exchange_strong_explicit(&w->state, &s, RL__WAIT_SLEEPING, memory_order_acquire,
                                                memory_order_acquire)) {
        do {
            rl__futex_wait(&w->state, RL__WAIT_SLEEPING, NULL);
            s = atomic_load_explicit(&w->state, memory_order_acquire);
        } while (s == RL__WAIT_SLEEPING);
    } /* else: already completed, s holds DONE or FAILED */
    if (spin)
        rl__spin_learn(spin, rl__spin_now() - t0, true);
    return s;
}

typedef struct rl__perform_req {
    TAILQ_ENTRY(rl__perform_req) link;
    void (*fn)(void *arg);
    void *arg;
    RLPerformReleaseCallBack release; /* release(arg) when freed: ran or dropped */
    void *block;
    bool common;     /* in the common modes */
    size_t nmodes;   /* explicit modes (besides common) */
    char **modes;
    rl__perform_waiter *waiter; /* on the waiting thread's stack, or NULL */
} rl__perform_req;
TAILQ_HEAD(rl__perform_reqq, rl__perform_req);

typedef struct rl__perform_drain {
    struct rl__perform_drain *next;
    RLThreadRef thread;
    char *mode; /* NULL: the common modes */
    bool posted;
} rl__perform_drain;

typedef struct rl__delayed {
    struct rl__delayed *next;
    RLPerformToken token;
    RLThreadRef thread;
    void (*fn)(void *arg);
    void *arg;
    RLPerformReleaseCallBack release;
    void *block;
    RLRunLoopTimerRef timer;
} rl__delayed;

struct rl__perform_state {
    struct rl__perform_reqq queue;
    bool closed; /* the thread is exiting: no more requests */
    rl__perform_drain *drains;
    char **common_modes; /* modes seen running a common-modes drain */
    size_t ncommon;
    rl__delayed *delayed;
    rl__spin wait_spin; /* waitUntilDone senders: how long to spin for the reply */
};

static _Atomic uint64_t rl__next_perform_token = 1;

/* ---- requests ---- */

/* Frees a request that ran or is dropped: its block copy or its arg's
 * release callback goes with it. */
static void rl__req_free(rl__perform_req *r) {
    if (r->release)
        r->release(r->arg);
#if __BLOCKS__
    if (r->block)
        _Block_release(r->block);
#endif
    for (size_t i = 0; i < r->nmodes; i++)
        free(r->modes[i]);
    free(r->modes);
    free(r);
}

static bool rl__is_common(RLRunLoopMode m) { return strcmp(m, kRLRunLoopCommonModes) == 0; }

/* Copies a NULL-terminated mode list into r (NULL list: common modes). */
static bool rl__req_set_modes(rl__perform_req *r, const RLRunLoopMode *modes, const char *fn) {
    if (!modes) {
        r->common = true;
        return true;
    }
    size_t n = 0;
    while (modes[n]) {
        if (modes[n][0] == '\0')
            return rl__fail(kRLErrorInvalidArgument, fn, "empty mode name");
        n++;
    }
    if (n == 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "empty mode list");
    r->modes = calloc(n, sizeof *r->modes);
    if (!r->modes)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (rl__is_common(modes[i])) {
            r->common = true;
            continue;
        }
        bool dup = false;
        for (size_t j = 0; j < r->nmodes; j++)
            dup = dup || strcmp(r->modes[j], modes[i]) == 0;
        if (dup)
            continue;
        if (!(r->modes[r->nmodes] = strdup(modes[i])))
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        r->nmodes++;
    }
    return true;
}

static rl__perform_req *rl__req_new(void (*fn)(void *), void *arg, void *block, const RLRunLoopMode *modes,
                                    const char *fname) {
    rl__perform_req *r = calloc(1, sizeof *r);
    if (!r) {
        rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return NULL;
    }
    r->fn = fn;
    r->arg = arg;
    if (!rl__req_set_modes(r, modes, fname)) {
        rl__req_free(r);
        return NULL;
    }
    r->block = block;
    return r;
}

static void rl__req_run(rl__perform_req *r) {
#if __BLOCKS__
    if (r->block) {
        ((void (^)(void))r->block)();
        return;
    }
#endif
    r->fn(r->arg);
}

/* ---- per-thread state ---- */

static struct rl__perform_state *rl__state_locked(RLThreadRef t) {
    if (!t->perform) {
        struct rl__perform_state *s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        TAILQ_INIT(&s->queue);
        t->perform = s;
    }
    return t->perform;
}

static bool rl__known_common_locked(struct rl__perform_state *s, const char *mode) {
    for (size_t i = 0; i < s->ncommon; i++)
        if (strcmp(s->common_modes[i], mode) == 0)
            return true;
    return false;
}

static void rl__learn_common_locked(struct rl__perform_state *s, const char *mode) {
    if (rl__known_common_locked(s, mode))
        return;
    char **grown = realloc(s->common_modes, (s->ncommon + 1) * sizeof *grown);
    if (!grown)
        return;
    s->common_modes = grown;
    if ((grown[s->ncommon] = strdup(mode)))
        s->ncommon++;
}

static bool rl__req_eligible_locked(struct rl__perform_state *s, rl__perform_req *r, const char *mode,
                                    bool drain_is_common) {
    for (size_t i = 0; i < r->nmodes; i++)
        if (strcmp(r->modes[i], mode) == 0)
            return true;
    return r->common && (drain_is_common || rl__known_common_locked(s, mode));
}

static void rl__drain(void *info);

/* Makes sure a drain call is queued on the thread's loop for one mode key. */
static void rl__post_drain_locked(RLThreadRef t, struct rl__perform_state *s, const char *mode) {
    rl__perform_drain *d = s->drains;
    while (d && !(mode == NULL ? d->mode == NULL : (d->mode && strcmp(d->mode, mode) == 0)))
        d = d->next;
    if (!d) {
        d = calloc(1, sizeof *d);
        if (!d)
            return;
        if (mode && !(d->mode = strdup(mode))) {
            free(d);
            return;
        }
        d->thread = t;
        d->next = s->drains;
        s->drains = d;
    }
    if (d->posted)
        return;
    if (RLRunLoopPerformFunction(t->runloop, mode ? mode : kRLRunLoopCommonModes, rl__drain, d))
        d->posted = true;
}

static void rl__post_req_drains_locked(RLThreadRef t, struct rl__perform_state *s, rl__perform_req *r) {
    if (r->common)
        rl__post_drain_locked(t, s, NULL);
    for (size_t i = 0; i < r->nmodes; i++)
        rl__post_drain_locked(t, s, r->modes[i]);
}

/* A drain's batch while it runs, where an unwinding thread finds it. */
typedef struct rl__drain_run {
    RLThreadRef thread;
    struct rl__perform_reqq batch; /* taken, not yet run */
    rl__perform_req *current;      /* running, or NULL */
    rl__perform_waiter *freeing;   /* the waiter of the request being freed */
} rl__drain_run;

static void rl__drain_run_batch(rl__drain_run *run) {
    rl__perform_req *r;
    while ((r = TAILQ_FIRST(&run->batch))) {
        TAILQ_REMOVE(&run->batch, r, link);
        run->current = r;
        rl__req_run(r);
        run->current = NULL;
        /* The request (its block copy, its arg's release) is gone before
         * the waiter wakes: what the request captured may live on the
         * waiter's stack (a non-escaping closure). */
        rl__perform_waiter *waiter = r->waiter;
        run->freeing = waiter;
        rl__req_free(r);
        run->freeing = NULL;
        if (waiter)
            rl__waiter_complete(waiter, RL__WAIT_DONE);
    }
}

/* RLThreadExit (pthread_exit) from a request unwinds through here. The
 * running request counts as run: it is freed and its waiter told so. The
 * rest of the batch goes back to the front of the thread's queue, in order,
 * where the thread's exit sequence (rl__perform_thread_will_exit, later in
 * the same unwinding) drops them: released, their waiters failed. */
static void rl__drain_unwind(void *p) {
    rl__drain_run *run = p;
    if (run->freeing) /* a release callback ended the thread: the request ran */
        rl__waiter_complete(run->freeing, RL__WAIT_DONE);
    rl__perform_req *r = run->current;
    if (r) {
        run->current = NULL;
        rl__perform_waiter *waiter = r->waiter;
        rl__req_free(r);
        if (waiter)
            rl__waiter_complete(waiter, RL__WAIT_DONE);
    }
    RLThreadRef t = run->thread;
    struct rl__perform_reqq dropped = TAILQ_HEAD_INITIALIZER(dropped);
    pthread_mutex_lock(&t->lock);
    struct rl__perform_state *s = t->perform;
    if (s && !s->closed) {
        TAILQ_CONCAT(&run->batch, &s->queue, link);
        TAILQ_CONCAT(&s->queue, &run->batch, link);
    } else {
        TAILQ_CONCAT(&dropped, &run->batch, link); /* not expected: no one else would */
    }
    pthread_mutex_unlock(&t->lock);
    while ((r = TAILQ_FIRST(&dropped))) {
        TAILQ_REMOVE(&dropped, r, link);
        rl__perform_waiter *waiter = r->waiter;
        rl__req_free(r);
        if (waiter)
            rl__waiter_complete(waiter, RL__WAIT_FAILED);
    }
}

/* On the target thread, in its run loop. */
static void rl__drain(void *info) {
    rl__perform_drain *d = info;
    RLThreadRef t = d->thread;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    char *mode = rl ? RLRunLoopCopyCurrentMode(rl) : NULL;
    rl__drain_run run = {.thread = t, .current = NULL, .freeing = NULL};
    TAILQ_INIT(&run.batch);

    pthread_mutex_lock(&t->lock);
    d->posted = false;
    struct rl__perform_state *s = t->perform;
    if (s && mode) {
        if (d->mode == NULL)
            rl__learn_common_locked(s, mode);
        rl__perform_req *last = TAILQ_LAST(&s->queue, rl__perform_reqq);
        rl__perform_req *r = TAILQ_FIRST(&s->queue);
        while (r) {
            rl__perform_req *next = TAILQ_NEXT(r, link);
            if (rl__req_eligible_locked(s, r, mode, d->mode == NULL)) {
                TAILQ_REMOVE(&s->queue, r, link);
                TAILQ_INSERT_TAIL(&run.batch, r, link);
            }
            if (r == last)
                break;
            r = next;
        }
    }
    pthread_mutex_unlock(&t->lock);
    free(mode);

    if (TAILQ_EMPTY(&run.batch))
        return;
    pthread_cleanup_push(rl__drain_unwind, &run);
    rl__cleanup_arg_escapes(&run);
    rl__drain_run_batch(&run);
    pthread_cleanup_pop(0);
}

/* A delayed request that will not run (cancelled, or its thread exits):
 * its timer goes, its block copy or arg's release with it. */
static void rl__delayed_free(rl__delayed *e) {
    RLRunLoopTimerInvalidate(e->timer);
    RLRelease(e->timer);
#if __BLOCKS__
    if (e->block)
        _Block_release(e->block);
#endif
    if (e->release)
        e->release(e->arg);
    free(e);
}

/* ---- hooks called by RLThread.c ---- */

/* Gives t its run loop (retained in t->runloop) if it can have one now:
 * the main loop, or the loop of its pthread, made lazily. A thread being
 * started has no pthread yet; RLThreadStart attaches it once it has. */
static RLRunLoopRef rl__attach_loop_locked(RLThreadRef t) {
    if (t->runloop)
        return t->runloop;
    RLRunLoopRef rl = NULL;
    if (t->is_main)
        rl = RLRunLoopGetMain();
    else if (t->has_pthread)
        rl = rl__runloop_get_for_thread(t->pthread);
    if (rl)
        t->runloop = (RLRunLoopRef)RLRetain(rl);
    return rl;
}

void rl__perform_thread_did_create_locked(RLThreadRef t) {
    struct rl__perform_state *s = t->perform;
    if (!s || s->closed || TAILQ_EMPTY(&s->queue))
        return; /* the usual case: no loop is made */
    if (!rl__attach_loop_locked(t))
        return;
    rl__perform_req *r;
    TAILQ_FOREACH(r, &s->queue, link)
        rl__post_req_drains_locked(t, s, r);
    RLRunLoopWakeUp(t->runloop);
}

void rl__perform_thread_will_exit(RLThreadRef t) {
    pthread_mutex_lock(&t->lock);
    struct rl__perform_state *s = rl__state_locked(t);
    RLRunLoopRef rl = t->runloop;
    t->runloop = NULL;
    struct rl__perform_reqq dropped = TAILQ_HEAD_INITIALIZER(dropped);
    rl__delayed *delayed = NULL;
    if (s) {
        s->closed = true;
        TAILQ_CONCAT(&dropped, &s->queue, link);
        delayed = s->delayed;
        s->delayed = NULL;
        for (rl__perform_drain *d = s->drains; d; d = d->next)
            d->posted = false;
    }
    pthread_mutex_unlock(&t->lock);

    /* Each dropped request is freed (block copy, arg release) before its
     * waiter is told, as after a run; the waiter is still blocked, so its
     * record is alive until its status changes. */
    rl__perform_req *r;
    while ((r = TAILQ_FIRST(&dropped))) {
        TAILQ_REMOVE(&dropped, r, link);
        rl__perform_waiter *waiter = r->waiter;
        rl__req_free(r);
        if (waiter)
            rl__waiter_complete(waiter, RL__WAIT_FAILED);
    }
    while (delayed) {
        rl__delayed *next = delayed->next;
        rl__delayed_free(delayed);
        delayed = next;
    }
    if (rl)
        RLRelease(rl);
}

void rl__perform_thread_finalize(RLThreadRef t) {
    struct rl__perform_state *s = t->perform;
    if (!s)
        return;
    rl__perform_req *r;
    while ((r = TAILQ_FIRST(&s->queue))) {
        TAILQ_REMOVE(&s->queue, r, link);
        rl__req_free(r);
    }
    for (rl__perform_drain *d = s->drains, *next; d; d = next) {
        next = d->next;
        free(d->mode);
        free(d);
    }
    for (size_t i = 0; i < s->ncommon; i++)
        free(s->common_modes[i]);
    free(s->common_modes);
    free(s);
    t->perform = NULL;
    if (t->runloop) {
        RLRelease(t->runloop);
        t->runloop = NULL;
    }
}

/* ---- performing on a thread ---- */

static bool rl__perform(RLThreadRef t, rl__perform_req *r, bool wait, const char *fn) {
    bool on_target = t == rl__thread_current_if_any() || (t->is_main && RLThreadIsMainThread());
    if (wait && on_target) {
        /* Cocoa: waiting on yourself runs the request now. */
        rl__req_run(r);
        rl__req_free(r);
        return true;
    }
    rl__perform_waiter waiter = {RL__WAIT_PENDING};
    pthread_mutex_lock(&t->lock);
    const char *why = NULL;
    RLErrorCode code = kRLErrorInvalidState;
    struct rl__perform_state *s = NULL;
    if (t->state == RL__THREAD_CREATED)
        why = "thread was never started";
    else if (t->state == RL__THREAD_FINISHED || (t->perform && t->perform->closed))
        why = "thread has finished";
    else if (!(s = rl__state_locked(t)))
        why = "out of memory", code = kRLErrorNoMemory;
    if (why) {
        pthread_mutex_unlock(&t->lock);
        rl__req_free(r);
        return rl__fail(code, fn, "%s", why);
    }
    if (!rl__attach_loop_locked(t) && (t->is_main || t->has_pthread)) {
        pthread_mutex_unlock(&t->lock);
        rl__req_free(r);
        return false; /* no run loop could be made (error set) */
    }
    rl__spin *spin = NULL;
    bool same_cpu = false;
    if (wait) {
        r->waiter = &waiter;
        int cpu = t->runloop ? rl__runloop_cpu(t->runloop) : -1;
        int mine = rl__spin_cpu();
        if (cpu >= 0 && cpu != mine)
            spin = &s->wait_spin; /* s lives as long as t, which the caller holds */
        /* Not known to run elsewhere: the loop records its CPU only when
         * it is about to sleep, and a loop kept busy by this very exchange
         * may not have. */
        same_cpu = !(cpu >= 0 && cpu != mine);
    }
    TAILQ_INSERT_TAIL(&s->queue, r, link);
    if (t->runloop) {
        rl__post_req_drains_locked(t, s, r);
        RLRunLoopWakeUp(t->runloop);
    }
    pthread_mutex_unlock(&t->lock);
    if (!wait)
        return true;
    if (rl__waiter_wait(&waiter, spin, same_cpu) == RL__WAIT_FAILED)
        return rl__fail(kRLErrorInvalidState, fn, "thread finished before it ran the request");
    return true;
}

/* The function-pointer forms. A refused request still has its arg
 * released (the WithRelease rule, RLRunLoop.h). */
static bool rl__thread_perform(RLThreadRef thread, void (*fn)(void *), void *arg, RLPerformReleaseCallBack release,
                               const RLRunLoopMode *modes, bool wait, const char *fname) {
    rl__perform_req *r = NULL;
    if (!rl__object_check(thread, &rl__thread_class, fname))
        ;
    else if (!fn)
        rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
    else
        r = rl__req_new(fn, arg, NULL, modes, fname);
    if (!r) {
        if (release)
            release(arg);
        return false;
    }
    r->release = release;
    return rl__perform(thread, r, wait, fname);
}

bool RLThreadPerform(RLThreadRef thread, void (*fn)(void *arg), void *arg, const RLRunLoopMode *modes,
                     bool waitUntilDone) {
    return rl__thread_perform(thread, fn, arg, NULL, modes, waitUntilDone, "RLThreadPerform");
}

bool RLThreadPerformWithRelease(RLThreadRef thread, void (*fn)(void *arg), void *arg, RLPerformReleaseCallBack release,
                                const RLRunLoopMode *modes, bool waitUntilDone) {
    return rl__thread_perform(thread, fn, arg, release, modes, waitUntilDone, "RLThreadPerformWithRelease");
}

bool RLThreadPerformOnMain(void (*fn)(void *arg), void *arg, const RLRunLoopMode *modes, bool waitUntilDone) {
    RLThreadRef main_thread = RLThreadGetMain();
    if (!main_thread)
        return false;
    return rl__thread_perform(main_thread, fn, arg, NULL, modes, waitUntilDone, "RLThreadPerformOnMain");
}

bool RLThreadPerformOnMainWithRelease(void (*fn)(void *arg), void *arg, RLPerformReleaseCallBack release,
                                      const RLRunLoopMode *modes, bool waitUntilDone) {
    RLThreadRef main_thread = RLThreadGetMain();
    if (!main_thread) {
        if (release)
            release(arg);
        return false;
    }
    return rl__thread_perform(main_thread, fn, arg, release, modes, waitUntilDone,
                              "RLThreadPerformOnMainWithRelease");
}

#if __BLOCKS__
bool RLThreadPerformBlock(RLThreadRef thread, const RLRunLoopMode *modes, bool waitUntilDone, void (^block)(void)) {
    static const char fname[] = "RLThreadPerformBlock";
    if (!rl__object_check(thread, &rl__thread_class, fname))
        return false;
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
    rl__perform_req *r = rl__req_new(NULL, NULL, NULL, modes, fname);
    if (!r)
        return false;
    r->block = _Block_copy((const void *)block);
    return rl__perform(thread, r, waitUntilDone, fname);
}

bool RLThreadPerformBlockOnMain(const RLRunLoopMode *modes, bool waitUntilDone, void (^block)(void)) {
    RLThreadRef main_thread = RLThreadGetMain();
    if (!main_thread)
        return false;
    return RLThreadPerformBlock(main_thread, modes, waitUntilDone, block);
}
#endif

/* ---- delayed performs on the current thread ---- */

static void rl__delayed_fire(RLRunLoopTimerRef timer, void *info) {
    rl__delayed *e = info;
    RLThreadRef t = e->thread;
    pthread_mutex_lock(&t->lock);
    bool found = false;
    if (t->perform) {
        for (rl__delayed **link = &t->perform->delayed; *link; link = &(*link)->next) {
            if (*link == e) {
                *link = e->next;
                found = true;
                break;
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (!found)
        return; /* cancelled while due */
#if __BLOCKS__
    if (e->block) {
        ((void (^)(void))e->block)();
        _Block_release(e->block);
    } else
#endif
    {
        e->fn(e->arg);
        if (e->release)
            e->release(e->arg);
    }
    RLRunLoopTimerInvalidate(timer);
    RLRelease(e->timer);
    free(e);
}

static RLPerformToken rl__perform_after_delay(void (*fn)(void *), void *arg, RLPerformReleaseCallBack release,
                                              void *block, RLTimeInterval delay, const RLRunLoopMode *modes,
                                              const char *fname) {
    if (isnan(delay)) {
        rl__fail(kRLErrorInvalidArgument, fname, "NaN delay");
        return 0;
    }
    /* Validate the modes with the same rules as RLThreadPerform. */
    rl__perform_req *probe = rl__req_new(fn, arg, NULL, modes, fname);
    if (!probe)
        return 0;
    RLThreadRef t = RLThreadGetCurrent();
    RLRunLoopRef rl = t ? RLRunLoopGetCurrent() : NULL;
    rl__delayed *e = (t && rl) ? calloc(1, sizeof *e) : NULL;
    if (!e) {
        rl__req_free(probe);
        if (t && rl)
            rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return 0;
    }
    e->thread = t;
    e->block = block;
    e->fn = fn;
    e->arg = arg;
    e->token = atomic_fetch_add(&rl__next_perform_token, 1);
    RLRunLoopTimerContext ctx = {0, e, NULL, NULL, NULL};
    if (!(delay > 0))
        delay = 0;
    e->timer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + delay, 0, 0, 0, rl__delayed_fire, &ctx);
    if (!e->timer) {
        rl__req_free(probe);
        free(e);
        return 0;
    }
    pthread_mutex_lock(&t->lock);
    struct rl__perform_state *s = rl__state_locked(t);
    if (s) {
        e->release = release; /* from here on, e owns arg */
        e->next = s->delayed;
        s->delayed = e;
    }
    pthread_mutex_unlock(&t->lock);
    if (!s) {
        rl__req_free(probe);
        RLRelease(e->timer);
        free(e);
        rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return 0;
    }
    if (probe->common)
        RLRunLoopAddTimer(rl, e->timer, kRLRunLoopCommonModes);
    for (size_t i = 0; i < probe->nmodes; i++)
        RLRunLoopAddTimer(rl, e->timer, probe->modes[i]);
    rl__req_free(probe);
    return e->token;
}

RLPerformToken RLThreadPerformAfterDelay(void (*fn)(void *arg), void *arg, RLTimeInterval delay,
                                         const RLRunLoopMode *modes) {
    static const char fname[] = "RLThreadPerformAfterDelay";
    if (!fn) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
        return 0;
    }
    return rl__perform_after_delay(fn, arg, NULL, NULL, delay, modes, fname);
}

RLPerformToken RLThreadPerformAfterDelayWithRelease(void (*fn)(void *arg), void *arg,
                                                    RLPerformReleaseCallBack release, RLTimeInterval delay,
                                                    const RLRunLoopMode *modes) {
    static const char fname[] = "RLThreadPerformAfterDelayWithRelease";
    RLPerformToken token = 0;
    if (!fn)
        rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
    else
        token = rl__perform_after_delay(fn, arg, release, NULL, delay, modes, fname);
    if (!token && release)
        release(arg);
    return token;
}

#if __BLOCKS__
RLPerformToken RLThreadPerformBlockAfterDelay(RLTimeInterval delay, const RLRunLoopMode *modes, void (^block)(void)) {
    static const char fname[] = "RLThreadPerformBlockAfterDelay";
    if (!block) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
        return 0;
    }
    void *copy = _Block_copy((const void *)block);
    RLPerformToken token = rl__perform_after_delay(NULL, NULL, NULL, copy, delay, modes, fname);
    if (!token)
        _Block_release(copy);
    return token;
}
#endif

/* Unlinks the calling thread's delayed requests matching (token) or
 * (fn, arg) and cancels them; returns how many. */
static RLIndex rl__cancel_delayed(RLPerformToken token, void (*fn)(void *), void *arg) {
    RLThreadRef t = rl__thread_current_if_any();
    if (!t)
        return 0;
    rl__delayed *cancelled = NULL;
    pthread_mutex_lock(&t->lock);
    if (t->perform) {
        rl__delayed **link = &t->perform->delayed;
        while (*link) {
            rl__delayed *e = *link;
            bool match = token ? e->token == token : (!e->block && e->fn == fn && e->arg == arg);
            if (match) {
                *link = e->next;
                e->next = cancelled;
                cancelled = e;
            } else {
                link = &e->next;
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    RLIndex n = 0;
    while (cancelled) {
        rl__delayed *next = cancelled->next;
        rl__delayed_free(cancelled);
        cancelled = next;
        n++;
    }
    return n;
}

bool RLThreadCancelPerformRequest(RLPerformToken token) {
    if (token == 0 || rl__cancel_delayed(token, NULL, NULL) == 0)
        return rl__fail(kRLErrorNotFound, "RLThreadCancelPerformRequest",
                        "no pending delayed request %llu on this thread", (unsigned long long)token);
    return true;
}

RLIndex RLThreadCancelPreviousPerformRequests(void (*fn)(void *arg), void *arg) {
    if (!fn) {
        rl__fail(kRLErrorInvalidArgument, "RLThreadCancelPreviousPerformRequests", "NULL function");
        return -1;
    }
    return rl__cancel_delayed(0, fn, arg);
}
