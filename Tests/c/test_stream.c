/* test_stream.c — read and write streams: memory, file, bound pair and
 * socket streams, their events on a run loop, and misuse. */
#include "testutil.h"
#include "trace.h"

#include "RLStreamInternal.h"
#include "rl_lock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MODE "StreamTest"
#define ALL_EVENTS                                                                                     \
    (kRLStreamEventOpenCompleted | kRLStreamEventHasBytesAvailable | kRLStreamEventCanAcceptBytes |   \
     kRLStreamEventErrorOccurred | kRLStreamEventEndEncountered)

static const char *ev_name(RLStreamEventType t) {
    switch (t) {
    case kRLStreamEventOpenCompleted: return "open";
    case kRLStreamEventHasBytesAvailable: return "bytes";
    case kRLStreamEventCanAcceptBytes: return "space";
    case kRLStreamEventErrorOccurred: return "error";
    case kRLStreamEventEndEncountered: return "end";
    default: return "?";
    }
}

static int done;

/* Reads up to 3 bytes per HasBytesAvailable into the trace. */
static void read_cb(RLReadStreamRef s, RLStreamEventType t, void *info) {
    (void)info;
    rl_trace_addf("r:%s", ev_name(t));
    if (t == kRLStreamEventHasBytesAvailable) {
        uint8_t buf[3];
        RLIndex n = RLReadStreamRead(s, buf, sizeof buf);
        rl_trace_addf("%.*s", (int)(n > 0 ? n : 0), (const char *)buf);
    }
    if (t == kRLStreamEventEndEncountered || t == kRLStreamEventErrorOccurred)
        done = 1;
}

static void write_cb(RLWriteStreamRef s, RLStreamEventType t, void *info) {
    (void)s;
    (void)info;
    rl_trace_addf("w:%s", ev_name(t));
    if (t == kRLStreamEventErrorOccurred)
        done = 1;
}

static void run_until_done(double limit) {
    double end = rl_test_now() + limit;
    while (!done && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, false);
}

static void client(RLReadStreamRef r, RLWriteStreamRef w) {
    RLStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    if (r) {
        assert_true(RLReadStreamSetClient(r, ALL_EVENTS, read_cb, &ctx));
        assert_true(RLReadStreamScheduleWithRunLoop(r, rl, MODE));
    }
    if (w) {
        assert_true(RLWriteStreamSetClient(w, ALL_EVENTS, write_cb, &ctx));
        assert_true(RLWriteStreamScheduleWithRunLoop(w, rl, MODE));
    }
}

static void test_memory_streams_events_in_cf_order(void **state) {
    (void)state;
    done = 0;
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"abcdefgh", 8);
    assert_non_null(r);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusNotOpen);
    client(r, NULL);
    assert_true(RLReadStreamOpen(r));
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusOpen);
    run_until_done(5);
    assert_trace("r:open r:bytes abc r:bytes def r:bytes gh r:end");
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    uint8_t b[4];
    assert_int_equal(RLReadStreamRead(r, b, 4), 0);
    assert_true(RLReadStreamClose(r));
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusClosed);
    assert_int_equal(RLReadStreamRead(r, b, 4), -1);
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLRelease(r));

    RLWriteStreamRef w = RLWriteStreamCreateWithAllocatedBuffers(NULL, NULL);
    assert_non_null(w);
    assert_true(RLWriteStreamOpen(w));
    assert_true(RLWriteStreamCanAcceptBytes(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"hello ", 6), 6);
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"world", 5), 5);
    RLDataRef d = RLWriteStreamCopyDataWritten(w);
    assert_int_equal(RLDataGetLength(d), 11);
    assert_memory_equal(RLDataGetBytePtr(d), "hello world", 11);
    RLRelease(d);
    assert_true(RLWriteStreamClose(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"x", 1), -1);
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLRelease(w));
}

static void test_bound_pair_back_pressure_and_end(void **state) {
    (void)state;
    done = 0;
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreateBoundPair(NULL, &r, &w, 4));
    assert_true(RLReadStreamOpen(r));
    assert_true(RLWriteStreamOpen(w));
    assert_false(RLReadStreamHasBytesAvailable(r));
    assert_true(RLWriteStreamCanAcceptBytes(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"abcdef", 6), 4); /* buffer holds 4 */
    assert_false(RLWriteStreamCanAcceptBytes(w));
    assert_true(RLReadStreamHasBytesAvailable(r));
    client(r, w);
    RLRunLoopRunInMode(MODE, 0.05, false);
    /* the reader drains the buffer (events its reads cause come first, as
     * in CF), which frees room for the writer */
    assert_trace("r:open r:bytes abc r:bytes d w:open w:space");
    rl_trace_clear();
    assert_true(RLWriteStreamCanAcceptBytes(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"ef", 2), 2);
    assert_true(RLWriteStreamClose(w));
    run_until_done(5);
    assert_trace("r:bytes ef r:end");
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    RLRelease(r);
    RLRelease(w);
}

static void test_bound_pair_write_after_reader_closed_is_epipe(void **state) {
    (void)state;
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreateBoundPair(NULL, &r, &w, 8));
    assert_true(RLReadStreamOpen(r));
    assert_true(RLWriteStreamOpen(w));
    assert_true(RLReadStreamClose(r));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"x", 1), -1);
    assert_int_equal(RLWriteStreamGetStatus(w), kRLStreamStatusError);
    RLStreamError e = RLWriteStreamGetError(w);
    assert_int_equal(e.domain, kRLStreamErrorDomainPOSIX);
    assert_int_equal(e.error, EPIPE);
    RLErrorRef copied = RLWriteStreamCopyError(w);
    assert_non_null(copied);
    assert_string_equal(RLErrorGetDomain(copied), kRLErrorDomainPOSIX);
    assert_int_equal(RLErrorGetCode(copied), EPIPE);
    assert_true(RLRelease(copied));
    /* read after error: misuse, the error stays */
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"x", 1), -1);
    assert_rl_error(kRLErrorInvalidState);
    assert_int_equal(RLWriteStreamGetError(w).error, EPIPE);
    RLRelease(r);
    RLRelease(w);
}

static void *pair_writer(void *arg) {
    RLWriteStreamRef w = arg;
    for (int i = 0; i < 1000; i++) {
        uint8_t b = (uint8_t)i;
        if (RLWriteStreamWrite(w, &b, 1) != 1)
            return (void *)1;
    }
    RLWriteStreamClose(w);
    return NULL;
}

static void test_bound_pair_across_threads_blocks_and_loses_nothing(void **state) {
    (void)state;
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreateBoundPair(NULL, &r, &w, 7));
    assert_true(RLReadStreamOpen(r));
    assert_true(RLWriteStreamOpen(w));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pair_writer, w), 0);
    int got = 0;
    uint8_t buf[5];
    RLIndex n;
    while ((n = RLReadStreamRead(r, buf, sizeof buf)) > 0)
        for (RLIndex i = 0; i < n; i++)
            assert_int_equal(buf[i], (uint8_t)got++);
    void *res;
    pthread_join(t, &res);
    assert_null(res);
    assert_int_equal(n, 0);
    assert_int_equal(got, 1000);
    RLRelease(r);
    RLRelease(w);
}

static void test_file_streams(void **state) {
    (void)state;
    char path[] = "/tmp/rl_stream_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    RLWriteStreamRef w = RLWriteStreamCreateWithFilePath(NULL, path);
    assert_non_null(w);
    assert_true(RLWriteStreamOpen(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"file data", 9), 9);
    assert_true(RLWriteStreamClose(w));
    RLRelease(w);

    done = 0;
    RLReadStreamRef r = RLReadStreamCreateWithFilePath(NULL, path);
    client(r, NULL);
    assert_true(RLReadStreamOpen(r));
    run_until_done(5);
    assert_trace("r:open r:bytes fil r:bytes e d r:bytes ata r:bytes  r:end");
    RLRelease(r);
    unlink(path);

    r = RLReadStreamCreateWithFilePath(NULL, "/nonexistent/dir/file");
    assert_false(RLReadStreamOpen(r));
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusError);
    assert_int_equal(RLReadStreamGetError(r).error, ENOENT);
    assert_int_equal(RLReadStreamGetError(r).domain, kRLStreamErrorDomainPOSIX);
    RLRelease(r);
}

/* An echo server on a thread: one connection, echoes until EOF. */
static int listen_fd;
static void *echo_server(void *arg) {
    (void)arg;
    int c = accept(listen_fd, NULL, NULL);
    if (c < 0)
        return NULL;
    char buf[256];
    ssize_t n;
    while ((n = read(c, buf, sizeof buf)) > 0)
        if (write(c, buf, (size_t)n) != n)
            break;
    close(c);
    return NULL;
}

static int start_echo(pthread_t *t) {
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(listen_fd, 4), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(listen_fd, (struct sockaddr *)&a, &len), 0);
    assert_int_equal(pthread_create(t, NULL, echo_server, NULL), 0);
    return ntohs(a.sin_port);
}

static RLWriteStreamRef echo_writer;
static void echo_write_cb(RLWriteStreamRef s, RLStreamEventType t, void *info) {
    (void)info;
    rl_trace_addf("w:%s", ev_name(t));
    if (t == kRLStreamEventCanAcceptBytes) {
        assert_int_equal(RLWriteStreamWrite(s, (const uint8_t *)"ping", 4), 4);
        RLWriteStreamClose(s); /* the server sees EOF, echoes, closes */
    }
}

static void echo_over(const char *host) {
    done = 0;
    pthread_t t;
    int port = start_echo(&t);
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreatePairWithSocketToHost(NULL, host, (uint32_t)port, &r, &w));
    RLStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    client(r, NULL);
    echo_writer = w;
    assert_true(RLWriteStreamSetClient(w, ALL_EVENTS, echo_write_cb, &ctx));
    assert_true(RLWriteStreamScheduleWithRunLoop(w, RLRunLoopGetCurrent(), MODE));
    assert_true(RLReadStreamOpen(r));
    assert_true(RLWriteStreamOpen(w));
    run_until_done(10);
    assert_true(done);
    /* the read side's events interleave with the write side's; check each */
    const char *tr = rl_trace_get();
    assert_non_null(strstr(tr, "w:open w:space"));
    assert_non_null(strstr(tr, "r:open"));
    assert_non_null(strstr(tr, "r:end"));
    char echoed[64] = "";
    for (const char *p = tr; (p = strstr(p, "r:bytes ")); p += 8) {
        const char *e = strchr(p + 8, ' ');
        size_t n = e ? (size_t)(e - p - 8) : strlen(p + 8);
        if (strncmp(p + 8, "r:", 2) != 0)
            strncat(echoed, p + 8, n);
    }
    assert_string_equal(echoed, "ping");
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    RLRelease(r);
    RLRelease(w);
    pthread_join(t, NULL);
    close(listen_fd);
}

static void test_socket_to_numeric_host_echo(void **state) {
    (void)state;
    echo_over("127.0.0.1");
}

static void test_socket_to_named_host_resolves_off_the_loop(void **state) {
    (void)state;
    echo_over("localhost");
}

static void test_connection_refused(void **state) {
    (void)state;
    done = 0;
    /* a port nobody listens on: bind one, read its number, close it */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s);
    RLReadStreamRef r;
    assert_true(RLStreamCreatePairWithSocketToHost(NULL, "127.0.0.1", ntohs(a.sin_port), &r, NULL));
    client(r, NULL);
    assert_true(RLReadStreamOpen(r));
    run_until_done(10);
    assert_trace("r:error");
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusError);
    RLStreamError e = RLReadStreamGetError(r);
    assert_int_equal(e.domain, kRLStreamErrorDomainPOSIX);
    assert_int_equal(e.error, ECONNREFUSED);
    RLErrorRef copied = RLReadStreamCopyError(r);
    assert_non_null(copied);
    assert_string_equal(RLErrorGetDomain(copied), "NSPOSIXErrorDomain");
    assert_int_equal(RLErrorGetCode(copied), ECONNREFUSED);
    assert_true(RLRelease(copied));
    uint8_t b[1];
    assert_int_equal(RLReadStreamRead(r, b, 1), -1); /* read after error */
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(r);
}

static void test_pair_with_existing_socket(void **state) {
    (void)state;
    done = 0;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreatePairWithSocket(NULL, sv[0], &r, &w));
    client(r, NULL);
    assert_true(RLReadStreamOpen(r));
    assert_int_equal(write(sv[1], "xyz", 3), 3);
    assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
    run_until_done(10);
    assert_trace("r:open r:bytes xyz r:bytes  r:end");
    /* a write stream opened after the read side connected */
    rl_trace_clear();
    done = 0;
    client(NULL, w);
    assert_true(RLWriteStreamOpen(w));
    RLRunLoopRunInMode(MODE, 0.2, false);
    assert_trace("w:open w:space");
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"back", 4), 4);
    char buf[8];
    assert_int_equal(read(sv[1], buf, sizeof buf), 4);
    RLRelease(r);
    RLRelease(w);
    /* the caller's socket stays open (its sending side is shut down) */
    assert_true(fcntl(sv[0], F_GETFD) >= 0);
    close(sv[0]);
    close(sv[1]);
}

/* Releasing one stream of a socket pair leaves the other's readiness
 * events working: the socket's fd source stays in the loops and modes the
 * remaining stream is scheduled in. */
static void test_releasing_one_socket_stream_keeps_the_other_scheduled(void **state) {
    (void)state;
    done = 0;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreatePairWithSocket(NULL, sv[0], &r, &w));
    client(r, w);
    assert_true(RLReadStreamOpen(r));
    assert_true(RLWriteStreamOpen(w));
    RLRunLoopRunInMode(MODE, 0.05, false);
    assert_non_null(strstr(rl_trace_get(), "w:space"));
    /* fill the socket until it takes no more */
    uint8_t chunk[1024];
    memset(chunk, 'x', sizeof chunk);
    size_t sent = 0;
    while (RLWriteStreamCanAcceptBytes(w)) {
        RLIndex n = RLWriteStreamWrite(w, chunk, sizeof chunk);
        assert_true(n > 0);
        sent += (size_t)n;
    }
    RLRelease(r); /* the reader goes; the writer stays scheduled */
    rl_trace_clear();
    RLRunLoopRunInMode(MODE, 0.05, false);
    assert_trace(""); /* full: no room reported */
    /* the peer drains everything: room again, reported through the fd source */
    char buf[4096];
    while (sent > 0) {
        ssize_t n = read(sv[1], buf, sizeof buf);
        assert_true(n > 0);
        sent -= (size_t)n;
    }
    double end = rl_test_now() + 10;
    while (!strstr(rl_trace_get(), "w:space") && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, false);
    assert_trace("w:space");
    RLRelease(w);
    close(sv[0]);
    close(sv[1]);
}

static RLRunLoopRef unsched_rl;
static void unschedule_cb(RLReadStreamRef s, RLStreamEventType t, void *info) {
    (void)info;
    rl_trace_addf("r:%s", ev_name(t));
    if (t == kRLStreamEventOpenCompleted)
        assert_true(RLReadStreamUnscheduleFromRunLoop(s, unsched_rl, MODE));
}

static void test_schedule_twice_and_unschedule_in_callback(void **state) {
    (void)state;
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"ab", 2);
    unsched_rl = RLRunLoopGetCurrent();
    RLStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    assert_true(RLReadStreamSetClient(r, ALL_EVENTS, unschedule_cb, &ctx));
    assert_true(RLReadStreamScheduleWithRunLoop(r, unsched_rl, MODE));
    assert_true(RLReadStreamScheduleWithRunLoop(r, unsched_rl, MODE)); /* no-op */
    assert_true(RLReadStreamOpen(r));
    RLRunLoopRunInMode(MODE, 0.05, false);
    /* one delivery pass, then no more: the stream left the mode */
    assert_trace("r:open r:bytes");
    RLRunLoopRunInMode(MODE, 0.05, false);
    assert_trace("r:open r:bytes");
    assert_rl_fails(RLReadStreamUnscheduleFromRunLoop(r, unsched_rl, MODE), kRLErrorNotFound);
    RLRelease(r);
}

static void test_events_wait_for_their_mode(void **state) {
    (void)state;
    done = 0;
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"", 0);
    assert_true(RLReadStreamOpen(r)); /* before client and schedule */
    RLRunLoopRunInMode(MODE, 0.02, false);
    client(r, NULL);
    RLRunLoopRunInMode("Other", 0.02, false);
    assert_trace("");
    run_until_done(5);
    assert_trace("r:open r:end");
    RLRelease(r);
}

static void test_scheduled_in_two_modes_delivers_in_either(void **state) {
    (void)state;
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"ab", 2);
    client(r, NULL);
    assert_true(RLReadStreamScheduleWithRunLoop(r, RLRunLoopGetCurrent(), "Second"));
    assert_true(RLReadStreamOpen(r));
    RLRunLoopRunInMode("Second", 0.05, false);
    assert_trace("r:open r:bytes ab r:end");
    /* leaving one mode keeps the other */
    assert_true(RLReadStreamUnscheduleFromRunLoop(r, RLRunLoopGetCurrent(), MODE));
    assert_rl_fails(RLReadStreamUnscheduleFromRunLoop(r, RLRunLoopGetCurrent(), MODE), kRLErrorNotFound);
    assert_true(RLReadStreamUnscheduleFromRunLoop(r, RLRunLoopGetCurrent(), "Second"));
    RLRelease(r);
}

/* A readiness event whose readiness is gone when its turn comes — the
 * bytes were read outside the callback, after the socket became readable
 * but before the loop posted the event — is not delivered (a client that
 * reads on it would block), and the stream stays armed: the next bytes are
 * reported. The reader is scheduled in mode R, the writer in mode W, so
 * that the shared socket source fires in W and the reader's event waits
 * for R; an AfterWaiting observer of W reads between the wait and the
 * socket's callout. */
static RLReadStreamRef stale_reader;
static int stale_reads;

static void stale_read_cb(RLReadStreamRef s, RLStreamEventType t, void *info) {
    (void)s;
    (void)info;
    rl_trace_addf("r:%s", ev_name(t));
}

static void read_after_wait(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    (void)o;
    (void)a;
    (void)info;
    uint8_t b[8];
    if (stale_reads == 0 && RLReadStreamHasBytesAvailable(stale_reader)) {
        assert_int_equal(RLReadStreamRead(stale_reader, b, sizeof b), 1);
        stale_reads++;
    }
}

static void test_stale_readiness_is_dropped_and_the_stream_stays_armed(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreatePairWithSocket(NULL, sv[0], &r, &w));
    stale_reader = r;
    stale_reads = 0;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    assert_true(RLReadStreamSetClient(r, kRLStreamEventHasBytesAvailable, stale_read_cb, &ctx));
    assert_true(RLReadStreamScheduleWithRunLoop(r, rl, "R"));
    assert_true(RLWriteStreamScheduleWithRunLoop(w, rl, "W"));
    RLRunLoopObserverRef obs = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, read_after_wait, NULL);
    RLRunLoopAddObserver(rl, obs, "W");
    assert_true(RLReadStreamOpen(r));
    RLRunLoopRunInMode("R", 0, false);
    assert_trace("");
    assert_int_equal(write(sv[1], "a", 1), 1);
    double end = rl_test_now() + 10;
    while (stale_reads == 0 && rl_test_now() < end)
        RLRunLoopRunInMode("W", 0.05, true);
    assert_int_equal(stale_reads, 1);
    RLRunLoopRunInMode("W", 0, false); /* the socket's callout, if not in the same pass */
    RLRunLoopRunInMode("R", 0, false);
    assert_trace(""); /* "a" was read: no event for it */
    assert_int_equal(write(sv[1], "b", 1), 1);
    end = rl_test_now() + 10;
    while (!strstr(rl_trace_get(), "r:bytes") && rl_test_now() < end)
        RLRunLoopRunInMode("R", 0.05, true);
    assert_trace("r:bytes");
    RLRunLoopRemoveObserver(rl, obs, "W");
    RLRunLoopObserverInvalidate(obs);
    RLRelease(obs);
    RLRelease(r);
    RLRelease(w);
    close(sv[0]);
    close(sv[1]);
}

/* HasBytesAvailable may be asked from any thread while another reads (a
 * loop's thread checks it before delivering an event): the memory stream's
 * read position is shared state (make check-tsan sees a race otherwise). */
static RLReadStreamRef polled_reader;
static atomic_int reader_done;

static void *poll_bytes(void *arg) {
    (void)arg;
    long seen = 0;
    while (!atomic_load(&reader_done))
        seen += RLReadStreamHasBytesAvailable(polled_reader);
    return (void *)seen;
}

static void test_memory_stream_polled_while_read_on_another_thread(void **state) {
    (void)state;
    static uint8_t bytes[20000];
    memset(bytes, 'm', sizeof bytes);
    polled_reader = RLReadStreamCreateWithBytes(NULL, bytes, sizeof bytes);
    assert_true(RLReadStreamOpen(polled_reader));
    atomic_store(&reader_done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, poll_bytes, NULL), 0);
    uint8_t buf[7];
    size_t total = 0;
    RLIndex n;
    while ((n = RLReadStreamRead(polled_reader, buf, sizeof buf)) > 0)
        total += (size_t)n;
    atomic_store(&reader_done, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(total, sizeof bytes);
    assert_false(RLReadStreamHasBytesAvailable(polled_reader));
    RLRelease(polled_reader);
}

static void test_misuse(void **state) {
    (void)state;
    uint8_t b[4];
    assert_rl_fails(RLReadStreamOpen(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLReadStreamRead(NULL, b, 1), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLWriteStreamWrite(NULL, b, 1), -1);
    assert_int_equal(RLReadStreamGetStatus(NULL), kRLStreamStatusError);
    assert_rl_fails(RLReadStreamHasBytesAvailable(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamCreateWithBytes(NULL, NULL, 3), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamCreateWithFilePath(NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamCreateWithFilePath(NULL, ""), kRLErrorInvalidArgument);
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_rl_fails(RLStreamCreateBoundPair(NULL, &r, &w, 0), kRLErrorInvalidArgument);
    assert_null(r);
    assert_rl_fails(RLStreamCreateBoundPair(NULL, NULL, &w, 4), kRLErrorInvalidArgument);
    assert_rl_fails(RLStreamCreatePairWithSocket(NULL, -1, &r, &w), kRLErrorSystem);
    assert_rl_fails(RLStreamCreatePairWithSocket(NULL, 0, NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLStreamCreatePairWithSocketToHost(NULL, NULL, 80, &r, &w), kRLErrorInvalidArgument);
    assert_rl_fails(RLStreamCreatePairWithSocketToHost(NULL, "localhost", 70000, &r, &w), kRLErrorInvalidArgument);

    r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"abc", 3);
    /* read before open */
    assert_int_equal(RLReadStreamRead(r, b, 1), -1);
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLReadStreamOpen(r));
    assert_rl_fails(RLReadStreamOpen(r), kRLErrorInvalidState);
    assert_int_equal(RLReadStreamRead(r, NULL, 1), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLReadStreamRead(r, b, -1), -1);
    /* a write stream is not a read stream */
    assert_int_equal(RLWriteStreamWrite((RLWriteStreamRef)r, b, 1), -1);
    assert_rl_error(kRLErrorInvalidObject);
    RLStreamClientContext bad = {1, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLReadStreamSetClient(r, ALL_EVENTS, read_cb, &bad), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamScheduleWithRunLoop(r, NULL, MODE), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamScheduleWithRunLoop(r, RLRunLoopGetCurrent(), NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamCopyError(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamCopyError((RLWriteStreamRef)r), kRLErrorInvalidObject);
    RLErrorClear();
    assert_null(RLReadStreamCopyError(r)); /* no error */
    assert_rl_error(kRLErrorNone);
    /* the read still works after all that */
    assert_int_equal(RLReadStreamRead(r, b, 4), 3);
    assert_true(RLReadStreamClose(r));
    assert_true(RLReadStreamClose(r));
    RLRelease(r);
}

static int released;
static void *ctx_retain(void *info) {
    rl_trace_add("retain");
    return info;
}
static void ctx_release(void *info) {
    (void)info;
    released++;
}

static void test_client_context_retained_and_replaced(void **state) {
    (void)state;
    released = 0;
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"a", 1);
    RLStreamClientContext ctx = {0, &released, ctx_retain, ctx_release, NULL};
    assert_true(RLReadStreamSetClient(r, ALL_EVENTS, read_cb, &ctx));
    assert_true(RLReadStreamSetClient(r, ALL_EVENTS, read_cb, &ctx));
    assert_int_equal(released, 1);
    assert_true(RLReadStreamSetClient(r, 0, NULL, NULL)); /* removes the client */
    assert_int_equal(released, 2);
    assert_true(RLReadStreamSetClient(r, ALL_EVENTS, read_cb, &ctx));
    RLRelease(r);
    assert_int_equal(released, 3);
    assert_trace("retain retain retain");
}

/* ---- the lock order, checked by the lock-order detector ---- */

static atomic_int reports;
static void count_report(const RLLockDebugReport *r, void *info) {
    (void)r;
    (void)info;
    atomic_fetch_add(&reports, 1);
}

/* With the detector on, the streams' own paths (connect through the
 * resolver, the fd source, bound pairs across threads) report nothing;
 * and having seen them, the detector reports a thread that takes the
 * stream locks in the reverse order (docs/locking.md): the order is
 * learned from the library's real locks, which report as classes. */
static void test_lock_order_is_checked(void **state) {
    bool was = RLLockDebugIsEnabled();
    RLLockDebugSetEnabled(true);
    RLLockDebugReset();
    atomic_store(&reports, 0);
    RLLockDebugSetReportHandler(count_report, NULL);
    test_socket_to_named_host_resolves_off_the_loop(state);
    rl_trace_clear();
    test_releasing_one_socket_stream_keeps_the_other_scheduled(state);
    rl_trace_clear();
    test_bound_pair_across_threads_blocks_and_loses_nothing(state);
    assert_int_equal(atomic_load(&reports), 0);
#if RL_LOCKCLASS /* the library's own locks report in such a build only (rl_lockclass.h; make check-lockdep) */
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"a", 1);
    rl__stream *s = (rl__stream *)r;
    /* A stream lock under a loop lock (the order is stream, then loop). */
    rl__loop_lock(RLRunLoopGetCurrent());
    rl__stream_lock(s);
    rl__stream_unlock(s);
    rl__loop_unlock(RLRunLoopGetCurrent());
    assert_int_equal(atomic_load(&reports), 1);
    /* A socket stream's connection lock under a stream lock (the order is
     * connection, then stream). */
    rl__stream_lock(s);
    rl__lockclass_take(RL_LOCKCLASS_STREAM_SOCKET, NULL);
    rl__lockclass_drop(RL_LOCKCLASS_STREAM_SOCKET);
    rl__stream_unlock(s);
    assert_int_equal(atomic_load(&reports), 2);
    /* A connection lock under the resolver's lock (the resolver's is a
     * leaf, taken under a connection's). */
    rl__lockclass_take(RL_LOCKCLASS_RESOLVER, NULL);
    rl__lockclass_take(RL_LOCKCLASS_STREAM_SOCKET, NULL);
    rl__lockclass_drop(RL_LOCKCLASS_STREAM_SOCKET);
    rl__lockclass_drop(RL_LOCKCLASS_RESOLVER);
    assert_int_equal(atomic_load(&reports), 3);
    /* Two stream locks at once. */
    RLReadStreamRef r2 = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"b", 1);
    rl__stream_lock(s);
    rl__stream_lock((rl__stream *)r2);
    rl__stream_unlock((rl__stream *)r2);
    rl__stream_unlock(s);
    assert_int_equal(atomic_load(&reports), 4);
    RLRelease(r2);
    RLRelease(r);
#endif
    RLLockDebugSetReportHandler(NULL, NULL);
    RLLockDebugReset();
    RLLockDebugSetEnabled(was);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_memory_streams_events_in_cf_order, rl_trace_setup),
        cmocka_unit_test_setup(test_bound_pair_back_pressure_and_end, rl_trace_setup),
        cmocka_unit_test_setup(test_bound_pair_write_after_reader_closed_is_epipe, rl_trace_setup),
        cmocka_unit_test_setup(test_bound_pair_across_threads_blocks_and_loses_nothing, rl_trace_setup),
        cmocka_unit_test_setup(test_file_streams, rl_trace_setup),
        cmocka_unit_test_setup(test_socket_to_numeric_host_echo, rl_trace_setup),
        cmocka_unit_test_setup(test_socket_to_named_host_resolves_off_the_loop, rl_trace_setup),
        cmocka_unit_test_setup(test_connection_refused, rl_trace_setup),
        cmocka_unit_test_setup(test_pair_with_existing_socket, rl_trace_setup),
        cmocka_unit_test_setup(test_releasing_one_socket_stream_keeps_the_other_scheduled, rl_trace_setup),
        cmocka_unit_test_setup(test_schedule_twice_and_unschedule_in_callback, rl_trace_setup),
        cmocka_unit_test_setup(test_events_wait_for_their_mode, rl_trace_setup),
        cmocka_unit_test_setup(test_scheduled_in_two_modes_delivers_in_either, rl_trace_setup),
        cmocka_unit_test_setup(test_stale_readiness_is_dropped_and_the_stream_stays_armed, rl_trace_setup),
        cmocka_unit_test_setup(test_memory_stream_polled_while_read_on_another_thread, rl_trace_setup),
        cmocka_unit_test_setup(test_misuse, rl_trace_setup),
        cmocka_unit_test_setup(test_client_context_retained_and_replaced, rl_trace_setup),
        cmocka_unit_test_setup(test_lock_order_is_checked, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
