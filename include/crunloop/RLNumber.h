/*
 * RLNumber.h — booleans and integers as objects: the part of
 * CoreFoundation's CFNumber.h (CFBoolean and CFNumber) that property
 * values need, such as a stream's kRLStreamPropertyAppendToFile (a
 * boolean) and kRLStreamPropertyFileCurrentOffset (a number; RLStream.h).
 *
 * What a caller may rely on:
 *   - There are exactly two booleans, kRLBooleanTrue and kRLBooleanFalse:
 *     compare pointers, or read one with RLBooleanGetValue. They live as
 *     long as the library; RLRetain and RLRelease work on them in pairs,
 *     and releasing one more time than it was retained is refused
 *     (kRLErrorNotOwner), so a Copy function may return them retained.
 *   - A number holds an integer of up to 64 bits and never changes.
 *     Floating-point types (kRLNumberFloat32Type, Float64, Float, Double,
 *     CGFloat) are not supported: creating one fails with
 *     kRLErrorInvalidArgument. Create rule: release what RLNumberCreate
 *     returns.
 *   - Type codes are CF's (kRLNumberSInt8Type 1 … kRLNumberNSIntegerType
 *     15); each names the C type valuePtr points at.
 *   - Thread-safe: neither kind of object ever changes.
 */
#ifndef CRUNLOOP_RLNUMBER_H
#define CRUNLOOP_RLNUMBER_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef const struct RLBoolean *RLBooleanRef;

/* The two booleans (CF's kCFBooleanTrue and kCFBooleanFalse). */
RL_EXPORT const RLBooleanRef kRLBooleanTrue;
RL_EXPORT const RLBooleanRef kRLBooleanFalse;

/* true for kRLBooleanTrue; false for kRLBooleanFalse, and (error set) for
 * anything that is not a boolean. */
RL_EXPORT bool RLBooleanGetValue(RLBooleanRef RL_NULLABLE boolean);

typedef const struct RLNumber *RLNumberRef;

/* CFNumberType's values; the floating-point ones are refused (see above). */
typedef RL_ENUM(RLIndex, RLNumberType) {
    kRLNumberSInt8Type = 1,      /* int8_t */
    kRLNumberSInt16Type = 2,     /* int16_t */
    kRLNumberSInt32Type = 3,     /* int32_t */
    kRLNumberSInt64Type = 4,     /* int64_t */
    kRLNumberFloat32Type = 5,    /* not supported */
    kRLNumberFloat64Type = 6,    /* not supported */
    kRLNumberCharType = 7,       /* char */
    kRLNumberShortType = 8,      /* short */
    kRLNumberIntType = 9,        /* int */
    kRLNumberLongType = 10,      /* long */
    kRLNumberLongLongType = 11,  /* long long */
    kRLNumberFloatType = 12,     /* not supported */
    kRLNumberDoubleType = 13,    /* not supported */
    kRLNumberCFIndexType = 14,   /* RLIndex */
    kRLNumberNSIntegerType = 15, /* long (NSInteger) */
    kRLNumberCGFloatType = 16,   /* not supported */
};

/* A number holding the integer of type theType at valuePtr. Create rule.
 * NULL (error set) for a NULL valuePtr, an unknown or floating-point type,
 * or no memory. */
RL_EXPORT RLNumberRef RL_NULLABLE RLNumberCreate(RLAllocatorRef RL_NULLABLE allocator, RLNumberType theType,
                                                 const void *RL_NULLABLE valuePtr);

/* Stores the number as theType at valuePtr. True if it fits; false (error
 * set) if not — valuePtr then holds the value cut to the type, as CF does
 * — and false (error set, nothing stored) for a bad object, a NULL
 * valuePtr or an unsupported type. */
RL_EXPORT bool RLNumberGetValue(RLNumberRef RL_NULLABLE number, RLNumberType theType, void *RL_NULLABLE valuePtr);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLNUMBER_H */
