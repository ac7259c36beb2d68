/* RLRunLoopTimer.c — timers: grid rescheduling, tolerance, moves from any
 * thread. The heaps themselves live in rl_heap.c; the firing in RLRunLoopRun.c. */
#include "rl_heap.h"
#include "rl_stamp.h"
#include "rl_lock.h"
#include "RLRunLoopMembership.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopTimer.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Dates beyond this are "never" (CF clamps likewise); keeps arithmetic finite. */
#define RL_FAR_FUTURE 9.0e15

/* ---- the context callbacks' pairs (runloop_internal.h: rl__timer_cbs) ----
 * Numbered from 1 as they first come, without a lock (fork-safe, and a
 * creation waits for nobody): a slot is claimed by an atomic add, written,
 * then marked ready; a lookup reads only ready slots. Two threads naming
 * one new pair at once may both claim a slot for it, which costs a slot.
 * Once all are claimed, timers keep their callbacks in their extension. */
rl__timer_cbs rl__timer_cbs_table[RL__TIMER_CBS];
static _Atomic bool cbs_ready[RL__TIMER_CBS];
static _Atomic unsigned cbs_claimed; /* slots 1..cbs_claimed are claimed */

static uint8_t cbs_lookup(const void *(*retain)(const void *), void (*release)(const void *)) {
    unsigned n = atomic_load_explicit(&cbs_claimed, memory_order_acquire);
    for (unsigned i = 1; i <= n && i < RL__TIMER_CBS; i++)
        if (atomic_load_explicit(&cbs_ready[i], memory_order_acquire) && rl__timer_cbs_table[i].retain == retain &&
            rl__timer_cbs_table[i].release == release)
            return (uint8_t)i;
    return 0;
}

/* The number of the pair (retain, release), named now if it is new; 0 if
 * every slot is taken. */
static uint8_t cbs_number(const void *(*retain)(const void *), void (*release)(const void *)) {
    uint8_t k = cbs_lookup(retain, release);
    if (RL__LIKELY(k))
        return k;
    if (atomic_load_explicit(&cbs_claimed, memory_order_relaxed) >= RL__TIMER_CBS - 1)
        return 0;
    unsigned i = atomic_fetch_add_explicit(&cbs_claimed, 1, memory_order_relaxed) + 1;
    if (i >= RL__TIMER_CBS)
        return 0;
    rl__timer_cbs_table[i] = (rl__timer_cbs){retain, release};
    atomic_store_explicit(&cbs_ready[i], true, memory_order_release);
    return (uint8_t)i;
}

static void timer_finalize(void *obj) {
    struct RLRunLoopTimer *t = obj;
    rl__item_leave_home(t, RL_KIND_TIMER);
    void (*release)(const void *) = rl__timer_ctx_release(t);
    if (t->valid && release)
        release(t->info);
    rl__timer_ext *x = rl__timer_ext_of(t);
    if (x)
        free(x); /* its list is empty: each membership held a reference */
}

/* Another thread may move the date or invalidate the timer meanwhile: the
 * fields are copied under the lock that guards them, printed after. */
static char *timer_describe(const void *obj) {
    struct RLRunLoopTimer *t = (struct RLRunLoopTimer *)obj;
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    RLAbsoluteTime fire_date = t->fire_date;
    RLTimeInterval interval = rl__timer_interval(t), tolerance = rl__timer_tolerance(t);
    bool valid = t->valid;
    rl__item_unlock(t, RL_KIND_TIMER, h);
    char *out = NULL;
    if (asprintf(&out, "<RLRunLoopTimer %p fireDate %.6f interval %g tolerance %g%s>", obj, fire_date, interval,
                 tolerance, valid ? "" : " invalid") < 0)
        out = NULL;
    return out;
}

/* The timer's last counted reference goes (rl__kept_class.last_release): while
 * its inline membership's virtual reference is there (inline_used) the timer stays,
 * the loop's, at count 0 (an orphan), and the end of that membership
 * finalizes it. The drop to 0 and the loop's look at the count when it ends
 * the membership (rl__timer_vref_drop_locked) are both under the home's
 * loop lock: exactly one of them finalizes. A homeless timer has no
 * virtual reference: one is made only at home, by an add, which needs a
 * reference, and the caller holds the last one. */
static int timer_last_release(void *obj, long step, const char *fn) {
    struct RLRunLoopTimer *t = obj;
    if (!atomic_load_explicit(&t->home, memory_order_relaxed))
        return RL__LAST_PLAIN;
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    rl__object *o = obj;
    long rc = atomic_load_explicit(&o->rc, memory_order_relaxed), count;
    for (;;) {
        count = rc & RL__RC_MASK;
        long kept = rc / RL__HELD_ONE;
        if (RL__UNLIKELY(count <= 0 || (step == 1 && count <= kept))) {
            rl__item_unlock(t, RL_KIND_TIMER, h);
            if (step == 1)
                (void)rl__object_not_owner(obj, fn);
            else
                (void)rl__fail(kRLErrorInvalidObject, fn, "%p was already released", obj);
            return RL__LAST_FAILED;
        }
        if (atomic_compare_exchange_weak_explicit(&o->rc, &rc, rc - step, memory_order_release,
                                                  memory_order_relaxed))
            break;
    }
    int r = RL__LAST_DONE;
    if (count == 1 && !(h && t->inline_used)) {
        r = RL__LAST_FINALIZE;
        /* In no mode (every membership holds a reference): it leaves home
         * now, and its finalizer finds it homeless (one lock round less). */
        if (h)
            rl__home_clear_locked(h, t, RL_KIND_TIMER);
    }
    rl__item_unlock(t, RL_KIND_TIMER, h);
    return r;
}

/* RLGetRetainCount counts the loop's reference, virtual or not (as CF). */
static long timer_count_extra(const void *obj) {
    struct RLRunLoopTimer *t = (struct RLRunLoopTimer *)obj;
    if (!atomic_load_explicit(&t->home, memory_order_relaxed))
        return 0;
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    long n = h && t->inline_used;
    rl__item_unlock(t, RL_KIND_TIMER, h);
    return n;
}

const rl__class rl__timer_class = {"RLRunLoopTimer", timer_finalize, NULL, timer_describe};
static const rl__kept_class timer_kept = {&rl__timer_class, timer_last_release, timer_count_extra};

RLTypeID RLRunLoopTimerGetTypeID(void) { return rl__type_id(&rl__timer_class); }

static bool timer_ok(RLRunLoopTimerRef t, const char *fn) { return rl__object_check(t, &rl__timer_class, fn); }

static double clamp_date(double d) {
    if (d > RL_FAR_FUTURE)
        return RL_FAR_FUTURE;
    if (d < -RL_FAR_FUTURE)
        return -RL_FAR_FUTURE;
    return d;
}

RLRunLoopTimerRef RLRunLoopTimerCreate(RLAllocatorRef allocator, RLAbsoluteTime fireDate, RLTimeInterval interval,
                                       RLOptionFlags flags, RLIndex order, RLRunLoopTimerCallBack callout,
                                       RLRunLoopTimerContext *context) {
    const char *fn = __func__;
    if (isnan(fireDate) || isnan(interval)) {
        rl__fail(kRLErrorInvalidArgument, fn, "NaN fire date or interval");
        return NULL;
    }
    if (context && context->version != 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)", context->version);
        return NULL;
    }
    rl__object_set_kept_class(&timer_kept); /* before any timer is shared */
    struct RLRunLoopTimer *t = rl__object_alloc_packed(&rl__timer_class, sizeof *t, fn);
    if (!t)
        return NULL;
    /* Its inline membership's item and kind never change: set once here,
     * so that the hot paths of adding it (RLRunLoopMembership.c) skip them. */
    rl__timer_inline_memb(t)->item = t;
    rl__timer_inline_memb(t)->kind = RL_KIND_TIMER;
    t->fire_date = clamp_date(fireDate);
    interval = interval > 0 ? (interval > RL_FAR_FUTURE ? RL_FAR_FUTURE : interval) : 0;
    const void *(*retain)(const void *) = context ? context->retain : NULL;
    void (*release)(const void *) = context ? context->release : NULL;
    t->cbs = retain || release ? cbs_number(retain, release) : 0;
    bool cbs_in_ext = (retain || release) && !t->cbs;
    if (interval > 0 || order != 0 || (context && context->copyDescription) || cbs_in_ext) {
        rl__timer_ext *x = rl__timer_ext_make(t);
        if (!x) {
            RLRelease(t);
            rl__fail(kRLErrorNoMemory, fn, "out of memory");
            return NULL;
        }
        x->interval = interval;
        x->order = order;
        if (cbs_in_ext) {
            x->retain = retain;
            x->release = release;
        }
        x->copyDescription = context ? context->copyDescription : NULL;
        t->repeats = interval > 0;
    }
    rl__timer_stamp_locked(t);
    t->callout = callout;
    t->valid = true;
    if (context) {
        t->info = context->info;
        if (retain)
            t->info = (void *)retain(t->info);
    }
    return t;
}

#if __BLOCKS__
typedef void (^timer_block)(RLRunLoopTimerRef);

static void timer_call_block(RLRunLoopTimerRef t, void *info) { ((timer_block)info)(t); }
static void timer_release_block(const void *info) { Block_release((timer_block)info); }

RLRunLoopTimerRef RLRunLoopTimerCreateWithHandler(RLAllocatorRef allocator, RLAbsoluteTime fireDate,
                                                  RLTimeInterval interval, RLOptionFlags flags, RLIndex order,
                                                  void (^block)(RLRunLoopTimerRef timer)) {
    if (!block) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
        return NULL;
    }
    RLRunLoopTimerContext ctx = {0, (void *)Block_copy(block), NULL, timer_release_block, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(allocator, fireDate, interval, flags, order, timer_call_block, &ctx);
    if (!t)
        Block_release((timer_block)ctx.info);
    return t;
}
#endif

RLAbsoluteTime RLRunLoopTimerGetNextFireDate(RLRunLoopTimerRef t) {
    if (!timer_ok(t, __func__))
        return 0;
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    RLAbsoluteTime d = t->valid ? t->fire_date : 0; /* as CF: no next fire for an invalidated timer */
    rl__item_unlock(t, RL_KIND_TIMER, h);
    return d;
}

bool RLRunLoopTimerSetNextFireDate(RLRunLoopTimerRef t, RLAbsoluteTime fireDate) {
    const char *fn = __func__;
    if (!timer_ok(t, fn))
        return false;
    if (isnan(fireDate))
        return rl__fail(kRLErrorInvalidArgument, fn, "NaN date");
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    bool ok = t->valid;
    if (ok) {
        t->fire_date = clamp_date(fireDate);
        rl__timer_ext *x = rl__timer_ext_of(t);
        if (x) { /* a new grid starts here */
            x->anchor = t->fire_date;
            x->ticks = 0;
        }
        rl__timer_stamp_locked(t);
        if (t->firing)
            t->moved_in_fire = true;
        rl__timer_moved_locked(t);
    }
    rl__item_unlock(t, RL_KIND_TIMER, h);
    if (!ok)
        return rl__fail(kRLErrorInvalidObject, fn, "the timer has been invalidated");
    return true;
}

RLTimeInterval RLRunLoopTimerGetInterval(RLRunLoopTimerRef t) {
    return timer_ok(t, __func__) ? rl__timer_interval(t) : 0;
}

bool RLRunLoopTimerDoesRepeat(RLRunLoopTimerRef t) {
    return timer_ok(t, __func__) && rl__timer_interval(t) > 0;
}

RLIndex RLRunLoopTimerGetOrder(RLRunLoopTimerRef t) {
    if (!timer_ok(t, __func__))
        return 0;
    const rl__timer_ext *x = rl__timer_ext_of(t);
    return x ? x->order : 0;
}

/* Invalidates; what guards the item held (rl__item_lock). */
static void timer_invalidate_locked(struct RLRunLoopTimer *t, rl__defer *d) {
    if (!t->valid)
        return;
    t->valid = false;
    rl__remove_item_everywhere_locked(t, RL_KIND_TIMER, d);
    /* As CF: an invalidated timer gives its context back at once (unless
     * the fire path is retaining info right now: it releases it then). */
    if (t->ctx_pinned)
        t->ctx_release_held = true;
    else
        rl__defer_ctx_release(d, rl__timer_ctx_release(t), t->info);
}

bool RLRunLoopTimerInvalidate(RLRunLoopTimerRef t) {
    if (!timer_ok(t, __func__))
        return false;
    rl__defer d;
    rl__defer_init(&d);
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    timer_invalidate_locked(t, &d);
    rl__item_unlock(t, RL_KIND_TIMER, h);
    rl__defer_run(&d);
    return true;
}

bool RLRunLoopTimerIsValid(RLRunLoopTimerRef t) {
    if (!timer_ok(t, __func__))
        return false;
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    bool v = t->valid;
    rl__item_unlock(t, RL_KIND_TIMER, h);
    return v;
}

bool RLRunLoopTimerGetContext(RLRunLoopTimerRef t, RLRunLoopTimerContext *context) {
    const char *fn = __func__;
    if (!timer_ok(t, fn))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
    const rl__timer_ext *x = rl__timer_ext_of(t);
    *context = (RLRunLoopTimerContext){0, t->info, rl__timer_ctx_retain(t), rl__timer_ctx_release(t),
                                       x ? x->copyDescription : NULL};
    return true;
}

RLTimeInterval RLRunLoopTimerGetTolerance(RLRunLoopTimerRef t) {
    if (!timer_ok(t, __func__))
        return -1;
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    RLTimeInterval tol = rl__timer_tolerance(t);
    rl__item_unlock(t, RL_KIND_TIMER, h);
    return tol;
}

bool RLRunLoopTimerSetTolerance(RLRunLoopTimerRef t, RLTimeInterval tolerance) {
    const char *fn = __func__;
    if (!timer_ok(t, fn))
        return false;
    if (isnan(tolerance) || tolerance < 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "tolerance must be >= 0");
    RLTimeInterval interval = rl__timer_interval(t);
    if (interval > 0 && tolerance > interval / 2)
        tolerance = interval / 2;
    if (tolerance > RL_FAR_FUTURE)
        tolerance = RL_FAR_FUTURE;
    RLRunLoopRef h = rl__item_lock(t, RL_KIND_TIMER);
    bool ok = t->valid;
    /* A tolerance is kept in the extension (made for the first one). */
    rl__timer_ext *x = ok && tolerance > 0 ? rl__timer_ext_make(t) : rl__timer_ext_of(t);
    bool mem = x || tolerance == 0;
    if (ok && mem) {
        if (x)
            x->tolerance = tolerance;
        t->tolerant = tolerance > 0;
        rl__timer_moved_locked(t);
    }
    rl__item_unlock(t, RL_KIND_TIMER, h);
    if (!ok)
        return rl__fail(kRLErrorInvalidObject, fn, "the timer has been invalidated");
    if (!mem)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    return true;
}

/* The grid point anchor + k * interval, computed afresh (one rounding). */
static double grid_date(const rl__timer_ext *x, uint64_t k) { return x->anchor + (double)k * x->interval; }

/* A repeating timer stays on its grid anchor + k*interval: the next date
 * is the first grid point after now, so missed periods fire once. Each date
 * is computed from the anchor, not by adding the interval to the previous
 * date: at today's dates a double resolves to about 119 ns, and one rounding
 * per tick would move a 1 ms timer tens of ns later every tick. A date set
 * inside the callout wins (and starts a new grid). One-shot timers are
 * invalidated, as CF does. */
void rl__timer_after_fire_locked(struct RLRunLoopTimer *t, RLAbsoluteTime now, rl__defer *d) {
    if (!t->valid)
        return;
    if (!t->repeats) {
        timer_invalidate_locked(t, d);
        return;
    }
    rl__timer_ext *x = rl__timer_ext_of(t);
    if (!t->moved_in_fire) {
        uint64_t k = x->ticks + 1;
        if (grid_date(x, k) <= now) {
            double behind = floor((now - x->anchor) / x->interval) + 1;
            k = behind < 1.8e19 ? (uint64_t)behind : UINT64_MAX / 2;
            while (grid_date(x, k) <= now && k < UINT64_MAX / 2)
                k++;
        }
        x->ticks = k;
        t->fire_date = clamp_date(grid_date(x, k));
        rl__timer_stamp_locked(t);
    }
    /* Re-filed also after a move inside the callout: while firing, the
     * timer was left out of the wake-up (rl__tset_earliest_deadline). */
    rl__timer_moved_locked(t);
}
