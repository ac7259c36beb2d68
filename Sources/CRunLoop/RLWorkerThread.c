/* RLWorkerThread.c — a run-loop thread with synchronous start and stop. */
#include "RLThreadInternal.h"
#include <crunloop/RLPerform.h>
#include <crunloop/RLWorkerThread.h>

#include <stdlib.h>
#include <string.h>

typedef struct rl__worker_handler {
    struct rl__worker_handler *next;
    RLThreadWillExitHandler fn;
    void *info;
} rl__worker_handler;

struct RLWorkerThread {
    rl__object base;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char *name;
    rl__worker_handler *handlers;
    /* While running: the thread and its loop, both retained. */
    RLThreadRef thread;
    RLRunLoopRef runloop;
    bool starting, stopping;
    /* Set by the worker thread: its loop is running (ready) or could not be
     * set up (failed). */
    bool ready, failed;
    RLRunLoopRef new_runloop;
    _Atomic bool stop_requested;
};

static void rl__worker_finalize(void *obj);
static bool rl__worker_can_destroy(void *obj);

static const rl__class rl__worker_class = {
    .name = "RLWorkerThread",
    .finalize = rl__worker_finalize,
    .can_destroy = rl__worker_can_destroy,
};

static bool rl__worker_check(RLWorkerThreadRef w, const char *fn) {
    return rl__object_check(w, &rl__worker_class, fn);
}

/* ---- the worker thread ---- */

static void rl__worker_nothing(void *info) { (void)info; }

static void rl__worker_ready(void *info) {
    RLWorkerThreadRef w = info;
    pthread_mutex_lock(&w->lock);
    w->ready = true;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static void rl__worker_stop_here(void *info) {
    RLWorkerThreadRef w = info;
    atomic_store(&w->stop_requested, true);
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void *rl__worker_main(void *arg) {
    RLWorkerThreadRef w = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    /* A source that never fires keeps the loop from finishing while idle,
     * so it sleeps in the kernel until work or a stop arrives. */
    RLRunLoopSourceContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.perform = rl__worker_nothing;
    RLRunLoopSourceRef keepalive = rl ? RLRunLoopSourceCreate(NULL, 0, &ctx) : NULL;
    if (!keepalive || !RLRunLoopAddSource(rl, keepalive, kRLRunLoopCommonModes) ||
        !RLRunLoopPerformFunction(rl, kRLRunLoopCommonModes, rl__worker_ready, w)) {
        if (keepalive)
            RLRelease(keepalive);
        pthread_mutex_lock(&w->lock);
        w->failed = true;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        return NULL;
    }
    pthread_mutex_lock(&w->lock);
    w->new_runloop = (RLRunLoopRef)RLRetain(rl);
    pthread_mutex_unlock(&w->lock);

    while (!atomic_load(&w->stop_requested))
        RLRunLoopRun();

    RLRunLoopRemoveSource(rl, keepalive, kRLRunLoopCommonModes);
    RLRunLoopSourceInvalidate(keepalive);
    RLRelease(keepalive);
    return NULL;
}

/* ---- object ---- */

/* Joins the running worker; the caller has claimed the stop. */
static bool rl__worker_stop_claimed(RLWorkerThreadRef w, RLThreadRef t, const char *fn) {
    bool ok = RLThreadPerform(t, rl__worker_stop_here, w, NULL, false);
    if (!ok) /* the thread is already on its way out */
        atomic_store(&w->stop_requested, true);
    ok = RLThreadJoin(t, NULL);
    pthread_mutex_lock(&w->lock);
    RLRunLoopRef rl = w->runloop;
    w->thread = NULL;
    w->runloop = NULL;
    w->stopping = false;
    w->ready = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (rl)
        RLRelease(rl);
    RLRelease(t);
    if (!ok)
        return rl__fail(kRLErrorSystem, fn, "could not join the worker thread");
    return true;
}

static bool rl__worker_can_destroy(void *obj) {
    RLWorkerThreadRef w = obj;
    pthread_mutex_lock(&w->lock);
    bool on_worker = w->thread && w->thread == rl__thread_current_if_any();
    pthread_mutex_unlock(&w->lock);
    if (on_worker)
        return rl__fail(kRLErrorWouldDeadlock, "RLRelease",
                        "the last reference to a running worker cannot be released on the worker itself");
    return true;
}

static void rl__worker_finalize(void *obj) {
    RLWorkerThreadRef w = obj;
    pthread_mutex_lock(&w->lock);
    while (w->starting || w->stopping)
        pthread_cond_wait(&w->cond, &w->lock);
    RLThreadRef t = w->thread;
    if (t)
        w->stopping = true;
    pthread_mutex_unlock(&w->lock);
    if (t)
        rl__worker_stop_claimed(w, t, "RLRelease");
    for (rl__worker_handler *h = w->handlers, *next; h; h = next) {
        next = h->next;
        free(h);
    }
    free(w->name);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
}

RLWorkerThreadRef RLWorkerThreadCreate(RLAllocatorRef allocator, const char *name) {
    (void)allocator;
    RLWorkerThreadRef w = rl__object_alloc(&rl__worker_class, sizeof *w, "RLWorkerThreadCreate");
    if (!w)
        return NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (name && !(w->name = strdup(name))) {
        RLRelease(w);
        rl__fail(kRLErrorNoMemory, "RLWorkerThreadCreate", "out of memory");
        return NULL;
    }
    return w;
}

/* ---- start / stop ---- */

bool RLWorkerThreadStart(RLWorkerThreadRef worker) {
    static const char fn[] = "RLWorkerThreadStart";
    if (!rl__worker_check(worker, fn))
        return false;
    RLWorkerThreadRef w = worker;
    pthread_mutex_lock(&w->lock);
    if (w->thread || w->starting || w->stopping) {
        pthread_mutex_unlock(&w->lock);
        return rl__fail(kRLErrorInvalidState, fn, "worker is already running");
    }
    w->starting = true;
    w->ready = w->failed = false;
    w->new_runloop = NULL;
    atomic_store(&w->stop_requested, false);
    pthread_mutex_unlock(&w->lock);

    RLThreadRef t = RLThreadCreate(NULL, rl__worker_main, w);
    bool ok = t && RLThreadSetJoinable(t, true) && (!w->name || RLThreadSetName(t, w->name));
    pthread_mutex_lock(&w->lock);
    for (rl__worker_handler *h = ok ? w->handlers : NULL; h; h = h->next)
        ok = ok && RLThreadAddWillExitHandler(t, h->fn, h->info) != 0;
    pthread_mutex_unlock(&w->lock);
    ok = ok && RLThreadStart(t);
    if (!ok) {
        if (t)
            RLRelease(t);
        pthread_mutex_lock(&w->lock);
        w->starting = false;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        return false;
    }

    pthread_mutex_lock(&w->lock);
    while (!w->ready && !w->failed)
        pthread_cond_wait(&w->cond, &w->lock);
    bool failed = w->failed;
    if (!failed) {
        w->thread = t;
        w->runloop = w->new_runloop;
    }
    w->new_runloop = NULL;
    w->starting = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (failed) {
        RLThreadJoin(t, NULL);
        RLRelease(t);
        return rl__fail(kRLErrorSystem, fn, "the worker's run loop could not be set up");
    }
    return true;
}

bool RLWorkerThreadStop(RLWorkerThreadRef worker) {
    static const char fn[] = "RLWorkerThreadStop";
    if (!rl__worker_check(worker, fn))
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
    return rl__worker_stop_claimed(w, t, fn);
}

bool RLWorkerThreadIsRunning(RLWorkerThreadRef worker) {
    if (!rl__worker_check(worker, "RLWorkerThreadIsRunning"))
        return false;
    pthread_mutex_lock(&worker->lock);
    bool running = worker->thread != NULL && !worker->stopping;
    pthread_mutex_unlock(&worker->lock);
    return running;
}

RLThreadRef RLWorkerThreadGetThread(RLWorkerThreadRef worker) {
    if (!rl__worker_check(worker, "RLWorkerThreadGetThread"))
        return NULL;
    pthread_mutex_lock(&worker->lock);
    RLThreadRef t = worker->thread;
    pthread_mutex_unlock(&worker->lock);
    if (!t)
        rl__fail(kRLErrorInvalidState, "RLWorkerThreadGetThread", "worker is not running");
    return t;
}

RLRunLoopRef RLWorkerThreadGetRunLoop(RLWorkerThreadRef worker) {
    if (!rl__worker_check(worker, "RLWorkerThreadGetRunLoop"))
        return NULL;
    pthread_mutex_lock(&worker->lock);
    RLRunLoopRef rl = worker->runloop;
    pthread_mutex_unlock(&worker->lock);
    if (!rl)
        rl__fail(kRLErrorInvalidState, "RLWorkerThreadGetRunLoop", "worker is not running");
    return rl;
}

bool RLWorkerThreadAddWillExitHandler(RLWorkerThreadRef worker, RLThreadWillExitHandler fn, void *info) {
    static const char fname[] = "RLWorkerThreadAddWillExitHandler";
    if (!rl__worker_check(worker, fname))
        return false;
    if (!fn)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL handler");
    rl__worker_handler *h = calloc(1, sizeof *h);
    if (!h)
        return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    h->fn = fn;
    h->info = info;
    pthread_mutex_lock(&worker->lock);
    rl__worker_handler **tail = &worker->handlers;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    RLThreadRef t = worker->thread ? (RLThreadRef)RLRetain(worker->thread) : NULL;
    pthread_mutex_unlock(&worker->lock);
    if (t) {
        RLThreadAddWillExitHandler(t, fn, info);
        RLRelease(t);
    }
    return true;
}

/* ---- work ---- */

/* The running worker's thread, retained, or NULL (error set). */
static RLThreadRef rl__worker_thread(RLWorkerThreadRef w, const char *fn) {
    if (!rl__worker_check(w, fn))
        return NULL;
    pthread_mutex_lock(&w->lock);
    RLThreadRef t = w->thread ? (RLThreadRef)RLRetain(w->thread) : NULL;
    pthread_mutex_unlock(&w->lock);
    if (!t)
        rl__fail(kRLErrorInvalidState, fn, "worker is not running");
    return t;
}

static bool rl__worker_perform(RLWorkerThreadRef w, void (*fn)(void *), void *arg, bool wait, const char *fname) {
    if (!fn)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
    RLThreadRef t = rl__worker_thread(w, fname);
    if (!t)
        return false;
    bool ok = RLThreadPerform(t, fn, arg, NULL, wait);
    RLRelease(t);
    return ok;
}

bool RLWorkerThreadPerformAsync(RLWorkerThreadRef worker, void (*fn)(void *arg), void *arg) {
    return rl__worker_perform(worker, fn, arg, false, "RLWorkerThreadPerformAsync");
}

bool RLWorkerThreadPerformSync(RLWorkerThreadRef worker, void (*fn)(void *arg), void *arg) {
    return rl__worker_perform(worker, fn, arg, true, "RLWorkerThreadPerformSync");
}

#if __BLOCKS__
static bool rl__worker_perform_block(RLWorkerThreadRef w, void (^block)(void), bool wait, const char *fname) {
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
    RLThreadRef t = rl__worker_thread(w, fname);
    if (!t)
        return false;
    bool ok = RLThreadPerformBlock(t, NULL, wait, block);
    RLRelease(t);
    return ok;
}

bool RLWorkerThreadPerformBlockAsync(RLWorkerThreadRef worker, void (^block)(void)) {
    return rl__worker_perform_block(worker, block, false, "RLWorkerThreadPerformBlockAsync");
}

bool RLWorkerThreadPerformBlockSync(RLWorkerThreadRef worker, void (^block)(void)) {
    return rl__worker_perform_block(worker, block, true, "RLWorkerThreadPerformBlockSync");
}
#endif
