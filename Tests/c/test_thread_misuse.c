/* test_thread_misuse.c — every RLThread misuse fails with an error and
 * changes nothing; none hangs or crashes. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *return_arg(void *arg) { return arg; }

static void test_null_arguments(void **state) {
    assert_null(RLThreadCreate(NULL, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDetachNew(NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadPerformInBackground(NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_null(RLThreadCreateWithBlock(NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDetachNewWithBlock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
#endif
    assert_false(RLThreadAddWillBecomeMultiThreadedHandler(NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);

    assert_false(RLThreadStart(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadJoin(NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadIsMain(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLThreadGetStackSize(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadSetStackSize(NULL, 65536));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLThreadCopyName(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadSetName(NULL, "x"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLThreadGetPriority(NULL) < 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadSetPriority(NULL, 0.5));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadSetJoinable(NULL, true));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadIsJoinable(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadCancel(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadIsCancelled(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadIsExecuting(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadIsFinished(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionarySetValue(NULL, "k", NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionaryGetValue(NULL, "k", NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionaryRemoveValue(NULL, "k"));
    assert_rl_error(kRLErrorInvalidArgument);

    RLThreadRef t = RLThreadCreate(NULL, return_arg, NULL);
    assert_false(RLThreadDictionarySetValue(t, NULL, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionaryGetValue(t, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionaryRemoveValue(t, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLThreadAddWillExitHandler(t, NULL, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadRemoveWillExitHandler(t, 0));
    assert_rl_error(kRLErrorNotFound);
    assert_false(RLThreadRemoveWillExitHandler(NULL, 12345));
    assert_rl_error(kRLErrorNotFound);
    RLRelease(t);
}

static void test_not_a_thread(void **state) {
    long fake[16] = {0};
    RLThreadRef t = (RLThreadRef)fake;
    assert_false(RLThreadStart(t));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLThreadCancel(t));
    assert_rl_error(kRLErrorInvalidObject);
    assert_null(RLThreadCopyName(t));
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(RLThreadAddWillExitHandler(t, NULL, NULL), 0);
    assert_rl_error(kRLErrorInvalidObject);
}

static void test_stack_size_rules(void **state) {
    RLThreadRef t = RLThreadCreate(NULL, return_arg, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    const size_t bad[] = {0, 4096, 12 * 1024, 16 * 1024 - 4096, 16 * 1024 + 1, 20 * 1024 + 512, 65537};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(RLThreadSetStackSize(t, bad[i]));
        assert_rl_error(kRLErrorInvalidArgument);
    }
    /* Nothing changed by the failures. */
    assert_int_equal(RLThreadGetStackSize(t), kRLThreadDefaultStackSize);
    assert_true(RLThreadSetStackSize(t, 20 * 1024));
    assert_int_equal(RLThreadGetStackSize(t), 20 * 1024);
    assert_true(RLThreadStart(t));
    assert_false(RLThreadSetStackSize(t, 64 * 1024));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLThreadSetJoinable(t, false));
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(RLThreadGetStackSize(t), 20 * 1024);
    assert_false(RLThreadSetStackSize(t, 64 * 1024));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);

    /* Main and foreign threads cannot be reconfigured. */
    assert_false(RLThreadSetStackSize(RLThreadGetMain(), 64 * 1024));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLThreadSetJoinable(RLThreadGetMain(), true));
    assert_rl_error(kRLErrorInvalidState);
}

static void test_priority_range(void **state) {
    RLThreadRef t = RLThreadCreate(NULL, return_arg, NULL);
    const double bad[] = {-0.01, 1.01, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(RLThreadSetPriority(t, bad[i]));
        assert_rl_error(kRLErrorInvalidArgument);
    }
    assert_true(RLThreadGetPriority(t) == 0.5);
    assert_true(RLThreadSetPriority(t, 0.0));
    assert_true(RLThreadSetPriority(t, 1.0));
    assert_true(RLThreadGetPriority(t) == 1.0);
    RLRelease(t);
}

static void *join_self(void *arg) {
    RLThreadRef self = RLThreadGetCurrent();
    bool ok = RLThreadJoin(self, NULL);
    *(RLErrorCode *)arg = ok ? kRLErrorNone : RLErrorGetLast().code;
    return NULL;
}

static void test_join_misuse(void **state) {
    /* Unstarted. */
    RLThreadRef t = RLThreadCreate(NULL, return_arg, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_false(RLThreadJoin(t, NULL));
    assert_rl_error(kRLErrorInvalidState);
    /* Twice. */
    assert_true(RLThreadStart(t));
    assert_false(RLThreadStart(t));
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLThreadJoin(t, NULL));
    assert_false(RLThreadJoin(t, NULL));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);

    /* Detached. */
    static _Atomic int gate;
    t = RLThreadCreate(NULL, return_arg, NULL);
    assert_false(RLThreadIsJoinable(t));
    assert_true(RLThreadStart(t));
    assert_false(RLThreadJoin(t, NULL));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);
    (void)gate;

    /* Yourself: an error, not a hang. */
    RLErrorCode code = kRLErrorNone;
    t = RLThreadCreate(NULL, join_self, &code);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(code, kRLErrorWouldDeadlock);
    RLRelease(t);

    /* The main thread, from itself and from elsewhere. */
    assert_false(RLThreadJoin(RLThreadGetMain(), NULL));
    assert_rl_error(kRLErrorWouldDeadlock);
    assert_false(RLThreadStart(RLThreadGetMain()));
    assert_rl_error(kRLErrorInvalidState);
}

static void *join_main(void *arg) {
    bool ok = RLThreadJoin(RLThreadGetMain(), NULL);
    *(RLErrorCode *)arg = ok ? kRLErrorNone : RLErrorGetLast().code;
    return NULL;
}

static void test_join_main_from_elsewhere(void **state) {
    RLErrorCode code = kRLErrorNone;
    RLThreadRef t = RLThreadCreate(NULL, join_main, &code);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(code, kRLErrorInvalidState);
    RLRelease(t);
}

static void sleep_misuse(void **state) {
    assert_false(RLThreadSleepForTimeInterval(NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadSleepUntilDate(NAN));
    assert_rl_error(kRLErrorInvalidArgument);
}

/* A failed call never replaces an earlier error with a misleading one on
 * success: successes leave the error alone. */
static void test_success_keeps_error(void **state) {
    assert_false(RLThreadStart(NULL));
    RLThreadRef t = RLThreadCreate(NULL, return_arg, NULL);
    assert_true(RLThreadSetName(t, "ok"));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRelease(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_not_a_thread),
        cmocka_unit_test(test_stack_size_rules),
        cmocka_unit_test(test_priority_range),
        cmocka_unit_test(test_join_misuse),
        cmocka_unit_test(test_join_main_from_elsewhere),
        cmocka_unit_test(sleep_misuse),
        cmocka_unit_test(test_success_keeps_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
