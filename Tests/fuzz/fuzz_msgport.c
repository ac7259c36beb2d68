/* fuzz_msgport.c — libFuzzer target for a message port's receiving side
 * (Sources/CRunLoop/ports/RLMessagePort.c, through rl__message_port_dispatch):
 * the check of a frame's kind and components, the hand-over of the data,
 * and the reply to a request.
 *
 * The input is a byte stream of frames as a client would send them, read
 * with the wire reader and dispatched one by one on a connection whose
 * other end the harness reads. The first byte picks what the handler
 * answers (nothing, the request's data, or a fixed reply).
 * Properties checked: no out-of-bounds access, leak or undefined behaviour
 * (ASan, LSan, UBSan); the handler runs only for an accepted one-way
 * message or request, with the data of its one data component; hellos are
 * accepted silently; every accepted request is answered with a reply
 * frame carrying its msgid and seq, and nothing else is ever written.
 */
#include "frames.h"
#include "rl_fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void check(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_msgport: %s\n", what);
        abort();
    }
}

static struct {
    const rl__wire_frame *f; /* the frame being dispatched (a copy) */
    int calls;
    uint8_t answer; /* 0: no reply data, 1: echo, 2: fixed */
} g_now;

static RLDataRef handler(RLMessagePortRef local, int32_t msgid, RLDataRef data, void *info) {
    const rl__wire_frame *f = g_now.f;
    g_now.calls++;
    check(f && msgid == f->h.msgid, "the handler's msgid");
    check(f->h.kind == RL_WIRE_ONEWAY || f->h.kind == RL_WIRE_REQUEST, "the handler ran for a frame of another kind");
    if (f->h.ncomp == 0) {
        check(data == NULL, "data for a frame without components");
    } else {
        check(f->h.ncomp == 1 && f->comps[0].type == RL_WIRE_DATA, "the handler ran for a frame of bad components");
        check(data && RLDataGetLength(data) == (RLIndex)f->comps[0].len, "the data's length");
        check(f->comps[0].len == 0 || memcmp(RLDataGetBytePtr(data), f->comps[0].bytes, f->comps[0].len) == 0,
              "the data's bytes");
    }
    if (g_now.answer == 1 && data)
        return (RLDataRef)RLRetain(data);
    if (g_now.answer == 2)
        return RLDataCreate(NULL, (const uint8_t *)"reply", 5);
    return NULL;
}

static RLMessagePortRef g_local;

/* Reads the replies the dispatch wrote to the other end: exactly one, for
 * (msgid, seq), if want, else none. */
static void expect_reply(int fd, rl__wire_reader *rd, bool want, int32_t msgid, uint32_t seq) {
    rl__wire_frame f;
    const char *why = NULL;
    int r = rl__read_frame(fd, rd, &f, &why);
    if (!want) {
        check(r == 0, "something written for a frame that wants no reply");
        return;
    }
    check(r == 1, "no reply to a request");
    check(f.h.kind == RL_WIRE_REPLY && f.h.msgid == msgid && f.h.seq == seq && f.h.ncomp <= 1, "a bad reply");
    rl__wire_frame_free(&f);
    check(rl__read_frame(fd, rd, &f, &why) == 0, "more than one reply");
}

static void dispatch_one(rl__conn *c, int other, rl__wire_reader *replies, rl__wire_frame *f) {
    /* the handler compares with a copy: dispatch takes the frame over */
    rl__wire_frame copy;
    frame_copy(&copy, f);
    g_now.f = &copy;
    g_now.calls = 0;
    const char *why = NULL;
    bool ok = rl__message_port_dispatch(g_local, c, f, &why);
    check(ok || why != NULL, "a refused frame without a reason");
    bool served = copy.h.kind == RL_WIRE_ONEWAY || copy.h.kind == RL_WIRE_REQUEST;
    check(g_now.calls == (ok && served ? 1 : 0), "the handler ran for a refused frame, or not for an accepted one");
    check(!ok || served || copy.h.kind == RL_WIRE_HELLO, "a reply frame accepted");
    expect_reply(other, replies, ok && copy.h.kind == RL_WIRE_REQUEST, copy.h.msgid, copy.h.seq);
    g_now.f = NULL;
    frame_copy_free(&copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_local) {
        char name[64];
        snprintf(name, sizeof name, "rl.fuzz.msgport.%d", (int)getpid());
        g_local = RLMessagePortCreateLocal(NULL, name, handler, NULL, NULL);
        check(g_local != NULL, "cannot create the local port");
    }
    if (size < 1)
        return 0;
    g_now.answer = data[0] % 3;
    data++;
    size--;
    int sv[2];
    check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    rl__conn c;
    memset(&c, 0, sizeof c);
    c.fd = sv[0];
    c.uid = getuid();
    c.gid = getgid();
    c.pid = getpid();
    rl__wire_reader r, replies;
    rl__wire_reader_init(&r, 1u << 16);
    rl__wire_reader_init(&replies, 1u << 16);
    size_t pos = 0;
    rl__wire_frame f;
    while (frame_next(&r, data, size, &pos, &f)) {
        dispatch_one(&c, sv[1], &replies, &f);
        check(c.out == NULL, "a reply left queued"); /* replies are small: the socket takes them */
    }
    rl__wire_reader_free(&r);
    rl__wire_reader_free(&replies);
    free(c.out);
    close(sv[0]);
    close(sv[1]);
    return 0;
}
