/*
 * RLLockInternal.h — the futex mutex, names and checks shared by RLLock.c,
 * RLCondition.c, RLConditionLock.c and RLReadWriteLock.c. Private.
 *
 * The mutex is a 32-bit futex word (0 free, 1 held, 2 held and someone may be
 * asleep on it) plus the holder's thread id. The id is only read for misuse
 * checks (unlock by a non-owner, relock by the owner): only the holder ever
 * stores its own id, so a relaxed load equal to the caller's id proves the
 * caller holds the lock.
 */
#ifndef CRUNLOOP_RLLOCKINTERNAL_H
#define CRUNLOOP_RLLOCKINTERNAL_H

#include "RLBase.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- futex ---- */

/* Sleeps while *word == expected, until woken or the absolute
 * CLOCK_MONOTONIC `deadline` (NULL: no limit). Returns 0 (woken, or the word
 * had already changed: either way the caller re-checks), or ETIMEDOUT.
 * FUTEX_WAIT_BITSET takes an absolute time, on CLOCK_MONOTONIC because
 * FUTEX_CLOCK_REALTIME is not set: wall-clock changes cannot affect it. */
static inline int rl__futex_wait(_Atomic uint32_t *word, uint32_t expected,
                                 const struct timespec *deadline) {
    int saved = errno;
    long r = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected,
                     deadline, NULL, FUTEX_BITSET_MATCH_ANY);
    int err = r == 0 ? 0 : errno;
    errno = saved;
    return err == ETIMEDOUT ? ETIMEDOUT : 0;
}

static inline void rl__futex_wake(_Atomic uint32_t *word, int n) {
    int saved = errno;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, NULL, NULL, 0);
    errno = saved;
}

/* The calling thread's identity (never 0), as the locks record their
 * owner: the thread pointer (internal.h), read without a call into libc
 * because it sits on every lock and unlock. */
static inline uintptr_t rl__self(void) { return rl__thread_pointer(); }

/* rl__object_check with the common case inlined: one load and a compare. */
static inline bool rl__check(const void *obj, const rl__class *cls, const char *fn) {
    const rl__object *o = obj;
    if (RL__LIKELY(o != NULL &&
                   atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE &&
                   rl__is_class(o, cls)))
        return true;
    return rl__object_check(obj, cls, fn);
}

/* ---- names ----
 * A name is swapped by pushing a new node; old nodes stay until the lock is
 * destroyed, so a name pointer read by another thread (a description, the
 * lock-order detector) can never be freed under it, and no lock is needed. */
typedef struct rl__name_node {
    struct rl__name_node *prev;
    char text[];
} rl__name_node;

typedef struct rl__lockname {
    _Atomic(rl__name_node *) head;
} rl__lockname;

/* The current name or NULL; valid while the lock lives. */
static inline const char *rl__lockname_get(rl__lockname *n) {
    rl__name_node *h = atomic_load_explicit(&n->head, memory_order_acquire);
    return (h && h->text[0]) ? h->text : NULL;
}
RL__HIDDEN bool rl__lockname_set(rl__lockname *n, const char *name, const char *fn);
RL__HIDDEN char *rl__lockname_copy(rl__lockname *n, const char *fn);
RL__HIDDEN void rl__lockname_free(rl__lockname *n);

/* ---- the mutex ---- */

typedef struct rl__mutex {
    _Atomic uint32_t word;
    _Atomic uintptr_t owner;
} rl__mutex;

static inline bool rl__mutex_held_by_self(rl__mutex *m) {
    return atomic_load_explicit(&m->owner, memory_order_relaxed) == rl__self();
}

static inline bool rl__mutex_is_locked(rl__mutex *m) {
    return atomic_load_explicit(&m->word, memory_order_relaxed) != 0;
}

static inline bool rl__mutex_trylock(rl__mutex *m) {
    uint32_t expected = 0;
    if (RL__UNLIKELY(!atomic_compare_exchange_strong_explicit(&m->word, &expected, 1, memory_order_acquire,
                                                              memory_order_relaxed)))
        return false;
    atomic_store_explicit(&m->owner, rl__self(), memory_order_relaxed);
    return true;
}

/* Blocks until m is taken (0) or `deadline` passes (ETIMEDOUT). No checks,
 * no lock-order hooks. */
RL__HIDDEN int rl__mutex_lock_slow(rl__mutex *m, const struct timespec *deadline);

/* Releases m; the caller holds it. */
static inline void rl__mutex_unlock(rl__mutex *m) {
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    if (RL__UNLIKELY(atomic_exchange_explicit(&m->word, 0, memory_order_release) == 2))
        rl__futex_wake(&m->word, 1);
}

/* The checked operations used by every mutex-based RL lock. `lock` is the
 * public object (for lock-order hooks), `where` the public caller's return
 * address. Each fails with the documented error and changes nothing. */

/* Lock (deadline NULL: no limit). kRLErrorWouldDeadlock if the caller holds
 * it, kRLErrorTimedOut at the deadline. */
RL__HIDDEN bool rl__mutex_lock_checked(rl__mutex *m, const void *lock, rl__lockname *name,
                                       const struct timespec *deadline, const char *fn, const void *where);
/* Try-lock: kRLErrorBusy when held (by anyone). */
RL__HIDDEN bool rl__mutex_trylock_checked(rl__mutex *m, const void *lock, rl__lockname *name,
                                          const char *fn, const void *where);
/* True if the caller holds m, else false with kRLErrorNotLocked (free) or
 * kRLErrorNotOwner (held by another thread). */
RL__HIDDEN bool rl__mutex_check_owner(rl__mutex *m, const char *fn);
/* Unlock with the owner check and the release hook. */
RL__HIDDEN bool rl__mutex_unlock_checked(rl__mutex *m, const void *lock, const char *fn);

/* Converts a date for a timed call: false (kRLErrorInvalidArgument) for NaN. */
RL__HIDDEN bool rl__deadline_for(RLAbsoluteTime date, struct timespec *out, const char *fn);

/* can_destroy helper: refuses (kRLErrorBusy) while m is held. */
RL__HIDDEN bool rl__mutex_can_destroy(rl__mutex *m, const char *type);

/* "<RLLock 0x... 'name' locked>" for describe hooks. */
RL__HIDDEN char *rl__lock_describe(const char *type, const void *obj, rl__lockname *name, const char *state);

#endif /* CRUNLOOP_RLLOCKINTERNAL_H */
