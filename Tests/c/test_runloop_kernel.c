/* test_runloop_kernel.c — a loop whose kernel objects fail: a wait that the
 * kernel refuses (the epoll set broken, or a fault injected) ends the run
 * with the error set instead of spinning; a timerfd that cannot be armed is
 * reported and the loop still sleeps until its timer. Each test counts the
 * loop's waits (a BeforeWaiting observer) to prove it does not spin. And
 * what a wait reported is all served: a timer and an fd reported by one
 * wait are served in that pass, even when the timer's callout runs the
 * loop nested; a timer added after the timerfd expired still wakes it. */
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

/* ---- one wait, a timer and an fd: both served in that pass ---- */

typedef struct {
    int fd_callouts;
    int fd_callouts_in_outer; /* made while the outer run's mode was current */
    int nested_runs;
} both_state;

static void both_fd_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    both_state *st = info;
    st->fd_callouts++;
    RLStringRef mode = RLRunLoopCopyCurrentMode(RLRunLoopGetCurrent());
    if (mode && !strcmp(RLStringGetCStringPtr(mode, kRLStringEncodingUTF8), "Both"))
        st->fd_callouts_in_outer++;
    RLRelease(mode);
    char b[8];
    assert_true(read(RLFileDescriptorGetNativeDescriptor(f), b, sizeof b) > 0);
}

static void both_timer_cb(RLRunLoopTimerRef t, void *info) {
    both_state *st = info;
    /* A run nested in the timer's callout waits (no fd of its own in its
     * mode): the outer pass's fd report must survive that wait. */
    st->nested_runs++;
    RLRunLoopRunInMode("BothInner", 0.02, false);
}

static void test_a_wait_reporting_a_timer_and_an_fd_serves_both_in_its_pass(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int waits = 0, inner_waits = 0;
    setup s = make_mode("Both", &waits, NULL);
    setup inner = make_mode("BothInner", &inner_waits, NULL);
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    both_state st = {0};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, both_fd_cb, &(RLFileDescriptorContext){0, &st, NULL, NULL, NULL});
    assert_non_null(f);
    RLRunLoopSourceRef fs = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_true(RLRunLoopAddSource(rl, fs, "Both"));
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0, both_timer_cb, &(RLRunLoopTimerContext){0, &st, NULL, NULL, NULL});
    assert_true(RLRunLoopAddTimer(rl, t, "Both"));
    assert_int_equal(write(p[1], "x", 1), 1);
    /* Both ready before the first wait: that wait reports the fd, the
     * timer is due; the pass fires the timer (its nested run waits), then
     * makes the fd's callout, and the run returns after it. */
    RLRunLoopRunResult r = RLRunLoopRunInMode("Both", 10, true);
    assert_int_equal(r, kRLRunLoopRunHandledSource);
    assert_int_equal(st.nested_runs, 1);
    assert_true(inner_waits >= 1);
    assert_int_equal(st.fd_callouts, 1);
    assert_int_equal(st.fd_callouts_in_outer, 1);
    assert_int_equal(waits, 1); /* in the one pass, not a later one */
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    RLFileDescriptorInvalidate(f);
    RLRunLoopSourceInvalidate(fs);
    RLRelease(fs);
    RLRelease(f);
    close(p[1]);
    drop_mode(inner);
    drop_mode(s);
}

/* ---- the timerfd after it expired ---- */

typedef struct {
    RLRunLoopTimerRef later;
    int first, second;
    RLAbsoluteTime second_due, second_at;
} rearm_state;

static void rearm_second(RLRunLoopTimerRef t, void *info) {
    rearm_state *st = info;
    st->second++;
    st->second_at = RLAbsoluteTimeGetCurrent();
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void rearm_first(RLRunLoopTimerRef t, void *info) {
    rearm_state *st = info;
    st->first++;
    /* Added while the loop is awake from the timerfd's expiry, for later
     * than that expiry: the loop must arm for it before it sleeps. */
    st->second_due = RLAbsoluteTimeGetCurrent() + 0.05;
    st->later = RLRunLoopTimerCreate(NULL, st->second_due, 0, 0, 0, rearm_second, &(RLRunLoopTimerContext){0, st, NULL, NULL, NULL});
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), st->later, "Rearm"));
}

static void test_a_timer_added_after_the_timerfd_expired_wakes_the_loop(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int waits = 0;
    setup s = make_mode("Rearm", &waits, NULL);
    rearm_state st = {0};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.03, 0, 0, 0, rearm_first, &(RLRunLoopTimerContext){0, &st, NULL, NULL, NULL});
    assert_true(RLRunLoopAddTimer(rl, t, "Rearm"));
    /* The source keeps the mode from being empty: without the timerfd
     * armed for the second timer the run would sleep its whole 30 s. */
    RLRunLoopRunResult r = RLRunLoopRunInMode("Rearm", 30, false);
    assert_int_equal(r, kRLRunLoopRunStopped);
    assert_int_equal(st.first, 1);
    assert_int_equal(st.second, 1);
    assert_true(st.second_at >= st.second_due);
    assert_true(st.second_at - st.second_due < 10); /* woken by its timer, not the run's end */
    assert_true(waits >= 2 && waits <= 6); /* slept until each timer, no spin */
    RLRelease(t);
    RLRunLoopTimerInvalidate(st.later);
    RLRelease(st.later);
    drop_mode(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_refused_wait_ends_the_run_with_the_error),
        cmocka_unit_test(test_a_broken_epoll_fd_ends_the_run_with_the_error),
        cmocka_unit_test(test_a_timerfd_that_cannot_be_armed_is_reported),
        cmocka_unit_test(test_a_wait_reporting_a_timer_and_an_fd_serves_both_in_its_pass),
        cmocka_unit_test(test_a_timer_added_after_the_timerfd_expired_wakes_the_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
