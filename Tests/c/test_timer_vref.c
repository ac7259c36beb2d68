/* test_timer_vref.c — the loop's virtual reference on a timer (its inline
 * membership, RLRunLoopTimer.inline_used): counted by RLGetRetainCount as
 * CF counts the loop's reference; the caller's last release leaves the
 * timer to the loop, which frees it when the membership ends (a remove,
 * an invalidation, the one-shot's fire, the loop's teardown); releasing
 * once too often is refused (kRLErrorNotOwner); a thread releasing its last
 * reference while the owner removes the timer frees it exactly once. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "rl_lock.h" /* struct RLRunLoopTimer: inline_used */

static _Atomic int released; /* context releases: one per timer freed (valid at its end) */
static void count_release(const void *info) { atomic_fetch_add(&released, 1); }
static int fired;
static void fire_cb(RLRunLoopTimerRef t, void *info) {
    fired++;
    /* As CF: the loop's reference and the fire path's own. */
    assert_int_equal(RLGetRetainCount(t), 2);
}

static RLRunLoopTimerRef make(RLTimeInterval in) {
    RLRunLoopTimerContext c = {0, NULL, NULL, count_release, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + in, 0, 0, 0, fire_cb, &c);
    assert_non_null(t);
    return t;
}

static bool vref(RLRunLoopTimerRef t) { return ((struct RLRunLoopTimer *)t)->inline_used; }

/* t in rl's default mode by the hot path: the first add claims it (a real
 * reference), the next ones are hot. */
static void hot_add(RLRunLoopRef rl, RLRunLoopTimerRef t) {
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(vref(t));
}

static void test_counts_as_cf(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(100);
    hot_add(rl, t);
    assert_int_equal(RLGetRetainCount(t), 2);
    assert_true(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode));
    assert_false(vref(t));
    assert_int_equal(RLGetRetainCount(t), 1);
    assert_true(RLRetain(t) == t);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_int_equal(RLGetRetainCount(t), 3);
    assert_true(RLRelease(t));
    assert_int_equal(RLGetRetainCount(t), 2);
    atomic_store(&released, 0);
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_int_equal(RLGetRetainCount(t), 1);
    assert_true(RLRelease(t));
    assert_int_equal(atomic_load(&released), 1);
}

static void test_release_then_remove_frees_at_the_remove(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(100);
    hot_add(rl, t);
    atomic_store(&released, 0);
    assert_true(RLRelease(t)); /* the loop's now: alive */
    assert_int_equal(atomic_load(&released), 0);
    assert_int_equal(RLGetRetainCount(t), 1);
    assert_true(RLRunLoopTimerIsValid(t));
    assert_true(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode)); /* freed here */
    assert_int_equal(atomic_load(&released), 1);
}

static void test_release_then_invalidate_frees(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(100);
    hot_add(rl, t);
    atomic_store(&released, 0);
    assert_true(RLRelease(t));
    assert_true(RLRunLoopTimerInvalidate(t)); /* the common CF pattern: ends the membership, frees it */
    assert_int_equal(atomic_load(&released), 1);
}

static void test_release_then_one_shot_fires_and_goes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(-1);
    hot_add(rl, t);
    atomic_store(&released, 0);
    fired = 0;
    assert_true(RLRelease(t));
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    assert_int_equal(fired, 1);
    assert_int_equal(atomic_load(&released), 1); /* invalidated by its fire, freed after the callout */
}

static void test_over_release_refused(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(100);
    hot_add(rl, t);
    assert_true(RLRelease(t));
    assert_rl_fails(RLRelease(t), kRLErrorNotOwner);
    assert_rl_fails(RLRelease(t), kRLErrorNotOwner);
    assert_int_equal(RLGetRetainCount(t), 1);
    /* A borrowed pointer retained and released again: still the loop's. */
    assert_true(RLRetain(t) == t);
    assert_int_equal(RLGetRetainCount(t), 2);
    assert_true(RLRelease(t));
    assert_int_equal(RLGetRetainCount(t), 1);
    atomic_store(&released, 0);
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_int_equal(atomic_load(&released), 1);
}

/* A virtual reference and a real one (a second mode): the caller's release
 * is allowed, the next refused, and the timer goes with its last mode. */
static void test_virtual_and_real_references(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(100);
    hot_add(rl, t);
    assert_true(RLRunLoopAddTimer(rl, t, "Other"));
    assert_int_equal(RLGetRetainCount(t), 3);
    assert_true(RLRelease(t));
    assert_rl_fails(RLRelease(t), kRLErrorNotOwner);
    assert_int_equal(RLGetRetainCount(t), 2);
    atomic_store(&released, 0);
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode)); /* the virtual one ends: kept by Other */
    assert_int_equal(atomic_load(&released), 0);
    assert_int_equal(RLGetRetainCount(t), 1);
    assert_true(RLRunLoopRemoveTimer(rl, t, "Other"));
    assert_int_equal(atomic_load(&released), 1);

    /* The other order: the real one ends first, the orphan goes with the virtual one. */
    t = make(100);
    hot_add(rl, t);
    assert_true(RLRunLoopAddTimer(rl, t, "Other"));
    assert_true(RLRelease(t));
    atomic_store(&released, 0);
    assert_true(RLRunLoopRemoveTimer(rl, t, "Other"));
    assert_int_equal(atomic_load(&released), 0);
    assert_int_equal(RLGetRetainCount(t), 1);
    assert_true(vref(t));
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode));
    assert_int_equal(atomic_load(&released), 1);
}

/* Every timer's first membership holds the virtual reference, whatever
 * the mode and whichever add made it; the common-modes item a real one. */
static void test_first_membership_any_mode(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(100);
    assert_true(RLRunLoopAddTimer(rl, t, "Other")); /* its first add: the claim */
    assert_true(vref(t));
    assert_int_equal(RLGetRetainCount(t), 2);
    assert_true(RLRelease(t));
    assert_rl_fails(RLRelease(t), kRLErrorNotOwner);
    atomic_store(&released, 0);
    assert_true(RLRunLoopTimerInvalidate(t));
    assert_int_equal(atomic_load(&released), 1);

    t = make(100);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopCommonModes));
    assert_true(vref(t));
    assert_int_equal(RLGetRetainCount(t), 3); /* the caller's, the common item's, the default mode's */
    assert_true(RLRelease(t));
    assert_rl_fails(RLRelease(t), kRLErrorNotOwner);
    assert_int_equal(RLGetRetainCount(t), 2);
    atomic_store(&released, 0);
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopCommonModes));
    assert_int_equal(atomic_load(&released), 1);
}

/* A loop torn down with an orphan in it frees it (check-leak, ASan). */
static void *orphan_in_exiting_thread(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = make(100);
    hot_add(rl, t);
    assert_true(RLRelease(t));
    return NULL;
}

static void test_teardown_frees_an_orphan(void **state) {
    atomic_store(&released, 0);
    rl_test_on_other_thread(orphan_in_exiting_thread, NULL);
    assert_int_equal(atomic_load(&released), 1);
}

/* A thread releases its last reference while the owner adds and removes
 * other timers and then removes this one: freed once, whichever is first. */
enum { STRESS_ROUNDS = 3000 };
typedef struct handoff {
    _Atomic(RLRunLoopTimerRef) t;
    _Atomic bool stop;
} handoff;

/* The next timer handed over, NULL once the owner is done. The owner
 * hands its last timer over before it sets `stop`, so a releaser that
 * finds `stop` set looks for a hand-over once more: the one it found
 * empty may have been filled since (it was preempted between the two
 * loads), and that last timer is its to release. */
static RLRunLoopTimerRef take_handoff(handoff *h) {
    for (;;) {
        RLRunLoopTimerRef t = atomic_exchange(&h->t, NULL);
        if (t)
            return t;
        if (atomic_load(&h->stop))
            return atomic_exchange(&h->t, NULL);
    }
}

static void *releaser(void *arg) {
    handoff *h = arg;
    RLRunLoopTimerRef t;
    while ((t = take_handoff(h))) {
        for (volatile int k = rand() % 64; k > 0; k--) {
        }
        if (!RLRelease(t))
            abort();
    }
    return NULL;
}

static void test_release_races_the_owner(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef others[8];
    for (int i = 0; i < 8; i++) {
        others[i] = make(100);
        hot_add(rl, others[i]);
        assert_true(RLRunLoopRemoveTimer(rl, others[i], kRLRunLoopDefaultMode));
    }
    handoff h = {0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, releaser, &h), 0);
    atomic_store(&released, 0);
    for (int r = 0; r < STRESS_ROUNDS; r++) {
        RLRunLoopTimerRef t = make(100);
        hot_add(rl, t);
        while (atomic_load(&h.t)) {
        }
        atomic_store(&h.t, t); /* the thread's reference now; ours is borrowed */
        for (int k = 0; k < r % 16; k++) {
            RLRunLoopTimerRef o = others[k % 8];
            assert_true(RLRunLoopAddTimer(rl, o, kRLRunLoopDefaultMode));
            assert_true(RLRunLoopRemoveTimer(rl, o, kRLRunLoopDefaultMode));
        }
        assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode));
    }
    atomic_store(&h.stop, true);
    assert_int_equal(pthread_join(th, NULL), 0);
    for (int i = 0; i < 8; i++)
        assert_true(RLRelease(others[i]));
    assert_int_equal(atomic_load(&released), STRESS_ROUNDS + 8);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_as_cf),
        cmocka_unit_test(test_release_then_remove_frees_at_the_remove),
        cmocka_unit_test(test_release_then_invalidate_frees),
        cmocka_unit_test(test_release_then_one_shot_fires_and_goes),
        cmocka_unit_test(test_over_release_refused),
        cmocka_unit_test(test_virtual_and_real_references),
        cmocka_unit_test(test_first_membership_any_mode),
        cmocka_unit_test(test_teardown_frees_an_orphan),
        cmocka_unit_test(test_release_races_the_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
