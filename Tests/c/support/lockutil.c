#include "lockutil.h"

static void *stress_thread(void *arg) {
    rl_stress *s = arg;
    int failures = 0;
    for (long i = 0; i < s->rounds; i++)
        if (!s->round(s, i))
            failures++;
    atomic_fetch_add(&s->failures, failures);
    return NULL;
}

void rl_stress_run(rl_stress *s) {
    s->rounds = rl_test_iters(1000000);
    s->counter = s->mirror = 0;
    atomic_store(&s->failures, 0);
    atomic_store(&s->torn, 0);
    /* Stride 0: every thread gets the same rl_stress. */
    rl_test_run_threads(RL_STRESS_THREADS, stress_thread, s, 0);
}

static void *hold_until_told(void *arg) {
    rl_holder *h = arg;
    for (int i = 0; i < h->depth; i++)
        h->take(h->lock);
    pthread_mutex_lock(&h->mu);
    h->phase = 1;
    pthread_cond_broadcast(&h->cv);
    while (h->phase != 2)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < h->depth; i++)
        h->drop(h->lock);
    return NULL;
}

void rl_holder_start(rl_holder *h, void *lock, rl_lock_fn take, rl_lock_fn drop, int depth) {
    *h = (rl_holder){.lock = lock, .take = take, .drop = drop, .depth = depth};
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    assert_int_equal(pthread_create(&h->thread, NULL, hold_until_told, h), 0);
    pthread_mutex_lock(&h->mu);
    while (h->phase != 1)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

void rl_holder_let_go(rl_holder *h) {
    pthread_mutex_lock(&h->mu);
    h->phase = 2;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

void rl_holder_join(rl_holder *h) {
    pthread_join(h->thread, NULL);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}

typedef struct try_request {
    void *lock;
    rl_lock_fn try_fn, drop;
} try_request;

static void *try_on_this_thread(void *arg) {
    try_request *r = arg;
    bool ok = r->try_fn(r->lock);
    RLErrorCode code = RLErrorGetLast().code;
    if (ok)
        r->drop(r->lock);
    return (void *)(intptr_t)(ok ? RL_TRY_GOT_IT : code);
}

intptr_t rl_try_elsewhere(void *lock, rl_lock_fn try_fn, rl_lock_fn drop) {
    try_request r = {lock, try_fn, drop};
    return (intptr_t)rl_test_on_other_thread(try_on_this_thread, &r);
}
