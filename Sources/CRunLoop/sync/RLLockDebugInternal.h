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

/* As the _kind hooks, saying whether the lock is taken shared (a read
 * lock): two shared holds do not block each other, so an order cycle whose
 * every junction between two threads is reader-reader is not reported. */
RL__HIDDEN void rl__lockdep_will_acquire_mode(rl__lockdep_kind kind, const void *lock, const char *name,
                                              const void *where, bool shared);
RL__HIDDEN void rl__lockdep_acquired_mode(rl__lockdep_kind kind, const void *lock, const char *name,
                                          const void *where, bool shared);

/* The generic hooks of internal.h for a read (shared) acquisition of an RL
 * lock object; release with rl__lockdep_released. */
RL__HIDDEN void rl__lockdep_will_acquire_shared(const void *lock, const char *name, const void *where);
RL__HIDDEN void rl__lockdep_acquired_shared(const void *lock, const char *name, const void *where);
/* rl__lockdep_acquired for the exclusive (write) side of a lock that can
 * also be shared: remembers that it has writers, whose queueing can block
 * its readers. */
RL__HIDDEN void rl__lockdep_write_acquired(const void *lock, const char *name, const void *where);

#endif /* CRUNLOOP_RLLOCKDEBUGINTERNAL_H */
