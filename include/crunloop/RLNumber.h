/*
 * RLNumber.h — booleans and numbers as objects: CoreFoundation's
 * CFNumber.h (CFBoolean and CFNumber), the values of properties such as a
 * stream's kRLStreamPropertyAppendToFile (a boolean) and
 * kRLStreamPropertyFileCurrentOffset (a number; RLStream.h).
 *
 * What a caller may rely on:
 *   - There are exactly two booleans, kRLBooleanTrue and kRLBooleanFalse:
 *     compare pointers, or read one with RLBooleanGetValue. They live as
 *     long as the library; RLRetain and RLRelease work on them in pairs,
 *     and releasing one more time than it was retained is refused
 *     (kRLErrorNotOwner), so a Copy function may return them retained.
 *   - A number holds an integer of up to 64 bits or a floating-point value
 *     (float or double) and never changes. Create rule: release what
 *     RLNumberCreate returns.
 *   - Reading it as any type converts as CF does on x86-64: integers are
 *     cut to narrower types; floating-point values are truncated toward
 *     zero, and one that is NaN or out of the range of 32 bits (for
 *     8, 16 and 32-bit types) or 64 bits reads as that width's minimum
 *     (then cut). RLNumberGetValue says whether the value came through
 *     exactly (Tests/diff/scenarios/number_values.c checks this against
 *     CF).
 *   - RLNumberGetType gives the sized type the creation's type code stands
 *     for (Char→SInt8, Short→SInt16, Int→SInt32, Long, LongLong, CFIndex
 *     and NSInteger→SInt64, Float→Float32, Double and CGFloat→Float64).
 *     CF on Linux reports a 32-bit type for small CFIndex and long long
 *     values (its storage); ours does not depend on the value.
 *   - Type codes are CF's (kRLNumberSInt8Type 1 … kRLNumberNSIntegerType
 *     15); each names the C type valuePtr points at.
 *   - Thread-safe: neither kind of object ever changes.
 */
#ifndef CRUNLOOP_RLNUMBER_H
#define CRUNLOOP_RLNUMBER_H

#include <crunloop/RLBase.h>
#include <crunloop/RLString.h> /* RLComparisonResult */

RL_EXTERN_C_BEGIN

typedef const struct RLBoolean *RLBooleanRef;

/* The two booleans (CF's kCFBooleanTrue and kCFBooleanFalse). */
RL_EXPORT const RLBooleanRef kRLBooleanTrue;
RL_EXPORT const RLBooleanRef kRLBooleanFalse;

/* true for kRLBooleanTrue; false for kRLBooleanFalse, and (error set) for
 * anything that is not a boolean. */
RL_EXPORT bool RLBooleanGetValue(RLBooleanRef RL_NULLABLE boolean);

typedef const struct RLNumber *RLNumberRef;

/* CFNumberType's values. */
typedef RL_ENUM(RLIndex, RLNumberType) {
    kRLNumberSInt8Type = 1,      /* int8_t */
    kRLNumberSInt16Type = 2,     /* int16_t */
    kRLNumberSInt32Type = 3,     /* int32_t */
    kRLNumberSInt64Type = 4,     /* int64_t */
    kRLNumberFloat32Type = 5,    /* float */
    kRLNumberFloat64Type = 6,    /* double */
    kRLNumberCharType = 7,       /* char */
    kRLNumberShortType = 8,      /* short */
    kRLNumberIntType = 9,        /* int */
    kRLNumberLongType = 10,      /* long */
    kRLNumberLongLongType = 11,  /* long long */
    kRLNumberFloatType = 12,     /* float */
    kRLNumberDoubleType = 13,    /* double */
    kRLNumberCFIndexType = 14,   /* RLIndex */
    kRLNumberNSIntegerType = 15, /* long (NSInteger) */
    kRLNumberCGFloatType = 16,   /* double (CGFloat on 64-bit) */
};

/* A number holding the value of type theType at valuePtr. Create rule.
 * NULL (error set) for a NULL valuePtr, an unknown type, or no memory. */
RL_EXPORT RLNumberRef RL_NULLABLE RLNumberCreate(RLAllocatorRef RL_NULLABLE allocator, RLNumberType theType,
                                                 const void *RL_NULLABLE valuePtr);

/* Stores the number as theType at valuePtr. True if it came through
 * exactly; false (error set) if not — valuePtr then holds the converted
 * value (see above), as CF does — and false (error set, nothing stored)
 * for a bad object, a NULL valuePtr or an unknown type. */
RL_EXPORT bool RLNumberGetValue(RLNumberRef RL_NULLABLE number, RLNumberType theType, void *RL_NULLABLE valuePtr);

/* The sized type of the number (see above); 0 (error set) for a bad
 * object. */
RL_EXPORT RLNumberType RLNumberGetType(RLNumberRef RL_NULLABLE number);
/* The bytes of that type: 1, 2, 4 or 8; 0 (error set) for a bad object. */
RL_EXPORT RLIndex RLNumberGetByteSize(RLNumberRef RL_NULLABLE number);
/* Whether it holds a floating-point value; false (error set) for a bad
 * object. */
RL_EXPORT bool RLNumberIsFloatType(RLNumberRef RL_NULLABLE number);
/* Orders two numbers by value, integers and floating-point ones exactly
 * against each other (3 equals 3.0; 2^53 + 1 is above 2^53 as a double).
 * NaN sorts below every number and equal to NaN. context is unused (CF's
 * signature). kRLCompareEqualTo (error set) for a bad object. */
RL_EXPORT RLComparisonResult RLNumberCompare(RLNumberRef RL_NULLABLE number, RLNumberRef RL_NULLABLE otherNumber,
                                             void *RL_NULLABLE context);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLNUMBER_H */
