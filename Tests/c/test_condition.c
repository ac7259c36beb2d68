/* test_condition.c — RLCondition (NSCondition): lock, wait/signal/broadcast,
 * timed waits, misuse, the guide's Listings 4-3/4-4, exact-total stress. */
#include "testutil.h"
#include "lockutil.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void test_lock_forms(void **state) {
    RLConditionRef c = RLConditionCreate();
    assert_non_null(c);
    assert_string_equal(RLGetTypeName(c), "RLCondition");
    assert_true(RLConditionLock(c));
    assert_rl_fails(RLConditionLock(c), kRLErrorWouldDeadlock);
    assert_rl_fails(RLConditionTryLock(c), kRLErrorBusy);
    assert_true(RLConditionUnlock(c));
    assert_true(RLConditionTryLock(c));
    assert_true(RLConditionUnlock(c));
    assert_true(RLConditionLockBeforeDate(c, RLAbsoluteTimeGetCurrent() - 1));
    assert_true(RLConditionUnlock(c));
    assert_rl_fails(RLConditionUnlock(c), kRLErrorNotLocked);
    /* Signalling with nobody waiting is fine, locked or not. */
    assert_true(RLConditionSignal(c));
    assert_true(RLConditionBroadcast(c));
    assert_true(RLRelease(c));
}

static void *wait_from_thread(void *arg) {
    RLConditionRef c = arg;
    bool ok = RLConditionWait(c);
    RLErrorCode code = RLErrorGetLast().code;
    bool unlocked = RLConditionUnlock(c);
    RLErrorCode code2 = RLErrorGetLast().code;
    return (void *)(intptr_t)(!ok && code == kRLErrorNotOwner && !unlocked && code2 == kRLErrorNotOwner);
}

static void test_misuse(void **state) {
    RLConditionRef c = RLConditionCreate();
    /* Waiting without the lock returns at once with an error. */
    assert_rl_fails(RLConditionWait(c), kRLErrorNotLocked);
    assert_rl_fails(RLConditionWaitUntilDate(c, RLAbsoluteTimeGetCurrent() + 1000), kRLErrorNotLocked);
    assert_true(RLConditionLock(c));
    /* Another thread may neither wait on nor unlock our lock. */
    assert_true((intptr_t)rl_test_on_other_thread(wait_from_thread, c));
    assert_rl_fails(RLConditionWaitUntilDate(c, NAN), kRLErrorInvalidArgument);
    assert_rl_fails(RLRelease(c), kRLErrorBusy);
    assert_true(RLConditionUnlock(c));

    assert_rl_fails(RLConditionLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionTryLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockBeforeDate(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionWait(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionWaitUntilDate(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionSignal(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionBroadcast(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionSetName(NULL, "x"), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionCopyName(NULL), kRLErrorInvalidArgument);
    RLLockRef plain = RLLockCreate();
    assert_rl_fails(RLConditionSignal((RLConditionRef)plain), kRLErrorInvalidObject);
    assert_true(RLRelease(plain));
    assert_true(RLRelease(c));
}

static void test_names(void **state) {
    RLConditionRef c = RLConditionCreate();
    assert_true(RLConditionSetName(c, "work"));
    char *name = RLConditionCopyName(c);
    assert_string_equal(name, "work");
    free(name);
    assert_true(RLRelease(c));
}

static void test_wait_until_date_times_out_with_lock_held(void **state) {
    RLConditionRef c = RLConditionCreate();
    assert_true(RLConditionLock(c));
    double start = rl_test_now();
    assert_rl_fails(RLConditionWaitUntilDate(c, RLAbsoluteTimeGetCurrent() + 0.05), kRLErrorTimedOut);
    assert_true(rl_test_now() - start >= 0.04);
    /* The lock is ours again. */
    assert_rl_fails(RLConditionTryLock(c), kRLErrorBusy);
    assert_rl_fails(RLConditionWaitUntilDate(c, RLAbsoluteTimeGetCurrent() - 10), kRLErrorTimedOut);
    assert_true(RLConditionUnlock(c));
    assert_true(RLRelease(c));
}

/* The guide's Listings 4-3 and 4-4: workers consume timeToDoWork units. */
typedef struct work {
    RLConditionRef cond;
    long time_to_do_work;
    long done;
    long units;
    int failures;
} work;

static void *worker(void *arg) {
    work *w = *(work **)arg;
    for (;;) {
        RLConditionLock(w->cond);
        while (w->time_to_do_work <= 0 && w->done < w->units)
            if (!RLConditionWait(w->cond))
                w->failures++;
        if (w->done == w->units) {
            RLConditionUnlock(w->cond);
            return NULL;
        }
        w->time_to_do_work--;
        w->done++;
        if (w->done == w->units)
            RLConditionBroadcast(w->cond); /* let the others finish */
        RLConditionUnlock(w->cond);
    }
}

static void test_guide_listing_signal(void **state) {
    enum { WORKERS = 4 };
    work w = {RLConditionCreate(), 0, 0, rl_test_iters(20000), 0};
    work *args[WORKERS];
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        args[i] = &w;
        assert_int_equal(pthread_create(&t[i], NULL, worker, &args[i]), 0);
    }
    for (long i = 0; i < w.units; i++) {
        RLConditionLock(w.cond);
        w.time_to_do_work++;
        RLConditionSignal(w.cond);
        RLConditionUnlock(w.cond);
    }
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(w.failures, 0);
    assert_int_equal(w.done, w.units);
    assert_int_equal(w.time_to_do_work, 0);
    assert_true(RLRelease(w.cond));
}

typedef struct gate {
    RLConditionRef cond;
    int open;
    int arrived;
    int passed;
} gate;

static void *wait_at_gate(void *arg) {
    gate *g = *(gate **)arg;
    RLConditionLock(g->cond);
    g->arrived++;
    RLConditionBroadcast(g->cond);
    while (!g->open)
        RLConditionWait(g->cond);
    g->passed++;
    RLConditionUnlock(g->cond);
    return NULL;
}

static void test_broadcast_wakes_everyone(void **state) {
    enum { WAITERS = 6 };
    gate g = {RLConditionCreate(), 0, 0, 0};
    gate *args[WAITERS];
    pthread_t t[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        args[i] = &g;
        assert_int_equal(pthread_create(&t[i], NULL, wait_at_gate, &args[i]), 0);
    }
    RLConditionLock(g.cond);
    while (g.arrived < WAITERS)
        RLConditionWait(g.cond);
    g.open = 1;
    assert_true(RLConditionBroadcast(g.cond));
    RLConditionUnlock(g.cond);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(g.passed, WAITERS);
    assert_true(RLRelease(g.cond));
}

static bool stress_round(rl_stress *s, long i) {
    if (!RLConditionLock(s->lock))
        return false;
    rl_stress_bump(s);
    return RLConditionUnlock(s->lock);
}

static void test_stress_exact_total(void **state) {
    rl_stress s = {.lock = RLConditionCreate(), .round = stress_round};
    rl_stress_run(&s);
    assert_rl_stress_exact_total(&s);
    assert_true(RLRelease(s.lock));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_forms),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_wait_until_date_times_out_with_lock_held),
        cmocka_unit_test(test_guide_listing_signal),
        cmocka_unit_test(test_broadcast_wakes_everyone),
        cmocka_unit_test(test_stress_exact_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
