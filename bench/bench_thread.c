/*
 * bench_thread.c — the thread and perform rows, ours against raw pthreads
 * and CoreFoundation's run loop (from the Swift toolchain), in one process:
 *
 *   (a) create→entry latency: from the create call to the first instruction
 *       of the entry. RLThreadCreate + SetJoinable + Start vs pthread_create
 *       (default attributes, as a user writes it). p50 and p99 over the
 *       threads of a round; each thread is joined before the next is made.
 *   (b) create+join: RLThreadCreate + SetJoinable + Start + Join + Release vs
 *       pthread_create + pthread_join, back to back; ns per thread.
 *   (c) perform round trip onto a worker thread that sleeps in its run loop:
 *       a request from this thread, run there, and the reply back. Ours:
 *       RLWorkerThreadPerformSync, RLThreadPerform(waitUntilDone) onto the
 *       worker's thread, and RLWorkerThreadPerformAsync whose function posts
 *       a semaphore. CF: CFRunLoopPerformBlock + CFRunLoopWakeUp onto a
 *       thread in CFRunLoopRun, the block posting the same kind of semaphore
 *       (bench_thread_cf.c).
 *       On a small VM a round trip is bimodal: ~5-8 us when the sender and
 *       the worker share a CPU (a direct hand-off), ~50 us when the kernel
 *       wakes the other side on an idle CPU (an idle-CPU wake-up), and which
 *       mode a free-running pair lands in changes from run to run. So every
 *       variant, ours and CF alike, runs in two controlled placements: the
 *       sender and the worker pinned to the same CPU, and pinned to two
 *       different CPUs (when the process may use >= 2). Each placement has
 *       its own rows and ratio; the target is judged on each.
 *       In the "2 CPUs" placement, ours does not sleep between back-to-back
 *       trips: a loop woken from another CPU, and a waitUntilDone sender
 *       whose target runs on another CPU, spin briefly before sleeping
 *       (docs/runloop.md, "Spinning before sleeping"). CF's loop never
 *       spins. The rows time latency only; the spinning is paid in CPU
 *       time, which they do not show.
 *
 * Every row runs BTH_ROUNDS times (default 9); inside a round ours and the
 * peer alternate in short chunks (order flipped each chunk) so that both see
 * the same neighbours; a cell is the median over rounds of that round's
 * p50 / p99 / mean. Targets: (a), (b) ours <= 1.15x pthread; (c)
 * ours <= 0.7x CF. The ratio of a row is the median of the per-round ratios.
 *
 *   BTH_ROUNDS=3 bench_thread      fewer rounds
 *   BTH_QUICK=1 bench_thread       a tenth of the counts, for a smoke test
 *   BTH_ONLY_THREADS=1             rows (a) and (b) only
 *   BENCH_CSV=file                 also the rows for the charts (bench_results.h)
 *
 * Built by `make bench-thread` (mk/bench-thread.mk).
 */
#include <crunloop/crunloop.h>
#include <crunloop/RLPerform.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLThread.h>
#include <crunloop/RLWorkerThread.h>

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_results.h"
#include "bench_thread_peers.h"

#define MAXROUNDS 15
#define CHUNKS 10 /* see run_round */

static void die(const char *what) {
    RLError e = RLErrorGetLast();
    fprintf(stderr, "bench_thread: %s failed (%s)\n", what, e.message);
    exit(1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of v[0..n); sorts v. */
static double quantile(double *v, long n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(long)(q * (double)(n - 1) + 0.5)];
}

static double median(double *v, int n) {
    if (n == 0) return NAN;
    double tmp[MAXROUNDS];
    memcpy(tmp, v, (size_t)n * sizeof *tmp);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static void progress(const char *fmt, ...) {
    static int tty = -1;
    if (tty < 0) tty = isatty(2);
    if (!tty) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\r\033[K");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

/* ---- (a) create→entry latency ------------------------------------------ */

static void *entry_stamp(void *arg) {
    *(int64_t *)arg = bth_now_ns();
    return NULL;
}

static void rl_entry_latency(double *out, long n) {
    for (long i = 0; i < n; i++) {
        int64_t stamp = 0;
        int64_t t0 = bth_now_ns();
        RLThreadRef t = RLThreadCreate(NULL, entry_stamp, &stamp);
        if (!t || !RLThreadSetJoinable(t, true) || !RLThreadStart(t)) die("RLThreadCreate/Start");
        if (!RLThreadJoin(t, NULL)) die("RLThreadJoin");
        RLRelease(t);
        out[i] = (double)(stamp - t0);
    }
}

static void pthread_entry_latency(double *out, long n) {
    for (long i = 0; i < n; i++) {
        int64_t stamp = 0;
        pthread_t t;
        int64_t t0 = bth_now_ns();
        if (pthread_create(&t, NULL, entry_stamp, &stamp) != 0) die("pthread_create");
        pthread_join(t, NULL);
        out[i] = (double)(stamp - t0);
    }
}

/* ---- (b) create + join ------------------------------------------------- */

static void *entry_nothing(void *arg) { return arg; }

static double rl_create_join(long n) {
    int64_t t0 = bth_now_ns();
    for (long i = 0; i < n; i++) {
        RLThreadRef t = RLThreadCreate(NULL, entry_nothing, NULL);
        if (!t || !RLThreadSetJoinable(t, true) || !RLThreadStart(t)) die("RLThreadCreate/Start");
        if (!RLThreadJoin(t, NULL)) die("RLThreadJoin");
        RLRelease(t);
    }
    return (double)(bth_now_ns() - t0) / (double)n;
}

static double pthread_create_join(long n) {
    int64_t t0 = bth_now_ns();
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, entry_nothing, NULL) != 0) die("pthread_create");
        pthread_join(t, NULL);
    }
    return (double)(bth_now_ns() - t0) / (double)n;
}

/* What an eagerly made run loop would cost a started thread: the first
 * RLRunLoopGetCurrent on a fresh thread (the loop's teardown at exit comes
 * on top and is not timed here). */
static void *first_loop_entry(void *arg) {
    int64_t t0 = bth_now_ns();
    if (!RLRunLoopGetCurrent()) die("RLRunLoopGetCurrent");
    *(double *)arg = (double)(bth_now_ns() - t0);
    return NULL;
}

static double first_loop_cost(long n) {
    double *v = malloc((size_t)n * sizeof *v);
    if (!v) abort();
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, first_loop_entry, &v[i]) != 0) die("pthread_create");
        pthread_join(t, NULL);
    }
    double q = quantile(v, n, 0.5);
    free(v);
    return q;
}

/* ---- (c) perform round trips ------------------------------------------- */

static void work_nothing(void *arg) { (void)arg; }
static void work_post(void *arg) { sem_post(arg); }

enum perform_kind { PK_WORKER_SYNC, PK_THREAD_WAIT, PK_ASYNC_SIGNAL };

typedef struct {
    RLWorkerThreadRef worker;
    RLThreadRef thread;
    sem_t reply;
} rl_worker;

static void pin_worker(void *arg) {
    if (!bth_pin_self(*(const int *)arg)) die("pthread_setaffinity_np (worker)");
}

/* Starts a worker and pins its thread to CPU `cpu` (cpu < 0: not pinned). */
static void rl_worker_start(rl_worker *w, int cpu) {
    w->worker = RLWorkerThreadCreate(NULL, "bench-worker");
    if (!w->worker || !RLWorkerThreadStart(w->worker)) die("RLWorkerThreadStart");
    if (cpu >= 0 && !RLWorkerThreadPerformSync(w->worker, pin_worker, &cpu)) die("pin worker");
    w->thread = RLWorkerThreadGetThread(w->worker);
    if (!w->thread) die("RLWorkerThreadGetThread");
    sem_init(&w->reply, 0, 0);
}

static void rl_worker_stop(rl_worker *w) {
    if (!RLWorkerThreadStop(w->worker)) die("RLWorkerThreadStop");
    RLRelease(w->worker);
    sem_destroy(&w->reply);
}

/* n round trips of one kind; out may be NULL (warm-up). */
static void rl_round_trips(rl_worker *w, enum perform_kind kind, double *out, long n) {
    for (long i = 0; i < n; i++) {
        int64_t t0 = bth_now_ns();
        bool ok;
        switch (kind) {
        case PK_WORKER_SYNC: ok = RLWorkerThreadPerformSync(w->worker, work_nothing, NULL); break;
        case PK_THREAD_WAIT: ok = RLThreadPerform(w->thread, work_nothing, NULL, NULL, true); break;
        default:
            ok = RLWorkerThreadPerformAsync(w->worker, work_post, &w->reply);
            while (ok && sem_wait(&w->reply) != 0) {
            }
            break;
        }
        if (!ok) die("perform");
        if (out) out[i] = (double)(bth_now_ns() - t0);
    }
}

/* ---- the table --------------------------------------------------------- */

enum row {
    R_ENTRY50,
    R_ENTRY99,
    R_JOIN,
    /* (c): per kind, per placement (same CPU, then two CPUs), p50 and p99;
     * row = R_RT + (kind * NPLACE + placement) * 2 + (p99 ? 1 : 0). */
    R_RT,
    /* (c) CPU time of the whole process per round trip (both threads: what
     * the spinning before sleeping costs); row = R_CPU + kind * NPLACE +
     * placement. */
    R_CPU = R_RT + 3 * 2 * 2,
    NROWS = R_CPU + 3 * 2
};

enum placement { PL_SAME, PL_DIFF, NPLACE };

typedef struct {
    const char *ours, *peer;
    double target; /* ours/peer must be <= target; 0 = no target */
} row_info;

static const row_info rows[NROWS] = {
    [R_ENTRY50] = {"create->entry p50: RLThreadCreate+Start", "pthread_create", 1.15},
    [R_ENTRY99] = {"create->entry p99", "", 0},
    [R_JOIN] = {"create+start+join per thread: RLThread", "pthread_create+join", 1.15},
    [R_RT + 0] = {"round trip p50, 1 CPU: RLWorkerThreadPerformSync", "CF PerformBlock+WakeUp", 0.7},
    [R_RT + 1] = {"round trip p99, 1 CPU", "", 0},
    [R_RT + 2] = {"round trip p50, 2 CPUs: RLWorkerThreadPerformSync", "CF PerformBlock+WakeUp", 0.7},
    [R_RT + 3] = {"round trip p99, 2 CPUs", "", 0},
    [R_RT + 4] = {"round trip p50, 1 CPU: RLThreadPerform wait", "CF PerformBlock+WakeUp", 0.7},
    [R_RT + 5] = {"round trip p99, 1 CPU", "", 0},
    [R_RT + 6] = {"round trip p50, 2 CPUs: RLThreadPerform wait", "CF PerformBlock+WakeUp", 0.7},
    [R_RT + 7] = {"round trip p99, 2 CPUs", "", 0},
    [R_RT + 8] = {"round trip p50, 1 CPU: WorkerPerformAsync+sem", "CF PerformBlock+WakeUp", 0.7},
    [R_RT + 9] = {"round trip p99, 1 CPU", "", 0},
    [R_RT + 10] = {"round trip p50, 2 CPUs: WorkerPerformAsync+sem", "CF PerformBlock+WakeUp", 0.7},
    [R_RT + 11] = {"round trip p99, 2 CPUs", "", 0},
    [R_CPU + 0] = {"CPU per round trip, 1 CPU: WorkerPerformSync", "CF", 0},
    [R_CPU + 1] = {"CPU per round trip, 2 CPUs: WorkerPerformSync", "CF", 0},
    [R_CPU + 2] = {"CPU per round trip, 1 CPU: ThreadPerform wait", "CF", 0},
    [R_CPU + 3] = {"CPU per round trip, 2 CPUs: ThreadPerform wait", "CF", 0},
    [R_CPU + 4] = {"CPU per round trip, 1 CPU: PerformAsync+sem", "CF", 0},
    [R_CPU + 5] = {"CPU per round trip, 2 CPUs: PerformAsync+sem", "CF", 0},
};

/* CPU time of the process (all threads), ns. */
static int64_t cpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPUs of the placements: the sender on cpu_a; the worker on cpu_a
 * (PL_SAME) or cpu_b (PL_DIFF; -1 if the process may use only one CPU, and
 * the PL_DIFF rows are left out). */
static int cpu_a = -1, cpu_b = -1;
static cpu_set_t main_mask; /* the sender's own mask, restored after (c) */

static void pick_cpus(void) {
    if (pthread_getaffinity_np(pthread_self(), sizeof main_mask, &main_mask) != 0) die("pthread_getaffinity_np");
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &main_mask)) continue;
        if (cpu_a < 0)
            cpu_a = c;
        else if (cpu_b < 0)
            cpu_b = c;
    }
}

static double ours_v[NROWS][MAXROUNDS], peer_v[NROWS][MAXROUNDS], ratio_v[NROWS][MAXROUNDS];
static int nv[NROWS];

static void record(enum row r, double ours, double peer) {
    if (nv[r] >= MAXROUNDS) return;
    ours_v[r][nv[r]] = ours;
    peer_v[r][nv[r]] = peer;
    ratio_v[r][nv[r]] = ours / peer;
    nv[r]++;
}

/* p50 and p99 of one side's samples (sorts them). */
static void pcts(double *v, long n, double *p50, double *p99) {
    *p50 = quantile(v, n, 0.5);
    *p99 = quantile(v, n, 0.99);
}

/* Each round alternates ours and the peer in CHUNKS short chunks (order
 * flipped every chunk), so that a neighbour stealing the CPU for a while
 * hurts both sides alike. */

static void run_round(int round, long n_threads, long n_rt, bool only_threads) {
    long n = n_threads > n_rt ? n_threads : n_rt;
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    if (!a || !b) abort();
    double o50, o99, p50, p99;

    progress("round %d: create->entry", round + 1);
    long ct = n_threads / CHUNKS;
    for (int c = 0; c < CHUNKS; c++) {
        if ((c + round) % 2 == 0) rl_entry_latency(a + c * ct, ct);
        pthread_entry_latency(b + c * ct, ct);
        if ((c + round) % 2 == 1) rl_entry_latency(a + c * ct, ct);
    }
    pcts(a, ct * CHUNKS, &o50, &o99);
    pcts(b, ct * CHUNKS, &p50, &p99);
    record(R_ENTRY50, o50, p50);
    record(R_ENTRY99, o99, p99);

    progress("round %d: create+join", round + 1);
    double oj[CHUNKS], pj[CHUNKS];
    for (int c = 0; c < CHUNKS; c++) {
        if ((c + round) % 2 == 0) oj[c] = rl_create_join(ct);
        pj[c] = pthread_create_join(ct);
        if ((c + round) % 2 == 1) oj[c] = rl_create_join(ct);
    }
    /* The median chunk: one stall of a few ms would swamp a mean. */
    record(R_JOIN, median(oj, CHUNKS), median(pj, CHUNKS));

    if (!only_threads) {
        static const enum perform_kind kinds[] = {PK_WORKER_SYNC, PK_THREAD_WAIT, PK_ASYNC_SIGNAL};
        long cr = n_rt / CHUNKS;
        /* The sender is pinned to cpu_a for (c) only: rows (a) and (b) keep
         * the scheduler's free placement. */
        if (!bth_pin_self(cpu_a)) die("pthread_setaffinity_np (sender)");
        for (int pl = 0; pl < NPLACE; pl++) {
            int wcpu = pl == PL_SAME ? cpu_a : cpu_b;
            if (wcpu < 0) continue;
            for (int k = 0; k < 3; k++) {
                progress("round %d: perform round trips (%d/6)", round + 1, pl * 3 + k + 1);
                rl_worker ours;
                rl_worker_start(&ours, wcpu);
                bth_cf_worker *cf = bth_cf_worker_start(wcpu);
                if (!cf) die("CF worker");
                rl_round_trips(&ours, kinds[k], NULL, cr);
                bth_cf_round_trips(cf, NULL, cr);
                int64_t ocpu = 0, pcpu = 0;
                for (int c = 0; c < CHUNKS; c++) {
                    int64_t c0 = cpu_now_ns();
                    if ((c + round) % 2 == 0) rl_round_trips(&ours, kinds[k], a + c * cr, cr);
                    int64_t c1 = cpu_now_ns();
                    bth_cf_round_trips(cf, b + c * cr, cr);
                    int64_t c2 = cpu_now_ns();
                    if ((c + round) % 2 == 1) rl_round_trips(&ours, kinds[k], a + c * cr, cr);
                    int64_t c3 = cpu_now_ns();
                    ocpu += (c1 - c0) + (c3 - c2);
                    pcpu += c2 - c1;
                }
                record((enum row)(R_CPU + k * NPLACE + pl), (double)ocpu / (double)(cr * CHUNKS),
                       (double)pcpu / (double)(cr * CHUNKS));
                bth_cf_worker_stop(cf);
                rl_worker_stop(&ours);
                pcts(a, cr * CHUNKS, &o50, &o99);
                pcts(b, cr * CHUNKS, &p50, &p99);
                int r = R_RT + (k * NPLACE + pl) * 2;
                record((enum row)r, o50, p50);
                record((enum row)(r + 1), o99, p99);
            }
        }
        if (pthread_setaffinity_np(pthread_self(), sizeof main_mask, &main_mask) != 0) die("restore affinity");
    }
    free(a);
    free(b);
}

/* The rows for the charts (BENCH_CSV, bench_results.h). A p99 row's peer is
 * the one of the p50 row above it, and so is the name of what it measures
 * (the table shows it once). */
static void write_results(void) {
    FILE *f = bench_results_open();
    const char *peer = "", *what = "";
    for (int r = 0; r < NROWS; r++) {
        if (rows[r].peer[0])
            peer = rows[r].peer;
        const char *colon = strchr(rows[r].ours, ':');
        if (colon)
            what = colon;
        if (nv[r] == 0) continue;
        char label[128];
        snprintf(label, sizeof label, "%s%s", rows[r].ours, colon ? "" : what);
        double o = median(ours_v[r], nv[r]), p = median(peer_v[r], nv[r]);
        const char *family = strncmp(peer, "pthread", 7) == 0 ? "pthreads" : "CoreFoundation";
        bench_results_row(f, "threads and perform (C)", label, family, ratio_v[r], nv[r], o / 1e3, p / 1e3,
                          r >= R_CPU ? "us CPU" : "us");
    }
    bench_results_close(f);
}

static void print_table(int rounds, long n_threads, long n_rt, double loop_cost) {
    double load[3] = {0};
    if (getloadavg(load, 3) < 0) load[0] = NAN;
    printf("\nThreads and perform round trips: ours vs raw pthreads vs CoreFoundation (Swift toolchain) — one\n"
           "process, %d round%s, median of the per-round values; %ld CPUs, load average %.1f\n\n",
           rounds, rounds == 1 ? "" : "s", sysconf(_SC_NPROCESSORS_ONLN), load[0]);
    printf("%-49s | %9s | %-24s | %9s | %7s | %7s | %s\n", "ours", "ours us", "peer", "peer us", "ratio", "target",
           "met?");
    printf("%.49s-+-%.9s-+-%.24s-+-%.9s-+-%.7s-+-%.7s-+-%s\n", "--------------------------------------------------",
           "-----------", "----------------------------", "-----------", "---------", "---------", "----");
    int misses = 0, rt_met[NPLACE] = {0}, rt_rows[NPLACE] = {0};
    for (int r = 0; r < NROWS; r++) {
        if (nv[r] == 0) continue;
        double o = median(ours_v[r], nv[r]) / 1e3, p = median(peer_v[r], nv[r]) / 1e3;
        double ratio = median(ratio_v[r], nv[r]);
        char target[16] = "", met[32] = "";
        if (rows[r].target > 0) {
            bool ok = ratio <= rows[r].target;
            misses += !ok;
            if (r >= R_RT) {
                int pl = (r - R_RT) / 2 % NPLACE;
                rt_rows[pl]++;
                rt_met[pl] += ok;
            }
            snprintf(target, sizeof target, "<=%.2fx", rows[r].target);
            snprintf(met, sizeof met, "%s", ok ? "yes" : "NO");
        }
        printf("%-49s | %9.2f | %-24s | %9.2f | %6.2fx | %7s | %s\n", rows[r].ours, o, rows[r].peer, p, ratio, target,
               met);
    }
    printf("\nus = microseconds; ratio = median over rounds of ours/peer. Within a round ours and the peer alternate\n"
           "in %d chunks. (a) create->entry: create call to the entry's first instruction, each thread joined\n"
           "before the next; %ld threads per side per round. (b) create+start+join back to back, %ld per side per\n"
           "round; per thread, the median of the chunks' means. RLThread's default stack is 512 KB, pthread's the\n"
           "system default. (c) %ld timed round trips per side per round (plus %ld warm-up) onto a worker asleep in\n"
           "its run loop; the CF block and our async function post a sem_t that the sender waits on. Each\n"
           "variant, ours and CF alike, runs in two placements: \"1 CPU\" = the sender and the worker pinned to\n"
           "the same CPU (%d); \"2 CPUs\" = the sender on CPU %d, the worker on CPU %d. Unpinned, a round trip lands\n"
           "by chance in one of two modes (a hand-off on one CPU, ~5-8 us here; a wake-up of the other side on an\n"
           "idle CPU, ~50 us) and the peers cannot be compared; pinned, each row compares like with like. Rows\n"
           "(a) and (b) are not pinned. \"CPU per round trip\": the process's CPU time (both threads) over the\n"
           "same round trips: a loop that spins for the next request before it sleeps (rl_spin.h) buys its\n"
           "latency with CPU, and this row shows how much.\n",
           CHUNKS, n_threads, n_threads, n_rt, n_rt / CHUNKS, cpu_a, cpu_a, cpu_b);
    printf("What a thread pays if its run loop is made before its entry runs (an eager loop): the first\n"
           "RLRunLoopGetCurrent on a fresh thread costs %.2f us (p50); the loop's teardown at exit comes on top.\n",
           loop_cost / 1e3);
    static const char *const pl_name[NPLACE] = {"1 CPU (same CPU)", "2 CPUs (different CPUs)"};
    for (int pl = 0; pl < NPLACE; pl++) {
        if (rt_rows[pl] == 0)
            printf("Round-trip target (<=0.70x CF), %s: not measured (the process may use one CPU only).\n",
                   pl_name[pl]);
        else
            printf("Round-trip target (<=0.70x CF), %s: %d of %d variants met%s.\n", pl_name[pl], rt_met[pl],
                   rt_rows[pl], rt_met[pl] == rt_rows[pl] ? " (all)" : "");
    }
    printf("Targets: %s.\n", misses ? "some MISSED (see met?)" : "all met");
}

int main(void) {
    const char *e = getenv("BTH_ROUNDS");
    int rounds = e ? atoi(e) : 9;
    if (rounds < 1) rounds = 1;
    if (rounds > MAXROUNDS) rounds = MAXROUNDS;
    bool quick = getenv("BTH_QUICK") != NULL;
    bool only_threads = getenv("BTH_ONLY_THREADS") != NULL;
    long n_threads = quick ? 200 : 2000;
    long n_rt = quick ? 200 : 2000;
    int64_t t0 = bth_now_ns();
    /* The main thread's RLThread and the multi-threaded switch are one-time
     * costs that no row should carry. */
    RLThreadGetCurrent();
    rl_create_join(16);
    pick_cpus();
    for (int r = 0; r < rounds; r++) run_round(r, n_threads, n_rt, only_threads);
    double loop_cost = first_loop_cost(quick ? 50 : 500);
    progress("");
    print_table(rounds, n_threads, n_rt, loop_cost);
    write_results();
    printf("(whole run: %.0f s)\n", (double)(bth_now_ns() - t0) / 1e9);
    return 0;
}
