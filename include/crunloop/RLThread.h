/*
 * RLThread.h — NSThread for C: threads you create, configure, start, name,
 * cancel, join and are told about when they exit.
 *
 * An RLThreadRef stands for one thread of the process: one started through
 * this library, the main thread, or a thread created with plain pthreads
 * (which gets its RLThread the first time it calls RLThreadGetCurrent).
 *
 * What a caller may rely on:
 *   - A created thread does nothing until RLThreadStart; stack size, name,
 *     priority and detached state can be set in between.
 *   - Names are kept in full; only the kernel's copy (what `ps`/`top` and
 *     debuggers show) is cut to its 15-byte limit, at a UTF-8 character
 *     boundary. Reading another thread's name returns that thread's name.
 *   - Will-exit handlers run on the exiting thread after its entry function
 *     returned (or RLThreadExit was called) and after its run loop was torn
 *     down, while the thread still exists: a handler sees every resource the
 *     thread's code released already released.
 *   - Threads are detached by default, as NSThread's; RLThreadSetJoinable
 *     before start makes RLThreadJoin possible, which returns the entry's
 *     result. Releasing a joinable thread that was never joined does not
 *     leak it.
 *   - Misuse (joining yourself, a detached or unstarted thread, configuring
 *     a started thread, a bad stack size) fails with an error; it never
 *     hangs or crashes.
 *
 * Thread safety: every function may be called from any thread, on any
 * thread object, unless its comment says otherwise. No internal lock is held
 * while an entry function, handler or destructor runs.
 *
 * fork(): the child has one thread, the one that called fork(), and it is
 * the child's main thread. Every RLThread (and RLWorkerThread, RLRunLoop)
 * made before the fork is inherited: it stands for a thread of the parent,
 * and every function given one in the child fails at once with
 * kRLErrorInvalidState ("inherited across fork()") — performs call their
 * release function, joins and stops never wait. Releasing an inherited
 * object frees only the child's copy. RLThreadGetCurrent() and
 * RLThreadGetMain() give the forking thread a new RLThread; threads and
 * workers created in the child work normally. (CoreFoundation/Foundation
 * allow nothing but exec in such a child.) Locks of the library's own are
 * fork-safe; a user's lock (RLLock, RLSync…) held by another thread at the
 * fork stays held in the child, as a pthread mutex would.
 */
#ifndef CRUNLOOP_RLTHREAD_H
#define CRUNLOOP_RLTHREAD_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

typedef struct RLThread *RLThreadRef;

/* A thread's entry function; its result is what RLThreadJoin returns. */
typedef void *RL_NULLABLE (*RLThreadEntry)(void *RL_NULLABLE arg);

/* Called on the exiting thread (see the header comment), with the thread. */
typedef void (*RLThreadWillExitHandler)(RLThreadRef thread, void *RL_NULLABLE info);

/* Default stack size of secondary threads (512 KB, as on Apple systems). */
#define kRLThreadDefaultStackSize ((size_t)512 * 1024)
/* Stack sizes must be at least this and a multiple of kRLThreadStackSizeGranule. */
#define kRLThreadMinimumStackSize ((size_t)16 * 1024)
#define kRLThreadStackSizeGranule ((size_t)4 * 1024)

/* Key removal handle of RLThreadAdd…Handler; 0 is never a valid handle. */
typedef uint64_t RLThreadHandlerToken;

/* ---- creating and starting ---- */

/* An unstarted, detached thread that will run entry(arg). Create rule.
 * NULL (error set) for a NULL entry. */
RL_EXPORT RLThreadRef RL_NULLABLE RLThreadCreate(RLAllocatorRef RL_NULLABLE allocator, RLThreadEntry entry,
                                                 void *RL_NULLABLE arg);
#if __BLOCKS__
/* The block form (NSThread initWithBlock:); the block is copied. Its
 * RLThreadJoin result is NULL. Create rule. */
RL_EXPORT RLThreadRef RL_NULLABLE RLThreadCreateWithBlock(RLAllocatorRef RL_NULLABLE allocator,
                                                          void (^block)(void));
#endif

/* Starts the thread. The first thread started through the library makes
 * the process multi-threaded (see RLThreadAddWillBecomeMultiThreadedHandler).
 * A thread cancelled before it was started does not run its entry: it
 * becomes finished at once and Start returns true. Fails with
 * kRLErrorInvalidState if the thread was already started (or is not one
 * created by RLThreadCreate), kRLErrorSystem/kRLErrorNoMemory if the system
 * refuses a thread; a failed start leaves the thread unstarted. */
RL_EXPORT bool RLThreadStart(RLThreadRef thread);

/* Creates and starts a detached thread running entry(arg), in one call
 * (NSThread detachNewThreadSelector:). */
RL_EXPORT bool RLThreadDetachNew(RLThreadEntry entry, void *RL_NULLABLE arg);
#if __BLOCKS__
RL_EXPORT bool RLThreadDetachNewWithBlock(void (^block)(void));
#endif
/* Runs fn(arg) on a new detached thread (performSelectorInBackground:). */
RL_EXPORT bool RLThreadPerformInBackground(void (*fn)(void *RL_NULLABLE arg), void *RL_NULLABLE arg);

/* ---- which thread ---- */

/* The calling thread. Get rule. A thread not created by the library gets
 * its RLThread on first call; it is finished and released when that thread
 * exits (its will-exit handlers run then). NULL only if out of memory. */
RL_EXPORT RLThreadRef RL_NULLABLE RLThreadGetCurrent(void);
/* The process's main thread (whose thread id is the process id), from any
 * thread. Get rule. */
RL_EXPORT RLThreadRef RL_NULLABLE RLThreadGetMain(void);
/* True on the main thread. */
RL_EXPORT bool RLThreadIsMainThread(void);
/* True if `thread` is the main thread (false, error set, for a bad object). */
RL_EXPORT bool RLThreadIsMain(RLThreadRef thread);

/* True once a thread was started through the library. */
RL_EXPORT bool RLThreadIsMultiThreaded(void);
/* Registers fn(info) to run once, on the thread calling the first
 * successful RLThreadStart (or DetachNew), before that thread is created
 * ("NSWillBecomeMultiThreadedNotification"). Returns false with
 * kRLErrorInvalidState if the process is already multi-threaded (fn will
 * never run), kRLErrorInvalidArgument for a NULL fn. */
RL_EXPORT bool RLThreadAddWillBecomeMultiThreadedHandler(void (*fn)(void *RL_NULLABLE info),
                                                         void *RL_NULLABLE info);
#if __BLOCKS__
/* The block form; the block is copied, and released after it ran. */
RL_EXPORT bool RLThreadAddWillBecomeMultiThreadedHandlerBlock(void (^block)(void));
#endif

/* ---- attributes ---- */

/* Stack size in bytes: the configured size for a thread created here, the
 * actual size for the main and foreign threads; 0 (error set) on misuse. */
RL_EXPORT size_t RLThreadGetStackSize(RLThreadRef thread);
/* Before start only (else kRLErrorInvalidState). The size must be at least
 * kRLThreadMinimumStackSize and a multiple of kRLThreadStackSizeGranule
 * (else kRLErrorInvalidArgument). */
RL_EXPORT bool RLThreadSetStackSize(RLThreadRef thread, size_t size);

/* The thread's name (full length, as set; "" if none). The main thread
 * and threads the library did not start, while no name was set through
 * the library, read the kernel's name instead (at most 15 bytes): the
 * process name for the main thread, whatever pthread_setname_np set for
 * another thread. Copy rule: free() the string. NULL (error set) on
 * misuse. */
RL_EXPORT char *RL_NULLABLE RLThreadCopyName(RLThreadRef thread);
/* Sets the name, before or after start, from any thread. NULL clears it.
 * The kernel's copy is truncated to 15 bytes; ours is not. */
RL_EXPORT bool RLThreadSetName(RLThreadRef thread, const char *RL_NULLABLE name);

/* Priority in [0.0, 1.0]; 0.5 is the default. Mapping (SCHED_OTHER, the
 * only policy open to unprivileged processes): the thread's nice value,
 * set with setpriority(PRIO_PROCESS, tid) which on Linux affects that one
 * thread, is 0 at 0.5, rises linearly to 19 at 0.0 and falls linearly to
 * -20 at 1.0. A nice value below the process's limit (RLIMIT_NICE;
 * without CAP_SYS_NICE usually the current value) is clamped to the lowest
 * allowed one, so above-default priorities have a real effect only where
 * the system grants it. The value read back is always the value set. A
 * thread without an explicit priority inherits its creator's nice value. */
RL_EXPORT double RLThreadGetPriority(RLThreadRef thread);
/* Before or after start, from any thread. NaN or outside [0, 1] is
 * kRLErrorInvalidArgument. */
RL_EXPORT bool RLThreadSetPriority(RLThreadRef thread, double priority);

/* Joinable (true) or detached (false, the default). Before start only. */
RL_EXPORT bool RLThreadSetJoinable(RLThreadRef thread, bool joinable);
RL_EXPORT bool RLThreadIsJoinable(RLThreadRef thread);

/* Waits until a joinable thread has fully exited and stores its entry's
 * result in *result (if non-NULL; NULL for RLThreadExit or a thread
 * cancelled before start). Errors: kRLErrorWouldDeadlock joining the
 * calling thread itself; kRLErrorInvalidState for a detached, unstarted,
 * main or foreign thread, or one already joined (or being joined). */
RL_EXPORT bool RLThreadJoin(RLThreadRef thread, void *RL_NULLABLE *RL_NULLABLE result);

/* ---- state and cancellation ---- */

/* Sets the cancelled flag (any state, idempotent). Cooperative: the entry
 * must check RLThreadIsCancelled; a thread not yet started never runs. */
RL_EXPORT bool RLThreadCancel(RLThreadRef thread);
RL_EXPORT bool RLThreadIsCancelled(RLThreadRef thread);
/* Started and not finished (main and foreign threads: while they live). */
RL_EXPORT bool RLThreadIsExecuting(RLThreadRef thread);
/* Its exit sequence (teardown, will-exit handlers) has completed, or it
 * was cancelled before start. */
RL_EXPORT bool RLThreadIsFinished(RLThreadRef thread);

/* Ends the calling thread now. Discouraged (the guide's advice: return from
 * the entry instead) but safe: pthread cleanup handlers pushed by the
 * thread's code run first, innermost first, then the thread's run loop is
 * torn down and its will-exit handlers and dictionary destructors run, as
 * after a return (the join result is NULL). Does not return. On the main
 * thread it is pthread_exit: the process lives on while other threads run.
 * Called from work running in the thread's run loop (a perform request, a
 * block or function queued on the loop, a worker's job), that work counts
 * as run (its release callback or block copy goes, a waitUntilDone sender
 * is told it ran), and everything queued behind it is dropped as at any
 * exit: released, never run, its waiting senders failed with
 * kRLErrorInvalidState. Nothing leaks and no sender is left waiting. What
 * the thread's own code holds (sources it created, memory) is its own to
 * free, with pthread_cleanup_push. From a timer, source or observer
 * callout it is not supported: what that pass of the loop holds may leak. */
RL_EXPORT void RLThreadExit(void) __attribute__((noreturn));

/* ---- will-exit notification ---- */

/* Registers fn(thread, info) to run when `thread` exits, or when any thread
 * exits if thread is NULL. Per-thread handlers run first, then the global
 * ones, each in the order added. Returns a token for removal, or 0 (error
 * set): NULL fn, or kRLErrorInvalidState for a thread that has finished. */
RL_EXPORT RLThreadHandlerToken RLThreadAddWillExitHandler(RLThreadRef RL_NULLABLE thread,
                                                          RLThreadWillExitHandler fn, void *RL_NULLABLE info);
#if __BLOCKS__
/* The block form; the block is copied. */
RL_EXPORT RLThreadHandlerToken RLThreadAddWillExitHandlerBlock(RLThreadRef RL_NULLABLE thread,
                                                               void (^block)(RLThreadRef thread));
#endif
/* Removes a handler (kRLErrorNotFound if it is unknown or has run). A
 * handler removed while it runs on another thread may still complete. */
RL_EXPORT bool RLThreadRemoveWillExitHandler(RLThreadRef RL_NULLABLE thread, RLThreadHandlerToken token);

/* ---- thread dictionary ---- */

/* Stores value under key (copied) for `thread`, replacing (and destroying)
 * any previous value. `destructor`, if non-NULL, is called with the value
 * when it is replaced or removed (on the calling thread) or when the thread
 * exits (on the exiting thread, after the will-exit handlers). */
RL_EXPORT bool RLThreadDictionarySetValue(RLThreadRef thread, const char *key, void *RL_NULLABLE value,
                                          void (*RL_NULLABLE destructor)(void *RL_NULLABLE value));
/* Reads key into *value. False with kRLErrorNotFound if absent. Get rule,
 * borrowed: the pointer stays valid only while the entry stays in the
 * dictionary — another thread may replace or remove it, or the thread may
 * exit, and run its destructor at any moment after this returns. Use it
 * from the thread itself, or when the caller keeps the value alive by its
 * own means; from other threads use RLThreadDictionaryCopyValue. */
RL_EXPORT bool RLThreadDictionaryGetValue(RLThreadRef thread, const char *key, void *RL_NULLABLE *RL_NULLABLE value);
/* Copy rule: reads key and stores retain(value) in *value, with the entry
 * kept alive until retain returned (its destructor cannot run before), so
 * the caller owns what retain gave it (e.g. a reference count taken) from
 * any thread. retain runs on the calling thread with no lock held. A value
 * replaced, removed or dropped at thread exit while a retain runs has its
 * destructor run when that retain returns, on the calling thread. False
 * with kRLErrorNotFound if absent; kRLErrorInvalidArgument for a NULL key
 * or retain. */
RL_EXPORT bool RLThreadDictionaryCopyValue(RLThreadRef thread, const char *key,
                                           void *RL_NULLABLE (*retain)(void *RL_NULLABLE value),
                                           void *RL_NULLABLE *RL_NULLABLE value);
/* Removes key, calling its destructor. kRLErrorNotFound if absent. */
RL_EXPORT bool RLThreadDictionaryRemoveValue(RLThreadRef thread, const char *key);

/* ---- sleeping ---- */

/* Sleeps the calling thread for `seconds` on the monotonic clock; signals
 * do not cut it short. <= 0 returns at once. NaN is kRLErrorInvalidArgument. */
RL_EXPORT bool RLThreadSleepForTimeInterval(RLTimeInterval seconds);
/* Sleeps until `date` (converted to the monotonic clock on entry). */
RL_EXPORT bool RLThreadSleepUntilDate(RLAbsoluteTime date);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLTHREAD_H */
