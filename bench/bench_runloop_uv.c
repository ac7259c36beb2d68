/*
 * bench_runloop_uv.c — libuv as a peer of the run-loop benchmark. libuv has
 * no run-loop modes, blocks or observers; the nearest equivalents are used
 * and named in the notes: uv_async_send with a mutex-protected work queue
 * for performs, uv_async ping-pong, uv_timer_start/stop, prepare + check
 * handles as the observer.
 */
#include <sched.h>
#include <stdatomic.h>
#include <uv.h>

#include "bench_runloop.h"

static void bu_nothing_timer(uv_timer_t *t) { (void)t; }

/* Closes every handle of loop and frees the loop's resources. */
static void bu_close_one(uv_handle_t *h, void *arg) {
    if (!uv_is_closing(h)) uv_close(h, NULL);
}
static void bu_finish_loop(uv_loop_t *loop) {
    uv_walk(loop, bu_close_one, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
}

/* ---- perform throughput: a locked queue drained on uv_async ----------- */

/* The producer appends (fn, arg) to a growable array under a mutex; the
 * consumer swaps the whole array out under the lock and runs it. No malloc
 * per item once warm: the strongest simple form of libuv's usual pattern. */
typedef struct {
    void (*fn)(void *);
    void *arg;
} uvq_item;

typedef struct {
    uvq_item *items;
    long len, cap;
} uvq_vec;

typedef struct {
    BRL_OWN_LINES uv_loop_t loop;
    uv_async_t async;
    pthread_mutex_t mu;
    uvq_vec in, spare;
    long n, count;
    double t_end;
    atomic_bool ready, sent_all;
} uvq;

static void uvq_drain(uv_async_t *h) {
    uvq *q = h->data;
    pthread_mutex_lock(&q->mu);
    uvq_vec work = q->in;
    q->in = q->spare;
    pthread_mutex_unlock(&q->mu);
    for (long i = 0; i < work.len; i++) work.items[i].fn(work.items[i].arg);
    work.len = 0;
    q->spare = work;
}

static void uvq_step(void *arg) {
    uvq *q = arg;
    if (++q->count == q->n) {
        q->t_end = brl_now();
        uv_stop(&q->loop);
    }
}

static void uvq_post(uvq *q, void (*fn)(void *), void *arg) {
    pthread_mutex_lock(&q->mu);
    if (q->in.len == q->in.cap) {
        q->in.cap = q->in.cap ? 2 * q->in.cap : 64;
        q->in.items = realloc(q->in.items, (size_t)q->in.cap * sizeof *q->in.items);
        if (!q->in.items) abort();
    }
    q->in.items[q->in.len++] = (uvq_item){fn, arg};
    pthread_mutex_unlock(&q->mu);
    uv_async_send(&q->async);
}

static void *uvq_consumer(void *arg) {
    uvq *q = arg;
    atomic_store(&q->ready, true);
    while (q->count < q->n) uv_run(&q->loop, UV_RUN_DEFAULT);
    while (!atomic_load(&q->sent_all)) sched_yield();
    return NULL;
}

static brl_result bu_perform_queue(long n) {
    uvq q = {.n = n};
    pthread_mutex_init(&q.mu, NULL);
    uv_loop_init(&q.loop);
    uv_async_init(&q.loop, &q.async, uvq_drain);
    q.async.data = &q;
    pthread_t t;
    pthread_create(&t, NULL, uvq_consumer, &q);
    while (!atomic_load(&q.ready)) sched_yield();
    double t0 = brl_now();
    for (long i = 0; i < n; i++) uvq_post(&q, uvq_step, &q);
    atomic_store(&q.sent_all, true);
    pthread_join(t, NULL);
    bu_finish_loop(&q.loop);
    pthread_mutex_destroy(&q.mu);
    free(q.in.items);
    free(q.spare.items);
    brl_result r = brl_ok((double)n / (q.t_end - t0), 0);
    snprintf(r.note, sizeof r.note, "libuv perform: (fn, arg) appended to a mutex-protected array, swapped out by the uv_async callback");
    return r;
}

static brl_result bu_perform_block(long n) { return brl_none("no blocks in libuv"); }

/* ---- uv_async ping-pong ----------------------------------------------- */

typedef struct bu_pp bu_pp;
typedef struct {
    BRL_OWN_LINES bu_pp *pp;
    uv_loop_t loop;
    uv_async_t async;
} bu_side;

struct bu_pp {
    BRL_OWN_LINES bu_side a, b;
    long n, warm, i;
    double t_sent;
    double *samples;
    atomic_bool stop;
    pthread_barrier_t ready;
};

static void bu_pp_a(uv_async_t *h) {
    bu_pp *p = h->data;
    double now = brl_now();
    if (p->t_sent != 0) {
        if (p->i >= p->warm) p->samples[p->i - p->warm] = now - p->t_sent;
        p->i++;
    }
    if (p->i == p->n + p->warm) {
        atomic_store(&p->stop, true);
        uv_async_send(&p->b.async);
        uv_stop(&p->a.loop);
        return;
    }
    p->t_sent = brl_now();
    uv_async_send(&p->b.async);
}

static void bu_pp_b(uv_async_t *h) {
    bu_pp *p = h->data;
    if (atomic_load(&p->stop)) {
        uv_stop(&p->b.loop);
        return;
    }
    uv_async_send(&p->a.async);
}

static void *bu_pp_thread(void *arg) {
    bu_side *s = arg;
    pthread_barrier_wait(&s->pp->ready);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    pthread_barrier_wait(&s->pp->ready); /* neither loop closes while the other may still send */
    return NULL;
}

static brl_result bu_pingpong(long n) {
    bu_pp p = {.n = n, .warm = n / 20 + 10};
    p.samples = malloc((size_t)n * sizeof *p.samples);
    p.a.pp = p.b.pp = &p;
    uv_loop_init(&p.a.loop);
    uv_loop_init(&p.b.loop);
    uv_async_init(&p.a.loop, &p.a.async, bu_pp_a);
    uv_async_init(&p.b.loop, &p.b.async, bu_pp_b);
    p.a.async.data = p.b.async.data = &p;
    pthread_barrier_init(&p.ready, NULL, 3);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, bu_pp_thread, &p.a);
    pthread_create(&tb, NULL, bu_pp_thread, &p.b);
    pthread_barrier_wait(&p.ready);
    uv_async_send(&p.a.async);
    pthread_barrier_wait(&p.ready);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    bu_finish_loop(&p.a.loop);
    bu_finish_loop(&p.b.loop);
    pthread_barrier_destroy(&p.ready);
    double p50 = brl_quantile(p.samples, n, 0.50) * 1e9, p99 = brl_quantile(p.samples, n, 0.99) * 1e9;
    free(p.samples);
    brl_result r = brl_ok(p50, p99);
    snprintf(r.note, sizeof r.note,
             "libuv ping-pong: its uv_async handshake spins and sched_yields (seen with strace), costly on a busy box");
    return r;
}

/* ---- timers add / remove ---------------------------------------------- */

typedef struct {
    long n, max_rm;
    brl_result r;
} bu_timers_arg;

static void *bu_timers_thread(void *arg) {
    bu_timers_arg *a = arg;
    long n = a->n;
    brl_timer_plan plan = brl_timer_plan_make(n);
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t *t = malloc((size_t)n * sizeof *t);
    for (long i = 0; i < n; i++) uv_timer_init(&loop, &t[i]);
    long k = n < a->max_rm ? n : a->max_rm;
    double t0 = brl_now();
    for (long i = 0; i < n; i++) uv_timer_start(&t[i], bu_nothing_timer, 1000000000ULL + (uint64_t)plan.pos[i], 0);
    double t1 = brl_now();
    for (long j = 0; j < k; j++) {
        uv_timer_stop(&t[plan.rm[j]]);
        plan.removed[plan.rm[j]] = true;
    }
    double t2 = brl_now();
    for (long i = 0; i < n; i++) uv_timer_stop(&t[i]);
    bu_finish_loop(&loop);
    free(t);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((t1 - t0) / (double)n * 1e9, (t2 - t1) / (double)k * 1e9);
    return NULL;
}

static brl_result bu_timers(long n, long max_rm) {
    bu_timers_arg a = {.n = n, .max_rm = max_rm};
    brl_run_on_thread(bu_timers_thread, &a);
    return a.r;
}

/* ---- per-fire cost / lateness ----------------------------------------- */

typedef struct {
    long idle, fires, count;
    double *late, prev;
    brl_result r;
} bu_fire_arg;

static void bu_fire_cb(uv_timer_t *t) {
    bu_fire_arg *a = t->data;
    double now = brl_now();
    if (a->late) a->late[a->count] = a->prev != 0 ? now - (a->prev + 0.001) : 0;
    a->prev = now;
    if (++a->count == a->fires) uv_stop(t->loop);
}

static void *bu_fire_thread(void *arg) {
    bu_fire_arg *a = arg;
    brl_timer_plan plan = brl_timer_plan_make(a->idle);
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t *idle = malloc((size_t)(a->idle + 1) * sizeof *idle);
    for (long i = 0; i < a->idle; i++) {
        uv_timer_init(&loop, &idle[i]);
        uv_timer_start(&idle[i], bu_nothing_timer, 1000000000ULL + (uint64_t)plan.pos[i], 0);
    }
    uv_timer_t timer;
    uv_timer_init(&loop, &timer);
    timer.data = a;
    uv_timer_start(&timer, bu_fire_cb, 5, 1);
    double c0 = brl_self_cpu();
    while (a->count < a->fires) uv_run(&loop, UV_RUN_DEFAULT);
    double c1 = brl_self_cpu();
    bu_finish_loop(&loop);
    free(idle);
    brl_timer_plan_free(&plan);
    a->r = brl_ok((c1 - c0) / (double)a->fires * 1e9, 0);
    return NULL;
}

static brl_result bu_per_fire(long idle, long fires) {
    bu_fire_arg a = {.idle = idle, .fires = fires};
    brl_run_on_thread(bu_fire_thread, &a);
    return a.r;
}

static brl_result bu_lateness(long fires) {
    bu_fire_arg a = {.idle = 0, .fires = fires};
    a.late = malloc((size_t)fires * sizeof *a.late);
    brl_run_on_thread(bu_fire_thread, &a);
    long skip = fires / 50 + 1;
    brl_result r = brl_ok(brl_quantile(a.late + skip, fires - skip, 0.5) * 1e9,
                          brl_quantile(a.late + skip, fires - skip, 0.99) * 1e9);
    snprintf(r.note, sizeof r.note, "libuv/GLib lateness: fire - (previous fire + 1 ms); they reschedule from the last fire, not on a grid");
    free(a.late);
    return r;
}

/* ---- idle loop -------------------------------------------------------- */

struct brl_idle {
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t stop;
    uv_prepare_t prepare;
    uv_check_t check;
    uv_timer_t timer;
    atomic_long wakes;
    atomic_bool asleep;
    double cpu0;
    long wakes0;
};

static void bu_idle_prepare(uv_prepare_t *h) { atomic_store(&((brl_idle *)h->data)->asleep, true); }
static void bu_idle_check(uv_check_t *h) { atomic_fetch_add(&((brl_idle *)h->data)->wakes, 1); }
static void bu_idle_stop(uv_async_t *h) { uv_stop(h->loop); }

static void *bu_idle_thread(void *arg) {
    brl_idle *d = arg;
    uv_run(&d->loop, UV_RUN_DEFAULT);
    return NULL;
}

static brl_idle *bu_idle_start(void) {
    brl_idle *d = calloc(1, sizeof *d);
    uv_loop_init(&d->loop);
    uv_async_init(&d->loop, &d->stop, bu_idle_stop);
    uv_prepare_init(&d->loop, &d->prepare);
    uv_check_init(&d->loop, &d->check);
    uv_timer_init(&d->loop, &d->timer);
    d->prepare.data = d->check.data = d;
    uv_prepare_start(&d->prepare, bu_idle_prepare);
    uv_check_start(&d->check, bu_idle_check);
    uv_timer_start(&d->timer, bu_nothing_timer, 3600 * 1000, 0);
    pthread_create(&d->thread, NULL, bu_idle_thread, d);
    while (!atomic_load(&d->asleep)) brl_sleep(0.001);
    brl_sleep(0.02);
    d->cpu0 = brl_thread_cpu(d->thread);
    d->wakes0 = atomic_load(&d->wakes);
    return d;
}

static brl_result bu_idle_finish(brl_idle *d) {
    double cpu = brl_thread_cpu(d->thread) - d->cpu0;
    long wakes = atomic_load(&d->wakes) - d->wakes0;
    uv_async_send(&d->stop);
    pthread_join(d->thread, NULL);
    bu_finish_loop(&d->loop);
    free(d);
    return brl_ok(cpu, (double)wakes);
}

/* ---- observer overhead: prepare + check handles ----------------------- */

static long bu_obs_calls;
static void bu_obs_prepare(uv_prepare_t *h) { bu_obs_calls++; }
static void bu_obs_check(uv_check_t *h) { bu_obs_calls++; }
static void bu_obs_async(uv_async_t *h) {}

static double bu_iterations(uv_loop_t *loop, long n) {
    double t0 = brl_now();
    for (long i = 0; i < n; i++) uv_run(loop, UV_RUN_NOWAIT);
    return (brl_now() - t0) / (double)n * 1e9;
}

static brl_result bu_observer(long n) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_async_t async;
    uv_async_init(&loop, &async, bu_obs_async);
    uv_prepare_t prep;
    uv_check_t check;
    uv_prepare_init(&loop, &prep);
    uv_check_init(&loop, &check);
    long chunk = n / BRL_CHUNKS + 1;
    bu_iterations(&loop, chunk);
    double without = INFINITY, with = INFINITY;
    for (int c = 0; c < BRL_CHUNKS; c++) {
        without = fmin(without, bu_iterations(&loop, chunk));
        uv_prepare_start(&prep, bu_obs_prepare);
        uv_check_start(&check, bu_obs_check);
        with = fmin(with, bu_iterations(&loop, chunk));
        uv_prepare_stop(&prep);
        uv_check_stop(&check);
    }
    bu_finish_loop(&loop);
    brl_result r = brl_ok(without, with);
    snprintf(r.note, sizeof r.note, "libuv observer: a prepare + a check handle (uv_run NOWAIT per iteration)");
    return r;
}

/* ---- fds per loop ----------------------------------------------------- */

static void *bu_fds_thread(void *arg) {
    brl_result *r = arg;
    int before = brl_count_fds();
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_async_t async;
    uv_async_init(&loop, &async, bu_obs_async);
    uv_timer_t timer;
    uv_timer_init(&loop, &timer);
    uv_timer_start(&timer, bu_nothing_timer, 3600 * 1000, 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    int after = brl_count_fds();
    bu_finish_loop(&loop);
    *r = brl_ok(after - before, 0);
    snprintf(r->note, sizeof r->note, "libuv/GLib have no modes: fds of one loop with a wake-up handle and a timer");
    return NULL;
}

static brl_result bu_fds(int modes) {
    brl_result r;
    brl_run_on_thread(bu_fds_thread, &r);
    return r;
}

/* ---- timer add+remove, hot loop ---------------------------------------- */

static void *bu_addrm_thread(void *arg) {
    brl_result *r = arg;
    long n = (long)r->v[0];
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    for (long i = 0; i < 1000; i++) {
        uv_timer_start(&t, bu_nothing_timer, 1000000000ULL, 0);
        uv_timer_stop(&t);
    }
    double t0 = brl_now();
    for (long i = 0; i < n; i++) {
        uv_timer_start(&t, bu_nothing_timer, 1000000000ULL, 0);
        uv_timer_stop(&t);
    }
    double t1 = brl_now();
    bu_finish_loop(&loop);
    *r = brl_ok((double)n / (t1 - t0), 0);
    return NULL;
}

static brl_result bu_timer_addrm(long n) {
    brl_result r = {.v = {(double)n}};
    brl_run_on_thread(bu_addrm_thread, &r);
    return r;
}

/* ---- the guide pattern: a mutex queue + uv_async_send ----------------- */

typedef struct {
    BRL_OWN_LINES uv_loop_t loop;
    uv_async_t async;
    brl_cmdq q;
    long n, count, sum;
    double t_end;
    atomic_bool ready, sent_all;
} bu_guide;

static void bu_guide_drain(uv_async_t *h) {
    bu_guide *g = h->data;
    g->count += brl_cmdq_take(&g->q, &g->sum);
    if (g->count >= g->n && g->t_end == 0) {
        g->t_end = brl_now();
        uv_stop(&g->loop);
    }
}

static void *bu_guide_consumer(void *arg) {
    bu_guide *g = arg;
    atomic_store(&g->ready, true);
    while (g->count < g->n) uv_run(&g->loop, UV_RUN_DEFAULT);
    while (!atomic_load(&g->sent_all)) sched_yield();
    return NULL;
}

static brl_result bu_guide_source(long n) {
    bu_guide g = {.n = n};
    brl_cmdq_init(&g.q);
    uv_loop_init(&g.loop);
    uv_async_init(&g.loop, &g.async, bu_guide_drain);
    g.async.data = &g;
    pthread_t t;
    pthread_create(&t, NULL, bu_guide_consumer, &g);
    while (!atomic_load(&g.ready)) sched_yield();
    double t0 = brl_now();
    for (long i = 0; i < n; i++) {
        brl_cmdq_push(&g.q, i);
        uv_async_send(&g.async);
    }
    atomic_store(&g.sent_all, true);
    pthread_join(t, NULL);
    bu_finish_loop(&g.loop);
    brl_cmdq_destroy(&g.q);
    if (g.sum != n * (n - 1) / 2) return brl_none("libuv guide: commands lost");
    return brl_ok((double)n / (g.t_end - t0), 0);
}

const brl_peer brl_peer_uv = {
    .name = "libuv",
    .perform_block = bu_perform_block,
    .perform_queue = bu_perform_queue,
    .pingpong = bu_pingpong,
    .timers = bu_timers,
    .per_fire = bu_per_fire,
    .lateness = bu_lateness,
    .timer_addrm = bu_timer_addrm,
    .guide_source = bu_guide_source,
    .idle_start = bu_idle_start,
    .idle_finish = bu_idle_finish,
    .observer = bu_observer,
    .fds = bu_fds,
};
