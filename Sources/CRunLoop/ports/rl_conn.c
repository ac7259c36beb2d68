/* rl_conn.c — serving framed connections, and senders' deadline helpers
 * (rl_conn.h). */
#include "rl_conn.h"
#include "rl_health.h"

#include <crunloop/RLRunLoopSource.h>
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopTimer.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { RL_CONN_BATCH = 16 };
/* A client that begins a frame has this long to finish it (seconds). */
#define RL_CONN_STALL_DEFAULT 10.0
/* A stall timer with no stalled client is set this far ahead (seconds). */
#define RL_CONN_FAR 1e9

/* ---- senders ---- */

double rl__deadline_after(double t) { return RLMonotonicTimeGetCurrent() + (isfinite(t) && t > 0 ? t : 0); }

int rl__ms_left(double deadline) {
    double left = deadline - RLMonotonicTimeGetCurrent();
    if (left <= 0)
        return 0;
    return left > 1e6 ? 1000000000 : (int)ceil(left * 1000);
}

/* Locks mu, waiting no later than deadline. 0 or ETIMEDOUT. */
static int lock_until(pthread_mutex_t *mu, double deadline) {
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

rl__send_result rl__send(const rl__send_job *sd, double deadline, size_t *sent, int *err) {
    *sent = 0;
    *err = 0;
    if (lock_until(sd->mu, deadline) != 0)
        return RL_SEND_BUSY;
    int fd = sd->conn(sd->port, deadline);
    if (fd < 0)
        return RL_SEND_STOPPED;
    uint8_t *made = NULL;
    const uint8_t *frame = sd->frame;
    size_t len = sd->len;
    if (sd->make && !(frame = made = sd->make(sd->port, sd->arg, &len))) {
        pthread_mutex_unlock(sd->mu);
        return RL_SEND_NOMEM;
    }
    *err = rl__write_all(fd, frame, len, deadline, sent);
    free(made);
    return !*err ? RL_SEND_SENT : *err == ETIMEDOUT ? RL_SEND_TIMEOUT : RL_SEND_BROKE;
}

bool rl__read_pending(const rl__wire_reader *rd) { return rd->ahead_off < rd->ahead_len; }

bool rl__read_drained(const rl__wire_reader *rd) { return !rl__read_pending(rd) && rd->ahead_short; }

int rl__read_frame(int fd, rl__wire_reader *rd, rl__wire_frame *f, const char **why) {
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
        rl__wire_error e = rl__wire_got(rd, (size_t)n, &done);
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

/* Connections are counted: the server's list holds one reference, the fd
 * object's context another (released when it is invalidated). */
static const void *conn_retain(const void *p) {
    atomic_fetch_add_explicit(&((rl__conn *)p)->refs, 1, memory_order_relaxed);
    return p;
}

static void conn_release(const void *p) {
    rl__conn *c = (rl__conn *)p;
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (c->fd >= 0)
        close(c->fd);
    if (c->src)
        RLRelease(c->src);
    if (c->fdobj)
        RLRelease(c->fdobj);
    if (c->link)
        rl__weak_release(c->link);
    if (c->kept)
        RLRelease(c->kept);
    rl__wire_reader_free(&c->rd);
    free(c->out);
    free(c);
}

static void conn_ready(RLFileDescriptorRef f, RLOptionFlags types, void *info);

/* A connection or listener around fd (taken over: closed on failure),
 * with its watch, in no loop yet and with no callback enabled. NULL with
 * errno set. */
/* The slow-callout report names a port's callouts as the port's. */
static void mark_owner(RLFileDescriptorRef f, rl__server *s) {
    if (f)
        rl__fd_set_owner(f, s->owner, &s->ops->how);
}

static rl__conn *conn_new(rl__server *s, int fd, bool listening) {
    rl__conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    c->fd = fd;
    c->listening = listening;
    c->uid = (uid_t)-1;
    c->gid = (gid_t)-1;
    c->pid = -1;
    c->srv = s;
    atomic_init(&c->refs, 1);
    c->link = (rl__weak *)rl__weak_retain(s->link);
    pthread_mutex_lock(&s->mu);
    RLIndex order = s->order;
    pthread_mutex_unlock(&s->mu);
    RLFileDescriptorContext ctx = {0, c, conn_retain, conn_release, NULL};
    c->fdobj = RLFileDescriptorCreate(NULL, fd, false, conn_ready, &ctx);
    mark_owner(c->fdobj, s);
    c->src = c->fdobj ? RLFileDescriptorCreateRunLoopSource(NULL, c->fdobj, order) : NULL;
    if (!c->src) {
        if (c->fdobj)
            RLFileDescriptorInvalidate(c->fdobj); /* lets go of its reference on c */
        conn_release(c);                          /* closes fd */
        errno = ENOMEM;
        return NULL;
    }
    return c;
}

/* The end of a connection or listener that is on no list and that no loop
 * serves: its watch leaves every loop, its socket closes at once (a
 * listener's address is free when this returns). */
static void conn_retire(rl__server *s, rl__conn *c) {
    RLFileDescriptorInvalidate(c->fdobj);
    if (c->fd >= 0) {
        if (c->listening && s->made_by == getpid())
            shutdown(c->fd, SHUT_RDWR); /* a copy another process holds accepts nothing either */
        close(c->fd);
        c->fd = -1;
    }
    conn_release(c);
}

/* c's watch joins every loop and mode the port's source is in (sched_mu
 * held). */
static void conn_join_locked(rl__server *s, rl__conn *c) {
    for (rl__conn_sched *e = s->scheds; e; e = e->next)
        (void)RLRunLoopAddSource(e->rl, c->src, e->mode);
}

static void unlink_conn(rl__conn **head, rl__conn *c) {
    for (rl__conn **pp = head; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            return;
        }
}

static void server_destroy(rl__server *s);

/* Sets up a server around a bound, listening, non-blocking socket (taken
 * over, also on failure), for the port `owner` whose weak link is `link`.
 * 0, or the errno that failed. */
static int server_init(rl__server *s, int lfd, uint32_t limit, const rl__server_ops *ops, void *owner, rl__weak *link) {
    memset(s, 0, sizeof *s);
    s->made_by = getpid();
    pthread_mutex_init(&s->sched_mu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    s->limit = limit;
    s->stall = RL_CONN_STALL_DEFAULT;
    s->stall_at = INFINITY;
    s->ops = ops;
    s->owner = owner;
    s->link = link;
    rl__conn *l = conn_new(s, lfd, true);
    if (!l) {
        int err = errno;
        server_destroy(s);
        return err;
    }
    s->listeners = l;
    s->valid = true;
    RLFileDescriptorEnableCallBacks(l->fdobj, kRLFileDescriptorReadCallBack);
    return 0;
}

rl__conn *rl__server_add_listener(rl__server *s, int lfd) {
    rl__conn *l = conn_new(s, lfd, true);
    if (!l)
        return NULL;
    pthread_mutex_lock(&s->sched_mu);
    pthread_mutex_lock(&s->mu);
    bool ok = s->valid && s->listeners;
    if (ok) { /* after the main one */
        l->next = s->listeners->next;
        s->listeners->next = l;
    }
    pthread_mutex_unlock(&s->mu);
    if (ok) {
        conn_join_locked(s, l);
        RLFileDescriptorEnableCallBacks(l->fdobj, kRLFileDescriptorReadCallBack);
    }
    pthread_mutex_unlock(&s->sched_mu);
    if (!ok) {
        conn_retire(s, l);
        errno = EBADF;
        return NULL;
    }
    return l;
}

/* Takes l off the listeners; it is retired here unless a loop accepts on
 * it right now (that loop retires it when it is done). mu held. False:
 * the caller retires it (after unlocking). */
static bool let_go_listener_locked(rl__server *s, rl__conn *l) {
    unlink_conn(&s->listeners, l);
    if (!l->busy)
        return false;
    l->closed = true;
    if (s->made_by == getpid())
        shutdown(l->fd, SHUT_RDWR);
    return true;
}

int rl__server_replace_listener(rl__server *s, int lfd) {
    rl__conn *l = conn_new(s, lfd, true);
    if (!l)
        return errno;
    pthread_mutex_lock(&s->sched_mu);
    pthread_mutex_lock(&s->mu);
    rl__conn *old = s->valid ? s->listeners : NULL;
    bool busy = false;
    if (old) {
        busy = let_go_listener_locked(s, old);
        l->next = s->listeners;
        s->listeners = l; /* the main one now */
    }
    pthread_mutex_unlock(&s->mu);
    if (old) {
        conn_join_locked(s, l);
        RLFileDescriptorEnableCallBacks(l->fdobj, kRLFileDescriptorReadCallBack);
    }
    pthread_mutex_unlock(&s->sched_mu);
    if (!old) {
        conn_retire(s, l);
        return EBADF;
    }
    if (!busy)
        conn_retire(s, old);
    return 0;
}

void rl__server_remove_listener(rl__server *s, rl__conn *l) {
    pthread_mutex_lock(&s->mu);
    bool found = false;
    for (rl__conn *x = s->listeners; x; x = x->next)
        found = found || x == l;
    bool busy = found && let_go_listener_locked(s, l);
    pthread_mutex_unlock(&s->mu);
    if (found && !busy)
        conn_retire(s, l);
}

static void note_drop_locked(rl__server *s, rl__conn *c, const char *why) {
    s->dropped++;
    if (c->pid > 0)
        snprintf(s->last_drop, sizeof s->last_drop, "pid %d: %s", (int)c->pid, why);
    else
        snprintf(s->last_drop, sizeof s->last_drop, "%s", why);
}

static void accept_clients(rl__server *s, int lfd) {
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t alen = sizeof addr;
        int fd = accept4(lfd, (struct sockaddr *)&addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* EAGAIN, or out of fds: the listener stays armed and we come back */
        }
        rl__conn *c = conn_new(s, fd, false);
        if (!c)
            continue;
        c->addr = addr;
        c->addrlen = alen;
        char why[96] = "refused";
        bool ok = !s->ops->admit || s->ops->admit(s->owner, c, why, sizeof why);
        pthread_mutex_lock(&s->sched_mu);
        pthread_mutex_lock(&s->mu);
        if (!ok || !s->valid) {
            if (!ok)
                note_drop_locked(s, c, why);
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_unlock(&s->sched_mu);
            conn_retire(s, c);
            continue;
        }
        rl__wire_reader_init(&c->rd, s->limit);
        atomic_store_explicit(&c->rd.max_comps, s->max_comps, memory_order_relaxed);
        c->next = s->conns;
        s->conns = c;
        pthread_mutex_unlock(&s->mu);
        conn_join_locked(s, c);
        RLFileDescriptorEnableCallBacks(c->fdobj, kRLFileDescriptorReadCallBack);
        pthread_mutex_unlock(&s->sched_mu);
    }
}

bool rl__conn_write(rl__conn *c, uint8_t *buf, size_t len) {
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

static bool flush_out(rl__conn *c) {
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

/* Sets every stall timer for monotonic time `at` (mu held). A timer is in
 * its loop only while a client is mid-frame: a loop's next timer date
 * shows the ports' stall checks only while there is one to make. */
static void arm_stall_locked(rl__server *s, double at) {
    s->stall_at = at;
    double now = RLMonotonicTimeGetCurrent();
    RLAbsoluteTime when = RLAbsoluteTimeGetCurrent() + (at - now > 1e-3 ? at - now : 1e-3);
    for (rl__conn_sched *e = s->scheds; e; e = e->next) {
        RLRunLoopTimerSetNextFireDate(e->timer, when);
        if (!e->timer_in)
            e->timer_in = RLRunLoopAddTimer(e->rl, e->timer, e->mode);
    }
}

/* No client is mid-frame: the stall timers leave their loops (mu held). */
static void disarm_stall_locked(rl__server *s) {
    s->stall_at = INFINITY;
    for (rl__conn_sched *e = s->scheds; e; e = e->next)
        if (e->timer_in) {
            (void)RLRunLoopRemoveTimer(e->rl, e->timer, e->mode);
            e->timer_in = false;
        }
}

/* A stall timer fired: drop every client that began a frame longer ago
 * than the server allows, and set the timers for the next one. */
static void drop_stalled(rl__server *s) {
    double now = RLMonotonicTimeGetCurrent(), next = INFINITY;
    rl__conn *dead = NULL;
    pthread_mutex_lock(&s->mu);
    s->stall_at = INFINITY;
    for (rl__conn *c = s->conns, *nx; c; c = nx) {
        nx = c->next;
        if (c->busy || c->frame_since == 0)
            continue;
        if (now - c->frame_since >= s->stall) {
            unlink_conn(&s->conns, c);
            note_drop_locked(s, c, "stalled mid-frame");
            c->next = dead;
            dead = c;
        } else if (c->frame_since + s->stall < next) {
            next = c->frame_since + s->stall;
        }
    }
    if (s->valid && isfinite(next))
        arm_stall_locked(s, next);
    else
        disarm_stall_locked(s);
    pthread_mutex_unlock(&s->mu);
    for (rl__conn *c = dead, *nx; c; c = nx) {
        nx = c->next;
        conn_retire(s, c);
    }
}

/* The loop that served c is done with it: c is watched again for what it
 * needs (keep), or dropped. */
static void conn_done(rl__server *s, rl__conn *c, bool keep, const char *why, bool bad) {
    pthread_mutex_lock(&s->mu);
    c->busy = false;
    if (keep && !c->closed && s->valid) {
        if (!c->listening) {
            if (rl__wire_idle(&c->rd)) {
                c->frame_since = 0;
            } else if (c->frame_since == 0) {
                c->frame_since = RLMonotonicTimeGetCurrent();
                if (c->frame_since + s->stall < s->stall_at)
                    arm_stall_locked(s, c->frame_since + s->stall);
            }
        }
        /* Replies still queued: no more requests from this client until
         * it reads them. Only writability brings it back (a hang-up is
         * always reported), so a client that sends on and never reads
         * leaves the loop idle instead of waking it for its input. Under
         * mu: a close meanwhile would free c. */
        RLFileDescriptorEnableCallBacks(c->fdobj, c->out ? kRLFileDescriptorWriteCallBack
                                                         : kRLFileDescriptorReadCallBack);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (!c->closed) /* else it is off its list already */
        unlink_conn(c->listening ? &s->listeners : &s->conns, c);
    if (bad)
        note_drop_locked(s, c, why ? why : "closed");
    pthread_mutex_unlock(&s->mu);
    conn_retire(s, c);
}

static void serve_conn(rl__server *s, rl__conn *c, RLOptionFlags types) {
    const char *why = NULL;
    bool keep = true, bad = false;
    if (c->out && (types & kRLFileDescriptorWriteCallBack))
        keep = flush_out(c);
    /* At most a few frames per wake, so one chatty client cannot starve
     * the loop's other sources; the one-shot re-arm brings us back. Bytes
     * already read ahead are served before leaving, whatever the count
     * (at most RL_WIRE_AHEAD of them): the fd will not say they are there. */
    for (int i = 0; keep && (i < RL_CONN_BATCH || rl__read_pending(&c->rd)) && !c->out; i++) {
        rl__wire_frame f;
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
            break; /* the stream was empty: the re-arm sees whatever comes next */
    }
    conn_done(s, c, keep, why, bad);
}

/* The loop reports c's fd (one-shot: c is this loop's until conn_done). */
static void conn_ready(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)f;
    rl__conn *c = info;
    void *port = rl__weak_get(c->link); /* held: a dispatch may invalidate and release it */
    if (!port)
        return;
    rl__server *s = c->srv;
    pthread_mutex_lock(&s->mu);
    bool go = !c->closed && s->valid && !c->busy;
    c->busy = c->busy || go;
    pthread_mutex_unlock(&s->mu);
    if (go && c->listening) {
        accept_clients(s, c->fd);
        conn_done(s, c, true, NULL, false);
    } else if (go) {
        serve_conn(s, c, types);
    }
    RLRelease(port);
}

static void stall_fired(RLRunLoopTimerRef t, void *info) {
    (void)t;
    void *port = rl__weak_get(info);
    if (!port)
        return;
    drop_stalled(&((rl__netport *)((char *)port + RL__NETPORT_OFFSET))->srv);
    RLRelease(port);
}

/* The order of the port's source, for the watches (set before the source
 * joins a loop). */
static void server_set_order(rl__server *s, RLIndex order) {
    pthread_mutex_lock(&s->sched_mu);
    pthread_mutex_lock(&s->mu);
    /* In no loop yet: nobody accepts on the listeners, and no client is
     * connected; the listeners get watches of the new order. */
    bool redo = s->valid && !s->scheds && s->order != order;
    s->order = order;
    for (rl__conn *l = redo ? s->listeners : NULL; l; l = l->next) {
        RLFileDescriptorContext ctx = {0, l, conn_retain, conn_release, NULL};
        RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, l->fd, false, conn_ready, &ctx);
        mark_owner(f, s);
        RLRunLoopSourceRef src = f ? RLFileDescriptorCreateRunLoopSource(NULL, f, order) : NULL;
        if (!src) { /* out of memory: the old watch stays, of order 0 */
            if (f) {
                RLFileDescriptorInvalidate(f);
                RLRelease(f);
            }
            continue;
        }
        RLFileDescriptorRef old_f = l->fdobj;
        RLRunLoopSourceRef old_src = l->src;
        l->fdobj = f;
        l->src = src;
        RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
        RLFileDescriptorInvalidate(old_f); /* lets go of its reference on l (the list keeps one) */
        RLRelease(old_f);
        RLRelease(old_src);
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->sched_mu);
}

/* The port's source joined (schedule) or left (cancel) mode of rl: the
 * server's watches follow it. */
static void server_schedule(rl__server *s, RLRunLoopRef rl, RLRunLoopMode mode) {
    rl__conn_sched *e = calloc(1, sizeof *e);
    RLRunLoopTimerContext tctx = {0, s->link, rl__weak_retain, rl__weak_release, NULL};
    /* Repeats, far apart: it is set by hand, and stays in its loop while a
     * client is mid-frame (arm_stall_locked). */
    pthread_mutex_lock(&s->mu);
    RLIndex order = s->order;
    pthread_mutex_unlock(&s->mu);
    RLRunLoopTimerRef t = e ? RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + RL_CONN_FAR, RL_CONN_FAR, 0,
                                                   order, stall_fired, &tctx)
                            : NULL;
    if (!t) {
        free(e);
        rl__fail(kRLErrorNoMemory, "RLRunLoopAddSource", "out of memory: the port is not served in mode %s", mode);
        return;
    }
    pthread_mutex_lock(&s->sched_mu);
    pthread_mutex_lock(&s->mu);
    bool dup = false;
    for (rl__conn_sched *x = s->scheds; x; x = x->next)
        dup = dup || (x->rl == rl && strcmp(x->mode, mode) == 0);
    bool ok = s->valid && !dup;
    if (ok) {
        e->rl = (RLRunLoopRef)RLRetain(rl);
        e->mode = mode; /* a loop's mode names live as long as the loop */
        e->timer = t;
        e->next = s->scheds;
        s->scheds = e;
        for (rl__conn *c = s->listeners; c; c = c->next)
            (void)RLRunLoopAddSource(rl, c->src, mode);
        for (rl__conn *c = s->conns; c; c = c->next)
            (void)RLRunLoopAddSource(rl, c->src, mode);
        if (isfinite(s->stall_at))
            arm_stall_locked(s, s->stall_at);
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->sched_mu);
    if (!ok) {
        RLRunLoopTimerInvalidate(t);
        RLRelease(t);
        free(e);
    }
}

static void sched_free(rl__conn_sched *e) {
    RLRunLoopTimerInvalidate(e->timer); /* out of its loop */
    RLRelease(e->timer);
    RLRelease(e->rl);
    free(e);
}

static void server_cancel(rl__server *s, RLRunLoopRef rl, RLRunLoopMode mode) {
    pthread_mutex_lock(&s->sched_mu);
    pthread_mutex_lock(&s->mu);
    rl__conn_sched *e = NULL;
    for (rl__conn_sched **pp = &s->scheds; *pp; pp = &(*pp)->next)
        if ((*pp)->rl == rl && strcmp((*pp)->mode, mode) == 0) {
            e = *pp;
            *pp = e->next;
            break;
        }
    if (e) {
        for (rl__conn *c = s->listeners; c; c = c->next)
            (void)RLRunLoopRemoveSource(rl, c->src, e->mode);
        for (rl__conn *c = s->conns; c; c = c->next)
            (void)RLRunLoopRemoveSource(rl, c->src, e->mode);
    }
    pthread_mutex_unlock(&s->mu);
    if (e)
        sched_free(e);
    pthread_mutex_unlock(&s->sched_mu);
}

/* Moves every entry of *from that no loop serves onto *dead; a busy one
 * is left to its loop (marked closed). mu held. */
static void let_go_all_locked(rl__server *s, rl__conn **from, rl__conn **dead, bool ours) {
    for (rl__conn *c = *from, *nx; c; c = nx) {
        nx = c->next;
        if (c->busy) {
            c->closed = true;
            if (ours)
                shutdown(c->fd, SHUT_RDWR);
            continue;
        }
        c->next = *dead;
        *dead = c;
    }
    *from = NULL;
}

/* Stops listening and drops every client (a connection being served is
 * dropped by the thread serving it); the watches leave every loop.
 * Idempotent. */
static void server_close(rl__server *s) {
    pthread_mutex_lock(&s->sched_mu);
    pthread_mutex_lock(&s->mu);
    s->valid = false;
    /* Not in a fork()'s child: a shutdown would stop its parent's sockets. */
    bool ours = s->made_by == getpid();
    rl__conn *lis = NULL, *cons = NULL;
    let_go_all_locked(s, &s->listeners, &lis, ours);
    let_go_all_locked(s, &s->conns, &cons, ours);
    rl__conn_sched *scheds = s->scheds;
    s->scheds = NULL;
    pthread_mutex_unlock(&s->mu);
    /* The listeners go first: a client that sees its connection close can
     * count on the address being free. */
    for (rl__conn *c = lis, *nx; c; c = nx) {
        nx = c->next;
        conn_retire(s, c);
    }
    for (rl__conn *c = cons, *nx; c; c = nx) {
        nx = c->next;
        conn_retire(s, c);
    }
    for (rl__conn_sched *e = scheds, *nx; e; e = nx) {
        nx = e->next;
        sched_free(e);
    }
    pthread_mutex_unlock(&s->sched_mu);
}

void rl__server_drop_listeners_in_child(rl__server *s) {
    /* A fork()'s child, before anything else runs in it: no other thread,
     * and the lock may be held for good by a thread of the parent. The
     * watches stay (the child's loops are its parent's copies, which it
     * never waits on); only the sockets close. */
    for (rl__conn *l = s->listeners; l; l = l->next) {
        if (l->fd >= 0)
            close(l->fd);
        l->fd = -1;
    }
}

/* Frees what close left (call once, after close). */
static void server_destroy(rl__server *s) {
    /* Close ran first; connections a loop was serving are retired by it
     * (it holds the port meanwhile, so none is left here). */
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->sched_mu);
}

static void server_set_limit(rl__server *s, uint32_t limit) {
    pthread_mutex_lock(&s->mu);
    s->limit = limit;
    /* Frames already begun keep the limit they were checked against. */
    for (rl__conn *c = s->conns; c; c = c->next)
        c->rd.max_body = limit;
    pthread_mutex_unlock(&s->mu);
}

void rl__server_set_max_comps(rl__server *s, uint32_t max) {
    pthread_mutex_lock(&s->mu);
    s->max_comps = max;
    for (rl__conn *c = s->conns; c; c = c->next)
        atomic_store_explicit(&c->rd.max_comps, max, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

static void server_set_stall(rl__server *s, double seconds) {
    pthread_mutex_lock(&s->mu);
    s->stall = seconds;
    double next = INFINITY;
    for (rl__conn *c = s->conns; c; c = c->next)
        if (c->frame_since && c->frame_since + seconds < next)
            next = c->frame_since + seconds;
    if (s->valid && isfinite(next))
        arm_stall_locked(s, next);
    pthread_mutex_unlock(&s->mu);
}

/* Connections dropped so far; the last reason goes into why (n bytes). */
static size_t server_dropped(rl__server *s, char *why, size_t n) {
    pthread_mutex_lock(&s->mu);
    size_t d = s->dropped;
    snprintf(why, n, "%s", s->last_drop);
    pthread_mutex_unlock(&s->mu);
    return d;
}

/* The release of a port's info (rl__fdobj_releaser): its context's. */
static rl__fdobj_release_fn netport_releaser(const rl__fdobj *o) {
    const rl__netport *np = (const void *)((const char *)o - offsetof(rl__netport, life));
    return np->ctx.release;
}

/* ---- the shared half of listening ports ---- */

bool rl__netport_init(rl__netport *np, void *obj) {
    pthread_mutex_init(&np->mu, NULL);
    np->limit = RL_WIRE_MAX_BODY;
    np->link = rl__weak_new(obj);
    rl__fdobj_init(&np->life, -1); /* its fds are the server's */
    np->life.valid = np->link != NULL;
    np->inval_end = (rl__fdobj_end){.fd = -1};
    return np->life.valid;
}

void rl__netport_finalize(rl__netport *np) {
    /* Invalidation ran first (explicitly or on the last release) and
     * released the info; a port whose creation failed part-way has it. */
    rl__fdobj_finalize(&np->life, netport_releaser);
    if (np->serving)
        server_destroy(&np->srv);
    np->serving = false;
    if (np->link)
        rl__weak_release(np->link);
    pthread_mutex_destroy(&np->mu);
}

bool rl__netport_check_context(const void *context, const char *fn) {
    const rl__netport_context *c = context;
    if (c && c->version != 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)", (long)c->version);
    return true;
}

void rl__netport_set_context(rl__netport *np, const void *context) {
    if (context)
        np->ctx = *(const rl__netport_context *)context;
}

void rl__netport_retain_context(rl__netport *np) {
    if (np->ctx.retain)
        np->ctx.info = (void *)np->ctx.retain(np->ctx.info);
    rl__fdobj_set_context(&np->life, np->ctx.info, np->ctx.release);
}

bool rl__netport_get_context(rl__netport *np, void *context, const char *fn) {
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
    *(rl__netport_context *)context = np->ctx;
    return true;
}

int rl__netport_listen(rl__netport *np, int lfd, const rl__server_ops *ops, void *owner) {
    int err = server_init(&np->srv, lfd, np->limit, ops, owner, np->link);
    np->serving = !err;
    return err;
}

bool rl__netport_is_valid(rl__netport *np) {
    pthread_mutex_lock(&np->mu);
    bool v = np->life.valid;
    pthread_mutex_unlock(&np->mu);
    return v;
}

bool rl__netport_begin_invalidate(rl__netport *np) {
    pthread_mutex_lock(&np->mu);
    bool was = rl__fdobj_invalidate(&np->life, np->inval ? RL_FDOBJ_CALLBACK : 0, &np->inval_end, netport_releaser);
    pthread_mutex_unlock(&np->mu);
    return was;
}

rl__netport_fn rl__netport_finish_invalidate(rl__netport *np) {
    pthread_mutex_lock(&np->mu);
    RLRunLoopSourceRef source = np->source;
    np->source = NULL;
    rl__netport_fn cb = np->inval_end.call_inval ? np->inval : NULL;
    pthread_mutex_unlock(&np->mu);
    if (np->serving)
        server_close(&np->srv); /* the name or address is free from here on */
    rl__weak_cut(np->link);
    if (source) {
        RLRunLoopSourceInvalidate(source); /* out of every loop (the server's watches are already) */
        RLRelease(source);
    }
    return cb;
}

void rl__netport_end_invalidate(rl__netport *np) {
    pthread_mutex_lock(&np->mu);
    rl__fdobj_end end = np->inval_end;
    np->inval_end = (rl__fdobj_end){.fd = -1};
    bool kept = np->kept_by_source;
    np->kept_by_source = false;
    pthread_mutex_unlock(&np->mu);
    rl__fdobj_finish(&end); /* the info, after the invalidation callback */
    if (kept)
        RLRelease((char *)np - RL__NETPORT_OFFSET);
}

bool rl__netport_set_inval(rl__netport *np, rl__netport_fn fn) {
    pthread_mutex_lock(&np->mu);
    bool valid = np->life.valid;
    if (valid)
        np->inval = fn;
    pthread_mutex_unlock(&np->mu);
    return valid;
}

rl__netport_fn rl__netport_get_inval(rl__netport *np) {
    pthread_mutex_lock(&np->mu);
    rl__netport_fn fn = np->inval;
    pthread_mutex_unlock(&np->mu);
    return fn;
}

bool rl__netport_set_limit(rl__netport *np, RLIndex bytes, const char *fn) {
    if (bytes < RL_NETPORT_MIN_LIMIT || bytes > (RLIndex)RL_WIRE_MAX_BODY)
        return rl__fail(kRLErrorInvalidArgument, fn, "limit %ld is outside [%d, %u]", (long)bytes, RL_NETPORT_MIN_LIMIT,
                        RL_WIRE_MAX_BODY);
    pthread_mutex_lock(&np->mu);
    np->limit = (uint32_t)bytes;
    pthread_mutex_unlock(&np->mu);
    if (np->serving)
        server_set_limit(&np->srv, (uint32_t)bytes);
    return true;
}

bool rl__netport_set_stall(rl__netport *np, bool remote, RLTimeInterval seconds, const char *fn) {
    if (remote || !np->serving)
        return rl__fail(kRLErrorInvalidState, fn, "a remote port has no clients to time out");
    if (!(seconds > 0) || !isfinite(seconds))
        return rl__fail(kRLErrorInvalidArgument, fn, "stall timeout %g is not a positive number of seconds", seconds);
    server_set_stall(&np->srv, seconds);
    return true;
}

/* The port's source joined or left a mode of a loop: the server's
 * watches follow (info is the port's weak link). */
static void netport_schedule(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    void *obj = rl__weak_get(info);
    if (!obj)
        return; /* invalidated: the server is closed */
    server_schedule(&((rl__netport *)((char *)obj + RL__NETPORT_OFFSET))->srv, rl, mode);
    RLRelease(obj);
}

static void netport_cancel(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    void *obj = rl__weak_get(info);
    if (!obj)
        return;
    server_cancel(&((rl__netport *)((char *)obj + RL__NETPORT_OFFSET))->srv, rl, mode);
    RLRelease(obj);
}

RLRunLoopSourceRef rl__netport_create_source(rl__netport *np, bool remote, RLIndex order, const char *fn) {
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
    if (np->serving)
        server_set_order(&np->srv, order);
    /* Never signalled: all it does is take the server's watches into the
     * loops and modes it is added to. */
    RLRunLoopSourceContext ctx = {.version = 0,
                                  .info = np->link,
                                  .retain = rl__weak_retain,
                                  .release = rl__weak_release,
                                  .schedule = netport_schedule,
                                  .cancel = netport_cancel};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, order, &ctx);
    if (!s)
        return NULL;
    pthread_mutex_lock(&np->mu);
    if (np->source || !np->life.valid) { /* another thread won, or it was invalidated meanwhile */
        RLRunLoopSourceRef other = np->source ? (RLRunLoopSourceRef)RLRetain(np->source) : NULL;
        pthread_mutex_unlock(&np->mu);
        RLRunLoopSourceInvalidate(s);
        RLRelease(s);
        if (!other)
            rl__fail(kRLErrorInvalidObject, fn, "the port was invalidated");
        return other;
    }
    np->source = (RLRunLoopSourceRef)RLRetain(s);
    np->kept_by_source = true;
    RLRetain((char *)np - RL__NETPORT_OFFSET);
    pthread_mutex_unlock(&np->mu);
    return s;
}

size_t rl__netport_dropped(rl__netport *np, char *why, size_t n) {
    why[0] = 0;
    return np->serving ? server_dropped(&np->srv, why, n) : 0;
}

void rl__registry_add_locked(rl__netport_registry *r, rl__netport *np) {
    np->reg_next = r->head;
    r->head = np;
}

void rl__registry_remove(rl__netport_registry *r, rl__netport *np) {
    pthread_mutex_lock(&r->mu);
    for (rl__netport **pp = &r->head; *pp; pp = &(*pp)->reg_next)
        if (*pp == np) {
            *pp = np->reg_next;
            break;
        }
    pthread_mutex_unlock(&r->mu);
}
