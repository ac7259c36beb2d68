/*
 * rl_pqueue.h — the perform queue, private (rl_pqueue.c): what a run loop
 * embeds and drives, and what the perform room's one way in
 * (RLRunLoopPerform.c) hands it.
 *
 * Every perform request of the library is one record (rl__preq) put into
 * the one queue of the target loop: a function and its info (or a block),
 * the modes it may run in, an optional release callback for info, and
 * whether the caller waits until it ran. It is queued once and runs once,
 * in the first of its modes that the loop runs, in the order the requests
 * were queued, whichever front end made them; a request that never runs is
 * dropped when the loop is torn down (its release called, its block
 * released, its waiter told).
 *
 * The queue is its own room below the loop (queue/): it calls no run-loop
 * file and knows a mode only by what rl__perform_mode says of it; the loop
 * drives it through four functions: run the requests for a mode
 * (rl__perform_run), ask whether any wait for a mode (rl__perform_has_for),
 * give memory back before sleeping (rl__perform_trim), close it at
 * teardown (rl__perform_close); the loop's finalizer frees it
 * (rl__perform_destroy).
 */
#ifndef CRUNLOOP_RL_PQUEUE_H
#define CRUNLOOP_RL_PQUEUE_H

#include "internal.h"
#include "rl_fork.h"
#include "rl_spin.h"

#include <stdatomic.h>


#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The values of kRLRunLoopDefaultMode and kRLRunLoopCommonModes
 * (RLRunLoopMode.c defines the constants with these): the queue compares a
 * request's mode names with them without reaching up into the loop. */
#define RL__DEFAULT_MODE_NAME "kRLRunLoopDefaultMode"
#define RL__COMMON_MODES_NAME "kRLRunLoopCommonModes"

/* What the queue knows of a mode: its name and whether it is the default
 * mode or a common one (the loop passes these of the mode it runs). */
typedef struct rl__perform_mode {
    const char *name;
    bool common;
    bool is_default;
} rl__perform_mode;
struct rl__bslab;

/* ---- the storage (rl_pqueue.c) ----
 *
 * The storage of a run loop's perform queue: a FIFO of
 * 16-byte slots (a function and its argument) in chained chunks, behind a
 * spin lock, with a pool of empty chunks.
 *
 * Why chunks: requests are appended by other threads, many millions a
 * second, and taken by the loop's thread all at once. A growing array
 * would copy itself under the lock and touch fresh pages after every
 * backlog; a chain appends in place, hands over in O(1), and chunks go
 * back to a per-queue pool (then to malloc) once the loop is done with
 * them, so a loop that keeps up cycles through the same few chunks.
 *
 * Chunk sizes: a queue has no chunk until its first request; the first is
 * small (RL_PCHUNK_FIRST_BYTES: a loop that gets a request now and then,
 * a worker thread's start, holds 128 bytes, not a page), and each chunk
 * malloc'ed after it twice the last, up to RL_PCHUNK_BYTES (4 KiB), where
 * a backlog's chunks stay. A chunk knows its capacity (cap).
 *
 * What a slot means (record heads, which function releases what): see
 * rl_pqueue.c.
 *
 * Ownership: the queue owns its chunks. rl_pq_take_locked hands the whole
 * chain to the caller, who owns it until it is given back with
 * rl_pq_recycle (chunks) or kept (rl__pchain). Reading a taken chain needs
 * no lock: no producer writes to a chunk after it was taken.
 */
/* A free list of memory blocks (chunks here, the loop's block slabs) whose
 * first field is their `next` pointer, with its length. The caller locks. */
typedef struct rl__flist {
    void *head;
    uint32_t n;
} rl__flist;

typedef struct rl__pslot {
    void (*fn)(void *);
    void *arg;
} rl__pslot;

enum {
    RL_PCHUNK_FIRST_BYTES = 128, /* a queue's first chunk: 7 slots */
    RL_PCHUNK_BYTES = 4096,      /* the biggest, where growth stops: 255 slots */
};

typedef struct rl__pchunk {
    struct rl__pchunk *next; /* first: chunks go on an rl__flist */
    uint32_t n;              /* slots in use: s[0, n) */
    uint32_t cap;            /* slots it has: s[0, cap) */
    rl__pslot s[];
} rl__pchunk;

/* The slots of a chunk of `bytes` bytes. */
#define RL_PCHUNK_SLOTS_IN(bytes) ((uint32_t)(((bytes) - sizeof(rl__pchunk)) / sizeof(rl__pslot)))

/* A chain of chunks, in order; empty: head == NULL. Only the chunks a
 * cursor wrote may have holes at their ends (n < cap). */
typedef struct rl__pchain {
    rl__pchunk *head, *tail;
} rl__pchain;

typedef struct rl__pqueue {
    _Atomic int lock;   /* held for a few stores only (rl_pqueue.c's pq_lock) */
    _Atomic int queued; /* q is not empty; readable without the lock (rl__pq_maybe_queued) */
    rl__pchain q;
    rl__flist pool; /* empty chunks */
} rl__pqueue;


/* Whether anything may be queued, without the lock (the loop looks before
 * it takes: most passes find nothing, and the lock's cache line then stays
 * with the producers). A false "no" cannot strand a request: the store that
 * made the queue non-empty and this load are both sequentially consistent,
 * so if this load misses it, the producer's later look at the loop's wake-up
 * flags (RLRunLoopWakeUp, also sequentially consistent) sees the store this
 * thread made before looking here, and it wakes the loop. */
static inline bool rl__pq_maybe_queued(rl__pqueue *pq) { return atomic_load(&pq->queued) != 0; }

/* ---- the queue ---- */


/* One loop's queue, embedded in the loop (struct RLRunLoop); all zero (as
 * calloc leaves it) is an empty, open queue. The first part
 * is written by every producer, the second by the loop's thread only: they
 * sit on separate cache lines. */
typedef struct rl__perform_queue {
    rl__pqueue pq;           /* the slots, behind a spin lock */
    _Atomic bool closed;    /* the loop was torn down: pushes fail (set under pq's lock) */
    uint32_t bwarmup;       /* block copies made before slabs are used (relaxed atomics) */
    struct rl__bslab *bcur;  /* block copies (RLRunLoopPerformBlock): the slab being filled */
    unsigned bcur_used;     /* its bytes handed out */
    uint32_t next_bytes;    /* the size of the next chunk to malloc, 0: the first (relaxed atomics) */
    rl__flist bcache;        /* empty slabs kept for reuse */
    rl__spin wait_spin;     /* waitUntilDone senders: how long to spin for the reply */
    unsigned fork_gen;      /* its loop's rl__fork_gen(): a fork() child stops a batch there */
    char pad[64];

    rl__pchain held;     /* requests taken for other modes; the loop's thread only */
    rl__pchunk *spent;   /* chunks a batch is done with, given back with the next take; ditto */
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
    const char *const *modes;
    size_t nmodes;
    void (*release)(void *info); /* release(info) once, ran or not; or NULL */
    bool wait;                        /* block the caller until it ran or was dropped */
    bool wake;                        /* wake the loop (thread performs; CF's PerformBlock does not) */
} rl__preq;

/* ---- the queue (rl_pqueue.c), for the front end ---- */

/* A waitUntilDone sender's completion word, on its stack: PENDING until
 * the request ran (DONE) or was dropped (FAILED); SLEEPING while the sender
 * is (about to be) asleep on it in the kernel. */
enum { RL_WAIT_PENDING = 0, RL_WAIT_SLEEPING = 1, RL_WAIT_DONE = 2, RL_WAIT_FAILED = 3 };

typedef struct rl__waiter {
    _Atomic uint32_t state;
} rl__waiter;

enum { RL_PEXT_SHARED, RL_PEXT_HEAP, RL_PEXT_CALLER };

/* What a request holds besides its slot (see rl_pqueue.c). */
typedef struct rl__pext {
    void (*release)(void *arg); /* release(slot's arg) once; or NULL */
    rl__waiter *waiter;                /* on the waiting caller's stack; or NULL */
    uint8_t where;                    /* RL_PEXT_*: who owns this record */
    bool common;                      /* in the common modes (as they are when it runs) */
    bool dflt;                        /* in the default mode */
    uint32_t nnames;                  /* other modes, by name */
    const char *const *names;
} rl__pext;

/* A waiting caller's part of its request, on its stack from
 * rl__perform_enqueue to the end of rl__perform_wait: the request's record
 * and the completion word the loop sets. */
typedef struct rl__perform_ticket {
    rl__waiter waiter;
    rl__pext ext;
    const char **names; /* the record's names: small, or malloc'ed */
    const char *small[8];
} rl__perform_ticket;

/* Queues the checked request r: false (error set, nothing queued, nothing
 * released) if memory is short or the queue is closed. With r->wait, the
 * caller then calls rl__perform_wait on `ticket` (whatever this returns). */
RL__HIDDEN bool rl__perform_enqueue(rl__perform_queue *q, const rl__preq *r, rl__perform_ticket *ticket,
                                    const char *fname);
/* Blocks until the waited request ran (true) or was dropped (false, error
 * set); `spin` as rl_spin.h (NULL: the loop's CPU is not known to be
 * another). Frees what the ticket holds. */
RL__HIDDEN bool rl__perform_wait(rl__perform_ticket *ticket, rl__spin *spin, const char *fname);
/* The usual request (a function, or a block, for the default mode only,
 * nothing else) queued as one slot: millions a second. False (error set,
 * nothing queued) as rl__perform_enqueue. */
RL__HIDDEN bool rl__perform_push(rl__perform_queue *q, void (*fn)(void *), void *info, const char *fname);
#if __BLOCKS__
RL__HIDDEN bool rl__perform_push_block(rl__perform_queue *q, void *block, const char *fname);
#endif

/* ---- the queue (rl_pqueue.c), for the loop (its iteration in
 * RLRunLoopRun.c, its teardown in RLRunLoop.c, its finalizer in rl_loop.c) ---- */

/* Whether requests may wait (the loop's thread): when not, the loop need
 * not call rl__perform_run. Inline: the loop asks twice a pass, and most
 * passes have none (rl__perform_run's frame, made for its cleanup handler,
 * cost more than the look). */
static inline bool rl__perform_maybe_pending(rl__perform_queue *q) {
    return q->held.head || rl__pq_maybe_queued(&q->pq);
}
/* Runs the requests for mode m queued before this call (the loop's
 * thread); returns how many ran. */
/* Told about each request a batch runs, when the loop times its callouts
 * (the loop's health, rl_health.h): the program's function (a block's
 * invoke function for a block), its argument and how long it ran, in
 * seconds. The queue itself knows nothing of the loop's health. */
typedef struct rl__perform_timing {
    void (*after)(void *ctx, const void *fn, const void *arg, double took);
    void *ctx;
} rl__perform_timing;
/* As rl__perform_run, timing each request through `timing` (NULL: none,
 * one predictable branch a request). */
RL__HIDDEN uint32_t rl__perform_run_timed(rl__perform_queue *q, const rl__perform_mode *m,
                                         const rl__perform_timing *timing);
static inline uint32_t rl__perform_run(rl__perform_queue *q, const rl__perform_mode *m) {
    return rl__perform_run_timed(q, m, NULL);
}
/* Whether a request waits for mode m (the loop's thread). */
RL__HIDDEN bool rl__perform_has_for(rl__perform_queue *q, const rl__perform_mode *m);
/* The loop goes to sleep: memory kept for a backlog goes back (not more
 * often than every 100 ms while requests keep coming: `busy`). */
RL__HIDDEN void rl__perform_trim(rl__perform_queue *q, bool busy);
/* Teardown: later pushes fail; every queued request is dropped. */
RL__HIDDEN void rl__perform_close(rl__perform_queue *q);
/* The bytes of memory the queue holds (its chunks: queued, kept, spent
 * and pooled; its block slabs), and in *nchunks (if not NULL) how many
 * chunks: for tests. The loop's thread, or while the loop is not running. */
RL__HIDDEN size_t rl__perform_held_bytes(rl__perform_queue *q, size_t *nchunks);
/* Finalization: drops what is left and frees the queue's memory. */
RL__HIDDEN void rl__perform_destroy(rl__perform_queue *q);

#endif /* CRUNLOOP_RL_PQUEUE_H */
