/*
 * bench_ports.c — ports against their floors, measured in one run:
 *
 *   local ports (RLPort), between two threads:
 *     (a) throughput: one thread sends N small messages to a port served by
 *         another thread's loop, vs the same count of RLRunLoopPerformFunction
 *         requests to that loop (the perform queue is the floor: a port
 *         message is a request with an id and components);
 *     (b) round trip: a message and its reply (check-in style, through the
 *         message's send port) vs RLThreadPerform(waitUntilDone).
 *   message ports (RLMessagePort), between two processes:
 *     (c) request/reply round trip with 16 bytes each way vs a raw
 *         Unix-socket ping-pong of the same bytes between the same two
 *         processes (blocking read/write: the floor any socket transport
 *         pays); target: within 1.3x of the floor;
 *     (d) requests answered per second with 1, 10 and 100 client processes,
 *         each sending back-to-back requests.
 * Every row runs BPO_ROUNDS times (default 5; peers interleaved) and shows
 * the median. BPO_QUICK=1 uses a tenth of the counts.
 */
#include <crunloop/crunloop.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- a loop thread ---- */

typedef struct loop_thread {
    pthread_t t;
    sem_t ready;
    RLRunLoopRef rl;
    RLPortRef port;
    _Atomic long handled;
    _Atomic bool stop;
} loop_thread;

static void count_msg(RLPortRef p, RLPortMessageRef m, void *info) {
    loop_thread *lt = info;
    atomic_fetch_add_explicit(&lt->handled, 1, memory_order_relaxed);
    RLPortRef reply = RLPortMessageGetSendPort(m);
    if (reply)
        RLPortSendBeforeDate(reply, RLAbsoluteTimeGetCurrent() + 10, 2, NULL, 0, NULL);
}

static void *loop_main(void *arg) {
    loop_thread *lt = arg;
    lt->rl = RLRunLoopGetCurrent();
    RLPortContext ctx = {0, lt, NULL, NULL, NULL};
    lt->port = RLPortCreate(NULL, count_msg, &ctx);
    RLPortSetQueueLimit(lt->port, 1 << 20);
    RLRunLoopAddPort(lt->rl, lt->port, kRLRunLoopDefaultMode);
    sem_post(&lt->ready);
    while (!atomic_load(&lt->stop))
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, false);
    RLPortInvalidate(lt->port);
    RLRelease(lt->port);
    return NULL;
}

static void loop_start(loop_thread *lt) {
    memset(lt, 0, sizeof *lt);
    sem_init(&lt->ready, 0, 0);
    pthread_create(&lt->t, NULL, loop_main, lt);
    sem_wait(&lt->ready);
}

static void stop_fn(void *info) { atomic_store((_Atomic bool *)info, true); }

static void loop_stop(loop_thread *lt) {
    RLRunLoopPerformFunction(lt->rl, kRLRunLoopDefaultMode, stop_fn, (void *)&lt->stop);
    RLRunLoopWakeUp(lt->rl);
    pthread_join(lt->t, NULL);
}

static void count_perform(void *info) {
    atomic_fetch_add_explicit(&((loop_thread *)info)->handled, 1, memory_order_relaxed);
}

/* (a) messages (or requests) per second */
static double port_throughput(loop_thread *lt, long n) {
    RLDataRef d = RLDataCreate(NULL, (const uint8_t *)"0123456789abcdef", 16);
    RLTypeRef comps[] = {d};
    long base = atomic_load(&lt->handled);
    /* One limit date for the run, as a sender of a stream would compute it
     * (a clock read per message would be the bench's cost, not the port's;
     * the perform row reads no clock either). */
    RLAbsoluteTime limit = RLAbsoluteTimeGetCurrent() + 60;
    double t0 = now();
    for (long i = 0; i < n; i++)
        RLPortSendBeforeDate(lt->port, limit, 1, comps, 1, NULL);
    while (atomic_load_explicit(&lt->handled, memory_order_relaxed) - base < n)
        sched_yield();
    double t = now() - t0;
    RLRelease(d);
    return n / t;
}

static double perform_throughput(loop_thread *lt, long n) {
    long base = atomic_load(&lt->handled);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        RLRunLoopPerformFunction(lt->rl, kRLRunLoopDefaultMode, count_perform, lt);
        RLRunLoopWakeUp(lt->rl);
    }
    while (atomic_load_explicit(&lt->handled, memory_order_relaxed) - base < n)
        sched_yield();
    return n / (now() - t0);
}

/* (b) round trips: microseconds each */
static _Atomic long replies;
static void on_reply(RLPortRef p, RLPortMessageRef m, void *info) { replies++; }

static double port_round_trip(loop_thread *lt, long n) {
    RLPortRef mine = RLPortCreate(NULL, on_reply, NULL);
    RLRunLoopAddPort(RLRunLoopGetCurrent(), mine, kRLRunLoopDefaultMode);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        long want = replies + 1;
        RLPortSendBeforeDate(lt->port, RLAbsoluteTimeGetCurrent() + 10, 1, NULL, 0, mine);
        while (replies < want)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true);
    }
    double t = now() - t0;
    RLPortInvalidate(mine);
    RLRelease(mine);
    return t / n * 1e6;
}

static RLRunLoopRef g_main_rl;
static void perform_replied(void *arg) {
    replies++;
    RLRunLoopStop(RLRunLoopGetCurrent()); /* a perform is not a handled source: end the run */
}
static void perform_and_reply(void *arg) {
    RLRunLoopPerformFunction(g_main_rl, kRLRunLoopDefaultMode, perform_replied, NULL);
    RLRunLoopWakeUp(g_main_rl);
}

/* The same hop there and back through the two loops, as perform requests. */
static double perform_round_trip(loop_thread *lt, long n) {
    g_main_rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef keep = NULL;
    RLRunLoopSourceContext ctx = {0};
    keep = RLRunLoopSourceCreate(NULL, 0, &ctx); /* keeps the mode from being empty */
    RLRunLoopAddSource(g_main_rl, keep, kRLRunLoopDefaultMode);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        long want = replies + 1;
        RLRunLoopPerformFunction(lt->rl, kRLRunLoopDefaultMode, perform_and_reply, NULL);
        RLRunLoopWakeUp(lt->rl);
        while (replies < want)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true);
    }
    double t = now() - t0;
    RLRunLoopSourceInvalidate(keep);
    RLRelease(keep);
    return t / n * 1e6;
}

/* ---- processes ---- */

enum { PAYLOAD = 16 };

static RLDataRef echo(RLMessagePortRef local, int32_t msgid, RLDataRef data, void *info) {
    return data ? (RLDataRef)RLRetain(data) : NULL;
}

/* A child process serving `name` until killed. */
static pid_t serve_in_child(const char *name) {
    int p[2];
    if (pipe(p))
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        RLMessagePortRef port = RLMessagePortCreateLocal(NULL, name, echo, NULL, NULL);
        RLRunLoopSourceRef s = RLMessagePortCreateRunLoopSource(NULL, port, 0);
        RLRunLoopAddSource(RLRunLoopGetCurrent(), s, kRLRunLoopDefaultMode);
        (void)!write(p[1], "r", 1);
        for (;;)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e9, false);
    }
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1)
        exit(1);
    close(p[0]);
    return pid;
}

static double mp_round_trip(RLMessagePortRef r, long n) {
    RLDataRef d = RLDataCreate(NULL, (const uint8_t *)"0123456789abcdef", PAYLOAD);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        RLDataRef out = NULL;
        if (RLMessagePortSendRequest(r, 1, d, 10, 10, kRLRunLoopDefaultMode, &out) != kRLMessagePortSuccess) {
            fprintf(stderr, "bench_ports: request failed: %s\n", RLErrorGetLast().message);
            exit(1);
        }
        RLRelease(out);
    }
    double t = now() - t0;
    RLRelease(d);
    return t / n * 1e6;
}

/* The floor: the same 16 bytes back and forth over a socketpair between
 * two processes, blocking reads and writes. */
static double raw_round_trip(long n) {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pid_t pid = fork();
    char buf[PAYLOAD];
    if (pid == 0) {
        close(sv[0]);
        for (;;) {
            size_t got = 0;
            while (got < PAYLOAD) {
                ssize_t k = read(sv[1], buf + got, PAYLOAD - got);
                if (k <= 0)
                    _exit(0);
                got += (size_t)k;
            }
            (void)!write(sv[1], buf, PAYLOAD);
        }
    }
    close(sv[1]);
    memset(buf, 'x', sizeof buf);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        (void)!write(sv[0], buf, PAYLOAD);
        size_t got = 0;
        while (got < PAYLOAD) {
            ssize_t k = read(sv[0], buf + got, PAYLOAD - got);
            if (k <= 0)
                exit(1);
            got += (size_t)k;
        }
    }
    double t = now() - t0;
    close(sv[0]);
    waitpid(pid, NULL, 0);
    return t / n * 1e6;
}

/* (d) k client processes, each `per` back-to-back requests: answered/s. */
static double served_per_second(const char *name, int k, long per) {
    int go[2];
    if (pipe(go))
        exit(1);
    pid_t *kids = calloc((size_t)k, sizeof *kids);
    for (int i = 0; i < k; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            close(go[1]);
            RLMessagePortRef r = RLMessagePortCreateRemote(NULL, name);
            char c;
            if (!r || read(go[0], &c, 1) < 0)
                _exit(1);
            RLDataRef d = RLDataCreate(NULL, (const uint8_t *)"0123456789abcdef", PAYLOAD);
            for (long j = 0; j < per; j++) {
                RLDataRef out = NULL;
                if (RLMessagePortSendRequest(r, 1, d, 30, 30, kRLRunLoopDefaultMode, &out))
                    _exit(2);
                RLRelease(out);
            }
            _exit(0);
        }
    }
    close(go[0]);
    usleep(100000); /* let every client connect */
    double t0 = now();
    close(go[1]); /* EOF: all start */
    int bad = 0;
    for (int i = 0; i < k; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    double t = now() - t0;
    free(kids);
    if (bad)
        fprintf(stderr, "bench_ports: %d of %d clients failed\n", bad, k);
    return (double)k * per / t;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const char *e = getenv("BPO_ROUNDS");
    int rounds = e ? atoi(e) : 5;
    if (rounds < 1 || rounds > 50)
        rounds = 5;
    bool quick = getenv("BPO_QUICK") != NULL;
    long n_msgs = quick ? 20000 : 200000, n_rt = quick ? 2000 : 20000;
    double *v[8];
    for (int i = 0; i < 8; i++)
        v[i] = calloc((size_t)rounds, sizeof(double));

    loop_thread lt;
    loop_start(&lt);
    char name[64];
    snprintf(name, sizeof name, "bench.ports.%d", (int)getpid());
    pid_t server = serve_in_child(name);
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, name);
    if (!remote) {
        fprintf(stderr, "bench_ports: no remote: %s\n", RLErrorGetLast().message);
        return 1;
    }
    for (int r = 0; r < rounds; r++) {
        fprintf(stderr, "\rbench_ports: round %d/%d", r + 1, rounds);
        if (r % 2) {
            v[0][r] = port_throughput(&lt, n_msgs);
            v[1][r] = perform_throughput(&lt, n_msgs);
        } else {
            v[1][r] = perform_throughput(&lt, n_msgs);
            v[0][r] = port_throughput(&lt, n_msgs);
        }
        v[2][r] = port_round_trip(&lt, n_rt);
        v[5][r] = perform_round_trip(&lt, n_rt);
        if (r % 2) {
            v[3][r] = mp_round_trip(remote, n_rt);
            v[4][r] = raw_round_trip(n_rt);
        } else {
            v[4][r] = raw_round_trip(n_rt);
            v[3][r] = mp_round_trip(remote, n_rt);
        }
    }
    RLRelease(remote);
    double served[3];
    int ks[3] = {1, 10, 100};
    for (int i = 0; i < 3; i++)
        served[i] = served_per_second(name, ks[i], (quick ? 2000 : 20000) / ks[i]);
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    loop_stop(&lt);
    fprintf(stderr, "\r\033[K");

    double a = median(v[0], rounds), b = median(v[1], rounds), rt = median(v[2], rounds);
    double mp = median(v[3], rounds), raw = median(v[4], rounds), prt = median(v[5], rounds);
    double load[1] = {0};
    getloadavg(load, 1);
    printf("\nPorts: ours against their floors, one run, median of %d rounds; %ld CPUs, load %.1f\n\n", rounds,
           sysconf(_SC_NPROCESSORS_ONLN), load[0]);
    printf("%-58s | %10s | %-34s | %10s | %6s\n", "ours", "value", "floor", "value", "ratio");
    printf("-----------------------------------------------------------+------------+------------------------------------+------------+-------\n");
    printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLPort send, 16-byte data, other thread's loop (M msg/s)", a / 1e6,
           "RLRunLoopPerformFunction (M req/s)", b / 1e6, b / a);
    printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLPort message + reply, two threads (us)", rt,
           "perform there + perform back (us)", prt, rt / prt);
    printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLMessagePort request/reply, two processes (us)", mp,
           "raw Unix-socket ping-pong (us)", raw, mp / raw);
    for (int i = 0; i < 3; i++)
        printf("RLMessagePort requests answered/s, %3d client process(es) | %10.0f |\n", ks[i], served[i]);
    printf("\nratio: ours / floor in time (lower is better; for rates, floor rate / ours). Target for the message\n"
           "port round trip: <= 1.30x the raw socket floor.\n");
    return 0;
}
