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

bool rl__txq_push(rl__txq *q, const void *bytes, size_t n) {
    rl__txchunk *c = q->spare;
    if (c && c->cap >= n) {
        q->spare = NULL;
    } else {
        c = malloc(sizeof *c + n);
        if (!c)
            return false;
        c->cap = n;
    }
    c->next = NULL;
    c->len = n;
    c->off = 0;
    memcpy(c->bytes, bytes, n);
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
