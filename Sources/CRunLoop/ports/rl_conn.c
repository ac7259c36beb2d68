/* rl_conn.c — serving framed connections, and senders' deadline helpers
 * (rl_conn.h). */
#include "rl_conn.h"

#include <crunloop/RLRunLoopSource.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

enum { RL_CONN_EVENTS = 32, RL_CONN_BATCH = 16 };
/* A client that begins a frame has this long to finish it (seconds). */
#define RL_CONN_STALL_DEFAULT 10.0
/* The epoll set's data for the stall timer (the listener's is NULL). */
#define RL_CONN_TIMER_TAG ((void *)1)

/* ---- senders ---- */

double rl__deadline_after(double t) { return RLMonotonicTimeGetCurrent() + (isfinite(t) && t > 0 ? t : 0); }

int rl__ms_left(double deadline) {
    double left = deadline - RLMonotonicTimeGetCurrent();
    if (left <= 0)
        return 0;
    return left > 1e6 ? 1000000000 : (int)ceil(left * 1000);
}

int rl__lock_until(pthread_mutex_t *mu, double deadline) {
    double wait = deadline - RLMonotonicTimeGetCurrent();
    if (!(wait > 0))
        return pthread_mutex_trylock(mu) ? ETIMEDOUT : 0;
    if (wait > 1e6)
        wait = 1e6;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)wait;
    ts.tv_nsec += (long)((wait - floor(wait)) * 1e9);
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return pthread_mutex_timedlock(mu, &ts) ? ETIMEDOUT : 0;
}

int rl__write_all(int fd, const uint8_t *buf, size_t len, double deadline, size_t *sent) {
    size_t off = 0;
    int err = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN) {
            err = errno;
            break;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int r = poll(&p, 1, rl__ms_left(deadline));
        if (r == 0) {
            err = ETIMEDOUT;
            break;
        }
        if (r < 0 && errno != EINTR) {
            err = errno;
            break;
        }
    }
    *sent = off;
    return err;
}

bool rl__read_pending(const rl_wire_reader *rd) { return rd->ahead_off < rd->ahead_len; }

bool rl__read_drained(const rl_wire_reader *rd) { return !rl__read_pending(rd) && rd->ahead_short; }

int rl__read_frame(int fd, rl_wire_reader *rd, rl_wire_frame *f, const char **why) {
    for (;;) {
        uint8_t *at;
        size_t want;
        rl__wire_want(rd, &at, &want);
        ssize_t n;
        if (rl__read_pending(rd)) { /* bytes read ahead first, in order */
            size_t have = rd->ahead_len - rd->ahead_off;
            n = (ssize_t)(want < have ? want : have);
            memcpy(at, rd->ahead + rd->ahead_off, (size_t)n);
            rd->ahead_off += (uint32_t)n;
        } else if (want < RL_WIRE_AHEAD) {
            /* A header or a small body: read what the stream has, up to a
             * buffer, and hand it over from there. */
            n = recv(fd, rd->ahead, RL_WIRE_AHEAD, MSG_DONTWAIT);
            if (n > 0) {
                rd->ahead_off = 0;
                rd->ahead_len = (uint32_t)n;
                rd->ahead_short = n < RL_WIRE_AHEAD;
                continue;
            }
        } else {
            n = recv(fd, at, want, MSG_DONTWAIT); /* a large body: straight into place */
            rd->ahead_short = false;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            *why = n == 0 ? (rl__wire_idle(rd) ? "peer closed the connection" : "peer closed mid-frame")
                          : strerror(errno);
            return -1;
        }
        bool done;
        rl_wire_error e = rl__wire_got(rd, (size_t)n, &done);
        if (e) {
            *why = rl__wire_error_text(e);
            return -1;
        }
        if (done) {
            rl__wire_take(rd, f);
            return 1;
        }
    }
}

/* ---- the server ---- */

static void conn_free(rl_conn *c) {
    if (c->fd >= 0)
        close(c->fd);
    rl__wire_reader_free(&c->rd);
    free(c->out);
    free(c);
}


int rl__server_init(rl_server *s, int lfd, uint32_t limit, const rl_server_ops *ops, void *owner) {
    memset(s, 0, sizeof *s);
    s->made_by = getpid();
    pthread_mutex_init(&s->mu, NULL);
    s->lfd = lfd;
    s->limit = limit;
    s->stall = RL_CONN_STALL_DEFAULT;
    s->ops = ops;
    s->owner = owner;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int err = 0;
    if (s->epfd < 0 || s->tfd < 0)
        err = errno;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = NULL};
    if (!err && epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) < 0)
        err = errno;
    struct epoll_event tev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = RL_CONN_TIMER_TAG};
    if (!err && epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->tfd, &tev) < 0)
        err = errno;
    if (err) {
        rl__server_close(s);
        rl__server_destroy(s);
        return err;
    }
    s->valid = true;
    return 0;
}

int rl__server_fd(const rl_server *s) { return s->epfd; }

rl_conn *rl__server_add_listener(rl_server *s, int lfd) {
    rl_conn *l = calloc(1, sizeof *l);
    if (!l) {
        close(lfd);
        errno = ENOMEM;
        return NULL;
    }
    l->fd = lfd;
    l->listening = true;
    pthread_mutex_lock(&s->mu);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = l};
    int err = !s->valid ? EBADF : epoll_ctl(s->epfd, EPOLL_CTL_ADD, lfd, &ev) < 0 ? errno : 0;
    if (!err) {
        l->next = s->listeners;
        s->listeners = l;
    }
    pthread_mutex_unlock(&s->mu);
    if (err) {
        conn_free(l);
        errno = err;
        return NULL;
    }
    return l;
}

/* The main listener keeps its fd number (the loop serving it reads s->lfd
 * unlocked and re-arms it under the lock): dup3 points the number at the
 * new socket and closes the old one, whose epoll registration is removed
 * first; the new one is registered under the same tag (NULL). A loop that
 * is accepting on the number meanwhile accepts from either socket. */
int rl__server_replace_listener(rl_server *s, int lfd) {
    pthread_mutex_lock(&s->mu);
    int err = !s->valid || s->lfd < 0 ? EBADF : 0;
    if (!err && epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL) < 0)
        err = errno;
    if (!err && dup3(lfd, s->lfd, O_CLOEXEC) < 0) {
        err = errno;
        struct epoll_event back = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = NULL};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &back) < 0)
            rl__fail_errno(errno, "rl__server_replace_listener", "re-arming the old listener");
    }
    if (!err) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = NULL};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev) < 0) {
            /* the new socket is in place but unwatched: nobody would be
             * served, so the server stops listening (as a failed accept) */
            err = errno;
            close(s->lfd);
            s->lfd = -1;
        }
    }
    pthread_mutex_unlock(&s->mu);
    close(lfd);
    return err;
}

void rl__server_remove_listener(rl_server *s, rl_conn *l) {
    pthread_mutex_lock(&s->mu);
    bool found = false;
    for (rl_conn **pp = &s->listeners; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            found = true;
            break;
        }
    if (found) {
        (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, l->fd, NULL);
        if (l->busy)
            l->closed = true; /* the loop accepting on it frees it */
        else
            conn_free(l);
    }
    pthread_mutex_unlock(&s->mu);
}

static void note_drop_locked(rl_server *s, rl_conn *c, const char *why) {
    s->dropped++;
    if (c->pid > 0)
        snprintf(s->last_drop, sizeof s->last_drop, "pid %d: %s", (int)c->pid, why);
    else
        snprintf(s->last_drop, sizeof s->last_drop, "%s", why);
}

static void drop_conn_locked(rl_server *s, rl_conn *c, const char *why, bool bad) {
    for (rl_conn **pp = &s->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    if (bad)
        note_drop_locked(s, c, why);
    if (s->epfd >= 0)
        (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    conn_free(c);
}

static void rearm(rl_server *s, int fd, void *ptr, uint32_t events) {
    struct epoll_event ev = {.events = events | EPOLLONESHOT, .data.ptr = ptr};
    if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 && errno != EBADF && errno != ENOENT)
        rl__fail_errno(errno, "rl__server_serve", "re-arming a connection");
}

static void accept_clients(rl_server *s, int lfd) {
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t alen = sizeof addr;
        int fd = accept4(lfd, (struct sockaddr *)&addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* EAGAIN, or out of fds: the listener stays armed and we come back */
        }
        rl_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->addr = addr;
        c->addrlen = alen;
        c->uid = (uid_t)-1;
        c->gid = (gid_t)-1;
        c->pid = -1;
        char why[96] = "refused";
        bool ok = !s->ops->admit || s->ops->admit(s->owner, c, why, sizeof why);
        pthread_mutex_lock(&s->mu);
        if (!ok || !s->valid) {
            if (!ok)
                note_drop_locked(s, c, why);
            pthread_mutex_unlock(&s->mu);
            conn_free(c);
            continue;
        }
        rl__wire_reader_init(&c->rd, s->limit);
        atomic_store_explicit(&c->rd.max_comps, s->max_comps, memory_order_relaxed);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            pthread_mutex_unlock(&s->mu);
            conn_free(c);
            continue;
        }
        c->next = s->conns;
        s->conns = c;
        pthread_mutex_unlock(&s->mu);
    }
}

bool rl__conn_write(rl_conn *c, uint8_t *buf, size_t len) {
    if (c->out) { /* earlier frames still wait: keep the order */
        uint8_t *more = realloc(c->out, c->out_len + len);
        if (!more)
            return false;
        memcpy(more + c->out_len, buf, len);
        c->out = more;
        c->out_len += len;
        return true;
    }
    size_t sent = 0;
    int err = rl__write_all(c->fd, buf, len, 0, &sent);
    if (err && err != ETIMEDOUT)
        return false;
    if (sent < len) {
        c->out = malloc(len - sent);
        if (!c->out)
            return false;
        memcpy(c->out, buf + sent, len - sent);
        c->out_len = len - sent;
        c->out_off = 0;
    }
    return true;
}

static bool flush_out(rl_conn *c) {
    size_t sent = 0;
    int err = rl__write_all(c->fd, c->out + c->out_off, c->out_len - c->out_off, 0, &sent);
    if (err && err != ETIMEDOUT)
        return false;
    c->out_off += sent;
    if (c->out_off == c->out_len) {
        free(c->out);
        c->out = NULL;
        c->out_len = c->out_off = 0;
    }
    return true;
}

static void arm_stall_locked(rl_server *s, double at) {
    double left = at - RLMonotonicTimeGetCurrent();
    if (left < 1e-3)
        left = 1e-3;
    struct itimerspec its = {{0, 0}, {(time_t)left, (long)((left - floor(left)) * 1e9)}};
    if (timerfd_settime(s->tfd, 0, &its, NULL) == 0)
        s->stall_armed = true;
}

/* The stall timer fired: drop every client that began a frame longer ago
 * than the server allows, and set the timer for the next one. */
static void drop_stalled(rl_server *s) {
    uint64_t ticks;
    (void)!read(s->tfd, &ticks, sizeof ticks);
    double now = RLMonotonicTimeGetCurrent(), next = INFINITY;
    pthread_mutex_lock(&s->mu);
    s->stall_armed = false;
    for (rl_conn *c = s->conns, *nx; c; c = nx) {
        nx = c->next;
        if (c->busy || c->frame_since == 0)
            continue;
        if (now - c->frame_since >= s->stall)
            drop_conn_locked(s, c, "stalled mid-frame", true);
        else if (c->frame_since + s->stall < next)
            next = c->frame_since + s->stall;
    }
    if (s->valid) {
        if (isfinite(next))
            arm_stall_locked(s, next);
        rearm(s, s->tfd, RL_CONN_TIMER_TAG, EPOLLIN);
    }
    pthread_mutex_unlock(&s->mu);
}

static void serve_conn(rl_server *s, rl_conn *c, uint32_t events) {
    const char *why = NULL;
    pthread_mutex_lock(&s->mu);
    bool keep = !c->closed, bad = false;
    pthread_mutex_unlock(&s->mu);
    if (c->out && (events & EPOLLOUT))
        keep = flush_out(c);
    /* At most a few frames per wake, so one chatty client cannot starve
     * the loop's other sources; the one-shot re-arm brings us back. Bytes
     * already read ahead are served before leaving, whatever the count
     * (at most RL_WIRE_AHEAD of them): the fd will not say they are there. */
    for (int i = 0; keep && (i < RL_CONN_BATCH || rl__read_pending(&c->rd)) && !c->out; i++) {
        rl_wire_frame f;
        int r = rl__read_frame(c->fd, &c->rd, &f, &why);
        if (r == 0)
            break;
        if (r < 0) {
            keep = false;
            bad = !rl__wire_idle(&c->rd) || strcmp(why, "peer closed the connection") != 0;
            break;
        }
        /* Taken before the dispatch: the frame leaves the reader as it is. */
        bool drained = rl__read_drained(&c->rd);
        if (!s->ops->dispatch(s->owner, c, &f, &why)) {
            keep = false;
            bad = true;
        }
        if (drained)
            break; /* the stream was empty: the re-arm below sees whatever comes next */
    }
    pthread_mutex_lock(&s->mu);
    c->busy = false;
    if (!keep || c->closed || !s->valid) {
        drop_conn_locked(s, c, why ? why : "closed", bad);
    } else {
        if (rl__wire_idle(&c->rd)) {
            c->frame_since = 0;
        } else if (c->frame_since == 0) {
            c->frame_since = RLMonotonicTimeGetCurrent();
            if (!s->stall_armed)
                arm_stall_locked(s, c->frame_since + s->stall);
        }
        /* Replies still queued: no more requests from this client until
         * it reads them. Only writability brings it back (a hang-up is
         * always reported), so a client that sends on and never reads
         * leaves the loop idle instead of waking it for its input. */
        rearm(s, c->fd, c, c->out ? EPOLLOUT : EPOLLIN);
    }
    pthread_mutex_unlock(&s->mu);
}

void rl__server_serve(rl_server *s) {
    struct epoll_event ev[RL_CONN_EVENTS];
    /* Take the batch and claim its connections in one critical section
     * (the wait does not block): a close or a removal from another thread,
     * or by a dispatch, then leaves them to us instead of freeing them
     * under our feet. */
    pthread_mutex_lock(&s->mu);
    int n = epoll_wait(s->epfd, ev, RL_CONN_EVENTS, 0);
    for (int i = 0; i < n; i++)
        if (ev[i].data.ptr && ev[i].data.ptr != RL_CONN_TIMER_TAG)
            ((rl_conn *)ev[i].data.ptr)->busy = true;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) {
        rl_conn *c = ev[i].data.ptr;
        if (c == NULL) {
            accept_clients(s, s->lfd);
            pthread_mutex_lock(&s->mu);
            if (s->valid)
                rearm(s, s->lfd, NULL, EPOLLIN);
            pthread_mutex_unlock(&s->mu);
        } else if (c != RL_CONN_TIMER_TAG && c->listening) {
            accept_clients(s, c->fd);
            pthread_mutex_lock(&s->mu);
            c->busy = false;
            if (c->closed)
                conn_free(c); /* removed while we accepted: already off the list */
            else
                rearm(s, c->fd, c, EPOLLIN);
            pthread_mutex_unlock(&s->mu);
        } else if (ev[i].data.ptr == RL_CONN_TIMER_TAG) {
            drop_stalled(s);
        } else {
            serve_conn(s, ev[i].data.ptr, ev[i].events);
        }
    }
}

void rl__server_close(rl_server *s) {
    pthread_mutex_lock(&s->mu);
    s->valid = false;
    /* The listener goes first: a client that sees its connection close can
     * count on the address being free. Shut down first: a copy of the
     * socket that another process still holds (a child made without
     * fork()'s handlers) then accepts nothing either. Not in a fork()'s
     * child: that would stop its parent's listener. */
    bool ours = s->made_by == getpid();
    if (s->lfd >= 0) {
        if (ours)
            shutdown(s->lfd, SHUT_RDWR);
        close(s->lfd);
    }
    s->lfd = -1;
    for (rl_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->busy) { /* its loop drops it when it is done with it */
            c->closed = true;
            if (ours)
                shutdown(c->fd, SHUT_RDWR);
            continue;
        }
        if (ours)
            (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        conn_free(c);
    }
    s->conns = NULL;
    for (rl_conn *l = s->listeners, *next; l; l = next) {
        next = l->next;
        if (ours && l->fd >= 0)
            shutdown(l->fd, SHUT_RDWR);
        if (l->busy) {
            l->closed = true;
            continue;
        }
        if (ours)
            (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, l->fd, NULL);
        conn_free(l);
    }
    s->listeners = NULL;
    pthread_mutex_unlock(&s->mu);
}

void rl__server_drop_listeners_in_child(rl_server *s) {
    /* A fork()'s child, before anything else runs in it: no other thread,
     * and the lock may be held for good by a thread of the parent. The
     * epoll set is shared with the parent: left alone (a file leaves it
     * when its last descriptor closes, in whichever process). */
    if (s->lfd >= 0)
        close(s->lfd);
    s->lfd = -1;
    for (rl_conn *l = s->listeners; l; l = l->next) {
        if (l->fd >= 0)
            close(l->fd);
        l->fd = -1;
    }
}

void rl__server_destroy(rl_server *s) {
    /* Connections a loop was serving are freed by it; it holds a reference
     * on the port meanwhile, so none is left here. */
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->tfd >= 0)
        close(s->tfd);
    s->epfd = s->tfd = -1;
    pthread_mutex_destroy(&s->mu);
}

void rl__server_set_limit(rl_server *s, uint32_t limit) {
    pthread_mutex_lock(&s->mu);
    s->limit = limit;
    /* Frames already begun keep the limit they were checked against. */
    for (rl_conn *c = s->conns; c; c = c->next)
        c->rd.max_body = limit;
    pthread_mutex_unlock(&s->mu);
}

void rl__server_set_max_comps(rl_server *s, uint32_t max) {
    pthread_mutex_lock(&s->mu);
    s->max_comps = max;
    for (rl_conn *c = s->conns; c; c = c->next)
        atomic_store_explicit(&c->rd.max_comps, max, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

void rl__server_set_stall(rl_server *s, double seconds) {
    pthread_mutex_lock(&s->mu);
    s->stall = seconds;
    double next = INFINITY;
    for (rl_conn *c = s->conns; c; c = c->next)
        if (c->frame_since && c->frame_since + seconds < next)
            next = c->frame_since + seconds;
    if (s->valid && isfinite(next))
        arm_stall_locked(s, next);
    pthread_mutex_unlock(&s->mu);
}

size_t rl__server_dropped(rl_server *s, char *why, size_t n) {
    pthread_mutex_lock(&s->mu);
    size_t d = s->dropped;
    snprintf(why, n, "%s", s->last_drop);
    pthread_mutex_unlock(&s->mu);
    return d;
}

/* ---- the shared half of listening ports ---- */

bool rl__netport_init(rl_netport *np, void *obj) {
    pthread_mutex_init(&np->mu, NULL);
    np->limit = RL_WIRE_MAX_BODY;
    np->link = rl__weak_new(obj);
    rl__fdobj_init(&np->life, -1); /* its fds are the server's */
    np->life.valid = np->link != NULL;
    np->inval_end = (rl_fdobj_end){.fd = -1};
    return np->life.valid;
}

void rl__netport_finalize(rl_netport *np) {
    /* Invalidation ran first (explicitly or on the last release) and
     * released the info; a port whose creation failed part-way has it. */
    rl__fdobj_finalize(&np->life);
    if (np->serving)
        rl__server_destroy(&np->srv);
    np->serving = false;
    if (np->link)
        rl__weak_release(np->link);
    pthread_mutex_destroy(&np->mu);
}

bool rl__netport_check_context(const void *context, const char *fn) {
    const rl_netport_context *c = context;
    if (c && c->version != 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)", (long)c->version);
    return true;
}

void rl__netport_set_context(rl_netport *np, const void *context) {
    if (context)
        np->ctx = *(const rl_netport_context *)context;
}

void rl__netport_retain_context(rl_netport *np) {
    if (np->ctx.retain)
        np->ctx.info = (void *)np->ctx.retain(np->ctx.info);
    rl__fdobj_set_context(&np->life, np->ctx.info, np->ctx.release);
}

bool rl__netport_get_context(rl_netport *np, void *context, const char *fn) {
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
    *(rl_netport_context *)context = np->ctx;
    return true;
}

int rl__netport_listen(rl_netport *np, int lfd, const rl_server_ops *ops, void *owner) {
    int err = rl__server_init(&np->srv, lfd, np->limit, ops, owner);
    np->serving = !err;
    return err;
}

bool rl__netport_is_valid(rl_netport *np) {
    pthread_mutex_lock(&np->mu);
    bool v = np->life.valid;
    pthread_mutex_unlock(&np->mu);
    return v;
}

bool rl__netport_begin_invalidate(rl_netport *np) {
    pthread_mutex_lock(&np->mu);
    bool was = rl__fdobj_invalidate(&np->life, np->inval ? RL_FDOBJ_CALLBACK : 0, &np->inval_end);
    pthread_mutex_unlock(&np->mu);
    return was;
}

rl_netport_fn rl__netport_finish_invalidate(rl_netport *np) {
    pthread_mutex_lock(&np->mu);
    RLFileDescriptorRef fdobj = np->fdobj;
    RLRunLoopSourceRef source = np->source;
    np->fdobj = NULL;
    np->source = NULL;
    rl_netport_fn cb = np->inval_end.call_inval ? np->inval : NULL;
    pthread_mutex_unlock(&np->mu);
    if (np->serving)
        rl__server_close(&np->srv); /* the name or address is free from here on */
    rl__weak_cut(np->link);
    if (fdobj) {
        RLFileDescriptorInvalidate(fdobj); /* removes its source from every loop */
        RLRelease(fdobj);
    }
    if (source)
        RLRelease(source);
    return cb;
}

void rl__netport_end_invalidate(rl_netport *np) {
    pthread_mutex_lock(&np->mu);
    rl_fdobj_end end = np->inval_end;
    np->inval_end = (rl_fdobj_end){.fd = -1};
    bool kept = np->kept_by_source;
    np->kept_by_source = false;
    pthread_mutex_unlock(&np->mu);
    rl__fdobj_finish(&end); /* the info, after the invalidation callback */
    if (kept)
        RLRelease((char *)np - RL__NETPORT_OFFSET);
}

bool rl__netport_set_inval(rl_netport *np, rl_netport_fn fn) {
    pthread_mutex_lock(&np->mu);
    bool valid = np->life.valid;
    if (valid)
        np->inval = fn;
    pthread_mutex_unlock(&np->mu);
    return valid;
}

rl_netport_fn rl__netport_get_inval(rl_netport *np) {
    pthread_mutex_lock(&np->mu);
    rl_netport_fn fn = np->inval;
    pthread_mutex_unlock(&np->mu);
    return fn;
}

bool rl__netport_set_limit(rl_netport *np, RLIndex bytes, const char *fn) {
    if (bytes < RL_NETPORT_MIN_LIMIT || bytes > (RLIndex)RL_WIRE_MAX_BODY)
        return rl__fail(kRLErrorInvalidArgument, fn, "limit %ld is outside [%d, %u]", (long)bytes, RL_NETPORT_MIN_LIMIT,
                        RL_WIRE_MAX_BODY);
    pthread_mutex_lock(&np->mu);
    np->limit = (uint32_t)bytes;
    pthread_mutex_unlock(&np->mu);
    if (np->serving)
        rl__server_set_limit(&np->srv, (uint32_t)bytes);
    return true;
}

bool rl__netport_set_stall(rl_netport *np, bool remote, RLTimeInterval seconds, const char *fn) {
    if (remote || !np->serving)
        return rl__fail(kRLErrorInvalidState, fn, "a remote port has no clients to time out");
    if (!(seconds > 0) || !isfinite(seconds))
        return rl__fail(kRLErrorInvalidArgument, fn, "stall timeout %g is not a positive number of seconds", seconds);
    rl__server_set_stall(&np->srv, seconds);
    return true;
}

static void netport_ready(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    /* Retained: a handler may invalidate and release the port. */
    void *obj = rl__weak_get(info);
    if (!obj)
        return;
    rl_netport *np = (rl_netport *)((char *)obj + RL__NETPORT_OFFSET);
    rl__server_serve(&np->srv);
    /* One-shot per enable (RLFileDescriptor.h): listen for the next. */
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    RLRelease(obj);
}

RLRunLoopSourceRef rl__netport_create_source(rl_netport *np, bool remote, RLIndex order, const char *fn) {
    if (remote)
        return rl__fail(kRLErrorInvalidState, fn, "a remote port has no run-loop source (only local ports receive)"),
               NULL;
    pthread_mutex_lock(&np->mu);
    if (!np->life.valid) {
        pthread_mutex_unlock(&np->mu);
        return rl__fail(kRLErrorInvalidObject, fn, "the port is invalid"), NULL;
    }
    if (np->source) {
        RLRunLoopSourceRef s = (RLRunLoopSourceRef)RLRetain(np->source);
        pthread_mutex_unlock(&np->mu);
        return s;
    }
    pthread_mutex_unlock(&np->mu);
    RLFileDescriptorContext ctx = {0, np->link, rl__weak_retain, rl__weak_release, NULL};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, rl__server_fd(&np->srv), false, netport_ready, &ctx);
    RLRunLoopSourceRef s = f ? RLFileDescriptorCreateRunLoopSource(NULL, f, order) : NULL;
    if (!s) {
        if (f)
            RLRelease(f);
        return NULL;
    }
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    pthread_mutex_lock(&np->mu);
    if (np->source || !np->life.valid) { /* another thread won, or it was invalidated meanwhile */
        RLRunLoopSourceRef other = np->source ? (RLRunLoopSourceRef)RLRetain(np->source) : NULL;
        pthread_mutex_unlock(&np->mu);
        RLFileDescriptorInvalidate(f);
        RLRelease(f);
        RLRelease(s);
        if (!other)
            rl__fail(kRLErrorInvalidObject, fn, "the port was invalidated");
        return other;
    }
    np->fdobj = f;
    np->source = (RLRunLoopSourceRef)RLRetain(s);
    np->kept_by_source = true;
    RLRetain((char *)np - RL__NETPORT_OFFSET);
    pthread_mutex_unlock(&np->mu);
    return s;
}

size_t rl__netport_dropped(rl_netport *np, char *why, size_t n) {
    why[0] = 0;
    return np->serving ? rl__server_dropped(&np->srv, why, n) : 0;
}

void rl__registry_add_locked(rl_netport_registry *r, rl_netport *np) {
    np->reg_next = r->head;
    r->head = np;
}

void rl__registry_remove(rl_netport_registry *r, rl_netport *np) {
    pthread_mutex_lock(&r->mu);
    for (rl_netport **pp = &r->head; *pp; pp = &(*pp)->reg_next)
        if (*pp == np) {
            *pp = np->reg_next;
            break;
        }
    pthread_mutex_unlock(&r->mu);
}
