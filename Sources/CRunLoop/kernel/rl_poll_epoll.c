/*
 * rl_poll_epoll.c — the epoll backend of the kernel seam (rl_poll.h): a
 * loop's fds are watched in one epoll set (rl->epfd), registrations are
 * epoll_ctl, the wait is epoll_wait. Every loop of the default backend
 * starts here (and moves to io_uring once its sockets ask for the ring:
 * rl__poll_upgrade); used throughout where io_uring is not: RL_BACKEND=
 * epoll, a PLAIN build, a kernel that refuses io_uring.
 */
#include "rl_poll_backend.h"

#include <errno.h>
#include <unistd.h>

#include <fcntl.h>

/* The loop's own eventfd and timerfd sit in its set edge-triggered with
 * tag 0: each write or expiry is one event, never read back. */
static int epoll_watch_own(int ep, int fd) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = rl__ev_data(fd, 0)};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : errno;
}

static int epoll_open(rl__poller *rl) {
    rl->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (rl->epfd < 0)
        return errno;
    int err = epoll_watch_own(rl->epfd, rl->evfd);
    return err ? err : epoll_watch_own(rl->epfd, rl->tfd);
}

static void epoll_close(rl__poller *rl) {
    if (rl->epfd >= 0)
        (void)close(rl->epfd); /* nothing to do on failure: the number is gone either way */
}

static int epoll_renew(rl__poller *rl) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return errno;
    int err = epoll_watch_own(ep, rl->evfd);
    if (!err)
        err = epoll_watch_own(ep, rl->tfd);
    if (!err && dup3(ep, rl->epfd, O_CLOEXEC) < 0)
        err = errno;
    (void)close(ep);
    return err;
}

static int epoll_ctl_fd(rl__poller *rl, int op, int fd, uint32_t events, uint32_t gen) {
    struct epoll_event ev = {.events = events, .data.u64 = rl__ev_data(fd, gen)};
    return epoll_ctl(rl->epfd, op, fd, &ev) == 0 ? 0 : errno;
}

static int epoll_wait_fd(rl__poller *rl, struct epoll_event *ev, int maxev, int timeout_ms) {
    return epoll_wait(rl->epfd, ev, maxev, timeout_ms);
}

const rl__poll_ops rl__poll_epoll_ops = {
    .name = "epoll",
    .wait_call = "epoll_wait",
    .open = epoll_open,
    .close = epoll_close,
    .renew = epoll_renew,
    .ctl = epoll_ctl_fd,
    .wait = epoll_wait_fd,
};
