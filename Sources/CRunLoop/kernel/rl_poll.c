/*
 * rl_poll.c — what both kernel backends share (rl_poll.h): the choice of a
 * loop's backend, its eventfd and timerfd, arming the timerfd, draining
 * the eventfd, and closing them; and the signal sources' signalfds, made
 * and drained here. The backends themselves are
 * rl_poll_epoll.c and rl_poll_uring.c. The bottom of the loop core: it
 * reads the loop's fields and calls nothing of the core.
 */
#include "rl_poll.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

/* The backend a new loop gets. RL_BACKEND (read as each loop is made):
 * "epoll", "io_uring" (forced: no fallback), "auto": io_uring where the
 * kernel allows it, else epoll; unset or empty: epoll. NULL: a wrong value
 * (error set).
 *
 * Why not io_uring by default: with fd sources as polls, a wake-up costs
 * more user-space work on io_uring (2,010 user-space instructions against
 * epoll's 1,695 in callgrind, the same one system call). A Data socket
 * reads through the ring (rl__poll_recv_into: one multishot receive that
 * stays across callouts) and its RLSocketSendData replies are queued for
 * the ring (rl__poll_send: sent by the next enter, silently when whole),
 * one system call per echo round trip against epoll's three, but about
 * 2,800 user-space instructions against epoll's 1,850 (single steps:
 * bench-echo-instr; 2026-12-05, the sends through the ring not yet in a
 * timed same-run comparison) and no gain in bench-echo's CPU rows yet (2026-12-05,
 * with the multishot receive: 0.94-1.03x raw epoll's per round trip,
 * 0.99-1.09x per MB at 256 connections, 1.07-1.25x at 16); the default
 * changes only on a same-run win. */
static const rl__poll_ops *poll_choose(const char *fn, bool *forced) {
    const char *want = getenv("RL_BACKEND");
    *forced = false;
    if (!want || !*want)
        return &rl__poll_epoll_ops;
    if (strcmp(want, "auto") == 0)
#if RL_TRICK_URING
        return rl__poll_uring_usable() ? &rl__poll_uring_ops : &rl__poll_epoll_ops;
#else
        return &rl__poll_epoll_ops;
#endif
    if (strcmp(want, "epoll") == 0)
        return &rl__poll_epoll_ops;
    if (strcmp(want, "io_uring") == 0) {
#if RL_TRICK_URING
        *forced = true;
        return &rl__poll_uring_ops;
#else
        rl__fail(kRLErrorInvalidState, fn, "RL_BACKEND=io_uring: this build has the epoll backend only (PLAIN=1)");
        return NULL;
#endif
    }
    rl__fail(kRLErrorInvalidArgument, fn, "RL_BACKEND=%.40s names no kernel backend: use epoll, io_uring or auto",
             want);
    return NULL;
}

bool rl__poll_open(rl__poller *rl, const char *fn) {
    bool forced;
    const rl__poll_ops *ops = poll_choose(fn, &forced);
    if (!ops)
        return false;
    rl->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (rl->evfd < 0)
        return rl__fail_errno(errno, fn, "cannot create the run loop's eventfd");
    rl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (rl->tfd < 0)
        return rl__fail_errno(errno, fn, "cannot create the run loop's timerfd");
    rl->kops = ops;
    int err = ops->open(rl);
#if RL_TRICK_URING
    if (err && ops == &rl__poll_uring_ops && !forced) {
        /* Refused here (a seccomp filter, the sysctl, no memory): epoll. */
        ops->close(rl);
        rl->epfd = -1;
        rl->kops = ops = &rl__poll_epoll_ops;
        err = ops->open(rl);
    }
#endif
    if (err) {
        if (forced)
            return rl__fail_errno(err, fn, "RL_BACKEND=io_uring: the kernel refuses io_uring here");
        return rl__fail_errno(err, fn, "cannot create the run loop's descriptors");
    }
    return true;
}

static void poll_close_fd(int fd) {
    if (fd >= 0)
        (void)close(fd); /* nothing to do on failure: the number is gone either way */
}

void rl__poll_close(rl__poller *rl) {
    if (rl->kops)
        rl->kops->close(rl);
    poll_close_fd(rl->evfd);
    poll_close_fd(rl->tfd);
}

int rl__poll_arm_timer(rl__poller *rl, double at) {
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (isfinite(at)) {
        its.it_value = rl__timespec_from_seconds(at);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1; /* zero would disarm */
    }
    if (rl__fault(RL_FAULT_TIMERFD))
        return EINVAL;
    return timerfd_settime(rl->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0 ? 0 : errno;
}

void rl__poll_drain(rl__poller *rl) {
    uint64_t v;
    ssize_t r;
    do {
        r = read(rl->evfd, &v, sizeof v);
    } while (r < 0 && errno == EINTR);
}

int rl__poll_signalfd_open(int signum) {
    sigset_t one;
    sigemptyset(&one);
    if (sigaddset(&one, signum) < 0)
        return -1; /* EINVAL */
    return signalfd(-1, &one, SFD_NONBLOCK | SFD_CLOEXEC);
}

long rl__poll_signalfd_drain(int sfd) {
    struct signalfd_siginfo buf[64];
    long n = 0;
    for (;;) {
        ssize_t r = read(sfd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return n; /* EAGAIN: drained */
        n += (long)((size_t)r / sizeof buf[0]);
    }
}
