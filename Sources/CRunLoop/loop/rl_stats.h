/*
 * rl_stats.h — private: a loop's statistics as its thread keeps them
 * (rl_stats.c; the public side is RLRunLoopHealth.h), and the switch every
 * callout looks at to know whether anything is timed. Below the slow-callout
 * report (rl_health.h), which records each timed callout here.
 */
#ifndef CRUNLOOP_RL_STATS_H
#define CRUNLOOP_RL_STATS_H

#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>
#include "rl_probes.h"

/* Loops with a threshold or timing of their own, plus one while the
 * process has a threshold: 0 means no callout anywhere is timed. */
RL__HIDDEN extern _Atomic int rl__health_on;

/* The monotonic clock, in seconds. */
RL__HIDDEN double rl__health_now(void);

/* Adds n to a count of rl's (its thread only: no read-modify-write). */
static inline void rl__count(_Atomic uint64_t *c, uint64_t n) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}
/* The wake-up cause a first callout of each kind after a sleep stands for. */
RL__HIDDEN extern const uint8_t rl__wake_cause_of[kRLCalloutKindCount];
/* The first callout after a sleep: what woke the loop. */
static inline __attribute__((always_inline)) void rl__stats_woken_by(RLRunLoopRef rl, RLCalloutKind kind) {
    int cause = rl__wake_cause_of[kind];
    rl__count(&rl->counters.wakeups[cause], 1);
    rl->woke = false;
    RL__PROBE2(wakeup, rl, cause);
}
/* A wake-up that no callout followed: explicit. */
static inline void rl__stats_settle_wake(RLRunLoopRef rl) {
    if (rl->woke) {
        rl__count(&rl->counters.wakeups[kRLWakeUpExplicit], 1);
        rl->woke = false;
        RL__PROBE2(wakeup, rl, (int)kRLWakeUpExplicit);
    }
}
/* n callouts of `kind` made (the loop's thread). */
static inline __attribute__((always_inline)) void rl__stats_callouts(RLRunLoopRef rl, RLCalloutKind kind, uint64_t n) {
    rl__count(&rl->counters.callouts[kind], n);
    if (RL__UNLIKELY(rl->woke) && kind != kRLCalloutObserver)
        rl__stats_woken_by(rl, kind);
}
/* A run of rl starts / ends (its thread; a nested run too). */
RL__HIDDEN void rl__stats_run_enter(RLRunLoopRef rl);
RL__HIDDEN void rl__stats_run_leave(RLRunLoopRef rl);
/* A pass waits for something to happen / its wait ended: counted; timed
 * (two clock reads) only with timing on. */
RL__HIDDEN void rl__stats_sleep_begin_timed(RLRunLoopRef rl);
RL__HIDDEN void rl__stats_sleep_end_timed(RLRunLoopRef rl);
static inline void rl__stats_sleep_begin(RLRunLoopRef rl) {
    if (RL__UNLIKELY(atomic_load_explicit(&rl->timing_on, memory_order_relaxed)))
        rl__stats_sleep_begin_timed(rl);
    else
        rl->busy_from = 0;
    rl__stats_settle_wake(rl);
    rl__count(&rl->counters.sleeps, 1);
    RL__PROBE1(sleep_start, rl);
}
static inline void rl__stats_sleep_end(RLRunLoopRef rl) {
    RL__PROBE1(sleep_end, rl);
    if (RL__UNLIKELY(atomic_load_explicit(&rl->timing_on, memory_order_relaxed)))
        rl__stats_sleep_end_timed(rl);
    rl->woke = true;
}
/* A timer is fired `late_s` seconds after its fire date (timing on). */
RL__HIDDEN void rl__stats_timer_late(RLRunLoopRef rl, double late_s);
/* With timing on, records a callout's duration (rl__health_after). */
RL__HIDDEN void rl__stats_callout_took(RLRunLoopRef rl, double took_s);
/* The public calls' work (RLRunLoopHealth.c checks the loop first): */
RL__HIDDEN bool rl__stats_set_timing(RLRunLoopRef rl, bool enabled, const char *fn);
RL__HIDDEN bool rl__stats_timing(RLRunLoopRef rl);
RL__HIDDEN bool rl__stats_copy(RLRunLoopRef rl, RLRunLoopStatistics *out, const char *fn);
RL__HIDDEN bool rl__stats_reset(RLRunLoopRef rl, const char *fn);
/* Frees what the loop's statistics made (rl_loop.c, the loop going). */
RL__HIDDEN void rl__stats_free(RLRunLoopRef rl);
/* The bytes rl's statistics hold (histograms, the copy at the last
 * reset); 0 until timing is first turned on or the statistics reset. */
RL__HIDDEN size_t rl__stats_bytes(RLRunLoopRef rl);

#endif /* CRUNLOOP_RL_STATS_H */
