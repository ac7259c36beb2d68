/* RLThread.c — threads: creation, attributes, dictionary, exit sequence. */
#include "RLThreadInternal.h"
#include "rl_callout.h"
#include <crunloop/RLThread.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* RLPerform.c's hooks (rl__thread_register_perform_hooks). */
static void (*_Atomic on_perform_will_exit)(RLThreadRef t);
static void (*_Atomic on_perform_finalize)(RLThreadRef t);

void rl__thread_register_perform_hooks(void (*will_exit)(RLThreadRef t), void (*finalize)(RLThreadRef t)) {
    atomic_store_explicit(&on_perform_finalize, finalize, memory_order_release);
    atomic_store_explicit(&on_perform_will_exit, will_exit, memory_order_release);
}

struct rl__thread_value {
    rl__thread_value *next;
    char *key;
    void *value;
    void (*destructor)(void *value);
    int pins;      /* RLThreadDictionaryCopyValue calls using it (lock held) */
    bool detached; /* out of the dictionary while pinned: the last unpin frees it */
};

/* With t->lock held, for entries just unlinked from t->values: returns
 * those that can be freed now; pinned ones are freed by their last unpin. */
static rl__thread_value *values_unpinned_locked(rl__thread_value *list) {
    rl__thread_value *keep = NULL;
    while (list) {
        rl__thread_value *next = list->next;
        if (list->pins > 0) {
            list->detached = true;
            list->next = NULL;
        } else {
            list->next = keep;
            keep = list;
        }
        list = next;
    }
    return keep;
}

struct rl__thread_handler {
    rl__thread_handler *next;
    RLThreadHandlerToken token;
    RLThreadWillExitHandler fn;
    void *info;
    bool info_is_block; /* info is a copied block, released with the handler */
};

static void handler_free(rl__thread_handler *h) {
#if __BLOCKS__
    if (h->info_is_block)
        _Block_release(h->info);
#endif
    free(h);
}

enum { RL__KERNEL_NAME_MAX = 15 };

static __thread RLThreadRef tls_current;
static __thread bool tls_exited;      /* exit sequence ran: no new RLThread */
static __thread bool tls_in_mt_notify; /* running will-become-multi-threaded handlers */

static pthread_key_t foreign_key;
static pthread_once_t foreign_key_once = PTHREAD_ONCE_INIT;

static RLThreadRef main_thread;
static RLThreadRef main_thread_inherited; /* in a fork() child: the parent's main RLThread */
static pthread_once_t main_once = PTHREAD_ONCE_INIT;

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static rl__thread_handler *global_handlers; /* global will-exit handlers */
static _Atomic uint64_t next_token = 1;

/* Multi-threaded state: 0 not yet, 1 notifying, 2 multi-threaded. */
static pthread_mutex_t mt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mt_cond = PTHREAD_COND_INITIALIZER;
static _Atomic int mt_state;
typedef struct mt_handler {
    struct mt_handler *next;
    void (*fn)(void *info);
    void *info;
    bool info_is_block; /* info is a copied block, released after it ran */
} mt_handler;
static mt_handler *mt_handlers;

/* ---- object ---- */

static void thread_free_values(rl__thread_value *v) {
    while (v) {
        rl__thread_value *next = v->next;
        if (v->destructor)
            v->destructor(v->value);
        free(v->key);
        free(v);
        v = next;
    }
}

static void thread_free_handlers(RLThreadRef t) {
    for (rl__thread_handler *h = t->handlers, *next; h; h = next) {
        next = h->next;
        handler_free(h);
    }
    t->handlers = NULL;
}

static void thread_finalize(void *obj) {
    RLThreadRef t = obj;
    /* Inherited across fork(): its lock may have been held by a thread
     * that does not exist here, its condition may count waiters that never
     * wake, its pthread is not this process's, and its queued requests and
     * dictionary values belong to the parent (no release function or
     * destructor of theirs runs here). Only the child's copy of the
     * thread's own memory goes: its name and handler records. */
    if (rl__fork_inherited(t->fork_gen)) {
        thread_free_handlers(t);
        free(t->name);
        return;
    }
    /* The lock orders this with the exiting thread's last writes (for
     * ThreadSanitizer, which does not follow RLRelease's fences). */
    pthread_mutex_lock(&t->lock);
    pthread_mutex_unlock(&t->lock);
    /* A joinable thread nobody joined: let the system reclaim it. */
    if (t->has_pthread && t->joinable && !t->join_claimed && !t->is_main && !t->is_foreign)
        pthread_detach(t->pthread);
    thread_free_values(t->values);
    thread_free_handlers(t);
#if __BLOCKS__
    if (t->block)
        _Block_release(t->block);
#endif
    void (*perform_finalize)(RLThreadRef) = atomic_load_explicit(&on_perform_finalize, memory_order_acquire);
    if (perform_finalize)
        perform_finalize(t);
    free(t->name);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
}

static const char *thread_state_name(RLThreadRef t) {
    switch (t->state) {
    case RL__THREAD_CREATED: return "created";
    case RL__THREAD_EXECUTING: return "executing";
    case RL__THREAD_FINISHED: return "finished";
    }
    return "?";
}

static char *thread_describe(const void *obj) {
    RLThreadRef t = (RLThreadRef)obj;
    char *s = NULL;
    if (rl__fork_inherited(t->fork_gen)) { /* its lock may be held by a thread gone with the fork */
        if (asprintf(&s, "<RLThread %p inherited across fork()>", obj) < 0) {
            rl__fail(kRLErrorNoMemory, "RLCopyDescription", "out of memory");
            return NULL;
        }
        return s;
    }
    pthread_mutex_lock(&t->lock);
    int n = asprintf(&s, "<RLThread %p name=\"%s\" tid=%d %s%s%s>", obj, t->name ? t->name : "", (int)t->tid,
                     thread_state_name(t), t->is_main ? " main" : "",
                     atomic_load(&t->cancelled) ? " cancelled" : "");
    pthread_mutex_unlock(&t->lock);
    if (n < 0) {
        rl__fail(kRLErrorNoMemory, "RLCopyDescription", "out of memory");
        return NULL;
    }
    return s;
}

static const rl__class thread_class = {
    .name = "RLThread",
    .finalize = thread_finalize,
    .describe = thread_describe,
};

static RLThreadRef thread_alloc(const char *fn) {
    RLThreadRef t = rl__object_alloc(&thread_class, sizeof *t, fn);
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cond, &ca);
    pthread_condattr_destroy(&ca);
    t->stack_size = kRLThreadDefaultStackSize;
    t->priority = 0.5;
    t->fork_gen = rl__fork_gen();
    return t;
}

bool rl__thread_check(RLThreadRef t, const char *fn) {
    if (!rl__object_check(t, &thread_class, fn))
        return false;
    if (rl__fork_inherited(t->fork_gen))
        return rl__fork_fail(fn, "thread");
    return true;
}

/* ---- kernel-side name and priority ---- */

/* The longest prefix of name that fits the kernel's 15 bytes without
 * splitting a UTF-8 sequence. */
static size_t kernel_name_length(const char *name) {
    size_t len = strlen(name);
    if (len <= RL__KERNEL_NAME_MAX)
        return len;
    len = RL__KERNEL_NAME_MAX;
    while (len > 0 && ((unsigned char)name[len] & 0xC0) == 0x80)
        len--;
    return len;
}

static void kernel_set_name(pid_t tid, const char *name) {
    char shortname[RL__KERNEL_NAME_MAX + 1];
    size_t len = kernel_name_length(name ? name : "");
    memcpy(shortname, name ? name : "", len);
    shortname[len] = '\0';
    if (tid == gettid()) {
        pthread_setname_np(pthread_self(), shortname);
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t w = write(fd, shortname, len);
    (void)w;
    close(fd);
}

static int nice_for_priority(double p) {
    if (p >= 0.5)
        return -(int)lround((p - 0.5) * 40.0);
    return (int)lround((0.5 - p) * 38.0);
}

/* Best effort: a nice value the process may not take is clamped (left at
 * the lowest value it may take), never an error. */
static void kernel_set_priority(pid_t tid, double p) {
    int nice = nice_for_priority(p);
    if (setpriority(PRIO_PROCESS, (id_t)tid, nice) == 0)
        return;
    if (errno != EACCES && errno != EPERM)
        return;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        int floor_nice = 20 - (int)rl.rlim_cur;
        if (floor_nice > nice && floor_nice <= 19)
            (void)setpriority(PRIO_PROCESS, (id_t)tid, floor_nice);
    }
}

/* ---- main and foreign threads ---- */

static void thread_make_main(void) {
    RLThreadRef t = thread_alloc("RLThreadGetMain");
    if (!t)
        return;
    t->is_main = true;
    t->has_pthread = false;
    t->state = RL__THREAD_EXECUTING;
    t->tid = getpid(); /* the main thread's tid is the process id */
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        t->stack_size = (size_t)rl.rlim_cur;
    else
        t->stack_size = (size_t)8 * 1024 * 1024;
    rl__object_hold(t); /* kept for the life of the process */
    main_thread = t;
}

RLThreadRef RLThreadGetMain(void) {
    pthread_once(&main_once, thread_make_main);
    if (!main_thread)
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    return main_thread;
}

static bool is_main_tid(void) { return gettid() == getpid(); }

bool RLThreadIsMainThread(void) { return is_main_tid(); }

bool RLThreadIsMain(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return false;
    return thread->is_main;
}

static void thread_exit_sequence(RLThreadRef t, void *result);

static void foreign_destructor(void *p) {
    RLThreadRef t = p;
    if (t && tls_current == t)
        thread_exit_sequence(t, NULL);
}

static void foreign_key_init(void) { pthread_key_create(&foreign_key, foreign_destructor); }

static RLThreadRef thread_register_foreign(void) {
    RLThreadRef t = thread_alloc("RLThreadGetCurrent");
    if (!t)
        return NULL;
    t->is_foreign = true;
    t->has_pthread = true;
    t->pthread = pthread_self();
    t->tid = gettid();
    t->state = RL__THREAD_EXECUTING;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        size_t size = 0;
        if (pthread_attr_getstacksize(&attr, &size) == 0)
            t->stack_size = size;
        pthread_attr_destroy(&attr);
    }
    pthread_once(&foreign_key_once, foreign_key_init);
    rl__object_hold(t);
    tls_current = t; /* the thread owns the one reference */
    pthread_setspecific(foreign_key, t);
    return t;
}

RLThreadRef rl__thread_current_if_any(void) { return tls_current; }

RLThreadRef RLThreadGetCurrent(void) {
    RLThreadRef t = tls_current;
    if (RL__LIKELY(t != NULL))
        return t;
    if (tls_exited) {
        rl__fail(kRLErrorInvalidState, __func__, "the calling thread is exiting");
        return NULL;
    }
    if (is_main_tid()) {
        t = RLThreadGetMain();
        tls_current = t;
        return t;
    }
    return thread_register_foreign();
}

/* ---- multi-threaded ---- */

bool RLThreadIsMultiThreaded(void) { return atomic_load(&mt_state) == 2; }

static bool add_mt_handler(void (*fn)(void *info), void *info, bool info_is_block, const char *fname) {
    mt_handler *h = calloc(1, sizeof *h);
    if (!h)
        return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    h->fn = fn;
    h->info = info;
    h->info_is_block = info_is_block;
    pthread_mutex_lock(&mt_lock);
    if (atomic_load(&mt_state) != 0) {
        pthread_mutex_unlock(&mt_lock);
        free(h);
        return rl__fail(kRLErrorInvalidState, fname, "the process is already multi-threaded");
    }
    mt_handler **tail = &mt_handlers;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    pthread_mutex_unlock(&mt_lock);
    return true;
}

bool RLThreadAddWillBecomeMultiThreadedHandler(void (*fn)(void *info), void *info) {
    const char *fname = __func__;
    if (!fn)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL handler");
    return add_mt_handler(fn, info, false, fname);
}

#if __BLOCKS__
static void mt_block_trampoline(void *info) { ((void (^)(void))info)(); }

bool RLThreadAddWillBecomeMultiThreadedHandlerBlock(void (^block)(void)) {
    const char *fname = __func__;
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
    void *copy = _Block_copy((const void *)block);
    if (!add_mt_handler(mt_block_trampoline, copy, true, fname)) {
        _Block_release(copy);
        return false;
    }
    return true;
}
#endif

/* Runs the one-time notification before the first thread is created; other
 * starters wait for it, a handler that starts a thread itself does not. */
static void become_multithreaded(void) {
    if (RL__LIKELY(atomic_load_explicit(&mt_state, memory_order_acquire) == 2))
        return;
    pthread_mutex_lock(&mt_lock);
    if (atomic_load(&mt_state) == 0) {
        atomic_store(&mt_state, 1);
        mt_handler *list = mt_handlers;
        mt_handlers = NULL;
        pthread_mutex_unlock(&mt_lock);
        tls_in_mt_notify = true;
        for (mt_handler *h = list, *next; h; h = next) {
            next = h->next;
            h->fn(h->info);
#if __BLOCKS__
            if (h->info_is_block)
                _Block_release(h->info);
#endif
            free(h);
        }
        tls_in_mt_notify = false;
        pthread_mutex_lock(&mt_lock);
        atomic_store_explicit(&mt_state, 2, memory_order_release);
        pthread_cond_broadcast(&mt_cond);
    } else if (!tls_in_mt_notify) {
        while (atomic_load(&mt_state) != 2)
            pthread_cond_wait(&mt_cond, &mt_lock);
    }
    pthread_mutex_unlock(&mt_lock);
}

/* ---- creation and start ---- */

RLThreadRef RLThreadCreate(RLAllocatorRef allocator, RLThreadEntry entry, void *arg) {
    (void)allocator;
    if (!entry) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL entry function");
        return NULL;
    }
    RLThreadRef t = thread_alloc(__func__);
    if (!t)
        return NULL;
    t->entry = entry;
    t->arg = arg;
    return t;
}

#if __BLOCKS__
static void *thread_block_entry(void *arg) {
    ((void (^)(void))arg)();
    return NULL;
}

RLThreadRef RLThreadCreateWithBlock(RLAllocatorRef allocator, void (^block)(void)) {
    (void)allocator;
    if (!block) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
        return NULL;
    }
    RLThreadRef t = thread_alloc(__func__);
    if (!t)
        return NULL;
    t->block = _Block_copy((const void *)block);
    t->entry = thread_block_entry;
    t->arg = t->block;
    return t;
}
#endif

/* On the new thread, before its entry: record the tid and apply the name
 * and priority set so far (later changes apply themselves). */
static void thread_attach_kernel(RLThreadRef t) {
    pthread_mutex_lock(&t->lock);
    t->tid = gettid();
    if (t->name)
        kernel_set_name(t->tid, t->name);
    if (t->priority_set)
        kernel_set_priority(t->tid, t->priority);
    pthread_mutex_unlock(&t->lock);
}

static void thread_cleanup(void *p) { thread_exit_sequence(p, NULL); }

/* pthread_exit (RLThreadExit) unwinds through the cleanup handler, after
 * the cleanup handlers the entry pushed itself. */
static void *thread_run_entry(RLThreadRef t) {
    void *result;
    pthread_cleanup_push(thread_cleanup, t);
    result = t->entry(t->arg);
    pthread_cleanup_pop(0);
    return result;
}

static void *thread_main(void *p) {
    RLThreadRef t = p;
    tls_current = t;
    thread_attach_kernel(t);
    void *result = thread_run_entry(t);
    thread_exit_sequence(t, result);
    return result;
}

/* Checks that t can be started; true with *done if it was cancelled
 * before it started (it is finished now). t->lock held. */
static bool thread_startable_locked(RLThreadRef t, bool *done, const char *fn) {
    *done = false;
    if (t->is_main || t->is_foreign)
        return rl__fail(kRLErrorInvalidState, fn, "%s thread is already running", t->is_main ? "the main" : "a foreign");
    if (t->state != RL__THREAD_CREATED)
        return rl__fail(kRLErrorInvalidState, fn, "thread was already started");
    if (atomic_load(&t->cancelled)) {
        t->state = RL__THREAD_FINISHED;
        pthread_cond_broadcast(&t->cond);
        *done = true;
    }
    return true;
}

bool RLThreadStart(RLThreadRef thread) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    RLThreadRef t = thread;
    bool done;
    pthread_mutex_lock(&t->lock);
    bool ok = thread_startable_locked(t, &done, fn);
    pthread_mutex_unlock(&t->lock);
    if (!ok || done)
        return ok;

    /* Before the start is claimed: will-become-multi-threaded handlers are
     * user code, run with no lock held. */
    become_multithreaded();

    /* The state becomes executing together with the pthread, under the
     * lock: whoever sees an executing thread sees its pthread (a perform
     * request gets the thread's run loop from it). */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_mutex_lock(&t->lock);
    ok = thread_startable_locked(t, &done, fn); /* another Start may have won meanwhile */
    int err = 0;
    if (ok && !done) {
        pthread_attr_setstacksize(&attr, t->stack_size);
        pthread_attr_setdetachstate(&attr, t->joinable ? PTHREAD_CREATE_JOINABLE : PTHREAD_CREATE_DETACHED);
        RLRetain(t); /* the thread's own reference, dropped at the end of its exit sequence */
        rl__object_hold(t);
        pthread_t pt;
        err = pthread_create(&pt, &attr, thread_main, t);
        if (err == 0) {
            t->state = RL__THREAD_EXECUTING;
            t->pthread = pt;
            t->has_pthread = true;
        }
    }
    pthread_mutex_unlock(&t->lock);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        rl__object_unhold(t);
        return rl__fail_errno(err, fn, "pthread_create failed");
    }
    return ok;
}

bool RLThreadDetachNew(RLThreadEntry entry, void *arg) {
    RLThreadRef t = RLThreadCreate(NULL, entry, arg);
    if (!t)
        return false;
    bool ok = RLThreadStart(t);
    RLRelease(t);
    return ok;
}

#if __BLOCKS__
bool RLThreadDetachNewWithBlock(void (^block)(void)) {
    RLThreadRef t = RLThreadCreateWithBlock(NULL, block);
    if (!t)
        return false;
    bool ok = RLThreadStart(t);
    RLRelease(t);
    return ok;
}
#endif

typedef struct background_call {
    void (*fn)(void *arg);
    void *arg;
} background_call;

static void *background_entry(void *p) {
    background_call call = *(background_call *)p;
    free(p);
    call.fn(call.arg);
    return NULL;
}

bool RLThreadPerformInBackground(void (*fn)(void *arg), void *arg) {
    if (!fn)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL function");
    background_call *call = malloc(sizeof *call);
    if (!call)
        return rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    call->fn = fn;
    call->arg = arg;
    if (!RLThreadDetachNew(background_entry, call)) {
        free(call);
        return false;
    }
    return true;
}

/* ---- the exit sequence ---- */

/* Runs once per thread, on that thread: run loop teardown, pending perform
 * requests failed, will-exit handlers, dictionary destructors, finished. */
static void thread_exit_sequence(RLThreadRef t, void *result) {
    if (rl__fork_inherited(t->fork_gen)) {
        /* A fork() child whose forking thread was this RLThread ends: the
         * object is the parent's; only what the child made is torn down. */
        rl__runloop_teardown_current_thread();
        tls_current = NULL;
        tls_exited = true;
        return;
    }
    rl__runloop_teardown_current_thread();
    void (*perform_will_exit)(RLThreadRef) = atomic_load_explicit(&on_perform_will_exit, memory_order_acquire);
    if (perform_will_exit)
        perform_will_exit(t);
    /* A request sent between the two calls above may have made a new loop
     * for this thread (rl__runloop_get_for_thread); none can be made now
     * that requests are refused, so this second call leaves none behind. */
    rl__runloop_teardown_current_thread();

    for (;;) {
        pthread_mutex_lock(&t->lock);
        rl__thread_handler *h = t->handlers;
        if (h)
            t->handlers = h->next;
        else
            t->handlers_ran = true; /* later additions are refused */
        pthread_mutex_unlock(&t->lock);
        if (!h)
            break;
        h->fn(t, h->info);
        handler_free(h);
    }

    pthread_mutex_lock(&global_lock);
    size_t n = 0;
    for (rl__thread_handler *h = global_handlers; h; h = h->next)
        n++;
    rl__thread_handler *snapshot = n ? calloc(n, sizeof *snapshot) : NULL;
    if (snapshot) {
        size_t i = 0;
        for (rl__thread_handler *h = global_handlers; h; h = h->next) {
            snapshot[i] = *h;
#if __BLOCKS__
            /* Keeps the block alive if the handler is removed meanwhile. */
            if (h->info_is_block)
                snapshot[i].info = _Block_copy(h->info);
#endif
            i++;
        }
    } else {
        n = 0;
    }
    pthread_mutex_unlock(&global_lock);
    for (size_t i = 0; i < n; i++) {
        snapshot[i].fn(t, snapshot[i].info);
#if __BLOCKS__
        if (snapshot[i].info_is_block)
            _Block_release(snapshot[i].info);
#endif
    }
    free(snapshot);

    /* Destructors may store new values; a few rounds, as pthread keys. */
    for (int round = 0; round < 4; round++) {
        pthread_mutex_lock(&t->lock);
        rl__thread_value *values = values_unpinned_locked(t->values);
        bool pinned = t->values && !values;
        t->values = NULL;
        pthread_mutex_unlock(&t->lock);
        if (pinned)
            continue; /* only entries a CopyValue is using: they free themselves */
        if (!values)
            break;
        thread_free_values(values);
    }

    pthread_mutex_lock(&t->lock);
    t->result = result;
    t->state = RL__THREAD_FINISHED;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);

    tls_current = NULL;
    tls_exited = true;
    rl__object_unhold(t);
}

void RLThreadExit(void) {
    /* A library thread unwinds into thread_cleanup; a foreign thread
     * finishes in its key destructor. The main thread finishes as a foreign
     * one does (its RLThread object lives on, finished), so that requests
     * sent to it fail instead of waiting for a thread that is gone: in a key
     * destructor, which runs after the unwinding (a request batch that
     * called this puts back what it did not run, for the teardown to
     * drop). */
    if (is_main_tid() && !tls_exited) {
        RLThreadRef t = RLThreadGetMain();
        if (t) {
            RLRetain(t); /* the exit sequence's, released at its end */
            tls_current = t;
            pthread_once(&foreign_key_once, foreign_key_init);
            if (pthread_setspecific(foreign_key, t) != 0)
                thread_exit_sequence(t, NULL); /* no destructor: now, before the unwinding */
        }
    }
    pthread_exit(NULL);
}

/* ---- joining ---- */

bool RLThreadJoin(RLThreadRef thread, void **result) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    RLThreadRef t = thread;
    if (t == tls_current || (t->is_main && is_main_tid()))
        return rl__fail(kRLErrorWouldDeadlock, fn, "a thread cannot join itself");
    pthread_mutex_lock(&t->lock);
    const char *why = NULL;
    if (t->is_main || t->is_foreign)
        why = "the main thread and threads not started by RLThread cannot be joined";
    else if (t->state == RL__THREAD_CREATED)
        why = "thread was never started";
    else if (!t->joinable)
        why = "thread is detached (RLThreadSetJoinable before start makes it joinable)";
    else if (t->join_claimed)
        why = "thread was already joined";
    if (why) {
        pthread_mutex_unlock(&t->lock);
        return rl__fail(kRLErrorInvalidState, fn, "%s", why);
    }
    t->join_claimed = true;
    bool has_pthread = t->has_pthread;
    pthread_t pt = t->pthread;
    pthread_mutex_unlock(&t->lock);
    if (has_pthread) {
        int err = pthread_join(pt, NULL);
        if (err != 0)
            return rl__fail_errno(err, fn, "pthread_join failed");
    }
    pthread_mutex_lock(&t->lock);
    if (result)
        *result = t->result;
    pthread_mutex_unlock(&t->lock);
    return true;
}

/* ---- attributes ---- */

size_t RLThreadGetStackSize(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return 0;
    pthread_mutex_lock(&thread->lock);
    size_t s = thread->stack_size;
    pthread_mutex_unlock(&thread->lock);
    return s;
}

bool RLThreadSetStackSize(RLThreadRef thread, size_t size) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    if (size < kRLThreadMinimumStackSize)
        return rl__fail(kRLErrorInvalidArgument, fn, "stack size %zu is below the minimum of %zu bytes", size,
                        kRLThreadMinimumStackSize);
    if (size % kRLThreadStackSizeGranule != 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "stack size %zu is not a multiple of %zu bytes", size,
                        kRLThreadStackSizeGranule);
    pthread_mutex_lock(&thread->lock);
    if (thread->state != RL__THREAD_CREATED || thread->is_main || thread->is_foreign) {
        pthread_mutex_unlock(&thread->lock);
        return rl__fail(kRLErrorInvalidState, fn, "the stack size can only be set before the thread starts");
    }
    thread->stack_size = size;
    pthread_mutex_unlock(&thread->lock);
    return true;
}

/* The kernel's name of thread tid (at most 15 bytes), or "" if it cannot
 * be read. For threads named outside the library: the process name for
 * the main thread, whatever pthread_setname_np set for another. */
static void kernel_get_name(pid_t tid, char out[RL__KERNEL_NAME_MAX + 1]) {
    out[0] = '\0';
    if (tid == gettid()) {
        if (pthread_getname_np(pthread_self(), out, RL__KERNEL_NAME_MAX + 1) != 0)
            out[0] = '\0';
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n;
    do
        n = read(fd, out, RL__KERNEL_NAME_MAX + 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n <= 0) {
        out[0] = '\0';
        return;
    }
    if (n > RL__KERNEL_NAME_MAX)
        n = RL__KERNEL_NAME_MAX;
    out[n] = '\0';
    char *nl = strchr(out, '\n'); /* comm ends in a newline */
    if (nl)
        *nl = '\0';
}

char *RLThreadCopyName(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return NULL;
    char kernel[RL__KERNEL_NAME_MAX + 1] = "";
    pthread_mutex_lock(&thread->lock);
    const char *name = thread->name;
    /* A thread the library did not start, never named through it, has
     * the name the kernel knows (as Foundation reads it); the lock keeps a
     * foreign thread from finishing, and its tid from being reused, while
     * it is read. */
    if (!name && (thread->is_main || thread->is_foreign) && thread->state == RL__THREAD_EXECUTING &&
        thread->tid != 0) {
        kernel_get_name(thread->tid, kernel);
        name = kernel;
    }
    char *s = strdup(name ? name : "");
    pthread_mutex_unlock(&thread->lock);
    if (!s)
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    return s;
}

bool RLThreadSetName(RLThreadRef thread, const char *name) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    char *copy = NULL;
    if (name && !(copy = strdup(name)))
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    pthread_mutex_lock(&thread->lock);
    char *old = thread->name;
    thread->name = copy;
    /* The lock keeps the thread from finishing (and its tid from being
     * reused) while the kernel name is written. */
    if (thread->state == RL__THREAD_EXECUTING && thread->tid != 0)
        kernel_set_name(thread->tid, copy ? copy : "");
    pthread_mutex_unlock(&thread->lock);
    free(old);
    return true;
}

double RLThreadGetPriority(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return -1.0;
    pthread_mutex_lock(&thread->lock);
    double p = thread->priority;
    pthread_mutex_unlock(&thread->lock);
    return p;
}

bool RLThreadSetPriority(RLThreadRef thread, double priority) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    if (!(priority >= 0.0 && priority <= 1.0))
        return rl__fail(kRLErrorInvalidArgument, fn, "priority %g is not in [0, 1]", priority);
    pthread_mutex_lock(&thread->lock);
    thread->priority = priority;
    thread->priority_set = true;
    if (thread->state == RL__THREAD_EXECUTING && thread->tid != 0)
        kernel_set_priority(thread->tid, priority);
    pthread_mutex_unlock(&thread->lock);
    return true;
}

bool RLThreadSetJoinable(RLThreadRef thread, bool joinable) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    pthread_mutex_lock(&thread->lock);
    if (thread->state != RL__THREAD_CREATED || thread->is_main || thread->is_foreign) {
        pthread_mutex_unlock(&thread->lock);
        return rl__fail(kRLErrorInvalidState, fn, "joinable can only be set before the thread starts");
    }
    thread->joinable = joinable;
    pthread_mutex_unlock(&thread->lock);
    return true;
}

bool RLThreadIsJoinable(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return false;
    pthread_mutex_lock(&thread->lock);
    bool j = thread->joinable;
    pthread_mutex_unlock(&thread->lock);
    return j;
}

/* ---- state ---- */

bool RLThreadCancel(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return false;
    atomic_store(&thread->cancelled, true);
    return true;
}

bool RLThreadIsCancelled(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return false;
    return atomic_load(&thread->cancelled);
}

static enum rl__thread_state thread_state(RLThreadRef t) {
    pthread_mutex_lock(&t->lock);
    enum rl__thread_state s = t->state;
    pthread_mutex_unlock(&t->lock);
    return s;
}

bool RLThreadIsExecuting(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return false;
    return thread_state(thread) == RL__THREAD_EXECUTING;
}

bool RLThreadIsFinished(RLThreadRef thread) {
    if (!rl__thread_check(thread, __func__))
        return false;
    return thread_state(thread) == RL__THREAD_FINISHED;
}

/* ---- will-exit handlers ---- */

static RLThreadHandlerToken add_handler(RLThreadRef thread, RLThreadWillExitHandler fn, void *info,
                                            bool info_is_block, const char *fname) {
    rl__thread_handler *h = calloc(1, sizeof *h);
    if (!h) {
        rl__fail(kRLErrorNoMemory, fname, "out of memory");
        return 0;
    }
    h->fn = fn;
    h->info = info;
    h->info_is_block = info_is_block;
    h->token = atomic_fetch_add(&next_token, 1);
    pthread_mutex_t *lock = thread ? &thread->lock : &global_lock;
    pthread_mutex_lock(lock);
    if (thread && (thread->state == RL__THREAD_FINISHED || thread->handlers_ran)) {
        pthread_mutex_unlock(lock);
        h->info_is_block = false; /* the caller keeps its block */
        free(h);
        rl__fail(kRLErrorInvalidState, fname, "thread has finished");
        return 0;
    }
    rl__thread_handler **tail = thread ? &thread->handlers : &global_handlers;
    while (*tail)
        tail = &(*tail)->next;
    *tail = h;
    RLThreadHandlerToken token = h->token; /* h may run and go once unlocked */
    pthread_mutex_unlock(lock);
    return token;
}

RLThreadHandlerToken RLThreadAddWillExitHandler(RLThreadRef thread, RLThreadWillExitHandler fn, void *info) {
    const char *fname = __func__;
    if (thread && !rl__thread_check(thread, fname))
        return 0;
    if (!fn) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL handler");
        return 0;
    }
    return add_handler(thread, fn, info, false, fname);
}

#if __BLOCKS__
static void handler_block_trampoline(RLThreadRef thread, void *info) {
    ((void (^)(RLThreadRef))info)(thread);
}

RLThreadHandlerToken RLThreadAddWillExitHandlerBlock(RLThreadRef thread, void (^block)(RLThreadRef thread)) {
    const char *fname = __func__;
    if (thread && !rl__thread_check(thread, fname))
        return 0;
    if (!block) {
        rl__fail(kRLErrorInvalidArgument, fname, "NULL block");
        return 0;
    }
    void *copy = _Block_copy((const void *)block);
    RLThreadHandlerToken token = add_handler(thread, handler_block_trampoline, copy, true, fname);
    if (!token)
        _Block_release(copy);
    return token;
}
#endif

bool RLThreadRemoveWillExitHandler(RLThreadRef thread, RLThreadHandlerToken token) {
    const char *fname = __func__;
    if (thread && !rl__thread_check(thread, fname))
        return false;
    pthread_mutex_t *lock = thread ? &thread->lock : &global_lock;
    pthread_mutex_lock(lock);
    rl__thread_handler **link = thread ? &thread->handlers : &global_handlers;
    while (*link && (*link)->token != token)
        link = &(*link)->next;
    rl__thread_handler *h = *link;
    if (h)
        *link = h->next;
    pthread_mutex_unlock(lock);
    if (!h)
        return rl__fail(kRLErrorNotFound, fname, "no handler with token %llu", (unsigned long long)token);
    handler_free(h);
    return true;
}

/* ---- dictionary ---- */

bool RLThreadDictionarySetValue(RLThreadRef thread, const char *key, void *value, void (*destructor)(void *value)) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    if (!key)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL key");
    rl__thread_value *nv = calloc(1, sizeof *nv);
    char *kcopy = strdup(key);
    if (!nv || !kcopy) {
        free(nv);
        free(kcopy);
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    }
    nv->key = kcopy;
    nv->value = value;
    nv->destructor = destructor;
    pthread_mutex_lock(&thread->lock);
    rl__thread_value **link = &thread->values;
    while (*link && strcmp((*link)->key, key) != 0)
        link = &(*link)->next;
    rl__thread_value *old = *link;
    nv->next = old ? old->next : NULL;
    *link = nv;
    if (old) {
        old->next = NULL;
        old = values_unpinned_locked(old);
    }
    pthread_mutex_unlock(&thread->lock);
    thread_free_values(old);
    return true;
}

bool RLThreadDictionaryGetValue(RLThreadRef thread, const char *key, void **value) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    if (!key)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL key");
    pthread_mutex_lock(&thread->lock);
    rl__thread_value *v = thread->values;
    while (v && strcmp(v->key, key) != 0)
        v = v->next;
    void *found = v ? v->value : NULL;
    pthread_mutex_unlock(&thread->lock);
    if (!v)
        return rl__fail(kRLErrorNotFound, fn, "no value for key \"%s\"", key);
    if (value)
        *value = found;
    return true;
}

bool RLThreadDictionaryRemoveValue(RLThreadRef thread, const char *key) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    if (!key)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL key");
    pthread_mutex_lock(&thread->lock);
    rl__thread_value **link = &thread->values;
    while (*link && strcmp((*link)->key, key) != 0)
        link = &(*link)->next;
    rl__thread_value *v = *link;
    rl__thread_value *gone = NULL;
    if (v) {
        *link = v->next;
        v->next = NULL;
        gone = values_unpinned_locked(v);
    }
    pthread_mutex_unlock(&thread->lock);
    if (!v)
        return rl__fail(kRLErrorNotFound, fn, "no value for key \"%s\"", key);
    thread_free_values(gone);
    return true;
}

bool RLThreadDictionaryCopyValue(RLThreadRef thread, const char *key, void *(*retain)(void *value), void **value) {
    const char *fn = __func__;
    if (!rl__thread_check(thread, fn))
        return false;
    if (!key)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL key");
    if (!retain)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL retain callback");
    pthread_mutex_lock(&thread->lock);
    rl__thread_value *v = thread->values;
    while (v && strcmp(v->key, key) != 0)
        v = v->next;
    if (v)
        v->pins++; /* keeps its destructor from running until retain returned */
    pthread_mutex_unlock(&thread->lock);
    if (!v)
        return rl__fail(kRLErrorNotFound, fn, "no value for key \"%s\"", key);
    void *copy = retain(v->value);
    pthread_mutex_lock(&thread->lock);
    bool free_now = --v->pins == 0 && v->detached;
    pthread_mutex_unlock(&thread->lock);
    if (free_now)
        thread_free_values(v);
    if (value)
        *value = copy;
    return true;
}

/* ---- sleeping ---- */

static bool sleep_until_monotonic(struct timespec deadline) {
    int err;
    do
        err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
    while (err == EINTR);
    if (err != 0)
        return rl__fail_errno(err, "RLThreadSleep", "clock_nanosleep failed");
    return true;
}

bool RLThreadSleepForTimeInterval(RLTimeInterval seconds) {
    if (isnan(seconds))
        return rl__fail(kRLErrorInvalidArgument, __func__, "NaN interval");
    if (!(seconds > 0))
        return true;
    return sleep_until_monotonic(rl__timespec_from_seconds(RLMonotonicTimeGetCurrent() + seconds));
}

bool RLThreadSleepUntilDate(RLAbsoluteTime date) {
    if (!rl__date_valid(date))
        return rl__fail(kRLErrorInvalidArgument, __func__, "NaN date");
    return sleep_until_monotonic(rl__monotonic_deadline_for_date(date));
}

/* ---- fork ---- */

/* The registries' locks are held across fork() (rl_fork.c); neither is
 * ever held while the other is taken. */
static void fork_prepare(void) {
    pthread_mutex_lock(&mt_lock);
    pthread_mutex_lock(&global_lock);
}

static void fork_parent(void) {
    pthread_mutex_unlock(&global_lock);
    pthread_mutex_unlock(&mt_lock);
}

/* In the child, the forking thread is the only thread and the main one:
 * it gets a new RLThread when it asks (RLThreadGetCurrent/GetMain), as
 * every RLThread made before the fork is the parent's. */
static void fork_child(void) {
    fork_parent();
    /* Waiters counted by the condition are threads of the parent. */
    pthread_cond_init(&mt_cond, NULL);
    /* Another thread was running the will-become-multi-threaded handlers:
     * it does not exist here, and the child is past that point anyway. */
    if (atomic_load(&mt_state) == 1)
        atomic_store(&mt_state, 2);
    tls_current = NULL;
    main_thread_inherited = main_thread; /* kept, never used: the parent's */
    main_thread = NULL;
    main_once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_THREAD, fork_prepare, fork_parent, fork_child);
}
