/* fuzz_sockport.c — libFuzzer target for a socket port's receiving side
 * (Sources/CRunLoop/ports/RLSocketPort.c, through rl__socket_port_dispatch): the
 * check of a frame's kind and components, and the decoding of port
 * components ("host:port", "[v6]:port", "*:port") into remote ports.
 *
 * The first byte picks the address the "connection" came from (IPv4,
 * IPv6, IPv4-mapped IPv6, link-local IPv6 with a scope) and the mode: with
 * its top bit clear the rest is a byte stream of frames, read with the
 * wire reader and dispatched one by one; with it set, the rest is the text
 * of one port component, put in a frame of the harness's making (the
 * decoder on its own, without the fuzzer having to find a whole frame).
 * Properties checked: no out-of-bounds access, leak or undefined behaviour
 * (ASan, LSan, UBSan); the handler runs only for a frame the port accepted,
 * with one live object per component (data of the component's bytes, or a
 * valid remote port with a non-zero TCP port), and the reply port is a
 * remote port or NULL.
 */
#include "frames.h"
#include "rl_fuzz.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_sockport: %s\n", what);
        abort();
    }
}

static struct {
    const rl__wire_frame *f; /* the frame being dispatched */
    int calls;
} g_now;

static void handler(RLSocketPortRef local, uint32_t msgid, const RLTypeRef *comps, RLIndex count,
                    RLSocketPortRef sendPort, void *info) {
    const rl__wire_frame *f = g_now.f;
    g_now.calls++;
    check(f && (uint32_t)count == f->h.ncomp - 1 && msgid == (uint32_t)f->h.msgid, "the handler's count or msgid");
    check(count == 0 || comps != NULL, "NULL components");
    check(!sendPort || (RLSocketPortIsRemote(sendPort) && RLSocketPortIsValid(sendPort)), "a bad reply port");
    for (RLIndex i = 0; i < count; i++) {
        const rl__wire_comp *c = &f->comps[i + 1];
        if (c->type == RL_WIRE_DATA) {
            RLDataRef d = (RLDataRef)comps[i];
            check(RLDataGetLength(d) == (RLIndex)c->len, "a data component's length");
            check(c->len == 0 || memcmp(RLDataGetBytePtr(d), c->bytes, c->len) == 0, "a data component's bytes");
        } else {
            RLSocketPortRef p = (RLSocketPortRef)comps[i];
            check(RLSocketPortIsRemote(p) && RLSocketPortGetPort(p) != 0, "a port component");
            RLDataRef a = RLSocketPortCopyAddress(p);
            check(a != NULL, "a port component's address");
            RLRelease(a);
        }
    }
}

static RLSocketPortRef g_local;

/* The peer's address for the first byte's low bits. */
static void peer_addr(uint8_t which, rl__conn *c) {
    memset(&c->addr, 0, sizeof c->addr);
    if ((which & 3) == 0) {
        struct sockaddr_in *in = (void *)&c->addr;
        in->sin_family = AF_INET;
        in->sin_port = htons(40000);
        inet_pton(AF_INET, "127.0.0.1", &in->sin_addr);
        c->addrlen = sizeof *in;
        return;
    }
    struct sockaddr_in6 *in6 = (void *)&c->addr;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(40000);
    const char *text = (which & 3) == 1 ? "::1" : (which & 3) == 2 ? "::ffff:10.1.2.3" : "fe80::1";
    inet_pton(AF_INET6, text, &in6->sin6_addr);
    if ((which & 3) == 3)
        in6->sin6_scope_id = 1; /* lo */
    c->addrlen = sizeof *in6;
}

static void dispatch_one(rl__conn *c, rl__wire_frame *f) {
    /* the handler compares with a copy: dispatch takes the frame over */
    rl__wire_frame copy;
    frame_copy(&copy, f);
    g_now.f = &copy;
    g_now.calls = 0;
    const char *why = NULL;
    bool ok = rl__socket_port_dispatch(g_local, c, f, &why);
    check(ok || why != NULL, "a refused frame without a reason");
    check(g_now.calls == (ok ? 1 : 0), "the handler ran for a refused frame, or not for an accepted one");
    g_now.f = NULL;
    frame_copy_free(&copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_local) {
        g_local = RLSocketPortCreateLocal(NULL, AF_INET, "127.0.0.1", 0, handler, NULL);
        check(g_local != NULL, "cannot create the local port");
    }
    if (size < 1)
        return 0;
    rl__conn c;
    memset(&c, 0, sizeof c);
    c.fd = -1;
    peer_addr(data[0], &c);
    bool one_port = data[0] & 0x80;
    data++;
    size--;
    rl__wire_reader r;
    rl__wire_reader_init(&r, 1u << 16);
    if (one_port) {
        /* a frame: no reply port, then the input as one port component */
        size_t len = 24 + 8 + 8 + size;
        uint8_t *frame = malloc(len);
        check(frame != NULL, "malloc");
        rl__wire_comp comps[2] = {{RL_WIRE_PORT, 0, NULL}, {RL_WIRE_PORT, (uint32_t)size, data}};
        rl__wire_encode(frame, RL_WIRE_ONEWAY, 9, 0, comps, 2);
        data = frame;
        size = len;
    }
    size_t pos = 0;
    rl__wire_frame f;
    while (frame_next(&r, data, size, &pos, &f)) {
        dispatch_one(&c, &f);
    }
    rl__wire_reader_free(&r);
    if (one_port)
        free((void *)data);
    return 0;
}
