/* RLError.c — the thread-local last error. */
#include "rl_testhook.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RL__ERROR_MESSAGE_MAX = 512 };

/* The thread's last error. Its message's buffer is made on the thread's
 * first error and freed when the thread exits (a key's destructor): static
 * TLS sits at the top of every thread's stack, so a buffer in it would be
 * part of every thread's resident stack, failing or not. Without a buffer
 * (no memory for it) the message is the code's name. */
typedef struct error_slot {
    RLErrorCode code;
    int sys_errno;
    char *message; /* RL__ERROR_MESSAGE_MAX bytes, or NULL */
} error_slot;

static __thread error_slot last_error;

static pthread_key_t message_key;
static pthread_once_t message_once = PTHREAD_ONCE_INIT;
static bool message_key_made;

/* At the thread's exit. An error set after it (by a later destructor)
 * makes a buffer again, and glibc calls this again for it. */
static void message_free(void *buf) {
    if (last_error.message == buf)
        last_error.message = NULL;
    free(buf);
}

static void message_key_make(void) { message_key_made = pthread_key_create(&message_key, message_free) == 0; }

/* The thread's message buffer, made on first use; NULL without memory (or
 * without the key that frees it at the thread's exit). */
static char *message_buffer(error_slot *slot) {
    if (RL__LIKELY(slot->message != NULL))
        return slot->message;
    pthread_once(&message_once, message_key_make);
    if (!message_key_made || rl__fault(RL_FAULT_ERROR_MESSAGE))
        return NULL;
    char *buf = malloc(RL__ERROR_MESSAGE_MAX);
    if (buf && pthread_setspecific(message_key, buf) != 0) {
        free(buf);
        buf = NULL;
    }
    slot->message = buf;
    return buf;
}

static void error_vset(RLErrorCode code, int err, const char *fn, const char *fmt, va_list ap) {
    error_slot *slot = &last_error;
    slot->code = code;
    slot->sys_errno = err;
    char *msg = message_buffer(slot);
    if (!msg)
        return; /* RLErrorGetLast gives the code's name */
    size_t size = RL__ERROR_MESSAGE_MAX;
    int n = snprintf(msg, size, "%s: ", fn ? fn : "CRunLoop");
    if (n < 0)
        n = 0;
    if ((size_t)n < size)
        vsnprintf(msg + n, size - (size_t)n, fmt, ap);
    if (err != 0) {
        size_t len = strlen(msg);
        char buf[128];
        const char *text = strerror_r(err, buf, sizeof buf);
        snprintf(msg + len, size - len, " (%s)", text);
    }
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
    const char *msg = "";
    if (slot->code != kRLErrorNone)
        msg = slot->message ? slot->message : RLErrorCodeGetName(slot->code);
    RLError e = {slot->code, slot->sys_errno, msg};
    return e;
}

void RLErrorClear(void) {
    last_error.code = kRLErrorNone;
    last_error.sys_errno = 0;
    if (last_error.message)
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
