/* test_number.c — RLBoolean and RLNumber (CF's CFBoolean and CFNumber
 * for integers): values in and out in every integer type, the conversions
 * that do not fit, the two immortal booleans, and misuse. */
#include "testutil.h"

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

static void test_number_misuse(void **state) {
    (void)state;
    int v = 7;
    double d = 1.5;
    assert_rl_fails(RLNumberCreate(NULL, kRLNumberIntType, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberCreate(NULL, kRLNumberDoubleType, &d), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberCreate(NULL, kRLNumberFloat32Type, &d), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberCreate(NULL, (RLNumberType)0, &v), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberCreate(NULL, (RLNumberType)17, &v), kRLErrorInvalidArgument);
    RLNumberRef n = RLNumberCreate(NULL, kRLNumberIntType, &v);
    int out = 0;
    assert_rl_fails(RLNumberGetValue(NULL, kRLNumberIntType, &out), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberGetValue(n, kRLNumberIntType, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLNumberGetValue(n, kRLNumberDoubleType, &d), kRLErrorInvalidArgument);
    assert_true(d == 1.5); /* nothing stored */
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
        cmocka_unit_test(test_number_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
