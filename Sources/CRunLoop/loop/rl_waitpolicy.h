/*
 * rl_waitpolicy.h — private: how a run loop waits, once its pass has
 * decided to (RLRunLoopRun.c, its only includer): the one file to edit to
 * change how the loop sleeps. Inline, as the pass's own code was: the
 * pass calls it once per pass, and a call across files would cost every
 * pass a few dozen instructions. What other rooms call (the sockets'
 * hint), the tests' hooks and the cold error reports are in
 * rl_waitpolicy.c.
 *
 * The plain way, every trick off (make PLAIN=1): arm the timerfd for the
 * next deadline and sleep in the kernel now. Three speed tricks come
 * before that sleep, each behind its RL_TRICK_* switch (internal.h), each
 * measured by scripts/bench-tricks.py:
 *   SPIN      a loop whose wake-ups come from another CPU spins for the
 *             next one within a learnt budget (rl_spin.h);
 *   PACE      before the BeforeWaiting observers, a loop that ran requests
 *             yields to a producer on its own CPU, or pauses for the next
 *             batch of one on another (rl__wait_pace); a look after a pass
 *             that performed a source counts as work, and pauses for a
 *             stream of signals from another CPU (rl__wait_pace_look);
 *   COALESCE  a loop whose pass read bulk chunks from two or more sockets
 *             naps a few microseconds, so the next reads are bigger (the
 *             sockets' hint: rl__wait_note_bulk_read, RL_BULK_READ).
 * The wait goes through the kernel seam only (rl_poll.h); the wake-up
 * protocol (the flags `wake_pending`, `sleeping`, `coalescing`, and the
 * nap a wake-up ends) is rl_wake.c's. Below the pass, above the seam: it
 * calls rl_wake.c, the loop lock, the fd table (to hand it the events)
 * and rl_poll.h, never the pass.
 */
#ifndef CRUNLOOP_RL_WAITPOLICY_H
#define CRUNLOOP_RL_WAITPOLICY_H

#include "rl_fdtab.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "rl_poll.h"
#include "rl_spin.h"
#include "rl_wake.h"
#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <sys/epoll.h>

/* ------------------------------------------------------------------ */
/* PACE: before the BeforeWaiting observers                            */

/* Pacing a stream of requests from another thread, before the loop waits
 * (rl->pass_ran: requests run, and looks after a pass that performed a
 * source (rl__wait_pace_look), since it last waited).
 *
 * The last thread that woke the loop runs on this CPU: it is runnable right
 * now (this loop preempted it when the wake-up's write made this thread
 * runnable) and cannot run while this loop does. If the loop sleeps at
 * once, that thread's next request wakes it again (an eventfd write), and
 * the loop preempts it again: a few requests per two context switches and
 * two system calls. Yielding first lets it run on; its requests find the
 * loop awake (no system call on its side), and the next pass takes them
 * all. Measured: 1e6 requests from a producer on the same CPU went from
 * ~1500 wake-ups to under 20, and ~35 to ~50 M/s; a same-CPU round trip
 * gains too (the sender's next request needs no write). When nothing else
 * is runnable here the yield returns at once.
 *
 * The waker runs on another CPU, the pass ran many requests and more are
 * queued already: every pass costs the producer a few cache-line transfers
 * (the queue's lock, the wake-up flags), so passes that take a few dozen
 * requests each slow it down. A pause of a couple of microseconds lets the
 * next batch grow. A round trip (one request between waits) never pauses.
 * Right before the BeforeWaiting observers of a pass that will wait; the
 * loop's thread, without the loop lock. */
static inline void rl__wait_pace(RLRunLoopRef rl) {
    enum { RL_STREAM_MIN = 32, RL_STREAM_PAUSE_NS = 2000 };
    if (!RL_TRICK_PACE || rl->pass_ran == 0)
        return;
    int cpu = rl__spin_cpu();
    int waker = atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed);
    if (cpu < 0 || waker < 0)
        return;
    if (waker == cpu) {
        sched_yield();
        return;
    }
    if (rl->pass_ran < RL_STREAM_MIN || !atomic_load_explicit(&rl->wake_pending, memory_order_relaxed))
        return;
    int64_t until = rl__spin_now() + RL_STREAM_PAUSE_NS;
    while (rl__spin_now() < until)
        rl__cpu_relax();
}

/* Pacing a stream of signals, at the look a pass makes after it performed
 * a source (the guide's pattern: a producer thread queues a command,
 * signals the loop's version-0 source and wakes the loop; the perform
 * takes every command queued).
 *
 * The look counts as work in pass_ran, so that the pass that next finds
 * nothing to do yields to a producer on this CPU before it waits
 * (rl__wait_pace): that producer was preempted by the wake-up that made
 * this loop run, and yielding lets it queue on (its wake-ups find the loop
 * awake: no system call) instead of being preempted again after every few
 * hundred commands, each time by an eventfd write of its own.
 *
 * A producer on another CPU that keeps signalling while the passes run
 * (a few passes in a row performed without a wait between them, and at
 * this look the source is on its mode's ready list again and a wake-up is
 * pending) is a stream: taken at once, the next batch is a dozen commands,
 * and each one costs the producer a full signal and wake-up (the source's,
 * the loop's and the queue's cache lines, taken back from this CPU). A
 * pause lets the batch grow. The first is 2 us and each further look of
 * the same stream doubles it, up to 32 us: with 2 us pauses the batches
 * stay a few dozen commands, and nearly every take of the producer's queue
 * meets the producer inside its own mutex, so that both threads go to the
 * kernel (a futex wait and wake, measured: 270,000 futex calls for 5 M
 * commands, and 16 M commands/s against libuv's 19); at 32 us a take moves
 * several hundred commands (28 M/s in the same runs). The cost is a
 * command's latency while the loop is behind: 32 us more at most. A loop
 * that catches up waits, and its next stream starts again at 2 us. A round
 * trip (the reply comes after the pass, and the loop waits for it) never
 * pauses. The loop lock held, and held again on return. */
static inline void rl__wait_pace_look(RLRunLoopRef rl, rl__frame *f) {
    enum { RL_STREAM_PAUSE_NS = 2000, RL_STREAM_PAUSE_DOUBLINGS = 4, RL_STREAM_LOOKS = 4 };
    if (!RL_TRICK_PACE)
        return;
    rl->pass_ran++;
    if (rl->pass_ran < RL_STREAM_LOOKS || (f->mode->nready == 0 && atomic_load(&rl->inbox) == NULL) ||
        !atomic_load_explicit(&rl->wake_pending, memory_order_relaxed))
        return;
    int cpu = rl__spin_cpu();
    int waker = atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed);
    if (cpu < 0 || waker < 0 || waker == cpu)
        return;
    uint32_t doublings = rl->pass_ran - RL_STREAM_LOOKS;
    if (doublings > RL_STREAM_PAUSE_DOUBLINGS)
        doublings = RL_STREAM_PAUSE_DOUBLINGS;
    rl__loop_unlock(rl);
    int64_t until = rl__spin_now() + ((int64_t)RL_STREAM_PAUSE_NS << doublings);
    while (rl__spin_now() < until)
        rl__cpu_relax();
    rl__loop_lock(rl);
}

/* ------------------------------------------------------------------ */
/* COALESCE: a nap before the wait                                     */

/* Coalescing bulk reads (RL_TRICK_COALESCE). A pass whose callouts read
 * bulk chunks from two or more sockets (rl__wait_note_bulk_read: reads of
 * RL_BULK_READ bytes or more) served streams that were still arriving: the
 * peers keep sending while the loop works. Waiting at once, the loop is
 * woken for the first few KB on any of them, and every wait, read and send
 * moves a few KB. Sleeping a little first lets each stream's next chunk
 * grow, so the same bytes cost fewer system calls and wake-ups, and the
 * CPU is free meanwhile for whoever sends them. Measured with bench_echo's
 * 16 connections (4 KB writes, 2 CPUs, against libuv in the same run):
 * server CPU per MB 0.6-0.8x libuv's with it, 1.0x without; see the header
 * of bench/bench_echo.c.
 *
 * The sleep ends early for a wake-up (a perform request, a signalled
 * source, RLRunLoopWakeUp, a stop: rl__sleep_unless_woken) and for a timer
 * another thread adds or moves meanwhile (rl_wake.h), and never passes the
 * next timer's date or the run's deadline. What waits for its end
 * (RL_COALESCE_NS plus the kernel's timer slack, 50 us by default) is an
 * fd that became ready meanwhile, which is the point. A pass
 * that read from one stream only, or only short messages (a
 * request/response exchange), never sleeps. */
enum { RL_COALESCE_MIN = 2, RL_COALESCE_NS = 20000 };

/* For the tests: the nap's length instead of RL_COALESCE_NS (0: that). */
RL__HIDDEN extern _Atomic long long rl__coalesce_ns_for_tests;

/* Whether the nap pays. It does when the peers' streams keep arriving:
 * a pass after a nap reads more from each socket than a pass after a wait
 * without one (in bigger reads on epoll; in more of the ring's chunks at
 * a time on io_uring, whose receives complete with what was there). It
 * does not when each peer waits for what the loop sends back before it
 * sends more (a window of one chunk, as in an echo with one write in
 * flight per connection): by the time the loop naps, everything the peers
 * will send until they hear back is there, and a nap only delays the
 * replies, so the peers and the loop both idle. So the loop measures the
 * bytes read per socket in each bulk pass, as running means after a nap
 * and after a wait without one (rl__nap). A try whose pass read less than
 * RL_NAP_GAIN times as much per socket as the passes without a nap stops
 * the naps for the next `backoff` bulk passes (4, doubled by each such try
 * in a row up to 1024), which measure the plain wait again; a nap that
 * pays sets the backoff back to 4, and one pass in 64 of a run of naps
 * waits without one, so that the comparison follows the traffic. */
enum { RL_NAP_BACKOFF_MIN = 4, RL_NAP_BACKOFF_MAX = 1024, RL_NAP_RECHECK = 64 };
#define RL_NAP_GAIN_NUM 5 /* RL_NAP_GAIN: 5/4 */
#define RL_NAP_GAIN_DEN 4

/* A running mean of bytes per socket: 1/4 of the new sample, or the sample
 * itself for the first (1 at least, so that 0 stays "none"). */
static inline uint32_t rl__nap_mean(uint32_t mean, uint64_t sample) {
    if (sample > UINT32_MAX)
        sample = UINT32_MAX;
    uint64_t m = mean ? ((uint64_t)mean * 3 + sample) / 4 : sample;
    return m ? (uint32_t)m : 1;
}

/* Whether the loop naps before this wait: its pass read bulk chunks from
 * two or more sockets, no wake-up is pending, and the nap pays (above).
 * Also takes this pass's sample. The loop lock held. */
static inline bool rl__coalesce_due(RLRunLoopRef rl) {
    rl__nap *n = &rl->nap;
    bool after_nap = n->last;
    n->last = false;
    if (!RL_TRICK_COALESCE || rl->pass_bulk < RL_COALESCE_MIN)
        return false;
    uint64_t per = rl->pass_bulk_bytes / rl->pass_bulk;
    if (after_nap)
        n->napped = rl__nap_mean(n->napped, per);
    else
        n->plain = rl__nap_mean(n->plain, per);
    if (atomic_load(&rl->wake_pending))
        return false;
    if (n->skip) {
        n->skip--;
        return false;
    }
    if (after_nap && n->plain) {
        if ((uint64_t)n->napped * RL_NAP_GAIN_DEN < (uint64_t)n->plain * RL_NAP_GAIN_NUM) {
            if (n->backoff < RL_NAP_BACKOFF_MIN)
                n->backoff = RL_NAP_BACKOFF_MIN;
            n->skip = n->backoff;
            if (n->backoff < RL_NAP_BACKOFF_MAX)
                n->backoff *= 2;
            n->napped = 0;
            n->streak = 0;
            return false;
        }
        n->backoff = RL_NAP_BACKOFF_MIN;
        if (++n->streak >= RL_NAP_RECHECK) {
            n->streak = 0;
            return false; /* this pass's wait measures the plain one again */
        }
    }
    n->last = true;
    return true;
}

/* The nap, `left` seconds at most, or until a wake-up. Without the loop
 * lock and with `sleeping` clear. */
static inline void rl__coalesce_sleep(RLRunLoopRef rl, double left) {
    long long want = atomic_load_explicit(&rl__coalesce_ns_for_tests, memory_order_relaxed);
    double ns = want > 0 ? (double)want : RL_COALESCE_NS;
    if (left * 1e9 < ns)
        ns = left * 1e9;
    if (ns >= 1000)
        rl__sleep_unless_woken(rl, (long long)ns);
}

/* ------------------------------------------------------------------ */
/* SPIN: for a wake-up from another CPU                                */

/* Whether the loop, about to block, may spin for a wake-up first: only if
 * the last wake-up came from another CPU (a waker on this CPU cannot run
 * while the loop spins). Also records the loop's CPU for waiters
 * (rl__runloop_cpu), with or without the trick. */
static inline bool rl__spin_eligible(RLRunLoopRef rl) {
    int cpu = rl__spin_cpu();
    if (atomic_load_explicit(&rl->cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&rl->cpu, cpu, memory_order_relaxed);
    int waker = atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed);
    return cpu >= 0 && waker >= 0 && waker != cpu;
}

/* Spins until a wake-up is pending or `until` (rl__spin_now nanoseconds)
 * passes. Called without the loop lock and with `sleeping` clear, so a
 * waker only sets wake_pending: no eventfd write, no system call. */
static inline void rl__spin_for_wake(RLRunLoopRef rl, int64_t until) {
    do {
        for (int i = 0; i < 16; i++) {
            if (atomic_load_explicit(&rl->wake_pending, memory_order_relaxed))
                return;
            rl__cpu_relax();
        }
    } while (rl__spin_now() < until);
}

/* ------------------------------------------------------------------ */
/* the wait                                                            */

/* The kernel refused to arm the timerfd (errno err), or the wait itself
 * (rl_waitpolicy.c: the thread's error set). */
RL__HIDDEN void rl__wait_report_unarmed(int err) __attribute__((cold));
RL__HIDDEN void rl__wait_report_failed(RLRunLoopRef rl, int err) __attribute__((cold));

/* A look with no user fd to look at has nothing to ask the kernel: due
 * timers are found by the clock, and an expiry of the edge-triggered
 * timerfd needs no draining (the next arming clears it). */
static inline bool rl__poll_needs_no_syscall(RLRunLoopRef rl) { return rl->nfd_armed == 0 && !rl->mainq_armed; }

/* Before a wait that blocks, until monotonic time *at: the nap (COALESCE)
 * or the spin (SPIN), or nothing (the plain twin: sleep now). Either drops
 * the loop lock meanwhile and then reads *at and *now again (a timer may
 * have come). Returns when the spin budget's wait began (rl__spin_now), 0
 * if it learns nothing from this wait. The loop lock held. */
static inline int64_t rl__before_sleep(RLRunLoopRef rl, rl__frame *f, double *at, double *now) {
    if (!(*at > *now))
        return 0;
    int64_t learn_from = 0;
    if (rl__coalesce_due(rl)) {
        rl->ncoalesced++;
        rl__loop_unlock(rl);
        rl__coalesce_sleep(rl, *at - *now);
    } else if (!atomic_load(&rl->wake_pending) && rl__spin_eligible(rl)) {
        learn_from = rl__spin_now();
        uint32_t budget = rl__spin_budget(&rl->spin); /* 0 without RL_TRICK_SPIN */
        if (budget == 0)
            return learn_from;
        rl__loop_unlock(rl);
        double left = (*at - *now) * 1e9;
        rl__spin_for_wake(rl, learn_from + (left < budget ? (int64_t)left : (int64_t)budget));
    } else {
        return 0;
    }
    rl__loop_lock(rl);
    *at = rl__next_wake(rl, f);
    *now = rl__mono_now();
    return learn_from;
}

/* The epoll timeout of a wait until monotonic time `at` (`left` seconds
 * from now): -1 once the timerfd is armed for it (no limit of its own),
 * 0 if it is due. Without the timerfd (the kernel refused to arm it) the
 * wait itself ends by `at`, rounded up to whole milliseconds. The loop
 * lock held. */
static inline int rl__timeout_until(RLRunLoopRef rl, double at, double left) {
    if (!(left > 0))
        return 0;
    bool armed = rl__arm_timerfd(rl, at);
    if (RL__UNLIKELY(!armed)) {
        rl__wait_report_unarmed(errno);
        left = at - rl__mono_now(); /* the wait ends by `at` itself: the precise clock (`left` may be a coarse one's) */
        if (!(left > 0))
            return 0;
    }
    return armed || isinf(left) ? -1 : left >= INT_MAX / 1000 ? INT_MAX : (int)ceil(left * 1000);
}

/* The monotonic clock (seconds) for a wait until `at`, or a pass's end
 * asking whether `at` passed: while `at` is a second or more past the
 * kernel's coarse monotonic clock, that clock, at a fraction of a precise
 * reading's cost (on this machine's virtual CPU about 15 user-space
 * instructions against 100 a pass); it is the precise clock as of the
 * kernel's last tick, behind it by a tick at most (milliseconds), so it
 * is a second short of `at` in the precise clock too, and every decision
 * taken from it (due or not, how long a spin or a nap may last, bounded
 * far below a second) is the precise clock's. Nearer, the precise clock. */
static inline double rl__mono_now_before(double at) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) {
        double coarse = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
        if (coarse < at - 1.0)
            return coarse;
    }
    return rl__mono_now();
}

/* After a wait that was not a look: what the next one paces and coalesces
 * by counts from here. */
static inline void rl__after_wait(RLRunLoopRef rl) {
    rl->pass_ran = 0;
    rl->pass_bulk = 0;
    rl->pass_bulk_bytes = 0;
    rl->bulk_last = NULL;
}

/* The wait itself: blocks until an event, a wake-up, f's mode's next timer
 * or f's deadline; with `poll`, only looks (no system call when there is
 * nothing to ask the kernel). Called with the loop lock held, the fds to
 * watch armed; returns without it. What the wait brought is sorted out
 * before it returns: a wake-up and the timer's expiry are the loop's own
 * (nothing to do but note them), the main queue's handle is marked ready,
 * and user fds' events go to the fd table (rl__fd_note_events) for the
 * pass's callouts. The number of events in ev (up to maxev), or -1 when
 * the kernel refused the wait (the error set: the run ends).
 *
 * Before blocking, a loop whose wake-ups come from another CPU spins for
 * the next one within its learnt budget (rl_spin.h), so a request that
 * follows a reply closely finds the loop awake; an idle loop, or one woken
 * only by timers and fds, has no budget and never spins. */
static inline int rl__wait(RLRunLoopRef rl, rl__frame *f, bool poll, struct epoll_event *ev, int maxev) {
    if (poll)
        rl__wait_pace_look(rl, f);
    int timeout = 0;
    int64_t learn_from = 0; /* the start of a wait the spin budget learns from; 0: none */
    if (!poll) {
        double at = rl__next_wake(rl, f);
        double now = rl__mono_now_before(at);
        learn_from = rl__before_sleep(rl, f, &at, &now);
        timeout = rl__timeout_until(rl, at, at - now);
    } else if (rl__poll_needs_no_syscall(rl)) {
        rl__loop_unlock(rl);
        rl->wait_fds = false;
        rl__flag_set(&rl->ignore_wakeups, 1);
        rl__flag_set(&rl->wake_pending, 0);
        return 0;
    }
    /* A wake-up already pending turns the wait into a look, and a look with
     * nothing to ask the kernel needs no system call. */
    if (atomic_load(&rl->wake_pending) && rl__poll_needs_no_syscall(rl)) {
        rl__loop_unlock(rl);
        rl->wait_fds = false;
        rl__flag_set(&rl->ignore_wakeups, 1);
        rl__flag_set(&rl->wake_pending, 0);
        if (learn_from)
            rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, true);
        rl__after_wait(rl); /* not a look: that returned above */
        return 0;
    }
    atomic_store(&rl->sleeping, 1);
    rl__loop_unlock(rl);
    if (atomic_load(&rl->wake_pending))
        timeout = 0;
    int n = rl__poll_wait(&rl->kern, ev, maxev, timeout);
    int wait_err = n < 0 ? errno : 0;
    rl->nwaits++;
    rl__flag_set(&rl->ignore_wakeups, 1);
    atomic_store(&rl->sleeping, 0);
    bool woken = atomic_load(&rl->wake_pending) != 0;
    rl__flag_set(&rl->wake_pending, 0);
    bool user_fds = false;
    for (int i = 0; i < n; i++) {
        if (rl__ev_gen(&ev[i]) != 0) {
            user_fds = true;
        } else if (rl__ev_fd(&ev[i]) == rl->kern.evfd) {
            woken = true; /* edge-triggered: nothing to read back */
        } else if (rl__ev_fd(&ev[i]) == rl->kern.tfd) {
            /* Edge-triggered: nothing to read back (a system call less
             * between the wake-up and the timer's callout). Disarmed: the
             * next wait notes it under the lock it takes anyway
             * (loop_wait, RLRunLoopRun.c); till then a timer added elsewhere for
             * later than the expiry does not arm it, and need not: this
             * loop is awake and arms for it before it sleeps. */
            rl->tfd_expired = true;
        } else if (rl__ev_fd(&ev[i]) == rl->mainq_fd) {
            rl->mainq_ready = true; /* the pass serves it after the timers */
        }
    }
    rl->wait_fds = user_fds;
    if (user_fds) {
        rl__loop_lock(rl);
        rl__fd_note_events(rl, ev, n); /* the fd table's, for the pass's callouts */
        rl__loop_unlock(rl);
    }
    if (RL__UNLIKELY(n < 0)) {
        rl__wait_report_failed(rl, wait_err);
        return -1;
    }
    if (learn_from)
        rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, woken);
    if (!poll)
        rl__after_wait(rl);
    return n;
}

/* The sockets' hint to the wait policy (rl_waitpolicy.c), from a callout
 * on the calling thread's loop: it read a bulk chunk from the socket `who`
 * (an RLSocket, or a socket stream the callout reads). Two or more sockets
 * between two waits make the loop coalesce before it waits
 * (RL_TRICK_COALESCE); more chunks from one socket in a row count once.
 * Outside a run of the thread's loop: nothing. */
/* A read of at least this many bytes is a bulk one: the stream had a
 * chunk waiting, not a message (the sockets tell the policy of those). */
#define RL_BULK_READ 4096
RL__HIDDEN void rl__wait_note_bulk_read(const void *who, size_t n);
/* Whether a bulk read noted now could still make the calling thread's
 * loop nap before its next wait: a socket was read in bulk already this
 * pass, or more fd callouts follow in it. false: this callout is the
 * pass's only one (one stream alone never naps), or no loop runs here. */
RL__HIDDEN bool rl__wait_bulk_may_nap(void);

/* For the tests: how many waits the loop coalesced before. */
RL__HIDDEN unsigned long rl__loop_coalesced_waits(RLRunLoopRef rl);

#endif /* CRUNLOOP_RL_WAITPOLICY_H */
