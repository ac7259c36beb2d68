/*
 * RLLock.h — NSLock and NSRecursiveLock for C.
 *
 * RLLock is a mutual-exclusion lock (Foundation's NSLock); RLRecursiveLock may
 * be taken again by the thread that holds it (NSRecursiveLock) and is free
 * again once every lock is balanced by an unlock.
 *
 * What a caller may rely on:
 *   - Objects follow the Create rule (RLBase.h): RLLockCreate returns a lock
 *     the caller owns and gives back with RLRelease. RLRelease of a lock that
 *     is still held fails with kRLErrorBusy and leaves the lock usable.
 *   - Every call that can fail returns false / NULL and leaves a thread-local
 *     error (RLErrorGetLast()); a failed call changes nothing:
 *       kRLErrorInvalidArgument  NULL lock or NaN date
 *       kRLErrorInvalidObject    released object or an object of another type
 *       kRLErrorNotLocked        unlock of a lock nobody holds
 *       kRLErrorNotOwner         unlock by a thread that does not hold it
 *       kRLErrorWouldDeadlock    RLLockLock / RLLockLockBeforeDate by the thread
 *                                that already holds the (non-recursive) lock.
 *                                NSLock deadlocks here; we report it instead.
 *       kRLErrorBusy             a try-lock found the lock held
 *       kRLErrorTimedOut         a LockBeforeDate reached its date
 *   - Dates are RLAbsoluteTime (wall clock), converted once on entry to the
 *     monotonic clock: changing the system time never stretches or cuts short
 *     a wait in progress. A date in the past means "try once".
 *   - An unlock must come from the thread that locked (as with NSLock).
 *   - Uncontended lock + unlock costs two atomic instructions (a futex word);
 *     waiters sleep in the kernel, never spin for long.
 *   - Every function may be called from any thread.
 *   - Lock-order debugging (RLLockDebug.h) sees every acquisition.
 */
#ifndef CRUNLOOP_RLLOCK_H
#define CRUNLOOP_RLLOCK_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef struct RLLock *RLLockRef;
typedef struct RLRecursiveLock *RLRecursiveLockRef;

/* ---- RLLock (NSLock) ---- */

/* A new unlocked, unnamed lock. Create rule. NULL (kRLErrorNoMemory) on
 * allocation failure. */
RL_EXPORT RLLockRef RL_NULLABLE RLLockCreate(void);

/* Blocks until the calling thread holds the lock. False if the caller
 * already holds it (kRLErrorWouldDeadlock) or the lock is bad. */
RL_EXPORT bool RLLockLock(RLLockRef lock);

/* Releases the lock. False (nothing changed) if nobody holds it
 * (kRLErrorNotLocked) or another thread does (kRLErrorNotOwner). */
RL_EXPORT bool RLLockUnlock(RLLockRef lock);

/* Takes the lock if it is free; false (kRLErrorBusy) without blocking
 * otherwise, also when the caller itself holds it. */
RL_EXPORT bool RLLockTryLock(RLLockRef lock);

/* As RLLockLock, giving up at `limit` (false, kRLErrorTimedOut). */
RL_EXPORT bool RLLockLockBeforeDate(RLLockRef lock, RLAbsoluteTime limit);

/* Sets the name shown in descriptions and lock-order reports (copied; NULL
 * or "" removes it). Names are read without locking, so a replaced name is
 * kept until the lock is destroyed: name a lock once, not in a loop. */
RL_EXPORT bool RLLockSetName(RLLockRef lock, const char *RL_NULLABLE name);

/* A copy of the name ("" when unnamed); the caller frees it with free().
 * NULL only on failure (bad lock, no memory). */
RL_EXPORT char *RL_NULLABLE RLLockCopyName(RLLockRef lock);

/* ---- RLRecursiveLock (NSRecursiveLock) ---- */

/* A new unlocked, unnamed recursive lock. Create rule. */
RL_EXPORT RLRecursiveLockRef RL_NULLABLE RLRecursiveLockCreate(void);

/* Blocks until the caller holds the lock; a holder takes it again at once
 * (the recursion count goes up). */
RL_EXPORT bool RLRecursiveLockLock(RLRecursiveLockRef lock);

/* Undoes one lock; the lock is free when the count reaches zero. False
 * (kRLErrorNotLocked / kRLErrorNotOwner) when the caller does not hold it. */
RL_EXPORT bool RLRecursiveLockUnlock(RLRecursiveLockRef lock);

/* Takes the lock if it is free or already the caller's; otherwise false
 * (kRLErrorBusy) without blocking. */
RL_EXPORT bool RLRecursiveLockTryLock(RLRecursiveLockRef lock);

/* As RLRecursiveLockLock, giving up at `limit` (false, kRLErrorTimedOut). */
RL_EXPORT bool RLRecursiveLockLockBeforeDate(RLRecursiveLockRef lock, RLAbsoluteTime limit);

/* How many times the calling thread holds the lock (0 if it does not), or -1
 * for a bad lock. Not in Foundation; meant for assertions. */
RL_EXPORT RLIndex RLRecursiveLockGetRecursionCount(RLRecursiveLockRef lock);

/* Name, as RLLockSetName / RLLockCopyName. */
RL_EXPORT bool RLRecursiveLockSetName(RLRecursiveLockRef lock, const char *RL_NULLABLE name);
RL_EXPORT char *RL_NULLABLE RLRecursiveLockCopyName(RLRecursiveLockRef lock);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLLOCK_H */
