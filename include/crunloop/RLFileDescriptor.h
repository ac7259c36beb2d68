/*
 * RLFileDescriptor.h — run-loop sources for any file descriptor, after
 * Darwin's CFFileDescriptor (which CF on Linux lacks): sockets, pipes, ttys,
 * eventfds, signalfds. Callbacks are one-shot per enable: after a read (or
 * write) callback, enable it again to hear about the next readiness. The
 * loop never reads or writes the fd itself, and serves every ready fd in one
 * wake-up.
 *
 * Regular files and other files epoll cannot watch (/dev/null) are always
 * ready, as poll(2) and Darwin's kqueue report them: each enable brings one
 * callback on the loop's next pass in a mode containing the source.
 *
 * Invalidate the object before closing its fd. An fd closed behind a valid
 * object's back never makes a loop spin and never steals the callbacks of a
 * new object on the reused number. The loop marks the old object stale as
 * soon as it sees that the number no longer names its file — when an object
 * on that number joins a loop (the file's identity, and the kernel's answer
 * for files without one, such as eventfds), or at the latest when the old
 * object is enabled again (from its own callout, which keeps the loop's
 * registration as it is and asks the kernel nothing: within 64 callbacks):
 * it is never watched again, RLFileDescriptorEnableCallBacks fails with
 * kRLErrorInvalidState, and invalidating it does not close the number
 * (closeOnInvalidate is ignored: the number may be someone else's now).
 * Until then, at most one callback (64 while its callouts enable it again)
 * may still report the old file's readiness. (Files without an identity of
 * their own, such as eventfds, are told apart only by the kernel: an object
 * never watched before the reuse cannot tell its eventfd from a new one.)
 */
#ifndef CRUNLOOP_RLFILEDESCRIPTOR_H
#define CRUNLOOP_RLFILEDESCRIPTOR_H

#include <crunloop/RLRunLoop.h>

RL_EXTERN_C_BEGIN

typedef struct RLFileDescriptor *RLFileDescriptorRef;
typedef int RLFileDescriptorNativeDescriptor;

enum {
    kRLFileDescriptorReadCallBack = 1UL << 0,
    kRLFileDescriptorWriteCallBack = 1UL << 1,
};

typedef void (*RLFileDescriptorCallBack)(RLFileDescriptorRef f, RLOptionFlags callBackTypes,
                                         void *RL_NULLABLE info);

typedef struct RLFileDescriptorContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLFileDescriptorContext;

/* Create rule. closeOnInvalidate: close fd when the object is invalidated
 * (or destroyed). NULL (error set) for a negative/closed fd or NULL callout. */
RL_EXPORT RLFileDescriptorRef RL_NULLABLE RLFileDescriptorCreate(RLAllocatorRef RL_NULLABLE allocator,
                                                                 RLFileDescriptorNativeDescriptor fd,
                                                                 bool closeOnInvalidate,
                                                                 RLFileDescriptorCallBack callout,
                                                                 const RLFileDescriptorContext *RL_NULLABLE context);
/* The fd, or -1 (error set). */
RL_EXPORT RLFileDescriptorNativeDescriptor RLFileDescriptorGetNativeDescriptor(RLFileDescriptorRef f);
RL_EXPORT bool RLFileDescriptorGetContext(RLFileDescriptorRef f, RLFileDescriptorContext *context);
/* Arms read and/or write callbacks (kRLFileDescriptor…CallBack bits).
 * false with kRLErrorInvalidState if the loop found the object stale (its
 * fd closed or reused, see above) or cannot watch its fd (say, the user's
 * epoll watch limit): the message names the fd and the reason. */
RL_EXPORT bool RLFileDescriptorEnableCallBacks(RLFileDescriptorRef f, RLOptionFlags callBackTypes);
RL_EXPORT bool RLFileDescriptorDisableCallBacks(RLFileDescriptorRef f, RLOptionFlags callBackTypes);
/* Stops watching, removes its run-loop source, closes the fd if asked.
 * Idempotent. */
RL_EXPORT bool RLFileDescriptorInvalidate(RLFileDescriptorRef f);
RL_EXPORT bool RLFileDescriptorIsValid(RLFileDescriptorRef f);
/* Create rule: a source to add to run loops (one per descriptor; a second
 * call returns the same source, retained again). */
RL_EXPORT RLRunLoopSourceRef RL_NULLABLE RLFileDescriptorCreateRunLoopSource(RLAllocatorRef RL_NULLABLE allocator,
                                                                             RLFileDescriptorRef f, RLIndex order);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLFILEDESCRIPTOR_H */
