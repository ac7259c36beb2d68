/* RLConditionLock.c — NSConditionLock over the shared futex mutex.
 *
 * The condition value lives beside the mutex and changes only under it.
 * A thread waiting for a value sleeps on `seq` (read under the mutex, as in
 * RLCondition.c); UnlockWithCondition bumps `seq` under the mutex when the
 * value changes and wakes the sleepers after releasing it, so woken threads
 * do not immediately pile up on a mutex that is still held. */
#include "RLLockInternal.h"
#include "RLLockDebugInternal.h"
#include <crunloop/RLCondition.h>
#include <crunloop/RLConditionLock.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

struct RLConditionLock {
    rl__object base;
    rl__mutex m;
    /* Written under m; atomic so GetCondition may read it without the lock. */
    _Atomic RLIndex condition;
    _Atomic uint32_t seq;
    _Atomic uint32_t waiters;
    rl__lockname name;
};

typedef struct RLConditionLock *CL;

static bool cl_can_destroy(void *obj) { return rl__mutex_can_destroy(&((CL)obj)->m, "RLConditionLock"); }

static void cl_finalize(void *obj) {
    CL lock = obj;
    rl__lockdep_forget(lock);
    rl__lockname_free(&lock->name);
}

static char *cl_describe(const void *obj) {
    CL lock = (CL)obj;
    char state[64];
    snprintf(state, sizeof state, "%s condition=%ld", rl__mutex_is_locked(&lock->m) ? "locked" : "unlocked",
             (long)atomic_load_explicit(&lock->condition, memory_order_relaxed));
    return rl__lock_describe("RLConditionLock", obj, &lock->name, state);
}

static const rl__class condlock_class = {"RLConditionLock", cl_finalize, cl_can_destroy, cl_describe};

RLConditionLockRef RLConditionLockCreateWithCondition(RLIndex condition) {
    CL lock = rl__object_alloc(&condlock_class, sizeof(struct RLConditionLock),
                               __func__);
    if (lock)
        atomic_init(&lock->condition, condition);
    return lock;
}

bool RLConditionLockGetCondition(RLConditionLockRef lock, RLIndex *condition) {
    if (!rl__check(lock, &condlock_class, __func__))
        return false;
    if (!condition)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL condition pointer");
    *condition = atomic_load_explicit(&lock->condition, memory_order_relaxed);
    return true;
}

static RLIndex cl_value(CL lock) { return atomic_load_explicit(&lock->condition, memory_order_relaxed); }

/* Takes the lock once its condition equals `want` (deadline NULL: no limit).
 * The whole operation, including waiting for the mutex, honours the
 * deadline; on failure the lock is not held. */
static bool cl_lock_when(CL lock, RLIndex want, const struct timespec *deadline, const char *fn,
                         const void *where) {
    if (RL__UNLIKELY(rl__mutex_held_by_self(&lock->m)))
        return rl__fail(kRLErrorWouldDeadlock, fn, "%p is already held by the calling thread", (void *)lock);
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug)
        rl__lockdep_will_acquire(lock, rl__lockname_get(&lock->name), where);
    if (!rl__mutex_trylock(&lock->m) && rl__mutex_lock_slow(&lock->m, deadline) != 0)
        return rl__fail(kRLErrorTimedOut, fn, "%p was not acquired before the date", (void *)lock);
    while (cl_value(lock) != want) {
        atomic_fetch_add(&lock->waiters, 1);
        uint32_t seq = atomic_load(&lock->seq);
        rl__mutex_unlock(&lock->m);
        int err = rl__futex_wait(&lock->seq, seq, deadline);
        atomic_fetch_sub(&lock->waiters, 1);
        if (!rl__mutex_trylock(&lock->m) && rl__mutex_lock_slow(&lock->m, deadline) != 0)
            err = ETIMEDOUT;
        else if (err == ETIMEDOUT && cl_value(lock) == want)
            err = 0; /* the value arrived as the time ran out: take it */
        else if (err == ETIMEDOUT)
            rl__mutex_unlock(&lock->m);
        if (err == ETIMEDOUT)
            return rl__fail(kRLErrorTimedOut, fn, "condition %ld did not arrive before the date", (long)want);
    }
    if (debug)
        rl__lockdep_acquired(lock, rl__lockname_get(&lock->name), where);
    return true;
}

bool RLConditionLockLock(RLConditionLockRef lock) {
    if (!rl__check(lock, &condlock_class, __func__))
        return false;
    if (RL__LIKELY(!rl__lockdep_enabled()) && RL__LIKELY(rl__mutex_trylock(&lock->m)))
        return true;
    return rl__mutex_lock_checked(&lock->m, lock, &lock->name, NULL, __func__,
                                  __builtin_return_address(0));
}

bool RLConditionLockTryLock(RLConditionLockRef lock) {
    if (!rl__check(lock, &condlock_class, __func__))
        return false;
    return rl__mutex_trylock_checked(&lock->m, lock, &lock->name, __func__,
                                     __builtin_return_address(0));
}

bool RLConditionLockLockBeforeDate(RLConditionLockRef lock, RLAbsoluteTime limit) {
    struct timespec deadline;
    if (!rl__check(lock, &condlock_class, __func__) ||
        !rl__deadline_for(limit, &deadline, __func__))
        return false;
    return rl__mutex_lock_checked(&lock->m, lock, &lock->name, &deadline, __func__,
                                  __builtin_return_address(0));
}

bool RLConditionLockLockWhenCondition(RLConditionLockRef lock, RLIndex condition) {
    if (!rl__check(lock, &condlock_class, __func__))
        return false;
    return cl_lock_when(lock, condition, NULL, __func__, __builtin_return_address(0));
}

bool RLConditionLockLockWhenConditionBeforeDate(RLConditionLockRef lock, RLIndex condition, RLAbsoluteTime limit) {
    const char *fn = __func__;
    struct timespec deadline;
    if (!rl__check(lock, &condlock_class, fn) || !rl__deadline_for(limit, &deadline, fn))
        return false;
    return cl_lock_when(lock, condition, &deadline, fn, __builtin_return_address(0));
}

bool RLConditionLockTryLockWhenCondition(RLConditionLockRef lock, RLIndex condition) {
    const char *fn = __func__;
    if (!rl__check(lock, &condlock_class, fn))
        return false;
    if (!rl__mutex_trylock(&lock->m))
        return rl__fail(kRLErrorBusy, fn, "the lock is held%s",
                        rl__mutex_held_by_self(&lock->m) ? " by the calling thread" : "");
    RLIndex now = cl_value(lock);
    if (now != condition) {
        rl__mutex_unlock(&lock->m);
        return rl__fail(kRLErrorInvalidState, fn, "the condition is %ld, not %ld", (long)now, (long)condition);
    }
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_acquired(lock, rl__lockname_get(&lock->name), __builtin_return_address(0));
    return true;
}

bool RLConditionLockUnlock(RLConditionLockRef lock) {
    if (!rl__check(lock, &condlock_class, __func__))
        return false;
    return rl__mutex_unlock_checked(&lock->m, lock, __func__);
}

bool RLConditionLockUnlockWithCondition(RLConditionLockRef lock, RLIndex condition) {
    const char *fn = __func__;
    if (!rl__check(lock, &condlock_class, fn) || !rl__mutex_check_owner(&lock->m, fn))
        return false;
    bool wake = false;
    if (cl_value(lock) != condition) {
        atomic_store_explicit(&lock->condition, condition, memory_order_relaxed);
        atomic_fetch_add(&lock->seq, 1);
        wake = atomic_load(&lock->waiters) != 0;
    }
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released(lock);
    rl__mutex_unlock(&lock->m);
    /* Every waiter re-checks its own value; only some may proceed. The object
     * stays alive: the caller still owns a reference. */
    if (wake)
        rl__futex_wake(&lock->seq, INT_MAX);
    return true;
}

bool RLConditionLockSetName(RLConditionLockRef lock, const char *name) {
    if (!rl__check(lock, &condlock_class, __func__))
        return false;
    return rl__lockname_set(&lock->name, name, __func__);
}

char *RLConditionLockCopyName(RLConditionLockRef lock) {
    if (!rl__check(lock, &condlock_class, __func__))
        return NULL;
    return rl__lockname_copy(&lock->name, __func__);
}
