/* RLStream.c — read and write streams (CFReadStream / CFWriteStream): one
 * object with a status, an error, a client and the run loops it is
 * scheduled on, over a backend (memory, file, bound pair, socket). Events
 * are kept as pending bits and delivered by a version-0 run-loop source
 * that the stream adds to every (loop, mode) it is scheduled in; the
 * backends only post bits, from any thread. */
#include "RLBase.h"

#include <crunloop/RLRunLoopSource.h>
#include <crunloop/RLStream.h>
#include <crunloop/RLFileDescriptor.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct stream stream;
typedef struct bound_pipe bound_pipe;
typedef struct sock_conn sock_conn;

enum kind { K_MEMORY, K_FILE, K_PIPE, K_SOCKET };

struct sched {
    RLRunLoopRef rl;
    char *mode;
};

struct stream {
    rl__object base;
    bool is_read;
    enum kind kind;
    pthread_mutex_t lock; /* status, error, client, pending, armed, scheds */
    RLStreamStatus status;
    RLStreamError error;
    RLOptionFlags client_events;
    void (*callback)(void);
    RLStreamClientContext ctx;
    RLOptionFlags pending;
    bool armed; /* the next HasBytes/CanAccept is reported */
    RLRunLoopSourceRef source;
    struct sched *scheds;
    size_t nscheds;
    /* memory */
    uint8_t *bytes;
    size_t len, pos, cap;
    /* file */
    char *path;
    int fd;
    /* pair, socket */
    bound_pipe *pipe;
    sock_conn *sock;
};

struct RLReadStream {
    stream s;
};
struct RLWriteStream {
    stream s;
};

static void stream_finalize(void *obj);
static const rl__class read_class = {"RLReadStream", stream_finalize, NULL, NULL};
static const rl__class write_class = {"RLWriteStream", stream_finalize, NULL, NULL};

/* ---- events ---- */

/* Records events (s->lock held) and wakes the loops the stream is in.
 * HasBytes/CanAccept are dropped unless armed: they are re-armed by the
 * client's next Read/Write, so each readiness is reported once. */
static void post_locked(stream *s, RLOptionFlags ev) {
    if (s->status == kRLStreamStatusClosed || s->status == kRLStreamStatusNotOpen)
        return;
    if (ev & (kRLStreamEventHasBytesAvailable | kRLStreamEventCanAcceptBytes)) {
        if (!s->armed)
            ev &= ~(RLOptionFlags)(kRLStreamEventHasBytesAvailable | kRLStreamEventCanAcceptBytes);
        else
            s->armed = false;
    }
    if (!ev)
        return;
    s->pending |= ev;
    if (s->source) {
        RLRunLoopSourceSignal(s->source);
        for (size_t i = 0; i < s->nscheds; i++)
            RLRunLoopWakeUp(s->scheds[i].rl);
    }
}

static void post(stream *s, RLOptionFlags ev) {
    pthread_mutex_lock(&s->lock);
    post_locked(s, ev);
    pthread_mutex_unlock(&s->lock);
}

static void fail_stream_locked(stream *s, RLIndex domain, int err) {
    s->status = kRLStreamStatusError;
    s->error = (RLStreamError){domain, err};
    post_locked(s, kRLStreamEventErrorOccurred);
}

static void fail_stream(stream *s, RLIndex domain, int err) {
    pthread_mutex_lock(&s->lock);
    fail_stream_locked(s, domain, err);
    pthread_mutex_unlock(&s->lock);
}

static const RLOptionFlags event_order[] = {kRLStreamEventOpenCompleted, kRLStreamEventHasBytesAvailable,
                                            kRLStreamEventCanAcceptBytes, kRLStreamEventErrorOccurred,
                                            kRLStreamEventEndEncountered};

/* The source's perform, on a loop's thread: one callback per pending event,
 * each checked again just before it runs (an earlier callback may have
 * closed the stream or changed the client). Events the callbacks cause (a
 * Read that finds more bytes) are delivered in the same perform, before
 * other sources, as CF does; a long chain yields to the loop after a
 * bounded number of rounds. */
static void stream_perform(void *info) {
    stream *s = info;
    RLRetain(s);
    for (int round = 0;; round++) {
        pthread_mutex_lock(&s->lock);
        RLOptionFlags ev = s->pending;
        if (ev && round == 1000) {
            RLRunLoopSourceSignal(s->source); /* the rest on the next pass */
            ev = 0;
        } else {
            s->pending = 0;
        }
        pthread_mutex_unlock(&s->lock);
        if (!ev)
            break;
        for (size_t i = 0; i < sizeof event_order / sizeof event_order[0]; i++) {
            RLOptionFlags bit = event_order[i];
            if (!(ev & bit))
                continue;
            pthread_mutex_lock(&s->lock);
            bool deliver = s->callback && (s->client_events & bit) && s->status != kRLStreamStatusClosed;
            void (*cb)(void) = s->callback;
            void *cinfo = s->ctx.info;
            pthread_mutex_unlock(&s->lock);
            if (!deliver)
                continue;
            if (s->is_read)
                ((RLReadStreamClientCallBack)cb)((RLReadStreamRef)s, bit, cinfo);
            else
                ((RLWriteStreamClientCallBack)cb)((RLWriteStreamRef)s, bit, cinfo);
        }
    }
    RLRelease(s);
}

/* ---- bound pair ---- */

struct bound_pipe {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    _Atomic long refs;
    uint8_t *buf;
    size_t cap, head, count;
    bool writer_closed, reader_closed;
    stream *reader, *writer; /* unowned; cleared by their finalize */
};

static void pipe_release(bound_pipe *p) {
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->buf);
    free(p);
}

/* ---- sockets ---- */

struct sock_conn {
    pthread_mutex_t lock;
    _Atomic long refs;
    int fd;
    bool own_fd;
    bool started, connecting, done;
    int conn_err;     /* 0 or errno / EAI code once done */
    RLIndex err_domain;
    struct addrinfo *addrs, *next_addr;
    sock_conn *res_next; /* in the resolver's queue */
    char *host, service[16];
    RLFileDescriptorRef fdo;
    RLRunLoopSourceRef fdsrc;
    stream *reader, *writer; /* unowned */
};

static void sock_release(sock_conn *c) {
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

static void sock_on_fd(RLFileDescriptorRef f, RLOptionFlags types, void *info);
static void report_ready(stream *s);

/* Makes the fd object once the socket exists (c->lock held) and adds its
 * source wherever either stream is scheduled. */
static void sock_attach_fd_locked(sock_conn *c) {
    if (c->fdo || c->fd < 0)
        return;
    RLFileDescriptorContext fc = {0, c, NULL, NULL, NULL};
    c->fdo = RLFileDescriptorCreate(NULL, c->fd, false, sock_on_fd, &fc);
    if (!c->fdo)
        return;
    c->fdsrc = RLFileDescriptorCreateRunLoopSource(NULL, c->fdo, 0);
    stream *both[2] = {c->reader, c->writer};
    for (int k = 0; k < 2; k++) {
        if (!both[k])
            continue;
        pthread_mutex_lock(&both[k]->lock);
        for (size_t i = 0; i < both[k]->nscheds; i++)
            RLRunLoopAddSource(both[k]->scheds[i].rl, c->fdsrc, both[k]->scheds[i].mode);
        pthread_mutex_unlock(&both[k]->lock);
    }
}

/* Reports the connection's outcome to each opened stream (c->lock held). */
static void sock_finish_locked(sock_conn *c, RLIndex domain, int err) {
    c->connecting = false;
    c->done = true;
    c->conn_err = err;
    c->err_domain = domain;
    stream *both[2] = {c->reader, c->writer};
    for (int k = 0; k < 2; k++) {
        stream *s = both[k];
        if (!s)
            continue;
        pthread_mutex_lock(&s->lock);
        if (s->status == kRLStreamStatusOpening) {
            if (err) {
                fail_stream_locked(s, domain, err);
            } else {
                s->status = kRLStreamStatusOpen;
                s->armed = true;
                post_locked(s, kRLStreamEventOpenCompleted);
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (!err && c->fdo)
        RLFileDescriptorEnableCallBacks(c->fdo, kRLFileDescriptorReadCallBack | kRLFileDescriptorWriteCallBack);
}

/* Starts a non-blocking connect to the next address (c->lock held). */
static void sock_try_next_locked(sock_conn *c, int last_err) {
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
            sock_attach_fd_locked(c);
            sock_finish_locked(c, 0, 0);
            return;
        }
        if (errno == EINPROGRESS) {
            c->connecting = true;
            sock_attach_fd_locked(c);
            if (c->fdo)
                RLFileDescriptorEnableCallBacks(c->fdo, kRLFileDescriptorWriteCallBack);
            return;
        }
        last_err = errno;
    }
    sock_finish_locked(c, kRLStreamErrorDomainPOSIX, last_err ? last_err : ECONNREFUSED);
}

/* Checks a connect in progress without blocking (c->lock held). */
static void sock_check_connect_locked(sock_conn *c, int timeout_ms) {
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
        sock_try_next_locked(c, err);
    else
        sock_finish_locked(c, 0, 0);
}

/* Name resolution: one process-wide resolver thread, started on first
 * use, runs the blocking getaddrinfo for every socket stream in turn and
 * hands the addresses back to the stream (whose connect then starts, non-
 * blocking). Neither a loop's thread nor a thread per stream is used.
 * (glibc's getaddrinfo_a would do the same with its own threads, which the
 * thread sanitizer cannot follow.) */
static pthread_mutex_t resolver_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t resolver_cond = PTHREAD_COND_INITIALIZER;
static sock_conn *resolver_head, **resolver_tail = &resolver_head;
static pid_t resolver_pid; /* the process whose resolver thread runs */

static void *resolver_main(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&resolver_lock);
        while (!resolver_head)
            pthread_cond_wait(&resolver_cond, &resolver_lock);
        sock_conn *c = resolver_head;
        resolver_head = c->res_next;
        if (!resolver_head)
            resolver_tail = &resolver_head;
        pthread_mutex_unlock(&resolver_lock);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        int r = getaddrinfo(c->host, c->service, &hints, &res);
        /* Drop this thread's resolver state between requests: glibc keeps
         * the parsed resolv.conf attached to the thread's _res until the
         * thread exits, and this thread never does, so the process would
         * hold it (and leak it at exit) for nothing. The next request
         * re-attaches the current configuration, picking up any change. */
        res_nclose(&_res);
        pthread_mutex_lock(&c->lock);
        if (r != 0) {
            sock_finish_locked(c, kRLStreamErrorDomainNetDB, r);
        } else {
            c->addrs = res;
            c->next_addr = res;
            sock_try_next_locked(c, 0);
        }
        pthread_mutex_unlock(&c->lock);
        sock_release(c);
    }
    return NULL;
}

/* Queues c for resolution (takes a reference); false with errno if the
 * resolver thread cannot start. */
static int resolver_enqueue(sock_conn *c) {
    pthread_mutex_lock(&resolver_lock);
    if (resolver_pid != getpid()) { /* first use, or a child of fork(): no thread here yet */
        resolver_head = NULL;
        resolver_tail = &resolver_head;
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&t, &attr, resolver_main, NULL);
        pthread_attr_destroy(&attr);
        if (err) {
            pthread_mutex_unlock(&resolver_lock);
            return err;
        }
        resolver_pid = getpid();
    }
    atomic_fetch_add(&c->refs, 1);
    c->res_next = NULL;
    *resolver_tail = c;
    resolver_tail = &c->res_next;
    pthread_cond_signal(&resolver_cond);
    pthread_mutex_unlock(&resolver_lock);
    return 0;
}

/* First Open of either stream: resolve (numeric hosts at once) and connect. */
static void sock_start_locked(sock_conn *c) {
    if (c->started)
        return;
    c->started = true;
    if (!c->host) { /* an existing socket */
        sock_attach_fd_locked(c);
        sock_finish_locked(c, 0, 0);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
    struct addrinfo *res = NULL;
    if (getaddrinfo(c->host, c->service, &hints, &res) == 0) {
        c->addrs = res;
        c->next_addr = res;
        sock_try_next_locked(c, 0);
        return;
    }
    int err = resolver_enqueue(c);
    if (err)
        sock_finish_locked(c, kRLStreamErrorDomainPOSIX, err);
}

/* Waits (blocking the caller: Read/Write on an opening stream block, as in
 * CF) until the connection is made or failed. */
static void sock_wait_open(sock_conn *c) {
    for (;;) {
        pthread_mutex_lock(&c->lock);
        if (c->connecting)
            sock_check_connect_locked(c, 50);
        bool done = c->done;
        pthread_mutex_unlock(&c->lock);
        if (done)
            return;
        if (!c->connecting) {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL); /* resolving: glibc completes it */
        }
    }
}

static void sock_on_fd(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)f;
    sock_conn *c = info;
    pthread_mutex_lock(&c->lock);
    if (c->connecting) {
        sock_check_connect_locked(c, 0);
        pthread_mutex_unlock(&c->lock);
        return;
    }
    stream *r = c->reader, *w = c->writer;
    if (r && (types & kRLFileDescriptorReadCallBack))
        post(r, kRLStreamEventHasBytesAvailable);
    if (w && (types & kRLFileDescriptorWriteCallBack))
        post(w, kRLStreamEventCanAcceptBytes);
    pthread_mutex_unlock(&c->lock);
}

/* ---- object ---- */

static stream *stream_new(bool is_read, enum kind kind, const char *fn) {
    stream *s = rl__object_alloc(is_read ? &read_class : &write_class, sizeof *s, fn);
    if (!s)
        return NULL;
    s->is_read = is_read;
    s->kind = kind;
    s->fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

static void close_backend(stream *s) {
    switch (s->kind) {
    case K_MEMORY:
        break;
    case K_FILE:
        if (s->fd >= 0)
            close(s->fd);
        s->fd = -1;
        break;
    case K_PIPE: {
        bound_pipe *p = s->pipe;
        pthread_mutex_lock(&p->lock);
        stream *peer = s->is_read ? p->writer : p->reader;
        if (s->is_read)
            p->reader_closed = true;
        else
            p->writer_closed = true;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
        /* the reader learns of the end, the writer of the broken pipe,
         * through the readiness it is waiting for */
        if (peer) {
            pthread_mutex_lock(&peer->lock);
            bool armed = peer->armed;
            pthread_mutex_unlock(&peer->lock);
            if (armed)
                report_ready(peer);
        }
        break;
    }
    case K_SOCKET: {
        sock_conn *c = s->sock;
        pthread_mutex_lock(&c->lock);
        /* the peer sees the end of what we send; reading needs no
         * shutdown (and SHUT_RD would not tell the peer anything) */
        if (!s->is_read && c->fd >= 0 && c->done && !c->conn_err && shutdown(c->fd, SHUT_WR) != 0 &&
            errno != ENOTCONN)
            rl__fail_errno(errno, "RLWriteStreamClose", "shutdown of socket %d", c->fd);
        if (c->fdo)
            RLFileDescriptorDisableCallBacks(c->fdo, s->is_read ? kRLFileDescriptorReadCallBack
                                                                : kRLFileDescriptorWriteCallBack);
        pthread_mutex_unlock(&c->lock);
        break;
    }
    }
}

static void stream_finalize(void *obj) {
    stream *s = obj;
    if (s->status != kRLStreamStatusClosed && s->status != kRLStreamStatusNotOpen)
        close_backend(s);
    if (s->source) {
        RLRunLoopSourceInvalidate(s->source);
        RLRelease(s->source);
    }
    for (size_t i = 0; i < s->nscheds; i++) {
        if (s->sock) {
            pthread_mutex_lock(&s->sock->lock);
            if (s->sock->fdsrc)
                RLRunLoopRemoveSource(s->scheds[i].rl, s->sock->fdsrc, s->scheds[i].mode);
            pthread_mutex_unlock(&s->sock->lock);
        }
        RLRelease(s->scheds[i].rl);
        free(s->scheds[i].mode);
    }
    free(s->scheds);
    if (s->ctx.release)
        s->ctx.release(s->ctx.info);
    if (s->pipe) {
        pthread_mutex_lock(&s->pipe->lock);
        if (s->is_read) {
            s->pipe->reader = NULL;
            s->pipe->reader_closed = true;
        } else {
            s->pipe->writer = NULL;
            s->pipe->writer_closed = true;
        }
        pthread_cond_broadcast(&s->pipe->cond);
        pthread_mutex_unlock(&s->pipe->lock);
        pipe_release(s->pipe);
    }
    if (s->sock) {
        pthread_mutex_lock(&s->sock->lock);
        if (s->is_read)
            s->sock->reader = NULL;
        else
            s->sock->writer = NULL;
        pthread_mutex_unlock(&s->sock->lock);
        sock_release(s->sock);
    }
    free(s->bytes);
    free(s->path);
    pthread_mutex_destroy(&s->lock);
}

static stream *check(const void *ref, bool is_read, const char *fn) {
    if (!rl__object_check(ref, is_read ? &read_class : &write_class, fn))
        return NULL;
    return (stream *)ref;
}

/* ---- creation ---- */

RLReadStreamRef RLReadStreamCreateWithBytes(RLAllocatorRef alloc, const uint8_t *bytes, RLIndex length) {
    (void)alloc;
    if (length < 0 || (!bytes && length > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "bytes %p with length %ld", (const void *)bytes,
                        (long)length),
               NULL;
    stream *s = stream_new(true, K_MEMORY, __func__);
    if (!s)
        return NULL;
    s->bytes = malloc(length ? (size_t)length : 1);
    if (!s->bytes) {
        RLRelease(s);
        return rl__fail(kRLErrorNoMemory, __func__, "no memory for %ld bytes", (long)length), NULL;
    }
    if (length)
        memcpy(s->bytes, bytes, (size_t)length);
    s->len = (size_t)length;
    return (RLReadStreamRef)s;
}

RLWriteStreamRef RLWriteStreamCreateWithAllocatedBuffers(RLAllocatorRef alloc, RLAllocatorRef bufferAllocator) {
    (void)alloc;
    (void)bufferAllocator;
    return (RLWriteStreamRef)stream_new(false, K_MEMORY, __func__);
}

RLDataRef RLWriteStreamCopyDataWritten(RLWriteStreamRef ref) {
    stream *s = check(ref, false, __func__);
    if (!s)
        return NULL;
    if (s->kind != K_MEMORY)
        return rl__fail(kRLErrorInvalidArgument, __func__, "not a memory stream"), NULL;
    pthread_mutex_lock(&s->lock);
    RLDataRef d = RLDataCreate(NULL, s->bytes, (RLIndex)s->len);
    pthread_mutex_unlock(&s->lock);
    return d;
}

static stream *file_new(bool is_read, const char *path, const char *fn) {
    if (!path || !*path)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL or empty path"), NULL;
    stream *s = stream_new(is_read, K_FILE, fn);
    if (!s)
        return NULL;
    s->path = strdup(path);
    if (!s->path) {
        RLRelease(s);
        return rl__fail(kRLErrorNoMemory, fn, "no memory"), NULL;
    }
    return s;
}

RLReadStreamRef RLReadStreamCreateWithFile(RLAllocatorRef alloc, const char *path) {
    (void)alloc;
    return (RLReadStreamRef)file_new(true, path, __func__);
}

RLWriteStreamRef RLWriteStreamCreateWithFile(RLAllocatorRef alloc, const char *path) {
    (void)alloc;
    return (RLWriteStreamRef)file_new(false, path, __func__);
}

bool RLStreamCreateBoundPair(RLAllocatorRef alloc, RLReadStreamRef *readStream, RLWriteStreamRef *writeStream,
                             RLIndex transferBufferSize) {
    (void)alloc;
    if (readStream)
        *readStream = NULL;
    if (writeStream)
        *writeStream = NULL;
    if (!readStream || !writeStream)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL output");
    if (transferBufferSize < 1)
        return rl__fail(kRLErrorInvalidArgument, __func__, "transfer buffer size %ld < 1", (long)transferBufferSize);
    bound_pipe *p = calloc(1, sizeof *p);
    uint8_t *buf = malloc((size_t)transferBufferSize);
    stream *r = stream_new(true, K_PIPE, __func__);
    stream *w = stream_new(false, K_PIPE, __func__);
    if (!p || !buf || !r || !w) {
        free(p);
        free(buf);
        RLRelease(r);
        RLRelease(w);
        return rl__fail(kRLErrorNoMemory, __func__, "no memory");
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->refs = 2;
    p->buf = buf;
    p->cap = (size_t)transferBufferSize;
    p->reader = r;
    p->writer = w;
    r->pipe = w->pipe = p;
    *readStream = (RLReadStreamRef)r;
    *writeStream = (RLWriteStreamRef)w;
    return true;
}

static bool sock_pair(sock_conn *c, RLReadStreamRef *readStream, RLWriteStreamRef *writeStream, const char *fn) {
    stream *r = readStream ? stream_new(true, K_SOCKET, fn) : NULL;
    stream *w = writeStream ? stream_new(false, K_SOCKET, fn) : NULL;
    if ((readStream && !r) || (writeStream && !w)) {
        RLRelease(r);
        RLRelease(w);
        sock_release(c);
        return false;
    }
    c->refs = (r != NULL) + (w != NULL);
    c->reader = r;
    c->writer = w;
    if (r) {
        r->sock = c;
        *readStream = (RLReadStreamRef)r;
    }
    if (w) {
        w->sock = c;
        *writeStream = (RLWriteStreamRef)w;
    }
    return true;
}

static sock_conn *sock_new(int fd) {
    sock_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->fd = fd;
    c->refs = 1;
    return c;
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
    sock_conn *c = sock_new(sock);
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
    sock_conn *c = sock_new(-1);
    if (!c || !(c->host = strdup(host))) {
        free(c);
        return rl__fail(kRLErrorNoMemory, __func__, "no memory");
    }
    c->own_fd = true;
    snprintf(c->service, sizeof c->service, "%u", port);
    return sock_pair(c, readStream, writeStream, __func__);
}

/* ---- status, errors ---- */

static RLStreamStatus get_status(const void *ref, bool is_read, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s)
        return kRLStreamStatusError;
    if (s->kind == K_SOCKET) { /* polled progress for unscheduled streams */
        pthread_mutex_lock(&s->sock->lock);
        if (s->sock->connecting)
            sock_check_connect_locked(s->sock, 0);
        pthread_mutex_unlock(&s->sock->lock);
    }
    pthread_mutex_lock(&s->lock);
    RLStreamStatus st = s->status;
    pthread_mutex_unlock(&s->lock);
    return st;
}

RLStreamStatus RLReadStreamGetStatus(RLReadStreamRef s) { return get_status(s, true, __func__); }
RLStreamStatus RLWriteStreamGetStatus(RLWriteStreamRef s) { return get_status(s, false, __func__); }

static RLStreamError get_error(const void *ref, bool is_read, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s)
        return (RLStreamError){kRLStreamErrorDomainCustom, 0};
    pthread_mutex_lock(&s->lock);
    RLStreamError e = s->error;
    pthread_mutex_unlock(&s->lock);
    return e;
}

RLStreamError RLReadStreamGetError(RLReadStreamRef s) { return get_error(s, true, __func__); }
RLStreamError RLWriteStreamGetError(RLWriteStreamRef s) { return get_error(s, false, __func__); }

static bool copy_error(const void *ref, bool is_read, RLStreamError *out, const char *fn) {
    if (!check(ref, is_read, fn))
        return false;
    if (!out)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL error");
    *out = get_error(ref, is_read, fn);
    return out->domain != 0 || out->error != 0;
}

bool RLReadStreamCopyError(RLReadStreamRef s, RLStreamError *e) { return copy_error(s, true, e, __func__); }
bool RLWriteStreamCopyError(RLWriteStreamRef s, RLStreamError *e) { return copy_error(s, false, e, __func__); }

/* ---- readiness ---- */

static bool backend_ready(stream *s) {
    switch (s->kind) {
    case K_MEMORY:
        return !s->is_read || s->pos < s->len;
    case K_FILE:
        return true;
    case K_PIPE: {
        bound_pipe *p = s->pipe;
        pthread_mutex_lock(&p->lock);
        bool ok = s->is_read ? (p->count > 0 || p->writer_closed) : (p->count < p->cap || p->reader_closed);
        pthread_mutex_unlock(&p->lock);
        return ok;
    }
    case K_SOCKET: {
        struct pollfd pf = {s->sock->fd, (short)(s->is_read ? POLLIN : POLLOUT), 0};
        return s->sock->fd >= 0 && poll(&pf, 1, 0) > 0;
    }
    }
    return false;
}

/* A read stream whose source is used up (memory read, bound pair whose
 * writer closed with nothing left) reaches its end without a Read that
 * returns 0, as CF's memory streams do. */
static bool reader_exhausted(stream *s) {
    if (!s->is_read)
        return false;
    if (s->kind == K_MEMORY)
        return s->pos >= s->len;
    if (s->kind != K_PIPE)
        return false;
    pthread_mutex_lock(&s->pipe->lock);
    bool end = s->pipe->count == 0 && s->pipe->writer_closed;
    pthread_mutex_unlock(&s->pipe->lock);
    return end;
}

/* Reports what an armed open stream can do now: its end, or readiness. */
static void report_ready(stream *s) {
    if (reader_exhausted(s)) {
        pthread_mutex_lock(&s->lock);
        if (s->status == kRLStreamStatusOpen) {
            s->status = kRLStreamStatusAtEnd;
            post_locked(s, kRLStreamEventEndEncountered);
        }
        pthread_mutex_unlock(&s->lock);
        return;
    }
    if (backend_ready(s))
        post(s, s->is_read ? kRLStreamEventHasBytesAvailable : kRLStreamEventCanAcceptBytes);
    else if (s->kind == K_SOCKET && s->sock->fdo)
        RLFileDescriptorEnableCallBacks(s->sock->fdo, s->is_read ? kRLFileDescriptorReadCallBack
                                                                  : kRLFileDescriptorWriteCallBack);
}

/* After open and after each Read/Write: re-arm the readiness event and
 * report it at once if the backend is ready. */
static void rearm(stream *s) {
    pthread_mutex_lock(&s->lock);
    if (s->status != kRLStreamStatusOpen) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->armed = true;
    pthread_mutex_unlock(&s->lock);
    report_ready(s);
}

static bool readiness(const void *ref, bool is_read, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s)
        return false;
    RLStreamStatus st = get_status(ref, is_read, fn);
    if (st != kRLStreamStatusOpen)
        return false; /* CF: only an open stream has bytes or room */
    return backend_ready(s);
}

bool RLReadStreamHasBytesAvailable(RLReadStreamRef s) { return readiness(s, true, __func__); }
bool RLWriteStreamCanAcceptBytes(RLWriteStreamRef s) { return readiness(s, false, __func__); }

/* ---- open, close ---- */

static bool stream_open(const void *ref, bool is_read, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s)
        return false;
    pthread_mutex_lock(&s->lock);
    if (s->status != kRLStreamStatusNotOpen) {
        RLStreamStatus st = s->status;
        pthread_mutex_unlock(&s->lock);
        return rl__fail(kRLErrorInvalidState, fn, "stream already opened (status %ld)", (long)st);
    }
    s->status = kRLStreamStatusOpening;
    pthread_mutex_unlock(&s->lock);
    if (s->kind == K_FILE) {
        int fd = is_read ? open(s->path, O_RDONLY | O_CLOEXEC)
                         : open(s->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0) {
            int err = errno;
            fail_stream(s, kRLStreamErrorDomainPOSIX, err);
            return rl__fail_errno(err, fn, "cannot open %s", s->path);
        }
        s->fd = fd;
    }
    if (s->kind == K_SOCKET) {
        sock_conn *c = s->sock;
        pthread_mutex_lock(&c->lock);
        if (!c->started) {
            sock_start_locked(c);
        } else if (c->done) {
            pthread_mutex_lock(&s->lock);
            if (c->conn_err)
                fail_stream_locked(s, c->err_domain, c->conn_err);
            else {
                s->status = kRLStreamStatusOpen;
                post_locked(s, kRLStreamEventOpenCompleted);
            }
            pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&c->lock);
        rearm(s);
        return true;
    }
    pthread_mutex_lock(&s->lock);
    s->status = kRLStreamStatusOpen;
    post_locked(s, kRLStreamEventOpenCompleted);
    pthread_mutex_unlock(&s->lock);
    rearm(s);
    return true;
}

bool RLReadStreamOpen(RLReadStreamRef s) { return stream_open(s, true, __func__); }
bool RLWriteStreamOpen(RLWriteStreamRef s) { return stream_open(s, false, __func__); }

static bool stream_close(const void *ref, bool is_read, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s)
        return false;
    pthread_mutex_lock(&s->lock);
    RLStreamStatus st = s->status;
    if (st == kRLStreamStatusClosed) {
        pthread_mutex_unlock(&s->lock);
        return true;
    }
    s->status = kRLStreamStatusClosed;
    s->pending = 0;
    pthread_mutex_unlock(&s->lock);
    if (st != kRLStreamStatusNotOpen)
        close_backend(s);
    return true;
}

bool RLReadStreamClose(RLReadStreamRef s) { return stream_close(s, true, __func__); }
bool RLWriteStreamClose(RLWriteStreamRef s) { return stream_close(s, false, __func__); }

/* ---- read, write ---- */

/* What a Read/Write may do in the current status: 1 go on, 0 return 0
 * (at end), -1 misuse (error set). Waits for a socket that is opening. */
static int io_allowed(stream *s, const char *fn) {
    if (s->kind == K_SOCKET)
        sock_wait_open(s->sock);
    pthread_mutex_lock(&s->lock);
    RLStreamStatus st = s->status;
    pthread_mutex_unlock(&s->lock);
    if (st == kRLStreamStatusOpen)
        return 1;
    if (st == kRLStreamStatusAtEnd)
        return 0;
    static const char *names[] = {"not open", "opening", "open", "reading", "writing", "at end", "closed", "failed"};
    rl__fail(kRLErrorInvalidState, fn, "stream is %s", names[st]);
    return -1;
}

static ssize_t pipe_read(bound_pipe *p, uint8_t *buf, size_t n) {
    pthread_mutex_lock(&p->lock);
    while (p->count == 0 && !p->writer_closed)
        pthread_cond_wait(&p->cond, &p->lock);
    size_t got = 0;
    while (got < n && p->count > 0) {
        buf[got++] = p->buf[p->head];
        p->head = (p->head + 1) % p->cap;
        p->count--;
    }
    stream *w = p->writer;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (got && w)
        post(w, kRLStreamEventCanAcceptBytes);
    return (ssize_t)got;
}

static ssize_t pipe_write(bound_pipe *p, const uint8_t *buf, size_t n, int *err) {
    pthread_mutex_lock(&p->lock);
    while (p->count == p->cap && !p->reader_closed)
        pthread_cond_wait(&p->cond, &p->lock);
    if (p->reader_closed) {
        pthread_mutex_unlock(&p->lock);
        *err = EPIPE;
        return -1;
    }
    size_t put = 0;
    while (put < n && p->count < p->cap) {
        p->buf[(p->head + p->count) % p->cap] = buf[put++];
        p->count++;
    }
    stream *r = p->reader;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (r)
        post(r, kRLStreamEventHasBytesAvailable);
    return (ssize_t)put;
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

static ssize_t file_io(int fd, bool is_read, void *buf, size_t n, int *err) {
    for (;;) {
        ssize_t r = is_read ? read(fd, buf, n) : write(fd, buf, n);
        if (r >= 0)
            return r;
        if (errno != EINTR) {
            *err = errno;
            return -1;
        }
    }
}

RLIndex RLReadStreamRead(RLReadStreamRef ref, uint8_t *buffer, RLIndex length) {
    stream *s = check(ref, true, __func__);
    if (!s)
        return -1;
    if (length < 0 || (!buffer && length > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "buffer %p, length %ld", (void *)buffer, (long)length), -1;
    int ok = io_allowed(s, __func__);
    if (ok <= 0)
        return ok;
    if (length == 0)
        return 0;
    int err = 0;
    ssize_t n = 0;
    switch (s->kind) {
    case K_MEMORY: {
        size_t left = s->len - s->pos, take = (size_t)length < left ? (size_t)length : left;
        memcpy(buffer, s->bytes + s->pos, take);
        s->pos += take;
        n = (ssize_t)take;
        break;
    }
    case K_FILE:
        n = file_io(s->fd, true, buffer, (size_t)length, &err);
        break;
    case K_PIPE:
        n = pipe_read(s->pipe, buffer, (size_t)length);
        break;
    case K_SOCKET:
        n = sock_io(s->sock->fd, true, buffer, (size_t)length, &err);
        break;
    }
    if (n < 0) {
        fail_stream(s, kRLStreamErrorDomainPOSIX, err);
        return -1;
    }
    if (n == 0) {
        pthread_mutex_lock(&s->lock);
        if (s->status == kRLStreamStatusOpen) {
            s->status = kRLStreamStatusAtEnd;
            post_locked(s, kRLStreamEventEndEncountered);
        }
        pthread_mutex_unlock(&s->lock);
        return 0;
    }
    rearm(s);
    return (RLIndex)n;
}

RLIndex RLWriteStreamWrite(RLWriteStreamRef ref, const uint8_t *buffer, RLIndex length) {
    stream *s = check(ref, false, __func__);
    if (!s)
        return -1;
    if (length < 0 || (!buffer && length > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "buffer %p, length %ld", (const void *)buffer,
                        (long)length),
               -1;
    int ok = io_allowed(s, __func__);
    if (ok <= 0)
        return ok;
    if (length == 0)
        return 0;
    int err = 0;
    ssize_t n = 0;
    switch (s->kind) {
    case K_MEMORY: {
        pthread_mutex_lock(&s->lock);
        size_t need = s->len + (size_t)length;
        if (need > s->cap) {
            size_t cap = s->cap ? s->cap : 64;
            while (cap < need)
                cap *= 2;
            uint8_t *b = realloc(s->bytes, cap);
            if (!b) {
                pthread_mutex_unlock(&s->lock);
                n = -1;
                err = ENOMEM;
                break;
            }
            s->bytes = b;
            s->cap = cap;
        }
        memcpy(s->bytes + s->len, buffer, (size_t)length);
        s->len = need;
        pthread_mutex_unlock(&s->lock);
        n = (ssize_t)length;
        break;
    }
    case K_FILE:
        n = file_io(s->fd, false, (void *)buffer, (size_t)length, &err);
        break;
    case K_PIPE:
        n = pipe_write(s->pipe, buffer, (size_t)length, &err);
        break;
    case K_SOCKET:
        n = sock_io(s->sock->fd, false, (void *)buffer, (size_t)length, &err);
        break;
    }
    if (n < 0) {
        fail_stream(s, kRLStreamErrorDomainPOSIX, err);
        return -1;
    }
    rearm(s);
    return (RLIndex)n;
}

/* ---- client, scheduling ---- */

static bool set_client(const void *ref, bool is_read, RLOptionFlags events, void (*cb)(void),
                       RLStreamClientContext *ctx, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s)
        return false;
    if (ctx && ctx->version != 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "context version %ld (expected 0)", (long)ctx->version);
    RLStreamClientContext fresh = {0};
    if (cb && ctx) {
        fresh = *ctx;
        if (fresh.retain)
            fresh.info = fresh.retain(fresh.info);
    }
    pthread_mutex_lock(&s->lock);
    RLStreamClientContext old = s->ctx;
    s->ctx = fresh;
    s->callback = (cb && ctx) ? cb : NULL;
    s->client_events = (cb && ctx) ? events : 0;
    pthread_mutex_unlock(&s->lock);
    if (old.release)
        old.release(old.info);
    return true;
}

bool RLReadStreamSetClient(RLReadStreamRef s, RLOptionFlags ev, RLReadStreamClientCallBack cb,
                           RLStreamClientContext *ctx) {
    return set_client(s, true, ev, (void (*)(void))cb, ctx, __func__);
}
bool RLWriteStreamSetClient(RLWriteStreamRef s, RLOptionFlags ev, RLWriteStreamClientCallBack cb,
                            RLStreamClientContext *ctx) {
    return set_client(s, false, ev, (void (*)(void))cb, ctx, __func__);
}

static bool mode_ok(RLRunLoopMode mode, const char *fn) {
    if (!mode || !*mode)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL or empty mode");
    return true;
}

static ssize_t find_sched(stream *s, RLRunLoopRef rl, RLRunLoopMode mode) {
    for (size_t i = 0; i < s->nscheds; i++)
        if (s->scheds[i].rl == rl && strcmp(s->scheds[i].mode, mode) == 0)
            return (ssize_t)i;
    return -1;
}

static bool schedule(const void *ref, bool is_read, RLRunLoopRef rl, RLRunLoopMode mode, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s || !rl__object_check(rl, NULL, fn) || !mode_ok(mode, fn))
        return false;
    pthread_mutex_lock(&s->lock);
    if (find_sched(s, rl, mode) >= 0) {
        pthread_mutex_unlock(&s->lock);
        return true;
    }
    if (!s->source) {
        RLRunLoopSourceContext sc = {.version = 0, .info = s, .perform = stream_perform};
        s->source = RLRunLoopSourceCreate(NULL, 0, &sc);
    }
    struct sched *n = s->source ? realloc(s->scheds, (s->nscheds + 1) * sizeof *n) : NULL;
    char *m = n ? strdup(mode) : NULL;
    if (!m) {
        if (n)
            s->scheds = n;
        pthread_mutex_unlock(&s->lock);
        return rl__fail(kRLErrorNoMemory, fn, "no memory");
    }
    s->scheds = n;
    if (!RLRunLoopAddSource(rl, s->source, mode)) {
        free(m);
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    RLRetain(rl);
    s->scheds[s->nscheds++] = (struct sched){rl, m};
    if (s->pending) {
        RLRunLoopSourceSignal(s->source);
        RLRunLoopWakeUp(rl);
    }
    pthread_mutex_unlock(&s->lock);
    if (s->sock) {
        pthread_mutex_lock(&s->sock->lock);
        if (s->sock->fdsrc)
            RLRunLoopAddSource(rl, s->sock->fdsrc, mode);
        pthread_mutex_unlock(&s->sock->lock);
    }
    return true;
}

bool RLReadStreamScheduleWithRunLoop(RLReadStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return schedule(s, true, rl, m, __func__);
}
bool RLWriteStreamScheduleWithRunLoop(RLWriteStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return schedule(s, false, rl, m, __func__);
}

static bool unschedule(const void *ref, bool is_read, RLRunLoopRef rl, RLRunLoopMode mode, const char *fn) {
    stream *s = check(ref, is_read, fn);
    if (!s || !rl__object_check(rl, NULL, fn) || !mode_ok(mode, fn))
        return false;
    pthread_mutex_lock(&s->lock);
    ssize_t i = find_sched(s, rl, mode);
    if (i < 0) {
        pthread_mutex_unlock(&s->lock);
        return rl__fail(kRLErrorNotFound, fn, "stream is not scheduled in mode \"%s\" of that run loop", mode);
    }
    struct sched gone = s->scheds[i];
    s->scheds[i] = s->scheds[--s->nscheds];
    RLRunLoopRemoveSource(rl, s->source, mode);
    pthread_mutex_unlock(&s->lock);
    if (s->sock) {
        sock_conn *c = s->sock;
        pthread_mutex_lock(&c->lock);
        stream *peer = is_read ? c->writer : c->reader;
        bool peer_there = false;
        if (peer) {
            pthread_mutex_lock(&peer->lock);
            peer_there = find_sched(peer, rl, mode) >= 0;
            pthread_mutex_unlock(&peer->lock);
        }
        if (c->fdsrc && !peer_there)
            RLRunLoopRemoveSource(rl, c->fdsrc, mode);
        pthread_mutex_unlock(&c->lock);
    }
    RLRelease(gone.rl);
    free(gone.mode);
    return true;
}

bool RLReadStreamUnscheduleFromRunLoop(RLReadStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return unschedule(s, true, rl, m, __func__);
}
bool RLWriteStreamUnscheduleFromRunLoop(RLWriteStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return unschedule(s, false, rl, m, __func__);
}
