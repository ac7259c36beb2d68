/*
 * RLRunLoopRun.c — the iteration: RunInMode/Run and one pass of it
 * (perform requests, observers, ready sources, due timers, ready fds), the
 * wait in epoll, and the pacing of request streams. The top floor of the
 * run-loop files: it calls into the timer and observer files (to fire and
 * notify) and down into the ready lists, the fd table, wake-ups, modes and
 * the perform queue; none of them calls back into it.
 */
#include "RLRunLoopMode.h"
#include "RLRunLoopPerformInternal.h"
#include "rl_fdtab.h"
#include "rl_heap.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "rl_mainqueue.h"
#include "rl_poll.h"
#include "rl_ready.h"
#include "rl_spin.h"
#include "rl_wake.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>

static bool rl_do_blocks(RLRunLoopRef rl, rl_mode *m) {
    uint32_t n = rl__perform_maybe_pending(&rl->pq) ? rl__perform_run(&rl->pq, m) : 0;
    rl->pass_ran += n;
    return n > 0;
}

/* Pacing a stream of requests from another thread, before the loop waits
 * (rl->pass_ran: requests run since it last waited).
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
 * next batch grow. A round trip (one request between waits) never pauses. */
static void rl_pace_requests(RLRunLoopRef rl) {
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

/* Coalescing bulk reads (RL_TRICK_COALESCE). A pass whose callouts read
 * bulk chunks from two or more sockets (rl__loop_note_bulk_read: reads of
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

/* For the tests: the sleep's length instead of RL_COALESCE_NS (0: that). */
RL__HIDDEN _Atomic long long rl__coalesce_ns_for_tests;
_Atomic long long rl__coalesce_ns_for_tests;

void rl__loop_note_bulk_read(const void *who) {
    RLRunLoopRef rl = rl__tls;
    if (rl && rl->frame && rl->bulk_last != who) {
        rl->bulk_last = who;
        rl->pass_bulk++;
    }
}

/* Whether the loop sleeps before this wait (the loop lock held). */
static bool rl_coalesce_due(RLRunLoopRef rl) {
    return RL_TRICK_COALESCE && rl->pass_bulk >= RL_COALESCE_MIN && !atomic_load(&rl->wake_pending);
}

/* The sleep, `left` seconds at most, or until a wake-up. Without the loop
 * lock and with `sleeping` clear. */
static void rl_coalesce_sleep(RLRunLoopRef rl, double left) {
    long long want = atomic_load_explicit(&rl__coalesce_ns_for_tests, memory_order_relaxed);
    double ns = want > 0 ? (double)want : RL_COALESCE_NS;
    if (left * 1e9 < ns)
        ns = left * 1e9;
    if (ns >= 1000)
        rl__sleep_unless_woken(rl, (long long)ns);
}

/* For the tests: the loop's epoll fd, to break it (test_runloop_kernel.c). */
RL__HIDDEN int rl__loop_poll_fd_for_tests(RLRunLoopRef rl);
int rl__loop_poll_fd_for_tests(RLRunLoopRef rl) { return rl->epfd; }

/* For the tests: how many waits the loop coalesced before. */
RL__HIDDEN unsigned long rl__loop_coalesced_waits(RLRunLoopRef rl);
unsigned long rl__loop_coalesced_waits(RLRunLoopRef rl) {
    rl__loop_lock(rl);
    unsigned long n = rl->ncoalesced;
    rl__loop_unlock(rl);
    return n;
}

/* ------------------------------------------------------------------ */
/* the iteration                                                       */

/* Whether m has no source and no timer; on the main thread, the main
 * dispatch queue is a source of every common mode (rl_mainqueue.h). The
 * loop lock held. */
static bool rl_mode_has_no_items(RLRunLoopRef rl, rl_mode *m) {
    return m->nsources == 0 && rl__tset_count(&m->timers) == 0 && !rl__mainq_in_mode(rl, m);
}

static bool rl_mode_is_empty(RLRunLoopRef rl, rl_mode *m) {
    rl__loop_lock(rl);
    bool empty = rl_mode_has_no_items(rl, m);
    rl__loop_unlock(rl);
    return empty && !rl__perform_has_for(&rl->pq, m);
}

/* What guards o held (its home's lock). */
static void rl_observer_unpin(struct RLRunLoopObserver *o, rl_defer *d) {
    if (--o->pins > 0)
        return;
    for (; o->held_releases > 0; o->held_releases--)
        rl__defer_unhold(d, o);
}

/* After o's callout (if `went`): unpins it, and invalidates a one-shot
 * observer. rl locked; o normally at home in rl, but a callout may have
 * moved it to another loop: then its home's lock is taken instead, rl's
 * dropped meanwhile (never both). */
static void rl_observer_after(RLRunLoopRef rl, struct RLRunLoopObserver *o, bool went, rl_defer *d) {
    RLRunLoopRef h = rl;
    if (RL__UNLIKELY(rl__home_get(o, RL_KIND_OBSERVER) != rl)) {
        rl__loop_unlock(rl);
        h = rl__item_lock(o, RL_KIND_OBSERVER);
    }
    if (went) {
        o->firing = false;
        if (!o->repeats && o->valid)
            rl__observer_invalidate_locked(o, d);
    }
    rl_observer_unpin(o, d);
    if (RL__UNLIKELY(h != rl)) {
        rl__item_unlock(o, RL_KIND_OBSERVER, h);
        rl__loop_lock(rl);
    }
}

static void rl_do_observers(RLRunLoopRef rl, rl_mode *m, RLRunLoopActivity act) {
    struct RLRunLoopObserver *small[16], **list = small;
    size_t n = 0;
    /* Most passes have no observer for most activities: skip the lock. A
     * stale read only means an observer added from another thread this very
     * moment is called from the next activity on. */
    if (!(atomic_load_explicit(&m->observer_mask, memory_order_relaxed) & act))
        return;
    rl_defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    if (m->nobservers > 16)
        list = malloc(m->nobservers * sizeof *list);
    rl_memb *x;
    TAILQ_FOREACH(x, &m->observers, mode_link) {
        struct RLRunLoopObserver *o = x->item;
        if (list && o->valid && (o->activities & act) && !o->firing) {
            /* Pinned, not retained: the mode's reference on o stays (or is
             * held back) until o is unpinned, without two atomic
             * operations per callout. */
            o->pins++;
            list[n++] = o;
        }
    }
    /* One lock round per callout: the state after one callout and the check
     * before the next share it. An earlier callout may have invalidated a
     * later observer, which is then skipped. */
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopObserver *o = list[i];
        bool go = rl__home_get(o, RL_KIND_OBSERVER) == rl && o->valid && !o->firing;
        if (go)
            o->firing = true;
        rl__loop_unlock(rl);
        if (go)
            o->callout(o, act, o->ctx.info);
        rl__loop_lock(rl);
        rl_observer_after(rl, o, go, &d);
        /* As CF: a one-shot observer gives its context back right after
         * its own callout, before the next observer is called. */
        if (d.n) {
            rl__loop_unlock(rl);
            rl__defer_run(&d);
            rl__loop_lock(rl);
        }
    }
    rl__loop_unlock(rl);
    if (d.n)
        rl__defer_run(&d);
    if (list != small)
        free(list);
}

static bool rl_do_sources0(RLRunLoopRef rl, rl_mode *m, bool stop_after_handle) {
    struct RLRunLoopSource *small[16], **a = small;
    rl__loop_lock(rl);
    if (RL__UNLIKELY(m->inflight != NULL))
        rl__ready_requeue_inflight(m); /* nested in a perform of an outer pass of m */
    size_t n = m->nready ? rl__ready_take(m, &a, small, 16) : 0;
    rl__loop_unlock(rl);
    if (n == 0) {
        if (a != small)
            free(a);
        return false;
    }
    /* Only this thread reads m->inflight. */
    struct rl_inflight fl = {a, 0, n, false, m->inflight};
    m->inflight = &fl;
    bool handled = false;
    size_t i = 0;
    for (; i < n; i++) {
        if (RL__UNLIKELY(!rl__of_this_process(rl)))
            break; /* a callout forked: the rest is the parent's */
        struct RLRunLoopSource *s = a[i];
        fl.next = i + 1;
        bool requeued = fl.requeued;
        if (RL__UNLIKELY(requeued))
            rl__loop_lock(rl);
        rl__olock_lock(&s->lock);
        /* Skipped if a nested run performed it meanwhile (signal gone) or
         * it was invalidated. */
        bool go = s->signalled && s->valid;
        if (go)
            rl__poke(s->signalled, false);
        rl_memb *x = go && requeued ? rl__memb_find(s, RL_KIND_SOURCE, m) : NULL;
        rl__olock_unlock(&s->lock);
        if (RL__UNLIKELY(requeued)) {
            /* A nested pass put it back on the list: it leaves again. */
            if (x)
                rl__ready_unlink(x);
            rl__loop_unlock(rl);
        }
        if (go && s->ctx.perform) {
            s->ctx.perform(s->ctx.info);
            handled = true;
        } else if (go) {
            handled = true;
        }
        rl__release_raw(s);
        if (stop_after_handle && handled) {
            i++;
            break;
        }
    }
    m->inflight = fl.outer;
    /* Sources not reached keep their signal for the next pass, ahead of
     * those signalled since (put back at the head, last first). */
    if (i < n) {
        rl__loop_lock(rl);
        rl__ready_put_back(m, a, i, n);
        rl__loop_unlock(rl);
    }
    for (size_t j = i; j < n; j++)
        RLRelease(a[j]);
    if (a != small)
        free(a);
    return handled;
}

static int rl_cmp_timer_memb(const void *x, const void *y) {
    const struct RLRunLoopTimer *a = (*(rl_memb *const *)x)->item, *b = (*(rl_memb *const *)y)->item;
    if (a->fire_date != b->fire_date)
        return a->fire_date < b->fire_date ? -1 : 1;
    return rl__timer_stamp_before(a, b) ? -1 : rl__timer_stamp_before(b, a);
}

static void rl_fire_timer(RLRunLoopRef rl, rl_mode *m, struct RLRunLoopTimer *t) {
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    rl__loop_lock(rl);
    /* Only at home in rl is its state under rl's lock (a callout may have
     * moved it meanwhile); m is a mode of rl: a membership in m means t is
     * in rl. */
    bool go = rl__home_get(t, RL_KIND_TIMER) == rl && t->valid && !t->firing && t->fire_date <= now &&
              rl__memb_in_mode(t, RL_KIND_TIMER, m);
    if (go) {
        t->firing = true;
        t->moved_in_fire = false;
        t->ctx_pinned = t->ctx.retain != NULL;
    }
    rl__loop_unlock(rl);
    if (!go)
        return;
    /* As CF: the callout holds its own reference on info (the context's
     * retain and release around it), so it may invalidate and release its
     * own timer and still use info. The context is fixed at creation; what
     * could free info meanwhile, an invalidation, waits for the pin. */
    void *info = t->ctx.info;
    if (t->ctx.retain) {
        info = (void *)t->ctx.retain(info);
        rl_defer pd;
        rl__defer_init(&pd);
        RLRunLoopRef ph = rl__item_lock(t, RL_KIND_TIMER); /* rl, unless the retain callback moved it */
        t->ctx_pinned = false;
        if (t->ctx_release_held) {
            t->ctx_release_held = false;
            rl__defer_ctx_release(&pd, t->ctx.release, t->ctx.info);
        }
        rl__item_unlock(t, RL_KIND_TIMER, ph);
        if (pd.n)
            rl__defer_run(&pd);
    }
    if (t->callout) /* a timer without a callout keeps its mode alive and does nothing */
        t->callout(t, info);
    if (t->ctx.retain && t->ctx.release)
        t->ctx.release(info);
    rl_defer d;
    rl__defer_init(&d);
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER); /* rl, unless the callout moved it */
    t->firing = false;
    rl__timer_after_fire_locked(t, RLAbsoluteTimeGetCurrent(), &d);
    rl__item_unlock(t, RL_KIND_TIMER, h);
    rl__defer_run(&d);
}

static void rl_do_timers(RLRunLoopRef rl, rl_mode *m) {
    rl__loop_lock(rl);
    if (rl__tset_count(&m->timers) == 0) {
        rl__loop_unlock(rl); /* no clock read for a mode without timers */
        return;
    }
    rl_memb **due = rl->due;
    size_t n = 0, cap = rl->capdue;
    rl->due = NULL;
    rl->capdue = 0;
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    rl__tset_collect_due(&m->timers, now, &due, &n, &cap);
    if (n > 1)
        qsort(due, n, sizeof *due, rl_cmp_timer_memb);
    for (size_t i = 0; i < n; i++) {
        due[i] = due[i]->item; /* keep the timer, not the membership */
        rl__retain_raw(due[i]);
    }
    rl__loop_unlock(rl);
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopTimer *t = (struct RLRunLoopTimer *)due[i];
        if (RL__LIKELY(rl__of_this_process(rl))) /* else a callout forked: the parent fires the rest */
            rl_fire_timer(rl, m, t);
        rl__release_raw(t);
    }
    /* Kept for the next pass unless a nested run kept its own meanwhile,
     * or a burst made it large. */
    if (!rl->due && cap <= 1024) {
        rl->due = due;
        rl->capdue = cap;
    } else {
        free(due);
    }
}

/* The callouts of the fds the wait numbered wait_no reported. */
static bool rl_do_fds(RLRunLoopRef rl, rl_mode *m, struct epoll_event *ev, int nev, uint64_t wait_no,
                      bool stop_after_handle) {
    rl_fd_fire inl[64], *fire = inl;
    size_t cap = 64;
    rl__loop_lock(rl);
    size_t n = rl__fd_collect(rl, m, ev, nev, wait_no, stop_after_handle, &fire, inl, &cap);
    rl__loop_unlock(rl);
    for (size_t i = 1; i < n; i++) { /* insertion sort by order */
        rl_fd_fire x = fire[i];
        size_t j = i;
        while (j > 0 && fire[j - 1].src->order > x.src->order) {
            fire[j] = fire[j - 1];
            j--;
        }
        fire[j] = x;
    }
    bool handled = false;
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopSource *s = fire[i].src;
        if (fire[i].elsewhere)
            rl__fd_resync_except(s, rl); /* what it delivered here is off in its other loops too */
        struct RLFileDescriptor *f = s->fdobj;
        bool go = rl__peek(s->valid) && f && rl__peek(f->valid);
        if (go) {
            rl->fd_pass_left = n - i - 1;
            /* a run nested in a callout makes callouts of its own */
            struct RLRunLoopSource *outer = rl->src_in_callout;
            rl->src_in_callout = s;
            f->callout(f, fire[i].types, f->ctx.info);
            rl->src_in_callout = outer;
            handled = true;
        }
    }
    /* Their registrations, left as they were while the callouts ran (which
     * mostly enable again what they got), are brought in line now; a kept
     * source that joined another loop meanwhile is armed there too. */
    if (n > 0 && RL__LIKELY(rl__of_this_process(rl))) {
        bool others = false;
        rl__loop_lock(rl);
        for (size_t i = 0; i < n; i++) {
            rl__fd_after_callout(rl, &fire[i]);
            others |= fire[i].rearm_others;
        }
        rl__loop_unlock(rl);
        for (size_t i = 0; others && i < n; i++)
            if (fire[i].rearm_others)
                rl__fd_resync_except(fire[i].src, rl);
    } else {
        for (size_t i = 0; i < n; i++)
            rl__fd_after_callout_in_child(&fire[i]);
    }
    for (size_t i = 0; i < n; i++)
        rl__release_raw(fire[i].src);
    if (fire != inl)
        free(fire);
    return handled;
}


/* Stores only if the value changes: wakers read these flags on every
 * WakeUp, and an unchanged line stays in their caches. */
static inline void rl_flag_set(_Atomic int *flag, int v) {
    if (atomic_load_explicit(flag, memory_order_relaxed) != v)
        atomic_store(flag, v);
}

/* A poll with no user fd to look at has nothing to ask the kernel: due
 * timers are found by the clock, and an expiry of the edge-triggered
 * timerfd needs no draining (the next arming clears it). */
static bool rl_poll_needs_no_syscall(RLRunLoopRef rl) { return rl->nfd_armed == 0 && !rl->mainq_armed; }

/* Whether the loop, about to block, may spin for a wake-up first: only if
 * the last wake-up came from another CPU (a waker on this CPU cannot run
 * while the loop spins). Also records the loop's CPU for waiters
 * (rl__runloop_cpu). */
static bool rl_spin_eligible(RLRunLoopRef rl) {
    int cpu = rl__spin_cpu();
    if (atomic_load_explicit(&rl->cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&rl->cpu, cpu, memory_order_relaxed);
    int waker = atomic_load_explicit(&rl->waker_cpu, memory_order_relaxed);
    return cpu >= 0 && waker >= 0 && waker != cpu;
}

/* Spins until a wake-up is pending or `until` (rl__spin_now nanoseconds)
 * passes. Called without the loop lock and with `sleeping` clear, so a
 * waker only sets wake_pending: no eventfd write, no system call. */
static void rl_spin_for_wake(RLRunLoopRef rl, int64_t until) {
    do {
        for (int i = 0; i < 16; i++) {
            if (atomic_load_explicit(&rl->wake_pending, memory_order_relaxed))
                return;
            rl__cpu_relax();
        }
    } while (rl__spin_now() < until);
}

/* The kernel refused to arm the timerfd (errno err): the wait about to
 * start ends by its deadline through its own timeout instead, and the
 * loop's thread is told (docs/runloop.md). */
__attribute__((cold, noinline)) static void rl_report_unarmed(int err) {
    rl__fail_errno(err, "RLRunLoopRunInMode",
                   "timerfd_settime refused to arm the loop's timerfd; waiting with a timeout instead");
}

/* The kernel refused the wait itself (errno err, not EINTR): the epoll set
 * is broken. Counting it as "no events" would go round again at once, a
 * busy loop; the run ends instead (rl_run_frame), the error set. */
__attribute__((cold, noinline)) static void rl_report_failed_wait(RLRunLoopRef rl, int err) {
    rl__fail_errno(err, "RLRunLoopRunInMode", "%s on the loop's %s set failed; the run ends", rl__poll_wait_call(rl),
                   rl__poll_backend_name(rl));
}

/* Blocks until an event, a timer deadline or the run's deadline; with
 * `poll`, only looks. Returns the number of events in ev, or -1 when the
 * kernel refused the wait (the error set: the run ends).
 *
 * Before blocking, a loop whose wake-ups come from another CPU spins for
 * the next one within its learnt budget (rl_spin.h), so a request that
 * follows a reply closely finds the loop awake; an idle loop, or one woken
 * only by timers and fds, has no budget and never spins. */
static int rl_wait(RLRunLoopRef rl, rl_frame *f, bool poll, struct epoll_event *ev, int maxev) {
    rl__loop_lock(rl);
    rl__fd_before_wait(rl);
    if (rl->armed_mode != f->mode) {
        rl->armed_mode = f->mode;
        rl__fd_sync_all(rl);
    }
    if (RL__UNLIKELY(rl->mainq)) {
        rl__mainq_arm(rl, f->mode);
        /* Its handle reported to an outer run's wait (edge-triggered: once)
         * and is served here: not slept on. */
        if (rl->mainq_ready && rl->mainq_armed)
            poll = true;
    }
    /* A stop that came after this pass's own check may have found wake-ups
     * still ignored (between that check and the start of this pass): seen
     * here, under the lock the stopper set it under, it is not slept on. */
    if (f->stopped)
        poll = true;
    if (rl->nalways)
        poll = true; /* an always-ready fd is armed: served on this pass */
    int timeout = 0;
    int64_t learn_from = 0; /* the start of a wait the spin budget learns from; 0: none */
    if (!poll) {
        double at = rl__next_wake(rl, f);
        double now = rl__mono_now();
        if (at > now && rl_coalesce_due(rl)) {
            rl->ncoalesced++;
            rl__loop_unlock(rl);
            rl_coalesce_sleep(rl, at - now);
            rl__loop_lock(rl);
            at = rl__next_wake(rl, f); /* a timer may have come meanwhile */
            now = rl__mono_now();
        } else if (at > now && !atomic_load(&rl->wake_pending) && rl_spin_eligible(rl)) {
            learn_from = rl__spin_now();
            uint32_t budget = rl__spin_budget(&rl->spin);
            if (budget > 0) {
                rl__loop_unlock(rl);
                double left = (at - now) * 1e9;
                rl_spin_for_wake(rl, learn_from + (left < budget ? (int64_t)left : (int64_t)budget));
                rl__loop_lock(rl);
                at = rl__next_wake(rl, f); /* a timer may have come meanwhile */
                now = rl__mono_now();
            }
        }
        double left = at - now;
        if (left > 0) {
            /* Without the timerfd (the kernel refused to arm it) the wait
             * itself ends by `at`, rounded up to whole milliseconds. */
            bool armed = rl__arm_timerfd(rl, at);
            if (RL__UNLIKELY(!armed))
                rl_report_unarmed(errno);
            timeout = armed || isinf(left)     ? -1
                      : left >= INT_MAX / 1000 ? INT_MAX
                                               : (int)ceil(left * 1000);
        }
    } else if (rl_poll_needs_no_syscall(rl)) {
        rl__loop_unlock(rl);
        rl_flag_set(&rl->ignore_wakeups, 1);
        rl_flag_set(&rl->wake_pending, 0);
        return 0;
    }
    /* A wake-up already pending turns the wait into a poll, and a poll with
     * nothing to ask the kernel needs no system call. */
    if (atomic_load(&rl->wake_pending) && rl_poll_needs_no_syscall(rl)) {
        rl__loop_unlock(rl);
        rl_flag_set(&rl->ignore_wakeups, 1);
        rl_flag_set(&rl->wake_pending, 0);
        if (learn_from)
            rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, true);
        return 0;
    }
    atomic_store(&rl->sleeping, 1);
    rl__loop_unlock(rl);
    if (atomic_load(&rl->wake_pending))
        timeout = 0;
    int n = rl__poll_wait(rl, ev, maxev, timeout);
    int wait_err = n < 0 ? errno : 0;
    rl->nwaits++;
    rl_flag_set(&rl->ignore_wakeups, 1);
    atomic_store(&rl->sleeping, 0);
    bool woken = atomic_load(&rl->wake_pending) != 0;
    rl_flag_set(&rl->wake_pending, 0);
    bool user_fds = false;
    for (int i = 0; i < n; i++) {
        if (rl__ev_gen(&ev[i]) != 0) {
            user_fds = true;
        } else if (rl__ev_fd(&ev[i]) == rl->evfd) {
            woken = true; /* edge-triggered: nothing to read back */
        } else if (rl__ev_fd(&ev[i]) == rl->tfd) {
            /* Edge-triggered: nothing to read back (a system call less
             * between the wake-up and the timer's callout). */
            rl__loop_lock(rl);
            rl->armed_at = INFINITY;
            rl__loop_unlock(rl);
        } else if (rl__ev_fd(&ev[i]) == rl->mainq_fd) {
            rl->mainq_ready = true; /* served after the timers (rl_run_frame) */
        }
    }
    if (user_fds) {
        rl__loop_lock(rl);
        rl__fd_note_events(rl, ev, n);
        rl__loop_unlock(rl);
    }
    if (RL__UNLIKELY(n < 0)) {
        rl_report_failed_wait(rl, wait_err);
        return -1;
    }
    if (learn_from)
        rl__spin_learn(&rl->spin, rl__spin_now() - learn_from, woken);
    return n;
}

/* A fork() from a callout leaves the child inside a run of a loop it
 * inherited: the run ends there (kRLRunLoopRunFinished, error set) before
 * it waits on the parent's kernel objects or runs more of the parent's
 * work. */
static bool rl_left_by_fork(RLRunLoopRef rl) {
    if (RL__LIKELY(rl__of_this_process(rl)))
        return false;
    rl__fork_fail("RLRunLoopRunInMode", "run loop");
    return true;
}

static RLRunLoopRunResult rl_run_frame(RLRunLoopRef rl, rl_frame *f, bool poll_only, bool stop_after_handle) {
    struct epoll_event ev[64];
    rl_mode *m = f->mode;
    bool mainq_served = true; /* as CF: the first pass does not look before its wait */
    for (;;) {
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        rl_flag_set(&rl->ignore_wakeups, 0);
        rl_do_observers(rl, m, kRLRunLoopBeforeTimers);
        rl_do_observers(rl, m, kRLRunLoopBeforeSources);
        rl_do_blocks(rl, m);
        bool handled = rl_do_sources0(rl, m, stop_after_handle);
        if (handled)
            rl_do_blocks(rl, m);
        /* As CF: unless the pass before served the main queue, the queue
         * is looked at before the wait, and served without waiting. */
        bool mainq_looked = false;
        if (RL__UNLIKELY(rl->mainq) && !mainq_served) {
            mainq_looked = rl__mainq_serve(rl, m);
            handled |= mainq_looked;
        }
        mainq_served = mainq_looked;
        bool poll = handled || poll_only;
        if (!poll) {
            rl_pace_requests(rl);
            rl__perform_trim(&rl->pq, rl->pass_ran > 0);
            rl_do_observers(rl, m, kRLRunLoopBeforeWaiting);
        }
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        int n = rl_wait(rl, f, poll, ev, 64);
        if (RL__UNLIKELY(n < 0))
            return kRLRunLoopRunFinished; /* the wait failed: never a spin (rl_report_failed_wait) */
        uint64_t wait_no = rl->nwaits;
        if (!poll) {
            rl->pass_ran = 0; /* counted from each wait on */
            rl->pass_bulk = 0;
            rl->bulk_last = NULL;
        }
        if (!poll)
            rl_do_observers(rl, m, kRLRunLoopAfterWaiting);
        rl_do_timers(rl, m);
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        if (RL__UNLIKELY(rl->mainq_ready) && rl__mainq_serve(rl, m))
            handled = mainq_served = true;
        if (rl_do_fds(rl, m, ev, n, wait_no, stop_after_handle && !handled))
            handled = true;
        if (rl_left_by_fork(rl))
            return kRLRunLoopRunFinished;
        rl_do_blocks(rl, m);

        if (handled && stop_after_handle)
            return kRLRunLoopRunHandledSource;
        if (poll_only || rl__mono_now() >= f->deadline)
            return kRLRunLoopRunTimedOut;
        rl__loop_lock(rl);
        bool stopped = f->stopped;
        f->stopped = false;
        bool empty = rl_mode_has_no_items(rl, m); /* the same look as rl_mode_is_empty, under this one lock */
        rl__loop_unlock(rl);
        if (stopped)
            return kRLRunLoopRunStopped;
        if (empty && !rl__perform_has_for(&rl->pq, m))
            return kRLRunLoopRunFinished;
    }
}

typedef struct rl_run_state {
    RLRunLoopRef rl;
    rl_frame *f;
    int outer_ignore;
    RLRunLoopRunResult result;
} rl_run_state;

/* The end of a run, also when a callout ends the thread (RLThreadExit
 * unwinds through here): the frame leaves the loop's stack of runs, so
 * that nothing reaches it once it is gone. */
static void rl_run_leave(void *p) {
    rl_run_state *st = p;
    rl__loop_lock(st->rl);
    st->rl->frame = st->f->outer;
    rl__loop_unlock(st->rl);
    /* Back in the outer run's pass (or out of any run): its wake-up state. */
    atomic_store(&st->rl->ignore_wakeups, st->outer_ignore);
}

/* The mode to run, NULL if none or the loop is gone. Out of line: inlined
 * into rl_run, whose cleanup handler is a setjmp, gcc warns that the
 * lookup's locals might be clobbered. */
__attribute__((noinline)) static rl_mode *rl_run_mode(RLRunLoopRef rl, const char *mode) {
    rl__loop_lock(rl);
    rl_mode *m = atomic_load(&rl->dead) ? NULL : rl__mode_find(rl, mode);
    rl__loop_unlock(rl);
    return m;
}

static RLRunLoopRunResult rl_run(RLRunLoopRef rl, const char *mode, RLTimeInterval seconds, bool stop_after_handle) {
    rl_mode *m = rl_run_mode(rl, mode);
    if (!m || rl_mode_is_empty(rl, m))
        return kRLRunLoopRunFinished;
    /* As CF, whose wake-up state belongs to each run: wake-ups count from
     * the start of this run (its Entry observers included), and one still
     * pending from the enclosing run's pass (given before that pass's wait)
     * is kept, so this run's first wait returns at once. A wake-up given
     * while no run is going on was dropped when it was given (ignored
     * outside runs). */
    int outer_ignore = atomic_exchange(&rl->ignore_wakeups, 0);
    bool poll_only = !(seconds > 0);
    double deadline = poll_only ? 0 : (seconds > 1e10 ? INFINITY : rl__mono_now() + seconds);
    rl_frame f = {m, false, deadline, NULL};
    rl__loop_lock(rl);
    f.outer = rl->frame;
    rl->frame = &f;
    rl__loop_unlock(rl);

    rl_run_state st = {rl, &f, outer_ignore, 0};
    pthread_cleanup_push(rl_run_leave, &st);
    rl__cleanup_arg_escapes(&st);
    rl_do_observers(rl, m, kRLRunLoopEntry);
    /* As CF: a stop requested by an Entry observer ends the run before its
     * first pass. */
    rl__loop_lock(rl);
    bool stopped = f.stopped;
    f.stopped = false;
    rl__loop_unlock(rl);
    st.result = stopped ? kRLRunLoopRunStopped : rl_run_frame(rl, &f, poll_only, stop_after_handle);
    if (rl__of_this_process(rl)) /* else a fork() child left the parent's run */
        rl_do_observers(rl, m, kRLRunLoopExit);
    pthread_cleanup_pop(1);
    return st.result;
}

/* A run that cannot start returns kRLRunLoopRunFinished, as CF does for
 * the common pseudo-mode: a result is always one of the enum's values, so
 * a switch over it never falls through; the error says why. */
RLRunLoopRunResult RLRunLoopRunInMode(RLRunLoopMode mode, RLTimeInterval seconds, bool returnAfterSourceHandled) {
    const char *fn = __func__;
    if (!rl__mode_name_ok(mode, fn))
        return kRLRunLoopRunFinished;
    if (rl__is_common(mode)) {
        rl__fail(kRLErrorInvalidArgument, fn, "kRLRunLoopCommonModes is not a mode one can run in");
        return kRLRunLoopRunFinished;
    }
    if (isnan(seconds)) {
        rl__fail(kRLErrorInvalidArgument, fn, "NaN interval");
        return kRLRunLoopRunFinished;
    }
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    if (!rl)
        return kRLRunLoopRunFinished;
    return rl_run(rl, mode, seconds, returnAfterSourceHandled);
}

bool RLRunLoopIsFinished(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = __func__;
    if (!rl__check_loop(rl, fn) || !rl__mode_name_ok(mode, fn))
        return true;
    if (!pthread_equal(rl->thread, pthread_self())) {
        rl__fail(kRLErrorWrongThread, fn, "not the calling thread's run loop");
        return true;
    }
    if (rl__is_common(mode))
        return true;
    /* The same test as the start of a run (rl_run). */
    rl_mode *m = rl_run_mode(rl, mode);
    return !m || rl_mode_is_empty(rl, m);
}

RLRunLoopRunResult RLRunLoopRun(void) {
    RLRunLoopRunResult r;
    do {
        r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e10, false);
    } while (r != kRLRunLoopRunStopped && r != kRLRunLoopRunFinished);
    return r;
}

