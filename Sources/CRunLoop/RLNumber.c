/* RLNumber.c — the two booleans and integer numbers (CF's CFBoolean and
 * CFNumber, which CF also keeps in one file): the values of properties.
 *
 * The booleans are static objects the library holds one reference to for
 * ever (rl__object_hold's mark, set in the initializer): retains and
 * releases pair up like any object's, and a release without a retain is
 * refused as for any Get-rule result, so they are never destroyed. A
 * number keeps its integer as int64_t, which every supported type fits. */
#include "RLNumberInternal.h"

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

static const rl__class boolean_class = {"RLBoolean", NULL, NULL, boolean_describe};

/* 8-aligned like every object: the generic functions read a header only
 * at an aligned address. */
static struct RLBoolean true_object __attribute__((aligned(8))) = {
    .base = {.magic = RL__MAGIC_ALIVE, .cls = &boolean_class, .rc = RL__HELD_ONE + 1},
    .value = true,
};
static struct RLBoolean false_object __attribute__((aligned(8))) = {
    .base = {.magic = RL__MAGIC_ALIVE, .cls = &boolean_class, .rc = RL__HELD_ONE + 1},
    .value = false,
};

const RLBooleanRef kRLBooleanTrue = &true_object;
const RLBooleanRef kRLBooleanFalse = &false_object;

bool RLBooleanGetValue(RLBooleanRef boolean) {
    if (boolean == kRLBooleanTrue)
        return true;
    if (boolean != kRLBooleanFalse)
        (void)rl__object_check(boolean, &boolean_class, __func__); /* sets the error */
    return false;
}

/* ---- numbers ---- */

struct RLNumber {
    rl__object base;
    int64_t value;
};

static char *number_describe(const void *obj) {
    char *s = NULL;
    if (asprintf(&s, "<RLNumber %p>{value = %lld}", obj, (long long)((const struct RLNumber *)obj)->value) < 0)
        return NULL;
    return s;
}

static const rl__class number_class = {"RLNumber", NULL, NULL, number_describe};

/* The bytes of each supported type, and whether it is signed (char is
 * whatever the platform says). 0: not supported (floating point, unknown). */
static size_t int_size(RLNumberType t, bool *is_signed) {
    *is_signed = true;
    switch (t) {
    case kRLNumberSInt8Type: return 1;
    case kRLNumberSInt16Type: return 2;
    case kRLNumberSInt32Type: return 4;
    case kRLNumberSInt64Type: return 8;
    case kRLNumberCharType: *is_signed = (char)-1 < 0; return sizeof(char);
    case kRLNumberShortType: return sizeof(short);
    case kRLNumberIntType: return sizeof(int);
    case kRLNumberLongType: return sizeof(long);
    case kRLNumberLongLongType: return sizeof(long long);
    case kRLNumberCFIndexType: return sizeof(RLIndex);
    case kRLNumberNSIntegerType: return sizeof(long);
    default: return 0;
    }
}

static bool type_ok(RLNumberType t, size_t *size, bool *is_signed, const char *fn) {
    *size = int_size(t, is_signed);
    if (*size)
        return true;
    if (t == kRLNumberFloat32Type || t == kRLNumberFloat64Type || t == kRLNumberFloatType ||
        t == kRLNumberDoubleType || t == kRLNumberCGFloatType)
        return rl__fail(kRLErrorInvalidArgument, fn, "number type %ld is floating point: only integers are supported",
                        (long)t);
    return rl__fail(kRLErrorInvalidArgument, fn, "unknown number type %ld", (long)t);
}

RLNumberRef RLNumberCreate(RLAllocatorRef allocator, RLNumberType theType, const void *valuePtr) {
    (void)allocator;
    size_t size;
    bool is_signed;
    if (!type_ok(theType, &size, &is_signed, __func__))
        return NULL;
    if (!valuePtr)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL valuePtr"), NULL;
    int64_t v;
    switch (size) {
    case 1: v = is_signed ? *(const int8_t *)valuePtr : *(const uint8_t *)valuePtr; break;
    case 2: v = *(const int16_t *)valuePtr; break;
    case 4: v = *(const int32_t *)valuePtr; break;
    default: v = *(const int64_t *)valuePtr; break;
    }
    struct RLNumber *n = rl__object_alloc(&number_class, sizeof *n, __func__);
    if (!n)
        return NULL;
    n->value = v;
    return n;
}

bool RLNumberGetValue(RLNumberRef number, RLNumberType theType, void *valuePtr) {
    if (!rl__object_check(number, &number_class, __func__))
        return false;
    size_t size;
    bool is_signed;
    if (!type_ok(theType, &size, &is_signed, __func__))
        return false;
    if (!valuePtr)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL valuePtr");
    int64_t v = number->value, back;
    switch (size) {
    case 1:
        if (is_signed)
            back = *(int8_t *)valuePtr = (int8_t)v;
        else
            back = *(uint8_t *)valuePtr = (uint8_t)v;
        break;
    case 2: back = *(int16_t *)valuePtr = (int16_t)v; break;
    case 4: back = *(int32_t *)valuePtr = (int32_t)v; break;
    default: back = *(int64_t *)valuePtr = v; break;
    }
    if (back != v)
        return rl__fail(kRLErrorInvalidArgument, __func__, "%lld does not fit number type %ld (stored %lld)",
                        (long long)v, (long)theType, (long long)back);
    return true;
}

bool rl__is_number(const void *obj) {
    const rl__object *o = obj;
    return o && ((uintptr_t)obj & 7) == 0 && atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE &&
           o->cls == &number_class;
}

bool rl__is_boolean(const void *obj) { return obj == kRLBooleanTrue || obj == kRLBooleanFalse; }
