/* RLError.c — the thread-local last error. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum { RL__ERROR_MESSAGE_MAX = 512 };

typedef struct error_slot {
    RLErrorCode code;
    int sys_errno;
    char message[RL__ERROR_MESSAGE_MAX];
} error_slot;

static __thread error_slot last_error;

static void error_vset(RLErrorCode code, int err, const char *fn, const char *fmt, va_list ap) {
    error_slot *slot = &last_error;
    int n = snprintf(slot->message, sizeof slot->message, "%s: ", fn ? fn : "CRunLoop");
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof slot->message)
        vsnprintf(slot->message + n, sizeof slot->message - (size_t)n, fmt, ap);
    if (err != 0) {
        size_t len = strlen(slot->message);
        char buf[128];
        const char *text = strerror_r(err, buf, sizeof buf);
        snprintf(slot->message + len, sizeof slot->message - len, " (%s)", text);
    }
    slot->code = code;
    slot->sys_errno = err;
}

bool rl__fail(RLErrorCode code, const char *fn, const char *fmt, ...) {
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    error_vset(code, 0, fn, fmt, ap);
    va_end(ap);
    errno = saved;
    return false;
}

bool rl__fail_errno(int err, const char *fn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    RLErrorCode code = kRLErrorSystem;
    if (err == ENOMEM)
        code = kRLErrorNoMemory;
    else if (err == EACCES || err == EPERM || err == EROFS)
        code = kRLErrorPermission;
    else if (err == ENOENT || err == ENOTDIR)
        code = kRLErrorNotFound;
    else if (err == EEXIST)
        code = kRLErrorExists;
    error_vset(code, err, fn, fmt, ap);
    va_end(ap);
    errno = err;
    return false;
}

RLError RLErrorGetLast(void) {
    error_slot *slot = &last_error;
    RLError e = {slot->code, slot->sys_errno, slot->code == kRLErrorNone ? "" : slot->message};
    return e;
}

void RLErrorClear(void) {
    last_error.code = kRLErrorNone;
    last_error.sys_errno = 0;
    last_error.message[0] = '\0';
}

const char *RLErrorCodeGetName(RLErrorCode code) {
    switch (code) {
    case kRLErrorNone: return "kRLErrorNone";
    case kRLErrorInvalidArgument: return "kRLErrorInvalidArgument";
    case kRLErrorInvalidObject: return "kRLErrorInvalidObject";
    case kRLErrorNotOwner: return "kRLErrorNotOwner";
    case kRLErrorNotLocked: return "kRLErrorNotLocked";
    case kRLErrorBusy: return "kRLErrorBusy";
    case kRLErrorTimedOut: return "kRLErrorTimedOut";
    case kRLErrorWouldDeadlock: return "kRLErrorWouldDeadlock";
    case kRLErrorInvalidState: return "kRLErrorInvalidState";
    case kRLErrorWrongThread: return "kRLErrorWrongThread";
    case kRLErrorSystem: return "kRLErrorSystem";
    case kRLErrorNoMemory: return "kRLErrorNoMemory";
    case kRLErrorNotFound: return "kRLErrorNotFound";
    case kRLErrorPermission: return "kRLErrorPermission";
    case kRLErrorExists: return "kRLErrorExists";
    }
    return "kRLErrorUnknown";
}
