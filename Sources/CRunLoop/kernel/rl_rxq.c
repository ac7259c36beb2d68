/*
 * rl_rxq.c — a stream's read-ahead queue (rl_rxq.h): chunks in the order
 * they were received, under a leaf lock; and each thread's few chunks
 * kept for the next receives.
 */
#include "rl_rxq.h"
#include "rl_chunkcache.h"
#include "RLLockInternal.h"
#include "internal.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* 40 bytes (48 with malloc's header): an idle stream read through a ring
 * holds this and nothing else (before: 72, with a spare chunk kept per
 * queue, and a rare part of the socket's made to hold it). */
struct rl__rxq {
    _Atomic uint32_t lock; /* head, tail: 0 free, 1 held, 2 held and maybe waited for */
    _Atomic uint32_t refs;
    _Atomic uint32_t count;
    _Atomic uint32_t want;
    _Atomic(const void *) owner;
    rl__rxchunk *head, **tail;
};
_Static_assert(sizeof(struct rl__rxq) <= 40, "rl__rxq outgrew 40 bytes");

static __attribute__((noinline)) void rxq_lock_slow(rl__rxq *q) {
    while (atomic_exchange_explicit(&q->lock, 2, memory_order_acquire) != 0)
        (void)rl__futex_wait(&q->lock, 2, NULL);
}

static inline void rxq_lock(rl__rxq *q) {
    uint32_t expected = 0;
    if (RL__UNLIKELY(!atomic_compare_exchange_strong_explicit(&q->lock, &expected, 1, memory_order_acquire,
                                                              memory_order_relaxed)))
        rxq_lock_slow(q);
}

static inline void rxq_unlock(rl__rxq *q) {
    if (RL__UNLIKELY(atomic_exchange_explicit(&q->lock, 0, memory_order_release) == 2))
        rl__futex_wake(&q->lock, 1);
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
    free(q);
}

void rl__rxq_push(rl__rxq *q, rl__rxchunk *c) {
    c->next = NULL;
    rxq_lock(q);
    *q->tail = c;
    q->tail = &c->next;
    atomic_fetch_add_explicit(&q->count, 1, memory_order_release);
    rxq_unlock(q);
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
    rxq_unlock(q);
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
            rxq_unlock(q);
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
        rl__rxq_give_back(q, n);
    }
    rxq_unlock(q);
    return c;
}

size_t rl__rxq_count(const rl__rxq *q) { return atomic_load_explicit(&q->count, memory_order_acquire); }

bool rl__rxq_claim(rl__rxq *q, const void *owner) {
    const void *none = NULL;
    return atomic_compare_exchange_strong(&q->owner, &none, owner) || none == owner;
}

void rl__rxq_set_want(rl__rxq *q, size_t n) {
    atomic_store_explicit(&q->want, (uint32_t)n, memory_order_relaxed); /* a reader's chunk: 2 MiB at most */
}

size_t rl__rxq_want(const rl__rxq *q) { return atomic_load_explicit(&q->want, memory_order_relaxed); }

/* ---- the thread's chunks ----
 * A chunk its reader is done with goes back to the thread that read it
 * (the loop's: the ring takes chunks on it, the callouts give them back
 * on it), not to the stream: an idle stream holds no buffer. The thread
 * keeps chunks of RXQ_CACHE_CAP bytes at most, 128 small ones' worth in
 * all at most, freed when the thread exits. One wake of a loop serving
 * many streams takes a chunk for each stream that received (16 in `make
 * bench-echo-instr`'s 16 connections, 256 in bench_echo's rt256 row)
 * before its callouts give them back: with 4 kept (before), 12 of each 16
 * receives cost a malloc and a free, about 100 of the 1,900 user-space
 * instructions of a 16-connection round trip. 128 chunks of small
 * receives are 36 KiB with their headers (about 39 KiB of memory a loop thread, once a wake took
 * that many: 10 B a connection in bench_memory's 4,000), half of what
 * the epoll path's read buffer may hold a thread (RLSocket.c's
 * RL_SOCKET_READ_CHUNK). Part of RL_TRICK_SOCK_RECYCLE, like the sockets'
 * per-thread read buffer: the plain build frees each chunk and makes a
 * new one for each receive. */

/* A chunk is never smaller than RXQ_CHUNK_MIN bytes (a small receive's
 * chunk fits the next small one), nor kept if its bytes are more than
 * RXQ_CACHE_CAP or fewer than RXQ_CHUNK_MIN (a chunk trimmed to what it
 * holds). The thread keeps RXQ_CACHE_SMALL small chunks' worth, with
 * their headers (rl_chunkcache.h: blocks of one kind, bounded in bytes). */
enum { RXQ_CHUNK_MIN = 256, RXQ_CACHE_CAP = 4096, RXQ_CACHE_SMALL = 128 };
#define RXQ_BLOCK(cap) ((uint32_t)(sizeof(rl__rxchunk) + (cap)))
static rl__chunkkind rxq_kind = {.min_block = RXQ_BLOCK(RXQ_CHUNK_MIN),
                                 .max_block = RXQ_BLOCK(RXQ_CACHE_CAP),
                                 .bytes = RXQ_CACHE_SMALL * RXQ_BLOCK(RXQ_CHUNK_MIN),
                                 .lock = PTHREAD_MUTEX_INITIALIZER};
/* Initial-exec, as rl__tls (rl_loop.h): each receive takes a chunk and
 * each delivery gives one back, and the TLS descriptor's call costs more
 * than the rest of either; 16 bytes of static TLS. */
static __thread rl__chunkcache t_rxq __attribute__((tls_model("initial-exec")));

rl__rxchunk *rl__rxq_chunk(rl__rxq *q, size_t n) {
    (void)q;
    size_t size;
    rl__rxchunk *c = rl__chunkcache_take(&t_rxq, sizeof *c + n, RXQ_BLOCK(RXQ_CHUNK_MIN), &size);
    if (c)
        c->cap = size - sizeof *c;
    return c;
}

void rl__rxq_give_back(rl__rxq *q, rl__rxchunk *c) {
    (void)q;
    rl__chunkcache_give(&t_rxq, &rxq_kind, c, sizeof *c + c->cap);
}

size_t rl__rxq_cached(void) { return rl__chunkcache_bytes(&t_rxq); }

size_t rl__rxq_footprint(rl__rxq *q) {
    size_t n = malloc_usable_size(q) + sizeof(size_t);
    rxq_lock(q);
    for (const rl__rxchunk *c = q->head; c; c = c->next)
        n += malloc_usable_size((void *)c) + sizeof(size_t);
    rxq_unlock(q);
    return n;
}
