/*
 * RLCondition.h — NSCondition for C: a lock and a condition variable in one
 * object. Lock it, test your predicate, Wait while it is false, Unlock; the
 * thread that changes the predicate Signals or Broadcasts (holding the lock
 * is recommended, as in the guide, but not required).
 *
 * What a caller may rely on (errors and ownership as in RLLock.h):
 *   - Lock/Unlock/TryLock behave as RLLock's: relocking by the holder fails
 *     with kRLErrorWouldDeadlock, unlocking without holding fails with
 *     kRLErrorNotLocked / kRLErrorNotOwner, RLRelease of a held condition
 *     fails with kRLErrorBusy.
 *   - Wait and WaitUntilDate must be called with the lock held by the caller
 *     (else false, kRLErrorNotLocked / kRLErrorNotOwner, nothing waited).
 *     They release the lock while asleep and hold it again when they return,
 *     whatever they return.
 *   - Wake-ups may be spurious (as with NSCondition and POSIX): always wait
 *     in a loop over a predicate.
 *   - WaitUntilDate returns false with kRLErrorTimedOut when `limit` passed;
 *     the date is converted to the monotonic clock on entry.
 *   - Signal/Broadcast with nobody waiting make no system call.
 */
#ifndef CRUNLOOP_RLCONDITION_H
#define CRUNLOOP_RLCONDITION_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef struct RLCondition *RLConditionRef;

/* A new unlocked condition. Create rule. */
RL_EXPORT RLConditionRef RL_NULLABLE RLConditionCreate(void);

RL_EXPORT bool RLConditionLock(RLConditionRef cond);
RL_EXPORT bool RLConditionUnlock(RLConditionRef cond);
/* False (kRLErrorBusy) without blocking when the lock is held. */
RL_EXPORT bool RLConditionTryLock(RLConditionRef cond);
/* As RLConditionLock, giving up at `limit` (false, kRLErrorTimedOut). */
RL_EXPORT bool RLConditionLockBeforeDate(RLConditionRef cond, RLAbsoluteTime limit);

/* Releases the lock, sleeps until signalled (or spuriously woken), takes the
 * lock again. */
RL_EXPORT bool RLConditionWait(RLConditionRef cond);

/* As RLConditionWait, but returns false with kRLErrorTimedOut once `limit`
 * has passed. The lock is held again on return either way. */
RL_EXPORT bool RLConditionWaitUntilDate(RLConditionRef cond, RLAbsoluteTime limit);

/* Wakes at least one waiter / every waiter, if any. */
RL_EXPORT bool RLConditionSignal(RLConditionRef cond);
RL_EXPORT bool RLConditionBroadcast(RLConditionRef cond);

/* Name, as RLLockSetName / RLLockCopyName. */
RL_EXPORT bool RLConditionSetName(RLConditionRef cond, const char *RL_NULLABLE name);
RL_EXPORT char *RL_NULLABLE RLConditionCopyName(RLConditionRef cond);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLCONDITION_H */
