/* test_lock.c — RLLock (NSLock): locking, try/timed forms, names, misuse,
 * and an exact-total stress run. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STRESS_THREADS = 8 };

/* Runs fn(arg) on a fresh thread and returns its result. */
static void *on_other_thread(void *(*fn)(void *), void *arg) {
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    pthread_join(t, &res);
    return res;
}

static void test_lock_unlock_and_trylock(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_non_null(lock);
    assert_string_equal(RLGetTypeName(lock), "RLLock");
    assert_true(RLLockLock(lock));
    assert_false(RLLockTryLock(lock));
    assert_rl_error(kRLErrorBusy);
    assert_true(RLLockUnlock(lock));
    assert_true(RLLockTryLock(lock));
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_relock_by_owner_reports_deadlock(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_true(RLLockLock(lock));
    /* NSLock would hang here forever. */
    assert_false(RLLockLock(lock));
    assert_rl_error(kRLErrorWouldDeadlock);
    assert_false(RLLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 100));
    assert_rl_error(kRLErrorWouldDeadlock);
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_unlock_not_locked(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_false(RLLockUnlock(lock));
    assert_rl_error(kRLErrorNotLocked);
    /* Still usable. */
    assert_true(RLLockLock(lock));
    assert_true(RLLockUnlock(lock));
    assert_false(RLLockUnlock(lock));
    assert_rl_error(kRLErrorNotLocked);
    assert_true(RLRelease(lock));
}

static void *unlock_from_thread(void *arg) {
    RLLockRef lock = arg;
    bool ok = RLLockUnlock(lock);
    RLErrorCode code = RLErrorGetLast().code;
    bool tried = RLLockTryLock(lock);
    return (void *)(intptr_t)(!ok && code == kRLErrorNotOwner && !tried);
}

static void test_unlock_by_other_thread_is_refused(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_true(RLLockLock(lock));
    assert_true((intptr_t)on_other_thread(unlock_from_thread, lock));
    /* The owner still holds it and can unlock normally. */
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_release_of_held_lock_is_refused(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_true(RLLockLock(lock));
    assert_false(RLRelease(lock));
    assert_rl_error(kRLErrorBusy);
    assert_int_equal(RLGetRetainCount(lock), 1);
    /* Still a working lock. */
    assert_true(RLLockUnlock(lock));
    assert_true(RLLockTryLock(lock));
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_bad_arguments(void **state) {
    assert_false(RLLockLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLLockUnlock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLLockTryLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLLockLockBeforeDate(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLLockSetName(NULL, "x"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLLockCopyName(NULL));
    assert_rl_error(kRLErrorInvalidArgument);

    /* Another kind of object is not taken for a lock. */
    RLRecursiveLockRef other = RLRecursiveLockCreate();
    assert_false(RLLockLock((RLLockRef)other));
    assert_rl_error(kRLErrorInvalidObject);
    assert_true(RLRelease(other));

    RLLockRef lock = RLLockCreate();
    assert_false(RLLockLockBeforeDate(lock, NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLLockTryLock(lock)); /* the NaN call took nothing */
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_names(void **state) {
    RLLockRef lock = RLLockCreate();
    char *name = RLLockCopyName(lock);
    assert_string_equal(name, "");
    free(name);
    assert_true(RLLockSetName(lock, "display"));
    name = RLLockCopyName(lock);
    assert_string_equal(name, "display");
    free(name);
    char *desc = RLCopyDescription(lock);
    assert_non_null(strstr(desc, "display"));
    free(desc);
    assert_true(RLLockSetName(lock, "renamed"));
    name = RLLockCopyName(lock);
    assert_string_equal(name, "renamed");
    free(name);
    assert_true(RLLockSetName(lock, NULL));
    name = RLLockCopyName(lock);
    assert_string_equal(name, "");
    free(name);
    assert_true(RLRelease(lock));
}

static void *hold_until_told(void *arg);

typedef struct holder {
    RLLockRef lock;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int phase; /* 1: holder has the lock; 2: holder may let go */
} holder;

static void *hold_until_told(void *arg) {
    holder *h = arg;
    RLLockLock(h->lock);
    pthread_mutex_lock(&h->mu);
    h->phase = 1;
    pthread_cond_broadcast(&h->cv);
    while (h->phase != 2)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    RLLockUnlock(h->lock);
    return NULL;
}

static void test_lock_before_date(void **state) {
    holder h = {RLLockCreate(), PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_until_told, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (h.phase != 1)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);

    /* Held elsewhere: a past date tries once, a near date waits then gives up. */
    assert_false(RLLockLockBeforeDate(h.lock, RLAbsoluteTimeGetCurrent() - 10));
    assert_rl_error(kRLErrorTimedOut);
    double start = rl_test_now();
    assert_false(RLLockLockBeforeDate(h.lock, RLAbsoluteTimeGetCurrent() + 0.05));
    assert_rl_error(kRLErrorTimedOut);
    assert_true(rl_test_now() - start >= 0.04);

    pthread_mutex_lock(&h.mu);
    h.phase = 2;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    /* Released by the holder: a far date succeeds. */
    assert_true(RLLockLockBeforeDate(h.lock, RLAbsoluteTimeGetCurrent() + 1000));
    pthread_join(t, NULL);
    assert_true(RLLockUnlock(h.lock));
    /* Free: even a date in the past succeeds. */
    assert_true(RLLockLockBeforeDate(h.lock, RLAbsoluteTimeGetCurrent() - 10));
    assert_true(RLLockUnlock(h.lock));
    assert_true(RLRelease(h.lock));
}

typedef struct stress {
    RLLockRef lock;
    long iters;
    long counter;
    int failures;
} stress;

static void *stress_worker(void *arg) {
    stress *s = *(stress **)arg;
    int failures = 0;
    for (long i = 0; i < s->iters; i++) {
        /* Mix the entry points so each is exercised under contention. */
        bool ok = (i & 3) == 3 ? RLLockTryLock(s->lock) || RLLockLock(s->lock)
                  : (i & 3) == 2 ? RLLockLockBeforeDate(s->lock, RLAbsoluteTimeGetCurrent() + 1e6)
                                 : RLLockLock(s->lock);
        if (!ok) {
            failures++;
            continue;
        }
        s->counter++;
        if (!RLLockUnlock(s->lock))
            failures++;
    }
    RLLockLock(s->lock);
    s->failures += failures;
    RLLockUnlock(s->lock);
    return NULL;
}

static void test_stress_exact_total(void **state) {
    stress s = {RLLockCreate(), rl_test_iters(1000000), 0, 0};
    stress *args[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        args[i] = &s;
    rl_test_run_threads(STRESS_THREADS, stress_worker, args, sizeof args[0]);
    assert_int_equal(s.failures, 0);
    assert_int_equal(s.counter, STRESS_THREADS * s.iters);
    assert_true(RLRelease(s.lock));
}

/* Every lock family in this file set feeds the lock-order detector: an ABBA
 * between an RLLock and each other kind is reported (without deadlocking,
 * since one thread takes both orders in turn), naming both locks. */
typedef struct seen_report {
    int count;
    char held[64], acquiring[64];
} seen_report;

static void on_report(const RLLockDebugReport *report, void *info) {
    seen_report *seen = info;
    seen->count++;
    snprintf(seen->held, sizeof seen->held, "%s", report->heldLockName ? report->heldLockName : "");
    snprintf(seen->acquiring, sizeof seen->acquiring, "%s", report->acquiringLockName ? report->acquiringLockName : "");
}

typedef bool (*take_fn)(void *);
typedef bool (*drop_fn)(void *);

static bool take_lock(void *l) { return RLLockLock(l); }
static bool drop_lock(void *l) { return RLLockUnlock(l); }
static bool take_rlock(void *l) { return RLRecursiveLockLock(l); }
static bool drop_rlock(void *l) { return RLRecursiveLockUnlock(l); }
static bool take_cond(void *l) { return RLConditionLock(l); }
static bool drop_cond(void *l) { return RLConditionUnlock(l); }
static bool take_clock(void *l) { return RLConditionLockLockWhenCondition(l, 0); }
static bool drop_clock(void *l) { return RLConditionLockUnlockWithCondition(l, 0); }
static bool take_write(void *l) { return RLReadWriteLockWriteLock(l); }
static bool take_read(void *l) { return RLReadWriteLockReadLock(l); }
static bool drop_rw(void *l) { return RLReadWriteLockUnlock(l); }

static void abba(RLLockRef a, void *b, take_fn take, drop_fn drop, seen_report *seen) {
    int before = seen->count;
    assert_true(RLLockLock(a));
    assert_true(take(b));
    assert_true(drop(b));
    assert_true(RLLockUnlock(a));
    assert_int_equal(seen->count, before);
    assert_true(take(b));
    assert_true(RLLockLock(a));
    assert_true(RLLockUnlock(a));
    assert_true(drop(b));
    assert_int_equal(seen->count, before + 1);
    assert_non_null(strstr(seen->acquiring, "'A'"));
}

static void test_lock_order_debugging_sees_every_kind(void **state) {
    seen_report seen = {0, "", ""};
    RLLockDebugReset();
    RLLockDebugSetReportHandler(on_report, &seen);
    RLLockDebugSetEnabled(true);

    RLLockRef a = RLLockCreate();
    RLLockSetName(a, "A");
    RLLockRef b1 = RLLockCreate();
    RLRecursiveLockRef b2 = RLRecursiveLockCreate();
    RLConditionRef b3 = RLConditionCreate();
    RLConditionLockRef b4 = RLConditionLockCreateWithCondition(0);
    RLReadWriteLockRef b5 = RLReadWriteLockCreate();
    RLReadWriteLockRef b6 = RLReadWriteLockCreate();
    RLLockSetName(b1, "B1");
    RLRecursiveLockSetName(b2, "B2");
    RLConditionSetName(b3, "B3");
    RLConditionLockSetName(b4, "B4");
    RLReadWriteLockSetName(b5, "B5");
    RLReadWriteLockSetName(b6, "B6");

    abba(a, b1, take_lock, drop_lock, &seen);
    assert_non_null(strstr(seen.held, "'B1'"));
    abba(a, b2, take_rlock, drop_rlock, &seen);
    assert_non_null(strstr(seen.held, "'B2'"));
    abba(a, b3, take_cond, drop_cond, &seen);
    assert_non_null(strstr(seen.held, "'B3'"));
    abba(a, b4, take_clock, drop_clock, &seen);
    assert_non_null(strstr(seen.held, "'B4'"));
    abba(a, b5, take_write, drop_rw, &seen);
    assert_non_null(strstr(seen.held, "'B5'"));
    /* A read lock: two readers never block each other, but b6 has a writer
     * and a queued writer blocks new readers, so the order still counts. */
    assert_true(RLReadWriteLockWriteLock(b6));
    assert_true(RLReadWriteLockUnlock(b6));
    abba(a, b6, take_read, drop_rw, &seen);
    assert_non_null(strstr(seen.held, "'B6'"));

    /* The debug paths still lock correctly: a timed condition wait releases
     * and retakes its lock with the detector watching. */
    assert_true(RLConditionLock(b3));
    assert_false(RLConditionWaitUntilDate(b3, RLAbsoluteTimeGetCurrent() + 0.01));
    assert_rl_error(kRLErrorTimedOut);
    assert_true(RLConditionUnlock(b3));
    assert_true(RLRecursiveLockLock(b2));
    assert_true(RLRecursiveLockTryLock(b2));
    assert_true(RLRecursiveLockUnlock(b2));
    assert_true(RLRecursiveLockUnlock(b2));

    RLLockDebugSetEnabled(false);
    RLLockDebugSetReportHandler(NULL, NULL);
    RLLockDebugReset();
    RLRelease(a);
    RLRelease(b1);
    RLRelease(b2);
    RLRelease(b3);
    RLRelease(b4);
    RLRelease(b5);
    RLRelease(b6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_unlock_and_trylock),
        cmocka_unit_test(test_relock_by_owner_reports_deadlock),
        cmocka_unit_test(test_unlock_not_locked),
        cmocka_unit_test(test_unlock_by_other_thread_is_refused),
        cmocka_unit_test(test_release_of_held_lock_is_refused),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_lock_before_date),
        cmocka_unit_test(test_stress_exact_total),
        cmocka_unit_test(test_lock_order_debugging_sees_every_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
