/*
 * bench_echo_cf.c — the echo benchmark's server written once against
 * CoreFoundation's CFSocket API and built twice, as bench_runloop_cf.c is:
 *   -DBEC_CF  CoreFoundation's CFSocket and run loop (libFoundation.so of
 *             the Swift toolchain; on Linux a select() helper thread watches
 *             every CFSocket and hands readiness to the loop): bec_peer_cf.
 *             Needs clang with -fblocks for CF's headers.
 *   (none)    ours, through <crunloop/cf_compat.h>, whose CF names are
 *             plain aliases of the RLSocket functions: bec_peer_rl.
 * So both run the very same server: a listening socket with an Accept
 * callback, one socket per client with Data and Write callbacks.
 *   -DBEC_READCB  ours again, with the other CFSocket style: one socket
 *             per client with Read and Write callbacks, the callback
 *             reading (one recv of up to 64 KB per callback) itself:
 *             bec_peer_rl_read ("ours-read").
 *   -DBEC_BACKEND=\"io_uring\"  either of ours on the kernel backend named
 *             (RL_BACKEND set while the server's loop is made):
 *             bec_peer_rl_ur ("ours-ur"), bec_peer_rl_read_ur ("read-ur").
 *             These reply with CFSocketSendData, which a loop on io_uring
 *             queues for its ring (sent with the loop's next enter), where
 *             the others call send() themselves.
 *             Without it ours run on the process's default backend:
 *             epoll, from which ours's loop (Data callbacks) moves to
 *             io_uring at its first Data callout where the kernel allows
 *             it (its reads then go through the ring; it still sends
 *             itself), and ours-read's (its callouts read and send
 *             themselves) never does; RL_BACKEND=epoll keeps both on epoll.
 */
#ifdef BEC_CF
#include <CoreFoundation/CoreFoundation.h>
#define BEC_PEER bec_peer_cf
#define BEC_PEER_NAME "CF"
#define BEC_THREADS "+1 select() thread for all sockets"
#elif defined(BEC_READCB) && defined(BEC_BACKEND)
#include <crunloop/cf_compat.h>
#define BEC_PEER bec_peer_rl_read_ur
#define BEC_PEER_NAME "read-ur"
#define BEC_THREADS "none"
#elif defined(BEC_READCB)
#include <crunloop/cf_compat.h>
#define BEC_PEER bec_peer_rl_read
#define BEC_PEER_NAME "ours-read"
#define BEC_THREADS "none"
#elif defined(BEC_BACKEND)
#include <crunloop/cf_compat.h>
#define BEC_PEER bec_peer_rl_ur
#define BEC_PEER_NAME "ours-ur"
#define BEC_THREADS "none"
#else
#include <crunloop/cf_compat.h>
#define BEC_PEER bec_peer_rl
#define BEC_PEER_NAME "ours"
#define BEC_THREADS "none"
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_echo.h"

/* The read-side callback type each connection uses. */
#ifdef BEC_READCB
#define BEC_READ_TYPE kCFSocketReadCallBack
#else
#define BEC_READ_TYPE kCFSocketDataCallBack
#endif

typedef struct cf_server cf_server;

/* A connection is its socket: the context's info is its fd, and the
 * server finds it in `slots`, indexed by fd. Only a connection whose
 * output backed up (a short send) gets a record for what waits to go out
 * (kept from then on, as its buffer is); the slot then points at the
 * record, tagged with the low bit. So an idle connection costs the server
 * one pointer. */
typedef struct cf_pending {
    CFSocketRef socket;
    bec_buf out;
    bool paused, ended;
} cf_pending;

struct cf_server {
    pthread_t thread;
    sem_t ready;
    CFRunLoopRef loop;
    CFRunLoopSourceRef stopper; /* signalled by stop() */
    CFSocketRef listener;
    uintptr_t *slots; /* by fd: the CFSocketRef, or its cf_pending | 1; 0: none */
    size_t nslots;
    unsigned port;
    bool done;
    char *note;
};

/* The server whose loop runs on this thread (the connections' callbacks
 * come on it), and its slots (a copy: one load less per callback). */
#define CF_TLS __thread __attribute__((tls_model("initial-exec"))) /* a load, not a call */
static CF_TLS cf_server *cf_here;
static CF_TLS uintptr_t *cf_slots;

static inline cf_pending *cf_pending_of(uintptr_t slot) {
    return (slot & 1) ? (cf_pending *)(slot & ~(uintptr_t)1) : NULL;
}

static inline CFSocketRef cf_socket_of(uintptr_t slot) {
    cf_pending *p = cf_pending_of(slot);
    return p ? p->socket : (CFSocketRef)slot;
}

static void cf_close(cf_server *server, int fd) {
    uintptr_t slot = server->slots[fd];
    server->slots[fd] = 0;
    CFSocketRef sock = cf_socket_of(slot);
    CFSocketInvalidate(sock);
    CFRelease(sock);
    cf_pending *p = cf_pending_of(slot);
    if (p) {
        free(p->out.bytes);
        free(p);
    }
}

/* Sends what the kernel takes now; -1: the connection is broken. A short
 * send means the socket's buffer is full: the rest waits for the write
 * callback instead of a second send that would only say EAGAIN (as libuv
 * does). */
static ssize_t cf_send(int fd, const void *p, size_t n) {
    for (;;) {
        ssize_t r = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r >= 0) return r;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
    }
}

/* After sending: wait for room, pause reading, resume it, or close. */
static void cf_after_send(cf_server *server, int fd, cf_pending *c) {
    if (c->out.len > 0) {
        CFSocketEnableCallBacks(c->socket, kCFSocketWriteCallBack);
        if (c->out.len >= BEC_HIGH_WATER && !c->paused && !c->ended) {
            CFSocketDisableCallBacks(c->socket, BEC_READ_TYPE);
            c->paused = true;
        }
    } else if (c->ended) {
        cf_close(server, fd);
    } else if (c->paused) {
        c->paused = false;
        CFSocketEnableCallBacks(c->socket, BEC_READ_TYPE);
    }
}

/* The connection on fd gets a pending record; NULL: no memory. */
static cf_pending *cf_pend(cf_server *server, int fd) {
    cf_pending *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->socket = (CFSocketRef)server->slots[fd];
    server->slots[fd] = (uintptr_t)c | 1;
    return c;
}

/* What the fast path of cf_conn_cb could not finish: n bytes read (n <= 0:
 * the end), of which a first send took `tried` (CF_NOT_TRIED: none was
 * made), on a connection that may have output waiting. */
#define CF_NOT_TRIED ((ssize_t)-2)
static __attribute__((noinline)) void cf_conn_got(int fd, const UInt8 *bytes, CFIndex n, ssize_t tried) {
    cf_pending *c = cf_pending_of(cf_slots[fd]);
    if (n <= 0) {
        if (!c || c->out.len == 0) {
            cf_close(cf_here, fd);
            return;
        }
        c->ended = true;
        cf_after_send(cf_here, fd, c);
        return;
    }
    ssize_t sent = tried;
    if (sent == CF_NOT_TRIED)
        sent = c && c->out.len > 0 ? 0 : cf_send(fd, bytes, (size_t)n);
    if (sent < 0) {
        cf_close(cf_here, fd);
        return;
    }
    if ((size_t)sent < (size_t)n) {
        if ((!c && !(c = cf_pend(cf_here, fd))) || !bec_buf_append(&c->out, bytes + sent, (size_t)n - (size_t)sent)) {
            cf_close(cf_here, fd);
            return;
        }
    }
    if (c)
        cf_after_send(cf_here, fd, c);
}

/* Room again on a connection whose output waits. */
static __attribute__((noinline)) void cf_conn_writable(int fd) {
    cf_pending *c = cf_pending_of(cf_slots[fd]);
    if (!c)
        return;
    ssize_t sent = cf_send(fd, c->out.bytes + c->out.start, c->out.len);
    if (sent < 0) {
        cf_close(cf_here, fd);
        return;
    }
    bec_buf_consume(&c->out, (size_t)sent);
    cf_after_send(cf_here, fd, c);
}

/* The common case first: bytes in, nothing waiting to go out, all sent
 * back at once. */
static void cf_conn_cb(CFSocketRef s, CFSocketCallBackType type, CFDataRef address, const void *data, void *info) {
    (void)s, (void)address;
    int fd = (int)(intptr_t)info;
    if (type == kCFSocketWriteCallBack) {
        cf_conn_writable(fd);
        return;
    }
    if (type != BEC_READ_TYPE)
        return;
#ifdef BEC_READCB
    (void)data;
    static __thread UInt8 rbuf[65536];
    ssize_t got = recv(fd, rbuf, sizeof rbuf, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return; /* nothing after all: the callback comes again */
    if (got < 0) {
        cf_close(cf_here, fd);
        return;
    }
    CFIndex n = (CFIndex)got;
    const UInt8 *bytes = rbuf;
#else
    CFDataRef d = (CFDataRef)data;
    CFIndex n = CFDataGetLength(d);
    const UInt8 *bytes = n > 0 ? CFDataGetBytePtr(d) : NULL;
#endif
#ifdef BEC_BACKEND
    /* On a ring (ours-ur, read-ur): the reply through RLSocketSendData,
     * which queues it for the loop's ring to send with its next enter (no
     * system call of its own; the call fails only for a broken stream). */
    if (n > 0 && !(cf_slots[fd] & 1)) {
#ifdef BEC_READCB
        CFDataRef out = CFDataCreate(NULL, bytes, n);
        CFSocketError e = out ? CFSocketSendData(s, NULL, out, 5) : kCFSocketError;
        if (out)
            CFRelease(out);
#else
        CFSocketError e = CFSocketSendData(s, NULL, d, 5);
#endif
        if (e != kCFSocketSuccess)
            cf_close(cf_here, fd);
        return;
    }
#endif
    ssize_t tried = CF_NOT_TRIED;
    if (n > 0 && !(cf_slots[fd] & 1)) {
        tried = send(fd, bytes, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (tried == (ssize_t)n)
            return;
        if (tried < 0)
            tried = CF_NOT_TRIED; /* cf_send tries again and tells EAGAIN from a broken connection */
    }
    cf_conn_got(fd, bytes, n, tried);
}

static void cf_accept(cf_server *server, int fd) {
    if ((size_t)fd >= server->nslots) {
        size_t n = server->nslots ? server->nslots : 64;
        while (n <= (size_t)fd) n *= 2;
        uintptr_t *a = realloc(server->slots, n * sizeof *a);
        if (!a) {
            close(fd);
            return;
        }
        memset(a + server->nslots, 0, (n - server->nslots) * sizeof *a);
        server->slots = cf_slots = a;
        server->nslots = n;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    CFSocketContext ctx = {0, (void *)(intptr_t)fd, NULL, NULL, NULL};
    CFSocketRef sock = CFSocketCreateWithNative(NULL, fd, BEC_READ_TYPE | kCFSocketWriteCallBack, cf_conn_cb, &ctx);
    if (!sock) {
        close(fd);
        return;
    }
    CFSocketDisableCallBacks(sock, kCFSocketWriteCallBack); /* until something waits */
    server->slots[fd] = (uintptr_t)sock;
    CFRunLoopSourceRef src = CFSocketCreateRunLoopSource(NULL, sock, 0);
    CFRunLoopAddSource(server->loop, src, kCFRunLoopDefaultMode);
    CFRelease(src);
}

static void cf_listener_cb(CFSocketRef s, CFSocketCallBackType type, CFDataRef address, const void *data, void *info) {
    (void)s, (void)address;
    if (type == kCFSocketAcceptCallBack) cf_accept(info, *(const CFSocketNativeHandle *)data);
}

static void cf_stop_perform(void *info) {
    cf_server *server = info;
    server->done = true;
    CFRunLoopStop(server->loop);
}

static void *cf_server_main(void *arg) {
    cf_server *server = arg;
    server->loop = CFRunLoopGetCurrent();
    cf_here = server;
#ifdef BEC_BACKEND
    const char *backend = RLRunLoopGetBackendName(server->loop);
    if (!backend || strcmp(backend, BEC_BACKEND) != 0) {
        snprintf(server->note, 120, "%s: its loop is on %s, not %s (the kernel refuses it?)", BEC_PEER_NAME,
                 backend ? backend : "no backend", BEC_BACKEND);
        sem_post(&server->ready);
        return NULL;
    }
#endif
    CFRunLoopSourceContext sctx = {0};
    sctx.info = server;
    sctx.perform = cf_stop_perform;
    server->stopper = CFRunLoopSourceCreate(NULL, 0, &sctx);
    CFRunLoopAddSource(server->loop, server->stopper, kCFRunLoopDefaultMode);
    CFSocketContext ctx = {0, server, NULL, NULL, NULL};
    server->listener = CFSocketCreate(NULL, PF_INET, SOCK_STREAM, IPPROTO_TCP, kCFSocketAcceptCallBack,
                                      cf_listener_cb, &ctx);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CFDataRef addr = CFDataCreate(NULL, (const UInt8 *)&sin, sizeof sin);
    if (!server->listener || CFSocketSetAddress(server->listener, addr) != kCFSocketSuccess) {
        snprintf(server->note, 120, "%s: cannot listen on 127.0.0.1", BEC_PEER_NAME);
        CFRelease(addr);
        sem_post(&server->ready);
        return NULL;
    }
    CFRelease(addr);
    CFDataRef got = CFSocketCopyAddress(server->listener);
    struct sockaddr_in bound;
    memcpy(&bound, CFDataGetBytePtr(got), sizeof bound);
    CFRelease(got);
    server->port = ntohs(bound.sin_port);
    CFRunLoopSourceRef src = CFSocketCreateRunLoopSource(NULL, server->listener, 0);
    CFRunLoopAddSource(server->loop, src, kCFRunLoopDefaultMode);
    CFRelease(src);
    sem_post(&server->ready);
    while (!server->done) CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1e6, false);
    for (size_t fd = 0; fd < server->nslots; fd++)
        if (server->slots[fd]) cf_close(server, (int)fd);
    free(server->slots);
    CFSocketInvalidate(server->listener);
    CFRelease(server->listener);
    CFRunLoopSourceInvalidate(server->stopper);
    CFRelease(server->stopper);
    return NULL;
}

static void *cf_start(unsigned *port, char *note) {
    cf_server *server = calloc(1, sizeof *server);
    if (!server) return NULL;
    server->note = note;
    sem_init(&server->ready, 0, 0);
#ifdef BEC_BACKEND
    /* Read as the server's loop is made (before `ready`); the servers are
     * started one after another, so no other loop is made meanwhile. */
    const char *was = getenv("RL_BACKEND");
    char *saved = was ? strdup(was) : NULL;
    setenv("RL_BACKEND", BEC_BACKEND, 1);
#endif
    int made = pthread_create(&server->thread, NULL, cf_server_main, server);
    if (made == 0)
        sem_wait(&server->ready);
#ifdef BEC_BACKEND
    if (saved)
        setenv("RL_BACKEND", saved, 1);
    else
        unsetenv("RL_BACKEND");
    free(saved);
#endif
    if (made != 0) {
        snprintf(note, 120, "%s: cannot start a thread", BEC_PEER_NAME);
        free(server);
        return NULL;
    }
    if (server->port == 0) {
        pthread_join(server->thread, NULL);
        free(server);
        return NULL;
    }
    *port = server->port;
    return server;
}

static void cf_stop(void *p) {
    cf_server *server = p;
    CFRunLoopSourceSignal(server->stopper);
    CFRunLoopWakeUp(server->loop);
    pthread_join(server->thread, NULL);
    sem_destroy(&server->ready);
    free(server);
}

const bec_peer BEC_PEER = {BEC_PEER_NAME, cf_start, cf_stop, BEC_THREADS};
