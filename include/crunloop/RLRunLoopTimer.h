/*
 * RLRunLoopTimer.h — timers, as CFRunLoopTimer, with working tolerance.
 *
 * A repeating timer stays on the grid fireDate + k*interval: after a late
 * or missed fire it fires once and its next date is the first grid point
 * after now. Tolerance (Darwin semantics): the timer fires within
 * [fireDate, fireDate + tolerance]; a repeating timer's tolerance is at most
 * half its interval. The loop uses the slack to fire several timers on one
 * wake-up.
 */
#ifndef CRUNLOOP_RLRUNLOOPTIMER_H
#define CRUNLOOP_RLRUNLOOPTIMER_H

#include <crunloop/RLRunLoop.h>

RL_EXTERN_C_BEGIN

typedef struct RLRunLoopTimerContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLRunLoopTimerContext;

typedef void (*RLRunLoopTimerCallBack)(RLRunLoopTimerRef timer, void *RL_NULLABLE info);

/* The type ID of run-loop timers. */
RL_EXPORT RLTypeID RLRunLoopTimerGetTypeID(void);

/* Create rule. interval <= 0 makes a one-shot timer. flags is unused (0).
 * A NULL callout is allowed, as in CF: the timer fires (and a one-shot one
 * is invalidated) like any other, calling nothing; such a timer keeps its
 * mode from being empty. NULL (error set) for a NaN date or interval, or a
 * context version other than 0. */
RL_EXPORT RLRunLoopTimerRef RL_NULLABLE RLRunLoopTimerCreate(RLAllocatorRef RL_NULLABLE allocator,
                                                             RLAbsoluteTime fireDate, RLTimeInterval interval,
                                                             RLOptionFlags flags, RLIndex order,
                                                             RLRunLoopTimerCallBack callout,
                                                             RLRunLoopTimerContext *RL_NULLABLE context);
#if __BLOCKS__
/* Create rule; the block is copied. */
RL_EXPORT RLRunLoopTimerRef RL_NULLABLE RLRunLoopTimerCreateWithHandler(RLAllocatorRef RL_NULLABLE allocator,
                                                                        RLAbsoluteTime fireDate,
                                                                        RLTimeInterval interval, RLOptionFlags flags,
                                                                        RLIndex order,
                                                                        void (^block)(RLRunLoopTimerRef timer));
#endif

/* The next fire date (inside the timer's callout: the date being fired).
 * 0 once the timer is invalidated (a one-shot timer after its fire,
 * included), as in CF; 0 (error set) for a bad timer. */
RL_EXPORT RLAbsoluteTime RLRunLoopTimerGetNextFireDate(RLRunLoopTimerRef timer);
/* Moves the timer (earlier or later); works from any thread and inside the
 * timer's own callout (the new date then wins over the grid). */
RL_EXPORT bool RLRunLoopTimerSetNextFireDate(RLRunLoopTimerRef timer, RLAbsoluteTime fireDate);
RL_EXPORT RLTimeInterval RLRunLoopTimerGetInterval(RLRunLoopTimerRef timer);
RL_EXPORT bool RLRunLoopTimerDoesRepeat(RLRunLoopTimerRef timer);
RL_EXPORT RLIndex RLRunLoopTimerGetOrder(RLRunLoopTimerRef timer);
/* Removes the timer from its run loop; it never fires again. Idempotent. */
RL_EXPORT bool RLRunLoopTimerInvalidate(RLRunLoopTimerRef timer);
RL_EXPORT bool RLRunLoopTimerIsValid(RLRunLoopTimerRef timer);
RL_EXPORT bool RLRunLoopTimerGetContext(RLRunLoopTimerRef timer, RLRunLoopTimerContext *context);
/* The tolerance in seconds (0 by default), or -1 (error set). */
RL_EXPORT RLTimeInterval RLRunLoopTimerGetTolerance(RLRunLoopTimerRef timer);
/* Negative or NaN is an error; a repeating timer's tolerance is clamped to
 * half its interval. false (kRLErrorInvalidObject, nothing changed) for an
 * invalidated timer. */
RL_EXPORT bool RLRunLoopTimerSetTolerance(RLRunLoopTimerRef timer, RLTimeInterval tolerance);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLRUNLOOPTIMER_H */
