/*
 * rl_fork.c — fork() safety: the process's fork generation and the one
 * pthread_atfork registration of the library.
 *
 * Two things go wrong in a child without this:
 *   - a lock another thread held at the moment of fork() is copied locked,
 *     and nobody in the child will ever release it (the object pool's lock
 *     deadlocked about one child in three while another thread allocated);
 *   - a run loop's epoll fd, eventfd and timerfd are shared with the parent:
 *     a child that waits on them, arms them or writes them steals or
 *     disturbs the parent's wake-ups (a child running its inherited loop
 *     hung both).
 *
 * So: prepare takes every global lock of the library, in one fixed order
 * (outer locks before the ones taken under them), and parent and child
 * release them; the child then starts a new fork generation. Run loops,
 * threads and workers record the generation they were made in; one from
 * an older generation is inherited, and every call on it fails with
 * kRLErrorInvalidState (rl__fork_inherited). The calling thread of the
 * child gets a new run loop and RLThread when it asks for them.
 *
 * Per-object locks (a thread's, a worker's, a loop's perform queue) are
 * not taken: the child never takes the lock of an inherited object, which
 * is what the generation check at every entry point guarantees.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

_Atomic unsigned rl__fork_generation;

bool rl__fork_fail(const char *fn, const char *what) {
    return rl__fail(kRLErrorInvalidState, fn,
                    "the %s was inherited across fork(): it belongs to the parent process; "
                    "create a new one in the child",
                    what);
}

/* Lock order, outermost first: RLThread's registries (held while nothing
 * else is taken), the message-port and socket-port registries (a port is
 * made or looked up under them),
 * @synchronized stripes, the run loop's main-loop mutex and
 * thread -> loop table (taken before the graph lock, which creating a loop
 * takes), the object pool (taken under all of those), the signal sources'
 * table (a leaf, never held with another), the lock-order detector (a
 * leaf: taken inside lock operations), and the string registry (a leaf: a
 * run loop makes strings under its own lock). */
static void rl_fork_prepare(void) {
    rl__thread_fork_prepare();
    rl__msgport_fork_prepare();
    rl__sockport_fork_prepare();
    rl__sync_fork_prepare();
    rl__runloop_fork_prepare();
    rl__pool_fork_prepare();
    rl__signal_fork_prepare();
    rl__lockdep_fork_prepare();
    rl__string_fork_prepare();
}

static void rl_fork_parent(void) {
    rl__string_fork_parent();
    rl__lockdep_fork_parent();
    rl__signal_fork_parent();
    rl__pool_fork_parent();
    rl__runloop_fork_parent();
    rl__sync_fork_parent();
    rl__sockport_fork_parent();
    rl__msgport_fork_parent();
    rl__thread_fork_parent();
}

static void rl_fork_child(void) {
    atomic_fetch_add_explicit(&rl__fork_generation, 1, memory_order_relaxed);
    rl__string_fork_child();
    rl__lockdep_fork_child();
    rl__signal_fork_child();
    rl__pool_fork_child();
    rl__runloop_fork_child();
    rl__sync_fork_child();
    rl__sockport_fork_child();
    rl__msgport_fork_child();
    rl__thread_fork_child();
}

/* At load time, before any thread of the program can fork. */
__attribute__((constructor)) static void rl_fork_register(void) {
    if (pthread_atfork(rl_fork_prepare, rl_fork_parent, rl_fork_child) != 0)
        abort(); /* ENOMEM at load time: nothing would be fork-safe */
}
