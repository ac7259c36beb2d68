/* trace.h — the recording that the run-loop tests compare against expected
 * sequences. Callouts append short words ("E", "BT", "a1", "sched(A,M)"),
 * one space apart, and a test asserts the whole line at once, so a failure
 * prints the sequence that really happened next to the expected one. The
 * expected sequences are the ones CoreFoundation produces for the same
 * scenarios (Tests/diff runs many of them against CF itself).
 *
 * One trace per test program. Appending is serialized, so a callout on
 * another thread (a release callback at a loop's teardown) may append too;
 * reading it is meant for the test's own thread once the loop is done. */
#ifndef RL_TRACE_H
#define RL_TRACE_H

#include "testutil.h"

/* Appends `word` (after a space unless the trace is empty). */
void rl_trace_add(const char *word);

/* Appends one word formatted like printf (at most 255 bytes). */
void rl_trace_addf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Empties the trace. */
void rl_trace_clear(void);

/* The trace so far; a message saying so if it ever outgrew its buffer (so
 * that it cannot equal an expected sequence). */
const char *rl_trace_get(void);

/* A cmocka setup function that empties the trace before each test. */
int rl_trace_setup(void **state);

/* Asserts that the trace is exactly `expected`; on failure cmocka prints
 * both strings with the test's file and line. */
#define assert_trace(expected) assert_string_equal(rl_trace_get(), (expected))

/* The short name of an activity: E, BT, BS, BW, AW, X ("?" for others). */
const char *rl_trace_activity_name(RLRunLoopActivity activity);

/* An observer callback that appends the activity's short name. */
void rl_trace_observer(RLRunLoopObserverRef observer, RLRunLoopActivity activity, void *info);

#endif
