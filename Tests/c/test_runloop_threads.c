/* test_runloop_threads.c — run loops across threads: teardown at thread exit
 * (cancel on the exiting thread, contexts balanced), driving another
 * thread's loop, concurrent signals and wake-ups, removal while sleeping. */
#include "testutil.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void rl__runloop_teardown_current_thread(void);

static _Atomic int retains, releases, cancels, cancels_on_owner;
static pthread_t owner;

static const void *c_retain(const void *i) {
    retains++;
    return i;
}
static void c_release(const void *i) { releases++; }
static void c_cancel(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    cancels++;
    if (pthread_equal(pthread_self(), owner))
        cancels_on_owner++;
}
static void nop_timer(RLRunLoopTimerRef t, void *i) {}
static void nop_obs(RLRunLoopObserverRef o, RLRunLoopActivity a, void *i) {}

static void *thread_with_items(void *arg) {
    RLRunLoopSourceRef s = arg;
    owner = pthread_self();
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopAddSource(rl, s, kRLRunLoopCommonModes);
    RLRunLoopAddSource(rl, s, "Extra");
    RLRunLoopTimerContext tc = {0, NULL, c_retain, c_release, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 100, 1, 0, 0, nop_timer, &tc);
    RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode);
    RLRelease(t);
    RLRunLoopObserverContext oc = {0, NULL, c_retain, c_release, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAllActivities, true, 0, nop_obs, &oc);
    RLRunLoopAddObserver(rl, o, "Extra");
    RLRelease(o);
    return NULL;
}

static void test_thread_exit_tears_down(void **state) {
    retains = releases = cancels = cancels_on_owner = 0;
    RLRunLoopSourceContext c = {0};
    c.retain = c_retain;
    c.release = c_release;
    c.cancel = c_cancel;
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thread_with_items, s), 0);
    pthread_join(t, NULL);
    /* default (common) + Extra: cancelled on the exiting thread. */
    assert_int_equal(cancels, 2);
    assert_int_equal(cancels_on_owner, 2);
    assert_int_equal(RLGetRetainCount(s), 1); /* the loop let go of it */
    assert_true(RLRunLoopSourceIsValid(s));
    assert_true(RLRelease(s));
    assert_int_equal(retains, 3);
    assert_int_equal(releases, 3);
}

static void *explicit_teardown(void *arg) {
    RLRunLoopRef first = RLRunLoopGetCurrent();
    RLRetain(first);
    rl__runloop_teardown_current_thread();
    rl__runloop_teardown_current_thread(); /* twice is harmless */
    bool add_fails = !RLRunLoopPerformFunction(first, kRLRunLoopDefaultMode, free, NULL) &&
                     RLErrorGetLast().code == kRLErrorInvalidState;
    RLRunLoopRef second = RLRunLoopGetCurrent(); /* a fresh loop if asked again */
    bool fresh = second != NULL && second != first;
    RLRelease(first);
    return (void *)(intptr_t)(add_fails && fresh);
}

static void test_explicit_teardown(void **state) {
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, explicit_teardown, NULL), 0);
    pthread_join(t, &res);
    assert_ptr_equal(res, (void *)1);
}

struct worker {
    RLRunLoopRef rl;
    _Atomic int ready;
    _Atomic int performs;
    int result;
};

static void worker_perform(void *info) { ((struct worker *)info)->performs++; }

static void *worker_main(void *arg) {
    struct worker *w = arg;
    w->rl = RLRunLoopGetCurrent();
    RLRetain(w->rl);
    RLRunLoopSourceContext c = {0};
    RLRunLoopSourceRef keep = RLRunLoopSourceCreate(NULL, 0, &c);
    RLRunLoopAddSource(w->rl, keep, kRLRunLoopDefaultMode);
    w->ready = 1;
    w->result = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 60, false);
    RLRunLoopSourceInvalidate(keep);
    RLRelease(keep);
    return NULL;
}

static void test_drive_another_threads_loop(void **state) {
    struct worker w = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, worker_main, &w), 0);
    while (!w.ready)
        usleep(100);
    rl_test_wait_until_waiting(w.rl);
    RLRunLoopSourceContext c = {0};
    c.info = &w;
    c.perform = worker_perform;
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_true(RLRunLoopAddSource(w.rl, s, kRLRunLoopDefaultMode));
    long n = rl_test_iters(1000);
    for (long i = 0; i < n; i++) {
        RLRunLoopSourceSignal(s);
        RLRunLoopWakeUp(w.rl);
        if (i % 100 == 0)
            rl_test_wait_until_waiting(w.rl);
    }
    /* One more signal + wake-up is always served, however it interleaves
     * with the loop going back to sleep. */
    double t1 = rl_test_now();
    while (w.performs == 0 && rl_test_now() - t1 < 10)
        usleep(100);
    int before = w.performs;
    RLRunLoopSourceSignal(s);
    RLRunLoopWakeUp(w.rl);
    double t0 = rl_test_now();
    while (w.performs == before && rl_test_now() - t0 < 10)
        usleep(100);
    assert_true(w.performs > before); /* the signal after the last wake was not lost */
    assert_true(RLRunLoopStop(w.rl));
    pthread_join(t, NULL);
    assert_int_equal(w.result, kRLRunLoopRunStopped);
    assert_in_range(w.performs, 1, n + 1);
    RLRunLoopSourceInvalidate(s);
    RLRelease(s);
    RLRelease(w.rl);
}

/* A stop from another thread that lands just after the loop handled a
 * source (after that pass checked for a stop, before the next pass starts
 * taking wake-ups) still ends the run: the loop must not sleep on it. */
struct stop_race {
    RLRunLoopRef rl;
    RLRunLoopSourceRef src;
    _Atomic long handled, runs;
    _Atomic bool ready;
    long n;
    int not_stopped;
};

static void stop_race_perform(void *info) {
    struct stop_race *r = info;
    r->handled++;
}

static void *stop_race_main(void *arg) {
    struct stop_race *r = arg;
    r->rl = (RLRunLoopRef)RLRetain(RLRunLoopGetCurrent());
    RLRunLoopAddSource(r->rl, r->src, kRLRunLoopDefaultMode);
    r->ready = true;
    for (long i = 0; i < r->n; i++) {
        /* A lost stop shows as a run that times out instead. */
        if (RLRunLoopRunInMode(kRLRunLoopDefaultMode, 2, false) != kRLRunLoopRunStopped)
            r->not_stopped++;
        r->runs++;
    }
    return NULL;
}

static void test_stop_right_after_a_handled_source(void **state) {
    struct stop_race r = {.n = rl_test_iters(3000)};
    RLRunLoopSourceContext c = {0};
    c.info = &r;
    c.perform = stop_race_perform;
    r.src = RLRunLoopSourceCreate(NULL, 0, &c);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_race_main, &r), 0);
    while (!r.ready)
        usleep(100);
    for (long i = 0; i < r.n; i++) {
        while (r.runs < i) /* the previous run has returned */
            sched_yield();
        long before = r.handled;
        RLRunLoopSourceSignal(r.src);
        RLRunLoopWakeUp(r.rl);
        for (long spins = 1; r.handled == before; spins++)
            if (spins % 1024 == 0)
                sched_yield();
        assert_true(RLRunLoopStop(r.rl)); /* the run is under way: its source was handled */
        while (r.runs == i)
            sched_yield();
    }
    pthread_join(t, NULL);
    assert_int_equal(r.not_stopped, 0);
    RLRunLoopSourceInvalidate(r.src);
    RLRelease(r.src);
    RLRelease(r.rl);
}

static _Atomic int timer_fired;
static void mark_timer(RLRunLoopTimerRef t, void *i) {
    timer_fired = 1;
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void test_timer_added_to_sleeping_loop(void **state) {
    struct worker w = {0};
    pthread_t t;
    timer_fired = 0;
    assert_int_equal(pthread_create(&t, NULL, worker_main, &w), 0);
    while (!w.ready)
        usleep(100);
    rl_test_wait_until_waiting(w.rl);
    RLRunLoopTimerRef tm = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.01, 0, 0, 0, mark_timer, NULL);
    assert_true(RLRunLoopAddTimer(w.rl, tm, kRLRunLoopDefaultMode)); /* no WakeUp: the timerfd is re-armed */
    pthread_join(t, NULL);
    assert_int_equal(timer_fired, 1);
    assert_int_equal(w.result, kRLRunLoopRunStopped);
    RLRelease(tm);
    RLRelease(w.rl);
}

static void *remove_while_sleeping(void *arg) {
    void **a = arg;
    RLRunLoopRef rl = a[0];
    rl_test_wait_until_waiting(rl);
    RLRunLoopSourceInvalidate((RLRunLoopSourceRef)a[1]);
    RLRunLoopWakeUp(rl);
    return NULL;
}

static void test_invalidate_source_while_sleeping(void **state) {
    RLRunLoopSourceContext c = {0};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopAddSource(rl, s, "Sleepy"));
    void *a[2] = {rl, s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, remove_while_sleeping, a), 0);
    assert_int_equal(RLRunLoopRunInMode("Sleepy", 30, false), kRLRunLoopRunFinished);
    pthread_join(t, NULL);
    RLRelease(s);
}


static int count_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 4096; fd++) {
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    }
    return n;
}

typedef struct five_modes {
    int extra;        /* the descriptors the loop added */
    bool uring;       /* the loop is on io_uring */
} five_modes;

static void *loop_with_five_modes(void *arg) {
    five_modes *fm = arg;
    int before = count_fds();
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceContext c = {0};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    const char *modes[] = {"m1", "m2", "m3", "m4", "m5"};
    for (int i = 0; i < 5; i++) {
        RLRunLoopAddSource(rl, s, modes[i]);
        RLRunLoopRunInMode(modes[i], 0, false);
    }
    fm->extra = count_fds() - before;
    fm->uring = strcmp(RLRunLoopGetBackendName(rl), "io_uring") == 0;
    RLRunLoopSourceInvalidate(s);
    RLRelease(s);
    return NULL;
}

static void test_three_fds_however_many_modes(void **state) {
    five_modes fm = {-1, false};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, loop_with_five_modes, &fm), 0);
    pthread_join(t, NULL);
    /* epoll + eventfd + timerfd; on io_uring the ring + eventfd + timerfd
     * + the eventfd other threads' changes come through (RL_BACKEND=
     * io_uring: a default loop with no socket stays on epoll) */
    assert_int_equal(fm.extra, fm.uring ? 4 : 3);
}

static void nop_fd(RLFileDescriptorRef f, RLOptionFlags types, void *info) {}

static void *fd_source_thread(void *arg) {
    int *p = arg;
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], false, nop_fd, NULL);
    RLRunLoopSourceRef s = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), s, kRLRunLoopCommonModes);
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    RLRelease(s);
    return f; /* the thread's loop lets go of the source when it exits */
}

static void test_fd_source_released_at_thread_exit(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, fd_source_thread, p), 0);
    pthread_join(t, &res);
    RLFileDescriptorRef f = res;
    assert_non_null(f);
    assert_true(RLFileDescriptorIsValid(f));
    assert_int_equal(RLGetRetainCount(f), 1); /* the source went with the loop */
    assert_true(RLFileDescriptorInvalidate(f));
    assert_true(RLRelease(f));
    assert_int_equal(fcntl(p[0], F_GETFD), 0); /* not ours to close */
    close(p[0]);
    close(p[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_exit_tears_down),
        cmocka_unit_test(test_explicit_teardown),
        cmocka_unit_test(test_drive_another_threads_loop),
        cmocka_unit_test(test_timer_added_to_sleeping_loop),
        cmocka_unit_test(test_stop_right_after_a_handled_source),
        cmocka_unit_test(test_invalidate_source_while_sleeping),
        cmocka_unit_test(test_three_fds_however_many_modes),
        cmocka_unit_test(test_fd_source_released_at_thread_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
