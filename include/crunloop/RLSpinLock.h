/*
 * RLSpinLock.h — a spin lock (OSSpinLock) for very short critical sections.
 *
 * RLSpinLock is a plain value: declare it, initialize it with
 * RL_SPINLOCK_INIT (or zero it, or call RLSpinLockInit) and it is ready; it
 * owns no resources and needs no destroy. Try/lock/unlock are inline: an
 * uncontended lock+unlock is one atomic exchange and one store, plus plain
 * loads of the lock-debugging flag and, on unlock, of the lock word. A waiter
 * spins on a plain load (so it does not bounce the cache line), with
 * exponentially growing runs of the CPU's pause instruction, and after a
 * bounded number of rounds yields the CPU with sched_yield() on every
 * further round, so a holder that was preempted gets to run.
 *
 * Use it only where the lock is held for a handful of instructions and the
 * holder is never descheduled for long: it does not sleep, is not fair and
 * has no priority inheritance. RLLock is the right default.
 *
 * Misuse checks (cheap enough to stay on):
 *   - NULL: every function returns false with kRLErrorInvalidArgument.
 *   - Unlocking a lock that is not locked returns false with
 *     kRLErrorNotLocked and leaves the lock unlocked.
 * Not checked: the lock records no owner (as OSSpinLock), so an unlock from
 * a thread other than the locker is allowed, and relocking from the holding
 * thread spins forever. An inline unlock racing with another unlock of the
 * same lock may both succeed; the exported form uses an exchange and
 * catches that too. With lock debugging on (RLLockDebug.h) spin locks take
 * part in lock-order checking, through the exported forms.
 *
 * The *OutOfLine functions are the same operations as exported functions,
 * for callers that cannot use inline C (Swift overlays, dlsym, FFI).
 */
#ifndef CRUNLOOP_RLSPINLOCK_H
#define CRUNLOOP_RLSPINLOCK_H

#include <crunloop/RLBase.h>
#include <crunloop/RLLockDebug.h>

#include <sched.h>

RL_EXTERN_C_BEGIN

typedef struct RLSpinLock {
    int32_t _state; /* private: 0 unlocked, 1 locked; accessed atomically only */
} RLSpinLock;

#define RL_SPINLOCK_INIT {0}

/* Spin rounds before every further round also yields the CPU. Round k
 * pauses 2^k times (k capped at RL_SPINLOCK_BACKOFF_MAX_SHIFT). */
#define RL_SPINLOCK_SPIN_ROUNDS 10
#define RL_SPINLOCK_BACKOFF_MAX_SHIFT 7

/* ---- exported twins (and the cold paths of the inline functions) ---- */

/* Initializes *lock unlocked. False (kRLErrorInvalidArgument) for NULL. */
RL_EXPORT bool RLSpinLockInit(RLSpinLock *RL_NULLABLE lock);
/* Takes the lock if it is free; true if taken. False if busy (no error is
 * recorded: busy is an answer, not a failure) or NULL (error set). */
RL_EXPORT bool RLSpinLockTryOutOfLine(RLSpinLock *RL_NULLABLE lock);
/* Takes the lock, spinning until it is free. False only for NULL. */
RL_EXPORT bool RLSpinLockLockOutOfLine(RLSpinLock *RL_NULLABLE lock);
/* Releases the lock. False for NULL or a lock that is not locked. */
RL_EXPORT bool RLSpinLockUnlockOutOfLine(RLSpinLock *RL_NULLABLE lock);
/* True if the lock is currently held by some thread (a snapshot). */
RL_EXPORT bool RLSpinLockIsLockedOutOfLine(const RLSpinLock *RL_NULLABLE lock);

/* ---- inline forms ---- */

RL_INLINE void rl__spinlock_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Lock debugging needs the out-of-line path (it records where the lock was
 * taken); the flag is one relaxed load. */
RL_INLINE bool rl__spinlock_debugging(void) {
    return __builtin_expect(__atomic_load_n(&RLLockDebugActive_, __ATOMIC_RELAXED) != 0, 0);
}

RL_INLINE bool rl__spinlock_try_fast(RLSpinLock *lock) {
    /* Test first: a failed exchange would still take the line exclusive. */
    return __atomic_load_n(&lock->_state, __ATOMIC_RELAXED) == 0 &&
           __atomic_exchange_n(&lock->_state, 1, __ATOMIC_ACQUIRE) == 0;
}

RL_INLINE bool RLSpinLockTry(RLSpinLock *RL_NULLABLE lock) {
    if (__builtin_expect(lock == NULL, 0) || rl__spinlock_debugging())
        return RLSpinLockTryOutOfLine(lock);
    return rl__spinlock_try_fast(lock);
}

RL_INLINE bool RLSpinLockLock(RLSpinLock *RL_NULLABLE lock) {
    if (__builtin_expect(lock == NULL, 0) || rl__spinlock_debugging())
        return RLSpinLockLockOutOfLine(lock);
    if (__builtin_expect(__atomic_exchange_n(&lock->_state, 1, __ATOMIC_ACQUIRE) == 0, 1))
        return true;
    for (unsigned round = 0;; round++) {
        unsigned shift = round < RL_SPINLOCK_BACKOFF_MAX_SHIFT ? round : RL_SPINLOCK_BACKOFF_MAX_SHIFT;
        for (unsigned i = 0; i < (1u << shift); i++)
            rl__spinlock_pause();
        if (round >= RL_SPINLOCK_SPIN_ROUNDS)
            sched_yield();
        if (rl__spinlock_try_fast(lock))
            return true;
    }
}

RL_INLINE bool RLSpinLockUnlock(RLSpinLock *RL_NULLABLE lock) {
    /* The owner's load of its own locked word is nearly free; an exchange
     * would make every unlock a locked instruction. */
    if (__builtin_expect(lock == NULL, 0) || rl__spinlock_debugging() ||
        __builtin_expect(__atomic_load_n(&lock->_state, __ATOMIC_RELAXED) == 0, 0))
        return RLSpinLockUnlockOutOfLine(lock);
    __atomic_store_n(&lock->_state, 0, __ATOMIC_RELEASE);
    return true;
}

RL_INLINE bool RLSpinLockIsLocked(const RLSpinLock *RL_NULLABLE lock) {
    if (__builtin_expect(lock == NULL, 0))
        return RLSpinLockIsLockedOutOfLine(lock);
    return __atomic_load_n(&lock->_state, __ATOMIC_RELAXED) != 0;
}

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSPINLOCK_H */
