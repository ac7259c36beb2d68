/* test_socket_coalesce.c — a loop whose pass read bulk chunks (4 KB or
 * more) from two or more sockets sleeps a little before it waits again, so
 * the next reads are bigger (RL_TRICK_COALESCE, rl_waitpolicy.h). When it
 * does and when it does not, and that nothing is lost or held for long
 * meanwhile: every byte of every stream arrives once and in order, and a
 * signalled source, a wake-up and a timer that come during the sleeps are
 * served; a wake-up, a timer and a run's deadline end a sleep made long on
 * purpose. Sockets whose Read callbacks read for themselves count too:
 * the loop looks at what waits before the callback, at every callout of
 * a socket in bulk and at one in 16 otherwise. With the trick off
 * (PLAIN=1) the loop never sleeps nor looks: the tests check that too. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"      /* RL_TRICK_COALESCE */
#include "rl_waitpolicy.h" /* RL_BULK_READ */

RL__HIDDEN unsigned long rl__loop_coalesced_waits(RLRunLoopRef rl);
RL__HIDDEN extern _Atomic long long rl__coalesce_ns_for_tests;

#define MODE "COALESCE"
enum { NSOCK = 4 };

/* One stream: what its callback got, and whether it came in order (byte i
 * of a stream is (i * 7 + stream) & 0xff). */
typedef struct {
    int sv[2];
    RLSocketRef sock;
    RLRunLoopSourceRef src;
    int index;
    _Atomic size_t got;
    _Atomic bool out_of_order;
} stream;

static stream streams[NSOCK];

static uint8_t byte_at(size_t i, int s) { return (uint8_t)(i * 7 + (size_t)s); }

static void data_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)address;
    stream *st = info;
    if (type != kRLSocketDataCallBack)
        return;
    size_t n = (size_t)RLDataGetLength(data), at = atomic_load(&st->got);
    const uint8_t *p = RLDataGetBytePtr(data);
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte_at(at + i, st->index))
            atomic_store(&st->out_of_order, true);
    atomic_store(&st->got, at + n);
}

/* Each test starts with the nap untried, as on a new loop: what the naps
 * did is the loop's own state (rl__nap), kept from test to test. */
static void forget_naps(void) { memset(&RLRunLoopGetCurrent()->nap, 0, sizeof(rl__nap)); }

static void open_streams_typed(int count, RLOptionFlags types, RLSocketCallBack cb) {
    forget_naps();
    for (int i = 0; i < count; i++) {
        stream *st = &streams[i];
        memset(st, 0, sizeof *st);
        st->index = i;
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, st->sv), 0);
        RLSocketContext ctx = {0, st, NULL, NULL, NULL};
        st->sock = RLSocketCreateWithNative(NULL, st->sv[0], types, cb, &ctx);
        assert_non_null(st->sock);
        st->src = RLSocketCreateRunLoopSource(NULL, st->sock, 0);
        assert_non_null(st->src);
        assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), st->src, MODE));
    }
}

static void open_streams_with(int count, RLSocketCallBack cb) { open_streams_typed(count, kRLSocketDataCallBack, cb); }

static void open_streams(int count) { open_streams_with(count, data_cb); }

static void close_streams(int count) {
    for (int i = 0; i < count; i++) {
        stream *st = &streams[i];
        RLRunLoopSourceInvalidate(st->src);
        RLRelease(st->src);
        RLSocketInvalidate(st->sock);
        RLRelease(st->sock);
        close(st->sv[1]);
    }
}

/* Writes n bytes of stream s's pattern, from byte `from` on. */
static void put(int s, size_t from, size_t n) {
    uint8_t buf[16384];
    while (n > 0) {
        size_t c = n < sizeof buf ? n : sizeof buf;
        for (size_t i = 0; i < c; i++)
            buf[i] = byte_at(from + i, s);
        ssize_t w = write(streams[s].sv[1], buf, c);
        if (w < 0 && errno == EINTR)
            continue;
        assert_true(w > 0);
        from += (size_t)w;
        n -= (size_t)w;
    }
}

/* Runs MODE until every one of `count` streams got n bytes (at most 10 s),
 * then a little more (a wait after the last reads). */
static void run_until_all_got(int count, size_t n) {
    double end = rl_test_now() + 10;
    for (;;) {
        int done = 0;
        for (int i = 0; i < count; i++)
            done += atomic_load(&streams[i].got) >= n;
        if (done == count || rl_test_now() > end)
            break;
        RLRunLoopRunInMode(MODE, 0.05, false);
    }
    for (int i = 0; i < count; i++) {
        assert_int_equal(atomic_load(&streams[i].got), n);
        assert_false(atomic_load(&streams[i].out_of_order));
    }
}

/* `rounds` rounds of a short message of `small` bytes on each stream from
 * `first` on, each round run until every one of them got its message (a
 * request and response exchange); all arrive, once and in order. */
static void exchange_short_messages(int first, int rounds, size_t small) {
    for (int round = 0; round < rounds; round++) {
        for (int s = first; s < NSOCK; s++)
            put(s, (size_t)round * small, small);
        double end = rl_test_now() + 10;
        for (int s = first; s < NSOCK; s++)
            while (atomic_load(&streams[s].got) < (size_t)(round + 1) * small && rl_test_now() < end)
                RLRunLoopRunInMode(MODE, 0.05, true);
    }
    for (int s = first; s < NSOCK; s++) {
        assert_int_equal(atomic_load(&streams[s].got), (size_t)rounds * small);
        assert_false(atomic_load(&streams[s].out_of_order));
    }
}

/* Bulk chunks waiting on two sockets at once: the pass that reads them is
 * followed by a coalesced wait. */
static void test_bulk_reads_from_two_sockets_coalesce(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    open_streams(2);
    unsigned long before = rl__loop_coalesced_waits(rl);
    for (int round = 0; round < 5; round++) {
        put(0, (size_t)round * 8192, 8192);
        put(1, (size_t)round * 8192, 8192);
        run_until_all_got(2, (size_t)(round + 1) * 8192);
    }
    unsigned long coalesced = rl__loop_coalesced_waits(rl) - before;
    if (RL_TRICK_COALESCE)
        assert_true(coalesced >= 1);
    else
        assert_int_equal(coalesced, 0);
    close_streams(2);
}

/* Socket streams whose clients read bulk chunks in their callbacks count
 * as RLSockets do; reads outside a run do not count. */
static _Atomic size_t stream_got[2];

static void stream_cb(RLReadStreamRef stream, RLStreamEventType type, void *info) {
    if (type != kRLStreamEventHasBytesAvailable)
        return;
    int i = (int)(intptr_t)info;
    uint8_t buf[65536];
    RLIndex n = RLReadStreamRead(stream, buf, sizeof buf);
    if (n > 0)
        atomic_fetch_add(&stream_got[i], (size_t)n);
}

static void test_bulk_reads_from_two_socket_streams_coalesce(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int sv[2][2];
    RLReadStreamRef rs[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        assert_true(RLStreamCreatePairWithSocket(NULL, sv[i][0], &rs[i], NULL));
        RLStreamClientContext ctx = {0, (void *)(intptr_t)i, NULL, NULL, NULL};
        assert_true(RLReadStreamSetClient(rs[i], kRLStreamEventHasBytesAvailable, stream_cb, &ctx));
        assert_true(RLReadStreamScheduleWithRunLoop(rs[i], rl, MODE));
        assert_true(RLReadStreamOpen(rs[i]));
        stream_got[i] = 0;
    }
    /* Bulk reads from both outside any run: the next run's wait does not
     * coalesce for them. */
    uint8_t chunk[8192];
    memset(chunk, 'x', sizeof chunk);
    uint8_t buf[16384];
    forget_naps();
    unsigned long before = rl__loop_coalesced_waits(rl);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(write(sv[i][1], chunk, sizeof chunk), (ssize_t)sizeof chunk);
        assert_int_equal(RLReadStreamRead(rs[i], buf, sizeof buf), (RLIndex)sizeof chunk);
    }
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.01, false), kRLRunLoopRunTimedOut);
    assert_int_equal(rl__loop_coalesced_waits(rl), before);
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 2; i++)
            assert_int_equal(write(sv[i][1], chunk, sizeof chunk), (ssize_t)sizeof chunk);
        double end = rl_test_now() + 10;
        while ((stream_got[0] < (size_t)(round + 1) * sizeof chunk ||
                stream_got[1] < (size_t)(round + 1) * sizeof chunk) &&
               rl_test_now() < end)
            RLRunLoopRunInMode(MODE, 0.05, false);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(stream_got[i], 5 * sizeof chunk);
    unsigned long coalesced = rl__loop_coalesced_waits(rl) - before;
    if (RL_TRICK_COALESCE)
        assert_true(coalesced >= 1);
    else
        assert_int_equal(coalesced, 0);
    for (int i = 0; i < 2; i++) {
        RLReadStreamUnscheduleFromRunLoop(rs[i], rl, MODE);
        RLReadStreamClose(rs[i]);
        RLRelease(rs[i]);
        close(sv[i][0]);
        close(sv[i][1]);
    }
}

/* One socket, however much it brings (several chunks in one callout), or
 * short messages on many: the loop waits at once. */
static void test_one_stream_or_short_messages_never_coalesce(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    open_streams(NSOCK);
    unsigned long before = rl__loop_coalesced_waits(rl);
    for (int round = 0; round < 4; round++) {
        put(0, (size_t)round * 200000, 200000);
        run_until_all_got(1, (size_t)(round + 1) * 200000);
    }
    exchange_short_messages(1, 20, RL_BULK_READ / 8);
    assert_int_equal(rl__loop_coalesced_waits(rl) - before, 0);
    close_streams(NSOCK);
}

/* Streams that keep arriving while other threads signal a source, wake
 * the loop and set a timer: all served, every byte once and in order. */
static struct {
    _Atomic bool quit;
    _Atomic int served;
    _Atomic int fired;
    RLRunLoopRef loop;
    RLRunLoopSourceRef signalled;
    size_t per_stream;
} busy;

static void *writer(void *arg) {
    int s = (int)(intptr_t)arg;
    for (size_t at = 0; at < busy.per_stream; at += 16384)
        put(s, at, 16384);
    return NULL;
}

static void served_perform(void *info) {
    (void)info;
    atomic_fetch_add(&busy.served, 1);
}

static void *signaller(void *arg) {
    (void)arg;
    for (int i = 0; i < 200 && !atomic_load(&busy.quit); i++) {
        RLRunLoopSourceSignal(busy.signalled);
        RLRunLoopWakeUp(busy.loop);
        double end = rl_test_now() + 10;
        while (atomic_load(&busy.served) <= i && rl_test_now() < end)
            usleep(100);
    }
    return NULL;
}

static void timer_fired(RLRunLoopTimerRef t, void *info) {
    (void)t, (void)info;
    atomic_fetch_add(&busy.fired, 1);
}

static void test_sources_wakeups_and_timers_are_served_while_coalescing(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    open_streams(NSOCK);
    busy.quit = false;
    busy.served = busy.fired = 0;
    busy.loop = rl;
    busy.per_stream = (size_t)rl_test_iters(512) * 16384;
    RLRunLoopSourceContext sctx = {.perform = served_perform};
    busy.signalled = RLRunLoopSourceCreate(NULL, 0, &sctx);
    assert_non_null(busy.signalled);
    assert_true(RLRunLoopAddSource(rl, busy.signalled, MODE));
    RLRunLoopTimerRef timer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.02, 0.02, 0, 0, timer_fired, NULL);
    assert_non_null(timer);
    assert_true(RLRunLoopAddTimer(rl, timer, MODE));
    unsigned long before = rl__loop_coalesced_waits(rl);

    pthread_t writers[NSOCK], sig;
    for (int s = 0; s < NSOCK; s++)
        assert_int_equal(pthread_create(&writers[s], NULL, writer, (void *)(intptr_t)s), 0);
    assert_int_equal(pthread_create(&sig, NULL, signaller, NULL), 0);
    run_until_all_got(NSOCK, busy.per_stream);
    double end = rl_test_now() + 10;
    while (atomic_load(&busy.served) < 200 && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, false);
    atomic_store(&busy.quit, true);
    for (int s = 0; s < NSOCK; s++)
        pthread_join(writers[s], NULL);
    pthread_join(sig, NULL);

    assert_int_equal(atomic_load(&busy.served), 200);
    assert_true(atomic_load(&busy.fired) >= 1);
    if (!RL_TRICK_COALESCE)
        assert_int_equal(rl__loop_coalesced_waits(rl) - before, 0);
    else
        printf("# %lu coalesced waits, %d timer fires\n", rl__loop_coalesced_waits(rl) - before,
               atomic_load(&busy.fired));
    RLRunLoopTimerInvalidate(timer);
    RLRelease(timer);
    RLRunLoopSourceInvalidate(busy.signalled);
    RLRelease(busy.signalled);
    close_streams(NSOCK);
}

/* A short run's deadline ends it even while the streams keep the loop
 * coalescing (the sleep never passes it). */
static void test_a_run_deadline_ends_a_coalescing_run(void **state) {
    (void)state;
    open_streams(2);
    busy.per_stream = (size_t)rl_test_iters(256) * 16384;
    pthread_t writers[2];
    for (int s = 0; s < 2; s++)
        assert_int_equal(pthread_create(&writers[s], NULL, writer, (void *)(intptr_t)s), 0);
    int timed_out = 0;
    for (int i = 0; i < 20; i++)
        timed_out += RLRunLoopRunInMode(MODE, 0.001, false) == kRLRunLoopRunTimedOut;
    assert_int_equal(timed_out, 20);
    run_until_all_got(2, busy.per_stream);
    for (int s = 0; s < 2; s++)
        pthread_join(writers[s], NULL);
    close_streams(2);
}

/* Peers that each wait for their chunk to come back before they send the
 * next (an echo with one write in flight per connection): everything they
 * will send is there by the time the loop would nap, so naps bring no
 * bigger reads, and the loop stops napping after a few tries (its backoff
 * doubles: 4, 8, 16 ... bulk passes without a nap between tries). Here the
 * peer is the callback: once every stream got its round's 4 KB, it sends
 * the next round's on each, so that every pass reads one chunk from each
 * stream. */
enum { WINDOW_ROUNDS = 400, WINDOW = RL_BULK_READ };
static int window_round;

static void window_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    data_cb(s, type, address, data, info);
    for (int i = 0; i < 2; i++)
        if (atomic_load(&streams[i].got) < (size_t)(window_round + 1) * WINDOW)
            return;
    if (++window_round < WINDOW_ROUNDS)
        for (int i = 0; i < 2; i++)
            put(i, (size_t)window_round * WINDOW, WINDOW);
}

static void test_naps_that_bring_no_bigger_reads_stop(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    open_streams_with(2, window_cb);
    window_round = 0;
    unsigned long before = rl__loop_coalesced_waits(rl);
    put(0, 0, WINDOW);
    put(1, 0, WINDOW);
    run_until_all_got(2, (size_t)WINDOW_ROUNDS * WINDOW);
    unsigned long coalesced = rl__loop_coalesced_waits(rl) - before;
    printf("# %lu coalesced waits in %d rounds\n", coalesced, WINDOW_ROUNDS);
    if (RL_TRICK_COALESCE) {
        /* Tries after 0, 4, 8, 16, 32, 64, 128 and 256 passes without: 8
         * in 400 rounds, were every pass a bulk one; fewer if not. */
        assert_true(coalesced >= 1);
        assert_true(coalesced <= 12);
    } else {
        assert_int_equal(coalesced, 0);
    }
    close_streams(2);
}

/* ---- Read callbacks: the callback reads, the loop looks ----------------- */

RL__HIDDEN extern _Atomic unsigned long rl__socket_read_probes;

static _Atomic unsigned long read_callouts;
static size_t read_max; /* the most a Read callback reads in one call */

/* The other CFSocket style: the callback reads (once, up to read_max). */
static void read_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address, (void)data;
    stream *st = info;
    if (type != kRLSocketReadCallBack)
        return;
    atomic_fetch_add(&read_callouts, 1);
    uint8_t buf[65536];
    size_t want = read_max < sizeof buf ? read_max : sizeof buf;
    ssize_t n = recv(RLSocketGetNative(s), buf, want, MSG_DONTWAIT);
    if (n <= 0)
        return;
    size_t at = atomic_load(&st->got);
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] != byte_at(at + (size_t)i, st->index))
            atomic_store(&st->out_of_order, true);
    atomic_store(&st->got, at + (size_t)n);
}

/* What bulk on `count` Read-callback streams brought: READ_ROUNDS rounds
 * of READ_EACH bytes on each, the callbacks reading 16 KB at a time, every
 * byte arriving once and in order (the streams are closed after). */
enum { READ_ROUNDS = 40, READ_EACH = 48 * 1024 };
typedef struct {
    unsigned long callouts, probes, coalesced;
} read_bulk_result;

static read_bulk_result read_bulk_rounds(int count) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    open_streams_typed(count, kRLSocketReadCallBack, read_cb);
    read_max = 16384;
    unsigned long before = rl__loop_coalesced_waits(rl), probes0 = atomic_load(&rl__socket_read_probes);
    atomic_store(&read_callouts, 0);
    for (int round = 0; round < READ_ROUNDS; round++) {
        for (int s = 0; s < count; s++)
            put(s, (size_t)round * READ_EACH, READ_EACH);
        run_until_all_got(count, (size_t)(round + 1) * READ_EACH);
    }
    read_bulk_result r = {atomic_load(&read_callouts), atomic_load(&rl__socket_read_probes) - probes0,
                          rl__loop_coalesced_waits(rl) - before};
    printf("# %d streams: %lu Read callouts, %lu looks, %lu coalesced waits\n", count, r.callouts, r.probes,
           r.coalesced);
    assert_true(r.callouts >= (unsigned long)count * READ_ROUNDS * (READ_EACH / 16384));
    close_streams(count);
    return r;
}

/* Streams read by their Read callbacks, in bulk on two sockets: the loop
 * looks at what waits before each callback and naps as for Data
 * callbacks. */
static void test_read_callbacks_that_read_bulk_coalesce(void **state) {
    (void)state;
    read_bulk_result r = read_bulk_rounds(2);
    if (RL_TRICK_COALESCE) {
        assert_true(r.coalesced >= 1);
        /* Once a look found bulk, each callout looks: all but the few
         * before each socket's first look, and the last of each round's
         * (nothing left: the next look waits its turn). */
        assert_true(r.probes >= r.callouts / 2);
    } else {
        assert_int_equal(r.coalesced, 0);
        assert_int_equal(r.probes, 0);
    }
}

/* One Read-callback stream in bulk, alone in the loop: its callouts are
 * each their pass's only one, so no look can make the loop nap (one stream
 * never does), and it is looked at as a socket not in bulk, at one Read
 * callout in 16 (before, once a look had found bulk, at every callout: a
 * system call per callback for nothing). */
static void test_a_lone_read_callback_stream_in_bulk_looks_rarely(void **state) {
    (void)state;
    read_bulk_result r = read_bulk_rounds(1);
    if (RL_TRICK_COALESCE) {
        assert_true(r.probes + 1 >= r.callouts / 16);
        assert_true(r.probes <= r.callouts / 16 + 1);
    } else {
        assert_int_equal(r.probes, 0);
    }
    assert_int_equal(r.coalesced, 0);
}

/* Short messages on Read-callback sockets (a request and response
 * exchange): the loop looks at one Read callout in RL_READ_PROBE_EVERY
 * (16) only, and never naps. */
static void test_read_callbacks_of_short_messages_look_rarely(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    open_streams_typed(NSOCK, kRLSocketReadCallBack, read_cb);
    read_max = 65536;
    unsigned long before = rl__loop_coalesced_waits(rl), probes0 = atomic_load(&rl__socket_read_probes);
    atomic_store(&read_callouts, 0);
    enum { ROUNDS = 100 };
    exchange_short_messages(0, ROUNDS, 64);
    unsigned long probes = atomic_load(&rl__socket_read_probes) - probes0, callouts = atomic_load(&read_callouts);
    printf("# %lu Read callouts, %lu looks\n", callouts, probes);
    assert_true(callouts >= (unsigned long)NSOCK * ROUNDS);
    if (RL_TRICK_COALESCE) {
        assert_true(probes >= callouts / 16 - 1);
        assert_true(probes <= callouts / 16 + 1);
    } else {
        assert_int_equal(probes, 0);
    }
    assert_int_equal(rl__loop_coalesced_waits(rl) - before, 0);
    close_streams(NSOCK);
}

/* The policy itself, on made-up passes (rl__coalesce_due): two sockets
 * read in bulk each pass, `per` bytes from each after a plain wait and
 * `napped` after a nap. Returns how many of `passes` napped; `trace`
 * (if not NULL) gets a 1 or 0 per pass. */
static int drive_policy(RLRunLoopRef rl, int passes, uint64_t per, uint64_t napped, char *trace) {
    int naps = 0;
    for (int i = 0; i < passes; i++) {
        rl->pass_bulk = 2;
        rl->pass_bulk_bytes = 2 * (rl->nap.last ? napped : per);
        bool nap = rl__coalesce_due(rl);
        naps += nap;
        if (trace)
            trace[i] = nap ? '1' : '0';
        rl->pass_bulk = 0;
        rl->pass_bulk_bytes = 0;
    }
    if (trace)
        trace[passes] = 0;
    return naps;
}

static void test_the_nap_policy_backs_off_and_keeps_what_pays(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    rl__loop_lock(rl);
    if (!RL_TRICK_COALESCE) { /* PLAIN=1: never a nap, even one that pays */
        forget_naps();
        assert_int_equal(drive_policy(rl, 100, 8192, 32768, NULL), 0);
        rl__loop_unlock(rl);
        return;
    }
    /* No gain: a try, then 4 passes without, a try, 8 without, a try ... */
    forget_naps();
    char trace[256];
    drive_policy(rl, 30, 4096, 4096, trace);
    assert_string_equal(trace, "100000100000000010000000000000");
    /* A gain of 5/4 or more: naps go on, but one pass in 64 measures the
     * plain wait again. */
    forget_naps();
    assert_int_equal(drive_policy(rl, 200, 8192, 10240, NULL), 200 - 3);
    /* A gain under 5/4: no better than none. */
    forget_naps();
    drive_policy(rl, 30, 8192, 10239, trace);
    assert_string_equal(trace, "100000100000000010000000000000");
    /* The traffic changes: naps that paid stop paying, and the loop stops
     * napping once the running mean after naps falls under 5/4 of the
     * plain one (8 more naps here), then tries at the backoff's pace;
     * then they pay again, and the loop takes them up at its next try
     * (71 passes on here). */
    forget_naps();
    drive_policy(rl, 100, 8192, 32768, NULL);
    int naps = drive_policy(rl, 200, 8192, 8192, NULL);
    printf("# naps: %d of 200 once they stopped paying\n", naps);
    assert_true(naps >= 9 && naps <= 16);
    naps = drive_policy(rl, 300, 8192, 32768, NULL);
    printf("# naps: %d of 300 once they paid again\n", naps);
    assert_true(naps >= 200);
    /* A wake-up pending: no nap, whatever the history. */
    forget_naps();
    atomic_store(&rl->wake_pending, 1);
    assert_int_equal(drive_policy(rl, 10, 8192, 32768, NULL), 0);
    atomic_store(&rl->wake_pending, 0);
    /* One socket, or none in bulk: no nap and no sample. */
    forget_naps();
    rl->pass_bulk = 1;
    rl->pass_bulk_bytes = 5 * 65536;
    assert_false(rl__coalesce_due(rl));
    assert_int_equal(rl->nap.plain, 0);
    rl->pass_bulk = 0;
    rl->pass_bulk_bytes = 0;
    forget_naps();
    rl__loop_unlock(rl);
}

/* The sleep made 5 s long: what must end it does so long before. */
enum { LONG_SLEEP_NS = 5000000000LL };
#define WELL_BEFORE 2.5

static struct {
    RLRunLoopRef loop;
    RLRunLoopSourceRef src;
    unsigned long before;
    double woke_at, served_at;
} cw;

static void cw_perform(void *info) {
    (void)info;
    cw.served_at = rl_test_now();
    RLRunLoopStop(RLRunLoopGetCurrent());
}

/* Returns once the loop is in its coalescing sleep (or, with the trick
 * off, a moment after the data went out), noting the time in cw.woke_at. */
static void wait_until_in_the_sleep(void) {
    double end = rl_test_now() + 10;
    if (RL_TRICK_COALESCE)
        while (rl__loop_coalesced_waits(cw.loop) == cw.before && rl_test_now() < end)
            usleep(1000);
    usleep(20000);
    cw.woke_at = rl_test_now();
}

/* Then signals the source and wakes the loop. */
static void *cw_waker(void *arg) {
    (void)arg;
    wait_until_in_the_sleep();
    RLRunLoopSourceSignal(cw.src);
    RLRunLoopWakeUp(cw.loop);
    return NULL;
}

/* Two bulk streams make the loop coalesce, with the sleep 5 s long. */
static void start_long_sleep(void) {
    open_streams(2);
    atomic_store(&rl__coalesce_ns_for_tests, LONG_SLEEP_NS);
    cw.loop = RLRunLoopGetCurrent();
    cw.before = rl__loop_coalesced_waits(cw.loop);
    put(0, 0, 8192);
    put(1, 0, 8192);
}

static void end_long_sleep(void) {
    atomic_store(&rl__coalesce_ns_for_tests, 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(atomic_load(&streams[i].got), 8192);
        assert_false(atomic_load(&streams[i].out_of_order));
    }
    if (RL_TRICK_COALESCE)
        assert_true(rl__loop_coalesced_waits(cw.loop) > cw.before);
    else
        assert_int_equal(rl__loop_coalesced_waits(cw.loop), cw.before);
    close_streams(2);
}

static void test_a_wakeup_ends_the_coalescing_sleep(void **state) {
    (void)state;
    start_long_sleep();
    RLRunLoopSourceContext sctx = {.perform = cw_perform};
    cw.src = RLRunLoopSourceCreate(NULL, 0, &sctx);
    assert_non_null(cw.src);
    assert_true(RLRunLoopAddSource(cw.loop, cw.src, MODE));
    cw.served_at = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cw_waker, NULL), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 20, false), kRLRunLoopRunStopped);
    pthread_join(t, NULL);
    assert_true(cw.served_at >= cw.woke_at);
    assert_true(cw.served_at - cw.woke_at < WELL_BEFORE);
    RLRunLoopSourceInvalidate(cw.src);
    RLRelease(cw.src);
    end_long_sleep();
}

static void stop_timer(RLRunLoopTimerRef t, void *info) {
    (void)t, (void)info;
    cw.served_at = rl_test_now();
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void test_a_timer_or_the_deadline_ends_the_coalescing_sleep(void **state) {
    (void)state;
    start_long_sleep();
    double start = rl_test_now();
    RLRunLoopTimerRef timer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.1, 0, 0, 0, stop_timer, NULL);
    assert_non_null(timer);
    assert_true(RLRunLoopAddTimer(cw.loop, timer, MODE));
    assert_int_equal(RLRunLoopRunInMode(MODE, 20, false), kRLRunLoopRunStopped);
    assert_true(cw.served_at - start < WELL_BEFORE);
    RLRunLoopTimerInvalidate(timer);
    RLRelease(timer);
    /* More bulk data on both: the next run's 0.1 s deadline ends it. */
    put(0, 8192, 8192);
    put(1, 8192, 8192);
    start = rl_test_now();
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.1, false), kRLRunLoopRunTimedOut);
    assert_true(rl_test_now() - start < WELL_BEFORE);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(atomic_load(&streams[i].got), 16384);
        atomic_store(&streams[i].got, 8192); /* as end_long_sleep expects */
    }
    end_long_sleep();
}

/* A timer another thread adds while the loop is in its (5 s) coalescing
 * sleep, due in 50 ms: it ends the sleep and fires long before. */
static RLRunLoopTimerRef added_timer;

static void *add_timer_when_coalescing(void *arg) {
    (void)arg;
    wait_until_in_the_sleep();
    added_timer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.05, 0, 0, 0, stop_timer, NULL);
    assert_non_null(added_timer);
    assert_true(RLRunLoopAddTimer(cw.loop, added_timer, MODE));
    return NULL;
}

static void test_a_timer_added_from_another_thread_ends_the_coalescing_sleep(void **state) {
    (void)state;
    start_long_sleep();
    cw.served_at = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, add_timer_when_coalescing, NULL), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 20, false), kRLRunLoopRunStopped);
    pthread_join(t, NULL);
    assert_true(cw.served_at >= cw.woke_at);
    assert_true(cw.served_at - cw.woke_at < WELL_BEFORE);
    RLRunLoopTimerInvalidate(added_timer);
    RLRelease(added_timer);
    end_long_sleep();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bulk_reads_from_two_sockets_coalesce),
        cmocka_unit_test(test_bulk_reads_from_two_socket_streams_coalesce),
        cmocka_unit_test(test_one_stream_or_short_messages_never_coalesce),
        cmocka_unit_test(test_sources_wakeups_and_timers_are_served_while_coalescing),
        cmocka_unit_test(test_a_run_deadline_ends_a_coalescing_run),
        cmocka_unit_test(test_naps_that_bring_no_bigger_reads_stop),
        cmocka_unit_test(test_the_nap_policy_backs_off_and_keeps_what_pays),
        cmocka_unit_test(test_read_callbacks_that_read_bulk_coalesce),
        cmocka_unit_test(test_a_lone_read_callback_stream_in_bulk_looks_rarely),
        cmocka_unit_test(test_read_callbacks_of_short_messages_look_rarely),
        cmocka_unit_test(test_a_wakeup_ends_the_coalescing_sleep),
        cmocka_unit_test(test_a_timer_or_the_deadline_ends_the_coalescing_sleep),
        cmocka_unit_test(test_a_timer_added_from_another_thread_ends_the_coalescing_sleep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
