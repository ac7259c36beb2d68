/*
 * rl_rxq.h — private: a stream's read-ahead queue (rl_rxq.c). On the
 * io_uring backend a loop can read a stream through its ring (a multishot
 * receive into the loop's provided buffers, which stays in the ring,
 * instead of a poll and then a recv): what each receive brings is copied out of
 * the buffer into a chunk of its own, queued here, in the order the kernel
 * gave it, and the buffer goes back to the ring at once. The stream's
 * owner (RLSocket.c) takes the chunks before it reads the fd itself, so
 * bytes once received are delivered in order and never lost, whatever
 * becomes of the registration meanwhile (a receive that ends after its
 * registration was removed still queues what it read). Counted references:
 * the owner holds one, the backend one per registration and per receive
 * in flight. Thread-safe (a leaf lock, held for a push or a pop only).
 */
#ifndef CRUNLOOP_RL_RXQ_H
#define CRUNLOOP_RL_RXQ_H

#include "RLBase.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One receive's result: `len` bytes, or the end of the stream (len 0, err
 * 0), or the error the receive met (err: an errno, len 0). Malloc'd; the
 * taker frees it (free(), or as the owner of an RLData's bytes). */
typedef struct rl__rxchunk {
    struct rl__rxchunk *next;
    size_t len;
    size_t cap; /* the bytes it can hold */
    int err;
    bool full;  /* the receive filled its buffer: more may wait in the kernel */
    uint8_t bytes[];
} rl__rxchunk;

typedef struct rl__rxq rl__rxq;

/* A new empty queue (one reference), or NULL: no memory. */
RL__HIDDEN rl__rxq *rl__rxq_new(void);
RL__HIDDEN rl__rxq *rl__rxq_retain(rl__rxq *q);
/* Drops a reference; the last frees the chunks still queued. */
RL__HIDDEN void rl__rxq_release(rl__rxq *q);
/* Queues c (the queue's now). */
RL__HIDDEN void rl__rxq_push(rl__rxq *q, rl__rxchunk *c);
/* The oldest chunk, holding the bytes of the chunks after it too, up to
 * `max` bytes in all, while each filled its buffer (`full`: more came
 * after it), as one read of up to max bytes would have read them (a
 * multishot receive queues a buffer's worth per chunk); the end or an
 * error stays queued. The caller's; NULL: none. */
RL__HIDDEN rl__rxchunk *rl__rxq_pop_upto(rl__rxq *q, size_t max);
/* A chunk for n bytes: one the thread kept (rl__rxq_give_back) if one is
 * big enough, else a new one; NULL: no memory. Its len, err and full are
 * the caller's to set. q: the queue it is for (unused: the thread's
 * chunks serve every queue). */
RL__HIDDEN rl__rxchunk *rl__rxq_chunk(rl__rxq *q, size_t n);
/* The reader is done with c's bytes: kept by the calling thread for its
 * next receives (32 KiB of them at most, each of 4 KiB at most: rl_rxq.c;
 * none in the plain build), else freed. Nothing is kept by the queue: an idle stream holds
 * no buffer. */
RL__HIDDEN void rl__rxq_give_back(rl__rxq *q, rl__rxchunk *c);
/* Chunks queued (a hint, without the lock). */
RL__HIDDEN size_t rl__rxq_count(const rl__rxq *q);
/* How many bytes a receive into q asks for at most (the reader's chunk;
 * the backend asks for less if its buffers are smaller; below 4 GiB). 0:
 * the buffer. */
RL__HIDDEN void rl__rxq_set_want(rl__rxq *q, size_t n);
RL__HIDDEN size_t rl__rxq_want(const rl__rxq *q);
/* The loop whose ring reads into q (its rl__poller; NULL: none yet): set
 * once by the first backend that takes q (true), refused to any other
 * (false), so that one ring at most reads a stream. */
RL__HIDDEN bool rl__rxq_claim(rl__rxq *q, const void *owner);

/* For the tests: the bytes q holds (its block, the chunks queued), and
 * the bytes of the chunks the calling thread keeps (with their headers). */
RL__HIDDEN size_t rl__rxq_footprint(rl__rxq *q);
RL__HIDDEN size_t rl__rxq_cached(void);

#endif /* CRUNLOOP_RL_RXQ_H */
