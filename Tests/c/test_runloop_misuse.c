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

    assert_rl_fails(RLRunLoopCopyCurrentMode(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopCopyAllModes(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddCommonMode(NULL, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddCommonMode(rl, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddCommonMode(rl, ""), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddCommonMode(rl, kRLRunLoopCommonModes), kRLErrorInvalidArgument);
    assert_true(RLRunLoopGetNextTimerFireDate(NULL, kRLRunLoopDefaultMode) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLRunLoopGetNextTimerFireDate(rl, NULL) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopIsWaiting(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopWakeUp(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopStop(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformFunction(NULL, kRLRunLoopDefaultMode, nop_perform, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformFunction(rl, NULL, nop_perform, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, NULL, NULL), kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_rl_fails(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformBlock(NULL, kRLRunLoopDefaultMode, ^{}), kRLErrorInvalidArgument);
#endif

    assert_rl_fails(RLRunLoopAddSource(NULL, s, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddSource(rl, NULL, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddSource(rl, s, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddSource(rl, s, ""), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopRemoveSource(rl, NULL, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopContainsSource(rl, s, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddTimer(rl, NULL, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopRemoveTimer(NULL, t, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopContainsTimer(rl, t, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddObserver(rl, NULL, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopRemoveObserver(NULL, o, "M"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopContainsObserver(rl, o, NULL), kRLErrorInvalidArgument);

    /* Wrong kinds of object are refused, not trusted. */
    assert_rl_fails(RLRunLoopAddSource(rl, (RLRunLoopSourceRef)t, "M"), kRLErrorInvalidObject);
    assert_rl_fails(RLRunLoopAddTimer(rl, (RLRunLoopTimerRef)o, "M"), kRLErrorInvalidObject);
    assert_rl_fails(RLRunLoopWakeUp((RLRunLoopRef)s), kRLErrorInvalidObject);

    RLRelease(s);
    RLRelease(t);
    RLRelease(o);
}

static void test_run_in_mode_bad_arguments(void **state) {
    /* Always a value of the enum (a switch over it never falls through);
     * the error says what was wrong. The common pseudo-mode: Finished, as CF. */
    assert_int_equal(RLRunLoopRunInMode(NULL, 0, false), kRLRunLoopRunFinished);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopRunInMode("", 0, false), kRLRunLoopRunFinished);
    assert_rl_error(kRLErrorInvalidArgument);
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopCommonModes);
    RLRunLoopAddCommonMode(RLRunLoopGetCurrent(), "CommonForRun");
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopCommonModes, 0, false), kRLRunLoopRunFinished);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopCommonModes, 0.01, true), kRLRunLoopRunFinished);
    rl_test_unkeep(keep);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, NAN, false), kRLRunLoopRunFinished);
    assert_rl_error(kRLErrorInvalidArgument);
}

static void test_invalidated_items(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef s = make_source();
    assert_true(RLRunLoopSourceInvalidate(s));
    assert_rl_fails(RLRunLoopAddSource(rl, s, "M"), kRLErrorInvalidObject);
    assert_rl_fails(RLRunLoopSourceSignal(s), kRLErrorInvalidObject);
    assert_false(RLRunLoopContainsSource(rl, s, "M"));

    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, nop_timer, NULL);
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_rl_fails(RLRunLoopAddTimer(rl, t, "M"), kRLErrorInvalidObject);
    assert_rl_fails(RLRunLoopTimerSetNextFireDate(t, 0), kRLErrorInvalidObject);

    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, nop_obs, NULL);
    assert_true(RLRunLoopObserverInvalidate(o));
    assert_rl_fails(RLRunLoopAddObserver(rl, o, "M"), kRLErrorInvalidObject);

    RLRelease(s);
    RLRelease(t);
    RLRelease(o);
}

static void test_source_functions(void **state) {
    assert_rl_fails(RLRunLoopSourceCreate(NULL, 0, NULL), kRLErrorInvalidArgument);
    RLRunLoopSourceContext c = {0};
    c.version = 1;
    assert_rl_fails(RLRunLoopSourceCreate(NULL, 0, &c), kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopSourceGetOrder(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopSourceInvalidate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopSourceIsValid(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopSourceSignal(NULL), kRLErrorInvalidArgument);
    RLRunLoopSourceRef s = make_source();
    assert_rl_fails(RLRunLoopSourceGetContext(s, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopSourceGetContext(NULL, &c), kRLErrorInvalidArgument);
    RLRelease(s);
}

static void test_timer_functions(void **state) {
    assert_rl_fails(RLRunLoopTimerCreate(NULL, NAN, 0, 0, 0, nop_timer, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopTimerCreate(NULL, 0, NAN, 0, 0, nop_timer, NULL), kRLErrorInvalidArgument);
    RLRunLoopTimerContext c = {1, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, nop_timer, &c), kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_rl_fails(RLRunLoopTimerCreateWithHandler(NULL, 0, 0, 0, 0, NULL), kRLErrorInvalidArgument);
#endif
    assert_true(RLRunLoopTimerGetNextFireDate(NULL) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopTimerSetNextFireDate(NULL, 0), kRLErrorInvalidArgument);
    assert_true(RLRunLoopTimerGetInterval(NULL) == 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopTimerDoesRepeat(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopTimerGetOrder(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopTimerInvalidate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopTimerIsValid(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopTimerGetContext(NULL, &c), kRLErrorInvalidArgument);
    assert_true(RLRunLoopTimerGetTolerance(NULL) == -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopTimerSetTolerance(NULL, 1), kRLErrorInvalidArgument);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 100, 0, 0, 0, nop_timer, NULL);
    assert_rl_fails(RLRunLoopTimerSetNextFireDate(t, NAN), kRLErrorInvalidArgument);
    assert_true(RLRunLoopTimerGetNextFireDate(t) == 100); /* unchanged */
    assert_rl_fails(RLRunLoopTimerGetContext(t, NULL), kRLErrorInvalidArgument);
    RLRelease(t);
}

static void test_observer_functions(void **state) {
    assert_rl_fails(RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopObserverCreate(NULL, 0, true, 0, nop_obs, NULL), kRLErrorInvalidArgument);
    RLRunLoopObserverContext c = {2, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, nop_obs, &c), kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_rl_fails(RLRunLoopObserverCreateWithHandler(NULL, kRLRunLoopEntry, true, 0, NULL), kRLErrorInvalidArgument);
#endif
    assert_int_equal(RLRunLoopObserverGetActivities(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopObserverDoesRepeat(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLRunLoopObserverGetOrder(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopObserverInvalidate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopObserverIsValid(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopObserverGetContext(NULL, &c), kRLErrorInvalidArgument);
}

static void test_fd_functions(void **state) {
    assert_rl_fails(RLFileDescriptorCreate(NULL, -1, false, nop_fd, NULL), kRLErrorInvalidArgument);
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[1]);
    assert_rl_fails(RLFileDescriptorCreate(NULL, p[1], false, nop_fd, NULL), kRLErrorInvalidArgument); /* closed */
    assert_rl_fails(RLFileDescriptorCreate(NULL, p[0], false, NULL, NULL), kRLErrorInvalidArgument);
    RLFileDescriptorContext c = {3, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLFileDescriptorCreate(NULL, p[0], false, nop_fd, &c), kRLErrorInvalidArgument);
    assert_int_equal(RLFileDescriptorGetNativeDescriptor(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLFileDescriptorGetContext(NULL, &c), kRLErrorInvalidArgument);
    assert_rl_fails(RLFileDescriptorEnableCallBacks(NULL, kRLFileDescriptorReadCallBack), kRLErrorInvalidArgument);
    assert_rl_fails(RLFileDescriptorDisableCallBacks(NULL, kRLFileDescriptorReadCallBack), kRLErrorInvalidArgument);
    assert_rl_fails(RLFileDescriptorInvalidate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLFileDescriptorIsValid(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLFileDescriptorCreateRunLoopSource(NULL, NULL, 0), kRLErrorInvalidArgument);

    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], false, nop_fd, NULL);
    assert_non_null(f);
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, 0x100), kRLErrorInvalidArgument);
    assert_rl_fails(RLFileDescriptorGetContext(f, NULL), kRLErrorInvalidArgument);
    assert_true(RLFileDescriptorInvalidate(f));
    assert_true(RLFileDescriptorInvalidate(f));
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack), kRLErrorInvalidObject);
    assert_rl_fails(RLFileDescriptorCreateRunLoopSource(NULL, f, 0), kRLErrorInvalidObject);
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
