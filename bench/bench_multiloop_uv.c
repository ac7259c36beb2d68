/*
 * bench_multiloop_uv.c — libuv as a peer of the multi-loop benchmark: one
 * uv_loop_t per thread, sharing nothing (libuv's loops take no lock at
 * all). The nearest equivalents: uv_timer_start + uv_timer_stop; a
 * mutex-protected request array drained by a uv_async_t for perform (the
 * usual libuv pattern, as in bench_runloop_uv.c); uv_async_send + one
 * UV_RUN_NOWAIT pass for signal + perform; uv_timer_start to move a timer
 * (libuv moves a timer by restarting it), and with a timeout of 0 followed
 * by one UV_RUN_NOWAIT pass to make it due and fire it; uv_timer_init +
 * uv_close for create + release (a handle is the caller's memory).
 */
#include <pthread.h>
#include <stdio.h>
#include <uv.h>

#include "bench_multiloop.h"

typedef struct {
    void (*fn)(void *);
    void *arg;
} bmu_item;

typedef struct {
    uv_loop_t loop;
    uv_timer_t timer;
    uv_async_t async;
    pthread_mutex_t mu;
    bmu_item *in, *work;
    long nin, cap;
    long performed;
} bmu;

static void bmu_nothing_timer(uv_timer_t *t) { (void)t; }
static void bmu_count_timer(uv_timer_t *t) { ((bmu *)t->data)->performed++; }
static void bmu_count(void *arg) { ((bmu *)arg)->performed++; }

static void bmu_drain(uv_async_t *h) {
    bmu *s = h->data;
    pthread_mutex_lock(&s->mu);
    bmu_item *w = s->in;
    long n = s->nin;
    s->in = s->work;
    s->work = w;
    s->nin = 0;
    pthread_mutex_unlock(&s->mu);
    for (long i = 0; i < n; i++) w[i].fn(w[i].arg);
}

static void bmu_post(bmu *s, void (*fn)(void *), void *arg) {
    pthread_mutex_lock(&s->mu);
    if (s->nin == s->cap) abort(); /* capacity is BML_BATCH: the loop drains each batch */
    s->in[s->nin++] = (bmu_item){fn, arg};
    pthread_mutex_unlock(&s->mu);
    uv_async_send(&s->async);
}

static void *bmu_setup(enum bml_op op) {
    bmu *s = calloc(1, sizeof *s);
    if (!s) abort();
    uv_loop_init(&s->loop);
    uv_timer_init(&s->loop, &s->timer);
    s->timer.data = s;
    uv_async_init(&s->loop, &s->async, bmu_drain);
    s->async.data = s;
    pthread_mutex_init(&s->mu, NULL);
    s->cap = BML_BATCH;
    s->in = malloc(BML_BATCH * sizeof *s->in);
    s->work = malloc(BML_BATCH * sizeof *s->work);
    if (!s->in || !s->work) abort();
    return s;
}

static void bmu_run(void *state, enum bml_op op, long n) {
    bmu *s = state;
    switch (op) {
    case BML_TIMER:
        for (long i = 0; i < n; i++) {
            uv_timer_start(&s->timer, bmu_nothing_timer, 1000000000ULL, 0);
            uv_timer_stop(&s->timer);
        }
        break;
    case BML_PERFORM:
        for (long i = 0; i < n; i += BML_BATCH) {
            for (int j = 0; j < BML_BATCH; j++) bmu_post(s, bmu_count, s);
            uv_run(&s->loop, UV_RUN_NOWAIT);
        }
        break;
    case BML_SIGNAL:
        for (long i = 0; i < n; i++) {
            uv_async_send(&s->async);
            uv_run(&s->loop, UV_RUN_NOWAIT);
        }
        break;
    case BML_MOVE: /* restarting is libuv's way to move a timer */
        for (long i = 0; i < n; i++) uv_timer_start(&s->timer, bmu_nothing_timer, 1000000000ULL + (uint64_t)i, 0);
        uv_timer_stop(&s->timer);
        break;
    case BML_CREATE: {
        /* A libuv handle lives in the caller's memory: the nearest is init +
         * close, the closes finished by one pass a batch. */
        uv_timer_t t[BML_BATCH];
        for (long i = 0; i < n; i += BML_BATCH) {
            for (int j = 0; j < BML_BATCH; j++) {
                uv_timer_init(&s->loop, &t[j]);
                uv_close((uv_handle_t *)&t[j], NULL);
            }
            uv_run(&s->loop, UV_RUN_NOWAIT);
        }
        break;
    }
    case BML_FIRE:
        for (long i = 0; i < n; i++) {
            uv_timer_start(&s->timer, bmu_count_timer, 0, 0);
            uv_run(&s->loop, UV_RUN_NOWAIT);
        }
        if (s->performed != n) fprintf(stderr, "bench_multiloop: libuv fired %ld of %ld\n", s->performed, n);
        break;
    default:
        break;
    }
}

static void bmu_close(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void bmu_finish(void *state, enum bml_op op) {
    bmu *s = state;
    uv_walk(&s->loop, bmu_close, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    pthread_mutex_destroy(&s->mu);
    free(s->in);
    free(s->work);
    free(s);
}

const bml_peer bml_peer_uv = {"libuv", bmu_setup, bmu_run, bmu_finish};
