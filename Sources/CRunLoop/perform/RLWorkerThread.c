/* RLWorkerThread.c — a run-loop thread with synchronous start and stop;
 * its work goes into its loop's one perform queue (rl__perform_submit). */
#include "RLRunLoopPerformInternal.h"
#include "RLThreadInternal.h"
#include "rl_loop.h"
#include <crunloop/RLPerform.h>
#include <crunloop/RLWorkerThread.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLThread.h>

#include <stdlib.h>
#include <string.h>

typedef struct worker_handler {
    struct worker_handler *next;
    RLThreadHandlerToken token;        /* the worker's token for it */
    RLThreadHandlerToken thread_token; /* its registration on the running thread, or 0 */
    RLThreadWillExitHandler fn;
    void *info;
    void *block; /* block form: a copy, owned by the entry; fn/info unused */
} worker_handler;

/* What a worker thread shares with its RLWorkerThread: the stop flag. It
 * is reference counted (the worker and the thread), so a worker released
 * on its own thread can go while that thread is still on its way out. */
typedef struct worker_run {
    _Atomic long rc;
    _Atomic bool stop_requested;
    /* The thread's loop is over: stopped, or work on it ended the thread
     * (RLThreadExit) without a Stop. */
    _Atomic bool loop_ended;
    RLWorkerThreadRef starting; /* the worker, used only until ready/failed */
} worker_run;

static void worker_run_release(worker_run *run) {
    if (atomic_fetch_sub(&run->rc, 1) == 1)
        free(run);
}

struct RLWorkerThread {
    rl__object base;
    unsigned fork_gen; /* rl__fork_gen() at creation: another one means inherited by a fork() child */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char *name;
    worker_handler *handlers;
    /* While running: the thread, its loop and the shared run state, all
     * owned (retained) by the worker. */
    RLThreadRef thread;
    RLRunLoopRef runloop;
    worker_run *run;
    bool starting, stopping;
    /* Set by the worker thread: its loop is running (ready) or could not be
     * set up (failed). */
    bool ready, failed;
    RLRunLoopRef new_runloop;
    RLThreadRef new_thread; /* while starting: the thread, handlers registered */
};

static _Atomic uint64_t worker_next_token = 1;

static void worker_handler_free(worker_handler *h) {
#if __BLOCKS__
    if (h->block)
        _Block_release(h->block);
#endif
    free(h);
}

static void worker_finalize(void *obj);

static const rl__class worker_class = {
    .name = "RLWorkerThread",
    .finalize = worker_finalize,
};

/* A worker made before fork() is the parent's: in the child its thread
 * does not exist and its lock may be held by a thread that is gone. */
static bool worker_check(RLWorkerThreadRef w, const char *fn) {
    if (!rl__object_check(w, &worker_class, fn))
        return false;
    if (rl__fork_inherited(w->fork_gen))
        return rl__fork_fail(fn, "worker");
    return true;
}

static RLThreadRef worker_thread(RLWorkerThreadRef w, const char *fn);

/* ---- the worker thread ---- */

static void worker_ready(void *info) {
    worker_run *run = info;
    RLWorkerThreadRef w = run->starting;
    run->starting = NULL; /* Start returns after this: w is not ours to use */
    pthread_mutex_lock(&w->lock);
    w->ready = true;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static void worker_stop_here(void *info) {
    worker_run *run = info;
    atomic_store(&run->stop_requested, true);
    RLRunLoopStop(RLRunLoopGetCurrent());
}

/* What the worker thread owns while its loop runs. */
typedef struct worker_own {
    RLRunLoopRef rl;
    worker_run *run;
} worker_own;

/* After the loop, and also when work calls RLThreadExit (pthread_exit
 * unwinds through here before the thread's exit sequence). */
static void worker_release_own(void *p) {
    worker_own *own = p;
    atomic_store(&own->run->loop_ended, true);
    rl__loop_keep_alive(own->rl, false);
    worker_run_release(own->run);
}

static void worker_loop(worker_run *run) {
    while (!atomic_load(&run->stop_requested))
        RLRunLoopRun();
}

static void *worker_main(void *arg) {
    worker_run *run = arg; /* the thread's reference */
    RLWorkerThreadRef w = run->starting;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    /* Its common modes do not finish while idle (as if a source that never
     * fires were in them): the loop sleeps in the kernel until work or a
     * stop arrives. */
    if (rl)
        rl__loop_keep_alive(rl, true);
    if (!rl || !RLRunLoopPerformFunction(rl, kRLRunLoopCommonModes, worker_ready, run)) {
        if (rl)
            rl__loop_keep_alive(rl, false);
        pthread_mutex_lock(&w->lock);
        w->failed = true;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        worker_run_release(run);
        return NULL;
    }
    pthread_mutex_lock(&w->lock);
    w->new_runloop = (RLRunLoopRef)RLRetain(rl);
    pthread_mutex_unlock(&w->lock);

    worker_own own = {rl, run};
    pthread_cleanup_push(worker_release_own, &own);
    rl__cleanup_arg_escapes(&own);
    worker_loop(run);
    pthread_cleanup_pop(1);
    return NULL;
}

/* ---- object ---- */

/* Joins the running worker; the caller has claimed the stop. */
static bool worker_stop_claimed(RLWorkerThreadRef w, RLThreadRef t, const char *fn) {
    pthread_mutex_lock(&w->lock);
    worker_run *run = w->run;
    pthread_mutex_unlock(&w->lock);
    bool ok = RLThreadPerform(t, worker_stop_here, run, NULL, false);
    if (!ok) /* the thread is already on its way out */
        atomic_store(&run->stop_requested, true);
    ok = RLThreadJoin(t, NULL);
    pthread_mutex_lock(&w->lock);
    RLRunLoopRef rl = w->runloop;
    w->thread = NULL;
    w->runloop = NULL;
    w->run = NULL;
    w->stopping = false;
    w->ready = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (rl)
        RLRelease(rl);
    RLRelease(t);
    worker_run_release(run);
    if (!ok)
        return rl__fail(kRLErrorSystem, fn, "could not join the worker thread");
    return true;
}

/* The last reference went on the worker thread itself, from work running
 * there: it cannot join itself, so it asks its loop to stop once that work
 * returns and lets the thread finish on its own, detached. */
static void worker_abandon_on_own_thread(RLWorkerThreadRef w, RLThreadRef t) {
    worker_run *run = w->run;
    RLRunLoopRef rl = w->runloop;
    w->thread = NULL;
    w->runloop = NULL;
    w->run = NULL;
    atomic_store(&run->stop_requested, true);
    /* Stops the worker's own run (the outermost), not only a nested one
     * the releasing code may be in; run stays alive: the thread holds it. */
    if (!RLRunLoopPerformFunction(rl, kRLRunLoopCommonModes, worker_stop_here, run))
        RLRunLoopStop(rl);
    RLRunLoopWakeUp(rl);
    RLRelease(rl);
    RLRelease(t); /* the thread keeps its own reference; unjoined, it is detached when it goes */
    worker_run_release(run);
}

static void worker_free_memory(RLWorkerThreadRef w) {
    for (worker_handler *h = w->handlers, *next; h; h = next) {
        next = h->next;
        worker_handler_free(h);
    }
    free(w->name);
}

static void worker_finalize(void *obj) {
    RLWorkerThreadRef w = obj;
    /* Inherited across fork(): there is no thread to stop here, and its
     * lock and condition may hold state of threads that are gone; the
     * parent's references (thread, loop) are left alone. Only the child's
     * copy of the worker's own memory goes. */
    if (rl__fork_inherited(w->fork_gen)) {
        worker_free_memory(w);
        return;
    }
    pthread_mutex_lock(&w->lock);
    while (w->starting || w->stopping)
        pthread_cond_wait(&w->cond, &w->lock);
    RLThreadRef t = w->thread;
    bool on_worker = t && t == rl__thread_current_if_any();
    if (t && !on_worker)
        w->stopping = true;
    pthread_mutex_unlock(&w->lock);
    if (on_worker)
        worker_abandon_on_own_thread(w, t);
    else if (t)
        worker_stop_claimed(w, t, "RLRelease");
    worker_free_memory(w);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
}

RLWorkerThreadRef RLWorkerThreadCreate(RLAllocatorRef allocator, const char *name) {
    (void)allocator;
    RLWorkerThreadRef w = rl__object_alloc(&worker_class, sizeof *w, __func__);
    if (!w)
        return NULL;
    w->fork_gen = rl__fork_gen();
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (name && !(w->name = strdup(name))) {
        RLRelease(w);
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
        return NULL;
    }
    return w;
}

/* Registers worker handler h on thread t (w->lock held); its token there. */
static RLThreadHandlerToken worker_register_handler(RLThreadRef t, worker_handler *h) {
#if __BLOCKS__
    if (h->block)
        return RLThreadAddWillExitHandlerBlock(t, (void (^)(RLThreadRef))h->block);
#endif
    return RLThreadAddWillExitHandler(t, h->fn, h->info);
}

/* ---- start / stop ---- */

bool RLWorkerThreadStart(RLWorkerThreadRef worker) {
    const char *fn = __func__;
    if (!worker_check(worker, fn))
        return false;
    RLWorkerThreadRef w = worker;
    pthread_mutex_lock(&w->lock);
    if (w->thread && !w->starting && !w->stopping && atomic_load(&w->run->loop_ended) &&
        w->thread != rl__thread_current_if_any()) {
        /* Its thread left by itself (work called RLThreadExit): join what
         * is left of it, as Stop would, before starting anew. */
        RLThreadRef old = w->thread;
        w->stopping = true;
        pthread_mutex_unlock(&w->lock);
        if (!worker_stop_claimed(w, old, fn))
            return false;
        pthread_mutex_lock(&w->lock);
    }
    if (w->thread || w->starting || w->stopping) {
        pthread_mutex_unlock(&w->lock);
        return rl__fail(kRLErrorInvalidState, fn, "worker is already running");
    }
    w->starting = true;
    w->ready = w->failed = false;
    w->new_runloop = NULL;
    pthread_mutex_unlock(&w->lock);

    worker_run *run = calloc(1, sizeof *run);
    if (!run) {
        pthread_mutex_lock(&w->lock);
        w->starting = false;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    }
    atomic_init(&run->rc, 2); /* the worker's and the thread's */
    run->starting = w;
    RLThreadRef t = RLThreadCreate(NULL, worker_main, run);
    bool ok = t && RLThreadSetJoinable(t, true) && (!w->name || RLThreadSetName(t, w->name));
    pthread_mutex_lock(&w->lock);
    for (worker_handler *h = ok ? w->handlers : NULL; h; h = h->next)
        ok = ok && (h->thread_token = worker_register_handler(t, h)) != 0;
    w->new_thread = ok ? t : NULL;
    pthread_mutex_unlock(&w->lock);
    ok = ok && RLThreadStart(t);
    if (!ok) {
        pthread_mutex_lock(&w->lock);
        w->new_thread = NULL;
        w->starting = false;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        if (t)
            RLRelease(t);
        free(run); /* the thread never ran */
        return false;
    }

    pthread_mutex_lock(&w->lock);
    while (!w->ready && !w->failed)
        pthread_cond_wait(&w->cond, &w->lock);
    bool failed = w->failed;
    if (!failed) {
        w->thread = t;
        w->runloop = w->new_runloop;
        w->run = run;
    }
    w->new_runloop = NULL;
    w->new_thread = NULL;
    w->starting = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (failed) {
        RLThreadJoin(t, NULL);
        RLRelease(t);
        worker_run_release(run);
        return rl__fail(kRLErrorSystem, fn, "the worker's run loop could not be set up");
    }
    return true;
}

bool RLWorkerThreadStop(RLWorkerThreadRef worker) {
    const char *fn = __func__;
    if (!worker_check(worker, fn))
        return false;
    RLWorkerThreadRef w = worker;
    pthread_mutex_lock(&w->lock);
    RLThreadRef t = w->thread;
    const char *why = NULL;
    RLErrorCode code = kRLErrorInvalidState;
    if (!t || w->starting)
        why = "worker is not running";
    else if (w->stopping)
        why = "worker is already being stopped";
    else if (t == rl__thread_current_if_any())
        why = "a worker cannot wait for its own exit", code = kRLErrorWouldDeadlock;
    if (why) {
        pthread_mutex_unlock(&w->lock);
        return rl__fail(code, fn, "%s", why);
    }
    w->stopping = true;
    pthread_mutex_unlock(&w->lock);
    return worker_stop_claimed(w, t, fn);
}

bool RLWorkerThreadIsRunning(RLWorkerThreadRef worker) {
    if (!worker_check(worker, __func__))
        return false;
    pthread_mutex_lock(&worker->lock);
    bool running = worker->thread != NULL && !worker->stopping && !atomic_load(&worker->run->loop_ended);
    pthread_mutex_unlock(&worker->lock);
    return running;
}

RLThreadRef RLWorkerThreadCopyThread(RLWorkerThreadRef worker) {
    return worker_thread(worker, __func__);
}

RLRunLoopRef RLWorkerThreadCopyRunLoop(RLWorkerThreadRef worker) {
    const char *fn = __func__;
    if (!worker_check(worker, fn))
        return NULL;
    pthread_mutex_lock(&worker->lock);
    RLRunLoopRef rl = worker->runloop ? (RLRunLoopRef)RLRetain(worker->runloop) : NULL;
    pthread_mutex_unlock(&worker->lock);
    if (!rl)
        rl__fail(kRLErrorInvalidState, fn, "worker is not running");
    return rl;
}

RLThreadRef RLWorkerThreadGetThread(RLWorkerThreadRef worker) {
    if (!worker_check(worker, __func__))
        return NULL;
    pthread_mutex_lock(&worker->lock);
    RLThreadRef t = worker->thread;
    pthread_mutex_unlock(&worker->lock);
    if (!t)
        rl__fail(kRLErrorInvalidState, __func__, "worker is not running");
    return t;
}

RLRunLoopRef RLWorkerThreadGetRunLoop(RLWorkerThreadRef worker) {
    if (!worker_check(worker, __func__))
        return NULL;
    pthread_mutex_lock(&worker->lock);
    RLRunLoopRef rl = worker->runloop;
    pthread_mutex_unlock(&worker->lock);
    if (!rl)
        rl__fail(kRLErrorInvalidState, __func__, "worker is not running");
    return rl;
}

static RLThreadHandlerToken worker_add_handler(RLWorkerThreadRef w, worker_handler *h) {
    h->token = atomic_fetch_add(&worker_next_token, 1);
    pthread_mutex_lock(&w->lock);
    /* A handler added while a worker thread runs is that thread's too (best
     * effort: a thread already finishing takes no more). A worker being
     * started registers its list itself, under this lock. */
    RLThreadRef t = w->thread ? w->thread : w->new_thread;
    if (t)
        h->thread_token = worker_register_handler(t, h);
    worker_handler **tail = &w->handlers;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    RLThreadHandlerToken token = h->token;
    pthread_mutex_unlock(&w->lock);
    return token;
}

RLThreadHandlerToken RLWorkerThreadAddWillExitHandler(RLWorkerThreadRef worker, RLThreadWillExitHandler fn,
                                                      void *info) {
    const char *fname = __func__;
    if (!worker_check(worker, fname))
        return 0;
    if (!fn) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL handler");
        return 0;
    }
    worker_handler *h = calloc(1, sizeof *h);
    if (!h) {
        rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return 0;
    }
    h->fn = fn;
    h->info = info;
    return worker_add_handler(worker, h);
}

#if __BLOCKS__
RLThreadHandlerToken RLWorkerThreadAddWillExitHandlerBlock(RLWorkerThreadRef worker,
                                                           void (^block)(RLThreadRef thread)) {
    const char *fname = __func__;
    if (!worker_check(worker, fname))
        return 0;
    if (!block) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
        return 0;
    }
    worker_handler *h = calloc(1, sizeof *h);
    if (!h) {
        rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return 0;
    }
    h->block = _Block_copy((const void *)block);
    return worker_add_handler(worker, h);
}
#endif

bool RLWorkerThreadRemoveWillExitHandler(RLWorkerThreadRef worker, RLThreadHandlerToken token) {
    const char *fname = __func__;
    if (!worker_check(worker, fname))
        return false;
    pthread_mutex_lock(&worker->lock);
    worker_handler **link = &worker->handlers;
    while (*link && (*link)->token != token)
        link = &(*link)->next;
    worker_handler *h = *link;
    if (h) {
        *link = h->next;
        /* Not found there means it ran or is running: nothing to undo. */
        RLThreadRef t = worker->thread ? worker->thread : worker->new_thread;
        if (t && h->thread_token)
            (void)RLThreadRemoveWillExitHandler(t, h->thread_token);
    }
    pthread_mutex_unlock(&worker->lock);
    if (!h)
        return rl__fail(kRLErrorNotFound, fname, "no handler with token %llu", (unsigned long long)token);
    worker_handler_free(h);
    return true;
}

/* ---- work ---- */

/* The running worker's thread, retained, or NULL (error set). */
static RLThreadRef worker_thread(RLWorkerThreadRef w, const char *fn) {
    if (!worker_check(w, fn))
        return NULL;
    pthread_mutex_lock(&w->lock);
    RLThreadRef t = w->thread ? (RLThreadRef)RLRetain(w->thread) : NULL;
    pthread_mutex_unlock(&w->lock);
    if (!t)
        rl__fail(kRLErrorInvalidState, fn, "worker is not running");
    return t;
}

/* Queues r on the running worker's loop, in its common modes, and wakes
 * it (rl__perform_submit: the loop's one queue, so in order with every
 * other request to that loop or thread); waiting on the worker itself runs
 * r at once. A refused request has its release called. */
static bool worker_perform(RLWorkerThreadRef w, rl__preq *r, const char *fname) {
    RLRunLoopRef rl = NULL;
    bool on_worker = false;
    if (worker_check(w, fname)) {
        pthread_mutex_lock(&w->lock);
        if (w->runloop) {
            rl = (RLRunLoopRef)RLRetain(w->runloop);
            on_worker = r->wait && w->thread == rl__thread_current_if_any();
        }
        pthread_mutex_unlock(&w->lock);
        if (!rl)
            rl__fail(kRLErrorInvalidState, fname, "worker is not running");
    }
    if (!rl) {
        if (r->release)
            r->release(r->info);
        return false;
    }
    r->modes = &kRLRunLoopCommonModes;
    r->nmodes = 1;
    r->wake = true;
    bool ok = true;
    if (on_worker)
        rl__perform_run_now(r); /* as RLThreadPerform: waiting on oneself runs it now */
    else
        ok = rl__perform_submit(rl, r, fname);
    RLRelease(rl);
    return ok;
}

static bool worker_perform_fn(RLWorkerThreadRef w, void (*fn)(void *), void *arg, RLPerformReleaseCallBack release,
                                  bool wait, const char *fname) {
    if (!fn) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
        if (release)
            release(arg);
        return false;
    }
    rl__preq r = {.fn = fn, .info = arg, .release = release, .wait = wait};
    return worker_perform(w, &r, fname);
}

bool RLWorkerThreadPerformAsync(RLWorkerThreadRef worker, void (*fn)(void *arg), void *arg) {
    return worker_perform_fn(worker, fn, arg, NULL, false, __func__);
}

bool RLWorkerThreadPerformSync(RLWorkerThreadRef worker, void (*fn)(void *arg), void *arg) {
    return worker_perform_fn(worker, fn, arg, NULL, true, __func__);
}

bool RLWorkerThreadPerformAsyncWithRelease(RLWorkerThreadRef worker, void (*fn)(void *arg), void *arg,
                                           RLPerformReleaseCallBack release) {
    return worker_perform_fn(worker, fn, arg, release, false, __func__);
}

bool RLWorkerThreadPerformSyncWithRelease(RLWorkerThreadRef worker, void (*fn)(void *arg), void *arg,
                                          RLPerformReleaseCallBack release) {
    return worker_perform_fn(worker, fn, arg, release, true, __func__);
}

#if __BLOCKS__
static bool worker_perform_block(RLWorkerThreadRef w, void (^block)(void), bool wait, const char *fname) {
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
    rl__preq r = {.block = (void *)block, .wait = wait};
    return worker_perform(w, &r, fname);
}

bool RLWorkerThreadPerformBlockAsync(RLWorkerThreadRef worker, void (^block)(void)) {
    return worker_perform_block(worker, block, false, __func__);
}

bool RLWorkerThreadPerformBlockSync(RLWorkerThreadRef worker, void (^block)(void)) {
    return worker_perform_block(worker, block, true, __func__);
}
#endif
