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
#include "rl_stats.h"
#include <crunloop/RLRunLoopHealth.h>
#include "rl_probes.h"
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>

/* Reads RL_SLOW_CALLOUT_MS, once per process (RLRunLoop.c, as the first
 * loop is made). */
RL__HIDDEN void rl__health_init(void);
/* Sets rl's slow-callout threshold (NULL: the process's) to `seconds`, a
 * checked value (RLRunLoopHealth.c checks). */
RL__HIDDEN void rl__health_set_threshold(RLRunLoopRef rl, double seconds);
/* rl's threshold (NULL: the process's), 0 when none. */
RL__HIDDEN double rl__health_threshold(RLRunLoopRef rl);
/* A loop goes: its own threshold stops counting (rl_loop.c). */
RL__HIDDEN void rl__health_loop_gone(RLRunLoopRef rl);
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
