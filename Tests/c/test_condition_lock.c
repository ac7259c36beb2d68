/* test_condition_lock.c — RLConditionLock (NSConditionLock): every lock and
 * unlock form, ordering by condition, timed forms, misuse, exact-total stress. */
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

static RLIndex condition_of(RLConditionLockRef lock) {
    RLIndex c = -12345;
    assert_true(RLConditionLockGetCondition(lock, &c));
    return c;
}

static void test_forms_combine(void **state) {
    RLConditionLockRef lock = RLConditionLockCreateWithCondition(7);
    assert_non_null(lock);
    assert_string_equal(RLGetTypeName(lock), "RLConditionLock");
    assert_int_equal(condition_of(lock), 7);

    assert_true(RLConditionLockLock(lock));
    assert_true(RLConditionLockUnlockWithCondition(lock, 3));
    assert_int_equal(condition_of(lock), 3);

    assert_true(RLConditionLockLockWhenCondition(lock, 3));
    assert_true(RLConditionLockUnlock(lock)); /* condition unchanged */
    assert_int_equal(condition_of(lock), 3);

    assert_true(RLConditionLockTryLock(lock));
    assert_false(RLConditionLockTryLock(lock));
    assert_rl_error(kRLErrorBusy);
    assert_false(RLConditionLockTryLockWhenCondition(lock, 3));
    assert_rl_error(kRLErrorBusy);
    assert_true(RLConditionLockUnlockWithCondition(lock, 4));

    assert_false(RLConditionLockTryLockWhenCondition(lock, 3));
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLConditionLockTryLockWhenCondition(lock, 4));
    assert_true(RLConditionLockUnlock(lock));

    assert_true(RLConditionLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() - 1));
    assert_true(RLConditionLockUnlock(lock));
    assert_true(RLConditionLockLockWhenConditionBeforeDate(lock, 4, RLAbsoluteTimeGetCurrent() - 1));
    assert_true(RLConditionLockUnlockWithCondition(lock, -1));
    assert_int_equal(condition_of(lock), -1);
    assert_true(RLRelease(lock));
}

static void *unlock_from_thread(void *arg) {
    bool a = RLConditionLockUnlock(arg);
    RLErrorCode ca = RLErrorGetLast().code;
    bool b = RLConditionLockUnlockWithCondition(arg, 99);
    RLErrorCode cb = RLErrorGetLast().code;
    return (void *)(intptr_t)(!a && !b && ca == kRLErrorNotOwner && cb == kRLErrorNotOwner);
}

static void test_misuse(void **state) {
    RLConditionLockRef lock = RLConditionLockCreateWithCondition(0);
    assert_false(RLConditionLockUnlock(lock));
    assert_rl_error(kRLErrorNotLocked);
    assert_false(RLConditionLockUnlockWithCondition(lock, 1));
    assert_rl_error(kRLErrorNotLocked);
    assert_int_equal(condition_of(lock), 0); /* the failed call changed nothing */

    assert_true(RLConditionLockLock(lock));
    assert_false(RLConditionLockLock(lock));
    assert_rl_error(kRLErrorWouldDeadlock);
    assert_false(RLConditionLockLockWhenCondition(lock, 0));
    assert_rl_error(kRLErrorWouldDeadlock);
    assert_false(RLConditionLockLockWhenConditionBeforeDate(lock, 0, RLAbsoluteTimeGetCurrent() + 100));
    assert_rl_error(kRLErrorWouldDeadlock);
    assert_true((intptr_t)on_other_thread(unlock_from_thread, lock));
    assert_int_equal(condition_of(lock), 0);
    assert_false(RLRelease(lock));
    assert_rl_error(kRLErrorBusy);
    assert_true(RLConditionLockUnlock(lock));

    assert_false(RLConditionLockLockBeforeDate(lock, NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockLockWhenConditionBeforeDate(lock, 0, NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockGetCondition(lock, NULL));
    assert_rl_error(kRLErrorInvalidArgument);

    RLIndex c;
    assert_false(RLConditionLockGetCondition(NULL, &c));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockTryLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockLockBeforeDate(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockLockWhenCondition(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockTryLockWhenCondition(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockLockWhenConditionBeforeDate(NULL, 0, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockUnlock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockUnlockWithCondition(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLConditionLockSetName(NULL, "x"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLConditionLockCopyName(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLLockRef plain = RLLockCreate();
    assert_false(RLConditionLockLock((RLConditionLockRef)plain));
    assert_rl_error(kRLErrorInvalidObject);
    assert_true(RLRelease(plain));

    /* Still a working lock after all that. */
    assert_true(RLConditionLockLockWhenCondition(lock, 0));
    assert_true(RLConditionLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_names(void **state) {
    RLConditionLockRef lock = RLConditionLockCreateWithCondition(0);
    assert_true(RLConditionLockSetName(lock, "queue"));
    char *name = RLConditionLockCopyName(lock);
    assert_string_equal(name, "queue");
    free(name);
    char *desc = RLCopyDescription(lock);
    assert_non_null(strstr(desc, "queue"));
    free(desc);
    assert_true(RLRelease(lock));
}

static void test_timed_forms_time_out(void **state) {
    RLConditionLockRef lock = RLConditionLockCreateWithCondition(1);
    /* Free, but the condition never becomes 2. */
    double start = rl_test_now();
    assert_false(RLConditionLockLockWhenConditionBeforeDate(lock, 2, RLAbsoluteTimeGetCurrent() + 0.05));
    assert_rl_error(kRLErrorTimedOut);
    assert_true(rl_test_now() - start >= 0.04);
    /* The timeout left the lock free. */
    assert_true(RLConditionLockTryLock(lock));
    assert_true(RLConditionLockUnlock(lock));
    assert_false(RLConditionLockLockWhenConditionBeforeDate(lock, 2, RLAbsoluteTimeGetCurrent() - 5));
    assert_rl_error(kRLErrorTimedOut);
    assert_true(RLConditionLockTryLock(lock));
    assert_true(RLConditionLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void *lock_before_date_from_thread(void *arg) {
    bool ok = RLConditionLockLockBeforeDate(arg, RLAbsoluteTimeGetCurrent() + 0.05);
    RLErrorCode code = RLErrorGetLast().code;
    bool ok2 = RLConditionLockLockWhenConditionBeforeDate(arg, 5, RLAbsoluteTimeGetCurrent() + 0.05);
    RLErrorCode code2 = RLErrorGetLast().code;
    return (void *)(intptr_t)(!ok && code == kRLErrorTimedOut && !ok2 && code2 == kRLErrorTimedOut);
}

static void test_timed_forms_while_held(void **state) {
    RLConditionLockRef lock = RLConditionLockCreateWithCondition(5);
    assert_true(RLConditionLockLock(lock));
    /* Condition matches, but we hold the lock: both time out over there. */
    assert_true((intptr_t)on_other_thread(lock_before_date_from_thread, lock));
    assert_true(RLConditionLockUnlock(lock));
    assert_true(RLRelease(lock));
}

/* Threads run strictly in turn: thread i waits for condition i and hands the
 * lock on with condition i+1, round after round. */
typedef struct relay {
    RLConditionLockRef lock;
    int threads;
    long rounds;
    long trace_len;
    int *trace;
} relay;

typedef struct relay_arg {
    relay *r;
    int index;
} relay_arg;

static void *relay_runner(void *arg) {
    relay_arg *a = arg;
    relay *r = a->r;
    for (long round = 0; round < r->rounds; round++) {
        RLConditionLockLockWhenCondition(r->lock, a->index);
        r->trace[r->trace_len++] = a->index;
        RLConditionLockUnlockWithCondition(r->lock, (a->index + 1) % r->threads);
    }
    return NULL;
}

static void test_condition_orders_threads(void **state) {
    enum { THREADS = 4 };
    relay r = {RLConditionLockCreateWithCondition(0), THREADS, rl_test_iters(2000), 0, NULL};
    r.trace = calloc((size_t)(THREADS * r.rounds), sizeof *r.trace);
    relay_arg args[THREADS];
    for (int i = 0; i < THREADS; i++)
        args[i] = (relay_arg){&r, THREADS - 1 - i}; /* start them in the wrong order */
    rl_test_run_threads(THREADS, relay_runner, args, sizeof args[0]);
    assert_int_equal(r.trace_len, THREADS * r.rounds);
    for (long i = 0; i < r.trace_len; i++)
        assert_int_equal(r.trace[i], i % THREADS);
    free(r.trace);
    assert_true(RLRelease(r.lock));
}

typedef struct stress {
    RLConditionLockRef lock;
    long iters;
    long counter;
} stress;

static void *stress_worker(void *arg) {
    stress *s = *(stress **)arg;
    for (long i = 0; i < s->iters; i++) {
        /* Alternate the plain and the condition forms; the condition stays 0
         * so LockWhenCondition never has to wait for a value. */
        if (i & 1) {
            RLConditionLockLockWhenCondition(s->lock, 0);
            s->counter++;
            RLConditionLockUnlockWithCondition(s->lock, 0);
        } else {
            RLConditionLockLock(s->lock);
            s->counter++;
            RLConditionLockUnlock(s->lock);
        }
    }
    return NULL;
}

static void test_stress_exact_total(void **state) {
    stress s = {RLConditionLockCreateWithCondition(0), rl_test_iters(1000000), 0};
    stress *args[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        args[i] = &s;
    rl_test_run_threads(STRESS_THREADS, stress_worker, args, sizeof args[0]);
    assert_int_equal(s.counter, STRESS_THREADS * s.iters);
    assert_true(RLRelease(s.lock));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms_combine),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_timed_forms_time_out),
        cmocka_unit_test(test_timed_forms_while_held),
        cmocka_unit_test(test_condition_orders_threads),
        cmocka_unit_test(test_stress_exact_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
