/* RLCondition.c — NSCondition: the shared futex mutex plus a sequence-number
 * condition variable.
 *
 * A waiter reads `seq` while it still holds the lock, then sleeps on `seq`
 * having that value. Signal/Broadcast bump `seq` before waking, so a waiter
 * that has released the lock but not yet gone to sleep sees the new value
 * and returns at once: no wake-up between the unlock and the sleep is lost.
 * `waiters` (incremented before `seq` is read, both sequentially consistent)
 * lets a signal with nobody waiting skip the system call. */
#include "RLLockInternal.h"
#include "RLLockDebugInternal.h"
#include <crunloop/RLCondition.h>

#include <limits.h>
#include <stdlib.h>

struct RLCondition {
    rl__object base;
    rl__mutex m;
    _Atomic uint32_t seq;
    _Atomic uint32_t waiters;
    rl__lockname name;
};

static bool cond_can_destroy(void *obj) { return rl__mutex_can_destroy(&((RLConditionRef)obj)->m, "RLCondition"); }

static void cond_finalize(void *obj) {
    RLConditionRef cond = obj;
    rl__lockdep_forget(cond);
    rl__lockname_free(&cond->name);
}

static char *cond_describe(const void *obj) {
    RLConditionRef cond = (RLConditionRef)obj;
    return rl__lock_describe("RLCondition", obj, &cond->name, rl__mutex_is_locked(&cond->m) ? "locked" : "unlocked");
}

static const rl__class condition_class = {"RLCondition", cond_finalize, cond_can_destroy, cond_describe};

RLConditionRef RLConditionCreate(void) {
    return rl__object_alloc(&condition_class, sizeof(struct RLCondition), __func__);
}

bool RLConditionLock(RLConditionRef cond) {
    if (!rl__check(cond, &condition_class, __func__))
        return false;
    if (RL__LIKELY(!rl__lockdep_enabled()) && RL__LIKELY(rl__mutex_trylock(&cond->m)))
        return true;
    return rl__mutex_lock_checked(&cond->m, cond, &cond->name, NULL, __func__, __builtin_return_address(0));
}

bool RLConditionTryLock(RLConditionRef cond) {
    if (!rl__check(cond, &condition_class, __func__))
        return false;
    return rl__mutex_trylock_checked(&cond->m, cond, &cond->name, __func__, __builtin_return_address(0));
}

bool RLConditionLockBeforeDate(RLConditionRef cond, RLAbsoluteTime limit) {
    struct timespec deadline;
    if (!rl__check(cond, &condition_class, __func__) ||
        !rl__deadline_for(limit, &deadline, __func__))
        return false;
    return rl__mutex_lock_checked(&cond->m, cond, &cond->name, &deadline, __func__,
                                  __builtin_return_address(0));
}

bool RLConditionUnlock(RLConditionRef cond) {
    if (!rl__check(cond, &condition_class, __func__))
        return false;
    return rl__mutex_unlock_checked(&cond->m, cond, __func__);
}

/* Releases the lock, sleeps on seq, retakes the lock. Returns ETIMEDOUT if
 * the deadline passed, else 0; the lock is held again either way. */
static int cond_wait(RLConditionRef cond, const struct timespec *deadline, const void *where) {
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug)
        rl__lockdep_released(cond);
    atomic_fetch_add(&cond->waiters, 1);
    uint32_t seq = atomic_load(&cond->seq);
    rl__mutex_unlock(&cond->m);
    int err = rl__futex_wait(&cond->seq, seq, deadline);
    atomic_fetch_sub(&cond->waiters, 1);
    /* Retaking the lock has no time limit: the caller is promised the lock
     * back, and its holder cannot wait for us. */
    if (debug)
        rl__lockdep_will_acquire(cond, rl__lockname_get(&cond->name), where);
    if (!rl__mutex_trylock(&cond->m))
        rl__mutex_lock_slow(&cond->m, NULL);
    if (debug)
        rl__lockdep_acquired(cond, rl__lockname_get(&cond->name), where);
    return err;
}

bool RLConditionWait(RLConditionRef cond) {
    if (!rl__check(cond, &condition_class, __func__) ||
        !rl__mutex_check_owner(&cond->m, __func__))
        return false;
    cond_wait(cond, NULL, __builtin_return_address(0));
    return true;
}

bool RLConditionWaitUntilDate(RLConditionRef cond, RLAbsoluteTime limit) {
    struct timespec deadline;
    if (!rl__check(cond, &condition_class, __func__) ||
        !rl__deadline_for(limit, &deadline, __func__) ||
        !rl__mutex_check_owner(&cond->m, __func__))
        return false;
    if (cond_wait(cond, &deadline, __builtin_return_address(0)) == ETIMEDOUT)
        return rl__fail(kRLErrorTimedOut, __func__, "not signalled before the date");
    return true;
}

static void cond_wake(RLConditionRef cond, int n) {
    atomic_fetch_add(&cond->seq, 1);
    if (atomic_load(&cond->waiters) != 0)
        rl__futex_wake(&cond->seq, n);
}

bool RLConditionSignal(RLConditionRef cond) {
    if (!rl__check(cond, &condition_class, __func__))
        return false;
    cond_wake(cond, 1);
    return true;
}

bool RLConditionBroadcast(RLConditionRef cond) {
    if (!rl__check(cond, &condition_class, __func__))
        return false;
    cond_wake(cond, INT_MAX);
    return true;
}

bool RLConditionSetName(RLConditionRef cond, const char *name) {
    if (!rl__check(cond, &condition_class, __func__))
        return false;
    return rl__lockname_set(&cond->name, name, __func__);
}

char *RLConditionCopyName(RLConditionRef cond) {
    if (!rl__check(cond, &condition_class, __func__))
        return NULL;
    return rl__lockname_copy(&cond->name, __func__);
}
