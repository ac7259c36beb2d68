/* RLLock.c — RLLock (NSLock), RLRecursiveLock (NSRecursiveLock) and the
 * futex mutex they share with the other RL locks (RLLockInternal.h). */
#include "RLLockInternal.h"
#include "RLLockDebugInternal.h"
#include <crunloop/RLLock.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ---- */

bool rl__lockname_set(rl__lockname *n, const char *name, const char *fn) {
    size_t len = name ? strlen(name) : 0;
    rl__name_node *node = malloc(sizeof *node + len + 1);
    if (!node)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory copying the name");
    memcpy(node->text, name ? name : "", len + 1);
    node->prev = atomic_load_explicit(&n->head, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&n->head, &node->prev, node, memory_order_release,
                                                  memory_order_relaxed)) {
    }
    return true;
}

char *rl__lockname_copy(rl__lockname *n, const char *fn) {
    const char *cur = rl__lockname_get(n);
    char *copy = strdup(cur ? cur : "");
    if (!copy)
        rl__fail(kRLErrorNoMemory, fn, "out of memory copying the name");
    return copy;
}

void rl__lockname_free(rl__lockname *n) {
    rl__name_node *node = atomic_load_explicit(&n->head, memory_order_acquire);
    while (node) {
        rl__name_node *prev = node->prev;
        free(node);
        node = prev;
    }
    atomic_store_explicit(&n->head, NULL, memory_order_relaxed);
}

char *rl__lock_describe(const char *type, const void *obj, rl__lockname *name, const char *state) {
    const char *nm = rl__lockname_get(name);
    char *s = NULL;
    if (asprintf(&s, "<%s %p%s%s%s %s>", type, obj, nm ? " '" : "", nm ? nm : "", nm ? "'" : "", state) < 0)
        return NULL;
    return s;
}

/* ---- the mutex ---- */

/* A busy lock is waited for in the kernel at once, as glibc's default
 * mutex does. Spinning first does not pay: a waiter that spins takes the
 * lock the moment it is released, so two busy threads hand it back and
 * forth (and its cache line with it) instead of one re-taking it many
 * times in a row while the other sleeps. Measured with bench_sync's
 * 2-thread counter: 20 spins 1.4-1.6x pthread_mutex (median), 100 spins
 * 1.6-2.1x; 4 spins, a switch until it was measured on its own (make
 * bench-tricks, same run, on vs off), swung between 25% better and 35%
 * worse than none with the machine's load and bought nothing on the
 * condition and run-loop rows, so it went. */
int rl__mutex_lock_slow(rl__mutex *m, const struct timespec *deadline) {
    /* Mark the word "maybe sleepers" before sleeping, so the holder's unlock
     * wakes us; whoever gets it this way also leaves it at 2, because other
     * sleepers may still be queued. */
    while (atomic_exchange_explicit(&m->word, 2, memory_order_acquire) != 0) {
        if (rl__futex_wait(&m->word, 2, deadline) == ETIMEDOUT) {
            /* The word may now say 2 with nobody asleep: that only costs the
             * next unlock one needless wake. Try once more, since the holder
             * may have left while the timer fired. */
            uint32_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(&m->word, &expected, 2, memory_order_acquire,
                                                        memory_order_relaxed))
                break;
            return ETIMEDOUT;
        }
    }
    atomic_store_explicit(&m->owner, rl__self(), memory_order_relaxed);
    return 0;
}

bool rl__deadline_for(RLAbsoluteTime date, struct timespec *out, const char *fn) {
    if (RL__UNLIKELY(!rl__date_valid(date)))
        return rl__fail(kRLErrorInvalidArgument, fn, "the date is NaN");
    *out = rl__monotonic_deadline_for_date(date);
    return true;
}

bool rl__mutex_lock_checked(rl__mutex *m, const void *lock, rl__lockname *name,
                            const struct timespec *deadline, const char *fn, const void *where) {
    if (RL__UNLIKELY(rl__mutex_held_by_self(m)))
        return rl__fail(kRLErrorWouldDeadlock, fn, "%p is already held by the calling thread", lock);
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug)
        rl__lockdep_will_acquire(lock, rl__lockname_get(name), where);
    if (!rl__mutex_trylock(m) && rl__mutex_lock_slow(m, deadline) != 0)
        return rl__fail(kRLErrorTimedOut, fn, "%p was not acquired before the date", lock);
    if (debug)
        rl__lockdep_acquired(lock, rl__lockname_get(name), where);
    return true;
}

bool rl__mutex_trylock_checked(rl__mutex *m, const void *lock, rl__lockname *name, const char *fn,
                               const void *where) {
    if (!rl__mutex_trylock(m))
        return rl__fail(kRLErrorBusy, fn, "%p is held%s", lock,
                        rl__mutex_held_by_self(m) ? " by the calling thread" : " by another thread");
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_acquired(lock, rl__lockname_get(name), where);
    return true;
}

bool rl__mutex_check_owner(rl__mutex *m, const char *fn) {
    if (RL__LIKELY(rl__mutex_held_by_self(m)))
        return true;
    if (!rl__mutex_is_locked(m))
        return rl__fail(kRLErrorNotLocked, fn, "the lock is not locked");
    return rl__fail(kRLErrorNotOwner, fn, "the lock is held by another thread");
}

bool rl__mutex_unlock_checked(rl__mutex *m, const void *lock, const char *fn) {
    if (!rl__mutex_check_owner(m, fn))
        return false;
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released(lock);
    rl__mutex_unlock(m);
    return true;
}

bool rl__mutex_can_destroy(rl__mutex *m, const char *type) {
    if (rl__mutex_is_locked(m))
        return rl__fail(kRLErrorBusy, "RLRelease", "the %s is still locked", type);
    return true;
}

/* ---- RLLock ---- */

struct RLLock {
    rl__object base;
    rl__mutex m;
    rl__lockname name;
};

static bool lock_can_destroy(void *obj) { return rl__mutex_can_destroy(&((RLLockRef)obj)->m, "RLLock"); }

static void lock_finalize(void *obj) {
    RLLockRef lock = obj;
    rl__lockdep_forget(lock);
    rl__lockname_free(&lock->name);
}

static char *lock_describe(const void *obj) {
    RLLockRef lock = (RLLockRef)obj;
    return rl__lock_describe("RLLock", obj, &lock->name, rl__mutex_is_locked(&lock->m) ? "locked" : "unlocked");
}

static const rl__class lock_class = {"RLLock", lock_finalize, lock_can_destroy, lock_describe};

RLLockRef RLLockCreate(void) { return rl__object_alloc(&lock_class, sizeof(struct RLLock), __func__); }

bool RLLockLock(RLLockRef lock) {
    if (!rl__check(lock, &lock_class, __func__))
        return false;
    if (RL__LIKELY(!rl__lockdep_enabled()) && RL__LIKELY(rl__mutex_trylock(&lock->m)))
        return true;
    return rl__mutex_lock_checked(&lock->m, lock, &lock->name, NULL, __func__, __builtin_return_address(0));
}

bool RLLockUnlock(RLLockRef lock) {
    if (!rl__check(lock, &lock_class, __func__))
        return false;
    if (RL__LIKELY(!rl__lockdep_enabled()) && RL__LIKELY(rl__mutex_held_by_self(&lock->m))) {
        rl__mutex_unlock(&lock->m);
        return true;
    }
    return rl__mutex_unlock_checked(&lock->m, lock, __func__);
}

bool RLLockTryLock(RLLockRef lock) {
    if (!rl__check(lock, &lock_class, __func__))
        return false;
    return rl__mutex_trylock_checked(&lock->m, lock, &lock->name, __func__, __builtin_return_address(0));
}

bool RLLockLockBeforeDate(RLLockRef lock, RLAbsoluteTime limit) {
    struct timespec deadline;
    if (!rl__check(lock, &lock_class, __func__) ||
        !rl__deadline_for(limit, &deadline, __func__))
        return false;
    return rl__mutex_lock_checked(&lock->m, lock, &lock->name, &deadline, __func__,
                                  __builtin_return_address(0));
}

bool RLLockSetName(RLLockRef lock, const char *name) {
    if (!rl__check(lock, &lock_class, __func__))
        return false;
    return rl__lockname_set(&lock->name, name, __func__);
}

char *RLLockCopyName(RLLockRef lock) {
    if (!rl__check(lock, &lock_class, __func__))
        return NULL;
    return rl__lockname_copy(&lock->name, __func__);
}

/* ---- RLRecursiveLock ---- */

struct RLRecursiveLock {
    rl__object base;
    rl__mutex m;
    /* Touched only by the holder, so a plain field: the mutex orders it. */
    unsigned long count;
    rl__lockname name;
};

static bool rlock_can_destroy(void *obj) {
    return rl__mutex_can_destroy(&((RLRecursiveLockRef)obj)->m, "RLRecursiveLock");
}

static void rlock_finalize(void *obj) {
    RLRecursiveLockRef lock = obj;
    rl__lockdep_forget(lock);
    rl__lockname_free(&lock->name);
}

static char *rlock_describe(const void *obj) {
    RLRecursiveLockRef lock = (RLRecursiveLockRef)obj;
    return rl__lock_describe("RLRecursiveLock", obj, &lock->name,
                             rl__mutex_is_locked(&lock->m) ? "locked" : "unlocked");
}

static const rl__class rlock_class = {"RLRecursiveLock", rlock_finalize, rlock_can_destroy, rlock_describe};

RLRecursiveLockRef RLRecursiveLockCreate(void) {
    return rl__object_alloc(&rlock_class, sizeof(struct RLRecursiveLock), __func__);
}

/* The holder re-entering never blocks and is not a new lock-order edge. */
static bool rlock_reenter(RLRecursiveLockRef lock, const char *fn) {
    if (RL__UNLIKELY(lock->count == (unsigned long)-1))
        return rl__fail(kRLErrorInvalidState, fn, "recursion count overflow");
    lock->count++;
    return true;
}

static bool rlock_lock(RLRecursiveLockRef lock, const struct timespec *deadline, const char *fn,
                       const void *where) {
    if (rl__mutex_held_by_self(&lock->m))
        return rlock_reenter(lock, fn);
    if (RL__LIKELY(!rl__lockdep_enabled()) && RL__LIKELY(rl__mutex_trylock(&lock->m))) {
        lock->count = 1;
        return true;
    }
    if (!rl__mutex_lock_checked(&lock->m, lock, &lock->name, deadline, fn, where))
        return false;
    lock->count = 1;
    return true;
}

bool RLRecursiveLockLock(RLRecursiveLockRef lock) {
    if (!rl__check(lock, &rlock_class, __func__))
        return false;
    return rlock_lock(lock, NULL, __func__, __builtin_return_address(0));
}

bool RLRecursiveLockLockBeforeDate(RLRecursiveLockRef lock, RLAbsoluteTime limit) {
    struct timespec deadline;
    if (!rl__check(lock, &rlock_class, __func__) ||
        !rl__deadline_for(limit, &deadline, __func__))
        return false;
    return rlock_lock(lock, &deadline, __func__, __builtin_return_address(0));
}

bool RLRecursiveLockTryLock(RLRecursiveLockRef lock) {
    if (!rl__check(lock, &rlock_class, __func__))
        return false;
    if (rl__mutex_held_by_self(&lock->m))
        return rlock_reenter(lock, __func__);
    if (!rl__mutex_trylock_checked(&lock->m, lock, &lock->name, __func__,
                                   __builtin_return_address(0)))
        return false;
    lock->count = 1;
    return true;
}

bool RLRecursiveLockUnlock(RLRecursiveLockRef lock) {
    if (!rl__check(lock, &rlock_class, __func__) ||
        !rl__mutex_check_owner(&lock->m, __func__))
        return false;
    if (--lock->count > 0)
        return true;
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released(lock);
    rl__mutex_unlock(&lock->m);
    return true;
}

RLIndex RLRecursiveLockGetRecursionCount(RLRecursiveLockRef lock) {
    if (!rl__check(lock, &rlock_class, __func__))
        return -1;
    return rl__mutex_held_by_self(&lock->m) ? (RLIndex)lock->count : 0;
}

bool RLRecursiveLockSetName(RLRecursiveLockRef lock, const char *name) {
    if (!rl__check(lock, &rlock_class, __func__))
        return false;
    return rl__lockname_set(&lock->name, name, __func__);
}

char *RLRecursiveLockCopyName(RLRecursiveLockRef lock) {
    if (!rl__check(lock, &rlock_class, __func__))
        return NULL;
    return rl__lockname_copy(&lock->name, __func__);
}
