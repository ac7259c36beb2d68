/*
 * rl_stamp.h — private: stamping timers so that equal fire dates fire in
 * the order the timers got them (rl_stamp.c says how).
 */
#ifndef CRUNLOOP_RL_STAMP_H
#define CRUNLOOP_RL_STAMP_H

#include "runloop_internal.h"

/* This thread's clock and number (0: none yet; rl__stamp_thread_first
 * gives one, an atomic add once in a thread's life). Inline below: the
 * timer path stamps on every create, move and refire. */
RL__HIDDEN extern __thread uint64_t rl__stamp_clock __attribute__((tls_model("initial-exec")));
RL__HIDDEN extern __thread uint32_t rl__stamp_thread __attribute__((tls_model("initial-exec")));
RL__HIDDEN uint32_t rl__stamp_thread_first(void);

static inline uint32_t rl__stamp_thread_number(void) {
    return RL__LIKELY(rl__stamp_thread != 0) ? rl__stamp_thread : rl__stamp_thread_first();
}

/* A new stamp on this thread, after `after` (a loop's clock, or 0). */
static inline void rl__timer_stamp_after(struct RLRunLoopTimer *t, uint64_t after) {
    uint64_t c = rl__stamp_clock > after ? rl__stamp_clock : after;
    t->seq = rl__stamp_clock = c + 1;
    t->seq_by = rl__stamp_thread_number();
}

/* Stamps t as it gets a date (created, moved, refired): after this
 * thread's stamps and, at home in a loop, after the loop's. The timer's
 * home's lock held, or its item lock while it has none, or not yet
 * shared. */
static inline void rl__timer_stamp_locked(struct RLRunLoopTimer *t) {
    RLRunLoopRef h = atomic_load_explicit(&t->home, memory_order_relaxed);
    rl__timer_stamp_after(t, h ? h->timer_seq : 0);
    if (h)
        h->timer_seq = t->seq;
}
/* t arrives in rl (rl locked): stamped elsewhere, it is ordered by this
 * add; the loop's and this thread's clocks catch up with each other.
 * Inline: a timer's first add to a loop does it. */
__attribute__((always_inline)) static inline void rl__timer_arrive_locked(RLRunLoopRef rl, struct RLRunLoopTimer *t) {
    if (t->seq_by != rl__stamp_thread_number())
        rl__timer_stamp_after(t, rl->timer_seq); /* stamped elsewhere: ordered by this add */
    /* Stamps given here from now on come after its own, which this
     * thread's clock has reached (read, not t->seq: a line less to touch);
     * and this thread's after the loop's. */
    if (rl__stamp_clock > rl->timer_seq)
        rl->timer_seq = rl__stamp_clock;
    else
        rl__stamp_clock = rl->timer_seq;
}

#endif /* CRUNLOOP_RL_STAMP_H */
