/*
 * rl_health.h — private: timing a loop's callouts for the slow-callout
 * report (rl_health.c; the public side is RLRunLoopHealth.h). Every place
 * of the core that calls user code wraps the call in RL__CALLOUT: with no
 * threshold set anywhere it is the call plus one predictable branch on one
 * global; with one set, two clock reads around the call and a comparison.
 */
#ifndef CRUNLOOP_RL_HEALTH_H
#define CRUNLOOP_RL_HEALTH_H

#include "runloop_internal.h"
#include <crunloop/RLRunLoopHealth.h>
#include "rl_probes.h"
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>

/* Loops with a threshold of their own, plus one while the process has one:
 * 0 means no callout anywhere is timed. */
RL__HIDDEN extern _Atomic int rl__health_on;

/* Reads RL_SLOW_CALLOUT_MS, once per process (RLRunLoop.c, as the first
 * loop is made). */
RL__HIDDEN void rl__health_init(void);
/* A loop goes: its own threshold stops counting (rl_loop.c). */
RL__HIDDEN void rl__health_loop_gone(RLRunLoopRef rl);
/* The monotonic clock, in seconds. */
RL__HIDDEN double rl__health_now(void);
/* After a timed callout that took `took` seconds: records it in rl's
 * histogram (timing on) and reports it when it held the loop longer than
 * rl's threshold (or the process's). `fn` is the callout
 * function, `obj` the object whose callout it was (its description, and
 * for an fd source whose info is a library object — a socket, a port, a
 * signal source — that object's kind and function). The loop's thread, no
 * lock held. */
RL__HIDDEN void rl__health_after(RLRunLoopRef rl, double took, RLCalloutKind kind, const void *fn,
                                 const void *obj, const char *mode);

/* Marks f as made by the library object `owner` for its own callouts (a
 * socket, a port, a signal source), before f is scheduled: the report then
 * names how->kind, the program's function how->function(owner) returns,
 * and owner's description. `how` is static; owner outlives f's callouts. */
RL__HIDDEN void rl__fd_set_owner(RLFileDescriptorRef f, const void *owner, const rl__callout_owner *how);

/* ---- statistics (rl_stats.c) ---- */

/* Adds n to a count of rl's (its thread only: no read-modify-write). */
static inline void rl__count(_Atomic uint64_t *c, uint64_t n) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}
/* The first callout after a sleep: what woke the loop. */
RL__HIDDEN void rl__stats_woken_by(RLRunLoopRef rl, RLCalloutKind kind);
/* n callouts of `kind` made (the loop's thread). */
static inline void rl__stats_callouts(RLRunLoopRef rl, RLCalloutKind kind, uint64_t n) {
    rl__count(&rl->counters.callouts[kind], n);
    if (RL__UNLIKELY(rl->woke) && kind != kRLCalloutObserver)
        rl__stats_woken_by(rl, kind);
}
/* A run of rl starts / ends (its thread; a nested run too). */
RL__HIDDEN void rl__stats_run_enter(RLRunLoopRef rl);
RL__HIDDEN void rl__stats_run_leave(RLRunLoopRef rl);
/* A pass waits for something to happen / its wait ended. */
RL__HIDDEN void rl__stats_sleep_begin(RLRunLoopRef rl);
RL__HIDDEN void rl__stats_sleep_end(RLRunLoopRef rl);
/* A timer is fired `late_s` seconds after its fire date (timing on). */
RL__HIDDEN void rl__stats_timer_late(RLRunLoopRef rl, double late_s);
/* With timing on, records a callout's duration (rl__health_after). */
RL__HIDDEN void rl__stats_callout_took(RLRunLoopRef rl, double took_s);
/* Frees what the loop's statistics made (rl_loop.c, the loop going). */
RL__HIDDEN void rl__stats_free(RLRunLoopRef rl);

/* Makes the callout `call` (a statement) of kind `kind`: counts it and,
 * when anything is timed or a tracer is attached to the callout probes,
 * times it (one branch otherwise). */
#define RL__CALLOUT(rl, kind, fn, obj, mode, call)                                                   \
    do {                                                                                             \
        rl__stats_callouts((rl), (kind), 1);                                                         \
        if (RL__LIKELY((atomic_load_explicit(&rl__health_on, memory_order_relaxed) |                 \
                        RL__PROBE_ON(callout_start) | RL__PROBE_ON(callout_end)) == 0)) {            \
            call;                                                                                    \
        } else {                                                                                     \
            RL__PROBE3(callout_start, (rl), (int)(kind), (const void *)(fn));                        \
            double rl_callout_t0_ = rl__health_now();                                                \
            call;                                                                                    \
            double rl_callout_took_ = rl__health_now() - rl_callout_t0_;                             \
            RL__PROBE4(callout_end, (rl), (int)(kind), (const void *)(fn),                           \
                       (unsigned long long)(rl_callout_took_ * 1e9));                                 \
            rl__health_after((rl), rl_callout_took_, (kind), (const void *)(fn), (obj), (mode));     \
        }                                                                                            \
    } while (0)

#endif /* CRUNLOOP_RL_HEALTH_H */
