/*
 * RLRunLoopSource.h — version-0 (custom, signalled) input sources, as
 * CFRunLoopSource. A client signals the source (RLRunLoopSourceSignal) and
 * wakes the loop (RLRunLoopWakeUp); the loop calls `perform` on its thread
 * the next time it runs in a mode containing the source. Signalled sources
 * are kept on a ready list: a signal costs O(1) per mode the source is in,
 * not a scan, and a pass sorts its k signalled sources by order in
 * O(k log k) (O(k) when they share one order); equal orders perform in the
 * order they were signalled.
 */
#ifndef CRUNLOOP_RLRUNLOOPSOURCE_H
#define CRUNLOOP_RLRUNLOOPSOURCE_H

#include <crunloop/RLRunLoop.h>

RL_EXTERN_C_BEGIN

typedef struct RLRunLoopSourceContext {
    RLIndex version;   /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    /* malloc'ed description of info; the library frees it. */
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
    bool (*RL_NULLABLE equal)(const void *RL_NULLABLE info1, const void *RL_NULLABLE info2);
    RLHashCode (*RL_NULLABLE hash)(const void *RL_NULLABLE info);
    /* On the adding thread, when the source is added to a mode of rl. */
    void (*RL_NULLABLE schedule)(void *RL_NULLABLE info, RLRunLoopRef rl, RLRunLoopMode mode);
    /* When the source is removed from a mode of rl, invalidated while
     * scheduled, or rl's thread exits. */
    void (*RL_NULLABLE cancel)(void *RL_NULLABLE info, RLRunLoopRef rl, RLRunLoopMode mode);
    /* On rl's thread, once per signal. */
    void (*RL_NULLABLE perform)(void *RL_NULLABLE info);
} RLRunLoopSourceContext;

/* The type ID of run-loop sources. */
RL_EXPORT RLTypeID RLRunLoopSourceGetTypeID(void);

/* Create rule. The context is copied and its retain called on info. Sources
 * with a lower order are performed first. NULL (error set) for a NULL
 * context or a version other than 0. */
RL_EXPORT RLRunLoopSourceRef RL_NULLABLE RLRunLoopSourceCreate(RLAllocatorRef RL_NULLABLE allocator, RLIndex order,
                                                               RLRunLoopSourceContext *RL_NULLABLE context);
/* The order, or 0 (error set) for a bad source. */
RL_EXPORT RLIndex RLRunLoopSourceGetOrder(RLRunLoopSourceRef source);
/* Removes the source from every run loop and mode (calling cancel) and
 * makes it unusable. Idempotent. */
RL_EXPORT bool RLRunLoopSourceInvalidate(RLRunLoopSourceRef source);
RL_EXPORT bool RLRunLoopSourceIsValid(RLRunLoopSourceRef source);
/* Copies the context into *context. */
RL_EXPORT bool RLRunLoopSourceGetContext(RLRunLoopSourceRef source, RLRunLoopSourceContext *context);
/* Marks the source ready to perform; from any thread. Does not wake the
 * loop (call RLRunLoopWakeUp), as with CF. A signal is kept until a loop
 * runs in a mode that contains the source. */
RL_EXPORT bool RLRunLoopSourceSignal(RLRunLoopSourceRef source);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLRUNLOOPSOURCE_H */
