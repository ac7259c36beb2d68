/*
 * rl_loop.h — private: the run-loop object at the bottom of the loop core
 * (rl_loop.c): its class, the check every call on a loop makes, and the
 * calling thread's own loop. Everything else in the run-loop files calls
 * down to these; they call nothing above them (modes and the perform
 * queue's storage only, to free a loop).
 */
#ifndef CRUNLOOP_RL_LOOP_H
#define CRUNLOOP_RL_LOOP_H

#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>

/* The class of every RLRunLoop; its finalizer frees what the loop owns. */
RL__HIDDEN extern const rl__class rl__runloop_class;

/* True if rl is a live run loop made in this process; otherwise false with
 * the error set, naming fn (a loop inherited across fork() is refused by
 * every public function: its kernel objects are the parent's, and its
 * thread does not exist here). Inline: every call on a loop makes it, and
 * a perform request makes it twice (queue, wake-up); the failing paths
 * are out of line. */
static inline bool rl__check_loop(RLRunLoopRef rl, const char *fn) {
    if (!rl__object_check(rl, &rl__runloop_class, fn))
        return false;
    if (rl__fork_inherited(rl->fork_gen))
        return rl__fork_fail(fn, "run loop");
    return true;
}

/* The calling thread's run loop (its reference: the loop lives as long as
 * this is set), NULL before RLRunLoopGetCurrent and after teardown. Set by
 * the per-thread storage (RLRunLoop.c); read by the item locks and loop
 * sets (rl_lock.c), for which the caller's own loop cannot go away. */
/* Initial-exec: every timer add and remove and every loop lock compares
 * with it, and in libcrunloop.so the TLS descriptor (the Makefile's
 * -mtls-dialect=gnu2) made each read a call, with a stack frame around it
 * in the hot paths that make no other call. One pointer of static TLS,
 * which glibc's surplus holds even when the library is loaded by dlopen;
 * the library's other thread-local variables keep their model. */
RL__HIDDEN extern __thread RLRunLoopRef rl__tls __attribute__((tls_model("initial-exec")));

/* A worker thread's loop (perform/RLWorkerThread.c): while on, its common
 * modes do not finish when empty (RLRunLoopRun.c's empty checks), as if a
 * source that never fires were in each, so the loop sleeps in the kernel
 * until work or a stop arrives; without the source's memory. The loop's
 * thread only. */
static inline void rl__loop_keep_alive(RLRunLoopRef rl, bool on) { rl->keep_alive = on; }

#endif /* CRUNLOOP_RL_LOOP_H */
