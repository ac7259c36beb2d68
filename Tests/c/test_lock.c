/* test_lock.c — RLLock (NSLock): locking, try/timed forms, names, misuse,
 * and an exact-total stress run. */
#include "testutil.h"
#include "lockutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_lock_unlock_and_trylock(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_non_null(lock);
    assert_string_equal(RLGetTypeName(lock), "RLLock");
    assert_true(RLLockLock(lock));
    assert_rl_fails(RLLockTryLock(lock), kRLErrorBusy);
    assert_true(RLLockUnlock(lock));
    assert_true(RLLockTryLock(lock));
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_relock_by_owner_reports_deadlock(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_true(RLLockLock(lock));
    /* NSLock would hang here forever. */
    assert_rl_fails(RLLockLock(lock), kRLErrorWouldDeadlock);
    assert_rl_fails(RLLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 100), kRLErrorWouldDeadlock);
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_unlock_not_locked(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_rl_fails(RLLockUnlock(lock), kRLErrorNotLocked);
    /* Still usable. */
    assert_true(RLLockLock(lock));
    assert_true(RLLockUnlock(lock));
    assert_rl_fails(RLLockUnlock(lock), kRLErrorNotLocked);
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
    assert_true((intptr_t)rl_test_on_other_thread(unlock_from_thread, lock));
    /* The owner still holds it and can unlock normally. */
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_release_of_held_lock_is_refused(void **state) {
    RLLockRef lock = RLLockCreate();
    assert_true(RLLockLock(lock));
    assert_rl_fails(RLRelease(lock), kRLErrorBusy);
    assert_int_equal(RLGetRetainCount(lock), 1);
    /* Still a working lock. */
    assert_true(RLLockUnlock(lock));
    assert_true(RLLockTryLock(lock));
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_bad_arguments(void **state) {
    assert_rl_fails(RLLockLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLLockUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLLockTryLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLLockLockBeforeDate(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLLockSetName(NULL, "x"), kRLErrorInvalidArgument);
    assert_rl_fails(RLLockCopyName(NULL), kRLErrorInvalidArgument);

    /* Another kind of object is not taken for a lock. */
    RLRecursiveLockRef other = RLRecursiveLockCreate();
    assert_rl_fails(RLLockLock((RLLockRef)other), kRLErrorInvalidObject);
    assert_true(RLRelease(other));

    RLLockRef lock = RLLockCreate();
    assert_rl_fails(RLLockLockBeforeDate(lock, NAN), kRLErrorInvalidArgument);
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

static bool take_lock(void *l) { return RLLockLock(l); }
static bool drop_lock(void *l) { return RLLockUnlock(l); }

static void test_lock_before_date(void **state) {
    RLLockRef lock = RLLockCreate();
    rl_holder h;
    rl_holder_start(&h, lock, take_lock, drop_lock, 1);

    /* Held elsewhere: a past date tries once, a near date waits then gives up. */
    assert_rl_fails(RLLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() - 10), kRLErrorTimedOut);
    double start = rl_test_now();
    assert_rl_fails(RLLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 0.05), kRLErrorTimedOut);
    assert_true(rl_test_now() - start >= 0.04);

    rl_holder_let_go(&h);
    /* Released by the holder: a far date succeeds. */
    assert_true(RLLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 1000));
    rl_holder_join(&h);
    assert_true(RLLockUnlock(lock));
    /* Free: even a date in the past succeeds. */
    assert_true(RLLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() - 10));
    assert_true(RLLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static bool stress_round(rl_stress *s, long i) {
    /* Mix the entry points so each is exercised under contention. */
    bool ok = (i & 3) == 3   ? RLLockTryLock(s->lock) || RLLockLock(s->lock)
              : (i & 3) == 2 ? RLLockLockBeforeDate(s->lock, RLAbsoluteTimeGetCurrent() + 1e6)
                             : RLLockLock(s->lock);
    if (!ok)
        return false;
    rl_stress_bump(s);
    return RLLockUnlock(s->lock);
}

static void test_stress_exact_total(void **state) {
    rl_stress s = {.lock = RLLockCreate(), .round = stress_round};
    rl_stress_run(&s);
    assert_rl_stress_exact_total(&s);
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

static bool take_rlock(void *l) { return RLRecursiveLockLock(l); }
static bool drop_rlock(void *l) { return RLRecursiveLockUnlock(l); }
static bool take_cond(void *l) { return RLConditionLock(l); }
static bool drop_cond(void *l) { return RLConditionUnlock(l); }
static bool take_clock(void *l) { return RLConditionLockLockWhenCondition(l, 0); }
static bool drop_clock(void *l) { return RLConditionLockUnlockWithCondition(l, 0); }
static bool take_write(void *l) { return RLReadWriteLockWriteLock(l); }
static bool take_read(void *l) { return RLReadWriteLockReadLock(l); }
static bool drop_rw(void *l) { return RLReadWriteLockUnlock(l); }

static void abba(RLLockRef a, void *b, rl_lock_fn take, rl_lock_fn drop, seen_report *seen) {
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
    assert_rl_fails(RLConditionWaitUntilDate(b3, RLAbsoluteTimeGetCurrent() + 0.01), kRLErrorTimedOut);
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
