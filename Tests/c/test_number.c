/* test_number.c — RLBoolean and RLNumber (CF's CFBoolean and CFNumber):
 * values in and out in every integer and floating-point type, the
 * conversions that do not fit, types, comparison, the two immortal
 * booleans, and misuse. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_booleans(void **state) {
    (void)state;
    assert_non_null(kRLBooleanTrue);
    assert_non_null(kRLBooleanFalse);
    assert_ptr_not_equal(kRLBooleanTrue, kRLBooleanFalse);
    assert_true(RLBooleanGetValue(kRLBooleanTrue));
    assert_false(RLBooleanGetValue(kRLBooleanFalse));
    assert_string_equal(RLGetTypeName(kRLBooleanTrue), "RLBoolean");
    /* Retains and releases pair up; one more release is refused. */
    RLIndex before = RLGetRetainCount(kRLBooleanTrue);
    assert_ptr_equal(RLRetain(kRLBooleanTrue), kRLBooleanTrue);
    assert_int_equal(RLGetRetainCount(kRLBooleanTrue), before + 1);
    assert_true(RLRelease(kRLBooleanTrue));
    assert_int_equal(RLGetRetainCount(kRLBooleanTrue), before);
    assert_rl_fails(RLRelease(kRLBooleanFalse), kRLErrorNotOwner);
    assert_false(RLBooleanGetValue(kRLBooleanFalse)); /* still there */
    char *d = RLCopyDescription(kRLBooleanTrue);
    assert_non_null(strstr(d, "true"));
    free(d);
}

static void test_boolean_misuse(void **state) {
    (void)state;
    assert_rl_fails(RLBooleanGetValue(NULL), kRLErrorInvalidArgument);
    int64_t v = 1;
    RLNumberRef n = RLNumberCreate(NULL, kRLNumberSInt64Type, &v);
    assert_rl_fails(RLBooleanGetValue((RLBooleanRef)n), kRLErrorInvalidObject);
    RLRelease(n);
}

static void test_every_integer_type_round_trips(void **state) {
    (void)state;
    int8_t s8 = -5;
    int16_t s16 = -300;
    int32_t s32 = -70000;
    int64_t s64 = INT64_MIN;
    char c = 'A';
    short sh = SHRT_MAX;
    int i = INT_MIN;
    long l = LONG_MAX;
    long long ll = LLONG_MIN;
    RLIndex ix = -12345;
    long nsi = 42;
    struct {
        RLNumberType type;
        const void *in;
        size_t size;
    } cases[] = {
        {kRLNumberSInt8Type, &s8, sizeof s8},     {kRLNumberSInt16Type, &s16, sizeof s16},
        {kRLNumberSInt32Type, &s32, sizeof s32},  {kRLNumberSInt64Type, &s64, sizeof s64},
        {kRLNumberCharType, &c, sizeof c},        {kRLNumberShortType, &sh, sizeof sh},
        {kRLNumberIntType, &i, sizeof i},         {kRLNumberLongType, &l, sizeof l},
        {kRLNumberLongLongType, &ll, sizeof ll},  {kRLNumberCFIndexType, &ix, sizeof ix},
        {kRLNumberNSIntegerType, &nsi, sizeof nsi},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        RLNumberRef n = RLNumberCreate(NULL, cases[k].type, cases[k].in);
        assert_non_null(n);
        assert_string_equal(RLGetTypeName(n), "RLNumber");
        unsigned char out[8];
        memset(out, 0xee, sizeof out);
        assert_true(RLNumberGetValue(n, cases[k].type, out));
        assert_memory_equal(out, cases[k].in, cases[k].size);
        if (cases[k].size < sizeof out) /* nothing written past the type */
            assert_int_equal(out[cases[k].size], 0xee);
        assert_true(RLRelease(n));
    }
}

static void test_conversions(void **state) {
    (void)state;
    int64_t big = 300;
    RLNumberRef n = RLNumberCreate(NULL, kRLNumberSInt64Type, &big);
    int32_t as32 = 0;
    assert_true(RLNumberGetValue(n, kRLNumberSInt32Type, &as32));
    assert_int_equal(as32, 300);
    /* Does not fit: false, error set, the value cut to the type (CF). */
    int8_t as8 = 0;
    assert_rl_fails(RLNumberGetValue(n, kRLNumberSInt8Type, &as8), kRLErrorInvalidArgument);
    assert_int_equal(as8, (int8_t)300);
    RLRelease(n);
    int64_t neg = -1;
    n = RLNumberCreate(NULL, kRLNumberSInt64Type, &neg);
    short s = 0;
    assert_true(RLNumberGetValue(n, kRLNumberShortType, &s));
    assert_int_equal(s, -1);
    RLRelease(n);
}

/* Floating-point numbers: kept exactly, read as any type; the result says
 * whether the value came through unchanged (CF's answers, also checked
 * against CF by Tests/diff/scenarios/number_values.c). */
static void test_floating_point(void **state) {
    (void)state;
    double d = 3.75;
    RLNumberRef n = RLNumberCreate(NULL, kRLNumberDoubleType, &d);
    assert_non_null(n);
    assert_true(RLNumberIsFloatType(n));
    assert_int_equal(RLNumberGetType(n), kRLNumberFloat64Type);
    assert_int_equal(RLNumberGetByteSize(n), 8);
    double back = 0;
    assert_true(RLNumberGetValue(n, kRLNumberFloat64Type, &back));
    assert_true(back == 3.75);
    float f = 0;
    assert_true(RLNumberGetValue(n, kRLNumberFloatType, &f)); /* 3.75 is exact as a float */
    assert_true(f == 3.75f);
    int i = 0;
    assert_rl_fails(RLNumberGetValue(n, kRLNumberIntType, &i), kRLErrorInvalidArgument);
    assert_int_equal(i, 3); /* truncated, and said to be inexact */
    RLRelease(n);

    d = -3.75;
    n = RLNumberCreate(NULL, kRLNumberCGFloatType, &d);
    int8_t i8 = 0;
    assert_false(RLNumberGetValue(n, kRLNumberSInt8Type, &i8));
    assert_int_equal(i8, -3);
    RLRelease(n);

    d = 0.1;
    n = RLNumberCreate(NULL, kRLNumberFloat64Type, &d);
    assert_false(RLNumberGetValue(n, kRLNumberFloat32Type, &f)); /* 0.1 is not a float */
    assert_true(f == 0.1f);
    RLRelease(n);

    /* Out of range and infinite: the minimum of 32 or 64 bits, then cut. */
    double big[] = {1e20, -1e20, INFINITY, NAN, 1099511627776.0 /* 2^40 */};
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        n = RLNumberCreate(NULL, kRLNumberDoubleType, &big[k]);
        int32_t i32 = 1;
        int64_t i64 = 1;
        int16_t i16 = 1;
        assert_false(RLNumberGetValue(n, kRLNumberSInt32Type, &i32));
        assert_int_equal(i32, INT32_MIN);
        assert_false(RLNumberGetValue(n, kRLNumberSInt16Type, &i16));
        assert_int_equal(i16, 0);
        if (k == 4) {
            assert_true(RLNumberGetValue(n, kRLNumberSInt64Type, &i64));
            assert_true(i64 == (int64_t)1 << 40);
        } else {
            assert_false(RLNumberGetValue(n, kRLNumberSInt64Type, &i64));
            assert_true(i64 == INT64_MIN);
        }
        RLRelease(n);
    }

    float g = 2.5f;
    n = RLNumberCreate(NULL, kRLNumberFloat32Type, &g);
    assert_int_equal(RLNumberGetType(n), kRLNumberFloat32Type);
    assert_int_equal(RLNumberGetByteSize(n), 4);
    assert_true(RLNumberGetValue(n, kRLNumberDoubleType, &back));
    assert_true(back == 2.5);
    RLRelease(n);

    /* Integers read as floating point: exact only when representable. */
    int64_t odd = ((int64_t)1 << 53) + 1, min = INT64_MIN, max = INT64_MAX;
    n = RLNumberCreate(NULL, kRLNumberSInt64Type, &odd);
    assert_false(RLNumberGetValue(n, kRLNumberFloat64Type, &back));
    assert_true(back == 9007199254740992.0);
    RLRelease(n);
    n = RLNumberCreate(NULL, kRLNumberSInt64Type, &min);
    assert_true(RLNumberGetValue(n, kRLNumberFloat64Type, &back)); /* -2^63 is a double */
    RLRelease(n);
    n = RLNumberCreate(NULL, kRLNumberSInt64Type, &max);
    assert_false(RLNumberGetValue(n, kRLNumberFloat64Type, &back)); /* rounds up to 2^63 */
    RLRelease(n);
}

static void test_types_and_compare(void **state) {
    (void)state;
    struct { RLNumberType made; RLNumberType type; RLIndex size; } types[] = {
        {kRLNumberCharType, kRLNumberSInt8Type, 1},     {kRLNumberShortType, kRLNumberSInt16Type, 2},
        {kRLNumberIntType, kRLNumberSInt32Type, 4},     {kRLNumberLongType, kRLNumberSInt64Type, 8},
        {kRLNumberLongLongType, kRLNumberSInt64Type, 8}, {kRLNumberCFIndexType, kRLNumberSInt64Type, 8},
        {kRLNumberNSIntegerType, kRLNumberSInt64Type, 8}, {kRLNumberSInt16Type, kRLNumberSInt16Type, 2},
    };
    int64_t zero = 0;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        RLNumberRef n = RLNumberCreate(NULL, types[k].made, &zero);
        assert_int_equal(RLNumberGetType(n), types[k].type);
        assert_int_equal(RLNumberGetByteSize(n), types[k].size);
        assert_false(RLNumberIsFloatType(n));
        RLRelease(n);
    }
    int three = 3, four = 4;
    double three_d = 3.0, three_half = 3.5, nan_d = NAN, huge = 1e300;
    int64_t big = ((int64_t)1 << 53) + 1;
    double big_d = 9007199254740992.0; /* 2^53 */
    RLNumberRef a = RLNumberCreate(NULL, kRLNumberIntType, &three), b = RLNumberCreate(NULL, kRLNumberIntType, &four);
    RLNumberRef c = RLNumberCreate(NULL, kRLNumberDoubleType, &three_d);
    RLNumberRef h = RLNumberCreate(NULL, kRLNumberDoubleType, &three_half);
    RLNumberRef x = RLNumberCreate(NULL, kRLNumberDoubleType, &nan_d);
    RLNumberRef u = RLNumberCreate(NULL, kRLNumberDoubleType, &huge);
    RLNumberRef g = RLNumberCreate(NULL, kRLNumberSInt64Type, &big), gd = RLNumberCreate(NULL, kRLNumberDoubleType, &big_d);
    assert_int_equal(RLNumberCompare(a, b, NULL), kRLCompareLessThan);
    assert_int_equal(RLNumberCompare(b, a, NULL), kRLCompareGreaterThan);
    assert_int_equal(RLNumberCompare(a, c, NULL), kRLCompareEqualTo);
    assert_int_equal(RLNumberCompare(c, a, NULL), kRLCompareEqualTo);
    assert_int_equal(RLNumberCompare(a, h, NULL), kRLCompareLessThan);
    assert_int_equal(RLNumberCompare(h, b, NULL), kRLCompareLessThan);
    assert_int_equal(RLNumberCompare(u, b, NULL), kRLCompareGreaterThan);
    assert_int_equal(RLNumberCompare(x, a, NULL), kRLCompareLessThan);
    assert_int_equal(RLNumberCompare(x, x, NULL), kRLCompareEqualTo);
    assert_int_equal(RLNumberCompare(c, x, NULL), kRLCompareGreaterThan);
    assert_int_equal(RLNumberCompare(g, gd, NULL), kRLCompareGreaterThan); /* exact, not via double */
    assert_int_equal(RLNumberCompare(gd, g, NULL), kRLCompareLessThan);
    RLRelease(a); RLRelease(b); RLRelease(c); RLRelease(h); RLRelease(x); RLRelease(u); RLRelease(g); RLRelease(gd);
}

static void test_number_misuse(void **state) {
    (void)state;
    int v = 7;
    double d = 1.5;
    assert_rl_fails(RLNumberCreate(NULL, kRLNumberIntType, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberCreate(NULL, (RLNumberType)0, &v), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberCreate(NULL, (RLNumberType)17, &v), kRLErrorInvalidArgument);
    RLNumberRef n = RLNumberCreate(NULL, kRLNumberIntType, &v);
    int out = 0;
    assert_rl_fails(RLNumberGetValue(NULL, kRLNumberIntType, &out), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberGetValue(n, kRLNumberIntType, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberGetValue(n, (RLNumberType)17, &d), kRLErrorInvalidArgument);
    assert_true(d == 1.5); /* nothing stored */
    assert_int_equal(RLNumberGetType(NULL), 0);
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
    assert_int_equal(RLNumberGetByteSize((RLNumberRef)kRLBooleanTrue), 0);
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidObject);
    assert_rl_fails(RLNumberIsFloatType(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLNumberCompare(n, NULL, NULL), kRLCompareEqualTo);
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberGetValue((RLNumberRef)kRLBooleanTrue, kRLNumberIntType, &out), kRLErrorInvalidObject);
    assert_int_equal(out, 0);
    RLRelease(n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_boolean_misuse),
        cmocka_unit_test(test_every_integer_type_round_trips),
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_floating_point),
        cmocka_unit_test(test_types_and_compare),
        cmocka_unit_test(test_number_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
