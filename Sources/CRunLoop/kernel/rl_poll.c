/*
 * rl_poll.c — a run loop's kernel objects (rl_poll.h): making its epoll
 * set, eventfd and timerfd, moving it to a new set, registrations in the
 * set, arming the timerfd, and closing them; and the signal sources'
 * signalfds, made and drained here. The wake-up, the coalescing
 * sleep and the wait are inline in rl_poll.h. The bottom of the loop core:
 * it reads the loop's fields and calls nothing of the core.
 */
#include "rl_poll.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

/* The loop's own eventfd and timerfd sit in its set edge-triggered with
 * tag 0: each write or expiry is one event, never read back. */
static int rl_poll_watch_own(int ep, int fd) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = rl__ev_data(fd, 0)};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : errno;
}

int rl__poll_open(RLRunLoopRef rl) {
    rl->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (rl->epfd < 0)
        return errno;
    rl->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (rl->evfd < 0)
        return errno;
    rl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (rl->tfd < 0)
        return errno;
    int err = rl_poll_watch_own(rl->epfd, rl->evfd);
    return err ? err : rl_poll_watch_own(rl->epfd, rl->tfd);
}

static void rl_poll_close_fd(int fd) {
    if (fd >= 0)
        (void)close(fd); /* nothing to do on failure: the number is gone either way */
}

void rl__poll_close(RLRunLoopRef rl) {
    rl_poll_close_fd(rl->epfd);
    rl_poll_close_fd(rl->evfd);
    rl_poll_close_fd(rl->tfd);
}

int rl__poll_renew(RLRunLoopRef rl) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return errno;
    int err = rl_poll_watch_own(ep, rl->evfd);
    if (!err)
        err = rl_poll_watch_own(ep, rl->tfd);
    if (!err && dup3(ep, rl->epfd, O_CLOEXEC) < 0)
        err = errno;
    (void)close(ep);
    return err;
}

int rl__poll_ctl(RLRunLoopRef rl, int op, int fd, uint32_t events, uint32_t gen) {
    struct epoll_event ev = {.events = events, .data.u64 = rl__ev_data(fd, gen)};
    return epoll_ctl(rl->epfd, op, fd, &ev) == 0 ? 0 : errno;
}

int rl__poll_arm_timer(RLRunLoopRef rl, double at) {
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

void rl__poll_drain(RLRunLoopRef rl) {
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
