/*
 * rl_poll.h — private: the one seam between a run loop and the kernel
 * (rl_poll.c). A loop's kernel objects — its epoll set, the eventfd that
 * wakes it, the timerfd it sleeps on — are made, changed, waited on and
 * closed only through these calls; nothing else in the loop's files calls
 * epoll_*, eventfd* or timerfd_* or sleeps on a futex for the loop. The
 * signal sources' signalfds are made and read here too. What
 * every wait or wake-up calls is inline here, so the seam costs nothing on
 * the hot path. Every call reports the kernel's failure (an errno, never
 * taken as success) to its caller; none of them sets the thread's RLError:
 * the room that knows what the failure means does. The bottom of the loop
 * core: it calls nothing of it.
 */
#ifndef CRUNLOOP_RL_POLL_H
#define CRUNLOOP_RL_POLL_H

#include "runloop_internal.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Makes rl's epoll set, eventfd and timerfd, the last two in the set
 * (edge-triggered, tag 0). 0, or the errno of the call that failed (what
 * was made is closed by rl__poll_close). A fork() child's new loop is
 * made this way too: it never shares its parent's objects. */
RL__HIDDEN int rl__poll_open(RLRunLoopRef rl);
/* Closes what rl__poll_open made (those made; -1 are skipped). */
RL__HIDDEN void rl__poll_close(RLRunLoopRef rl);
/* Moves rl to a new epoll set under the same fd number, holding its
 * eventfd and timerfd only (the caller adds its fds again). 0, or the
 * errno: the old set is then kept. Loop lock held, rl's thread. */
RL__HIDDEN int rl__poll_renew(RLRunLoopRef rl);
/* epoll_ctl on rl's set: `op` for fd, watching `events`, tagged `gen`
 * (rl__ev_data). 0, or the errno. */
RL__HIDDEN int rl__poll_ctl(RLRunLoopRef rl, int op, int fd, uint32_t events, uint32_t gen);
/* Arms rl's timerfd for monotonic time `at` (INFINITY disarms). 0, or the
 * errno (the timerfd may still hold its old time). */
RL__HIDDEN int rl__poll_arm_timer(RLRunLoopRef rl, double at);
/* Reads the eventfd until it is empty (its counter full: 2^64 - 2 writes). */
RL__HIDDEN void rl__poll_drain(RLRunLoopRef rl);

/* ---- signal sources' signalfds (RLSignalSource.c) ----
 * Not a loop's: an fd source watches each one like any other fd. */
/* A signalfd for `signum` alone, non-blocking and close-on-exec (the
 * caller blocks the signal). The fd, or -1 with errno set. */
RL__HIDDEN int rl__poll_signalfd_open(int signum);
/* Dequeues every signal the signalfd `sfd` shows the calling thread (its
 * own and the process's); how many. Stops at EAGAIN or any other error
 * (the signals left, if any, are read by the next call). */
RL__HIDDEN long rl__poll_signalfd_drain(int sfd);

/* Wakes rl's thread out of rl__poll_wait: one eventfd write (edge-
 * triggered in the set: the loop never reads it back). A full counter
 * (EAGAIN) is drained and written again; EINTR is retried. Any other
 * failure cannot be: the fd is rl's own and open while rl lives. */
static inline void rl__poll_wake(RLRunLoopRef rl) {
    uint64_t one = 1;
    ssize_t r;
    do {
        r = write(rl->evfd, &one, sizeof one);
        if (r < 0 && errno == EAGAIN) {
            rl__poll_drain(rl);
            errno = EINTR; /* and again */
        }
    } while (r < 0 && errno == EINTR);
}

/* The coalescing sleep: waits while rl's `wake_pending` holds 0, for `ns`
 * nanoseconds at most (a futex on that word); rl__poll_unnap ends it. The
 * kernel compares as it puts the thread to sleep, so a wake-up stored
 * before is never missed. Ending early (a signal) is harmless: the caller
 * looks again. */
static inline void rl__poll_nap(RLRunLoopRef rl, long long ns) {
    struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    (void)syscall(SYS_futex, (int *)&rl->wake_pending, FUTEX_WAIT_PRIVATE, 0, &t, NULL, 0);
}

/* Ends rl's rl__poll_nap. */
static inline void rl__poll_unnap(RLRunLoopRef rl) {
    (void)syscall(SYS_futex, (int *)&rl->wake_pending, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Waits on rl's epoll set for `timeout_ms` (-1: no limit, 0: a look).
 * The number of events in ev, or -1 with errno set when the kernel
 * refused the wait for good (an interrupted one is retried). */
static inline int rl__poll_wait(RLRunLoopRef rl, struct epoll_event *ev, int maxev, int timeout_ms) {
    int n;
    do {
        n = rl__fault(RL_FAULT_EPOLL_WAIT) ? (errno = EBADF, -1) : epoll_wait(rl->epfd, ev, maxev, timeout_ms);
    } while (n < 0 && errno == EINTR);
    return n;
}

#endif /* CRUNLOOP_RL_POLL_H */
