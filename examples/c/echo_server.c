/*
 * echo_server.c — a TCP echo server on one run loop, serving many clients
 * at once with RLSocket (CoreFoundation's CFSocket API, RL prefix).
 *
 *   echo_server [-v] [PORT [ADDRESS]]
 *
 * PORT 0 (the default) takes any free port; ADDRESS is a numeric IPv4 or
 * IPv6 address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every
 * interface). The first line printed is "listening on PORT", flushed, so
 * a script can read the port and any client can talk to it:
 *
 *   $ echo_server &            listening on 41234
 *   $ nc localhost 41234       (or: echo_client localhost 41234)
 *
 * SIGINT (Ctrl-C) or SIGTERM stops it cleanly: every connection is closed,
 * a summary line is printed and the exit status is 0. -v also prints a line
 * for each connection that opens or closes.
 *
 * How it serves many clients on one thread, without ever blocking it:
 *   - The listening socket has an Accept callback: the library accepts each
 *     pending connection and hands over its fd, which gets its own RLSocket
 *     with a Data callback (whatever arrived, read in one wake) and a Write
 *     callback (the socket can take more), added to the same run loop.
 *   - Data is sent back at once with a non-blocking send. What the kernel
 *     does not take now waits in the connection's buffer, and the Write
 *     callback is enabled to send it when there is room.
 *   - Back-pressure: a client that sends faster than it reads its echoes
 *     would make that buffer grow without end. Above ECHO_HIGH_WATER bytes
 *     the server stops reading from that client (DisableCallBacks) until
 *     the buffer is empty again; the client's own sends then wait in the
 *     kernel. Every other client goes on being served meanwhile.
 *   - End of a client's data (it closed or half-closed its side): what is
 *     still buffered is sent, then the connection is closed. As a CFSocket
 *     does, the socket invalidates itself after that last (empty) Data
 *     callback, so the rest goes out through a second socket on the same
 *     fd with only a Write callback.
 *   - Signals arrive as ordinary run-loop callouts (RLSignalSource, which
 *     reads them from a signalfd), so stopping needs no code in a signal
 *     handler: the callout stops the loop, and main cleans up.
 *
 * The server's work sits in echo_server_run() so that the tests
 * (Tests/c/test_echo.c) can run the very same code under the sanitizers.
 */
#include "example_support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Above this many unsent bytes for one client, stop reading from it. */
#define ECHO_HIGH_WATER (256 * 1024)

typedef struct EchoServer EchoServer;

/* What a connection needs beyond its socket, made only when it needs it:
 * echoes the kernel did not take yet (they wait in buf[start, start +
 * len)), or, with -v, what the log says of it. An idle connection has
 * none: its socket is all the server keeps of it (in `slots`), so that
 * many idle clients cost the server little. */
typedef struct EchoConnection {
    RLSocketRef socket;
    uint8_t *buf;
    size_t start, len, cap;
    bool reading_paused;       /* the Data callback is off: too much is waiting */
    bool input_ended;          /* the client sent its last byte */
    unsigned long id;          /* -v: the log's number for it */
    unsigned long long echoed; /* -v */
    char peer[64];             /* -v: "host:port" */
} EchoConnection;

struct EchoServer {
    RLRunLoopRef loop;
    RLSocketRef listener;
    FILE *out;
    bool verbose;
    bool stopping;
    int stop_signal;
    /* Every open connection, by fd (fds are small numbers, reused as
     * connections come and go): its RLSocketRef, or, once it has one, its
     * EchoConnection's address with the low bit set (a malloc'ed address
     * is even). 0: no connection on that fd. */
    uintptr_t *slots;
    size_t nslots;
    unsigned long accepted, open, max_open, paused;
    unsigned long long echoed;
};

static EchoConnection *server_record_of(uintptr_t slot) {
    return (slot & 1) ? (EchoConnection *)(slot & ~(uintptr_t)1) : NULL;
}

static RLSocketRef server_socket_of(uintptr_t slot) {
    EchoConnection *c = server_record_of(slot);
    return c ? c->socket : (RLSocketRef)slot;
}

/* The record of the connection on fd, made now if it has none (NULL: no
 * memory). */
static EchoConnection *server_record(EchoServer *server, int fd) {
    EchoConnection *c = server_record_of(server->slots[fd]);
    if (c)
        return c;
    c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->socket = (RLSocketRef)server->slots[fd];
    server->slots[fd] = (uintptr_t)c | 1;
    return c;
}

static void server_log(EchoServer *server, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void server_log(EchoServer *server, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(server->out, fmt, ap);
    va_end(ap);
    fputc('\n', server->out);
    fflush(server->out);
}

/* "host:port" of a socket address. */
static void server_describe_address(const struct sockaddr *sa, char *buf, size_t size) {
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
        port = ntohs(sin->sin_port);
        snprintf(buf, size, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
        port = ntohs(sin6->sin6_port);
        snprintf(buf, size, "[%s]:%u", host, port);
    } else {
        snprintf(buf, size, "(family %d)", sa->sa_family);
    }
}

/* Closes the connection on fd: its socket leaves the loop and the fd is
 * closed (kRLSocketCloseOnInvalidate, the default). Safe inside its own
 * callback. */
static void server_close_connection(EchoServer *server, int fd, const char *why) {
    uintptr_t slot = server->slots[fd];
    EchoConnection *c = server_record_of(slot);
    RLSocketRef socket = server_socket_of(slot);
    if (server->verbose && c)
        server_log(server, "connection %lu from %s closed: %s (%llu bytes echoed)", c->id, c->peer, why, c->echoed);
    server->slots[fd] = 0;
    server->open--;
    RLSocketInvalidate(socket);
    RLRelease(socket);
    if (c) {
        free(c->buf);
        free(c);
    }
}

/* Keeps n more bytes for later. False: no memory. */
static bool server_buffer_append(EchoConnection *c, const uint8_t *bytes, size_t n) {
    if (c->start > 0 && c->start + c->len + n > c->cap) {
        memmove(c->buf, c->buf + c->start, c->len); /* reuse the room at the front */
        c->start = 0;
    }
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n)
            cap *= 2;
        uint8_t *grown = realloc(c->buf, cap);
        if (!grown)
            return false;
        c->buf = grown;
        c->cap = cap;
    }
    memcpy(c->buf + c->start + c->len, bytes, n);
    c->len += n;
    return true;
}

/* Sends as much of bytes[0, n) on fd as the kernel takes now, never
 * waiting (c: the connection's record, if it has one). Returns the count
 * sent, or -1 if the connection is broken (errno). One send: a short one
 * means the kernel's buffer is full, and the rest waits for the write
 * callback (asking again at once would only say EAGAIN, a system call for
 * nothing on every full buffer). */
static ssize_t server_send_now(EchoServer *server, int fd, EchoConnection *c, const uint8_t *bytes, size_t n) {
    ssize_t r;
    do
        r = send(fd, bytes, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
    size_t sent = r > 0 ? (size_t)r : 0;
    if (c)
        c->echoed += sent;
    server->echoed += sent;
    return (ssize_t)sent;
}

/* Sends what is waiting. False if the connection was closed. */
static bool server_flush(EchoServer *server, int fd, EchoConnection *c) {
    ssize_t sent = server_send_now(server, fd, c, c->buf + c->start, c->len);
    if (sent < 0) {
        server_close_connection(server, fd, strerror(errno));
        return false;
    }
    c->start += (size_t)sent;
    c->len -= (size_t)sent;
    if (c->len == 0)
        c->start = 0;
    return true;
}

/* After a send: what to watch next. Bytes left: the Write callback (it is
 * not re-enabled automatically, so each wait enables it once); above the
 * high-water mark, reading pauses. All sent: reading resumes, or, if the
 * client has finished, the connection closes. */
static void server_after_send(EchoServer *server, int fd, EchoConnection *c) {
    if (c->len > 0) {
        RLSocketEnableCallBacks(c->socket, kRLSocketWriteCallBack);
        if (c->len >= ECHO_HIGH_WATER && !c->reading_paused && !c->input_ended) {
            RLSocketDisableCallBacks(c->socket, kRLSocketDataCallBack);
            c->reading_paused = true;
            server->paused++;
        }
        return;
    }
    if (c->input_ended) {
        server_close_connection(server, fd, "the client finished");
        return;
    }
    if (c->reading_paused) {
        c->reading_paused = false;
        RLSocketEnableCallBacks(c->socket, kRLSocketDataCallBack);
    }
}

static void server_connection_callback(RLSocketRef s, RLSocketCallBackType type, RLDataRef address,
                                       const void *data, void *info);

/* The client's data ended with bytes still waiting for room: the reading
 * socket is invalidated when its callback returns (as a CFSocket is), so
 * a socket with only a Write callback takes over the fd (which the reading
 * socket now leaves open). False: it could not; the fd is closed, and
 * c->socket is still the reading one, for server_close_connection. */
static bool server_keep_writing(EchoServer *server, int fd, EchoConnection *c) {
    RLSocketRef reader = c->socket;
    (void)RLSocketSetSocketFlags(reader, RLSocketGetSocketFlags(reader) & ~(RLOptionFlags)kRLSocketCloseOnInvalidate);
    (void)RLSocketInvalidate(reader);
    RLSocketContext context = {.version = 0, .info = server};
    RLSocketRef writer =
        RLSocketCreateWithNative(NULL, fd, kRLSocketWriteCallBack, server_connection_callback, &context);
    RLRunLoopSourceRef source = writer ? RLSocketCreateRunLoopSource(NULL, writer, 0) : NULL;
    bool ok = source && RLRunLoopAddSource(server->loop, source, kRLRunLoopDefaultMode);
    if (source)
        RLRelease(source);
    if (!ok) {
        if (writer) {
            RLSocketInvalidate(writer); /* closes fd */
            RLRelease(writer);
        } else {
            close(fd);
        }
        return false;
    }
    RLRelease(reader);
    c->socket = writer;
    return true;
}

static void server_on_data(EchoServer *server, int fd, RLDataRef data) {
    EchoConnection *c = server_record_of(server->slots[fd]);
    RLIndex n = RLDataGetLength(data);
    if (n <= 0) {
        /* The end of the client's data (or a read error): send what is
         * left, then close. */
        if (!c || c->len == 0) {
            server_close_connection(server, fd, "the client finished");
            return;
        }
        c->input_ended = true;
        if (!server_keep_writing(server, fd, c)) {
            server_close_connection(server, fd, "cannot send the rest");
            return;
        }
        server_after_send(server, fd, c);
        return;
    }
    const uint8_t *bytes = RLDataGetBytePtr(data);
    size_t sent = 0;
    if (!c || c->len == 0) { /* nothing queued before these: send them now */
        ssize_t r = server_send_now(server, fd, c, bytes, (size_t)n);
        if (r < 0) {
            server_close_connection(server, fd, strerror(errno));
            return;
        }
        sent = (size_t)r;
        if (sent == (size_t)n && !c)
            return; /* all gone, and nothing else to watch: the usual case */
    }
    /* A short send: the rest waits in the connection's record. */
    if (sent < (size_t)n && !((c = server_record(server, fd)) && server_buffer_append(c, bytes + sent, (size_t)n - sent))) {
        server_close_connection(server, fd, "out of memory");
        return;
    }
    server_after_send(server, fd, c);
}

static void server_connection_callback(RLSocketRef s, RLSocketCallBackType type, RLDataRef address,
                                       const void *data, void *info) {
    (void)address;
    EchoServer *server = info;
    int fd = RLSocketGetNative(s);
    if (type == kRLSocketDataCallBack) {
        server_on_data(server, fd, (RLDataRef)data);
    } else if (type == kRLSocketWriteCallBack) {
        EchoConnection *c = server_record_of(server->slots[fd]);
        if (c && server_flush(server, fd, c))
            server_after_send(server, fd, c);
    }
}

/* Room in `slots` for fd. False: no memory. */
static bool server_make_room(EchoServer *server, int fd) {
    if ((size_t)fd < server->nslots)
        return true;
    size_t n = server->nslots ? server->nslots : 64;
    while (n <= (size_t)fd)
        n *= 2;
    uintptr_t *grown = realloc(server->slots, n * sizeof *grown);
    if (!grown)
        return false;
    memset(grown + server->nslots, 0, (n - server->nslots) * sizeof *grown);
    server->slots = grown;
    server->nslots = n;
    return true;
}

/* A new client: its own socket object in the same loop. */
static void server_accept(EchoServer *server, int fd, RLDataRef address) {
    if (!server_make_room(server, fd)) {
        server_log(server, "cannot serve a new connection: out of memory");
        close(fd);
        return;
    }
    /* Echoes are small and answer what just came in: send each at once
     * instead of letting Nagle's algorithm hold it back for an ACK. */
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    RLSocketContext context = {.version = 0, .info = server};
    RLSocketRef socket = RLSocketCreateWithNative(NULL, fd, kRLSocketDataCallBack | kRLSocketWriteCallBack,
                                                  server_connection_callback, &context);
    RLRunLoopSourceRef source = socket ? RLSocketCreateRunLoopSource(NULL, socket, 0) : NULL;
    /* Nothing to write yet: the Write callback waits until something is
     * queued (server_after_send). */
    if (!source || !RLSocketDisableCallBacks(socket, kRLSocketWriteCallBack) ||
        !RLRunLoopAddSource(server->loop, source, kRLRunLoopDefaultMode)) {
        server_log(server, "cannot serve a new connection: %s", RLErrorGetLast().message);
        if (source)
            RLRelease(source);
        if (socket) {
            RLSocketInvalidate(socket); /* closes fd */
            RLRelease(socket);
        } else {
            close(fd);
        }
        return;
    }
    RLRelease(source); /* the loop keeps it while it is added */
    server->slots[fd] = (uintptr_t)socket;
    server->accepted++;
    if (++server->open > server->max_open)
        server->max_open = server->open;
    if (server->verbose) {
        EchoConnection *c = server_record(server, fd);
        if (!c) {
            server_close_connection(server, fd, "out of memory");
            return;
        }
        c->id = server->accepted;
        if (address)
            server_describe_address((const struct sockaddr *)RLDataGetBytePtr(address), c->peer, sizeof c->peer);
        server_log(server, "connection %lu from %s (%lu open)", c->id, c->peer, server->open);
    }
}

static void server_listener_callback(RLSocketRef s, RLSocketCallBackType type, RLDataRef address,
                                     const void *data, void *info) {
    (void)s;
    if (type == kRLSocketAcceptCallBack)
        server_accept(info, *(const int *)data, address);
}

/* --stats: the loop's statistics on SIGUSR1 and at the end (timing on). */
static bool server_stats;

static void server_stats_callback(RLSignalSourceRef source, int signum, RLIndex count, void *info) {
    (void)source, (void)signum, (void)count;
    EchoServer *server = info;
    example_print_statistics(server->out, "the server's loop", server->loop);
    fflush(server->out);
}

static void server_signal_callback(RLSignalSourceRef source, int signum, RLIndex count, void *info) {
    (void)source, (void)count;
    EchoServer *server = info;
    server->stopping = true;
    server->stop_signal = signum;
    RLRunLoopStop(server->loop);
}

/* A listening socket on address:port, or NULL (message printed). */
static RLSocketRef server_listen(EchoServer *server, const char *address, unsigned port) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    int family;
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, address, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        len = sizeof *sin;
        family = PF_INET;
    } else if (inet_pton(AF_INET6, address, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        len = sizeof *sin6;
        family = PF_INET6;
    } else {
        fprintf(stderr, "echo_server: %s is not a numeric IPv4 or IPv6 address\n", address);
        return NULL;
    }
    RLSocketContext context = {.version = 0, .info = server};
    RLSocketRef listener =
        RLSocketCreate(NULL, family, SOCK_STREAM, IPPROTO_TCP, kRLSocketAcceptCallBack, server_listener_callback, &context);
    if (!listener) {
        fprintf(stderr, "echo_server: cannot make a socket: %s\n", RLErrorGetLast().message);
        return NULL;
    }
    RLDataRef where = RLDataCreate(NULL, (const uint8_t *)&ss, (RLIndex)len);
    bool ok = where && RLSocketSetAddress(listener, where) == kRLSocketSuccess;
    if (where)
        RLRelease(where);
    if (!ok) {
        fprintf(stderr, "echo_server: cannot listen on %s port %u: %s\n", address, port, RLErrorGetLast().message);
        RLSocketInvalidate(listener);
        RLRelease(listener);
        return NULL;
    }
    return listener;
}

/* The port a listening socket got (the one asked for, or the kernel's pick
 * for port 0). */
static unsigned server_port(RLSocketRef listener) {
    RLDataRef address = RLSocketCopyAddress(listener);
    if (!address)
        return 0;
    const struct sockaddr *sa = (const struct sockaddr *)RLDataGetBytePtr(address);
    unsigned port = sa->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
                                              : ntohs(((const struct sockaddr_in *)sa)->sin_port);
    RLRelease(address);
    return port;
}

/* Serves on the calling thread's run loop until SIGINT or SIGTERM; prints
 * "listening on PORT" first, then (verbose) a line per connection, and a
 * summary at the end, all to out. Returns the exit status. */
static int echo_server_run(const char *address, unsigned port, bool verbose, FILE *out) {
    EchoServer server = {.loop = RLRunLoopGetCurrent(), .out = out, .verbose = verbose};
    /* The signals first: RLSignalSourceCreate blocks them in this thread,
     * so that they reach the loop rather than kill the process. */
    RLSignalSourceContext signal_context = {.version = 0, .info = &server};
    RLSignalSourceRef on_int = RLSignalSourceCreate(NULL, SIGINT, server_signal_callback, &signal_context);
    RLSignalSourceRef on_term = RLSignalSourceCreate(NULL, SIGTERM, server_signal_callback, &signal_context);
    bool watching = on_int && on_term && RLRunLoopAddSignalSource(server.loop, on_int, kRLRunLoopDefaultMode) &&
                    RLRunLoopAddSignalSource(server.loop, on_term, kRLRunLoopDefaultMode);
    if (!watching)
        fprintf(stderr, "echo_server: cannot watch SIGINT and SIGTERM: %s\n", RLErrorGetLast().message);
    RLSignalSourceRef on_usr1 = NULL;
    if (watching && server_stats) {
        on_usr1 = RLSignalSourceCreate(NULL, SIGUSR1, server_stats_callback, &signal_context);
        watching = on_usr1 && RLRunLoopAddSignalSource(server.loop, on_usr1, kRLRunLoopDefaultMode) &&
                   RLRunLoopSetTimingEnabled(server.loop, true);
        if (!watching)
            fprintf(stderr, "echo_server: cannot watch SIGUSR1 for --stats: %s\n", RLErrorGetLast().message);
    }
    int status = 1;
    server.listener = watching ? server_listen(&server, address, port) : NULL;
    RLRunLoopSourceRef source = server.listener ? RLSocketCreateRunLoopSource(NULL, server.listener, 0) : NULL;
    if (source && RLRunLoopAddSource(server.loop, source, kRLRunLoopDefaultMode)) {
        server_log(&server, "listening on %u", server_port(server.listener));
        while (!server.stopping)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e9, false);
        server_log(&server, "stopping on %s: %lu connections served (at most %lu at once), %llu bytes echoed, "
                            "%lu pauses for back-pressure",
                   server.stop_signal == SIGINT ? "SIGINT" : "SIGTERM", server.accepted, server.max_open,
                   server.echoed, server.paused);
        if (server_stats)
            example_print_statistics(out, "the server's loop", server.loop);
        status = 0;
    }
    if (source)
        RLRelease(source);
    for (size_t fd = 0; fd < server.nslots; fd++)
        if (server.slots[fd])
            server_close_connection(&server, (int)fd, "the server is stopping");
    free(server.slots);
    if (server.listener) {
        RLSocketInvalidate(server.listener);
        RLRelease(server.listener);
    }
    RLSignalSourceRef watchers[3] = {on_int, on_term, on_usr1};
    for (int i = 0; i < 3; i++) {
        if (watchers[i]) {
            RLSignalSourceInvalidate(watchers[i]);
            RLRelease(watchers[i]);
        }
    }
    return status;
}

/* Each client needs a descriptor: allow as many as the hard limit lets. */
static void server_raise_fd_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &limit);
    }
}

/* The usage text (to stderr with status 2 after a bad argument; to stdout
 * with status 0 for -h). */
static int usage(const char *argv0, FILE *to, int status) {
    const char *slash = strrchr(argv0, '/');
    fprintf(to,
            "usage: %s [-v] [--stats] [PORT [ADDRESS]]\n"
            "  PORT     0 (default): any free port; printed as \"listening on PORT\"\n"
            "  ADDRESS  numeric address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)\n"
            "  -v       a line for each connection that opens or closes\n"
            "  --stats  the loop's statistics (wake-ups, callouts, latencies) on SIGUSR1 and at the end\n"
            "Stops cleanly on SIGINT or SIGTERM.\n",
            slash ? slash + 1 : argv0);
    return status;
}

int main(int argc, char **argv) {
    bool verbose = false;
    const char *args[2] = {"0", "127.0.0.1"};
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return usage(argv[0], stdout, 0);
        if (strcmp(argv[i], "-v") == 0)
            verbose = true;
        else if (strcmp(argv[i], "--stats") == 0)
            server_stats = true;
        else if (argv[i][0] == '-' || nargs == 2)
            return usage(argv[0], stderr, 2);
        else
            args[nargs++] = argv[i];
    }
    char *end;
    unsigned long port = strtoul(args[0], &end, 10);
    if (*end || end == args[0] || port > 65535)
        return usage(argv[0], stderr, 2);
    server_raise_fd_limit();
    return echo_server_run(args[1], (unsigned)port, verbose, stdout);
}
