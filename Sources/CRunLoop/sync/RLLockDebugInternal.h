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

/* The generic hooks of internal.h for a read (shared) acquisition of an RL
 * lock object; release with rl__lockdep_released. */
RL__HIDDEN void rl__lockdep_will_acquire_shared(const void *lock, const char *name, const void *where);
RL__HIDDEN void rl__lockdep_acquired_shared(const void *lock, const char *name, const void *where);
/* rl__lockdep_acquired for the exclusive (write) side of a lock that can
 * also be shared: remembers that it has writers, whose queueing can block
 * its readers. */
RL__HIDDEN void rl__lockdep_write_acquired(const void *lock, const char *name, const void *where);

/* ---- lock-order debugging (RLLockDebug.c) ----
 * Every RL lock calls these hooks, only when rl__lockdep_enabled() (one
 * relaxed load on the fast path). `where` is the caller's return address
 * (__builtin_return_address(0) in the public lock function), symbolized
 * only when a report is printed. `lock` identifies the lock; `name` is its
 * current name (may be NULL; copied by the detector). */
RL__HIDDEN extern _Atomic int rl__lockdep_on;
static inline bool rl__lockdep_enabled(void) {
    return atomic_load_explicit(&rl__lockdep_on, memory_order_relaxed) != 0;
}

/* Before blocking on `lock`: records the order edge held-lock -> lock for
 * every lock the thread holds and reports an inversion (never blocks). */
RL__HIDDEN void rl__lockdep_will_acquire(const void *lock, const char *name, const void *where);

/* After `lock` was taken (also after a successful try-lock). */
RL__HIDDEN void rl__lockdep_acquired(const void *lock, const char *name, const void *where);

/* After `lock` was released by the calling thread. */
RL__HIDDEN void rl__lockdep_released(const void *lock);

/* `lock` is being destroyed: forget its edges. */
RL__HIDDEN void rl__lockdep_forget(const void *lock);

/* Changes each time the detector is switched on: what a thread recorded
 * before (locks it held then) no longer counts. */
RL__HIDDEN unsigned rl__lockdep_epoch(void);

#endif /* CRUNLOOP_RLLOCKDEBUGINTERNAL_H */
