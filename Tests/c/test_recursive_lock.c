/* test_recursive_lock.c — RLRecursiveLock (NSRecursiveLock): recursion
 * counting, the guide's recursive function, misuse, exact-total stress. */
#include "testutil.h"
#include "lockutil.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static RLRecursiveLockRef the_lock;
static int deepest;

/* The guide's MyRecursiveFunction. */
static void recurse(int value) {
    assert_true(RLRecursiveLockLock(the_lock));
    if (RLRecursiveLockGetRecursionCount(the_lock) > deepest)
        deepest = (int)RLRecursiveLockGetRecursionCount(the_lock);
    if (value != 0)
        recurse(value - 1);
    assert_true(RLRecursiveLockUnlock(the_lock));
}

static bool take(void *l) { return RLRecursiveLockLock(l); }
static bool try_take(void *l) { return RLRecursiveLockTryLock(l); }
static bool drop(void *l) { return RLRecursiveLockUnlock(l); }

static void test_guide_recursive_function(void **state) {
    the_lock = RLRecursiveLockCreate();
    assert_non_null(the_lock);
    deepest = 0;
    recurse(5);
    assert_int_equal(deepest, 6);
    assert_int_equal(RLRecursiveLockGetRecursionCount(the_lock), 0);
    /* Fully balanced: another thread can take it. */
    assert_int_equal(rl_try_elsewhere(the_lock, try_take, drop), RL_TRY_GOT_IT);
    assert_true(RLRelease(the_lock));
}

static void test_counts_and_try(void **state) {
    RLRecursiveLockRef lock = RLRecursiveLockCreate();
    assert_true(RLRecursiveLockLock(lock));
    assert_true(RLRecursiveLockTryLock(lock));
    assert_true(RLRecursiveLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() - 1));
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 3);
    /* Held (3 deep) here: another thread is refused at every level. */
    assert_int_equal(rl_try_elsewhere(lock, try_take, drop), kRLErrorBusy);
    assert_true(RLRecursiveLockUnlock(lock));
    assert_true(RLRecursiveLockUnlock(lock));
    assert_int_equal(rl_try_elsewhere(lock, try_take, drop), kRLErrorBusy);
    assert_true(RLRecursiveLockUnlock(lock));
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 0);
    assert_rl_fails(RLRecursiveLockUnlock(lock), kRLErrorNotLocked);
    assert_true(RLRelease(lock));
}

static void *unlock_from_thread(void *arg) {
    bool ok = RLRecursiveLockUnlock(arg);
    RLErrorCode code = RLErrorGetLast().code;
    RLIndex count = RLRecursiveLockGetRecursionCount(arg);
    return (void *)(intptr_t)(!ok && code == kRLErrorNotOwner && count == 0);
}

static void test_misuse(void **state) {
    RLRecursiveLockRef lock = RLRecursiveLockCreate();
    assert_true(RLRecursiveLockLock(lock));
    assert_true(RLRecursiveLockLock(lock));
    assert_true((intptr_t)rl_test_on_other_thread(unlock_from_thread, lock));
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 2);
    assert_rl_fails(RLRelease(lock), kRLErrorBusy);
    assert_true(RLRecursiveLockUnlock(lock));
    assert_rl_fails(RLRelease(lock), kRLErrorBusy); /* still held once */
    assert_true(RLRecursiveLockUnlock(lock));

    assert_rl_fails(RLRecursiveLockLockBeforeDate(lock, NAN), kRLErrorInvalidArgument);
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 0);

    assert_rl_fails(RLRecursiveLockLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRecursiveLockUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRecursiveLockTryLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRecursiveLockLockBeforeDate(NULL, 0), kRLErrorInvalidArgument);
    assert_int_equal(RLRecursiveLockGetRecursionCount(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLRecursiveLockSetName(NULL, "x"), kRLErrorInvalidArgument);
    assert_rl_fails(RLRecursiveLockCopyName(NULL), kRLErrorInvalidArgument);
    RLLockRef plain = RLLockCreate();
    assert_rl_fails(RLRecursiveLockLock((RLRecursiveLockRef)plain), kRLErrorInvalidObject);
    assert_true(RLRelease(plain));
    assert_true(RLRelease(lock));
}

static void test_names(void **state) {
    RLRecursiveLockRef lock = RLRecursiveLockCreate();
    char *name = RLRecursiveLockCopyName(lock);
    assert_string_equal(name, "");
    free(name);
    assert_true(RLRecursiveLockSetName(lock, "tree"));
    name = RLRecursiveLockCopyName(lock);
    assert_string_equal(name, "tree");
    free(name);
    assert_true(RLRelease(lock));
}

static void test_lock_before_date(void **state) {
    RLRecursiveLockRef lock = RLRecursiveLockCreate();
    rl_holder h;
    rl_holder_start(&h, lock, take, drop, 2);
    assert_rl_fails(RLRecursiveLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 0.05), kRLErrorTimedOut);
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 0);
    rl_holder_let_go(&h);
    assert_true(RLRecursiveLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 1000));
    rl_holder_join(&h);
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 1);
    assert_true(RLRecursiveLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static bool stress_round(rl_stress *s, long i) {
    /* Every 4th round nests once, so recursion runs under contention too. */
    bool nest = (i & 3) == 0;
    if (!RLRecursiveLockLock(s->lock))
        return false;
    bool ok = !nest || RLRecursiveLockLock(s->lock);
    rl_stress_bump(s);
    if (nest && ok)
        ok = RLRecursiveLockUnlock(s->lock);
    return RLRecursiveLockUnlock(s->lock) && ok;
}

static void test_stress_exact_total(void **state) {
    rl_stress s = {.lock = RLRecursiveLockCreate(), .round = stress_round};
    rl_stress_run(&s);
    assert_rl_stress_exact_total(&s);
    assert_true(RLRelease(s.lock));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guide_recursive_function),
        cmocka_unit_test(test_counts_and_try),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_lock_before_date),
        cmocka_unit_test(test_stress_exact_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
