/*
 * RLReadWriteLock.h — a shared-exclusive lock, as the guide describes:
 * many readers at once, or one writer. While a writer waits, new readers
 * wait behind it, so a steady stream of readers cannot starve a writer.
 *
 * What a caller may rely on (errors and ownership as in RLLock.h):
 *   - One RLReadWriteLockUnlock releases whichever hold the calling thread
 *     has (its write lock, or one of its read locks), like
 *     pthread_rwlock_unlock; the lock knows which.
 *   - A thread may take the read lock again while it holds it (the count
 *     goes up), even while a writer waits: the lock tracks each thread's read
 *     holds, so this never deadlocks (with pthread rwlocks it can).
 *   - Calls that would block forever fail with kRLErrorWouldDeadlock instead:
 *     asking for the write lock while holding a read lock (upgrading), or
 *     any lock while holding the write lock.
 *   - Unlock without a hold fails with kRLErrorNotLocked (lock free) or
 *     kRLErrorNotOwner (held by other threads only). RLRelease of a held
 *     lock fails with kRLErrorBusy.
 *   - Try forms: false with kRLErrorBusy without blocking. BeforeDate forms:
 *     false with kRLErrorTimedOut at `limit`, nothing held; dates use the
 *     monotonic clock inside.
 *   - A thread holding read locks on very many RLReadWriteLocks at once is
 *     fine: the per-thread record grows as needed (kRLErrorNoMemory if not).
 */
#ifndef CRUNLOOP_RLREADWRITELOCK_H
#define CRUNLOOP_RLREADWRITELOCK_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef struct RLReadWriteLock *RLReadWriteLockRef;

/* A new unlocked read-write lock. Create rule. */
RL_EXPORT RLReadWriteLockRef RL_NULLABLE RLReadWriteLockCreate(void);

RL_EXPORT bool RLReadWriteLockReadLock(RLReadWriteLockRef lock);
RL_EXPORT bool RLReadWriteLockTryReadLock(RLReadWriteLockRef lock);
RL_EXPORT bool RLReadWriteLockReadLockBeforeDate(RLReadWriteLockRef lock, RLAbsoluteTime limit);

RL_EXPORT bool RLReadWriteLockWriteLock(RLReadWriteLockRef lock);
RL_EXPORT bool RLReadWriteLockTryWriteLock(RLReadWriteLockRef lock);
RL_EXPORT bool RLReadWriteLockWriteLockBeforeDate(RLReadWriteLockRef lock, RLAbsoluteTime limit);

/* Releases the caller's write lock, or one of its read locks. */
RL_EXPORT bool RLReadWriteLockUnlock(RLReadWriteLockRef lock);

/* Name, as RLLockSetName / RLLockCopyName. */
RL_EXPORT bool RLReadWriteLockSetName(RLReadWriteLockRef lock, const char *RL_NULLABLE name);
RL_EXPORT char *RL_NULLABLE RLReadWriteLockCopyName(RLReadWriteLockRef lock);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLREADWRITELOCK_H */
