/*
 * rl_rxq.c — a stream's read-ahead queue (rl_rxq.h): chunks in the order
 * they were received, under a leaf lock.
 */
#include "rl_rxq.h"
#include "RLLockInternal.h"

#include <stdlib.h>
#include <string.h>

struct rl__rxq {
    rl__mutex lock; /* head, tail */
    _Atomic int refs;
    _Atomic size_t count;
    _Atomic(const void *) owner;
    _Atomic size_t want;
    _Atomic(rl__rxchunk *) spare;
    rl__rxchunk *head, **tail;
};

static void rxq_lock(rl__rxq *q) {
    if (RL__UNLIKELY(!rl__mutex_trylock(&q->lock)))
        (void)rl__mutex_lock_slow(&q->lock, NULL);
}

rl__rxq *rl__rxq_new(void) {
    rl__rxq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    atomic_init(&q->refs, 1);
    q->tail = &q->head;
    return q;
}

rl__rxq *rl__rxq_retain(rl__rxq *q) {
    atomic_fetch_add_explicit(&q->refs, 1, memory_order_relaxed);
    return q;
}

void rl__rxq_release(rl__rxq *q) {
    if (!q || atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (rl__rxchunk *c = q->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(atomic_load_explicit(&q->spare, memory_order_relaxed));
    free(q);
}

void rl__rxq_push(rl__rxq *q, rl__rxchunk *c) {
    c->next = NULL;
    rxq_lock(q);
    *q->tail = c;
    q->tail = &c->next;
    atomic_fetch_add_explicit(&q->count, 1, memory_order_release);
    rl__mutex_unlock(&q->lock);
}

/* The oldest chunk (the caller's now), or NULL: none. */
static rl__rxchunk *rxq_pop(rl__rxq *q) {
    if (atomic_load_explicit(&q->count, memory_order_acquire) == 0)
        return NULL;
    rxq_lock(q);
    rl__rxchunk *c = q->head;
    if (c) {
        q->head = c->next;
        if (!q->head)
            q->tail = &q->head;
        atomic_fetch_sub_explicit(&q->count, 1, memory_order_relaxed);
    }
    rl__mutex_unlock(&q->lock);
    return c;
}

rl__rxchunk *rl__rxq_pop_upto(rl__rxq *q, size_t max) {
    rl__rxchunk *c = rxq_pop(q);
    if (!c || !c->full || c->len == 0 || c->len >= max || atomic_load_explicit(&q->count, memory_order_acquire) == 0)
        return c;
    rxq_lock(q);
    /* What the chunks after it hold, up to max: bytes, up to the first
     * that did not fill its buffer (the kernel had no more then). */
    size_t total = c->len;
    for (rl__rxchunk *n = q->head; n && total < max && n->len > 0; n = n->next) {
        total += n->len;
        if (!n->full)
            break;
    }
    if (total > max)
        total = max;
    if (total > c->cap) {
        rl__rxchunk *big = realloc(c, sizeof *c + total);
        if (!big) {
            rl__mutex_unlock(&q->lock);
            return c; /* delivered as it is; the next pop follows */
        }
        c = big;
        c->cap = total;
    }
    while (c->len < total) {
        rl__rxchunk *n = q->head;
        size_t take = total - c->len < n->len ? total - c->len : n->len;
        memcpy(c->bytes + c->len, n->bytes, take);
        c->len += take;
        if (take < n->len) {
            memmove(n->bytes, n->bytes + take, n->len - take);
            n->len -= take;
            c->full = true; /* more queued */
            break;
        }
        c->full = n->full;
        q->head = n->next;
        if (!q->head)
            q->tail = &q->head;
        atomic_fetch_sub_explicit(&q->count, 1, memory_order_relaxed);
        free(n);
    }
    rl__mutex_unlock(&q->lock);
    return c;
}

size_t rl__rxq_count(const rl__rxq *q) { return atomic_load_explicit(&q->count, memory_order_acquire); }

bool rl__rxq_claim(rl__rxq *q, const void *owner) {
    const void *none = NULL;
    return atomic_compare_exchange_strong(&q->owner, &none, owner) || none == owner;
}

void rl__rxq_set_want(rl__rxq *q, size_t n) { atomic_store_explicit(&q->want, n, memory_order_relaxed); }

size_t rl__rxq_want(const rl__rxq *q) { return atomic_load_explicit(&q->want, memory_order_relaxed); }

/* Chunks smaller than this are not worth keeping apart; larger ones are
 * not kept (a stream's spare holds little). */
enum { RXQ_SPARE_MIN = 256, RXQ_SPARE_MAX = 4096 };

rl__rxchunk *rl__rxq_chunk(rl__rxq *q, size_t n) {
    rl__rxchunk *c = q ? atomic_exchange_explicit(&q->spare, NULL, memory_order_acquire) : NULL;
    if (c && c->cap >= n)
        return c;
    if (c)
        free(c);
    size_t cap = n < RXQ_SPARE_MIN ? RXQ_SPARE_MIN : n;
    c = malloc(sizeof *c + cap);
    if (c)
        c->cap = cap;
    return c;
}

void rl__rxq_give_back(rl__rxq *q, rl__rxchunk *c) {
    if (!q || c->cap > RXQ_SPARE_MAX) {
        free(c);
        return;
    }
    rl__rxchunk *was = atomic_exchange_explicit(&q->spare, c, memory_order_release);
    if (was) /* most often none: no call */
        free(was);
}
