/* RLData.c — immutable byte buffers. A buffer either owns its bytes (one
 * allocation with the object) or borrows them from another object it keeps
 * a reference on: a received port message's components are slices of the
 * frame's one body, so the bytes are never copied again (rl__data_slice). */
#include "RLDataInternal.h"
#include <crunloop/RLData.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct RLData {
    rl__object base;
    RLIndex length;
    const uint8_t *bytes;
    void *owner; /* what the bytes belong to (released with us), or NULL: inline */
    void (*owner_release)(void *owner);
    uint8_t inline_bytes[];
};

static void data_finalize(void *obj) {
    struct RLData *d = obj;
    if (d->owner_release)
        d->owner_release(d->owner);
}

static char *data_describe(const void *obj) {
    const struct RLData *d = obj;
    char *s = NULL;
    if (asprintf(&s, "<RLData %p>{length = %ld}", obj, (long)d->length) < 0)
        return NULL;
    return s;
}

static const rl__class data_class = {"RLData", data_finalize, NULL, data_describe};

RLRange RLRangeMake(RLIndex location, RLIndex length) { return (RLRange){location, length}; }

RLDataRef RLDataCreate(RLAllocatorRef allocator, const uint8_t *bytes, RLIndex length) {
    if (length < 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, "negative length %ld", (long)length), NULL;
    if (!bytes && length > 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL bytes with length %ld", (long)length), NULL;
    if ((size_t)length > SIZE_MAX - sizeof(struct RLData))
        return rl__fail(kRLErrorNoMemory, __func__, "length %ld too large", (long)length), NULL;
    struct RLData *d = rl__object_alloc_head(&data_class, sizeof *d, (size_t)length, __func__);
    if (!d)
        return NULL;
    if (length)
        memcpy(d->inline_bytes, bytes, (size_t)length);
    d->length = length;
    d->bytes = d->inline_bytes;
    return d;
}

RLDataRef rl__data_slice(const uint8_t *bytes, size_t length, void *owner, void (*retain)(void *),
                         void (*release)(void *)) {
    struct RLData *d = rl__object_alloc(&data_class, sizeof *d, "RLDataCreate");
    if (!d)
        return NULL;
    if (retain)
        retain(owner);
    d->length = (RLIndex)length;
    d->bytes = length ? bytes : d->inline_bytes;
    d->owner = owner;
    d->owner_release = release;
    return d;
}

void rl__data_adopt(RLDataRef data, const uint8_t *bytes, size_t length, void *owner, void (*release)(void *)) {
    struct RLData *d = (struct RLData *)data;
    d->length = (RLIndex)length;
    d->bytes = length ? bytes : d->inline_bytes;
    d->owner = owner;
    d->owner_release = release;
}

void rl__data_refill(RLDataRef data, const uint8_t *bytes, size_t length) {
    struct RLData *d = (struct RLData *)data;
    if (length)
        memcpy(d->inline_bytes, bytes, length);
    d->length = (RLIndex)length;
}

void *rl__data_take_back(RLDataRef data) {
    struct RLData *d = (struct RLData *)data;
    void *owner = d->owner;
    d->length = 0;
    d->bytes = d->inline_bytes;
    d->owner = NULL;
    d->owner_release = NULL;
    return owner;
}

static bool data_ok(RLDataRef data, const char *fn) { return rl__object_check(data, &data_class, fn); }

RLIndex RLDataGetLength(RLDataRef data) {
    if (!data_ok(data, __func__))
        return -1;
    return data->length;
}

const uint8_t *RLDataGetBytePtr(RLDataRef data) {
    if (!data_ok(data, __func__))
        return NULL;
    return data->bytes;
}

bool RLDataGetBytes(RLDataRef data, RLRange range, uint8_t *buffer) {
    if (!data_ok(data, __func__))
        return false;
    if (!buffer)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL buffer");
    if (range.location < 0 || range.length < 0 || range.location > data->length ||
        range.length > data->length - range.location)
        return rl__fail(kRLErrorInvalidArgument, __func__, "range {%ld, %ld} is outside the data's %ld bytes",
                        (long)range.location, (long)range.length, (long)data->length);
    if (range.length)
        memcpy(buffer, data->bytes + range.location, (size_t)range.length);
    return true;
}

bool RLDataEqual(RLDataRef a, RLDataRef b) {
    if (!data_ok(a, __func__) || !data_ok(b, __func__))
        return false;
    return a->length == b->length && (a->length == 0 || memcmp(a->bytes, b->bytes, (size_t)a->length) == 0);
}

bool rl__is_data(const void *obj) {
    const rl__object *o = obj;
    return o && atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE && rl__is_class(o, &data_class);
}

bool rl__data_view(RLDataRef data, const uint8_t **bytes, size_t *length) {
    if (!rl__is_data(data))
        return false;
    *bytes = data->bytes;
    *length = (size_t)data->length;
    return true;
}
