/*
 * rl_txq.c — a stream's queue of sends through a loop's ring (rl_txq.h).
 */
#include "rl_txq.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

rl__txq *rl__txq_new(int fd) {
    rl__txq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    atomic_init(&q->refs, 1);
    q->fd = fd;
    q->tail = &q->head;
    return q;
}

void rl__txq_free(rl__txq *q) {
    rl__txq_drop(q); /* closes the fd if it was handed over */
    free(q->spare);
    free(q);
}

_Thread_local RLTypeRef rl__txq_lend;

bool rl__txq_push(rl__txq *q, const void *bytes, size_t n) {
    rl__txchunk *c = q->spare;
    RLTypeRef keep = n >= RL_TXQ_LEND_MIN ? rl__txq_lend : NULL;
    size_t need = keep ? 0 : n;
    if (c && c->cap >= need) {
        q->spare = NULL;
    } else {
        c = malloc(sizeof *c + need);
        if (!c)
            return false;
        c->cap = need;
    }
    c->next = NULL;
    c->len = n;
    c->off = 0;
    c->keep = keep ? RLRetain(keep) : NULL;
    if (keep) {
        c->p = bytes;
    } else {
        memcpy(c->bytes, bytes, n);
        c->p = c->bytes;
    }
    *q->tail = c;
    q->tail = &c->next;
    atomic_fetch_add_explicit(&q->state, 2, memory_order_acq_rel);
    return true;
}

void rl__txq_pop(rl__txq *q) {
    rl__txchunk *c = q->head;
    if (!c)
        return;
    q->head = c->next;
    if (!q->head)
        q->tail = &q->head;
    if (c->keep) {
        RLRelease(c->keep);
        c->keep = NULL;
    }
    if (!q->spare && c->cap <= 65536)
        q->spare = c; /* the next push's, no allocation */
    else
        free(c);
    unsigned was = atomic_fetch_sub_explicit(&q->state, 2, memory_order_acq_rel);
    if (was == (2 | RL_TXQ_CLOSE)) {
        atomic_store_explicit(&q->state, 0, memory_order_release);
        (void)close(q->fd); /* the socket's close, handed over: nothing to do on failure */
        q->fd = -1;
    }
}

void rl__txq_drop(rl__txq *q) {
    while (q->head)
        rl__txq_pop(q);
}

bool rl__txq_close_later(rl__txq *q) {
    unsigned s = atomic_load_explicit(&q->state, memory_order_acquire);
    while (s >> 1) {
        if (atomic_compare_exchange_weak_explicit(&q->state, &s, s | RL_TXQ_CLOSE, memory_order_acq_rel,
                                                  memory_order_acquire))
            return true;
    }
    return false;
}
