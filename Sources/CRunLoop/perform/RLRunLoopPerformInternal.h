/*
 * RLRunLoopPerformInternal.h — a run loop's perform queue (RLRunLoopPerform.c),
 * as the loop core (RLRunLoop.c) and the front ends (RLRunLoopPerform*,
 * RLThreadPerform* in RLPerform.c, RLWorkerThread) see it. Private.
 *
 * Every perform request of the library is one record (rl__preq) put into
 * the queue of the target loop by rl__perform_submit: a function and its
 * info (or a block), the modes it may run in, an optional release callback
 * for info, and whether the caller waits until it ran. It is queued once
 * and runs once, in the first of its modes that the loop runs; a request
 * that never runs is dropped when the loop is torn down (its release
 * called, its block released, its waiter told).
 *
 * The loop core calls the queue through four functions: run the requests
 * for a mode (rl__perform_run), ask whether any wait for a mode
 * (rl__perform_has_for), give memory back before sleeping
 * (rl__perform_trim), and close it at teardown (rl__perform_close).
 */
#ifndef CRUNLOOP_RLRUNLOOPPERFORMINTERNAL_H
#define CRUNLOOP_RLRUNLOOPPERFORMINTERNAL_H

#include "internal.h"
#include "rl_fork.h"
#include "rl_spin.h"

#include <stdatomic.h>

#include <crunloop/RLRunLoop.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rl_mode;
struct rl_bslab;

/* ---- the storage ----
 *
 * The storage of a run loop's perform queue: a FIFO of
 * 16-byte slots (a function and its argument) in chained 4 KiB chunks,
 * behind a spin lock, with a pool of empty chunks.
 *
 * Why chunks: requests are appended by other threads, many millions a
 * second, and taken by the loop's thread all at once. A growing array
 * would copy itself under the lock and touch fresh pages after every
 * backlog; a chain appends in place, hands over in O(1), and chunks go
 * back to a per-queue pool (then to malloc) once the loop is done with
 * them, so a loop that keeps up cycles through the same few chunks.
 *
 * What a slot means (record heads, which function releases what) is
 * RLRunLoopPerform.c's business; the storage only keeps slots in order.
 *
 * Ownership: the queue owns its chunks. rl_pq_take_locked hands the whole
 * chain to the caller, who owns it until it is given back with
 * rl_pq_recycle (chunks) or kept (rl_pchain). Reading a taken chain needs
 * no lock: no producer writes to a chunk after it was taken.
 */
/* A free list of memory blocks (chunks here, the loop's block slabs) whose
 * first field is their `next` pointer, with its length. The caller locks. */
typedef struct rl_flist {
    void *head;
    uint32_t n;
} rl_flist;

static inline void rl_flist_push(rl_flist *l, void *block) {
    *(void **)block = l->head;
    l->head = block;
    l->n++;
}

static inline void *rl_flist_pop(rl_flist *l) {
    void *block = l->head;
    if (block) {
        l->head = *(void **)block;
        l->n--;
    }
    return block;
}


typedef struct rl_pslot {
    void (*fn)(void *);
    void *arg;
} rl_pslot;

enum { RL_PCHUNK_BYTES = 4096 };

typedef struct rl_pchunk {
    struct rl_pchunk *next; /* first: chunks go on an rl_flist */
    uint32_t n; /* slots in use: s[0, n) */
    uint32_t unused;
    rl_pslot s[(RL_PCHUNK_BYTES - 16) / sizeof(rl_pslot)];
} rl_pchunk;

#define RL_PCHUNK_SLOTS ((uint32_t)(sizeof(((rl_pchunk *)0)->s) / sizeof(rl_pslot)))

/* A chain of chunks, in order; empty: head == NULL. Only the chunks a
 * cursor wrote may have holes at their ends (n < RL_PCHUNK_SLOTS). */
typedef struct rl_pchain {
    rl_pchunk *head, *tail;
} rl_pchain;

typedef struct rl_pqueue {
    _Atomic int lock;   /* held for a few stores only: rl__pq_lock */
    _Atomic int queued; /* q is not empty; readable without the lock (rl_pq_maybe_queued) */
    rl_pchain q;
    rl_flist pool; /* empty chunks */
} rl_pqueue;

/* The queue's lock: a spin lock (RL_TRICK_PQ_SPIN), or in the plain build
 * a futex mutex on the same word (rl_pqueue.c). */
RL__HIDDEN void rl__pq_lock(rl_pqueue *pq);
#if RL_TRICK_PQ_SPIN
static inline void rl_pq_unlock(rl_pqueue *pq) { atomic_store_explicit(&pq->lock, 0, memory_order_release); }
#else
RL__HIDDEN void rl__pq_wake_one(rl_pqueue *pq);
static inline void rl_pq_unlock(rl_pqueue *pq) {
    if (atomic_exchange_explicit(&pq->lock, 0, memory_order_release) == 2)
        rl__pq_wake_one(pq); /* someone may sleep on it */
}
#endif

/* Appends k (1 or 2) slots, kept in one chunk; false when that needs a
 * chunk and the pool is empty (call rl__pq_grow without the lock, retry).
 * Lock held. */
static inline bool rl_pq_push_locked(rl_pqueue *pq, const rl_pslot *s, uint32_t k) {
    rl_pchunk *c = pq->q.tail;
    if (__builtin_expect(c == NULL || c->n + k > RL_PCHUNK_SLOTS, 0)) {
        c = rl_flist_pop(&pq->pool);
        if (!c)
            return false;
        c->next = NULL;
        c->n = 0;
        if (pq->q.tail) {
            pq->q.tail->next = c;
        } else {
            pq->q.head = c;
            atomic_store(&pq->queued, 1); /* sequentially consistent: see rl_pq_maybe_queued */
        }
        pq->q.tail = c;
    }
    c->s[c->n] = s[0];
    if (k > 1)
        c->s[c->n + 1] = s[1];
    c->n += k;
    return true;
}

/* Whether k slots can be appended without a new chunk from malloc. Lock
 * held. */
static inline bool rl_pq_has_room_locked(const rl_pqueue *pq, uint32_t k) {
    const rl_pchunk *c = pq->q.tail;
    return (c && c->n + k <= RL_PCHUNK_SLOTS) || pq->pool.head != NULL;
}

/* Puts a new chunk in the pool; false if memory is short. Lock not held. */
RL__HIDDEN bool rl__pq_grow(rl_pqueue *pq);

/* The queued slots, handed over whole; the queue is left empty. Lock held. */
static inline rl_pchain rl_pq_take_locked(rl_pqueue *pq) {
    rl_pchain c = pq->q;
    pq->q.head = pq->q.tail = NULL;
    atomic_store_explicit(&pq->queued, 0, memory_order_relaxed);
    return c;
}

/* Whether anything may be queued, without the lock (the loop looks before
 * it takes: most passes find nothing, and the lock's cache line then stays
 * with the producers). A false "no" cannot strand a request: the store that
 * made the queue non-empty and this load are both sequentially consistent,
 * so if this load misses it, the producer's later look at the loop's wake-up
 * flags (RLRunLoopWakeUp, also sequentially consistent) sees the store this
 * thread made before looking here, and it wakes the loop. */
static inline bool rl_pq_maybe_queued(rl_pqueue *pq) { return atomic_load(&pq->queued) != 0; }

/* a ++ b, O(1). */
static inline rl_pchain rl_pchain_cat(rl_pchain a, rl_pchain b) {
    if (!a.head)
        return b;
    if (b.head) {
        a.tail->next = b.head;
        a.tail = b.tail;
    }
    return a;
}

/* A position in a chain: slot i of chunk c. */
typedef struct rl_pcur {
    rl_pchunk *c;
    uint32_t i;
} rl_pcur;

/* Reads the slot at r and moves past it; false at the end of the chain. */
static inline bool rl_pcur_read(rl_pcur *r, rl_pslot *out) {
    while (r->c && r->i >= r->c->n) {
        r->c = r->c->next;
        r->i = 0;
    }
    if (!r->c)
        return false;
    *out = r->c->s[r->i++];
    return true;
}

/* Writes at w and moves past it, for compacting a chain in place: w starts
 * at the head and trails the read cursor, so it only ever overwrites slots
 * already read. A chunk left behind is full. */
static inline void rl_pcur_write(rl_pcur *w, rl_pslot s) {
    if (w->i == RL_PCHUNK_SLOTS) {
        w->c->n = RL_PCHUNK_SLOTS;
        w->c = w->c->next;
        w->i = 0;
    }
    w->c->s[w->i++] = s;
}

/* Ends a compaction of `chain` whose writes stopped at w: returns the
 * chain of what was written (possibly empty) and sets *rest to the chunks
 * no longer needed (for rl_pq_recycle; NULL if none). */
static inline rl_pchain rl_pcur_finish(rl_pchain chain, rl_pcur w, rl_pchunk **rest) {
    if (!w.c || (w.c == chain.head && w.i == 0)) {
        *rest = chain.head;
        return (rl_pchain){NULL, NULL};
    }
    w.c->n = w.i;
    *rest = w.c->next;
    w.c->next = NULL;
    return (rl_pchain){chain.head, w.c};
}


/* ---- the queue ---- */


/* One loop's queue, embedded in the loop (struct RLRunLoop); all zero (as
 * calloc leaves it) is an empty, open queue. The first part
 * is written by every producer, the second by the loop's thread only: they
 * sit on separate cache lines. */
typedef struct rl__perform_queue {
    rl_pqueue pq;           /* the slots, behind a spin lock */
    _Atomic bool closed;    /* the loop was torn down: pushes fail (set under pq's lock) */
    struct rl_bslab *bcur;  /* block copies (RLRunLoopPerformBlock): the slab being filled */
    unsigned bcur_used;     /* its bytes handed out */
    rl_flist bcache;        /* empty slabs kept for reuse */
    rl__spin wait_spin;     /* waitUntilDone senders: how long to spin for the reply */
    unsigned fork_gen;      /* its loop's rl__fork_gen(): a fork() child stops a batch there */
    char pad[64];

    rl_pchain held;     /* requests taken for other modes; the loop's thread only */
    rl_pchunk *spent;   /* chunks a batch is done with, given back with the next take; ditto */
    bool trim_due;      /* chunks or slabs went back to the pools since the last trim; ditto */
    int64_t trimmed_at; /* rl__spin_now() of the last trim that trimmed; ditto */
} rl__perform_queue;

/* A request, as a front end describes it to rl__perform_submit. */
typedef struct rl__preq {
    void (*fn)(void *info); /* the function, or NULL for a block */
    void *info;
    void *block; /* a block (copied if the caller does not wait), or NULL */
    /* The modes it may run in: names (copied unless the caller waits), at
     * least one; kRLRunLoopCommonModes stands for the loop's common modes
     * as they are when the request runs. */
    const RLRunLoopMode *modes;
    size_t nmodes;
    RLPerformReleaseCallBack release; /* release(info) once, ran or not; or NULL */
    bool wait;                        /* block the caller until it ran or was dropped */
    bool wake;                        /* wake the loop (thread performs; CF's PerformBlock does not) */
} rl__preq;

/* Queues r on rl (validated, refused with an error as the public calls
 * document: a bad loop, mode, function; a loop whose thread has exited,
 * kRLErrorInvalidState). With r->wait, returns once the request ran (true)
 * or was dropped unrun (false, kRLErrorInvalidState). A refused request has
 * its release called (and no block copied). On success no error is set. */
RL__HIDDEN bool rl__perform_submit(RLRunLoopRef rl, const rl__preq *r, const char *fname);

/* Whether r is well formed (modes, a function or block); error set if not. */
RL__HIDDEN bool rl__preq_check(const rl__preq *r, const char *fname);

/* Runs the request r now, on the calling thread, as if it had been queued
 * and run (release called): a wait on the target's own thread. */
RL__HIDDEN void rl__perform_run_now(const rl__preq *r);

/* ---- for the loop (rl_pqueue.c; its teardown in RLRunLoop.c, its
 * iteration in RLRunLoopRun.c) ---- */

/* Whether requests may wait (the loop's thread): when not, the loop need
 * not call rl__perform_run. Inline: the loop asks twice a pass, and most
 * passes have none (rl__perform_run's frame, made for its cleanup handler,
 * cost more than the look). */
static inline bool rl__perform_maybe_pending(rl__perform_queue *q) {
    return q->held.head || rl_pq_maybe_queued(&q->pq);
}
/* Runs the requests for mode m queued before this call (the loop's
 * thread); returns how many ran. */
RL__HIDDEN uint32_t rl__perform_run(rl__perform_queue *q, struct rl_mode *m);
/* Whether a request waits for mode m (the loop's thread). */
RL__HIDDEN bool rl__perform_has_for(rl__perform_queue *q, const struct rl_mode *m);
/* The loop goes to sleep: memory kept for a backlog goes back (not more
 * often than every 100 ms while requests keep coming: `busy`). */
RL__HIDDEN void rl__perform_trim(rl__perform_queue *q, bool busy);
/* Teardown: later pushes fail; every queued request is dropped. */
RL__HIDDEN void rl__perform_close(rl__perform_queue *q);
/* Finalization: drops what is left and frees the queue's memory. */
RL__HIDDEN void rl__perform_destroy(rl__perform_queue *q);

/* ---- from the loop core, for the queue ---- */

/* The queue of loop rl, or NULL (error set) if rl is not a run loop. */
RL__HIDDEN rl__perform_queue *rl__runloop_perform_queue(RLRunLoopRef rl, const char *fname);
/* As CF, queuing a request for a named mode brings the mode into being. */
RL__HIDDEN bool rl__runloop_mode_create(RLRunLoopRef rl, RLRunLoopMode mode, const char *fname);

#endif /* CRUNLOOP_RLRUNLOOPPERFORMINTERNAL_H */
