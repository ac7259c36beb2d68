/*
 * countdown.c — the tutorial's countdown timer, in C.
 *
 * A repeating timer on the main thread's run loop counts from 10 down to 1,
 * one tick per second, and invalidates itself after the last tick. The run
 * loop then has nothing left to wait for in its mode, so RLRunLoopRun
 * returns kRLRunLoopRunFinished and the program ends: no flag, no explicit
 * stop.
 *
 * The tutorial's point is also visible here: scheduling a timer does not
 * block. The line after RLRunLoopAddTimer prints before the first tick;
 * the ticks come later, from inside the run loop.
 *
 *   countdown            1 s ticks (10 seconds)
 *   countdown --tour     0.2 s ticks
 *   countdown --fast     10 ms ticks (tests)
 */
#include "example_support.h"

typedef struct Countdown {
    int count;      /* the number shown next */
    int ticks;      /* how many times the timer fired */
} Countdown;

/* The timer's callout: show the count, count down, stop at zero. */
static void count_down(RLRunLoopTimerRef timer, void *info) {
    Countdown *countdown = info;
    countdown->ticks++;
    printf("  %d\n", countdown->count);
    fflush(stdout);
    countdown->count--;
    if (countdown->count == 0) {
        /* Invalidating removes the timer from the run loop; with nothing
         * left in the default mode, the loop finishes after this pass. */
        EXAMPLE_CHECK(RLRunLoopTimerInvalidate(timer));
        printf("timer invalidated after %d ticks\n", countdown->ticks);
    }
}

static const char *result_name(RLRunLoopRunResult result) {
    switch (result) {
    case kRLRunLoopRunFinished: return "finished";
    case kRLRunLoopRunStopped: return "stopped";
    case kRLRunLoopRunTimedOut: return "timed out";
    case kRLRunLoopRunHandledSource: return "handled a source";
    default: return "error";
    }
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    RLTimeInterval tick = example_pick(1.0, 0.2, 0.01);
    printf("countdown: a repeating %g s timer counting 10 -> 1 (%s pace%s)\n", tick, example_pace_name(),
           example_pace() == kExamplePaceFull ? "" : "; the original ticks every 1 s");

    Countdown countdown = {.count = 10, .ticks = 0};
    RLRunLoopTimerContext context = {.version = 0, .info = &countdown};
    RLRunLoopTimerRef timer =
        RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + tick, tick, 0, 0, count_down, &context);
    EXAMPLE_CHECK(timer != NULL);
    EXAMPLE_CHECK(RLRunLoopAddTimer(RLRunLoopGetCurrent(), timer, kRLRunLoopDefaultMode));
    /* The run loop retains the timer while it is scheduled. */
    RLRelease(timer);

    /* As in the tutorial, this line appears first: scheduling returned at
     * once, and nothing has fired yet. */
    printf("timer scheduled; running the main run loop\n");

    RLRunLoopRunResult result = RLRunLoopRun();
    printf("run loop returned: %s%s\n", result_name(result),
           result == kRLRunLoopRunFinished ? " (no timer or source left in the default mode)" : "");
    if (result != kRLRunLoopRunFinished || countdown.ticks != 10) {
        printf("countdown: FAILED (%d ticks)\n", countdown.ticks);
        return 1;
    }
    printf("countdown: done\n");
    return 0;
}
