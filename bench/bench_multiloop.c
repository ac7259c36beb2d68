/*
 * bench_multiloop.c — K threads, each with its own run loop, each doing one
 * operation over and over on that loop alone: (a) add + remove a timer,
 * (b) perform requests to itself, (c) signal a source + run the pass that
 * performs it, (d) move a timer's date (an idle timeout pushed back),
 * (e) make a timer due + run the pass that fires it, (f) create a timer and
 * release it. K = 1, 2, 4, 8; aggregate operations per second over all K
 * threads, ours against CoreFoundation and libuv (K independent loops) in
 * one process. Each cell is the median of BML_ROUNDS runs (default 5,
 * peers interleaved, order rotated each round); the scaling columns divide
 * the best round at K by the best at K = 1. Thread i of a cell is pinned
 * to the i-th CPU the process may use (BML_PIN=0: not pinned). A peer's work per cell is
 * what it does in about a quarter second at K = 1 (a short probe measures
 * it first), the same for every K, split over the K threads, which start
 * together at a barrier; the rate counts from the barrier to the last
 * thread's end.
 *
 *   bench_multiloop                the table (about half a minute)
 *   BML_QUICK=1 bench_multiloop    a tenth of the work, for a smoke test
 *   BML_ONLY=timer,signal          only these operations (timer, perform, signal, move, fire, create)
 *   BML_PEERS=ours,libuv           only these peers (ours, CF, libuv)
 *   BENCH_CSV=file                 also the rows for the charts (bench_results.h)
 *
 * Scaling "xK1" is the aggregate at K over the same peer's at K = 1: on a
 * machine with C cores, loops that share nothing reach about min(K, C).
 * Built by `make bench-multiloop` (mk/bench-multiloop.mk).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_multiloop.h"
#include "bench_results.h"

enum { P_RL, P_CF, P_UV, NPEERS };
static const bml_peer *peers[NPEERS] = {[P_RL] = &bml_peer_rl, [P_CF] = &bml_peer_cf, [P_UV] = &bml_peer_uv};

static const int ks[] = {1, 2, 4, 8};
enum { NK = sizeof ks / sizeof ks[0], MAXROUNDS = 15 };

static const char *op_names[BML_NOPS] = {"timer", "perform", "signal", "move", "fire", "create"};
static const char *op_labels[BML_NOPS] = {"timer add+remove (M/s)", "perform to itself (M/s)",
                                          "source signal+perform (M/s)", "timer date move (M/s)",
                                          "timer due+fire (M/s)", "timer create+release (M/s)"};
/* Operations per cell at most, split over the K threads; each peer does as
 * many as it manages in about BML_CELL_SECONDS at K = 1 (measured first),
 * so that a slow peer does not stretch the run. */
static const long op_work[BML_NOPS] = {4000000, 2000000, 400000, 4000000, 400000, 2000000};
static const double BML_CELL_SECONDS = 0.25;
static long peer_work[BML_NOPS][NPEERS];

static double samples[BML_NOPS][NK][NPEERS][MAXROUNDS];
static double cpu_samples[BML_NOPS][NK][NPEERS][MAXROUNDS]; /* CPU ns per operation */
static int nsamples[BML_NOPS][NK][NPEERS];

typedef struct {
    const bml_peer *peer;
    enum bml_op op;
    long n;
    int cpu_index; /* the CPU this thread runs on, or -1: unpinned */
    pthread_barrier_t *start;
    double t0, t1, cpu;
} bml_thread;

/* Thread i of a cell runs on the i-th CPU this process may use (modulo
 * their count), for every peer: the scheduler does not move two busy
 * threads onto one CPU for part of a short cell, which made K = 2 swing
 * run to run. BML_PIN=0 leaves placement to the scheduler. */
static cpu_set_t bml_allowed;
static int bml_nallowed;

static void bml_pin_init(void) {
    const char *e = getenv("BML_PIN");
    if ((e && strcmp(e, "0") == 0) || sched_getaffinity(0, sizeof bml_allowed, &bml_allowed) != 0) return;
    bml_nallowed = CPU_COUNT(&bml_allowed);
}

static void bml_pin_self(int index) {
    if (index < 0 || bml_nallowed == 0) return;
    int want = index % bml_nallowed;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &bml_allowed) && want-- == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0)
                fprintf(stderr, "bench_multiloop: could not pin a thread to CPU %d\n", c);
            return;
        }
}

static double bml_thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *bml_thread_main(void *arg) {
    bml_thread *t = arg;
    bml_pin_self(t->cpu_index);
    void *st = t->peer->setup(t->op);
    pthread_barrier_wait(t->start);
    double c0 = bml_thread_cpu();
    t->t0 = bml_now();
    t->peer->run(st, t->op, t->n);
    t->t1 = bml_now();
    t->cpu = bml_thread_cpu() - c0;
    t->peer->finish(st, t->op);
    return NULL;
}

/* Aggregate ops/s of k threads each doing work/k operations of op; *cpu_ns
 * (if not NULL) gets the CPU time they used per operation. */
static double bml_measure_cpu(const bml_peer *peer, enum bml_op op, int k, long work, double *cpu_ns) {
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)k);
    bml_thread th[8];
    pthread_t tid[8];
    long per = work / k;
    if (op == BML_PERFORM || op == BML_CREATE) per -= per % BML_BATCH;
    for (int i = 0; i < k; i++) {
        th[i] = (bml_thread){peer, op, per, i, &start, 0, 0, 0};
        if (pthread_create(&tid[i], NULL, bml_thread_main, &th[i]) != 0) abort();
    }
    double t0 = INFINITY, t1 = 0, cpu = 0;
    for (int i = 0; i < k; i++) {
        pthread_join(tid[i], NULL);
        if (th[i].t0 < t0) t0 = th[i].t0;
        if (th[i].t1 > t1) t1 = th[i].t1;
        cpu += th[i].cpu;
    }
    pthread_barrier_destroy(&start);
    if (cpu_ns) *cpu_ns = cpu / ((double)per * k) * 1e9;
    return (double)per * k / (t1 - t0);
}

static double bml_measure(const bml_peer *peer, enum bml_op op, int k, long work) {
    return bml_measure_cpu(peer, op, k, work, NULL);
}

/* The work per cell for peer p and op: its K = 1 rate from a short probe,
 * times BML_CELL_SECONDS, within [op_work / 100, op_work]. */
static long bml_work(int p, enum bml_op op, bool quick) {
    long max = quick ? op_work[op] / 10 : op_work[op];
    if (peer_work[op][p] == 0) {
        double rate = bml_measure(peers[p], op, 1, op_work[op] / 100);
        double want = rate * (quick ? BML_CELL_SECONDS / 10 : BML_CELL_SECONDS);
        long w = want > (double)max ? max : (long)want;
        peer_work[op][p] = w < op_work[op] / 100 ? op_work[op] / 100 : w;
    }
    return peer_work[op][p];
}

static bool in_list(const char *list, const char *g) {
    if (!list) return true;
    size_t n = strlen(g);
    for (const char *s = list; (s = strstr(s, g)) != NULL; s += n)
        if ((s == list || s[-1] == ',') && (s[n] == '\0' || s[n] == ','))
            return true;
    return false;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double (*s)[NK][NPEERS][MAXROUNDS], int op, int ki, int p) {
    int n = nsamples[op][ki][p];
    if (n == 0) return NAN;
    double v[MAXROUNDS];
    memcpy(v, s[op][ki][p], (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double median(int op, int ki, int p) { return median_of(samples, op, ki, p); }

/* The best round of a cell: what the loops do with the least interference
 * from other processes on the machine. */
static double best(int op, int ki, int p) {
    double b = NAN;
    for (int i = 0; i < nsamples[op][ki][p]; i++)
        if (isnan(b) || samples[op][ki][p][i] > b) b = samples[op][ki][p][i];
    return b;
}

/* The rows for the charts: per operation and K, the per-round time ratios
 * ours/peer (the rates are paired by round: peer rate / ours). */
static void write_results(const char *only, const char *only_peers) {
    FILE *f = bench_results_open();
    if (!f) return;
    for (int op = 0; op < BML_NOPS; op++) {
        if (!in_list(only, op_names[op])) continue;
        for (int ki = 0; ki < NK; ki++) {
            char row[96];
            snprintf(row, sizeof row, "%s, K=%d", op_labels[op], ks[ki]);
            for (int p = 1; p < NPEERS; p++) {
                if (!in_list(only_peers, peers[p]->name) || !in_list(only_peers, peers[P_RL]->name)) continue;
                int n = nsamples[op][ki][P_RL] < nsamples[op][ki][p] ? nsamples[op][ki][P_RL] : nsamples[op][ki][p];
                double r[MAXROUNDS];
                for (int i = 0; i < n; i++) r[i] = samples[op][ki][p][i] / samples[op][ki][P_RL][i];
                bench_results_row(f, "multi-loop", row, peers[p]->name, r, n, median(op, ki, P_RL) * 1e-6,
                                  median(op, ki, p) * 1e-6, "M ops/s");
            }
        }
    }
    bench_results_close(f);
}

static void cell(char *buf, size_t size, double v, const char *fmt) {
    if (isnan(v)) snprintf(buf, size, "-");
    else snprintf(buf, size, fmt, v);
}

int main(void) {
    const char *e = getenv("BML_ROUNDS");
    int rounds = e ? atoi(e) : 5;
    if (rounds < 1) rounds = 1;
    if (rounds > MAXROUNDS) rounds = MAXROUNDS;
    bool quick = getenv("BML_QUICK") != NULL;
    const char *only = getenv("BML_ONLY"), *only_peers = getenv("BML_PEERS");
    bml_pin_init();
    double start = bml_now();
    for (int r = 0; r < rounds; r++)
        for (int op = 0; op < BML_NOPS; op++) {
            if (!in_list(only, op_names[op])) continue;
            for (int ki = 0; ki < NK; ki++)
                for (int j = 0; j < NPEERS; j++) {
                    int p = (j + r) % NPEERS;
                    if (!in_list(only_peers, peers[p]->name)) continue;
                    int at = nsamples[op][ki][p]++;
                    samples[op][ki][p][at] = bml_measure_cpu(peers[p], op, ks[ki], bml_work(p, (enum bml_op)op, quick),
                                                            &cpu_samples[op][ki][p][at]);
                }
        }
    printf("\nMulti-loop: K threads, each with its own loop; aggregate M ops/s (median of %d)\n", rounds);
    printf("%-29s %2s %8s %8s %8s | %6s %6s %6s | %7s %7s\n", "operation", "K", "ours", "CF", "libuv",
           "ours", "CF", "libuv", "ours/CF", "ours/uv");
    printf("%-29s %2s %8s %8s %8s | %6s %6s %6s | %7s %7s\n", "", "", "", "", "", "xK1*", "xK1*", "xK1*", "", "");
    for (int op = 0; op < BML_NOPS; op++) {
        if (!in_list(only, op_names[op])) continue;
        for (int ki = 0; ki < NK; ki++) {
            double v[NPEERS], sc[NPEERS];
            char c[NPEERS][16], s[NPEERS][16], rcf[16], ruv[16];
            for (int p = 0; p < NPEERS; p++) {
                v[p] = median(op, ki, p);
                sc[p] = best(op, ki, p) / best(op, 0, p);
                cell(c[p], sizeof c[p], v[p] * 1e-6, "%.2f");
                cell(s[p], sizeof s[p], sc[p], "%.2f");
            }
            cell(rcf, sizeof rcf, v[P_RL] / v[P_CF], "%.2f");
            cell(ruv, sizeof ruv, v[P_RL] / v[P_UV], "%.2f");
            printf("%-29s %2d %8s %8s %8s | %6s %6s %6s | %7s %7s\n", ki == 0 ? op_labels[op] : "", ks[ki], c[P_RL],
                   c[P_CF], c[P_UV], s[P_RL], s[P_CF], s[P_UV], rcf, ruv);
        }
    }
    printf("* scaling: the best round at K over the best at K = 1 (each cell's capacity with the least\n"
           "  interference from other processes); ");
    if (bml_nallowed) printf("thread i of a cell runs on allowed CPU i mod %d.\n", bml_nallowed);
    else printf("threads not pinned (BML_PIN=0).\n");
    printf("Target: ours at K=2 >= 1.8x ours at K=1 for every operation, and ahead of CF at every K.\n");
    /* CPU per operation does not depend on how many CPUs other processes
     * leave free: loops that share nothing keep it flat as K grows, while
     * a shared lock makes it grow (its line bounces between the CPUs). */
    printf("\nCPU time per operation, all K threads (ns; flat in K = nothing shared)\n");
    printf("%-29s %8s %8s %8s %8s\n", "operation / peer", "K=1", "K=2", "K=4", "K=8");
    for (int op = 0; op < BML_NOPS; op++) {
        if (!in_list(only, op_names[op])) continue;
        for (int p = 0; p < NPEERS; p++) {
            if (!in_list(only_peers, peers[p]->name)) continue;
            char label[64], c[NK][16];
            snprintf(label, sizeof label, "%s / %s", op_names[op], peers[p]->name);
            for (int ki = 0; ki < NK; ki++) cell(c[ki], sizeof c[ki], median_of(cpu_samples, op, ki, p), "%.0f");
            printf("%-29s %8s %8s %8s %8s\n", label, c[0], c[1], c[2], c[3]);
        }
    }
    printf("libuv's loops take no lock at all; ours/uv is the price of ours being thread-safe.\n");
    write_results(only, only_peers);
    double load[3] = {NAN, NAN, NAN};
    getloadavg(load, 3);
    printf("(whole run: %.0f s, %ld CPUs, load average %.1f: other processes share the CPUs)\n", bml_now() - start,
           sysconf(_SC_NPROCESSORS_ONLN), load[0]);
    return 0;
}
