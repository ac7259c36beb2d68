/*
 * RLSignalSource.h — Unix signals delivered as ordinary run-loop callouts
 * (no Apple API has this; libdispatch's signal sources are the nearest).
 *
 * A signal source watches one signal. Add its run-loop source to a loop in
 * some modes: each time the signal arrives, the callout runs on that loop's
 * thread, in those modes, with the number of deliveries since the previous
 * callout. No code runs in a signal handler: the library reads the signal
 * from a signalfd in the loop's epoll set.
 *
 * Several sources (in one loop or in several) may watch the same signal:
 * every watcher sees every delivery. Whichever loop wakes first reads the
 * signal and hands the count to every watcher, waking their loops.
 *
 * Counting: each queued signal counts one. Realtime signals (SIGRTMIN…
 * SIGRTMAX, sent with sigqueue) queue in the kernel, so every one sent is
 * counted. A standard signal (SIGUSR1, SIGTERM, …) is pending at most once:
 * deliveries sent while it is already pending merge into one in the kernel
 * and count one — the count is then at least 1 and at most the number sent.
 *
 * The signal mask — read this before using signal sources in a threaded
 * program. signalfd sees a signal only while every thread blocks it;
 * a thread that leaves it unblocked takes the signal itself.
 *   - RLSignalSourceCreate blocks the signal in the calling thread, and
 *     threads started afterwards (RLThread, pthread_create) inherit that
 *     mask. So create the first source for a signal on the main thread
 *     before starting other threads (or block the signal yourself with
 *     pthread_sigmask in threads that already exist). The library never
 *     changes the mask of other threads.
 *   - While a signal is watched, its disposition is a handler that does
 *     nothing, so that a thread that still has it unblocked neither dies
 *     (SIGTERM's default) nor discards it for good (SIG_IGN would make the
 *     kernel drop even blocked signals); such a delivery is lost for the
 *     sources.
 *   - When the last source for a signal is invalidated, the disposition
 *     that was there before the first one is restored, and the signal is
 *     unblocked again in the calling thread if the thread that created the
 *     first source had it unblocked before. A delivery still pending then
 *     (sent while the signal was watched, after the sources' last look)
 *     belonged to the watchers and is dropped first, so it never meets the
 *     restored disposition; where the signal stays blocked it stays
 *     pending, as before the first source. A signal sent after the last
 *     source is gone gets the restored disposition (SIGTERM's default ends
 *     the process): a program that stops on a signal keeps its sources
 *     until it exits (examples/c/daemon_skeleton.c).
 * Not allowed (kRLErrorInvalidArgument): SIGKILL, SIGSTOP (cannot be
 * caught) and SIGSEGV, SIGBUS, SIGFPE, SIGILL (raised by the faulting
 * thread itself, which cannot wait for a loop).
 *
 * Lifetime: a source stays alive until invalidated (its run-loop source and
 * the loop hold it); RLSignalSourceInvalidate it, then release it.
 */
#ifndef CRUNLOOP_RLSIGNALSOURCE_H
#define CRUNLOOP_RLSIGNALSOURCE_H

#include <crunloop/RLRunLoop.h>

RL_EXTERN_C_BEGIN

typedef struct RLSignalSource *RLSignalSourceRef;

/* count: deliveries since the previous callout (>= 1). */
typedef void (*RLSignalSourceCallBack)(RLSignalSourceRef source, int signum, RLIndex count,
                                       void *RL_NULLABLE info);

typedef struct RLSignalSourceContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLSignalSourceContext;

/* Starts watching signum (see the mask rules above). Create rule. NULL
 * (error set) for a signal that cannot be watched, a NULL callout, a
 * context version other than 0, or when signalfd(2) fails. */
RL_EXPORT RLSignalSourceRef RL_NULLABLE RLSignalSourceCreate(RLAllocatorRef RL_NULLABLE allocator, int signum,
                                                             RLSignalSourceCallBack callout,
                                                             const RLSignalSourceContext *RL_NULLABLE context);

/* The run-loop source to add to loops and modes (one per signal source; a
 * second call returns the same one retained again; `order` is taken from
 * the first call). Create rule. */
RL_EXPORT RLRunLoopSourceRef RL_NULLABLE RLSignalSourceCreateRunLoopSource(RLAllocatorRef RL_NULLABLE allocator,
                                                                           RLSignalSourceRef source, RLIndex order);

/* Convenience: creates the run-loop source (order 0) and adds it to rl in
 * mode. false (error set) on misuse. */
RL_EXPORT bool RLRunLoopAddSignalSource(RLRunLoopRef rl, RLSignalSourceRef source, RLRunLoopMode mode);

/* The watched signal, or 0 (error set). */
RL_EXPORT int RLSignalSourceGetSignal(RLSignalSourceRef source);
RL_EXPORT bool RLSignalSourceGetContext(RLSignalSourceRef source, RLSignalSourceContext *context);

/* Stops watching: no callout after it returns (except one already running
 * on another thread), the run-loop source leaves every loop, the context
 * info is released; the last watcher of a signal restores the
 * disposition and mask as described above. Idempotent; may be called from
 * the source's own callout. */
RL_EXPORT bool RLSignalSourceInvalidate(RLSignalSourceRef source);
RL_EXPORT bool RLSignalSourceIsValid(RLSignalSourceRef source);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSIGNALSOURCE_H */
