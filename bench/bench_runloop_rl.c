/*
 * bench_runloop_rl.c — our run loop (CRunLoop, linked statically) as a peer
 * of the run-loop benchmark: the same scenarios as bench_runloop_cf.c, line
 * for line, through the RL names. The block form needs clang -fblocks; under
 * gcc that row reports "no blocks".
 */
#include <crunloop/crunloop.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench_runloop.h"

static RLRunLoopSourceRef our_source(void *info, void (*perform)(void *)) {
    RLRunLoopSourceContext ctx = {0};
    ctx.info = info;
    ctx.perform = perform;
    return RLRunLoopSourceCreate(NULL, 0, &ctx);
}

static void our_nothing(void *info) { (void)info; }
static void our_timer_nothing(RLRunLoopTimerRef t, void *info) { (void)t, (void)info; }

/* ---- perform throughput ----------------------------------------------- */

typedef struct {
    long n, count;
    double t_end;
    bool done;
    atomic_bool sent_all; /* the producer is done with rl */
    _Atomic(RLRunLoopRef) rl;
} our_perf;

static void *our_perf_consumer(void *arg) {
    our_perf *c = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef keep = our_source(NULL, our_nothing);
    RLRunLoopAddSource(rl, keep, kRLRunLoopDefaultMode);
    atomic_store(&c->rl, rl);
    while (!c->done) RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1.0, false);
    RLRunLoopRemoveSource(rl, keep, kRLRunLoopDefaultMode);
    RLRelease(keep);
    while (!atomic_load(&c->sent_all)) sched_yield(); /* keep rl alive for the last WakeUp */
    return NULL;
}

static void our_perf_step(our_perf *c) {
    if (++c->count == c->n) {
        c->t_end = brl_now();
        c->done = true;
        RLRunLoopStop(RLRunLoopGetCurrent());
    }
}

static void our_perf_fn(void *info) { our_perf_step(info); }

static brl_result our_perform(long n, bool block) {
    our_perf c = {.n = n};
    pthread_t t;
    pthread_create(&t, NULL, our_perf_consumer, &c);
    RLRunLoopRef rl;
    while ((rl = atomic_load(&c.rl)) == NULL) sched_yield();
    double t0 = brl_now();
    if (block) {
#if __BLOCKS__
        our_perf *cp = &c;
        for (long i = 0; i < n; i++) {
            RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{ our_perf_step(cp); });
            RLRunLoopWakeUp(rl);
        }
#endif
    } else {
        for (long i = 0; i < n; i++) {
            RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, our_perf_fn, &c);
            RLRunLoopWakeUp(rl);
        }
    }
    atomic_store(&c.sent_all, true);
    pthread_join(t, NULL);
    return brl_ok((double)n / (c.t_end - t0), 0);
}

static brl_result our_perform_block(long n) {
#if __BLOCKS__
    return our_perform(n, true);
#else
    return brl_none("built without blocks (gcc)");
#endif
}

static brl_result our_perform_queue(long n) { return our_perform(n, false); }

/* ---- v0-source ping-pong ---------------------------------------------- */

typedef struct our_pp our_pp;
typedef struct {
    our_pp *pp;
    RLRunLoopRef rl;
    RLRunLoopSourceRef src;
} our_side;

struct our_pp {
    our_side a, b;
    long n, warm, i;
    double t_sent;
    double *samples;
    pthread_barrier_t ready;
};

static void our_pp_a(void *info) {
    our_pp *p = info;
    double now = brl_now();
    if (p->t_sent != 0) {
        if (p->i >= p->warm) p->samples[p->i - p->warm] = now - p->t_sent;
        p->i++;
    }
    if (p->i == p->n + p->warm) {
        RLRunLoopStop(p->b.rl);
        RLRunLoopStop(p->a.rl);
        return;
    }
    p->t_sent = brl_now();
    RLRunLoopSourceSignal(p->b.src);
    RLRunLoopWakeUp(p->b.rl);
}

static void our_pp_b(void *info) {
    our_pp *p = info;
    RLRunLoopSourceSignal(p->a.src);
    RLRunLoopWakeUp(p->a.rl);
}

static void *our_pp_thread(void *arg) {
    our_side *s = arg;
    s->rl = RLRunLoopGetCurrent();
    s->src = our_source(s->pp, s == &s->pp->a ? our_pp_a : our_pp_b);
    RLRunLoopAddSource(s->rl, s->src, kRLRunLoopDefaultMode);
    pthread_barrier_wait(&s->pp->ready);
    RLRunLoopRun();
    RLRunLoopRemoveSource(s->rl, s->src, kRLRunLoopDefaultMode);
    pthread_barrier_wait(&s->pp->ready); /* both loops done before release */
    RLRelease(s->src);
    return NULL;
}

static brl_result our_pingpong(long n) {
    our_pp p = {.n = n, .warm = n / 20 + 10};
    p.samples = malloc((size_t)n * sizeof *p.samples);
    p.a.pp = p.b.pp = &p;
    pthread_barrier_init(&p.ready, NULL, 3);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, our_pp_thread, &p.a);
    pthread_create(&tb, NULL, our_pp_thread, &p.b);
    pthread_barrier_wait(&p.ready);
    RLRunLoopSourceSignal(p.a.src);
    RLRunLoopWakeUp(p.a.rl);
    pthread_barrier_wait(&p.ready);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&p.ready);
    double p50 = brl_quantile(p.samples, n, 0.50) * 1e9, p99 = brl_quantile(p.samples, n, 0.99) * 1e9;
    free(p.samples);
    return brl_ok(p50, p99);
}

/* ---- timers add / remove ---------------------------------------------- */

typedef struct {
    long n, max_rm;
    brl_result r;
} our_timers_arg;

static void *our_timers_thread(void *arg) {
    our_timers_arg *a = arg;
    long n = a->n;
    brl_timer_plan plan = brl_timer_plan_make(n);
    RLRunLoopTimerRef *t = malloc((size_t)n * sizeof *t);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLAbsoluteTime base = RLAbsoluteTimeGetCurrent() + 1e6;
    for (long i = 0; i < n; i++)
        t[i] = RLRunLoopTimerCreate(NULL, base + (double)plan.pos[i] * 1e-3, 0, 0, 0, our_timer_nothing, NULL);
    long k = n < a->max_rm ? n : a->max_rm;
    double t0 = brl_now();
    for (long i = 0; i < n; i++) RLRunLoopAddTimer(rl, t[i], kRLRunLoopDefaultMode);
    double t1 = brl_now();
    for (long j = 0; j < k; j++) {
        RLRunLoopRemoveTimer(rl, t[plan.rm[j]], kRLRunLoopDefaultMode);
        plan.removed[plan.rm[j]] = true;
    }
    double t2 = brl_now();
    for (long s = 0; s < n; s++) {
        long i = plan.by_pos[s];
        if (!plan.removed[i]) RLRunLoopRemoveTimer(rl, t[i], kRLRunLoopDefaultMode);
    }
    for (long i = 0; i < n; i++) RLRelease(t[i]);
    free(t);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)k * 1e9);
    return NULL;
}

static brl_result our_timers(long n, long max_rm) {
    our_timers_arg a = {.n = n, .max_rm = max_rm};
    brl_run_on_thread(our_timers_thread, &a);
    return a.r;
}

/* ---- per-fire cost / lateness ----------------------------------------- */

typedef struct {
    long idle, fires, count;
    double *late;
    brl_grid grid;
    brl_result r;
} our_fire_arg;

static void our_fire_cb(RLRunLoopTimerRef t, void *info) {
    our_fire_arg *a = info;
    if (a->late) a->late[a->count] = brl_grid_fire(&a->grid, brl_now());
    if (++a->count == a->fires) RLRunLoopStop(RLRunLoopGetCurrent());
}

static void *our_fire_thread(void *arg) {
    our_fire_arg *a = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    brl_timer_plan plan = brl_timer_plan_make(a->idle);
    RLRunLoopTimerRef *idle = malloc((size_t)(a->idle + 1) * sizeof *idle);
    RLAbsoluteTime base = RLAbsoluteTimeGetCurrent() + 1e6;
    for (long i = 0; i < a->idle; i++) {
        idle[i] = RLRunLoopTimerCreate(NULL, base + (double)plan.pos[i] * 1e-3, 0, 0, 0, our_timer_nothing, NULL);
        RLRunLoopAddTimer(rl, idle[i], kRLRunLoopDefaultMode);
    }
    RLRunLoopTimerContext ctx = {.info = a};
    RLAbsoluteTime first = RLAbsoluteTimeGetCurrent() + 0.005;
    a->grid = (brl_grid){.t0 = brl_now() + 0.005, .interval = 0.001};
    RLRunLoopTimerRef timer = RLRunLoopTimerCreate(NULL, first, 0.001, 0, 0, our_fire_cb, &ctx);
    RLRunLoopAddTimer(rl, timer, kRLRunLoopDefaultMode);
    double c0 = brl_self_cpu();
    while (a->count < a->fires) RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10.0, false);
    double c1 = brl_self_cpu();
    RLRunLoopTimerInvalidate(timer);
    RLRelease(timer);
    for (long s = 0; s < a->idle; s++) {
        long i = plan.by_pos[s];
        RLRunLoopRemoveTimer(rl, idle[i], kRLRunLoopDefaultMode);
        RLRelease(idle[i]);
    }
    free(idle);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((c1 - c0) / (double)a->fires * 1e9, 0);
    return NULL;
}

static brl_result our_per_fire(long idle, long fires) {
    our_fire_arg a = {.idle = idle, .fires = fires};
    brl_run_on_thread(our_fire_thread, &a);
    return a.r;
}

static brl_result our_lateness(long fires) {
    our_fire_arg a = {.idle = 0, .fires = fires};
    a.late = malloc((size_t)fires * sizeof *a.late);
    brl_run_on_thread(our_fire_thread, &a);
    long skip = fires / 50;
    brl_result r = brl_ok(brl_quantile(a.late + skip, fires - skip, 0.5) * 1e9,
                          brl_quantile(a.late + skip, fires - skip, 0.99) * 1e9);
    free(a.late);
    return r;
}

/* ---- idle loop -------------------------------------------------------- */

struct brl_idle {
    pthread_t thread;
    _Atomic(RLRunLoopRef) rl;
    atomic_long wakes;
    atomic_bool asleep;
    double cpu0;
    long wakes0;
};

static void our_idle_observer(RLRunLoopObserverRef o, RLRunLoopActivity act, void *info) {
    brl_idle *d = info;
    if (act == kRLRunLoopAfterWaiting) atomic_fetch_add(&d->wakes, 1);
    if (act == kRLRunLoopBeforeWaiting) atomic_store(&d->asleep, true);
}

static void *our_idle_thread(void *arg) {
    brl_idle *d = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef src = our_source(NULL, our_nothing);
    RLRunLoopTimerRef timer =
        RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, our_timer_nothing, NULL);
    RLRunLoopObserverContext octx = {.info = d};
    RLRunLoopObserverRef obs = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeWaiting | kRLRunLoopAfterWaiting, true,
                                                       0, our_idle_observer, &octx);
    RLRunLoopAddSource(rl, src, kRLRunLoopDefaultMode);
    RLRunLoopAddTimer(rl, timer, kRLRunLoopDefaultMode);
    RLRunLoopAddObserver(rl, obs, kRLRunLoopDefaultMode);
    atomic_store(&d->rl, rl);
    RLRunLoopRun();
    RLRunLoopObserverInvalidate(obs);
    RLRunLoopTimerInvalidate(timer);
    RLRunLoopSourceInvalidate(src);
    RLRelease(obs);
    RLRelease(timer);
    RLRelease(src);
    return NULL;
}

static brl_idle *our_idle_start(void) {
    brl_idle *d = calloc(1, sizeof *d);
    pthread_create(&d->thread, NULL, our_idle_thread, d);
    while (!atomic_load(&d->asleep)) brl_sleep(0.001);
    brl_sleep(0.02);
    d->cpu0 = brl_thread_cpu(d->thread);
    d->wakes0 = atomic_load(&d->wakes);
    return d;
}

static brl_result our_idle_finish(brl_idle *d) {
    double cpu = brl_thread_cpu(d->thread) - d->cpu0;
    long wakes = atomic_load(&d->wakes) - d->wakes0;
    RLRunLoopStop(atomic_load(&d->rl));
    pthread_join(d->thread, NULL);
    free(d);
    return brl_ok(cpu, (double)wakes);
}

/* ---- observer overhead ------------------------------------------------ */

typedef struct {
    long n, calls;
    brl_result r;
} our_obs_arg;

static void our_obs_cb(RLRunLoopObserverRef o, RLRunLoopActivity act, void *info) { ((our_obs_arg *)info)->calls++; }

static double our_iterations(long n) {
    double t0 = brl_now();
    for (long i = 0; i < n; i++) RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    return (brl_now() - t0) / (double)n * 1e9;
}

/* Alternating chunks with and without the observer; the fastest chunk of
 * each kind is kept (the machine is shared, so slow chunks are noise). */
static void *our_obs_thread(void *arg) {
    our_obs_arg *a = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef src = our_source(NULL, our_nothing);
    RLRunLoopAddSource(rl, src, kRLRunLoopDefaultMode);
    RLRunLoopObserverContext octx = {.info = a};
    RLRunLoopObserverRef obs = RLRunLoopObserverCreate(NULL, kRLRunLoopAllActivities, true, 0, our_obs_cb, &octx);
    long chunk = a->n / BRL_CHUNKS + 1;
    our_iterations(chunk);
    double without = INFINITY, with = INFINITY;
    for (int c = 0; c < BRL_CHUNKS; c++) {
        without = fmin(without, our_iterations(chunk));
        RLRunLoopAddObserver(rl, obs, kRLRunLoopDefaultMode);
        with = fmin(with, our_iterations(chunk));
        RLRunLoopRemoveObserver(rl, obs, kRLRunLoopDefaultMode);
    }
    RLRunLoopObserverInvalidate(obs);
    RLRelease(obs);
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
    a->r = brl_ok(without, with);
    snprintf(a->r.note, sizeof a->r.note, "ours: %.1f observer callouts per iteration",
             (double)a->calls / (double)(chunk * BRL_CHUNKS));
    return NULL;
}

static brl_result our_observer(long n) {
    our_obs_arg a = {.n = n};
    brl_run_on_thread(our_obs_thread, &a);
    return a.r;
}

/* ---- fds per loop ----------------------------------------------------- */

typedef struct {
    int modes;
    brl_result r;
} our_fds_arg;

static void *our_fds_thread(void *arg) {
    our_fds_arg *a = arg;
    int before = brl_count_fds();
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef src = our_source(NULL, our_nothing);
    for (int m = 0; m < a->modes; m++) {
        char name[32];
        snprintf(name, sizeof name, "bench.mode.%d", m);
        const char *mode = m == 0 ? kRLRunLoopDefaultMode : name;
        RLRunLoopAddSource(rl, src, mode);
        RLRunLoopRunInMode(mode, 0, false);
    }
    int after = brl_count_fds();
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
    a->r = brl_ok(after - before, 0);
    return NULL;
}

static brl_result our_fds(int modes) {
    our_fds_arg a = {.modes = modes};
    brl_run_on_thread(our_fds_thread, &a);
    return a.r;
}

const brl_peer brl_peer_rl = {
    .name = "ours",
    .perform_block = our_perform_block,
    .perform_queue = our_perform_queue,
    .pingpong = our_pingpong,
    .timers = our_timers,
    .per_fire = our_per_fire,
    .lateness = our_lateness,
    .idle_start = our_idle_start,
    .idle_finish = our_idle_finish,
    .observer = our_observer,
    .fds = our_fds,
};
