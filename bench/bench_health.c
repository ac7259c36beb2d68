/*
 * bench_health.c — what loop health costs (RLRunLoopHealth.h): loop passes
 * (a version-0 source signalled and performed each pass) and perform
 * requests, with health off, with a slow-callout threshold that no callout
 * crosses (default stderr report), with a program's handler set too, and
 * with the loop's timing histograms on. Each round measures every setting
 * in turn (order rotated), so the ratios against "off" are from the same
 * moment of the machine; medians over HB_ROUNDS (default 9) rounds.
 *
 *   make bench-health     (results in build/CC/bench/results/health.csv)
 */
#include <crunloop/crunloop.h>

#include "bench_results.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MODE "bench.health"

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void handler(const RLSlowCalloutReport *r, void *info) {
    (void)r;
    (*(unsigned long *)info)++;
}

enum { OFF, THRESHOLD, HANDLER, TIMING, NSET };
static const char *const set_names[NSET] = {"off", "threshold set, none slow", "threshold + handler",
                                            "timing histograms on"};
static unsigned long reports;

static void apply(int set) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSetSlowCalloutThreshold(NULL, set == THRESHOLD || set == HANDLER ? 1.0 : 0);
    RLSetSlowCalloutHandler(set == HANDLER ? handler : NULL, &reports);
    RLRunLoopSetTimingEnabled(rl, set == TIMING);
}

static RLRunLoopSourceRef src;
static unsigned long performed;
static void perform(void *info) { (void)info; performed++; }

/* ns per pass: a signalled source performed each pass. */
static double passes(long n) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        RLRunLoopSourceSignal(src);
        RLRunLoopRunInMode(MODE, 0, true);
    }
    return (now_ns() - t0) / (double)n;
}

/* ns per perform request: batches of 256 queued on this loop, then run. */
static double performs(long n) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    double t0 = now_ns();
    for (long i = 0; i < n; i += 256) {
        for (int j = 0; j < 256; j++)
            RLRunLoopPerformFunction(rl, MODE, perform, NULL);
        RLRunLoopRunInMode(MODE, 0, false);
    }
    return (now_ns() - t0) / (double)n;
}

int main(void) {
    const char *e = getenv("HB_ROUNDS");
    int rounds = e ? atoi(e) : 9;
    if (rounds < 1 || rounds > 64)
        rounds = 9;
    RLRunLoopSourceContext sc = {0};
    sc.perform = perform;
    src = RLRunLoopSourceCreate(NULL, 0, &sc);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE);

    struct {
        const char *row;
        double (*fn)(long);
        long n;
    } rows[] = {{"loop pass, a source performed (ns)", passes, 200000}, {"perform request (ns)", performs, 1000000}};
    FILE *csv = bench_results_open();
    printf("Loop health: cost against health off, same rounds (median of %d; below 1.00 = cheaper)\n", rounds);
    printf("%-38s %-26s %10s %8s %16s\n", "row", "setting", "ns/op", "ratio", "ratio min..max");
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        double ns[NSET][64], ratio[NSET][64];
        rows[r].fn(rows[r].n / 10); /* warm up */
        for (int k = 0; k < rounds; k++) {
            for (int i = 0; i < NSET; i++) {
                int set = (i + k) % NSET;
                apply(set);
                ns[set][k] = rows[r].fn(rows[r].n);
            }
            apply(OFF);
            for (int set = 0; set < NSET; set++)
                ratio[set][k] = ns[set][k] / ns[OFF][k];
        }
        for (int set = 1; set < NSET; set++) {
            double v[64], m[64];
            for (int k = 0; k < rounds; k++) {
                v[k] = ratio[set][k];
                m[k] = ns[set][k];
            }
            qsort(v, (size_t)rounds, sizeof v[0], bench_results_cmp);
            qsort(m, (size_t)rounds, sizeof m[0], bench_results_cmp);
            double off[64];
            for (int k = 0; k < rounds; k++)
                off[k] = ns[OFF][k];
            qsort(off, (size_t)rounds, sizeof off[0], bench_results_cmp);
            printf("%-38s %-26s %10.1f %8.2f %7.2f..%-7.2f (off: %.1f ns)\n", rows[r].row, set_names[set],
                   m[rounds / 2], v[rounds / 2], v[0], v[rounds - 1], off[rounds / 2]);
            char label[160];
            snprintf(label, sizeof label, "%s, %s", rows[r].row, set_names[set]);
            bench_results_row(csv, "health", label, "health off", ratio[set], rounds, m[rounds / 2],
                              off[rounds / 2], "ns");
        }
    }
    bench_results_close(csv);
    if (reports)
        fprintf(stderr, "bench_health: %lu callouts crossed a 1 s threshold (the machine stalled)\n", reports);
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
    return 0;
}
