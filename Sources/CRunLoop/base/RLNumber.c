/* RLNumber.c — the two booleans and integer numbers (CF's CFBoolean and
 * CFNumber, which CF also keeps in one file): the values of properties.
 *
 * The booleans are static objects the library holds one reference to for
 * ever (rl__object_hold's mark, set in the initializer): retains and
 * releases pair up like any object's, and a release without a retain is
 * refused as for any Get-rule result, so they are never destroyed. */
#include "RLNumberInternal.h"
#include <crunloop/RLNumber.h>
#include <crunloop/RLString.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct RLBoolean {
    rl__object base;
    bool value;
};

static char *boolean_describe(const void *obj) {
    char *s = NULL;
    if (asprintf(&s, "<RLBoolean %p>{value = %s}", obj, ((const struct RLBoolean *)obj)->value ? "true" : "false") <
        0)
        return NULL;
    return s;
}

const rl__class rl__boolean_class = {"RLBoolean", NULL, NULL, boolean_describe};

/* 8-aligned like every object: the generic functions read a header only
 * at an aligned address. */
static struct RLBoolean true_object __attribute__((aligned(8))) = {
    .base = {.magic = RL__MAGIC_ALIVE, .kind = RL__KIND_BOOLEAN, .rc = RL__HELD_ONE + 1},
    .value = true,
};
static struct RLBoolean false_object __attribute__((aligned(8))) = {
    .base = {.magic = RL__MAGIC_ALIVE, .kind = RL__KIND_BOOLEAN, .rc = RL__HELD_ONE + 1},
    .value = false,
};

const RLBooleanRef kRLBooleanTrue = &true_object;
const RLBooleanRef kRLBooleanFalse = &false_object;

bool RLBooleanGetValue(RLBooleanRef boolean) {
    if (boolean == kRLBooleanTrue)
        return true;
    if (boolean != kRLBooleanFalse)
        (void)rl__object_check(boolean, &rl__boolean_class, __func__); /* sets the error */
    return false;
}

/* ---- numbers ----
 * A number keeps its value as int64_t or as double (a Float32 number's
 * float widened, exactly) with the canonical type it was made with: the
 * sized type each C type code stands for. Reading it as another type
 * converts as CoreFoundation does on x86-64 (the oracle, Tests/diff/
 * scenarios/number_values.c), with every step defined in C: integers are
 * cut to narrower types, floating-point values are truncated toward zero
 * (out of range or NaN: the minimum of 32 or 64 bits, what the processor's
 * conversion gives), and the result says whether the value came through
 * exactly. */

struct RLNumber {
    rl__object base;
    RLNumberType type; /* canonical: SInt8/16/32/64, Float32/64 */
    union {
        int64_t i;
        double d;
    } v;
};

static bool is_float_type(RLNumberType t) { return t == kRLNumberFloat32Type || t == kRLNumberFloat64Type; }

static char *number_describe(const void *obj) {
    const struct RLNumber *n = obj;
    char *s = NULL;
    int r = is_float_type(n->type) ? asprintf(&s, "<RLNumber %p>{value = %.17g, type = %s}", obj, n->v.d,
                                               n->type == kRLNumberFloat32Type ? "Float32" : "Float64")
                                   : asprintf(&s, "<RLNumber %p>{value = %lld, type = SInt%d}", obj,
                                              (long long)n->v.i, n->type == kRLNumberSInt8Type    ? 8
                                                                 : n->type == kRLNumberSInt16Type ? 16
                                                                 : n->type == kRLNumberSInt32Type ? 32
                                                                                                  : 64);
    return r < 0 ? NULL : s;
}

static const rl__class number_class = {"RLNumber", NULL, NULL, number_describe};

/* The sized type a type code stands for, or 0 for an unknown code. */
static RLNumberType canonical(RLNumberType t) {
    switch (t) {
    case kRLNumberSInt8Type: case kRLNumberCharType: return kRLNumberSInt8Type;
    case kRLNumberSInt16Type: case kRLNumberShortType: return kRLNumberSInt16Type;
    case kRLNumberSInt32Type: return kRLNumberSInt32Type;
    case kRLNumberIntType: return sizeof(int) == 4 ? kRLNumberSInt32Type : kRLNumberSInt64Type;
    case kRLNumberSInt64Type: case kRLNumberLongLongType: return kRLNumberSInt64Type;
    case kRLNumberLongType: case kRLNumberNSIntegerType:
        return sizeof(long) == 8 ? kRLNumberSInt64Type : kRLNumberSInt32Type;
    case kRLNumberCFIndexType: return sizeof(RLIndex) == 8 ? kRLNumberSInt64Type : kRLNumberSInt32Type;
    case kRLNumberFloat32Type: case kRLNumberFloatType: return kRLNumberFloat32Type;
    case kRLNumberFloat64Type: case kRLNumberDoubleType: case kRLNumberCGFloatType: return kRLNumberFloat64Type;
    default: return 0;
    }
}

static size_t canonical_size(RLNumberType c) {
    switch (c) {
    case kRLNumberSInt8Type: return 1;
    case kRLNumberSInt16Type: return 2;
    case kRLNumberSInt32Type: case kRLNumberFloat32Type: return 4;
    default: return 8;
    }
}

static bool type_ok(RLNumberType t, const char *fn) {
    if (canonical(t))
        return true;
    return rl__fail(kRLErrorInvalidArgument, fn, "unknown number type %ld", (long)t);
}

/* Reads the integer of C type code t at p (char as the platform's char). */
static int64_t load_int(RLNumberType t, const void *p) {
    if (t == kRLNumberCharType)
        return *(const char *)p;
    switch (canonical_size(canonical(t))) {
    case 1: return *(const int8_t *)p;
    case 2: return *(const int16_t *)p;
    case 4: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
    }
}

RLNumberRef RLNumberCreate(RLAllocatorRef allocator, RLNumberType theType, const void *valuePtr) {
    (void)allocator;
    if (!type_ok(theType, __func__))
        return NULL;
    if (!valuePtr)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL valuePtr"), NULL;
    struct RLNumber *n = rl__object_alloc(&number_class, sizeof *n, __func__);
    if (!n)
        return NULL;
    n->type = canonical(theType);
    if (n->type == kRLNumberFloat32Type)
        n->v.d = *(const float *)valuePtr;
    else if (n->type == kRLNumberFloat64Type)
        n->v.d = *(const double *)valuePtr;
    else
        n->v.i = load_int(theType, valuePtr);
    return n;
}

#define TWO_63 9223372036854775808.0 /* 2^63, exact as a double */
#define TWO_31 2147483648.0

/* d truncated toward zero into 64 (or 32) bits; NaN or out of range: the
 * minimum, as x86-64's conversion instructions give (and so CF there). */
static int64_t trunc64(double d) { return (d >= -TWO_63 && d < TWO_63) ? (int64_t)d : INT64_MIN; }
static int32_t trunc32(double d) { return (d > -TWO_31 - 1.0 && d < TWO_31) ? (int32_t)d : INT32_MIN; }

/* Whether the integer i and the floating-point x are the same number. */
static bool int_equals(int64_t i, double x) { return x >= -TWO_63 && x < TWO_63 && (int64_t)x == i && x == trunc(x); }

/* Stores integer v as the integer type code t at p (cut to its size);
 * true if it came through unchanged. */
static bool store_int(RLNumberType t, int64_t v, void *p) {
    int64_t back;
    if (t == kRLNumberCharType) {
        back = *(char *)p = (char)v;
        return back == v;
    }
    switch (canonical_size(canonical(t))) {
    case 1: back = *(int8_t *)p = (int8_t)v; break;
    case 2: back = *(int16_t *)p = (int16_t)v; break;
    case 4: back = *(int32_t *)p = (int32_t)(uint32_t)v; break;
    default: back = *(int64_t *)p = v; break;
    }
    return back == v;
}

bool RLNumberGetValue(RLNumberRef number, RLNumberType theType, void *valuePtr) {
    if (!rl__object_check(number, &number_class, __func__) || !type_ok(theType, __func__))
        return false;
    if (!valuePtr)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL valuePtr");
    RLNumberType want = canonical(theType);
    bool exact;
    if (!is_float_type(number->type)) {
        int64_t i = number->v.i;
        if (want == kRLNumberFloat32Type) {
            float f = (float)i;
            *(float *)valuePtr = f;
            exact = int_equals(i, f);
        } else if (want == kRLNumberFloat64Type) {
            double d = (double)i;
            *(double *)valuePtr = d;
            exact = int_equals(i, d);
        } else {
            exact = store_int(theType, i, valuePtr);
        }
    } else {
        double d = number->v.d;
        if (want == kRLNumberFloat32Type) {
            float f = (float)d;
            *(float *)valuePtr = f;
            exact = (double)f == d || (isnan(d) && isnan(f));
        } else if (want == kRLNumberFloat64Type) {
            *(double *)valuePtr = d;
            exact = true;
        } else {
            int64_t i = canonical_size(want) == 8 ? trunc64(d) : trunc32(d);
            exact = store_int(theType, i, valuePtr) && int_equals(i, d);
        }
    }
    if (!exact)
        return rl__fail(kRLErrorInvalidArgument, __func__, "the number does not fit type %ld exactly (stored it cut)",
                        (long)theType);
    return true;
}

RLNumberType RLNumberGetType(RLNumberRef number) {
    return rl__object_check(number, &number_class, __func__) ? number->type : 0;
}

RLIndex RLNumberGetByteSize(RLNumberRef number) {
    return rl__object_check(number, &number_class, __func__) ? (RLIndex)canonical_size(number->type) : 0;
}

bool RLNumberIsFloatType(RLNumberRef number) {
    return rl__object_check(number, &number_class, __func__) && is_float_type(number->type);
}

/* -1, 0, 1 for integer i against floating-point x (NaN: x is smaller). */
static int cmp_int_float(int64_t i, double x) {
    if (isnan(x) || x < -TWO_63)
        return 1;
    if (x >= TWO_63)
        return -1;
    double t = trunc(x);
    int64_t ti = (int64_t)t;
    if (i != ti)
        return i < ti ? -1 : 1;
    return x > t ? -1 : x < t ? 1 : 0;
}

RLComparisonResult RLNumberCompare(RLNumberRef number, RLNumberRef otherNumber, void *context) {
    (void)context;
    if (!rl__object_check(number, &number_class, __func__) || !rl__object_check(otherNumber, &number_class, __func__))
        return kRLCompareEqualTo;
    bool af = is_float_type(number->type), bf = is_float_type(otherNumber->type);
    int r;
    if (!af && !bf) {
        r = (number->v.i > otherNumber->v.i) - (number->v.i < otherNumber->v.i);
    } else if (!af) {
        r = cmp_int_float(number->v.i, otherNumber->v.d);
    } else if (!bf) {
        r = -cmp_int_float(otherNumber->v.i, number->v.d);
    } else {
        double x = number->v.d, y = otherNumber->v.d;
        /* NaN sorts below every number and equal to itself. */
        r = isnan(x) ? (isnan(y) ? 0 : -1) : isnan(y) ? 1 : (x > y) - (x < y);
    }
    return r < 0 ? kRLCompareLessThan : r > 0 ? kRLCompareGreaterThan : kRLCompareEqualTo;
}

bool rl__is_number(const void *obj) {
    const rl__object *o = obj;
    return o && ((uintptr_t)obj & 7) == 0 && atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE &&
           rl__is_class(o, &number_class);
}

bool rl__is_boolean(const void *obj) { return obj == kRLBooleanTrue || obj == kRLBooleanFalse; }
