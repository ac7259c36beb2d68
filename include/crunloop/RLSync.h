/*
 * RLSync.h — @synchronized for C: a recursive monitor per object address.
 *
 *     RL_SYNCHRONIZED(account) {
 *         account->balance += amount;
 *         if (account->frozen)
 *             return false;          // the monitor is released here too
 *     }
 *
 * What a caller may rely on:
 *   - Any non-NULL address names a monitor; nothing needs creating or
 *     destroying. Monitors live in a striped hash table, are made on the
 *     first RLSyncEnter and freed when no thread holds, waits for or caches
 *     them, so the memory is proportional to the monitors in use (plus at
 *     most 8 recently used ones per thread), not to the objects ever
 *     synchronized on.
 *   - Cheap when uncontended: each thread caches its 8 most recently
 *     entered monitors, and entering or leaving a cached one costs about
 *     one mutex lock/unlock, with no shared table lock and no allocation.
 *   - Recursive: the thread holding a monitor may enter it again; it must
 *     exit it as many times.
 *   - RLSyncExit by a thread that has not entered the object fails
 *     (kRLErrorNotLocked if nobody holds it, kRLErrorNotOwner if another
 *     thread does) and changes nothing.
 *   - A thread that ends while holding a monitor keeps it held forever (as
 *     Objective-C's @synchronized).
 *   - Monitors take part in lock debugging (RLLockDebug.h) under the name
 *     "@synchronized(0x...)".
 */
#ifndef CRUNLOOP_RLSYNC_H
#define CRUNLOOP_RLSYNC_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

/* Enters obj's monitor, waiting while another thread holds it. False
 * (kRLErrorInvalidArgument) for NULL, or kRLErrorNoMemory. */
RL_EXPORT bool RLSyncEnter(const void *RL_NULLABLE obj);

/* Takes obj's monitor only if no other thread holds it (or this thread
 * already does). False if another thread holds it (kRLErrorBusy), for NULL
 * (kRLErrorInvalidArgument) or kRLErrorNoMemory. */
RL_EXPORT bool RLSyncTryEnter(const void *RL_NULLABLE obj);

/* Leaves obj's monitor once. False, with nothing changed, if the calling
 * thread does not hold it (kRLErrorNotLocked / kRLErrorNotOwner) or obj is
 * NULL. */
RL_EXPORT bool RLSyncExit(const void *RL_NULLABLE obj);

/* True if the calling thread holds obj's monitor. */
RL_EXPORT bool RLSyncIsHeldByCurrentThread(const void *RL_NULLABLE obj);

/* ---- RL_SYNCHRONIZED(obj) { ... } ----
 * Enters obj's monitor, runs the block, and leaves the monitor however the
 * block is left: falling off its end, return, goto out of it, or break /
 * continue. Built on __attribute__((cleanup)), so it works with gcc and
 * clang; longjmp and thread cancellation out of the block do not release.
 * Note that, as in Linux's scoped_guard, the macro is a one-pass loop:
 * `break` or `continue` written directly in the block leaves the block
 * (releasing the monitor), not an enclosing loop.
 * As Objective-C's @synchronized(nil), a NULL obj runs the block without
 * any lock (the failed RLSyncEnter leaves kRLErrorInvalidArgument). */

typedef struct RLSyncScope_ {
    const void *obj;
    bool entered;
    bool done;
} RLSyncScope_;

RL_INLINE RLSyncScope_ RLSyncScopeBegin_(const void *obj) {
    RLSyncScope_ scope = {obj, RLSyncEnter(obj), false};
    return scope;
}

RL_INLINE void RLSyncScopeEnd_(RLSyncScope_ *scope) {
    if (scope->entered)
        (void)RLSyncExit(scope->obj);
}

#define RLSyncConcat2_(a, b) a##b
#define RLSyncConcat_(a, b) RLSyncConcat2_(a, b)

#define RL_SYNCHRONIZED(obj) RLSynchronizedNamed_(obj, RLSyncConcat_(RLSyncScope_var_, __COUNTER__))
#define RLSynchronizedNamed_(obj, scope) \
    for (RLSyncScope_ scope __attribute__((cleanup(RLSyncScopeEnd_))) = RLSyncScopeBegin_(obj); \
         !scope.done; scope.done = true)

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSYNC_H */
