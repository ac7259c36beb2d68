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
#include <crunloop/RLString.h>

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

/* ---- RLErrorRef: CF's CFErrorRef ----
 *
 * An error as an object, which CF hands out from CFReadStreamCopyError and
 * CFWriteStreamCopyError: a domain and a code, immutable, released with
 * RLRelease. It is unrelated to the RLError struct above (the calling
 * thread's last failure, a value): an RLErrorRef points at an object of
 * its own (RLGetTypeName "RLErrorObject"), never at an RLError. The names
 * are CF's with the RL prefix (RLErrorGetDomain, RLErrorGetCode,
 * RLErrorCopyDescription); none of them clashes with the thread-local
 * functions (RLErrorGetLast, RLErrorClear, RLErrorCodeGetName). */
typedef const struct RLErrorObject *RLErrorRef;
/* A domain is a string compared by content (CFErrorDomain). */
typedef RLStringRef RLErrorDomain;

/* CF's domain names, with CF's values: "NSPOSIXErrorDomain" (codes are
 * errno values), "NSOSStatusErrorDomain", "NSMachErrorDomain",
 * "NSCocoaErrorDomain". */
RL_EXPORT const RLErrorDomain kRLErrorDomainPOSIX;
RL_EXPORT const RLErrorDomain kRLErrorDomainOSStatus;
RL_EXPORT const RLErrorDomain kRLErrorDomainMach;
RL_EXPORT const RLErrorDomain kRLErrorDomainCocoa;

/* The type ID of error objects. */
RL_EXPORT RLTypeID RLErrorGetTypeID(void);

/* A new error (Create rule). The domain is copied. userInfo is CF's
 * dictionary, which this library does not have: it must be NULL. NULL
 * (kRLErrorInvalidArgument) for a NULL or empty domain or a userInfo. */
RL_EXPORT RLErrorRef RL_NULLABLE RLErrorCreate(RLAllocatorRef RL_NULLABLE allocator, RLErrorDomain RL_NULLABLE domain,
                                               RLIndex code, const void *RL_NULLABLE userInfo);
/* The domain (Get rule: the error's own string, valid while the error
 * lives), or NULL (error set) for a bad object. */
RL_EXPORT RLErrorDomain RL_NULLABLE RLErrorGetDomain(RLErrorRef RL_NULLABLE err);
/* The code, or 0 (error set) for a bad object. */
RL_EXPORT RLIndex RLErrorGetCode(RLErrorRef RL_NULLABLE err);
/* A readable description (Copy rule: a library string, RLRelease it):
 * for the POSIX domain strerror's text, as "The operation couldn't be
 * completed. No such file or directory"; for others the domain and code.
 * NULL (error set) for a bad object. */
RL_EXPORT RLStringRef RL_NULLABLE RLErrorCopyDescription(RLErrorRef RL_NULLABLE err);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLERROR_H */
