/*
 * bench_runloop_cf.c — the run-loop benchmark's scenarios, written once
 * against CoreFoundation's run-loop API and built twice, the way the
 * differential tests are (Tests/diff):
 *   -DBRL_CF  CoreFoundation's run loop (the one Swift ships on Linux, from
 *             libFoundation.so): the peer brl_peer_cf. Needs clang with
 *             -fblocks: CF's headers do not compile under gcc.
 *   (none)    ours, through <crunloop/cf_compat.h>, whose CF names are
 *             plain aliases of the RL functions (no wrapper is timed): the
 *             peer brl_peer_rl. Any compiler; without blocks (gcc) the block
 *             row reports "no blocks".
 * So both peers run the very same code; the few #if blocks below are where
 * the APIs differ (CF has no function-pointer perform; mode names are
 * CFStrings there and C strings here).
 */
#ifdef BRL_CF
#include <CoreFoundation/CoreFoundation.h>
#define BRL_PEER brl_peer_cf
#define BRL_PEER_NAME "CF"
#else
#include <crunloop/cf_compat.h>
#define BRL_PEER brl_peer_rl
#define BRL_PEER_NAME "ours"
#endif
#include <sched.h>
#include <stdatomic.h>

#include "bench_runloop.h"

static CFRunLoopSourceRef cf_source(void *info, void (*perform)(void *)) {
    CFRunLoopSourceContext ctx = {0};
    ctx.info = info;
    ctx.perform = perform;
    return CFRunLoopSourceCreate(NULL, 0, &ctx);
}

static void cf_nothing(void *info) { (void)info; }
static void cf_timer_nothing(CFRunLoopTimerRef t, void *info) { (void)t, (void)info; }

/* ---- perform throughput ----------------------------------------------- */

typedef struct {
    BRL_OWN_LINES long n, count;
    double t_end;
    bool done;
    atomic_bool sent_all; /* the producer is done with rl */
    _Atomic(CFRunLoopRef) rl;
} cf_perf;

static void *cf_perf_consumer(void *arg) {
    cf_perf *c = arg;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef keep = cf_source(NULL, cf_nothing);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);
    atomic_store(&c->rl, rl);
    while (!c->done) CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1.0, false);
    CFRunLoopRemoveSource(rl, keep, kCFRunLoopDefaultMode);
    CFRelease(keep);
    while (!atomic_load(&c->sent_all)) sched_yield(); /* keep rl alive for the last WakeUp */
    return NULL;
}

static void cf_perf_step(cf_perf *c) {
    if (++c->count == c->n) {
        c->t_end = brl_now();
        c->done = true;
        CFRunLoopStop(CFRunLoopGetCurrent());
    }
}

#ifndef BRL_CF
static void cf_perf_fn(void *info) { cf_perf_step(info); }
#endif

/* n requests (blocks, or the function form) + WakeUp from this thread to a
 * consumer thread's loop. */
static brl_result cf_perform(long n, bool block) {
    cf_perf c = {.n = n};
    pthread_t t;
    pthread_create(&t, NULL, cf_perf_consumer, &c);
    CFRunLoopRef rl;
    while ((rl = atomic_load(&c.rl)) == NULL) sched_yield();
    double t0 = brl_now();
    if (block) {
#if __BLOCKS__
        cf_perf *cp = &c;
        for (long i = 0; i < n; i++) {
            CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{ cf_perf_step(cp); });
            CFRunLoopWakeUp(rl);
        }
#endif
    } else {
#ifndef BRL_CF
        for (long i = 0; i < n; i++) {
            RLRunLoopPerformFunction(rl, kCFRunLoopDefaultMode, cf_perf_fn, &c);
            CFRunLoopWakeUp(rl);
        }
#endif
    }
    atomic_store(&c.sent_all, true);
    pthread_join(t, NULL);
    return brl_ok((double)n / (c.t_end - t0), 0);
}

static brl_result cf_perform_block(long n) {
#if __BLOCKS__
    return cf_perform(n, true);
#else
    return brl_none("built without blocks (gcc)");
#endif
}

static brl_result cf_perform_queue(long n) {
#ifdef BRL_CF
    return brl_none("CF has no function-pointer perform");
#else
    return cf_perform(n, false);
#endif
}

/* ---- v0-source ping-pong ---------------------------------------------- */

typedef struct cf_pp cf_pp;
typedef struct {
    BRL_OWN_LINES cf_pp *pp;
    CFRunLoopRef rl;
    CFRunLoopSourceRef src;
} cf_side;

struct cf_pp {
    BRL_OWN_LINES cf_side a, b;
    long n, warm, i;
    double t_sent;
    double *samples;
    pthread_barrier_t ready;
};

static void cf_pp_a(void *info) {
    cf_pp *p = info;
    double now = brl_now();
    if (p->t_sent != 0) {
        if (p->i >= p->warm) p->samples[p->i - p->warm] = now - p->t_sent;
        p->i++;
    }
    if (p->i == p->n + p->warm) {
        CFRunLoopStop(p->b.rl);
        CFRunLoopStop(p->a.rl);
        return;
    }
    p->t_sent = brl_now();
    CFRunLoopSourceSignal(p->b.src);
    CFRunLoopWakeUp(p->b.rl);
}

static void cf_pp_b(void *info) {
    cf_pp *p = info;
    CFRunLoopSourceSignal(p->a.src);
    CFRunLoopWakeUp(p->a.rl);
}

static void *cf_pp_thread(void *arg) {
    cf_side *s = arg;
    s->rl = CFRunLoopGetCurrent();
    s->src = cf_source(s->pp, s == &s->pp->a ? cf_pp_a : cf_pp_b);
    CFRunLoopAddSource(s->rl, s->src, kCFRunLoopDefaultMode);
    pthread_barrier_wait(&s->pp->ready);
    CFRunLoopRun();
    CFRunLoopRemoveSource(s->rl, s->src, kCFRunLoopDefaultMode);
    pthread_barrier_wait(&s->pp->ready); /* both loops done before release */
    CFRelease(s->src);
    return NULL;
}

static brl_result cf_pingpong(long n) {
    cf_pp p = {.n = n, .warm = n / 20 + 10};
    p.samples = malloc((size_t)n * sizeof *p.samples);
    p.a.pp = p.b.pp = &p;
    pthread_barrier_init(&p.ready, NULL, 3);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, cf_pp_thread, &p.a);
    pthread_create(&tb, NULL, cf_pp_thread, &p.b);
    pthread_barrier_wait(&p.ready);
    CFRunLoopSourceSignal(p.a.src);
    CFRunLoopWakeUp(p.a.rl);
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
} cf_timers_arg;

static void *cf_timers_thread(void *arg) {
    cf_timers_arg *a = arg;
    long n = a->n;
    brl_timer_plan plan = brl_timer_plan_make(n);
    CFRunLoopTimerRef *t = malloc((size_t)n * sizeof *t);
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFAbsoluteTime base = CFAbsoluteTimeGetCurrent() + 1e6;
    for (long i = 0; i < n; i++)
        t[i] = CFRunLoopTimerCreate(NULL, base + (double)plan.pos[i] * 1e-3, 0, 0, 0, cf_timer_nothing, NULL);
    long k = n < a->max_rm ? n : a->max_rm;
    double t0 = brl_now();
    for (long i = 0; i < n; i++) CFRunLoopAddTimer(rl, t[i], kCFRunLoopDefaultMode);
    double t1 = brl_now();
    for (long j = 0; j < k; j++) {
        CFRunLoopRemoveTimer(rl, t[plan.rm[j]], kCFRunLoopDefaultMode);
        plan.removed[plan.rm[j]] = true;
    }
    double t2 = brl_now();
    for (long s = 0; s < n; s++) {
        long i = plan.by_pos[s];
        if (!plan.removed[i]) CFRunLoopRemoveTimer(rl, t[i], kCFRunLoopDefaultMode);
    }
    for (long i = 0; i < n; i++) CFRelease(t[i]);
    free(t);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)k * 1e9);
#ifdef BRL_CF
    if (k < n)
        snprintf(a->r.note, sizeof a->r.note,
                 "CF at N=%ld: one repetition, %ld of %ld removals timed (each is a linear search of the mode's timer array)",
                 n, k, n);
#endif
    return NULL;
}

static brl_result cf_timers(long n, long max_rm) {
    cf_timers_arg a = {.n = n, .max_rm = max_rm};
    brl_run_on_thread(cf_timers_thread, &a);
    return a.r;
}

/* ---- per-fire cost / lateness ----------------------------------------- */

typedef struct {
    long idle, fires, count;
    double *late, *wake;
    brl_grid grid;
    brl_result r;
} cf_fire_arg;

static void cf_fire_cb(CFRunLoopTimerRef t, void *info) {
    cf_fire_arg *a = info;
    if (a->late) {
        double now = brl_now();
        a->late[a->count] = brl_grid_fire(&a->grid, now);
        /* No epoll_wait seen on this thread (a loop on io_uring waits in
         * io_uring_enter): no figure, rather than the time since 0. */
        double woke = brl_wake_last();
        a->wake[a->count] = woke > 0 ? now - woke : NAN;
    }
    if (++a->count == a->fires) CFRunLoopStop(CFRunLoopGetCurrent());
}

static void *cf_fire_thread(void *arg) {
    cf_fire_arg *a = arg;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    brl_timer_plan plan = brl_timer_plan_make(a->idle);
    CFRunLoopTimerRef *idle = malloc((size_t)(a->idle + 1) * sizeof *idle);
    CFAbsoluteTime base = CFAbsoluteTimeGetCurrent() + 1e6;
    for (long i = 0; i < a->idle; i++) {
        idle[i] = CFRunLoopTimerCreate(NULL, base + (double)plan.pos[i] * 1e-3, 0, 0, 0, cf_timer_nothing, NULL);
        CFRunLoopAddTimer(rl, idle[i], kCFRunLoopDefaultMode);
    }
    CFRunLoopTimerContext ctx = {.info = a};
    CFAbsoluteTime first = CFAbsoluteTimeGetCurrent() + 0.005;
    a->grid = (brl_grid){.t0 = brl_now() + 0.005, .interval = 0.001};
    CFRunLoopTimerRef timer = CFRunLoopTimerCreate(NULL, first, 0.001, 0, 0, cf_fire_cb, &ctx);
    CFRunLoopAddTimer(rl, timer, kCFRunLoopDefaultMode);
    double c0 = brl_self_cpu();
    while (a->count < a->fires) CFRunLoopRunInMode(kCFRunLoopDefaultMode, 10.0, false);
    double c1 = brl_self_cpu();
    CFRunLoopTimerInvalidate(timer);
    CFRelease(timer);
    for (long s = 0; s < a->idle; s++) {
        long i = plan.by_pos[s];
        CFRunLoopRemoveTimer(rl, idle[i], kCFRunLoopDefaultMode);
        CFRelease(idle[i]);
    }
    free(idle);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((c1 - c0) / (double)a->fires * 1e9, 0);
    return NULL;
}

static brl_result cf_per_fire(long idle, long fires) {
    cf_fire_arg a = {.idle = idle, .fires = fires};
    brl_run_on_thread(cf_fire_thread, &a);
    return a.r;
}

static brl_result cf_lateness(long fires) {
    cf_fire_arg a = {.idle = 0, .fires = fires};
    a.late = malloc((size_t)fires * sizeof *a.late);
    a.wake = malloc((size_t)fires * sizeof *a.wake);
    brl_run_on_thread(cf_fire_thread, &a);
    long skip = fires / 50;
    brl_result r = brl_ok(brl_quantile(a.late + skip, fires - skip, 0.5) * 1e9,
                          brl_quantile(a.late + skip, fires - skip, 0.99) * 1e9);
    bool woke = true;
    for (long i = skip; i < fires; i++)
        woke = woke && !isnan(a.wake[i]);
    r.v[2] = woke ? brl_quantile(a.wake + skip, fires - skip, 0.5) * 1e9 : NAN;
    r.v[3] = (double)a.grid.missed;
    free(a.late);
    free(a.wake);
    return r;
}

/* ---- idle loop -------------------------------------------------------- */

struct brl_idle {
    pthread_t thread;
    _Atomic(CFRunLoopRef) rl;
    atomic_long wakes;
    atomic_bool asleep;
    double cpu0;
    long wakes0;
};

static void cf_idle_observer(CFRunLoopObserverRef o, CFRunLoopActivity act, void *info) {
    brl_idle *d = info;
    if (act == kCFRunLoopAfterWaiting) atomic_fetch_add(&d->wakes, 1);
    if (act == kCFRunLoopBeforeWaiting) atomic_store(&d->asleep, true);
}

static void *cf_idle_thread(void *arg) {
    brl_idle *d = arg;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef src = cf_source(NULL, cf_nothing);
    CFRunLoopTimerRef timer =
        CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, cf_timer_nothing, NULL);
    CFRunLoopObserverContext octx = {.info = d};
    CFRunLoopObserverRef obs = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting | kCFRunLoopAfterWaiting, true,
                                                       0, cf_idle_observer, &octx);
    CFRunLoopAddSource(rl, src, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(rl, timer, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
    atomic_store(&d->rl, rl);
    CFRunLoopRun();
    CFRunLoopObserverInvalidate(obs);
    CFRunLoopTimerInvalidate(timer);
    CFRunLoopSourceInvalidate(src);
    CFRelease(obs);
    CFRelease(timer);
    CFRelease(src);
    return NULL;
}

static brl_idle *cf_idle_start(void) {
    brl_idle *d = calloc(1, sizeof *d);
    pthread_create(&d->thread, NULL, cf_idle_thread, d);
    while (!atomic_load(&d->asleep)) brl_sleep(0.001);
    brl_sleep(0.02);
    d->cpu0 = brl_thread_cpu(d->thread);
    d->wakes0 = atomic_load(&d->wakes);
    return d;
}

static brl_result cf_idle_finish(brl_idle *d) {
    double cpu = brl_thread_cpu(d->thread) - d->cpu0;
    long wakes = atomic_load(&d->wakes) - d->wakes0;
    CFRunLoopStop(atomic_load(&d->rl));
    pthread_join(d->thread, NULL);
    free(d);
    return brl_ok(cpu, (double)wakes);
}

/* ---- observer overhead ------------------------------------------------ */

typedef struct {
    long n, calls;
    brl_result r;
} cf_obs_arg;

static void cf_obs_cb(CFRunLoopObserverRef o, CFRunLoopActivity act, void *info) { ((cf_obs_arg *)info)->calls++; }

static double cf_iterations(long n) {
    double t0 = brl_now();
    for (long i = 0; i < n; i++) CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false);
    return (brl_now() - t0) / (double)n * 1e9;
}

/* Alternating chunks with and without the observer; the fastest chunk of
 * each kind is kept (the machine is shared, so slow chunks are noise). */
static void *cf_obs_thread(void *arg) {
    cf_obs_arg *a = arg;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef src = cf_source(NULL, cf_nothing);
    CFRunLoopAddSource(rl, src, kCFRunLoopDefaultMode);
    CFRunLoopObserverContext octx = {.info = a};
    CFRunLoopObserverRef obs = CFRunLoopObserverCreate(NULL, kCFRunLoopAllActivities, true, 0, cf_obs_cb, &octx);
    long chunk = a->n / BRL_CHUNKS + 1;
    cf_iterations(chunk);
    double without = INFINITY, with = INFINITY;
    for (int c = 0; c < BRL_CHUNKS; c++) {
        without = fmin(without, cf_iterations(chunk));
        CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
        with = fmin(with, cf_iterations(chunk));
        CFRunLoopRemoveObserver(rl, obs, kCFRunLoopDefaultMode);
    }
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
    CFRunLoopSourceInvalidate(src);
    CFRelease(src);
    a->r = brl_ok(without, with);
    snprintf(a->r.note, sizeof a->r.note, BRL_PEER_NAME ": %.1f observer callouts per iteration",
             (double)a->calls / (double)(chunk * BRL_CHUNKS));
    return NULL;
}

static brl_result cf_observer(long n) {
    cf_obs_arg a = {.n = n};
    brl_run_on_thread(cf_obs_thread, &a);
    return a.r;
}

/* ---- fds per loop ----------------------------------------------------- */

typedef struct {
    int modes;
    brl_result r;
} cf_fds_arg;

static void *cf_fds_thread(void *arg) {
    cf_fds_arg *a = arg;
    int before = brl_count_fds();
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef src = cf_source(NULL, cf_nothing);
    CFStringRef modes[16];
    for (int m = 0; m < a->modes && m < 16; m++) {
        char name[32];
        snprintf(name, sizeof name, "bench.mode.%d", m);
#ifdef BRL_CF
        modes[m] = m == 0 ? CFRetain(kCFRunLoopDefaultMode)
                          : CFStringCreateWithCString(NULL, name, kCFStringEncodingUTF8);
#else
        modes[m] = m == 0 ? kCFRunLoopDefaultMode : name; /* a C string; the loop copies it */
#endif
        CFRunLoopAddSource(rl, src, modes[m]);
        CFRunLoopRunInMode(modes[m], 0, false);
    }
    int after = brl_count_fds();
    CFRunLoopSourceInvalidate(src);
    CFRelease(src);
#ifdef BRL_CF
    for (int m = 0; m < a->modes && m < 16; m++) CFRelease(modes[m]);
#endif
    a->r = brl_ok(after - before, 0);
    return NULL;
}

static brl_result cf_fds(int modes) {
    cf_fds_arg a = {.modes = modes};
    brl_run_on_thread(cf_fds_thread, &a);
    return a.r;
}

/* ---- object create / release --------------------------------------- */

static brl_result cf_objects(long n) {
    CFRunLoopTimerRef *t = malloc((size_t)n * sizeof *t);
    if (!t) return brl_none("out of memory");
    double t0 = brl_now();
    for (long i = 0; i < n; i++) CFRelease(CFRunLoopTimerCreate(NULL, 1e9, 0, 0, 0, cf_timer_nothing, NULL));
    double t1 = brl_now();
    for (long i = 0; i < n; i++) t[i] = CFRunLoopTimerCreate(NULL, 1e9, 0, 0, 0, cf_timer_nothing, NULL);
    for (long i = 0; i < n; i++) CFRelease(t[i]);
    double t2 = brl_now();
    free(t);
    return brl_ok((t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)n * 1e9);
}

/* ---- scale: many signalled sources, many timers in common modes -------- */

typedef struct {
    long n, max_rm, performed;
    brl_result r;
} cf_scale_arg;

/* Each source its own info: CF holds a mode's sources in a set and takes
 * two with equal order and info for the same source. */
typedef struct {
    cf_scale_arg *a;
} cf_scale_src;

static void cf_count_perform(void *info) { ((cf_scale_src *)info)->a->performed++; }

static void *cf_signal_thread(void *arg) {
    cf_scale_arg *a = arg;
    long n = a->n;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef *src = malloc((size_t)n * sizeof *src);
    cf_scale_src *info = malloc((size_t)n * sizeof *info);
    long *perm = brl_permutation(n, 0x9e3779b97f4a7c15ULL);
    for (long i = 0; i < n; i++) {
        CFRunLoopSourceContext ctx = {0};
        info[i].a = a;
        ctx.info = &info[i];
        ctx.perform = cf_count_perform;
        src[i] = CFRunLoopSourceCreate(NULL, i % 5, &ctx);
        CFRunLoopAddSource(rl, src[i], kCFRunLoopDefaultMode);
    }
    double t0 = brl_now();
    for (long i = 0; i < n; i++) CFRunLoopSourceSignal(src[perm[i]]);
    CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false);
    double t1 = brl_now();
    a->r = brl_ok((t1 - t0) / (double)n * 1e9, 0);
    if (a->performed != n) {
        a->r.ok = false;
        snprintf(a->r.note, sizeof a->r.note, "%s: %ld of %ld signalled sources performed in one pass",
                 BRL_PEER_NAME, a->performed, n);
    }
    for (long i = 0; i < n; i++) {
        CFRunLoopSourceInvalidate(src[i]);
        CFRelease(src[i]);
    }
    free(perm);
    free(info);
    free(src);
    return NULL;
}

static brl_result cf_signal_sources(long n) {
    cf_scale_arg a = {.n = n};
    brl_run_on_thread(cf_signal_thread, &a);
    return a.r;
}

static void *cf_common_thread(void *arg) {
    cf_scale_arg *a = arg;
    long n = a->n;
    brl_timer_plan plan = brl_timer_plan_make(n);
    CFRunLoopTimerRef *t = malloc((size_t)n * sizeof *t);
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFAbsoluteTime base = CFAbsoluteTimeGetCurrent() + 1e6;
    for (long i = 0; i < n; i++)
        t[i] = CFRunLoopTimerCreate(NULL, base + (double)plan.pos[i] * 1e-3, 0, 0, 0, cf_timer_nothing, NULL);
    long k = n < a->max_rm ? n : a->max_rm;
    double t0 = brl_now();
    for (long i = 0; i < n; i++) CFRunLoopAddTimer(rl, t[i], kCFRunLoopCommonModes);
    double t1 = brl_now();
    for (long j = 0; j < k; j++) {
        CFRunLoopRemoveTimer(rl, t[plan.rm[j]], kCFRunLoopCommonModes);
        plan.removed[plan.rm[j]] = true;
    }
    double t2 = brl_now();
    for (long s = 0; s < n; s++) {
        long i = plan.by_pos[s];
        if (!plan.removed[i]) CFRunLoopRemoveTimer(rl, t[i], kCFRunLoopCommonModes);
    }
    for (long i = 0; i < n; i++) CFRelease(t[i]);
    free(t);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)k * 1e9);
    return NULL;
}

static brl_result cf_common_timers(long n, long max_rm) {
    cf_scale_arg a = {.n = n, .max_rm = max_rm};
    brl_run_on_thread(cf_common_thread, &a);
    return a.r;
}

/* ---- timer add+remove, hot loop ---------------------------------------- */

typedef struct {
    long n;
    brl_result r;
} cf_addrm_arg;

static void *cf_addrm_thread(void *arg) {
    cf_addrm_arg *a = arg;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1e6, 0, 0, 0, cf_timer_nothing, NULL);
    for (long i = 0; i < 1000; i++) { /* warm */
        CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
        CFRunLoopRemoveTimer(rl, t, kCFRunLoopDefaultMode);
    }
    double t0 = brl_now();
    for (long i = 0; i < a->n; i++) {
        CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
        CFRunLoopRemoveTimer(rl, t, kCFRunLoopDefaultMode);
    }
    double t1 = brl_now();
    CFRelease(t);
    a->r = brl_ok((double)a->n / (t1 - t0), 0);
    return NULL;
}

static brl_result cf_timer_addrm(long n) {
    cf_addrm_arg a = {.n = n};
    brl_run_on_thread(cf_addrm_thread, &a);
    return a.r;
}

/* ---- the guide's custom input source, fed from another thread ---------- */

typedef struct {
    BRL_OWN_LINES brl_cmdq q;
    CFRunLoopSourceRef src;
    long n, count, sum;
    double t_end;
    atomic_bool sent_all;
    _Atomic(CFRunLoopRef) rl;
} cf_guide;

/* The version-0 perform callout: takes the whole queue (Listing 3-6's
 * RunLoopSourcePerformRoutine -> sourceFired). */
static void cf_guide_perform(void *info) {
    cf_guide *g = info;
    g->count += brl_cmdq_take(&g->q, &g->sum);
    if (g->count >= g->n && g->t_end == 0) {
        g->t_end = brl_now();
        CFRunLoopStop(CFRunLoopGetCurrent());
    }
}

static void *cf_guide_consumer(void *arg) {
    cf_guide *g = arg;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopAddSource(rl, g->src, kCFRunLoopDefaultMode);
    atomic_store(&g->rl, rl);
    while (g->count < g->n) CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1.0, false);
    while (!atomic_load(&g->sent_all)) sched_yield(); /* keep rl alive for the last WakeUp */
    CFRunLoopRemoveSource(rl, g->src, kCFRunLoopDefaultMode);
    return NULL;
}

static brl_result cf_guide_source(long n) {
    cf_guide g = {.n = n};
    brl_cmdq_init(&g.q);
    g.src = cf_source(&g, cf_guide_perform);
    pthread_t t;
    pthread_create(&t, NULL, cf_guide_consumer, &g);
    CFRunLoopRef rl;
    while ((rl = atomic_load(&g.rl)) == NULL) sched_yield();
    double t0 = brl_now();
    for (long i = 0; i < n; i++) {
        /* Listing 3-8's addCommand:withData: then fireAllCommandsOnRunLoop: */
        brl_cmdq_push(&g.q, i);
        CFRunLoopSourceSignal(g.src);
        CFRunLoopWakeUp(rl);
    }
    atomic_store(&g.sent_all, true);
    pthread_join(t, NULL);
    CFRunLoopSourceInvalidate(g.src);
    CFRelease(g.src);
    brl_cmdq_destroy(&g.q);
    if (g.sum != n * (n - 1) / 2) return brl_none("guide source: commands lost");
    return brl_ok((double)n / (g.t_end - t0), 0);
}

const brl_peer BRL_PEER = {
    .name = BRL_PEER_NAME,
    .perform_block = cf_perform_block,
    .perform_queue = cf_perform_queue,
    .pingpong = cf_pingpong,
    .timers = cf_timers,
    .per_fire = cf_per_fire,
    .lateness = cf_lateness,
    .idle_start = cf_idle_start,
    .idle_finish = cf_idle_finish,
    .observer = cf_observer,
    .fds = cf_fds,
    .objects = cf_objects,
    .signal_sources = cf_signal_sources,
    .common_timers = cf_common_timers,
    .timer_addrm = cf_timer_addrm,
    .guide_source = cf_guide_source,
};
