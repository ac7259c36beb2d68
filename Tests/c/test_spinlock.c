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
    /* Busy leaves kRLErrorBusy, as every try function does. */
    RLErrorClear();
    assert_rl_fails(RLSpinLockTry(&lock), kRLErrorBusy);
    assert_true(RLSpinLockUnlock(&lock));
    assert_false(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockLock(&lock));
    assert_false(RLSpinLockTry(&lock));
    assert_true(RLSpinLockUnlock(&lock));
}

static void test_out_of_line_twins(void **state) {
    RLSpinLock lock;
    assert_true(RLSpinLockInit(&lock));
    assert_false(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockTry(&lock));
    assert_true(RLSpinLockIsLocked(&lock));
    RLErrorClear();
    assert_rl_fails(RLSpinLockTry(&lock), kRLErrorBusy);
    assert_true(RLSpinLockUnlock(&lock));
    assert_true(RLSpinLockLock(&lock));
    /* Both forms operate on the same word. */
    assert_false(RLSpinLockTry(&lock));
    assert_true(RLSpinLockUnlock(&lock));
    assert_false(RLSpinLockIsLocked(&lock));
}

static void test_misuse(void **state) {
    RLSpinLock lock = RL_SPINLOCK_INIT;
    /* Unlock of a lock nobody holds: an error, and the lock stays usable. */
    assert_rl_fails(RLSpinLockUnlock(&lock), kRLErrorNotLocked);
    assert_rl_fails(RLSpinLockUnlock(&lock), kRLErrorNotLocked);
    assert_false(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockLock(&lock));
    assert_true(RLSpinLockUnlock(&lock));
    /* A second unlock is caught too. */
    assert_rl_fails(RLSpinLockUnlock(&lock), kRLErrorNotLocked);

    assert_rl_fails(RLSpinLockInit(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockTry(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockIsLocked(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockTry(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSpinLockIsLocked(NULL), kRLErrorInvalidArgument);
}

/* Unlike OSSpinLock, the lock records its holder: another thread may not
 * release it, and the holder relocking it fails instead of spinning. */
typedef struct other_probe {
    RLSpinLock *lock;
    bool unlock_result, unlock_ool_result, try_result, try_ool_result;
    RLErrorCode unlock_error, unlock_ool_error, try_error, try_ool_error;
} other_probe;

static void *other_thread(void *arg) {
    other_probe *p = arg;
    p->unlock_result = RLSpinLockUnlock(p->lock);
    p->unlock_error = RLErrorGetLast().code;
    p->unlock_ool_result = RLSpinLockUnlock(p->lock);
    p->unlock_ool_error = RLErrorGetLast().code;
    p->try_result = RLSpinLockTry(p->lock);
    p->try_error = RLErrorGetLast().code;
    p->try_ool_result = RLSpinLockTry(p->lock);
    p->try_ool_error = RLErrorGetLast().code;
    return NULL;
}

static void test_unlock_from_other_thread_is_refused(void **state) {
    RLSpinLock lock = RL_SPINLOCK_INIT;
    assert_true(RLSpinLockLock(&lock));
    other_probe p = {.lock = &lock};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &p), 0);
    pthread_join(t, NULL);
    assert_false(p.unlock_result);
    assert_int_equal(p.unlock_error, kRLErrorNotOwner);
    assert_false(p.unlock_ool_result);
    assert_int_equal(p.unlock_ool_error, kRLErrorNotOwner);
    assert_false(p.try_result);
    assert_int_equal(p.try_error, kRLErrorBusy);
    assert_false(p.try_ool_result);
    assert_int_equal(p.try_ool_error, kRLErrorBusy);
    /* Still ours and usable. */
    assert_true(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockUnlock(&lock));
    assert_false(RLSpinLockIsLocked(&lock));
}

static void test_relock_by_holder_fails(void **state) {
    RLSpinLock lock = RL_SPINLOCK_INIT;
    assert_true(RLSpinLockLock(&lock));
    assert_rl_fails(RLSpinLockLock(&lock), kRLErrorWouldDeadlock);
    assert_rl_fails(RLSpinLockLock(&lock), kRLErrorWouldDeadlock);
    assert_rl_fails(RLSpinLockTry(&lock), kRLErrorBusy);
    assert_true(RLSpinLockIsLocked(&lock));
    assert_true(RLSpinLockUnlock(&lock));
    /* Taken out of line, released inline, and the other way round. */
    assert_true(RLSpinLockLock(&lock));
    assert_rl_fails(RLSpinLockLock(&lock), kRLErrorWouldDeadlock);
    assert_true(RLSpinLockUnlock(&lock));
    assert_true(RLSpinLockTry(&lock));
    assert_true(RLSpinLockUnlock(&lock));
    assert_rl_fails(RLSpinLockUnlock(&lock), kRLErrorNotLocked);
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
            RLSpinLockLock(&g_lock);
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
            RLSpinLockUnlock(&g_lock);
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
        cmocka_unit_test(test_unlock_from_other_thread_is_refused),
        cmocka_unit_test(test_relock_by_holder_fails),
        cmocka_unit_test(test_exclusion_exact_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
