/*
 * RLRunLoopHealth.h — which callout held a run loop, and for how long.
 *
 * CoreFoundation has nothing of this (an addition of CRunLoop's; see
 * docs/runloop.md, "Loop health"). A program sets a threshold, for one loop
 * or for every loop of the process; any callout the loop makes — a timer,
 * a version-0 source's perform, an observer, a perform request, an fd
 * source, a socket, a port, a signal source, the main dispatch queue — that
 * holds the loop longer is reported once it returns: its kind, the callout
 * function's address and name, the object's description, the mode and how
 * long it ran.
 *
 * Reports go to the handler the program set (a function and its info, or a
 * block); without one, to one line on stderr, at most
 * kRLSlowCalloutStderrBurst lines per second for the process (the lines a
 * second drops are counted on the next line that is printed).
 *
 * The environment variable RL_SLOW_CALLOUT_MS, read once when the first run
 * loop is made, sets the process-wide threshold in milliseconds (a
 * positive decimal number; anything else is ignored with one line on
 * stderr).
 *
 * Cost: with no threshold set anywhere, one predictable branch per callout.
 * With one set (on any loop), two clock reads per callout of every loop.
 *
 * Statistics. Every loop counts, without a shared lock (only its own
 * thread writes them): passes, sleeps, wake-ups by cause, callouts by
 * kind. With timing on for the loop (RLRunLoopSetTimingEnabled) it also
 * keeps its time asleep and busy, and histograms of its callouts'
 * durations and of its timers' lateness (log-linear buckets: a value is
 * kept to within 1/16 of itself; fixed memory, about 5 KB a loop, made when
 * timing is first turned on). Any thread may copy a loop's statistics.
 */
#ifndef CRUNLOOP_RLRUNLOOPHEALTH_H
#define CRUNLOOP_RLRUNLOOPHEALTH_H

#include <crunloop/RLRunLoop.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What kind of callout a report is about. */
typedef enum RLCalloutKind {
    kRLCalloutTimer = 0,
    kRLCalloutSource = 1,     /* a version-0 source's perform */
    kRLCalloutObserver = 2,
    kRLCalloutPerform = 3,    /* RLRunLoopPerform*, RLThreadPerform*, worker requests */
    kRLCalloutFileDescriptor = 4,
    kRLCalloutSocket = 5,
    kRLCalloutPort = 6,       /* RLPort, RLMessagePort, RLSocketPort */
    kRLCalloutSignal = 7,
    kRLCalloutMainQueue = 8,  /* the main dispatch queue, served by the main loop */
    kRLCalloutStream = 9,
} RLCalloutKind;

/* The number of kinds (for arrays indexed by RLCalloutKind). */
enum { kRLCalloutKindCount = 10 };

/* How many stderr lines the default report prints in one second, at most. */
enum { kRLSlowCalloutStderrBurst = 10 };

/* One slow callout. Valid during the handler's call only: copy what you
 * keep. */
typedef struct RLSlowCalloutReport {
    RLRunLoopRef runLoop;          /* the loop that made the callout */
    RLCalloutKind kind;
    const void *function;          /* the callout function's address (NULL for a block) */
    const char *functionName;      /* its symbol (dladdr), else its address as "0x..." */
    const char *objectDescription; /* the object's description (RLCopyDescription) */
    RLRunLoopMode mode;            /* the mode the loop was running */
    double duration;               /* seconds the callout held the loop */
    double threshold;              /* seconds: the threshold it crossed */
} RLSlowCalloutReport;

typedef void (*RLSlowCalloutHandler)(const RLSlowCalloutReport *report, void *info);

/* Sets the slow-callout threshold in seconds of rl, or of the process when
 * rl is NULL (a loop's own threshold, when set, is used instead of the
 * process's). 0 turns it off. false (RLErrorGetLast) for a negative, NaN
 * or infinite threshold, or a released loop; nothing changes then. */
RL_EXPORT bool RLRunLoopSetSlowCalloutThreshold(RLRunLoopRef rl, double seconds);

/* The threshold set on rl (NULL: the process's), 0 when none. -1 for a
 * released loop (RLErrorGetLast). */
RL_EXPORT double RLRunLoopGetSlowCalloutThreshold(RLRunLoopRef rl);

/* Sends every report of the process to handler(report, info), called on
 * the loop's thread right after the slow callout returned, with no lock of
 * the library held. NULL restores the stderr line. A handler may replace
 * the handler (also from inside itself): a report already being delivered
 * still goes to the one it started with. */
RL_EXPORT void RLSetSlowCalloutHandler(RLSlowCalloutHandler handler, void *info);

#if __BLOCKS__
/* As RLSetSlowCalloutHandler, with a block (copied; released when it is
 * replaced and no report is using it). NULL restores the stderr line. */
RL_EXPORT void RLSetSlowCalloutHandlerBlock(void (^handler)(const RLSlowCalloutReport *report));
#endif

/* The name of a kind ("timer", "source", ...), "unknown" outside the enum. */
RL_EXPORT const char *RLCalloutKindGetName(RLCalloutKind kind);

/* ---- statistics ---- */

/* What woke a sleeping loop: the first callout the loop made after it
 * (observers aside). A wake-up after which the loop called nothing (an
 * RLRunLoopWakeUp, a stop, the run's time limit) counts as explicit. */
typedef enum RLWakeUpCause {
    kRLWakeUpTimer = 0,
    kRLWakeUpSource = 1,         /* a signalled version-0 source */
    kRLWakeUpFileDescriptor = 2, /* an fd, socket, port, signal or stream source */
    kRLWakeUpPerform = 3,        /* a perform request */
    kRLWakeUpExplicit = 4,
    kRLWakeUpMainQueue = 5,      /* the main dispatch queue */
} RLWakeUpCause;

enum { kRLWakeUpCauseCount = 6 };

/* Percentiles of a histogram, in seconds. */
typedef struct RLLatencySummary {
    uint64_t count;
    double p50, p90, p99, p999, max;
} RLLatencySummary;

typedef struct RLRunLoopStatistics {
    uint64_t passes;                            /* passes of the loop (CF's iterations) */
    uint64_t sleeps;                            /* passes that waited for something to happen */
    uint64_t wakeUps[kRLWakeUpCauseCount];      /* those sleeps, by what ended them */
    uint64_t callouts[kRLCalloutKindCount];     /* callouts made, by kind */
    double timeAsleep;                          /* seconds in those waits (timing on) */
    double timeBusy;                            /* seconds in runs, out of them (timing on) */
    bool timing;                                /* timing on: times and histograms are kept */
    RLLatencySummary calloutDuration;
    RLLatencySummary timerLateness;             /* from a timer's fire date to its callout */
} RLRunLoopStatistics;

/* Copies rl's statistics since it was made or last reset into *out (any
 * thread; the counts a loop is writing meanwhile may land in this copy or
 * the next). false (RLErrorGetLast) for a released loop or a NULL out. */
RL_EXPORT bool RLRunLoopCopyStatistics(RLRunLoopRef rl, RLRunLoopStatistics *out);

/* Starts rl's statistics again from zero (any thread). */
RL_EXPORT bool RLRunLoopResetStatistics(RLRunLoopRef rl);

/* Turns rl's callout and timer-lateness histograms on or off (any thread;
 * off keeps what was recorded). While any loop has timing on, every
 * loop's callouts read the clock twice. */
RL_EXPORT bool RLRunLoopSetTimingEnabled(RLRunLoopRef rl, bool enabled);
RL_EXPORT bool RLRunLoopIsTimingEnabled(RLRunLoopRef rl);

/* The name of a cause ("timer", "source", ...), "unknown" outside the enum. */
RL_EXPORT const char *RLWakeUpCauseGetName(RLWakeUpCause cause);

#ifdef __cplusplus
}
#endif

#endif /* CRUNLOOP_RLRUNLOOPHEALTH_H */
