/* test_condition.c — RLCondition (NSCondition): lock, wait/signal/broadcast,
 * timed waits, misuse, the guide's Listings 4-3/4-4, exact-total stress. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { STRESS_THREADS = 8 };

static void *on_other_thread(void *(*fn)(void *), void *arg) {
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    pthread_join(t, &res);
    return res;
}

static void test_lock_forms(void **state) {
    RLConditionRef c = RLConditionCreate();
    assert_non_null(c);
    assert_string_equal(RLGetTypeName(c), "RLCondition");
    assert_true(RLConditionLock(c));
    assert_false(RLConditionLock(c));
    assert_rl_error(kRLErrorWouldDeadlock);
    assert_false(RLConditionTryLock(c));
    assert_rl_error(kRLErrorBusy);
    assert_true(RLConditionUnlock(c));
    assert_true(RLConditionTryLock(c));
    assert_true(RLConditionUnlock(c));
    assert_true(RLConditionLockBeforeDate(c, RLAbsoluteTimeGetCurrent() - 1));
    assert_true(RLConditionUnlock(c));
    assert_false(RLConditionUnlock(c));
    assert_rl_error(kRLErrorNotLocked);
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
    assert_false(RLConditionWait(c));
    assert_rl_error(kRLErrorNotLocked);
    assert_false(RLConditionWaitUntilDate(c, RLAbsoluteTimeGetCurrent() + 1000));
    assert_rl_error(kRLErrorNotLocked);
    assert_true(RLConditionLock(c));
    /* Another thread may neither wait on nor unlock our lock. */
    assert_true((intptr_t)on_other_thread(wait_from_thread, c));
    assert_false(RLConditionWaitUntilDate(c, NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRelease(c));
    assert_rl_error(kRLErrorBusy);
    assert_true(RLConditionUnlock(c));

    assert_false(RLConditionLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionUnlock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionTryLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockBeforeDate(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionWait(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionWaitUntilDate(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionSignal(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionBroadcast(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionSetName(NULL, "x"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLConditionCopyName(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLLockRef plain = RLLockCreate();
    assert_false(RLConditionSignal((RLConditionRef)plain));
    assert_rl_error(kRLErrorInvalidObject);
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
    assert_false(RLConditionWaitUntilDate(c, RLAbsoluteTimeGetCurrent() + 0.05));
    assert_rl_error(kRLErrorTimedOut);
    assert_true(rl_test_now() - start >= 0.04);
    /* The lock is ours again. */
    assert_false(RLConditionTryLock(c));
    assert_rl_error(kRLErrorBusy);
    assert_false(RLConditionWaitUntilDate(c, RLAbsoluteTimeGetCurrent() - 10));
    assert_rl_error(kRLErrorTimedOut);
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

typedef struct stress {
    RLConditionRef cond;
    long iters;
    long counter;
} stress;

static void *stress_worker(void *arg) {
    stress *s = *(stress **)arg;
    for (long i = 0; i < s->iters; i++) {
        RLConditionLock(s->cond);
        s->counter++;
        RLConditionUnlock(s->cond);
    }
    return NULL;
}

static void test_stress_exact_total(void **state) {
    stress s = {RLConditionCreate(), rl_test_iters(1000000), 0};
    stress *args[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        args[i] = &s;
    rl_test_run_threads(STRESS_THREADS, stress_worker, args, sizeof args[0]);
    assert_int_equal(s.counter, STRESS_THREADS * s.iters);
    assert_true(RLRelease(s.cond));
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
