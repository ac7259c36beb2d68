/*
 * RLLockDebugInternal.h — lock-order hooks with an explicit lock kind.
 *
 * The generic hooks in internal.h (used by RLLock and friends) identify a
 * lock by its address alone. Spin locks and @synchronized monitors are keyed
 * by addresses the caller owns (a struct field, any object), which may be
 * the same address as an RL lock object (`RL_SYNCHRONIZED(lockObject)`), so
 * each family gets its own key space and its own default display name.
 */
#ifndef CRUNLOOP_RLLOCKDEBUGINTERNAL_H
#define CRUNLOOP_RLLOCKDEBUGINTERNAL_H

#include "internal.h"

typedef enum rl__lockdep_kind {
    RL__LOCKDEP_LOCK = 0, /* RL lock objects: "lock 0x..." */
    RL__LOCKDEP_SPIN = 1, /* RLSpinLock: "RLSpinLock 0x..." */
    RL__LOCKDEP_SYNC = 2, /* RLSyncEnter monitors: "@synchronized(0x...)" */
} rl__lockdep_kind;

RL__HIDDEN void rl__lockdep_will_acquire_kind(rl__lockdep_kind kind, const void *lock,
                                              const char *name, const void *where);
RL__HIDDEN void rl__lockdep_acquired_kind(rl__lockdep_kind kind, const void *lock,
                                          const char *name, const void *where);
RL__HIDDEN void rl__lockdep_released_kind(rl__lockdep_kind kind, const void *lock);

#endif /* CRUNLOOP_RLLOCKDEBUGINTERNAL_H */
