/* test_base.c — object model, clocks and the thread-local error. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_error_starts_empty_and_clears(void **state) {
    RLErrorClear();
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorNone);
    assert_string_equal(e.message, "");
    assert_string_equal(RLErrorCodeGetName(kRLErrorNotOwner), "kRLErrorNotOwner");
    assert_string_equal(RLErrorCodeGetName((RLErrorCode)9999), "kRLErrorUnknown");
}

static void test_misuse_of_object_functions(void **state) {
    assert_rl_fails(RLRetain(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRelease(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLGetRetainCount(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLGetTypeName(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLCopyDescription(NULL), kRLErrorInvalidArgument);

    /* Something that is not a CRunLoop object is refused, not trusted. */
    long not_an_object[8] = {0};
    assert_rl_fails(RLRetain(not_an_object), kRLErrorInvalidObject);
    assert_rl_fails(RLRelease(not_an_object), kRLErrorInvalidObject);
}

static void *error_in_thread(void *arg) {
    (void)arg;
    RLRelease(NULL);
    return (void *)(intptr_t)RLErrorGetLast().code;
}

static void test_error_is_thread_local(void **state) {
    RLErrorClear();
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, error_in_thread, NULL), 0);
    pthread_join(t, &res);
    assert_int_equal((intptr_t)res, kRLErrorInvalidArgument);
    assert_int_equal(RLErrorGetLast().code, kRLErrorNone);
}

static void test_success_keeps_last_error(void **state) {
    RLRelease(NULL);
    (void)RLAbsoluteTimeGetCurrent();
    assert_rl_error(kRLErrorInvalidArgument);
}

static void test_clocks(void **state) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double unix_now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    double abs_now = RLAbsoluteTimeGetCurrent();
    assert_true(fabs(abs_now + kRLAbsoluteTimeIntervalSince1970 - unix_now) < 1.0);
    double m1 = RLMonotonicTimeGetCurrent();
    double m2 = RLMonotonicTimeGetCurrent();
    assert_true(m2 >= m1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_starts_empty_and_clears),
        cmocka_unit_test(test_misuse_of_object_functions),
        cmocka_unit_test(test_error_is_thread_local),
        cmocka_unit_test(test_success_keeps_last_error),
        cmocka_unit_test(test_clocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
