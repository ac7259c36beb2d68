/* CFSocketSignature over loopback TCP: CFSocketCreateWithSocketSignature
 * binds and listens; CFSocketCreateConnectedToSocketSignature connects
 * with a wait (> 0), blocking (0) or in the background (< 0, the Connect
 * callback reports it), returns NULL when the peer refuses (with a wait)
 * or does not answer in time, and reports a refusal in the background to
 * the Connect callback; an address in use or an unknown family gives NULL.
 * A socket made for a failed call took the context and gave it back. */
#include "diff.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int events, accepts, connects;

static void callback(CFSocketRef s, CFSocketCallBackType type, CFDataRef address, const void *data, void *info) {
    (void)s, (void)address;
    const char *who = info;
    events++;
    if (type == kCFSocketAcceptCallBack) {
        close(*(const CFSocketNativeHandle *)data);
        accepts++;
        trace("%s: accept", who);
    } else if (type == kCFSocketConnectCallBack) {
        int err = data ? *(const SInt32 *)data : 0;
        connects++;
        trace("%s: connect %s", who, !data ? "ok" : err == ECONNREFUSED ? "refused" : "failed otherwise");
    } else {
        trace("%s: type %lu", who, (unsigned long)type);
    }
}

static void run_for(int want) {
    int goal = events + want;
    for (int i = 0; i < 100 && events < goal; i++)
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, true);
}

/* Runs until *counter reaches goal, or 5 s. */
static void run_until(const int *counter, int goal) {
    for (int i = 0; i < 100 && *counter < goal; i++)
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, true);
}

/* fd 2 to /dev/null and back: CF logs a failed bind there. */
static int quiet_begin(void) {
    fflush(stderr);
    int saved = dup(2);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    close(null);
    return saved;
}

static void quiet_end(int saved) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

static CFDataRef loopback(uint16_t port) {
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return CFDataCreate(NULL, (const UInt8 *)&sin, sizeof sin);
}

static void schedule(CFSocketRef s) {
    CFRunLoopSourceRef src = CFSocketCreateRunLoopSource(NULL, s, 0);
    CFRunLoopAddSource(CFRunLoopGetCurrent(), src, kCFRunLoopDefaultMode);
    CFRelease(src);
}

static void drop(CFSocketRef s) {
    CFSocketInvalidate(s);
    CFRelease(s);
}

static bool same_bytes(CFDataRef a, CFDataRef b) {
    return CFDataGetLength(a) == CFDataGetLength(b) &&
           memcmp(CFDataGetBytePtr(a), CFDataGetBytePtr(b), (size_t)CFDataGetLength(a)) == 0;
}

/* A connected socket for sig with `timeout`: traced, then dropped. */
static void connect_with(const char *label, const CFSocketSignature *sig, CFTimeInterval timeout) {
    CFSocketContext ctx = {0, (void *)label, held_retain, held_release, NULL};
    CFSocketRef s = CFSocketCreateConnectedToSocketSignature(NULL, sig, kCFSocketConnectCallBack, callback, &ctx,
                                                             timeout);
    trace("%s: %s, context held %d", label, s ? "a socket" : "NULL", held_count);
    if (!s)
        return;
    schedule(s);
    if (timeout < 0)
        run_until(&connects, connects + 1);
    CFDataRef peer = CFSocketCopyPeerAddress(s);
    trace("%s: peer %s", label, peer ? (same_bytes(peer, sig->address) ? "the address" : "another") : "none");
    if (peer)
        CFRelease(peer);
    drop(s);
    trace("%s: dropped, context held %d", label, held_count);
}

void scenario(void) {
    CFDataRef any = loopback(0);
    CFSocketContext lctx = {0, "listener", held_retain, held_release, NULL};
    CFSocketSignature lsig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, any};
    CFSocketRef l = CFSocketCreateWithSocketSignature(NULL, &lsig, kCFSocketAcceptCallBack, callback, &lctx);
    trace("listener: %s, valid %d, context held %d", l ? "a socket" : "NULL", l && CFSocketIsValid(l), held_count);
    schedule(l);
    CFDataRef addr = CFSocketCopyAddress(l);
    struct sockaddr_in sin;
    memcpy(&sin, CFDataGetBytePtr(addr), sizeof sin);
    trace("bound: port %s", sin.sin_port ? "set" : "zero");

    trace("-- connect to the listener");
    CFSocketSignature sig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, addr};
    connect_with("wait", &sig, 5.0);
    run_until(&accepts, 1);
    connect_with("blocking", &sig, 0);
    run_until(&accepts, 2);
    collect_begin(); /* the accept and the connect come in either order */
    connect_with("background", &sig, -1);
    run_until(&accepts, 3);
    collect_end();

    trace("-- the address in use");
    CFSocketSignature taken = {PF_INET, SOCK_STREAM, IPPROTO_TCP, addr};
    CFSocketContext tctx = {0, "taken", held_retain, held_release, NULL};
    int saved = quiet_begin();
    CFSocketRef t = CFSocketCreateWithSocketSignature(NULL, &taken, kCFSocketAcceptCallBack, callback, &tctx);
    quiet_end(saved);
    trace("in use: %s, context held %d", t ? "a socket" : "NULL", held_count);
    if (t)
        drop(t);

    trace("-- an unknown family");
    CFSocketSignature bad = {12345, SOCK_STREAM, 0, any};
    CFSocketRef b = CFSocketCreateWithSocketSignature(NULL, &bad, kCFSocketAcceptCallBack, callback, &tctx);
    trace("unknown family: %s, context held %d", b ? "a socket" : "NULL", held_count);
    if (b)
        drop(b);

    drop(l);
    trace("listener dropped, context held %d", held_count);

    trace("-- nobody listens");
    /* A port bound once and never listened on (not the listener's: CF's
     * helper thread may still watch its number for a while). */
    int gone = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sin;
    bind(gone, (struct sockaddr *)&sin, sizeof sin);
    getsockname(gone, (struct sockaddr *)&sin, &len);
    close(gone);
    CFDataRef nobody = CFDataCreate(NULL, (const UInt8 *)&sin, sizeof sin);
    CFSocketSignature rsig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, nobody};
    connect_with("refused, wait", &rsig, 5.0);
    connect_with("refused, blocking", &rsig, 0);
    connect_with("refused, background", &rsig, -1);
    CFRelease(nobody);

    trace("-- the listener's queue is full");
    int q = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof sin;
    bind(q, (struct sockaddr *)&sin, sizeof sin);
    listen(q, 0);
    getsockname(q, (struct sockaddr *)&sin, &len);
    int filler[4];
    for (int i = 0; i < 4; i++) {
        filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(filler[i], (struct sockaddr *)&sin, sizeof sin);
    }
    sleep_s(0.05);
    CFDataRef full = CFDataCreate(NULL, (const UInt8 *)&sin, sizeof sin);
    CFSocketSignature fsig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, full};
    connect_with("timeout", &fsig, 0.3);
    for (int i = 0; i < 4; i++)
        close(filler[i]);
    close(q);
    CFRelease(full);
    CFRelease(addr);
    CFRelease(any);
}
