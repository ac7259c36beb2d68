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
 * "epoll" (forced), "io_uring" (forced: no fallback), unset, empty or
 * "auto": the default, epoll with `*lazy` where this process may have
 * io_uring: the loop moves to io_uring (rl__poll_upgrade) when its
 * sockets would first use the ring (a Data callout's read, an
 * RLSocketSendData from a callout). NULL: a wrong value (error set).
 *
 * Why epoll first, and not a ring for every loop: a loop's thread on a
 * ring costs more memory (bench_memory, a sleeping loop thread with one
 * timer: 20.4 KB against 11.2 KB on epoll, CF 11.7, libuv 19.7; the ring's
 * queues are most of it) and a wake-up more user-space work (2,010
 * instructions against 1,695 in callgrind, the same one system call),
 * which timers, perform requests, ports, pipes and signals gain nothing
 * from. What the ring saves is a socket's: a Data socket's reads go
 * through one multishot receive that stays across callouts and its
 * replies are sent by the next enter, one system call per echo round
 * trip against epoll's three (bench-echo-instr), and its bulk rows'
 * CPU per MB is lower (bench_echo's tp rows, ours-ur against ours). */
static const rl__poll_ops *poll_choose(const char *fn, bool *forced, bool *lazy) {
    const char *want = getenv("RL_BACKEND");
    *forced = *lazy = false;
    if (!want || !*want || strcmp(want, "auto") == 0) {
#if RL_TRICK_URING
        *lazy = rl__poll_uring_usable() != 0;
#endif
        return &rl__poll_epoll_ops;
    }
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
    bool forced, lazy;
    const rl__poll_ops *ops = poll_choose(fn, &forced, &lazy);
    if (!ops)
        return false;
    rl->lazy = lazy;
    rl->want_ring = false;
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

int rl__poll_upgrade(rl__poller *rl) {
    bool lazy = rl->lazy;
    rl->lazy = rl->want_ring = false;
#if RL_TRICK_URING
    if (!lazy || rl->kops != &rl__poll_epoll_ops || !rl__poll_uring_usable())
        return ENOSYS;
    rl__poller ring = *rl;
    ring.epfd = -1;
    ring.kstate = NULL;
    ring.kops = &rl__poll_uring_ops;
    int err = ring.kops->open(&ring);
    if (err) {
        ring.kops->close(&ring);
        return err;
    }
    /* The eventfd and timerfd stay; the epoll set goes. A wake-up written
     * before is also in the loop's wake_pending, which its wait looks at. */
    rl->kops->close(rl);
    rl->epfd = ring.epfd;
    rl->kstate = ring.kstate;
    __atomic_store_n(&rl->kops, ring.kops, __ATOMIC_RELEASE);
    return 0;
#else
    (void)lazy;
    return ENOSYS;
#endif
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
