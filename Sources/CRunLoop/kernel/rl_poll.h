/*
 * rl_poll.h — private: the one seam between a run loop and the kernel
 * (rl_poll.c). A loop's kernel objects — the set its fds are watched in,
 * the eventfd that wakes it, the timerfd it sleeps on — are made, changed,
 * waited on and closed only through these calls; nothing else in the
 * loop's files calls epoll_*, io_uring_*, eventfd* or timerfd_* or sleeps
 * on a futex for the loop. Every call reports the kernel's failure (an
 * errno, never taken as success) to its caller; none of them sets the
 * thread's RLError but rl__poll_open: the room that knows what the failure
 * means does. The signal sources' signalfds are made and read here too.
 * The bottom of the loop core: it calls nothing of it.
 *
 * Two backends sit under the seam, one file each, both speaking epoll's
 * vocabulary (EPOLL_CTL_* ops, EPOLLIN/OUT/ONESHOT/ET events, epoll_event
 * records tagged with rl__ev_data): rl_poll_epoll.c (an epoll set) and
 * rl_poll_uring.c (an io_uring: polls for the registrations, one
 * io_uring_enter that submits and waits). A loop gets one when it is made
 * (rl__poll_open: the one RL_BACKEND forces, else epoll); a loop on the
 * default backend moves to io_uring, once, where the kernel allows it,
 * when its sockets would first use the ring (rl__poll_upgrade), and keeps
 * it; the wake-up (eventfd write), the coalescing sleep (futex) and the
 * timerfd are the same on both. A new backend is one rl__poll_ops in one
 * file, named in rl_poll.c's choice.
 */
#ifndef CRUNLOOP_RL_POLL_H
#define CRUNLOOP_RL_POLL_H

#include "rl_poll_backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <errno.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Makes rl's eventfd, timerfd and set (on the backend RL_BACKEND names,
 * else epoll, `lazy` where the kernel may allow io_uring), all fds -1
 * before. true, or false with the
 * thread's RLError set for `fn` (what was made is closed by
 * rl__poll_close): the kernel refused (kRLErrorSystem), RL_BACKEND holds
 * no backend's name (kRLErrorInvalidArgument) or names one this process
 * cannot have (RL_BACKEND=io_uring: kRLErrorSystem with the kernel's
 * errno, or kRLErrorInvalidState in a PLAIN build). A fork() child's new
 * loop is made this way too: it never shares its parent's objects. */
RL__HIDDEN bool rl__poll_open(rl__poller *rl, const char *fn);
/* Closes what rl__poll_open made (those made; -1 are skipped). In a fork()
 * child, of an inherited loop, only the child's copies of the fds. */
RL__HIDDEN void rl__poll_close(rl__poller *rl);
/* Moves rl to a new set under the same fd number, holding its eventfd and
 * timerfd only (the caller adds its fds again). 0, or the errno: the old
 * set is then kept. Loop lock held, rl's thread. */
static inline int rl__poll_renew(rl__poller *rl) { return rl->kops->renew(rl); }
/* Moves a loop on the default backend (rl->lazy) from its epoll set to a
 * new io_uring holding its eventfd and timerfd only (the caller adds its
 * fds again, as after rl__poll_renew); the epoll set is closed. 0, or the
 * errno: the kernel refused (remembered for the process), or no memory;
 * the loop stays on its epoll set, unchanged. Either way it is not tried
 * again for this loop (lazy and want_ring cleared). Loop lock held, rl's
 * thread, before its wait. */
RL__HIDDEN int rl__poll_upgrade(rl__poller *rl);
/* Whether a loop on the default backend asked for the ring and may have it:
 * it moves before it waits again (rl__poll_upgrade). */
static inline bool rl__poll_wants_upgrade(const rl__poller *rl) { return rl->want_ring; }
/* epoll_ctl's contract on rl's set: `op` for fd, watching `events`, tagged
 * `gen` (rl__ev_data). 0, or the errno epoll_ctl would give. Loop lock.
 * The io_uring backend keeps EPOLLONESHOT, EPOLLET and the low 14 event
 * bits (every one a loop asks for) and refuses EPOLLWAKEUP and
 * EPOLLEXCLUSIVE (EINVAL, nothing changed; test_poll_seam). */
static inline int rl__poll_ctl(rl__poller *rl, int op, int fd, uint32_t events, uint32_t gen) {
    return rl->kops->ctl(rl, op, fd, events, gen);
}
/* Arms rl's timerfd for monotonic time `at` (INFINITY disarms). 0, or the
 * errno (the timerfd may still hold its old time). */
RL__HIDDEN int rl__poll_arm_timer(rl__poller *rl, double at);
/* Reads the eventfd until it is empty (its counter full: 2^64 - 2 writes). */
RL__HIDDEN void rl__poll_drain(rl__poller *rl);
/* Reads fd's stream through rl's ring (rl_rxq.h) from the next time fd
 * is armed for reading alone (no write side asked with it), in chunks of
 * `want` bytes at most (the reader's): the arming is then a multishot
 * receive into the loop's provided buffers instead of a poll, and its
 * report (EPOLLIN; EPOLLRDHUP at the end, EPOLLERR on an error) comes with
 * the bytes already queued under fd in the ring's read-ahead queues; while
 * fd has chunks there, an arming for reading reports at once, as epoll
 * would of a readable fd. Those queues (a reference, the caller's), or
 * NULL: the backend cannot (epoll; io_uring without provided buffers), and
 * the caller reads the fd itself. Stays while fd names the same file. The
 * loop's thread, in a callout of fd (fd registered). */
static inline rl__rxq *rl__poll_recv_into(rl__poller *rl, int fd, size_t want) {
    if (rl->kops->recv_into)
        return rl->kops->recv_into(rl, fd, want);
    rl->want_ring |= rl->lazy; /* the default backend's loop moves to the ring before it waits */
    return NULL;
}
/* For a stream read through rl's ring (rl__poll_recv_into): `self`, its
 * reader reads fd itself for now, the ring only polls it (a stream in
 * bulk, which one read of the reader's chunk moves with no copy, where the
 * ring's receives would copy each buffer out and the reader join them);
 * else the ring reads it again, from its next arming. What the ring read
 * before stays queued, taken first as ever. The loop's thread, in a
 * callout of fd; nothing for a backend that does not read (epoll). */
static inline void rl__poll_recv_self(rl__poller *rl, int fd, bool self) {
    if (rl->kops->recv_self)
        rl->kops->recv_self(rl, fd, self);
}
/* Whether rl's backend sends through a ring (rl__poll_send would queue).
 * No: a loop on the default backend asks for the ring, as
 * rl__poll_recv_into does. The loop's thread. */
static inline bool rl__poll_sends(rl__poller *rl) {
    if (rl->kops->send)
        return true;
    rl->want_ring |= rl->lazy;
    return false;
}
/* Whether rl may still move to a ring (rl__poll_upgrade): a refusal of
 * rl__poll_recv_into or rl__poll_sends now is not for good. */
static inline bool rl__poll_may_upgrade(const rl__poller *rl) { return rl->lazy; }
/* Queues a copy of n bytes in q for rl's ring to send (rl_txq.h): q's
 * chunks go out in order, one send in flight, submitted with the loop's
 * next enter (`soon`: the loop is in a run, which enters again or flushes
 * as it ends), else at once; either way, by the time the run (or this
 * call, outside a run) returns, they are in the kernel, unless `timeout`
 * (seconds; 0 or less: none) passed first. 1: queued; 0: the backend
 * cannot (epoll; q sent by another loop's ring), the caller sends itself;
 * -errno: nothing queued, an earlier send through the ring failed with
 * that errno (told once), or no memory. The loop's thread. */
static inline int rl__poll_send(rl__poller *rl, rl__txq *q, const void *bytes, size_t n, bool soon,
                                double timeout) {
    return rl->kops->send ? rl->kops->send(rl, q, bytes, n, soon, timeout) : 0;
}
/* Submits the sends queued on rl's ring now and sees them through (a
 * run's end: rl__poll_send's timeout). The loop's thread. */
static inline void rl__poll_flush(rl__poller *rl) {
    if (rl->kops && rl->kops->flush)
        rl->kops->flush(rl);
}
/* The backend rl waits on now: "epoll" or "io_uring" (static strings); any
 * thread, no lock (a default backend's loop changes it once, on its own
 * thread: rl__poll_upgrade). */
static inline const char *rl__poll_backend_name(const rl__poller *rl) {
    const rl__poll_ops *ops = __atomic_load_n(&rl->kops, __ATOMIC_ACQUIRE);
    return ops ? ops->name : NULL;
}

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
static inline void rl__poll_wake(rl__poller *rl) {
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
static inline void rl__poll_nap(rl__poller *rl, long long ns) {
    struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    (void)syscall(SYS_futex, (int *)rl->nap_word, FUTEX_WAIT_PRIVATE, 0, &t, NULL, 0);
}

/* Ends rl's rl__poll_nap. */
static inline void rl__poll_unnap(rl__poller *rl) {
    (void)syscall(SYS_futex, (int *)rl->nap_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Waits on rl's set for `timeout_ms` (-1: no limit, 0: a look). The number
 * of events in ev (epoll_event records, as epoll_wait fills them), or -1
 * with errno set when the kernel refused the wait for good (an interrupted
 * one is retried). Rl's thread, no lock held. */
static inline int rl__poll_wait(rl__poller *rl, struct epoll_event *ev, int maxev, int timeout_ms) {
    int n;
    do {
        n = rl__fault(RL_FAULT_EPOLL_WAIT) ? (errno = EBADF, -1) : rl->kops->wait(rl, ev, maxev, timeout_ms);
    } while (n < 0 && errno == EINTR);
    return n;
}

/* The system call a refused rl__poll_wait names ("epoll_wait"...). */
static inline const char *rl__poll_wait_call(rl__poller *rl) { return rl->kops->wait_call; }

#endif /* CRUNLOOP_RL_POLL_H */
