#include "fdutil.h"

RLRunLoopSourceRef rl_test_fd_add(RLFileDescriptorRef f, const char *mode) {
    RLRunLoopSourceRef s = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_non_null(s);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), s, mode));
    return s;
}

void rl_test_fd_drop(RLFileDescriptorRef f, RLRunLoopSourceRef s) {
    assert_true(RLFileDescriptorInvalidate(f));
    RLRelease(s);
    RLRelease(f);
}

static void count_wake(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) { (*(long *)info)++; }

RLRunLoopObserverRef rl_test_count_wakes(const char *mode, long *wakes) {
    RLRunLoopObserverContext oc = {0, wakes, NULL, NULL, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wake, &oc);
    assert_non_null(o);
    assert_true(RLRunLoopAddObserver(RLRunLoopGetCurrent(), o, mode));
    return o;
}

void rl_test_uncount_wakes(RLRunLoopObserverRef o) {
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
}

void rl_test_assert_quiet(const char *mode, int (*count)(void)) {
    int before = count();
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes(mode, &wakes);
    assert_int_equal(RLRunLoopRunInMode(mode, 0.2, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(count(), before);
    rl_test_uncount_wakes(o);
}
