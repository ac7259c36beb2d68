/* test_runloop_kernel.c — a loop whose kernel objects fail: a wait that the
 * kernel refuses (the epoll set broken, or a fault injected) ends the run
 * with the error set instead of spinning; a timerfd that cannot be armed is
 * reported and the loop still sleeps until its timer. Each test counts the
 * loop's waits (a BeforeWaiting observer) to prove it does not spin. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "RLBase.h" /* rl__faults, RL_FAULT_* */

/* The loop's epoll fd (RLRunLoopRun.c), to break it from here. */
RL__HIDDEN int rl__loop_poll_fd_for_tests(RLRunLoopRef rl);

static void count_waits(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) { (*(int *)info)++; }
static void nop_perform(void *info) {}
static void count_perform(void *info) { (*(int *)info)++; }

/* A mode holding a source (never signalled here: it keeps the mode from
 * being empty) and an observer counting the waits into *waits. */
typedef struct {
    RLRunLoopSourceRef src;
    RLRunLoopObserverRef obs;
} setup;

static setup make_mode(RLRunLoopMode mode, int *waits, int *performed) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceContext c = {0};
    c.info = performed;
    c.perform = performed ? count_perform : nop_perform;
    setup s = {RLRunLoopSourceCreate(NULL, 0, &c), NULL};
    RLRunLoopObserverContext oc = {0, waits, NULL, NULL, NULL};
    s.obs = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeWaiting, true, 0, count_waits, &oc);
    assert_true(RLRunLoopAddSource(rl, s.src, mode));
    assert_true(RLRunLoopAddObserver(rl, s.obs, mode));
    return s;
}

static void drop_mode(setup s) {
    RLRunLoopSourceInvalidate(s.src);
    RLRunLoopObserverInvalidate(s.obs);
    RLRelease(s.src);
    RLRelease(s.obs);
}

static void test_a_refused_wait_ends_the_run_with_the_error(void **state) {
    /* epoll_wait failing for good (not EINTR) used to count as "no
     * events": the run went round again at once, a busy loop until its
     * deadline. It now ends after that one wait, Finished, error set. */
    int waits = 0, performed = 0;
    setup s = make_mode("BadWait", &waits, &performed);
    RLErrorClear();
    atomic_store(&rl__faults, RL_FAULT_EPOLL_WAIT);
    RLRunLoopRunResult r = RLRunLoopRunInMode("BadWait", 2, false);
    atomic_store(&rl__faults, 0);
    assert_int_equal(r, kRLRunLoopRunFinished);
    assert_int_equal(waits, 1);
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorSystem);
    assert_int_equal(e.systemErrno, EBADF);
    assert_non_null(strstr(e.message, "RLRunLoopRunInMode"));
    /* The backend's wait call: epoll_wait, or io_uring_enter (RL_BACKEND). */
    bool uring = strcmp(RLRunLoopGetBackendName(RLRunLoopGetCurrent()), "io_uring") == 0;
    assert_non_null(strstr(e.message, uring ? "io_uring_enter" : "epoll_wait"));
    /* Nothing lost: the source is still there and served by the next run. */
    RLRunLoopSourceSignal(s.src);
    assert_int_equal(RLRunLoopRunInMode("BadWait", 2, true), kRLRunLoopRunHandledSource);
    assert_int_equal(performed, 1);
    drop_mode(s);
}

static void test_a_broken_epoll_fd_ends_the_run_with_the_error(void **state) {
    /* The loop's epoll fd (or io_uring fd) made to name another file (dup2
     * over it): the kernel refuses the wait (EINVAL; io_uring_enter:
     * EOPNOTSUPP); the run ends, error set, after one wait. With the fd put back, the loop waits and serves again. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int waits = 0, performed = 0;
    setup s = make_mode("BrokenEp", &waits, &performed);
    int ep = rl__loop_poll_fd_for_tests(rl);
    assert_true(ep >= 0);
    int saved = dup(ep);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(saved >= 0 && null >= 0);
    assert_true(dup2(null, ep) == ep);
    RLErrorClear();
    RLRunLoopRunResult r = RLRunLoopRunInMode("BrokenEp", 2, false);
    assert_true(dup2(saved, ep) == ep);
    close(saved);
    close(null);
    assert_int_equal(r, kRLRunLoopRunFinished);
    assert_int_equal(waits, 1);
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorSystem);
    bool uring = strcmp(RLRunLoopGetBackendName(rl), "io_uring") == 0;
    assert_int_equal(e.systemErrno, uring ? EOPNOTSUPP : EINVAL);
    /* Repaired: a wait that blocks and is woken by the signal. */
    waits = 0;
    RLRunLoopSourceSignal(s.src);
    RLRunLoopWakeUp(rl);
    assert_int_equal(RLRunLoopRunInMode("BrokenEp", 2, true), kRLRunLoopRunHandledSource);
    assert_int_equal(performed, 1);
    drop_mode(s);
}

static void stop_cb(RLRunLoopTimerRef t, void *info) {
    (*(int *)info)++;
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void test_a_timerfd_that_cannot_be_armed_is_reported(void **state) {
    /* timerfd_settime refused: the loop waits with a time limit instead
     * (test_timer.c) and says so: the error is set on the loop's thread.
     * One wait until the timer, not a spin. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int waits = 0, fired = 0;
    setup s = make_mode("BadTfd", &waits, NULL);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.05, 0, 0, 0, stop_cb, &(RLRunLoopTimerContext){0, &fired, NULL, NULL, NULL});
    assert_true(RLRunLoopAddTimer(rl, t, "BadTfd"));
    RLErrorClear();
    atomic_store(&rl__faults, RL_FAULT_TIMERFD);
    RLRunLoopRunResult r = RLRunLoopRunInMode("BadTfd", 30, false);
    atomic_store(&rl__faults, 0);
    assert_int_equal(r, kRLRunLoopRunStopped);
    assert_int_equal(fired, 1);
    assert_true(waits >= 1 && waits <= 3);
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorSystem);
    assert_int_equal(e.systemErrno, EINVAL);
    assert_non_null(strstr(e.message, "timerfd_settime"));
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    drop_mode(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_refused_wait_ends_the_run_with_the_error),
        cmocka_unit_test(test_a_broken_epoll_fd_ends_the_run_with_the_error),
        cmocka_unit_test(test_a_timerfd_that_cannot_be_armed_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
