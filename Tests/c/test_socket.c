/* test_socket.c — RLSocket (CFSocket): accept, background connect, data
 * read in one wake (in chunks, and when they stop), read/write callbacks, flags and re-enabling, datagrams
 * with addresses, end of stream, fd numbers above 1024 without a helper
 * thread, and the misuse of every public function. (Callback order and
 * flags against CF itself: Tests/diff/scenarios/socket_*.c.) */
#include "testutil.h"
#include "trace.h"

#include "rl_lock.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RL_TEST_VALGRIND 1
#endif
#endif

#define MODE "SOCK"

/* Entries in the trace so far. */
static int rl_trace_count(void) {
    const char *t = rl_trace_get();
    int n = *t ? 1 : 0;
    for (; *t; t++)
        n += *t == ' ';
    return n;
}

#define assert_trace_contains(part) assert_non_null(strstr(rl_trace_get(), (part)))

static int accepted = -1;
static int naccepted;
static long received;
static char last_data[256];
/* Every Data byte since the last reset, in order (up to its size). */
static char got_bytes[300000];
static size_t got_len;

static const char *kind(RLSocketCallBackType t) {
    switch (t) {
    case kRLSocketReadCallBack: return "read";
    case kRLSocketAcceptCallBack: return "accept";
    case kRLSocketDataCallBack: return "data";
    case kRLSocketConnectCallBack: return "connect";
    case kRLSocketWriteCallBack: return "write";
    default: return "?";
    }
}

static void cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s;
    const char *who = info;
    if (type == kRLSocketAcceptCallBack) {
        accepted = *(const int *)data;
        naccepted++;
        rl_trace_addf("%s:accept", who);
    } else if (type == kRLSocketDataCallBack) {
        RLIndex n = RLDataGetLength(data);
        received += n;
        snprintf(last_data, sizeof last_data, "%.*s", (int)n, (const char *)RLDataGetBytePtr(data));
        if (got_len + (size_t)n <= sizeof got_bytes) {
            memcpy(got_bytes + got_len, RLDataGetBytePtr(data), (size_t)n);
            got_len += (size_t)n;
        }
        rl_trace_addf("%s:data%ld%s", who, (long)n, address ? "" : "(noaddr)");
    } else if (type == kRLSocketConnectCallBack) {
        rl_trace_addf("%s:connect%s", who, data ? "-failed" : "");
        if (data)
            snprintf(last_data, sizeof last_data, "%d", *(const int32_t *)data);
    } else {
        rl_trace_addf("%s:%s", who, kind(type));
    }
}

static RLDataRef loopback(uint16_t port) {
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return RLDataCreate(NULL, (const uint8_t *)&sin, sizeof sin);
}

/* A socket on fd (a new TCP one when fd < 0) with `callout`, `name` as its
 * info, its source (of the given order) in MODE of this thread's loop. */
static RLSocketRef make_with(int fd, RLOptionFlags types, RLSocketCallBack callout, const char *name, RLIndex order) {
    RLSocketContext c = {0, (void *)name, NULL, NULL, NULL};
    RLSocketRef s = fd < 0 ? RLSocketCreate(NULL, 0, 0, 0, types, callout, &c)
                           : RLSocketCreateWithNative(NULL, fd, types, callout, &c);
    assert_non_null(s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, order);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    return s;
}

static RLSocketRef make(int fd, RLOptionFlags types, const char *name) { return make_with(fd, types, cb, name, 0); }

/* A stream socket pair whose second end can queue more than 256 KiB at
 * once (the Data tests write it all before the loop runs). */
static void big_pair(int sv[2]) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int big_buffer = 1 << 20;
    assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big_buffer, sizeof big_buffer), 0);
}

/* A Data socket on fd whose source has the given order. */
static RLSocketRef make_ordered(int fd, const char *name, RLIndex order) {
    return make_with(fd, kRLSocketDataCallBack, cb, name, order);
}

/* A listener on 127.0.0.1:0 with an Accept callback; *addr its address. */
static RLSocketRef listener(RLDataRef *addr) {
    RLSocketRef l = make(-1, kRLSocketAcceptCallBack, "L");
    RLDataRef any = loopback(0);
    assert_int_equal(RLSocketSetAddress(l, any), kRLSocketSuccess);
    RLRelease(any);
    *addr = RLSocketCopyAddress(l);
    assert_non_null(*addr);
    return l;
}

/* Runs until the trace holds `want` entries, at most 10 s. */
static void run_until(int want) {
    double end = rl_test_now() + 10;
    while (rl_trace_count() < want && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
}

static void done(RLSocketRef s) {
    assert_true(RLSocketInvalidate(s));
    assert_true(RLRelease(s));
}

static int count_threads(void) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_connect_accept_and_echo(void **state) {
    (void)state;
    naccepted = 0;
    int threads = count_threads();
    RLDataRef addr;
    RLSocketRef l = listener(&addr);
    assert_int_equal(RLSocketGetSocketFlags(l), kRLSocketAutomaticallyReenableAcceptCallBack | kRLSocketCloseOnInvalidate);
    RLSocketRef c = make(-1, kRLSocketDataCallBack | kRLSocketConnectCallBack, "C");
    assert_null(RLSocketCopyPeerAddress(c));
    assert_rl_error(kRLErrorSystem);
    assert_int_equal(RLSocketConnectToAddress(c, addr, -1), kRLSocketSuccess);
    run_until(2);
    assert_int_equal(naccepted, 1);
    assert_true(strstr(rl_trace_get(), "C:connect") != NULL);
    assert_true(strstr(rl_trace_get(), "L:accept") != NULL);
    RLSocketRef srv = make(accepted, kRLSocketDataCallBack, "S");
    RLDataRef peer = RLSocketCopyPeerAddress(c);
    assert_non_null(peer);
    assert_true(RLDataEqual(peer, addr));
    RLRelease(peer);

    RLDataRef hello = RLDataCreate(NULL, (const uint8_t *)"hello", 5);
    assert_int_equal(RLSocketSendData(c, NULL, hello, 5), kRLSocketSuccess);
    run_until(3);
    assert_string_equal(last_data, "hello");
    /* The server echoes. */
    assert_int_equal(RLSocketSendData(srv, NULL, hello, 0), kRLSocketSuccess);
    run_until(4);
    assert_trace_contains("S:data5 C:data5");
    /* No helper thread was started for any of it. */
    assert_int_equal(count_threads(), threads);
    RLRelease(hello);
    RLRelease(addr);
    done(srv);
    done(c);
    done(l);
}

static void test_data_reads_everything_queued_in_one_wake(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef s = make(sv[0], kRLSocketDataCallBack, "S");
    /* Three writes before the loop runs: one callback with all of them. */
    assert_int_equal(write(sv[1], "ab", 2), 2);
    assert_int_equal(write(sv[1], "cd", 2), 2);
    assert_int_equal(write(sv[1], "ef", 2), 2);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:data6");
    assert_string_equal(last_data, "abcdef");
    /* End of stream: one empty data, then nothing more: the socket is
     * invalidated (as CFSocket is), so its source has left the mode
     * (test_socket_cf.c). */
    close(sv[1]);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:data6 S:data0");
    assert_false(RLSocketIsValid(s));
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunFinished);
    assert_trace("S:data6 S:data0");
    done(s);

    /* More than one read takes: chunks, one callback each, all in this one
     * wake (the run returns after one source was handled), every byte in
     * order. The first chunk is 64 KiB; with no other fd waiting in the
     * pass, the next ones are 128 KiB. */
    rl_trace_setup(NULL);
    big_pair(sv);
    s = make(sv[0], kRLSocketDataCallBack, "S");
    enum { BIG = 300000 };
    static char big[BIG];
    for (size_t i = 0; i < BIG; i++)
        big[i] = (char)('a' + i % 23);
    long before = received;
    got_len = 0;
    assert_int_equal(write(sv[1], big, BIG), BIG);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:data65536 S:data131072 S:data103392");
    assert_int_equal(received - before, BIG);
    assert_int_equal(got_len, BIG);
    assert_int_equal(memcmp(got_bytes, big, BIG), 0);
    close(sv[1]);
    done(s);
}

RL__HIDDEN extern _Atomic size_t rl__socket_read_chunk;

/* A peer that keeps a socket full cannot keep the loop in one callout: at
 * most 32 first chunks' worth goes out in one wake, the rest on the next
 * pass. (The first chunk is made small here: a socket pair cannot queue
 * 2 MiB.) */
static void test_data_chunks_per_wake_are_limited(void **state) {
    (void)state;
    size_t saved = atomic_exchange(&rl__socket_read_chunk, 1000);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef s = make(sv[0], kRLSocketDataCallBack, "S");
    static char bytes[40500];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (char)('A' + i % 29);
    got_len = 0;
    assert_int_equal(write(sv[1], bytes, sizeof bytes), (ssize_t)sizeof bytes);
    /* Alone in its passes: after the first, chunks twice its size, the
     * last one cut to what the wake may still read. */
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    atomic_store(&rl__socket_read_chunk, saved);
    assert_int_equal(rl_trace_count(), 17);
    assert_true(strncmp(rl_trace_get(), "S:data1000 S:data2000 S:data2000 ", 33) == 0);
    assert_non_null(strstr(rl_trace_get(), "S:data2000 S:data1000"));
    assert_int_equal(got_len, 32000);
    /* The rest, still queued, comes with the next wake; a short chunk
     * ends that wake's reading. */
    atomic_store(&rl__socket_read_chunk, 1000);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    atomic_store(&rl__socket_read_chunk, saved);
    assert_int_equal(rl_trace_count(), 22);
    assert_non_null(strstr(rl_trace_get(), "S:data2000 S:data1000 S:data1000 S:data2000 S:data2000 S:data2000 S:data1500"));
    assert_int_equal(got_len, sizeof bytes);
    assert_int_equal(memcmp(got_bytes, bytes, sizeof bytes), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    close(sv[1]);
    done(s);
}

/* Two sockets ready in the same pass: the one whose callout comes first
 * reads in first-size chunks while the other waits; the last of the pass
 * may grow its chunks. */
static void test_data_chunks_stay_small_while_others_wait(void **state) {
    (void)state;
    size_t saved = atomic_exchange(&rl__socket_read_chunk, 1000);
    int a[2], b[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    RLSocketRef sa = make_ordered(a[0], "A", 1), sb = make_ordered(b[0], "B", 2);
    static char bytes[7000];
    memset(bytes, 'q', sizeof bytes);
    assert_int_equal(write(a[1], bytes, sizeof bytes), (ssize_t)sizeof bytes);
    assert_int_equal(write(b[1], bytes, sizeof bytes), (ssize_t)sizeof bytes);
    /* Both readable before the loop looks: its first wait reports both,
     * served in that pass (the rest of the run finds nothing more). */
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.2, false), kRLRunLoopRunTimedOut);
    atomic_store(&rl__socket_read_chunk, saved);
    assert_trace("A:data1000 A:data1000 A:data1000 A:data1000 A:data1000 A:data1000 A:data1000 "
                 "B:data1000 B:data2000 B:data2000 B:data2000");
    close(a[1]);
    close(b[1]);
    done(sa);
    done(sb);
}

/* Whether this thread's loop reads Data streams through its ring (the
 * io_uring backend, RL_BACKEND=io_uring): a stream's bytes are then read
 * ahead into the socket's own queue, in order, before its callout. */
static bool ring(void) {
    const char *b = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    return b && strcmp(b, "io_uring") == 0;
}

static int queued(int fd) {
    int n = -1;
    assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
    return n;
}

/* Out of memory for the data a read would fill: nothing is read, nothing
 * is lost; the bytes come once memory is there again. (Reading first and
 * failing to wrap the bytes afterwards would drop them.) Through a ring,
 * a stream's bytes were read ahead into its socket's queue: held there,
 * not delivered, not lost. */
static void test_data_out_of_memory_reads_nothing(void **state) {
    (void)state;
    for (int type = SOCK_STREAM; type <= SOCK_DGRAM; type++) {
        rl_trace_setup(NULL);
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, type, 0, sv), 0);
        RLSocketRef s = make(sv[0], kRLSocketDataCallBack, "S");
        got_len = 0;
        assert_int_equal(write(sv[1], "keep", 4), 4);
        atomic_store(&rl__faults, RL_FAULT_SOCKET_DATA);
        for (int i = 0; i < 5; i++)
            RLRunLoopRunInMode(MODE, 0.01, true);
        atomic_store(&rl__faults, 0);
        assert_trace("");
        assert_int_equal(queued(sv[0]), type == SOCK_STREAM && ring() ? 0 : 4);
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
        assert_int_equal(got_len, 4);
        assert_memory_equal(got_bytes, "keep", 4);
        close(sv[1]);
        done(s);
    }
}

/* RLData that Data callbacks keep, in order. */
static RLDataRef kept[16];
static int nkept;
/* When set, the "X" socket's first Data callback writes `nest_len` bytes
 * of 'y' here and runs the loop, nested, until another Data callback. */
static int nest_fd = -1;
static size_t nest_len;

static void keep_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)address;
    if (type != kRLSocketDataCallBack || RLDataGetLength(data) == 0)
        return;
    if (nkept < 16)
        kept[nkept++] = RLRetain(data);
    if (strcmp(info, "X") == 0 && nest_fd >= 0) {
        int fd = nest_fd;
        nest_fd = -1;
        char *y = malloc(nest_len);
        assert_non_null(y);
        memset(y, 'y', nest_len);
        assert_int_equal(write(fd, y, nest_len), (ssize_t)nest_len);
        free(y);
        int before = nkept;
        double end = rl_test_now() + 10;
        while (nkept == before && rl_test_now() < end)
            RLRunLoopRunInMode(MODE, 0.05, true);
    }
}

static RLSocketRef keep_socket(int fd, const char *name) {
    return make_with(fd, kRLSocketDataCallBack, keep_cb, name, 0);
}

/* Whether kept[i] is exactly `len` bytes of `c`. */
static void assert_kept(int i, char c, size_t len) {
    assert_true(i < nkept);
    assert_int_equal(RLDataGetLength(kept[i]), (RLIndex)len);
    const uint8_t *p = RLDataGetBytePtr(kept[i]);
    for (size_t k = 0; k < len; k++)
        if (p[k] != (uint8_t)c)
            fail_msg("kept[%d][%zu] is '%c', not '%c'", i, k, p[k], c);
}

static void unkeep(void) {
    for (int i = 0; i < nkept; i++)
        RLRelease(kept[i]);
    nkept = 0;
}

/* Each RLData a Data callback keeps holds its own bytes, whatever the loop
 * reads after it: short reads (copied out of the thread's read buffer) and
 * long ones (which take the buffer; the thread takes back a buffer no one
 * kept) in turn, some short enough to fit in the data of an earlier one (a
 * data no one kept is filled again; a kept one never is), then the same
 * with no memory
 * for the copies (the bytes go out in the buffer itself: nothing lost). */
static void test_kept_data_keeps_its_bytes(void **state) {
    (void)state;
    static const struct {
        char c;
        size_t len;
    } piece[] = {{'a', 100},  {'b', 10000}, {'c', 1},     {'d', 4096},  {'e', 40000}, {'f', 30000},
                 {'g', 7},    {'h', 4000},  {'i', 3000},  {'j', 64},    {'k', 60},    {'l', 65536},
                 {'m', 33000}, {'n', 50000}};
    enum { NPIECE = sizeof piece / sizeof piece[0] };
    static char buf[65536];
    for (int nomem = 0; nomem <= 1; nomem++) {
        int sv[2];
        big_pair(sv);
        RLSocketRef s = keep_socket(sv[0], "S");
        atomic_store(&rl__faults, nomem ? RL_FAULT_SOCKET_COPY : 0);
        for (int i = 0; i < NPIECE; i++) {
            memset(buf, piece[i].c, piece[i].len);
            assert_int_equal(write(sv[1], buf, piece[i].len), (ssize_t)piece[i].len);
            double end = rl_test_now() + 10;
            while (nkept == i && rl_test_now() < end)
                RLRunLoopRunInMode(MODE, 0.05, true);
            assert_int_equal(nkept, i + 1);
        }
        atomic_store(&rl__faults, 0);
        for (int i = 0; i < NPIECE; i++)
            assert_kept(i, piece[i].c, piece[i].len);
        unkeep();
        close(sv[1]);
        done(s);
    }
}

/* Each Data callback's RLData holds exactly what its read brought, whether
 * the callbacks before it kept their data, let it go, or kept it and let it
 * go within the call: longer and shorter reads in turn (a data no one kept
 * is filled again by a later short read; the read buffer a long read went
 * out in is taken back, whole, for the next). */
static bool keep_briefly;

static void brief_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    if (keep_briefly && type == kRLSocketDataCallBack)
        RLRetain(data);
    cb(s, type, address, data, info);
    if (keep_briefly && type == kRLSocketDataCallBack)
        assert_true(RLRelease(data));
}

static void test_each_data_holds_exactly_its_read(void **state) {
    (void)state;
    static const struct {
        char c;
        size_t len;
    } piece[] = {{'a', 100}, {'b', 10}, {'c', 4096}, {'d', 1}, {'e', 3000}, {'f', 64}, {'g', 64},
                 {'h', 2000}, {'i', 4000}, {'j', 5000}, {'k', 63}, {'l', 4096}, {'m', 1024},
                 {'n', 40000}, {'o', 65536}, {'p', 33000}, {'q', 20000}, {'r', 50000}, {'s', 100}};
    enum { NPIECE = sizeof piece / sizeof piece[0] };
    static char buf[65536];
    for (int run = 0; run < 4; run++) {
        keep_briefly = run & 1;
        /* Then with no memory for the copies: the bytes go out in the
         * buffer they were read into, trimmed to them. */
        atomic_store(&rl__faults, run & 2 ? RL_FAULT_SOCKET_COPY : 0);
        rl_trace_setup(NULL);
        got_len = 0;
        int sv[2];
        big_pair(sv);
        RLSocketRef s = make_with(sv[0], kRLSocketDataCallBack, brief_cb, "S", 0);
        size_t at = 0;
        for (int i = 0; i < NPIECE; i++) {
            memset(buf, piece[i].c, piece[i].len);
            assert_int_equal(write(sv[1], buf, piece[i].len), (ssize_t)piece[i].len);
            double end = rl_test_now() + 10;
            while (got_len < at + piece[i].len && rl_test_now() < end)
                RLRunLoopRunInMode(MODE, 0.05, true);
            assert_int_equal(got_len, at + piece[i].len);
            assert_int_equal(rl_trace_count(), i + 1);
            for (size_t k = 0; k < piece[i].len; k++)
                if (got_bytes[at + k] != piece[i].c)
                    fail_msg("piece %d byte %zu is '%c', not '%c'", i, k, got_bytes[at + k], piece[i].c);
            char want[32];
            snprintf(want, sizeof want, "S:data%zu", piece[i].len);
            assert_trace_contains(want);
            at += piece[i].len;
        }
        atomic_store(&rl__faults, 0);
        close(sv[1]);
        done(s);
    }
    keep_briefly = false;
}

/* A long read goes out in the thread's whole read buffer (64 KiB) only to
 * a callback that did not keep the last one: a callback that keeps every
 * read holds data trimmed to their bytes, and one that starts keeping holds
 * one whole buffer at most before its data are trimmed again. */
static bool keep_now;
static void maybe_keep_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    if (keep_now)
        keep_cb(s, type, address, data, info);
}

/* The bytes malloc reserved for kept[i]'s bytes. */
static size_t kept_block(int i) { return malloc_usable_size((void *)RLDataGetBytePtr(kept[i])); }

static void write_and_wait(int fd, char c, size_t len, int want_kept) {
    static char buf[20000];
    memset(buf, c, len);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    double end = rl_test_now() + 10;
    while (nkept < want_kept && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    if (!keep_now) /* nothing to wait for: let the loop read it */
        while (RLRunLoopRunInMode(MODE, 0.05, true) == kRLRunLoopRunHandledSource)
            ;
    assert_int_equal(nkept, want_kept);
}

static void test_kept_long_reads_hold_little_more_than_their_bytes(void **state) {
    (void)state;
    int sv[2];
    big_pair(sv);
    RLSocketRef s = make_with(sv[0], kRLSocketDataCallBack, maybe_keep_cb, "S", 0);
    /* Kept from the start: trimmed. */
    keep_now = true;
    write_and_wait(sv[1], 'a', 10000, 1);
    write_and_wait(sv[1], 'b', 5000, 2);
    /* Through a ring the bytes are in the chunk the ring read (one block,
     * its bytes after a header): the blocks are not measured there. */
    bool measure = !ring();
    for (int i = 0; i < 2 && measure; i++)
        assert_true(kept_block(i) < 2 * (size_t)RLDataGetLength(kept[i]));
    /* Not kept for a while, then kept again: one whole buffer, then
     * trimmed. */
    keep_now = false;
    write_and_wait(sv[1], 'c', 6000, 2);
    write_and_wait(sv[1], 'd', 7000, 2);
    keep_now = true;
    write_and_wait(sv[1], 'e', 9000, 3);
    write_and_wait(sv[1], 'f', 8000, 4);
    write_and_wait(sv[1], 'g', 20000, 5);
    if (RL_TRICK_SOCK_RECYCLE && measure)
        assert_true(kept_block(2) >= 65536); /* the one whole buffer */
    else if (measure) /* the plain build: a buffer of its own for each read, trimmed */
        assert_true(kept_block(2) < 2 * (size_t)RLDataGetLength(kept[2]));
    for (int i = 3; i < 5 && measure; i++)
        assert_true(kept_block(i) < 2 * (size_t)RLDataGetLength(kept[i]));
    assert_kept(0, 'a', 10000);
    assert_kept(1, 'b', 5000);
    assert_kept(2, 'e', 9000);
    assert_kept(3, 'f', 8000);
    assert_kept(4, 'g', 20000);
    keep_now = false;
    unkeep();
    close(sv[1]);
    done(s);
}

/* A Data callback that runs the loop, nested, and gets another socket's
 * bytes there still has its own intact: the thread's read buffer is free
 * while callbacks run. Short and long bytes on either side. */
static void test_kept_data_survives_a_nested_read(void **state) {
    (void)state;
    static const size_t lens[][2] = {{64, 64}, {64, 20000}, {20000, 64}, {20000, 30000}};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        int xv[2], yv[2];
        big_pair(xv);
        big_pair(yv);
        RLSocketRef x = keep_socket(xv[0], "X");
        RLSocketRef y = keep_socket(yv[0], "Y");
        nest_fd = yv[1];
        nest_len = lens[k][1];
        char *xs = malloc(lens[k][0]);
        assert_non_null(xs);
        memset(xs, 'x', lens[k][0]);
        assert_int_equal(write(xv[1], xs, lens[k][0]), (ssize_t)lens[k][0]);
        free(xs);
        double end = rl_test_now() + 10;
        while (nkept < 2 && rl_test_now() < end)
            RLRunLoopRunInMode(MODE, 0.05, true);
        assert_int_equal(nkept, 2);
        assert_kept(0, 'x', lens[k][0]); /* X's, kept before the nested run */
        assert_kept(1, 'y', lens[k][1]);
        unkeep();
        close(xv[1]);
        close(yv[1]);
        done(x);
        done(y);
    }
}

/* As CFSocket: a Data callback that runs the loop, nested, while more
 * bytes wait on its own socket does not get called again inside itself:
 * the nested run finds nothing to do (it sleeps out its time instead of
 * spinning on the readable socket), and the bytes come in the next outer
 * run. */
static int reenter_fd = -1;
static int reenter_depth, reenter_max_depth, reenter_calls;
static RLRunLoopRunResult reenter_nested;
static int reenter_nested_wakes;

static void count_nested_wake(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    (void)o, (void)a, (void)info;
    if (reenter_depth > 0)
        reenter_nested_wakes++;
}

static void reenter_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)address, (void)info;
    if (type != kRLSocketDataCallBack || RLDataGetLength(data) == 0)
        return;
    reenter_calls++;
    if (++reenter_depth > reenter_max_depth)
        reenter_max_depth = reenter_depth;
    if (reenter_calls == 4) {
        assert_int_equal(write(reenter_fd, "more", 4), 4);
        reenter_nested = RLRunLoopRunInMode(MODE, 0.2, true);
    }
    reenter_depth--;
}

static void test_data_callback_is_not_reentered_by_a_nested_run(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    reenter_fd = sv[1];
    reenter_depth = reenter_max_depth = reenter_calls = reenter_nested_wakes = 0;
    RLSocketRef s = make_with(sv[0], kRLSocketDataCallBack, reenter_cb, "S", 0);
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_nested_wake, NULL);
    assert_non_null(o);
    assert_true(RLRunLoopAddObserver(RLRunLoopGetCurrent(), o, MODE));
    /* Three plain deliveries first (the loop may then keep the socket's
     * registration armed between callouts), then the nesting one. */
    for (int i = 1; i <= 4; i++) {
        assert_int_equal(write(sv[1], "bytes", 5), 5);
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
        assert_int_equal(reenter_calls, i);
    }
    assert_int_equal(reenter_nested, kRLRunLoopRunTimedOut);
    assert_int_equal(reenter_max_depth, 1);
    /* It slept out its time: a few wakes at most, not one per pass of a
     * spin on the readable socket. */
    assert_true(reenter_nested_wakes <= 3);
    /* The bytes written inside come now. */
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(reenter_calls, 5);
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    close(sv[1]);
    reenter_fd = -1;
    done(s);
}

/* What the Data (or Accept) callback does to the socket in its first call
 * of a wake: the further chunks (connections) of that wake follow only if
 * the loop would still serve it. */
enum { ACT_DISABLE = 1, ACT_REMOVE, ACT_STOP, ACT_INVALIDATE, ACT_NONE };
static int piece_action;
static int piece_calls;
static RLRunLoopSourceRef piece_src;

static void piece_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address, (void)info;
    if (type == kRLSocketAcceptCallBack) {
        close(*(const int *)data);
    } else if (type == kRLSocketDataCallBack) {
        size_t n = (size_t)RLDataGetLength(data);
        if (got_len + n <= sizeof got_bytes) {
            memcpy(got_bytes + got_len, RLDataGetBytePtr(data), n);
            got_len += n;
        }
    }
    if (piece_calls++ > 0)
        return;
    switch (piece_action) {
    case ACT_DISABLE: assert_true(RLSocketDisableCallBacks(s, type)); break;
    case ACT_REMOVE: assert_true(RLRunLoopRemoveSource(RLRunLoopGetCurrent(), piece_src, MODE)); break;
    case ACT_STOP: RLRunLoopStop(RLRunLoopGetCurrent()); break;
    case ACT_INVALIDATE: assert_true(RLSocketInvalidate(s)); break;
    default: break;
    }
}

static RLSocketRef piece_socket(int fd, RLOptionFlags types) {
    RLSocketRef s = fd < 0 ? RLSocketCreate(NULL, 0, 0, 0, types, piece_cb, NULL)
                           : RLSocketCreateWithNative(NULL, fd, types, piece_cb, NULL);
    assert_non_null(s);
    piece_src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(piece_src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), piece_src, MODE));
    return s;
}

/* Invalidates (unless done already), then lets go of the socket and its
 * source. */
static void piece_done(RLSocketRef s, bool invalidate) {
    if (invalidate)
        assert_true(RLSocketInvalidate(s));
    RLRelease(piece_src);
    assert_true(RLRelease(s));
}


static void test_data_chunks_stop_when_the_callback_says_so(void **state) {
    (void)state;
    enum { N = 200000 };
    static char bytes[N];
    for (size_t i = 0; i < N; i++)
        bytes[i] = (char)('a' + i % 13);
    for (int act = ACT_DISABLE; act <= ACT_NONE; act++) {
        piece_action = act;
        piece_calls = 0;
        got_len = 0;
        int sv[2];
        big_pair(sv);
        RLSocketRef s = piece_socket(sv[0], kRLSocketDataCallBack);
        RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
        assert_int_equal(write(sv[1], bytes, N), N);
        /* (A stop is seen by a run that goes on after a handled source.) */
        RLRunLoopRunResult r = RLRunLoopRunInMode(MODE, 10, act != ACT_STOP);
        assert_int_equal(r, act == ACT_STOP ? kRLRunLoopRunStopped : kRLRunLoopRunHandledSource);
        if (act == ACT_NONE) { /* the control: every chunk in that wake */
            assert_int_equal(piece_calls, 3); /* 64 KiB, 128 KiB, the rest */
            assert_int_equal(got_len, N);
        } else {
            /* One chunk, the rest still queued in the kernel. */
            assert_int_equal(piece_calls, 1);
            assert_int_equal(got_len, 65536);
            if (act != ACT_INVALIDATE)
                assert_int_equal(queued(sv[0]), N - 65536);
        }
        /* Let go again, the rest comes on the next wake. */
        if (act == ACT_DISABLE)
            assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
        if (act == ACT_REMOVE)
            assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), piece_src, MODE));
        if (act != ACT_INVALIDATE && act != ACT_NONE) {
            assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
            assert_int_equal(got_len, N);
            assert_int_equal(memcmp(got_bytes, bytes, N), 0);
        }
        /* Nothing more, and an invalidated socket got nothing after. */
        int calls = piece_calls;
        assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
        assert_int_equal(piece_calls, calls);
        rl_test_unkeep(keep);
        piece_done(s, act != ACT_INVALIDATE);
        close(sv[1]);
    }
}

/* Without the flag that re-enables it, a Data callback gets one chunk per
 * enable, even with more queued. */
static void test_data_chunk_per_enable_without_reenable_flag(void **state) {
    (void)state;
    piece_action = ACT_NONE;
    piece_calls = 0;
    got_len = 0;
    int sv[2];
    big_pair(sv);
    RLSocketRef s = piece_socket(sv[0], kRLSocketDataCallBack);
    assert_true(RLSocketSetSocketFlags(s, kRLSocketCloseOnInvalidate));
    static char bytes[150000];
    memset(bytes, 'z', sizeof bytes);
    assert_int_equal(write(sv[1], bytes, sizeof bytes), (ssize_t)sizeof bytes);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(piece_calls, 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_int_equal(piece_calls, 1);
    assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(piece_calls, 2);
    assert_int_equal(got_len, 2 * 65536);
    piece_done(s, true);
    close(sv[1]);
}

static void test_flags_reenable_and_disable(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef s = make(sv[0], kRLSocketDataCallBack | kRLSocketWriteCallBack, "S");
    assert_int_equal(RLSocketGetSocketFlags(s), kRLSocketAutomaticallyReenableDataCallBack | kRLSocketCloseOnInvalidate);
    /* Write: delivered once, not re-enabled by default. */
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:write");
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_true(RLSocketEnableCallBacks(s, kRLSocketWriteCallBack));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:write S:write");
    /* Data without re-enabling: one callback, then silence until enabled. */
    assert_true(RLSocketSetSocketFlags(s, kRLSocketCloseOnInvalidate));
    assert_int_equal(write(sv[1], "a", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(write(sv[1], "b", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_trace("S:write S:write S:data1");
    assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:write S:write S:data1 S:data1");
    assert_string_equal(last_data, "b");
    /* Disabled by the user: the data waits, and comes when enabled. */
    assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
    assert_true(RLSocketDisableCallBacks(s, kRLSocketDataCallBack));
    assert_int_equal(write(sv[1], "c", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_string_equal(last_data, "c");
    /* Close on invalidate off: the fd survives the socket. */
    assert_true(RLSocketSetSocketFlags(s, 0));
    done(s);
    assert_int_not_equal(fcntl(sv[0], F_GETFD), -1);
    close(sv[0]);
    close(sv[1]);
}

static void test_read_callback_and_final_read_at_end(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef s = make(sv[0], kRLSocketReadCallBack, "S");
    assert_int_equal(write(sv[1], "a", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:read");
    /* Not read: re-enabled by default, so it comes again (as with CF). */
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("S:read S:read");
    char c;
    assert_int_equal(read(sv[0], &c, 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    close(sv[1]);
    /* The peer closed: one final read callback, then the loop does not spin. */
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_trace("S:read S:read S:read");
    done(s);
}

static void test_accept_every_pending_connection_in_one_wake(void **state) {
    (void)state;
    RLDataRef addr;
    RLSocketRef l = listener(&addr);
    int fds[5];
    for (int i = 0; i < 5; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (const struct sockaddr *)RLDataGetBytePtr(addr), (socklen_t)RLDataGetLength(addr)), 0);
    }
    naccepted = 0;
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(naccepted, 5);
    assert_true(accepted >= 0);
    for (int i = 0; i < 5; i++)
        close(fds[i]);
    /* The accepted fds are the callbacks': close what they handed over. */
    for (int fd = accepted - 4; fd <= accepted; fd++)
        close(fd);
    RLRelease(addr);
    done(l);
}

/* An Accept callback that removes the listener from the mode gets no more
 * connections in that wake; added again, the rest. Without the re-enable
 * flag, one connection per enable. */
static void test_accept_stops_when_the_source_is_removed(void **state) {
    (void)state;
    piece_action = ACT_REMOVE;
    piece_calls = 0;
    RLSocketRef l = piece_socket(-1, kRLSocketAcceptCallBack);
    RLDataRef any = loopback(0);
    assert_int_equal(RLSocketSetAddress(l, any), kRLSocketSuccess);
    RLRelease(any);
    RLDataRef addr = RLSocketCopyAddress(l);
    assert_non_null(addr);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (const struct sockaddr *)RLDataGetBytePtr(addr), (socklen_t)RLDataGetLength(addr)), 0);
    }
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(piece_calls, 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_int_equal(piece_calls, 1);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), piece_src, MODE));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(piece_calls, 3);
    /* Without the flag that re-enables it: one connection per enable. */
    piece_action = ACT_NONE;
    assert_true(RLSocketSetSocketFlags(l, kRLSocketCloseOnInvalidate));
    int more[2];
    for (int i = 0; i < 2; i++) {
        more[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(more[i] >= 0);
        assert_int_equal(connect(more[i], (const struct sockaddr *)RLDataGetBytePtr(addr), (socklen_t)RLDataGetLength(addr)), 0);
    }
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_int_equal(piece_calls, 4);
    assert_true(RLSocketEnableCallBacks(l, kRLSocketAcceptCallBack));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(piece_calls, 5);
    for (int i = 0; i < 2; i++)
        close(more[i]);
    rl_test_unkeep(keep);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    RLRelease(addr);
    piece_done(l, true);
}

static void test_background_connect_refused(void **state) {
    (void)state;
    /* A port with nobody listening: bind, read the port, close. */
    int tmp = socket(AF_INET, SOCK_STREAM, 0);
    RLDataRef any = loopback(0);
    assert_int_equal(bind(tmp, (const struct sockaddr *)RLDataGetBytePtr(any), sizeof(struct sockaddr_in)), 0);
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    assert_int_equal(getsockname(tmp, (struct sockaddr *)&sin, &len), 0);
    close(tmp);
    RLRelease(any);
    RLDataRef dead = loopback(ntohs(sin.sin_port));
    RLSocketRef c = make(-1, kRLSocketDataCallBack | kRLSocketConnectCallBack, "C");
    RLSocketError r = RLSocketConnectToAddress(c, dead, -1);
    if (r == kRLSocketSuccess) {
        run_until(1);
        assert_trace("C:connect-failed");
        assert_int_equal(atoi(last_data), ECONNREFUSED);
    } else {
        assert_int_equal(r, kRLSocketError); /* refused at once */
        assert_rl_error(kRLErrorSystem);
    }
    /* With a timeout: refused as an error, not a timeout. */
    RLSocketRef c2 = make(-1, kRLSocketNoCallBack, "C2");
    assert_int_equal(RLSocketConnectToAddress(c2, dead, 5), kRLSocketError);
    assert_rl_error(kRLErrorSystem);
    RLRelease(dead);
    done(c2);
    done(c);
}

static void test_connect_with_timeout_and_blocking(void **state) {
    (void)state;
    RLDataRef addr;
    RLSocketRef l = listener(&addr);
    naccepted = 0;
    RLSocketRef a = make(-1, kRLSocketConnectCallBack, "A");
    RLSocketRef b = make(-1, kRLSocketConnectCallBack, "B");
    assert_int_equal(RLSocketConnectToAddress(a, addr, 5), kRLSocketSuccess);
    assert_int_equal(RLSocketConnectToAddress(b, addr, 0), kRLSocketSuccess);
    /* Blocking mode restored after a timed connect. */
    assert_int_equal(fcntl(RLSocketGetNative(a), F_GETFL) & O_NONBLOCK, 0);
    /* Connected in the foreground: no Connect callback. */
    run_until(2);
    assert_int_equal(naccepted, 2);
    assert_trace("L:accept L:accept");
    close(accepted);
    close(accepted - 1);
    RLRelease(addr);
    done(a);
    done(b);
    done(l);
}

static void test_datagrams_with_sender_address(void **state) {
    (void)state;
    RLSocketRef u = make(-1, kRLSocketDataCallBack, "U");
    /* PF_INET with SOCK_STREAM by default: make a UDP one explicitly. */
    done(u);
    RLSocketContext c = {0, "U", NULL, NULL, NULL};
    u = RLSocketCreate(NULL, PF_INET, SOCK_DGRAM, 0, kRLSocketDataCallBack, cb, &c);
    assert_non_null(u);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, u, 0);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    RLDataRef any = loopback(0);
    assert_int_equal(RLSocketSetAddress(u, any), kRLSocketSuccess);
    RLRelease(any);
    RLDataRef to = RLSocketCopyAddress(u);
    RLSocketRef sender = RLSocketCreate(NULL, PF_INET, SOCK_DGRAM, IPPROTO_UDP, 0, NULL, NULL);
    assert_non_null(sender);
    RLDataRef one = RLDataCreate(NULL, (const uint8_t *)"one", 3);
    RLDataRef two = RLDataCreate(NULL, (const uint8_t *)"two!", 4);
    assert_int_equal(RLSocketSendData(sender, to, one, 1), kRLSocketSuccess);
    assert_int_equal(RLSocketSendData(sender, to, two, 1), kRLSocketSuccess);
    run_until(2);
    /* One datagram per callback, each with its sender's address. */
    assert_trace("U:data3 U:data4");
    RLRelease(one);
    RLRelease(two);
    RLRelease(to);
    done(sender);
    done(u);
}

static void test_fd_number_above_1024(void **state) {
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 2100 && rl.rlim_max >= 2100) {
        rl.rlim_cur = 2100;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    assert_true(rl.rlim_cur >= 2100 || rl.rlim_max >= 2100); /* the test machine allows it */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int high = fcntl(sv[0], F_DUPFD_CLOEXEC, 2000);
    assert_true(high >= 2000);
    close(sv[0]);
    int threads = count_threads();
    RLSocketRef s = make(high, kRLSocketDataCallBack, "H");
    assert_int_equal(RLSocketGetNative(s), high);
    assert_int_equal(write(sv[1], "hi", 2), 2);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("H:data2");
    assert_int_equal(count_threads(), threads);
    done(s);
    close(sv[1]);
}

static int invalidate_in_callback;

static void self_invalidating_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data,
                                 void *info) {
    (void)address, (void)data, (void)info;
    rl_trace_addf("%s", kind(type));
    if (invalidate_in_callback == 1) {
        assert_true(RLSocketInvalidate(s));
        assert_true(RLSocketInvalidate(s)); /* idempotent */
    } else if (invalidate_in_callback == 2) {
        RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
        assert_true(RLRunLoopRemoveSource(RLRunLoopGetCurrent(), src, MODE));
        RLRelease(src);
    }
}

static void test_invalidate_or_unschedule_inside_a_callback(void **state) {
    (void)state;
    for (int mode = 1; mode <= 2; mode++) {
        invalidate_in_callback = mode;
        rl_trace_setup(NULL);
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketReadCallBack | kRLSocketWriteCallBack,
                                                 self_invalidating_cb, NULL);
        assert_non_null(s);
        RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
        assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
        RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
        assert_int_equal(write(sv[1], "x", 1), 1);
        /* Readable and writable in one wake: the read callback goes first.
         * Invalidated in it: nothing more. Removed from the loop in it: the
         * rest of that wake's callbacks (as CF's one perform delivers
         * them), then nothing more. */
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
        assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
        assert_trace(mode == 1 ? "read" : "read write");
        assert_int_equal(RLSocketIsValid(s), mode == 2);
        if (mode == 2)
            assert_true(RLSocketInvalidate(s));
        else
            assert_int_equal(fcntl(sv[0], F_GETFD), -1); /* closed on invalidate */
        assert_false(RLRunLoopSourceIsValid(src));
        rl_test_unkeep(keep);
        RLRelease(src);
        assert_true(RLRelease(s));
        close(sv[1]);
    }
}

/* The callback drops the caller's only reference: invalidate, then
 * release, as the header says to. What the library does after the callback
 * returns must not touch the freed socket (the ASan build checks). */
static void releasing_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)info;
    if (type == kRLSocketAcceptCallBack)
        close(*(const int *)data);
    rl_trace_addf("%s", kind(type));
    RLIndex addr_len = address ? RLDataGetLength(address) : 0;
    assert_true(RLSocketInvalidate(s));
    assert_true(RLRelease(s));
    /* The address handed over stays valid to the callback's end. */
    if (address) {
        assert_int_equal(RLDataGetLength(address), addr_len);
        assert_true(RLDataGetBytePtr(address) != NULL);
    }
}

static void test_invalidate_and_release_inside_each_callback(void **state) {
    (void)state;
    const RLSocketCallBackType types[] = {kRLSocketDataCallBack, kRLSocketReadCallBack, kRLSocketWriteCallBack,
                                          kRLSocketAcceptCallBack, kRLSocketConnectCallBack};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        rl_trace_setup(NULL);
        RLSocketCallBackType type = types[i];
        int sv[2] = {-1, -1}, client = -1;
        RLSocketRef s, listener = NULL;
        if (type == kRLSocketAcceptCallBack || type == kRLSocketConnectCallBack) {
            listener = RLSocketCreate(NULL, PF_INET, SOCK_STREAM, IPPROTO_TCP, 0, NULL, NULL);
            assert_non_null(listener);
            RLDataRef any = loopback(0);
            assert_int_equal(RLSocketSetAddress(listener, any), kRLSocketSuccess);
            RLRelease(any);
        }
        RLDataRef addr = listener ? RLSocketCopyAddress(listener) : NULL;
        if (type == kRLSocketAcceptCallBack) {
            RLSocketInvalidate(listener);
            RLRelease(listener);
            listener = NULL;
            s = RLSocketCreate(NULL, PF_INET, SOCK_STREAM, IPPROTO_TCP, type, releasing_cb, NULL);
            assert_non_null(s);
            assert_int_equal(RLSocketSetAddress(s, addr), kRLSocketSuccess);
            client = socket(AF_INET, SOCK_STREAM, 0);
            assert_int_equal(connect(client, (const struct sockaddr *)RLDataGetBytePtr(addr),
                                     (socklen_t)RLDataGetLength(addr)), 0);
        } else if (type == kRLSocketConnectCallBack) {
            s = RLSocketCreate(NULL, PF_INET, SOCK_STREAM, IPPROTO_TCP, type, releasing_cb, NULL);
            assert_non_null(s);
            assert_int_equal(RLSocketConnectToAddress(s, addr, -1), kRLSocketSuccess);
        } else {
            assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
            s = RLSocketCreateWithNative(NULL, sv[0], type, releasing_cb, NULL);
            assert_non_null(s);
            if (type != kRLSocketWriteCallBack)
                assert_int_equal(write(sv[1], "x", 1), 1);
        }
        RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
        assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
        RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
        assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
        assert_trace(kind(type));
        assert_false(RLRunLoopSourceIsValid(src));
        rl_test_unkeep(keep);
        RLRelease(src);
        if (addr)
            RLRelease(addr);
        if (listener) {
            RLSocketInvalidate(listener);
            RLRelease(listener);
        }
        if (client >= 0)
            close(client);
        if (sv[1] >= 0)
            close(sv[1]);
    }
}

static int released;
static const void *ctx_retain(const void *p) { return p; }
static void ctx_release(const void *p) { (void)p; released++; }

static void test_context_and_double_schedule(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketContext c = {0, "ctx", ctx_retain, ctx_release, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, cb, &c);
    assert_non_null(s);
    RLSocketContext got;
    assert_true(RLSocketGetContext(s, &got));
    assert_string_equal(got.info, "ctx");
    RLRunLoopSourceRef a = RLSocketCreateRunLoopSource(NULL, s, 0);
    RLRunLoopSourceRef b = RLSocketCreateRunLoopSource(NULL, s, 5);
    assert_ptr_equal(a, b); /* one source per socket */
    /* Adding it twice to the same mode is harmless: one callback. */
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), a, MODE));
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), a, MODE));
    assert_int_equal(write(sv[1], "z", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("ctx:data1");
    assert_int_equal(released, 0);
    assert_true(RLSocketInvalidate(s));
    assert_int_equal(released, 1);
    assert_true(RLSocketInvalidate(s));
    assert_int_equal(released, 1);
    RLRelease(a);
    RLRelease(b);
    assert_true(RLRelease(s));
    close(sv[1]);
}

static void test_misuse(void **state) {
    (void)state;
    /* Creation. */
    assert_rl_fails(RLSocketCreateWithNative(NULL, -1, 0, cb, NULL), kRLErrorInvalidArgument);
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_rl_fails(RLSocketCreateWithNative(NULL, p[0], 0, cb, NULL), kRLErrorSystem); /* not a socket */
    close(p[0]);
    close(p[1]);
    assert_rl_fails(RLSocketCreateWithNative(NULL, p[0], 0, cb, NULL), kRLErrorSystem); /* closed fd */
    assert_rl_fails(RLSocketCreate(NULL, 0, 0, 0, 0x10, cb, NULL), kRLErrorInvalidArgument);
    RLSocketContext bad = {1, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLSocketCreate(NULL, 0, 0, 0, 0, cb, &bad), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketCreate(NULL, 12345, 0, 0, 0, cb, NULL), kRLErrorSystem); /* no such family */

    /* NULL and foreign objects everywhere. */
    RLDataRef addr = loopback(1);
    assert_rl_fails(RLSocketIsValid(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketInvalidate(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLSocketGetNative(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketCopyAddress(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketCopyPeerAddress((RLSocketRef)addr), kRLErrorInvalidObject);
    assert_rl_fails(RLSocketEnableCallBacks(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketDisableCallBacks(NULL, 0), kRLErrorInvalidArgument);
    assert_int_equal(RLSocketGetSocketFlags(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketSetSocketFlags(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketGetContext(NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketCreateRunLoopSource(NULL, NULL, 0), kRLErrorInvalidArgument);
    assert_int_equal(RLSocketConnectToAddress(NULL, addr, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLSocketSendData(NULL, NULL, addr, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLSocketSetAddress(NULL, addr), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);

    RLSocketRef s = RLSocketCreate(NULL, PF_INET, SOCK_STREAM, 0, kRLSocketDataCallBack, cb, NULL);
    assert_non_null(s);
    assert_rl_fails(RLSocketGetContext(s, NULL), kRLErrorInvalidArgument);
    /* Invalid addresses. */
    RLDataRef shorty = RLDataCreate(NULL, (const uint8_t *)"x", 1);
    assert_int_equal(RLSocketConnectToAddress(s, NULL, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLSocketConnectToAddress(s, shorty, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLSocketConnectToAddress(s, (RLDataRef)s, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(RLSocketConnectToAddress(s, addr, NAN), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLSocketSetAddress(s, shorty), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLSocketSendData(s, shorty, addr, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLSocketSendData(s, NULL, NULL, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidArgument);
    /* Sending on an unconnected stream: an error, no SIGPIPE. */
    assert_int_equal(RLSocketSendData(s, NULL, shorty, 1), kRLSocketError);
    assert_rl_error(kRLErrorSystem);
    /* Callback types and flags the socket does not have. */
    assert_rl_fails(RLSocketEnableCallBacks(s, kRLSocketWriteCallBack), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketDisableCallBacks(s, 0x100), kRLErrorInvalidArgument);
    assert_rl_fails(RLSocketSetSocketFlags(s, 0x4000), kRLErrorInvalidArgument);
    assert_int_equal(RLSocketGetSocketFlags(s), kRLSocketAutomaticallyReenableDataCallBack | kRLSocketCloseOnInvalidate);

    /* After invalidation. */
    assert_true(RLSocketInvalidate(s));
    assert_false(RLSocketIsValid(s));
    assert_int_equal(RLSocketGetNative(s), -1);
    assert_rl_error(kRLErrorInvalidObject);
    assert_rl_fails(RLSocketCopyAddress(s), kRLErrorInvalidObject);
    assert_rl_fails(RLSocketEnableCallBacks(s, kRLSocketDataCallBack), kRLErrorInvalidObject);
    assert_rl_fails(RLSocketCreateRunLoopSource(NULL, s, 0), kRLErrorInvalidObject);
    assert_int_equal(RLSocketConnectToAddress(s, addr, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(RLSocketSendData(s, NULL, shorty, 1), kRLSocketError);
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(RLSocketSetAddress(s, addr), kRLSocketError);
    assert_rl_error(kRLErrorInvalidObject);
    assert_true(RLRelease(s));
    RLRelease(shorty);
    RLRelease(addr);
}

static void test_fd_closed_behind_the_socket_does_not_spin(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef s = make(sv[0], kRLSocketReadCallBack, "S");
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    close(sv[0]); /* misuse: closed without invalidating */
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunTimedOut);
    assert_trace("");
    assert_true(RLSocketSetSocketFlags(s, 0)); /* the number is not ours any more */
    done(s);
    rl_test_unkeep(keep);
    close(sv[1]);
}

static int accepts_closed;

static void accept_and_close_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data,
                                void *info) {
    (void)s, (void)address, (void)info;
    if (type == kRLSocketAcceptCallBack) {
        close(*(const int *)data);
        accepts_closed++;
    }
}

/* No descriptor left for accept (EMFILE): the pending connections stay
 * queued and the loop does not spin on a listener that stays readable; once
 * descriptors are free again, every pending connection is accepted. */
static void test_accept_without_free_descriptors_does_not_spin(void **state) {
    (void)state;
    RLSocketRef l = RLSocketCreate(NULL, PF_INET, SOCK_STREAM, IPPROTO_TCP, kRLSocketAcceptCallBack,
                                   accept_and_close_cb, NULL);
    assert_non_null(l);
    RLDataRef any = loopback(0);
    assert_int_equal(RLSocketSetAddress(l, any), kRLSocketSuccess);
    RLRelease(any);
    RLDataRef addr = RLSocketCopyAddress(l);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, l, 0);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    int clients[3];
    for (int i = 0; i < 3; i++) {
        clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(connect(clients[i], (const struct sockaddr *)RLDataGetBytePtr(addr),
                                 (socklen_t)RLDataGetLength(addr)), 0);
    }
    /* No free descriptor number below the soft limit from here on. */
    struct rlimit saved, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int lowest_free = dup(0);
    assert_true(lowest_free >= 0);
    close(lowest_free);
    low = saved;
    low.rlim_cur = (rlim_t)lowest_free;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    accepts_closed = 0;
    /* The first wake tries and fails; after it, the listener rests instead
     * of reporting the same readiness again at once. */
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    /* A spinning loop handles the listener on every run; a resting one
     * not at all (or once, if a very slow machine reached the retry). */
    int spins = 0;
    for (int i = 0; i < 5; i++)
        spins += RLRunLoopRunInMode(MODE, 0.01, true) == kRLRunLoopRunHandledSource;
    assert_int_equal(accepts_closed, 0);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    assert_in_range(spins, 0, 1);
    /* Descriptors free again: the three come in. (valgrind enforces the
     * limit itself: its accept takes the connection and closes it when the
     * number is over the limit, so there each failed try costs one.) */
    int expected = 3;
#ifdef RL_TEST_VALGRIND
    if (RUNNING_ON_VALGRIND)
        expected -= 1 + spins;
#endif
    double end = rl_test_now() + 10;
    while (accepts_closed < expected && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    assert_int_equal(accepts_closed, expected);
    for (int i = 0; i < 3; i++)
        close(clients[i]);
    rl_test_unkeep(keep);
    RLRelease(src);
    RLRelease(addr);
    done(l);
}

typedef struct race {
    RLSocketRef s;
    _Atomic int running;
    _Atomic long bytes;
} race;

static void race_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)type, (void)address;
    race *r = info;
    atomic_fetch_add(&r->bytes, RLDataGetLength(data));
}

static void *race_loop(void *p) {
    race *r = p;
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, r->s, 0);
    if (src) {
        RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE);
        RLRelease(src);
    }
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    atomic_store(&r->running, 1);
    while (atomic_load(&r->running) == 1)
        RLRunLoopRunInMode(MODE, 0.01, true);
    rl_test_unkeep(keep);
    return NULL;
}

/* Invalidated from another thread while the loop's thread reads: no
 * crash, no race, and the fd is closed once the loop is out of the
 * callback. */
static void test_invalidate_from_another_thread_while_reading(void **state) {
    (void)state;
    for (int round = 0; round < rl_test_iters(20); round++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        race r = {0};
        RLSocketContext c = {0, &r, NULL, NULL, NULL};
        r.s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, race_cb, &c);
        assert_non_null(r.s);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, race_loop, &r), 0);
        while (!atomic_load(&r.running))
            usleep(100);
        for (int i = 0; i < 200; i++)
            assert_int_equal(write(sv[1], "0123456789", 10), 10);
        assert_true(RLSocketInvalidate(r.s));
        atomic_store(&r.running, 2);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(fcntl(sv[0], F_GETFD), -1);
        assert_true(atomic_load(&r.bytes) <= 2000);
        assert_true(RLRelease(r.s));
        close(sv[1]);
    }
}

/* Invalidated from another thread while a callout runs: the context's
 * info is released once, after that callout returns (the callout was
 * handed info and may still use it), not under it. */
typedef struct pinned {
    RLSocketRef s;
    _Atomic int running;
    _Atomic int in_callout; /* 1: inside, 2: done */
    _Atomic int go;
    _Atomic int released;
    _Atomic int released_during; /* releases seen by the callout as it ends */
} pinned;

static void pinned_release(const void *info) { atomic_fetch_add(&((pinned *)info)->released, 1); }
static const void *pinned_retain(const void *info) { return info; }

static void pinned_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)type, (void)address, (void)data;
    pinned *p = info;
    if (atomic_load(&p->in_callout))
        return;
    atomic_store(&p->in_callout, 1);
    double t0 = rl_test_now();
    while (!atomic_load(&p->go) && rl_test_now() - t0 < 10)
        usleep(500);
    usleep(20000); /* an early release would have happened by now */
    atomic_store(&p->released_during, atomic_load(&p->released));
    atomic_store(&p->in_callout, 2);
}

static void *pinned_loop(void *arg) {
    pinned *p = arg;
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, p->s, 0);
    if (src) {
        RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE);
        RLRelease(src);
    }
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    atomic_store(&p->running, 1);
    while (atomic_load(&p->running) == 1)
        RLRunLoopRunInMode(MODE, 0.01, true);
    rl_test_unkeep(keep);
    return NULL;
}

static void test_context_released_after_a_running_callout(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pinned p;
    memset(&p, 0, sizeof p);
    RLSocketContext c = {0, &p, pinned_retain, pinned_release, NULL};
    p.s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, pinned_cb, &c);
    assert_non_null(p.s);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pinned_loop, &p), 0);
    while (!atomic_load(&p.running))
        usleep(100);
    assert_int_equal(write(sv[1], "x", 1), 1);
    double t0 = rl_test_now();
    while (atomic_load(&p.in_callout) != 1 && rl_test_now() - t0 < 10)
        usleep(100);
    assert_int_equal(atomic_load(&p.in_callout), 1);
    assert_true(RLSocketInvalidate(p.s));
    atomic_store(&p.go, 1);
    while (atomic_load(&p.in_callout) != 2 && rl_test_now() - t0 < 20)
        usleep(100);
    atomic_store(&p.running, 2);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&p.released_during), 0);
    assert_int_equal(atomic_load(&p.released), 1);
    assert_true(RLRelease(p.s));
    assert_int_equal(atomic_load(&p.released), 1);
    close(sv[1]);
}

/* ---- the lock order, checked by the lock-order detector ---- */

static atomic_int reports;
static void count_report(const RLLockDebugReport *rep, void *info) {
    (void)rep;
    (void)info;
    atomic_fetch_add(&reports, 1);
}

/* With the detector on, sockets in use report nothing; having seen them,
 * the detector reports a socket lock taken under a run loop's lock (the
 * order is socket, then loop: docs/locking.md). */
static void test_lock_order_is_checked(void **state) {
    bool was = RLLockDebugIsEnabled();
    RLLockDebugSetEnabled(true);
    RLLockDebugReset();
    atomic_store(&reports, 0);
    RLLockDebugSetReportHandler(count_report, NULL);
    test_connect_accept_and_echo(state);
    rl_trace_clear();
    test_flags_reenable_and_disable(state);
    assert_int_equal(atomic_load(&reports), 0);
#if RL_LOCKCLASS /* the library's own locks report in such a build only (rl_lockclass.h; make check-lockdep) */
    rl__loop_lock(RLRunLoopGetCurrent());
    rl__lockclass_take(RL_LOCKCLASS_SOCKET, NULL);
    rl__lockclass_drop(RL_LOCKCLASS_SOCKET);
    rl__loop_unlock(RLRunLoopGetCurrent());
    assert_int_equal(atomic_load(&reports), 1);
#endif
    RLLockDebugSetReportHandler(NULL, NULL);
    RLLockDebugReset();
    RLLockDebugSetEnabled(was);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_connect_accept_and_echo, rl_trace_setup),
        cmocka_unit_test_setup(test_data_reads_everything_queued_in_one_wake, rl_trace_setup),
        cmocka_unit_test_setup(test_data_chunks_per_wake_are_limited, rl_trace_setup),
        cmocka_unit_test_setup(test_data_chunks_stay_small_while_others_wait, rl_trace_setup),
        cmocka_unit_test_setup(test_data_out_of_memory_reads_nothing, rl_trace_setup),
        cmocka_unit_test_setup(test_kept_data_keeps_its_bytes, rl_trace_setup),
        cmocka_unit_test_setup(test_each_data_holds_exactly_its_read, rl_trace_setup),
        cmocka_unit_test_setup(test_kept_long_reads_hold_little_more_than_their_bytes, rl_trace_setup),
        cmocka_unit_test_setup(test_kept_data_survives_a_nested_read, rl_trace_setup),
        cmocka_unit_test_setup(test_data_callback_is_not_reentered_by_a_nested_run, rl_trace_setup),
        cmocka_unit_test_setup(test_data_chunks_stop_when_the_callback_says_so, rl_trace_setup),
        cmocka_unit_test_setup(test_data_chunk_per_enable_without_reenable_flag, rl_trace_setup),
        cmocka_unit_test_setup(test_accept_stops_when_the_source_is_removed, rl_trace_setup),
        cmocka_unit_test_setup(test_flags_reenable_and_disable, rl_trace_setup),
        cmocka_unit_test_setup(test_read_callback_and_final_read_at_end, rl_trace_setup),
        cmocka_unit_test_setup(test_accept_every_pending_connection_in_one_wake, rl_trace_setup),
        cmocka_unit_test_setup(test_background_connect_refused, rl_trace_setup),
        cmocka_unit_test_setup(test_connect_with_timeout_and_blocking, rl_trace_setup),
        cmocka_unit_test_setup(test_datagrams_with_sender_address, rl_trace_setup),
        cmocka_unit_test_setup(test_fd_number_above_1024, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_or_unschedule_inside_a_callback, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_and_release_inside_each_callback, rl_trace_setup),
        cmocka_unit_test_setup(test_context_and_double_schedule, rl_trace_setup),
        cmocka_unit_test_setup(test_misuse, rl_trace_setup),
        cmocka_unit_test_setup(test_fd_closed_behind_the_socket_does_not_spin, rl_trace_setup),
        cmocka_unit_test_setup(test_accept_without_free_descriptors_does_not_spin, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_from_another_thread_while_reading, rl_trace_setup),
        cmocka_unit_test_setup(test_context_released_after_a_running_callout, rl_trace_setup),
        cmocka_unit_test_setup(test_lock_order_is_checked, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
