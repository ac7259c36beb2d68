/*
 * rl_rxq.c — a ring's read-ahead queues (rl_rxq.h): each stream's chunks
 * in the order they were received, in a table of the streams that hold
 * some, under a leaf lock; and each thread's few chunks kept for the next
 * receives.
 */
#include "rl_rxq.h"
#include "rl_chunkcache.h"
#include "RLLockInternal.h"
#include "internal.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One fd's queue: an entry of its ring's table. */
typedef struct rxslot {
    int fd; /* -1: a free entry */
    rl__rxchunk *head, *tail; /* NULL: empty (kept for the fd's next bytes) */
} rxslot;

/* A ring's queues: an open-addressed table of fds, at most half full
 * (linear probing from fd's number: a loop's fds are mostly consecutive
 * numbers, which then never collide). An fd's entry is made by its first
 * push and stays, empty, when its last chunk is taken, for its next bytes
 * (an entry made and removed per message, and the probing that removal
 * takes, cost a 16-stream echo ~150 instructions a round trip); the table
 * is freed when nothing is queued anywhere if it grew beyond
 * RXQ_SLOTS_KEPT entries (a burst on thousands of streams leaves no table
 * behind; a loop serving a few streams keeps its table, 1.5 KiB at most),
 * and swept of its empty entries when they fill it (slot_get). */
enum { RXQ_SLOTS_FIRST = 16, RXQ_SLOTS_KEPT = 64 };
struct rl__rxq {
    _Atomic uint32_t lock; /* the table: 0 free, 1 held, 2 held and maybe waited for */
    _Atomic uint32_t refs;
    _Atomic uint32_t want;
    _Atomic uint32_t queued; /* entries holding chunks (read without the lock: 0, nothing queued) */
    uint32_t used;           /* entries, empty ones included */
    uint32_t cap;            /* entries (a power of 2; 0: no table) */
    rxslot *slots;
};

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
    return q;
}

rl__rxq *rl__rxq_retain(rl__rxq *q) {
    atomic_fetch_add_explicit(&q->refs, 1, memory_order_relaxed);
    return q;
}

static void chunks_free(rl__rxchunk *c) {
    for (rl__rxchunk *next; c; c = next) {
        next = c->next;
        free(c);
    }
}

void rl__rxq_release(rl__rxq *q) {
    if (!q || atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < q->cap; i++) {
        if (q->slots[i].fd >= 0)
            chunks_free(q->slots[i].head);
    }
    free(q->slots);
    free(q);
}

/* fd's entry, NULL: none. Lock held. */
static inline rxslot *slot_find(rl__rxq *q, int fd) {
    if (q->cap == 0 || fd < 0)
        return NULL;
    uint32_t mask = q->cap - 1;
    for (uint32_t i = (uint32_t)fd & mask;; i = (i + 1) & mask) {
        if (q->slots[i].fd == fd)
            return &q->slots[i];
        if (q->slots[i].fd < 0)
            return NULL;
    }
}

/* The table made anew with cap entries, holding q's entries (those that
 * hold chunks only, if `sweep`). false: no memory (q unchanged). */
static bool table_remake(rl__rxq *q, uint32_t cap, bool sweep) {
    rxslot *t = malloc(cap * sizeof *t);
    if (!t)
        return false;
    for (uint32_t i = 0; i < cap; i++)
        t[i].fd = -1;
    uint32_t used = 0;
    for (uint32_t i = 0; i < q->cap; i++) {
        if (q->slots[i].fd < 0 || (sweep && !q->slots[i].head))
            continue;
        uint32_t j = (uint32_t)q->slots[i].fd & (cap - 1);
        while (t[j].fd >= 0)
            j = (j + 1) & (cap - 1);
        t[j] = q->slots[i];
        used++;
    }
    free(q->slots);
    q->slots = t;
    q->cap = cap;
    q->used = used;
    return true;
}

/* The table freed (nothing is queued, and it grew beyond RXQ_SLOTS_KEPT
 * entries). Lock held. */
static __attribute__((noinline)) void table_free(rl__rxq *q) {
    free(q->slots);
    q->slots = NULL;
    q->cap = q->used = 0;
}

/* A new entry for fd (none yet); NULL: no memory. Out of line: the
 * pushes that find their fd's entry save no registers for it. Lock held. */
static __attribute__((noinline)) rxslot *slot_add(rl__rxq *q, int fd) {
    if ((q->used + 1) * 2 > q->cap) {
        /* Doubled; or, past RXQ_SLOTS_KEPT, made anew as big without its
         * empty entries if they are most of it (a stream that holds its
         * bytes long, its callback off, keeps the table from being freed). */
        uint32_t live = atomic_load_explicit(&q->queued, memory_order_relaxed);
        bool sweep = q->cap > RXQ_SLOTS_KEPT && live * 4 < q->used;
        uint32_t cap = q->cap == 0 ? RXQ_SLOTS_FIRST : sweep ? q->cap : q->cap * 2;
        if (!table_remake(q, cap, sweep) && q->used + 1 >= q->cap)
            return NULL; /* no memory, and no entry free but the one probing needs */
    }
    uint32_t mask = q->cap - 1, i = (uint32_t)fd & mask;
    while (q->slots[i].fd >= 0)
        i = (i + 1) & mask;
    q->slots[i] = (rxslot){fd, NULL, NULL};
    q->used++;
    return &q->slots[i];
}

/* s holds no chunk now. Lock held. */
static inline void slot_emptied(rl__rxq *q, rxslot *s) {
    s->head = s->tail = NULL;
    uint32_t queued = atomic_load_explicit(&q->queued, memory_order_relaxed) - 1;
    atomic_store_explicit(&q->queued, queued, memory_order_relaxed);
    if (RL__UNLIKELY(queued == 0 && q->cap > RXQ_SLOTS_KEPT))
        table_free(q);
}

bool rl__rxq_push(rl__rxq *q, int fd, rl__rxchunk *c) {
    c->next = NULL;
    rxq_lock(q);
    rxslot *s = slot_find(q, fd);
    if (RL__UNLIKELY(!s) && fd >= 0)
        s = slot_add(q, fd);
    if (s) {
        if (s->head) {
            s->tail->next = c;
        } else {
            s->head = c;
            atomic_store_explicit(&q->queued, atomic_load_explicit(&q->queued, memory_order_relaxed) + 1,
                                  memory_order_release);
        }
        s->tail = c;
    }
    rxq_unlock(q);
    return s != NULL;
}

bool rl__rxq_holds(rl__rxq *q, int fd) {
    if (atomic_load_explicit(&q->queued, memory_order_acquire) == 0)
        return false;
    rxq_lock(q);
    const rxslot *s = slot_find(q, fd);
    bool has = s && s->head;
    rxq_unlock(q);
    return has;
}

void rl__rxq_drop(rl__rxq *q, int fd) {
    if (atomic_load_explicit(&q->queued, memory_order_acquire) == 0)
        return;
    rxq_lock(q);
    rxslot *s = slot_find(q, fd);
    rl__rxchunk *gone = s ? s->head : NULL;
    if (gone)
        slot_emptied(q, s);
    rxq_unlock(q);
    chunks_free(gone);
}

/* c, just taken from s, holding the bytes of the chunks after it too, up
 * to max bytes in all, while each filled its buffer (rl__rxq_pop_upto).
 * Lock held. */
static __attribute__((noinline)) rl__rxchunk *pop_join(rl__rxq *q, rxslot *s, rl__rxchunk *c, size_t max) {
    /* What the chunks after it hold, up to max: bytes, up to the first
     * that did not fill its buffer (the kernel had no more then). */
    size_t total = c->len;
    for (rl__rxchunk *n = s->head; n && total < max && n->len > 0; n = n->next) {
        total += n->len;
        if (!n->full)
            break;
    }
    if (total > max)
        total = max;
    if (total > c->cap) {
        rl__rxchunk *big = realloc(c, sizeof *c + total);
        if (!big)
            return c; /* delivered as it is; the next pop follows */
        c = big;
        c->cap = total;
    }
    while (c->len < total) {
        rl__rxchunk *n = s->head;
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
        s->head = n->next;
        rl__rxq_give_back(q, n);
    }
    return c;
}

rl__rxchunk *rl__rxq_pop_upto(rl__rxq *q, int fd, size_t max, bool *more) {
    *more = false;
    if (atomic_load_explicit(&q->queued, memory_order_acquire) == 0)
        return NULL;
    rxq_lock(q);
    rxslot *s = slot_find(q, fd);
    rl__rxchunk *c = s ? s->head : NULL;
    if (!c) {
        rxq_unlock(q);
        return NULL;
    }
    s->head = c->next;
    c->next = NULL;
    if (c->full && c->len > 0 && c->len < max && s->head)
        c = pop_join(q, s, c, max);
    *more = s->head != NULL;
    if (!s->head)
        slot_emptied(q, s);
    rxq_unlock(q);
    return c;
}

void rl__rxq_set_want(rl__rxq *q, size_t n) {
    /* a reader's chunk: 2 MiB at most; written only when it changes (every
     * stream's callouts set it, each to the same) */
    if (atomic_load_explicit(&q->want, memory_order_relaxed) != (uint32_t)n)
        atomic_store_explicit(&q->want, (uint32_t)n, memory_order_relaxed);
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

size_t rl__rxq_footprint(rl__rxq *q, int fd) {
    size_t n = 0;
    rxq_lock(q);
    rxslot *s = slot_find(q, fd);
    for (const rl__rxchunk *c = s ? s->head : NULL; c; c = c->next)
        n += malloc_usable_size((void *)c) + sizeof(size_t);
    rxq_unlock(q);
    return n;
}

size_t rl__rxq_table_bytes(rl__rxq *q) {
    rxq_lock(q);
    size_t n = malloc_usable_size(q) + sizeof(size_t) + (q->slots ? malloc_usable_size(q->slots) + sizeof(size_t) : 0);
    rxq_unlock(q);
    return n;
}
