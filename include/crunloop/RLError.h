/*
 * RLError.h — the thread-local error left by a failed call.
 *
 * A call that fails returns false / NULL / its documented failure value and
 * records a code and a readable message for the calling thread. Successful
 * calls never overwrite it, so the error of the last failure stays readable
 * until the next failure on the same thread or RLErrorClear().
 */
#ifndef CRUNLOOP_RLERROR_H
#define CRUNLOOP_RLERROR_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef RL_ENUM(int32_t, RLErrorCode) {
    kRLErrorNone = 0,
    kRLErrorInvalidArgument = 1, /* NULL, NaN, negative or out-of-range value */
    kRLErrorInvalidObject = 2,   /* not a live object of the expected type, or invalidated */
    kRLErrorNotOwner = 3,        /* unlock by a thread that does not hold the lock; release of a reference the library owns */
    kRLErrorNotLocked = 4,       /* unlock of a lock nobody holds */
    kRLErrorBusy = 5,            /* object in use: e.g. releasing a held lock */
    kRLErrorTimedOut = 6,        /* a timed wait reached its date */
    kRLErrorWouldDeadlock = 7,   /* the call would block forever (relock, lock-order inversion) */
    kRLErrorInvalidState = 8,    /* not allowed in the object's current state */
    kRLErrorWrongThread = 9,     /* must be called on another thread */
    kRLErrorSystem = 10,         /* an OS call failed; RLError.systemErrno says why */
    kRLErrorNoMemory = 11,
    kRLErrorNotFound = 12,
    kRLErrorPermission = 13,
    kRLErrorExists = 14,         /* already held / already present */
};

typedef struct RLError {
    RLErrorCode code;
    int systemErrno;             /* errno of the failed OS call, else 0 */
    const char *message;         /* "RLLockUnlock: lock is held by another thread"; never NULL */
} RLError;

/* The calling thread's last error ({kRLErrorNone, 0, ""} if none). The
 * message stays valid on this thread until its next failing call. */
RL_EXPORT RLError RLErrorGetLast(void);

/* Forgets the calling thread's last error. */
RL_EXPORT void RLErrorClear(void);

/* A static name for a code: "kRLErrorNotOwner". */
RL_EXPORT const char *RLErrorCodeGetName(RLErrorCode code);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLERROR_H */
