/* RLStreamMemory.c — memory streams: a read stream over a copy of the
 * caller's bytes, and a write stream that collects what is written into a
 * growing buffer (its property kRLStreamPropertyDataWritten). Neither ever blocks; a
 * read stream reaches its end as soon as its bytes are used up. */
#include "RLStreamInternal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct memory {
    uint8_t *bytes;
    /* Guarded by the stream lock: written bytes (len, cap), and the read
     * position, which a loop's thread checks while another thread reads. */
    size_t len, pos, cap;
} memory;

static memory *mem(rl__stream *s) { return (memory *)s->state; }

static ssize_t memory_read(rl__stream *s, uint8_t *buf, size_t n, int *err) {
    (void)err;
    memory *m = mem(s);
    rl__stream_lock(s);
    size_t left = m->len - m->pos, take = n < left ? n : left;
    memcpy(buf, m->bytes + m->pos, take);
    m->pos += take;
    rl__stream_unlock(s);
    return (ssize_t)take;
}

static ssize_t memory_write(rl__stream *s, const uint8_t *buf, size_t n, int *err) {
    memory *m = mem(s);
    rl__stream_lock(s);
    size_t need = m->len + n;
    if (need > m->cap) {
        size_t cap = m->cap ? m->cap : 64;
        while (cap < need)
            cap *= 2;
        uint8_t *b = realloc(m->bytes, cap);
        if (!b) {
            rl__stream_unlock(s);
            *err = ENOMEM;
            return -1;
        }
        m->bytes = b;
        m->cap = cap;
    }
    memcpy(m->bytes + m->len, buf, n);
    m->len = need;
    rl__stream_unlock(s);
    return (ssize_t)n;
}

static bool memory_exhausted(rl__stream *s) {
    rl__stream_lock(s);
    bool end = mem(s)->pos >= mem(s)->len;
    rl__stream_unlock(s);
    return end;
}

static bool memory_ready(rl__stream *s) { return !s->is_read || !memory_exhausted(s); }

static void memory_finalize(rl__stream *s) { free(mem(s)->bytes); }

/* A write stream's bytes so far, before open too (CF). */
static unsigned memory_properties(rl__stream *s) { return s->is_read ? 0 : RL_PROP_BIT(RL_PROP_DATA_WRITTEN); }

static RLTypeRef memory_copy_property(rl__stream *s, rl__prop p, const char *fn) {
    (void)p; /* the data written: its only property */
    (void)fn;
    rl__stream_lock(s);
    RLDataRef d = RLDataCreate(NULL, mem(s)->bytes, (RLIndex)mem(s)->len);
    rl__stream_unlock(s);
    return d;
}

static const rl__stream_ops memory_ops = {
    .kind = "memory",
    .state_size = sizeof(memory),
    .read = memory_read,
    .write = memory_write,
    .ready = memory_ready,
    .exhausted = memory_exhausted,
    .finalize = memory_finalize,
    .properties = memory_properties,
    .copy_property = memory_copy_property,
};

RLReadStreamRef RLReadStreamCreateWithBytes(RLAllocatorRef alloc, const uint8_t *bytes, RLIndex length) {
    (void)alloc;
    if (length < 0 || (!bytes && length > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "bytes %p with length %ld", (const void *)bytes,
                        (long)length),
               NULL;
    rl__stream *s = rl__stream_new(true, &memory_ops, __func__);
    if (!s)
        return NULL;
    memory *m = mem(s);
    m->bytes = malloc(length ? (size_t)length : 1);
    if (!m->bytes) {
        RLRelease(s);
        return rl__fail(kRLErrorNoMemory, __func__, "no memory for %ld bytes", (long)length), NULL;
    }
    if (length)
        memcpy(m->bytes, bytes, (size_t)length);
    m->len = (size_t)length;
    return (RLReadStreamRef)s;
}

RLWriteStreamRef RLWriteStreamCreateWithAllocatedBuffers(RLAllocatorRef alloc, RLAllocatorRef bufferAllocator) {
    (void)alloc;
    (void)bufferAllocator;
    return (RLWriteStreamRef)rl__stream_new(false, &memory_ops, __func__);
}
