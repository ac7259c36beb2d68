/*
 * RLThreadInternal.h — the RLThread object as seen by RLThread.c, RLPerform.c
 * and RLWorkerThread.c. Private to the library.
 */
#ifndef CRUNLOOP_RLTHREADINTERNAL_H
#define CRUNLOOP_RLTHREADINTERNAL_H

#include "RLBase.h"
#include "rl_fork.h"
#include <crunloop/RLThread.h>
#include <crunloop/RLRunLoop.h>
#include <pthread.h>
#include <sys/types.h>

enum rl__thread_state {
    RL__THREAD_CREATED = 0, /* configured, not started */
    RL__THREAD_EXECUTING,   /* started (or main/foreign and alive) */
    RL__THREAD_FINISHED,    /* exit sequence done, or cancelled before start */
};

typedef struct rl__thread_value rl__thread_value;
typedef struct rl__thread_handler rl__thread_handler;
struct rl__perform_state;

struct RLThread {
    rl__object base;
    /* Guards everything below that is not atomic. Never held while user code
     * runs; taken before a run loop's internal lock, never after. */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* state changes; perform requests done */

    RLThreadEntry entry;
    void *arg;
    void *block; /* copied block for RLThreadCreateWithBlock, else NULL */
    void *result;

    size_t stack_size;
    double priority;
    bool priority_set;
    char *name;

    enum rl__thread_state state;
    bool joinable;
    bool join_claimed;
    bool is_main;
    bool is_foreign;
    bool has_pthread; /* a pthread was created for it (or it is main/foreign) */
    bool handlers_ran; /* its will-exit handlers have run: no more are taken */
    _Atomic bool cancelled;
    pthread_t pthread;
    pid_t tid;
    unsigned fork_gen; /* rl__fork_gen() at creation: another one means inherited by a fork() child */

    rl__thread_value *values;
    rl__thread_handler *handlers; /* per-thread will-exit handlers, in order */

    /* Perform requests (RLPerform.c): the thread's run loop, retained and
     * set while the thread can run requests (they go into its queue); the
     * delayed requests and the closed flag, allocated on first use. */
    RLRunLoopRef runloop;
    struct rl__perform_state *perform;
};

/* t is a live RLThread of this process: not inherited across fork(),
 * whose thread (and lock holders) do not exist in the child. Else false,
 * error set. */
RL__HIDDEN bool rl__thread_check(RLThreadRef t, const char *fn);

/* The calling thread's RLThread if it already has one (no creation). */
RL__HIDDEN RLThreadRef rl__thread_current_if_any(void);

/* What RLPerform.c keeps in a thread (t->perform, t->runloop) is let go
 * through two hooks that it registers once, at load time, so that RLThread.c
 * (below it) never calls up into it; a program linked without RLPerform.c
 * has none and leaves both fields NULL.
 *   will_exit: on the exiting thread after its run loop was torn down:
 *              refuse new requests, release waiters of pending ones with
 *              kRLErrorInvalidState.
 *   finalize:  from the thread's finalizer: free the perform state. */
RL__HIDDEN void rl__thread_register_perform_hooks(void (*will_exit)(RLThreadRef t), void (*finalize)(RLThreadRef t));

#endif /* CRUNLOOP_RLTHREADINTERNAL_H */
