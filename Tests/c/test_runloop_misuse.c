/* test_runloop_misuse.c — every run-loop function refuses bad input with its
 * documented value and a thread-local error, and changes nothing. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static void nop_perform(void *info) {}
static void nop_timer(RLRunLoopTimerRef t, void *info) {}
static void nop_obs(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {}
static void nop_fd(RLFileDescriptorRef f, RLOptionFlags t, void *info) {}

static RLRunLoopSourceRef make_source(void) {
    RLRunLoopSourceContext c = {0};
    c.perform = nop_perform;
    return RLRunLoopSourceCreate(NULL, 0, &c);
}

static void test_runloop_functions_with_null(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef s = make_source();
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, nop_timer, NULL);
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, nop_obs, NULL);

    assert_null(RLRunLoopCopyCurrentMode(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLRunLoopCopyAllModes(NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddCommonMode(NULL, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddCommonMode(rl, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddCommonMode(rl, ""));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddCommonMode(rl, kRLRunLoopCommonModes));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLRunLoopGetNextTimerFireDate(NULL, kRLRunLoopDefaultMode) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLRunLoopGetNextTimerFireDate(rl, NULL) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopIsWaiting(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopWakeUp(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopStop(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformFunction(NULL, kRLRunLoopDefaultMode, nop_perform, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformFunction(rl, NULL, nop_perform, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_false(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformBlock(NULL, kRLRunLoopDefaultMode, ^{}));
    assert_rl_error(kRLErrorInvalidArgument);
#endif

    assert_false(RLRunLoopAddSource(NULL, s, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddSource(rl, NULL, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddSource(rl, s, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddSource(rl, s, ""));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopRemoveSource(rl, NULL, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopContainsSource(rl, s, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddTimer(rl, NULL, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopRemoveTimer(NULL, t, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopContainsTimer(rl, t, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddObserver(rl, NULL, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopRemoveObserver(NULL, o, "M"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopContainsObserver(rl, o, NULL));
    assert_rl_error(kRLErrorInvalidArgument);

    /* Wrong kinds of object are refused, not trusted. */
    assert_false(RLRunLoopAddSource(rl, (RLRunLoopSourceRef)t, "M"));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLRunLoopAddTimer(rl, (RLRunLoopTimerRef)o, "M"));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLRunLoopWakeUp((RLRunLoopRef)s));
    assert_rl_error(kRLErrorInvalidObject);

    RLRelease(s);
    RLRelease(t);
    RLRelease(o);
}

static void test_run_in_mode_bad_arguments(void **state) {
    assert_int_equal(RLRunLoopRunInMode(NULL, 0, false), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopRunInMode("", 0, false), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopCommonModes, 0, false), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, NAN, false), 0);
    assert_rl_error(kRLErrorInvalidArgument);
}

static void test_invalidated_items(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef s = make_source();
    assert_true(RLRunLoopSourceInvalidate(s));
    assert_false(RLRunLoopAddSource(rl, s, "M"));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLRunLoopSourceSignal(s));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLRunLoopContainsSource(rl, s, "M"));

    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, nop_timer, NULL);
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_false(RLRunLoopAddTimer(rl, t, "M"));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLRunLoopTimerSetNextFireDate(t, 0));
    assert_rl_error(kRLErrorInvalidObject);

    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, nop_obs, NULL);
    assert_true(RLRunLoopObserverInvalidate(o));
    assert_false(RLRunLoopAddObserver(rl, o, "M"));
    assert_rl_error(kRLErrorInvalidObject);

    RLRelease(s);
    RLRelease(t);
    RLRelease(o);
}

static void test_source_functions(void **state) {
    assert_null(RLRunLoopSourceCreate(NULL, 0, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRunLoopSourceContext c = {0};
    c.version = 1;
    assert_null(RLRunLoopSourceCreate(NULL, 0, &c));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopSourceGetOrder(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopSourceInvalidate(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopSourceIsValid(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopSourceSignal(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRunLoopSourceRef s = make_source();
    assert_false(RLRunLoopSourceGetContext(s, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopSourceGetContext(NULL, &c));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRelease(s);
}

static void test_timer_functions(void **state) {
    assert_null(RLRunLoopTimerCreate(NULL, NAN, 0, 0, 0, nop_timer, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLRunLoopTimerCreate(NULL, 0, NAN, 0, 0, nop_timer, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRunLoopTimerContext c = {1, NULL, NULL, NULL, NULL};
    assert_null(RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, nop_timer, &c));
    assert_rl_error(kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_null(RLRunLoopTimerCreateWithHandler(NULL, 0, 0, 0, 0, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
#endif
    assert_true(RLRunLoopTimerGetNextFireDate(NULL) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopTimerSetNextFireDate(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLRunLoopTimerGetInterval(NULL) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopTimerDoesRepeat(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopTimerGetOrder(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopTimerInvalidate(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopTimerIsValid(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopTimerGetContext(NULL, &c));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLRunLoopTimerGetTolerance(NULL) == -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopTimerSetTolerance(NULL, 1));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 100, 0, 0, 0, nop_timer, NULL);
    assert_false(RLRunLoopTimerSetNextFireDate(t, NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLRunLoopTimerGetNextFireDate(t) == 100); /* unchanged */
    assert_false(RLRunLoopTimerGetContext(t, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRelease(t);
}

static void test_observer_functions(void **state) {
    assert_null(RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLRunLoopObserverCreate(NULL, 0, true, 0, nop_obs, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRunLoopObserverContext c = {2, NULL, NULL, NULL, NULL};
    assert_null(RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, nop_obs, &c));
    assert_rl_error(kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_null(RLRunLoopObserverCreateWithHandler(NULL, kRLRunLoopEntry, true, 0, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
#endif
    assert_int_equal(RLRunLoopObserverGetActivities(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopObserverDoesRepeat(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopObserverGetOrder(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopObserverInvalidate(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopObserverIsValid(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopObserverGetContext(NULL, &c));
    assert_rl_error(kRLErrorInvalidArgument);
}

static void test_fd_functions(void **state) {
    assert_null(RLFileDescriptorCreate(NULL, -1, false, nop_fd, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[1]);
    assert_null(RLFileDescriptorCreate(NULL, p[1], false, nop_fd, NULL)); /* closed */
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLFileDescriptorCreate(NULL, p[0], false, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLFileDescriptorContext c = {3, NULL, NULL, NULL, NULL};
    assert_null(RLFileDescriptorCreate(NULL, p[0], false, nop_fd, &c));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLFileDescriptorGetNativeDescriptor(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLFileDescriptorGetContext(NULL, &c));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLFileDescriptorEnableCallBacks(NULL, kRLFileDescriptorReadCallBack));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLFileDescriptorDisableCallBacks(NULL, kRLFileDescriptorReadCallBack));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLFileDescriptorInvalidate(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLFileDescriptorIsValid(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLFileDescriptorCreateRunLoopSource(NULL, NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);

    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], false, nop_fd, NULL);
    assert_non_null(f);
    assert_false(RLFileDescriptorEnableCallBacks(f, 0x100));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLFileDescriptorGetContext(f, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLFileDescriptorInvalidate(f));
    assert_true(RLFileDescriptorInvalidate(f));
    assert_false(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_rl_error(kRLErrorInvalidObject);
    assert_null(RLFileDescriptorCreateRunLoopSource(NULL, f, 0));
    assert_rl_error(kRLErrorInvalidObject);
    RLRelease(f);
    close(p[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runloop_functions_with_null),
        cmocka_unit_test(test_run_in_mode_bad_arguments),
        cmocka_unit_test(test_invalidated_items),
        cmocka_unit_test(test_source_functions),
        cmocka_unit_test(test_timer_functions),
        cmocka_unit_test(test_observer_functions),
        cmocka_unit_test(test_fd_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
