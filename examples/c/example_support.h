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

#endif /* EXAMPLE_SUPPORT_H */
