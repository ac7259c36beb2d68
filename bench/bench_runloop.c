/*
 * bench_runloop.c — the run-loop benchmark table:
 * ours (CRunLoop) against CoreFoundation's run loop from the Swift
 * toolchain, libuv and GLib, all in this one process run. Every benchmark
 * is run BRL_ROUNDS times (default 3, peers interleaved, order rotated each
 * round) and the table shows medians; the idle-loop row runs once, with all
 * four loops sleeping side by side for BRL_IDLE_SECONDS (default 3).
 *
 *   bench_runloop            the full table (about a minute)
 *   BRL_ROUNDS=1 bench_runloop
 *   BRL_QUICK=1 bench_runloop   smaller counts, for a smoke test
 *   BRL_ONLY=perform,timers    only these groups (perform, guide, pingpong, timers, fire,
 *                              observer, fds, scale, objects, idle)
 *   BRL_PEERS=ours,libuv       only these peers (ours, CF, libuv, GLib)
 *
 * Built by `make bench-runloop` (mk/bench-runloop.mk). Compiling with
 * -DBRL_NO_RL leaves our peer out, to try the peers alone.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "bench_results.h"
#include "bench_runloop.h"

enum { P_RL, P_CF, P_UV, P_GLIB, NPEERS };

static const brl_peer *peers[NPEERS] = {
#ifndef BRL_NO_RL
    [P_RL] = &brl_peer_rl,
#endif
    [P_CF] = &brl_peer_cf,
    [P_UV] = &brl_peer_uv,
    [P_GLIB] = &brl_peer_glib,
};

enum metric {
    M_PERF_BLOCK,
    M_PERF_QUEUE,
    M_PP50,
    M_PP99,
    M_ADD1K,
    M_RM1K,
    M_ADD10K,
    M_RM10K,
    M_ADD100K,
    M_RM100K,
    M_FIRE0,
    M_FIRE10K,
    M_LATE50,
    M_LATE99,
    M_WAKE50,
    M_IDLE_CPU,
    M_IDLE_WAKES,
    M_ITER,
    M_OBS,
    M_FDS,
    M_OBJ1,
    M_OBJN,
    M_SIG1K,
    M_SIG10K,
    M_SIG100K,
    M_CADD1K,
    M_CADD10K,
    M_CADD100K,
    M_CRM100K,
    M_ADDRM,
    M_FLOOR50,
    M_MISSED,
    M_FLOOR_MISSED,
    M_GUIDE,
    M_GUIDE_STEADY,
    NMETRICS
};

enum target { T_NONE, T_BLOCK, T_QUEUE, T_P50, T_TIMERS100K, T_ADD100K, T_FIRE, T_ZERO, T_CF, T_FLOOR, T_GUIDE, T_STEADY, T_FLOORROW };

typedef struct {
    const char *label;
    double scale; /* displayed value = raw * scale */
    bool higher_better;
    enum target target;
    const char *target_text;
} metric_info;

static const metric_info metrics[NMETRICS] = {
    [M_PERF_BLOCK] = {"perform block+WakeUp, other thread (M/s)", 1e-6, true, T_BLOCK, ">= 20x CF"},
    [M_PERF_QUEUE] = {"perform queue form, other thread (M/s)", 1e-6, true, T_QUEUE, ">= libuv"},
    [M_PP50] = {"v0 ping-pong round trip p50 (us)", 1e-3, false, T_P50, "<= best peer"},
    [M_PP99] = {"v0 ping-pong round trip p99 (us)", 1e-3, false, T_NONE, ""},
    [M_ADD1K] = {"timer add, N=1k (ns/op)", 1, false, T_NONE, ""},
    [M_RM1K] = {"timer remove, N=1k (ns/op)", 1, false, T_NONE, ""},
    [M_ADD10K] = {"timer add, N=10k (ns/op)", 1, false, T_NONE, ""},
    [M_RM10K] = {"timer remove, N=10k (ns/op)", 1, false, T_NONE, ""},
    [M_ADD100K] = {"timer add, N=100k (ns/op)", 1, false, T_ADD100K, "<=25 ns, < uv,GLib"},
    [M_RM100K] = {"timer remove, N=100k (ns/op) [a]", 1, false, T_TIMERS100K, ">=100x CF, <=2x uv"},
    [M_FIRE0] = {"1 ms timer, CPU per fire, 0 idle (ns)", 1, false, T_NONE, ""},
    [M_FIRE10K] = {"1 ms timer, CPU per fire, 10k idle (ns)", 1, false, T_FIRE, "<= 1.5x ours@0"},
    [M_LATE50] = {"1 ms timer lateness p50 (us) [b]", 1e-3, false, T_FLOOR, "<= 1.1x floor"},
    [M_LATE99] = {"1 ms timer lateness p99 (us) [b]", 1e-3, false, T_CF, "<= CF"},
    [M_WAKE50] = {"1 ms timer, wake -> callout p50 (ns) [h]", 1, false, T_CF, "<= CF"},
    [M_IDLE_CPU] = {"idle loop CPU over 3 s (us)", 1e6, false, T_NONE, ""},
    [M_IDLE_WAKES] = {"idle loop wake-ups over 3 s", 1, false, T_ZERO, "0"},
    [M_ITER] = {"loop iteration, no observer (ns) [c]", 1, false, T_NONE, ""},
    [M_OBS] = {"all-activities observer, +ns/iter [c]", 1, false, T_NONE, ""},
    [M_FDS] = {"fds per loop, 5 modes [d]", 1, false, T_NONE, ""},
    [M_OBJ1] = {"timer create+release 1-by-1 (ns) [g]", 1, false, T_NONE, ""},
    [M_OBJN] = {"timer create+release 10k batch (ns) [g]", 1, false, T_NONE, ""},
    [M_SIG1K] = {"signal N sources + 1 pass, N=1k (ns/src) [e]", 1, false, T_NONE, ""},
    [M_SIG10K] = {"signal N sources + 1 pass, N=10k (ns/src)", 1, false, T_NONE, ""},
    [M_SIG100K] = {"signal N sources + 1 pass, N=100k (ns/src)", 1, false, T_NONE, ""},
    [M_CADD1K] = {"timer add, common modes, N=1k (ns/op) [f]", 1, false, T_NONE, ""},
    [M_CADD10K] = {"timer add, common modes, N=10k (ns/op)", 1, false, T_NONE, ""},
    [M_CADD100K] = {"timer add, common modes, N=100k (ns/op)", 1, false, T_NONE, ""},
    [M_CRM100K] = {"timer remove, common, N=100k (ns/op) [a]", 1, false, T_NONE, ""},
    [M_ADDRM] = {"timer add+remove, hot loop, one loop (M/s)", 1e-6, true, T_QUEUE, ">= libuv"},
    [M_FLOOR50] = {"floor: timerfd+epoll_wait p50 (us) [b]", 1e-3, false, T_FLOORROW, "(no loop)"},
    [M_MISSED] = {"1 ms timer, missed ticks over 2 s [b]", 1, false, T_ZERO, "0"},
    [M_FLOOR_MISSED] = {"floor: missed ticks over 2 s [b]", 1, false, T_FLOORROW, "(no loop)"},
    [M_GUIDE] = {"guide source, other thread (M/s) [i]", 1e-6, true, T_GUIDE, ">= 1.2x libuv"},
    [M_GUIDE_STEADY] = {"guide source, slowest run / median [i]", 1, true, T_STEADY, ">= 0.8"},
};

#define MAXROUNDS 16
static double samples[NPEERS][NMETRICS][MAXROUNDS];
static int nsamples[NPEERS][NMETRICS];

/* The machine's own floor for the lateness rows, measured each round
 * beside the peers: p50 and p99 (ns) of a bare thread sleeping in
 * epoll_wait on a timerfd armed for each point of the same 1 ms grid. */
static double floor_samples[2][MAXROUNDS];
static int nfloor;

#define MAXNOTES 32
static char notes[MAXNOTES][sizeof(((brl_result *)0)->note)];
static int nnotes;

static void add_note(const char *text) {
    if (!text[0]) return;
    for (int i = 0; i < nnotes; i++)
        if (strcmp(notes[i], text) == 0) return;
    if (nnotes < MAXNOTES) snprintf(notes[nnotes++], sizeof notes[0], "%s", text);
}

static void record(int p, enum metric m, double v) {
    if (nsamples[p][m] < MAXROUNDS && !isnan(v)) samples[p][m][nsamples[p][m]++] = v;
}

static void record_result(int p, brl_result r, enum metric m0, int m1) {
    add_note(r.note);
    if (!r.ok) return;
    record(p, m0, r.v[0]);
    if (m1 >= 0) record(p, (enum metric)m1, r.v[1]);
}

static double median(int p, enum metric m) {
    int n = nsamples[p][m];
    if (n == 0) return NAN;
    double tmp[MAXROUNDS];
    memcpy(tmp, samples[p][m], (size_t)n * sizeof *tmp);
    qsort(tmp, (size_t)n, sizeof *tmp, brl_cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, brl_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A one-line progress indicator on a terminal; nothing when stderr is a
 * file or pipe. */
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

static bool quick;
static const char *only; /* BRL_ONLY: comma-separated groups to run, NULL: all */

/* Whether group g (perform, pingpong, timers, fire, observer, fds) runs. */
static bool in_list(const char *list, const char *g) {
    if (!list) return true;
    size_t n = strlen(g);
    for (const char *s = list; (s = strstr(s, g)) != NULL; s += n)
        if ((s == list || s[-1] == ',') && (s[n] == '\0' || s[n] == ','))
            return true;
    return false;
}
static bool want(const char *g) { return in_list(only, g); }
/* BRL_PEERS: comma-separated peer names (ours, CF, libuv, GLib), NULL: all. */
static const char *only_peers;
static bool want_peer(const char *name) { return in_list(only_peers, name); }

/* [h] The time a loop's own code takes between the kernel's wake-up and a
 * timer's callout: every epoll_wait of the process (ours and CF's run loops
 * alike, and libuv's where it calls it) comes here, which notes the time
 * it returned for the calling thread; the callout reads it. The executable
 * exports this definition (mk/bench-runloop.mk), so that the libraries'
 * calls reach it too. */
typedef int epoll_wait_fn(int, struct epoll_event *, int, int);
static _Atomic(epoll_wait_fn *) real_epoll_wait;
static __thread double wake_last;
static atomic_bool wake_probe; /* only during the lateness runs: no clock read in the other rows */

double brl_wake_last(void) { return wake_last; }

__attribute__((visibility("default"))) int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                                                    int timeout) {
    epoll_wait_fn *real = atomic_load_explicit(&real_epoll_wait, memory_order_relaxed);
    if (!real) {
        real = (epoll_wait_fn *)dlsym(RTLD_NEXT, "epoll_wait");
        if (!real) abort();
        atomic_store_explicit(&real_epoll_wait, real, memory_order_relaxed);
    }
    int n = real(epfd, events, maxevents, timeout);
    if (atomic_load_explicit(&wake_probe, memory_order_relaxed)) wake_last = brl_now();
    return n;
}

/* The lateness floor: what a thread that does nothing but sleep on a
 * timerfd (absolute CLOCK_MONOTONIC expiries, each grid point armed after
 * the last fire) and wake in epoll_wait gets from this machine, measured
 * as the peers' rows are (brl_grid, the first 2% skipped). A run loop
 * cannot beat it; what it adds on top is its own wake path. Over 2 s, as
 * the loops' lateness runs: the grid points it passes over are the
 * machine's own missed ticks (a thread not run for a millisecond). */
static void *floor_thread(void *arg) {
    brl_result *r = arg;
    long fires = quick ? 200 : 2000;
    double *late = malloc((size_t)fires * sizeof *late);
    int ep = epoll_create1(EPOLL_CLOEXEC), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    if (!late || ep < 0 || tfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) {
        *r = brl_none("lateness floor: no timerfd/epoll");
        goto out;
    }
    brl_grid g = {.t0 = brl_now() + 0.005, .interval = 0.001};
    for (long i = 0; i < fires; i++) {
        double at = g.t0 + (double)g.k * g.interval;
        struct itimerspec its = {.it_value = {(time_t)at, (long)((at - floor(at)) * 1e9)}};
        uint64_t ticks;
        if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0 || epoll_wait(ep, &ev, 1, -1) != 1 ||
            read(tfd, &ticks, sizeof ticks) != (ssize_t)sizeof ticks) {
            *r = brl_none("lateness floor: timerfd/epoll failed");
            goto out;
        }
        late[i] = brl_grid_fire(&g, brl_now());
    }
    long skip = fires / 50;
    *r = brl_ok(brl_quantile(late + skip, fires - skip, 0.5) * 1e9, brl_quantile(late + skip, fires - skip, 0.99) * 1e9);
    r->v[2] = (double)g.missed;
out:
    if (tfd >= 0) close(tfd);
    if (ep >= 0) close(ep);
    free(late);
    return NULL;
}

static void run_floor(void) {
    brl_result r;
    brl_run_on_thread(floor_thread, &r);
    add_note(r.note);
    if (r.ok && nfloor < MAXROUNDS) {
        floor_samples[0][nfloor] = r.v[0];
        floor_samples[1][nfloor] = r.v[1];
        nfloor++;
        record(P_RL, M_FLOOR50, r.v[0]);
        record(P_RL, M_FLOOR_MISSED, r.v[2]);
    }
}

/* One run of the timer benchmark at size n, median over brl_timer_reps(n)
 * repetitions (one for CF at 100k). At N = 100k only the first K100
 * random-order removals are timed, for every peer (CF's are O(n) each: all
 * 100k would take ~20 s). */
static void run_timers(int p, long n, enum metric madd, enum metric mrm) {
    enum { K100 = 2000 };
    int reps = brl_timer_reps(n);
    if (quick && reps > 3) reps = 3;
    if (p == P_CF && n >= 100000) reps = 1; /* ~0.5 s a repetition */
    double add[32], rm[32];
    int got = 0;
    for (int r = 0; r < reps && r < 32; r++) {
        brl_result res = peers[p]->timers(n, n >= 100000 ? K100 : n);
        add_note(res.note);
        if (!res.ok) return;
        add[got] = res.v[0];
        rm[got] = res.v[1];
        got++;
    }
    record(p, madd, median_of(add, got));
    record(p, mrm, median_of(rm, got));
}

/* The scale rows at size n: the median of brl_timer_reps(n) repetitions
 * (one for a peer whose repetition takes over a second). */
static void run_scale(int p, long n, enum metric msig, enum metric madd, int mrm) {
    enum { K100 = 2000 };
    int reps = brl_timer_reps(n);
    if (quick && reps > 3) reps = 3;
    const brl_peer *peer = peers[p];
    for (int which = 0; which < 2; which++) {
        double a[32], b[32];
        int got = 0;
        for (int r = 0; r < reps && r < 32; r++) {
            double t0 = brl_now();
            brl_result res = which == 0 ? peer->signal_sources(n) : peer->common_timers(n, n >= 100000 ? K100 : n);
            add_note(res.note);
            if (!res.ok) break;
            a[got] = res.v[0];
            b[got] = res.v[1];
            got++;
            if (brl_now() - t0 > 1.0) break;
        }
        if (got == 0) continue;
        record(p, which == 0 ? msig : madd, median_of(a, got));
        if (which == 1 && mrm >= 0) record(p, (enum metric)mrm, median_of(b, got));
    }
}

/* The guide rows' steadiness: each peer's slowest run over its median. */
static void record_steadiness(void) {
    for (int p = 0; p < NPEERS; p++) {
        int n = nsamples[p][M_GUIDE];
        if (n == 0) continue;
        double lo = samples[p][M_GUIDE][0];
        for (int i = 1; i < n; i++)
            if (samples[p][M_GUIDE][i] < lo) lo = samples[p][M_GUIDE][i];
        record(p, M_GUIDE_STEADY, lo / median(p, M_GUIDE));
    }
}

static void run_round(int round) {
    long n_perf = quick ? 100000 : 1000000;
    long n_pp = quick ? 2000 : 10000;
    long fires = quick ? 100 : 300;
    long late_fires = quick ? 200 : 2000; /* 2 s: the missed-ticks row */
    long n_guide = quick ? 100000 : 1000000;
    long n_iter = quick ? 20000 : 100000;
    long n_obj = quick ? 2000 : 10000;
    if (want("fire")) {
        progress("round %d: lateness floor", round + 1);
        run_floor();
    }
    for (int k = 0; k < NPEERS; k++) {
        int p = (k + round) % NPEERS;
        const brl_peer *peer = peers[p];
        if (!peer || !want_peer(peer->name)) continue;
        if (want("perform")) {
            progress("round %d: %s perform", round + 1, peer->name);
            /* The cross-thread rows swing most: three runs a round, but one
             * for a peer whose run takes long (CF's and GLib's ~1 s). */
            for (int rep = 0; rep < 3; rep++) {
                double t0 = brl_now();
                record_result(p, peer->perform_block(n_perf), M_PERF_BLOCK, -1);
                record_result(p, peer->perform_queue(n_perf), M_PERF_QUEUE, -1);
                if (brl_now() - t0 > 0.5) break;
            }
        }
        if (want("guide") && peer->guide_source) {
            progress("round %d: %s guide source", round + 1, peer->name);
            /* Five runs a round: the steadiness row is the slowest of all
             * runs over their median. */
            for (int rep = 0; rep < 5; rep++) record_result(p, peer->guide_source(n_guide), M_GUIDE, -1);
        }
        if (want("timers") && peer->timer_addrm) {
            progress("round %d: %s timer add+remove", round + 1, peer->name);
            double v[5];
            int got = 0;
            for (int rep = 0; rep < 5; rep++) {
                brl_result r = peer->timer_addrm(quick ? 200000 : 2000000);
                add_note(r.note);
                if (r.ok) v[got++] = r.v[0];
            }
            if (got) record(p, M_ADDRM, median_of(v, got));
        }
        if (want("pingpong")) {
            progress("round %d: %s ping-pong", round + 1, peer->name);
            record_result(p, peer->pingpong(n_pp), M_PP50, M_PP99);
        }
        if (want("timers")) {
            progress("round %d: %s timers", round + 1, peer->name);
            run_timers(p, 1000, M_ADD1K, M_RM1K);
            run_timers(p, 10000, M_ADD10K, M_RM10K);
            run_timers(p, 100000, M_ADD100K, M_RM100K);
        }
        if (want("fire")) {
            progress("round %d: %s timer fires", round + 1, peer->name);
            record_result(p, peer->per_fire(0, fires), M_FIRE0, -1);
            record_result(p, peer->per_fire(10000, fires), M_FIRE10K, -1);
            atomic_store(&wake_probe, true);
            brl_result late = peer->lateness(late_fires);
            atomic_store(&wake_probe, false);
            record_result(p, late, M_LATE50, M_LATE99);
            if (late.ok) record(p, M_WAKE50, late.v[2]);
            if (late.ok) record(p, M_MISSED, late.v[3]);
        }
        if (want("observer")) {
            progress("round %d: %s observer", round + 1, peer->name);
            brl_result o = peer->observer(n_iter);
            add_note(o.note);
            if (o.ok) {
                record(p, M_ITER, o.v[0]);
                record(p, M_OBS, o.v[1] - o.v[0]);
            }
        }
        if (want("fds")) {
            progress("round %d: %s fds", round + 1, peer->name);
            record_result(p, peer->fds(5), M_FDS, -1);
        }
        if (want("objects") && peer->objects) {
            progress("round %d: %s objects", round + 1, peer->name);
            for (int rep = 0; rep < 3; rep++) record_result(p, peer->objects(n_obj), M_OBJ1, M_OBJN);
        }
        if (want("scale") && peer->signal_sources && peer->common_timers) {
            progress("round %d: %s scale", round + 1, peer->name);
            run_scale(p, 1000, M_SIG1K, M_CADD1K, -1);
            run_scale(p, 10000, M_SIG10K, M_CADD10K, -1);
            run_scale(p, 100000, M_SIG100K, M_CADD100K, M_CRM100K);
        }
    }
}

static void run_idle(double seconds) {
    brl_idle *d[NPEERS] = {0};
    progress("idle loops: %.0f s", seconds);
    for (int p = 0; p < NPEERS; p++)
        if (peers[p] && want_peer(peers[p]->name)) d[p] = peers[p]->idle_start();
    brl_sleep(seconds);
    for (int p = 0; p < NPEERS; p++) {
        if (!peers[p] || !want_peer(peers[p]->name)) continue;
        brl_result r = peers[p]->idle_finish(d[p]);
        record_result(p, r, M_IDLE_CPU, M_IDLE_WAKES);
    }
}

static void fmt_value(char *buf, size_t size, double v) {
    if (isnan(v))
        snprintf(buf, size, "-");
    else if (fabs(v) >= 100 || v == floor(v))
        snprintf(buf, size, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(buf, size, "%.1f", v);
    else
        snprintf(buf, size, "%.2f", v);
}

/* ours / peer p for row m, round by round (each round's two values are
 * neighbours in time): the median into *med, the extremes into *lo and
 * *hi; the number of rounds paired. */
static int paired_ratio(enum metric m, int p, double *med, double *lo, double *hi) {
    int n = nsamples[P_RL][m] < nsamples[p][m] ? nsamples[P_RL][m] : nsamples[p][m];
    double r[MAXROUNDS];
    int k = 0;
    for (int i = 0; i < n; i++) {
        double ratio = samples[P_RL][m][i] / samples[p][m][i];
        if (isfinite(ratio)) r[k++] = ratio;
    }
    if (k == 0) return 0;
    *lo = *hi = r[0];
    for (int i = 1; i < k; i++) {
        if (r[i] < *lo) *lo = r[i];
        if (r[i] > *hi) *hi = r[i];
    }
    *med = median_of(r, k);
    return k;
}

/* "yes" or "NO" with the measured factor, "n/a" without data, "" without a
 * target. Static buffer. */
static const char *target_met(enum metric m, const double *v) {
    static char buf[96];
    double ours = v[P_RL];
    if (metrics[m].target == T_NONE) return "";
    if (isnan(ours)) return "n/a";
    switch (metrics[m].target) {
    case T_NONE: return "";
    case T_BLOCK:
        if (isnan(v[P_CF])) return "n/a";
        snprintf(buf, sizeof buf, "%s (%.3gx CF)", ours >= 20 * v[P_CF] ? "yes" : "NO", ours / v[P_CF]);
        return buf;
    case T_QUEUE:
        if (isnan(v[P_UV])) return "n/a";
        snprintf(buf, sizeof buf, "%s (%.3gx libuv)", ours >= v[P_UV] ? "yes" : "NO", ours / v[P_UV]);
        return buf;
    case T_P50: {
        double best = INFINITY;
        for (int p = 1; p < NPEERS; p++)
            if (!isnan(v[p]) && v[p] < best) best = v[p];
        return ours <= best ? "yes" : "NO";
    }
    case T_TIMERS100K: {
        if (isnan(v[P_CF]) || isnan(v[P_UV])) return "n/a";
        bool cf = v[P_CF] / ours >= 100, uv = ours <= 2 * v[P_UV];
        snprintf(buf, sizeof buf, "%s (%.3gx faster than CF: %s; %.3gx libuv: %s)", cf && uv ? "yes" : "NO",
                 v[P_CF] / ours, cf ? "ok" : "short", ours / v[P_UV], uv ? "ok" : "over");
        return buf;
    }
    case T_ADD100K: {
        /* The goal: at most 25 ns an add, ahead of libuv and GLib,
         * at least 100x CF (a peer not measured is not a failed part). */
        bool ns = ours <= 25, uv = isnan(v[P_UV]) || ours < v[P_UV], gl = isnan(v[P_GLIB]) || ours < v[P_GLIB],
             cf = isnan(v[P_CF]) || v[P_CF] / ours >= 100;
        char xcf[24] = "-";
        if (!isnan(v[P_CF])) snprintf(xcf, sizeof xcf, "%.3gx faster", v[P_CF] / ours);
        snprintf(buf, sizeof buf, "%s (<=25 ns: %s; libuv %s; GLib %s; CF: %s)", ns && uv && gl && cf ? "yes" : "NO",
                 ns ? "ok" : "over", isnan(v[P_UV]) ? "-" : uv ? "behind" : "AHEAD",
                 isnan(v[P_GLIB]) ? "-" : gl ? "behind" : "AHEAD", xcf);
        return buf;
    }
    case T_FIRE: {
        double at0 = median(P_RL, M_FIRE0);
        if (isnan(at0)) return "n/a";
        snprintf(buf, sizeof buf, "%s (%.3gx)", ours <= 1.5 * at0 ? "yes" : "NO", ours / at0);
        return buf;
    }
    case T_ZERO:
        if (m == M_MISSED && ours != 0 && !isnan(median(P_RL, M_FLOOR_MISSED))) {
            /* A thread not run for a millisecond misses a tick whatever it
             * runs: the bare timerfd thread's count in the same run says
             * how much of it is the machine. */
            snprintf(buf, sizeof buf, "NO (floor missed %.0f)", median(P_RL, M_FLOOR_MISSED));
            return buf;
        }
        return ours == 0 ? "yes" : "NO";
    case T_FLOOR: {
        /* Each round's p50 over the floor measured in that round. */
        int n = nsamples[P_RL][m] < nfloor ? nsamples[P_RL][m] : nfloor;
        if (n == 0) return "n/a";
        double r[MAXROUNDS];
        for (int i = 0; i < n; i++) r[i] = samples[P_RL][m][i] / floor_samples[0][i];
        double med = median_of(r, n);
        snprintf(buf, sizeof buf, "%s (%.3gx floor)", med <= 1.1 ? "yes" : "NO", med);
        return buf;
    }
    case T_GUIDE:
        if (isnan(v[P_UV])) return "n/a";
        snprintf(buf, sizeof buf, "%s (%.3gx libuv)", ours >= 1.2 * v[P_UV] ? "yes" : "NO", ours / v[P_UV]);
        return buf;
    case T_STEADY: return ours >= 0.8 ? "yes" : "NO";
    case T_FLOORROW: return "the machine's own";
    case T_CF: {
        double med, lo, hi;
        int k = paired_ratio(m, P_CF, &med, &lo, &hi);
        if (k == 0) return "n/a";
        /* Judged on the rounds' own ratios, not on the ratio of medians. */
        snprintf(buf, sizeof buf, "%s (%.3gx CF; %d round%s %.3g-%.3gx)", med <= 1 ? "yes" : "NO", med, k,
                 k == 1 ? "" : "s", lo, hi);
        return buf;
    }
    }
    return "";
}

static void print_table(int rounds) {
    double load[3] = {0};
    if (getloadavg(load, 3) < 0) load[0] = NAN;
    printf("\nRun loops: ours vs CoreFoundation (Swift toolchain) vs libuv vs GLib — one process, %d round%s, "
           "median shown; %ld CPUs, load average %.1f\n\n",
           rounds, rounds == 1 ? "" : "s", sysconf(_SC_NPROCESSORS_ONLN), load[0]);
    printf("%-42s | %9s | %9s | %9s | %9s | %10s | %-18s | %s\n", "benchmark", "ours", "CF", "libuv", "GLib",
           "ours/best", "target", "met?");
    printf("%.42s-+-%.9s-+-%.9s-+-%.9s-+-%.9s-+-%.10s-+-%.18s-+-%s\n", "--------------------------------------------",
           "----------", "----------", "----------", "----------", "------------", "--------------------", "----");
    for (int m = 0; m < NMETRICS; m++) {
        double v[NPEERS];
        char cell[NPEERS][32];
        for (int p = 0; p < NPEERS; p++) {
            v[p] = median(p, (enum metric)m);
            fmt_value(cell[p], sizeof cell[p], v[p] * metrics[m].scale);
        }
        double best = NAN;
        for (int p = 1; p < NPEERS; p++) {
            if (isnan(v[p])) continue;
            if (isnan(best) || (metrics[m].higher_better ? v[p] > best : v[p] < best)) best = v[p];
        }
        char ratio[32] = "-";
        if (!isnan(v[P_RL]) && !isnan(best)) {
            if (best == 0)
                snprintf(ratio, sizeof ratio, v[P_RL] == 0 ? "=" : "inf");
            else
                snprintf(ratio, sizeof ratio, "%.3gx", v[P_RL] / best);
        }
        printf("%-42s | %9s | %9s | %9s | %9s | %10s | %-18s | %s\n", metrics[m].label, cell[P_RL], cell[P_CF],
               cell[P_UV], cell[P_GLIB], ratio, metrics[m].target_text, target_met((enum metric)m, v));
    }
    printf("\nours/best = ours / best peer (best = highest for rates, lowest otherwise); '-' = no equivalent.\n");
    printf("[a] N=100k removal: every peer is timed on the same first 2000 random-order removals out of 100k\n"
           "    (a timer removed from a population of ~100k); CF's removal is O(n), so timing all 100k would\n"
           "    take ~20 s; its mean over a full drain would be about half the figure shown.\n");
    double cf_add = median(P_CF, M_ADD100K), uv_add = median(P_UV, M_ADD100K);
    if (!isnan(cf_add) && !isnan(uv_add))
        printf("    At N=100k, libuv's add is %.3gx faster than CF's (CF's add is a binary search + array insert).\n",
               cf_add / uv_add);
    printf("[b] ours and CF: against the timer's fixed grid (t0 + k ms); libuv and GLib reschedule from the\n"
           "    previous fire, so theirs is fire - (previous fire + 1 ms). met?: ours/CF of each round's own\n"
           "    percentile (rounds alternate the peers), median and range over the rounds.\n");
    if (nfloor > 0) {
        double f50[MAXROUNDS], f99[MAXROUNDS];
        memcpy(f50, floor_samples[0], (size_t)nfloor * sizeof *f50);
        memcpy(f99, floor_samples[1], (size_t)nfloor * sizeof *f99);
        printf("    This machine's floor in the same run (a bare thread in epoll_wait on a timerfd armed for each\n"
               "    grid point, no run loop): p50 %.1f us, p99 %.0f us, median of %d rounds; what a loop shows\n"
               "    above it is its own wake path.\n",
               median_of(f50, nfloor) * 1e-3, median_of(f99, nfloor) * 1e-3, nfloor);
    }
    printf("[c] one non-waiting pass (RunInMode(mode, 0) with one idle source; libuv uv_run NOWAIT; GLib\n"
           "    g_main_context_iteration(ctx, FALSE)); the observer is an all-activities observer (libuv:\n"
           "    prepare + check handles; GLib: a GSource's prepare + check); fastest of %d alternating chunks each.\n",
           BRL_CHUNKS);
    printf("[d] a new thread's loop run in the default mode and 4 more; libuv and GLib have no modes (one loop).\n");
    printf("[e] N version-0 sources (orders 0..4 interleaved) in one mode, signalled in a scrambled order, then\n"
           "    one RunInMode(mode, 0) pass performs them all (by order); total time / N. libuv and GLib have no\n"
           "    signalled run-loop sources.\n");
    printf("[f] N far-future timers added to kCFRunLoopCommonModes (the default mode is the one common mode);\n"
           "    libuv and GLib have no common modes.\n");
    printf("[g] RunLoopTimerCreate + Release with no loop: what making and dropping an object costs (ours: the\n"
           "    pool with its quarantine of released slots, which keeps stale pointers detectable).\n");
    printf("Timings are medians of %d rounds on a shared machine; cross-thread rows (perform, ping-pong) are the\n"
           "noisiest: the perform rows run 3 times a round (once for a peer whose run takes over 0.5 s) and show\n"
           "the median of all runs. Timer add/remove: the median of several repetitions inside each round.\n",
           rounds);
    printf("[h] from the loop thread's return from epoll_wait to the 1 ms timer's callout, in the lateness runs [b]:\n"
           "    the part of the lateness that is the loop's own code (the rest is the kernel waking the thread).\n"
           "    The bench wraps epoll_wait for the whole process, CoreFoundation's calls included; GLib polls\n"
           "    with poll, and libuv's timer runs are measured differently, so theirs is '-'; so is ours on\n"
           "    io_uring (RL_BACKEND), whose loop waits in io_uring_enter.\n");
    printf("[i] Apple's Run Loops guide, Listings 3-3 to 3-8: a producer thread appends a command to a mutex-\n"
           "    protected queue, then RunLoopSourceSignal + RunLoopWakeUp; the loop's version-0 perform takes the\n"
           "    whole queue (ours and CF run the same code). libuv: the same queue + uv_async_send; GLib: the same\n"
           "    queue + a GSource set ready (g_source_set_ready_time). 5 runs a round; steadiness = slowest / median.\n");
    printf("    Missed ticks [b]: grid points of the 1 ms timer passed over without a fire of their own (ours, CF);\n"
           "    the floor's row counts those of the bare timerfd thread over the same 2 s (the machine's own).\n");
    for (int i = 0; i < nnotes; i++) printf("  - %s\n", notes[i]);
}

/* BENCH_CSV=file: one line per row and peer for scripts/bench-chart.py
 * (bench_results.h), each round's two values paired. */
static void write_csv(void) {
    FILE *f = bench_results_open();
    if (!f) return;
    for (int m = 0; m < NMETRICS; m++) {
        for (int p = 1; p < NPEERS; p++) {
            if (!peers[p] || nsamples[P_RL][m] == 0) continue;
            int n = nsamples[P_RL][m] < nsamples[p][m] ? nsamples[P_RL][m] : nsamples[p][m];
            double r[MAXROUNDS];
            int k = 0;
            for (int i = 0; i < n; i++) {
                double ours = samples[P_RL][m][i], peer = samples[p][m][i];
                double ratio = metrics[m].higher_better ? peer / ours : ours / peer;
                if (isfinite(ratio) && ratio > 0) r[k++] = ratio;
            }
            /* A peer that ran no row at all (BRL_PEERS left it out) gets
             * empty cells, which the chart names; a row one peer cannot do,
             * or where both sides are ~0, is left out. */
            bool ran_any = false;
            for (int mm = 0; mm < NMETRICS; mm++) ran_any = ran_any || nsamples[p][mm] > 0;
            if (k == 0 && ran_any) continue;
            bench_results_row(f, "run loop", metrics[m].label, peers[p]->name, r, k,
                              median(P_RL, (enum metric)m) * metrics[m].scale,
                              k ? median(p, (enum metric)m) * metrics[m].scale : NAN, "");
        }
    }
    bench_results_close(f);
}

int main(void) {
    const char *e = getenv("BRL_ROUNDS");
    int rounds = e ? atoi(e) : 3;
    if (rounds < 1) rounds = 1;
    if (rounds > MAXROUNDS) rounds = MAXROUNDS;
    quick = getenv("BRL_QUICK") != NULL;
    only = getenv("BRL_ONLY");
    only_peers = getenv("BRL_PEERS");
    e = getenv("BRL_IDLE_SECONDS");
    double idle_seconds = e ? atof(e) : 3.0;
    double t0 = brl_now();
    for (int r = 0; r < rounds; r++) run_round(r);
    record_steadiness();
    if (want("idle")) run_idle(idle_seconds);
    progress("");
    print_table(rounds);
    write_csv();
    printf("(whole run: %.0f s)\n", brl_now() - t0);
    return 0;
}
