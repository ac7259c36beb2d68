/* test_multiloop.c — one object in several threads' run loops, and loops
 * changed from other threads while they run: what the per-loop locks and
 * their protocol (docs/locking.md) must get right. Signalling and
 * invalidating a source in several loops, timers moved from other threads
 * while their loop sleeps, timers and observers moving between loops,
 * teardown of a loop while another thread adds to it, wake-ups and stops
 * from many threads, an fd source in two loops — and the lock-order
 * detector watching the protocol while all of that runs. */
#include "testutil.h"

#include "rl_lock.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a thread running its own loop until told to quit ------------------ */

typedef struct lthread {
    pthread_t t;
    _Atomic(RLRunLoopRef) rl;
    atomic_bool quit;
    atomic_int runs;
} lthread;

static void *lthread_main(void *arg) {
    lthread *l = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    atomic_store(&l->rl, rl);
    while (!atomic_load(&l->quit)) {
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, false);
        atomic_fetch_add(&l->runs, 1);
    }
    rl_test_unkeep(keep);
    return NULL;
}

static void lthread_start(lthread *l) {
    memset(l, 0, sizeof *l);
    assert_int_equal(pthread_create(&l->t, NULL, lthread_main, l), 0);
    while (!atomic_load(&l->rl))
        sched_yield();
    RLRetain(atomic_load(&l->rl)); /* the test's, past the thread's exit */
}

static void lthread_quit_fn(void *info) {
    atomic_store(&((lthread *)info)->quit, true);
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void lthread_stop(lthread *l) {
    RLRunLoopRef rl = atomic_load(&l->rl);
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, lthread_quit_fn, l));
    assert_true(RLRunLoopWakeUp(rl));
    pthread_join(l->t, NULL);
    RLRelease(rl);
}

/* Waits (at most 10 s) until *v >= want; the assertion after it says more. */
static void wait_for(atomic_int *v, int want) {
    double t0 = rl_test_now();
    while (atomic_load(v) < want && rl_test_now() - t0 < 10)
        sched_yield();
}

/* As wait_for, waking rl meanwhile: for a callout on another loop that
 * must end before rl can act (an observer is not called while its callout
 * runs elsewhere, as CF: a pass of rl that came in the meantime skipped
 * it, and nothing else would wake rl again). */
static void wait_for_waking(atomic_int *v, int want, RLRunLoopRef rl) {
    double t0 = rl_test_now();
    while (atomic_load(v) < want && rl_test_now() - t0 < 10) {
        RLRunLoopWakeUp(rl);
        usleep(1000);
    }
}

enum { K = 3 };

/* ---- a source in several loops ------------------------------------------ */

static atomic_int performs, schedules, cancels;
static _Atomic(RLRunLoopRef) performed_on[64];

static void count_perform(void *info) {
    int i = atomic_fetch_add(&performs, 1);
    if (i < 64)
        atomic_store(&performed_on[i], RLRunLoopGetCurrent());
}
static void count_schedule(void *info, RLRunLoopRef rl, RLRunLoopMode mode) { atomic_fetch_add(&schedules, 1); }
static void count_cancel(void *info, RLRunLoopRef rl, RLRunLoopMode mode) { atomic_fetch_add(&cancels, 1); }

static RLRunLoopSourceRef counting_source(void) {
    RLRunLoopSourceContext c = {0};
    c.schedule = count_schedule;
    c.cancel = count_cancel;
    c.perform = count_perform;
    return RLRunLoopSourceCreate(NULL, 0, &c);
}

/* As CF: a signalled source in several loops is performed once, by
 * whichever loop comes to it first. Signalled from a thread that runs none
 * of them; each signal waits for its perform. */
static void test_signal_source_in_other_loops(void **state) {
    atomic_store(&performs, 0);
    lthread l[K];
    for (int i = 0; i < K; i++)
        lthread_start(&l[i]);
    RLRunLoopSourceRef s = counting_source();
    for (int i = 0; i < K; i++)
        assert_true(RLRunLoopAddSource(atomic_load(&l[i].rl), s, kRLRunLoopDefaultMode));
    enum { N = 50 };
    for (int n = 0; n < N; n++) {
        assert_true(RLRunLoopSourceSignal(s));
        for (int i = 0; i < K; i++)
            assert_true(RLRunLoopWakeUp(atomic_load(&l[i].rl)));
        wait_for(&performs, n + 1);
        assert_int_equal(atomic_load(&performs), n + 1);
    }
    for (int n = 0; n < N; n++) {
        RLRunLoopRef on = atomic_load(&performed_on[n]);
        assert_true(on == atomic_load(&l[0].rl) || on == atomic_load(&l[1].rl) || on == atomic_load(&l[2].rl));
    }
    assert_true(RLRunLoopSourceInvalidate(s));
    RLRelease(s);
    for (int i = 0; i < K; i++)
        lthread_stop(&l[i]);
    assert_int_equal(atomic_load(&performs), N);
}

/* Invalidating a source removes it from every mode of every loop, with one
 * cancel per membership before Invalidate returns, while those loops run
 * and another thread keeps signalling it. */
typedef struct signaller {
    RLRunLoopSourceRef s;
    lthread *l;
    atomic_bool stop;
} signaller;

static void *signal_forever(void *arg) {
    signaller *g = arg;
    while (!atomic_load(&g->stop)) {
        RLRunLoopSourceSignal(g->s); /* fails once invalid: fine */
        for (int i = 0; i < K; i++)
            RLRunLoopWakeUp(atomic_load(&g->l[i].rl));
    }
    return NULL;
}

static void test_invalidate_source_in_several_running_loops(void **state) {
    lthread l[K];
    for (int i = 0; i < K; i++)
        lthread_start(&l[i]);
    long rounds = rl_test_iters(200);
    for (long r = 0; r < rounds; r++) {
        atomic_store(&schedules, 0);
        atomic_store(&cancels, 0);
        RLRunLoopSourceRef s = counting_source();
        for (int i = 0; i < K; i++) {
            RLRunLoopRef rl = atomic_load(&l[i].rl);
            assert_true(RLRunLoopAddSource(rl, s, kRLRunLoopDefaultMode));
            assert_true(RLRunLoopAddSource(rl, s, "Other"));
        }
        assert_int_equal(atomic_load(&schedules), 2 * K);
        signaller g = {s, l, false};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, signal_forever, &g), 0);
        usleep(100);
        assert_true(RLRunLoopSourceInvalidate(s));
        assert_int_equal(atomic_load(&cancels), 2 * K);
        for (int i = 0; i < K; i++) {
            RLRunLoopRef rl = atomic_load(&l[i].rl);
            assert_false(RLRunLoopContainsSource(rl, s, kRLRunLoopDefaultMode));
            assert_false(RLRunLoopContainsSource(rl, s, "Other"));
        }
        assert_false(RLRunLoopSourceIsValid(s));
        atomic_store(&g.stop, true);
        pthread_join(t, NULL);
        assert_rl_fails(RLRunLoopSourceSignal(s), kRLErrorInvalidObject);
        assert_int_equal(atomic_load(&cancels), 2 * K); /* nothing more */
        RLRelease(s);
    }
    for (int i = 0; i < K; i++)
        lthread_stop(&l[i]);
}

/* ---- timers and observers: one loop at a time -------------------------- */

static void nop_observer(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {}

static atomic_int fires;
static _Atomic(RLRunLoopRef) fired_on;
static void count_fire(RLRunLoopTimerRef t, void *info) {
    atomic_store(&fired_on, RLRunLoopGetCurrent());
    atomic_fetch_add(&fires, 1);
}

/* A timer moved to now from another thread while its loop sleeps with no
 * other deadline wakes that loop. */
static void test_timer_moved_while_its_loop_sleeps(void **state) {
    atomic_store(&fires, 0);
    lthread l;
    lthread_start(&l);
    RLRunLoopRef rl = atomic_load(&l.rl);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, count_fire, NULL);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    rl_test_wait_until_waiting(rl);
    assert_true(RLRunLoopTimerSetNextFireDate(t, RLAbsoluteTimeGetCurrent()));
    wait_for(&fires, 1);
    assert_int_equal(atomic_load(&fires), 1);
    assert_ptr_equal(atomic_load(&fired_on), rl);
    /* One-shot: invalidated once its callout has returned (as CF), which
     * the loop's thread may not have reached yet. */
    double t0 = rl_test_now();
    while (RLRunLoopTimerIsValid(t) && rl_test_now() - t0 < 10)
        sched_yield();
    assert_false(RLRunLoopTimerIsValid(t));
    RLRelease(t);
    lthread_stop(&l);
}

/* ---- equal dates: the order timers got them, across threads and loops -- */

static char tie_trace[64];

static void tie_fire(RLRunLoopTimerRef t, void *info) {
    size_t n = strlen(tie_trace);
    snprintf(tie_trace + n, sizeof tie_trace - n, "%s%s", n ? " " : "", (const char *)info);
}

static RLRunLoopTimerRef tie_timer(RLAbsoluteTime date, const char *name) {
    RLRunLoopTimerContext c = {0, (void *)name, NULL, NULL, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, date, 0, 0, 0, tie_fire, &c);
    assert_non_null(t);
    return t;
}

static RLAbsoluteTime tie_date;

static void *tie_create_c(void *arg) { return tie_timer(tie_date, "C"); }

static void *tie_move(void *t) {
    assert_true(RLRunLoopTimerSetNextFireDate(t, tie_date));
    return NULL;
}

/* Timers in one loop with one date fire in the order they got it, also when
 * the dates were given on other threads and in other loops: a timer
 * created on another thread after a timer of this loop was moved fires
 * after it; one moved from another thread fires last; a timer moved in
 * another loop, then brought here, fires before one moved here after it
 * came. */
static void test_equal_dates_in_order_across_threads_and_loops(void **state) {
    RLRunLoopRef here = RLRunLoopGetCurrent();
    tie_date = RLAbsoluteTimeGetCurrent() - 1;
    tie_trace[0] = 0;
    lthread other;
    lthread_start(&other);
    RLRunLoopRef there = atomic_load(&other.rl);
    RLRunLoopTimerRef b = tie_timer(tie_date, "B");
    RLRunLoopTimerRef a = tie_timer(tie_date, "A");
    RLRunLoopTimerRef d = tie_timer(tie_date, "D");
    assert_true(RLRunLoopAddTimer(here, b, "Tie"));
    /* D is moved again and again in the other loop (in a mode it does not
     * run), then comes here. */
    assert_true(RLRunLoopAddTimer(there, d, "Tie"));
    for (int i = 0; i < 5; i++)
        assert_true(RLRunLoopTimerSetNextFireDate(d, tie_date));
    assert_true(RLRunLoopRemoveTimer(there, d, "Tie"));
    assert_true(RLRunLoopAddTimer(here, d, "Tie"));
    assert_true(RLRunLoopAddTimer(here, a, "Tie"));
    assert_true(RLRunLoopTimerSetNextFireDate(a, tie_date)); /* here: after D */
    RLRunLoopTimerRef c = rl_test_on_other_thread(tie_create_c, NULL); /* after A */
    assert_true(RLRunLoopAddTimer(here, c, "Tie"));
    rl_test_on_other_thread(tie_move, b); /* here, from another thread: last */
    assert_int_equal(RLRunLoopRunInMode("Tie", 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(tie_trace, "D A C B");
    RLRelease(a);
    RLRelease(b);
    RLRelease(c);
    RLRelease(d);
    lthread_stop(&other);
}

static void *tie_create_x(void *arg) { return tie_timer(tie_date, "X"); }

/* A timer that got its date on another thread than the one adding it is
 * ordered by that add, as CF orders equal dates by insertion: created
 * elsewhere before Y was created here, added after it, it fires after it.
 * (Creation writes nothing another thread reads: its stamp says nothing of
 * the order of dates given on other threads.) */
static void test_equal_dates_given_elsewhere_fire_in_the_order_added(void **state) {
    RLRunLoopRef here = RLRunLoopGetCurrent();
    tie_date = RLAbsoluteTimeGetCurrent() - 1;
    tie_trace[0] = 0;
    RLRunLoopTimerRef x = rl_test_on_other_thread(tie_create_x, NULL);
    RLRunLoopTimerRef y = tie_timer(tie_date, "Y");
    RLRunLoopTimerRef z = tie_timer(tie_date, "Z");
    assert_true(RLRunLoopAddTimer(here, y, "TieAdd"));
    assert_true(RLRunLoopAddTimer(here, x, "TieAdd"));
    assert_true(RLRunLoopAddTimer(here, z, "TieAdd")); /* created here after Y, before X came: kept */
    assert_int_equal(RLRunLoopRunInMode("TieAdd", 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(tie_trace, "Y Z X");
    RLRelease(x);
    RLRelease(y);
    RLRelease(z);
}

/* A timer in one loop is refused by another; once out of the first loop's
 * modes it may join the second, including after the first loop's thread is
 * gone (and it fires there). The same holds for observers. */
static void test_timer_and_observer_move_between_loops(void **state) {
    atomic_store(&fires, 0);
    lthread a, b;
    lthread_start(&a);
    lthread_start(&b);
    RLRunLoopRef ra = atomic_load(&a.rl), rb = atomic_load(&b.rl);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, count_fire, NULL);
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAllActivities, true, 0,
                                                     nop_observer, NULL);
    assert_true(RLRunLoopAddTimer(ra, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddObserver(ra, o, "Other"));
    assert_rl_fails(RLRunLoopAddTimer(rb, t, kRLRunLoopDefaultMode), kRLErrorInvalidState);
    assert_rl_fails(RLRunLoopAddObserver(rb, o, kRLRunLoopDefaultMode), kRLErrorInvalidState);
    assert_false(RLRunLoopContainsTimer(rb, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopContainsTimer(ra, t, kRLRunLoopDefaultMode));
    /* Out of a's modes, into b's, and back. */
    assert_true(RLRunLoopRemoveTimer(ra, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveObserver(ra, o, "Other"));
    assert_true(RLRunLoopAddTimer(rb, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddObserver(rb, o, "Other"));
    assert_rl_fails(RLRunLoopAddTimer(ra, t, kRLRunLoopDefaultMode), kRLErrorInvalidState);
    assert_true(RLRunLoopRemoveTimer(rb, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveObserver(rb, o, "Other"));
    assert_true(RLRunLoopAddTimer(ra, t, "Other"));
    assert_true(RLRunLoopRemoveTimer(ra, t, "Other"));
    /* a's thread exits while a is still the timer's last loop. */
    RLRetain(ra);
    lthread_stop(&a);
    assert_rl_fails(RLRunLoopAddTimer(ra, t, kRLRunLoopDefaultMode), kRLErrorInvalidState);
    RLRelease(ra);
    assert_true(RLRunLoopAddTimer(rb, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddObserver(rb, o, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopTimerSetNextFireDate(t, RLAbsoluteTimeGetCurrent()));
    assert_true(RLRunLoopWakeUp(rb));
    wait_for(&fires, 1);
    assert_int_equal(atomic_load(&fires), 1);
    assert_ptr_equal(atomic_load(&fired_on), rb);
    RLRelease(t); /* invalidated by its firing; b no longer holds it */
    assert_true(RLRunLoopObserverInvalidate(o));
    RLRelease(o);
    lthread_stop(&b);
}

/* A callout that moves its own timer or observer to another loop: the pass
 * finishes with it under its new loop's lock, and the new loop calls it. */
typedef struct mover {
    RLRunLoopRef from, to;
    atomic_int calls_from, calls_to;
} mover;

static void moving_timer(RLRunLoopTimerRef t, void *info) {
    mover *m = info;
    if (RLRunLoopGetCurrent() == m->to) {
        atomic_fetch_add(&m->calls_to, 1);
        return;
    }
    atomic_fetch_add(&m->calls_from, 1);
    assert_true(RLRunLoopRemoveTimer(m->from, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddTimer(m->to, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopTimerSetNextFireDate(t, RLAbsoluteTimeGetCurrent()));
    assert_true(RLRunLoopWakeUp(m->to));
}

static void moving_observer(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    mover *m = info;
    if (RLRunLoopGetCurrent() == m->to) {
        atomic_fetch_add(&m->calls_to, 1);
        return;
    }
    if (atomic_fetch_add(&m->calls_from, 1) > 0)
        return;
    assert_true(RLRunLoopRemoveObserver(m->from, o, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddObserver(m->to, o, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopWakeUp(m->to));
}

static void test_callout_moves_its_item_to_another_loop(void **state) {
    lthread a, b;
    lthread_start(&a);
    lthread_start(&b);
    mover mt = {atomic_load(&a.rl), atomic_load(&b.rl), 0, 0};
    RLRunLoopTimerContext tc = {0, &mt, NULL, NULL, NULL};
    /* Repeating: firing on b must not invalidate it on the way. */
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1000, 1000, 0, 0, moving_timer, &tc);
    assert_true(RLRunLoopAddTimer(mt.from, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopTimerSetNextFireDate(t, RLAbsoluteTimeGetCurrent()));
    assert_true(RLRunLoopWakeUp(mt.from));
    wait_for(&mt.calls_to, 1);
    assert_int_equal(atomic_load(&mt.calls_from), 1);
    assert_int_equal(atomic_load(&mt.calls_to), 1);
    assert_true(RLRunLoopContainsTimer(mt.to, t, kRLRunLoopDefaultMode));
    assert_false(RLRunLoopContainsTimer(mt.from, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopTimerIsValid(t));
    assert_true(RLRunLoopTimerInvalidate(t));
    RLRelease(t);

    mover mo = {atomic_load(&a.rl), atomic_load(&b.rl), 0, 0};
    RLRunLoopObserverContext oc = {0, &mo, NULL, NULL, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAllActivities, true, 0, moving_observer, &oc);
    assert_true(RLRunLoopAddObserver(mo.from, o, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopWakeUp(mo.from));
    wait_for_waking(&mo.calls_to, 1, mo.to);
    assert_true(atomic_load(&mo.calls_to) >= 1);
    assert_true(RLRunLoopContainsObserver(mo.to, o, kRLRunLoopDefaultMode));
    assert_false(RLRunLoopContainsObserver(mo.from, o, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopObserverInvalidate(o));
    RLRelease(o);
    lthread_stop(&a);
    lthread_stop(&b);
}

/* Observers removed, invalidated and released by another thread while the
 * loop's passes have them pinned for their callouts. */
static atomic_int observed;
static void count_observed(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) { atomic_fetch_add(&observed, 1); }

static void test_observers_go_while_pinned(void **state) {
    lthread l;
    lthread_start(&l);
    RLRunLoopRef rl = atomic_load(&l.rl);
    atomic_store(&observed, 0);
    for (long i = 0; i < rl_test_iters(3000); i++) {
        RLRunLoopObserverRef o[4];
        for (int k = 0; k < 4; k++) {
            o[k] = RLRunLoopObserverCreate(NULL, kRLRunLoopAllActivities, (k & 1) != 0, k, count_observed, NULL);
            assert_true(RLRunLoopAddObserver(rl, o[k], kRLRunLoopDefaultMode));
        }
        RLRunLoopWakeUp(rl);
        for (int k = 0; k < 4; k++) {
            if (k & 2)
                assert_true(RLRunLoopObserverInvalidate(o[k]));
            else
                assert_true(RLRunLoopRemoveObserver(rl, o[k], kRLRunLoopDefaultMode));
            RLRelease(o[k]);
        }
    }
    lthread_stop(&l);
}

/* Freed while its last loop (its home) lives on: the loop forgets it. */
static void test_timer_freed_after_leaving_a_live_loop(void **state) {
    lthread l;
    lthread_start(&l);
    RLRunLoopRef rl = atomic_load(&l.rl);
    for (long i = 0; i < rl_test_iters(1000); i++) {
        RLRunLoopTimerRef t =
            RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, count_fire, NULL);
        assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
        assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode));
        RLRelease(t);
    }
    lthread_stop(&l);
}

/* ---- teardown of a loop while another thread adds to it ---------------- */

typedef struct doomed {
    _Atomic(RLRunLoopRef) rl;
    atomic_bool go;
} doomed;

static void *doomed_main(void *arg) {
    doomed *d = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRetain(rl); /* the test's */
    atomic_store(&d->rl, rl);
    while (!atomic_load(&d->go))
        sched_yield();
    return NULL; /* the loop is torn down at exit */
}

static void test_teardown_while_another_thread_adds(void **state) {
    long rounds = rl_test_iters(300);
    for (long r = 0; r < rounds; r++) {
        atomic_store(&schedules, 0);
        atomic_store(&cancels, 0);
        doomed d = {NULL, false};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, doomed_main, &d), 0);
        while (!atomic_load(&d.rl))
            sched_yield();
        RLRunLoopRef rl = atomic_load(&d.rl);
        RLRunLoopSourceRef s = counting_source();
        RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, count_fire, NULL);
        RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAllActivities, true, 0,
                                                         nop_observer, NULL);
        atomic_store(&d.go, true);
        /* Add and remove until the loop is gone: every add either lands
         * (and the teardown removes it) or fails with InvalidState. */
        for (int i = 0; i < 100000; i++) {
            bool ok = RLRunLoopAddSource(rl, s, i & 1 ? kRLRunLoopCommonModes : "M");
            ok &= RLRunLoopAddTimer(rl, t, i & 1 ? kRLRunLoopDefaultMode : "M");
            ok &= RLRunLoopAddObserver(rl, o, "M");
            if (!ok) {
                assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidState);
                break;
            }
            RLRunLoopRemoveTimer(rl, t, "M");
        }
        pthread_join(th, NULL);
        assert_rl_fails(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode), kRLErrorInvalidState);
        assert_false(RLRunLoopContainsSource(rl, s, "M"));
        assert_false(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
        assert_false(RLRunLoopContainsObserver(rl, o, "M"));
        assert_int_equal(atomic_load(&cancels), atomic_load(&schedules));
        /* Nothing points at the dead loop: both can join this thread's. */
        RLRunLoopRef mine = RLRunLoopGetCurrent();
        assert_true(RLRunLoopAddTimer(mine, t, "Parked"));
        assert_true(RLRunLoopAddObserver(mine, o, "Parked"));
        assert_true(RLRunLoopTimerInvalidate(t));
        assert_true(RLRunLoopObserverInvalidate(o));
        assert_true(RLRunLoopSourceInvalidate(s));
        RLRelease(s);
        RLRelease(t);
        RLRelease(o);
        RLRelease(rl);
    }
}

/* ---- wake-ups and stops from other threads ----------------------------- */

typedef struct poker {
    RLRunLoopRef rl;
    long n;
    atomic_int failed;
} poker;

static void *poke(void *arg) {
    poker *p = arg;
    for (long i = 0; i < p->n; i++) {
        bool ok = (i & 1) ? RLRunLoopStop(p->rl) : RLRunLoopWakeUp(p->rl);
        if (!ok)
            atomic_fetch_add(&p->failed, 1);
    }
    return NULL;
}

static void test_wakeup_and_stop_from_many_threads(void **state) {
    lthread l;
    lthread_start(&l);
    enum { P = 4 };
    poker p[P];
    for (int i = 0; i < P; i++)
        p[i] = (poker){atomic_load(&l.rl), rl_test_iters(20000), 0};
    rl_test_run_threads(P, poke, p, sizeof p[0]);
    for (int i = 0; i < P; i++)
        assert_int_equal(atomic_load(&p[i].failed), 0);
    int runs = atomic_load(&l.runs);
    lthread_stop(&l); /* still answers */
    assert_true(atomic_load(&l.runs) > runs);
}

/* ---- an fd source in two loops ------------------------------------------ */

static atomic_int reads;
static void count_read(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    if (types & kRLFileDescriptorReadCallBack)
        atomic_fetch_add(&reads, 1);
}

/* The callbacks are one-shot across loops: a readiness enabled once is
 * delivered once, by one of the loops, however many it is in; enabling
 * again (from a third thread) re-arms it in all of them. */
static void test_fd_source_in_two_loops_delivers_once(void **state) {
    atomic_store(&reads, 0);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    lthread a, b;
    lthread_start(&a);
    lthread_start(&b);
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, count_read, NULL);
    RLRunLoopSourceRef s = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_true(RLRunLoopAddSource(atomic_load(&a.rl), s, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddSource(atomic_load(&b.rl), s, kRLRunLoopDefaultMode));
    assert_int_equal(write(p[1], "x", 1), 1);
    for (int n = 1; n <= 20; n++) {
        assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
        wait_for(&reads, n);
        usleep(2000); /* room for a wrong second delivery */
        assert_int_equal(atomic_load(&reads), n);
    }
    assert_true(RLFileDescriptorInvalidate(f)); /* leaves both epoll sets, closes p[0] */
    assert_false(RLRunLoopContainsSource(atomic_load(&a.rl), s, kRLRunLoopDefaultMode));
    assert_false(RLRunLoopContainsSource(atomic_load(&b.rl), s, kRLRunLoopDefaultMode));
    RLRelease(s);
    RLRelease(f);
    close(p[1]);
    lthread_stop(&a);
    lthread_stop(&b);
}

/* The callout enables itself again (the loops keep such an fd armed
 * instead of re-arming it each time): every byte is still read once, by
 * one loop or the other, and once the pipe is empty neither loop spins. */
static atomic_int got, wakes_a, wakes_b;
static void read_and_reenable(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    char c;
    if (read(RLFileDescriptorGetNativeDescriptor(f), &c, 1) == 1)
        atomic_fetch_add(&got, 1);
    (void)RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
}

static void count_wake_into(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    atomic_fetch_add((atomic_int *)info, 1);
}

static RLRunLoopObserverRef watch_wakes(RLRunLoopRef rl, atomic_int *into) {
    RLRunLoopObserverContext oc = {0, into, NULL, NULL, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wake_into, &oc);
    assert_non_null(o);
    assert_true(RLRunLoopAddObserver(rl, o, kRLRunLoopDefaultMode));
    RLRunLoopWakeUp(rl);
    return o;
}

static void test_fd_kept_enabled_in_two_loops(void **state) {
    atomic_store(&got, 0);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    lthread a, b;
    lthread_start(&a);
    lthread_start(&b);
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, read_and_reenable, NULL);
    RLRunLoopSourceRef s = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_true(RLRunLoopAddSource(atomic_load(&a.rl), s, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddSource(atomic_load(&b.rl), s, kRLRunLoopDefaultMode));
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    for (int n = 1; n <= 200; n++) {
        assert_int_equal(write(p[1], "x", 1), 1);
        wait_for(&got, n);
        assert_int_equal(atomic_load(&got), n);
    }
    /* Quiet: nothing to read, the callback enabled in both loops. */
    usleep(20000);
    atomic_store(&wakes_a, 0);
    atomic_store(&wakes_b, 0);
    RLRunLoopObserverRef oa = watch_wakes(atomic_load(&a.rl), &wakes_a);
    RLRunLoopObserverRef ob = watch_wakes(atomic_load(&b.rl), &wakes_b);
    usleep(100000);
    assert_true(atomic_load(&wakes_a) <= 5); /* not thousands */
    assert_true(atomic_load(&wakes_b) <= 5);
    assert_int_equal(atomic_load(&got), 200);
    /* Still served by one of them. */
    assert_int_equal(write(p[1], "y", 1), 1);
    wait_for(&got, 201);
    assert_int_equal(atomic_load(&got), 201);
    RLRunLoopObserverInvalidate(oa);
    RLRunLoopObserverInvalidate(ob);
    RLRelease(oa);
    RLRelease(ob);
    assert_true(RLFileDescriptorInvalidate(f));
    RLRelease(s);
    RLRelease(f);
    close(p[1]);
    lthread_stop(&a);
    lthread_stop(&b);
}

/* A callout that enables its own fd again in one loop re-arms it in the
 * source's other loops at once, not only in its own (which reads every
 * wish again after its callouts). Loop B is kept busy in a callout of its
 * own while this thread's loop delivers and re-enables; then only B runs,
 * and it must get the next byte. */
static atomic_int b_busy, b_release;
static _Atomic(RLRunLoopRef) read_on[4];
static atomic_int nread_on;

static void hold_loop(void *info) {
    (void)info;
    atomic_store(&b_busy, 1);
    double t0 = rl_test_now();
    while (!atomic_load(&b_release) && rl_test_now() - t0 < 10)
        usleep(1000);
}

static void read_note_and_reenable(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    char c;
    bool one = read(RLFileDescriptorGetNativeDescriptor(f), &c, 1) == 1;
    if (one) {
        int n = atomic_fetch_add(&nread_on, 1);
        if (n < 4)
            atomic_store(&read_on[n], RLRunLoopGetCurrent());
    }
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    /* Counted last: the test reads read_on, and invalidates f, once it sees this. */
    if (one)
        atomic_fetch_add(&got, 1);
}

static void test_callout_enable_rearms_the_other_loop(void **state) {
    atomic_store(&got, 0);
    atomic_store(&nread_on, 0);
    atomic_store(&b_busy, 0);
    atomic_store(&b_release, 0);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    lthread b;
    lthread_start(&b);
    RLRunLoopRef a = RLRunLoopGetCurrent(), brl = atomic_load(&b.rl);
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, read_note_and_reenable, NULL);
    RLRunLoopSourceRef s = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_true(RLRunLoopAddSource(a, s, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddSource(brl, s, kRLRunLoopDefaultMode));
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    usleep(20000); /* B waits with the fd armed */
    assert_true(RLRunLoopPerformFunction(brl, kRLRunLoopDefaultMode, hold_loop, NULL));
    assert_true(RLRunLoopWakeUp(brl));
    wait_for(&b_busy, 1);
    assert_int_equal(atomic_load(&b_busy), 1);
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(atomic_load(&got), 1);
    assert_ptr_equal(atomic_load(&read_on[0]), a);
    atomic_store(&b_release, 1);
    usleep(20000); /* B back to waiting */
    assert_int_equal(write(p[1], "y", 1), 1);
    wait_for(&got, 2);
    assert_int_equal(atomic_load(&got), 2);
    assert_ptr_equal(atomic_load(&read_on[1]), brl);
    assert_true(RLFileDescriptorInvalidate(f));
    RLRelease(s);
    RLRelease(f);
    close(p[1]);
    lthread_stop(&b);
}

/* ---- the protocol, checked by the lock-order detector ------------------ */

static atomic_int reports;
static void count_report(const RLLockDebugReport *r, void *info) { atomic_fetch_add(&reports, 1); }

/* With the detector on, the cross-loop cases above report nothing; a
 * thread breaking the protocol is reported at once, whichever loops and
 * items it uses (the locks report as classes). */
static void test_lock_protocol_is_checked(void **state) {
    bool was = RLLockDebugIsEnabled();
    RLLockDebugSetEnabled(true);
    RLLockDebugReset();
    atomic_store(&reports, 0);
    RLLockDebugSetReportHandler(count_report, NULL);
    test_signal_source_in_other_loops(state);
    test_timer_and_observer_move_between_loops(state);
    test_fd_source_in_two_loops_delivers_once(state);
    test_fd_kept_enabled_in_two_loops(state);
    test_callout_enable_rearms_the_other_loop(state);
    assert_int_equal(atomic_load(&reports), 0);
#if RL_LOCKCLASS /* the loop's own locks report in such a build only (rl_lockclass.h; make check-lockdep) */
    lthread other;
    lthread_start(&other);
    RLRunLoopRef a = RLRunLoopGetCurrent(), b = atomic_load(&other.rl);
    RLRunLoopSourceRef s = counting_source();
    /* Two loop locks at once. */
    rl__loop_lock(a);
    rl__loop_lock(b);
    rl__loop_unlock(b);
    rl__loop_unlock(a);
    assert_int_equal(atomic_load(&reports), 1);
    /* An item lock, then a loop lock. */
    rl__olock_lock(&s->lock);
    rl__loop_lock(a);
    rl__loop_unlock(a);
    rl__olock_unlock(&s->lock);
    assert_int_equal(atomic_load(&reports), 2);
    RLRelease(s);
    lthread_stop(&other);
#endif
    RLLockDebugSetReportHandler(NULL, NULL);
    RLLockDebugReset();
    RLLockDebugSetEnabled(was);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signal_source_in_other_loops),
        cmocka_unit_test(test_invalidate_source_in_several_running_loops),
        cmocka_unit_test(test_timer_moved_while_its_loop_sleeps),
        cmocka_unit_test(test_timer_and_observer_move_between_loops),
        cmocka_unit_test(test_equal_dates_in_order_across_threads_and_loops),
        cmocka_unit_test(test_equal_dates_given_elsewhere_fire_in_the_order_added),
        cmocka_unit_test(test_timer_freed_after_leaving_a_live_loop),
        cmocka_unit_test(test_callout_moves_its_item_to_another_loop),
        cmocka_unit_test(test_observers_go_while_pinned),
        cmocka_unit_test(test_teardown_while_another_thread_adds),
        cmocka_unit_test(test_wakeup_and_stop_from_many_threads),
        cmocka_unit_test(test_fd_source_in_two_loops_delivers_once),
        cmocka_unit_test(test_fd_kept_enabled_in_two_loops),
        cmocka_unit_test(test_callout_enable_rearms_the_other_loop),
        cmocka_unit_test(test_lock_protocol_is_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
