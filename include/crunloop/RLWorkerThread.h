/*
 * RLWorkerThread.h — a thread with a run loop that starts and stops
 * synchronously: the pattern of the "Controlling How NSThread and NSRunLoop
 * Exit" post, built in.
 *
 * What a caller may rely on:
 *   - RLWorkerThreadStart returns once the worker's run loop is running and
 *     ready for work (not merely once a thread was created).
 *   - RLWorkerThreadStop returns once the worker thread has fully exited:
 *     its run loop torn down, its will-exit handlers run, the thread joined.
 *     Work queued before Stop runs before the thread exits.
 *   - An idle worker sleeps in its run loop without waking up: no polling,
 *     no timeout loop.
 *   - A worker can be started again after it was stopped (a new thread).
 *   - Releasing the last reference to a running worker stops it first and
 *     returns once its thread has exited and was joined. Released on the
 *     worker's own thread (from work running there), where it cannot wait
 *     for itself, it does not wait: the worker's loop is told to stop, and
 *     the thread finishes by itself once that work returns — run loop torn
 *     down and will-exit handlers run as after a Stop — and is detached
 *     instead of joined. Work queued before the release still runs; work
 *     that arrives later (through a retained RLThreadRef) is dropped, as on
 *     any finished thread (see the …WithRelease forms for work that owns
 *     memory).
 *
 * Work runs in the worker's run loop in the common modes, FIFO, on the
 * worker thread; RLRunLoop and RLPerform functions work on it as on any
 * thread (RLWorkerThreadCopyRunLoop, RLWorkerThreadCopyThread).
 */
#ifndef CRUNLOOP_RLWORKERTHREAD_H
#define CRUNLOOP_RLWORKERTHREAD_H

#include <crunloop/RLRunLoop.h>
#include <crunloop/RLThread.h>

RL_EXTERN_C_BEGIN

typedef struct RLWorkerThread *RLWorkerThreadRef;

/* A stopped worker whose threads will carry `name` (copied; may be NULL).
 * Create rule. */
RL_EXPORT RLWorkerThreadRef RL_NULLABLE RLWorkerThreadCreate(RLAllocatorRef RL_NULLABLE allocator,
                                                             const char *RL_NULLABLE name);

/* Starts the worker and returns once its run loop is running. Errors:
 * kRLErrorInvalidState if it is running (or being started or stopped),
 * system errors if no thread or run loop can be made (nothing changed). */
RL_EXPORT bool RLWorkerThreadStart(RLWorkerThreadRef worker);
/* Stops the worker and returns once its thread has exited and was joined.
 * Errors: kRLErrorInvalidState if it is not running (or another Stop is
 * under way), kRLErrorWouldDeadlock on the worker thread itself. */
RL_EXPORT bool RLWorkerThreadStop(RLWorkerThreadRef worker);
/* True from Start until Stop, or until work on the worker ended its thread
 * with RLThreadExit (a later Start or Stop then joins what is left of that
 * thread). False (error set) for a bad worker. */
RL_EXPORT bool RLWorkerThreadIsRunning(RLWorkerThreadRef worker);

/* The running worker's thread / run loop, retained for the caller (Copy
 * rule: RLRelease it), or NULL (error set, kRLErrorInvalidState) when it is
 * not running. The reference stays valid whatever another thread does to
 * the worker meanwhile (after a Stop the thread reads as finished and the
 * run loop as torn down). */
RL_EXPORT RLThreadRef RL_NULLABLE RLWorkerThreadCopyThread(RLWorkerThreadRef worker);
RL_EXPORT RLRunLoopRef RL_NULLABLE RLWorkerThreadCopyRunLoop(RLWorkerThreadRef worker);

/* The same without a reference (Get rule): valid only until the worker is
 * stopped, restarted or released, so only for a caller that alone starts
 * and stops the worker; with other threads around, use the Copy forms (a
 * concurrent Stop frees what a Get form returned). */
RL_EXPORT RLThreadRef RL_NULLABLE RLWorkerThreadGetThread(RLWorkerThreadRef worker);
RL_EXPORT RLRunLoopRef RL_NULLABLE RLWorkerThreadGetRunLoop(RLWorkerThreadRef worker);

/* Registers fn(thread, info) as a will-exit handler of every thread the
 * worker starts from now on (and of the current one, if running). Returns
 * a token for RLWorkerThreadRemoveWillExitHandler, or 0 (error set): NULL
 * fn (kRLErrorInvalidArgument), a bad worker. */
RL_EXPORT RLThreadHandlerToken RLWorkerThreadAddWillExitHandler(RLWorkerThreadRef worker,
                                                                RLThreadWillExitHandler fn, void *RL_NULLABLE info);
#if __BLOCKS__
/* The block form; the block is copied and kept until the handler is removed
 * or the worker is destroyed. */
RL_EXPORT RLThreadHandlerToken RLWorkerThreadAddWillExitHandlerBlock(RLWorkerThreadRef worker,
                                                                     void (^block)(RLThreadRef thread));
#endif
/* Removes a handler, for future threads and for the running one (where it
 * may already be running, or have run: that is not undone).
 * kRLErrorNotFound for an unknown token. */
RL_EXPORT bool RLWorkerThreadRemoveWillExitHandler(RLWorkerThreadRef worker, RLThreadHandlerToken token);

/* Queues fn(arg) on the worker and returns. The work goes into the queue
 * of the worker's run loop, in its common modes, the one queue that
 * RLRunLoopPerform* and RLThreadPerform* use: requests to the worker from
 * one thread run in the order they were made, whichever of these calls
 * made them. kRLErrorInvalidState if the worker is not running;
 * kRLErrorInvalidArgument for a NULL fn. */
RL_EXPORT bool RLWorkerThreadPerformAsync(RLWorkerThreadRef worker, void (*fn)(void *RL_NULLABLE arg),
                                          void *RL_NULLABLE arg);
/* Runs fn(arg) on the worker and returns after it ran (at once when called
 * on the worker itself). kRLErrorInvalidState if the worker is not running
 * or stops before running it. */
RL_EXPORT bool RLWorkerThreadPerformSync(RLWorkerThreadRef worker, void (*fn)(void *RL_NULLABLE arg),
                                         void *RL_NULLABLE arg);
/* The same, owning arg: release(arg) is called exactly once — after fn
 * ran (for Sync: before Sync returns), when the request is dropped unrun
 * (the worker stopped first), or before a refused call returns false
 * (RLPerformReleaseCallBack, RLRunLoop.h). */
RL_EXPORT bool RLWorkerThreadPerformAsyncWithRelease(RLWorkerThreadRef worker, void (*fn)(void *RL_NULLABLE arg),
                                                     void *RL_NULLABLE arg,
                                                     RLPerformReleaseCallBack RL_NULLABLE release);
RL_EXPORT bool RLWorkerThreadPerformSyncWithRelease(RLWorkerThreadRef worker, void (*fn)(void *RL_NULLABLE arg),
                                                    void *RL_NULLABLE arg,
                                                    RLPerformReleaseCallBack RL_NULLABLE release);
#if __BLOCKS__
/* Block forms; the block is released after it ran or was dropped, before
 * Sync returns, so a Sync block may use the caller's stack. */
RL_EXPORT bool RLWorkerThreadPerformBlockAsync(RLWorkerThreadRef worker, void (^block)(void));
RL_EXPORT bool RLWorkerThreadPerformBlockSync(RLWorkerThreadRef worker, void (^block)(void));
#endif

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLWORKERTHREAD_H */
