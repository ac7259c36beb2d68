/*
 * RLBase.h — types, object model and time shared by every CRunLoop header.
 *
 * Ownership (the CoreFoundation rule, stated once here and repeated as a
 * one-line comment on each declaration):
 *   1. A function whose name contains "Create" or "Copy" returns a reference
 *      the caller owns and must give back with RLRelease.
 *   2. A function whose name contains "Get" returns a reference the caller
 *      does not own; RLRetain it to keep it beyond the current scope.
 *   3. Every object is reference counted and thread-safe to retain and
 *      release from any thread.
 *
 * Errors: every call that can fail says so in its return value (false, NULL,
 * or a documented result code) and leaves a thread-local error readable with
 * RLErrorGetLast() (see RLError.h). A failed call changes nothing.
 */
#ifndef CRUNLOOP_RLBASE_H
#define CRUNLOOP_RLBASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define RL_EXTERN_C_BEGIN extern "C" {
#define RL_EXTERN_C_END }
#else
#define RL_EXTERN_C_BEGIN
#define RL_EXTERN_C_END
#endif

#define RL_EXPORT extern __attribute__((visibility("default")))
#define RL_INLINE static inline __attribute__((always_inline))

#ifndef __has_attribute
#define __has_attribute(x) 0
#endif
#ifndef __has_feature
#define __has_feature(x) 0
#endif

/* Enums with a fixed underlying type where the language has them and
 * someone gains from them: Swift's importer (it defines __swift__), which
 * turns `kRLRunLoopRunFinished` into `.finished`, C++11 and C23 under clang.
 * Plain C11/C17 has no such enums (clang warns under -pedantic), so there,
 * and with gcc, the type is a plain integer typedef. Values and sizes are
 * identical either way, so code built both ways links together.
 * Written as `typedef RL_ENUM(int32_t, Name) { ... };` (the CF_ENUM idiom). */
#if defined(__clang__) && __has_attribute(enum_extensibility) && \
    (defined(__swift__) || defined(__cplusplus) || \
     (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L))
#define RL_ENUM(_type, _name) \
    int rl__enum_##_name; \
    enum __attribute__((enum_extensibility(open))) _name : _type; \
    typedef enum _name _name; \
    enum _name : _type
#define RL_OPTIONS(_type, _name) \
    int rl__options_##_name; \
    enum __attribute__((flag_enum, enum_extensibility(open))) _name : _type; \
    typedef enum _name _name; \
    enum _name : _type
#else
#define RL_ENUM(_type, _name) _type _name; enum
#define RL_OPTIONS(_type, _name) _type _name; enum
#endif

/* Documentation markers only: the headers carry no clang nullability
 * qualifiers (a partly annotated header warns under clang, and the Swift
 * overlay checks every pointer itself). */
#define RL_NULLABLE
#define RL_NONNULL

RL_EXTERN_C_BEGIN

/* Any CRunLoop object. */
typedef const void *RLTypeRef;
/* Kept for CoreFoundation parity; pass NULL (the default allocator). */
typedef const void *RLAllocatorRef;
/* CF's kCFAllocatorNull: "do not free". Only the deallocator parameters
 * that hand over memory (RLReadStreamCreateWithBytesNoCopy's
 * bytesDeallocator) tell it from NULL, which there means free(); every
 * other allocator parameter ignores it like any other allocator. */
RL_EXPORT const RLAllocatorRef kRLAllocatorNull;
/* A type's identity (CFTypeID): objects of one type share one ID, objects
 * of different types have different IDs (RLGetTypeID, RLRunLoopGetTypeID,
 * RLReadStreamGetTypeID, ...). Unlike CF's small numbers, the values may
 * change from one run of a program to the next: compare them, do not
 * store them. Never 0. */
typedef unsigned long RLTypeID;
typedef long RLIndex;
typedef unsigned long RLOptionFlags;
typedef unsigned long RLHashCode;

/* Seconds. RLAbsoluteTime counts from 2001-01-01 00:00:00 UTC, like CF. */
typedef double RLTimeInterval;
typedef double RLAbsoluteTime;

/* Seconds between 1970-01-01 and 2001-01-01. */
#define kRLAbsoluteTimeIntervalSince1970 978307200.0

/* The wall-clock time now, as CFAbsoluteTimeGetCurrent. Timed waits and
 * timers convert dates to the monotonic clock on entry, so changing the
 * wall clock never stretches or cuts short a wait already in progress. */
RL_EXPORT RLAbsoluteTime RLAbsoluteTimeGetCurrent(void);

/* Seconds on a monotonic clock (CLOCK_MONOTONIC); only differences mean
 * anything. */
RL_EXPORT double RLMonotonicTimeGetCurrent(void);

/* Adds one reference. Returns obj, or NULL (error set) when obj is NULL or
 * not a live CRunLoop object. */
RL_EXPORT RLTypeRef RL_NULLABLE RLRetain(RLTypeRef RL_NULLABLE obj);

/* Drops one reference; the last one destroys the object. Returns false
 * (error set, nothing changed) when obj is NULL, not a live object, or may not
 * be destroyed now (for example a lock that is still held).
 *
 * References the library keeps for itself (the result of a Get function
 * such as RLRunLoopGetCurrent or RLThreadGetCurrent, while nobody else
 * retained it) are not the caller's: releasing one fails with
 * kRLErrorNotOwner and changes nothing.
 *
 * A stale pointer (an object released once too often, or used after its
 * last release) is refused with kRLErrorInvalidObject: a released object's
 * memory is not given to a new object until many more objects of its size
 * were released, so the stale pointer keeps pointing at a dead object
 * rather than at an unrelated live one. That is likely, not certain, in a
 * normal build; under AddressSanitizer the stale access is reported. */
RL_EXPORT bool RLRelease(RLTypeRef RL_NULLABLE obj);

/* The current reference count, or -1 (error set) for a bad object. */
RL_EXPORT RLIndex RLGetRetainCount(RLTypeRef RL_NULLABLE obj);

/* The object's type name ("RLLock", "RLRunLoopTimer", ...), or NULL (error
 * set). Static storage; do not free. */
RL_EXPORT const char *RL_NULLABLE RLGetTypeName(RLTypeRef RL_NULLABLE obj);

/* The object's type ID (CFGetTypeID): equal to RLRunLoopGetTypeID() for a
 * run loop, RLStringGetTypeID() for a library string, and so on; 0 (error
 * set) for NULL or a pointer that is not a live object. */
RL_EXPORT RLTypeID RLGetTypeID(RLTypeRef RL_NULLABLE obj);

/* A human-readable description. Copy rule: the caller frees it with free(). */
RL_EXPORT char *RL_NULLABLE RLCopyDescription(RLTypeRef RL_NULLABLE obj);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLBASE_H */
