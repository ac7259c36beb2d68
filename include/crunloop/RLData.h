/*
 * RLData.h — an immutable byte buffer (CFData), the payload of port
 * messages. Reference counted like every RL object (Create rule: release
 * what a Create function returns). Thread-safe: the bytes never change.
 */
#ifndef CRUNLOOP_RLDATA_H
#define CRUNLOOP_RLDATA_H

#include <crunloop/RLBase.h>

#include <stdint.h>

RL_EXTERN_C_BEGIN

typedef const struct RLData *RLDataRef;

/* A range of items: `length` items from `location` (CFRange). */
typedef struct RLRange {
    RLIndex location;
    RLIndex length;
} RLRange;

/* CFRangeMake. */
RL_EXPORT RLRange RLRangeMake(RLIndex location, RLIndex length);

/* A new buffer holding a copy of `length` bytes at `bytes` (which may be
 * NULL when length is 0). Create rule. NULL (error set) for a negative
 * length, NULL bytes with a non-zero length, or no memory. */
RL_EXPORT RLDataRef RL_NULLABLE RLDataCreate(RLAllocatorRef RL_NULLABLE allocator, const uint8_t *RL_NULLABLE bytes,
                                             RLIndex length);

/* The number of bytes, or -1 (error set) for a bad object. */
RL_EXPORT RLIndex RLDataGetLength(RLDataRef RL_NULLABLE data);

/* The bytes, valid as long as the caller holds a reference; NULL (error
 * set) for a bad object. An empty buffer returns a non-NULL pointer. */
RL_EXPORT const uint8_t *RL_NULLABLE RLDataGetBytePtr(RLDataRef RL_NULLABLE data);

/* Copies the bytes of `range` into buffer. False (error set, nothing
 * copied) for a bad object, NULL buffer, or a range outside the data. */
RL_EXPORT bool RLDataGetBytes(RLDataRef RL_NULLABLE data, RLRange range, uint8_t *RL_NULLABLE buffer);

/* True if both hold the same bytes (false, error set, for a bad object). */
RL_EXPORT bool RLDataEqual(RLDataRef RL_NULLABLE a, RLDataRef RL_NULLABLE b);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLDATA_H */
