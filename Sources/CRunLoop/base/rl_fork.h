/*
 * rl_fork.h — private: fork() safety (rl_fork.c). The fork generation that
 * tells an inherited object, and the registration through which each file
 * that owns global locks hands rl_fork.c its atfork hooks.
 */
#ifndef CRUNLOOP_RL_FORK_H
#define CRUNLOOP_RL_FORK_H

#include "internal.h"

/* ---- fork (rl_fork.c) ----
 * A child of fork() has one thread and a copy of the parent's memory, in
 * which run loops, threads and workers describe kernel objects (epoll,
 * eventfd, timerfd) still shared with the parent and threads that do not
 * exist in the child. Each such object records the process's fork
 * generation when it is made; in the child the generation has moved on,
 * so the object is "inherited" and every call on it fails with
 * kRLErrorInvalidState instead of touching the parent's kernel objects or
 * waiting for a thread that is gone. The atfork handlers hold every global
 * lock of the library across fork() (in one fixed order, below), so the
 * child's copy of each is consistent and free. */
RL__HIDDEN extern _Atomic unsigned rl__fork_generation;
/* The generation to record in an object made now. */
static inline unsigned rl__fork_gen(void) {
    return atomic_load_explicit(&rl__fork_generation, memory_order_relaxed);
}
/* Was an object that recorded `gen` made before a fork, in the parent? */
static inline bool rl__fork_inherited(unsigned gen) { return RL__UNLIKELY(gen != rl__fork_gen()); }
/* rl__fail(kRLErrorInvalidState) naming `what` ("run loop", "thread",
 * "worker") as inherited across fork(); returns false. */
RL__HIDDEN bool rl__fork_fail(const char *fn, const char *what) __attribute__((cold));

/* The fixed lock order across fork(), outermost first: each number is one
 * file's slot. prepare runs the registered hooks in this order, parent and
 * child in the reverse one. RLThread's registries (held while nothing else
 * is taken), the message-port and socket-port registries (a port is made
 * or looked up under them),
 * @synchronized stripes, the run loops' main-loop mutex, thread -> loop
 * table and loop locks, the object pool (taken under all of those), the
 * signal sources' table (a leaf, never held with another), the lock-order
 * detector (a leaf: taken inside lock operations), the string registry
 * (a leaf: a run loop makes strings under its own lock), and the stream
 * resolver's queue (a leaf: taken under a connection's lock). */
typedef enum rl__fork_order {
    RL_FORK_THREAD,
    RL_FORK_MSGPORT,
    RL_FORK_SOCKPORT,
    RL_FORK_SYNC,
    RL_FORK_RUNLOOP,
    RL_FORK_POOL,
    RL_FORK_SIGNAL,
    RL_FORK_LOCKDEP,
    RL_FORK_STRING,
    RL_FORK_RESOLVER,
    RL_FORK_SLOTS
} rl__fork_order;

/* Registers one file's hooks in slot `order`: prepare takes the file's
 * global locks, parent and child release them (child also resets what the
 * child must not inherit; it must not allocate). Call once, at load time
 * (from a constructor): a second call for a slot with other hooks aborts,
 * a repeated one with the same hooks does nothing. Allocates nothing. */
RL__HIDDEN void rl__fork_register(rl__fork_order order, void (*prepare)(void), void (*parent)(void),
                                  void (*child)(void));

#endif /* CRUNLOOP_RL_FORK_H */
