/* CFSocket over loopback TCP: a listener with an Accept callback, a client
 * connecting in the background (Connect, then Write; no Read callback: CF
 * sometimes reports a socket still connecting as readable), a Data socket on the
 * accepted fd; the default socket flags, a Data callback that is not
 * re-enabled and is enabled again, end of stream as empty data, and
 * invalidation. Each step runs the loop until its event came (at most 5 s). */
#include "diff.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int accepted_fd = -1;
static int events;

static const char *type_str(CFSocketCallBackType t) {
    switch (t) {
    case kCFSocketReadCallBack: return "read";
    case kCFSocketAcceptCallBack: return "accept";
    case kCFSocketDataCallBack: return "data";
    case kCFSocketConnectCallBack: return "connect";
    case kCFSocketWriteCallBack: return "write";
    default: return "?";
    }
}

static void callback(CFSocketRef s, CFSocketCallBackType type, CFDataRef address, const void *data, void *info) {
    const char *who = info;
    events++;
    if (type == kCFSocketAcceptCallBack) {
        accepted_fd = *(const CFSocketNativeHandle *)data;
        trace("%s: accept (fd given %s, address %s)", who, accepted_fd >= 0 ? "yes" : "no", address ? "yes" : "no");
    } else if (type == kCFSocketDataCallBack) {
        CFDataRef d = data;
        trace("%s: data %ld bytes \"%.*s\" (address %s)", who, (long)CFDataGetLength(d), (int)CFDataGetLength(d),
              (const char *)CFDataGetBytePtr(d), address ? "yes" : "no");
    } else if (type == kCFSocketConnectCallBack) {
        trace("%s: connect %s (address %s)", who, data ? "failed" : "ok", address ? "yes" : "no");
    } else {
        trace("%s: %s (data %s, address %s)", who, type_str(type), data ? "yes" : "no", address ? "yes" : "no");
    }
}

/* Runs until `want` more callbacks came, or 5 s. */
static void run_for(int want) {
    int goal = events + want;
    for (int i = 0; i < 100 && events < goal; i++)
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, true);
}

/* Runs a while to show that nothing comes. */
static void run_quiet(const char *label) {
    int before = events;
    for (int i = 0; i < 4; i++)
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, false);
    trace("%s: %d callbacks", label, events - before);
}

static CFDataRef loopback(uint16_t port) {
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return CFDataCreate(NULL, (const UInt8 *)&sin, sizeof sin);
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFSocketContext lctx = {0, "listener", NULL, NULL, NULL};
    CFSocketRef listener = CFSocketCreate(NULL, PF_INET, SOCK_STREAM, IPPROTO_TCP, kCFSocketAcceptCallBack, callback, &lctx);
    trace("listener flags %lu", (unsigned long)CFSocketGetSocketFlags(listener));
    CFDataRef any = loopback(0);
    trace("set address: %ld", (long)CFSocketSetAddress(listener, any));
    CFRelease(any);
    CFDataRef bound = CFSocketCopyAddress(listener);
    struct sockaddr_in sin;
    memcpy(&sin, CFDataGetBytePtr(bound), sizeof sin);
    trace("bound: %ld bytes, family %s", (long)CFDataGetLength(bound), sin.sin_family == AF_INET ? "inet" : "other");
    CFRunLoopSourceRef ls = CFSocketCreateRunLoopSource(NULL, listener, 0);
    CFRunLoopAddSource(rl, ls, kCFRunLoopDefaultMode);

    CFSocketContext cctx = {0, "client", NULL, NULL, NULL};
    CFSocketRef client = CFSocketCreate(NULL, PF_INET, SOCK_STREAM, IPPROTO_TCP,
                                        kCFSocketConnectCallBack | kCFSocketWriteCallBack,
                                        callback, &cctx);
    trace("client flags %lu", (unsigned long)CFSocketGetSocketFlags(client));
    CFRunLoopSourceRef cs = CFSocketCreateRunLoopSource(NULL, client, 0);
    CFRunLoopAddSource(rl, cs, kCFRunLoopDefaultMode);
    CFDataRef peer = CFSocketCopyPeerAddress(client);
    trace("peer before connect: %s", peer ? "yes" : "none");
    trace("-- background connect");
    collect_begin();
    trace("connect: %ld", (long)CFSocketConnectToAddress(client, bound, -1));
    run_for(3);
    collect_end();
    peer = CFSocketCopyPeerAddress(client);
    trace("peer after connect: %s", peer ? "yes" : "none");
    if (peer)
        CFRelease(peer);
    run_quiet("write not re-enabled");

    trace("-- data socket on the accepted fd");
    CFSocketContext sctx = {0, "server", NULL, NULL, NULL};
    CFSocketRef server = CFSocketCreateWithNative(NULL, accepted_fd, kCFSocketDataCallBack, callback, &sctx);
    trace("server flags %lu", (unsigned long)CFSocketGetSocketFlags(server));
    CFRunLoopSourceRef ss = CFSocketCreateRunLoopSource(NULL, server, 0);
    CFRunLoopAddSource(rl, ss, kCFRunLoopDefaultMode);
    CFDataRef hello = CFDataCreate(NULL, (const UInt8 *)"hello", 5);
    trace("send: %ld", (long)CFSocketSendData(client, NULL, hello, 1.0));
    run_for(1);
    run_quiet("after data");

    trace("-- data not re-enabled");
    CFSocketSetSocketFlags(server, kCFSocketCloseOnInvalidate);
    trace("server flags %lu", (unsigned long)CFSocketGetSocketFlags(server));
    CFSocketSendData(client, NULL, hello, 1.0);
    run_for(1);
    CFSocketSendData(client, NULL, hello, 1.0);
    run_quiet("while disabled");
    CFSocketEnableCallBacks(server, kCFSocketDataCallBack);
    run_for(1);
    CFSocketSetSocketFlags(server, kCFSocketCloseOnInvalidate | kCFSocketAutomaticallyReenableDataCallBack);

    trace("-- server replies");
    write(CFSocketGetNative(server), "x", 1);
    char c;
    trace("client reads %ld", (long)read(CFSocketGetNative(client), &c, 1));

    CFSocketEnableCallBacks(server, kCFSocketDataCallBack);
    run_quiet("enabled, nothing to read");
    trace("-- the client goes: end of stream");
    CFSocketInvalidate(client);
    trace("client valid %d", CFSocketIsValid(client));
    run_for(1);
    run_quiet("after end");

    CFSocketInvalidate(server);
    CFSocketInvalidate(listener);
    trace("valid: %d %d", CFSocketIsValid(server), CFSocketIsValid(listener));
    trace("source valid: %d", CFRunLoopSourceIsValid(ss));
    CFRelease(hello);
    CFRelease(bound);
    CFRelease(ss);
    CFRelease(cs);
    CFRelease(ls);
    CFRelease(server);
    CFRelease(client);
    CFRelease(listener);
}
