/*
 * loop_health.c — which callout held the loop, and what the loop spent its
 * time on (RLRunLoopHealth.h).
 *
 * The main loop runs a repeating "tick" timer, a version-0 source that a
 * worker thread signals (the guide's custom input source), and once, a
 * callout that does something slow on the loop's own thread (here: it
 * sleeps, as a blocking read or a long computation would). With a
 * slow-callout threshold set, that callout is reported on stderr as soon as
 * it returns: its kind, the function's name, how long it held the loop and
 * in which mode. At the end the program prints the loop's statistics.
 *
 *   loop_health            ticks every 100 ms, a 250 ms slow callout
 *   loop_health --tour     the same, shorter
 *   loop_health --fast     for the tests
 *
 * The report's line, as the default handler prints it:
 *   crunloop: slow callout: timer parse_big_file held the run loop 250.3 ms
 *   in mode kRLRunLoopDefaultMode (threshold 50.000 ms): <RLRunLoopTimer ...>
 */
#include "example_support.h"

#include <pthread.h>
#include <unistd.h>

typedef struct Demo {
    int ticks, ticks_wanted;
    int commands;
    double slow_seconds;
    RLRunLoopSourceRef source;
    RLRunLoopRef loop;
} Demo;

/* The slow callout: named, so that the report can say which. */
__attribute__((visibility("default"))) void parse_big_file(RLRunLoopTimerRef timer, void *info) {
    Demo *demo = info;
    printf("parse_big_file: working on the loop's thread for %.0f ms...\n", demo->slow_seconds * 1e3);
    fflush(stdout);
    usleep((useconds_t)(demo->slow_seconds * 1e6));
}

static void tick(RLRunLoopTimerRef timer, void *info) {
    Demo *demo = info;
    if (++demo->ticks == demo->ticks_wanted) {
        RLRunLoopTimerInvalidate(timer);
        RLRunLoopStop(demo->loop); /* the source would keep the mode alive */
    }
}

static void take_commands(void *info) { ((Demo *)info)->commands++; }

/* A worker signals the source 20 times, as the guide's clients do. */
static void *worker(void *info) {
    Demo *demo = info;
    for (int i = 0; i < 20; i++) {
        RLRunLoopSourceSignal(demo->source);
        RLRunLoopWakeUp(demo->loop);
        usleep(5000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0); /* in order with the report on stderr */
    Demo demo = {.ticks_wanted = 10, .slow_seconds = example_pick(0.25, 0.25, 0.06)};
    RLTimeInterval period = example_pick(0.1, 0.05, 0.01);
    double threshold = example_pick(0.05, 0.05, 0.02);
    RLRunLoopRef loop = RLRunLoopGetCurrent();
    demo.loop = loop;

    /* Report callouts over the threshold (the default report: a line on
     * stderr), and keep times and histograms for this loop. */
    EXAMPLE_CHECK(RLRunLoopSetSlowCalloutThreshold(loop, threshold));
    EXAMPLE_CHECK(RLRunLoopSetTimingEnabled(loop, true));
    printf("loop_health: threshold %.0f ms; a tick every %.0f ms, one slow callout of %.0f ms\n", threshold * 1e3,
           period * 1e3, demo.slow_seconds * 1e3);

    RLRunLoopTimerContext tc = {.info = &demo};
    RLRunLoopTimerRef ticker = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + period, period, 0, 0, tick, &tc);
    RLRunLoopTimerRef slow =
        RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + period * 3.5, 0, 0, 0, parse_big_file, &tc);
    EXAMPLE_CHECK(ticker && slow);
    RLRunLoopAddTimer(loop, ticker, kRLRunLoopDefaultMode);
    RLRunLoopAddTimer(loop, slow, kRLRunLoopDefaultMode);
    RLRunLoopSourceContext sc = {.info = &demo, .perform = take_commands};
    demo.source = RLRunLoopSourceCreate(NULL, 0, &sc);
    RLRunLoopAddSource(loop, demo.source, kRLRunLoopDefaultMode);

    pthread_t th;
    EXAMPLE_CHECK(pthread_create(&th, NULL, worker, &demo) == 0);
    /* Until the last tick stops it. */
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 30.0, false);
    pthread_join(th, NULL);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false); /* the last signals */
    fflush(stderr);

    /* Signals that come while the source is still signalled are one
     * perform (the guide's sources take their whole queue each time): up
     * to 20 performs. */
    printf("ticks %d, commands taken in %d performs\n", demo.ticks, demo.commands);
    example_print_statistics(stdout, "the main loop", loop);
    RLRunLoopStatistics s;
    EXAMPLE_CHECK(RLRunLoopCopyStatistics(loop, &s));
    uint64_t callouts = 0;
    for (int i = 0; i < kRLCalloutKindCount; i++)
        callouts += s.callouts[i];
    printf("every callout timed: %s\n", s.calloutDuration.count == callouts ? "yes" : "no");

    RLRunLoopSourceInvalidate(demo.source);
    RLRelease(demo.source);
    RLRelease(ticker);
    RLRelease(slow);
    printf("loop_health: done\n");
    return 0;
}
