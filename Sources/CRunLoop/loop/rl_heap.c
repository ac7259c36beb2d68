/* rl_heap.c — the timers of a mode: 4-ary min-heaps whose entries carry
 * their key (sifting never chases pointers) and whose memberships know their
 * slot (removing or moving a timer is O(log n), no search).
 *
 * Adding is O(1) and touches only the timer's membership: a strict timer
 * (no tolerance, the usual case) goes on the set's pending list, linked
 * through the membership (plink, which shares its space with the heap
 * slots: a pending timer has none). The pending timers are folded in only when the
 * heap order is needed — the earliest date, the due timers: appended to the
 * array after the heap-ordered prefix a[0, hn), then sifted up one by one,
 * or, when the batch is large next to the heap, ordered by one bottom-up
 * (Floyd) heapify of the whole array in O(n). A pending timer is removed
 * or moved in O(1). So 100k timers added in a row cost one O(n) heapify
 * when the loop next looks at them (the array grows then, not during the
 * adds), and timers added and removed before the loop looks (a timeout
 * cancelled early) never touch the array at all. Tolerant timers are
 * appended to their two arrays as pending entries a[hn, n) and folded the
 * same way. Loop lock held. */
#include "rl_heap.h"

#include <stdlib.h>

/* Equal keys (rare) are ordered by the timers' stamps, read
 * through the membership: keeping them out of the entry makes it 16 bytes,
 * a third less memory to grow and to sift through. */
static bool hless(const rl__hent *a, const rl__hent *b) {
    if (a->key != b->key)
        return a->key < b->key;
    return rl__timer_stamp_before(a->m->item, b->m->item);
}

static void hset(rl__heap *h, size_t i, rl__hent e) {
    h->a[i] = e;
    e.m->hidx[h->slot] = i;
}

/* 4-ary: half the depth of a binary heap, and the four children share one
 * or two cache lines, which is what counts with 100k timers. */
#define RL_HEAP_D 4

static void hup(rl__heap *h, size_t i) {
    rl__hent e = h->a[i];
    while (i > 0) {
        size_t p = (i - 1) / RL_HEAP_D;
        if (!hless(&e, &h->a[p]))
            break;
        hset(h, i, h->a[p]);
        i = p;
    }
    hset(h, i, e);
}

static void hdown(rl__heap *h, size_t i) {
    rl__hent e = h->a[i];
    for (;;) {
        size_t first = RL_HEAP_D * i + 1;
        if (first >= h->hn)
            break;
        size_t last = first + RL_HEAP_D < h->hn ? first + RL_HEAP_D : h->hn;
        size_t c = first;
        for (size_t k = first + 1; k < last; k++) {
            if (hless(&h->a[k], &h->a[c]))
                c = k;
        }
        if (!hless(&h->a[c], &e))
            break;
        hset(h, i, h->a[c]);
        i = c;
    }
    hset(h, i, e);
}

static rl__hent hentry(const rl__heap *h, rl__memb *m) {
    const struct RLRunLoopTimer *t = m->item;
    rl__hent e = {h->keyed ? t->fire_date + rl__timer_tolerance(t) : t->fire_date, m};
    return e;
}

static void heap_init(rl__heap *h, int slot, int keyed) {
    h->a = NULL;
    h->n = h->hn = h->cap = 0;
    h->slot = slot;
    h->keyed = keyed;
}

/* Appends m as a pending entry: no sifting, so no other entry moves. */
static bool heap_push(rl__heap *h, rl__memb *m) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 2;
        rl__hent *a = realloc(h->a, cap * sizeof *a);
        if (!a)
            return false;
        h->a = a;
        h->cap = cap;
    }
    hset(h, h->n, hentry(h, m));
    h->n++;
    return true;
}

/* Brings the pending entries into the heap order. Sifting k entries up
 * costs O(k log n) at worst (O(k) for random or increasing dates); Floyd's
 * heapify costs O(n) whatever the order, so it wins once the batch is a
 * sizeable part of the whole. */
static void heap_fold(rl__heap *h) {
    size_t pending = h->n - h->hn;
    if (pending == 0)
        return;
    if (pending > h->hn / 2) {
        h->hn = h->n;
        if (h->n < 2)
            return;
        for (size_t i = (h->n - 2) / RL_HEAP_D + 1; i-- > 0;)
            hdown(h, i);
        return;
    }
    while (h->hn < h->n) {
        h->hn++;
        hup(h, h->hn - 1);
    }
}

static void heap_fix(rl__heap *h, size_t i) {
    if (i > 0 && hless(&h->a[i], &h->a[(i - 1) / RL_HEAP_D]))
        hup(h, i);
    else
        hdown(h, i);
}

static void heap_remove(rl__heap *h, rl__memb *m) {
    size_t i = m->hidx[h->slot];
    if (i >= h->n || h->a[i].m != m)
        return;
    if (i >= h->hn) {
        /* Pending: swap-remove, O(1). */
        h->n--;
        if (i != h->n)
            hset(h, i, h->a[h->n]);
        return;
    }
    /* In the heap: the heap's last entry fills the hole; the array's last
     * (pending) entry, if any, fills the heap's freed last slot. */
    size_t last = h->hn - 1;
    rl__hent x = h->a[last];
    h->hn--;
    h->n--;
    if (h->n > h->hn)
        hset(h, last, h->a[h->n]);
    if (i != last) {
        hset(h, i, x);
        heap_fix(h, i);
    }
}

static void heap_update(rl__heap *h, rl__memb *m) {
    size_t i = m->hidx[h->slot];
    if (i >= h->n || h->a[i].m != m)
        return;
    h->a[i] = hentry(h, m);
    if (i < h->hn)
        heap_fix(h, i);
}

/* Appends m to the caller's array; false if it cannot grow. */
static bool out_push(rl__memb *m, rl__memb ***out, size_t *n, size_t *cap) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4; /* kept between passes (RLRunLoop.due): small until needed */
        rl__memb **a = realloc(*out, nc * sizeof *a);
        if (!a)
            return false;
        *out = a;
        *cap = nc;
    }
    (*out)[(*n)++] = m;
    return true;
}

/* Depth-first, pruning every subtree whose root is not due: O(number due).
 * The heap must be folded. */
static void heap_collect(const rl__heap *h, size_t i, RLAbsoluteTime now, rl__memb ***out, size_t *n,
                            size_t *cap) {
    if (i >= h->hn || h->a[i].key > now)
        return;
    if (!out_push(h->a[i].m, out, n, cap))
        return;
    for (size_t k = 1; k <= RL_HEAP_D; k++)
        heap_collect(h, RL_HEAP_D * i + k, now, out, n, cap);
}

void rl__tset_init(rl__timerset *ts) {
    heap_init(&ts->strict, 0, 0);
    heap_init(&ts->lax_fire, 0, 0);
    heap_init(&ts->lax_deadline, 1, 1);
    ts->pending.next = ts->pending.prev = &ts->pending;
}

/* Moves the pending strict timers into the strict array (as its pending
 * entries, to be folded). If the array cannot grow, those that do not fit
 * stay on the list, where pending_min and rl_pending_collect still see
 * them: out of memory makes the loop slower, never wrong. */
/* Grows h's array to hold `need` entries if it can (it keeps its size when
 * memory runs out). Out of line: folding the pending list runs on every
 * pass after an add, growing rarely. */
static __attribute__((noinline)) void heap_grow(rl__heap *h, size_t need) {
    size_t cap = h->cap ? h->cap : 2; /* a sleeping loop's mode mostly holds one or two */
    while (cap < need)
        cap *= 2;
    rl__hent *a = rl__fault(RL_FAULT_TIMER_ARRAY) ? NULL : realloc(h->a, cap * sizeof *a);
    if (a) {
        h->a = a;
        h->cap = cap;
    }
}

static void tset_unlist(rl__timerset *ts) {
    rl__heap *h = &ts->strict;
    if (rl__pending_empty(ts))
        return;
    size_t need = h->n;
    rl__memb *m;
    RL__PENDING_FOREACH(m, ts)
        need++;
    if (need > h->cap)
        heap_grow(h, need);
    while (h->n < h->cap && !rl__pending_empty(ts)) {
        m = rl__pending_memb(ts->pending.next);
        rl__tset_unlink_pending(ts, m);
        hset(h, h->n++, hentry(h, m));
    }
}

/* The earliest fire date on the pending list (after tset_unlist: empty
 * unless memory ran out). */
static bool pending_min(const rl__timerset *ts, double *date) {
    bool any = false;
    rl__memb *m;
    RL__PENDING_FOREACH(m, ts) {
        double d = ((const struct RLRunLoopTimer *)m->item)->fire_date;
        if (!any || d < *date)
            *date = d;
        any = true;
    }
    return any;
}

bool rl__tset_reserve(rl__timerset *ts) {
    if (!ts->strict.a)
        heap_grow(&ts->strict, 2);
    return ts->strict.a != NULL;
}

void rl__tset_free(rl__timerset *ts) {
    free(ts->strict.a);
    free(ts->lax_fire.a);
    free(ts->lax_deadline.a);
    rl__tset_init(ts);
}

static bool tset_empty(const rl__timerset *ts) {
    return ts->strict.n == 0 && rl__pending_empty(ts) && ts->lax_fire.n == 0;
}

bool rl__tset_add_slow(rl__timerset *ts, rl__memb *m) {
    m->lax = ((struct RLRunLoopTimer *)m->item)->tolerant;
    m->pending = false;
    if (!m->lax)
        return rl__tset_add(ts, m);
    if (!heap_push(&ts->lax_fire, m))
        return false;
    if (!heap_push(&ts->lax_deadline, m)) {
        heap_remove(&ts->lax_fire, m);
        return false;
    }
    return true;
}

void rl__tset_remove_slow(rl__timerset *ts, rl__memb *m) {
    if (!m->lax) {
        if (m->pending) {
            rl__tset_unlink_pending(ts, m);
            m->pending = false;
        } else {
            heap_remove(&ts->strict, m);
        }
        return;
    }
    heap_remove(&ts->lax_fire, m);
    heap_remove(&ts->lax_deadline, m);
}

bool rl__tset_update(rl__timerset *ts, rl__memb *m) {
    bool tolerant = ((struct RLRunLoopTimer *)m->item)->tolerant;
    if (RL__LIKELY(!tolerant && !m->lax)) { /* strict, and filed so: the usual case */
        if (!m->pending) /* a pending timer's key is read when it is folded */
            heap_update(&ts->strict, m);
        return true;
    }
    bool lax = tolerant;
    if (lax != m->lax) {
        rl__tset_remove(ts, m);
        return rl__tset_add_slow(ts, m);
    }
    if (!lax) {
        if (!m->pending) /* a pending timer's key is read when it is folded */
            heap_update(&ts->strict, m);
    } else {
        heap_update(&ts->lax_fire, m);
        heap_update(&ts->lax_deadline, m);
    }
    return true;
}

rl__memb *rl__tset_any(const rl__timerset *ts) {
    if (!rl__pending_empty(ts))
        return rl__pending_memb(ts->pending.next);
    if (ts->strict.n)
        return ts->strict.a[ts->strict.n - 1].m;
    if (ts->lax_fire.n)
        return ts->lax_fire.a[ts->lax_fire.n - 1].m;
    return NULL;
}

static bool min2(rl__heap *a, rl__heap *b, double *date) {
    heap_fold(a);
    heap_fold(b);
    if (!a->n && !b->n)
        return false;
    if (!b->n)
        *date = a->a[0].key;
    else if (!a->n)
        *date = b->a[0].key;
    else
        *date = a->a[0].key < b->a[0].key ? a->a[0].key : b->a[0].key;
    return true;
}

/* The earliest key of the strict timers and of heap b. */
static bool tset_min(rl__timerset *ts, rl__heap *b, double *date) {
    tset_unlist(ts);
    bool any = min2(&ts->strict, b, date);
    double p;
    if (RL__UNLIKELY(pending_min(ts, &p)) && (!any || p < *date)) {
        *date = p;
        any = true;
    }
    return any;
}

static bool is_firing(const rl__memb *m) { return ((const struct RLRunLoopTimer *)m->item)->firing; }

/* The smallest key in the subtree at i among timers not firing. A node that
 * is not firing bounds its whole subtree, so the search descends only below
 * firing timers: O(D) per timer being fired, a handful at most. */
static void heap_min_idle(const rl__heap *h, size_t i, bool *any, double *date) {
    if (i >= h->hn || (*any && h->a[i].key >= *date))
        return;
    if (!is_firing(h->a[i].m)) {
        *date = h->a[i].key;
        *any = true;
        return;
    }
    for (size_t k = 1; k <= RL_HEAP_D; k++)
        heap_min_idle(h, RL_HEAP_D * i + k, any, date);
}

bool rl__tset_earliest_fire(rl__timerset *ts, double *date) { return tset_min(ts, &ts->lax_fire, date); }

bool rl__tset_earliest_deadline(rl__timerset *ts, double *date) {
    if (tset_empty(ts))
        return false; /* asked before every wait: a mode without timers costs nothing */
    tset_unlist(ts);
    heap_fold(&ts->strict);
    heap_fold(&ts->lax_deadline);
    bool any = false;
    heap_min_idle(&ts->strict, 0, &any, date);
    heap_min_idle(&ts->lax_deadline, 0, &any, date);
    rl__memb *m;
    RL__PENDING_FOREACH(m, ts) { /* empty unless memory ran out */
        double d = ((const struct RLRunLoopTimer *)m->item)->fire_date;
        if (!is_firing(m) && (!any || d < *date)) {
            *date = d;
            any = true;
        }
    }
    return any;
}

void rl__tset_collect_due(rl__timerset *ts, RLAbsoluteTime now, rl__memb ***out, size_t *n, size_t *cap) {
    tset_unlist(ts);
    heap_fold(&ts->strict);
    heap_fold(&ts->lax_fire);
    heap_collect(&ts->strict, 0, now, out, n, cap);
    heap_collect(&ts->lax_fire, 0, now, out, n, cap);
    rl__memb *m;
    RL__PENDING_FOREACH(m, ts) { /* empty unless memory ran out */
        if (((const struct RLRunLoopTimer *)m->item)->fire_date <= now && !out_push(m, out, n, cap))
            break;
    }
}
