/* RLSpinLock.c — the spin lock: an exchange on the fast path; NULL and
 * misuse reporting, and lock debugging (which records the caller's return
 * address as `where`) off it. */
#include "RLLockDebugInternal.h"

#include <crunloop/RLSpinLock.h>

static bool check(const RLSpinLock *lock, const char *fn) {
    if (RL__UNLIKELY(lock == NULL))
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL spin lock");
    return true;
}

bool RLSpinLockInit(RLSpinLock *lock) {
    if (!check(lock, __func__))
        return false;
    __atomic_store_n(&lock->_owner, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lock->_state, 0, __ATOMIC_RELEASE);
    return true;
}

static bool held_by_self(const RLSpinLock *lock) {
    return __atomic_load_n(&lock->_owner, __ATOMIC_RELAXED) == rl__thread_pointer();
}

static void set_owner(RLSpinLock *lock) {
    __atomic_store_n(&lock->_owner, rl__thread_pointer(), __ATOMIC_RELAXED);
}

static bool try_fast(RLSpinLock *lock) {
    /* Test first: a failed exchange would still take the line exclusive. */
    return __atomic_load_n(&lock->_state, __ATOMIC_RELAXED) == 0 &&
           __atomic_exchange_n(&lock->_state, 1, __ATOMIC_ACQUIRE) == 0;
}

static bool debugging(void) { return RL__UNLIKELY(rl__lockdep_enabled()); }

static bool try_failed(RLSpinLock *lock) {
    return rl__fail(kRLErrorBusy, "RLSpinLockTry", "spin lock %p is held%s", (void *)lock,
                    held_by_self(lock) ? " by the calling thread" : " by another thread");
}

static bool would_deadlock(RLSpinLock *lock) {
    return rl__fail(kRLErrorWouldDeadlock, "RLSpinLockLock",
                    "spin lock %p is already held by the calling thread", (void *)lock);
}

static bool try_lock(RLSpinLock *lock, const void *where) {
    if (!try_fast(lock))
        return try_failed(lock);
    set_owner(lock);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_acquired_kind(RL__LOCKDEP_SPIN, lock, NULL, where);
    return true;
}

/* Spins until the lock is taken. Only the holder writes its own identity
 * to _owner, so seeing ours there means we hold it: fail rather than spin
 * forever. Checked once: it cannot become true while we spin. */
static bool lock_contended(RLSpinLock *lock) {
    if (held_by_self(lock))
        return would_deadlock(lock);
    for (unsigned round = 0;; round++) {
        unsigned shift = round < RL_SPINLOCK_BACKOFF_MAX_SHIFT ? round : RL_SPINLOCK_BACKOFF_MAX_SHIFT;
        for (unsigned i = 0; i < (1u << shift); i++)
            rl__cpu_relax();
        if (round >= RL_SPINLOCK_SPIN_ROUNDS)
            sched_yield();
        if (try_fast(lock)) {
            set_owner(lock);
            return true;
        }
    }
}

static bool lock_lock(RLSpinLock *lock, const void *where) {
    if (held_by_self(lock))
        return would_deadlock(lock);
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug)
        rl__lockdep_will_acquire_kind(RL__LOCKDEP_SPIN, lock, NULL, where);
    if (__atomic_exchange_n(&lock->_state, 1, __ATOMIC_ACQUIRE) != 0)
        (void)lock_contended(lock);
    else
        set_owner(lock);
    if (debug)
        rl__lockdep_acquired_kind(RL__LOCKDEP_SPIN, lock, NULL, where);
    return true;
}

static bool unlock(RLSpinLock *lock) {
    if (!held_by_self(lock)) {
        if (__atomic_load_n(&lock->_state, __ATOMIC_RELAXED) == 0)
            return rl__fail(kRLErrorNotLocked, "RLSpinLockUnlock", "spin lock %p is not locked",
                            (void *)lock);
        return rl__fail(kRLErrorNotOwner, "RLSpinLockUnlock",
                        "spin lock %p is held by another thread, not the calling one", (void *)lock);
    }
    __atomic_store_n(&lock->_owner, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lock->_state, 0, __ATOMIC_RELEASE);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released_kind(RL__LOCKDEP_SPIN, lock);
    return true;
}

/* `where` is the caller's return address: the user's call site. */
bool RLSpinLockTry(RLSpinLock *lock) {
    if (RL__UNLIKELY(lock == NULL) || debugging())
        return check(lock, __func__) && try_lock(lock, __builtin_return_address(0));
    if (RL__UNLIKELY(!try_fast(lock)))
        return try_failed(lock);
    set_owner(lock);
    return true;
}

bool RLSpinLockLock(RLSpinLock *lock) {
    if (RL__UNLIKELY(lock == NULL) || debugging())
        return check(lock, __func__) && lock_lock(lock, __builtin_return_address(0));
    if (RL__UNLIKELY(__atomic_exchange_n(&lock->_state, 1, __ATOMIC_ACQUIRE) != 0))
        return lock_contended(lock);
    set_owner(lock);
    return true;
}

bool RLSpinLockUnlock(RLSpinLock *lock) {
    return check(lock, __func__) && unlock(lock);
}

bool RLSpinLockIsLocked(const RLSpinLock *lock) {
    return check(lock, __func__) && __atomic_load_n(&lock->_state, __ATOMIC_RELAXED) != 0;
}
