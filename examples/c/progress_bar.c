/*
 * progress_bar.c — a worker thread reports progress to the main thread,
 * which draws it (the tutorial's threaded progress bar, for a terminal).
 *
 * The rule the tutorial teaches: only the main thread touches the "user
 * interface". The worker does the slow part (here: sleeping between 40
 * steps of 2.5 %) and, after each step, asks the main thread to redraw with
 * RLThreadPerformOnMain(..., waitUntilDone = false). The request is queued
 * on the main run loop and the worker carries on at once. The main thread
 * just runs its run loop; each request redraws the bar. The worker's last
 * request stops the main run loop, and the program ends.
 *
 * On a terminal the bar is redrawn in place (\r); when the output is a file
 * or a pipe, each step is one line.
 *
 *   progress_bar            0.25 s per step (10 s, as the tutorial)
 *   progress_bar --tour     0.05 s per step
 *   progress_bar --fast     1 ms per step (tests)
 */
#include "example_support.h"

#include <unistd.h>

enum { kSteps = 40, kBarWidth = 40 };

static bool on_terminal;
static int updates;             /* touched on the main thread only */
static bool all_on_main = true; /* every redraw ran on the main thread */

/* Runs on the main thread: draws the bar for `step` of kSteps. */
static void update_progress_bar(void *arg) {
    int step = (int)(intptr_t)arg;
    if (!RLThreadIsMainThread()) all_on_main = false;
    updates++;

    char bar[kBarWidth + 1];
    int filled = step * kBarWidth / kSteps;
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, '.', (size_t)(kBarWidth - filled));
    bar[kBarWidth] = '\0';
    double progress = (double)step / kSteps;
    if (on_terminal) {
        printf("\r  [%s] %5.1f%%", bar, progress * 100);
        fflush(stdout);
    } else {
        printf("  [%s] %5.1f%% (progress %.3f)\n", bar, progress * 100, progress);
    }
}

/* Runs on the main thread after the last update: ends the main run loop. */
static void finished(void *arg) {
    if (on_terminal) printf("\n");
    printf("worker finished; stopping the main run loop\n");
    EXAMPLE_CHECK(RLRunLoopStop(RLRunLoopGetMain()));
}

/* The worker thread: the slow part, with a redraw request after each step. */
static void *work(void *arg) {
    RLTimeInterval stepTime = *(RLTimeInterval *)arg;
    for (int step = 1; step <= kSteps; step++) {
        RLThreadSleepForTimeInterval(stepTime); /* stands for real work */
        EXAMPLE_CHECK(RLThreadPerformOnMain(update_progress_bar, (void *)(intptr_t)step, NULL, false));
    }
    /* Requests to one thread run in the order they were made, so this one
     * comes after the last redraw. */
    EXAMPLE_CHECK(RLThreadPerformOnMain(finished, NULL, NULL, false));
    return NULL;
}

/* A source that is never signalled. It keeps the main run loop's default
 * mode non-empty: a run loop with no source or timer returns at once
 * (kRLRunLoopRunFinished) instead of waiting for perform requests. */
static RLRunLoopSourceRef add_keep_alive_source(void) {
    RLRunLoopSourceContext context = {.version = 0};
    RLRunLoopSourceRef source = RLRunLoopSourceCreate(NULL, 0, &context);
    EXAMPLE_CHECK(source != NULL);
    EXAMPLE_CHECK(RLRunLoopAddSource(RLRunLoopGetCurrent(), source, kRLRunLoopCommonModes));
    return source;
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    RLTimeInterval stepTime = example_pick(0.25, 0.05, 0.001);
    on_terminal = isatty(STDOUT_FILENO);
    printf("progress_bar: a worker thread posts %d steps to the main run loop, %g s apart (%s pace)\n", kSteps,
           stepTime, example_pace_name());
    updates = 0;
    update_progress_bar((void *)(intptr_t)0); /* draw the empty bar */
    updates = 0;

    RLRunLoopSourceRef keepAlive = add_keep_alive_source();

    RLThreadRef worker = RLThreadCreate(NULL, work, &stepTime);
    EXAMPLE_CHECK(worker != NULL);
    EXAMPLE_CHECK(RLThreadSetName(worker, "progress worker"));
    EXAMPLE_CHECK(RLThreadSetJoinable(worker, true));
    EXAMPLE_CHECK(RLThreadStart(worker));

    /* The main thread does nothing but serve its run loop until `finished`
     * stops it; in an application this is where it would handle input. */
    RLRunLoopRunResult result = RLRunLoopRun();

    EXAMPLE_CHECK(RLThreadJoin(worker, NULL));
    RLRelease(worker);
    EXAMPLE_CHECK(RLRunLoopRemoveSource(RLRunLoopGetCurrent(), keepAlive, kRLRunLoopCommonModes));
    RLRelease(keepAlive);

    printf("done: %d updates, all on the main thread: %s\n", updates, all_on_main ? "yes" : "NO");
    bool ok = result == kRLRunLoopRunStopped && updates == kSteps && all_on_main;
    if (!ok) printf("progress_bar: FAILED (run result %d)\n", (int)result);
    return ok ? 0 : 1;
}
