/*
 * example_support.h — the few helpers every example in examples/c shares:
 * how fast to run, and how to stop with a readable message when a library
 * call fails.
 *
 * Each example runs in one of three paces:
 *   full  (default)                   the intervals of the original text
 *                                     (a 1 s countdown, 0.25 s progress steps)
 *   tour  (--tour or RL_EXAMPLE_TOUR=1) short but still readable, for `make demo`
 *   fast  (--fast or RL_EXAMPLE_FAST=1) as short as possible, for the tests
 *                                     (scripts/run-examples.sh)
 * The pace changes only intervals, never what the program does or prints,
 * apart from the line that says which pace is in use.
 */
#ifndef EXAMPLE_SUPPORT_H
#define EXAMPLE_SUPPORT_H

#include <crunloop/crunloop.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum ExamplePace { kExamplePaceFull, kExamplePaceTour, kExamplePaceFast } ExamplePace;

static ExamplePace example_pace_;

static inline bool example_env_is_set(const char *name) {
    const char *value = getenv(name);
    return value && *value && strcmp(value, "0") != 0;
}

/* Reads the pace from the command line or the environment; call first. */
static inline ExamplePace example_init(int argc, char **argv) {
    example_pace_ = kExamplePaceFull;
    if (example_env_is_set("RL_EXAMPLE_TOUR")) example_pace_ = kExamplePaceTour;
    if (example_env_is_set("RL_EXAMPLE_FAST")) example_pace_ = kExamplePaceFast;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tour") == 0) example_pace_ = kExamplePaceTour;
        else if (strcmp(argv[i], "--fast") == 0) example_pace_ = kExamplePaceFast;
    }
    return example_pace_;
}

static inline ExamplePace example_pace(void) { return example_pace_; }

/* One of three values, by pace. */
static inline double example_pick(double full, double tour, double fast) {
    switch (example_pace_) {
    case kExamplePaceTour: return tour;
    case kExamplePaceFast: return fast;
    default: return full;
    }
}

static inline const char *example_pace_name(void) {
    switch (example_pace_) {
    case kExamplePaceTour: return "tour";
    case kExamplePaceFast: return "fast";
    default: return "full";
    }
}

/* Stops the program when a library call that must succeed fails, naming the
 * call and the library's error. A macro only to capture the call's text. */
static inline void example_fail_(const char *file, int line, const char *what) {
    RLError error = RLErrorGetLast();
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, what, error.message,
            RLErrorCodeGetName(error.code));
    fflush(stdout);
    exit(1);
}
#define EXAMPLE_CHECK(call) \
    do { \
        if (!(call)) example_fail_(__FILE__, __LINE__, #call); \
    } while (0)

/* The calling thread's name into buf ("?" if it cannot be read). */
static inline const char *example_thread_name(char *buf, size_t size) {
    char *name = RLThreadCopyName(RLThreadGetCurrent());
    snprintf(buf, size, "%s", name && *name ? name : "?");
    free(name);
    return buf;
}

/* Prints loop's statistics (RLRunLoopHealth.h) to out as a small table,
 * under "WHO's statistics:". */
static inline void example_print_statistics(FILE *out, const char *who, RLRunLoopRef loop) {
    RLRunLoopStatistics s;
    EXAMPLE_CHECK(RLRunLoopCopyStatistics(loop, &s));
    fprintf(out, "\n%s's statistics:\n", who);
    fprintf(out, "  passes %-8llu sleeps %-8llu asleep %.3f s   busy %.3f s%s\n", (unsigned long long)s.passes,
            (unsigned long long)s.sleeps, s.timeAsleep, s.timeBusy, s.timing ? "" : " (timing off)");
    fprintf(out, "  %-12s %8s   %-12s %8s\n", "wake-ups by", "count", "callouts", "count");
    for (int i = 0; i < kRLCalloutKindCount || i < kRLWakeUpCauseCount; i++) {
        char left[48] = "", right[48] = "";
        if (i < kRLWakeUpCauseCount)
            snprintf(left, sizeof left, "  %-12s %8llu", RLWakeUpCauseGetName((RLWakeUpCause)i),
                     (unsigned long long)s.wakeUps[i]);
        else
            snprintf(left, sizeof left, "  %-12s %8s", "", "");
        if (i < kRLCalloutKindCount && (s.callouts[i] || i < 4))
            snprintf(right, sizeof right, "%-12s %8llu", RLCalloutKindGetName((RLCalloutKind)i),
                     (unsigned long long)s.callouts[i]);
        if (i < kRLWakeUpCauseCount || right[0])
            fprintf(out, "%s   %s\n", left, right);
    }
    if (!s.timing)
        return;
    fprintf(out, "  %-22s %10s %10s %10s %10s %8s\n", "(microseconds)", "p50", "p99", "p99.9", "max", "count");
    const RLLatencySummary *rows[] = {&s.calloutDuration, &s.timerLateness};
    const char *names[] = {"callout duration", "timer lateness"};
    for (int i = 0; i < 2; i++)
        fprintf(out, "  %-22s %10.1f %10.1f %10.1f %10.1f %8llu\n", names[i], rows[i]->p50 * 1e6, rows[i]->p99 * 1e6,
                rows[i]->p999 * 1e6, rows[i]->max * 1e6, (unsigned long long)rows[i]->count);
}

#endif /* EXAMPLE_SUPPORT_H */
