/* test_spinlock.c — RLSpinLock: inline and exported forms, misuse, and
 * mutual exclusion with exact totals. */
#include "testutil.h"

#include <crunloop/RLSpinLock.h>

#include <pthread.h>
#include <sched.h>

static void test_initial_state_and_try(void **state) {
    RLSpinLock lock = RL_SPINLOCK_INIT;
    assert_false(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockTry(&lock));
    assert_true(RLSpinLockIsLocked(&lock));
    /* Busy is an answer, not an error. */
    RLErrorClear();
    assert_false(RLSpinLockTry(&lock));
    assert_rl_error(kRLErrorNone);
    assert_true(RLSpinLockUnlock(&lock));
    assert_false(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockLock(&lock));
    assert_false(RLSpinLockTry(&lock));
    assert_true(RLSpinLockUnlock(&lock));
}

static void test_out_of_line_twins(void **state) {
    RLSpinLock lock;
    assert_true(RLSpinLockInit(&lock));
    assert_false(RLSpinLockIsLockedOutOfLine(&lock));
    assert_true(RLSpinLockTryOutOfLine(&lock));
    assert_true(RLSpinLockIsLockedOutOfLine(&lock));
    assert_false(RLSpinLockTryOutOfLine(&lock));
    assert_true(RLSpinLockUnlockOutOfLine(&lock));
    assert_true(RLSpinLockLockOutOfLine(&lock));
    /* Both forms operate on the same word. */
    assert_false(RLSpinLockTry(&lock));
    assert_true(RLSpinLockUnlock(&lock));
    assert_false(RLSpinLockIsLockedOutOfLine(&lock));
}

static void test_misuse(void **state) {
    RLSpinLock lock = RL_SPINLOCK_INIT;
    /* Unlock of a lock nobody holds: an error, and the lock stays usable. */
    assert_false(RLSpinLockUnlock(&lock));
    assert_rl_error(kRLErrorNotLocked);
    assert_false(RLSpinLockUnlockOutOfLine(&lock));
    assert_rl_error(kRLErrorNotLocked);
    assert_false(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockLock(&lock));
    assert_true(RLSpinLockUnlock(&lock));
    /* A second unlock is caught too. */
    assert_false(RLSpinLockUnlock(&lock));
    assert_rl_error(kRLErrorNotLocked);

    assert_false(RLSpinLockInit(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockTry(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockLock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockUnlock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockIsLocked(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockTryOutOfLine(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockLockOutOfLine(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockUnlockOutOfLine(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLSpinLockIsLockedOutOfLine(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
}

/* A lock taken by one thread may be released by another (no owner is
 * recorded, as OSSpinLock): documented, so tested. */
static void *unlock_other(void *arg) {
    return RLSpinLockUnlock(arg) ? NULL : (void *)1;
}

static void test_unlock_from_other_thread(void **state) {
    RLSpinLock lock = RL_SPINLOCK_INIT;
    assert_true(RLSpinLockLock(&lock));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, unlock_other, &lock), 0);
    void *r;
    pthread_join(t, &r);
    assert_null(r);
    assert_false(RLSpinLockIsLocked(&lock));
}

/* ---- exclusion: a non-atomic counter protected by the lock ---- */

enum { THREADS = 8 };

static RLSpinLock g_lock = RL_SPINLOCK_INIT;
static long g_counter;
static long g_inside; /* >1 would mean two threads in the section */
static _Atomic int g_overlap;

static void critical_section(void) {
    if (++g_inside != 1)
        g_overlap = 1;
    g_counter++;
    g_inside--;
}

static void *stress_worker(void *arg) {
    long n = rl_test_iters(1000000);
    long mode = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        switch ((mode + i) % 3) {
        case 0:
            RLSpinLockLock(&g_lock);
            break;
        case 1:
            RLSpinLockLockOutOfLine(&g_lock);
            break;
        default:
            while (!RLSpinLockTry(&g_lock))
                sched_yield(); /* the holder may be waiting for our CPU */
            break;
        }
        critical_section();
        if (i & 1)
            RLSpinLockUnlock(&g_lock);
        else
            RLSpinLockUnlockOutOfLine(&g_lock);
    }
    return NULL;
}

static void test_exclusion_exact_total(void **state) {
    g_counter = 0;
    g_overlap = 0;
    pthread_t t[THREADS];
    for (intptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stress_worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(g_overlap, 0);
    assert_int_equal(g_counter, THREADS * rl_test_iters(1000000));
    assert_false(RLSpinLockIsLocked(&g_lock));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial_state_and_try),
        cmocka_unit_test(test_out_of_line_twins),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_unlock_from_other_thread),
        cmocka_unit_test(test_exclusion_exact_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
