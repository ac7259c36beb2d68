/* test_rwlock.c — RLReadWriteLock: shared and exclusive holds, re-entrant
 * reads, misuse (unlock not held, non-owner, upgrade), timed and try forms,
 * a waiting writer blocking new readers, writer-not-starved, exact-total
 * stress. */
#include "testutil.h"
#include "lockutil.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static bool try_read(void *l) { return RLReadWriteLockTryReadLock(l); }
static bool try_write(void *l) { return RLReadWriteLockTryWriteLock(l); }
static bool unlock(void *l) { return RLReadWriteLockUnlock(l); }

static void test_shared_and_exclusive(void **state) {
    RLReadWriteLockRef lock = RLReadWriteLockCreate();
    assert_non_null(lock);
    assert_string_equal(RLGetTypeName(lock), "RLReadWriteLock");

    assert_true(RLReadWriteLockReadLock(lock));
    assert_int_equal(rl_try_elsewhere(lock, try_read, unlock), RL_TRY_GOT_IT); /* readers share */
    assert_int_equal(rl_try_elsewhere(lock, try_write, unlock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(lock));

    assert_true(RLReadWriteLockWriteLock(lock));
    assert_int_equal(rl_try_elsewhere(lock, try_read, unlock), kRLErrorBusy);
    assert_int_equal(rl_try_elsewhere(lock, try_write, unlock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(lock));

    assert_true(RLReadWriteLockTryWriteLock(lock));
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLReadWriteLockTryReadLock(lock));
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLReadWriteLockReadLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() - 1));
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLReadWriteLockWriteLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() - 1));
    assert_true(RLReadWriteLockUnlock(lock));
    assert_int_equal(rl_try_elsewhere(lock, try_write, unlock), RL_TRY_GOT_IT);
    assert_true(RLRelease(lock));
}

static void test_reentrant_reads(void **state) {
    RLReadWriteLockRef lock = RLReadWriteLockCreate();
    assert_true(RLReadWriteLockReadLock(lock));
    assert_true(RLReadWriteLockReadLock(lock));
    assert_true(RLReadWriteLockTryReadLock(lock));
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLReadWriteLockUnlock(lock));
    assert_int_equal(rl_try_elsewhere(lock, try_write, unlock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(lock));
    assert_rl_fails(RLReadWriteLockUnlock(lock), kRLErrorNotLocked);
    assert_int_equal(rl_try_elsewhere(lock, try_write, unlock), RL_TRY_GOT_IT);
    assert_true(RLRelease(lock));
}

/* Unlock finds the caller's hold by the lock it is given: with a read hold
 * on one lock, unlocking another one it does not hold fails and leaves the
 * hold it has. */
static void test_unlock_of_a_lock_not_held_keeps_the_hold(void **state) {
    RLReadWriteLockRef a = RLReadWriteLockCreate(), b = RLReadWriteLockCreate();
    assert_true(RLReadWriteLockReadLock(a));
    assert_rl_fails(RLReadWriteLockUnlock(b), kRLErrorNotLocked);
    assert_int_equal(rl_try_elsewhere(a, try_write, unlock), kRLErrorBusy);
    assert_true(RLReadWriteLockReadLock(b));
    assert_true(RLReadWriteLockUnlock(a)); /* the first of two holds */
    assert_rl_fails(RLReadWriteLockUnlock(a), kRLErrorNotLocked);
    assert_int_equal(rl_try_elsewhere(a, try_write, unlock), RL_TRY_GOT_IT);
    assert_int_equal(rl_try_elsewhere(b, try_write, unlock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(b));
    assert_true(RLReadWriteLockWriteLock(b)); /* no read hold left on b */
    assert_true(RLReadWriteLockUnlock(b));
    assert_true(RLRelease(a));
    assert_true(RLRelease(b));
}

static void test_deadlocks_are_reported(void **state) {
    RLReadWriteLockRef lock = RLReadWriteLockCreate();
    assert_true(RLReadWriteLockReadLock(lock));
    /* Upgrading would wait for our own read hold. */
    assert_rl_fails(RLReadWriteLockWriteLock(lock), kRLErrorWouldDeadlock);
    assert_rl_fails(RLReadWriteLockWriteLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 100), kRLErrorWouldDeadlock);
    assert_rl_fails(RLReadWriteLockTryWriteLock(lock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(lock));

    assert_true(RLReadWriteLockWriteLock(lock));
    assert_rl_fails(RLReadWriteLockWriteLock(lock), kRLErrorWouldDeadlock);
    assert_rl_fails(RLReadWriteLockReadLock(lock), kRLErrorWouldDeadlock);
    assert_rl_fails(RLReadWriteLockReadLockBeforeDate(lock, RLAbsoluteTimeGetCurrent() + 100), kRLErrorWouldDeadlock);
    assert_rl_fails(RLReadWriteLockTryReadLock(lock), kRLErrorBusy);
    assert_rl_fails(RLReadWriteLockTryWriteLock(lock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(lock));
    assert_rl_fails(RLReadWriteLockUnlock(lock), kRLErrorNotLocked);
    assert_true(RLRelease(lock));
}

static void *unlock_elsewhere(void *arg) {
    bool ok = RLReadWriteLockUnlock(arg);
    return (void *)(intptr_t)(ok ? -1 : RLErrorGetLast().code);
}

static void test_misuse(void **state) {
    RLReadWriteLockRef lock = RLReadWriteLockCreate();
    assert_true(RLReadWriteLockWriteLock(lock));
    assert_int_equal((intptr_t)rl_test_on_other_thread(unlock_elsewhere, lock), kRLErrorNotOwner);
    assert_rl_fails(RLRelease(lock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLReadWriteLockReadLock(lock));
    assert_int_equal((intptr_t)rl_test_on_other_thread(unlock_elsewhere, lock), kRLErrorNotOwner);
    assert_rl_fails(RLRelease(lock), kRLErrorBusy);
    assert_true(RLReadWriteLockUnlock(lock));
    assert_int_equal((intptr_t)rl_test_on_other_thread(unlock_elsewhere, lock), kRLErrorNotLocked);

    assert_rl_fails(RLReadWriteLockReadLockBeforeDate(lock, NAN), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockWriteLockBeforeDate(lock, NAN), kRLErrorInvalidArgument);

    assert_rl_fails(RLReadWriteLockReadLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockTryReadLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockReadLockBeforeDate(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockWriteLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockTryWriteLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockWriteLockBeforeDate(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockSetName(NULL, "x"), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadWriteLockCopyName(NULL), kRLErrorInvalidArgument);
    RLLockRef plain = RLLockCreate();
    assert_rl_fails(RLReadWriteLockReadLock((RLReadWriteLockRef)plain), kRLErrorInvalidObject);
    assert_true(RLRelease(plain));

    /* Everything above left it usable. */
    assert_true(RLReadWriteLockWriteLock(lock));
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_names(void **state) {
    RLReadWriteLockRef lock = RLReadWriteLockCreate();
    char *name = RLReadWriteLockCopyName(lock);
    assert_string_equal(name, "");
    free(name);
    assert_true(RLReadWriteLockSetName(lock, "table"));
    name = RLReadWriteLockCopyName(lock);
    assert_string_equal(name, "table");
    free(name);
    assert_true(RLReadWriteLockReadLock(lock));
    char *desc = RLCopyDescription(lock);
    assert_non_null(strstr(desc, "'table' read-locked, readers=1"));
    free(desc);
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static bool read_within_50ms(void *l) {
    return RLReadWriteLockReadLockBeforeDate(l, RLAbsoluteTimeGetCurrent() + 0.05);
}

static bool write_within_50ms(void *l) {
    return RLReadWriteLockWriteLockBeforeDate(l, RLAbsoluteTimeGetCurrent() + 0.05);
}

static void test_timed_forms_time_out(void **state) {
    RLReadWriteLockRef lock = RLReadWriteLockCreate();
    assert_true(RLReadWriteLockWriteLock(lock));
    assert_int_equal(rl_try_elsewhere(lock, read_within_50ms, unlock), kRLErrorTimedOut);
    assert_int_equal(rl_try_elsewhere(lock, write_within_50ms, unlock), kRLErrorTimedOut);
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLReadWriteLockReadLock(lock));
    assert_int_equal(rl_try_elsewhere(lock, write_within_50ms, unlock), kRLErrorTimedOut);
    /* The writer that gave up no longer keeps readers out. */
    assert_int_equal(rl_try_elsewhere(lock, try_read, unlock), RL_TRY_GOT_IT);
    assert_true(RLReadWriteLockUnlock(lock));
    assert_true(RLRelease(lock));
}

/* A waiting writer keeps new readers out, but not a thread that already reads. */
typedef struct waiting_writer {
    RLReadWriteLockRef lock;
    _Atomic int got_it;
} waiting_writer;

static void *writer_thread(void *arg) {
    waiting_writer *w = arg;
    if (RLReadWriteLockWriteLock(w->lock)) {
        atomic_store(&w->got_it, 1);
        RLReadWriteLockUnlock(w->lock);
    }
    return NULL;
}

static void test_waiting_writer_blocks_new_readers(void **state) {
    waiting_writer w = {RLReadWriteLockCreate(), 0};
    assert_true(RLReadWriteLockReadLock(w.lock));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer_thread, &w), 0);
    /* Until the writer queues, another thread's try-read succeeds; after, it
     * fails (a writer cannot hold it while we read, so it is waiting). */
    while (rl_try_elsewhere(w.lock, try_read, unlock) == RL_TRY_GOT_IT)
        sched_yield();
    assert_int_equal(rl_try_elsewhere(w.lock, try_read, unlock), kRLErrorBusy);
    /* Our own second read must not wait behind the writer (it waits for us). */
    assert_true(RLReadWriteLockReadLock(w.lock));
    assert_true(RLReadWriteLockUnlock(w.lock));
    assert_int_equal(atomic_load(&w.got_it), 0);
    assert_true(RLReadWriteLockUnlock(w.lock));
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&w.got_it), 1);
    assert_true(RLRelease(w.lock));
}

/* Continuous readers must not keep a writer out forever. */
typedef struct starve {
    RLReadWriteLockRef lock;
    _Atomic int stop;
    _Atomic long reads;
    _Atomic int torn;
    long value;
} starve;

static void *busy_reader(void *arg) {
    starve *s = *(starve **)arg;
    while (!atomic_load(&s->stop)) {
        RLReadWriteLockReadLock(s->lock);
        /* Hold across a yield so that reader holds overlap: there is almost
         * never a moment with no reader for a reader-preferring lock to use. */
        long v = s->value;
        sched_yield();
        if (v != s->value) /* a writer got in while we read */
            atomic_store(&s->torn, 1);
        atomic_fetch_add(&s->reads, 1);
        RLReadWriteLockUnlock(s->lock);
    }
    return NULL;
}

static void test_writer_not_starved(void **state) {
    enum { READERS = 4, WRITES = 50 };
    starve s = {RLReadWriteLockCreate(), 0, 0, 0, 0};
    starve *args[READERS];
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++) {
        args[i] = &s;
        assert_int_equal(pthread_create(&t[i], NULL, busy_reader, &args[i]), 0);
    }
    while (atomic_load(&s.reads) < 100)
        sched_yield();
    for (int i = 0; i < WRITES; i++) {
        assert_true(RLReadWriteLockWriteLock(s.lock));
        s.value++;
        assert_true(RLReadWriteLockUnlock(s.lock));
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(s.value, WRITES);
    assert_int_equal(atomic_load(&s.torn), 0);
    assert_true(RLRelease(s.lock));
}

/* A thread reading many locks at once (more than the inline record holds). */
static void *read_many(void *arg) {
    enum { N = 40 };
    RLReadWriteLockRef locks[N];
    for (int i = 0; i < N; i++) {
        locks[i] = RLReadWriteLockCreate();
        if (!RLReadWriteLockReadLock(locks[i]) || !RLReadWriteLockReadLock(locks[i]))
            return (void *)0;
    }
    for (int i = 0; i < N; i++)
        if (RLReadWriteLockTryWriteLock(locks[i]) || RLErrorGetLast().code != kRLErrorBusy)
            return (void *)0;
    for (int i = N - 1; i >= 0; i -= 2)
        if (!RLReadWriteLockUnlock(locks[i]) || !RLReadWriteLockUnlock(locks[i]))
            return (void *)0;
    for (int i = 0; i < N; i += 2)
        if (!RLReadWriteLockUnlock(locks[i]) || !RLReadWriteLockUnlock(locks[i]))
            return (void *)0;
    for (int i = 0; i < N; i++) {
        if (RLReadWriteLockUnlock(locks[i]) || RLErrorGetLast().code != kRLErrorNotLocked)
            return (void *)0;
        if (!RLRelease(locks[i]))
            return (void *)0;
    }
    return (void *)1;
}

static void test_many_read_holds_per_thread(void **state) {
    assert_true((intptr_t)rl_test_on_other_thread(read_many, NULL));
}

static bool stress_round(rl_stress *s, long i) {
    if ((i & 3) == 0) {
        if (!RLReadWriteLockReadLock(s->lock))
            return false;
        rl_stress_check(s);
        if (!RLReadWriteLockUnlock(s->lock))
            return false;
    }
    bool locked = (i & 1) ? RLReadWriteLockWriteLock(s->lock)
                          : RLReadWriteLockWriteLockBeforeDate(s->lock, RLAbsoluteTimeGetCurrent() + 1e6);
    if (!locked)
        return false;
    rl_stress_bump(s);
    return RLReadWriteLockUnlock(s->lock);
}

static void test_stress_exact_total(void **state) {
    rl_stress s = {.lock = RLReadWriteLockCreate(), .round = stress_round};
    rl_stress_run(&s);
    assert_rl_stress_exact_total(&s);
    assert_true(RLRelease(s.lock));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_and_exclusive),
        cmocka_unit_test(test_reentrant_reads),
        cmocka_unit_test(test_deadlocks_are_reported),
        cmocka_unit_test(test_unlock_of_a_lock_not_held_keeps_the_hold),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_timed_forms_time_out),
        cmocka_unit_test(test_waiting_writer_blocks_new_readers),
        cmocka_unit_test(test_writer_not_starved),
        cmocka_unit_test(test_many_read_holds_per_thread),
        cmocka_unit_test(test_stress_exact_total),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
