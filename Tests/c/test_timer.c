/* test_timer.c — one-shot and repeating timers, the grid, missed periods,
 * moves (earlier, later, inside the callout), invalidation from the callout
 * and from another thread, two modes, tolerance and its coalescing. */
#include "testutil.h"
#include "trace.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static RLRunLoopTimerRef make(RLAbsoluteTime date, RLTimeInterval interval, RLRunLoopTimerCallBack cb, void *info) {
    RLRunLoopTimerContext c = {0, info, NULL, NULL, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, date, interval, 0, 0, cb, &c);
    assert_non_null(t);
    return t;
}

static void done(RLRunLoopTimerRef t) {
    RLRunLoopTimerInvalidate(t);
    assert_true(RLRelease(t));
}

static void name_cb(RLRunLoopTimerRef t, void *info) {
    rl_trace_add((const char *)info);
    assert_true(RLRunLoopTimerIsValid(t)); /* one-shots are invalidated after the callout */
}

static void test_one_shot_fires_once(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() + 0.01, 0, name_cb, "T");
    assert_false(RLRunLoopTimerDoesRepeat(t));
    assert_true(RLRunLoopAddTimer(rl, t, "One"));
    assert_int_equal(RLRunLoopRunInMode("One", 10, false), kRLRunLoopRunFinished);
    assert_trace("T");
    assert_false(RLRunLoopTimerIsValid(t));
    assert_false(RLRunLoopContainsTimer(rl, t, "One"));
    done(t);
}

static void test_order_of_due_timers(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef late = make(now - 1, 0, name_cb, "late");
    RLRunLoopTimerRef early = make(now - 2, 0, name_cb, "early");
    RLRunLoopTimerRef tie = make(now - 1, 0, name_cb, "tie");
    assert_true(RLRunLoopAddTimer(rl, late, "Due"));
    assert_true(RLRunLoopAddTimer(rl, tie, "Due"));
    assert_true(RLRunLoopAddTimer(rl, early, "Due"));
    assert_int_equal(RLRunLoopRunInMode("Due", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("early late tie");
    done(late);
    done(early);
    done(tie);
}

/* Timers due at one date fire in the order they were given that date (at
 * creation or by SetNextFireDate, inside a loop or in none), whatever order
 * they were added in. */
static void test_equal_dates_fire_in_the_order_they_got_them(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLAbsoluteTime due = RLAbsoluteTimeGetCurrent() - 1;
    RLRunLoopTimerRef a = make(due, 0, name_cb, "A");
    RLRunLoopTimerRef b = make(due, 0, name_cb, "B");
    RLRunLoopTimerRef c = make(due, 0, name_cb, "C");
    RLRunLoopTimerRef d = make(due, 0, name_cb, "D");
    assert_true(RLRunLoopTimerSetNextFireDate(a, due)); /* in no loop: after D */
    assert_true(RLRunLoopAddTimer(rl, d, "Tie"));
    assert_true(RLRunLoopAddTimer(rl, c, "Tie"));
    assert_true(RLRunLoopAddTimer(rl, b, "Tie"));
    assert_true(RLRunLoopAddTimer(rl, a, "Tie"));
    assert_true(RLRunLoopTimerSetNextFireDate(b, due)); /* in the loop: after A */
    assert_true(RLRunLoopTimerSetNextFireDate(c, due)); /* and C after B */
    assert_int_equal(RLRunLoopRunInMode("Tie", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("D A B C");
    done(a);
    done(b);
    done(c);
    done(d);
}

static int repeats;

static void repeat_twice_cb(RLRunLoopTimerRef t, void *info) {
    rl_trace_add((const char *)info);
    if (++repeats == 2)
        RLRunLoopTimerInvalidate(t);
}

/* A repeating timer is given its next date when it fires: it fires after a
 * timer created for that date before, and before one created after. */
static void test_equal_dates_after_a_repeat(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    repeats = 0;
    /* Due now, then next on its grid half a second from now (the first
     * pass fires it long before then). */
    RLAbsoluteTime anchor = RLAbsoluteTimeGetCurrent() - 0.5;
    RLRunLoopTimerRef r = make(anchor, 1.0, repeat_twice_cb, "R");
    RLAbsoluteTime next = anchor + (double)1 * 1.0; /* as the library computes it */
    RLRunLoopTimerRef before = make(next, 0, name_cb, "before");
    assert_true(RLRunLoopAddTimer(rl, r, "Rep"));
    assert_int_equal(RLRunLoopRunInMode("Rep", 0, false), kRLRunLoopRunTimedOut);
    assert_true(RLRunLoopTimerGetNextFireDate(r) == next);
    RLRunLoopTimerRef after = make(next, 0, name_cb, "after");
    assert_true(RLRunLoopAddTimer(rl, after, "Rep"));
    assert_true(RLRunLoopAddTimer(rl, before, "Rep"));
    assert_int_equal(RLRunLoopRunInMode("Rep", 10, false), kRLRunLoopRunFinished);
    assert_trace("R before R after");
    done(r);
    done(before);
    done(after);
}

static RLAbsoluteTime fired_at[16];
static int nfired;

static void grid_cb(RLRunLoopTimerRef t, void *info) {
    fired_at[nfired++] = RLRunLoopTimerGetNextFireDate(t);
    if (nfired == 3)
        RLRunLoopTimerInvalidate(t);
}

static void test_repeating_stays_on_grid(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    nfired = 0;
    RLAbsoluteTime start = RLAbsoluteTimeGetCurrent() + 0.01;
    RLRunLoopTimerRef t = make(start, 0.02, grid_cb, NULL);
    assert_true(RLRunLoopTimerDoesRepeat(t));
    assert_true(RLRunLoopTimerGetInterval(t) == 0.02);
    assert_true(RLRunLoopAddTimer(rl, t, "Grid"));
    assert_int_equal(RLRunLoopRunInMode("Grid", 10, false), kRLRunLoopRunFinished);
    assert_int_equal(nfired, 3);
    for (int i = 0; i < 3; i++) {
        double k = (fired_at[i] - start) / 0.02;
        assert_true(fabs(k - round(k)) < 1e-3);
        if (i > 0)
            assert_true(fired_at[i] > fired_at[i - 1]);
    }
    done(t);
}


/* A 1 ms repeating timer over 0.5 s skips no fire date it could still
 * fire: a date is passed over only if it was already past when the fire
 * before it ended (the library takes the next grid point after the time the
 * callout returned). Judged on the timer's own bookkeeping, not on speed:
 * a skip is excused when the loop's thread was held meanwhile (switched out
 * by the kernel between the end of one callout and the start of the next:
 * its involuntary context switches), and `generous` (half a period) covers
 * the few microseconds of the loop's own work between the callout's end and
 * its reading of the clock. On a loaded machine the skips seen all follow a
 * fire that itself started over a period late (the thread waited for a CPU
 * after its timerfd expired): the library passes over only dates already
 * gone, as CF does. */
enum { TICK_FIRES = 500 };

typedef struct {
    int n;
    RLAbsoluteTime date[TICK_FIRES], start[TICK_FIRES], end[TICK_FIRES];
    long csw_start[TICK_FIRES], csw_end[TICK_FIRES];
} tick_log;

static long involuntary_switches(void) {
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_THREAD, &ru), 0);
    return ru.ru_nivcsw;
}

static void tick_cb(RLRunLoopTimerRef t, void *info) {
    tick_log *g = info;
    int i = g->n;
    g->csw_start[i] = involuntary_switches();
    g->start[i] = RLAbsoluteTimeGetCurrent();
    g->date[i] = RLRunLoopTimerGetNextFireDate(t);
    if (++g->n == TICK_FIRES)
        RLRunLoopStop(RLRunLoopGetCurrent());
    g->csw_end[i] = involuntary_switches();
    g->end[i] = RLAbsoluteTimeGetCurrent();
}

static void test_1ms_repeating_timer_skips_no_date_it_could_fire(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    static tick_log g;
    memset(&g, 0, sizeof g);
    const double interval = 0.001, generous = 0.0005;
    RLAbsoluteTime first = RLAbsoluteTimeGetCurrent() + 0.005;
    RLRunLoopTimerRef t = make(first, interval, tick_cb, &g);
    assert_true(RLRunLoopAddTimer(rl, t, "Tick"));
    RLAbsoluteTime limit = RLAbsoluteTimeGetCurrent() + 30;
    while (g.n < TICK_FIRES && RLAbsoluteTimeGetCurrent() < limit)
        RLRunLoopRunInMode("Tick", 1.0, false);
    assert_int_equal(g.n, TICK_FIRES);
    int skips = 0, excused = 0;
    for (int i = 0; i + 1 < g.n; i++) {
        double k = (g.date[i] - first) / interval;
        assert_true(fabs(k - round(k)) < 1e-3); /* on the grid */
        assert_true(g.date[i] <= g.start[i]);   /* never early */
        double step = (g.date[i + 1] - g.date[i]) / interval;
        assert_true(step > 0.5); /* strictly later */
        if (step < 1.5)
            continue;
        skips++;
        /* Skipped: date[i] + interval must have passed by the end of fire i,
         * unless the thread was switched out before the next fire. */
        if (g.csw_start[i + 1] != g.csw_end[i]) {
            excused++;
            continue;
        }
        if (g.date[i] + interval > g.end[i] + generous)
            fail_msg("fire %d (date +%.1f us, ended +%.1f us) skipped %d dates it could still fire", i,
                     (g.date[i] - first) * 1e6, (g.end[i] - first) * 1e6, (int)round(step) - 1);
    }
    print_message("1 ms timer: %d fires, %d skips (%d while the thread was switched out)\n", g.n, skips, excused);
    done(t);
}

static void count_cb(RLRunLoopTimerRef t, void *info) { (*(int *)info)++; }

/* Removing a timer from its loop drops the loop's reference under the loop
 * lock when it is not the last; when it is (the caller released the timer
 * already), the drop waits until the lock is released: the context's
 * release callout then runs with no lock held and may use the same loop. */
static RLRunLoopTimerRef last_ref_other;
static int last_ref_released;

static void last_ref_release(const void *info) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_false(RLRunLoopContainsTimer(rl, last_ref_other, "LastRef")); /* takes the loop lock */
    assert_true(RLRunLoopAddTimer(rl, last_ref_other, "LastRef"));
    last_ref_released++;
}

static void test_removing_the_last_reference_releases_after_the_lock(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    last_ref_released = 0;
    last_ref_other = make(RLAbsoluteTimeGetCurrent() + 1000, 0, count_cb, NULL);
    RLRunLoopTimerContext c = {0, NULL, NULL, last_ref_release, NULL};
    RLRunLoopTimerRef kept = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, count_cb, &c);
    RLRunLoopTimerRef last = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, count_cb, &c);
    assert_non_null(kept);
    assert_non_null(last);
    assert_true(RLRunLoopAddTimer(rl, kept, "LastRef"));
    assert_true(RLRunLoopAddTimer(rl, last, "LastRef"));
    assert_true(RLRelease(last)); /* the loop's reference is the last */
    /* Not the last: the timer stays, its context too. */
    assert_true(RLRunLoopRemoveTimer(rl, kept, "LastRef"));
    assert_int_equal(last_ref_released, 0);
    assert_int_equal(RLGetRetainCount(kept), 1);
    /* The last: finalized after the unlock, its release callout free to
     * take the loop lock. */
    assert_true(RLRunLoopRemoveTimer(rl, last, "LastRef"));
    assert_int_equal(last_ref_released, 1);
    assert_true(RLRunLoopContainsTimer(rl, last_ref_other, "LastRef"));
    assert_true(RLRunLoopRemoveTimer(rl, last_ref_other, "LastRef"));
    assert_true(RLRelease(kept)); /* invalidated by nobody: its context goes with it */
    assert_int_equal(last_ref_released, 2);
    done(last_ref_other);
}

static void test_missed_periods_fire_once(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    RLAbsoluteTime start = RLAbsoluteTimeGetCurrent() - 1.0; /* 100 periods ago */
    RLRunLoopTimerRef t = make(start, 0.01, count_cb, &count);
    assert_true(RLRunLoopAddTimer(rl, t, "Missed"));
    assert_int_equal(RLRunLoopRunInMode("Missed", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 1);
    RLAbsoluteTime next = RLRunLoopTimerGetNextFireDate(t);
    assert_true(next > RLAbsoluteTimeGetCurrent() - 0.011);
    double k = (next - start) / 0.01;
    assert_true(fabs(k - round(k)) < 1e-3);
    done(t);
}

static void test_set_next_fire_date_earlier_and_later(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef far = make(now + 1000, 0, name_cb, "moved-earlier");
    RLRunLoopTimerRef near = make(now + 0.01, 0, name_cb, "moved-later");
    assert_true(RLRunLoopAddTimer(rl, far, "Move"));
    assert_true(RLRunLoopAddTimer(rl, near, "Move"));
    assert_true(RLRunLoopTimerSetNextFireDate(near, now + 1000));
    assert_true(RLRunLoopTimerSetNextFireDate(far, now + 0.02));
    assert_true(RLRunLoopTimerGetNextFireDate(far) == now + 0.02);
    assert_int_equal(RLRunLoopRunInMode("Move", 0.2, false), kRLRunLoopRunTimedOut);
    assert_trace("moved-earlier");
    assert_true(RLRunLoopTimerIsValid(near));
    done(far);
    done(near);
}

static int moved_count;

static void move_in_callout(RLRunLoopTimerRef t, void *info) {
    moved_count++;
    if (moved_count == 1)
        RLRunLoopTimerSetNextFireDate(t, RLAbsoluteTimeGetCurrent() + 0.01); /* wins over the grid */
    else
        RLRunLoopTimerInvalidate(t);
}

static void test_set_next_fire_date_inside_callout(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    moved_count = 0;
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent(), 1000, move_in_callout, NULL);
    assert_true(RLRunLoopAddTimer(rl, t, "InCallout"));
    assert_int_equal(RLRunLoopRunInMode("InCallout", 10, false), kRLRunLoopRunFinished);
    assert_int_equal(moved_count, 2);
    done(t);
}

static void invalidate_and_wake(RLRunLoopRef rl, void *timer) {
    RLRunLoopTimerInvalidate(timer);
    RLRunLoopWakeUp(rl);
}

static void test_invalidate_from_another_thread(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() + 1000, 0, count_cb, &count);
    assert_true(RLRunLoopAddTimer(rl, t, "XInv"));
    assert_int_equal(rl_test_run_and_act_while_asleep("XInv", false, invalidate_and_wake, t), kRLRunLoopRunFinished);
    assert_int_equal(count, 0);
    done(t);
}

static void test_same_timer_in_two_modes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() - 1, 1000, count_cb, &count);
    assert_true(RLRunLoopAddTimer(rl, t, "TA"));
    assert_true(RLRunLoopAddTimer(rl, t, "TB"));
    assert_int_equal(RLRunLoopRunInMode("TB", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 1);
    assert_true(RLRunLoopTimerSetNextFireDate(t, RLAbsoluteTimeGetCurrent() - 1));
    assert_int_equal(RLRunLoopRunInMode("TA", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 2);
    assert_true(RLRunLoopRemoveTimer(rl, t, "TA"));
    assert_true(RLRunLoopContainsTimer(rl, t, "TB"));
    assert_false(RLRunLoopContainsTimer(rl, t, "TA"));
    done(t);
}

static void test_tolerance_rules(void **state) {
    RLRunLoopTimerRef r = make(RLAbsoluteTimeGetCurrent() + 10, 1.0, count_cb, NULL);
    assert_true(RLRunLoopTimerGetTolerance(r) == 0);
    assert_true(RLRunLoopTimerSetTolerance(r, 0.2));
    assert_true(RLRunLoopTimerGetTolerance(r) == 0.2);
    assert_true(RLRunLoopTimerSetTolerance(r, 5));
    assert_true(RLRunLoopTimerGetTolerance(r) == 0.5); /* half the interval at most */
    assert_false(RLRunLoopTimerSetTolerance(r, -1));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopTimerSetTolerance(r, NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLRunLoopTimerGetTolerance(r) == 0.5);
    RLRunLoopTimerRef o = make(RLAbsoluteTimeGetCurrent() + 10, 0, count_cb, NULL);
    assert_true(RLRunLoopTimerSetTolerance(o, 5));
    assert_true(RLRunLoopTimerGetTolerance(o) == 5); /* one-shot: no clamp */
    done(r);
    done(o);
}

static void test_tolerance_coalesces_wakeups(void **state) {
    /* A (due first, lax) and B (due later, strict): one wake-up, at B's
     * date, fires both — A within its tolerance window. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeWaiting | kRLRunLoopAfterWaiting, true,
                                                     0, rl_trace_observer, NULL);
    assert_true(RLRunLoopAddObserver(rl, o, "Coal"));
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef a = make(now + 0.02, 0, name_cb, "A");
    RLRunLoopTimerRef b = make(now + 0.05, 0, name_cb, "B");
    assert_true(RLRunLoopTimerSetTolerance(a, 5));
    assert_true(RLRunLoopAddTimer(rl, a, "Coal"));
    assert_true(RLRunLoopAddTimer(rl, b, "Coal"));
    assert_int_equal(RLRunLoopRunInMode("Coal", 30, false), kRLRunLoopRunFinished);
    assert_trace("BW AW A B");
    assert_true(RLRunLoopTimerGetNextFireDate(b) <= RLAbsoluteTimeGetCurrent());
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    done(a);
    done(b);
}

/* One wake-up per timer expiry, also after the timerfd expired while the
 * loop was busy (woken early by another thread, then performing a source
 * past the timer's date, then polling): the loop neither wakes for an
 * expiry it has already served nor spins on one. */
static int expiry_fires, expiry_wakes;

static void expiry_observer(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) { expiry_wakes++; }

static void expiry_timer(RLRunLoopTimerRef t, void *info) {
    if (++expiry_fires == 20)
        RLRunLoopStop(RLRunLoopGetCurrent());
}

static void busy_perform(void *info) {
    double t0 = rl_test_now();
    while (rl_test_now() - t0 < 0.012) {
    }
}

static void signal_and_wake(RLRunLoopRef rl, void *source) {
    RLRunLoopSourceSignal(source);
    RLRunLoopWakeUp(rl);
}

static void test_one_wakeup_per_timer_expiry(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    expiry_fires = expiry_wakes = 0;
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, expiry_observer, NULL);
    RLRunLoopSourceContext sc = {0};
    sc.perform = busy_perform;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &sc);
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() + 0.005, 0.004, expiry_timer, NULL);
    assert_true(RLRunLoopAddObserver(rl, o, "Expiry"));
    assert_true(RLRunLoopAddSource(rl, src, "Expiry"));
    assert_true(RLRunLoopAddTimer(rl, t, "Expiry"));
    assert_int_equal(rl_test_run_and_act_while_asleep("Expiry", false, signal_and_wake, src), kRLRunLoopRunStopped);
    assert_int_equal(expiry_fires, 20);
    /* One wake-up for the other thread's WakeUp, one per later fire. */
    assert_in_range(expiry_wakes, 1, expiry_fires + 1);
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
    done(t);
}

static int t_retains, t_releases;
static const void *t_retain(const void *i) {
    t_retains++;
    return i;
}
static void t_release(const void *i) { t_releases++; }

static void test_context_balance_and_description(void **state) {
    t_retains = t_releases = 0;
    RLRunLoopTimerContext c = {0, (void *)"i", t_retain, t_release, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 100, 0, 0, 7, count_cb, &c);
    assert_int_equal(t_retains, 1);
    assert_int_equal(RLRunLoopTimerGetOrder(t), 7);
    RLRunLoopTimerContext got;
    assert_true(RLRunLoopTimerGetContext(t, &got));
    assert_string_equal((const char *)got.info, "i");
    char *d = RLCopyDescription(t);
    assert_non_null(strstr(d, "RLRunLoopTimer"));
    free(d);
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, kRLRunLoopCommonModes));
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_int_equal(t_releases, 1);
    assert_true(RLRelease(t));
    assert_int_equal(t_releases, 1);

    /* Never invalidated: released with the object. */
    RLRunLoopTimerRef u = RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, count_cb, &c);
    assert_true(RLRelease(u));
    assert_int_equal(t_retains, 2);
    assert_int_equal(t_releases, 2);
}

/* More distinct (retain, release) pairs than a timer can name by number
 * (rl__timer_cbs: 255): 17 retains x 16 releases make 272 pairs, and the
 * later timers keep theirs in their extension. Every timer still retains
 * its info at creation, retains and releases it around each callout, and
 * releases it when invalidated; and GetContext gives its own pair back. */
enum { NRET = 17, NREL = 16, NPAIRS = NRET * NREL };
typedef struct {
    int retains, releases, fired;
} pair_counts;
static const void *pair_retain_any(const void *i) {
    ((pair_counts *)i)->retains++;
    return i;
}
static void pair_release_any(const void *i) { ((pair_counts *)i)->releases++; }
#define PAIR_FNS(k) \
    static const void *pair_retain_##k(const void *i) { return pair_retain_any(i); } \
    static void pair_release_##k(const void *i) { pair_release_any(i); }
PAIR_FNS(0) PAIR_FNS(1) PAIR_FNS(2) PAIR_FNS(3) PAIR_FNS(4) PAIR_FNS(5) PAIR_FNS(6) PAIR_FNS(7) PAIR_FNS(8)
PAIR_FNS(9) PAIR_FNS(10) PAIR_FNS(11) PAIR_FNS(12) PAIR_FNS(13) PAIR_FNS(14) PAIR_FNS(15)
static const void *pair_retain_16(const void *i) { return pair_retain_any(i); } /* NRET = 17 retains, NREL = 16 releases */
static const void *(*const pair_retain[NRET])(const void *) = {
    pair_retain_0,  pair_retain_1,  pair_retain_2,  pair_retain_3,  pair_retain_4,  pair_retain_5,
    pair_retain_6,  pair_retain_7,  pair_retain_8,  pair_retain_9,  pair_retain_10, pair_retain_11,
    pair_retain_12, pair_retain_13, pair_retain_14, pair_retain_15, pair_retain_16};
static void (*const pair_release[NREL])(const void *) = {
    pair_release_0, pair_release_1, pair_release_2,  pair_release_3,  pair_release_4,  pair_release_5,
    pair_release_6, pair_release_7, pair_release_8,  pair_release_9,  pair_release_10, pair_release_11,
    pair_release_12, pair_release_13, pair_release_14, pair_release_15};

static void pair_callout(RLRunLoopTimerRef t, void *info) { (void)t, ((pair_counts *)info)->fired++; }

static void test_many_context_callback_pairs(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    static RLRunLoopTimerRef ts[NPAIRS];
    static pair_counts n[NPAIRS];
    memset(n, 0, sizeof n);
    for (int k = 0; k < NPAIRS; k++) {
        RLRunLoopTimerContext c = {0, &n[k], pair_retain[k % NRET], pair_release[k / NRET], NULL};
        ts[k] = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0, pair_callout, &c);
        assert_non_null(ts[k]);
        assert_int_equal(n[k].retains, 1);
        RLRunLoopTimerContext got;
        assert_true(RLRunLoopTimerGetContext(ts[k], &got));
        assert_ptr_equal(got.retain, pair_retain[k % NRET]);
        assert_ptr_equal(got.release, pair_release[k / NRET]);
        assert_ptr_equal(got.info, &n[k]);
    }
    /* The first and the last (the numbers have run out by then) fire. */
    int last = NPAIRS - 1;
    assert_true(RLRunLoopAddTimer(rl, ts[0], kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddTimer(rl, ts[last], kRLRunLoopDefaultMode));
    for (int i = 0; i < 100 && n[0].fired + n[last].fired < 2; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, true);
    for (int k = 0; k < NPAIRS; k += last) {
        assert_int_equal(n[k].fired, 1);
        assert_int_equal(n[k].retains, 2);
        assert_int_equal(n[k].releases, 2); /* after the callout, and the one-shot's invalidation */
    }
    for (int k = 0; k < NPAIRS; k++) {
        assert_true(RLRunLoopTimerInvalidate(ts[k]));
        assert_true(RLRelease(ts[k]));
        assert_int_equal(n[k].releases, n[k].retains);
    }
}

/* Keeps the timer in its own loop's default mode while the test looks
 * (stage 1), then checks it is still there and takes it out (3). */
typedef struct {
    RLRunLoopTimerRef t;
    atomic_int stage;
} keep_arg;
static void *keep_in_other_loop(void *arg) {
    keep_arg *k = arg;
    RLRunLoopRef other = RLRunLoopGetCurrent();
    bool ok = RLRunLoopAddTimer(other, k->t, kRLRunLoopDefaultMode);
    atomic_store(&k->stage, ok ? 1 : -1);
    while (atomic_load(&k->stage) == 1) usleep(1000);
    ok = RLRunLoopContainsTimer(other, k->t, kRLRunLoopDefaultMode);
    RLRunLoopRemoveTimer(other, k->t, kRLRunLoopDefaultMode);
    atomic_store(&k->stage, ok ? 3 : -3);
    return NULL;
}

/* Adding to and removing from the default mode (the hot path) does what
 * the other modes' path does at its edges: adding twice keeps one
 * reference; a mode looked at last other than the default; an invalid
 * timer refused; a timer in two modes leaves only the default; a timer at
 * home in another loop is not taken out of this one's; NULL refused. */
static void test_default_mode_add_and_remove_edges(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopMode dm = kRLRunLoopDefaultMode, other = "test.edges";
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 100, 0, 0, 0, count_cb, NULL);
    RLIndex rc0 = RLGetRetainCount(t);
    assert_true(RLRunLoopAddTimer(rl, t, dm));
    assert_true(RLRunLoopAddTimer(rl, t, dm));
    assert_int_equal(RLGetRetainCount(t), rc0 + 1);
    assert_true(RLRunLoopContainsTimer(rl, t, dm));
    /* In a second mode, looked at last: then out of the default only. */
    assert_true(RLRunLoopAddTimer(rl, t, other));
    assert_true(RLRunLoopRemoveTimer(rl, t, dm));
    assert_false(RLRunLoopContainsTimer(rl, t, dm));
    assert_true(RLRunLoopContainsTimer(rl, t, other));
    assert_int_equal(RLGetRetainCount(t), rc0 + 1);
    assert_true(RLRunLoopAddTimer(rl, t, dm));
    assert_true(RLRunLoopRemoveTimer(rl, t, other));
    assert_true(RLRunLoopContainsTimer(rl, t, dm));
    assert_true(RLRunLoopRemoveTimer(rl, t, dm));
    assert_true(RLRunLoopRemoveTimer(rl, t, dm)); /* in no mode: nothing to do */
    assert_int_equal(RLGetRetainCount(t), rc0);
    /* Invalid: refused with the error the other modes give. */
    RLRunLoopTimerInvalidate(t);
    assert_false(RLRunLoopAddTimer(rl, t, dm));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidObject);
    assert_false(RLRunLoopContainsTimer(rl, t, dm));
    RLRelease(t);
    /* NULL loop, NULL timer. */
    RLRunLoopTimerRef u = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 100, 0, 0, 0, count_cb, NULL);
    assert_false(RLRunLoopAddTimer(NULL, u, dm));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddTimer(rl, NULL, dm));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
    assert_false(RLRunLoopRemoveTimer(NULL, u, dm));
    assert_false(RLRunLoopRemoveTimer(rl, NULL, dm));
    /* At home in another loop (in its default mode): this loop's remove
     * leaves it there, and this loop's add is refused. */
    keep_arg k = {u, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, keep_in_other_loop, &k), 0);
    while (atomic_load(&k.stage) == 0) usleep(1000);
    assert_int_equal(atomic_load(&k.stage), 1);
    assert_true(RLRunLoopRemoveTimer(rl, u, dm));
    assert_false(RLRunLoopAddTimer(rl, u, dm));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidState);
    atomic_store(&k.stage, 2);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(atomic_load(&k.stage), 3);
    RLRunLoopTimerInvalidate(u);
    RLRelease(u);
}

static void *add_to_other_loop(void *arg) {
    bool ok = RLRunLoopAddTimer(RLRunLoopGetCurrent(), (RLRunLoopTimerRef)arg, kRLRunLoopDefaultMode);
    if (!ok && RLErrorGetLast().code == kRLErrorInvalidState)
        return (void *)1;
    return NULL;
}

static void test_timer_belongs_to_one_loop(void **state) {
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() + 100, 0, count_cb, NULL);
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "Mine"));
    assert_ptr_equal(rl_test_on_other_thread(add_to_other_loop, t), (void *)1);
    done(t);
}

#if __BLOCKS__
static void test_handler_block(void **state) {
    __block int n = 0;
    RLRunLoopTimerRef t = RLRunLoopTimerCreateWithHandler(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0,
                                                          ^(RLRunLoopTimerRef timer) { n++; });
    assert_non_null(t);
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "Blk"));
    assert_int_equal(RLRunLoopRunInMode("Blk", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(n, 1);
    done(t);
}
#endif

static void test_many_timers_add_remove(void **state) {
    /* Heap bookkeeping under churn: every timer fires exactly once, in date order. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    long n = rl_test_iters(20000);
    RLRunLoopTimerRef *ts = calloc((size_t)n, sizeof *ts);
    RLAbsoluteTime base = RLAbsoluteTimeGetCurrent() - (double)n - 1;
    int count = 0;
    for (long i = 0; i < n; i++) {
        ts[i] = make(base + (double)((i * 7919) % n), 0, count_cb, &count);
        assert_true(RLRunLoopAddTimer(rl, ts[i], "Many"));
    }
    for (long i = 0; i < n; i += 2)
        assert_true(RLRunLoopRemoveTimer(rl, ts[i], "Many"));
    assert_int_equal(RLRunLoopRunInMode("Many", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, n / 2);
    for (long i = 0; i < n; i++)
        done(ts[i]);
    free(ts);
}

typedef struct {
    int fired;
    double last;
    bool ordered;
} order_rec;

static void order_cb(RLRunLoopTimerRef t, void *info) {
    order_rec *r = info;
    double d = RLRunLoopTimerGetNextFireDate(t);
    if (d < r->last)
        r->ordered = false;
    r->last = d;
    r->fired++;
}

static double expected_min(const double *date, const bool *in, long n) {
    double m = 0;
    bool any = false;
    for (long i = 0; i < n; i++) {
        if (in[i] && (!any || date[i] < m)) {
            m = date[i];
            any = true;
        }
    }
    return m;
}

static void test_heap_pending_batches(void **state) {
    /* Added timers wait unordered until the loop needs the earliest one;
     * exercise both ways of folding them in (one heapify, sifting each),
     * removals and moves of waiting and of ordered entries, strict and
     * tolerant timers: the earliest date is always right, and exactly the
     * due timers fire, in date order. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    long n = rl_test_iters(6000);
    RLRunLoopTimerRef *ts = calloc((size_t)n, sizeof *ts);
    double *date = calloc((size_t)n, sizeof *date);
    bool *in = calloc((size_t)n, sizeof *in);
    order_rec rec = {0, -INFINITY, true};
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    unsigned long long x = 88172645463325252ULL;
    for (long i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double off = 1 + (double)(x % 100000) * 1e-2;
        date[i] = i % 2 ? now + 1e4 + off : now - 1e4 + off;
        ts[i] = make(date[i], 0, order_cb, &rec);
        if (i % 3 == 0)
            assert_true(RLRunLoopTimerSetTolerance(ts[i], 0.5));
    }
    long a = n * 6 / 10, b = n * 7 / 10;
    for (long i = 0; i < a; i++)
        assert_true(RLRunLoopAddTimer(rl, ts[i], "Heap")), in[i] = true;
    assert_true(RLRunLoopGetNextTimerFireDate(rl, "Heap") == expected_min(date, in, n)); /* one heapify */
    for (long i = a; i < b; i++)
        assert_true(RLRunLoopAddTimer(rl, ts[i], "Heap")), in[i] = true;
    assert_true(RLRunLoopGetNextTimerFireDate(rl, "Heap") == expected_min(date, in, n)); /* sifted in */
    for (long i = 0; i < b; i += 5)
        assert_true(RLRunLoopRemoveTimer(rl, ts[i], "Heap")), in[i] = false;
    for (long i = b; i < n; i++)
        assert_true(RLRunLoopAddTimer(rl, ts[i], "Heap")), in[i] = true;
    for (long i = b; i < n; i += 4) /* waiting entries */
        assert_true(RLRunLoopRemoveTimer(rl, ts[i], "Heap")), in[i] = false;
    for (long i = 2; i < b; i += 5) /* ordered entries, with entries waiting */
        assert_true(RLRunLoopRemoveTimer(rl, ts[i], "Heap")), in[i] = false;
    for (long i = 1; i < n; i += 7) { /* waiting and ordered entries */
        date[i] = date[i] - 5e3 + (double)(i % 97);
        assert_true(RLRunLoopTimerSetNextFireDate(ts[i], date[i]));
    }
    assert_true(RLRunLoopGetNextTimerFireDate(rl, "Heap") == expected_min(date, in, n));
    int due = 0;
    for (long i = 0; i < n; i++)
        due += in[i] && date[i] <= now;
    assert_int_equal(RLRunLoopRunInMode("Heap", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(rec.fired, due);
    assert_true(rec.ordered);
    for (long i = 0; i < n; i++) {
        if (date[i] <= now)
            in[i] = false; /* fired: one-shots are gone */
    }
    assert_true(RLRunLoopGetNextTimerFireDate(rl, "Heap") == expected_min(date, in, n));
    for (long i = 0; i < n; i++)
        done(ts[i]);
    free(ts);
    free(date);
    free(in);
}


static void test_common_modes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() - 1, 1000, count_cb, &count);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopCommonModes));
    assert_true(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddCommonMode(rl, "TimerCommon"));
    assert_true(RLRunLoopContainsTimer(rl, t, "TimerCommon"));
    assert_int_equal(RLRunLoopRunInMode("TimerCommon", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 1);
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopCommonModes));
    assert_false(RLRunLoopContainsTimer(rl, t, "TimerCommon"));
    assert_false(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopTimerIsValid(t));
    done(t);
}

static void move_to_now(RLRunLoopRef rl, void *timer) {
    /* No WakeUp: moving the timer re-arms the sleeping loop's timerfd. */
    RLRunLoopTimerSetNextFireDate(timer, RLAbsoluteTimeGetCurrent());
}

static void test_move_earlier_from_another_thread(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() + 1000, 0, count_cb, &count);
    assert_true(RLRunLoopAddTimer(rl, t, "XMove"));
    assert_int_equal(rl_test_run_and_act_while_asleep("XMove", false, move_to_now, t), kRLRunLoopRunFinished);
    assert_int_equal(count, 1);
    done(t);
}

static void test_tolerance_change_refiles_timer(void **state) {
    /* Timers move between the strict and tolerant heaps when their
     * tolerance changes; each still fires once. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    RLAbsoluteTime past = RLAbsoluteTimeGetCurrent() - 1;
    RLRunLoopTimerRef a = make(past, 0, count_cb, &count);
    RLRunLoopTimerRef b = make(past, 0, count_cb, &count);
    assert_true(RLRunLoopTimerSetTolerance(a, 0.5));
    assert_true(RLRunLoopAddTimer(rl, a, "Refile"));
    assert_true(RLRunLoopAddTimer(rl, b, "Refile"));
    assert_true(RLRunLoopTimerSetTolerance(a, 0));
    assert_true(RLRunLoopTimerSetTolerance(b, 2));
    assert_true(RLRunLoopGetNextTimerFireDate(rl, "Refile") == past);
    assert_int_equal(RLRunLoopRunInMode("Refile", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 2);
    done(a);
    done(b);
}

/* A timer's first membership lives inside the timer, later ones are
 * allocated. Removing the first while a later one stays must leave the
 * timer in its loop (and in that mode only); adding it back reuses the
 * inline one; once out of every mode it may join another loop. */
static void *add_to_other_loop_and_remove(void *arg) {
    RLRunLoopRef other = RLRunLoopGetCurrent();
    bool ok = RLRunLoopAddTimer(other, (RLRunLoopTimerRef)arg, "Elsewhere") &&
              RLRunLoopContainsTimer(other, (RLRunLoopTimerRef)arg, "Elsewhere") &&
              RLRunLoopRemoveTimer(other, (RLRunLoopTimerRef)arg, "Elsewhere");
    return ok ? (void *)1 : NULL;
}

static void test_membership_reuse_across_modes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    RLRunLoopTimerRef t = make(RLAbsoluteTimeGetCurrent() - 1, 1000, count_cb, &count);
    RLIndex rc0 = RLGetRetainCount(t);
    assert_true(RLRunLoopAddTimer(rl, t, "M1"));
    assert_true(RLRunLoopAddTimer(rl, t, "M2"));
    assert_true(RLRunLoopAddTimer(rl, t, "M3"));
    assert_true(RLRunLoopAddTimer(rl, t, "M2")); /* already there: no second membership */
    assert_int_equal(RLGetRetainCount(t), rc0 + 3);
    assert_true(RLRunLoopRemoveTimer(rl, t, "M1"));
    assert_false(RLRunLoopContainsTimer(rl, t, "M1"));
    assert_true(RLRunLoopContainsTimer(rl, t, "M2"));
    assert_true(RLRunLoopContainsTimer(rl, t, "M3"));
    assert_int_equal(RLGetRetainCount(t), rc0 + 2);
    /* Still in this loop through M2 and M3. */
    assert_ptr_equal(rl_test_on_other_thread(add_to_other_loop, t), (void *)1);
    assert_int_equal(RLRunLoopRunInMode("M2", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 1);
    assert_int_equal(RLRunLoopRunInMode("M1", 0, false), kRLRunLoopRunFinished);
    assert_int_equal(count, 1);
    /* Back in M1 (the inline membership again), and out of M2 and M3. */
    assert_true(RLRunLoopAddTimer(rl, t, "M1"));
    assert_true(RLRunLoopRemoveTimer(rl, t, "M2"));
    assert_true(RLRunLoopRemoveTimer(rl, t, "M3"));
    assert_true(RLRunLoopRemoveTimer(rl, t, "M3")); /* not there: a no-op */
    assert_int_equal(RLGetRetainCount(t), rc0 + 1);
    assert_true(RLRunLoopTimerSetNextFireDate(t, RLAbsoluteTimeGetCurrent() - 1));
    assert_int_equal(RLRunLoopRunInMode("M1", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 2);
    assert_int_equal(RLRunLoopRunInMode("M3", 0, false), kRLRunLoopRunFinished);
    assert_int_equal(count, 2);
    assert_true(RLRunLoopRemoveTimer(rl, t, "M1"));
    assert_int_equal(RLGetRetainCount(t), rc0);
    /* In no mode of this loop: another loop may take it. */
    assert_ptr_equal(rl_test_on_other_thread(add_to_other_loop_and_remove, t), (void *)1);
    assert_true(RLRunLoopAddTimer(rl, t, "M2"));
    assert_true(RLRunLoopContainsTimer(rl, t, "M2"));
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_false(RLRunLoopContainsTimer(rl, t, "M2"));
    assert_int_equal(RLGetRetainCount(t), rc0);
    assert_true(RLRelease(t));
}

/* A loop thread leaves three timers behind when it exits: one added and
 * removed (at home there, in no mode), one added and removed twice, one
 * still in a mode. The loop's teardown takes each homeless, so each can
 * join this thread's loop (a timer at home in a dead loop could not, and
 * a pointer to the freed loop would be followed). */
static void *add_and_leave(void *arg) {
    RLRunLoopTimerRef *ts = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    bool ok = RLRunLoopAddTimer(rl, ts[0], "A") && RLRunLoopRemoveTimer(rl, ts[0], "A");
    for (int i = 0; i < 2; i++)
        ok = ok && RLRunLoopAddTimer(rl, ts[1], kRLRunLoopDefaultMode) &&
             RLRunLoopRemoveTimer(rl, ts[1], kRLRunLoopDefaultMode);
    ok = ok && RLRunLoopAddTimer(rl, ts[2], "A") && RLRunLoopAddTimer(rl, ts[2], "B") &&
         RLRunLoopRemoveTimer(rl, ts[2], "A");
    return ok ? (void *)1 : NULL;
}

static void test_timers_left_by_an_exited_loop_join_another(void **state) {
    int count = 0;
    RLRunLoopTimerRef ts[3];
    for (int i = 0; i < 3; i++) ts[i] = make(RLAbsoluteTimeGetCurrent() - 1, 0, count_cb, &count);
    RLIndex rc0 = RLGetRetainCount(ts[0]);
    assert_ptr_equal(rl_test_on_other_thread(add_and_leave, ts), (void *)1);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    for (int i = 0; i < 3; i++) {
        assert_int_equal(RLGetRetainCount(ts[i]), rc0); /* the exited loop holds none */
        assert_true(RLRunLoopAddTimer(rl, ts[i], "Joined"));
        assert_true(RLRunLoopContainsTimer(rl, ts[i], "Joined"));
    }
    assert_int_equal(RLRunLoopRunInMode("Joined", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 3);
    for (int i = 0; i < 3; i++) assert_true(RLRelease(ts[i]));
}

/* Invalidated by its own callout while it is in two modes (inline and
 * allocated memberships): it fires once, leaves both modes, and its
 * context is released once. */
static int release_count;
static void count_release(const void *info) { release_count++; }
static void invalidate_self_cb(RLRunLoopTimerRef t, void *info) {
    (*(int *)info)++;
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_false(RLRunLoopTimerIsValid(t));
}

static void test_invalidate_inside_callout_two_modes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int count = 0;
    release_count = 0;
    RLRunLoopTimerContext c = {0, &count, NULL, count_release, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0.5, 0, 0,
                                               invalidate_self_cb, &c);
    assert_non_null(t);
    RLIndex rc0 = RLGetRetainCount(t);
    assert_true(RLRunLoopAddTimer(rl, t, "IA"));
    assert_true(RLRunLoopAddTimer(rl, t, "IB"));
    /* As CF: a zero-second run times out (the timeout is checked before
     * emptiness) even though the pass emptied the mode. */
    assert_int_equal(RLRunLoopRunInMode("IB", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(count, 1);
    assert_int_equal(release_count, 1);
    assert_false(RLRunLoopContainsTimer(rl, t, "IA"));
    assert_false(RLRunLoopContainsTimer(rl, t, "IB"));
    assert_int_equal(RLGetRetainCount(t), rc0);
    assert_int_equal(RLRunLoopRunInMode("IA", 0, false), kRLRunLoopRunFinished);
    assert_int_equal(count, 1);
    assert_false(RLRunLoopAddTimer(rl, t, "IA"));
    assert_rl_error(kRLErrorInvalidObject);
    assert_true(RLRelease(t));
    assert_int_equal(release_count, 1);
}

/* Added from another thread to the mode a loop sleeps in: the loop must
 * re-arm and fire it with no wake-up call (the timer is due soon, the
 * loop's own deadline is far). Also added while asleep in another mode
 * (no re-arm needed) and to the same mode but due later than the armed
 * time (no re-arm either). */
typedef struct add_while_asleep {
    RLRunLoopTimerRef due_soon, later, other_mode;
} add_while_asleep;

static void add_timers_while_asleep(RLRunLoopRef rl, void *arg) {
    add_while_asleep *a = arg;
    assert_true(RLRunLoopAddTimer(rl, a->later, "XAdd"));
    assert_true(RLRunLoopAddTimer(rl, a->other_mode, "XAddOther"));
    assert_true(RLRunLoopAddTimer(rl, a->due_soon, "XAdd"));
}

static void stop_cb(RLRunLoopTimerRef t, void *info) {
    (*(int *)info)++;
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void test_add_from_another_thread_while_asleep(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int soon = 0, later = 0, other = 0;
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef far = make(now + 1000, 0, count_cb, NULL); /* keeps the mode alive, armed far away */
    assert_true(RLRunLoopAddTimer(rl, far, "XAdd"));
    add_while_asleep a = {
        make(now + 0.05, 0, stop_cb, &soon),
        make(now + 500, 0, count_cb, &later),
        make(now - 1, 0, count_cb, &other),
    };
    double t0 = rl_test_now();
    assert_int_equal(rl_test_run_and_act_while_asleep("XAdd", false, add_timers_while_asleep, &a),
                     kRLRunLoopRunStopped);
    assert_true(rl_test_now() - t0 < 20);
    assert_int_equal(soon, 1);
    assert_int_equal(later, 0);
    assert_int_equal(other, 0);
    assert_true(RLRunLoopContainsTimer(rl, a.later, "XAdd"));
    assert_true(RLRunLoopContainsTimer(rl, a.other_mode, "XAddOther"));
    assert_true(RLRunLoopGetNextTimerFireDate(rl, "XAdd") == RLRunLoopTimerGetNextFireDate(a.later));
    done(a.due_soon);
    done(a.later);
    done(a.other_mode);
    done(far);
}

/* ---- out of memory while folding added timers ---- */

/* The library's fault injection (internal.h): hidden, reachable from code
 * linked with the static library. */
extern _Atomic unsigned rl__faults;
enum { FAULT_TIMER_ARRAY = 1 << 0, FAULT_TIMERFD = 1 << 1 };

static void test_timers_still_fire_when_the_array_cannot_grow(void **state) {
    /* Added timers wait on a list until the loop needs their order; if the
     * mode's array cannot grow then, they stay on the list and are still
     * seen: the next fire date and the due ones are right. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    const char *mode = "OOMFold";
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef due = make(now - 1, 0, name_cb, "due");
    RLRunLoopTimerRef later = make(now + 1000, 0, name_cb, "later");
    RLRunLoopTimerRef soon = make(now + 500, 0, name_cb, "soon");
    atomic_store(&rl__faults, FAULT_TIMER_ARRAY);
    RLRunLoopAddTimer(rl, later, mode);
    RLRunLoopAddTimer(rl, due, mode);
    RLRunLoopAddTimer(rl, soon, mode);
    assert_true(RLRunLoopContainsTimer(rl, soon, mode));
    assert_true(RLRunLoopGetNextTimerFireDate(rl, mode) == now - 1);
    assert_int_equal(RLRunLoopRunInMode(mode, 0, false), kRLRunLoopRunTimedOut);
    assert_trace("due");
    assert_true(RLRunLoopGetNextTimerFireDate(rl, mode) == now + 500);
    /* Removing a timer still on the list. */
    RLRunLoopRemoveTimer(rl, soon, mode);
    assert_true(RLRunLoopGetNextTimerFireDate(rl, mode) == now + 1000);
    /* Memory back: the next look folds them into the array. */
    atomic_store(&rl__faults, 0);
    RLRunLoopAddTimer(rl, soon, mode);
    assert_true(RLRunLoopGetNextTimerFireDate(rl, mode) == now + 500);
    RLRunLoopTimerSetNextFireDate(soon, now - 0.5);
    assert_int_equal(RLRunLoopRunInMode(mode, 0, false), kRLRunLoopRunTimedOut);
    assert_trace("due soon");
    assert_true(RLRunLoopGetNextTimerFireDate(rl, mode) == now + 1000);
    done(due);
    done(later);
    done(soon);
}

/* ---- the timerfd cannot be armed ---- */

/* From 10 s on, stops `rl`'s runs until told the test is done: a loop that
 * never wakes makes the test fail instead of hanging. */
typedef struct {
    RLRunLoopRef rl;
    _Atomic int done;
} watchdog;

static void *watchdog_main(void *arg) {
    watchdog *w = arg;
    for (int i = 0; !atomic_load(&w->done); i++) {
        usleep(10000);
        if (i >= 1000)
            RLRunLoopStop(w->rl);
    }
    return NULL;
}

/* Runs the current loop in `mode` for up to `seconds` with the library's
 * fault bits `faults` set, under a watchdog; *took gets the run's time. */
static RLRunLoopRunResult run_watched(RLRunLoopMode mode, RLTimeInterval seconds, unsigned faults, double *took) {
    watchdog w = {RLRunLoopGetCurrent(), 0};
    pthread_t wd;
    assert_int_equal(pthread_create(&wd, NULL, watchdog_main, &w), 0);
    atomic_store(&rl__faults, faults);
    double t0 = rl_test_now();
    RLRunLoopRunResult r = RLRunLoopRunInMode(mode, seconds, false);
    *took = rl_test_now() - t0;
    atomic_store(&rl__faults, 0);
    atomic_store(&w.done, 1);
    pthread_join(wd, NULL);
    return r;
}

static void test_timers_fire_when_the_timerfd_cannot_be_armed(void **state) {
    /* The loop sleeps until its next timer through the timerfd; if arming
     * it fails, the wait itself must time out then (it used to wait with no
     * time limit: the timer, and the run's own deadline, never came). */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int soon = 0, later = 0;
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef t = make(now + 0.05, 0, stop_cb, &soon);
    RLRunLoopTimerRef far = make(now + 1000, 0, count_cb, &later);
    assert_true(RLRunLoopAddTimer(rl, far, "NoTfd"));
    assert_true(RLRunLoopAddTimer(rl, t, "NoTfd"));
    double took;
    assert_int_equal(run_watched("NoTfd", 30, FAULT_TIMERFD, &took), kRLRunLoopRunStopped);
    assert_int_equal(soon, 1);
    assert_true(took < 8);
    /* The run's own deadline, with only a far timer left. */
    assert_int_equal(run_watched("NoTfd", 0.05, FAULT_TIMERFD, &took), kRLRunLoopRunTimedOut);
    assert_true(took < 8);
    assert_int_equal(later, 0);
    /* Arming works again: the next wait is armed anew (a failed arm is not
     * remembered as armed), and its timer fires. */
    RLRunLoopTimerRef again = make(RLAbsoluteTimeGetCurrent() + 0.02, 0, stop_cb, &soon);
    assert_true(RLRunLoopAddTimer(rl, again, "NoTfd"));
    assert_int_equal(run_watched("NoTfd", 30, 0, &took), kRLRunLoopRunStopped);
    assert_int_equal(soon, 2);
    assert_true(took < 8);
    done(again);
    done(t);
    done(far);
}

static void add_soon_while_asleep(RLRunLoopRef rl, void *arg) {
    atomic_store(&rl__faults, FAULT_TIMERFD);
    assert_true(RLRunLoopAddTimer(rl, arg, "NoTfdX"));
}

static void test_timer_added_from_another_thread_when_the_timerfd_cannot_be_armed(void **state) {
    /* A timer added from another thread re-arms the sleeping loop's
     * timerfd; if that fails, the loop is woken to wait again with a
     * time limit instead of sleeping past the timer. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    int soon = 0, later = 0;
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef far = make(now + 1000, 0, count_cb, &later);
    RLRunLoopTimerRef t = make(now + 0.05, 0, stop_cb, &soon);
    assert_true(RLRunLoopAddTimer(rl, far, "NoTfdX"));
    double t0 = rl_test_now();
    RLRunLoopRunResult r = rl_test_run_and_act_while_asleep("NoTfdX", false, add_soon_while_asleep, t);
    double took = rl_test_now() - t0;
    atomic_store(&rl__faults, 0);
    assert_int_equal(r, kRLRunLoopRunStopped);
    assert_int_equal(soon, 1);
    assert_true(took < 20);
    assert_int_equal(later, 0);
    done(t);
    done(far);
}



/* ---- a timer without a callout ---- */

static int null_ctx_releases;
static void count_null_release(const void *info) { null_ctx_releases++; }

static void test_null_callout_fires_and_does_nothing(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerContext c = {0, NULL, NULL, count_null_release, NULL};
    null_ctx_releases = 0;
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.01, 0, 0, 0, NULL, &c);
    assert_non_null(t);
    assert_true(RLRunLoopAddTimer(rl, t, "NoCallout"));
    /* It keeps the mode alive until it fires, then the mode is empty. */
    assert_int_equal(RLRunLoopRunInMode("NoCallout", 10, false), kRLRunLoopRunFinished);
    assert_false(RLRunLoopTimerIsValid(t));
    assert_int_equal(null_ctx_releases, 1);
    assert_true(RLRelease(t));
}

/* ---- the callout holds its own reference on info ---- */

typedef struct held_info {
    int refs;
    bool freed;
    bool alive_after_self_release;
} held_info;

static const void *held_retain(const void *p) {
    ((held_info *)p)->refs++;
    return p;
}

static void held_release(const void *p) {
    held_info *h = (held_info *)p;
    if (--h->refs == 0)
        h->freed = true; /* stands for free(): nothing may use info after this */
}

static void invalidate_and_release_self(RLRunLoopTimerRef t, void *info) {
    held_info *h = info;
    RLRunLoopTimerInvalidate(t);
    assert_true(RLRelease(t));
    h->alive_after_self_release = !h->freed && h->refs == 1;
}

static void test_callout_may_release_its_own_timer(void **state) {
    held_info h = {0, false, false};
    RLRunLoopTimerContext c = {0, &h, held_retain, held_release, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 1000, 0, 0,
                                               invalidate_and_release_self, &c);
    assert_non_null(t);
    assert_int_equal(h.refs, 1);
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "SelfRelease"));
    assert_int_equal(RLRunLoopRunInMode("SelfRelease", 0, false), kRLRunLoopRunTimedOut);
    assert_true(h.alive_after_self_release);
    assert_int_equal(h.refs, 0);
    assert_true(h.freed);
}

/* An invalidation from another thread while the fire path is retaining
 * info must not free info under it: the context's release waits for it. */
static RLRunLoopTimerRef racing_timer;
static bool retained_freed_info;

static void *invalidate_racing_timer(void *arg) {
    RLRunLoopTimerInvalidate(racing_timer);
    return NULL;
}

static const void *retain_while_invalidated(const void *p) {
    held_info *h = (held_info *)p;
    if (h->refs == 1) /* the fire path's retain, not the creation's */
        rl_test_on_other_thread(invalidate_racing_timer, NULL);
    retained_freed_info = retained_freed_info || h->freed;
    h->refs++;
    return p;
}

static void test_invalidate_while_the_fire_path_retains_info(void **state) {
    held_info h = {0, false, false};
    retained_freed_info = false;
    RLRunLoopTimerContext c = {0, &h, retain_while_invalidated, held_release, NULL};
    racing_timer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0, NULL, &c);
    assert_non_null(racing_timer);
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), racing_timer, "RetainRace"));
    RLRunLoopRunInMode("RetainRace", 0, false);
    assert_false(retained_freed_info);
    assert_int_equal(h.refs, 0);
    assert_false(RLRunLoopTimerIsValid(racing_timer));
    assert_true(RLRelease(racing_timer));
}

/* ---- invalidated timers ---- */

static RLAbsoluteTime date_in_callout, date_after_self_invalidate;

static void note_dates_and_invalidate(RLRunLoopTimerRef t, void *info) {
    date_in_callout = RLRunLoopTimerGetNextFireDate(t);
    RLRunLoopTimerInvalidate(t);
    date_after_self_invalidate = RLRunLoopTimerGetNextFireDate(t);
}

static void test_invalidated_timer_has_no_date_and_no_tolerance(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLAbsoluteTime past = RLAbsoluteTimeGetCurrent() - 1;
    int n = 0;
    RLRunLoopTimerRef once = make(past, 0, count_cb, &n);
    assert_true(RLRunLoopAddTimer(rl, once, "Gone"));
    RLRunLoopRunInMode("Gone", 0, false);
    assert_int_equal(n, 1);
    assert_true(RLRunLoopTimerGetNextFireDate(once) == 0);
    RLErrorClear();
    assert_rl_fails(RLRunLoopTimerSetTolerance(once, 0.5), kRLErrorInvalidObject);
    assert_true(RLRunLoopTimerGetTolerance(once) == 0);

    RLRunLoopTimerRef rep = make(past, 1000, note_dates_and_invalidate, NULL);
    assert_true(RLRunLoopAddTimer(rl, rep, "Gone"));
    RLRunLoopRunInMode("Gone", 0, false);
    assert_true(date_in_callout == past);
    assert_true(date_after_self_invalidate == 0);
    assert_true(RLRunLoopTimerGetNextFireDate(rep) == 0);
    done(once);
    done(rep);
}

/* ---- the grid after many ticks ---- */

/* The library's rescheduling step (hidden; reachable from code linked with
 * the static library): the fire path calls it after each callout with the
 * time the callout returned. */
struct rl__defer;
extern void rl__timer_after_fire_locked(RLRunLoopTimerRef t, RLAbsoluteTime now, struct rl__defer *d);

static void test_grid_is_exact_after_100000_ticks(void **state) {
    /* A 1 ms timer at today's dates (where a double resolves to ~119 ns),
     * fired 100,000 times exactly on time: each next date must be the grid
     * point anchor + k ms itself, not the sum of k rounded additions. The
     * timer is in no loop, so nothing else touches it. */
    const double interval = 0.001;
    const RLAbsoluteTime anchor = RLAbsoluteTimeGetCurrent();
    RLRunLoopTimerRef t = make(anchor, interval, count_cb, NULL);
    long worst_k = -1;
    for (long k = 1; k <= 100000; k++) {
        rl__timer_after_fire_locked(t, RLRunLoopTimerGetNextFireDate(t), NULL);
        if (RLRunLoopTimerGetNextFireDate(t) != anchor + (double)k * interval && worst_k < 0)
            worst_k = k;
    }
    assert_int_equal(worst_k, -1);
    assert_true(RLRunLoopTimerGetNextFireDate(t) == anchor + 100000 * interval);
    /* Late fires skip to the first grid point after now, still on the grid. */
    rl__timer_after_fire_locked(t, anchor + 150000.5 * interval, NULL);
    assert_true(RLRunLoopTimerGetNextFireDate(t) == anchor + 150001.0 * interval);
    /* A new date starts a new grid. */
    RLAbsoluteTime moved = anchor + 0.0005;
    assert_true(RLRunLoopTimerSetNextFireDate(t, moved));
    rl__timer_after_fire_locked(t, moved, NULL);
    rl__timer_after_fire_locked(t, moved + interval, NULL);
    assert_true(RLRunLoopTimerGetNextFireDate(t) == moved + 2.0 * interval);
    done(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_one_shot_fires_once, rl_trace_setup),
        cmocka_unit_test(test_many_context_callback_pairs),
        cmocka_unit_test(test_default_mode_add_and_remove_edges),
        cmocka_unit_test_setup(test_order_of_due_timers, rl_trace_setup),
        cmocka_unit_test_setup(test_equal_dates_fire_in_the_order_they_got_them, rl_trace_setup),
        cmocka_unit_test_setup(test_equal_dates_after_a_repeat, rl_trace_setup),
        cmocka_unit_test_setup(test_repeating_stays_on_grid, rl_trace_setup),
        cmocka_unit_test(test_1ms_repeating_timer_skips_no_date_it_could_fire),
        cmocka_unit_test(test_removing_the_last_reference_releases_after_the_lock),
        cmocka_unit_test_setup(test_missed_periods_fire_once, rl_trace_setup),
        cmocka_unit_test_setup(test_set_next_fire_date_earlier_and_later, rl_trace_setup),
        cmocka_unit_test_setup(test_set_next_fire_date_inside_callout, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_from_another_thread, rl_trace_setup),
        cmocka_unit_test_setup(test_same_timer_in_two_modes, rl_trace_setup),
        cmocka_unit_test_setup(test_tolerance_rules, rl_trace_setup),
        cmocka_unit_test_setup(test_tolerance_coalesces_wakeups, rl_trace_setup),
        cmocka_unit_test_setup(test_one_wakeup_per_timer_expiry, rl_trace_setup),
        cmocka_unit_test_setup(test_context_balance_and_description, rl_trace_setup),
        cmocka_unit_test_setup(test_timer_belongs_to_one_loop, rl_trace_setup),
#if __BLOCKS__
        cmocka_unit_test_setup(test_handler_block, rl_trace_setup),
#endif
        cmocka_unit_test_setup(test_many_timers_add_remove, rl_trace_setup),
        cmocka_unit_test_setup(test_heap_pending_batches, rl_trace_setup),
        cmocka_unit_test_setup(test_common_modes, rl_trace_setup),
        cmocka_unit_test_setup(test_move_earlier_from_another_thread, rl_trace_setup),
        cmocka_unit_test_setup(test_tolerance_change_refiles_timer, rl_trace_setup),
        cmocka_unit_test_setup(test_membership_reuse_across_modes, rl_trace_setup),
        cmocka_unit_test_setup(test_timers_left_by_an_exited_loop_join_another, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_inside_callout_two_modes, rl_trace_setup),
        cmocka_unit_test_setup(test_add_from_another_thread_while_asleep, rl_trace_setup),
        cmocka_unit_test_setup(test_timers_still_fire_when_the_array_cannot_grow, rl_trace_setup),
        cmocka_unit_test_setup(test_timers_fire_when_the_timerfd_cannot_be_armed, rl_trace_setup),
        cmocka_unit_test_setup(test_timer_added_from_another_thread_when_the_timerfd_cannot_be_armed, rl_trace_setup),
        cmocka_unit_test_setup(test_null_callout_fires_and_does_nothing, rl_trace_setup),
        cmocka_unit_test_setup(test_callout_may_release_its_own_timer, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_while_the_fire_path_retains_info, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidated_timer_has_no_date_and_no_tolerance, rl_trace_setup),
        cmocka_unit_test_setup(test_grid_is_exact_after_100000_ticks, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
