/*
 * RLRunLoop.c — the run loop: modes, memberships, the iteration, waiting,
 * wake-ups, perform requests, per-thread storage and teardown.
 *
 * Mechanisms (see runloop_internal.h for the locking rule):
 *   - one epoll fd, one eventfd and one timerfd per loop, however many modes;
 *     the fds of fd sources are in the epoll set only while the loop runs a
 *     mode that contains them and a callback is enabled;
 *   - WakeUp sets `wake_pending`, then writes the eventfd only if the loop
 *     is `sleeping`; the loop sets `sleeping`, then blocks only if no wake is
 *     pending. Both sides use sequentially consistent atomics, so one of them
 *     always sees the other: no wake-up is lost, and waking an awake loop
 *     costs no system call;
 *   - timers sit in two heaps per mode (by fire date, and by fire date +
 *     tolerance); the timerfd is armed at the earliest deadline, and every
 *     timer already past its fire date fires on that wake-up;
 *   - a signalled source's memberships go on their modes' ready lists;
 *   - perform requests go into the loop's perform queue (RLRunLoopPerform.c),
 *     which the loop runs through rl__perform_run and the other calls of
 *     RLRunLoopPerformInternal.h.
 */
#include "rl_heap.h"
#include "rl_fdtab.h"
#include "rl_lock.h"
#include "rl_ready.h"
#include "rl_loop.h"
#include "rl_wake.h"
#include "RLRunLoopMode.h"
#include "RLRunLoopPerformInternal.h"
#include "rl_spin.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

static bool rl_item_in_loop(void *item, rl_kind kind, RLRunLoopRef rl) {
    rl_memb *m;
    TAILQ_FOREACH(m, rl__item_membs(item, kind), item_link) {
        if (m->rl == rl)
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------ */
/* memberships                                                         */

static void rl_observer_insert(rl_mode *mode, rl_memb *m) {
    struct RLRunLoopObserver *o = m->item;
    rl_memb *x;
    TAILQ_FOREACH(x, &mode->observers, mode_link) {
        if (((struct RLRunLoopObserver *)x->item)->order > o->order) {
            TAILQ_INSERT_BEFORE(x, m, mode_link);
            return;
        }
    }
    TAILQ_INSERT_TAIL(&mode->observers, m, mode_link);
}

/* A timer's first membership lives inside the timer: no allocation, and
 * one cache miss less when 100k timers come and go. */
/* ---- source equality ----
 * A mode holds at most one of a set of equal sources (as CF's set of
 * sources): adding a source equal to one already there does nothing, and
 * Contains/Remove find the one there. Candidates are found through the
 * mode's buckets, keyed by what equal sources share. */

static size_t rl_source_key(const struct RLRunLoopSource *s) {
    uint64_t x = (uint64_t)s->hash ^ ((uint64_t)s->order * 0x9E3779B97F4A7C15ull) ^
                 (uint64_t)(uintptr_t)s->ctx.perform ^ ((uint64_t)(uintptr_t)s->fdobj << 1);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

/* Room in mode's buckets for one more source; false only if there are none
 * and none can be had (a full table keeps working with longer chains). */
static bool rl_sbuckets_reserve(rl_mode *mode) {
    if (mode->nsources < mode->nsbuckets)
        return true;
    size_t nb = mode->nsbuckets ? mode->nsbuckets * 2 : 8;
    rl_memb **b = calloc(nb, sizeof *b);
    if (!b)
        return mode->nsbuckets > 0;
    for (size_t i = 0; i < mode->nsbuckets; i++) {
        rl_memb *m = mode->sbuckets[i];
        while (m) {
            rl_memb *next = m->snext;
            size_t k = rl_source_key(m->item) & (nb - 1);
            m->snext = b[k];
            b[k] = m;
            m = next;
        }
    }
    free(mode->sbuckets);
    mode->sbuckets = b;
    mode->nsbuckets = nb;
    return true;
}

static void rl_sbucket_insert(rl_mode *mode, rl_memb *m) {
    rl_memb **head = &mode->sbuckets[rl_source_key(m->item) & (mode->nsbuckets - 1)];
    m->snext = *head;
    *head = m;
}

static void rl_sbucket_remove(rl_mode *mode, rl_memb *m) {
    rl_memb **p = &mode->sbuckets[rl_source_key(m->item) & (mode->nsbuckets - 1)];
    while (*p && *p != m)
        p = &(*p)->snext;
    if (*p)
        *p = m->snext;
}

/* The verdicts of a source's equal callback, asked without the lock before
 * an add, remove or contains (rl_eq_prepare), for the locked part to read:
 * the callback is user code and never runs under the lock. */
typedef struct rl_eq_verdict {
    struct RLRunLoopSource *other; /* retained */
    bool equal;
} rl_eq_verdict;

typedef struct rl_eq_state {
    const struct RLRunLoopSource *s;
    rl_eq_verdict *v;
    size_t n;
    struct rl_eq_state *prev; /* an add from inside an equal callback has its own */
} rl_eq_state;

static __thread rl_eq_state *rl_eq_cur;

/* The loop lock held (what is compared never changes after creation). */
static bool rl_sources_equal_locked(const struct RLRunLoopSource *s, const struct RLRunLoopSource *c) {
    if (c == s)
        return true;
    if (!rl__source_same_shape(s, c))
        return false;
    if (!s->ctx.equal)
        return s->ctx.info == c->ctx.info;
    const rl_eq_state *st = rl_eq_cur;
    if (st && st->s == s) {
        for (size_t i = 0; i < st->n; i++) {
            if (st->v[i].other == c)
                return st->v[i].equal;
        }
    }
    /* Added by another thread after the verdicts were taken: taken as
     * different (two threads adding equal sources at once may both succeed). */
    return false;
}

/* The membership of s, or of a source equal to s, in mode: found through
 * the mode's buckets (s's own membership is there too), so that the loop
 * lock alone suffices, not s's item lock. */
static rl_memb *rl_source_find_locked(struct RLRunLoopSource *s, rl_mode *mode) {
    rl_memb *m;
    if (!mode->nsbuckets)
        return NULL;
    for (m = mode->sbuckets[rl_source_key(s) & (mode->nsbuckets - 1)]; m; m = m->snext) {
        if (rl_sources_equal_locked(s, m->item))
            return m;
    }
    return NULL;
}

static void rl_eq_collect_locked(rl_eq_state *st, rl_mode *mode, struct RLRunLoopSource *s) {
    if (!mode || !mode->nsbuckets)
        return;
    for (rl_memb *m = mode->sbuckets[rl_source_key(s) & (mode->nsbuckets - 1)]; m; m = m->snext) {
        struct RLRunLoopSource *c = m->item;
        if (c == s || !rl__source_same_shape(s, c))
            continue;
        bool seen = false;
        for (size_t i = 0; i < st->n && !seen; i++)
            seen = st->v[i].other == c;
        if (seen)
            continue;
        rl_eq_verdict *v = realloc(st->v, (st->n + 1) * sizeof *v);
        if (!v)
            return; /* out of memory: the rest count as different */
        st->v = v;
        rl__retain_raw(c);
        st->v[st->n++] = (rl_eq_verdict){c, false};
    }
}

/* Before an add, remove or contains of source s in `mode` (every common
 * mode for kRLRunLoopCommonModes): if s has an equal callback, asks it,
 * without the lock, about every source of the same shape there, for the
 * locked part to read (rl_sources_equal_locked). */
static void rl_eq_prepare(rl_eq_state *st, RLRunLoopRef rl, struct RLRunLoopSource *s, RLRunLoopMode mode) {
    *st = (rl_eq_state){s, NULL, 0, rl_eq_cur};
    if (!s->ctx.equal)
        return;
    rl__loop_lock(rl);
    if (rl__is_common(mode)) {
        for (size_t i = 0; i < rl->ncommon; i++)
            rl_eq_collect_locked(st, rl__mode_find(rl, rl->common[i].name), s);
    } else {
        rl_eq_collect_locked(st, rl__mode_find(rl, mode), s);
    }
    rl__loop_unlock(rl);
    for (size_t i = 0; i < st->n; i++)
        st->v[i].equal = s->ctx.equal(s->ctx.info, st->v[i].other->ctx.info);
    rl_eq_cur = st;
}

static void rl_eq_finish(rl_eq_state *st) {
    rl_eq_cur = st->prev;
    for (size_t i = 0; i < st->n; i++)
        RLRelease(st->v[i].other);
    free(st->v);
}

static rl_memb *rl_memb_alloc(void *item, rl_kind kind) {
    if (kind == RL_KIND_TIMER) {
        struct RLRunLoopTimer *t = item;
        if (!t->inline_used) {
            t->inline_used = true;
            /* Not mode_link, which timers never use: it would be one more
             * cache line per add. */
            memset(&t->inline_memb, 0, offsetof(rl_memb, mode_link));
            return &t->inline_memb;
        }
    }
    return calloc(1, sizeof(rl_memb));
}

static void rl_memb_free(rl_memb *m) {
    if (m->kind == RL_KIND_TIMER) {
        struct RLRunLoopTimer *t = m->item;
        if (m == &t->inline_memb) {
            t->inline_used = false;
            return;
        }
    }
    free(m);
}

/* Adds item to mode (no-op if present). The loop lock and what guards the
 * item held (its item lock for a source; for a timer or an observer, rl is
 * its home). Inlined where
 * the kind is a constant: adding a timer is a hot path. */
__attribute__((always_inline)) static inline bool rl_add_locked(RLRunLoopRef rl, void *item, rl_kind kind,
                                                               rl_mode *mode, rl_defer *d, const char *fn) {
    if (kind == RL_KIND_SOURCE) {
        if (rl_source_find_locked(item, mode))
            return true; /* it, or a source equal to it, is there */
        if (!rl_sbuckets_reserve(mode))
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    } else if (rl__memb_find(item, kind, mode)) {
        return true;
    }
    rl_memb *m = rl_memb_alloc(item, kind);
    if (!m)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    m->item = item;
    m->kind = kind;
    m->rl = rl;
    m->mode = mode;
    if (kind == RL_KIND_TIMER) {
        if (!rl__tset_add(&mode->timers, m)) {
            rl_memb_free(m);
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        }
    } else if (kind == RL_KIND_SOURCE && !rl__fd_register(rl, item)) {
        rl_memb_free(m);
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    }
    rl__hold_raw(item);
    TAILQ_INSERT_TAIL(rl__item_membs(item, kind), m, item_link);
    if (kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_INSERT_TAIL(&mode->sources, m, mode_link);
        rl_sbucket_insert(mode, m);
        mode->nsources++;
        if (s->fdobj)
            rl__fd_update(rl, s); /* registered above; now in the mode: its wish may grow */
        if (s->signalled)
            rl__ready_push(m);
        rl__defer_push(d, RL_DEFER_SCHEDULE, s, rl, mode->name);
    } else if (kind == RL_KIND_OBSERVER) {
        rl_observer_insert(mode, m);
        mode->nobservers++;
        atomic_fetch_or_explicit(&mode->observer_mask, ((struct RLRunLoopObserver *)item)->activities,
                                 memory_order_relaxed);
    } else {
        rl__rearm_for_added_timer(rl, mode, item);
    }
    return true;
}

/* Removes one membership; defers the cancel callout and the release. A
 * source's cancel goes to `cancel_for`: the source the caller named, which
 * may be one equal to the source in the mode (as CF). The loop lock held,
 * and for a source the item lock of the member (m->item). */
static void rl_remove_memb_as_locked(rl_memb *m, void *cancel_for, rl_defer *d) {
    void *item = m->item;
    RLRunLoopRef rl = m->rl;
    rl_mode *mode = m->mode;
    TAILQ_REMOVE(rl__item_membs(item, m->kind), m, item_link);
    if (m->kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_REMOVE(&mode->sources, m, mode_link);
        rl_sbucket_remove(mode, m);
        mode->nsources--;
        rl__ready_unlink(m);
        if (s->fdobj) {
            if (!rl_item_in_loop(s, RL_KIND_SOURCE, rl))
                rl__fd_unregister(rl, s);
            else
                rl__fd_update(rl, s);
        }
        rl__defer_push(d, RL_DEFER_CANCEL, cancel_for, rl, mode->name);
    } else if (m->kind == RL_KIND_OBSERVER) {
        TAILQ_REMOVE(&mode->observers, m, mode_link);
        mode->nobservers--;
        rl__mode_recompute_mask(mode);
    } else {
        rl__tset_remove(&mode->timers, m);
        rl__rearm_if_waiting(rl);
    }
    if (m->kind == RL_KIND_OBSERVER && ((struct RLRunLoopObserver *)item)->pins)
        ((struct RLRunLoopObserver *)item)->held_releases++; /* see rl_do_observers */
    else
        rl__defer_unhold(d, item);
    rl_memb_free(m);
}

static void rl_remove_memb_locked(rl_memb *m, rl_defer *d) { rl_remove_memb_as_locked(m, m->item, d); }

static size_t rl_citem_hash(const void *item) {
    uint64_t x = (uint64_t)(uintptr_t)item; /* mixed: the low bits of a pointer are mostly zero */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* The index slot that holds item, or the empty slot where it would go.
 * The index is never full (rl_citem_reserve). */
static size_t rl_citem_slot(RLRunLoopRef rl, const void *item) {
    size_t mask = rl->capcidx - 1;
    for (size_t i = rl_citem_hash(item) & mask;; i = (i + 1) & mask) {
        size_t v = rl->cidx[i];
        if (v == 0 || rl->citems[v - 1].item == item)
            return i;
    }
}

static bool rl_citem_has(RLRunLoopRef rl, void *item) {
    return rl->capcidx && rl->cidx[rl_citem_slot(rl, item)] != 0;
}

/* Room for `need` items with the index at most half full. */
static bool rl_citem_reserve(RLRunLoopRef rl, size_t need) {
    if (need * 2 <= rl->capcidx)
        return true;
    size_t cap = rl->capcidx ? rl->capcidx * 2 : 16;
    while (cap < need * 2)
        cap *= 2;
    size_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return false;
    free(rl->cidx);
    rl->cidx = idx;
    rl->capcidx = cap;
    for (size_t k = 0; k < rl->nci; k++)
        rl->cidx[rl_citem_slot(rl, rl->citems[k].item)] = k + 1;
    return true;
}

/* Remembers item (not yet present); retains nothing. */
static bool rl_citem_add(RLRunLoopRef rl, void *item, rl_kind kind) {
    rl_citem *a = rl__grow(rl->citems, &rl->capci, rl->nci + 1, sizeof *a);
    if (a)
        rl->citems = a;
    if (!a || !rl_citem_reserve(rl, rl->nci + 1))
        return false;
    rl->citems[rl->nci] = (rl_citem){item, kind};
    rl->cidx[rl_citem_slot(rl, item)] = ++rl->nci;
    return true;
}

/* Forgets item if present, deferring the release of its reference. */
static void rl_citem_remove(RLRunLoopRef rl, void *item, rl_defer *d) {
    if (!rl->capcidx)
        return;
    size_t hole = rl_citem_slot(rl, item);
    size_t v = rl->cidx[hole];
    if (v == 0)
        return;
    rl__defer_unhold(d, item);
    /* Linear probing without tombstones: later entries of the same run
     * move back into the hole unless that would put them before their
     * home slot. */
    size_t mask = rl->capcidx - 1;
    for (size_t j = (hole + 1) & mask; rl->cidx[j] != 0; j = (j + 1) & mask) {
        size_t home = rl_citem_hash(rl->citems[rl->cidx[j] - 1].item) & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            rl->cidx[hole] = rl->cidx[j];
            hole = j;
        }
    }
    rl->cidx[hole] = 0;
    /* The array stays dense: its last item moves into the gap. */
    size_t k = v - 1, last = --rl->nci;
    if (k != last) {
        rl->citems[k] = rl->citems[last];
        rl->cidx[rl_citem_slot(rl, rl->citems[k].item)] = k + 1;
    }
}

/* A source's per-loop part of invalidation: m->rl locked, item lock held. */
static void rl_remove_source_from_loop_locked(struct RLRunLoopSource *s, RLRunLoopRef rl, rl_defer *d) {
    rl_memb *m, *next;
    bool any = false;
    for (m = TAILQ_FIRST(&s->membs); m; m = next) {
        next = TAILQ_NEXT(m, item_link);
        if (m->rl == rl) {
            any = true;
            rl_remove_memb_locked(m, d);
        }
    }
    if (any)
        rl_citem_remove(rl, s, d);
}

void rl__source_invalidate(struct RLRunLoopSource *s, rl_defer *d) {
    rl_loopset ls;
    rl__loopset_init(&ls);
    rl__olock_lock(&s->lock);
    bool was = s->valid;
    if (was) {
        /* From here no loop adds it (rl_add_item checks under this lock),
         * so the loops noted now are all it is in. */
        rl__poke(s->valid, false);
        rl__poke(s->signalled, false);
        rl__loopset_collect(&ls, s, NULL);
    }
    rl__olock_unlock(&s->lock);
    for (size_t i = 0; i < ls.n; i++) {
        RLRunLoopRef rl = ls.a[i];
        rl__loop_lock(rl);
        rl__olock_lock(&s->lock);
        rl_remove_source_from_loop_locked(s, rl, d);
        rl__olock_unlock(&s->lock);
        rl__loop_unlock(rl);
    }
    rl__loopset_free(&ls);
}

void rl__remove_item_everywhere_locked(void *item, rl_kind kind, rl_defer *d) {
    struct rl_membq *q = rl__item_membs(item, kind);
    while (!TAILQ_EMPTY(q)) {
        rl_memb *m = TAILQ_FIRST(q);
        rl_citem_remove(m->rl, item, d);
        rl_remove_memb_locked(m, d);
    }
}

void rl__timer_moved_locked(struct RLRunLoopTimer *t) {
    rl_memb *m;
    TAILQ_FOREACH(m, &t->membs, item_link) {
        if (!rl__tset_update(&m->mode->timers, m))
            abort(); /* out of memory re-filing a timer: its heaps would lie */
    }
    rl__rearm_if_waiting(rl__timer_loop(t));
}

/* Adds item to the common pseudo-mode: remembered, and added to every
 * common mode (modes named common but not yet created are created, as CF). */
static bool rl_add_common_locked(RLRunLoopRef rl, void *item, rl_kind kind, rl_defer *d, const char *fn) {
    if (!rl_citem_has(rl, item)) {
        if (!rl_citem_add(rl, item, kind))
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        rl__hold_raw(item);
    }
    for (size_t i = 0; i < rl->ncommon; i++) {
        rl_mode *m = rl__mode_get(rl, rl->common[i].name, fn);
        if (!m || !rl_add_locked(rl, item, kind, m, d, fn))
            return false;
    }
    return true;
}

static void rl_remove_common_locked(RLRunLoopRef rl, void *item, rl_kind kind, rl_defer *d) {
    if (!rl_citem_has(rl, item))
        return;
    rl_citem_remove(rl, item, d);
    for (size_t i = 0; i < rl->ncommon; i++) {
        rl_mode *m = rl__mode_find(rl, rl->common[i].name);
        rl_memb *x = m ? rl__memb_find(item, kind, m) : NULL;
        if (x)
            rl_remove_memb_locked(x, d);
    }
}

/* Adding item to `to` found it at home in another loop: it moves out if it
 * is in none of that loop's modes (the caller then tries again); false
 * (error set) if it is, as CF refuses a timer or an observer in a second
 * loop. No lock held. */
static bool rl_item_move_out(void *item, rl_kind kind, RLRunLoopRef to, const char *fn) {
    RLRunLoopRef h = rl__item_lock(item, kind);
    bool ok = true;
    if (h && h != to) {
        if (!TAILQ_EMPTY(rl__item_membs(item, kind)))
            ok = rl__fail(kRLErrorInvalidState, fn, "the %s is already in another run loop",
                          kind == RL_KIND_TIMER ? "timer" : "observer");
        else
            rl__home_clear_locked(h, item, kind);
    }
    rl__item_unlock(item, kind, h);
    return ok;
}

/* ------------------------------------------------------------------ */
/* public add / remove / contains                                      */

static bool rl_item_valid(void *item, rl_kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return ((struct RLRunLoopSource *)item)->valid;
    case RL_KIND_TIMER:
        return ((struct RLRunLoopTimer *)item)->valid;
    default:
        return ((struct RLRunLoopObserver *)item)->valid;
    }
}

static const rl__class *rl_kind_class(rl_kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return &rl__source_class;
    case RL_KIND_TIMER:
        return &rl__timer_class;
    default:
        return &rl__observer_class;
    }
}

static bool rl_args_ok(RLRunLoopRef rl, void *item, rl_kind kind, RLRunLoopMode mode, const char *fn) {
    return rl__check_loop(rl, fn) && rl__object_check(item, rl_kind_class(kind), fn) && rl__mode_name_ok(mode, fn);
}

/* Adds a valid item to `mode` (or the common modes) of rl; rl locked and
 * what guards the item held. */
__attribute__((always_inline)) static inline bool rl_add_to_mode_locked(RLRunLoopRef rl, void *item, rl_kind kind,
                                                                       RLRunLoopMode mode, rl_defer *d,
                                                                       const char *fn) {
    if (rl__is_common(mode))
        return rl_add_common_locked(rl, item, kind, d, fn);
    rl_mode *m = rl__mode_get(rl, mode, fn);
    return m && rl_add_locked(rl, item, kind, m, d, fn);
}

/* A timer or an observer not at home in rl (rl locked): rl becomes its home
 * if it has none (1 or 0 as rl_add_item_locked); -1 if it has another. Out
 * of line: the usual add finds the item at home already. */
__attribute__((noinline)) static int rl_add_item_claim(RLRunLoopRef rl, void *item, rl_kind kind, RLRunLoopMode mode,
                                                       rl_defer *d, const char *fn) {
    /* Its home becomes rl only under rl's lock, which is held: a home seen
     * here is someone else's. */
    if (rl__home_get(item, kind))
        return -1;
    rl__olock *ol = rl__item_olock(item, kind);
    rl__olock_lock(ol);
    int r;
    if (rl__home_get(item, kind)) {
        r = -1;
    } else if (!rl_item_valid(item, kind)) {
        r = rl__fail(kRLErrorInvalidObject, fn, "%p has been invalidated", item);
    } else {
        rl__home_set_locked(rl, item, kind);
        r = rl_add_to_mode_locked(rl, item, kind, mode, d, fn);
    }
    rl__olock_unlock(ol);
    return r;
}

/* The add proper, rl locked: 1 done, 0 failed (error set), -1 the item
 * (a timer or an observer) is at home in another loop: the caller unlocks,
 * moves it out (rl_item_move_out) and tries again. */
__attribute__((always_inline)) static inline int rl_add_item_locked(RLRunLoopRef rl, void *item, rl_kind kind,
                                                                   RLRunLoopMode mode, rl_defer *d,
                                                                   const char *fn) {
    if (atomic_load_explicit(&rl->dead, memory_order_relaxed))
        return rl__fail(kRLErrorInvalidState, fn, "the run loop's thread has exited");
    rl__olock *ol = NULL;
    if (kind == RL_KIND_SOURCE) {
        ol = rl__item_olock(item, kind);
        rl__olock_lock(ol);
    } else if (RL__UNLIKELY(rl__home_get(item, kind) != rl)) {
        return rl_add_item_claim(rl, item, kind, mode, d, fn);
    }
    bool ok;
    if (!rl_item_valid(item, kind))
        ok = rl__fail(kRLErrorInvalidObject, fn, "%p has been invalidated", item);
    else
        ok = rl_add_to_mode_locked(rl, item, kind, mode, d, fn);
    if (ol)
        rl__olock_unlock(ol);
    return ok;
}

__attribute__((always_inline)) static inline bool rl_add_item(RLRunLoopRef rl, void *item, rl_kind kind,
                                                              RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_eq_state eq;
    if (kind == RL_KIND_SOURCE)
        rl_eq_prepare(&eq, rl, item, mode);
    rl_defer d;
    rl__defer_init(&d);
    int r;
    for (;;) {
        rl__loop_lock(rl);
        r = rl_add_item_locked(rl, item, kind, mode, &d, fn);
        rl__loop_unlock(rl);
        if (RL__LIKELY(r >= 0) || !rl_item_move_out(item, kind, rl, fn))
            break;
    }
    if (d.n)
        rl__defer_run(&d);
    if (kind == RL_KIND_SOURCE)
        rl_eq_finish(&eq);
    return r > 0;
}

/* Locks what guards item's memberships in rl, rl locked: a source's item
 * lock (returned), nothing for a timer or observer at home in rl; false if
 * it is at home elsewhere (so in none of rl's modes). */
static inline bool rl_item_guard(RLRunLoopRef rl, void *item, rl_kind kind, rl__olock **ol) {
    *ol = NULL;
    if (kind != RL_KIND_SOURCE)
        return rl__home_get(item, kind) == rl;
    *ol = rl__item_olock(item, kind);
    rl__olock_lock(*ol);
    return true;
}

__attribute__((always_inline)) static inline bool rl_remove_item(RLRunLoopRef rl, void *item, rl_kind kind,
                                                                 RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_eq_state eq;
    if (kind == RL_KIND_SOURCE)
        rl_eq_prepare(&eq, rl, item, mode);
    rl_defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    if (kind == RL_KIND_SOURCE && !rl__is_common(mode)) {
        /* The member found may be a source equal to this one: its item
         * lock, not this one's, guards the membership. */
        rl_mode *m = rl__mode_find(rl, mode);
        rl_memb *x = m ? rl_source_find_locked(item, m) : NULL;
        if (x) {
            struct RLRunLoopSource *member = x->item;
            rl__olock_lock(&member->lock);
            rl_remove_memb_as_locked(x, item, &d);
            rl__olock_unlock(&member->lock);
        }
    } else {
        rl__olock *ol;
        if (rl_item_guard(rl, item, kind, &ol)) {
            if (rl__is_common(mode)) {
                rl_remove_common_locked(rl, item, kind, &d);
            } else {
                rl_mode *m = rl__mode_find(rl, mode);
                rl_memb *x = m ? rl__memb_find(item, kind, m) : NULL;
                if (x)
                    rl_remove_memb_locked(x, &d);
            }
        }
        if (ol)
            rl__olock_unlock(ol);
    }
    rl__loop_unlock(rl);
    if (d.n)
        rl__defer_run(&d);
    if (kind == RL_KIND_SOURCE)
        rl_eq_finish(&eq);
    return true;
}

static bool rl_contains_item(RLRunLoopRef rl, void *item, rl_kind kind, RLRunLoopMode mode, const char *fn) {
    if (!rl_args_ok(rl, item, kind, mode, fn))
        return false;
    rl_eq_state eq;
    if (kind == RL_KIND_SOURCE)
        rl_eq_prepare(&eq, rl, item, mode);
    rl__loop_lock(rl);
    bool has = false;
    if (rl__is_common(mode)) {
        has = rl_citem_has(rl, item);
    } else if (kind == RL_KIND_SOURCE) {
        rl_mode *m = rl__mode_find(rl, mode);
        has = m && rl_source_find_locked(item, m); /* the mode's buckets: the loop lock */
    } else if (rl__home_get(item, kind) == rl) {
        rl_mode *m = rl__mode_find(rl, mode);
        has = m && rl__memb_find(item, kind, m);
    }
    rl__loop_unlock(rl);
    if (kind == RL_KIND_SOURCE)
        rl_eq_finish(&eq);
    return has;
}

bool RLRunLoopAddSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return rl_add_item(rl, s, RL_KIND_SOURCE, mode, __func__);
}
bool RLRunLoopRemoveSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return rl_remove_item(rl, s, RL_KIND_SOURCE, mode, __func__);
}
bool RLRunLoopContainsSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return rl_contains_item(rl, s, RL_KIND_SOURCE, mode, __func__);
}
bool RLRunLoopAddTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    return rl_add_item(rl, t, RL_KIND_TIMER, mode, __func__);
}
bool RLRunLoopRemoveTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    return rl_remove_item(rl, t, RL_KIND_TIMER, mode, __func__);
}
bool RLRunLoopContainsTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    return rl_contains_item(rl, t, RL_KIND_TIMER, mode, __func__);
}
bool RLRunLoopAddObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return rl_add_item(rl, o, RL_KIND_OBSERVER, mode, __func__);
}
bool RLRunLoopRemoveObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return rl_remove_item(rl, o, RL_KIND_OBSERVER, mode, __func__);
}
bool RLRunLoopContainsObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return rl_contains_item(rl, o, RL_KIND_OBSERVER, mode, __func__);
}

/* ------------------------------------------------------------------ */
/* modes: public                                                       */

bool RLRunLoopAddCommonMode(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = __func__;
    if (!rl__check_loop(rl, fn) || !rl__mode_name_ok(mode, fn))
        return false;
    if (rl__is_common(mode))
        return rl__fail(kRLErrorInvalidArgument, fn, "kRLRunLoopCommonModes cannot itself be a common mode");
    rl_defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    bool ok = true;
    if (!rl__common_find(rl, mode)) {
        rl_common_name *a = rl__grow(rl->common, &rl->capcommon, rl->ncommon + 1, sizeof *a);
        char *copy = strdup(mode);
        if (!a || !copy) {
            if (a)
                rl->common = a;
            free(copy);
            ok = rl__fail(kRLErrorNoMemory, fn, "out of memory");
        } else {
            rl->common = a;
            rl->common[rl->ncommon++] = (rl_common_name){copy};
            rl_mode *m = rl__mode_find(rl, mode);
            if (m)
                m->common = true;
            /* Like CF, the mode itself comes into being only when an item
             * lands in it. */
            for (size_t i = 0; ok && i < rl->nci; i++) {
                void *item = rl->citems[i].item;
                rl_kind kind = rl->citems[i].kind;
                rl__olock *ol;
                if (!rl_item_guard(rl, item, kind, &ol))
                    continue; /* moved to another loop since */
                rl_mode *mm = rl__mode_get(rl, mode, fn);
                ok = mm && rl_add_locked(rl, item, kind, mm, &d, fn);
                if (ol)
                    rl__olock_unlock(ol);
            }
        }
    }
    rl__loop_unlock(rl);
    rl__defer_run(&d);
    return ok;
}

RLStringRef RLRunLoopCopyCurrentMode(RLRunLoopRef rl) {
    if (!rl__check_loop(rl, __func__))
        return NULL;
    rl__loop_lock(rl);
    RLStringRef s = rl->frame ? RLStringCreateWithCString(NULL, rl->frame->mode->name, kRLStringEncodingUTF8) : NULL;
    rl__loop_unlock(rl);
    return s;
}

RLArrayRef RLRunLoopCopyAllModes(RLRunLoopRef rl) {
    if (!rl__check_loop(rl, __func__))
        return NULL;
    RLArrayRef out = NULL;
    rl__loop_lock(rl);
    const char **names = malloc((rl->nmodes + 1) * sizeof *names);
    if (names) {
        for (size_t i = 0; i < rl->nmodes; i++)
            names[i] = rl->modes[i]->name;
        out = RLArrayCreate(NULL, names, (RLIndex)rl->nmodes);
    }
    rl__loop_unlock(rl);
    free(names);
    if (!names)
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    return out;
}

RLAbsoluteTime RLRunLoopGetNextTimerFireDate(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = __func__;
    if (!rl__check_loop(rl, fn) || !rl__mode_name_ok(mode, fn))
        return 0;
    rl__loop_lock(rl);
    rl_mode *m = rl__mode_find(rl, mode);
    RLAbsoluteTime date = 0;
    if (!m || !rl__tset_earliest_fire(&m->timers, &date))
        date = 0;
    rl__loop_unlock(rl);
    return date;
}

/* ------------------------------------------------------------------ */
/* perform requests (the queue is RLRunLoopPerform.c's)                */

rl__perform_queue *rl__runloop_perform_queue(RLRunLoopRef rl, const char *fname) {
    return rl__check_loop(rl, fname) ? &rl->pq : NULL;
}

/* ------------------------------------------------------------------ */
/* creation, per-thread storage, teardown                              */

static bool rl_watch(RLRunLoopRef rl, int fd, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.u64 = rl__ev_data(fd, 0)};
    return epoll_ctl(rl->epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
}

static RLRunLoopRef rl_create(pthread_t thread) {
    const char *fn = "RLRunLoopGetCurrent";
    RLRunLoopRef rl = rl__object_alloc(&rl__runloop_class, sizeof *rl, fn);
    if (!rl)
        return NULL;
    rl->thread = thread;
    rl->fork_gen = rl__fork_gen();
    rl->pq.fork_gen = rl->fork_gen;
    rl->armed_at = INFINITY;
    TAILQ_INIT(&rl->homed_timers);
    TAILQ_INIT(&rl->homed_observers);
    atomic_init(&rl->ignore_wakeups, 1); /* not running */
    atomic_init(&rl->waker_cpu, -1);
    atomic_init(&rl->cpu, -1);
    rl->epfd = epoll_create1(EPOLL_CLOEXEC);
    rl->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    rl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (rl->epfd < 0 || rl->evfd < 0 || rl->tfd < 0 || !rl_watch(rl, rl->evfd, EPOLLIN | EPOLLET) ||
        !rl_watch(rl, rl->tfd, EPOLLIN)) {
        int err = errno;
        RLRelease(rl);
        rl__fail_errno(err, fn, "cannot create the run loop's descriptors");
        return NULL;
    }
    /* The default mode exists from the start and is common, as in CF. */
    rl__loop_lock(rl);
    rl->common = calloc(1, sizeof *rl->common);
    rl_mode *m = NULL;
    if (rl->common && (rl->common[0].name = strdup(kRLRunLoopDefaultMode))) {
        rl->capcommon = rl->ncommon = 1;
        m = rl__mode_get(rl, kRLRunLoopDefaultMode, fn);
    }
    rl__loop_unlock(rl);
    if (!m) {
        RLRelease(rl);
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    return rl;
}

static pthread_t rl_main_thread;
static RLRunLoopRef rl_main_loop;
static pthread_mutex_t rl_main_mutex = PTHREAD_MUTEX_INITIALIZER;
static bool rl_main_exited; /* the main thread tore its loop down (RLThreadExit); rl_main_mutex */
static pthread_key_t rl_key;
static pthread_once_t rl_key_once = PTHREAD_ONCE_INIT;

__attribute__((constructor)) static void rl_record_main_thread(void) { rl_main_thread = pthread_self(); }

static void rl_teardown(RLRunLoopRef rl);

static void rl_threadtab_forget_self(RLRunLoopRef mine);

static void rl_key_destructor(void *v) {
    RLRunLoopRef rl = v;
    rl__tls = NULL;
    rl_teardown(rl);
    rl_threadtab_forget_self(rl);
    rl__object_unhold(rl);
}

static bool rl_key_made; /* rl_key exists (set once, under rl_key_once) */

static void rl_make_key(void) { rl_key_made = pthread_key_create(&rl_key, rl_key_destructor) == 0; }

/* ==== BEGIN run loops by thread (lazy loops for RLThread / RLPerform) ====
 * CF's _CFRunLoopGet0(pthread_t): a table from thread to run loop, so that
 * another thread can obtain (creating it if needed) the loop of a thread
 * that has not asked for it yet, and that thread later gets the same loop
 * from RLRunLoopGetCurrent. Threads therefore need no loop up front. The
 * table holds one reference per entry; a thread's entry goes when the
 * thread tears its loop down (rl__runloop_teardown_current_thread or the
 * pthread-key destructor). The main thread's loop is rl_main_loop, not in
 * the table. Lock order: table mutex, then a loop lock (rl_create). */
typedef struct rl_thread_entry {
    struct rl_thread_entry *next;
    pthread_t thread;
    RLRunLoopRef rl;
} rl_thread_entry;

enum { RL_THREADTAB_BUCKETS = 256 };
static pthread_mutex_t rl_threadtab_mutex = PTHREAD_MUTEX_INITIALIZER;
static rl_thread_entry *rl_threadtab[RL_THREADTAB_BUCKETS];
static _Atomic size_t rl_threadtab_count; /* lets exiting threads skip the mutex */

static rl_thread_entry **rl_threadtab_link_locked(pthread_t thread) {
    uintptr_t h = (uintptr_t)thread;
    h ^= h >> 12;
    h ^= h >> 21;
    rl_thread_entry **link = &rl_threadtab[h % RL_THREADTAB_BUCKETS];
    while (*link && !pthread_equal((*link)->thread, thread))
        link = &(*link)->next;
    return link;
}

/* The table's loop for `thread` (borrowed), created on first use. */
static RLRunLoopRef rl_threadtab_get(pthread_t thread) {
    pthread_mutex_lock(&rl_threadtab_mutex);
    rl_thread_entry **link = rl_threadtab_link_locked(thread);
    RLRunLoopRef rl = *link ? (*link)->rl : NULL;
    if (!rl) {
        rl_thread_entry *e = malloc(sizeof *e);
        rl = e ? rl_create(thread) : NULL;
        if (rl) {
            rl__object_hold(rl); /* the table's reference */
            e->next = NULL;
            e->thread = thread;
            e->rl = rl;
            *link = e;
            atomic_fetch_add(&rl_threadtab_count, 1);
        } else {
            free(e);
            if (!e)
                rl__fail(kRLErrorNoMemory, "RLRunLoopGetCurrent", "out of memory");
        }
    }
    pthread_mutex_unlock(&rl_threadtab_mutex);
    return rl;
}

/* On a thread that is done with its loop `mine` (torn down already, or
 * NULL): removes the thread's entry and tears down the entry's loop if it
 * is another one (made by another thread after an earlier teardown). */
static void rl_threadtab_forget_self(RLRunLoopRef mine) {
    if (atomic_load(&rl_threadtab_count) == 0)
        return;
    pthread_mutex_lock(&rl_threadtab_mutex);
    rl_thread_entry **link = rl_threadtab_link_locked(pthread_self());
    rl_thread_entry *e = *link;
    if (e) {
        *link = e->next;
        atomic_fetch_sub(&rl_threadtab_count, 1);
    }
    pthread_mutex_unlock(&rl_threadtab_mutex);
    if (!e)
        return;
    if (e->rl != mine)
        rl_teardown(e->rl);
    rl__object_unhold(e->rl);
    free(e);
}

RLRunLoopRef rl__runloop_get_for_thread(pthread_t thread) {
    if (pthread_equal(thread, rl_main_thread))
        return RLRunLoopGetMain();
    return rl_threadtab_get(thread);
}

/* ==== END run loops by thread ==== */

/* ---- fork() (rl_fork.c): the main loop's mutex, the thread table and
 * every loop's lock are held across it. The child never runs an inherited
 * loop (rl__of_this_process), but a timer or observer made in the parent
 * may still have one as its home, and locks it to be refused: so no loop
 * lock may be left held by a thread that does not exist in the child.
 * Taking them all here breaks the one-loop-lock-at-a-time rule safely: no
 * other thread holds two, and this one waits for nothing else while it
 * holds them (raw futex calls, so the lock-order detector sees nothing). */
static rl_thread_entry *rl_inherited;   /* in a fork() child: the parent's loops, kept, never used */
static RLRunLoopRef rl_inherited_mains; /* the same for its main loops (linked by inherited_next) */

/* Every loop the thread table or the main-loop slot knows, each once:
 * lock (true) or unlock (false) it. */
static void rl_fork_each_loop(bool lock) {
    RLRunLoopRef main = rl_main_loop;
    bool main_seen = false;
    for (size_t b = 0; b < RL_THREADTAB_BUCKETS; b++)
        for (rl_thread_entry *e = rl_threadtab[b]; e; e = e->next) {
            main_seen = main_seen || e->rl == main;
            if (lock)
                rl__mutex_lock_slow(&e->rl->lock, NULL);
            else
                rl__mutex_unlock(&e->rl->lock);
        }
    if (main && !main_seen) {
        if (lock)
            rl__mutex_lock_slow(&main->lock, NULL);
        else
            rl__mutex_unlock(&main->lock);
    }
}

static void fork_prepare(void) {
    pthread_mutex_lock(&rl_main_mutex);
    pthread_mutex_lock(&rl_threadtab_mutex);
    rl_fork_each_loop(true);
}

static void fork_parent(void) {
    rl_fork_each_loop(false);
    pthread_mutex_unlock(&rl_threadtab_mutex);
    pthread_mutex_unlock(&rl_main_mutex);
}

/* Keeps a parent's loop referenced (and reachable) in the child: its
 * finalizer must not run here, where its requests are the parent's. */
static void rl_inherited_keep(rl_thread_entry *e) {
    e->next = rl_inherited;
    rl_inherited = e;
}

/* Every loop known so far is the parent's. The forking thread is the
 * child's only thread, and its main thread: GetCurrent and GetMain make it
 * a new loop with its own kernel objects on first use. */
static void fork_child(void) {
    fork_parent();
    for (size_t b = 0; b < RL_THREADTAB_BUCKETS; b++) {
        while (rl_threadtab[b]) {
            rl_thread_entry *e = rl_threadtab[b];
            rl_threadtab[b] = e->next;
            rl_inherited_keep(e);
        }
    }
    atomic_store(&rl_threadtab_count, 0);
    if (rl_main_loop) { /* linked through the loop itself: no allocation in a child handler */
        rl_main_loop->inherited_next = rl_inherited_mains;
        rl_inherited_mains = rl_main_loop;
        rl_main_loop = NULL;
    }
    rl_main_thread = pthread_self();
    /* The thread's reference (rl__tls) stays with the loop, kept above; the
     * key's destructor would tear the parent's loop down when the child's
     * thread ends. */
    if (rl__tls) {
        rl__tls = NULL;
        if (rl_key_made)
            pthread_setspecific(rl_key, NULL);
    }
}

RLRunLoopRef RLRunLoopGetMain(void) {
    pthread_mutex_lock(&rl_main_mutex);
    if (!rl_main_loop) {
        rl_main_loop = rl_create(rl_main_thread);
        if (rl_main_loop)
            rl__object_hold(rl_main_loop); /* kept for the life of the process */
        /* Made after the main thread exited: as if torn down with it, so
         * that it refuses requests no thread would run. */
        if (rl_main_loop && rl_main_exited)
            rl_teardown(rl_main_loop);
    }
    RLRunLoopRef rl = rl_main_loop;
    pthread_mutex_unlock(&rl_main_mutex);
    return rl;
}

RLRunLoopRef RLRunLoopGetCurrent(void) {
    if (RL__LIKELY(rl__tls != NULL))
        return rl__tls;
    pthread_once(&rl_key_once, rl_make_key);
    RLRunLoopRef rl;
    if (pthread_equal(pthread_self(), rl_main_thread)) {
        rl = RLRunLoopGetMain();
        if (rl) {
            RLRetain(rl); /* the thread's reference; the global one stays */
            rl__object_hold(rl);
        }
    } else {
        /* The table keeps its reference; this one is the thread's. */
        rl = rl_threadtab_get(pthread_self());
        if (rl) {
            RLRetain(rl);
            rl__object_hold(rl);
        }
    }
    if (!rl)
        return NULL;
    rl__tls = rl;
    pthread_setspecific(rl_key, rl);
    return rl;
}

/* CF's way: every source is removed from every mode (cancel runs here, on
 * the exiting thread), then observers and timers; queued requests are
 * dropped (blocks released). */
static void rl_teardown(RLRunLoopRef rl) {
    rl_defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    atomic_store(&rl->dead, true);
    for (int kind = RL_KIND_SOURCE; kind <= RL_KIND_OBSERVER; kind++) {
        for (size_t i = 0; i < rl->nmodes; i++) {
            rl_mode *m = rl->modes[i];
            if (kind == RL_KIND_SOURCE) {
                while (!TAILQ_EMPTY(&m->sources)) {
                    rl_memb *x = TAILQ_FIRST(&m->sources);
                    struct RLRunLoopSource *s = x->item;
                    rl__olock_lock(&s->lock);
                    rl_remove_memb_locked(x, &d);
                    rl__olock_unlock(&s->lock);
                }
            } else if (kind == RL_KIND_OBSERVER) {
                while (!TAILQ_EMPTY(&m->observers))
                    rl_remove_memb_locked(TAILQ_FIRST(&m->observers), &d);
            } else {
                rl_memb *x;
                while ((x = rl__tset_any(&m->timers)) != NULL)
                    rl_remove_memb_locked(x, &d);
            }
        }
    }
    for (size_t i = 0; i < rl->nci; i++)
        rl__defer_unhold(&d, rl->citems[i].item);
    rl->nci = 0;
    if (rl->capcidx)
        memset(rl->cidx, 0, rl->capcidx * sizeof *rl->cidx);
    /* Timers and observers at home here but in no mode now go homeless, so
     * that none keeps a pointer to this loop. */
    struct RLRunLoopTimer *t;
    while ((t = TAILQ_FIRST(&rl->homed_timers)) != NULL)
        rl__home_clear_locked(rl, t, RL_KIND_TIMER);
    struct RLRunLoopObserver *o;
    while ((o = TAILQ_FIRST(&rl->homed_observers)) != NULL)
        rl__home_clear_locked(rl, o, RL_KIND_OBSERVER);
    rl__loop_unlock(rl);
    rl__defer_run(&d);

    rl__perform_close(&rl->pq);
}

void rl__runloop_teardown_current_thread(void) {
    RLRunLoopRef rl = rl__tls;
    if (rl) {
        rl__tls = NULL;
        pthread_once(&rl_key_once, rl_make_key);
        pthread_setspecific(rl_key, NULL);
        rl_teardown(rl);
    }
    /* Also a loop another thread made for this one (never run here): the
     * main thread's is the main loop. */
    if (pthread_equal(pthread_self(), rl_main_thread)) {
        pthread_mutex_lock(&rl_main_mutex);
        RLRunLoopRef main_loop = rl_main_loop;
        rl_main_exited = true;
        pthread_mutex_unlock(&rl_main_mutex);
        if (main_loop && main_loop != rl)
            rl_teardown(main_loop);
    }
    rl_threadtab_forget_self(rl);
    if (rl)
        rl__object_unhold(rl);
}

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_RUNLOOP, fork_prepare, fork_parent, fork_child);
}
