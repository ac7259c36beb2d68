/*
 * bench_multiloop_cf.c — the multi-loop operations written once against
 * CoreFoundation's run-loop API and built twice, like bench_runloop_cf.c:
 * with -DBRL_CF for CoreFoundation (the peer bml_peer_cf), and without for
 * ours through <crunloop/cf_compat.h> (bml_peer_rl). Each thread uses only
 * its own loop and its own objects.
 */
#ifdef BRL_CF
#include <CoreFoundation/CoreFoundation.h>
#define BML_PEER bml_peer_cf
#define BML_PEER_NAME "CF"
#else
#include <crunloop/cf_compat.h>
#define BML_PEER bml_peer_rl
#define BML_PEER_NAME "ours"
#endif
#include <stdio.h>

#include "bench_multiloop.h"

typedef struct {
    CFRunLoopRef rl;
    CFRunLoopTimerRef timer;
    CFRunLoopSourceRef keep; /* keeps the mode from being empty */
    CFRunLoopSourceRef src;  /* BML_SIGNAL's source */
    CFAbsoluteTime far, past; /* BML_MOVE's and BML_FIRE's dates */
    long performed;
} bml_cf;

static void bml_nothing(void *info) { (void)info; }
static void bml_count(void *info) { ((bml_cf *)info)->performed++; }
static void bml_timer_nothing(CFRunLoopTimerRef t, void *info) { (void)t, (void)info; }
static void bml_timer_count(CFRunLoopTimerRef t, void *info) { (void)t, ((bml_cf *)info)->performed++; }

static CFRunLoopSourceRef bml_source(void *info, void (*perform)(void *)) {
    CFRunLoopSourceContext ctx = {0};
    ctx.info = info;
    ctx.perform = perform;
    return CFRunLoopSourceCreate(NULL, 0, &ctx);
}

static void *bml_setup(enum bml_op op) {
    bml_cf *s = calloc(1, sizeof *s);
    if (!s) abort();
    s->rl = CFRunLoopGetCurrent();
    s->keep = bml_source(NULL, bml_nothing);
    CFRunLoopAddSource(s->rl, s->keep, kCFRunLoopDefaultMode);
    if (op == BML_TIMER)
        s->timer = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1e6, 0, 0, 0, bml_timer_nothing, NULL);
    s->far = CFAbsoluteTimeGetCurrent() + 1e6;
    if (op == BML_MOVE || op == BML_FIRE) {
        /* Repeating, with an interval far beyond the run: after each fire
         * its next date is far away until the next operation makes it due. */
        CFRunLoopTimerContext ctx = {0};
        ctx.info = s;
        s->far = CFAbsoluteTimeGetCurrent() + 1e6;
        s->past = CFAbsoluteTimeGetCurrent() - 1;
        s->timer = CFRunLoopTimerCreate(NULL, s->far, 1e7, 0, 0, bml_timer_count, &ctx);
        CFRunLoopAddTimer(s->rl, s->timer, kCFRunLoopDefaultMode);
    }
    if (op == BML_SIGNAL) {
        s->src = bml_source(s, bml_count);
        CFRunLoopAddSource(s->rl, s->src, kCFRunLoopDefaultMode);
    }
    return s;
}

static void bml_run(void *state, enum bml_op op, long n) {
    bml_cf *s = state;
    CFRunLoopRef rl = s->rl;
    switch (op) {
    case BML_TIMER:
        for (long i = 0; i < n; i++) {
            CFRunLoopAddTimer(rl, s->timer, kCFRunLoopDefaultMode);
            CFRunLoopRemoveTimer(rl, s->timer, kCFRunLoopDefaultMode);
        }
        break;
    case BML_PERFORM:
        for (long i = 0; i < n; i += BML_BATCH) {
            for (int j = 0; j < BML_BATCH; j++) {
#if __BLOCKS__
                CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{ s->performed++; });
#else
                RLRunLoopPerformFunction(rl, kCFRunLoopDefaultMode, bml_count, s);
#endif
            }
            CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false);
        }
        break;
    case BML_SIGNAL:
        for (long i = 0; i < n; i++) {
            CFRunLoopSourceSignal(s->src);
            CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, true);
        }
        break;
    case BML_CREATE:
        for (long i = 0; i < n; i++)
            CFRelease(CFRunLoopTimerCreate(NULL, s->far, 0, 0, 0, bml_timer_nothing, NULL));
        break;
    case BML_MOVE:
        for (long i = 0; i < n; i++) CFRunLoopTimerSetNextFireDate(s->timer, s->far + (double)i * 1e-3);
        break;
    case BML_FIRE:
        for (long i = 0; i < n; i++) {
            CFRunLoopTimerSetNextFireDate(s->timer, s->past);
            CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false);
        }
        if (s->performed != n) fprintf(stderr, "bench_multiloop: %s fired %ld of %ld\n", BML_PEER_NAME, s->performed, n);
        break;
    default:
        break;
    }
}

static void bml_finish(void *state, enum bml_op op) {
    bml_cf *s = state;
    if (s->timer) {
        CFRunLoopTimerInvalidate(s->timer);
        CFRelease(s->timer);
    }
    if (s->src) {
        CFRunLoopSourceInvalidate(s->src);
        CFRelease(s->src);
    }
    CFRunLoopRemoveSource(s->rl, s->keep, kCFRunLoopDefaultMode);
    CFRelease(s->keep);
    free(s);
}

const bml_peer BML_PEER = {BML_PEER_NAME, bml_setup, bml_run, bml_finish};
