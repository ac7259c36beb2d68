/*
 * RLMessagePort.c — named message ports over Unix-domain sockets
 * (RLMessagePort.h has the contract, rl_wire.h the frames).
 *
 * A local port listens on an abstract-namespace socket. Its clients'
 * connections and the listening socket sit in the port's own epoll set,
 * and that one epoll fd is what the run loop watches (an RLFileDescriptor),
 * so a port costs its loop one fd however many clients it has. Each
 * connection is armed one-shot: a run loop that takes its event owns the
 * connection until it re-arms it, so a port whose source is in several
 * loops never has two threads reading one stream.
 *
 * A remote port is one connection. Its requests are serialized by
 * `send_mu`; its reader keeps a partly read frame between calls, and a
 * reply that arrives after its request timed out is recognized by its
 * sequence number and dropped. Its invalidation callback listens on a
 * second, silent connection: the local port closing it is the only event
 * that ever comes on it, so watching it never races with a request.
 */
#include "rl_fork.h"
#include "RLDataInternal.h"
#include "rl_weak.h"
#include "rl_wire.h"

#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLMessagePort.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { RL_MP_NAME_MAX = 255, RL_MP_MIN_LIMIT = 64, RL_MP_EVENTS = 32 };
/* A client that begins a frame has this long to finish it (seconds). */
#define RL_MP_STALL_DEFAULT 10.0
/* The epoll set's data for the stall timer (the listener's is NULL). */
#define RL_MP_TIMER_TAG ((void *)1)

typedef struct rl_mp_conn {
    int fd;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    bool busy;   /* a loop is serving it (its event was taken, one-shot) */
    bool closed; /* the port was invalidated while it was busy */
    double frame_since; /* monotonic time its current frame began; 0: between frames */
    rl_wire_reader rd;
    uint8_t *out; /* reply bytes not yet written (the client reads slowly) */
    size_t out_len, out_off;
    struct rl_mp_conn *next;
} rl_mp_conn;

struct RLMessagePort {
    rl__object base;
    rl__weak *link; /* what its fd objects point at (rl_weak.h) */
    pthread_mutex_t mu; /* state below; never held while user code runs */
    bool remote;
    bool valid;
    bool inval_called;
    char *name;
    RLMessagePortContext ctx;
    RLMessagePortCallBack callout;
    RLMessagePortInvalidationCallBack inval;
    RLMessagePortAccessPolicy policy;
    uint32_t limit;
    /* local */
    int lfd, epfd, tfd;
    double stall;      /* seconds a client may take to finish a frame */
    bool stall_armed;  /* tfd is set */
    RLFileDescriptorRef fdobj;
    RLRunLoopSourceRef source;
    rl_mp_conn *conns;
    size_t dropped;      /* connections dropped for bad frames or refused credentials */
    char last_drop[128]; /* why the last one was */
    /* remote */
    pthread_mutex_t send_mu; /* one request at a time */
    int cfd;
    uint32_t seq;
    rl_wire_reader rd;
    int watch_fd; /* the silent connection of the invalidation callback, or -1 */
    RLFileDescriptorRef watch;
    pid_t pid; /* the process that made it: a fork's child does not find its parent's ports */
    struct RLMessagePort *reg_next; /* the process's registry of ports */
};

/* ---- the process's ports by name (CF returns an existing port) ---- */

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct RLMessagePort *g_reg;

static struct RLMessagePort *reg_find_locked(const char *name, bool remote) {
    for (struct RLMessagePort *p = g_reg; p; p = p->reg_next)
        if (p->remote == remote && p->valid && p->pid == getpid() && strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

static void reg_remove(struct RLMessagePort *mp) {
    pthread_mutex_lock(&g_reg_mu);
    for (struct RLMessagePort **pp = &g_reg; *pp; pp = &(*pp)->reg_next)
        if (*pp == mp) {
            *pp = mp->reg_next;
            break;
        }
    pthread_mutex_unlock(&g_reg_mu);
}

/* ---- names and sockets ---- */

static bool name_ok(const char *name, const char *fn) {
    if (!name)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL name");
    size_t n = strlen(name);
    if (n == 0 || n > RL_MP_NAME_MAX)
        return rl__fail(kRLErrorInvalidArgument, fn, "a port name has 1 to %d bytes, not %zu", RL_MP_NAME_MAX, n);
    return true;
}

/* "\0crunloop.<uid>.<name>"; a name that does not fit is replaced by its
 * 64-bit FNV-1a hash (and its first bytes, for people reading ss -x). */
static socklen_t name_address(const char *name, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    char *p = a->sun_path + 1;
    size_t room = sizeof a->sun_path - 1;
    int n = snprintf(p, room, "crunloop.%u.%s", (unsigned)geteuid(), name);
    if (n < 0 || (size_t)n >= room) {
        uint64_t h = 1469598103934665603ull;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
            h = (h ^ *c) * 1099511628211ull;
        n = snprintf(p, room, "crunloop.%u.#%016llx.%.40s", (unsigned)geteuid(), (unsigned long long)h, name);
    }
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static bool peer_creds(int fd, struct ucred *uc) {
    socklen_t len = sizeof *uc;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, uc, &len) == 0;
}

static double deadline_after(RLTimeInterval t) {
    return RLMonotonicTimeGetCurrent() + (isfinite(t) && t > 0 ? t : 0);
}

/* Milliseconds left until `deadline` (monotonic seconds), for poll. */
static int ms_left(double deadline) {
    double left = deadline - RLMonotonicTimeGetCurrent();
    if (left <= 0)
        return 0;
    return left > 1e6 ? 1000000000 : (int)ceil(left * 1000);
}

/* Writes all of buf, waiting for room until `deadline`. 0, ETIMEDOUT, or
 * the errno that broke the connection. *sent says how much went out. */
static int write_all(int fd, const uint8_t *buf, size_t len, double deadline, size_t *sent) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN) {
            *sent = off;
            return errno;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int r = poll(&p, 1, ms_left(deadline));
        if (r == 0) {
            *sent = off;
            return ETIMEDOUT;
        }
        if (r < 0 && errno != EINTR) {
            *sent = off;
            return errno;
        }
    }
    *sent = off;
    return 0;
}

/* Reads from a non-blocking fd into the reader until a frame is complete
 * (1, frame in *f), the fd has no more (0), or the stream ended or went
 * bad (-1; *why says how). */
static int read_frame(int fd, rl_wire_reader *rd, rl_wire_frame *f, const char **why) {
    for (;;) {
        uint8_t *at;
        size_t want;
        rl__wire_want(rd, &at, &want);
        ssize_t n = recv(fd, at, want, MSG_DONTWAIT);
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

/* ---- objects ---- */

static void conn_free(rl_mp_conn *c) {
    if (c->fd >= 0)
        close(c->fd);
    rl__wire_reader_free(&c->rd);
    free(c->out);
    free(c);
}

static void mp_finalize(void *obj) {
    struct RLMessagePort *mp = obj;
    /* Invalidate ran first (RLMessagePortInvalidate or the last release). */
    if (mp->ctx.release)
        mp->ctx.release(mp->ctx.info);
    rl__wire_reader_free(&mp->rd);
    if (mp->link)
        rl__weak_release(mp->link);
    free(mp->name);
    pthread_mutex_destroy(&mp->mu);
    pthread_mutex_destroy(&mp->send_mu);
}

static bool mp_can_destroy(void *obj);

static char *mp_describe(const void *obj) {
    struct RLMessagePort *mp = (struct RLMessagePort *)obj;
    pthread_mutex_lock(&mp->mu);
    char *s = NULL;
    int r = asprintf(&s, "<RLMessagePort %p>{%s \"%s\"%s, dropped %zu connection(s)%s%s}", obj,
                     mp->remote ? "remote" : "local", mp->name, mp->valid ? "" : ", invalid", mp->dropped,
                     mp->dropped ? ", last: " : "", mp->dropped ? mp->last_drop : "");
    pthread_mutex_unlock(&mp->mu);
    return r < 0 ? NULL : s;
}

static const rl__class rl__message_port_class = {"RLMessagePort", mp_finalize, mp_can_destroy, mp_describe};

static bool mp_ok(RLMessagePortRef mp, const char *fn) {
    return rl__object_check(mp, &rl__message_port_class, fn);
}

static struct RLMessagePort *mp_new(const char *name, bool remote, const char *fn) {
    struct RLMessagePort *mp = rl__object_alloc(&rl__message_port_class, sizeof *mp, fn);
    if (!mp)
        return NULL;
    pthread_mutex_init(&mp->mu, NULL);
    pthread_mutex_init(&mp->send_mu, NULL);
    mp->remote = remote;
    mp->limit = RL_WIRE_MAX_BODY;
    mp->lfd = mp->epfd = mp->tfd = mp->cfd = mp->watch_fd = -1;
    mp->stall = RL_MP_STALL_DEFAULT;
    mp->pid = getpid();
    rl__wire_reader_init(&mp->rd, mp->limit);
    mp->name = strdup(name);
    mp->link = rl__weak_new(mp);
    if (!mp->name || !mp->link) {
        RLRelease(mp); /* not valid yet: nothing to tear down */
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    mp->valid = true;
    return mp;
}

/* ---- serving (local ports, on the run loop's thread) ---- */

static void drop_conn_locked(struct RLMessagePort *mp, rl_mp_conn *c, const char *why, bool bad) {
    for (rl_mp_conn **pp = &mp->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    if (bad) {
        mp->dropped++;
        snprintf(mp->last_drop, sizeof mp->last_drop, "pid %d: %s", (int)c->pid, why);
    }
    if (mp->epfd >= 0)
        (void)epoll_ctl(mp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    conn_free(c);
}

static void rearm(struct RLMessagePort *mp, int fd, void *ptr, uint32_t events) {
    struct epoll_event ev = {.events = events | EPOLLONESHOT, .data.ptr = ptr};
    if (epoll_ctl(mp->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 && errno != EBADF && errno != ENOENT)
        rl__fail_errno(errno, "RLMessagePort", "re-arming a connection of \"%s\"", mp->name);
}

static void accept_clients(struct RLMessagePort *mp) {
    for (;;) {
        int fd = accept4(mp->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* EAGAIN, or out of fds: the listener stays armed and we come back */
        }
        struct ucred uc = {0, (uid_t)-1, (gid_t)-1};
        bool ok = peer_creds(fd, &uc);
        if (ok && uc.uid != geteuid()) {
            RLMessagePortAccessPolicy policy;
            pthread_mutex_lock(&mp->mu);
            policy = mp->policy;
            pthread_mutex_unlock(&mp->mu);
            ok = policy && policy(mp, uc.uid, uc.gid, uc.pid, mp->ctx.info);
        }
        rl_mp_conn *c = ok ? calloc(1, sizeof *c) : NULL;
        pthread_mutex_lock(&mp->mu);
        if (!c || !mp->valid) {
            if (!ok) {
                mp->dropped++;
                snprintf(mp->last_drop, sizeof mp->last_drop, "pid %d: uid %u refused", (int)uc.pid,
                         (unsigned)uc.uid);
            }
            pthread_mutex_unlock(&mp->mu);
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->uid = uc.uid;
        c->gid = uc.gid;
        c->pid = uc.pid;
        rl__wire_reader_init(&c->rd, mp->limit);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
        if (epoll_ctl(mp->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            pthread_mutex_unlock(&mp->mu);
            conn_free(c);
            continue;
        }
        c->next = mp->conns;
        mp->conns = c;
        pthread_mutex_unlock(&mp->mu);
    }
}

/* Queues (or writes) a reply frame on c. False: the connection broke. */
static bool send_reply(rl_mp_conn *c, int32_t msgid, uint32_t seq, RLDataRef reply) {
    rl_wire_comp comp = {RL_WIRE_DATA, 0, NULL};
    uint32_t n = 0;
    if (reply) {
        comp.len = (uint32_t)RLDataGetLength(reply);
        comp.bytes = RLDataGetBytePtr(reply);
        n = 1;
    }
    size_t len = rl__wire_size(&comp, n);
    uint8_t *buf = malloc(len);
    if (!buf)
        return false;
    rl__wire_encode(buf, RL_WIRE_REPLY, msgid, seq, &comp, n);
    if (c->out) { /* earlier replies still wait: keep the order */
        uint8_t *more = realloc(c->out, c->out_len + len);
        if (!more) {
            free(buf);
            return false;
        }
        memcpy(more + c->out_len, buf, len);
        c->out = more;
        c->out_len += len;
        free(buf);
        return true;
    }
    size_t sent = 0;
    int err = write_all(c->fd, buf, len, 0, &sent);
    if (err && err != ETIMEDOUT) {
        free(buf);
        return false;
    }
    if (sent < len) {
        memmove(buf, buf + sent, len - sent);
        c->out = buf;
        c->out_len = len - sent;
        c->out_off = 0;
    } else {
        free(buf);
    }
    return true;
}

static bool flush_out(rl_mp_conn *c) {
    size_t sent = 0;
    int err = write_all(c->fd, c->out + c->out_off, c->out_len - c->out_off, 0, &sent);
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

static void release_owner(void *body) { free(body); }

/* Runs one request; false if the connection must go. */
static bool dispatch(struct RLMessagePort *mp, rl_mp_conn *c, rl_wire_frame *f, const char **why) {
    if (f->h.kind == RL_WIRE_HELLO) { /* a remote port's silent watch connection */
        rl__wire_frame_free(f);
        return true;
    }
    if ((f->h.kind != RL_WIRE_REQUEST && f->h.kind != RL_WIRE_ONEWAY) || f->h.ncomp > 1 ||
        (f->h.ncomp == 1 && f->comps[0].type != RL_WIRE_DATA)) {
        *why = "unexpected frame for a message port";
        rl__wire_frame_free(f);
        return false;
    }
    RLDataRef data = NULL;
    if (f->h.ncomp == 1) {
        /* The frame's body becomes the data's bytes: no copy. */
        data = rl__data_slice(f->comps[0].bytes, f->comps[0].len, f->body, NULL, release_owner);
        if (!data) {
            *why = "out of memory";
            rl__wire_frame_free(f);
            return false;
        }
        f->body = NULL;
    }
    rl__wire_frame_free(f);
    RLMessagePortCallBack callout = mp->callout;
    RLDataRef reply = callout ? callout(mp, f->h.msgid, data, mp->ctx.info) : NULL;
    if (data)
        RLRelease(data);
    bool ok = true;
    if (f->h.kind == RL_WIRE_REQUEST) {
        ok = send_reply(c, f->h.msgid, f->h.seq, reply);
        if (!ok)
            *why = "could not send the reply";
    }
    if (reply)
        RLRelease(reply);
    return ok;
}

static void arm_stall_locked(struct RLMessagePort *mp, double at) {
    double left = at - RLMonotonicTimeGetCurrent();
    if (left < 1e-3)
        left = 1e-3;
    struct itimerspec its = {{0, 0}, {(time_t)left, (long)((left - floor(left)) * 1e9)}};
    if (timerfd_settime(mp->tfd, 0, &its, NULL) == 0)
        mp->stall_armed = true;
}

/* The stall timer fired: drop every client that began a frame longer ago
 * than the port allows, and set the timer for the next one. */
static void drop_stalled(struct RLMessagePort *mp) {
    uint64_t ticks;
    (void)!read(mp->tfd, &ticks, sizeof ticks);
    double now = RLMonotonicTimeGetCurrent(), next = INFINITY;
    pthread_mutex_lock(&mp->mu);
    mp->stall_armed = false;
    for (rl_mp_conn *c = mp->conns, *nx; c; c = nx) {
        nx = c->next;
        if (c->busy || c->frame_since == 0)
            continue;
        if (now - c->frame_since >= mp->stall)
            drop_conn_locked(mp, c, "stalled mid-frame", true);
        else if (c->frame_since + mp->stall < next)
            next = c->frame_since + mp->stall;
    }
    if (mp->valid) {
        if (isfinite(next))
            arm_stall_locked(mp, next);
        rearm(mp, mp->tfd, RL_MP_TIMER_TAG, EPOLLIN);
    }
    pthread_mutex_unlock(&mp->mu);
}

static void serve_conn(struct RLMessagePort *mp, rl_mp_conn *c, uint32_t events) {
    const char *why = NULL;
    pthread_mutex_lock(&mp->mu);
    bool keep = !c->closed, bad = false;
    pthread_mutex_unlock(&mp->mu);
    if (c->out && (events & EPOLLOUT))
        keep = flush_out(c);
    /* At most a few frames per wake, so one chatty client cannot starve
     * the loop's other sources; the one-shot re-arm brings us back. */
    for (int i = 0; keep && i < 16 && !c->out; i++) {
        rl_wire_frame f;
        int r = read_frame(c->fd, &c->rd, &f, &why);
        if (r == 0)
            break;
        if (r < 0) {
            keep = false;
            bad = !rl__wire_idle(&c->rd) || strcmp(why, "peer closed the connection") != 0;
            break;
        }
        if (!dispatch(mp, c, &f, &why)) {
            keep = false;
            bad = true;
        }
    }
    pthread_mutex_lock(&mp->mu);
    c->busy = false;
    if (!keep || c->closed || !mp->valid) {
        drop_conn_locked(mp, c, why ? why : "closed", bad);
    } else {
        if (rl__wire_idle(&c->rd)) {
            c->frame_since = 0;
        } else if (c->frame_since == 0) {
            c->frame_since = RLMonotonicTimeGetCurrent();
            if (!mp->stall_armed)
                arm_stall_locked(mp, c->frame_since + mp->stall);
        }
        rearm(mp, c->fd, c, c->out ? EPOLLIN | EPOLLOUT : EPOLLIN);
    }
    pthread_mutex_unlock(&mp->mu);
}

static void port_ready(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    /* Retained: a callout may invalidate and release the port. */
    struct RLMessagePort *mp = rl__weak_get(info);
    if (!mp)
        return;
    struct epoll_event ev[RL_MP_EVENTS];
    int n = epoll_wait(mp->epfd, ev, RL_MP_EVENTS, 0);
    /* Claim every connection of the batch first: a callout that
     * invalidates the port then leaves them to us instead of freeing them
     * under our feet. */
    pthread_mutex_lock(&mp->mu);
    for (int i = 0; i < n; i++)
        if (ev[i].data.ptr && ev[i].data.ptr != RL_MP_TIMER_TAG)
            ((rl_mp_conn *)ev[i].data.ptr)->busy = true;
    pthread_mutex_unlock(&mp->mu);
    for (int i = 0; i < n; i++) {
        if (ev[i].data.ptr == NULL) {
            accept_clients(mp);
            pthread_mutex_lock(&mp->mu);
            if (mp->valid)
                rearm(mp, mp->lfd, NULL, EPOLLIN);
            pthread_mutex_unlock(&mp->mu);
            continue;
        }
        if (ev[i].data.ptr == RL_MP_TIMER_TAG)
            drop_stalled(mp);
        else
            serve_conn(mp, ev[i].data.ptr, ev[i].events);
    }
    /* One-shot per enable (RLFileDescriptor.h): listen for the next. */
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    RLRelease(mp);
}

/* ---- public: creating ---- */

RLMessagePortRef RLMessagePortCreateLocal(RLAllocatorRef allocator, const char *name, RLMessagePortCallBack callout,
                                          const RLMessagePortContext *context, bool *shouldFreeInfo) {
    if (shouldFreeInfo)
        *shouldFreeInfo = true;
    if (!name_ok(name, __func__))
        return NULL;
    if (context && context->version != 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, "context version %ld is not supported (use 0)",
                        (long)context->version), NULL;
    pthread_mutex_lock(&g_reg_mu);
    struct RLMessagePort *old = reg_find_locked(name, false);
    if (old) { /* as CF: the process's port of that name, retained */
        RLRetain(old);
        pthread_mutex_unlock(&g_reg_mu);
        return old;
    }
    struct RLMessagePort *mp = mp_new(name, false, __func__);
    if (!mp) {
        pthread_mutex_unlock(&g_reg_mu);
        return NULL;
    }
    struct sockaddr_un a;
    socklen_t alen = name_address(name, &a);
    mp->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    mp->epfd = epoll_create1(EPOLL_CLOEXEC);
    mp->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    int err = 0;
    if (mp->lfd < 0 || mp->epfd < 0 || mp->tfd < 0)
        err = errno;
    else if (bind(mp->lfd, (struct sockaddr *)&a, alen) < 0 || listen(mp->lfd, SOMAXCONN) < 0)
        err = errno;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = NULL};
    if (!err && epoll_ctl(mp->epfd, EPOLL_CTL_ADD, mp->lfd, &ev) < 0)
        err = errno;
    struct epoll_event tev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = RL_MP_TIMER_TAG};
    if (!err && epoll_ctl(mp->epfd, EPOLL_CTL_ADD, mp->tfd, &tev) < 0)
        err = errno;
    if (err) {
        pthread_mutex_unlock(&g_reg_mu);
        if (mp->lfd >= 0)
            close(mp->lfd);
        if (mp->epfd >= 0)
            close(mp->epfd);
        if (mp->tfd >= 0)
            close(mp->tfd);
        mp->lfd = mp->epfd = mp->tfd = -1;
        mp->valid = false;
        RLRelease(mp);
        if (err == EADDRINUSE)
            return rl__fail(kRLErrorExists, __func__, "the name \"%s\" is taken by another process's port", name),
                   NULL;
        return rl__fail_errno(err, __func__, "cannot listen as \"%s\"", name), NULL;
    }
    mp->callout = callout;
    if (context)
        mp->ctx = *context;
    mp->reg_next = g_reg;
    g_reg = mp;
    pthread_mutex_unlock(&g_reg_mu);
    /* The retain callback is user code: called with no lock held. The
     * port has no source yet, so nothing calls out with info meanwhile. */
    if (mp->ctx.retain)
        mp->ctx.info = (void *)mp->ctx.retain(mp->ctx.info);
    if (shouldFreeInfo)
        *shouldFreeInfo = false;
    return mp;
}

/* Connects to `name`'s local port and checks that its owner is this user. */
static int connect_to(const char *name, const char *fn) {
    struct sockaddr_un a;
    socklen_t alen = name_address(name, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return rl__fail_errno(errno, fn, "socket"), -1;
    while (connect(fd, (struct sockaddr *)&a, alen) < 0) {
        if (errno == EINTR)
            continue;
        int err = errno;
        close(fd);
        if (err == ECONNREFUSED || err == ENOENT)
            return rl__fail(kRLErrorNotFound, fn, "no message port named \"%s\"", name), -1;
        return rl__fail_errno(err, fn, "cannot connect to \"%s\"", name), -1;
    }
    struct ucred uc;
    if (!peer_creds(fd, &uc) || uc.uid != geteuid()) {
        close(fd);
        return rl__fail(kRLErrorPermission, fn, "the port named \"%s\" belongs to another user (uid %u); refused",
                        name, (unsigned)uc.uid), -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        int err = errno;
        close(fd);
        return rl__fail_errno(err, fn, "fcntl"), -1;
    }
    return fd;
}

RLMessagePortRef RLMessagePortCreateRemote(RLAllocatorRef allocator, const char *name) {
    if (!name_ok(name, __func__))
        return NULL;
    pthread_mutex_lock(&g_reg_mu);
    struct RLMessagePort *old = reg_find_locked(name, true);
    if (old) {
        RLRetain(old);
        pthread_mutex_unlock(&g_reg_mu);
        return old;
    }
    pthread_mutex_unlock(&g_reg_mu);
    int fd = connect_to(name, __func__);
    if (fd < 0)
        return NULL;
    struct RLMessagePort *mp = mp_new(name, true, __func__);
    if (!mp) {
        close(fd);
        return NULL;
    }
    mp->cfd = fd;
    pthread_mutex_lock(&g_reg_mu);
    mp->reg_next = g_reg;
    g_reg = mp;
    pthread_mutex_unlock(&g_reg_mu);
    return mp;
}

/* ---- public: state ---- */

bool RLMessagePortIsRemote(RLMessagePortRef mp) { return mp_ok(mp, __func__) && mp->remote; }

const char *RLMessagePortGetName(RLMessagePortRef mp) { return mp_ok(mp, __func__) ? mp->name : NULL; }

bool RLMessagePortGetContext(RLMessagePortRef mp, RLMessagePortContext *context) {
    if (!mp_ok(mp, __func__))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL context");
    *context = mp->ctx;
    return true;
}

bool RLMessagePortIsValid(RLMessagePortRef mp) {
    if (!mp_ok(mp, __func__))
        return false;
    pthread_mutex_lock(&mp->mu);
    bool v = mp->valid;
    pthread_mutex_unlock(&mp->mu);
    return v;
}

RLMessagePortInvalidationCallBack RLMessagePortGetInvalidationCallBack(RLMessagePortRef mp) {
    if (!mp_ok(mp, __func__))
        return NULL;
    pthread_mutex_lock(&mp->mu);
    RLMessagePortInvalidationCallBack cb = mp->inval;
    pthread_mutex_unlock(&mp->mu);
    return cb;
}

bool RLMessagePortSetAccessPolicy(RLMessagePortRef mp, RLMessagePortAccessPolicy policy) {
    if (!mp_ok(mp, __func__))
        return false;
    if (mp->remote)
        return rl__fail(kRLErrorInvalidState, __func__, "a remote port has no access policy (it connects, it does not accept)");
    pthread_mutex_lock(&mp->mu);
    mp->policy = policy;
    pthread_mutex_unlock(&mp->mu);
    return true;
}

bool RLMessagePortSetMessageLimit(RLMessagePortRef mp, RLIndex bytes) {
    if (!mp_ok(mp, __func__))
        return false;
    if (bytes < RL_MP_MIN_LIMIT || bytes > (RLIndex)RL_WIRE_MAX_BODY)
        return rl__fail(kRLErrorInvalidArgument, __func__, "limit %ld is outside [%d, %u]", (long)bytes,
                        RL_MP_MIN_LIMIT, RL_WIRE_MAX_BODY);
    pthread_mutex_lock(&mp->mu);
    mp->limit = (uint32_t)bytes;
    /* Frames already begun keep the limit they were checked against. */
    mp->rd.max_body = mp->limit;
    for (rl_mp_conn *c = mp->conns; c; c = c->next)
        c->rd.max_body = mp->limit;
    pthread_mutex_unlock(&mp->mu);
    return true;
}

bool RLMessagePortSetStallTimeout(RLMessagePortRef mp, RLTimeInterval seconds) {
    if (!mp_ok(mp, __func__))
        return false;
    if (mp->remote)
        return rl__fail(kRLErrorInvalidState, __func__, "a remote port has no clients to time out");
    if (!(seconds > 0) || !isfinite(seconds))
        return rl__fail(kRLErrorInvalidArgument, __func__, "stall timeout %g is not a positive number of seconds",
                        seconds);
    pthread_mutex_lock(&mp->mu);
    mp->stall = seconds;
    double next = INFINITY;
    for (rl_mp_conn *c = mp->conns; c; c = c->next)
        if (c->frame_since && c->frame_since + seconds < next)
            next = c->frame_since + seconds;
    if (mp->valid && isfinite(next))
        arm_stall_locked(mp, next);
    pthread_mutex_unlock(&mp->mu);
    return true;
}

/* ---- invalidation ---- */

/* Tears the port down; calls the invalidation callback once (outside the
 * lock). Safe from any thread, and from the port's own callouts. */
static void invalidate(struct RLMessagePort *mp) {
    pthread_mutex_lock(&mp->mu);
    if (!mp->valid) {
        pthread_mutex_unlock(&mp->mu);
        return;
    }
    mp->valid = false;
    RLFileDescriptorRef fdobj = mp->fdobj, watch = mp->watch;
    RLRunLoopSourceRef source = mp->source;
    mp->fdobj = mp->watch = NULL;
    mp->source = NULL;
    for (rl_mp_conn *c = mp->conns, *next; c; c = next) {
        next = c->next;
        if (c->busy) { /* its loop drops it when it is done with it */
            c->closed = true;
            shutdown(c->fd, SHUT_RDWR);
            continue;
        }
        (void)epoll_ctl(mp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        conn_free(c);
    }
    mp->conns = NULL;
    if (mp->lfd >= 0)
        close(mp->lfd); /* the name is free from here on */
    mp->lfd = -1;
    if (mp->cfd >= 0)
        shutdown(mp->cfd, SHUT_RDWR); /* a sender waiting on it wakes up; it is closed with send_mu held */
    RLMessagePortInvalidationCallBack cb = mp->inval;
    bool call = cb && !mp->inval_called;
    mp->inval_called = mp->inval_called || call;
    pthread_mutex_unlock(&mp->mu);
    rl__weak_cut(mp->link);
    reg_remove(mp);
    if (fdobj) {
        RLFileDescriptorInvalidate(fdobj); /* removes its source from every loop */
        RLRelease(fdobj);
    }
    if (watch) {
        RLFileDescriptorInvalidate(watch);
        RLRelease(watch);
    }
    if (source)
        RLRelease(source);
    pthread_mutex_lock(&mp->send_mu);
    if (mp->cfd >= 0)
        close(mp->cfd);
    mp->cfd = -1;
    pthread_mutex_unlock(&mp->send_mu);
    if (call)
        cb(mp, mp->ctx.info);
}

static bool mp_can_destroy(void *obj) {
    struct RLMessagePort *mp = obj;
    invalidate(mp);
    /* Connections a loop was serving are freed by it; it holds a reference
     * on the port meanwhile, so none is left here. */
    if (mp->epfd >= 0)
        close(mp->epfd);
    if (mp->tfd >= 0)
        close(mp->tfd);
    mp->epfd = mp->tfd = -1;
    return true;
}

bool RLMessagePortInvalidate(RLMessagePortRef mp) {
    if (!mp_ok(mp, __func__))
        return false;
    RLRetain(mp);
    invalidate(mp);
    RLRelease(mp);
    return true;
}

static void watch_ready(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    char b[64];
    ssize_t n = recv(RLFileDescriptorGetNativeDescriptor(f), b, sizeof b, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
        RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
        return; /* nothing is ever sent on it; ignore */
    }
    struct RLMessagePort *mp = rl__weak_get(info);
    if (!mp)
        return;
    invalidate(mp);
    RLRelease(mp);
}

bool RLMessagePortSetInvalidationCallBack(RLMessagePortRef mp, RLMessagePortInvalidationCallBack callout) {
    if (!mp_ok(mp, __func__))
        return false;
    pthread_mutex_lock(&mp->mu);
    if (!mp->valid) {
        pthread_mutex_unlock(&mp->mu);
        if (callout) /* CF calls it at once on an invalid port */
            callout(mp, mp->ctx.info);
        return true;
    }
    mp->inval = callout;
    bool want_watch = mp->remote && callout && mp->watch_fd < 0;
    pthread_mutex_unlock(&mp->mu);
    if (!want_watch)
        return true;
    int fd = connect_to(mp->name, __func__);
    if (fd < 0) { /* the local port is gone already */
        RLRetain(mp);
        invalidate(mp);
        RLRelease(mp);
        return true;
    }
    uint8_t hello[RL_WIRE_HEADER];
    rl__wire_encode(hello, RL_WIRE_HELLO, 0, 0, NULL, 0);
    size_t sent;
    (void)write_all(fd, hello, sizeof hello, deadline_after(1), &sent);
    RLFileDescriptorContext ctx = {0, mp->link, rl__weak_retain, rl__weak_release, NULL};
    RLFileDescriptorRef w = RLFileDescriptorCreate(NULL, fd, true, watch_ready, &ctx);
    RLRunLoopSourceRef s = w ? RLFileDescriptorCreateRunLoopSource(NULL, w, 0) : NULL;
    if (!s) {
        if (w) {
            RLFileDescriptorInvalidate(w);
            RLRelease(w);
        } else {
            close(fd);
        }
        return false;
    }
    RLFileDescriptorEnableCallBacks(w, kRLFileDescriptorReadCallBack);
    pthread_mutex_lock(&mp->mu);
    bool still = mp->valid && mp->watch == NULL;
    if (still) {
        mp->watch = w;
        mp->watch_fd = fd;
    }
    pthread_mutex_unlock(&mp->mu);
    if (still)
        RLRunLoopAddSource(RLRunLoopGetCurrent(), s, kRLRunLoopCommonModes);
    else {
        RLFileDescriptorInvalidate(w);
        RLRelease(w);
    }
    RLRelease(s);
    return true;
}

/* ---- run-loop source ---- */

RLRunLoopSourceRef RLMessagePortCreateRunLoopSource(RLAllocatorRef allocator, RLMessagePortRef mp, RLIndex order) {
    if (!mp_ok(mp, __func__))
        return NULL;
    if (mp->remote)
        return rl__fail(kRLErrorInvalidState, __func__, "a remote port has no run-loop source (only local ports receive)"),
               NULL;
    pthread_mutex_lock(&mp->mu);
    if (!mp->valid) {
        pthread_mutex_unlock(&mp->mu);
        return rl__fail(kRLErrorInvalidObject, __func__, "the port \"%s\" is invalid", mp->name), NULL;
    }
    if (mp->source) {
        RLRunLoopSourceRef s = (RLRunLoopSourceRef)RLRetain(mp->source);
        pthread_mutex_unlock(&mp->mu);
        return s;
    }
    pthread_mutex_unlock(&mp->mu);
    RLFileDescriptorContext ctx = {0, mp->link, rl__weak_retain, rl__weak_release, NULL};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, mp->epfd, false, port_ready, &ctx);
    RLRunLoopSourceRef s = f ? RLFileDescriptorCreateRunLoopSource(NULL, f, order) : NULL;
    if (!s) {
        if (f)
            RLRelease(f);
        return NULL;
    }
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    pthread_mutex_lock(&mp->mu);
    if (mp->source || !mp->valid) { /* another thread won, or it was invalidated meanwhile */
        RLRunLoopSourceRef other = mp->source ? (RLRunLoopSourceRef)RLRetain(mp->source) : NULL;
        pthread_mutex_unlock(&mp->mu);
        RLFileDescriptorInvalidate(f);
        RLRelease(f);
        RLRelease(s);
        if (!other)
            rl__fail(kRLErrorInvalidObject, __func__, "the port \"%s\" was invalidated", mp->name);
        return other;
    }
    mp->fdobj = f;
    mp->source = (RLRunLoopSourceRef)RLRetain(s);
    pthread_mutex_unlock(&mp->mu);
    return s;
}

/* ---- sending ---- */

/* The send failed half-way or the connection broke: the stream cannot be
 * trusted any more, so the port becomes invalid. */
static int32_t broke(struct RLMessagePort *mp, int32_t code, const char *fn, const char *why) {
    pthread_mutex_unlock(&mp->send_mu);
    RLRetain(mp);
    invalidate(mp);
    RLRelease(mp);
    rl__fail(code == kRLMessagePortSendTimeout ? kRLErrorTimedOut : kRLErrorInvalidState, fn,
             "port \"%s\": %s", mp->name, why);
    return code;
}

int32_t RLMessagePortSendRequest(RLMessagePortRef mp, int32_t msgid, RLDataRef data, RLTimeInterval sendTimeout,
                                 RLTimeInterval rcvTimeout, RLRunLoopMode replyMode, RLDataRef *returnData) {
    if (returnData)
        *returnData = NULL;
    if (!mp_ok(mp, __func__))
        return kRLMessagePortIsInvalid;
    if (!mp->remote) {
        rl__fail(kRLErrorInvalidState, __func__, "\"%s\" is a local port: send through a remote port", mp->name);
        return kRLMessagePortIsInvalid;
    }
    if (data && !rl__is_data(data)) {
        rl__fail(kRLErrorInvalidObject, __func__, "data %p is not a live RLData", (const void *)data);
        return kRLMessagePortTransportError;
    }
    if (isnan(sendTimeout) || isnan(rcvTimeout)) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NaN timeout");
        return kRLMessagePortTransportError;
    }
    double send_deadline = deadline_after(sendTimeout);
    double rcv_deadline = deadline_after(rcvTimeout);
    size_t len = data ? (size_t)RLDataGetLength(data) : 0;
    if (len > mp->limit) {
        rl__fail(kRLErrorInvalidArgument, __func__, "%zu bytes exceed the port's limit of %u", len, mp->limit);
        return kRLMessagePortTransportError;
    }
    /* Wait for our turn no longer than the send may take. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wait = send_deadline - RLMonotonicTimeGetCurrent();
    if (wait > 0) {
        ts.tv_sec += (time_t)wait;
        ts.tv_nsec += (long)((wait - floor(wait)) * 1e9);
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
    }
    int lr = wait > 0 ? pthread_mutex_timedlock(&mp->send_mu, &ts) : pthread_mutex_trylock(&mp->send_mu);
    if (lr) {
        rl__fail(kRLErrorTimedOut, __func__, "port \"%s\": another request is still in flight", mp->name);
        return kRLMessagePortSendTimeout;
    }
    if (mp->cfd < 0) {
        pthread_mutex_unlock(&mp->send_mu);
        rl__fail(kRLErrorInvalidObject, __func__, "port \"%s\" is invalid", mp->name);
        return kRLMessagePortIsInvalid;
    }
    bool want_reply = replyMode != NULL;
    uint32_t seq = want_reply ? ++mp->seq : 0;
    if (want_reply && seq == 0)
        seq = ++mp->seq; /* 0 means "no reply" */
    rl_wire_comp comp = {RL_WIRE_DATA, (uint32_t)len, data ? RLDataGetBytePtr(data) : NULL};
    size_t flen = rl__wire_size(&comp, data ? 1 : 0);
    uint8_t *frame = malloc(flen);
    if (!frame) {
        pthread_mutex_unlock(&mp->send_mu);
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
        return kRLMessagePortTransportError;
    }
    rl__wire_encode(frame, want_reply ? RL_WIRE_REQUEST : RL_WIRE_ONEWAY, msgid, seq, &comp, data ? 1 : 0);
    size_t sent = 0;
    int err = write_all(mp->cfd, frame, flen, send_deadline, &sent);
    free(frame);
    if (err == ETIMEDOUT && sent == 0) {
        pthread_mutex_unlock(&mp->send_mu);
        rl__fail(kRLErrorTimedOut, __func__, "port \"%s\": the receiver is not reading", mp->name);
        return kRLMessagePortSendTimeout;
    }
    if (err == ETIMEDOUT)
        return broke(mp, kRLMessagePortSendTimeout, __func__, "send timed out part-way (the port is now invalid)");
    if (err)
        return broke(mp, kRLMessagePortBecameInvalidError, __func__, strerror(err));
    if (!want_reply) {
        pthread_mutex_unlock(&mp->send_mu);
        return kRLMessagePortSuccess;
    }
    if (!(rcvTimeout > 0)) { /* sent; the reply is not waited for (dropped when it comes) */
        pthread_mutex_unlock(&mp->send_mu);
        rl__fail(kRLErrorTimedOut, __func__, "port \"%s\": no time to wait for the reply", mp->name);
        return kRLMessagePortReceiveTimeout;
    }
    for (;;) {
        rl_wire_frame f;
        const char *why = NULL;
        int r = read_frame(mp->cfd, &mp->rd, &f, &why);
        if (r < 0)
            return broke(mp, kRLMessagePortBecameInvalidError, __func__, why);
        if (r == 1) {
            if (f.h.kind != RL_WIRE_REPLY || f.h.ncomp > 1) {
                rl__wire_frame_free(&f);
                return broke(mp, kRLMessagePortTransportError, __func__, "unexpected frame from the local port");
            }
            if (f.h.seq != seq) { /* the late reply of a request that timed out */
                rl__wire_frame_free(&f);
                continue;
            }
            RLDataRef reply = NULL;
            if (f.h.ncomp == 1) {
                reply = rl__data_slice(f.comps[0].bytes, f.comps[0].len, f.body, NULL, release_owner);
                if (reply)
                    f.body = NULL;
            }
            rl__wire_frame_free(&f);
            pthread_mutex_unlock(&mp->send_mu);
            if (returnData)
                *returnData = reply;
            else if (reply)
                RLRelease(reply);
            return kRLMessagePortSuccess;
        }
        struct pollfd p = {mp->cfd, POLLIN, 0};
        int left = ms_left(rcv_deadline);
        if (left == 0 || poll(&p, 1, left) == 0) {
            pthread_mutex_unlock(&mp->send_mu);
            rl__fail(kRLErrorTimedOut, __func__, "port \"%s\": no reply in time", mp->name);
            return kRLMessagePortReceiveTimeout;
        }
    }
}

/* fork(): the registry's lock is held across it (rl_fork.c; it is taken
 * before the object pool's, under which a port is made), so a child forked
 * while another thread registers a port finds the list consistent and the
 * lock free. */
static void fork_prepare(void) { pthread_mutex_lock(&g_reg_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_reg_mu); }
static void fork_child(void) { pthread_mutex_unlock(&g_reg_mu); }

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_MSGPORT, fork_prepare, fork_parent, fork_child);
}
