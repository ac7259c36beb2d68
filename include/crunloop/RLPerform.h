/*
 * RLPerform.h — perform requests: NSObject's performSelector:onThread:,
 * performSelectorOnMainThread:, performSelector:afterDelay: and
 * cancelPreviousPerformRequests, for C functions (and blocks).
 *
 * What a caller may rely on:
 *   - A request runs on the target thread, inside its run loop, when that
 *     loop runs in one of the request's modes (default: the common modes).
 *     The target's loop is woken.
 *   - Requests go into the target's run-loop queue, the one that
 *     RLRunLoopPerformFunction uses: requests to one thread run in the order
 *     they were made (FIFO among those for the mode the loop runs), and
 *     every request queued when the loop comes round runs in that pass, not
 *     one per iteration. A request for several modes is queued once and
 *     runs once, in the first of them that the loop runs.
 *   - The plain function forms never touch `arg` beyond passing it to fn:
 *     a request that is dropped unrun (its thread finished) leaks whatever
 *     arg owns. The "…WithRelease" forms take ownership of arg and call a
 *     release callback exactly once, ran or dropped (RLRunLoop.h).
 *   - waitUntilDone on the target thread itself runs the function at once,
 *     as Cocoa does. From any other thread it blocks until the function has
 *     returned on the target — or until the target thread finishes without
 *     having run it, in which case the call returns false with
 *     kRLErrorInvalidState. It never hangs on a thread that has finished.
 *   - Requests to a thread that was never started or has finished fail
 *     with kRLErrorInvalidState; a NULL function or an empty mode list with
 *     kRLErrorInvalidArgument. A failed call queues nothing.
 *   - Every thread started through RLThread (and every other thread once it
 *     has called RLThreadGetCurrent) has a run loop that requests can be
 *     queued on before the thread first runs it. The loop is made lazily,
 *     as CF makes them: by the thread's first RLRunLoopGetCurrent or by the
 *     first request sent to it, whichever comes first (the same loop either
 *     way), so a thread that never uses one pays nothing for it.
 *
 * As with CF's perform blocks, a run in a mode that has no source or timer
 * returns kRLRunLoopRunFinished at once, without running the requests
 * queued for that mode.
 *
 * Modes are given as a NULL-terminated array of mode names (copied), or
 * NULL for kRLRunLoopCommonModes, which may also appear in the array.
 */
#ifndef CRUNLOOP_RLPERFORM_H
#define CRUNLOOP_RLPERFORM_H

#include <crunloop/RLRunLoop.h>
#include <crunloop/RLThread.h>

RL_EXTERN_C_BEGIN

/* Identifies a delayed perform request for cancellation; 0 is never valid. */
typedef uint64_t RLPerformToken;

/* Runs fn(arg) on `thread` (performSelector:onThread:withObject:waitUntilDone:modes:). */
RL_EXPORT bool RLThreadPerform(RLThreadRef thread, void (*fn)(void *RL_NULLABLE arg), void *RL_NULLABLE arg,
                               const RLRunLoopMode *RL_NULLABLE modes, bool waitUntilDone);
/* The same on the main thread (performSelectorOnMainThread:). */
RL_EXPORT bool RLThreadPerformOnMain(void (*fn)(void *RL_NULLABLE arg), void *RL_NULLABLE arg,
                                     const RLRunLoopMode *RL_NULLABLE modes, bool waitUntilDone);
/* The same, owning arg: release(arg) is called exactly once — after fn ran
 * (before a waiting caller is woken), when the request is dropped unrun
 * (the thread finished first), or before a refused call returns false.
 * See RLPerformReleaseCallBack in RLRunLoop.h. */
RL_EXPORT bool RLThreadPerformWithRelease(RLThreadRef thread, void (*fn)(void *RL_NULLABLE arg),
                                          void *RL_NULLABLE arg, RLPerformReleaseCallBack RL_NULLABLE release,
                                          const RLRunLoopMode *RL_NULLABLE modes, bool waitUntilDone);
RL_EXPORT bool RLThreadPerformOnMainWithRelease(void (*fn)(void *RL_NULLABLE arg), void *RL_NULLABLE arg,
                                                RLPerformReleaseCallBack RL_NULLABLE release,
                                                const RLRunLoopMode *RL_NULLABLE modes, bool waitUntilDone);
#if __BLOCKS__
/* Block forms; the block is copied and released after it ran (or was
 * dropped because the thread finished) — in both cases before a waiting
 * caller is woken, so the block may capture what lives on the caller's
 * stack for the duration of the call. */
RL_EXPORT bool RLThreadPerformBlock(RLThreadRef thread, const RLRunLoopMode *RL_NULLABLE modes, bool waitUntilDone,
                                    void (^block)(void));
RL_EXPORT bool RLThreadPerformBlockOnMain(const RLRunLoopMode *RL_NULLABLE modes, bool waitUntilDone,
                                          void (^block)(void));
#endif

/* Runs fn(arg) on the calling thread after `delay` seconds (a one-shot timer
 * in `modes` of its run loop; performSelector:withObject:afterDelay:inModes:).
 * Negative delays count as 0. Returns a token, or 0 (error set) for a NULL
 * fn, a NaN delay or a bad mode list. */
RL_EXPORT RLPerformToken RLThreadPerformAfterDelay(void (*fn)(void *RL_NULLABLE arg), void *RL_NULLABLE arg,
                                                   RLTimeInterval delay, const RLRunLoopMode *RL_NULLABLE modes);
/* The same, owning arg: release(arg) after fn ran, when the request is
 * cancelled or dropped (the thread exits first), or before a refused call
 * returns 0. */
RL_EXPORT RLPerformToken RLThreadPerformAfterDelayWithRelease(void (*fn)(void *RL_NULLABLE arg), void *RL_NULLABLE arg,
                                                              RLPerformReleaseCallBack RL_NULLABLE release,
                                                              RLTimeInterval delay,
                                                              const RLRunLoopMode *RL_NULLABLE modes);
#if __BLOCKS__
RL_EXPORT RLPerformToken RLThreadPerformBlockAfterDelay(RLTimeInterval delay, const RLRunLoopMode *RL_NULLABLE modes,
                                                        void (^block)(void));
#endif

/* Cancels one delayed request of the calling thread that has not run yet.
 * kRLErrorNotFound if the token is unknown to this thread, has run or was
 * cancelled. */
RL_EXPORT bool RLThreadCancelPerformRequest(RLPerformToken token);
/* Cancels every delayed request of the calling thread made with exactly
 * this fn and arg (cancelPreviousPerformRequestsWithTarget:selector:object:).
 * Returns how many were cancelled, or -1 (error set) for a NULL fn. */
RL_EXPORT RLIndex RLThreadCancelPreviousPerformRequests(void (*fn)(void *RL_NULLABLE arg), void *RL_NULLABLE arg);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLPERFORM_H */
