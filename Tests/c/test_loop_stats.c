/* test_loop_stats.c — a loop's statistics (RLRunLoopHealth.h): exact
 * counts for a scripted loop (passes, sleeps, wake-ups by cause, callouts
 * by kind), reset, the timing histograms, copies from another thread while
 * the loop runs, the histogram itself on known inputs, and misuse. */
#include "stale.h"
#include "testutil.h"

#include <crunloop/RLRunLoopHealth.h>

#include "rl_histogram.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODE "stats.mode"

static void nop(void *info) { (void)info; }
static void count(void *info) { (*(int *)info)++; }
static void stop_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    (*(int *)info)++;
    RLRunLoopStop(RLRunLoopGetCurrent());
}
static void slow_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    (void)info;
    usleep(10000);
}

static RLRunLoopStatistics stats(RLRunLoopRef rl) {
    RLRunLoopStatistics s;
    assert_true(RLRunLoopCopyStatistics(rl, &s));
    return s;
}

static void scripted_counts(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int performed = 0, fired = 0;
    RLRunLoopSourceContext sc = {0};
    sc.info = &performed;
    sc.perform = count;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &sc);
    RLRunLoopAddSource(rl, src, MODE);
    assert_true(RLRunLoopResetStatistics(rl));
    RLRunLoopStatistics s = stats(rl);
    assert_int_equal(s.passes, 0);
    assert_int_equal(s.sleeps, 0);

    /* 1. A signalled source, handled on the first pass: no sleep. */
    RLRunLoopSourceSignal(src);
    assert_int_equal(RLRunLoopRunInMode(MODE, 5.0, true), kRLRunLoopRunHandledSource);
    s = stats(rl);
    assert_int_equal(performed, 1);
    assert_int_equal(s.passes, 1);
    assert_int_equal(s.sleeps, 0);
    assert_int_equal(s.callouts[kRLCalloutSource], 1);

    /* 2. A timer 20 ms ahead that stops the run: one pass, one sleep, woken
     * by the timer. */
    RLRunLoopTimerContext tc = {0, &fired, NULL, NULL, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.02, 0, 0, 0, stop_timer, &tc);
    RLRunLoopAddTimer(rl, t, MODE);
    assert_int_equal(RLRunLoopRunInMode(MODE, 5.0, false), kRLRunLoopRunStopped);
    s = stats(rl);
    assert_int_equal(fired, 1);
    assert_int_equal(s.passes, 2);
    assert_int_equal(s.sleeps, 1);
    assert_int_equal(s.wakeUps[kRLWakeUpTimer], 1);
    assert_int_equal(s.callouts[kRLCalloutTimer], 1);
    assert_true(s.timeAsleep == 0); /* times are kept with timing on only */
    assert_true(s.timeBusy == 0);

    /* 3. Two perform requests, run by a look (no wait). */
    assert_true(RLRunLoopPerformFunction(rl, MODE, nop, NULL));
    assert_true(RLRunLoopPerformFunction(rl, MODE, nop, NULL));
    RLRunLoopRunInMode(MODE, 0, false);
    s = stats(rl);
    assert_int_equal(s.passes, 3);
    assert_int_equal(s.sleeps, 1);
    assert_int_equal(s.callouts[kRLCalloutPerform], 2);

    /* 4. A run of 50 ms with nothing to do: one sleep, ended by the run's
     * time limit, which counts as explicit. */
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.05, false), kRLRunLoopRunTimedOut);
    s = stats(rl);
    assert_int_equal(s.sleeps, 2);
    assert_int_equal(s.wakeUps[kRLWakeUpExplicit], 1);
    uint64_t woke = 0;
    for (int i = 0; i < kRLWakeUpCauseCount; i++)
        woke += s.wakeUps[i];
    assert_int_equal(woke, s.sleeps);
    assert_false(s.timing);
    assert_int_equal(s.calloutDuration.count, 0);

    /* Reset: from zero again. */
    assert_true(RLRunLoopResetStatistics(rl));
    s = stats(rl);
    assert_int_equal(s.passes, 0);
    assert_int_equal(s.callouts[kRLCalloutSource], 0);
    assert_int_equal(s.wakeUps[kRLWakeUpTimer], 0);
    assert_true(s.timeAsleep == 0);
    RLRunLoopSourceSignal(src);
    assert_int_equal(RLRunLoopRunInMode(MODE, 5.0, true), kRLRunLoopRunHandledSource);
    s = stats(rl);
    assert_int_equal(s.passes, 1);
    assert_int_equal(s.callouts[kRLCalloutSource], 1);

    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
}

static void timing_histograms(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_false(RLRunLoopIsTimingEnabled(rl));
    assert_true(RLRunLoopSetTimingEnabled(rl, true));
    assert_true(RLRunLoopIsTimingEnabled(rl));
    assert_true(RLRunLoopResetStatistics(rl));
    for (int i = 0; i < 3; i++) {
        RLRunLoopTimerContext tc = {0};
        RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.050, 0, 0, 0, slow_timer, &tc);
        RLRunLoopAddTimer(rl, t, MODE);
        assert_int_equal(RLRunLoopRunInMode(MODE, 5.0, false), kRLRunLoopRunFinished);
        RLRelease(t);
    }
    RLRunLoopStatistics s = stats(rl);
    assert_true(s.timing);
    assert_int_equal(s.calloutDuration.count, 3);
    assert_true(s.calloutDuration.max >= 0.010);
    assert_true(s.calloutDuration.p50 >= 0.010 * (1 - 1.0 / 16));
    assert_true(s.calloutDuration.p50 <= s.calloutDuration.p99 && s.calloutDuration.p99 <= s.calloutDuration.max);
    assert_int_equal(s.timerLateness.count, 3);
    assert_true(s.timerLateness.max >= 0);
    /* Three sleeps of up to 50 ms each (timers 50 ms ahead, less what
     * making and adding each took: much under valgrind), and three
     * callouts of 10 ms. */
    assert_true(s.timeAsleep >= 0.060);
    assert_true(s.timeBusy >= 0.030);
    /* Off: what was kept stays, nothing more is added. */
    assert_true(RLRunLoopSetTimingEnabled(rl, false));
    RLRunLoopTimerContext tc = {0};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent(), 0, 0, 0, slow_timer, &tc);
    RLRunLoopAddTimer(rl, t, MODE);
    RLRunLoopRunInMode(MODE, 5.0, false);
    RLRelease(t);
    s = stats(rl);
    assert_false(s.timing);
    assert_int_equal(s.calloutDuration.count, 3);
    assert_int_equal(s.callouts[kRLCalloutTimer], 4);
}

/* Another thread copies the statistics of a loop that is running (and
 * resets them): counts only grow between resets; ThreadSanitizer checks
 * the copies race with nothing. */
static _Atomic bool copier_done;
static void *copier(void *arg) {
    RLRunLoopRef rl = arg;
    uint64_t last = 0;
    for (int i = 0; i < 2000; i++) {
        RLRunLoopStatistics s;
        assert_true(RLRunLoopCopyStatistics(rl, &s));
        if (i % 500 == 499) {
            assert_true(RLRunLoopResetStatistics(rl));
            last = 0;
            continue;
        }
        assert_true(s.passes >= last);
        last = s.passes;
    }
    atomic_store(&copier_done, true);
    RLRunLoopWakeUp(rl);
    return NULL;
}

static void copies_from_another_thread(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopSetTimingEnabled(rl, true));
    atomic_store(&copier_done, false);
    RLRunLoopSourceContext sc = {0};
    sc.perform = nop;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &sc);
    RLRunLoopAddSource(rl, src, MODE);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, copier, rl), 0);
    double until = RLAbsoluteTimeGetCurrent() + 30;
    while (!atomic_load(&copier_done) && RLAbsoluteTimeGetCurrent() < until) {
        RLRunLoopSourceSignal(src);
        RLRunLoopRunInMode(MODE, 0.01, true);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(atomic_load(&copier_done));
    RLRunLoopSetTimingEnabled(rl, false);
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
}

static void histogram_known_inputs(void **state) {
    (void)state;
    rl__histogram *h = calloc(1, sizeof *h);
    assert_int_equal(rl__hist_quantile(h, 0.5), 0);
    /* 1..1000 microseconds, one each. */
    for (uint64_t us = 1; us <= 1000; us++)
        rl__hist_record(h, us * 1000);
    assert_int_equal(atomic_load(&h->total), 1000);
    assert_int_equal(atomic_load(&h->max), 1000000);
    const double qs[] = {0.5, 0.9, 0.99, 0.999};
    const double want[] = {500e3, 900e3, 990e3, 999e3};
    for (int i = 0; i < 4; i++) {
        double got = (double)rl__hist_quantile(h, qs[i]);
        assert_true(got >= want[i]);                       /* a bucket's top: never below */
        assert_true(got <= want[i] * (1 + 1.0 / 16) + 1); /* and within 1/16 above */
    }
    assert_int_equal(rl__hist_quantile(h, 1.0), 1000000);
    /* Every value lands in a bucket whose top is at or above it, within
     * 1/16; buckets grow with the value. */
    unsigned last = 0;
    for (uint64_t v = 0; v < (1ull << 41); v = v < 64 ? v + 1 : v + v / 7 + 1) {
        unsigned b = rl__hist_bucket(v);
        assert_true(b < RL_HIST_BUCKETS);
        assert_true(b >= last);
        last = b;
        if (v < (1ull << RL_HIST_TOP_BIT)) {
            uint64_t top = rl__hist_bucket_top(b);
            assert_true(top >= v);
            assert_true((double)top <= (double)v * (1 + 1.0 / 16) + 1);
        }
    }
    assert_int_equal(rl__hist_bucket(UINT64_MAX), RL_HIST_BUCKETS - 1);
    /* A difference against an earlier copy. */
    rl__histogram *before = calloc(1, sizeof *before), *d = calloc(1, sizeof *d);
    rl__hist_copy(h, before);
    rl__hist_record(h, 7);
    rl__hist_sub(h, before, d);
    assert_int_equal(atomic_load(&d->total), 1);
    assert_int_equal(rl__hist_quantile(d, 0.5), 7);
    free(h);
    free(before);
    free(d);
}

static bool copy_refused(const void *stale) {
    RLRunLoopStatistics s;
    return !RLRunLoopCopyStatistics((RLRunLoopRef)stale, &s);
}
static bool reset_refused(const void *stale) { return !RLRunLoopResetStatistics((RLRunLoopRef)stale); }
static bool timing_refused(const void *stale) { return !RLRunLoopSetTimingEnabled((RLRunLoopRef)stale, true); }

static void *make_loop(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRetain(rl);
    *(RLRunLoopRef *)arg = rl;
    return NULL;
}

static void misuse(void **state) {
    (void)state;
    RLRunLoopStatistics s;
    RLErrorClear();
    assert_false(RLRunLoopCopyStatistics(NULL, &s));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
    RLErrorClear();
    assert_false(RLRunLoopCopyStatistics(RLRunLoopGetCurrent(), NULL));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
    assert_false(RLRunLoopResetStatistics(NULL));
    assert_false(RLRunLoopSetTimingEnabled(NULL, true));
    assert_false(RLRunLoopIsTimingEnabled(NULL));
    assert_string_equal(RLWakeUpCauseGetName(kRLWakeUpPerform), "perform");
    assert_string_equal(RLWakeUpCauseGetName((RLWakeUpCause)6), "unknown");
    /* A loop whose thread ended and that was released. */
    RLRunLoopRef gone = NULL;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, make_loop, &gone), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(RLRunLoopSetTimingEnabled(gone, true)); /* its histograms go with it (leak check) */
    RLRelease(gone);
    rl_test_stale(copy_refused, gone);
    rl_test_stale(reset_refused, gone);
    rl_test_stale(timing_refused, gone);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scripted_counts),
        cmocka_unit_test(timing_histograms),
        cmocka_unit_test(copies_from_another_thread),
        cmocka_unit_test(histogram_known_inputs),
        cmocka_unit_test(misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
