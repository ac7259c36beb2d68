/*
 * rl_wake.c — waking a run loop, and the timerfd it sleeps on:
 * RLRunLoopWakeUp/Stop/IsWaiting, when to write the eventfd, and when to
 * arm the timerfd at the next deadline (the system calls are rl_poll's) (re-armed when timers come, go or move
 * while the loop sleeps).
 *
 * WakeUp sets `wake_pending`, then writes the eventfd only if the loop is
 * `sleeping`; the loop (rl__wait in rl_waitpolicy.h) sets `sleeping`, then
 * blocks only if no wake is pending. Both sides use sequentially
 * consistent atomics, so one of them always sees the other: no wake-up is
 * lost, and waking an awake loop costs no system call. The timerfd is
 * edge-triggered and never read: each expiry is one event, and arming it
 * again (as every wait that blocks does first) clears the last one. A loop
 * in its coalescing sleep (`coalescing`) waits on `wake_pending` itself, a
 * futex: WakeUp wakes it there instead, with the same pairing of stores
 * and loads. Low in the run-loop
 * files: it calls the loop check (rl_loop.c), the timer sets (rl_heap.c)
 * and the kernel seam (rl_poll.h) only.
 */
#include "rl_wake.h"
#include "rl_heap.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "rl_poll.h"
#include "rl_spin.h"
#include <crunloop/RLRunLoop.h>

#include <errno.h>
#include <math.h>

/* The eventfd write (rl_poll.h), never into a parent's loop from a fork()
 * child. */
static void write_eventfd(RLRunLoopRef rl) {
    if (!rl__of_this_process(rl))
        return;
    rl__poll_wake(&rl->kern);
}

void rl__wake_slow(RLRunLoopRef rl) {
    /* wake_pending was 0 (rl__wake). CF ignores wake-ups from the moment the loop wakes (or while it is not
     * running) until its next pass begins: that pass looks at every queue
     * anyway. Seeing a stale 1 here is safe for the same reason as above. */
    if (atomic_load(&rl->ignore_wakeups))
        return;
    /* Where the waker runs tells the loop whether spinning for the next
     * wake-up can pay (rl__spin_for_wake); stored only when it changes. */
    int cpu = rl__spin_cpu();
    if (atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&rl->waker_cpu, cpu, memory_order_relaxed);
    if (atomic_exchange(&rl->wake_pending, 1) != 0)
        return; /* a wake-up is already on its way */
    if (atomic_load(&rl->sleeping))
        write_eventfd(rl);
    else if (atomic_load(&rl->coalescing))
        rl__poll_unnap(&rl->kern);
}

void rl__sleep_unless_woken(RLRunLoopRef rl, long long ns) {
    atomic_store(&rl->coalescing, 1);
    /* The kernel compares wake_pending with 0 as it puts the thread to
     * sleep: a wake-up set before (whose waker may have missed
     * `coalescing`) makes it return at once, one set after wakes it. A
     * signal may end it early too, which is harmless. */
    if (!atomic_load(&rl->wake_pending))
        rl__poll_nap(&rl->kern, ns);
    atomic_store(&rl->coalescing, 0);
}

bool rl__arm_timerfd(RLRunLoopRef rl, double at) {
    if (at == rl->armed_at || !rl__of_this_process(rl))
        return true;
    int err = rl__poll_arm_timer(&rl->kern, at);
    if (err) {
        /* Not armed (the old setting may still be): NaN equals no time, so
         * the next call tries again instead of taking it as armed. */
        rl->armed_at = NAN;
        errno = err;
        return false;
    }
    rl->armed_at = at;
    return true;
}

double rl__next_wake(RLRunLoopRef rl, rl__frame *f) {
    double at = f->deadline;
    double date;
    if (rl__tset_earliest_deadline(&f->mode->timers, &date)) {
        double rel = date - RLAbsoluteTimeGetCurrent();
        double t = rl__mono_now() + (rel > 0 ? rel : 0);
        if (t < at)
            at = t;
    }
    return at;
}

/* rl__rearm_for_added_timer's work (rl_wake.h). */
void rl__rearm_for_added_timer_slow(RLRunLoopRef rl, const struct RLRunLoopTimer *t) {
    if (t->firing)
        return; /* not a wake-up reason until its callout returns (rl__tset_earliest_deadline) */
    double rel = t->fire_date + rl__timer_tolerance(t) - RLAbsoluteTimeGetCurrent();
    double at = rl__mono_now() + (rel > 0 ? rel : 0);
    if (!(at >= rl->armed_at) && !rl__arm_timerfd(rl, at))
        rl__wake(rl); /* it waits again, with a time limit (rl_waitpolicy.h) */
}

/* ---- public: wake-up, stop, waiting ---- */

bool RLRunLoopIsWaiting(RLRunLoopRef rl) {
    if (!rl__check_loop(rl, __func__))
        return false;
    return atomic_load(&rl->sleeping) != 0;
}

static bool wake_up_slow(RLRunLoopRef rl) __attribute__((noinline));
static bool wake_up_slow(RLRunLoopRef rl) {
    rl__wake_slow(rl);
    return true;
}

/* A wake-up already pending (a producer that wakes the loop after every
 * item) is a check and a load, no call (rl__wake). */
bool RLRunLoopWakeUp(RLRunLoopRef rl) {
    if (RL__UNLIKELY(!rl__check_loop(rl, __func__)))
        return false;
    if (RL__LIKELY(atomic_load(&rl->wake_pending)))
        return true;
    return wake_up_slow(rl);
}

bool RLRunLoopStop(RLRunLoopRef rl) {
    if (!rl__check_loop(rl, __func__))
        return false;
    rl__loop_lock(rl);
    /* As CF: only a running loop can be stopped; the innermost run returns. */
    if (rl->frame)
        rl->frame->stopped = true;
    rl__loop_unlock(rl);
    rl__wake(rl);
    return true;
}
