/*
 * bench_runloop_glib.c — GLib's main loop as a peer of the run-loop
 * benchmark. GLib has no modes or observers; the nearest equivalents are
 * used and named in the notes: g_main_context_invoke for performs and for
 * the ping-pong (from a thread that does not own the context it attaches an
 * idle source and wakes the context), timeout sources attached and
 * destroyed, and a custom GSource's prepare/check as the observer.
 */
#include <glib.h>
#include <sched.h>
#include <stdatomic.h>

#include "bench_runloop.h"

static gboolean gl_nothing(gpointer data) { return G_SOURCE_CONTINUE; }

/* ---- perform throughput: g_main_context_invoke ------------------------ */

typedef struct {
    BRL_OWN_LINES GMainContext *ctx;
    GMainLoop *loop;
    long n, count;
    double t_end;
    atomic_bool running, sent_all;
} gl_perf;

static gboolean gl_perf_running(gpointer data) {
    atomic_store(&((gl_perf *)data)->running, true);
    return G_SOURCE_REMOVE;
}

static gboolean gl_perf_step(gpointer data) {
    gl_perf *c = data;
    if (++c->count == c->n) {
        c->t_end = brl_now();
        g_main_loop_quit(c->loop);
    }
    return G_SOURCE_REMOVE;
}

static void *gl_perf_consumer(void *arg) {
    gl_perf *c = arg;
    g_main_context_push_thread_default(c->ctx);
    GSource *s = g_idle_source_new();
    g_source_set_callback(s, gl_perf_running, c, NULL);
    g_source_attach(s, c->ctx);
    g_source_unref(s);
    while (c->count < c->n) g_main_loop_run(c->loop);
    while (!atomic_load(&c->sent_all)) sched_yield();
    g_main_context_pop_thread_default(c->ctx);
    return NULL;
}

static brl_result gl_perform_queue(long n) {
    gl_perf c = {.n = n};
    c.ctx = g_main_context_new();
    c.loop = g_main_loop_new(c.ctx, FALSE);
    pthread_t t;
    pthread_create(&t, NULL, gl_perf_consumer, &c);
    while (!atomic_load(&c.running)) sched_yield();
    double t0 = brl_now();
    for (long i = 0; i < n; i++) g_main_context_invoke(c.ctx, gl_perf_step, &c);
    atomic_store(&c.sent_all, true);
    pthread_join(t, NULL);
    g_main_loop_unref(c.loop);
    g_main_context_unref(c.ctx);
    brl_result r = brl_ok((double)n / (c.t_end - t0), 0);
    snprintf(r.note, sizeof r.note, "GLib perform: g_main_context_invoke from another thread (an idle GSource each)");
    return r;
}

static brl_result gl_perform_block(long n) { return brl_none("no blocks in GLib"); }

/* ---- invoke ping-pong ------------------------------------------------- */

typedef struct gl_pp gl_pp;
typedef struct {
    BRL_OWN_LINES gl_pp *pp;
    GMainContext *ctx;
    GMainLoop *loop;
} gl_side;

struct gl_pp {
    BRL_OWN_LINES gl_side a, b;
    long n, warm, i;
    double t_sent;
    double *samples;
    pthread_barrier_t ready;
};

static gboolean gl_pp_b(gpointer data);

static gboolean gl_pp_a(gpointer data) {
    gl_pp *p = data;
    double now = brl_now();
    if (p->t_sent != 0) {
        if (p->i >= p->warm) p->samples[p->i - p->warm] = now - p->t_sent;
        p->i++;
    }
    if (p->i == p->n + p->warm) {
        g_main_loop_quit(p->b.loop);
        g_main_loop_quit(p->a.loop);
        return G_SOURCE_REMOVE;
    }
    p->t_sent = brl_now();
    g_main_context_invoke(p->b.ctx, gl_pp_b, p);
    return G_SOURCE_REMOVE;
}

static gboolean gl_pp_b(gpointer data) {
    gl_pp *p = data;
    g_main_context_invoke(p->a.ctx, gl_pp_a, p);
    return G_SOURCE_REMOVE;
}

/* Runs inside the loop: from here on the context is owned by its thread,
 * so an invoke from elsewhere goes through the loop. */
static gboolean gl_pp_running(gpointer data) {
    pthread_barrier_wait(&((gl_side *)data)->pp->ready);
    return G_SOURCE_REMOVE;
}

static void *gl_pp_thread(void *arg) {
    gl_side *s = arg;
    g_main_context_push_thread_default(s->ctx);
    GSource *src = g_idle_source_new();
    g_source_set_callback(src, gl_pp_running, s, NULL);
    g_source_attach(src, s->ctx);
    g_source_unref(src);
    g_main_loop_run(s->loop);
    g_main_context_pop_thread_default(s->ctx);
    pthread_barrier_wait(&s->pp->ready);
    return NULL;
}

static brl_result gl_pingpong(long n) {
    gl_pp p = {.n = n, .warm = n / 20 + 10};
    p.samples = malloc((size_t)n * sizeof *p.samples);
    p.a.pp = p.b.pp = &p;
    p.a.ctx = g_main_context_new();
    p.b.ctx = g_main_context_new();
    p.a.loop = g_main_loop_new(p.a.ctx, FALSE);
    p.b.loop = g_main_loop_new(p.b.ctx, FALSE);
    pthread_barrier_init(&p.ready, NULL, 3);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, gl_pp_thread, &p.a);
    pthread_create(&tb, NULL, gl_pp_thread, &p.b);
    pthread_barrier_wait(&p.ready);
    g_main_context_invoke(p.a.ctx, gl_pp_a, &p);
    pthread_barrier_wait(&p.ready);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    g_main_loop_unref(p.a.loop);
    g_main_loop_unref(p.b.loop);
    g_main_context_unref(p.a.ctx);
    g_main_context_unref(p.b.ctx);
    pthread_barrier_destroy(&p.ready);
    double p50 = brl_quantile(p.samples, n, 0.50) * 1e9, p99 = brl_quantile(p.samples, n, 0.99) * 1e9;
    free(p.samples);
    brl_result r = brl_ok(p50, p99);
    snprintf(r.note, sizeof r.note, "GLib ping-pong: g_main_context_invoke onto the other thread's context");
    return r;
}

/* ---- timers add / remove ---------------------------------------------- */

typedef struct {
    long n, max_rm;
    brl_result r;
} gl_timers_arg;

static void *gl_timers_thread(void *arg) {
    gl_timers_arg *a = arg;
    long n = a->n;
    brl_timer_plan plan = brl_timer_plan_make(n);
    GMainContext *ctx = g_main_context_new();
    g_main_context_acquire(ctx);
    GSource **t = malloc((size_t)n * sizeof *t);
    for (long i = 0; i < n; i++) {
        t[i] = g_timeout_source_new(1000000000u + (guint)plan.pos[i]);
        g_source_set_callback(t[i], gl_nothing, NULL, NULL);
    }
    long k = n < a->max_rm ? n : a->max_rm;
    double t0 = brl_now();
    for (long i = 0; i < n; i++) g_source_attach(t[i], ctx);
    double t1 = brl_now();
    for (long j = 0; j < k; j++) {
        g_source_destroy(t[plan.rm[j]]);
        plan.removed[plan.rm[j]] = true;
    }
    double t2 = brl_now();
    for (long i = 0; i < n; i++) {
        if (!plan.removed[i]) g_source_destroy(t[i]);
        g_source_unref(t[i]);
    }
    g_main_context_release(ctx);
    g_main_context_unref(ctx);
    free(t);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)k * 1e9);
    snprintf(a->r.note, sizeof a->r.note,
             "GLib timers: g_source_attach/g_source_destroy of pre-created timeout sources (creation untimed, as for all)");
    return NULL;
}

static brl_result gl_timers(long n, long max_rm) {
    gl_timers_arg a = {.n = n, .max_rm = max_rm};
    brl_run_on_thread(gl_timers_thread, &a);
    return a.r;
}

/* ---- per-fire cost / lateness ----------------------------------------- */

typedef struct {
    long idle, fires, count;
    double *late, prev;
    GMainLoop *loop;
    brl_result r;
} gl_fire_arg;

static gboolean gl_fire_cb(gpointer data) {
    gl_fire_arg *a = data;
    double now = brl_now();
    if (a->late) a->late[a->count] = a->prev != 0 ? now - (a->prev + 0.001) : 0;
    a->prev = now;
    if (++a->count == a->fires) g_main_loop_quit(a->loop);
    return G_SOURCE_CONTINUE;
}

static void *gl_fire_thread(void *arg) {
    gl_fire_arg *a = arg;
    brl_timer_plan plan = brl_timer_plan_make(a->idle);
    GMainContext *ctx = g_main_context_new();
    g_main_context_push_thread_default(ctx);
    a->loop = g_main_loop_new(ctx, FALSE);
    GSource **idle = malloc((size_t)(a->idle + 1) * sizeof *idle);
    for (long i = 0; i < a->idle; i++) {
        idle[i] = g_timeout_source_new(1000000000u + (guint)plan.pos[i]);
        g_source_set_callback(idle[i], gl_nothing, NULL, NULL);
        g_source_attach(idle[i], ctx);
    }
    GSource *timer = g_timeout_source_new(1);
    g_source_set_callback(timer, gl_fire_cb, a, NULL);
    g_source_attach(timer, ctx);
    double c0 = brl_self_cpu();
    while (a->count < a->fires) g_main_loop_run(a->loop);
    double c1 = brl_self_cpu();
    g_source_destroy(timer);
    g_source_unref(timer);
    for (long i = 0; i < a->idle; i++) {
        g_source_destroy(idle[i]);
        g_source_unref(idle[i]);
    }
    free(idle);
    g_main_loop_unref(a->loop);
    g_main_context_pop_thread_default(ctx);
    g_main_context_unref(ctx);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((c1 - c0) / (double)a->fires * 1e9, 0);
    return NULL;
}

static brl_result gl_per_fire(long idle, long fires) {
    gl_fire_arg a = {.idle = idle, .fires = fires};
    brl_run_on_thread(gl_fire_thread, &a);
    return a.r;
}

static brl_result gl_lateness(long fires) {
    gl_fire_arg a = {.idle = 0, .fires = fires};
    a.late = malloc((size_t)fires * sizeof *a.late);
    brl_run_on_thread(gl_fire_thread, &a);
    long skip = fires / 50 + 1;
    brl_result r = brl_ok(brl_quantile(a.late + skip, fires - skip, 0.5) * 1e9,
                          brl_quantile(a.late + skip, fires - skip, 0.99) * 1e9);
    free(a.late);
    return r;
}

/* ---- a GSource that only watches the loop (the observer stand-in) ---- */

typedef struct {
    GSource base;
    atomic_long *wakes;
    atomic_bool *asleep;
    long calls;
} gl_watch;

static gboolean gl_watch_prepare(GSource *s, gint *timeout) {
    gl_watch *w = (gl_watch *)s;
    *timeout = -1;
    w->calls++;
    if (w->asleep) atomic_store(w->asleep, true);
    return FALSE;
}

static gboolean gl_watch_check(GSource *s) {
    gl_watch *w = (gl_watch *)s;
    w->calls++;
    if (w->wakes) atomic_fetch_add(w->wakes, 1);
    return FALSE;
}

static gboolean gl_watch_dispatch(GSource *s, GSourceFunc cb, gpointer data) { return G_SOURCE_CONTINUE; }

static GSourceFuncs gl_watch_funcs = {gl_watch_prepare, gl_watch_check, gl_watch_dispatch, NULL, NULL, NULL};

/* ---- idle loop -------------------------------------------------------- */

struct brl_idle {
    pthread_t thread;
    GMainContext *ctx;
    GMainLoop *loop;
    atomic_long wakes;
    atomic_bool asleep;
    double cpu0;
    long wakes0;
};

static void *gl_idle_thread(void *arg) {
    brl_idle *d = arg;
    g_main_context_push_thread_default(d->ctx);
    GSource *timer = g_timeout_source_new(3600 * 1000);
    g_source_set_callback(timer, gl_nothing, NULL, NULL);
    g_source_attach(timer, d->ctx);
    gl_watch *w = (gl_watch *)g_source_new(&gl_watch_funcs, sizeof *w);
    w->wakes = &d->wakes;
    w->asleep = &d->asleep;
    g_source_attach(&w->base, d->ctx);
    g_main_loop_run(d->loop);
    g_source_destroy(&w->base);
    g_source_unref(&w->base);
    g_source_destroy(timer);
    g_source_unref(timer);
    g_main_context_pop_thread_default(d->ctx);
    return NULL;
}

static brl_idle *gl_idle_start(void) {
    brl_idle *d = calloc(1, sizeof *d);
    d->ctx = g_main_context_new();
    d->loop = g_main_loop_new(d->ctx, FALSE);
    pthread_create(&d->thread, NULL, gl_idle_thread, d);
    while (!atomic_load(&d->asleep)) brl_sleep(0.001);
    brl_sleep(0.02);
    d->cpu0 = brl_thread_cpu(d->thread);
    d->wakes0 = atomic_load(&d->wakes);
    return d;
}

static brl_result gl_idle_finish(brl_idle *d) {
    double cpu = brl_thread_cpu(d->thread) - d->cpu0;
    long wakes = atomic_load(&d->wakes) - d->wakes0;
    g_main_loop_quit(d->loop);
    pthread_join(d->thread, NULL);
    g_main_loop_unref(d->loop);
    g_main_context_unref(d->ctx);
    free(d);
    return brl_ok(cpu, (double)wakes);
}

/* ---- observer overhead ------------------------------------------------ */

static double gl_iterations(GMainContext *ctx, long n) {
    double t0 = brl_now();
    for (long i = 0; i < n; i++) g_main_context_iteration(ctx, FALSE);
    return (brl_now() - t0) / (double)n * 1e9;
}

static void *gl_obs_thread(void *arg) {
    brl_result *r = arg;
    long n = (long)r->v[0];
    GMainContext *ctx = g_main_context_new();
    g_main_context_push_thread_default(ctx);
    GSource *timer = g_timeout_source_new(3600 * 1000);
    g_source_set_callback(timer, gl_nothing, NULL, NULL);
    g_source_attach(timer, ctx);
    long chunk = n / BRL_CHUNKS + 1;
    gl_iterations(ctx, chunk);
    double without = INFINITY, with = INFINITY;
    for (int c = 0; c < BRL_CHUNKS; c++) {
        without = fmin(without, gl_iterations(ctx, chunk));
        gl_watch *w = (gl_watch *)g_source_new(&gl_watch_funcs, sizeof *w);
        g_source_attach(&w->base, ctx);
        with = fmin(with, gl_iterations(ctx, chunk));
        g_source_destroy(&w->base);
        g_source_unref(&w->base);
    }
    g_source_destroy(timer);
    g_source_unref(timer);
    g_main_context_pop_thread_default(ctx);
    g_main_context_unref(ctx);
    *r = brl_ok(without, with);
    snprintf(r->note, sizeof r->note, "GLib observer: a GSource's prepare + check (g_main_context_iteration, no wait)");
    return NULL;
}

static brl_result gl_observer(long n) {
    brl_result r = {.v = {(double)n, 0}};
    brl_run_on_thread(gl_obs_thread, &r);
    return r;
}

/* ---- fds per loop ----------------------------------------------------- */

static void *gl_fds_thread(void *arg) {
    brl_result *r = arg;
    int before = brl_count_fds();
    GMainContext *ctx = g_main_context_new();
    g_main_context_push_thread_default(ctx);
    GSource *timer = g_timeout_source_new(3600 * 1000);
    g_source_set_callback(timer, gl_nothing, NULL, NULL);
    g_source_attach(timer, ctx);
    g_main_context_iteration(ctx, FALSE);
    int after = brl_count_fds();
    g_source_destroy(timer);
    g_source_unref(timer);
    g_main_context_pop_thread_default(ctx);
    g_main_context_unref(ctx);
    *r = brl_ok(after - before, 0);
    return NULL;
}

static brl_result gl_fds(int modes) {
    brl_result r;
    brl_run_on_thread(gl_fds_thread, &r);
    return r;
}

/* ---- timer add+remove, hot loop ---------------------------------------- */

/* A destroyed GSource cannot be attached again: each add is a new timeout
 * source (its creation timed, unlike the other peers). */
static void *gl_addrm_thread(void *arg) {
    brl_result *r = arg;
    long n = (long)r->v[0];
    GMainContext *ctx = g_main_context_new();
    g_main_context_acquire(ctx);
    double t0 = 0;
    for (long i = -1000; i < n; i++) {
        if (i == 0) t0 = brl_now();
        GSource *t = g_timeout_source_new(1000000000u);
        g_source_set_callback(t, gl_nothing, NULL, NULL);
        g_source_attach(t, ctx);
        g_source_destroy(t);
        g_source_unref(t);
    }
    double t1 = brl_now();
    g_main_context_release(ctx);
    g_main_context_unref(ctx);
    *r = brl_ok((double)n / (t1 - t0), 0);
    snprintf(r->note, sizeof r->note, "GLib timer add+remove: a new timeout source each time (a destroyed one cannot be re-attached)");
    return NULL;
}

static brl_result gl_timer_addrm(long n) {
    brl_result r = {.v = {(double)n}};
    brl_run_on_thread(gl_addrm_thread, &r);
    return r;
}

/* ---- the guide pattern: a mutex queue + a GSource set ready ----------- */

typedef struct {
    GSource base;
    struct gl_guide *g;
} gl_guide_gsource;

typedef struct gl_guide {
    BRL_OWN_LINES GMainContext *ctx;
    GMainLoop *loop;
    GSource *src;
    brl_cmdq q;
    long n, count, sum;
    double t_end;
    atomic_bool running, sent_all;
} gl_guide;

static gboolean gl_guide_dispatch(GSource *s, GSourceFunc cb, gpointer data) {
    gl_guide *g = ((gl_guide_gsource *)s)->g;
    g_source_set_ready_time(s, -1); /* before taking: a command pushed after is not missed */
    g->count += brl_cmdq_take(&g->q, &g->sum);
    if (g->count >= g->n && g->t_end == 0) {
        g->t_end = brl_now();
        g_main_loop_quit(g->loop);
    }
    return G_SOURCE_CONTINUE;
}

static GSourceFuncs gl_guide_funcs = {NULL, NULL, gl_guide_dispatch, NULL, NULL, NULL};

static gboolean gl_guide_running(gpointer data) {
    atomic_store(&((gl_guide *)data)->running, true);
    return G_SOURCE_REMOVE;
}

static void *gl_guide_consumer(void *arg) {
    gl_guide *g = arg;
    g_main_context_push_thread_default(g->ctx);
    GSource *s = g_idle_source_new();
    g_source_set_callback(s, gl_guide_running, g, NULL);
    g_source_attach(s, g->ctx);
    g_source_unref(s);
    while (g->count < g->n) g_main_loop_run(g->loop);
    while (!atomic_load(&g->sent_all)) sched_yield();
    g_main_context_pop_thread_default(g->ctx);
    return NULL;
}

static brl_result gl_guide_source(long n) {
    gl_guide g = {.n = n};
    brl_cmdq_init(&g.q);
    g.ctx = g_main_context_new();
    g.loop = g_main_loop_new(g.ctx, FALSE);
    g.src = g_source_new(&gl_guide_funcs, sizeof(gl_guide_gsource));
    ((gl_guide_gsource *)g.src)->g = &g;
    g_source_attach(g.src, g.ctx);
    pthread_t t;
    pthread_create(&t, NULL, gl_guide_consumer, &g);
    while (!atomic_load(&g.running)) sched_yield();
    double t0 = brl_now();
    for (long i = 0; i < n; i++) {
        brl_cmdq_push(&g.q, i);
        g_source_set_ready_time(g.src, 0); /* thread-safe; wakes the context */
    }
    atomic_store(&g.sent_all, true);
    pthread_join(t, NULL);
    g_source_destroy(g.src);
    g_source_unref(g.src);
    g_main_loop_unref(g.loop);
    g_main_context_unref(g.ctx);
    brl_cmdq_destroy(&g.q);
    if (g.sum != n * (n - 1) / 2) return brl_none("GLib guide: commands lost");
    return brl_ok((double)n / (g.t_end - t0), 0);
}

const brl_peer brl_peer_glib = {
    .name = "GLib",
    .perform_block = gl_perform_block,
    .perform_queue = gl_perform_queue,
    .pingpong = gl_pingpong,
    .timers = gl_timers,
    .per_fire = gl_per_fire,
    .lateness = gl_lateness,
    .idle_start = gl_idle_start,
    .idle_finish = gl_idle_finish,
    .observer = gl_observer,
    .fds = gl_fds,
    .timer_addrm = gl_timer_addrm,
    .guide_source = gl_guide_source,
};
