/*
 * rl_txq.h — private: a stream's queue of sends through a loop's ring
 * (rl_txq.c). On the io_uring backend a socket's writes made on its loop's
 * thread are not sent by a system call each: their bytes are copied into
 * chunks queued here (or, for a write of an object's bytes named by
 * rl__txq_lend, that object is held by its chunk and its bytes sent where
 * they are: no copy), and the loop's ring sends them (IORING_OP_SEND),
 * submitted with the loop's next io_uring_enter, one send in flight per
 * queue, in order: a short send is continued from where it stopped, an
 * error ends the queue (its chunks dropped, the errno kept in `err` for
 * the writer's next call). The queue is the writer's (RLSocket.c) and the
 * backend's (a reference while it has chunks); every field but `refs` and
 * `state` is touched on the loop's thread only. A socket invalidated with
 * chunks still queued hands its fd's close to the queue (rl__txq_close_later):
 * the fd is closed once the last chunk is sent, so nothing written is lost.
 */
#ifndef CRUNLOOP_RL_TXQ_H
#define CRUNLOOP_RL_TXQ_H

#include "RLBase.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rl__txchunk {
    struct rl__txchunk *next;
    const uint8_t *p; /* its bytes: `bytes`, or those of `keep` */
    RLTypeRef keep;   /* the object whose bytes p points into (a reference); NULL: copied into `bytes` */
    size_t len, off;  /* off: sent so far */
    size_t cap;       /* the bytes it can hold */
    uint8_t bytes[];
} rl__txchunk;

/* Writes at least this long of an object's bytes are sent from the object
 * (held) rather than copied (rl__txq_lend): above 4 KB, so that a socket's
 * short deliveries (RLSocket.c's RL_SOCKET_COPY_MAX), whose data the
 * reading thread reuses when no one holds it, are copied. */
#define RL_TXQ_LEND_MIN 4097

/* The object whose bytes the calling thread's next rl__txq_push is given
 * (the writer sets it around the call, then clears it): that push holds it
 * (RLRetain) and queues a pointer into its bytes instead of a copy, if the
 * write is RL_TXQ_LEND_MIN bytes or more. The object's bytes must not
 * change while it is held (an RLData's never do). NULL: copied. */
RL__HIDDEN extern _Thread_local RLTypeRef rl__txq_lend;

#define RL_TXQ_CLOSE 1u /* in state: the fd is closed when the queue empties */

typedef struct rl__txq {
    _Atomic int refs;
    _Atomic unsigned state; /* chunks queued << 1 | RL_TXQ_CLOSE */
    int fd;
    int err;            /* a send's error, not yet reported to the writer (0: none) */
    const void *owner;  /* the poller whose ring sends it (set by the first) */
    rl__txchunk *head, **tail;
    struct rl__txq *ring_prev, *ring_next; /* the backend's: on its list of the queues it holds */
    bool held;          /* the backend's: it holds a reference (a send listed or in flight) */
    bool inflight;      /* the backend's: a send of head is in the ring */
    bool listed;        /* the backend's: on its list of queues to submit */
    bool fast;          /* the backend's: the send in flight must not wait; silent if whole while nothing is
                           queued behind it, else it reports (sqpos: its entry) */
    bool slow;          /* the backend's: the next send waits for room (the last one found none) */
    uint32_t sqpos;
    size_t inlen;       /* the backend's: the bytes the send in flight asked to send */
    double wait_for;    /* the writer's: how long a run's end waits for the queued bytes to be sent (the last
                           send's timeout, seconds; 0 or less: until they are), on the ring's thread */
} rl__txq;

/* For the tests: the chunks the calling thread keeps for its next pushes
 * (rl_txq.c says how many at most); what q holds, in bytes with malloc's
 * headers (the queue and its chunks). */
RL__HIDDEN size_t rl__txq_cached(void);
RL__HIDDEN size_t rl__txq_footprint(rl__txq *q);

/* A new empty queue for fd (one reference), or NULL: no memory. */
RL__HIDDEN rl__txq *rl__txq_new(int fd);
static inline rl__txq *rl__txq_retain(rl__txq *q) {
    atomic_fetch_add_explicit(&q->refs, 1, memory_order_relaxed);
    return q;
}
/* The last reference's end (rl__txq_release). */
RL__HIDDEN void rl__txq_free(rl__txq *q);
/* Drops a reference (inline: the ring takes and drops one per send); the
 * last frees the chunks still queued (and closes the fd if its close was
 * handed to the queue). NULL: nothing. */
static inline void rl__txq_release(rl__txq *q) {
    if (q && atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) == 1)
        rl__txq_free(q);
}
/* Queues a copy of n bytes. false: no memory (nothing queued). */
RL__HIDDEN bool rl__txq_push(rl__txq *q, const void *bytes, size_t n);
/* The head chunk is sent (or dropped): freed. The queue's fd is closed if
 * it was the last chunk and the close was handed over. */
RL__HIDDEN void rl__txq_pop(rl__txq *q);
/* Every chunk dropped (an error ended the stream), as by rl__txq_pop. */
RL__HIDDEN void rl__txq_drop(rl__txq *q);
/* Chunks queued (any thread). */
static inline unsigned rl__txq_pending(rl__txq *q) {
    return atomic_load_explicit(&q->state, memory_order_acquire) >> 1;
}
/* The fd goes back to its program, which may close it, with chunks still
 * queued: q sends them on a duplicate of it, which it closes once it is
 * empty (rl__txq_close_later); out of descriptors, it goes on with the
 * fd it has. */
RL__HIDDEN void rl__txq_send_on_dup(rl__txq *q);
/* The fd's close handed to q if chunks are queued (true: the caller must
 * not close it), else false (the caller closes). Any thread. */
RL__HIDDEN bool rl__txq_close_later(rl__txq *q);

#endif /* CRUNLOOP_RL_TXQ_H */
