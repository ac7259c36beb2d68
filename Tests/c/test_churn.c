/* test_churn.c — nothing the library keeps for speed grows without bound
 * under churn: after a warm-up (the first slabs, caches, malloc arenas and
 * thread stacks counted in the start), a million timers and 100,000
 * loopback connections are made and dropped, and the process's resident
 * set comes back to within 10 % of where it started (malloc tuned to
 * give back what it frees and malloc_trim(0) before each reading, so what
 * the allocator merely keeps free does not count against us, main() says
 * how; the code pages faulted in first and the resident set
 * read exactly, rssutil.h: a code path first taken during the churn, or
 * the kernel's approximate count, moved the reading by up to ~200 KiB of
 * the ~3 MiB start, and CI once failed on that).
 *   - Timers: on two loop threads at a time (new threads each round, so
 *     loop threads come and go too), in batches: a quarter fire (one-shot,
 *     in the common modes), a quarter are invalidated while in two modes,
 *     a quarter are removed from a private mode, a quarter repeat and are
 *     invalidated by their own callout; every timer fires or not exactly
 *     as it should.
 *   - Connections: an echo server (an RLSocket listening, one RLSocket per
 *     client, on a loop thread) and the test's raw clients, in waves of
 *     200 open at once: each client sends one byte and reads it back; then
 *     most close with a reset, one in twenty closes cleanly (the server
 *     reads the end), and one in five is dropped by the server after its
 *     echo (the client reads the end). Every connection is accepted,
 *     echoed and closed on both sides. (A clean close leaves the client's
 *     port in TIME_WAIT for a minute: few enough of those that runs back
 *     to back do not use up the ephemeral ports.)
 * Under the sanitizers and valgrind (and any run that RL_TEST_SCALE scales
 * down) the churn runs and is checked, but RSS is not: their shadow
 * memory and quarantines are what it would measure. */
#include "rssutil.h"
#include "testutil.h"

#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif

static long settled_rss(void) {
    malloc_trim(0);
    long rss = rl_rss_bytes();
    assert_true(rss > 0);
    return rss;
}

/* ---- timers ------------------------------------------------------------- */

enum { TIMER_THREADS = 2, TIMER_BATCH = 10000 };
#define PRIVATE_MODE "test_churn.private"

typedef struct timer_info timer_info;

typedef struct timer_job {
    long timers; /* how many this thread makes and drops */
    RLRunLoopTimerRef *ts; /* a batch's timers and their infos: the test's */
    timer_info *infos;     /* own, kept from the warm-up on */
    long fired, repeats_fired, wrong;
} timer_job;

struct timer_info {
    timer_job *job;
    int kind; /* 0 fires once, 1 invalidated, 2 removed, 3 repeats */
};

static void timer_fired(RLRunLoopTimerRef t, void *info) {
    timer_info *ti = info;
    switch (ti->kind) {
    case 0:
        ti->job->fired++;
        break;
    case 3:
        ti->job->repeats_fired++;
        RLRunLoopTimerInvalidate(t); /* from its own callout */
        break;
    default:
        ti->job->wrong++; /* an hour away: must never fire */
    }
}

static void *timer_thread(void *arg) {
    timer_job *job = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopAddCommonMode(rl, PRIVATE_MODE));
    RLRunLoopTimerRef *ts = job->ts;
    timer_info *infos = job->infos;
    for (long done = 0; done < job->timers; done += TIMER_BATCH) {
        int n = job->timers - done < TIMER_BATCH ? (int)(job->timers - done) : TIMER_BATCH;
        RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
        long fired0 = job->fired, repeats0 = job->repeats_fired, due = 0, repeating = 0;
        for (int i = 0; i < n; i++) {
            infos[i] = (timer_info){job, i % 4};
            RLRunLoopTimerContext ctx = {.version = 0, .info = &infos[i]};
            bool soon = infos[i].kind == 0 || infos[i].kind == 3;
            ts[i] = RLRunLoopTimerCreate(NULL, soon ? now - 1 : now + 3600 + i * 1e-3,
                                         infos[i].kind == 3 ? 0.001 : 0, 0, 0, timer_fired, &ctx);
            assert_non_null(ts[i]);
            switch (infos[i].kind) {
            case 0:
                assert_true(RLRunLoopAddTimer(rl, ts[i], kRLRunLoopCommonModes));
                due++;
                break;
            case 1:
                assert_true(RLRunLoopAddTimer(rl, ts[i], kRLRunLoopDefaultMode));
                assert_true(RLRunLoopAddTimer(rl, ts[i], PRIVATE_MODE));
                break;
            case 2:
                assert_true(RLRunLoopAddTimer(rl, ts[i], PRIVATE_MODE));
                break;
            case 3:
                assert_true(RLRunLoopAddTimer(rl, ts[i], kRLRunLoopDefaultMode));
                repeating++;
                break;
            }
        }
        for (int i = 0; i < n; i++) {
            if (infos[i].kind == 1)
                RLRunLoopTimerInvalidate(ts[i]);
            else if (infos[i].kind == 2)
                assert_true(RLRunLoopRemoveTimer(rl, ts[i], PRIVATE_MODE));
        }
        double deadline = rl_test_now() + 60;
        while (job->fired - fired0 < due || job->repeats_fired - repeats0 < repeating) {
            if (rl_test_now() > deadline)
                fail_msg("%ld of %ld due timers fired, %ld of %ld repeating", job->fired - fired0, due,
                         job->repeats_fired - repeats0, repeating);
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
        }
        assert_int_equal(job->fired - fired0, due);
        assert_int_equal(job->repeats_fired - repeats0, repeating);
        for (int i = 0; i < n; i++) {
            if (infos[i].kind == 0 || infos[i].kind == 3)
                assert_false(RLRunLoopTimerIsValid(ts[i])); /* one-shot fired, repeating invalidated */
            RLRelease(ts[i]);
        }
        /* Nothing of the batch is left in the loop. */
        assert_true(RLRunLoopGetNextTimerFireDate(rl, kRLRunLoopDefaultMode) == 0);
        assert_true(RLRunLoopGetNextTimerFireDate(rl, PRIVATE_MODE) == 0);
    }
    return NULL;
}

/* `total` timers over rounds of TIMER_THREADS new loop threads. */
static void churn_timers(long total, int rounds) {
    static RLRunLoopTimerRef ts[TIMER_THREADS][TIMER_BATCH];
    static timer_info infos[TIMER_THREADS][TIMER_BATCH];
    long per = total / (rounds * TIMER_THREADS);
    for (int r = 0; r < rounds; r++) {
        timer_job jobs[TIMER_THREADS] = {0};
        pthread_t th[TIMER_THREADS];
        for (int i = 0; i < TIMER_THREADS; i++) {
            jobs[i] = (timer_job){.timers = per, .ts = ts[i], .infos = infos[i]};
            assert_int_equal(pthread_create(&th[i], NULL, timer_thread, &jobs[i]), 0);
        }
        for (int i = 0; i < TIMER_THREADS; i++) {
            assert_int_equal(pthread_join(th[i], NULL), 0);
            assert_int_equal(jobs[i].wrong, 0);
            assert_int_equal(jobs[i].fired + jobs[i].repeats_fired, (per + 3) / 4 + per / 4);
        }
    }
}

/* ---- connections -------------------------------------------------------- */

enum { WAVE = 200 };

/* The byte each client sends says how its connection ends. */
enum { BYE_RESET = 'r', BYE_CLEAN = 'c', BYE_SERVER = 's' };

typedef struct server {
    RLRunLoopRef loop;
    RLSocketRef listener;
    uint16_t port;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool ready;
    /* Counted on the server's thread, read after it stops (closed, which
     * the test waits on meanwhile, atomically). */
    long accepted, echoed, closed, open, max_open, failures;
} server;

typedef struct churn_conn {
    server *srv;
    RLSocketRef socket;
} churn_conn;

static void conn_close(churn_conn *c) {
    __atomic_fetch_add(&c->srv->closed, 1, __ATOMIC_RELAXED);
    c->srv->open--;
    RLSocketInvalidate(c->socket); /* closes the fd */
    RLRelease(c->socket);
    free(c);
}

static void conn_callback(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address;
    churn_conn *c = info;
    if (type != kRLSocketDataCallBack)
        return;
    RLDataRef d = (RLDataRef)data;
    if (RLDataGetLength(d) <= 0) { /* the client's end, or its reset */
        conn_close(c);
        return;
    }
    const uint8_t *bytes = RLDataGetBytePtr(d);
    ssize_t r = send(RLSocketGetNative(s), bytes, (size_t)RLDataGetLength(d), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r != RLDataGetLength(d)) {
        c->srv->failures++;
        conn_close(c);
        return;
    }
    c->srv->echoed++;
    if (bytes[RLDataGetLength(d) - 1] == BYE_SERVER)
        conn_close(c);
}

static void accept_callback(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data,
                            void *info) {
    (void)s, (void)address;
    server *srv = info;
    if (type != kRLSocketAcceptCallBack)
        return;
    int fd = *(const int *)data;
    churn_conn *c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        srv->failures++;
        return;
    }
    c->srv = srv;
    RLSocketContext ctx = {.version = 0, .info = c};
    c->socket = RLSocketCreateWithNative(NULL, fd, kRLSocketDataCallBack, conn_callback, &ctx);
    RLRunLoopSourceRef src = c->socket ? RLSocketCreateRunLoopSource(NULL, c->socket, 0) : NULL;
    if (!src || !RLRunLoopAddSource(srv->loop, src, kRLRunLoopDefaultMode)) {
        srv->failures++;
        if (src)
            RLRelease(src);
        if (c->socket) {
            RLSocketInvalidate(c->socket);
            RLRelease(c->socket);
        } else {
            close(fd);
        }
        free(c);
        return;
    }
    RLRelease(src);
    srv->accepted++;
    if (++srv->open > srv->max_open)
        srv->max_open = srv->open;
}

static void *server_thread(void *arg) {
    server *srv = arg;
    srv->loop = RLRunLoopGetCurrent();
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    RLDataRef addr = RLDataCreate(NULL, (const uint8_t *)&sin, sizeof sin);
    RLSocketSignature sig = {PF_INET, SOCK_STREAM, IPPROTO_TCP, addr};
    RLSocketContext ctx = {.version = 0, .info = srv};
    srv->listener = RLSocketCreateWithSocketSignature(NULL, &sig, kRLSocketAcceptCallBack, accept_callback, &ctx);
    RLRelease(addr);
    assert_non_null(srv->listener);
    RLDataRef bound = RLSocketCopyAddress(srv->listener);
    assert_non_null(bound);
    srv->port = ntohs(((const struct sockaddr_in *)RLDataGetBytePtr(bound))->sin_port);
    RLRelease(bound);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, srv->listener, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(srv->loop, src, kRLRunLoopDefaultMode));
    RLRelease(src);
    pthread_mutex_lock(&srv->lock);
    srv->ready = true;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    RLRunLoopRun(); /* until the test stops it (the listener keeps the mode busy) */
    RLSocketInvalidate(srv->listener);
    RLRelease(srv->listener);
    return NULL;
}

static int client_connect(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0)
        fail_msg("connect: %s", strerror(errno));
    return fd;
}

static void client_close(int fd, bool reset) {
    if (reset) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
    }
    assert_int_equal(close(fd), 0);
}

static uint8_t bye_of(long k) {
    if (k % 20 == 3)
        return BYE_CLEAN;
    if (k % 10 == 6 || k % 10 == 8)
        return BYE_SERVER;
    return BYE_RESET;
}

/* Waits until srv has closed `want` connections (generous bound: a hang
 * is a failure, not a timing claim). */
static void server_wait_closed(server *srv, long want) {
    double deadline = rl_test_now() + 60;
    for (;;) {
        long closed = __atomic_load_n(&srv->closed, __ATOMIC_RELAXED);
        if (closed >= want)
            return;
        if (rl_test_now() > deadline)
            fail_msg("the server closed %ld of %ld connections", closed, want);
        usleep(200);
    }
}

/* `total` connections, WAVE at a time, to a new server; every one checked. */
static void churn_connections(long total) {
    server srv = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, server_thread, &srv), 0);
    pthread_mutex_lock(&srv.lock);
    while (!srv.ready) pthread_cond_wait(&srv.cond, &srv.lock);
    pthread_mutex_unlock(&srv.lock);
    int fds[WAVE];
    for (long done = 0; done < total; done += WAVE) {
        int n = total - done < WAVE ? (int)(total - done) : WAVE;
        for (int i = 0; i < n; i++) {
            fds[i] = client_connect(srv.port);
            uint8_t b = bye_of(done + i);
            assert_int_equal(send(fds[i], &b, 1, MSG_NOSIGNAL), 1);
        }
        for (int i = 0; i < n; i++) {
            uint8_t b = 0;
            ssize_t r;
            do
                r = recv(fds[i], &b, 1, 0);
            while (r < 0 && errno == EINTR);
            if (r != 1 || b != bye_of(done + i))
                fail_msg("connection %ld: echo %zd bytes (%s), byte %u", done + i, r, r < 0 ? strerror(errno) : "",
                         b);
            if (b == BYE_SERVER) { /* the server closes after its echo */
                do
                    r = recv(fds[i], &b, 1, 0);
                while (r < 0 && errno == EINTR);
                assert_int_equal(r, 0);
            }
        }
        for (int i = 0; i < n; i++) {
            uint8_t b = bye_of(done + i);
            client_close(fds[i], b == BYE_RESET);
        }
        /* The server closes its side of each once it has read the
         * client's end (or reset), a moment later: the next wave starts
         * when it has, so that it never holds more than WAVE. */
        server_wait_closed(&srv, done + n);
    }
    assert_true(RLRunLoopStop(srv.loop));
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(srv.failures, 0);
    assert_int_equal(srv.accepted, total);
    assert_int_equal(srv.echoed, total);
    assert_int_equal(srv.closed, total);
    assert_int_equal(srv.open, 0);
    assert_true(srv.max_open <= WAVE);
}

/* ---- the test ----------------------------------------------------------- */

static void test_a_million_timers_and_100000_connections_give_their_memory_back(void **state) {
    (void)state;
    const long timers = rl_test_iters(1000000), conns = rl_test_iters(100000);
    /* Under a sanitizer or valgrind the churn is checked, not RSS: it
     * would measure the checker's shadow memory and quarantines (and
     * valgrind maps its own code into the process, where reading it is an
     * error of its own). */
    const bool measure = !UNDER_SANITIZER && rl_test_iters(100) >= 100;
    /* The warm-up: the same shapes (as many rounds of loop threads, as
     * many timers and connections at once), all the timers again and a
     * twentieth of the connections, so that what the first rounds set up
     * for good is counted in the start: malloc's arenas, the first pages
     * of the C library's code paths, and the pool's bounded keep (one
     * empty slab a class, and slabs that quarantined slots hold, which
     * vary from run to run by a few 64 KiB slabs). */
    churn_timers(timers, 4);
    churn_connections(conns / 20 > WAVE ? conns / 20 : WAVE);
    if (measure)
        rl_rss_prefault_code();
    long before = settled_rss();
    double t0 = rl_test_now();
    churn_timers(timers, 4);
    double t1 = rl_test_now();
    long mid = settled_rss();
    churn_connections(conns);
    double t2 = rl_test_now();
    long after = settled_rss();
    print_message("RSS %ld KiB after the warm-up, %ld KiB after %ld timers (%.1f s), %ld KiB after %ld connections "
                  "(%.1f s)\n",
                  before / 1024, mid / 1024, timers, t1 - t0, after / 1024, conns, t2 - t1);
    if (!measure) {
        print_message("RSS not checked under a sanitizer or valgrind\n");
        return;
    }
    if (mid > before + before / 10)
        fail_msg("the timers' churn left RSS at %ld KiB, from %ld KiB", mid / 1024, before / 1024);
    if (after > before + before / 10)
        fail_msg("the connections' churn left RSS at %ld KiB, from %ld KiB", after / 1024, before / 1024);
}

int main(void) {
    /* malloc gives back what it keeps free, in every arena. malloc_trim(0)
     * releases the free pages in each arena's bins, but the top chunk of
     * the main arena only; and it first merges each arena's fast chunks, so
     * a loop thread's arena whose free memory lay below a fast chunk came
     * out of the trim as one top chunk, resident for good (glibc 2.36: the
     * plain build, whose objects come straight from malloc, read +1.2 to
     * +2.5 MiB about one run in 14 under load, malloc_info showing a thread
     * arena all top). With no fast chunks a free merges at once, and one
     * that reaches a thread arena's top trims it; a fixed trim threshold
     * keeps a large mmapped block's free from raising the bar above a whole
     * batch of timers. Before any thread exists. (The sanitizers' mallocs
     * ignore both, and their runs do not measure.) */
    bool tuned = mallopt(M_MXFAST, 0) == 1 && mallopt(M_TRIM_THRESHOLD, 128 * 1024) == 1;
    if (!tuned && !UNDER_SANITIZER) {
        fprintf(stderr, "test_churn: mallopt refused the settings the RSS measure needs\n");
        return 1;
    }
    /* Each wave holds 2 descriptors per connection. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4 * WAVE + 100 && rl.rlim_max >= 4 * WAVE + 100) {
        rl.rlim_cur = 4 * WAVE + 100;
        (void)setrlimit(RLIMIT_NOFILE, &rl); /* best effort: the default suffices */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_million_timers_and_100000_connections_give_their_memory_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
