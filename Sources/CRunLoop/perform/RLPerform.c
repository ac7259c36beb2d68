/* RLPerform.c — perform requests onto a thread (the front end of the
 * run-loop perform queue, RLRunLoopPerform.c, for RLThread targets), and
 * delayed performs on the current thread.
 *
 * A request to a thread goes into the queue of the thread's run loop (made
 * lazily, as CF's), as one record with its modes, release and waiter; the
 * queue runs it, drops it when the loop is torn down, and tells a waiter
 * either way. What this file adds is the thread's side: refusing threads
 * that were never started or have finished, and running a waited request
 * at once on the target thread itself (as Cocoa does). */
#include "RLRunLoopPerformInternal.h"
#include "RLThreadInternal.h"
#include "rl_callout.h"
#include <crunloop/RLPerform.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopTimer.h>
#include <crunloop/RLThread.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct delayed_perform {
    struct delayed_perform *next;
    RLPerformToken token;
    RLThreadRef thread;
    void (*fn)(void *arg);
    void *arg;
    RLPerformReleaseCallBack release;
    void *block;
    RLRunLoopTimerRef timer;
} delayed_perform;

struct rl__perform_state {
    bool closed; /* the thread is exiting: no more requests */
    delayed_perform *delayed;
};

static _Atomic uint64_t next_perform_token = 1;

static struct rl__perform_state *state_locked(RLThreadRef t) {
    if (!t->perform)
        t->perform = calloc(1, sizeof *t->perform);
    return t->perform;
}

/* A delayed request that will not run (cancelled, or its thread exits):
 * its timer goes, its block copy or arg's release with it. */
static void delayed_free(delayed_perform *e) {
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

/* ---- hooks RLThread.c calls (registered below) ---- */

/* Gives t its run loop (retained in t->runloop) if it can have one: the
 * main loop, or the loop of its pthread, made lazily. Every executing
 * thread has its pthread (RLThreadStart sets it with the state). */
static RLRunLoopRef attach_loop_locked(RLThreadRef t) {
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

static void thread_will_exit(RLThreadRef t) {
    pthread_mutex_lock(&t->lock);
    struct rl__perform_state *s = state_locked(t);
    RLRunLoopRef rl = t->runloop;
    t->runloop = NULL;
    delayed_perform *delayed = NULL;
    if (s) {
        s->closed = true;
        delayed = s->delayed;
        s->delayed = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    while (delayed) {
        delayed_perform *next = delayed->next;
        delayed_free(delayed);
        delayed = next;
    }
    if (rl)
        RLRelease(rl);
}

static void thread_finalize(RLThreadRef t) {
    free(t->perform);
    t->perform = NULL;
    if (t->runloop) {
        RLRelease(t->runloop);
        t->runloop = NULL;
    }
}

/* ---- performing on a thread ---- */

/* Counts a NULL-terminated mode list into r (NULL: the common modes). */
static void req_set_modes(rl__preq *r, const RLRunLoopMode *modes) {
    if (!modes) {
        r->modes = &kRLRunLoopCommonModes;
        r->nmodes = 1;
        return;
    }
    size_t n = 0;
    while (modes[n])
        n++;
    r->modes = modes;
    r->nmodes = n;
}

/* Queues r on t's run loop (or runs it now: waiting on oneself). On
 * failure r's release has been called. */
static bool perform_request(RLThreadRef t, rl__preq *r, const char *fn) {
    /* The request first, then the thread (a bad request is refused the
     * same way whatever the thread's state). */
    if (!rl__preq_check(r, fn)) {
        if (r->release)
            r->release(r->info);
        return false;
    }
    bool on_target = t == rl__thread_current_if_any() || (t->is_main && RLThreadIsMainThread());
    if (r->wait && on_target) {
        /* Cocoa: waiting on yourself runs the request now. */
        rl__perform_run_now(r);
        return true;
    }
    pthread_mutex_lock(&t->lock);
    const char *why = NULL;
    if (t->state == RL__THREAD_CREATED)
        why = "thread was never started";
    else if (t->state == RL__THREAD_FINISHED || (t->perform && t->perform->closed))
        why = "thread has finished";
    RLRunLoopRef rl = why ? NULL : attach_loop_locked(t);
    if (rl)
        RLRetain(rl);
    pthread_mutex_unlock(&t->lock);
    if (why) {
        if (r->release)
            r->release(r->info);
        return rl__fail(kRLErrorInvalidState, fn, "%s", why);
    }
    if (!rl) { /* no run loop could be made (error set) */
        if (r->release)
            r->release(r->info);
        return false;
    }
    r->wake = true;
    bool ok = rl__perform_submit(rl, r, fn);
    RLRelease(rl);
    return ok;
}

/* The function-pointer forms. A refused request still has its arg
 * released (the WithRelease rule, RLRunLoop.h). */
static bool thread_perform(RLThreadRef thread, void (*fn)(void *), void *arg, RLPerformReleaseCallBack release,
                               const RLRunLoopMode *modes, bool wait, const char *fname) {
    if (!rl__thread_check(thread, fname)) {
        if (release)
            release(arg);
        return false;
    }
    rl__preq r = {.fn = fn, .info = arg, .release = release, .wait = wait};
    req_set_modes(&r, modes);
    return perform_request(thread, &r, fname);
}

bool RLThreadPerform(RLThreadRef thread, void (*fn)(void *arg), void *arg, const RLRunLoopMode *modes,
                     bool waitUntilDone) {
    return thread_perform(thread, fn, arg, NULL, modes, waitUntilDone, __func__);
}

bool RLThreadPerformWithRelease(RLThreadRef thread, void (*fn)(void *arg), void *arg, RLPerformReleaseCallBack release,
                                const RLRunLoopMode *modes, bool waitUntilDone) {
    return thread_perform(thread, fn, arg, release, modes, waitUntilDone, __func__);
}

bool RLThreadPerformOnMain(void (*fn)(void *arg), void *arg, const RLRunLoopMode *modes, bool waitUntilDone) {
    RLThreadRef main_thread = RLThreadGetMain();
    if (!main_thread)
        return false;
    return thread_perform(main_thread, fn, arg, NULL, modes, waitUntilDone, __func__);
}

bool RLThreadPerformOnMainWithRelease(void (*fn)(void *arg), void *arg, RLPerformReleaseCallBack release,
                                      const RLRunLoopMode *modes, bool waitUntilDone) {
    RLThreadRef main_thread = RLThreadGetMain();
    if (!main_thread) {
        if (release)
            release(arg);
        return false;
    }
    return thread_perform(main_thread, fn, arg, release, modes, waitUntilDone, __func__);
}

#if __BLOCKS__
bool RLThreadPerformBlock(RLThreadRef thread, const RLRunLoopMode *modes, bool waitUntilDone, void (^block)(void)) {
    if (!rl__thread_check(thread, __func__))
        return false;
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
    rl__preq r = {.block = (void *)block, .wait = waitUntilDone};
    req_set_modes(&r, modes);
    return perform_request(thread, &r, __func__);
}

bool RLThreadPerformBlockOnMain(const RLRunLoopMode *modes, bool waitUntilDone, void (^block)(void)) {
    RLThreadRef main_thread = RLThreadGetMain();
    if (!main_thread)
        return false;
    return RLThreadPerformBlock(main_thread, modes, waitUntilDone, block);
}
#endif

/* ---- delayed performs on the current thread ---- */

static void delayed_fire(RLRunLoopTimerRef timer, void *info) {
    delayed_perform *e = info;
    RLThreadRef t = e->thread;
    pthread_mutex_lock(&t->lock);
    bool found = false;
    if (t->perform) {
        for (delayed_perform **link = &t->perform->delayed; *link; link = &(*link)->next) {
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

static RLPerformToken perform_after_delay(void (*fn)(void *), void *arg, RLPerformReleaseCallBack release,
                                              void *block, RLTimeInterval delay, const RLRunLoopMode *modes,
                                              const char *fname) {
    if (isnan(delay)) {
        rl__fail(kRLErrorInvalidArgument, fname, "NaN delay");
        return 0;
    }
    /* The modes follow the same rules as RLThreadPerform's. */
    rl__preq probe = {.fn = fn, .info = arg, .block = block};
    req_set_modes(&probe, modes);
    if (!rl__preq_check(&probe, fname))
        return 0;
    RLThreadRef t = RLThreadGetCurrent();
    RLRunLoopRef rl = t ? RLRunLoopGetCurrent() : NULL;
    delayed_perform *e = (t && rl) ? calloc(1, sizeof *e) : NULL;
    if (!e) {
        if (t && rl)
            rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return 0;
    }
    e->thread = t;
    e->block = block;
    e->fn = fn;
    e->arg = arg;
    e->token = atomic_fetch_add(&next_perform_token, 1);
    RLRunLoopTimerContext ctx = {0, e, NULL, NULL, NULL};
    if (!(delay > 0))
        delay = 0;
    e->timer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + delay, 0, 0, 0, delayed_fire, &ctx);
    if (!e->timer) {
        free(e);
        return 0;
    }
    pthread_mutex_lock(&t->lock);
    struct rl__perform_state *s = state_locked(t);
    if (s) {
        e->release = release; /* from here on, e owns arg */
        e->next = s->delayed;
        s->delayed = e;
    }
    pthread_mutex_unlock(&t->lock);
    if (!s) {
        RLRelease(e->timer);
        free(e);
        rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return 0;
    }
    for (size_t i = 0; i < probe.nmodes; i++)
        RLRunLoopAddTimer(rl, e->timer, probe.modes[i]);
    return e->token;
}

RLPerformToken RLThreadPerformAfterDelay(void (*fn)(void *arg), void *arg, RLTimeInterval delay,
                                         const RLRunLoopMode *modes) {
    const char *fname = __func__;
    if (!fn) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
        return 0;
    }
    return perform_after_delay(fn, arg, NULL, NULL, delay, modes, fname);
}

RLPerformToken RLThreadPerformAfterDelayWithRelease(void (*fn)(void *arg), void *arg,
                                                    RLPerformReleaseCallBack release, RLTimeInterval delay,
                                                    const RLRunLoopMode *modes) {
    const char *fname = __func__;
    RLPerformToken token = 0;
    if (!fn)
        rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
    else
        token = perform_after_delay(fn, arg, release, NULL, delay, modes, fname);
    if (!token && release)
        release(arg);
    return token;
}

#if __BLOCKS__
RLPerformToken RLThreadPerformBlockAfterDelay(RLTimeInterval delay, const RLRunLoopMode *modes, void (^block)(void)) {
    const char *fname = __func__;
    if (!block) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
        return 0;
    }
    void *copy = _Block_copy((const void *)block);
    RLPerformToken token = perform_after_delay(NULL, NULL, NULL, copy, delay, modes, fname);
    if (!token)
        _Block_release(copy);
    return token;
}
#endif

/* Unlinks the calling thread's delayed requests matching (token) or
 * (fn, arg) and cancels them; returns how many. */
static RLIndex cancel_delayed(RLPerformToken token, void (*fn)(void *), void *arg) {
    RLThreadRef t = rl__thread_current_if_any();
    if (!t)
        return 0;
    delayed_perform *cancelled = NULL;
    pthread_mutex_lock(&t->lock);
    if (t->perform) {
        delayed_perform **link = &t->perform->delayed;
        while (*link) {
            delayed_perform *e = *link;
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
        delayed_perform *next = cancelled->next;
        delayed_free(cancelled);
        cancelled = next;
        n++;
    }
    return n;
}

bool RLThreadCancelPerformRequest(RLPerformToken token) {
    if (token == 0 || cancel_delayed(token, NULL, NULL) == 0)
        return rl__fail(kRLErrorNotFound, __func__,
                        "no pending delayed request %llu on this thread", (unsigned long long)token);
    return true;
}

RLIndex RLThreadCancelPreviousPerformRequests(void (*fn)(void *arg), void *arg) {
    if (!fn) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL function");
        return -1;
    }
    return cancel_delayed(0, fn, arg);
}

/* Hands RLThread.c the hooks that let go of what this file keeps in a
 * thread, before any RLThread can exist. */
__attribute__((constructor)) static void thread_hooks_register(void) {
    rl__thread_register_perform_hooks(thread_will_exit, thread_finalize);
}
