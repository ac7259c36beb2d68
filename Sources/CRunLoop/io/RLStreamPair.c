/* RLStreamPair.c — bound pairs (CFStreamCreateBoundPair): a write stream
 * and a read stream joined by a ring buffer of a fixed size in memory.
 * Write blocks while the ring is full and Read while it is empty, as a
 * pipe would; each side's readiness event is posted by the other side's
 * Read or Write, and a side that closes wakes the other (end of stream for
 * the reader, a broken pipe for the writer).
 *
 * The ring's lock is a leaf: nothing is taken under it, and it is never
 * taken with a stream lock held. */
#include "RLStreamInternal.h"
#include "RLLockDebugInternal.h"
#include <crunloop/RLStream.h>

#include <errno.h>
#include <stdlib.h>

typedef struct ring {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* the ring changed: bytes, room or a side closed */
    _Atomic long refs;   /* one per stream */
    uint8_t *buf;
    size_t cap, head, count;
    bool writer_closed, reader_closed;
    rl__stream *reader, *writer; /* unowned; cleared by their finalize */
} ring;

typedef struct pair_end {
    ring *ring;
} pair_end;

static ring *ring_of(rl__stream *s) { return ((pair_end *)s->state)->ring; }

static void ring_lock(ring *p) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_STREAM_PAIR, __builtin_return_address(0));
    pthread_mutex_lock(&p->lock);
}

static void ring_unlock(ring *p) {
    pthread_mutex_unlock(&p->lock);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_STREAM_PAIR);
}

static void ring_release(ring *p) {
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->buf);
    free(p);
}

static ssize_t pair_read(rl__stream *s, uint8_t *buf, size_t n, int *err) {
    (void)err;
    ring *p = ring_of(s);
    ring_lock(p);
    while (p->count == 0 && !p->writer_closed)
        pthread_cond_wait(&p->cond, &p->lock);
    size_t got = 0;
    while (got < n && p->count > 0) {
        buf[got++] = p->buf[p->head];
        p->head = (p->head + 1) % p->cap;
        p->count--;
    }
    rl__stream *w = p->writer;
    pthread_cond_broadcast(&p->cond);
    ring_unlock(p);
    if (got && w)
        rl__stream_post(w, kRLStreamEventCanAcceptBytes);
    return (ssize_t)got;
}

static ssize_t pair_write(rl__stream *s, const uint8_t *buf, size_t n, int *err) {
    ring *p = ring_of(s);
    ring_lock(p);
    while (p->count == p->cap && !p->reader_closed)
        pthread_cond_wait(&p->cond, &p->lock);
    if (p->reader_closed) {
        ring_unlock(p);
        *err = EPIPE;
        return -1;
    }
    size_t put = 0;
    while (put < n && p->count < p->cap) {
        p->buf[(p->head + p->count) % p->cap] = buf[put++];
        p->count++;
    }
    rl__stream *r = p->reader;
    pthread_cond_broadcast(&p->cond);
    ring_unlock(p);
    if (r)
        rl__stream_post(r, kRLStreamEventHasBytesAvailable);
    return (ssize_t)put;
}

static bool pair_ready(rl__stream *s) {
    ring *p = ring_of(s);
    ring_lock(p);
    bool ok = s->is_read ? (p->count > 0 || p->writer_closed) : (p->count < p->cap || p->reader_closed);
    ring_unlock(p);
    return ok;
}

/* The writer closed and nothing is left. */
static bool pair_exhausted(rl__stream *s) {
    ring *p = ring_of(s);
    ring_lock(p);
    bool end = p->count == 0 && p->writer_closed;
    ring_unlock(p);
    return end;
}

static void pair_close(rl__stream *s) {
    ring *p = ring_of(s);
    ring_lock(p);
    rl__stream *peer = s->is_read ? p->writer : p->reader;
    if (s->is_read)
        p->reader_closed = true;
    else
        p->writer_closed = true;
    pthread_cond_broadcast(&p->cond);
    ring_unlock(p);
    /* the reader learns of the end, the writer of the broken pipe, through
     * the readiness it is waiting for */
    if (peer)
        rl__stream_recheck(peer);
}

static void pair_finalize(rl__stream *s) {
    ring *p = ring_of(s);
    ring_lock(p);
    if (s->is_read) {
        p->reader = NULL;
        p->reader_closed = true;
    } else {
        p->writer = NULL;
        p->writer_closed = true;
    }
    pthread_cond_broadcast(&p->cond);
    ring_unlock(p);
    ring_release(p);
}

static const rl__stream_ops pair_ops = {
    .kind = "bound pair",
    .state_size = sizeof(pair_end),
    .read = pair_read,
    .write = pair_write,
    .ready = pair_ready,
    .exhausted = pair_exhausted,
    .close = pair_close,
    .finalize = pair_finalize,
};

bool RLStreamCreateBoundPair(RLAllocatorRef alloc, RLReadStreamRef *readStream, RLWriteStreamRef *writeStream,
                             RLIndex transferBufferSize) {
    (void)alloc;
    if (readStream)
        *readStream = NULL;
    if (writeStream)
        *writeStream = NULL;
    if (!readStream || !writeStream)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL output");
    if (transferBufferSize < 1)
        return rl__fail(kRLErrorInvalidArgument, __func__, "transfer buffer size %ld < 1", (long)transferBufferSize);
    ring *p = calloc(1, sizeof *p);
    uint8_t *buf = malloc((size_t)transferBufferSize);
    if (!p || !buf) {
        free(p);
        free(buf);
        return rl__fail(kRLErrorNoMemory, __func__, "no memory");
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->buf = buf;
    p->cap = (size_t)transferBufferSize;
    /* Each stream holds the ring from the moment it exists, so that
     * releasing a half-made pair frees the ring through the streams. */
    p->refs = 2;
    rl__stream *r = rl__stream_new(true, &pair_ops, __func__);
    if (r)
        ((pair_end *)r->state)->ring = p;
    else
        ring_release(p);
    rl__stream *w = rl__stream_new(false, &pair_ops, __func__);
    if (w)
        ((pair_end *)w->state)->ring = p;
    else
        ring_release(p);
    if (!r || !w) {
        RLRelease(r);
        RLRelease(w);
        return rl__fail(kRLErrorNoMemory, __func__, "no memory");
    }
    p->reader = r;
    p->writer = w;
    *readStream = (RLReadStreamRef)r;
    *writeStream = (RLWriteStreamRef)w;
    return true;
}
