/* rl_heap.c — the timers of a mode: binary min-heaps whose entries carry
 * their key (sifting never chases pointers) and whose memberships know their
 * slot (removing or moving a timer is O(log n), no search). Graph lock held. */
#include "runloop_internal.h"

#include <stdlib.h>

static bool rl_hless(const rl_hent *a, const rl_hent *b) {
    if (a->key != b->key)
        return a->key < b->key;
    return a->seq < b->seq;
}

static void rl_hset(rl_heap *h, size_t i, rl_hent e) {
    h->a[i] = e;
    e.m->hidx[h->slot] = i;
}

/* 4-ary: half the depth of a binary heap, and the four children share one
 * or two cache lines, which is what counts with 100k timers. */
#define RL_HEAP_D 4

static void rl_hup(rl_heap *h, size_t i) {
    rl_hent e = h->a[i];
    while (i > 0) {
        size_t p = (i - 1) / RL_HEAP_D;
        if (!rl_hless(&e, &h->a[p]))
            break;
        rl_hset(h, i, h->a[p]);
        i = p;
    }
    rl_hset(h, i, e);
}

static void rl_hdown(rl_heap *h, size_t i) {
    rl_hent e = h->a[i];
    for (;;) {
        size_t first = RL_HEAP_D * i + 1;
        if (first >= h->n)
            break;
        size_t last = first + RL_HEAP_D < h->n ? first + RL_HEAP_D : h->n;
        size_t c = first;
        for (size_t k = first + 1; k < last; k++) {
            if (rl_hless(&h->a[k], &h->a[c]))
                c = k;
        }
        if (!rl_hless(&h->a[c], &e))
            break;
        rl_hset(h, i, h->a[c]);
        i = c;
    }
    rl_hset(h, i, e);
}

static rl_hent rl_hentry(const rl_heap *h, rl_memb *m) {
    const struct RLRunLoopTimer *t = m->item;
    rl_hent e = {h->keyed ? t->fire_date + t->tolerance : t->fire_date, t->seq, m};
    return e;
}

static void rl_heap_init(rl_heap *h, int slot, int keyed) {
    h->a = NULL;
    h->n = h->cap = 0;
    h->slot = slot;
    h->keyed = keyed;
}

static bool rl_heap_push(rl_heap *h, rl_memb *m) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        rl_hent *a = realloc(h->a, cap * sizeof *a);
        if (!a)
            return false;
        h->a = a;
        h->cap = cap;
    }
    h->n++;
    rl_hset(h, h->n - 1, rl_hentry(h, m));
    rl_hup(h, h->n - 1);
    return true;
}

static void rl_heap_fix(rl_heap *h, size_t i) {
    if (i > 0 && rl_hless(&h->a[i], &h->a[(i - 1) / RL_HEAP_D]))
        rl_hup(h, i);
    else
        rl_hdown(h, i);
}

static void rl_heap_remove(rl_heap *h, rl_memb *m) {
    size_t i = m->hidx[h->slot];
    if (i >= h->n || h->a[i].m != m)
        return;
    h->n--;
    if (i == h->n)
        return;
    rl_hset(h, i, h->a[h->n]);
    rl_heap_fix(h, i);
}

static void rl_heap_update(rl_heap *h, rl_memb *m) {
    size_t i = m->hidx[h->slot];
    if (i >= h->n || h->a[i].m != m)
        return;
    h->a[i] = rl_hentry(h, m);
    rl_heap_fix(h, i);
}

/* Depth-first, pruning every subtree whose root is not due: O(number due). */
static void rl_heap_collect(const rl_heap *h, size_t i, RLAbsoluteTime now, rl_memb ***out, size_t *n,
                            size_t *cap) {
    if (i >= h->n || h->a[i].key > now)
        return;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        rl_memb **a = realloc(*out, nc * sizeof *a);
        if (!a)
            return;
        *out = a;
        *cap = nc;
    }
    (*out)[(*n)++] = h->a[i].m;
    for (size_t k = 1; k <= RL_HEAP_D; k++)
        rl_heap_collect(h, RL_HEAP_D * i + k, now, out, n, cap);
}

void rl__tset_init(rl_timerset *ts) {
    rl_heap_init(&ts->strict, 0, 0);
    rl_heap_init(&ts->lax_fire, 0, 0);
    rl_heap_init(&ts->lax_deadline, 1, 1);
}

void rl__tset_free(rl_timerset *ts) {
    free(ts->strict.a);
    free(ts->lax_fire.a);
    free(ts->lax_deadline.a);
    rl__tset_init(ts);
}

size_t rl__tset_count(const rl_timerset *ts) { return ts->strict.n + ts->lax_fire.n; }

bool rl__tset_add(rl_timerset *ts, rl_memb *m) {
    m->lax = ((struct RLRunLoopTimer *)m->item)->tolerance > 0;
    if (!m->lax)
        return rl_heap_push(&ts->strict, m);
    if (!rl_heap_push(&ts->lax_fire, m))
        return false;
    if (!rl_heap_push(&ts->lax_deadline, m)) {
        rl_heap_remove(&ts->lax_fire, m);
        return false;
    }
    return true;
}

void rl__tset_remove(rl_timerset *ts, rl_memb *m) {
    if (!m->lax) {
        rl_heap_remove(&ts->strict, m);
        return;
    }
    rl_heap_remove(&ts->lax_fire, m);
    rl_heap_remove(&ts->lax_deadline, m);
}

bool rl__tset_update(rl_timerset *ts, rl_memb *m) {
    bool lax = ((struct RLRunLoopTimer *)m->item)->tolerance > 0;
    if (lax != m->lax) {
        rl__tset_remove(ts, m);
        return rl__tset_add(ts, m);
    }
    if (!lax) {
        rl_heap_update(&ts->strict, m);
    } else {
        rl_heap_update(&ts->lax_fire, m);
        rl_heap_update(&ts->lax_deadline, m);
    }
    return true;
}

rl_memb *rl__tset_any(const rl_timerset *ts) {
    if (ts->strict.n)
        return ts->strict.a[ts->strict.n - 1].m;
    if (ts->lax_fire.n)
        return ts->lax_fire.a[ts->lax_fire.n - 1].m;
    return NULL;
}

static bool rl_min2(const rl_heap *a, const rl_heap *b, double *date) {
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

bool rl__tset_earliest_fire(const rl_timerset *ts, double *date) { return rl_min2(&ts->strict, &ts->lax_fire, date); }

bool rl__tset_earliest_deadline(const rl_timerset *ts, double *date) {
    return rl_min2(&ts->strict, &ts->lax_deadline, date);
}

void rl__tset_collect_due(const rl_timerset *ts, RLAbsoluteTime now, rl_memb ***out, size_t *n, size_t *cap) {
    rl_heap_collect(&ts->strict, 0, now, out, n, cap);
    rl_heap_collect(&ts->lax_fire, 0, now, out, n, cap);
}
