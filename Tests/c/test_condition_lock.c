/* test_condition_lock.c — RLConditionLock (NSConditionLock): every lock and
 * unlock form, ordering by condition, timed forms, misuse, exact-total stress. */
#include "testutil.h"
#include "lockutil.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
    assert_rl_fails(RLConditionLockTryLock(lock), kRLErrorBusy);
    assert_rl_fails(RLConditionLockTryLockWhenCondition(lock, 3), kRLErrorBusy);
    assert_true(RLConditionLockUnlockWithCondition(lock, 4));

    assert_rl_fails(RLConditionLockTryLockWhenCondition(lock, 3), kRLErrorInvalidState);
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
    assert_rl_fails(RLConditionLockUnlock(lock), kRLErrorNotLocked);
    assert_rl_fails(RLConditionLockUnlockWithCondition(lock, 1), kRLErrorNotLocked);
    assert_int_equal(condition_of(lock), 0); /* the failed call changed nothing */

    assert_true(RLConditionLockLock(lock));
    assert_rl_fails(RLConditionLockLock(lock), kRLErrorWouldDeadlock);
    assert_rl_fails(RLConditionLockLockWhenCondition(lock, 0), kRLErrorWouldDeadlock);
    assert_rl_fails(RLConditionLockLockWhenConditionBeforeDate(lock, 0, RLAbsoluteTimeGetCurrent() + 100),
                    kRLErrorWouldDeadlock);
    assert_true((intptr_t)rl_test_on_other_thread(unlock_from_thread, lock));
    assert_int_equal(condition_of(lock), 0);
    assert_rl_fails(RLRelease(lock), kRLErrorBusy);
    assert_true(RLConditionLockUnlock(lock));

    assert_rl_fails(RLConditionLockLockBeforeDate(lock, NAN), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockLockWhenConditionBeforeDate(lock, 0, NAN), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockGetCondition(lock, NULL), kRLErrorInvalidArgument);

    RLIndex c;
    assert_rl_fails(RLConditionLockGetCondition(NULL, &c), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockTryLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockLockBeforeDate(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockLockWhenCondition(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockTryLockWhenCondition(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockLockWhenConditionBeforeDate(NULL, 0, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockUnlockWithCondition(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockSetName(NULL, "x"), kRLErrorInvalidArgument);
    assert_rl_fails(RLConditionLockCopyName(NULL), kRLErrorInvalidArgument);
    RLLockRef plain = RLLockCreate();
    assert_rl_fails(RLConditionLockLock((RLConditionLockRef)plain), kRLErrorInvalidObject);
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
    assert_rl_fails(RLConditionLockLockWhenConditionBeforeDate(lock, 2, RLAbsoluteTimeGetCurrent() + 0.05),
                    kRLErrorTimedOut);
    assert_true(rl_test_now() - start >= 0.04);
    /* The timeout left the lock free. */
    assert_true(RLConditionLockTryLock(lock));
    assert_true(RLConditionLockUnlock(lock));
    assert_rl_fails(RLConditionLockLockWhenConditionBeforeDate(lock, 2, RLAbsoluteTimeGetCurrent() - 5),
                    kRLErrorTimedOut);
    assert_true(RLConditionLockTryLock(lock));
    assert_true(RLConditionLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static bool lock_within_50ms(void *l) { return RLConditionLockLockBeforeDate(l, RLAbsoluteTimeGetCurrent() + 0.05); }

static bool lock_when_5_within_50ms(void *l) {
    return RLConditionLockLockWhenConditionBeforeDate(l, 5, RLAbsoluteTimeGetCurrent() + 0.05);
}

static bool unlock(void *l) { return RLConditionLockUnlock(l); }

static void test_timed_forms_while_held(void **state) {
    RLConditionLockRef lock = RLConditionLockCreateWithCondition(5);
    assert_true(RLConditionLockLock(lock));
    /* Condition matches, but we hold the lock: both time out over there. */
    assert_int_equal(rl_try_elsewhere(lock, lock_within_50ms, unlock), kRLErrorTimedOut);
    assert_int_equal(rl_try_elsewhere(lock, lock_when_5_within_50ms, unlock), kRLErrorTimedOut);
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

static bool stress_round(rl_stress *s, long i) {
    /* Alternate the plain and the condition forms; the condition stays 0
     * so LockWhenCondition never has to wait for a value. */
    if (i & 1) {
        if (!RLConditionLockLockWhenCondition(s->lock, 0))
            return false;
        rl_stress_bump(s);
        return RLConditionLockUnlockWithCondition(s->lock, 0);
    }
    if (!RLConditionLockLock(s->lock))
        return false;
    rl_stress_bump(s);
    return RLConditionLockUnlock(s->lock);
}

static void test_stress_exact_total(void **state) {
    rl_stress s = {.lock = RLConditionLockCreateWithCondition(0), .round = stress_round};
    rl_stress_run(&s);
    assert_rl_stress_exact_total(&s);
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
