/*
 * RLArray.h — an immutable array of C strings: the little of CF's CFArray
 * that CFRunLoopPerformBlock's array-of-modes form needs (cf_compat.h maps
 * CFArrayCreate, CFArrayGetCount and CFArrayGetValueAtIndex onto it).
 *
 * What a caller may rely on:
 *   - The strings are copied at creation; the array never changes.
 *   - Create rule: RLArrayCreate returns a new reference; RLRelease it.
 *   - An RLArrayRef may be used from any thread.
 *   - Misuse (NULL values with count > 0, a NULL string, a negative count
 *     or index out of range, an object that is not an array) fails with an
 *     error (RLErrorGetLast) and returns NULL or -1.
 *
 * For a one-off list of modes, RLRunLoopPerformFunctionInModes and
 * RLRunLoopPerformBlockInModes (RLRunLoop.h) take a C array directly.
 */
#ifndef CRUNLOOP_RLARRAY_H
#define CRUNLOOP_RLARRAY_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef const struct RLArray *RLArrayRef;

/* An array of `count` copies of values[0, count). */
RL_EXPORT RLArrayRef RL_NULLABLE RLArrayCreate(RLAllocatorRef RL_NULLABLE allocator,
                                               const char *const *RL_NULLABLE values, RLIndex count);
/* The number of strings; -1 (error set) if array is not an array. */
RL_EXPORT RLIndex RLArrayGetCount(RLArrayRef array);
/* The string at index (Get rule: valid while the array lives). */
RL_EXPORT const char *RL_NULLABLE RLArrayGetValueAtIndex(RLArrayRef array, RLIndex index);
/* All RLArrayGetCount strings, in order, as a C array (Get rule). NULL
 * (error set) if array is not an array; an empty array gives a non-NULL
 * pointer to nothing. */
RL_EXPORT const char *const *RL_NULLABLE RLArrayGetValues(RLArrayRef array);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLARRAY_H */
