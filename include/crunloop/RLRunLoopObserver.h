/*
 * RLRunLoopObserver.h — run-loop observers, as CFRunLoopObserver: a
 * callout at chosen points of each run-loop iteration (RLRunLoopActivity).
 */
#ifndef CRUNLOOP_RLRUNLOOPOBSERVER_H
#define CRUNLOOP_RLRUNLOOPOBSERVER_H

#include <crunloop/RLRunLoop.h>

RL_EXTERN_C_BEGIN

typedef struct RLRunLoopObserverContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLRunLoopObserverContext;

typedef void (*RLRunLoopObserverCallBack)(RLRunLoopObserverRef observer, RLRunLoopActivity activity,
                                          void *RL_NULLABLE info);

/* The type ID of run-loop observers. */
RL_EXPORT RLTypeID RLRunLoopObserverGetTypeID(void);

/* Create rule. A non-repeating observer is invalidated after its first
 * callout. Observers with a lower order are called first. NULL (error set)
 * for a NULL callout, activities 0, or a context version other than 0. */
RL_EXPORT RLRunLoopObserverRef RL_NULLABLE RLRunLoopObserverCreate(RLAllocatorRef RL_NULLABLE allocator,
                                                                   RLOptionFlags activities, bool repeats,
                                                                   RLIndex order, RLRunLoopObserverCallBack callout,
                                                                   RLRunLoopObserverContext *RL_NULLABLE context);
#if __BLOCKS__
RL_EXPORT RLRunLoopObserverRef RL_NULLABLE RLRunLoopObserverCreateWithHandler(
    RLAllocatorRef RL_NULLABLE allocator, RLOptionFlags activities, bool repeats, RLIndex order,
    void (^block)(RLRunLoopObserverRef observer, RLRunLoopActivity activity));
#endif

/* 0 (error set) for a bad observer. */
RL_EXPORT RLOptionFlags RLRunLoopObserverGetActivities(RLRunLoopObserverRef observer);
RL_EXPORT bool RLRunLoopObserverDoesRepeat(RLRunLoopObserverRef observer);
RL_EXPORT RLIndex RLRunLoopObserverGetOrder(RLRunLoopObserverRef observer);
/* Removes the observer from every run loop; idempotent. */
RL_EXPORT bool RLRunLoopObserverInvalidate(RLRunLoopObserverRef observer);
RL_EXPORT bool RLRunLoopObserverIsValid(RLRunLoopObserverRef observer);
RL_EXPORT bool RLRunLoopObserverGetContext(RLRunLoopObserverRef observer, RLRunLoopObserverContext *context);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLRUNLOOPOBSERVER_H */
