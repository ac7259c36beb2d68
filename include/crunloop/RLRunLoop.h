/*
 * RLRunLoop.h — CoreFoundation's CFRunLoop for Linux, under the RL prefix.
 *
 * Every CFRunLoop function exists here with the same parameters, meaning and
 * numeric constants; CoreFoundation's behaviour is the reference (observer
 * order in an iteration, RunInMode result codes, Stop affecting the innermost
 * run only, FIFO perform blocks, common modes, nested runs, source order).
 *
 * What this run loop does better than CoreFoundation on Linux
 * (docs/runloop.md lists every intended difference):
 *   - one epoll fd, one eventfd and one timerfd per run loop, however many
 *     modes (CF: 3 + 2 per mode); wake-ups are coalesced (WakeUp on an
 *     awake or already-woken loop makes no system call);
 *   - timers in a heap (O(log n) add/move/remove/fire) with working
 *     tolerance used to coalesce wake-ups; signalled sources are found in
 *     O(1) through a ready list; adding an item to (or removing it from)
 *     kRLRunLoopCommonModes costs O(1) per common mode, however many items
 *     are there;
 *   - file-descriptor sources for any fd (RLFileDescriptor.h);
 *   - no helper thread for run timeouts and no lost wake-up.
 *
 * Where CF returns void, the RL function returns bool: false (with
 * RLErrorGetLast() set, nothing changed) reports misuse such as a NULL or
 * released object, a NULL or empty mode, or an invalidated source.
 *
 * Thread safety: every function may be called from any thread. Run,
 * RunInMode and GetCurrent act on the calling thread's run loop. No internal
 * lock is held while a callout (source perform, timer, observer, block,
 * schedule/cancel, context retain/release) runs, so a callout may call any
 * function here, including removing or invalidating itself.
 *
 * fork(): CoreFoundation's rule is "exec only" (a child may use nothing of
 * it before exec). Here a child of fork() — from a single- or multi-threaded
 * parent, from any thread, even from inside a callout — may go on using the
 * library, and nothing it does affects the parent's loops:
 *   - the library's internal locks are held across fork() (pthread_atfork),
 *     so none is inherited locked;
 *   - every run loop that existed before the fork is inherited: it belongs
 *     to the parent (its epoll fd, eventfd and timerfd are shared with it).
 *     Every function given one fails at once with kRLErrorInvalidState (the
 *     message says "inherited across fork()"); a refused perform calls its
 *     release function, as any refused perform does. A run that was going
 *     on in the forking thread (fork() from a callout) returns
 *     kRLRunLoopRunFinished with that error as soon as the callout returns;
 *   - the forking thread is the child's main thread: RLRunLoopGetCurrent()
 *     and RLRunLoopGetMain() give it a new loop with kernel objects of its
 *     own, and new loops, timers and threads work as in any process;
 *   - timers, sources and observers are plain objects: one that sits in an
 *     inherited loop stays there (and can be invalidated), others can be
 *     added to the child's loops.
 * fork() here means the libc function: a raw clone/SYS_fork system call
 * runs no atfork handler and is not covered. RLThread.h says the same for
 * threads and workers.
 */
#ifndef CRUNLOOP_RLRUNLOOP_H
#define CRUNLOOP_RLRUNLOOP_H

#include <crunloop/RLBase.h>
#include <crunloop/RLArray.h>
#include <crunloop/RLString.h>

RL_EXTERN_C_BEGIN

typedef struct RLRunLoop *RLRunLoopRef;
typedef struct RLRunLoopSource *RLRunLoopSourceRef;
typedef struct RLRunLoopObserver *RLRunLoopObserverRef;
typedef struct RLRunLoopTimer *RLRunLoopTimerRef;

/* A mode name; compared by content, copied by the library when stored. */
typedef const char *RLRunLoopMode;

/* Why RLRunLoopRunInMode returned (same values as CF). */
typedef RL_ENUM(int32_t, RLRunLoopRunResult) {
    kRLRunLoopRunFinished = 1,      /* the mode has no sources or timers */
    kRLRunLoopRunStopped = 2,       /* RLRunLoopStop */
    kRLRunLoopRunTimedOut = 3,      /* `seconds` elapsed */
    kRLRunLoopRunHandledSource = 4, /* a source was handled and returnAfterSourceHandled */
};

/* Observer activities (same bits as CF). */
typedef RL_OPTIONS(RLOptionFlags, RLRunLoopActivity) {
    kRLRunLoopEntry = (1UL << 0),
    kRLRunLoopBeforeTimers = (1UL << 1),
    kRLRunLoopBeforeSources = (1UL << 2),
    kRLRunLoopBeforeWaiting = (1UL << 5),
    kRLRunLoopAfterWaiting = (1UL << 6),
    kRLRunLoopExit = (1UL << 7),
    kRLRunLoopAllActivities = 0x0FFFFFFFU,
};

/* "kRLRunLoopDefaultMode" */
RL_EXPORT const RLRunLoopMode kRLRunLoopDefaultMode;
/* "kRLRunLoopCommonModes": the pseudo-mode standing for every common mode. */
RL_EXPORT const RLRunLoopMode kRLRunLoopCommonModes;

/* The type ID of run loops (RLGetTypeID of one). */
RL_EXPORT RLTypeID RLRunLoopGetTypeID(void);

/* The calling thread's run loop, created on first use. Get rule: not owned;
 * it lives until its thread exits (the main thread's: until process exit). */
RL_EXPORT RLRunLoopRef RL_NULLABLE RLRunLoopGetCurrent(void);
/* The main thread's run loop. Get rule. */
RL_EXPORT RLRunLoopRef RL_NULLABLE RLRunLoopGetMain(void);

/* Runs the current thread's loop in the default mode until it is stopped or
 * the default mode has nothing left to wait for. Returns kRLRunLoopRunStopped
 * or kRLRunLoopRunFinished. */
RL_EXPORT RLRunLoopRunResult RLRunLoopRun(void);

/* Runs the current thread's loop in `mode` for at most `seconds` (<= 0: one
 * pass, no waiting). Always returns one of the kRLRunLoopRun… codes: for
 * kRLRunLoopCommonModes (not a mode one runs in) kRLRunLoopRunFinished at
 * once, as CF; likewise, with the error set, for a NULL or empty mode, a
 * NaN interval, or a thread whose run loop cannot be had. */
RL_EXPORT RLRunLoopRunResult RLRunLoopRunInMode(RLRunLoopMode mode, RLTimeInterval seconds,
                                                bool returnAfterSourceHandled);

/* Would RLRunLoopRunInMode(mode, …) on rl return kRLRunLoopRunFinished at
 * once: rl has no such mode, or it holds no source, timer or queued
 * perform request (observers do not count), or `mode` is
 * kRLRunLoopCommonModes? No CF counterpart in the public API (Foundation's
 * RunLoop asks CF's private _CFRunLoopFinished before run(mode:before:)).
 * Must be called on rl's own thread; true, with the error set, on misuse
 * (a bad loop or mode, another thread's loop). */
RL_EXPORT bool RLRunLoopIsFinished(RLRunLoopRef rl, RLRunLoopMode mode);

/* The mode rl is running in, as a library string (RLString.h): a
 * `const char *` that is also an object. Copy rule: RLRelease it (CF code's
 * CFRelease through cf_compat.h does exactly that); never free() it. NULL
 * if rl is not running (no error) or on misuse (error set). */
RL_EXPORT RLStringRef RL_NULLABLE RLRunLoopCopyCurrentMode(RLRunLoopRef rl);

/* The kernel backend rl waits on now (not in CF): "io_uring" or "epoll",
 * a static string (never freed); any thread. The environment variable
 * RL_BACKEND, read as each loop is made, chooses it. Unset, empty or
 * "auto" (the default): epoll, and io_uring from the first wait after a
 * callout of one of rl's sockets asked for the ring (a stream RLSocket's
 * Data callout, or its RLSocketSendData from its callout) where the
 * kernel allows it (Linux 6.1 or later, io_uring not disabled by the
 * kernel.io_uring_disabled sysctl or a seccomp filter), epoll otherwise,
 * without error; a loop moves once and never back. "epoll" always gives
 * epoll; "io_uring" forces it from the start, and where the kernel refuses it making the loop
 * fails (RLRunLoopGetCurrent returns NULL, kRLErrorSystem with the
 * kernel's errno, kRLErrorPermission for EPERM; kRLErrorInvalidState in a PLAIN=1 build, which has
 * epoll only); any other non-empty value fails the same way with
 * kRLErrorInvalidArgument. RLCopyDescription of a loop names it too. NULL
 * on misuse (not a live run loop; error set). */
RL_EXPORT const char *RL_NULLABLE RLRunLoopGetBackendName(RLRunLoopRef rl);

/* Every mode rl knows, as an array of mode names (RLArray.h), as CF's
 * CFRunLoopCopyAllModes. Copy rule: RLRelease the array once. Its strings
 * belong to the array (Get rule, valid while it lives: RLArrayGetValueAtIndex
 * or RLArrayGetValues); to keep one longer, RLStringCreateWithCString it.
 * NULL (error set) on misuse or when memory is short. */
RL_EXPORT RLArrayRef RL_NULLABLE RLRunLoopCopyAllModes(RLRunLoopRef rl);

/* Makes `mode` common: every item added to kRLRunLoopCommonModes, now or
 * later, is also in `mode`. */
RL_EXPORT bool RLRunLoopAddCommonMode(RLRunLoopRef rl, RLRunLoopMode mode);

/* The earliest fire date of the valid timers in `mode`, or 0 if none. */
RL_EXPORT RLAbsoluteTime RLRunLoopGetNextTimerFireDate(RLRunLoopRef rl, RLRunLoopMode mode);

/* True while rl is blocked waiting for an event. */
RL_EXPORT bool RLRunLoopIsWaiting(RLRunLoopRef rl);
/* Wakes rl if it is waiting. Coalesced: no system call if rl is awake or a
 * wake-up is already pending. */
RL_EXPORT bool RLRunLoopWakeUp(RLRunLoopRef rl);
/* Makes the innermost running RunInMode of rl return kRLRunLoopRunStopped
 * (after the current pass). As in CF, a stop request made while rl is not
 * running is forgotten: it does not stop the next run. */
RL_EXPORT bool RLRunLoopStop(RLRunLoopRef rl);

/* Queues fn(info) to run once on rl's thread when rl next runs in `mode`
 * (or in any common mode, for kRLRunLoopCommonModes). FIFO. Does not wake
 * rl: call RLRunLoopWakeUp, as with CF. */
RL_EXPORT bool RLRunLoopPerformFunction(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *info),
                                        void *RL_NULLABLE info);

/* Releases the `info` of a perform request. The "…WithRelease" perform
 * calls (here, in RLPerform.h and RLWorkerThread.h) take ownership of info
 * and call release(info) exactly once, whatever happens to the request:
 *   - after fn(info) returned, on the thread that ran it (for a waiting
 *     caller: before the waiter is woken);
 *   - when the request is dropped without running (its thread exited, its
 *     loop was torn down or released while the request was queued, a
 *     delayed request was cancelled), on the thread that drops it;
 *   - before the call returns false, if the call refused the request
 *     (bad arguments included), on the calling thread.
 * A NULL release makes them behave as the forms without it. */
typedef void (*RLPerformReleaseCallBack)(void *RL_NULLABLE info);

/* RLRunLoopPerformFunction with a release callback for info (see above):
 * requests that never run (the mode is never run again, the loop's thread
 * exits) do not leak info. */
RL_EXPORT bool RLRunLoopPerformFunctionWithRelease(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *info),
                                                   void *RL_NULLABLE info,
                                                   RLPerformReleaseCallBack RL_NULLABLE release);
#if __BLOCKS__
/* The block form (CFRunLoopPerformBlock); the block is copied. */
RL_EXPORT bool RLRunLoopPerformBlock(RLRunLoopRef rl, RLRunLoopMode mode, void (^block)(void));
#endif

/* One request for several modes (CFRunLoopPerformBlock with an array of
 * modes): fn(info) is queued once and runs once, in the first of `modes`
 * that rl runs (kRLRunLoopCommonModes: any common mode, as the common modes
 * are when it runs). `modes` holds `count` (at least 1) non-empty names,
 * copied; duplicates count once. release may be NULL; if not, it is called
 * exactly once as for RLRunLoopPerformFunctionWithRelease — after the run,
 * or when the request is dropped unrun (rl's thread exits), or before a
 * refused call returns false. Does not wake rl. Errors:
 * kRLErrorInvalidArgument (NULL modes, count < 1, a NULL or empty name, a
 * NULL fn), kRLErrorInvalidState (rl's thread has exited). */
RL_EXPORT bool RLRunLoopPerformFunctionInModes(RLRunLoopRef rl, const RLRunLoopMode *modes, RLIndex count,
                                               void (*fn)(void *info), void *RL_NULLABLE info,
                                               RLPerformReleaseCallBack RL_NULLABLE release);
#if __BLOCKS__
/* The block form; the block is copied, and released once after it ran or
 * when it is dropped unrun. */
RL_EXPORT bool RLRunLoopPerformBlockInModes(RLRunLoopRef rl, const RLRunLoopMode *modes, RLIndex count,
                                            void (^block)(void));
#endif

RL_EXPORT bool RLRunLoopContainsSource(RLRunLoopRef rl, RLRunLoopSourceRef source, RLRunLoopMode mode);
/* Adding retains the source; removing (or the loop's teardown) releases it.
 * The source's schedule callback runs the first time it is added to a
 * mode, cancel when it is removed from one. Adding twice is harmless.
 * Sources are compared as in CF: two sources with the same order and
 * callbacks whose infos are equal (by the context's `equal` callback, or
 * the same pointer without one) are one source to a mode. Adding a source
 * equal to one already in the mode does nothing (no schedule); Contains
 * answers true for it and Remove removes the one in the mode (calling the
 * cancel of the source named in the call). `hash` is called once, at
 * creation; `equal` without any library lock held. fd sources
 * (RLFileDescriptor.h) are compared by identity. */
RL_EXPORT bool RLRunLoopAddSource(RLRunLoopRef rl, RLRunLoopSourceRef source, RLRunLoopMode mode);
RL_EXPORT bool RLRunLoopRemoveSource(RLRunLoopRef rl, RLRunLoopSourceRef source, RLRunLoopMode mode);

RL_EXPORT bool RLRunLoopContainsObserver(RLRunLoopRef rl, RLRunLoopObserverRef observer, RLRunLoopMode mode);
/* An observer belongs to one run loop at a time (in any number of its
 * modes), as in CF; adding it to a second run loop fails with
 * kRLErrorInvalidState. Once removed from every mode, it may join another. */
RL_EXPORT bool RLRunLoopAddObserver(RLRunLoopRef rl, RLRunLoopObserverRef observer, RLRunLoopMode mode);
RL_EXPORT bool RLRunLoopRemoveObserver(RLRunLoopRef rl, RLRunLoopObserverRef observer, RLRunLoopMode mode);

RL_EXPORT bool RLRunLoopContainsTimer(RLRunLoopRef rl, RLRunLoopTimerRef timer, RLRunLoopMode mode);
/* A timer belongs to one run loop at a time (in any number of its modes);
 * adding it to a second run loop fails with kRLErrorInvalidState. */
RL_EXPORT bool RLRunLoopAddTimer(RLRunLoopRef rl, RLRunLoopTimerRef timer, RLRunLoopMode mode);
RL_EXPORT bool RLRunLoopRemoveTimer(RLRunLoopRef rl, RLRunLoopTimerRef timer, RLRunLoopMode mode);

RL_EXTERN_C_END

#include <crunloop/RLRunLoopSource.h>
#include <crunloop/RLRunLoopTimer.h>
#include <crunloop/RLRunLoopObserver.h>
#include <crunloop/RLFileDescriptor.h>

#endif /* CRUNLOOP_RLRUNLOOP_H */
