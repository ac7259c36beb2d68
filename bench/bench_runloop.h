/*
 * bench_runloop.h — the run-loop benchmark: one interface that every peer implements in its own translation unit
 * (bench_runloop_cf.c, built twice: CoreFoundation from the Swift toolchain
 * with -DBRL_CF, ours through cf_compat.h without; _uv.c: libuv; _glib.c:
 * GLib), because CoreFoundation's headers and ours cannot share one file.
 * bench_runloop.c runs them all in one process and prints one table.
 *
 * Every benchmark returns a brl_result; ok == false means the peer has no
 * equivalent (note says why) or the run failed. Units are fixed per entry
 * (see brl_peer). Helpers shared by the peers are static inline here so
 * each file stays self-contained.
 */
#ifndef BENCH_RUNLOOP_H
#define BENCH_RUNLOOP_H

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* On the first member of a struct that two threads share (a producer's
 * and its consumer's): the struct starts a cache line and fills its
 * lines (its size rounds up to them), so nothing else shares them. Such
 * a struct lives on the producer's stack, where without this the
 * consumer's writes shared a line with the producer's own frame in some
 * processes and not others (the stack's offset is randomized): ours'
 * perform rows fell from ~23/~41 to 9-16 M/s in about 1 run in 4, and in
 * none of 6 with address randomization off (setarch -R) or 8 with this. */
#define BRL_OWN_LINES _Alignas(64)

typedef struct brl_result {
    bool ok;
    double v[4]; /* v[2], v[3]: only where an entry says so, else NAN */
    char note[120];
} brl_result;

/* A sleeping loop started by idle_start, measured by idle_finish. */
typedef struct brl_idle brl_idle;

typedef struct brl_peer {
    const char *name;
    /* n PerformBlock + WakeUp from another thread; v[0] = operations/s. */
    brl_result (*perform_block)(long n);
    /* The same with a function + argument (the queue form); v[0] = ops/s. */
    brl_result (*perform_queue)(long n);
    /* Two threads' loops passing a signal back and forth n times;
     * v[0] = p50, v[1] = p99 round trip in ns. */
    brl_result (*pingpong)(long n);
    /* Add n far-future timers to a loop in the default mode, then remove
     * them (at most max_removals are timed); v[0] = add, v[1] = remove,
     * ns per operation. */
    brl_result (*timers)(long n, long max_removals);
    /* A 1 ms repeating timer beside idle far-future timers, run for `fires`
     * fires; v[0] = CPU ns of the loop thread per fire. */
    brl_result (*per_fire)(long idle_timers, long fires);
    /* A 1 ms repeating timer fired `fires` times; v[0] = p50, v[1] = p99
     * lateness in ns; v[2] = p50 ns from the loop thread's last return from
     * epoll_wait to the callout (brl_wake_last), NAN for a loop that does
     * not wait in epoll_wait; v[3] = grid points skipped (missed ticks),
     * NAN for a timer not on a fixed grid (libuv, GLib). */
    brl_result (*lateness)(long fires);
    /* Starts a thread whose loop sleeps (one far-future timer, one source);
     * returns once it is asleep. */
    brl_idle *(*idle_start)(void);
    /* v[0] = CPU seconds the thread used since idle_start, v[1] = wake-ups
     * (after-waiting events) since idle_start; then stops and joins it. */
    brl_result (*idle_finish)(brl_idle *idle);
    /* n one-pass iterations of a loop with one (never signalled) source;
     * v[0] = ns per iteration without an observer, v[1] = with an
     * all-activities observer. */
    brl_result (*observer)(long n);
    /* fds a loop on a new thread holds after running in `modes` modes. */
    brl_result (*fds)(int modes);
    /* Timer objects made and released (no loop involved): v[0] = ns per
     * create + release, one timer at a time (n times); v[1] = ns per timer
     * when n are created, then all released. NULL: no such objects. */
    brl_result (*objects)(long n);
    /* n sources (orders 0..4 interleaved) in a mode, all signalled, then
     * one pass that performs them; v[0] = ns per source (signal + perform).
     * NULL: no run-loop sources. */
    brl_result (*signal_sources)(long n);
    /* Add n far-future timers to the common modes, then remove them (at
     * most max_removals timed, in random order); v[0] = add, v[1] = remove,
     * ns per operation. NULL: no common modes. */
    brl_result (*common_timers)(long n, long max_removals);
    /* One far-future timer added to a loop and removed again, n times in a
     * hot loop on the loop's thread; v[0] = add+remove pairs per second. */
    brl_result (*timer_addrm)(long n);
    /* The guide's custom input source (Apple's Run Loops guide, Listings
     * 3-3 to 3-8), fed from another thread: the producer appends a command
     * to a mutex-protected queue (brl_cmdq), then signals the loop's source
     * and wakes the loop; the consumer's perform takes the whole queue.
     * libuv: the same queue + uv_async_send; GLib: the same queue + a
     * GSource set ready. v[0] = commands per second. */
    brl_result (*guide_source)(long n);
} brl_peer;

/* CLOCK_MONOTONIC seconds at the calling thread's last return from
 * epoll_wait: bench_runloop.c wraps epoll_wait for the whole process, the
 * run loops in libraries included (CoreFoundation's too). 0: none yet. */
double brl_wake_last(void);

extern const brl_peer brl_peer_rl;
extern const brl_peer brl_peer_cf;
extern const brl_peer brl_peer_uv;
extern const brl_peer brl_peer_glib;

/* ---- helpers ---------------------------------------------------------- */

static inline brl_result brl_ok(double a, double b) {
    brl_result r = {.ok = true, .v = {a, b, NAN, NAN}};
    return r;
}

static inline brl_result brl_none(const char *why) {
    brl_result r = {.ok = false, .v = {NAN, NAN, NAN, NAN}};
    snprintf(r.note, sizeof r.note, "%s", why);
    return r;
}

static inline double brl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double brl_clock_seconds(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return NAN;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds used by the calling thread. */
static inline double brl_self_cpu(void) { return brl_clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

/* CPU seconds used by another thread of this process. */
static inline double brl_thread_cpu(pthread_t t) {
    clockid_t c;
    if (pthread_getcpuclockid(t, &c) != 0) return NAN;
    return brl_clock_seconds(c);
}

static inline void brl_sleep(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Open descriptors of this process. */
static inline int brl_count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory stream's own fd */
}

static int brl_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of v[0..n); sorts v. */
static inline double brl_quantile(double *v, long n, double q) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, brl_cmp_double);
    long i = (long)(q * (double)(n - 1) + 0.5);
    return v[i];
}

static inline uint64_t brl_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* A random permutation of 0..n-1, the same for every peer with one seed.
 * malloc'ed. */
static inline long *brl_permutation(long n, uint64_t seed) {
    long *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) abort();
    for (long i = 0; i < n; i++) p[i] = i;
    uint64_t s = seed | 1;
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(brl_rand(&s) % (uint64_t)(i + 1));
        long t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    return p;
}

/* The timer benchmarks' shared plan: timer i fires at slot pos[i] (random
 * order of fire dates), removal j removes timer rm[j] (random order), and
 * untimed clean-up removes the rest in fire-date order (by_pos[slot] = the
 * timer in that slot), which keeps CoreFoundation's O(n) scans short. */
typedef struct brl_timer_plan {
    long n;
    long *pos, *rm, *by_pos;
    bool *removed;
} brl_timer_plan;

static inline brl_timer_plan brl_timer_plan_make(long n) {
    brl_timer_plan p = {.n = n};
    p.pos = brl_permutation(n, 0x9e3779b97f4a7c15ULL);
    p.rm = brl_permutation(n, 0xd1b54a32d192ed03ULL);
    p.by_pos = malloc((size_t)(n > 0 ? n : 1) * sizeof *p.by_pos);
    p.removed = calloc((size_t)(n > 0 ? n : 1), sizeof *p.removed);
    if (!p.by_pos || !p.removed) abort();
    for (long i = 0; i < n; i++) p.by_pos[p.pos[i]] = i;
    return p;
}

static inline void brl_timer_plan_free(brl_timer_plan *p) {
    free(p->pos);
    free(p->rm);
    free(p->by_pos);
    free(p->removed);
}

/* Runs fn(arg) on a new thread and waits for it (so that each measurement
 * gets a fresh run loop and its teardown is not timed inside fn). */
static inline void brl_run_on_thread(void *(*fn)(void *), void *arg) {
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0) abort();
    pthread_join(t, NULL);
}

/* The observer benchmark alternates this many chunks with and without the
 * observer and keeps the fastest of each kind. */
#define BRL_CHUNKS 10

/* Repetitions for the timer benchmark at size n (more for small n, whose
 * single runs are too short to time well). */
static inline int brl_timer_reps(long n) { return n <= 1000 ? 15 : n <= 10000 ? 5 : 3; }

/* Lateness bookkeeping for a timer on a fixed grid t0 + k * interval (ours,
 * CF): the fire is measured against the grid point it stands for; a fire
 * that missed periods is measured against the first missed one and the next
 * expected point is the first grid point after now (CF's rule). */
typedef struct brl_grid {
    double t0, interval;
    long k;
    long missed; /* grid points passed over without a fire of their own */
} brl_grid;

static inline double brl_grid_fire(brl_grid *g, double now) {
    double late = now - (g->t0 + (double)g->k * g->interval);
    long next = (long)floor((now - g->t0) / g->interval) + 1;
    if (next > g->k + 1) g->missed += next - (g->k + 1);
    g->k = next > g->k + 1 ? next : g->k + 1;
    return late;
}

/* The guide pattern's command queue (guide_source): commands appended
 * under a mutex to a growable array, which the consumer swaps out whole
 * for its spare one. No malloc per command once warm, for every peer. */
typedef struct brl_cmdq {
    pthread_mutex_t mu;
    long *in, nin, capin;
    long *spare, capspare;
} brl_cmdq;

static inline void brl_cmdq_init(brl_cmdq *q) {
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
}

static inline void brl_cmdq_destroy(brl_cmdq *q) {
    pthread_mutex_destroy(&q->mu);
    free(q->in);
    free(q->spare);
}

static inline void brl_cmdq_push(brl_cmdq *q, long cmd) {
    pthread_mutex_lock(&q->mu);
    if (q->nin == q->capin) {
        q->capin = q->capin ? 2 * q->capin : 64;
        q->in = realloc(q->in, (size_t)q->capin * sizeof *q->in);
        if (!q->in) abort();
    }
    q->in[q->nin++] = cmd;
    pthread_mutex_unlock(&q->mu);
}

/* Takes the whole queue; returns how many commands it held (their sum
 * into *sum, so that the commands are read). */
static inline long brl_cmdq_take(brl_cmdq *q, long *sum) {
    pthread_mutex_lock(&q->mu);
    long *got = q->in, n = q->nin, cap = q->capin;
    q->in = q->spare;
    q->capin = q->capspare;
    q->nin = 0;
    pthread_mutex_unlock(&q->mu);
    for (long i = 0; i < n; i++) *sum += got[i];
    q->spare = got;
    q->capspare = cap;
    return n;
}

#endif /* BENCH_RUNLOOP_H */
