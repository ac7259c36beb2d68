/* test_socket_ring.c — a Data stream read through its loop's ring (the
 * io_uring backend: receives into the loop's provided buffers, queued in
 * the socket's read-ahead queue) behaves as one read with recv (epoll):
 * bursts larger than a buffer, one receive across many callouts, more
 * streams at once than there are
 * buffers, the end, a reset, a socket invalidated while a receive is in
 * flight, a callback disabled with bytes read ahead, a kernel without
 * buffer rings, a fork. Every test runs on both backends (`make check-c`,
 * `make check-uring`); on io_uring each also checks that the ring did the
 * reading. */
#include "testutil.h"
#include "trace.h"

#include <crunloop/RLRunLoop.h>
#include <crunloop/RLSocket.h>
#include <crunloop/RLData.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "RLBase.h" /* rl__faults */
#include "rl_rxq.h"
#include "rl_poll_backend.h"
#include "RLRunLoopMode.h" /* the loop's kernel objects (rl->kern) */

RL__HIDDEN extern _Atomic unsigned long rl__socket_ring_reads;
RL__HIDDEN extern _Atomic bool rl__counting; /* set for every test program (support/testutil.c) */
RL__HIDDEN extern _Atomic unsigned long rl__socket_ring_copies;
#if !RL_PLAIN
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_nobufs; /* receives without a buffer free */
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_grown;  /* rings resized to grow */
#endif

#define MODE "RING"

/* What one socket got. */
typedef struct got {
    char *bytes;
    size_t len, cap;
    int calls, ends; /* Data callbacks; empty ones (the end, an error) */
    bool disable_each; /* disables its Data callback after each call */
} got;

static void data_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address;
    got *g = info;
    if (type != kRLSocketDataCallBack)
        return;
    size_t n = (size_t)RLDataGetLength(data);
    g->calls++;
    if (n == 0)
        g->ends++;
    if (g->len + n > g->cap) {
        g->cap = (g->len + n) * 2;
        g->bytes = realloc(g->bytes, g->cap);
        assert_non_null(g->bytes);
    }
    memcpy(g->bytes + g->len, RLDataGetBytePtr(data), n);
    g->len += n;
    if (g->disable_each)
        assert_true(RLSocketDisableCallBacks(s, kRLSocketDataCallBack));
}

static RLSocketRef make(int fd, got *g, RLOptionFlags flags) {
    RLSocketContext c = {0, g, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, fd, kRLSocketDataCallBack, data_cb, &c);
    assert_non_null(s);
    if (flags != (RLOptionFlags)-1)
        assert_true(RLSocketSetSocketFlags(s, flags));
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    return s;
}

static bool on_ring(void) {
    const char *b = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    return b && strcmp(b, "io_uring") == 0;
}

static void pattern(char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (char)('a' + (i * 7 + seed) % 26);
}

/* Runs until g has `len` bytes (and `ends` ends), at most 10 s. */
static void run_for(got *const *g, size_t ng, size_t len, int ends) {
    double end = rl_test_now() + 10;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < ng; i++)
            all = all && g[i]->len >= len && g[i]->ends >= ends;
        if (all || rl_test_now() > end)
            break;
        RLRunLoopRunInMode(MODE, 0.05, true);
    }
}

static void big_pair(int sv[2]) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int big = 1 << 20;
    assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big), 0);
}

/* One delivery, so that the socket's next arming is a receive. */
static void warm(RLSocketRef s, int peer, got *g) {
    (void)s;
    size_t before = g->len;
    assert_int_equal(write(peer, "w", 1), 1);
    got *one[] = {g};
    run_for(one, 1, before + 1, 0);
    assert_int_equal(g->len, before + 1);
}

/* A stream pair with the big send buffer, its socket in this loop, warmed:
 * its next arming reads through the ring (on io_uring). */
static RLSocketRef warm_pair(int sv[2], got *g) {
    big_pair(sv);
    RLSocketRef s = make(sv[0], g, (RLOptionFlags)-1);
    warm(s, sv[1], g);
    return s;
}

/* `count` 64-byte messages from the peer, one at a time (the seed's
 * patterns), each delivered whole and in order before the next goes. */
static void exchange_messages(int peer, got *g, int count, unsigned seed) {
    got *one[] = {g};
    char msg[64];
    for (int i = 0; i < count; i++) {
        pattern(msg, sizeof msg, (unsigned)i + seed);
        size_t at = g->len;
        assert_int_equal(write(peer, msg, sizeof msg), (ssize_t)sizeof msg);
        run_for(one, 1, at + sizeof msg, 0);
        assert_int_equal(g->len, at + sizeof msg);
        assert_memory_equal(g->bytes + at, msg, sizeof msg);
    }
}

static void done(RLSocketRef s, got *g) {
    assert_true(RLSocketInvalidate(s));
    RLRelease(s);
    free(g->bytes);
    memset(g, 0, sizeof *g);
}

/* 200 KB written at once: more than one provided buffer; all of it, in
 * order, whatever the chunks. */
static void test_burst_larger_than_a_buffer(void **state) {
    (void)state;
    int sv[2];
    got g = {0};
    RLSocketRef s = warm_pair(sv, &g);
    unsigned long ring_before = atomic_load(&rl__socket_ring_reads);
    enum { N = 200000 };
    static char out[N];
    pattern(out, N, 1);
    assert_int_equal(write(sv[1], out, N), N);
    got *one[] = {&g};
    run_for(one, 1, 1 + N, 0);
    assert_int_equal(g.len, 1 + N);
    assert_memory_equal(g.bytes + 1, out, N);
    if (on_ring())
        assert_true(atomic_load(&rl__socket_ring_reads) > ring_before);
    close(sv[1]);
    done(s, &g);
}

/* The test-only counters move only while counting is on (in use it is
 * off: a delivery writes no counter the loops of other threads share);
 * the bytes come the same either way. */
static void test_counters_count_only_when_asked(void **state) {
    (void)state;
    int sv[2];
    got g = {0};
    RLSocketRef s = warm_pair(sv, &g);
    enum { M = 64, K = 10 };
    char out[2 * K][M];
    got *one[] = {&g};
    unsigned long at[2];
    for (int phase = 0; phase < 2; phase++) {
        atomic_store(&rl__counting, phase == 1);
        at[phase] = atomic_load(&rl__socket_ring_reads);
        for (int i = phase * K; i < (phase + 1) * K; i++) {
            pattern(out[i], M, i);
            assert_int_equal(write(sv[1], out[i], M), M);
            run_for(one, 1, 1 + (size_t)(i + 1) * M, 0);
        }
    }
    unsigned long end = atomic_load(&rl__socket_ring_reads);
    atomic_store(&rl__counting, true);
    assert_int_equal(at[1], at[0]); /* nothing counted while off */
    assert_int_equal(g.len, 1 + 2 * K * M);
    for (int i = 0; i < 2 * K; i++)
        assert_memory_equal(g.bytes + 1 + (size_t)i * M, out[i], M);
    if (on_ring())
        assert_true(end - at[1] >= K / 2); /* short messages: read by the ring's receive */
    close(sv[1]);
    done(s, &g);
}

/* An idle-then-busy stream: after its first delivery, its reads need no
 * new request each (a multishot receive stays in the ring across
 * callouts), 50 exchanges in a row, each one's bytes delivered whole and
 * in order. */
#if !RL_PLAIN
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_rx_submits; /* receives submitted */
#endif

static void test_receive_stays_across_callouts(void **state) {
    (void)state;
    int sv[2];
    got g = {0};
    RLSocketRef s = warm_pair(sv, &g);
    warm(s, sv[1], &g);
#if !RL_PLAIN
    unsigned long before = atomic_load(&rl__poll_uring_rx_submits);
#endif
    exchange_messages(sv[1], &g, 50, 0);
#if !RL_PLAIN
    if (on_ring())
        assert_true(atomic_load(&rl__poll_uring_rx_submits) - before <= 1);
#endif
    close(sv[1]);
    done(s, &g);
}

/* More streams ready at once than the loop has buffers (a loop made with
 * 2 here): those that find none are read by the socket itself; nothing
 * lost, nothing reordered. */
#if !RL_PLAIN
RL__HIDDEN extern _Atomic unsigned rl__poll_uring_nbufs;
#endif

/* NS streams on this thread's loop, each sent `rounds` rounds of len
 * bytes at once, every byte checked in order; returns how many receives
 * found no buffer free meanwhile (0 off the ring). */
enum { NS = 40, MAXLEN = 3000 };
typedef struct streams_job {
    size_t len;
    int rounds;
    unsigned long missed;
    bool ring; /* the job's loop reads through the ring */
} streams_job;

static void *many_streams(void *arg) {
    streams_job *job = arg;
    rl_test_settle_backend(MODE); /* a loop of its own: on the backend it keeps */
    int sv[NS][2];
    static got g[NS];
    got *gp[NS];
    RLSocketRef s[NS];
    memset(g, 0, sizeof g);
    for (int i = 0; i < NS; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        s[i] = make(sv[i][0], &g[i], (RLOptionFlags)-1);
        gp[i] = &g[i];
        assert_int_equal(write(sv[i][1], "w", 1), 1);
    }
    run_for(gp, NS, 1, 0);
#if !RL_PLAIN
    unsigned long nobufs = atomic_load(&rl__poll_uring_nobufs);
#endif
    static char out[NS][MAXLEN];
    size_t len = job->len;
    for (int r = 0; r < job->rounds; r++) {
        for (int i = 0; i < NS; i++) {
            pattern(out[i], len, (unsigned)(i + r));
            assert_int_equal(write(sv[i][1], out[i], len), (ssize_t)len);
        }
        run_for(gp, NS, 1 + (size_t)(r + 1) * len, 0);
        for (int i = 0; i < NS; i++) {
            assert_int_equal(g[i].len, 1 + (size_t)(r + 1) * len);
            assert_memory_equal(g[i].bytes + 1 + (size_t)r * len, out[i], len);
        }
    }
    job->ring = on_ring();
#if !RL_PLAIN
    job->missed = job->ring ? atomic_load(&rl__poll_uring_nobufs) - nobufs : 0;
#else
    job->missed = 0;
#endif
    for (int i = 0; i < NS; i++) {
        close(sv[i][1]);
        done(s[i], &g[i]);
    }
    return NULL;
}

/* The job on a thread of its own (a fresh loop) with the loop's buffer
 * ring cut to 2 buffers. */
static void run_streams_on_two_buffers(streams_job *job) {
#if !RL_PLAIN
    unsigned saved = atomic_exchange(&rl__poll_uring_nbufs, 2);
#endif
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, many_streams, job), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
#if !RL_PLAIN
    atomic_store(&rl__poll_uring_nbufs, saved);
#endif
}

static void test_more_streams_than_buffers(void **state) {
    (void)state;
    streams_job job = {.len = 3000, .rounds = 3};
    run_streams_on_two_buffers(&job);
    if (job.ring) /* some found no buffer free */
        assert_true(job.missed > 0);
}

/* Small reads of many streams share a buffer (incremental buffers: a
 * receive takes only the bytes it read): 40 streams with 64 bytes each at
 * once, on 2 buffers, find a buffer every time. */
static void test_small_reads_of_many_streams_share_a_buffer(void **state) {
    (void)state;
    streams_job job = {.len = 64, .rounds = 20};
    run_streams_on_two_buffers(&job);
    assert_int_equal(job.missed, 0); /* receives that found no buffer free */
}

/* Idle streams that the ring read hold no receive buffer and no queue: 64
 * streams on a fresh thread's loop, each read through the ring (a byte,
 * then 300 more), then idle: each socket holds its block as it did before
 * its first byte (before: and a read-ahead queue of its own, 48 bytes with
 * malloc's header; now the ring's queues hold a stream's chunks only while
 * bytes wait), no chunk; the chunks the ring's receives used wait in the
 * thread's cache, 32 KiB at most; every byte arrived, in order. */
RL__HIDDEN size_t rl__socket_footprint(RLSocketRef s);
enum { NIDLE = 64, RXQ_CACHED_MAX = 128 * (sizeof(rl__rxchunk) + 256) };

static void *idle_streams(void *arg) {
    (void)arg;
    rl_test_settle_backend(MODE); /* a loop of its own: on the backend it keeps */
    int sv[NIDLE][2];
    static got g[NIDLE];
    got *gp[NIDLE];
    RLSocketRef s[NIDLE];
    size_t fresh[NIDLE];
    memset(g, 0, sizeof g);
    for (int i = 0; i < NIDLE; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        s[i] = make(sv[i][0], &g[i], (RLOptionFlags)-1);
        fresh[i] = rl__socket_footprint(s[i]);
        gp[i] = &g[i];
        assert_int_equal(write(sv[i][1], "w", 1), 1);
    }
    run_for(gp, NIDLE, 1, 0);
    unsigned long ring_before = atomic_load(&rl__socket_ring_reads);
    static char out[NIDLE][301];
    for (int i = 0; i < NIDLE; i++) {
        pattern(out[i], sizeof out[i], (unsigned)i);
        assert_int_equal(write(sv[i][1], out[i], 1), 1);
    }
    run_for(gp, NIDLE, 2, 0);
    for (int i = 0; i < NIDLE; i++)
        assert_int_equal(write(sv[i][1], out[i] + 1, 300), 300);
    run_for(gp, NIDLE, 1 + sizeof out[0], 0);
    bool ring = on_ring();
    for (int i = 0; i < NIDLE; i++) {
        assert_int_equal(g[i].len, 1 + sizeof out[i]);
        assert_memory_equal(g[i].bytes + 1, out[i], sizeof out[i]);
        assert_int_equal(rl__socket_footprint(s[i]), fresh[i]);
    }
    if (ring)
        assert_true(atomic_load(&rl__socket_ring_reads) - ring_before >= NIDLE);
    assert_true(rl__rxq_cached() <= RXQ_CACHED_MAX);
    for (int i = 0; i < NIDLE; i++) {
        close(sv[i][1]);
        done(s[i], &g[i]);
    }
    assert_true(rl__rxq_cached() <= RXQ_CACHED_MAX);
    return NULL;
}

static void test_idle_streams_hold_no_receive_buffer(void **state) {
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, idle_streams, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

/* A wake's worth of small receives on many streams (a chunk each, taken
 * before the callouts give them back) is served again by the chunks the
 * thread kept: 64 taken and given back, the next 64 are the same chunks,
 * none made anew (the plain build keeps none); and what the thread keeps
 * is bounded (128 small chunks' worth), however many come back. */
enum { NBURST = 64, NFLOOD = 400 };

static void *chunk_burst(void *arg) {
    (void)arg;
    rl__rxchunk *c[NBURST], *again[NBURST];
    for (int i = 0; i < NBURST; i++)
        assert_non_null(c[i] = rl__rxq_chunk(NULL, 64));
    for (int i = 0; i < NBURST; i++)
        rl__rxq_give_back(NULL, c[i]);
#if !RL_PLAIN
    assert_int_equal(rl__rxq_cached(), NBURST * (sizeof(rl__rxchunk) + 256));
#endif
    for (int i = 0; i < NBURST; i++) {
        assert_non_null(again[i] = rl__rxq_chunk(NULL, 64));
#if !RL_PLAIN
        bool kept = false;
        for (int j = 0; j < NBURST; j++)
            kept = kept || again[i] == c[j];
        assert_true(kept);
#endif
    }
    assert_int_equal(rl__rxq_cached(), 0);
    for (int i = 0; i < NBURST; i++)
        rl__rxq_give_back(NULL, again[i]);
    static rl__rxchunk *flood[NFLOOD];
    for (int i = 0; i < NFLOOD; i++)
        assert_non_null(flood[i] = rl__rxq_chunk(NULL, 64));
    for (int i = 0; i < NFLOOD; i++)
        rl__rxq_give_back(NULL, flood[i]);
    assert_true(rl__rxq_cached() <= RXQ_CACHED_MAX);
    return NULL;
}

static void test_a_wake_of_many_small_receives_reuses_the_threads_chunks(void **state) {
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, chunk_burst, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

/* A ring's read-ahead queues (rl_rxq.h) keep each fd's chunks in order,
 * whatever the other fds do, and hold nothing once drained: 3,000 fds with
 * two chunks each, taken in another order, one fd's dropped; then the
 * table is freed (the queues' block alone is left). One fd that holds its
 * bytes while thousands of others come and go keeps the table bounded (its
 * empty entries swept). */
static rl__rxchunk *tagged(unsigned tag) {
    rl__rxchunk *c = rl__rxq_chunk(NULL, sizeof tag);
    assert_non_null(c);
    memcpy(c->bytes, &tag, sizeof tag);
    c->len = sizeof tag;
    c->err = 0;
    c->full = false;
    return c;
}

static unsigned tag_of(const rl__rxchunk *c) {
    unsigned tag;
    assert_int_equal(c->len, sizeof tag);
    memcpy(&tag, c->bytes, sizeof tag);
    return tag;
}

enum { NQFD = 3000 };

static void test_read_ahead_queues_of_many_streams(void **state) {
    (void)state;
    rl__rxq *q = rl__rxq_new();
    assert_non_null(q);
    size_t empty = rl__rxq_table_bytes(q);
    for (unsigned round = 0; round < 2; round++) {
        for (int fd = 0; fd < NQFD; fd++)
            assert_true(rl__rxq_push(q, fd, tagged((unsigned)fd * 2 + round)));
    }
    assert_false(rl__rxq_holds(q, NQFD));
    assert_false(rl__rxq_holds(q, -1));
    rl__rxq_drop(q, 17);
    assert_false(rl__rxq_holds(q, 17));
    bool more;
    assert_null(rl__rxq_pop_upto(q, 17, 65536, &more));
    for (int k = 0; k < NQFD; k++) {
        int fd = (int)(((unsigned)k * 7919u) % NQFD); /* every fd once, scattered */
        if (fd == 17)
            continue;
        assert_true(rl__rxq_holds(q, fd));
        for (unsigned round = 0; round < 2; round++) {
            rl__rxchunk *c = rl__rxq_pop_upto(q, fd, 65536, &more);
            assert_non_null(c);
            assert_int_equal(tag_of(c), (unsigned)fd * 2 + round);
            assert_int_equal(more, round == 0);
            rl__rxq_give_back(q, c);
        }
        assert_false(rl__rxq_holds(q, fd));
    }
    assert_int_equal(rl__rxq_table_bytes(q), empty);
    /* fd 5 holds its bytes; 20,000 others come and go, a chunk each. */
    assert_true(rl__rxq_push(q, 5, tagged(5)));
    for (int fd = 100; fd < 20100; fd++) {
        assert_true(rl__rxq_push(q, fd, tagged((unsigned)fd)));
        rl__rxchunk *c = rl__rxq_pop_upto(q, fd, 65536, &more);
        assert_non_null(c);
        assert_int_equal(tag_of(c), (unsigned)fd);
        rl__rxq_give_back(q, c);
    }
    assert_true(rl__rxq_table_bytes(q) <= empty + 256 * 32); /* 256 entries at most */
    rl__rxchunk *c = rl__rxq_pop_upto(q, 5, 65536, &more);
    assert_non_null(c);
    assert_int_equal(tag_of(c), 5);
    rl__rxq_give_back(q, c);
    rl__rxq_release(q);
}

/* A stream read through the ring whose callback then sends (on io_uring
 * the send queue needs the socket's rare part, which takes over the
 * read-ahead queue kept alone until then): every byte still arrives in
 * order, each echo comes back whole. */
static void echo_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    data_cb(s, type, address, data, info);
    if (type == kRLSocketDataCallBack && RLDataGetLength(data) > 0)
        assert_int_equal(RLSocketSendData(s, NULL, data, 5), kRLSocketSuccess);
}

/* Runs until n bytes came back on fd (non-blocking reads), at most 10 s. */
static void echo_back(int fd, char *into, size_t n) {
    size_t got = 0;
    double end = rl_test_now() + 10;
    while (got < n && rl_test_now() < end) {
        ssize_t r = recv(fd, into + got, n - got, MSG_DONTWAIT);
        if (r > 0)
            got += (size_t)r;
        else
            RLRunLoopRunInMode(MODE, 0.01, true);
    }
    assert_int_equal(got, n);
}

static void test_a_ring_reader_that_sends_keeps_its_order(void **state) {
    (void)state;
    int sv[2];
    got g = {0};
    big_pair(sv);
    RLSocketContext c = {0, &g, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, echo_cb, &c);
    assert_non_null(s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    char back[64];
    assert_int_equal(write(sv[1], "w", 1), 1);
    echo_back(sv[1], back, 1);
    assert_int_equal(back[0], 'w');
    unsigned long before = atomic_load(&rl__socket_ring_reads);
    char msg[64];
    for (int i = 0; i < 20; i++) {
        pattern(msg, sizeof msg, (unsigned)i + 3);
        size_t at = g.len;
        assert_int_equal(write(sv[1], msg, sizeof msg), (ssize_t)sizeof msg);
        echo_back(sv[1], back, sizeof msg);
        assert_memory_equal(back, msg, sizeof msg);
        assert_int_equal(g.len, at + sizeof msg);
        assert_memory_equal(g.bytes + at, msg, sizeof msg);
    }
    if (on_ring())
        assert_true(atomic_load(&rl__socket_ring_reads) - before >= 19);
    close(sv[1]);
    done(s, &g);
}

/* A ring starts with small queues (a page each) and grows them as a
 * wake brings more than they hold: 160 streams each sent a message at
 * once, each echoing it from its callout, so that one harvest takes 160
 * completions (the completion queue: 128) and one pass makes 160 sends
 * (the submission queue: 64). Every echo comes back whole, in every
 * round, while the queues are resized under it; afterwards they are at
 * their largest. A kernel that cannot resize rings (before Linux 6.13)
 * has them at their largest from the start; epoll has none. */
enum { NGROW = 160, GROW_ROUNDS = 6 };

static void ring_sizes(unsigned *sq, unsigned *cq) {
#if !RL_PLAIN
    rl__poll_uring_ring_sizes(&RLRunLoopGetCurrent()->kern, sq, cq);
#else
    *sq = *cq = 0;
#endif
}

static void test_a_busy_ring_grows_its_queues(void **state) {
    (void)state;
    int sv[NGROW][2];
    got *g = calloc(NGROW, sizeof *g);
    RLSocketRef s[NGROW];
    assert_non_null(g);
    for (int i = 0; i < NGROW; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        RLSocketContext c = {0, &g[i], NULL, NULL, NULL};
        s[i] = RLSocketCreateWithNative(NULL, sv[i][0], kRLSocketDataCallBack, echo_cb, &c);
        assert_non_null(s[i]);
        RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s[i], 0);
        assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
        RLRelease(src);
    }
    unsigned sq0, cq0, sq, cq;
    ring_sizes(&sq0, &cq0);
    if (on_ring())
        assert_true((sq0 == 64 && cq0 == 128) || (sq0 == 128 && cq0 == 1024));
    else
        assert_true(sq0 == 0 && cq0 == 0);
#if !RL_PLAIN
    unsigned long grown = atomic_load(&rl__poll_uring_grown);
#endif
    char msg[64], back[64];
    for (int round = 0; round < GROW_ROUNDS; round++) {
        for (int i = 0; i < NGROW; i++) {
            pattern(msg, sizeof msg, (unsigned)(round * NGROW + i));
            assert_int_equal(write(sv[i][1], msg, sizeof msg), (ssize_t)sizeof msg);
        }
        for (int i = 0; i < NGROW; i++) {
            pattern(msg, sizeof msg, (unsigned)(round * NGROW + i));
            echo_back(sv[i][1], back, sizeof msg);
            assert_memory_equal(back, msg, sizeof msg);
            assert_int_equal(g[i].len, (size_t)(round + 1) * sizeof msg);
            assert_memory_equal(g[i].bytes + (size_t)round * sizeof msg, msg, sizeof msg);
        }
    }
    ring_sizes(&sq, &cq);
    if (on_ring()) {
        assert_int_equal(sq, 128);
        assert_true(cq >= 256);
#if !RL_PLAIN
        if (sq0 == 64)
            assert_true(atomic_load(&rl__poll_uring_grown) > grown);
#endif
    }
    for (int i = 0; i < NGROW; i++) {
        close(sv[i][1]);
        done(s[i], &g[i]);
    }
    free(g);
}

/* Small messages read through the ring reach the callback as the ring
 * copied them out of its buffer, with no second copy (the common echo:
 * 64 bytes), and a callback that keeps some of those data keeps their
 * bytes: 40 messages of 64 bytes, one at a time, every other data kept;
 * the kept ones still hold their own bytes after the rest, each a
 * delivery's whole. */
enum { NKEEP = 40, KEEP_LEN = 64 };

typedef struct keeper {
    got g;
    RLDataRef kept[NKEEP];
    int n;
} keeper;

static void keep_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    keeper *k = info;
    data_cb(s, type, address, data, &k->g);
    if (type == kRLSocketDataCallBack && RLDataGetLength(data) > 0 && k->n < NKEEP) {
        int i = k->n++; /* every odd delivery's data kept */
        k->kept[i] = i % 2 ? (RLDataRef)RLRetain(data) : NULL;
    }
}

static void *small_reads(void *arg) {
    (void)arg;
    rl_test_settle_backend(MODE); /* a loop of its own: on the backend it keeps */
    int sv[2];
    static keeper k;
    memset(&k, 0, sizeof k);
    big_pair(sv);
    RLSocketContext c = {0, &k, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, keep_cb, &c);
    assert_non_null(s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    got *one[] = {&k.g};
    assert_int_equal(write(sv[1], "w", 1), 1);
    run_for(one, 1, 1, 0);
    k.n = 0;
    if (k.kept[0])
        RLRelease(k.kept[0]);
    k.kept[0] = NULL;
    unsigned long reads = atomic_load(&rl__socket_ring_reads), copies = atomic_load(&rl__socket_ring_copies);
    static char msg[NKEEP][KEEP_LEN];
    for (int i = 0; i < NKEEP; i++) {
        pattern(msg[i], KEEP_LEN, (unsigned)i + 5);
        assert_int_equal(write(sv[1], msg[i], KEEP_LEN), KEEP_LEN);
        run_for(one, 1, 1 + (size_t)(i + 1) * KEEP_LEN, 0);
    }
    assert_int_equal(k.g.len, 1 + NKEEP * KEEP_LEN);
    assert_memory_equal(k.g.bytes + 1, msg, sizeof msg);
    assert_int_equal(k.n, NKEEP); /* one delivery a message */
    for (int i = 1; i < NKEEP; i += 2) {
        assert_non_null(k.kept[i]);
        assert_int_equal(RLDataGetLength(k.kept[i]), KEEP_LEN);
        assert_memory_equal(RLDataGetBytePtr(k.kept[i]), msg[i], KEEP_LEN);
        RLRelease(k.kept[i]);
    }
#if !RL_PLAIN
    if (on_ring()) {
        assert_true(atomic_load(&rl__socket_ring_reads) - reads >= NKEEP);
        assert_int_equal(atomic_load(&rl__socket_ring_copies) - copies, 0);
    }
#endif
    (void)reads, (void)copies;
    close(sv[1]);
    done(s, &k.g);
    return NULL;
}

/* On a thread of its own: its loop's ring, and the thread's chunks, fresh
 * (the chunks earlier tests left could be bigger than four times 64). */
static void test_small_ring_reads_are_not_copied_again_and_kept_ones_stay(void **state) {
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, small_reads, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

/* Bytes, then the peer's end: the bytes, then one empty data, and the
 * socket is invalidated. */
static void test_end_after_bytes(void **state) {
    (void)state;
    int sv[2];
    got g = {0};
    RLSocketRef s = warm_pair(sv, &g);
    static char out[40000];
    pattern(out, sizeof out, 3);
    assert_int_equal(write(sv[1], out, sizeof out), (ssize_t)sizeof out);
    assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
    got *one[] = {&g};
    run_for(one, 1, 1 + sizeof out, 1);
    assert_int_equal(g.len, 1 + sizeof out);
    assert_memory_equal(g.bytes + 1, out, sizeof out);
    assert_int_equal(g.ends, 1);
    assert_false(RLSocketIsValid(s));
    /* Nothing more comes. */
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, true), kRLRunLoopRunFinished);
    assert_int_equal(g.ends, 1);
    close(sv[1]);
    RLRelease(s);
    free(g.bytes);
}

/* A TCP peer that resets the connection: the bytes before it, then an
 * empty data, and the socket is invalidated. */
static void test_reset(void **state) {
    (void)state;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    int fd = accept(l, NULL, NULL);
    assert_true(fd >= 0);
    got g = {0};
    RLSocketRef s = make(fd, &g, (RLOptionFlags)-1);
    warm(s, c, &g);
    assert_int_equal(write(c, "last", 4), 4);
    got *one[] = {&g};
    run_for(one, 1, 5, 0);
    struct linger lg = {1, 0};
    assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    assert_int_equal(close(c), 0); /* a reset */
    run_for(one, 1, 5, 1);
    assert_int_equal(g.len, 5);
    assert_memory_equal(g.bytes, "wlast", 5);
    assert_int_equal(g.ends, 1);
    assert_false(RLSocketIsValid(s));
    close(l);
    RLRelease(s);
    free(g.bytes);
}

/* A socket invalidated (and its fd closed) while the ring has a receive
 * in flight for it: the next socket on the same fd number gets its own
 * bytes only, and the old one nothing more. */
static void test_invalidate_while_a_receive_is_in_flight(void **state) {
    (void)state;
    for (int i = 0; i < 20; i++) {
        int sv[2];
        got g = {0};
        RLSocketRef s = warm_pair(sv, &g); /* a receive armed for the next bytes */
        int old_fd = sv[0];
        if (i % 2)
            assert_int_equal(write(sv[1], "lost", 4), 4); /* maybe read by the receive before it is cancelled */
        assert_true(RLSocketInvalidate(s)); /* closes old_fd */
        int calls = g.calls;
        int tv[2];
        big_pair(tv);
        assert_int_equal(tv[0], old_fd); /* the number reused */
        got h = {0};
        RLSocketRef t = make(tv[0], &h, (RLOptionFlags)-1);
        assert_int_equal(write(tv[1], "mine", 4), 4);
        assert_int_equal(send(sv[1], "gone", 4, MSG_NOSIGNAL), -1); /* the old peer's other end is closed */
        got *one[] = {&h};
        run_for(one, 1, 4, 0);
        assert_int_equal(RLRunLoopRunInMode(MODE, 0.02, true), kRLRunLoopRunTimedOut);
        assert_int_equal(h.len, 4);
        assert_memory_equal(h.bytes, "mine", 4);
        assert_int_equal(g.calls, calls);
        close(sv[1]);
        close(tv[1]);
        RLRelease(s);
        free(g.bytes);
        done(t, &h);
    }
}

/* Without kRLSocketAutomaticallyReenableDataCallBack: one chunk per
 * enable. What the ring read ahead meanwhile is held, and comes when the
 * callback is enabled again, though the peer sends nothing more. */
static void test_disabled_callback_keeps_what_was_read_ahead(void **state) {
    (void)state;
    int sv[2];
    big_pair(sv);
    got g = {0};
    g.disable_each = true;
    RLSocketRef s = make(sv[0], &g, kRLSocketCloseOnInvalidate);
    assert_int_equal(write(sv[1], "a", 1), 1);
    got *one[] = {&g};
    run_for(one, 1, 1, 0);
    assert_int_equal(g.calls, 1);
    for (int k = 0; k < 5; k++) {
        /* Pieces sent one by one while the callback is off. */
        char piece[2] = {(char)('b' + k), 0};
        assert_int_equal(write(sv[1], piece, 1), 1);
        assert_int_equal(RLRunLoopRunInMode(MODE, 0.02, true), kRLRunLoopRunTimedOut);
    }
    assert_int_equal(g.calls, 1);
    for (int k = 0; k < 10 && g.len < 6; k++) {
        assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
        int calls = g.calls;
        double end = rl_test_now() + 10;
        while (g.calls == calls && rl_test_now() < end)
            RLRunLoopRunInMode(MODE, 0.05, true);
        assert_int_equal(g.calls, calls + 1);
    }
    assert_int_equal(g.len, 6);
    assert_memory_equal(g.bytes, "abcdef", 6);
    close(sv[1]);
    done(s, &g);
}

/* Writes all n bytes to fd (blocking). */
static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* The stream in bulk (a callout's first delivery from the ring holds 16 KB
 * or more) is read by its socket from then on, with the ring polling it;
 * a short message after it (a first read under 4 KB) gives it back to
 * the ring, whose receives read the round trips that follow; bulk again,
 * and the socket reads it again. Every byte in order throughout. */
#if !RL_PLAIN
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_rx_selves; /* readers turned to reading themselves */
#endif

static void test_a_stream_in_bulk_reads_itself_then_the_ring_again(void **state) {
    (void)state;
    int sv[2];
    got g = {0};
    RLSocketRef s = warm_pair(sv, &g);
    warm(s, sv[1], &g);
    got *one[] = {&g};
    enum { N = 512 * 1024 };
    static char out[N];
    for (int round = 0; round < 2; round++) {
#if !RL_PLAIN
        unsigned long selves = atomic_load(&rl__poll_uring_rx_selves);
#endif
        pattern(out, N, 3 + (unsigned)round);
        size_t at = g.len;
        write_all(sv[1], out, N);
        run_for(one, 1, at + N, 0);
        assert_int_equal(g.len, at + N);
        assert_memory_equal(g.bytes + at, out, N);
#if !RL_PLAIN
        if (on_ring())
            assert_true(atomic_load(&rl__poll_uring_rx_selves) > selves);
#endif
        unsigned long ring = atomic_load(&rl__socket_ring_reads);
        exchange_messages(sv[1], &g, 20, (unsigned)round);
        /* The first message was (at most) the socket's own read; the
         * ring read the others. */
        if (on_ring())
            assert_true(atomic_load(&rl__socket_ring_reads) - ring >= 15);
    }
    close(sv[1]);
    done(s, &g);
}

/* A writer alternating bursts of every size (a byte to 400 KB) with
 * short messages written once the reader has all that came before, so
 * that the stream goes from the ring to its socket's own reads and back
 * many times: every byte arrives, in order. `toggle`: the callback turns
 * itself off after each call and the test on again between runs (each
 * arming a change of the registration). */
enum { MIX_TOTAL = 12 << 20 };

typedef struct mix_job {
    int fd;
    unsigned seed;
    _Atomic size_t seen; /* what the reader has, as of its last run */
} mix_job;

static char mix_byte(size_t i) { return (char)((i * 131 + (i >> 12)) & 0xff); }

static void *mix_writer(void *arg) {
    mix_job *j = arg;
    static char buf[400 * 1024];
    size_t off = 0;
    unsigned r = j->seed;
    while (off < MIX_TOTAL) {
        r = r * 1103515245u + 12345u;
        unsigned kind = (r >> 16) % 3;
        r = r * 1103515245u + 12345u;
        size_t n = kind == 0 ? 1 + (r >> 16) % 100 : kind == 1 ? 4000 + (r >> 16) % 16000 : 64000 + (r >> 8) % 336000;
        if (n > MIX_TOTAL - off)
            n = MIX_TOTAL - off;
        for (size_t i = 0; i < n; i++)
            buf[i] = mix_byte(off + i);
        /* A short message after the reader caught up: its wake's first
         * read is short (back to the ring, if the socket read itself). */
        double end = rl_test_now() + 20;
        while (kind == 0 && atomic_load(&j->seen) < off && rl_test_now() < end)
            usleep(100);
        write_all(j->fd, buf, n);
        off += n;
    }
    return NULL;
}

static void run_mix(bool toggle) {
    int sv[2];
    got g = {0};
    g.disable_each = toggle;
    RLSocketRef s = warm_pair(sv, &g);
    size_t base = g.len;
#if !RL_PLAIN
    unsigned long selves = atomic_load(&rl__poll_uring_rx_selves);
#endif
    unsigned long ring = atomic_load(&rl__socket_ring_reads);
    mix_job j = {sv[1], toggle ? 7u : 3u, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, mix_writer, &j), 0);
    double end = rl_test_now() + 30;
    while (g.len < base + MIX_TOTAL && rl_test_now() < end) {
        if (toggle)
            assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
        RLRunLoopRunInMode(MODE, 0.01, true);
        atomic_store(&j.seen, g.len - base);
    }
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(g.len, base + MIX_TOTAL);
    for (size_t i = 0; i < MIX_TOTAL; i++) {
        if (g.bytes[base + i] != mix_byte(i))
            fail_msg("byte %zu of %d: %d, not %d", i, MIX_TOTAL, g.bytes[base + i], mix_byte(i));
    }
    if (on_ring()) {
#if !RL_PLAIN
        assert_true(atomic_load(&rl__poll_uring_rx_selves) - selves >= 2);
#endif
        assert_true(atomic_load(&rl__socket_ring_reads) - ring >= 2);
    }
    close(sv[1]);
    done(s, &g);
}

static void test_bursts_and_trickles_keep_their_order(void **state) {
    (void)state;
    run_mix(false);
}

static void test_bursts_and_trickles_keep_their_order_with_the_callback_toggled(void **state) {
    (void)state;
    run_mix(true);
}

/* What a loop's ring read ahead for a stream waits for it after that loop
 * is gone: a thread's loop reads 40,000 bytes through its ring and
 * delivers 20,000 of them (its callback's chunk), and the callback turns
 * itself off; the thread ends (its loop and ring with it) with the rest
 * queued. The socket, added to another thread's loop, gets the rest, in
 * order, before what it reads itself (the ring's queues live while a
 * stream they read holds them; rl_rxq.h). */
RL__HIDDEN extern _Atomic size_t rl__socket_read_chunk;
enum { AHEAD_CHUNK = 20000, AHEAD = 2 * AHEAD_CHUNK };

typedef struct ahead_job {
    int sv[2];
    got g;
    RLSocketRef s;
    bool ring;
    char out[AHEAD];
} ahead_job;

static void *read_ahead_thread(void *arg) {
    ahead_job *j = arg;
    rl_test_settle_backend(MODE); /* a loop of its own: on the backend it keeps */
    big_pair(j->sv);
    j->g.disable_each = true;
    j->s = make(j->sv[0], &j->g, kRLSocketCloseOnInvalidate);
    j->ring = on_ring();
    assert_int_equal(write(j->sv[1], "a", 1), 1); /* its callout asks the ring to read the stream */
    got *one[] = {&j->g};
    run_for(one, 1, 1, 0);
    assert_int_equal(j->g.calls, 1);
    pattern(j->out, sizeof j->out, 3);
    assert_int_equal(write(j->sv[1], j->out, sizeof j->out), (ssize_t)sizeof j->out);
    assert_true(RLSocketEnableCallBacks(j->s, kRLSocketDataCallBack));
    double end = rl_test_now() + 10;
    while (j->g.calls == 1 && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    assert_int_equal(j->g.len, 1 + AHEAD_CHUNK);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, j->s, 0);
    assert_non_null(src);
    RLRunLoopRemoveSource(RLRunLoopGetCurrent(), src, MODE);
    RLRelease(src);
    return NULL;
}

static void test_read_ahead_outlives_the_loop_that_read_it(void **state) {
    (void)state;
    size_t saved = atomic_exchange(&rl__socket_read_chunk, AHEAD_CHUNK);
    static ahead_job j;
    memset(&j, 0, sizeof j);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_ahead_thread, &j), 0);
    assert_int_equal(pthread_join(t, NULL), 0); /* its loop is gone */
    unsigned long before = atomic_load(&rl__socket_ring_reads);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, j.s, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRelease(src);
    assert_int_equal(write(j.sv[1], "z", 1), 1); /* read from the fd, after what the ring read */
    for (int k = 0; k < 10 && j.g.len < 2 + AHEAD; k++) {
        assert_true(RLSocketEnableCallBacks(j.s, kRLSocketDataCallBack));
        int calls = j.g.calls;
        double end = rl_test_now() + 10;
        while (j.g.calls == calls && rl_test_now() < end)
            RLRunLoopRunInMode(MODE, 0.05, true);
        assert_int_equal(j.g.calls, calls + 1);
    }
    atomic_store(&rl__socket_read_chunk, saved);
    assert_int_equal(j.g.len, 2 + AHEAD);
    assert_memory_equal(j.g.bytes + 1, j.out, AHEAD);
    assert_int_equal(j.g.bytes[1 + AHEAD], 'z');
    if (j.ring)
        assert_true(atomic_load(&rl__socket_ring_reads) > before); /* the gone ring's chunks */
    close(j.sv[1]);
    done(j.s, &j.g);
}

/* The kernel refuses the loop a buffer ring: its streams are read as on
 * epoll (a poll, then recv), with the same results. */
static void *refused_thread(void *arg) {
    (void)arg;
    rl_test_settle_backend(MODE); /* a loop of its own: on the backend it keeps */
    int sv[2];
    got g = {0};
    RLSocketRef s = warm_pair(sv, &g);
    unsigned long before = atomic_load(&rl__socket_ring_reads);
    static char out[50000];
    pattern(out, sizeof out, 5);
    assert_int_equal(write(sv[1], out, sizeof out), (ssize_t)sizeof out);
    got *one[] = {&g};
    run_for(one, 1, 1 + sizeof out, 0);
    assert_int_equal(g.len, 1 + sizeof out);
    assert_memory_equal(g.bytes + 1, out, sizeof out);
    assert_int_equal(atomic_load(&rl__socket_ring_reads), before);
    close(sv[1]);
    done(s, &g);
    return NULL;
}

static void test_no_buffer_ring(void **state) {
    (void)state;
    /* A loop of its own (its thread's), made while the fault is on. */
    atomic_store(&rl__faults, RL_FAULT_URING_BUFS);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, refused_thread, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    atomic_store(&rl__faults, 0);
}

/* A fork() child reads through its own loop (its own ring). */
static void *child_thread(void *arg) {
    int *ok = arg;
    rl_test_settle_backend(MODE); /* a loop of its own: on the backend it keeps */
    int sv[2];
    big_pair(sv);
    got g = {0};
    RLSocketRef s = make(sv[0], &g, (RLOptionFlags)-1);
    static char out[30000];
    pattern(out, sizeof out, 9);
    assert_int_equal(write(sv[1], "w", 1), 1);
    got *one[] = {&g};
    run_for(one, 1, 1, 0);
    assert_int_equal(write(sv[1], out, sizeof out), (ssize_t)sizeof out);
    run_for(one, 1, 1 + sizeof out, 0);
    *ok = g.len == 1 + sizeof out && memcmp(g.bytes + 1, out, sizeof out) == 0;
    close(sv[1]);
    done(s, &g);
    return NULL;
}

static void test_fork_child_reads(void **state) {
    (void)state;
    int sv[2];
    got g = {0};
    RLSocketRef s = warm_pair(sv, &g); /* the parent's ring has a receive in flight */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok = 0;
        pthread_t t;
        if (pthread_create(&t, NULL, child_thread, &ok) != 0 || pthread_join(t, NULL) != 0)
            _exit(2);
        rl_test_child_exit(ok ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* The parent's socket goes on. */
    assert_int_equal(write(sv[1], "after", 5), 5);
    got *one[] = {&g};
    run_for(one, 1, 6, 0);
    assert_int_equal(g.len, 6);
    assert_memory_equal(g.bytes, "wafter", 6);
    close(sv[1]);
    done(s, &g);
}

static int group_setup(void **state) {
    (void)state;
    rl_test_settle_backend(MODE); /* the counts here are the ring's from a socket's second delivery on */
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_larger_than_a_buffer),
        cmocka_unit_test(test_counters_count_only_when_asked),
        cmocka_unit_test(test_receive_stays_across_callouts),
        cmocka_unit_test(test_more_streams_than_buffers),
        cmocka_unit_test(test_small_reads_of_many_streams_share_a_buffer),
        cmocka_unit_test(test_idle_streams_hold_no_receive_buffer),
        cmocka_unit_test(test_a_wake_of_many_small_receives_reuses_the_threads_chunks),
        cmocka_unit_test(test_read_ahead_queues_of_many_streams),
        cmocka_unit_test(test_a_ring_reader_that_sends_keeps_its_order),
        cmocka_unit_test(test_a_busy_ring_grows_its_queues),
        cmocka_unit_test(test_small_ring_reads_are_not_copied_again_and_kept_ones_stay),
        cmocka_unit_test(test_end_after_bytes),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_invalidate_while_a_receive_is_in_flight),
        cmocka_unit_test(test_disabled_callback_keeps_what_was_read_ahead),
        cmocka_unit_test(test_a_stream_in_bulk_reads_itself_then_the_ring_again),
        cmocka_unit_test(test_bursts_and_trickles_keep_their_order),
        cmocka_unit_test(test_bursts_and_trickles_keep_their_order_with_the_callback_toggled),
        cmocka_unit_test(test_read_ahead_outlives_the_loop_that_read_it),
        cmocka_unit_test(test_no_buffer_ring),
        cmocka_unit_test(test_fork_child_reads),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
