/*
 * bench_ports.c — ports against their floors, measured in one run:
 *
 *   local ports (RLPort), between two threads:
 *     (a) throughput: one thread sends N small messages to a port served by
 *         another thread's loop, vs the same count of RLRunLoopPerformFunction
 *         requests to that loop (the perform queue is the floor: a port
 *         message is a request with an id and components); with one 16-byte
 *         RLData component (the same one each time: its reference count is
 *         what sender and receiver share) and with none;
 *     (b) round trip: a message and its reply (check-in style, through the
 *         message's send port) vs RLThreadPerform(waitUntilDone).
 *   message ports (RLMessagePort), between two processes:
 *     (c) request/reply round trip with 16 bytes each way vs a raw
 *         Unix-socket ping-pong of the same bytes between the same two
 *         processes (blocking read/write: the floor any socket transport
 *         pays); target: within 1.3x of the floor;
 *     (d) requests answered per second with 1, 10 and 100 client processes,
 *         each sending back-to-back requests;
 *     (e) the same request/reply as a D-Bus method call (libdbus, 16 bytes
 *         each way) through a private dbus-daemon started for the run (its
 *         own config in a temporary folder), when the bench was built with
 *         libdbus-1-dev and dbus-daemon is installed; otherwise the row says
 *         why it is missing.
 * Every row runs BPO_ROUNDS times (default 5; peers interleaved) and shows
 * the median. BPO_QUICK=1 uses a tenth of the counts. BPO_ONLY=local runs
 * the rows between threads only (a) and (b); BPO_ONLY=processes the rest.
 * BENCH_CSV=file also writes the rows with a peer for the charts
 * (bench_results.h).
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

#include "bench_results.h"

#ifdef BPO_DBUS
#include <dbus/dbus.h>
#include <fcntl.h>
#endif

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

/* (a) messages (or requests) per second; `count` components (0 or 1). */
static double port_throughput(loop_thread *lt, long n, RLIndex count) {
    RLDataRef d = RLDataCreate(NULL, (const uint8_t *)"0123456789abcdef", 16);
    RLTypeRef comps[] = {d};
    long base = atomic_load(&lt->handled);
    /* One limit date for the run, as a sender of a stream would compute it
     * (a clock read per message would be the bench's cost, not the port's;
     * the perform row reads no clock either). */
    RLAbsoluteTime limit = RLAbsoluteTimeGetCurrent() + 60;
    double t0 = now();
    for (long i = 0; i < n; i++)
        RLPortSendBeforeDate(lt->port, limit, 1, comps, count, NULL);
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

/* ---- D-Bus ---- */

#ifdef BPO_DBUS
enum { DBUS_CALL_TIMEOUT_MS = 10000 };
static const char *const BUS_NAME = "org.crunloop.Bench", *const BUS_PATH = "/org/crunloop/Bench",
                         *const BUS_IFACE = "org.crunloop.Bench";

typedef struct private_bus {
    pid_t daemon, server;
    char dir[64], address[512];
} private_bus;

/* Answers Echo with the bytes it got. */
static DBusHandlerResult echo_method(DBusConnection *c, DBusMessage *m, void *info) {
    if (!dbus_message_is_method_call(m, BUS_IFACE, "Echo"))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const uint8_t *bytes = NULL;
    int n = 0;
    DBusMessage *r = NULL;
    if (dbus_message_get_args(m, NULL, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &bytes, &n, DBUS_TYPE_INVALID))
        r = dbus_message_new_method_return(m);
    else
        r = dbus_message_new_error(m, DBUS_ERROR_INVALID_ARGS, "want ay");
    if (r && dbus_message_get_type(r) == DBUS_MESSAGE_TYPE_METHOD_RETURN)
        dbus_message_append_args(r, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &bytes, n, DBUS_TYPE_INVALID);
    if (r) {
        dbus_connection_send(c, r, NULL);
        dbus_message_unref(r);
    }
    return DBUS_HANDLER_RESULT_HANDLED;
}

static DBusConnection *bus_connect(const char *address) {
    DBusError err;
    dbus_error_init(&err);
    DBusConnection *c = dbus_connection_open_private(address, &err);
    if (c && !dbus_bus_register(c, &err)) {
        dbus_connection_close(c);
        dbus_connection_unref(c);
        c = NULL;
    }
    if (!c) {
        fprintf(stderr, "bench_ports: D-Bus: %s\n", err.message ? err.message : "cannot connect");
        dbus_error_free(&err);
    }
    return c;
}

/* Starts dbus-daemon on a config of its own (a folder in /tmp, no
 * services, the session bus's policy: without its eavesdrop allowances
 * this daemon (1.14) answers nothing, not even Hello) and an Echo server
 * process on it.
 * False (with the reason in why) if either cannot start. */
static bool bus_start(private_bus *b, char *why, size_t n) {
    memset(b, 0, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "/tmp/bench-ports-dbus.XXXXXX");
    if (!mkdtemp(b->dir))
        return snprintf(why, n, "mkdtemp: %s", strerror(errno)), false;
    char conf[128];
    snprintf(conf, sizeof conf, "%s/bus.conf", b->dir);
    FILE *f = fopen(conf, "w");
    if (!f)
        return snprintf(why, n, "cannot write %s", conf), false;
    fprintf(f, "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
               " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
               "<busconfig>\n  <type>session</type>\n  <listen>unix:dir=%s</listen>\n"
               "  <auth>EXTERNAL</auth>\n"
               "  <policy context=\"default\">\n    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
               "    <allow eavesdrop=\"true\"/>\n    <allow own=\"*\"/>\n  </policy>\n</busconfig>\n",
            b->dir);
    fclose(f);
    int p[2];
    if (pipe(p))
        return snprintf(why, n, "pipe: %s", strerror(errno)), false;
    b->daemon = fork();
    if (b->daemon == 0) {
        close(p[0]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", p[1]);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 2);
        }
        execlp("dbus-daemon", "dbus-daemon", "--nofork", "--config-file", conf, "--print-address", fd, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t k;
    while (got < sizeof b->address - 1 && (k = read(p[0], b->address + got, sizeof b->address - 1 - got)) > 0) {
        got += (size_t)k;
        if (memchr(b->address, '\n', got))
            break;
    }
    close(p[0]);
    b->address[got] = 0;
    char *nl = strchr(b->address, '\n');
    if (nl)
        *nl = 0;
    if (!b->address[0]) {
        waitpid(b->daemon, NULL, 0);
        b->daemon = 0;
        return snprintf(why, n, "dbus-daemon did not start (is the dbus-daemon package installed?)"), false;
    }
    int ready[2];
    if (pipe(ready))
        return snprintf(why, n, "pipe: %s", strerror(errno)), false;
    b->server = fork();
    if (b->server == 0) {
        close(ready[0]);
        DBusConnection *c = bus_connect(b->address);
        if (!c)
            _exit(1);
        DBusError err;
        dbus_error_init(&err);
        static const DBusObjectPathVTable vt = {.message_function = echo_method};
        if (dbus_bus_request_name(c, BUS_NAME, DBUS_NAME_FLAG_DO_NOT_QUEUE, &err) !=
                DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER ||
            !dbus_connection_register_object_path(c, BUS_PATH, &vt, NULL))
            _exit(1);
        (void)!write(ready[1], "r", 1);
        while (dbus_connection_read_write_dispatch(c, -1)) {
        }
        _exit(0);
    }
    close(ready[1]);
    char c;
    bool up = read(ready[0], &c, 1) == 1;
    close(ready[0]);
    if (!up)
        return snprintf(why, n, "the D-Bus echo server could not take its name"), false;
    return true;
}

static void bus_stop(private_bus *b) {
    if (b->server > 0) {
        kill(b->server, SIGKILL);
        waitpid(b->server, NULL, 0);
    }
    if (b->daemon > 0) {
        kill(b->daemon, SIGTERM);
        waitpid(b->daemon, NULL, 0);
    }
    if (b->dir[0]) {
        char path[128];
        snprintf(path, sizeof path, "%s/bus.conf", b->dir);
        unlink(path);
        rmdir(b->dir); /* dbus-daemon removes its socket */
    }
}

/* Echo method calls through the bus: microseconds each. */
static double dbus_round_trip(DBusConnection *c, long n) {
    const uint8_t payload[PAYLOAD] = "0123456789abcde";
    const uint8_t *ptr = payload;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        DBusMessage *m = dbus_message_new_method_call(BUS_NAME, BUS_PATH, BUS_IFACE, "Echo");
        dbus_message_append_args(m, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &ptr, PAYLOAD, DBUS_TYPE_INVALID);
        DBusError err;
        dbus_error_init(&err);
        DBusMessage *r = dbus_connection_send_with_reply_and_block(c, m, DBUS_CALL_TIMEOUT_MS, &err);
        dbus_message_unref(m);
        if (!r) {
            fprintf(stderr, "bench_ports: D-Bus call failed: %s\n", err.message);
            exit(1);
        }
        dbus_message_unref(r);
    }
    return (now() - t0) / n * 1e6;
}
#endif

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const char *e = getenv("BPO_ROUNDS");
    int rounds = e ? atoi(e) : 5;
    if (rounds < 1 || rounds > 50)
        rounds = 5;
    bool quick = getenv("BPO_QUICK") != NULL;
    const char *only = getenv("BPO_ONLY");
    bool local = !only || strcmp(only, "local") == 0, procs = !only || strcmp(only, "processes") == 0;
    long n_msgs = quick ? 20000 : 200000, n_rt = quick ? 2000 : 20000;
    double *v[8];
    for (int i = 0; i < 8; i++)
        v[i] = calloc((size_t)rounds, sizeof(double));

    /* The D-Bus peer first, before this process has threads. */
    bool dbus = false;
    char dbus_why[160] = "built without libdbus-1-dev";
#ifdef BPO_DBUS
    private_bus bus;
    DBusConnection *bus_client = NULL;
    dbus_why[0] = 0;
    if (procs && bus_start(&bus, dbus_why, sizeof dbus_why) && (bus_client = bus_connect(bus.address)))
        dbus = true;
    else if (procs && !dbus_why[0])
        snprintf(dbus_why, sizeof dbus_why, "cannot connect to the private bus");
#endif

    loop_thread lt;
    if (local)
        loop_start(&lt);
    char name[64];
    snprintf(name, sizeof name, "bench.ports.%d", (int)getpid());
    pid_t server = 0;
    RLMessagePortRef remote = NULL;
    if (procs) {
        server = serve_in_child(name);
        remote = RLMessagePortCreateRemote(NULL, name);
        if (!remote) {
            fprintf(stderr, "bench_ports: no remote: %s\n", RLErrorGetLast().message);
            return 1;
        }
    }
    for (int r = 0; r < rounds; r++) {
        fprintf(stderr, "\rbench_ports: round %d/%d", r + 1, rounds);
        if (local) {
            if (r % 2) {
                v[0][r] = port_throughput(&lt, n_msgs, 1);
                v[7][r] = port_throughput(&lt, n_msgs, 0);
                v[1][r] = perform_throughput(&lt, n_msgs);
            } else {
                v[1][r] = perform_throughput(&lt, n_msgs);
                v[7][r] = port_throughput(&lt, n_msgs, 0);
                v[0][r] = port_throughput(&lt, n_msgs, 1);
            }
            v[2][r] = port_round_trip(&lt, n_rt);
            v[5][r] = perform_round_trip(&lt, n_rt);
        }
        if (procs) {
            /* The three request/reply forms, in a different order each round. */
            for (int k = 0; k < 3; k++) {
                switch ((k + r) % 3) {
                case 0:
                    v[3][r] = mp_round_trip(remote, n_rt);
                    break;
                case 1:
                    v[4][r] = raw_round_trip(n_rt);
                    break;
                default:
#ifdef BPO_DBUS
                    if (dbus)
                        v[6][r] = dbus_round_trip(bus_client, n_rt / 4);
#endif
                    break;
                }
            }
        }
    }
    double served[3] = {0};
    int ks[3] = {1, 10, 100};
    if (procs) {
        RLRelease(remote);
        for (int i = 0; i < 3; i++)
            served[i] = served_per_second(name, ks[i], (quick ? 2000 : 20000) / ks[i]);
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
#ifdef BPO_DBUS
    if (bus_client) {
        dbus_connection_close(bus_client);
        dbus_connection_unref(bus_client);
    }
    if (procs)
        bus_stop(&bus);
#endif
    if (local)
        loop_stop(&lt);
    fprintf(stderr, "\r\033[K");

    /* For the charts: each round's time ratio, the rounds paired (taken
     * before the medians sort the samples). */
    double *ratios[5];
    for (int i = 0; i < 5; i++)
        if (!(ratios[i] = calloc((size_t)rounds, sizeof(double))))
            abort();
    for (int i = 0; i < rounds; i++) {
        ratios[0][i] = v[1][i] / v[0][i]; /* rates: floor / ours */
        ratios[1][i] = v[1][i] / v[7][i];
        ratios[2][i] = v[2][i] / v[5][i];
        ratios[3][i] = v[3][i] / v[4][i];
        ratios[4][i] = v[3][i] / v[6][i];
    }
    FILE *results = bench_results_open();
    double load[1] = {0};
    getloadavg(load, 1);
    printf("\nPorts: ours against their floors, one run, median of %d rounds; %ld CPUs, load %.1f\n\n", rounds,
           sysconf(_SC_NPROCESSORS_ONLN), load[0]);
    printf("%-58s | %10s | %-34s | %10s | %6s\n", "ours", "value", "floor / peer", "value", "ratio");
    printf("-----------------------------------------------------------+------------+------------------------------------+------------+-------\n");
    if (local) {
        double a = median(v[0], rounds), b = median(v[1], rounds), rt = median(v[2], rounds);
        double prt = median(v[5], rounds);
        double a0 = median(v[7], rounds);
        printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLPort send, 16-byte data, other thread's loop (M msg/s)",
               a / 1e6, "RLRunLoopPerformFunction (M req/s)", b / 1e6, b / a);
        printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLPort send, no components, other thread's loop (M msg/s)",
               a0 / 1e6, "RLRunLoopPerformFunction (M req/s)", b / 1e6, b / a0);
        printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLPort message + reply, two threads (us)", rt,
               "perform there + perform back (us)", prt, rt / prt);
        bench_results_row(results, "ports", "RLPort send, 16-byte data, other thread's loop", "perform requests",
                          ratios[0], rounds, a / 1e6, b / 1e6, "M msg/s");
        bench_results_row(results, "ports", "RLPort send, no components, other thread's loop", "perform requests",
                          ratios[1], rounds, a0 / 1e6, b / 1e6, "M msg/s");
        bench_results_row(results, "ports", "RLPort message + reply, two threads", "perform requests", ratios[2],
                          rounds, rt, prt, "us");
    }
    if (procs) {
        double mp = median(v[3], rounds), raw = median(v[4], rounds);
        printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLMessagePort request/reply, two processes (us)", mp,
               "raw Unix-socket ping-pong (us)", raw, mp / raw);
        bench_results_row(results, "ports", "RLMessagePort request/reply, two processes", "raw Unix socket",
                          ratios[3], rounds, mp, raw, "us");
        if (dbus) {
            double bus_rt = median(v[6], rounds);
            printf("%-58s | %10.2f | %-34s | %10.2f | %5.2fx\n", "RLMessagePort request/reply, two processes (us)", mp,
                   "D-Bus method call, private bus (us)", bus_rt, mp / bus_rt);
            bench_results_row(results, "ports", "RLMessagePort request/reply, two processes", "D-Bus method call",
                              ratios[4], rounds, mp, bus_rt, "us");
        } else
            printf("%-58s | %10.2f | %-34s | %10s |\n", "RLMessagePort request/reply, two processes (us)", mp,
                   "D-Bus method call, private bus (us)", "n/a");
        for (int i = 0; i < 3; i++)
            printf("RLMessagePort requests answered/s, %3d client process(es) | %10.0f |\n", ks[i], served[i]);
        if (!dbus)
            printf("\nD-Bus row not measured: %s.\n", dbus_why);
    }
    printf("\nratio: ours / floor or peer in time (lower is better; for rates, floor rate / ours). Target for the\n"
           "message port round trip: <= 1.30x the raw socket floor. The D-Bus call goes through the bus daemon\n"
           "(two hops each way), as every D-Bus method call does.\n");
    if (results)
        bench_results_close(results);
    for (int i = 0; i < 5; i++)
        free(ratios[i]);
    return 0;
}
