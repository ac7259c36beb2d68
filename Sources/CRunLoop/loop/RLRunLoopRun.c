/*
 * RLRunLoopRun.c — the iteration: RunInMode/Run and one pass of it, in
 * CF's order (perform requests, observers, ready sources, the main queue,
 * the wait, due timers, ready fds). Whether a pass waits or only looks is
 * decided here; how it waits (sleep at once, or spin, pace, coalesce
 * first) is the wait policy's (rl_waitpolicy.h). The top floor of the
 * run-loop files: it calls into the timer and observer files (to fire and
 * notify) and down into the wait policy, the ready lists, the fd table,
 * wake-ups, modes and the perform queue; none of them calls back into it.
 */
#include "RLRunLoopMode.h"
#include "rl_pqueue.h"
#include "rl_fdtab.h"
#include "rl_health.h"
#include "rl_heap.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "rl_mainqueue.h"
#include "rl_ready.h"
#include "rl_waitpolicy.h"
#include "rl_wake.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <math.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>

/* The loop and mode whose perform requests are timed (do_blocks). */
typedef struct perform_timing_ctx {
    RLRunLoopRef rl;
    const char *mode;
} perform_timing_ctx;

/* A perform request timed (do_blocks; counted as callouts already):
 * the callout probes fire after it, start and end together. */
static void perform_timed(void *ctx, const void *fn, const void *arg, double took) {
    perform_timing_ctx *c = ctx;
    (void)arg;
    RL__PROBE3(callout_start, c->rl, (int)kRLCalloutPerform, fn);
    RL__PROBE4(callout_end, c->rl, (int)kRLCalloutPerform, fn, (unsigned long long)(took * 1e9));
    rl__health_after(c->rl, took, kRLCalloutPerform, fn, NULL, c->mode);
}

/* What the perform queue knows of mode m. */
static inline rl__perform_mode perform_mode(const rl__mode *m) {
    return (rl__perform_mode){m->name, m->common, m->is_default};
}

/* The perform requests for m that are queued: run, counted (do_blocks). */
static bool run_blocks(RLRunLoopRef rl, rl__mode *m) {
    rl__perform_mode pm = perform_mode(m);
    uint32_t n;
    if (RL__LIKELY((atomic_load_explicit(&rl__health_on, memory_order_relaxed) | RL__PROBE_ON(callout_start) |
                    RL__PROBE_ON(callout_end)) == 0)) {
        n = rl__perform_run(&rl->pq, &pm);
    } else {
        perform_timing_ctx c = {rl, m->name};
        rl__perform_timing t = {perform_timed, &c};
        n = rl__perform_run_timed(&rl->pq, &pm, &t);
    }
    if (n)
        rl__stats_callouts(rl, kRLCalloutPerform, n);
    rl->pass_ran += n;
    return n > 0;
}

/* Three times a pass, and most passes have no request: the look is inline,
 * the work out of line. */
static inline __attribute__((always_inline)) bool do_blocks(RLRunLoopRef rl, rl__mode *m) {
    if (RL__LIKELY(!rl__perform_maybe_pending(&rl->pq)))
        return false;
    return run_blocks(rl, m);
}

int rl__loop_poll_fd_for_tests(RLRunLoopRef rl) { return rl->kern.epfd; }

/* ------------------------------------------------------------------ */
/* the iteration                                                       */

/* Whether m has no source and no timer; on the main thread, the main
 * dispatch queue is a source of every common mode (rl_mainqueue.h); a
 * worker's loop kept alive is never empty in its common modes
 * (rl__loop_keep_alive). The loop lock held. */
static bool mode_has_no_items(RLRunLoopRef rl, rl__mode *m) {
    return rl__mode_empty(m, memory_order_relaxed) && !(rl->keep_alive && m->common) &&
           !rl__mainq_in_mode(rl, m);
}

/* mode_has_no_items at a pass's end, on the loop's thread: the count
 * without the lock; the main queue's part (the main loop only) under it. */
static inline bool mode_looks_empty(RLRunLoopRef rl, rl__mode *m) {
    if (!rl__mode_empty(m, memory_order_acquire) || (rl->keep_alive && m->common))
        return false;
    if (RL__LIKELY(!rl->mainq))
        return true;
    rl__loop_lock(rl);
    bool empty = mode_has_no_items(rl, m);
    rl__loop_unlock(rl);
    return empty;
}

static bool mode_is_empty(RLRunLoopRef rl, rl__mode *m) {
    rl__loop_lock(rl);
    bool empty = mode_has_no_items(rl, m);
    rl__loop_unlock(rl);
    rl__perform_mode pm = perform_mode(m);
    return empty && !rl__perform_has_for(&rl->pq, &pm);
}

/* What guards o held (its home's lock). */
static void observer_unpin(struct RLRunLoopObserver *o, rl__defer *d) {
    if (--o->pins > 0)
        return;
    for (; o->held_releases > 0; o->held_releases--)
        rl__defer_unhold(d, o);
}

/* After o's callout (if `went`): unpins it, and invalidates a one-shot
 * observer. rl locked; o normally at home in rl, but a callout may have
 * moved it to another loop: then its home's lock is taken instead, rl's
 * dropped meanwhile (never both). */
static void observer_after(RLRunLoopRef rl, struct RLRunLoopObserver *o, bool went, rl__defer *d) {
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
    observer_unpin(o, d);
    if (RL__UNLIKELY(h != rl)) {
        rl__item_unlock(o, RL_KIND_OBSERVER, h);
        rl__loop_lock(rl);
    }
}

/* The observers of m for act, called (do_observers). Out of line: its
 * array stays off the run's frame. */
static __attribute__((noinline)) void observe(RLRunLoopRef rl, rl__mode *m, RLRunLoopActivity act) {
    struct RLRunLoopObserver *small[16], **list = small;
    size_t n = 0;
    rl__defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    if (m->nobservers > 16)
        list = malloc(m->nobservers * sizeof *list);
    rl__memb *x;
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
            RL__CALLOUT(rl, kRLCalloutObserver, o->callout, o, m->name, o->callout(o, act, o->ctx.info));
        rl__loop_lock(rl);
        observer_after(rl, o, go, &d);
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

/* Most passes have no observer for most activities: the look is inline
 * (four a pass, no call each) and takes no lock. A stale read only means
 * an observer added from another thread this very moment is called from
 * the next activity on. */
static inline void do_observers(RLRunLoopRef rl, rl__mode *m, RLRunLoopActivity act) {
    if (atomic_load_explicit(&m->observer_mask, memory_order_relaxed) & act)
        observe(rl, m, act);
}

/* The signalled sources of m, performed; called with the loop lock held
 * (do_sources0), which it drops before the callouts. Out of line: its
 * array of 16 stays off the run's frame, which is under every callout and
 * nested run (a sleeping loop thread's stack pages are its memory:
 * test_loop_memory). */
static __attribute__((noinline)) bool perform_sources0(RLRunLoopRef rl, rl__mode *m, bool stop_after_handle) {
    struct RLRunLoopSource *small[16], **a = small;
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
    struct rl__inflight fl = {a, 0, n, false, m->inflight};
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
        rl__memb *x = go && requeued ? rl__memb_find(s, RL_KIND_SOURCE, m) : NULL;
        rl__olock_unlock(&s->lock);
        if (RL__UNLIKELY(requeued)) {
            /* A nested pass put it back on the list: it leaves again. */
            if (x)
                rl__ready_unlink(x);
            rl__loop_unlock(rl);
        }
        if (go)
            atomic_thread_fence(memory_order_seq_cst); /* pairs with rl__source_signal's */
        void (*perform)(void *) = rl__source_ctx(s)->perform;
        if (go && perform) {
            RL__CALLOUT(rl, kRLCalloutSource, perform, s, m->name, perform(s->tail[0].ctx.info));
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

/* Every pass, and most have no signalled source: the look is inline, the
 * work out of line. */
static inline __attribute__((always_inline)) bool do_sources0(RLRunLoopRef rl, rl__mode *m, bool stop_after_handle) {
    rl__loop_lock(rl);
    if (RL__UNLIKELY(rl__inbox_any(rl)))
        rl__inbox_drain(rl); /* other threads' signals, onto the ready lists */
    if (RL__LIKELY(m->nready == 0 && m->inflight == NULL)) {
        rl__loop_unlock(rl);
        return false;
    }
    return perform_sources0(rl, m, stop_after_handle);
}

static int cmp_timer_memb(const void *x, const void *y) {
    const struct RLRunLoopTimer *a = (*(rl__memb *const *)x)->item, *b = (*(rl__memb *const *)y)->item;
    if (a->fire_date != b->fire_date)
        return a->fire_date < b->fire_date ? -1 : 1;
    return rl__timer_stamp_before(a, b) ? -1 : rl__timer_stamp_before(b, a);
}

/* Whether t fires now (`now` read after the wait), under rl's lock: only
 * at home in rl is its state under rl's lock (a callout may have moved it
 * meanwhile); m is a mode of rl, so a membership in m means t is in rl.
 * When it fires it is marked firing. */
static inline bool timer_claim_locked(RLRunLoopRef rl, rl__mode *m, struct RLRunLoopTimer *t, RLAbsoluteTime now) {
    if (!(rl__home_get(t, RL_KIND_TIMER) == rl && t->valid && !t->firing && t->fire_date <= now &&
          rl__memb_in_mode(t, RL_KIND_TIMER, m)))
        return false;
    t->firing = true;
    t->moved_in_fire = false;
    t->ctx_pinned = rl__timer_ctx_retain(t) != NULL;
    return true;
}

/* Fires t, claimed already (do_timers claims the first due timer under the
 * lock it collected it under: nothing ran in between) or not. Inline: one
 * caller, and a timer's wake-up is mostly this. */
static inline __attribute__((always_inline)) void fire_timer(RLRunLoopRef rl, rl__mode *m, struct RLRunLoopTimer *t,
                                                            bool claimed) {
    if (!claimed) {
        RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
        rl__loop_lock(rl);
        bool go = timer_claim_locked(rl, m, t, now);
        rl__loop_unlock(rl);
        if (!go)
            return;
    }
    /* As CF: the callout holds its own reference on info (the context's
     * retain and release around it), so it may invalidate and release its
     * own timer and still use info. The context is fixed at creation; what
     * could free info meanwhile, an invalidation, waits for the pin. */
    void *info = t->info;
    const void *(*retain)(const void *) = rl__timer_ctx_retain(t);
    void (*release)(const void *) = retain ? rl__timer_ctx_release(t) : NULL;
    if (retain) {
        info = (void *)retain(info);
        rl__defer pd;
        rl__defer_init(&pd);
        RLRunLoopRef ph = rl__item_lock(t, RL_KIND_TIMER); /* rl, unless the retain callback moved it */
        t->ctx_pinned = false;
        if (t->ctx_release_held) {
            t->ctx_release_held = false;
            rl__defer_ctx_release(&pd, release, t->info);
        }
        rl__item_unlock(t, RL_KIND_TIMER, ph);
        if (pd.n)
            rl__defer_run(&pd);
    }
    if (t->callout) /* a timer without a callout keeps its mode alive and does nothing */
        RL__CALLOUT(rl, kRLCalloutTimer, t->callout, t, m->name, t->callout(t, info));
    if (release)
        release(info);
    rl__defer d;
    rl__defer_init(&d);
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER); /* rl, unless the callout moved it */
    t->firing = false;
    rl__timer_after_fire_locked(t, RLAbsoluteTimeGetCurrent(), &d);
    rl__item_unlock(t, RL_KIND_TIMER, h);
    rl__defer_run(&d);
}

/* The timers of m that are due now, fired in order; called with the loop
 * lock held (do_timers), which it drops before the callouts. Out of line:
 * its deferred work (two rl__defer) stays off the run's frame. */
static __attribute__((noinline)) void fire_due_timers(RLRunLoopRef rl, rl__mode *m) {
    rl__memb **due = rl->due;
    size_t n = 0, cap = rl->capdue;
    rl->due = NULL;
    rl->capdue = 0;
    RLAbsoluteTime now = RLAbsoluteTimeGetCurrent();
    rl__tset_collect_due(&m->timers, now, &due, &n, &cap);
    if (n > 1)
        qsort(due, n, sizeof *due, cmp_timer_memb);
    bool timed = atomic_load_explicit(&rl->timing_on, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        due[i] = due[i]->item; /* keep the timer, not the membership */
        rl__retain_raw(due[i]);
        double late = now - ((struct RLRunLoopTimer *)due[i])->fire_date;
        if (RL__UNLIKELY(timed))
            rl__stats_timer_late(rl, late);
        RL__PROBE3(timer_fire, rl, due[i], (long long)(late * 1e9));
    }
    /* The first is claimed under this lock: no callout ran since it was
     * found due. The others are looked at again as their turn comes. */
    bool first = n > 0 && timer_claim_locked(rl, m, (struct RLRunLoopTimer *)due[0], now);
    rl__loop_unlock(rl);
    for (size_t i = 0; i < n; i++) {
        struct RLRunLoopTimer *t = (struct RLRunLoopTimer *)due[i];
        if (RL__LIKELY(rl__of_this_process(rl))) /* else a callout forked: the parent fires the rest */
            fire_timer(rl, m, t, i == 0 && first);
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

/* Every pass, and most have no timer in their mode (an fd's wake-up): the
 * look is inline, the work out of line. */
static inline __attribute__((always_inline)) void do_timers(RLRunLoopRef rl, rl__mode *m) {
    /* Without the lock (rl__mode.counts): a timer added on this thread is
     * counted; one another thread adds now wakes the loop for the next
     * pass. No lock and no clock read for a mode without timers. */
    if (!rl__mode_has_timers(m, memory_order_acquire))
        return;
    rl__loop_lock(rl);
    fire_due_timers(rl, m);
}

/* The callouts of the fds the wait numbered wait_no reported. Out of line:
 * its array of 64 callouts stays off the run's frame, so a sleeping loop
 * thread touches a stack page less (test_loop_memory). */
static __attribute__((noinline)) bool do_fds(RLRunLoopRef rl, rl__mode *m, struct epoll_event *ev, int nev, uint64_t wait_no,
                      bool stop_after_handle) {
    rl__fd_fire inl[64], *fire = inl;
    size_t cap = 64;
    rl__loop_lock(rl);
    size_t n = rl__fd_collect(rl, m, ev, nev, wait_no, stop_after_handle, &fire, inl, &cap);
    rl__loop_unlock(rl);
    for (size_t i = 1; i < n; i++) { /* insertion sort by order */
        rl__fd_fire x = fire[i];
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
        bool go = rl__peek(s->valid) && rl__peek(rl__fdst(s)->valid);
        if (go) {
            rl->fd_pass_left = n - i - 1;
            /* a run nested in a callout makes callouts of its own */
            struct RLRunLoopSource *outer = rl->src_in_callout;
            bool outer_quiet = rl->fd_quiet;
            rl->src_in_callout = s;
            rl->fd_quiet = fire[i].quiet;
            RLFileDescriptorCallBack fn;
            void *info;
            RLCalloutKind kind;
            void *owner = rl__fdsrc_owner(s); /* the first object of the source's block */
            if (rl__fdsrc_of_program(s)) { /* an RLFileDescriptor: a program's, or a port's or a signal source's */
                const struct RLFileDescriptor *f = owner;
                fn = f->ctx.callout;
                info = f->ctx.info;
                kind = f->ctx.owner_how ? (RLCalloutKind)f->ctx.owner_how->kind : kRLCalloutFileDescriptor;
            } else { /* an RLSocket's: the socket is its info */
                const struct rl__callout_owner *how = __atomic_load_n(&rl__fd_part_how, __ATOMIC_RELAXED);
                fn = how->part_callout;
                info = owner;
                kind = (RLCalloutKind)how->kind;
            }
            RL__CALLOUT(rl, kind, fn, s, m->name, fn((RLFileDescriptorRef)owner, fire[i].types, info));
            rl->src_in_callout = outer;
            rl->fd_quiet = outer_quiet;
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


/* The wait of a pass (or, with `poll`, its look): what the loop watches is
 * brought in line with the run's mode, a few more reasons to only look
 * are taken in, and the wait policy waits (rl_waitpolicy.h: how, through
 * which kernel calls, and what the events say). Returns the number of
 * events in ev, or -1 when the kernel refused the wait (the error set:
 * the run ends). */
static int loop_wait(RLRunLoopRef rl, rl__frame *f, bool poll, struct epoll_event *ev, int maxev, bool *fd_work) {
    rl__loop_lock(rl);
    if (rl->tfd_expired) { /* the last wait's timerfd expiry (rl__wait) */
        rl->tfd_expired = false;
        rl->armed_at = INFINITY;
    }
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
    bool always = rl->nalways != 0;
    int n = rl__wait(rl, f, poll, ev, maxev); /* returns without the loop lock */
    *fd_work = always || rl->wait_fds;
    return n;
}

/* A fork() from a callout leaves the child inside a run of a loop it
 * inherited: the run ends there (kRLRunLoopRunFinished, error set) before
 * it waits on the parent's kernel objects or runs more of the parent's
 * work. */
static bool left_by_fork(RLRunLoopRef rl) {
    if (RL__LIKELY(rl__of_this_process(rl)))
        return false;
    rl__fork_fail("RLRunLoopRunInMode", "run loop");
    return true;
}

/* A wait's events: a few on the run's frame, which is under every callout
 * and under the wait (a sleeping loop thread's stack pages are its
 * memory), or a batch in the loop's own array, made the first time a wait
 * filled the few (a loop with many ready fds keeps its batch). The array
 * holds them from the wait to the fd callouts; a run nested in a callout
 * in between waits with its own few. What a wait did not take stays ready
 * in the kernel (or the backend's queue) for the next. */
enum { EV_FEW = 8, EV_BATCH = 64 };

static inline struct epoll_event *ev_take(RLRunLoopRef rl, struct epoll_event *few, int *max) {
    if (RL__LIKELY(!rl->ev_big) || rl->ev_big_busy) {
        *max = EV_FEW;
        return few;
    }
    rl->ev_big_busy = true;
    *max = EV_BATCH;
    return rl->ev_big;
}

/* After the pass's fd callouts (or a run's end before them); n events came
 * in ev. */
static inline void ev_give(RLRunLoopRef rl, struct epoll_event *ev, int n) {
    if (ev == rl->ev_big)
        rl->ev_big_busy = false;
    else if (RL__UNLIKELY(n == EV_FEW) && !rl->ev_big)
        rl->ev_big = malloc(EV_BATCH * sizeof *ev); /* without memory: the few */
}

/* Whether a run's deadline (monotonic seconds) has passed: the end of
 * each pass asks. Without one (INFINITY), no clock is read; a second or
 * more short of it, the coarse clock answers (rl__mono_now_before). */
static inline bool pass_past_deadline(double deadline) {
    return !isinf(deadline) && rl__mono_now_before(deadline) >= deadline;
}

static RLRunLoopRunResult run_frame(RLRunLoopRef rl, rl__frame *f, bool poll_only, bool stop_after_handle) {
    struct epoll_event few[EV_FEW];
    rl__mode *m = f->mode;
    bool mainq_served = true; /* as CF: the first pass does not look before its wait */
    for (;;) {
        if (left_by_fork(rl))
            return kRLRunLoopRunFinished;
        rl__count(&rl->counters.passes, 1);
        RL__PROBE2(pass_start, rl, m->name);
        rl__flag_set(&rl->ignore_wakeups, 0);
        do_observers(rl, m, kRLRunLoopBeforeTimers);
        do_observers(rl, m, kRLRunLoopBeforeSources);
        do_blocks(rl, m);
        bool handled = do_sources0(rl, m, stop_after_handle);
        if (handled)
            do_blocks(rl, m);
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
            rl__wait_pace(rl);
            rl__perform_trim(&rl->pq, rl->pass_ran > 0);
            do_observers(rl, m, kRLRunLoopBeforeWaiting);
        }
        if (left_by_fork(rl))
            return kRLRunLoopRunFinished;
        if (!poll)
            rl__stats_sleep_begin(rl);
        bool fd_work; /* fd callouts to look for: most timer wake-ups have none */
        int maxev;
        struct epoll_event *ev = ev_take(rl, few, &maxev);
        int n = loop_wait(rl, f, poll, ev, maxev, &fd_work);
        if (!poll)
            rl__stats_sleep_end(rl);
        if (RL__UNLIKELY(n < 0)) {
            ev_give(rl, ev, 0);
            return kRLRunLoopRunFinished; /* the kernel refused the wait: never a busy loop (rl_waitpolicy.c) */
        }
        uint64_t wait_no = rl->nwaits;
        if (!poll)
            do_observers(rl, m, kRLRunLoopAfterWaiting);
        do_timers(rl, m);
        if (left_by_fork(rl))
            return kRLRunLoopRunFinished;
        if (RL__UNLIKELY(rl->mainq_ready) && rl__mainq_serve(rl, m))
            handled = mainq_served = true;
        if (fd_work && do_fds(rl, m, ev, n, wait_no, stop_after_handle && !handled))
            handled = true;
        ev_give(rl, ev, n);
        if (left_by_fork(rl))
            return kRLRunLoopRunFinished;
        do_blocks(rl, m);
        RL__PROBE1(pass_end, rl);

        if (handled && stop_after_handle)
            return kRLRunLoopRunHandledSource;
        if (poll_only || pass_past_deadline(f->deadline))
            return kRLRunLoopRunTimedOut;
        /* Neither look takes the lock: what they read is written under
         * it (RLRunLoopStop, the mode's counts) and a change that misses
         * this pass is seen by the next, as one made just after it. */
        if (atomic_load_explicit(&f->stopped, memory_order_acquire))
            return kRLRunLoopRunStopped;
        if (mode_looks_empty(rl, m)) {
            rl__perform_mode pm = perform_mode(m);
            if (!rl__perform_has_for(&rl->pq, &pm))
                return kRLRunLoopRunFinished;
        }
    }
}

typedef struct run_state {
    RLRunLoopRef rl;
    rl__frame *f;
    int outer_ignore;
    RLRunLoopRunResult result;
} run_state;

/* The end of a run, also when a callout ends the thread (RLThreadExit
 * unwinds through here): the frame leaves the loop's stack of runs, so
 * that nothing reaches it once it is gone. */
static void run_leave(void *p) {
    run_state *st = p;
    if (rl__of_this_process(st->rl))
        rl__poll_flush(&st->rl->kern); /* sends queued by the run's callouts go now (rl_txq.h) */
    rl__loop_lock(st->rl);
    st->rl->frame = st->f->outer;
    rl__loop_unlock(st->rl);
    /* Back in the outer run's pass (or out of any run): its wake-up state. */
    atomic_store(&st->rl->ignore_wakeups, st->outer_ignore);
    rl__stats_run_leave(st->rl);
}

/* The mode to run, NULL if none or the loop is gone. A common mode of a
 * loop kept alive is made if it was not yet (as the item that keeps it
 * alive would have made it). Out of line: inlined into run_in_mode, whose
 * cleanup handler is a setjmp, gcc warns that the lookup's locals might be
 * clobbered. */
__attribute__((noinline)) static rl__mode *run_mode(RLRunLoopRef rl, const char *mode, const char *fn) {
    rl__loop_lock(rl);
    rl__mode *m = atomic_load(&rl->dead) ? NULL : rl__mode_find(rl, mode);
    if (RL__UNLIKELY(!m && rl->keep_alive) && !atomic_load(&rl->dead) && rl__common_find(rl, mode))
        m = rl__mode_new(rl, mode, fn);
    rl__loop_unlock(rl);
    return m;
}

static RLRunLoopRunResult run_in_mode(RLRunLoopRef rl, const char *mode, RLTimeInterval seconds, bool stop_after_handle) {
    rl__mode *m = run_mode(rl, mode, "RLRunLoopRunInMode");
    if (!m || mode_is_empty(rl, m)) {
        /* No run, but sends a timeout left queued in the ring (rl_txq.h)
         * are seen through as at a run's end. */
        if (rl__of_this_process(rl))
            rl__poll_flush(&rl->kern);
        return kRLRunLoopRunFinished;
    }
    /* As CF, whose wake-up state belongs to each run: wake-ups count from
     * the start of this run (its Entry observers included), and one still
     * pending from the enclosing run's pass (given before that pass's wait)
     * is kept, so this run's first wait returns at once. A wake-up given
     * while no run is going on was dropped when it was given (ignored
     * outside runs). */
    int outer_ignore = atomic_exchange(&rl->ignore_wakeups, 0);
    bool poll_only = !(seconds > 0);
    double deadline = poll_only ? 0 : (seconds > 1e10 ? INFINITY : rl__mono_now() + seconds);
    rl__frame f = {m, false, deadline, NULL};
    rl__loop_lock(rl);
    f.outer = rl->frame;
    rl->frame = &f;
    rl__loop_unlock(rl);

    run_state st = {rl, &f, outer_ignore, 0};
    pthread_cleanup_push(run_leave, &st);
    rl__cleanup_arg_escapes(&st);
    rl__stats_run_enter(rl);
    do_observers(rl, m, kRLRunLoopEntry);
    /* As CF: a stop requested by an Entry observer ends the run before its
     * first pass. */
    bool stopped = atomic_load_explicit(&f.stopped, memory_order_acquire);
    st.result = stopped ? kRLRunLoopRunStopped : run_frame(rl, &f, poll_only, stop_after_handle);
    if (rl__of_this_process(rl)) /* else a fork() child left the parent's run */
        do_observers(rl, m, kRLRunLoopExit);
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
    return run_in_mode(rl, mode, seconds, returnAfterSourceHandled);
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
    /* The same test as the start of a run (run_in_mode). */
    rl__mode *m = run_mode(rl, mode, fn);
    return !m || mode_is_empty(rl, m);
}

RLRunLoopRunResult RLRunLoopRun(void) {
    RLRunLoopRunResult r;
    do {
        r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e10, false);
    } while (r != kRLRunLoopRunStopped && r != kRLRunLoopRunFinished);
    return r;
}

