/* rl_weak.c — weak references (rl_weak.h). */
#include "rl_weak.h"

#include <stdlib.h>

struct rl__weak {
    _Atomic long rc;
    pthread_mutex_t mu;
    const void *obj;
};

rl__weak *rl__weak_new(const void *obj) {
    rl__weak *w = malloc(sizeof *w);
    if (!w)
        return NULL;
    atomic_init(&w->rc, 1);
    pthread_mutex_init(&w->mu, NULL);
    w->obj = obj;
    return w;
}

const void *rl__weak_retain(const void *p) {
    rl__weak *w = (rl__weak *)p;
    atomic_fetch_add_explicit(&w->rc, 1, memory_order_relaxed);
    return p;
}

void rl__weak_release(const void *p) {
    rl__weak *w = (rl__weak *)p;
    if (atomic_fetch_sub_explicit(&w->rc, 1, memory_order_acq_rel) == 1) {
        pthread_mutex_destroy(&w->mu);
        free(w);
    }
}

void *rl__weak_get(rl__weak *w) {
    pthread_mutex_lock(&w->mu);
    const void *obj = w->obj;
    if (obj)
        RLRetain(obj);
    pthread_mutex_unlock(&w->mu);
    return (void *)obj;
}

void rl__weak_cut(rl__weak *w) {
    pthread_mutex_lock(&w->mu);
    w->obj = NULL;
    pthread_mutex_unlock(&w->mu);
}
