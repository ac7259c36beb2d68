/*
 * RLConditionLock.h — NSConditionLock for C: a lock that carries an integer
 * condition. LockWhenCondition waits until the lock is free *and* its
 * condition equals the value asked for; UnlockWithCondition sets the value
 * and releases the lock, waking the threads that waited for that value.
 * The guide's producer/consumer pattern:
 *
 *     producer:  RLConditionLockLock(q);  ...add...;
 *                RLConditionLockUnlockWithCondition(q, HAS_DATA);
 *     consumer:  RLConditionLockLockWhenCondition(q, HAS_DATA);  ...take...;
 *                RLConditionLockUnlockWithCondition(q, empty ? NO_DATA : HAS_DATA);
 *
 * What a caller may rely on (errors and ownership as in RLLock.h):
 *   - Lock, unlock and the condition forms combine freely (Lock with
 *     UnlockWithCondition, LockWhenCondition with Unlock, ...).
 *   - Relocking by the holder fails with kRLErrorWouldDeadlock; unlocking
 *     without holding fails with kRLErrorNotLocked / kRLErrorNotOwner;
 *     RLRelease of a held lock fails with kRLErrorBusy.
 *   - The try forms never block: false with kRLErrorBusy when the lock is
 *     held, kRLErrorInvalidState when it is free but the condition differs.
 *   - The BeforeDate forms give up at `limit` (false, kRLErrorTimedOut) with
 *     the lock not held; dates use the monotonic clock inside.
 *   - Plain Unlock leaves the condition as it is and wakes nobody who waits
 *     for a condition (as the guide warns); UnlockWithCondition wakes the
 *     condition waiters only when the value changes.
 */
#ifndef CRUNLOOP_RLCONDITIONLOCK_H
#define CRUNLOOP_RLCONDITIONLOCK_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef struct RLConditionLock *RLConditionLockRef;

/* A new unlocked condition lock whose condition is `condition`. Create rule. */
RL_EXPORT RLConditionLockRef RL_NULLABLE RLConditionLockCreateWithCondition(RLIndex condition);

/* The current condition. Returns false for a bad lock (condition untouched). */
RL_EXPORT bool RLConditionLockGetCondition(RLConditionLockRef lock, RLIndex *condition);

RL_EXPORT bool RLConditionLockLock(RLConditionLockRef lock);
RL_EXPORT bool RLConditionLockTryLock(RLConditionLockRef lock);
RL_EXPORT bool RLConditionLockLockBeforeDate(RLConditionLockRef lock, RLAbsoluteTime limit);

RL_EXPORT bool RLConditionLockLockWhenCondition(RLConditionLockRef lock, RLIndex condition);
RL_EXPORT bool RLConditionLockTryLockWhenCondition(RLConditionLockRef lock, RLIndex condition);
RL_EXPORT bool RLConditionLockLockWhenConditionBeforeDate(RLConditionLockRef lock, RLIndex condition,
                                                          RLAbsoluteTime limit);

/* Releases the lock; the condition is unchanged. */
RL_EXPORT bool RLConditionLockUnlock(RLConditionLockRef lock);
/* Sets the condition and releases the lock in one step. */
RL_EXPORT bool RLConditionLockUnlockWithCondition(RLConditionLockRef lock, RLIndex condition);

/* Name, as RLLockSetName / RLLockCopyName. */
RL_EXPORT bool RLConditionLockSetName(RLConditionLockRef lock, const char *RL_NULLABLE name);
RL_EXPORT char *RL_NULLABLE RLConditionLockCopyName(RLConditionLockRef lock);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLCONDITIONLOCK_H */
