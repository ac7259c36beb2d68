/*
 * RLRunLoopMembership.c — which items are in which modes of which loops:
 * memberships (an item in one mode of one loop), source equality (a mode
 * holds one of a set of equal sources, as CF's set), the items added to
 * the common modes, a source's invalidation and a timer's or observer's
 * removal from every mode, and the public RLRunLoopAdd/Remove/Contains*
 * and RLRunLoopAddCommonMode. The object files (timers, observers,
 * sources, fd objects) call down into it; it calls down into the modes,
 * timer sets, fd table, ready lists, wake-ups and the locking protocol,
 * and never into the object files or the iteration.
 */
#include "RLRunLoopMembership.h"
#include "RLRunLoopMode.h"
#include "rl_fdtab.h"
#include "rl_heap.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "rl_ready.h"
#include "rl_stamp.h"
#include "rl_wake.h"
#include <crunloop/RLRunLoop.h>

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* memberships                                                         */

/* Is item in any mode of rl? Item lock (sources) or home lock held. */
static bool item_in_loop(void *item, rl__kind kind, RLRunLoopRef rl) {
    rl__memb *m;
    RL_ITEMQ_FOREACH(m, rl__item_membs(item, kind)) {
        if (rl__memb_rl(m) == rl)
            return true;
    }
    return false;
}

static void observer_insert(rl__mode *mode, rl__memb *m) {
    struct RLRunLoopObserver *o = m->item;
    rl__memb *x;
    TAILQ_FOREACH(x, &mode->observers, mode_link) {
        if (((struct RLRunLoopObserver *)x->item)->order > o->order) {
            TAILQ_INSERT_BEFORE(x, m, mode_link);
            return;
        }
    }
    TAILQ_INSERT_TAIL(&mode->observers, m, mode_link);
}

/* ---- source equality ----
 * A mode holds at most one of a set of equal sources (as CF's set of
 * sources): adding a source equal to one already there does nothing, and
 * Contains/Remove find the one there. Candidates are found through the
 * mode's buckets, keyed by what equal sources share. */

static size_t source_key(const struct RLRunLoopSource *s) {
    uint64_t x = (uint64_t)rl__source_hash(s) ^ ((uint64_t)s->order * 0x9E3779B97F4A7C15ull) ^
                 (uint64_t)(uintptr_t)rl__source_ctx(s)->perform ^ (s->has_ctx ? 0 : (uint64_t)(uintptr_t)s << 1);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

/* Up to this many sources a bucket on average: a chain is walked only to
 * add, remove or look for a source, and a server's thousands of
 * connections in one mode pay 2 bytes each for the buckets, not 8. */
#define RL_SOURCES_PER_BUCKET 4

/* Room in mode's buckets for one more source; false only if there are none
 * and none can be had (a full table keeps working with longer chains). */
static bool sbuckets_reserve(rl__mode *mode) {
    if (mode->nsources < mode->nsbuckets * RL_SOURCES_PER_BUCKET)
        return true;
    size_t nb = mode->nsbuckets ? mode->nsbuckets * 2 : 8;
    rl__memb **b = calloc(nb, sizeof *b);
    if (!b)
        return mode->nsbuckets > 0;
    for (size_t i = 0; i < mode->nsbuckets; i++) {
        rl__memb *m = mode->sbuckets[i];
        while (m) {
            rl__memb *next = m->snext;
            size_t k = source_key(m->item) & (nb - 1);
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

static void sbucket_insert(rl__mode *mode, rl__memb *m) {
    rl__memb **head = &mode->sbuckets[source_key(m->item) & (mode->nsbuckets - 1)];
    m->snext = *head;
    *head = m;
}

static void sbucket_remove(rl__mode *mode, rl__memb *m) {
    rl__memb **p = &mode->sbuckets[source_key(m->item) & (mode->nsbuckets - 1)];
    while (*p && *p != m)
        p = &(*p)->snext;
    if (*p)
        *p = m->snext;
}

/* The verdicts of a source's equal callback, asked without the lock before
 * an add, remove or contains (eq_prepare), for the locked part to read:
 * the callback is user code and never runs under the lock. */
typedef struct eq_verdict {
    struct RLRunLoopSource *other; /* retained */
    bool equal;
} eq_verdict;

typedef struct eq_state {
    const struct RLRunLoopSource *s;
    eq_verdict *v;
    size_t n;
    struct eq_state *prev; /* an add from inside an equal callback has its own */
} eq_state;

static __thread eq_state *eq_cur;

/* The loop lock held (what is compared never changes after creation). */
static bool sources_equal_locked(const struct RLRunLoopSource *s, const struct RLRunLoopSource *c) {
    if (c == s)
        return true;
    if (!rl__source_same_shape(s, c))
        return false;
    if (!rl__source_ctx(s)->equal)
        return rl__source_ctx(s)->info == rl__source_ctx(c)->info;
    const eq_state *st = eq_cur;
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

/* The membership of s, or of a source equal to s, in mode: a program's
 * source's found through the mode's buckets (s's own membership is there
 * too), so that the loop lock alone suffices; an fd source's (equal to
 * itself only, in no bucket) among its own memberships, under its item
 * lock (taken here unless `s_locked`: the caller holds it). */
static rl__memb *source_find_locked(struct RLRunLoopSource *s, rl__mode *mode, bool s_locked) {
    rl__memb *m;
    if (!s->has_ctx) {
        if (!s_locked)
            rl__olock_lock(&s->lock);
        m = rl__memb_find(s, RL_KIND_SOURCE, mode);
        if (!s_locked)
            rl__olock_unlock(&s->lock);
        return m;
    }
    if (!mode->nsbuckets)
        return NULL;
    for (m = mode->sbuckets[source_key(s) & (mode->nsbuckets - 1)]; m; m = m->snext) {
        if (sources_equal_locked(s, m->item))
            return m;
    }
    return NULL;
}

static void eq_collect_locked(eq_state *st, rl__mode *mode, struct RLRunLoopSource *s) {
    if (!mode || !mode->nsbuckets)
        return;
    for (rl__memb *m = mode->sbuckets[source_key(s) & (mode->nsbuckets - 1)]; m; m = m->snext) {
        struct RLRunLoopSource *c = m->item;
        if (c == s || !rl__source_same_shape(s, c))
            continue;
        bool seen = false;
        for (size_t i = 0; i < st->n && !seen; i++)
            seen = st->v[i].other == c;
        if (seen)
            continue;
        eq_verdict *v = realloc(st->v, (st->n + 1) * sizeof *v);
        if (!v)
            return; /* out of memory: the rest count as different */
        st->v = v;
        rl__retain_raw(c);
        st->v[st->n++] = (eq_verdict){c, false};
    }
}

/* Before an add, remove or contains of source s in `mode` (every common
 * mode for kRLRunLoopCommonModes): if s has an equal callback, asks it,
 * without the lock, about every source of the same shape there, for the
 * locked part to read (sources_equal_locked). */
static void eq_prepare(eq_state *st, RLRunLoopRef rl, struct RLRunLoopSource *s, RLRunLoopMode mode) {
    *st = (eq_state){s, NULL, 0, eq_cur};
    const RLRunLoopSourceContext *sc = rl__source_ctx(s);
    if (!sc->equal)
        return;
    rl__loop_lock(rl);
    if (rl__is_common(mode)) {
        for (size_t i = 0; i < rl->ncommon; i++)
            eq_collect_locked(st, rl__mode_find(rl, rl->common[i].name), s);
    } else {
        eq_collect_locked(st, rl__mode_find(rl, mode), s);
    }
    rl__loop_unlock(rl);
    for (size_t i = 0; i < st->n; i++)
        st->v[i].equal = sc->equal(sc->info, rl__source_ctx(st->v[i].other)->info);
    eq_cur = st;
}

static void eq_finish(eq_state *st) {
    eq_cur = st->prev;
    for (size_t i = 0; i < st->n; i++)
        RLRelease(st->v[i].other);
    free(st->v);
}

/* The mode's counts that a pass reads without the lock (rl__mode.counts:
 * a timer moves one word). The loop lock held. */
static inline void mode_count(rl__mode *mode, rl__kind kind, int32_t by) {
    if (kind == RL_KIND_OBSERVER)
        return;
    uint64_t one = kind == RL_KIND_TIMER ? 1 : RL__MODE_SOURCE_ONE;
    uint64_t c = atomic_load_explicit(&mode->counts, memory_order_relaxed);
    atomic_store_explicit(&mode->counts, by > 0 ? c + one : c - one, memory_order_release);
}

/* A timer's first membership lives inside the timer: no allocation, and
 * one cache miss less when 100k timers come and go. Its further ones are
 * whole memberships on its extension's list (made here if need be). */
static rl__memb *memb_alloc(void *item, rl__kind kind) {
    if (kind == RL_KIND_TIMER) {
        struct RLRunLoopTimer *t = item;
        if (!t->inline_used) {
            /* Not zeroed: add_locked and the timer set write every field
             * a timer's membership has (item, mode, kind; lax, pending and
             * the list link or heap slots). */
            t->inline_used = true;
            return rl__timer_inline_memb(t);
        }
        if (!rl__timer_ext_make(t))
            return NULL;
    } else if (kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        if (!s->inline_used) {
            /* Zeroed: a source's membership has fields (queued, the
             * ready link) that add_locked does not write; snext (a
             * program's source's, in its tail) is written as it joins
             * the buckets. */
            s->inline_used = true;
            memset(s->inline_memb, 0, sizeof s->inline_memb);
            return rl__source_inline_memb(s);
        }
    }
    return calloc(1, sizeof(rl__memb));
}

static void memb_free(rl__memb *m) {
    if (m->kind == RL_KIND_TIMER) {
        struct RLRunLoopTimer *t = m->item;
        if (m == rl__timer_inline_memb(t)) {
            t->inline_used = false;
            return;
        }
    } else if (m->kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = m->item;
        if (m == rl__source_inline_memb(s)) {
            s->inline_used = false;
            return;
        }
    }
    free(m);
}

/* Adds item to mode (no-op if present). The loop lock and what guards the
 * item held (its item lock for a source; for a timer or an observer, rl is
 * its home). Inlined where
 * the kind is a constant: adding a timer is a hot path. */
__attribute__((always_inline)) static inline bool add_locked(RLRunLoopRef rl, void *item, rl__kind kind,
                                                               rl__mode *mode, rl__defer *d, const char *fn) {
    if (kind == RL_KIND_SOURCE) {
        if (source_find_locked(item, mode, true))
            return true; /* it, or a source equal to it, is there */
        if (((struct RLRunLoopSource *)item)->has_ctx && !sbuckets_reserve(mode))
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    } else if (rl__memb_find(item, kind, mode)) {
        return true;
    }
    rl__memb *m = memb_alloc(item, kind);
    if (!m)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    m->item = item;
    m->kind = kind;
    m->mode = mode;
    if (kind == RL_KIND_TIMER) {
        if (!rl__tset_add(&mode->timers, m)) {
            memb_free(m);
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        }
    } else if (kind == RL_KIND_SOURCE && !rl__fd_register(rl, item)) {
        memb_free(m);
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    }
    if (kind != RL_KIND_TIMER || m != rl__timer_inline_memb(item))
        rl__hold_raw(item); /* a timer's inline membership holds its reference virtually */
    if (kind != RL_KIND_TIMER) {
        rl__itemq_insert_tail(rl__item_membs(item, kind), m);
        if (kind == RL_KIND_SOURCE && ((struct RLRunLoopSource *)item)->has_ctx)
            rl__source_home_add(item, rl);
    } else if (m != rl__timer_inline_memb(item)) {
        struct RLRunLoopTimer *t = item;
        TAILQ_INSERT_TAIL(&rl__timer_ext_of(t)->membs, m, item_link);
        t->multi = true;
    }
    mode_count(mode, kind, +1);
    if (kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_INSERT_TAIL(&mode->sources, m, mode_link);
        if (s->has_ctx)
            sbucket_insert(mode, m);
        mode->nsources++;
        if (rl__source_is_fd(s))
            rl__fd_update(rl, s); /* registered above; now in the mode: its wish may grow */
        if (s->signalled)
            rl__ready_push_joined(rl, m);
        rl__defer_push(d, RL_DEFER_SCHEDULE, s, rl, mode->name);
    } else if (kind == RL_KIND_OBSERVER) {
        observer_insert(mode, m);
        mode->nobservers++;
        atomic_fetch_or_explicit(&mode->observer_mask, ((struct RLRunLoopObserver *)item)->activities,
                                 memory_order_relaxed);
    } else {
        rl__rearm_for_added_timer(rl, mode, item);
    }
    return true;
}

/* Timer t, at home in rl and in none of its modes, could not be listed
 * (rl__homed_list: the array cannot grow): it goes homeless, as a timer in
 * no mode of a loop may (another loop may take it). The loop lock held. */
static __attribute__((noinline, cold)) void timer_go_homeless_locked(struct RLRunLoopTimer *t) {
    rl__olock_lock(&t->lock);
    atomic_store_explicit(&t->home, NULL, memory_order_relaxed);
    rl__olock_unlock(&t->lock);
}

/* Removes timer t's membership m (remove_memb_as_locked's timer case;
 * inline, for RLRunLoopRemoveTimer). The loop lock held. */
__attribute__((always_inline)) static inline void remove_timer_memb_locked(struct RLRunLoopTimer *t, rl__memb *m,
                                                                         rl__defer *d) {
    rl__mode *mode = m->mode;
    RLRunLoopRef rl = mode->rl;
    rl__tset_remove(&mode->timers, m);
    mode_count(mode, RL_KIND_TIMER, -1);
    bool in_none, inl = m == rl__timer_inline_memb(t), orphan = false;
    if (RL__LIKELY(inl)) {
        orphan = rl__timer_vref_drop_locked(t); /* inline_used = false; its reference was virtual */
        in_none = !t->multi;
    } else {
        rl__timer_ext *x = rl__timer_ext_of(t);
        TAILQ_REMOVE(&x->membs, m, item_link);
        t->multi = !TAILQ_EMPTY(&x->membs);
        free(m);
        in_none = rl__timer_in_no_mode(t);
    }
    rl__rearm_if_waiting(rl);
    if (in_none && !rl__homed_list(rl, t))
        timer_go_homeless_locked(t);
    if (!inl)
        rl__unhold_or_defer(d, t);
    else if (RL__UNLIKELY(orphan))
        rl__defer_add(d, (rl__defer_entry){RL_DEFER_FINALIZE, t, NULL, NULL, NULL, NULL});
}

/* Removes one membership; defers the cancel callout and the release. A
 * source's cancel goes to `cancel_for`: the source the caller named, which
 * may be one equal to the source in the mode (as CF). The loop lock held,
 * and for a source the item lock of the member (m->item). */
static void remove_memb_as_locked(rl__memb *m, void *cancel_for, rl__defer *d) {
    if (m->kind == RL_KIND_TIMER) {
        remove_timer_memb_locked(m->item, m, d);
        return;
    }
    void *item = m->item;
    rl__mode *mode = m->mode;
    RLRunLoopRef rl = mode->rl;
    rl__itemq_remove(m);
    if (m->kind == RL_KIND_SOURCE) {
        struct RLRunLoopSource *s = item;
        TAILQ_REMOVE(&mode->sources, m, mode_link);
        if (s->has_ctx)
            sbucket_remove(mode, m);
        mode->nsources--;
        mode_count(mode, RL_KIND_SOURCE, -1);
        rl__ready_unlink(m);
        if (s->has_ctx) {
            rl__source_home_recompute(s);
            if (s->tail[0].inbox_rl == rl && !item_in_loop(s, RL_KIND_SOURCE, rl))
                rl__inbox_detach(rl, s); /* the inbox holds no reference: it leaves with its last membership */
        }
        if (rl__source_is_fd(s)) {
            if (!item_in_loop(s, RL_KIND_SOURCE, rl))
                rl__fd_unregister(rl, s);
            else
                rl__fd_update(rl, s);
        }
        rl__defer_push(d, RL_DEFER_CANCEL, cancel_for, rl, mode->name);
    } else if (m->kind == RL_KIND_OBSERVER) {
        TAILQ_REMOVE(&mode->observers, m, mode_link);
        mode->nobservers--;
        rl__mode_recompute_mask(mode);
    }
    rl__kind kind = m->kind;
    memb_free(m); /* first: a source's may be inside it, which the release may free */
    if (kind == RL_KIND_OBSERVER && ((struct RLRunLoopObserver *)item)->pins)
        ((struct RLRunLoopObserver *)item)->held_releases++; /* see rl_do_observers */
    else
        rl__unhold_or_defer(d, item);
}

static void remove_memb_locked(rl__memb *m, rl__defer *d) { remove_memb_as_locked(m, m->item, d); }

static size_t citem_hash(const void *item) {
    uint64_t x = (uint64_t)(uintptr_t)item; /* mixed: the low bits of a pointer are mostly zero */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* The index slot that holds item, or the empty slot where it would go.
 * The index is never full (citem_reserve). */
static size_t citem_slot(RLRunLoopRef rl, const void *item) {
    size_t mask = rl->capcidx - 1;
    for (size_t i = citem_hash(item) & mask;; i = (i + 1) & mask) {
        size_t v = rl->cidx[i];
        if (v == 0 || rl->citems[v - 1].item == item)
            return i;
    }
}

static bool citem_has(RLRunLoopRef rl, void *item) {
    return rl->capcidx && rl->cidx[citem_slot(rl, item)] != 0;
}

/* Room for `need` items with the index at most half full. */
static bool citem_reserve(RLRunLoopRef rl, size_t need) {
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
        rl->cidx[citem_slot(rl, rl->citems[k].item)] = k + 1;
    return true;
}

/* Remembers item (not yet present); retains nothing. */
static bool citem_add(RLRunLoopRef rl, void *item, rl__kind kind) {
    rl__citem *a = rl__grow(rl->citems, &rl->capci, rl->nci + 1, sizeof *a);
    if (a)
        rl->citems = a;
    if (!a || !citem_reserve(rl, rl->nci + 1))
        return false;
    rl->citems[rl->nci] = (rl__citem){item, kind};
    rl->cidx[citem_slot(rl, item)] = ++rl->nci;
    return true;
}

/* Forgets item if present, deferring the release of its reference. */
static void citem_remove(RLRunLoopRef rl, void *item, rl__defer *d) {
    if (!rl->capcidx)
        return;
    size_t hole = citem_slot(rl, item);
    size_t v = rl->cidx[hole];
    if (v == 0)
        return;
    rl__defer_unhold(d, item);
    /* Linear probing without tombstones: later entries of the same run
     * move back into the hole unless that would put them before their
     * home slot. */
    size_t mask = rl->capcidx - 1;
    for (size_t j = (hole + 1) & mask; rl->cidx[j] != 0; j = (j + 1) & mask) {
        size_t home = citem_hash(rl->citems[rl->cidx[j] - 1].item) & mask;
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
        rl->cidx[citem_slot(rl, rl->citems[k].item)] = k + 1;
    }
}

/* A source's per-loop part of invalidation: rl locked, item lock held. */
static void remove_source_from_loop_locked(struct RLRunLoopSource *s, RLRunLoopRef rl, rl__defer *d) {
    rl__memb *m, *next;
    bool any = false;
    for (m = RL_ITEMQ_FIRST(&s->membs); m; m = next) {
        next = RL_ITEMQ_NEXT(m);
        if (rl__memb_rl(m) == rl) {
            any = true;
            remove_memb_locked(m, d);
        }
    }
    if (any)
        citem_remove(rl, s, d);
}

void rl__source_invalidate(struct RLRunLoopSource *s, rl__defer *d) {
    rl__loopset ls;
    rl__loopset_init(&ls);
    rl__olock_lock(&s->lock);
    bool was = s->valid;
    if (was) {
        /* From here no loop adds it (add_item checks under this lock),
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
        remove_source_from_loop_locked(s, rl, d);
        rl__olock_unlock(&s->lock);
        rl__loop_unlock(rl);
    }
    rl__loopset_free(&ls);
}

void rl__remove_item_everywhere_locked(void *item, rl__kind kind, rl__defer *d) {
    rl__memb *m;
    while ((m = kind == RL_KIND_TIMER ? rl__timer_any_memb(item) : RL_ITEMQ_FIRST(rl__item_membs(item, kind))) != NULL) {
        citem_remove(m->mode->rl, item, d);
        remove_memb_locked(m, d);
    }
}

static void timer_refile(rl__memb *m) {
    if (!rl__tset_update(&m->mode->timers, m))
        abort(); /* out of memory re-filing a timer: its heaps would lie */
}

void rl__timer_moved_locked(struct RLRunLoopTimer *t) {
    if (t->inline_used)
        timer_refile(rl__timer_inline_memb(t));
    if (RL__UNLIKELY(t->multi)) {
        rl__memb *m;
        TAILQ_FOREACH(m, &rl__timer_ext_of(t)->membs, item_link) timer_refile(m);
    }
    rl__rearm_if_waiting(rl__timer_loop(t));
}

/* Adds item to the common pseudo-mode: remembered, and added to every
 * common mode (modes named common but not yet created are created, as CF). */
static bool add_common_locked(RLRunLoopRef rl, void *item, rl__kind kind, rl__defer *d, const char *fn) {
    if (!citem_has(rl, item)) {
        if (!citem_add(rl, item, kind))
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        rl__hold_raw(item);
    }
    for (size_t i = 0; i < rl->ncommon; i++) {
        rl__mode *m = rl__mode_get(rl, rl->common[i].name, fn);
        if (!m || !add_locked(rl, item, kind, m, d, fn))
            return false;
    }
    return true;
}

static void remove_common_locked(RLRunLoopRef rl, void *item, rl__kind kind, rl__defer *d) {
    if (!citem_has(rl, item))
        return;
    citem_remove(rl, item, d);
    for (size_t i = 0; i < rl->ncommon; i++) {
        rl__mode *m = rl__mode_find(rl, rl->common[i].name);
        rl__memb *x = m ? rl__memb_find(item, kind, m) : NULL;
        if (x)
            remove_memb_locked(x, d);
    }
}

/* Adding item to `to` found it at home in another loop: it moves out if it
 * is in none of that loop's modes (the caller then tries again); false
 * (error set) if it is, as CF refuses a timer or an observer in a second
 * loop. No lock held. */
static bool item_move_out(void *item, rl__kind kind, RLRunLoopRef to, const char *fn) {
    RLRunLoopRef h = rl__item_lock(item, kind);
    bool ok = true;
    if (h && h != to) {
        if (kind == RL_KIND_TIMER ? rl__timer_any_memb(item) != NULL : RL_ITEMQ_FIRST(rl__item_membs(item, kind)) != NULL)
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

static bool item_valid(void *item, rl__kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return ((struct RLRunLoopSource *)item)->valid;
    case RL_KIND_TIMER:
        return ((struct RLRunLoopTimer *)item)->valid;
    default:
        return ((struct RLRunLoopObserver *)item)->valid;
    }
}

__attribute__((always_inline)) static inline const rl__class *kind_class(rl__kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return &rl__source_class;
    case RL_KIND_TIMER:
        return &rl__timer_class;
    default:
        return &rl__observer_class;
    }
}

/* Inline: with the kind a constant, the class is one too (adding and
 * removing a timer check their arguments on every call). */
__attribute__((always_inline)) static inline bool args_ok(RLRunLoopRef rl, void *item, rl__kind kind,
                                                             RLRunLoopMode mode, const char *fn) {
    return rl__check_loop(rl, fn) && rl__object_check(item, kind_class(kind), fn) && rl__mode_name_ok(mode, fn);
}

/* Adds a valid item to `mode` (or the common modes) of rl; rl locked and
 * what guards the item held. */
__attribute__((always_inline)) static inline bool add_to_mode_locked(RLRunLoopRef rl, void *item, rl__kind kind,
                                                                       RLRunLoopMode mode, rl__defer *d,
                                                                       const char *fn) {
    if (rl__is_common(mode))
        return add_common_locked(rl, item, kind, d, fn);
    rl__mode *m = rl__mode_get(rl, mode, fn);
    return m && add_locked(rl, item, kind, m, d, fn);
}

/* A timer or an observer not at home in rl (rl locked): rl becomes its home
 * if it has none (1 or 0 as add_item_locked); -1 if it has another. Out
 * of line: the usual add finds the item at home already. */
__attribute__((noinline)) static int add_item_claim(RLRunLoopRef rl, void *item, rl__kind kind, RLRunLoopMode mode,
                                                       rl__defer *d, const char *fn) {
    /* Its home becomes rl only under rl's lock, which is held: a home seen
     * here is someone else's. */
    if (rl__home_get(item, kind))
        return -1;
    rl__olock *ol = rl__item_olock(item, kind);
    rl__olock_lock(ol);
    int r;
    if (rl__home_get(item, kind)) {
        r = -1;
    } else if (!item_valid(item, kind)) {
        r = rl__fail(kRLErrorInvalidObject, fn, "%p has been invalidated", item);
    } else if (!rl__home_set_locked(rl, item, kind)) {
        r = rl__fail(kRLErrorNoMemory, fn, "out of memory");
    } else {
        r = add_to_mode_locked(rl, item, kind, mode, d, fn);
        /* A timer that got no mode here (the add failed, or no mode is
         * common yet) is at home in none: listed, or homeless again. */
        if (kind == RL_KIND_TIMER && rl__timer_in_no_mode(item) && !rl__homed_list(rl, item))
            atomic_store_explicit(&((struct RLRunLoopTimer *)item)->home, NULL, memory_order_relaxed);
    }
    rl__olock_unlock(ol);
    return r;
}

/* The add proper, rl locked: 1 done, 0 failed (error set), -1 the item
 * (a timer or an observer) is at home in another loop: the caller unlocks,
 * moves it out (item_move_out) and tries again. */
__attribute__((always_inline)) static inline int add_item_locked(RLRunLoopRef rl, void *item, rl__kind kind,
                                                                   RLRunLoopMode mode, rl__defer *d,
                                                                   const char *fn) {
    if (atomic_load_explicit(&rl->dead, memory_order_relaxed))
        return rl__fail(kRLErrorInvalidState, fn, "the run loop's thread has exited");
    rl__olock *ol = NULL;
    if (kind == RL_KIND_SOURCE) {
        ol = rl__item_olock(item, kind);
        rl__olock_lock(ol);
    } else if (RL__UNLIKELY(rl__home_get(item, kind) != rl)) {
        return add_item_claim(rl, item, kind, mode, d, fn);
    }
    bool ok;
    if (!item_valid(item, kind))
        ok = rl__fail(kRLErrorInvalidObject, fn, "%p has been invalidated", item);
    else
        ok = add_to_mode_locked(rl, item, kind, mode, d, fn);
    if (ol)
        rl__olock_unlock(ol);
    return ok;
}

/* add_item once its arguments passed args_ok. */
__attribute__((always_inline)) static inline bool add_item_checked(RLRunLoopRef rl, void *item, rl__kind kind,
                                                                      RLRunLoopMode mode, const char *fn) {
    eq_state eq;
    if (kind == RL_KIND_SOURCE)
        eq_prepare(&eq, rl, item, mode);
    rl__defer d;
    rl__defer_init(&d);
    int r;
    for (;;) {
        rl__loop_lock(rl);
        r = add_item_locked(rl, item, kind, mode, &d, fn);
        rl__loop_unlock(rl);
        if (RL__LIKELY(r >= 0) || !item_move_out(item, kind, rl, fn))
            break;
    }
    if (d.n)
        rl__defer_run(&d);
    if (kind == RL_KIND_SOURCE)
        eq_finish(&eq);
    return r > 0;
}

__attribute__((always_inline)) static inline bool add_item(RLRunLoopRef rl, void *item, rl__kind kind,
                                                              RLRunLoopMode mode, const char *fn) {
    return args_ok(rl, item, kind, mode, fn) && add_item_checked(rl, item, kind, mode, fn);
}

/* Locks what guards item's memberships in rl, rl locked: a source's item
 * lock (returned), nothing for a timer or observer at home in rl; false if
 * it is at home elsewhere (so in none of rl's modes). */
static inline bool item_guard(RLRunLoopRef rl, void *item, rl__kind kind, rl__olock **ol) {
    *ol = NULL;
    if (kind != RL_KIND_SOURCE)
        return rl__home_get(item, kind) == rl;
    *ol = rl__item_olock(item, kind);
    rl__olock_lock(*ol);
    return true;
}

__attribute__((always_inline)) static inline bool remove_item(RLRunLoopRef rl, void *item, rl__kind kind,
                                                                 RLRunLoopMode mode, const char *fn) {
    if (!args_ok(rl, item, kind, mode, fn))
        return false;
    eq_state eq;
    if (kind == RL_KIND_SOURCE)
        eq_prepare(&eq, rl, item, mode);
    rl__defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    if (kind == RL_KIND_SOURCE && !rl__is_common(mode)) {
        /* The member found may be a source equal to this one: its item
         * lock, not this one's, guards the membership. */
        rl__mode *m = rl__mode_find(rl, mode);
        rl__memb *x = m ? source_find_locked(item, m, false) : NULL;
        if (x) {
            struct RLRunLoopSource *member = x->item;
            rl__olock_lock(&member->lock);
            remove_memb_as_locked(x, item, &d);
            rl__olock_unlock(&member->lock);
        }
    } else {
        rl__olock *ol;
        if (item_guard(rl, item, kind, &ol)) {
            if (rl__is_common(mode)) {
                remove_common_locked(rl, item, kind, &d);
            } else {
                rl__mode *m = rl__mode_find(rl, mode);
                rl__memb *x = m ? rl__memb_find(item, kind, m) : NULL;
                if (x && kind == RL_KIND_TIMER)
                    remove_timer_memb_locked(x->item, x, &d);
                else if (x)
                    remove_memb_locked(x, &d);
            }
        }
        if (ol)
            rl__olock_unlock(ol);
    }
    rl__loop_unlock(rl);
    if (d.n)
        rl__defer_run(&d);
    if (kind == RL_KIND_SOURCE)
        eq_finish(&eq);
    return true;
}

static bool contains_item(RLRunLoopRef rl, void *item, rl__kind kind, RLRunLoopMode mode, const char *fn) {
    if (!args_ok(rl, item, kind, mode, fn))
        return false;
    eq_state eq;
    if (kind == RL_KIND_SOURCE)
        eq_prepare(&eq, rl, item, mode);
    rl__loop_lock(rl);
    bool has = false;
    if (rl__is_common(mode)) {
        has = citem_has(rl, item);
    } else if (kind == RL_KIND_SOURCE) {
        rl__mode *m = rl__mode_find(rl, mode);
        has = m && source_find_locked(item, m, false);
    } else if (rl__home_get(item, kind) == rl) {
        rl__mode *m = rl__mode_find(rl, mode);
        has = m && rl__memb_find(item, kind, m);
    }
    rl__loop_unlock(rl);
    if (kind == RL_KIND_SOURCE)
        eq_finish(&eq);
    return has;
}

bool RLRunLoopAddSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return add_item(rl, s, RL_KIND_SOURCE, mode, __func__);
}
bool RLRunLoopRemoveSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return remove_item(rl, s, RL_KIND_SOURCE, mode, __func__);
}
bool RLRunLoopContainsSource(RLRunLoopRef rl, RLRunLoopSourceRef s, RLRunLoopMode mode) {
    return contains_item(rl, s, RL_KIND_SOURCE, mode, __func__);
}

/* ---- a timer in the default mode: the hot path ----
 * Adding a timer at home in rl to rl's default mode (rl->timer_mode), and
 * taking it out again, the usual case (a timeout armed and cancelled),
 * is done by these with what it needs: no mode lookup by name, no claim,
 * no common-modes check, no defer list on the add. 0: not that case, and
 * nothing was done: the generic path does it (or fails as it must). The
 * loop lock held. */
static inline bool add_timer_default_locked(RLRunLoopRef rl, struct RLRunLoopTimer *t) {
    rl__mode *mode = rl->timer_mode; /* NULL: not made yet, or the loop is dead */
    if (RL__UNLIKELY(!mode || rl__home_get(t, RL_KIND_TIMER) != rl || !t->valid || t->multi || t->tolerant))
        return false;
    rl__memb *m = rl__timer_inline_memb(t);
    if (t->inline_used)
        return m->mode == mode; /* there already: done (as add_locked) */
    t->inline_used = true; /* its item and kind were set at its creation */
    m->mode = mode;
    rl__tset_add_strict(&mode->timers, m); /* checked above; the reference is virtual */
    mode_count(mode, RL_KIND_TIMER, +1);
    rl__rearm_for_added_timer(rl, mode, t);
    return true;
}

static inline bool remove_timer_default_locked(RLRunLoopRef rl, struct RLRunLoopTimer *t, rl__defer *d) {
    rl__mode *mode = rl->timer_mode;
    if (RL__UNLIKELY(!mode || t->multi))
        return false;
    /* At home elsewhere, in no mode, or in another one: nothing to take out. */
    rl__memb *m = rl__timer_inline_memb(t);
    if (RL__LIKELY(rl__home_get(t, RL_KIND_TIMER) == rl && t->inline_used && m->mode == mode))
        remove_timer_memb_locked(t, m, d);
    return true;
}

static __attribute__((noinline)) bool add_timer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    static const char fn[] = "RLRunLoopAddTimer";
    if (RL__LIKELY(mode == kRLRunLoopDefaultMode)) {
        if (!rl__check_loop(rl, fn) || !rl__object_check(t, &rl__timer_class, fn))
            return false;
        /* A timer not at home here yet (its first add) is claimed by the
         * generic path: no lock round for the hot path to find that out.
         * Read without the lock, the home is checked again under it. */
        if (RL__LIKELY(rl__home_get(t, RL_KIND_TIMER) == rl)) {
            rl__loop_lock(rl);
            bool done = add_timer_default_locked(rl, t);
            rl__loop_unlock(rl);
            if (RL__LIKELY(done))
                return true;
        }
        return add_item_checked(rl, t, RL_KIND_TIMER, mode, fn);
    }
    return add_item(rl, t, RL_KIND_TIMER, mode, fn);
}
static __attribute__((noinline)) bool remove_timer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    static const char fn[] = "RLRunLoopRemoveTimer";
    if (RL__LIKELY(mode == kRLRunLoopDefaultMode)) {
        if (!rl__check_loop(rl, fn) || !rl__object_check(t, &rl__timer_class, fn))
            return false;
        rl__defer d;
        rl__defer_init(&d);
        rl__loop_lock(rl);
        bool done = remove_timer_default_locked(rl, t, &d);
        rl__loop_unlock(rl);
        if (RL__UNLIKELY(d.n))
            rl__defer_run(&d);
        if (RL__LIKELY(done))
            return true;
    }
    return remove_item(rl, t, RL_KIND_TIMER, mode, fn);
}

/* ---- the loop's own thread, its lock biased: no call, no frame ----
 * The usual case of the two above, done with the lock taken by the bias
 * alone (rl__loop_lock_biased) and nothing that could call out while
 * inside: whatever would (a sleeping or coalescing wait to re-arm, a timer
 * filed in the heap, a timer not yet listed among the loop's idle ones)
 * is seen before anything changes, and the call goes the way above
 * instead; an orphan's finalization comes after the unlock. What is left
 * (callgrind, static clang build, the caller's loop included): 104
 * instructions an add+remove pair; 140 before the mode's one count word,
 * the default-mode pointer (timer_mode), the initial-exec rl__tls and the
 * pending ring. */

/* The loop checks: rl is the calling thread's own loop (rl__tls: it
 * holds a reference, and a fork() child or a teardown clears it), so it
 * is live and of this process. The timer's: a live object of its class,
 * no error set (the way above sets it). */
static inline bool live(const void *obj, const rl__class *cls) {
    const rl__object *o = obj;
    return o && atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE && rl__is_class(o, cls);
}

/* The owner's hot paths below need no check of the loop's wait: they run
 * on the loop's own thread (rl == rl__tls), which is then not in its wait
 * or its coalescing sleep (no wait to re-arm for the timer, as
 * rl__rearm_if_waiting would; the next wait arms from the timers it finds).
 * The library's calls are not async-signal-safe, so no handler runs them
 * from inside the wait. */

/* A timer's first add to the caller's own loop (checked): a timer made
 * and added at once, the usual way. When it has no home, its loop's lock
 * is biased and its item lock free, the loop claims it and files it in
 * the default mode here, as add_item_claim and add_locked would, with no
 * mode lookup, defer list or re-arm (the owner is not in its wait): its
 * item lock guards a homeless timer (its date, its validity, another
 * loop's claim), so it is held while the home is set, briefly (ended by a
 * plain store: rl_lock.h). Else, or when it is not that case (a
 * tolerance; a repeating grid is no matter), the generic path, with no
 * second round of checks (its own function: inlined here, its frame would
 * cost the fast way a dozen instructions). */
static __attribute__((noinline)) bool add_timer_claim_generic(RLRunLoopRef rl, RLRunLoopTimerRef t) {
    return add_item_checked(rl, t, RL_KIND_TIMER, kRLRunLoopDefaultMode, "RLRunLoopAddTimer");
}

static __attribute__((noinline)) bool add_timer_claim(RLRunLoopRef rl, RLRunLoopTimerRef t) {
    if (rl__home_get(t, RL_KIND_TIMER) == NULL && rl__loop_lock_biased(rl)) {
        rl__mode *m = rl->timer_mode; /* NULL: not made yet (another thread may make it) */
        bool done = false;
        if (m && rl__olock_trylock_brief(&t->lock)) {
            done = rl__home_get(t, RL_KIND_TIMER) == NULL && t->valid && !t->multi && !t->tolerant &&
                   !t->inline_used;
            if (done) {
                rl__timer_arrive_locked(rl, t);
                atomic_store_explicit(&t->home, rl, memory_order_relaxed);
                rl__memb *im = rl__timer_inline_memb(t);
                t->inline_used = true; /* its item and kind were set at its creation */
                im->mode = m;
                rl__tset_add_strict(&m->timers, im); /* the reference is virtual */
                mode_count(m, RL_KIND_TIMER, +1);
            }
            rl__olock_unlock_brief(&t->lock);
        }
        rl__loop_unlock_biased(rl);
        if (done)
            return true;
    }
    return add_timer_claim_generic(rl, t);
}

bool RLRunLoopAddTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    if (RL__LIKELY(mode == kRLRunLoopDefaultMode && rl && rl == rl__tls && live(t, &rl__timer_class))) {
        if (RL__UNLIKELY(rl__home_get(t, RL_KIND_TIMER) != rl))
            return add_timer_claim(rl, t);
        if (RL__LIKELY(rl__loop_lock_biased(rl))) {
            rl__mode *m = rl->timer_mode; /* NULL: not made yet, or the loop is dead */
            bool fast = m && t->valid && !t->multi && !t->tolerant && !t->inline_used;
            if (RL__LIKELY(fast)) {
                rl__memb *im = rl__timer_inline_memb(t);
                t->inline_used = true; /* its item and kind were set at its creation */
                im->mode = m;
                rl__tset_add_strict(&m->timers, im); /* checked above; the reference is virtual */
                mode_count(m, RL_KIND_TIMER, +1);
            }
            rl__loop_unlock_biased(rl);
            if (RL__LIKELY(fast))
                return true;
        }
    }
    return add_timer(rl, t, mode);
}

/* The membership's virtual reference was the only one left (an orphan):
 * t finalized after the unlock. */
static __attribute__((noinline, cold)) bool finalize_orphan(struct RLRunLoopTimer *t) {
    rl__object_finalize(t);
    return true;
}

bool RLRunLoopRemoveTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    if (RL__LIKELY(mode == kRLRunLoopDefaultMode && rl && rl == rl__tls && live(t, &rl__timer_class)) &&
        rl__loop_lock_biased(rl)) {
        rl__mode *m = rl->timer_mode;
        rl__memb *im = rl__timer_inline_memb(t);
        /* In the default mode by its inline membership, still pending (no
         * heap order yet: so strict, as only a strict one is ever pending,
         * rl__tset_add_strict), and listed in the idle array already (its
         * first removal, by the way above, lists it; it stays listed while
         * at home). Its reference is virtual: nothing to drop, unless the
         * timer is an orphan (finalized after the unlock). */
        bool fast = m && !t->multi && t->inline_used && t->listed && rl__home_get(t, RL_KIND_TIMER) == rl &&
                    im->mode == m && im->pending;
        if (RL__LIKELY(fast)) {
            rl__tset_unlink_pending(&m->timers, im);
            mode_count(m, RL_KIND_TIMER, -1);
            bool orphan = rl__timer_vref_drop_locked(t); /* inline_used = false */
            rl__loop_unlock_biased(rl);
            if (RL__UNLIKELY(orphan))
                return finalize_orphan(t);
            return true;
        }
        rl__loop_unlock_biased(rl);
    }
    return remove_timer(rl, t, mode);
}
bool RLRunLoopContainsTimer(RLRunLoopRef rl, RLRunLoopTimerRef t, RLRunLoopMode mode) {
    return contains_item(rl, t, RL_KIND_TIMER, mode, __func__);
}
bool RLRunLoopAddObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return add_item(rl, o, RL_KIND_OBSERVER, mode, __func__);
}
bool RLRunLoopRemoveObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return remove_item(rl, o, RL_KIND_OBSERVER, mode, __func__);
}
bool RLRunLoopContainsObserver(RLRunLoopRef rl, RLRunLoopObserverRef o, RLRunLoopMode mode) {
    return contains_item(rl, o, RL_KIND_OBSERVER, mode, __func__);
}

/* ------------------------------------------------------------------ */
/* common modes                                                        */

bool RLRunLoopAddCommonMode(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = __func__;
    if (!rl__check_loop(rl, fn) || !rl__mode_name_ok(mode, fn))
        return false;
    if (rl__is_common(mode))
        return rl__fail(kRLErrorInvalidArgument, fn, "kRLRunLoopCommonModes cannot itself be a common mode");
    rl__defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    bool ok = true;
    if (!rl__common_find(rl, mode)) {
        rl__common_name *a = rl__grow(rl->common, &rl->capcommon, rl->ncommon + 1, sizeof *a);
        char *copy = strdup(mode);
        if (!a || !copy) {
            if (a)
                rl->common = a;
            free(copy);
            ok = rl__fail(kRLErrorNoMemory, fn, "out of memory");
        } else {
            rl->common = a;
            rl->common[rl->ncommon++] = (rl__common_name){copy};
            rl__mode *m = rl__mode_find(rl, mode);
            if (m)
                m->common = true;
            /* Like CF, the mode itself comes into being only when an item
             * lands in it. */
            for (size_t i = 0; ok && i < rl->nci; i++) {
                void *item = rl->citems[i].item;
                rl__kind kind = rl->citems[i].kind;
                rl__olock *ol;
                if (!item_guard(rl, item, kind, &ol))
                    continue; /* moved to another loop since */
                rl__mode *mm = rl__mode_get(rl, mode, fn);
                ok = mm && add_locked(rl, item, kind, mm, &d, fn);
                if (ol)
                    rl__olock_unlock(ol);
            }
        }
    }
    rl__loop_unlock(rl);
    rl__defer_run(&d);
    return ok;
}

/* ------------------------------------------------------------------ */
/* teardown                                                            */

/* Every item leaves every mode of rl (sources first, then timers, then
 * observers), the common items are forgotten, and the timers and
 * observers at home in rl go homeless, so that none keeps a pointer to
 * it. Cancel callouts and releases deferred to d. rl locked. */
void rl__memberships_clear_locked(RLRunLoopRef rl, rl__defer *d) {
    for (int kind = RL_KIND_SOURCE; kind <= RL_KIND_OBSERVER; kind++) {
        for (size_t i = 0; i < rl->nmodes; i++) {
            rl__mode *m = rl->modes[i];
            if (kind == RL_KIND_SOURCE) {
                while (!TAILQ_EMPTY(&m->sources)) {
                    rl__memb *x = TAILQ_FIRST(&m->sources);
                    struct RLRunLoopSource *s = x->item;
                    rl__olock_lock(&s->lock);
                    remove_memb_locked(x, d);
                    rl__olock_unlock(&s->lock);
                }
            } else if (kind == RL_KIND_OBSERVER) {
                while (!TAILQ_EMPTY(&m->observers))
                    remove_memb_locked(TAILQ_FIRST(&m->observers), d);
            } else {
                rl__memb *x;
                while ((x = rl__tset_any(&m->timers)) != NULL)
                    remove_memb_locked(x, d);
            }
        }
    }
    for (size_t i = 0; i < rl->nci; i++)
        rl__defer_unhold(d, rl->citems[i].item);
    rl->nci = 0;
    if (rl->capcidx)
        memset(rl->cidx, 0, rl->capcidx * sizeof *rl->cidx);
    /* Timers and observers at home here but in no mode now go homeless, so
     * that none keeps a pointer to this loop. */
    while (rl->nhomed > 0)
        rl__home_clear_locked(rl, rl->homed[rl->nhomed - 1], RL_KIND_TIMER);
    struct RLRunLoopObserver *o;
    while ((o = TAILQ_FIRST(&rl->homed_observers)) != NULL)
        rl__home_clear_locked(rl, o, RL_KIND_OBSERVER);
}
