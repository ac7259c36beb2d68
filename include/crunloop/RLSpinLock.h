/*
 * RLSpinLock.h — a spin lock (OSSpinLock) for very short critical sections.
 *
 * RLSpinLock is a plain value: declare it, initialize it with
 * RL_SPINLOCK_INIT (or zero it, or call RLSpinLockInit) and it is ready; it
 * owns no resources and needs no destroy. An uncontended lock+unlock is
 * two calls, one atomic exchange and plain stores (the holder's identity
 * on lock; it and the lock word on unlock), plus plain loads of the
 * lock-debugging flag and, on unlock, of the holder. (The calls are out of
 * line on purpose: the header is the API only, and OSSpinLock's were too.) A waiter
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
 * lock-order checking.
 */
#ifndef CRUNLOOP_RLSPINLOCK_H
#define CRUNLOOP_RLSPINLOCK_H

#include <crunloop/RLBase.h>

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

/* Initializes *lock unlocked. False (kRLErrorInvalidArgument) for NULL. */
RL_EXPORT bool RLSpinLockInit(RLSpinLock *RL_NULLABLE lock);
/* Takes the lock if it is free; true if taken. False if held by any
 * thread (kRLErrorBusy) or NULL (kRLErrorInvalidArgument). */
RL_EXPORT bool RLSpinLockTry(RLSpinLock *RL_NULLABLE lock);
/* Takes the lock, spinning until it is free. False for NULL, or at once
 * (kRLErrorWouldDeadlock) if the calling thread already holds it. */
RL_EXPORT bool RLSpinLockLock(RLSpinLock *RL_NULLABLE lock);
/* Releases the lock. False for NULL, a lock that is not locked
 * (kRLErrorNotLocked) or one held by another thread (kRLErrorNotOwner). */
RL_EXPORT bool RLSpinLockUnlock(RLSpinLock *RL_NULLABLE lock);
/* True if the lock is currently held by some thread (a snapshot); false
 * (kRLErrorInvalidArgument) for NULL. */
RL_EXPORT bool RLSpinLockIsLocked(const RLSpinLock *RL_NULLABLE lock);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSPINLOCK_H */
