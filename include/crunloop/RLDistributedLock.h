/*
 * RLDistributedLock.h — a lock named by a file path (NSDistributedLock),
 * shared by processes on one host or on several hosts sharing a file
 * system (NFS included).
 *
 * How it is atomic: TryLock writes an owner record into a new file with a
 * unique name in the lock's directory and then link(2)s that file to the
 * lock path. link either creates the path or fails because it exists, in
 * one step, on local file systems and on NFS — there is no window between
 * "check" and "create". On NFS a lost reply can make a successful link look
 * failed, so after a failure the unique file's link count is checked: 2
 * means the link happened. The unique file is then removed, leaving the
 * lock path with the record.
 *
 * What a caller may rely on:
 *   - TryLock never waits. It returns true when this object now holds the
 *     lock; false with kRLErrorBusy when any holder (another object, another
 *     process, or this object itself: kRLErrorExists) has it.
 *   - Unlock succeeds only on the object that holds the lock, and only if
 *     the lock file is still the one it created (its record carries a random
 *     token); if someone broke the lock meanwhile, Unlock fails with
 *     kRLErrorNotOwner and removes nothing. (A break and re-lock by others
 *     in the instant between that check and the removal is not detected.)
 *   - BreakLock removes the lock file whoever holds it, for recovering from
 *     a holder that died. Checking the owner first (CopyOwner +
 *     RLDistributedLockOwnerGetState) and then breaking is not atomic: two
 *     processes that both judge the same lock stale may both break it, the
 *     second breaking the first one's fresh lock — so let one process
 *     recover stale locks, or recheck the owner after taking the lock.
 *   - There is no timeout and no automatic breaking: a lock whose holder
 *     died stays until BreakLock.
 *   - The owner record names the host, the pid, the process's start time and
 *     the boot (so a reused pid or a reboot is recognised) and the date the
 *     lock was taken. For an owner on this host,
 *     RLDistributedLockOwnerGetState tells a live owner from a dead one;
 *     for another host it answers Unknown.
 *   - Releasing a lock object that holds the lock fails (kRLErrorBusy):
 *     Unlock first.
 *   - The object is thread-safe; the lock belongs to the object, not to a
 *     thread, so any thread may Unlock it.
 *   - No call blocks on what others put at the lock path. A FIFO, device,
 *     socket or symbolic link there is never opened in a way that waits: it
 *     excludes TryLock (kRLErrorBusy, the message says what it is),
 *     CopyOwner refuses it (kRLErrorInvalidState), and Unlock of a lock
 *     whose file was replaced by one fails with kRLErrorNotOwner, removing
 *     nothing. BreakLock removes it.
 *   - Any lock file name the file system accepts works (up to its name
 *     limit, 255 bytes on most): the unique file beside it is named to fit.
 */
#ifndef CRUNLOOP_RLDISTRIBUTEDLOCK_H
#define CRUNLOOP_RLDISTRIBUTEDLOCK_H

#include <crunloop/RLBase.h>
#include <crunloop/RLError.h>

RL_EXTERN_C_BEGIN

typedef struct RLDistributedLock *RLDistributedLockRef;

enum { kRLDistributedLockHostNameMax = 256 };

/* Who holds a lock, as written in its lock file. */
typedef struct RLDistributedLockOwner {
    char hostName[kRLDistributedLockHostNameMax]; /* gethostname() of the holder, NUL-terminated */
    int32_t pid;                                   /* the holder's process id */
    uint64_t processStartTicks;                    /* /proc/<pid>/stat start time, in clock ticks since boot */
    char bootID[40];                               /* /proc/sys/kernel/random/boot_id of the holder's host */
    RLAbsoluteTime lockDate;                       /* when the lock was taken (the holder's clock) */
} RLDistributedLockOwner;

typedef RL_ENUM(int32_t, RLDistributedLockOwnerState) {
    kRLDistributedLockOwnerStateUnknown = 0, /* another host, or the record cannot be checked */
    kRLDistributedLockOwnerStateAlive = 1,   /* same host and boot; that process still runs */
    kRLDistributedLockOwnerStateDead = 2,    /* same host; the process (or the boot) is gone */
};

/* Creates a lock object for `path` (the lock file; its directory must
 * exist). Create rule: release with RLRelease. Does not take the lock.
 * NULL with kRLErrorInvalidArgument (NULL or empty path, path too long, path
 * is a directory), kRLErrorNotFound (directory missing), kRLErrorPermission
 * (directory not writable or on a read-only file system). */
RL_EXPORT RLDistributedLockRef RL_NULLABLE RLDistributedLockCreate(const char *RL_NULLABLE path);

/* The lock path (owned by the lock; valid while it lives), or NULL. */
RL_EXPORT const char *RL_NULLABLE RLDistributedLockGetPath(RLDistributedLockRef RL_NULLABLE lock);

/* Takes the lock if nobody holds it. Never waits. */
RL_EXPORT bool RLDistributedLockTryLock(RLDistributedLockRef RL_NULLABLE lock);

/* Releases the lock held by this object (see the rules above). */
RL_EXPORT bool RLDistributedLockUnlock(RLDistributedLockRef RL_NULLABLE lock);

/* Removes the lock file whoever holds it. False with kRLErrorNotLocked if
 * there was no lock file. If this object held it, it no longer does. */
RL_EXPORT bool RLDistributedLockBreakLock(RLDistributedLockRef RL_NULLABLE lock);

/* True if this object holds the lock (as far as it knows: a BreakLock from
 * elsewhere is noticed by the next Unlock). */
RL_EXPORT bool RLDistributedLockIsHeld(RLDistributedLockRef RL_NULLABLE lock);

/* When the current lock file was created (by any holder), as
 * NSDistributedLock's lockDate; the file system's clock. NAN with
 * kRLErrorNotLocked if nobody holds the lock, or another error. */
RL_EXPORT RLAbsoluteTime RLDistributedLockCopyLockDate(RLDistributedLockRef RL_NULLABLE lock);

/* Reads the current holder's record into *outOwner. False with
 * kRLErrorNotLocked if nobody holds the lock, kRLErrorInvalidState if the
 * lock file holds no readable record (written by other software) or is not
 * a regular file (a FIFO, a device, a symbolic link...). */
RL_EXPORT bool RLDistributedLockCopyOwner(RLDistributedLockRef RL_NULLABLE lock,
                                          RLDistributedLockOwner *RL_NULLABLE outOwner);

/* Whether the process named by an owner record is still running: compares
 * host name and boot id with this host, then the pid's start time. Unknown
 * (no error) for another host; Unknown with kRLErrorInvalidArgument for
 * NULL. */
RL_EXPORT RLDistributedLockOwnerState
RLDistributedLockOwnerGetState(const RLDistributedLockOwner *RL_NULLABLE owner);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLDISTRIBUTEDLOCK_H */
