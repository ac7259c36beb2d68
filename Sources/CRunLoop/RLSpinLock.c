/* RLSpinLock.c — the exported twins of the inline spin-lock functions, and
 * their cold paths: NULL and misuse reporting, and lock debugging (which
 * needs a real return address for `where`, so it cannot live inline). */
#include "RLLockDebugInternal.h"

#include <crunloop/RLSpinLock.h>

static bool check(const RLSpinLock *lock, const char *fn) {
    if (RL__UNLIKELY(lock == NULL))
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL spin lock");
    return true;
}

bool RLSpinLockInit(RLSpinLock *lock) {
    if (!check(lock, "RLSpinLockInit"))
        return false;
    __atomic_store_n(&lock->_state, 0, __ATOMIC_RELEASE);
    return true;
}

static bool try_lock(RLSpinLock *lock, const void *where) {
    if (!rl__spinlock_try_fast(lock))
        return false;
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_acquired_kind(RL__LOCKDEP_SPIN, lock, NULL, where);
    return true;
}

static void lock_contended(RLSpinLock *lock) {
    for (unsigned round = 0;; round++) {
        unsigned shift = round < RL_SPINLOCK_BACKOFF_MAX_SHIFT ? round : RL_SPINLOCK_BACKOFF_MAX_SHIFT;
        for (unsigned i = 0; i < (1u << shift); i++)
            rl__spinlock_pause();
        if (round >= RL_SPINLOCK_SPIN_ROUNDS)
            sched_yield();
        if (rl__spinlock_try_fast(lock))
            return;
    }
}

static void lock_lock(RLSpinLock *lock, const void *where) {
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug)
        rl__lockdep_will_acquire_kind(RL__LOCKDEP_SPIN, lock, NULL, where);
    if (__atomic_exchange_n(&lock->_state, 1, __ATOMIC_ACQUIRE) != 0)
        lock_contended(lock);
    if (debug)
        rl__lockdep_acquired_kind(RL__LOCKDEP_SPIN, lock, NULL, where);
}

static bool unlock(RLSpinLock *lock) {
    /* An exchange rather than a store, so that a racing double unlock is
     * caught by exactly one of the two callers. */
    if (__atomic_exchange_n(&lock->_state, 0, __ATOMIC_RELEASE) == 0)
        return rl__fail(kRLErrorNotLocked, "RLSpinLockUnlock", "spin lock %p is not locked", (void *)lock);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released_kind(RL__LOCKDEP_SPIN, lock);
    return true;
}

/* `where` is the caller's return address: the inline functions call these
 * from the user's own function, so it names the user's call site. */
bool RLSpinLockTryOutOfLine(RLSpinLock *lock) {
    return check(lock, "RLSpinLockTry") && try_lock(lock, __builtin_return_address(0));
}

bool RLSpinLockLockOutOfLine(RLSpinLock *lock) {
    if (!check(lock, "RLSpinLockLock"))
        return false;
    lock_lock(lock, __builtin_return_address(0));
    return true;
}

bool RLSpinLockUnlockOutOfLine(RLSpinLock *lock) {
    return check(lock, "RLSpinLockUnlock") && unlock(lock);
}

bool RLSpinLockIsLockedOutOfLine(const RLSpinLock *lock) {
    return check(lock, "RLSpinLockIsLocked") && __atomic_load_n(&lock->_state, __ATOMIC_RELAXED) != 0;
}
