/*
 * RLLockDebug.h — the lock-order (potential deadlock) detector.
 *
 * Two threads that take the same two locks in opposite orders can deadlock,
 * but only when their timing is unlucky; a test run usually passes. With
 * lock debugging on, every RL lock (RLLock, RLRecursiveLock, RLCondition,
 * RLConditionLock, RLReadWriteLock, RLSpinLock, RLSyncEnter monitors)
 * reports to this detector, which records, for each thread, the locks it
 * holds and, for the whole process, the order in which locks have been
 * taken: an edge A -> B means "B was taken while A was held". When a thread
 * that holds A is about to take B and a path B -> ... -> A already exists,
 * the two orders can deadlock: the detector reports the inversion naming
 * both locks and where each was taken, the first time it is seen — even if
 * the run itself did not deadlock (the way Linux lockdep does).
 *
 * What a caller may rely on:
 *   - Off by default. RL_LOCK_DEBUG=1 in the environment (read once, when
 *     the library loads) or RLLockDebugSetEnabled(true) turns it on. When
 *     off, a lock pays one relaxed load and a branch.
 *   - The detector never blocks a lock operation beyond its own short
 *     internal critical section and never changes what a lock does: the
 *     inverted acquisition still proceeds after the report.
 *   - Each inversion (pair of locks) is reported once until
 *     RLLockDebugReset(). A report goes to the handler set with
 *     RLLockDebugSetReportHandler, or to stderr when none is set. The
 *     handler runs on the thread that provoked the report, with no detector
 *     lock held; it may take RL locks.
 *   - Try-locks record that the lock is held (later locks order after it)
 *     but never report: a try-lock cannot deadlock.
 *   - Re-taking a lock the thread already holds (recursive locks, nested
 *     RLSyncEnter) adds no order edge.
 *   - Read locks (RLReadWriteLock read acquisitions) are recorded as
 *     shared. Readers do not block each other, so a cycle is reported only
 *     if, wherever two threads meet at a lock on it, at least one of them
 *     takes or holds it for writing, or the lock has writers at all (seen
 *     write-locked while debugging): a waiting writer blocks new readers,
 *     so readers taking A,B and B,A deadlock once writers queue on both.
 *     Threads taking read locks A,B and B,A of locks never written are
 *     not reported; write A then read B against write B then read A is.
 *   - "Where" is the return address into the caller of the RL lock
 *     function, symbolized with dladdr, or the file and line the caller
 *     named with RLLockDebugSetCallSite just before (the Swift overlay does
 *     so, so reports from Swift name the Swift source line).
 *   - Edges of a destroyed lock are forgotten, so a new lock at the same
 *     address starts clean. @synchronized monitors are keyed by the object's
 *     address; call RLLockDebugForgetLock(obj) before freeing an object
 *     used with RLSyncEnter if its address may be reused for another.
 *   - A thread tracks up to 48 held locks; deeper nesting is not checked.
 */
#ifndef CRUNLOOP_RLLOCKDEBUG_H
#define CRUNLOOP_RLLOCKDEBUG_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

/* One reported inversion. The thread that reports holds `heldLock` and is
 * about to take `acquiringLock`; earlier, some thread took `heldLock` (or a
 * lock that leads to it) while holding `acquiringLock`. Pointers and strings
 * are valid only during the handler call. */
typedef struct RLLockDebugReport {
    const void *heldLock;              /* A: held by the reporting thread */
    const char *heldLockName;          /* its name, or "RLSpinLock 0x..." style */
    const void *heldLockWhere;         /* return address where A was taken */
    const char *heldLockWhereSymbol;   /* "function+0x12 (libx.so)" via dladdr */
    const void *acquiringLock;         /* B: being taken now */
    const char *acquiringLockName;
    const void *acquiringLockWhere;    /* return address of this acquisition */
    const char *acquiringLockWhereSymbol;
    /* The earlier opposite order: where B was taken (held) and where the next
     * lock on the path B -> ... -> A was then taken. */
    const void *priorHeldWhere;
    const char *priorHeldWhereSymbol;
    const void *priorAcquireWhere;
    const char *priorAcquireWhereSymbol;
    int pathLength;                    /* edges in the path B -> ... -> A (>= 1) */
    const char *description;           /* the full multi-line text printed to stderr */
} RLLockDebugReport;

typedef void (*RLLockDebugReportHandler)(const RLLockDebugReport *report, void *info);

/* Turns the detector on or off. Turning it on mid-run is allowed: locks
 * already held are unknown to it until released and taken again. */
RL_EXPORT void RLLockDebugSetEnabled(bool enabled);
RL_EXPORT bool RLLockDebugIsEnabled(void);

/* Sends reports to handler(report, info) instead of stderr; NULL restores
 * stderr. */
RL_EXPORT void RLLockDebugSetReportHandler(RLLockDebugReportHandler RL_NULLABLE handler,
                                           void *RL_NULLABLE info);

#if __BLOCKS__
/* Block form of RLLockDebugSetReportHandler (the block is copied); NULL
 * restores stderr. */
RL_EXPORT void RLLockDebugSetReportBlock(void (^RL_NULLABLE block)(const RLLockDebugReport *report));
#endif

/* Inversions reported since the process started (or the last reset). */
RL_EXPORT long RLLockDebugGetReportCount(void);

/* Forgets every recorded order edge, the set of already-reported pairs and
 * the report count (not the locks threads currently hold). For tests. */
RL_EXPORT void RLLockDebugReset(void);

/* Forgets the order edges of one lock (any RL lock, or an object used with
 * RLSyncEnter). Returns false (kRLErrorInvalidArgument) for NULL. */
RL_EXPORT bool RLLockDebugForgetLock(const void *RL_NULLABLE lock);

/* Names the source position of the calling thread's next lock acquisition
 * (any RL lock, spin lock or RLSyncEnter, blocking or a successful try):
 * reports then show "file:line" for it instead of the symbolized return
 * address. For wrappers (the Swift overlay, macros) whose return address
 * would always be the wrapper's own. `file` must live for the rest of the
 * process (a string literal, __FILE__, Swift's #fileID). The next
 * acquisition consumes it; if that acquisition fails instead, call
 * RLLockDebugSetCallSite(NULL, 0) to drop it. With debugging off this does
 * nothing. */
RL_EXPORT void RLLockDebugSetCallSite(const char *RL_NULLABLE file, int line);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLLOCKDEBUG_H */
