/* CFSocket at the end of a stream: a Data callback gets one empty data and
 * the socket is invalidated once that callback returns (its fd closed
 * unless CloseOnInvalidate was cleared, its source invalid, its context
 * released), for a peer that closed and for one that reset the connection;
 * a callback that invalidates the socket itself changes nothing; a Read
 * callback at the end and an empty datagram leave the socket valid; a Read
 * callback's own read sees a reset (ECONNRESET), kCFSocketLeaveErrors or
 * not, and the end in the next callback. The
 * context's retains minus releases is traced outside callbacks only (CF
 * retains it around each callout). */
#include "diff.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int events;
static bool invalidate_at_end;

static void callback(CFSocketRef s, CFSocketCallBackType type, CFDataRef address, const void *data, void *info) {
    (void)address;
    const char *who = info;
    events++;
    if (type == kCFSocketDataCallBack) {
        CFIndex n = CFDataGetLength((CFDataRef)data);
        trace("%s: data %ld bytes (valid %d)", who, (long)n, CFSocketIsValid(s));
        if (n == 0 && invalidate_at_end) {
            CFSocketInvalidate(s);
            trace("%s: invalidated by the callback", who);
        }
    } else if (type == kCFSocketReadCallBack) {
        char buf[16];
        ssize_t n = read(CFSocketGetNative(s), buf, sizeof buf);
        if (n < 0)
            trace("%s: read -1 %s (valid %d)", who, errno == ECONNRESET ? "ECONNRESET" : "another error",
                  CFSocketIsValid(s));
        else
            trace("%s: read %ld bytes (valid %d)", who, (long)n, CFSocketIsValid(s));
    } else {
        trace("%s: type %lu", who, (unsigned long)type);
    }
}

static void run_for(int want) {
    int goal = events + want;
    for (int i = 0; i < 100 && events < goal; i++)
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, true);
}

static void run_quiet(const char *label) {
    int before = events;
    for (int i = 0; i < 4; i++)
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, false);
    trace("%s: %d callbacks", label, events - before);
}

/* A socket on fd with `types`, its source in the default mode. */
static CFSocketRef scheduled(int fd, CFOptionFlags types, const char *who, CFRunLoopSourceRef *src) {
    CFSocketContext ctx = {0, (void *)who, held_retain, held_release, NULL};
    CFSocketRef s = CFSocketCreateWithNative(NULL, fd, types, callback, &ctx);
    *src = CFSocketCreateRunLoopSource(NULL, s, 0);
    CFRunLoopAddSource(CFRunLoopGetCurrent(), *src, kCFRunLoopDefaultMode);
    return s;
}

static void show(CFSocketRef s, CFRunLoopSourceRef src, int fd) {
    trace("after: valid %d, native %d, source valid %d, context held %d, fd %s", CFSocketIsValid(s),
          CFSocketGetNative(s) == -1 ? -1 : 0, CFRunLoopSourceIsValid(src), held_count,
          fcntl(fd, F_GETFD) >= 0 ? "open" : "closed");
}

static void finish(CFSocketRef s, CFRunLoopSourceRef src) {
    CFSocketInvalidate(s);
    trace("invalidated again: context held %d", held_count);
    CFRelease(src);
    CFRelease(s);
}

/* A connected TCP pair over loopback: *client and *server (raw fds). */
static void tcp_pair(int *client, int *server) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) != 0)
        trace("listen failed");
    *client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(*client, (struct sockaddr *)&a, sizeof a) != 0)
        trace("connect failed");
    *server = accept(l, NULL, NULL);
    close(l);
}

/* Closes fd with a zero linger time: the connection is reset. */
static void close_with_reset(int fd) {
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* A Unix stream pair whose peer closes: a socket with `types` (and
 * `flags`, if any) on the kept end (*fd), run until its callback came,
 * then shown. */
static CFSocketRef after_peer_closes(CFOptionFlags types, CFOptionFlags flags, const char *who, int *fd,
                                     CFRunLoopSourceRef *src) {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    CFSocketRef s = scheduled(sv[0], types, who, src);
    if (flags)
        CFSocketSetSocketFlags(s, flags);
    close(sv[1]);
    run_for(1);
    show(s, *src, sv[0]);
    *fd = sv[0];
    return s;
}

void scenario(void) {
    CFRunLoopSourceRef src;
    int sv[2];

    trace("-- Data callback, the peer closes");
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    CFSocketRef s = scheduled(sv[0], kCFSocketDataCallBack, "S", &src);
    trace("context held %d", held_count);
    write(sv[1], "hi", 2);
    run_for(1);
    close(sv[1]);
    run_for(1);
    show(s, src, sv[0]);
    run_quiet("after the end");
    finish(s, src);

    trace("-- Data callback, the peer resets the connection");
    int client, server;
    tcp_pair(&client, &server);
    s = scheduled(server, kCFSocketDataCallBack, "T", &src);
    close_with_reset(client);
    run_for(1);
    show(s, src, server);
    run_quiet("after the reset");
    finish(s, src);

    int fd;
    trace("-- without CloseOnInvalidate");
    s = after_peer_closes(kCFSocketDataCallBack, kCFSocketAutomaticallyReenableDataCallBack, "K", &fd, &src);
    close(fd);
    finish(s, src);

    trace("-- the callback invalidates at the end");
    invalidate_at_end = true;
    s = after_peer_closes(kCFSocketDataCallBack, 0, "I", &fd, &src);
    invalidate_at_end = false;
    finish(s, src);

    trace("-- Read callback, the peer closes");
    /* Not re-enabled: CF reports a closed stream readable on every wake. */
    s = after_peer_closes(kCFSocketReadCallBack, kCFSocketCloseOnInvalidate, "R", &fd, &src);
    finish(s, src);
    trace("fd after invalidating: %s", fcntl(fd, F_GETFD) >= 0 ? "open" : "closed");

    for (int leave = 0; leave <= 1; leave++) {
        trace("-- Read callback, the peer resets the connection (LeaveErrors %d)", leave);
        tcp_pair(&client, &server);
        s = scheduled(server, kCFSocketReadCallBack, leave ? "L" : "E", &src);
        CFSocketSetSocketFlags(s, kCFSocketCloseOnInvalidate | (leave ? kCFSocketLeaveErrors : 0));
        close_with_reset(client);
        run_for(1);
        CFSocketEnableCallBacks(s, kCFSocketReadCallBack);
        run_for(1);
        show(s, src, server);
        finish(s, src);
    }

    trace("-- an empty datagram");
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    s = scheduled(sv[0], kCFSocketDataCallBack, "D", &src);
    send(sv[1], "", 0, 0);
    run_for(1);
    send(sv[1], "z", 1, 0);
    run_for(1);
    show(s, src, sv[0]);
    finish(s, src);
    close(sv[1]);

    trace("-- a datagram socket's error (ICMP port unreachable)");
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int gone = socket(AF_INET, SOCK_DGRAM, 0); /* a port nobody listens on once closed */
    bind(gone, (struct sockaddr *)&a, sizeof a);
    getsockname(gone, (struct sockaddr *)&a, &len);
    close(gone);
    connect(u, (struct sockaddr *)&a, sizeof a);
    s = scheduled(u, kCFSocketDataCallBack, "U", &src);
    send(u, "x", 1, 0);
    run_for(1);
    show(s, src, u);
    finish(s, src);
}
