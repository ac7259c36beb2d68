/*
 * rl_wake.h — private: waking a run loop and arming its timerfd
 * (rl_wake.c). The re-arm checks are inline: adding and removing a timer
 * make them, and they cost a load or two when the loop is not asleep.
 */
#ifndef CRUNLOOP_RL_WAKE_H
#define CRUNLOOP_RL_WAKE_H

#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>

/* Sets one of rl's wake-up flags (`wake_pending`, `ignore_wakeups`),
 * storing only if the value changes: wakers read these flags on every
 * WakeUp, and an unchanged line stays in their caches. The loop's thread. */
static inline void rl__flag_set(_Atomic int *flag, int v) {
    if (atomic_load_explicit(flag, memory_order_relaxed) != v)
        atomic_store(flag, v);
}

/* Arms the timerfd for monotonic time `at` (INFINITY disarms); no system
 * call when it is already armed there. False if the kernel refused (errno
 * set): the timerfd may still hold its old time, and the caller must make
 * the wait end by `at` another way. Loop lock held. */
RL__HIDDEN bool rl__arm_timerfd(RLRunLoopRef rl, double at);
/* rl__wake's work once no wake-up is pending (rl_wake.c). */
RL__HIDDEN void rl__wake_slow(RLRunLoopRef rl);
/* Wakes rl's thread if it waits. Inline, the one load that ends it when a
 * wake-up is pending already, a producer that wakes the loop after every
 * item it queues (the guide's pattern) pays that load and nothing else; the
 * loop writes the flag once a pass at most, so it stays in the producer's
 * cache meanwhile. Seeing 1 is enough: that store came after the loop last
 * cleared the flag, so the loop looks at its queues again. The load is
 * sequentially consistent (a plain load on x86): the loop peeks at its
 * perform queue without a lock (rl__pq_maybe_queued), and this ordering
 * makes it see what the caller queued. */
static inline void rl__wake(RLRunLoopRef rl) {
    if (!atomic_load(&rl->wake_pending))
        rl__wake_slow(rl);
}
/* Sleeps `ns` nanoseconds at most, less if a wake-up comes (rl__wake) or
 * one is pending already. rl's thread, without the loop lock, with
 * `sleeping` clear (the coalescing nap, rl_waitpolicy.h). */
RL__HIDDEN void rl__sleep_unless_woken(RLRunLoopRef rl, long long ns);
/* When the innermost run must wake next: its deadline or its mode's
 * earliest timer deadline, as monotonic time. Loop lock held. */
RL__HIDDEN double rl__next_wake(RLRunLoopRef rl, rl__frame *f);
RL__HIDDEN void rl__rearm_for_added_timer_slow(RLRunLoopRef rl, const struct RLRunLoopTimer *t);

/* A timer of rl moved or was added/removed: if rl is waiting, re-arm its
 * timerfd so it neither oversleeps nor wakes for nothing; if it is in its
 * coalescing sleep (timed for the timers as they were), end that sleep.
 * Loop lock held. */
static inline void rl__rearm_if_waiting(RLRunLoopRef rl) {
    if (!rl || !rl->frame)
        return;
    if (atomic_load(&rl->sleeping)) {
        if (!rl__arm_timerfd(rl, rl__next_wake(rl, rl->frame)))
            rl__wake(rl); /* it waits again, with a time limit (rl_waitpolicy.h) */
    } else if (RL__UNLIKELY(atomic_load(&rl->coalescing))) {
        rl__wake(rl);
    }
}

/* Timer t joined `mode` of rl. Adding can only bring the wake-up forward:
 * a sleeping loop running that mode is re-armed only if t is due before the
 * armed time, and nothing else (no clock read, no heap order) is needed.
 * Loop lock held. */
static inline void rl__rearm_for_added_timer(RLRunLoopRef rl, rl__mode *mode, const struct RLRunLoopTimer *t) {
    if (!rl->frame || rl->frame->mode != mode)
        return;
    if (atomic_load(&rl->sleeping))
        rl__rearm_for_added_timer_slow(rl, t);
    else if (RL__UNLIKELY(atomic_load(&rl->coalescing)))
        rl__wake(rl); /* its coalescing sleep was timed without t */
}

#endif /* CRUNLOOP_RL_WAKE_H */
