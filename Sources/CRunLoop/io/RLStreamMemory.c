/* RLStreamMemory.c — memory streams: a read stream over a copy of the
 * caller's bytes or over the bytes themselves (NoCopy), a write stream
 * that collects what is written into a growing buffer (its property
 * kRLStreamPropertyDataWritten), and one that writes into the caller's
 * fixed buffer. None ever blocks; a read stream reaches its end as soon
 * as its bytes are used up, and lends them in place (GetBuffer). */
#include "RLStreamInternal.h"
#include <crunloop/RLData.h>
#include <crunloop/RLStream.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct memory {
    uint8_t *bytes;
    bool owned; /* bytes are freed with the stream */
    bool fixed; /* the caller's buffer of cap bytes: never grows */
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
    if (take)
        memcpy(buf, m->bytes + m->pos, take);
    m->pos += take;
    rl__stream_unlock(s);
    return (ssize_t)take;
}

static ssize_t memory_write(rl__stream *s, const uint8_t *buf, size_t n, int *err) {
    memory *m = mem(s);
    rl__stream_lock(s);
    size_t need = m->len + n;
    if (m->fixed && need > m->cap) { /* CF: all or nothing */
        rl__stream_unlock(s);
        *err = ENOMEM;
        return -1;
    }
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

/* Room left: always, unless the buffer is the caller's and full. */
static bool memory_has_room(rl__stream *s) {
    rl__stream_lock(s);
    bool room = !mem(s)->fixed || mem(s)->len < mem(s)->cap;
    rl__stream_unlock(s);
    return room;
}

static bool memory_ready(rl__stream *s) { return s->is_read ? !memory_exhausted(s) : memory_has_room(s); }

/* A fixed buffer with no room at Open: the stream opens at its end (CF
 * reports EndEncountered there instead of CanAcceptBytes). */
static int memory_open(rl__stream *s, const char *fn) {
    (void)fn;
    if (s->is_read || memory_has_room(s))
        return 1;
    rl__stream_lock(s);
    rl__stream_open_finished_locked(s, 0, 0);
    s->status = kRLStreamStatusAtEnd;
    rl__stream_post_locked(s, kRLStreamEventEndEncountered);
    rl__stream_unlock(s);
    return 0;
}

static const uint8_t *memory_get_buffer(rl__stream *s, size_t max, size_t *n, bool *at_end) {
    memory *m = mem(s);
    rl__stream_lock(s);
    size_t left = m->len - m->pos;
    *n = left < max ? left : max;
    *at_end = left <= max; /* CF: lending the last byte ends the stream */
    const uint8_t *p = m->bytes ? m->bytes + m->pos : NULL; /* no bytes at all: NULL, 0 */
    m->pos += *n;
    rl__stream_unlock(s);
    return p;
}

static void memory_finalize(rl__stream *s) {
    if (mem(s)->owned)
        free(mem(s)->bytes);
}

/* A write stream's bytes so far, before open too (CF); a stream over the
 * caller's buffer has none (CF's copy returns NULL: they are in it). */
static unsigned memory_properties(rl__stream *s) {
    return s->is_read || mem(s)->fixed ? 0 : RL_PROP_BIT(RL_PROP_DATA_WRITTEN);
}

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
    .open = memory_open,
    .read = memory_read,
    .write = memory_write,
    .ready = memory_ready,
    .exhausted = memory_exhausted,
    .get_buffer = memory_get_buffer,
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
    m->owned = true;
    return (RLReadStreamRef)s;
}

RLReadStreamRef RLReadStreamCreateWithBytesNoCopy(RLAllocatorRef alloc, const uint8_t *bytes, RLIndex length,
                                                  RLAllocatorRef bytesDeallocator) {
    (void)alloc;
    if (length < 0 || (!bytes && length > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "bytes %p with length %ld", (const void *)bytes,
                        (long)length),
               NULL;
    if (bytesDeallocator && bytesDeallocator != kRLAllocatorNull)
        return rl__fail(kRLErrorInvalidArgument, __func__,
                        "bytesDeallocator %p: only NULL (free) or kRLAllocatorNull (keep)", bytesDeallocator),
               NULL;
    rl__stream *s = rl__stream_new(true, &memory_ops, __func__);
    if (!s)
        return NULL;
    memory *m = mem(s);
    m->bytes = (uint8_t *)bytes; /* only read, and freed only if owned */
    m->len = (size_t)length;
    m->owned = bytesDeallocator == NULL;
    return (RLReadStreamRef)s;
}

RLWriteStreamRef RLWriteStreamCreateWithAllocatedBuffers(RLAllocatorRef alloc, RLAllocatorRef bufferAllocator) {
    (void)alloc;
    (void)bufferAllocator;
    rl__stream *s = rl__stream_new(false, &memory_ops, __func__);
    if (s)
        mem(s)->owned = true;
    return (RLWriteStreamRef)s;
}

RLWriteStreamRef RLWriteStreamCreateWithBuffer(RLAllocatorRef alloc, uint8_t *buffer, RLIndex bufferCapacity) {
    (void)alloc;
    if (bufferCapacity < 0 || (!buffer && bufferCapacity > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "buffer %p with capacity %ld", (void *)buffer,
                        (long)bufferCapacity),
               NULL;
    rl__stream *s = rl__stream_new(false, &memory_ops, __func__);
    if (!s)
        return NULL;
    memory *m = mem(s);
    m->bytes = buffer;
    m->cap = (size_t)bufferCapacity;
    m->fixed = true;
    return (RLWriteStreamRef)s;
}
