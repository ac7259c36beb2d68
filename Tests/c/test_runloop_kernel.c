/* test_runloop_kernel.c — a loop whose kernel objects fail: a wait that the
 * kernel refuses (the epoll set broken, or a fault injected) ends the run
 * with the error set instead of spinning; a timerfd that cannot be armed is
 * reported and the loop still sleeps until its timer. Each test counts the
 * loop's waits (a BeforeWaiting observer) to prove it does not spin. And
 * what a wait reported is all served: a timer and an fd reported by one
 * wait are served in that pass, even when the timer's callout runs the
 * loop nested; a timer added after the timerfd expired still wakes it; a
 * report the backend kept from a run nested in an fd callout is not handed
 * out once the loop changed that fd's registration (every later pass still
 * serves every fd). */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
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

/* ---- a kept report and a registration changed since ---- */

enum { KEPT_FDS = 20 };

typedef struct {
    int fd;
    int calls;
    RLFileDescriptorRef f;
    RLRunLoopSourceRef s;
} kept_fd;

static kept_fd kept_busy[KEPT_FDS], kept_inner;
static int kept_nested;

static void kept_poke(kept_fd *x) {
    uint64_t one = 1;
    assert_int_equal(write(x->fd, &one, sizeof one), (ssize_t)sizeof one);
}

static void kept_on_read(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    kept_fd *x = info;
    uint64_t v;
    (void)!read(x->fd, &v, sizeof v);
    x->calls++;
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
}

/* Runs the loop nested until the inner fd, poked here, is served: the
 * nested waits find the outer pass's fds (not served yet) ready too. */
static void kept_on_read_nested(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    kept_on_read(f, types, info);
    kept_poke(&kept_inner);
    int before = kept_inner.calls;
    for (int k = 0; k < 50 && kept_inner.calls == before; k++)
        RLRunLoopRunInMode("Kept", 1, true);
    kept_nested += kept_inner.calls - before;
}

static void kept_watch(kept_fd *x, RLFileDescriptorCallBack cb) {
    x->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(x->fd >= 0);
    RLFileDescriptorContext c = {0, x, NULL, NULL, NULL};
    x->f = RLFileDescriptorCreate(NULL, x->fd, true, cb, &c);
    assert_non_null(x->f);
    RLFileDescriptorEnableCallBacks(x->f, kRLFileDescriptorReadCallBack);
    x->s = RLFileDescriptorCreateRunLoopSource(NULL, x->f, 0);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), x->s, "Kept"));
}

static void kept_unwatch(kept_fd *x) {
    RLRunLoopSourceInvalidate(x->s);
    RLRelease(x->s);
    RLFileDescriptorInvalidate(x->f); /* closes the fd */
    RLRelease(x->f);
}

/* Every busy fd poked, then one pass (more while `until_all` and some are
 * not served yet): the callouts made. */
static int kept_pass(bool until_all) {
    int before = 0, after = 0;
    for (int i = 0; i < KEPT_FDS; i++) {
        kept_poke(&kept_busy[i]);
        before += kept_busy[i].calls;
    }
    for (int k = 0; k < 10; k++) {
        RLRunLoopRunInMode("Kept", 0, false);
        after = 0;
        for (int i = 0; i < KEPT_FDS; i++)
            after += kept_busy[i].calls;
        if (!until_all || after - before == KEPT_FDS)
            break;
    }
    return after - before;
}

static void test_a_report_kept_from_a_nested_run_is_dropped_once_the_fd_changed(void **state) {
    /* On io_uring, with every submission outside the wait taking the
     * ring's completions (as a receive's cancellation does), the nested
     * runs' submissions keep reports of the outer pass's fds; handed out
     * after that pass enabled them again, they made the next passes skip
     * those fds. On epoll the same scenario runs without the switch. */
    atomic_fetch_or(&rl__faults, RL_FAULT_URING_TAKE_EARLY);
    for (int i = 0; i < KEPT_FDS - 1; i++)
        kept_watch(&kept_busy[i], kept_on_read);
    kept_watch(&kept_busy[KEPT_FDS - 1], kept_on_read);
    kept_watch(&kept_inner, kept_on_read);
    /* The first wait holds a few events (the loop's frame), the next ones
     * a batch (the loop's array: all twenty at once from then on). */
    for (int k = 0; k < 3; k++)
        assert_int_equal(kept_pass(true), KEPT_FDS);
    /* The last fd replaced by one whose callout runs the loop nested (its
     * number taken again: a removal submitted outside the wait). */
    kept_unwatch(&kept_busy[KEPT_FDS - 1]);
    kept_watch(&kept_busy[KEPT_FDS - 1], kept_on_read_nested);
    kept_nested = 0;
    for (int k = 0; k < 4; k++)
        assert_int_equal(kept_pass(false), KEPT_FDS); /* one pass serves all */
    assert_int_equal(kept_nested, 4);
    atomic_fetch_and(&rl__faults, ~(unsigned)RL_FAULT_URING_TAKE_EARLY);
    for (int i = 0; i < KEPT_FDS; i++)
        kept_unwatch(&kept_busy[i]);
    kept_unwatch(&kept_inner);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_refused_wait_ends_the_run_with_the_error),
        cmocka_unit_test(test_a_broken_epoll_fd_ends_the_run_with_the_error),
        cmocka_unit_test(test_a_timerfd_that_cannot_be_armed_is_reported),
        cmocka_unit_test(test_a_wait_reporting_a_timer_and_an_fd_serves_both_in_its_pass),
        cmocka_unit_test(test_a_timer_added_after_the_timerfd_expired_wakes_the_loop),
        cmocka_unit_test(test_a_report_kept_from_a_nested_run_is_dropped_once_the_fd_changed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
