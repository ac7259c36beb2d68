/*
 * rl_txq.c — a stream's queue of sends through a loop's ring (rl_txq.h).
 */
#include "rl_txq.h"
#include "rl_chunkcache.h"

#include <fcntl.h>
#include <malloc.h>
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
    free(q);
}

/* A chunk that was sent goes back to the thread that pops it (the loop's:
 * the ring sends on it), not to its queue: an idle stream holds no send
 * buffer. The thread keeps chunks of TXQ_KEEP_MAX bytes at most,
 * TXQ_KEEP_BYTES in all (16 KiB: a wake that answers 16 streams' round
 * trips at once takes 16 small chunks before its sends give them back),
 * freed at its exit; a chunk is never smaller than TXQ_CHUNK_MIN bytes
 * (its header and a short message), so that one fits the next short one. */
enum { TXQ_CHUNK_MIN = 160, TXQ_KEEP_MAX = 4096 + 64, TXQ_KEEP_BYTES = 16384 };
static rl__chunkkind txq_kind = {.min_block = TXQ_CHUNK_MIN, .max_block = TXQ_KEEP_MAX, .bytes = TXQ_KEEP_BYTES,
                                 .lock = PTHREAD_MUTEX_INITIALIZER};
/* Initial-exec, as rl__tls (rl_loop.h): every push and every pop. */
static __thread rl__chunkcache t_txq __attribute__((tls_model("initial-exec")));

size_t rl__txq_cached(void) { return rl__chunkcache_count(&t_txq); }

size_t rl__txq_footprint(rl__txq *q) {
    size_t n = malloc_usable_size(q) + sizeof(size_t);
    for (const rl__txchunk *c = q->head; c; c = c->next)
        n += malloc_usable_size((void *)c) + sizeof(size_t);
    return n;
}

_Thread_local RLTypeRef rl__txq_lend;

bool rl__txq_push(rl__txq *q, const void *bytes, size_t n) {
    RLTypeRef keep = n >= RL_TXQ_LEND_MIN ? rl__txq_lend : NULL;
    size_t need = keep ? 0 : n, size;
    rl__txchunk *c = rl__chunkcache_take(&t_txq, sizeof *c + need, TXQ_CHUNK_MIN, &size);
    if (!c)
        return false;
    c->cap = size - sizeof *c;
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
    rl__chunkcache_give(&t_txq, &txq_kind, c, sizeof *c + c->cap);
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

void rl__txq_send_on_dup(rl__txq *q) {
    int d = fcntl(q->fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return; /* no descriptor left: sent on the program's fd, while it keeps it open */
    __atomic_store_n(&q->fd, d, __ATOMIC_RELEASE);
    if (!rl__txq_close_later(q))
        (void)close(d); /* sent meanwhile: nothing to keep it for */
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
