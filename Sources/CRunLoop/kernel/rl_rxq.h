/*
 * rl_rxq.h — private: a ring's read-ahead queues (rl_rxq.c). On the
 * io_uring backend a loop can read a stream through its ring (a multishot
 * receive into the loop's provided buffers, which stays in the ring,
 * instead of a poll and then a recv): what each receive brings is copied out of
 * the buffer into a chunk of its own, queued here under the stream's fd, in
 * the order the kernel gave it, and the buffer goes back to the ring at
 * once. The stream's owner (RLSocket.c) takes its fd's chunks before it
 * reads the fd itself, so bytes once received are delivered in order and
 * never lost, whatever becomes of the registration meanwhile (a receive
 * that ends after its registration was removed still queues what it read).
 *
 * One rl__rxq a ring (not one a stream): a stream's queue is an entry of
 * its table, holding chunks only while bytes wait, and the table is the
 * ring's (bounded, freed when drained if it grew: rl_rxq.c), so an idle
 * stream read through a ring holds no memory for it (before: a 40-byte queue of its own, kept
 * for the stream's life, which every idle ring connection paid). Who
 * holds what: the ring holds a reference (its backend state, until the
 * loop's close), each stream it reads one (the socket's rare-part word,
 * until the socket is freed): the queues outlive the ring, so a stream
 * read by a loop that is gone (the socket in another loop too) still gets
 * what that ring read. A receive in flight needs no reference: it queues
 * under its fd into the ring's rl__rxq. A stream's fd names its file while
 * the stream is valid; the ring drops an fd's chunks (rl__rxq_drop) when
 * its registration finds the number naming another file, so a stream that
 * later gets that number never sees the old file's bytes.
 * Thread-safe (a leaf lock, held for a push, a pop or a look only).
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

/* A new empty set of queues (one reference), or NULL: no memory. */
RL__HIDDEN rl__rxq *rl__rxq_new(void);
RL__HIDDEN rl__rxq *rl__rxq_retain(rl__rxq *q);
/* Drops a reference; the last frees the chunks still queued. */
RL__HIDDEN void rl__rxq_release(rl__rxq *q);
/* Queues c (the queue's now) after fd's chunks. false: no memory for fd's
 * entry (c is still the caller's). */
RL__HIDDEN bool rl__rxq_push(rl__rxq *q, int fd, rl__rxchunk *c);
/* fd's oldest chunk, holding the bytes of the chunks after it too, up to
 * `max` bytes in all, while each filled its buffer (`full`: more came
 * after it), as one read of up to max bytes would have read them (a
 * multishot receive queues a buffer's worth per chunk); the end or an
 * error stays queued. The caller's; NULL: none. *more: fd has chunks
 * still queued after it. fd's entry goes with its last chunk. */
RL__HIDDEN rl__rxchunk *rl__rxq_pop_upto(rl__rxq *q, int fd, size_t max, bool *more);
/* Whether fd has chunks queued. */
RL__HIDDEN bool rl__rxq_holds(rl__rxq *q, int fd);
/* fd's chunks freed (its number names another file now). */
RL__HIDDEN void rl__rxq_drop(rl__rxq *q, int fd);
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
/* How many bytes a receive into q asks for at most (the readers' chunk;
 * the backend asks for less if its buffers are smaller; below 4 GiB). 0:
 * the buffer. */
RL__HIDDEN void rl__rxq_set_want(rl__rxq *q, size_t n);
RL__HIDDEN size_t rl__rxq_want(const rl__rxq *q);

/* For the tests: the bytes fd's chunks hold (with their headers; 0: none
 * queued), the bytes q holds besides (its block and its table), and the
 * bytes of the chunks the calling thread keeps (with their headers). */
RL__HIDDEN size_t rl__rxq_footprint(rl__rxq *q, int fd);
RL__HIDDEN size_t rl__rxq_table_bytes(rl__rxq *q);
RL__HIDDEN size_t rl__rxq_cached(void);

#endif /* CRUNLOOP_RL_RXQ_H */
