/*
 * RLSpinLock.h — a spin lock (OSSpinLock) for very short critical sections.
 *
 * RLSpinLock is a plain value: declare it, initialize it with
 * RL_SPINLOCK_INIT (or zero it, or call RLSpinLockInit) and it is ready; it
 * owns no resources and needs no destroy. Try/lock/unlock are inline: an
 * uncontended lock+unlock is one atomic exchange and plain stores (the
 * holder's identity on lock; it and the lock word on unlock), plus plain
 * loads of the lock-debugging flag and, on unlock, of the holder. A waiter
 * spins on a plain load (so it does not bounce the cache line), with
 * exponentially growing runs of the CPU's pause instruction, and after a
 * bounded number of rounds yields the CPU with sched_yield() on every
 * further round, so a holder that was preempted gets to run.
 *
 * Use it only where the lock is held for a handful of instructions and the
 * holder is never descheduled for long: it does not sleep, is not fair and
 * has no priority inheritance. RLLock is the right default.
 *
 * Misuse checks (cheap enough to stay on; unlike OSSpinLock, the lock
 * records its holder — one extra store on lock and a compare on unlock):
 *   - NULL: every function returns false with kRLErrorInvalidArgument.
 *   - Locking again from the thread that holds the lock returns false with
 *     kRLErrorWouldDeadlock at once instead of spinning forever (the check
 *     sits on the contended path, so it costs the fast path nothing).
 *   - Unlocking a lock held by another thread returns false with
 *     kRLErrorNotOwner; unlocking a lock that is not locked returns false
 *     with kRLErrorNotLocked. Either way the lock is left as it was.
 *   - A try on a lock held (by any thread) returns false with kRLErrorBusy.
 * A thread's identity is its thread pointer, which a new thread may reuse
 * once the old one has ended; a thread that ends holding a spin lock keeps
 * it locked. With lock debugging on (RLLockDebug.h) spin locks take part in
 * lock-order checking, through the exported forms.
 *
 * The *OutOfLine functions are the same operations as exported functions,
 * for callers that cannot use inline C (Swift overlays, dlsym, FFI).
 */
#ifndef CRUNLOOP_RLSPINLOCK_H
#define CRUNLOOP_RLSPINLOCK_H

#include <crunloop/RLBase.h>
#include <crunloop/RLLockDebug.h>

#include <pthread.h>
#include <sched.h>

RL_EXTERN_C_BEGIN

typedef struct RLSpinLock {
    int32_t _state;   /* private: 0 unlocked, 1 locked; accessed atomically only */
    uintptr_t _owner; /* private: the holder's thread pointer, 0 if none */
} RLSpinLock;

#define RL_SPINLOCK_INIT {0, 0}

/* Spin rounds before every further round also yields the CPU. Round k
 * pauses 2^k times (k capped at RL_SPINLOCK_BACKOFF_MAX_SHIFT). */
#define RL_SPINLOCK_SPIN_ROUNDS 10
#define RL_SPINLOCK_BACKOFF_MAX_SHIFT 7

/* ---- exported twins (and the cold paths of the inline functions) ---- */

/* Initializes *lock unlocked. False (kRLErrorInvalidArgument) for NULL. */
RL_EXPORT bool RLSpinLockInit(RLSpinLock *RL_NULLABLE lock);
/* Takes the lock if it is free; true if taken. False if held by any
 * thread (kRLErrorBusy) or NULL (kRLErrorInvalidArgument). */
RL_EXPORT bool RLSpinLockTryOutOfLine(RLSpinLock *RL_NULLABLE lock);
/* Takes the lock, spinning until it is free. False for NULL, or at once
 * (kRLErrorWouldDeadlock) if the calling thread already holds it. */
RL_EXPORT bool RLSpinLockLockOutOfLine(RLSpinLock *RL_NULLABLE lock);
/* Releases the lock. False for NULL, a lock that is not locked
 * (kRLErrorNotLocked) or one held by another thread (kRLErrorNotOwner). */
RL_EXPORT bool RLSpinLockUnlockOutOfLine(RLSpinLock *RL_NULLABLE lock);
/* True if the lock is currently held by some thread (a snapshot). */
RL_EXPORT bool RLSpinLockIsLockedOutOfLine(const RLSpinLock *RL_NULLABLE lock);

/* Private cold paths of the inline forms. */
RL_EXPORT bool RLSpinLockTryFailed_(RLSpinLock *lock);
RL_EXPORT bool RLSpinLockLockContended_(RLSpinLock *lock);

/* ---- inline forms ---- */

/* The calling thread's identity (never 0): its thread pointer, which glibc
 * also returns as pthread_self(), read without a call into libc. */
RL_INLINE uintptr_t rl__spinlock_self(void) {
    uintptr_t tp;
#if defined(__x86_64__)
    __asm__("mov %%fs:0, %0" : "=r"(tp));
#elif defined(__aarch64__)
    __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#else
    tp = (uintptr_t)pthread_self();
#endif
    return tp;
}

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
    if (__builtin_expect(!rl__spinlock_try_fast(lock), 0))
        return RLSpinLockTryFailed_(lock);
    __atomic_store_n(&lock->_owner, rl__spinlock_self(), __ATOMIC_RELAXED);
    return true;
}

RL_INLINE bool RLSpinLockLock(RLSpinLock *RL_NULLABLE lock) {
    if (__builtin_expect(lock == NULL, 0) || rl__spinlock_debugging())
        return RLSpinLockLockOutOfLine(lock);
    if (__builtin_expect(__atomic_exchange_n(&lock->_state, 1, __ATOMIC_ACQUIRE) != 0, 0))
        return RLSpinLockLockContended_(lock);
    __atomic_store_n(&lock->_owner, rl__spinlock_self(), __ATOMIC_RELAXED);
    return true;
}

RL_INLINE bool RLSpinLockUnlock(RLSpinLock *RL_NULLABLE lock) {
    /* Only the holder ever stores its own identity in _owner (and clears it
     * before releasing), so reading our own identity there proves we hold
     * the lock; anything else is misuse, sorted out of line. A plain store
     * releases: an exchange would make every unlock a locked instruction. */
    if (__builtin_expect(lock == NULL, 0) || rl__spinlock_debugging() ||
        __builtin_expect(__atomic_load_n(&lock->_owner, __ATOMIC_RELAXED) != rl__spinlock_self(), 0))
        return RLSpinLockUnlockOutOfLine(lock);
    __atomic_store_n(&lock->_owner, 0, __ATOMIC_RELAXED);
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
