/*
 * rl_testhook.h — private: the tests' hooks into the library, defined in
 * rl_testhook.c: fault injection (rl__faults) and the event counters
 * (rl__counting). Both are hidden, so only code linked with the static
 * library can set them; both are zero in use. A file of its own, under
 * everything else in base/: the error reports (RLError.c) ask for a fault
 * too, and the object model they sit under must not be what they include.
 */
#ifndef CRUNLOOP_RL_TESTHOOK_H
#define CRUNLOOP_RL_TESTHOOK_H

#include "internal.h"

#include <stdbool.h>

/* Fault injection for tests: each bit of rl__faults makes one kind of
 * allocation or system call fail, to reach the paths that handle it. Zero in normal use;
 * the tests set it (it is hidden, so only code linked with the static
 * library can). */
enum {
    RL_FAULT_TIMER_ARRAY = 1 << 0, /* growing a mode's timer array (rl_heap.c) */
    RL_FAULT_TIMERFD = 1 << 1,     /* arming a loop's timerfd (rl_wake.c) */
    RL_FAULT_SOCKET_DATA = 1 << 2, /* the spare RLData a socket's read needs before it reads (RLSocket.c) */
    RL_FAULT_SOCKET_COPY = 1 << 3, /* the RLData a short Data read is copied into, after the read (RLSocket.c) */
    RL_FAULT_EPOLL_WAIT = 1 << 4,  /* a loop's epoll_wait, refused with EBADF (rl_waitpolicy.h) */
    RL_FAULT_URING_SETUP = 1 << 5, /* a new loop's io_uring, refused with ENOSYS (rl_poll_uring.c) */
    RL_FAULT_URING_BUFS = 1 << 6,  /* a loop's provided-buffer ring, refused: reads by polls (rl_poll_uring.c) */
    RL_FAULT_ERROR_MESSAGE = 1 << 7, /* a thread's error message buffer, made on its first error (RLError.c) */
    RL_FAULT_URING_TAKE_EARLY = 1 << 8, /* not a failure: every submission outside the wait takes the ring's
                                           completions, as a receive's cancellation does (rl_poll_uring.c) */
    RL_FAULT_MEMBARRIER = 1 << 9, /* membarrier(2) refused when the process registers for it (first bias,
                                     a fork() child): no loop lock is biased (loop/rl_bias.c) */
    RL_FAULT_BIAS_BREAK = 1 << 10, /* breaks the lock deliberately, for the stress test's own check: taking a
                                      biased loop lock skips the barrier and the wait for the owner (rl_bias.c) */
    RL_FAULT_URING_SHORT_SEND = 1 << 11, /* not a failure: a send through the ring asks for half of what is left,
                                           so that every send is short and continued (rl_poll_uring.c) */
};
RL__HIDDEN extern _Atomic unsigned rl__faults;
#define rl__fault(f) RL__UNLIKELY(atomic_load_explicit(&rl__faults, memory_order_relaxed) & (f))

/* The tests' event counters (a ring delivery, a send completed, a Read
 * callout's end-of-stream check, ...): bumped only while rl__counting is
 * set, which the tests' support code does and nothing else. In use, an
 * event on a loop's hot path then writes nothing that the loops of other
 * threads share (a counter's cache line bounced between their CPUs at
 * each event); reading a flag that is never written costs no such move. */
RL__HIDDEN extern _Atomic bool rl__counting;
static inline void rl__test_count(_Atomic unsigned long *counter) {
    if (RL__UNLIKELY(atomic_load_explicit(&rl__counting, memory_order_relaxed)))
        atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

#endif
