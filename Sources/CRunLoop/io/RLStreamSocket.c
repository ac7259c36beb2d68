/* RLStreamSocket.c — socket streams: a read and a write stream over one
 * TCP connection, to a host and port (RLStreamCreatePairWithSocketToHost),
 * to the address of a socket signature (RLStreamCreatePairWithPeerSocket-
 * Signature) or over a socket the caller already has
 * (RLStreamCreatePairWithSocket).
 *
 * The two streams share one connection record. The first Open starts the
 * connection: a numeric address is used at once, a host name goes to the
 * resolver thread (rl_resolver.h), and the connect itself is non-blocking,
 * trying each address in turn; no run loop's thread ever waits for either.
 * Once connected, one fd object on the socket, whose source sits in every
 * (loop, mode) either stream is scheduled in, turns the socket's readiness
 * into the streams' HasBytesAvailable and CanAcceptBytes events.
 *
 * Locks: the connection lock comes before either stream's lock and before
 * the run loop's locks (fd object calls, adding and removing its source);
 * nothing takes it while holding a stream lock (docs/locking.md). */
#include "RLDataInternal.h"
#include "RLSocketInternal.h"
#include "RLStreamInternal.h"
#include "rl_resolver.h"
#include "RLLockDebugInternal.h"
#include "rl_waitpolicy.h"

#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLSocket.h>
#include <crunloop/RLStream.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct conn {
    pthread_mutex_t lock; /* everything below but refs and the lookup's link */
    _Atomic long refs;    /* one per stream, one while a lookup is queued */
    int fd;
    bool own_fd; /* closed here when both streams are gone (kRLStreamPropertyShouldCloseNativeSocket) */
    bool started, connecting, done;
    int conn_err; /* 0 or errno / EAI code once done */
    RLIndex err_domain;
    struct addrinfo *addrs, *next_addr;
    rl__lookup lookup;
    char *host, service[16];
    /* A pair to a socket signature: the one "address" it tries (its
     * ai_addr points at sig_addr); no lookup. */
    bool sig;
    struct addrinfo sig_ai;
    struct sockaddr_storage sig_addr;
    RLFileDescriptorRef fdo;
    RLRunLoopSourceRef fdsrc;
    rl__stream *reader, *writer; /* unowned; cleared by their finalize */
} conn;

typedef struct sock_end {
    conn *c;
} sock_end;

static conn *conn_of(rl__stream *s) { return ((sock_end *)s->state)->c; }

static void conn_lock(conn *c) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_STREAM_SOCKET, __builtin_return_address(0));
    pthread_mutex_lock(&c->lock);
}

static void conn_unlock(conn *c) {
    pthread_mutex_unlock(&c->lock);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_STREAM_SOCKET);
}

static void conn_release(conn *c) {
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->fdo) {
        RLFileDescriptorInvalidate(c->fdo);
        RLRelease(c->fdo);
    }
    if (c->fdsrc)
        RLRelease(c->fdsrc);
    if (c->own_fd && c->fd >= 0)
        close(c->fd);
    if (c->addrs)
        freeaddrinfo(c->addrs);
    free(c->host);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- connecting ---- */

static void conn_on_fd(RLFileDescriptorRef f, RLOptionFlags types, void *info);

/* Makes the fd object once the socket exists (c->lock held) and adds its
 * source wherever either stream is scheduled. */
static void conn_attach_fd_locked(conn *c) {
    if (c->fdo || c->fd < 0)
        return;
    RLFileDescriptorContext fc = {0, c, NULL, NULL, NULL};
    c->fdo = RLFileDescriptorCreate(NULL, c->fd, false, conn_on_fd, &fc);
    if (!c->fdo)
        return;
    c->fdsrc = RLFileDescriptorCreateRunLoopSource(NULL, c->fdo, 0);
    if (c->reader)
        rl__stream_add_to_schedules(c->reader, c->fdsrc);
    if (c->writer)
        rl__stream_add_to_schedules(c->writer, c->fdsrc);
}

/* The pair makes its socket itself (to a host or a signature's address),
 * rather than being given one. */
static bool conn_dials(const conn *c) { return c->host || c->sig; }

/* Reports the connection's outcome to each opened stream (c->lock held). */
static void conn_finish_locked(conn *c, RLIndex domain, int err) {
    c->connecting = false;
    c->done = true;
    c->conn_err = err;
    c->err_domain = domain;
    rl__stream *both[2] = {c->reader, c->writer};
    for (int k = 0; k < 2; k++) {
        if (!both[k])
            continue;
        rl__stream_lock(both[k]);
        rl__stream_open_finished_locked(both[k], domain, err);
        rl__stream_unlock(both[k]);
    }
    if (!err && c->fdo)
        RLFileDescriptorEnableCallBacks(c->fdo, kRLFileDescriptorReadCallBack | kRLFileDescriptorWriteCallBack);
}

/* Starts a non-blocking connect to the next address (c->lock held). */
static void conn_try_next_locked(conn *c, int last_err) {
    while (c->next_addr) {
        struct addrinfo *a = c->next_addr;
        c->next_addr = a->ai_next;
        if (c->fdo) {
            RLFileDescriptorInvalidate(c->fdo);
            RLRelease(c->fdo);
            c->fdo = NULL;
            RLRelease(c->fdsrc);
            c->fdsrc = NULL;
        }
        if (c->fd >= 0)
            close(c->fd);
        c->fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (c->fd < 0) {
            last_err = errno;
            continue;
        }
        if (connect(c->fd, a->ai_addr, a->ai_addrlen) == 0) {
            conn_attach_fd_locked(c);
            conn_finish_locked(c, 0, 0);
            return;
        }
        if (errno == EINPROGRESS) {
            c->connecting = true;
            conn_attach_fd_locked(c);
            if (c->fdo)
                RLFileDescriptorEnableCallBacks(c->fdo, kRLFileDescriptorWriteCallBack);
            return;
        }
        last_err = errno;
    }
    conn_finish_locked(c, kRLStreamErrorDomainPOSIX, last_err ? last_err : ECONNREFUSED);
}

/* Checks a connect in progress, waiting at most timeout_ms (c->lock held). */
static void conn_check_connect_locked(conn *c, int timeout_ms) {
    if (!c->connecting)
        return;
    struct pollfd p = {c->fd, POLLOUT, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0)
        return;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err)
        conn_try_next_locked(c, err);
    else
        conn_finish_locked(c, 0, 0);
}

/* The resolver's answer, on its thread; drops the lookup's reference. */
static void conn_resolved(rl__lookup *l, int eai, struct addrinfo *res) {
    conn *c = (conn *)((char *)l - offsetof(conn, lookup));
    conn_lock(c);
    if (eai != 0) {
        conn_finish_locked(c, kRLStreamErrorDomainNetDB, eai);
    } else {
        c->addrs = res;
        c->next_addr = res;
        conn_try_next_locked(c, 0);
    }
    conn_unlock(c);
    conn_release(c);
}

/* First Open of either stream: resolve (numeric hosts at once) and connect
 * (c->lock held). */
static void conn_start_locked(conn *c) {
    if (c->started)
        return;
    c->started = true;
    if (c->sig) {
        c->next_addr = &c->sig_ai;
        conn_try_next_locked(c, 0);
        return;
    }
    if (!c->host) { /* an existing socket */
        conn_attach_fd_locked(c);
        conn_finish_locked(c, 0, 0);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
    struct addrinfo *res = NULL;
    if (getaddrinfo(c->host, c->service, &hints, &res) == 0) {
        c->addrs = res;
        c->next_addr = res;
        conn_try_next_locked(c, 0);
        return;
    }
    c->lookup = (rl__lookup){.host = c->host, .service = c->service, .done = conn_resolved};
    atomic_fetch_add(&c->refs, 1);
    int err = rl__resolver_lookup(&c->lookup);
    if (err) {
        atomic_fetch_sub(&c->refs, 1); /* a stream holds another: never the last */
        conn_finish_locked(c, kRLStreamErrorDomainPOSIX, err);
    }
}

/* ---- the streams' operations ---- */

static int sock_open(rl__stream *s, const char *fn) {
    (void)fn;
    conn *c = conn_of(s);
    conn_lock(c);
    if (!c->started) {
        conn_start_locked(c);
    } else if (c->done) {
        rl__stream_lock(s);
        rl__stream_open_finished_locked(s, c->err_domain, c->conn_err);
        rl__stream_unlock(s);
    }
    conn_unlock(c);
    return 0;
}

/* Waits (blocking the caller: Read/Write on an opening stream block, as in
 * CF) until the connection is made or failed. */
static void sock_wait_open(rl__stream *s) {
    conn *c = conn_of(s);
    for (;;) {
        conn_lock(c);
        if (c->connecting)
            conn_check_connect_locked(c, 50);
        bool done = c->done, connecting = c->connecting;
        conn_unlock(c);
        if (done)
            return;
        if (!connecting) {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL); /* resolving: the resolver thread completes it */
        }
    }
}

static void sock_poll_status(rl__stream *s) {
    conn *c = conn_of(s);
    conn_lock(c);
    if (c->connecting)
        conn_check_connect_locked(c, 0);
    conn_unlock(c);
}

/* Socket I/O blocks the caller (not the loop: the loop never calls it)
 * until something moves, as CF's Read/Write do. */
static ssize_t sock_io(int fd, bool is_read, void *buf, size_t n, int *err) {
    for (;;) {
        ssize_t r = is_read ? recv(fd, buf, n, 0) : send(fd, buf, n, MSG_NOSIGNAL);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            *err = errno;
            return -1;
        }
        struct pollfd pf = {fd, (short)(is_read ? POLLIN : POLLOUT), 0};
        if (poll(&pf, 1, -1) < 0 && errno != EINTR) {
            *err = errno;
            return -1;
        }
    }
}

/* A bulk read tells the wait policy of the loop running the caller's
 * callout (coalescing, internal.h), as RLSocket's reads do. */
static ssize_t sock_read(rl__stream *s, uint8_t *buf, size_t n, int *err) {
    ssize_t r = sock_io(conn_of(s)->fd, true, buf, n, err);
    if (r >= RL_BULK_READ)
        rl__wait_note_bulk_read(s, (size_t)r);
    return r;
}

static ssize_t sock_write(rl__stream *s, const uint8_t *buf, size_t n, int *err) {
    return sock_io(conn_of(s)->fd, false, (void *)buf, n, err);
}

static bool sock_ready(rl__stream *s) {
    int fd = conn_of(s)->fd;
    struct pollfd pf = {fd, (short)(s->is_read ? POLLIN : POLLOUT), 0};
    return fd >= 0 && poll(&pf, 1, 0) > 0;
}

/* Not ready: the fd object reports when the socket is. */
static void sock_watch(rl__stream *s) {
    conn *c = conn_of(s);
    conn_lock(c);
    if (c->fdo)
        RLFileDescriptorEnableCallBacks(c->fdo, s->is_read ? kRLFileDescriptorReadCallBack
                                                           : kRLFileDescriptorWriteCallBack);
    conn_unlock(c);
}

static void sock_close(rl__stream *s) {
    conn *c = conn_of(s);
    conn_lock(c);
    /* the peer sees the end of what we send; reading needs no shutdown
     * (and SHUT_RD would not tell the peer anything) */
    if (!s->is_read && c->fd >= 0 && c->done && !c->conn_err && shutdown(c->fd, SHUT_WR) != 0 &&
        errno != ENOTCONN)
        rl__fail_errno(errno, "RLWriteStreamClose", "shutdown of socket %d", c->fd);
    if (c->fdo)
        RLFileDescriptorDisableCallBacks(c->fdo, s->is_read ? kRLFileDescriptorReadCallBack
                                                            : kRLFileDescriptorWriteCallBack);
    conn_unlock(c);
}

static void sock_scheduled(rl__stream *s, RLRunLoopRef rl, RLRunLoopMode mode) {
    conn *c = conn_of(s);
    conn_lock(c);
    if (c->fdsrc)
        RLRunLoopAddSource(rl, c->fdsrc, mode);
    conn_unlock(c);
}

/* The fd source leaves a mode when neither stream is scheduled there. */
static void sock_unscheduled(rl__stream *s, RLRunLoopRef rl, RLRunLoopMode mode) {
    conn *c = conn_of(s);
    conn_lock(c);
    rl__stream *peer = s->is_read ? c->writer : c->reader;
    bool peer_there = peer && rl__stream_is_scheduled(peer, rl, mode);
    if (c->fdsrc && !peer_there)
        RLRunLoopRemoveSource(rl, c->fdsrc, mode);
    conn_unlock(c);
}

static void sock_finalize(rl__stream *s) {
    conn *c = conn_of(s);
    if (!c) /* a pair that could not be made */
        return;
    conn_lock(c);
    if (s->is_read)
        c->reader = NULL;
    else
        c->writer = NULL;
    conn_unlock(c);
    conn_release(c);
}

static void conn_on_fd(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)f;
    conn *c = info;
    conn_lock(c);
    if (c->connecting) {
        conn_check_connect_locked(c, 0);
        conn_unlock(c);
        return;
    }
    if (c->reader && (types & kRLFileDescriptorReadCallBack))
        rl__stream_post(c->reader, kRLStreamEventHasBytesAvailable);
    if (c->writer && (types & kRLFileDescriptorWriteCallBack))
        rl__stream_post(c->writer, kRLStreamEventCanAcceptBytes);
    conn_unlock(c);
}

/* ---- properties: the socket, and whether it is closed at the end ---- */

static unsigned sock_properties(rl__stream *s) {
    (void)s;
    return RL_PROP_BIT(RL_PROP_SOCKET_NATIVE_HANDLE) | RL_PROP_BIT(RL_PROP_SHOULD_CLOSE_NATIVE);
}

/* The socket once it is the connection's: a pair over a caller's socket at
 * once, a pair to a host once connected (before that, the fd is one
 * attempt among several, or none). */
static RLTypeRef sock_copy_property(rl__stream *s, rl__prop p, const char *fn) {
    conn *c = conn_of(s);
    conn_lock(c);
    bool own = c->own_fd;
    int fd = c->fd;
    bool have = fd >= 0 && (!conn_dials(c) || (c->done && !c->conn_err));
    conn_unlock(c);
    if (p == RL_PROP_SHOULD_CLOSE_NATIVE)
        return rl__boolean_copy(own);
    if (!have)
        return rl__fail(kRLErrorInvalidState, fn, "no socket yet: the stream is not connected"), NULL;
    return RLDataCreate(NULL, (const uint8_t *)&fd, sizeof fd);
}

static bool sock_set_property(rl__stream *s, rl__prop p, const rl__prop_value *v, const char *fn) {
    (void)p; /* only ShouldCloseNativeSocket is settable */
    (void)fn;
    conn *c = conn_of(s);
    conn_lock(c);
    c->own_fd = v->boolean;
    conn_unlock(c);
    return true;
}

static const rl__stream_ops sock_ops = {
    .kind = "socket",
    .state_size = sizeof(sock_end),
    .open = sock_open,
    .read = sock_read,
    .write = sock_write,
    .ready = sock_ready,
    .watch = sock_watch,
    .close = sock_close,
    .wait_open = sock_wait_open,
    .poll_status = sock_poll_status,
    .scheduled = sock_scheduled,
    .unscheduled = sock_unscheduled,
    .finalize = sock_finalize,
    .properties = sock_properties,
    .copy_property = sock_copy_property,
    .set_property = sock_set_property,
};

/* ---- creation ---- */

static conn *conn_new(int fd) {
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->fd = fd;
    return c;
}

/* The streams asked for, sharing c (which they own from here on; freed
 * if they cannot be made). */
static bool sock_pair(conn *c, RLReadStreamRef *readStream, RLWriteStreamRef *writeStream, const char *fn) {
    rl__stream *r = readStream ? rl__stream_new(true, &sock_ops, fn) : NULL;
    rl__stream *w = writeStream ? rl__stream_new(false, &sock_ops, fn) : NULL;
    if ((readStream && !r) || (writeStream && !w)) {
        RLRelease(r);
        RLRelease(w);
        free(c->host);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return false;
    }
    c->refs = (r != NULL) + (w != NULL);
    c->reader = r;
    c->writer = w;
    if (r) {
        ((sock_end *)r->state)->c = c;
        *readStream = (RLReadStreamRef)r;
    }
    if (w) {
        ((sock_end *)w->state)->c = c;
        *writeStream = (RLWriteStreamRef)w;
    }
    return true;
}

bool RLStreamCreatePairWithSocket(RLAllocatorRef alloc, int sock, RLReadStreamRef *readStream,
                                  RLWriteStreamRef *writeStream) {
    (void)alloc;
    if (readStream)
        *readStream = NULL;
    if (writeStream)
        *writeStream = NULL;
    if (!readStream && !writeStream)
        return rl__fail(kRLErrorInvalidArgument, __func__, "both outputs NULL");
    int fl = sock >= 0 ? fcntl(sock, F_GETFL) : -1;
    if (fl < 0)
        return rl__fail_errno(sock < 0 ? EBADF : errno, __func__, "socket %d", sock);
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
        return rl__fail_errno(errno, __func__, "fd %d is not a socket", sock);
    if (!(fl & O_NONBLOCK) && fcntl(sock, F_SETFL, fl | O_NONBLOCK) != 0)
        return rl__fail_errno(errno, __func__, "cannot make socket %d non-blocking", sock);
    conn *c = conn_new(sock);
    if (!c)
        return rl__fail(kRLErrorNoMemory, __func__, "no memory");
    return sock_pair(c, readStream, writeStream, __func__);
}

bool RLStreamCreatePairWithSocketToHost(RLAllocatorRef alloc, const char *host, uint32_t port,
                                        RLReadStreamRef *readStream, RLWriteStreamRef *writeStream) {
    (void)alloc;
    if (readStream)
        *readStream = NULL;
    if (writeStream)
        *writeStream = NULL;
    if (!readStream && !writeStream)
        return rl__fail(kRLErrorInvalidArgument, __func__, "both outputs NULL");
    if (!host || !*host)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL or empty host");
    if (port > 65535)
        return rl__fail(kRLErrorInvalidArgument, __func__, "port %u > 65535", port);
    conn *c = conn_new(-1);
    if (!c || !(c->host = strdup(host))) {
        free(c);
        return rl__fail(kRLErrorNoMemory, __func__, "no memory");
    }
    c->own_fd = true;
    snprintf(c->service, sizeof c->service, "%u", port);
    return sock_pair(c, readStream, writeStream, __func__);
}

bool RLStreamCreatePairWithPeerSocketSignature(RLAllocatorRef alloc, const RLSocketSignature *signature,
                                               RLReadStreamRef *readStream, RLWriteStreamRef *writeStream) {
    (void)alloc;
    const char *fn = __func__;
    if (readStream)
        *readStream = NULL;
    if (writeStream)
        *writeStream = NULL;
    if (!readStream && !writeStream)
        return rl__fail(kRLErrorInvalidArgument, fn, "both outputs NULL");
    if (!signature)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL signature");
    RLDataRef address = signature->address;
    if (!rl__socket_address_ok(address, fn))
        return false;
    RLIndex len = RLDataGetLength(address);
    int type = signature->socketType > 0 ? signature->socketType : SOCK_STREAM;
    if (type != SOCK_STREAM)
        return rl__fail(kRLErrorInvalidArgument, fn, "socket type %d: streams need SOCK_STREAM", type);
    conn *c = conn_new(-1);
    if (!c)
        return rl__fail(kRLErrorNoMemory, fn, "no memory");
    c->own_fd = true;
    c->sig = true;
    memcpy(&c->sig_addr, RLDataGetBytePtr(address), (size_t)len);
    c->sig_ai.ai_family = signature->protocolFamily > 0 ? signature->protocolFamily : PF_INET;
    c->sig_ai.ai_socktype = type;
    c->sig_ai.ai_protocol = signature->protocol > 0 ? signature->protocol : 0;
    c->sig_ai.ai_addr = (struct sockaddr *)&c->sig_addr;
    c->sig_ai.ai_addrlen = (socklen_t)len;
    return sock_pair(c, readStream, writeStream, fn);
}
