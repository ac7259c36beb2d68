/*
 * diff.h — the shared half of the differential tests.
 *
 * Every scenario in Tests/diff/scenarios/ is written once in CoreFoundation
 * names and built twice: with -DDIFF_CF against the real CoreFoundation of
 * the Swift toolchain, and without it against CRunLoop through
 * <crunloop/cf_compat.h>. scripts/run-diff-tests.sh runs both and compares
 * their output line by line, so a trace line must never depend on timing:
 * print orders, counts and result codes, never times.
 *
 * A scenario defines `void scenario(void)`; main() runs it on a fresh
 * secondary thread (CF treats the main thread's run loop specially on
 * Linux: its common modes are never empty), then prints "end". A scenario
 * of the main dispatch queue runs on the main thread instead: it defines
 * `const bool diff_on_main_thread = true;`.
 */
#ifndef DIFF_H
#define DIFF_H

#ifdef DIFF_CF
#include <CoreFoundation/CoreFoundation.h>
#else
#include <crunloop/cf_compat.h>
#endif

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>

void scenario(void);

/* One line of trace, printf-style; serialized across threads. */
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Between collect_begin() and collect_end(), trace lines are gathered and
 * then printed sorted on one line "{a | b | c}": for events whose order CF
 * leaves unspecified (a source scheduled into several common modes, cancels
 * at thread exit). */
void collect_begin(void);
void collect_end(void);

/* Names for trace lines. Mode names are normalized ("default", "common",
 * custom names as given) so both builds print the same text. The returned
 * strings live in a small per-thread ring of buffers. */
const char *result_str(CFRunLoopRunResult r);
const char *activity_str(CFRunLoopActivity a);
const char *mode_str(CFRunLoopMode mode);
/* The loop's current mode, "(none)" when it is not running. */
const char *current_mode(CFRunLoopRef rl);
/* Every mode the loop knows, sorted, space-separated. */
const char *all_modes(CFRunLoopRef rl);

/* Runs the loop and traces "<label>: <result>". */
CFRunLoopRunResult run_mode(const char *label, CFRunLoopMode mode, CFTimeInterval seconds, bool returnAfterSourceHandled);

/* An observer that traces "<info as string> <activity>" for `activities`. */
CFRunLoopObserverRef trace_observer(const char *label, CFOptionFlags activities, CFIndex order);

/* A version-0 source whose perform traces "<label> perform" and whose
 * schedule/cancel trace "<label> schedule <mode>" / "<label> cancel <mode>"
 * when `verbose`. */
CFRunLoopSourceRef trace_source(const char *label, CFIndex order, bool verbose);

/* Threads and handshakes (plain POSIX, identical in both builds). */
pthread_t spawn(void (*fn)(void *), void *arg);
void join(pthread_t t);
void sleep_s(double seconds);
/* Waits up to 10 s; traces "sem timeout" and returns false if it expires. */
bool sem_wait_s(sem_t *sem);
/* Polls CFRunLoopIsWaiting(rl) for up to 10 s. */
bool wait_until_waiting(CFRunLoopRef rl);

/* A context's references, counted: held_retain adds one to held_count and
 * held_release takes one off (for the scenarios that trace what a context
 * still holds). */
extern int held_count;
const void *held_retain(const void *info);
void held_release(const void *info);

#endif
