/*
 * bench_echo_epoll.c — the echo benchmark's floor: the same server as
 * bench_echo_cf.c written by hand on raw epoll, edge-triggered, as a
 * server with no run loop at all would be. Each connection is registered
 * once (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) and never changed: a
 * report for reading reads until EAGAIN (or while the buffer of unsent
 * bytes stays under BEC_HIGH_WATER), sending back each chunk at once; a
 * report for writing sends what waits. An eventfd in the set stops it.
 * What RLSocket's two callback styles cost above this is the run loop's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_echo.h"

typedef struct be_conn {
    int fd;
    bec_buf out;
    bool ended; /* the client finished: closed once everything went out */
    struct be_conn *prev, *next;
} be_conn;

typedef struct be_server {
    pthread_t thread;
    int ep, lfd, stopfd;
    be_conn *conns;
    unsigned port;
} be_server;

static void be_close(be_server *sv, be_conn *c) {
    if (c->prev) c->prev->next = c->next;
    else sv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    close(c->fd); /* leaves the epoll set with it */
    free(c->out.bytes);
    free(c);
}

/* Sends what waits; false: the connection is broken. */
static bool be_flush(be_conn *c) {
    while (c->out.len > 0) {
        ssize_t r = send(c->fd, c->out.bytes + c->out.start, c->out.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r > 0) {
            bec_buf_consume(&c->out, (size_t)r);
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}

/* Reads until EAGAIN (or the high-water mark), echoing each chunk; false:
 * close the connection now. */
static bool be_read(be_conn *c) {
    static __thread unsigned char buf[65536];
    while (!c->ended && c->out.len < BEC_HIGH_WATER) {
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
        if (n == 0) {
            c->ended = true;
            break;
        }
        size_t sent = 0;
        if (c->out.len == 0) {
            ssize_t r = send(c->fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
            sent = r > 0 ? (size_t)r : 0;
        }
        if (sent < (size_t)n && !bec_buf_append(&c->out, buf + sent, (size_t)n - sent)) return false;
        if ((size_t)n < sizeof buf) return true; /* a short read: the queue is empty (edge: reported again when not) */
    }
    return true;
}

static void be_accept(be_server *sv) {
    for (;;) {
        int fd = accept4(sv->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        be_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
        if (epoll_ctl(sv->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = sv->conns;
        if (c->next) c->next->prev = c;
        sv->conns = c;
    }
}

static void *be_main(void *arg) {
    be_server *sv = arg;
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(sv->ep, evs, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &sv->stopfd) goto out;
            if (p == &sv->lfd) {
                be_accept(sv);
                continue;
            }
            be_conn *c = p;
            uint32_t e = evs[i].events;
            bool ok = true;
            if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) ok = be_flush(c);
            if (ok && (e & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) ok = be_read(c);
            /* Under the high-water mark again: what the reads left queued. */
            if (ok && c->out.len < BEC_HIGH_WATER && !c->ended && (e & EPOLLOUT)) ok = be_read(c);
            if (!ok || (c->ended && c->out.len == 0)) be_close(sv, c);
        }
    }
out:
    while (sv->conns) be_close(sv, sv->conns);
    return NULL;
}

static void *be_start(unsigned *port, char *note) {
    be_server *sv = calloc(1, sizeof *sv);
    if (!sv) return NULL;
    sv->ep = epoll_create1(EPOLL_CLOEXEC);
    sv->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    sv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    struct epoll_event ls = {.events = EPOLLIN, .data.ptr = &sv->lfd};
    struct epoll_event st = {.events = EPOLLIN, .data.ptr = &sv->stopfd};
    if (sv->ep < 0 || sv->stopfd < 0 || sv->lfd < 0 || bind(sv->lfd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
        listen(sv->lfd, 256) != 0 || getsockname(sv->lfd, (struct sockaddr *)&sin, &len) != 0 ||
        epoll_ctl(sv->ep, EPOLL_CTL_ADD, sv->lfd, &ls) != 0 || epoll_ctl(sv->ep, EPOLL_CTL_ADD, sv->stopfd, &st) != 0 ||
        pthread_create(&sv->thread, NULL, be_main, sv) != 0) {
        snprintf(note, 120, "epoll: cannot start: %s", strerror(errno));
        if (sv->ep >= 0) close(sv->ep);
        if (sv->stopfd >= 0) close(sv->stopfd);
        if (sv->lfd >= 0) close(sv->lfd);
        free(sv);
        return NULL;
    }
    *port = ntohs(sin.sin_port);
    return sv;
}

static void be_stop(void *p) {
    be_server *sv = p;
    uint64_t one = 1;
    if (write(sv->stopfd, &one, sizeof one) != sizeof one) abort();
    pthread_join(sv->thread, NULL);
    close(sv->lfd);
    close(sv->stopfd);
    close(sv->ep);
    free(sv);
}

const bec_peer bec_peer_epoll = {"epoll", be_start, be_stop, "none"};
