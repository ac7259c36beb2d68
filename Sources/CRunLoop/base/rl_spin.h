/*
 * rl_spin.h — adaptive spin-before-sleep budgets, shared by the run loop's
 * wait (rl_waitpolicy.h) and the waitUntilDone sender (RLPerform.c). Private.
 *
 * Why: when the other side of a hand-off runs on another CPU, sleeping in
 * the kernel makes the next hand-off pay for waking this thread on a CPU
 * that went idle (tens of microseconds on a VM), while the reply often
 * comes a microsecond later. A short spin catches it without either
 * thread sleeping. When both sides share one CPU, spinning only keeps the
 * other side from running, so callers spin only when the other side was
 * last seen on a different CPU (rl__spin_cpu), and never without a budget.
 *
 * The budget learns from each wait, as the kernel's haltpoll idle governor
 * does for idle CPUs: a wait that was over within the budget keeps it; one
 * that outlasted the budget but was short (<= RL__SPIN_MAX_NS) doubles it,
 * since a longer spin would have caught it; a long wait, or one that ended
 * for another reason than the awaited event, halves it, down to zero. So a
 * thread that is sent work now and then never spins, and a budget is only
 * ever grown by waits that a spin of at most RL__SPIN_MAX_NS would have cut
 * short. Budgets are hints: relaxed atomics, several writers may race.
 */
#ifndef CRUNLOOP_RL_SPIN_H
#define CRUNLOOP_RL_SPIN_H

#include "internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum {
    RL__SPIN_START_NS = 4000, /* the first budget once waits look short */
    RL__SPIN_MAX_NS = 50000,  /* no spin is longer; longer waits shrink the budget */
};

typedef struct rl__spin {
    _Atomic uint32_t ns; /* the current budget; 0: do not spin */
} rl__spin;

static inline int64_t rl__spin_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPU the caller runs on (-1 if unknown): glibc reads it from rseq, no
 * system call. */
static inline int rl__spin_cpu(void) { return sched_getcpu(); }

static inline uint32_t rl__spin_budget(const rl__spin *s) {
    if (!RL_TRICK_SPIN)
        return 0; /* the plain twin never spins */
    return atomic_load_explicit(&s->ns, memory_order_relaxed);
}

/* Learns from one wait that took `waited_ns` from its start (spin included)
 * to its end; `awaited` is false if it ended for another reason than the
 * event the budget is for (a timeout, a timer, an fd). */
static inline void rl__spin_learn(rl__spin *s, int64_t waited_ns, bool awaited) {
    if (!RL_TRICK_SPIN)
        return;
    uint32_t b = rl__spin_budget(s), nb = b;
    if (awaited && waited_ns <= (int64_t)b)
        return; /* the spin paid */
    if (awaited && waited_ns <= RL__SPIN_MAX_NS)
        nb = b < RL__SPIN_START_NS ? RL__SPIN_START_NS : (b * 2 > RL__SPIN_MAX_NS ? RL__SPIN_MAX_NS : b * 2);
    else
        nb = b / 2 < RL__SPIN_START_NS ? 0 : b / 2;
    if (nb != b)
        atomic_store_explicit(&s->ns, nb, memory_order_relaxed);
}

#endif /* CRUNLOOP_RL_SPIN_H */
