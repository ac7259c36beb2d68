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

#ifdef __cplusplus
}
#endif

#endif /* CRUNLOOP_RLRUNLOOPHEALTH_H */
