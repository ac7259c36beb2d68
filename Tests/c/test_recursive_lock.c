/* test_recursive_lock.c — RLRecursiveLock (NSRecursiveLock): recursion
 * counting, the guide's recursive function, misuse, exact-total stress. */
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

static void *try_from_thread(void *arg) {
    bool ok = RLRecursiveLockTryLock(arg);
    RLErrorCode code = RLErrorGetLast().code;
    if (ok)
        RLRecursiveLockUnlock(arg);
    return (void *)(intptr_t)(ok ? -1 : code);
}

static void test_guide_recursive_function(void **state) {
    the_lock = RLRecursiveLockCreate();
    assert_non_null(the_lock);
    deepest = 0;
    recurse(5);
    assert_int_equal(deepest, 6);
    assert_int_equal(RLRecursiveLockGetRecursionCount(the_lock), 0);
    /* Fully balanced: another thread can take it. */
    assert_int_equal((intptr_t)on_other_thread(try_from_thread, the_lock), -1); /* -1: it got the lock */
    assert_true(RLRelease(the_lock));
}

static void test_counts_and_try(void **state) {
    RLRecursiveLockRef lock = RLRecursiveLockCreate();
    assert_true(RLRecursiveLockLock(lock));
    assert_true(RLRecursiveLockTryLock(lock));
    assert_true(RLRecursiveLockLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() - 1));
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 3);
    /* Held (3 deep) here: another thread is refused at every level. */
    assert_int_equal((intptr_t)on_other_thread(try_from_thread, lock), kRLErrorBusy);
    assert_true(RLRecursiveLockUnlock(lock));
    assert_true(RLRecursiveLockUnlock(lock));
    assert_int_equal((intptr_t)on_other_thread(try_from_thread, lock), kRLErrorBusy);
    assert_true(RLRecursiveLockUnlock(lock));
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 0);
    assert_false(RLRecursiveLockUnlock(lock));
    assert_rl_error(kRLErrorNotLocked);
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
    assert_true((intptr_t)on_other_thread(unlock_from_thread, lock));
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 2);
    assert_false(RLRelease(lock));
    assert_rl_error(kRLErrorBusy);
    assert_true(RLRecursiveLockUnlock(lock));
    assert_false(RLRelease(lock)); /* still held once */
    assert_rl_error(kRLErrorBusy);
    assert_true(RLRecursiveLockUnlock(lock));

    assert_false(RLRecursiveLockLockBeforeDate(lock, NAN));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRecursiveLockGetRecursionCount(lock), 0);

    assert_false(RLRecursiveLockLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRecursiveLockUnlock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRecursiveLockTryLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRecursiveLockLockBeforeDate(NULL, 0));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLRecursiveLockGetRecursionCount(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRecursiveLockSetName(NULL, "x"));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLRecursiveLockCopyName(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLLockRef plain = RLLockCreate();
    assert_false(RLRecursiveLockLock((RLRecursiveLockRef)plain));
    assert_rl_error(kRLErrorInvalidObject);
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

typedef struct holder {
    RLRecursiveLockRef lock;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int phase;
} holder;

static void *hold_until_told(void *arg) {
    holder *h = arg;
    RLRecursiveLockLock(h->lock);
    RLRecursiveLockLock(h->lock);
    pthread_mutex_lock(&h->mu);
    h->phase = 1;
    pthread_cond_broadcast(&h->cv);
    while (h->phase != 2)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    RLRecursiveLockUnlock(h->lock);
    RLRecursiveLockUnlock(h->lock);
    return NULL;
}

static void test_lock_before_date(void **state) {
    holder h = {RLRecursiveLockCreate(), PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_until_told, &h), 0);
    pthread_mutex_lock(&h.mu);
    while (h.phase != 1)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    assert_false(RLRecursiveLockLockBeforeDate(h.lock, RLAbsoluteTimeGetCurrent() + 0.05));
    assert_rl_error(kRLErrorTimedOut);
    assert_int_equal(RLRecursiveLockGetRecursionCount(h.lock), 0);
    pthread_mutex_lock(&h.mu);
    h.phase = 2;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    assert_true(RLRecursiveLockLockBeforeDate(h.lock, RLAbsoluteTimeGetCurrent() + 1000));
    pthread_join(t, NULL);
    assert_int_equal(RLRecursiveLockGetRecursionCount(h.lock), 1);
    assert_true(RLRecursiveLockUnlock(h.lock));
    assert_true(RLRelease(h.lock));
}

typedef struct stress {
    RLRecursiveLockRef lock;
    long iters;
    long counter;
    int failures;
} stress;

static void *stress_worker(void *arg) {
    stress *s = *(stress **)arg;
    int failures = 0;
    for (long i = 0; i < s->iters; i++) {
        /* Every 4th round nests once, so recursion runs under contention too. */
        bool nest = (i & 3) == 0;
        if (!RLRecursiveLockLock(s->lock)) {
            failures++;
            continue;
        }
        if (nest && !RLRecursiveLockLock(s->lock))
            failures++;
        s->counter++;
        if (nest && !RLRecursiveLockUnlock(s->lock))
            failures++;
        if (!RLRecursiveLockUnlock(s->lock))
            failures++;
    }
    RLRecursiveLockLock(s->lock);
    s->failures += failures;
    RLRecursiveLockUnlock(s->lock);
    return NULL;
}

static void test_stress_exact_total(void **state) {
    stress s = {RLRecursiveLockCreate(), rl_test_iters(1000000), 0, 0};
    stress *args[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        args[i] = &s;
    rl_test_run_threads(STRESS_THREADS, stress_worker, args, sizeof args[0]);
    assert_int_equal(s.failures, 0);
    assert_int_equal(s.counter, STRESS_THREADS * s.iters);
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
