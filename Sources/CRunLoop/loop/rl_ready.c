/*
 * rl_ready.c — the ready lists: per mode, the memberships of its signalled
 * sources in signal order, each at most once, and each loop's inbox of
 * sources other threads signalled (lock-free; the pass moves it onto the
 * lists). Signalling a source puts its memberships on their modes' lists
 * (one loop lock at a time) or the source on its loop's inbox; a pass
 * takes its mode's list in perform order and puts back what it did not
 * reach; a run nested in a perform of an outer pass of the same mode sees
 * what that pass took and has not reached (the in-flight set). O(1) per
 * signal and mode, never a scan of every source. Low in the run-loop
 * files: it calls the locking protocol (rl_lock.c) only.
 */
#include "rl_ready.h"
#include "rl_lock.h"
#include <crunloop/RLRunLoop.h>

#include <stdlib.h>
#include <string.h>

/* Each membership of a source is on its mode's ready list at most once:
 * the flag, not a scan, says whether it is already there. The list holds no
 * reference (the membership does, and leaves the list when removed). The
 * loop lock of m's loop held. */
static void ready_push(rl__memb *m) {
    if (m->queued)
        return;
    m->queued = true;
    TAILQ_INSERT_TAIL(&m->mode->ready, m, ready_link);
    m->mode->nready++;
}

void rl__ready_unlink(rl__memb *m) {
    if (!m->queued)
        return;
    m->queued = false;
    TAILQ_REMOVE(&m->mode->ready, m, ready_link);
    m->mode->nready--;
}

/* The memberships of s in rl go on their modes' ready lists. rl locked, s's
 * item lock held. */
static void ready_push_source(RLRunLoopRef rl, struct RLRunLoopSource *s) {
    rl__memb *m;
    RL_ITEMQ_FOREACH(m, &s->membs) {
        if (rl__memb_rl(m) == rl)
            ready_push(m);
    }
}

/* ---- the inbox: signals from other threads ----
 *
 * A signal from a thread that is not the loop's, of a program's source in
 * one loop, takes no loop lock: under the source's item lock it pushes the
 * source on its loop's inbox (rl->inbox, a lock-free stack beside
 * wake_pending), and the loop moves the inbox onto its modes' ready lists,
 * oldest first, at the start of its next pass (rl__inbox_drain). So the
 * producer writes the source's lines and the loop's wake-up line, and never
 * takes the loop lock (which would revoke its owner bias and bounce its
 * line, and the mode's, between the two CPUs).
 *
 * Invariants, all under the source's item lock: a source is on at most one
 * inbox (tail.inbox_rl), and only while it has a membership in that loop:
 * removing its last membership there takes it off (rl__inbox_detach), so
 * the inbox needs no reference (the membership holds one). Signal order:
 * whoever puts a source on a ready list directly, not through the inbox,
 * drains the inbox first (the general signal path below), or finds it empty
 * (the loop's own thread, rl__source_signal). */

static inline bool inbox_empty(RLRunLoopRef rl) { return atomic_load(&rl->inbox) == NULL; }

/* s goes on rl's inbox. s's item lock held, s in rl, on no inbox. */
static void inbox_push(RLRunLoopRef rl, struct RLRunLoopSource *s) {
    s->tail[0].inbox_rl = rl;
    struct RLRunLoopSource *head = atomic_load_explicit(&rl->inbox, memory_order_relaxed);
    do
        s->tail[0].inbox_next = head;
    while (!atomic_compare_exchange_weak_explicit(&rl->inbox, &head, s, memory_order_seq_cst, memory_order_relaxed));
}

/* The chain newest-first from `head`, reversed: oldest first. */
static struct RLRunLoopSource *chain_reverse(struct RLRunLoopSource *head) {
    struct RLRunLoopSource *out = NULL;
    while (head) {
        struct RLRunLoopSource *next = head->tail[0].inbox_next;
        head->tail[0].inbox_next = out;
        out = head;
        head = next;
    }
    return out;
}

void rl__inbox_drain(RLRunLoopRef rl) {
    struct RLRunLoopSource *s = chain_reverse(atomic_exchange(&rl->inbox, NULL));
    while (s) {
        /* Alive: in rl (the invariant), whose lock is held. */
        rl__olock_lock(&s->lock);
        struct RLRunLoopSource *next = s->tail[0].inbox_next;
        s->tail[0].inbox_rl = NULL;
        s->tail[0].inbox_next = NULL;
        if (s->signalled && s->valid)
            ready_push_source(rl, s);
        rl__olock_unlock(&s->lock);
        s = next;
    }
}

void rl__inbox_detach(RLRunLoopRef rl, struct RLRunLoopSource *s) {
    /* Taken whole (no other thread drains: rl's lock is held), s left out,
     * the rest put back under what was pushed meanwhile (older below
     * newer), until the inbox is found empty to put it back in. */
    struct RLRunLoopSource *rest = atomic_exchange(&rl->inbox, NULL), **p = &rest;
    while (*p && *p != s)
        p = &(*p)->tail[0].inbox_next;
    if (*p)
        *p = s->tail[0].inbox_next;
    s->tail[0].inbox_rl = NULL;
    s->tail[0].inbox_next = NULL;
    while (rest) {
        struct RLRunLoopSource *expected = NULL;
        if (atomic_compare_exchange_strong(&rl->inbox, &expected, rest))
            break;
        struct RLRunLoopSource *newer = atomic_exchange(&rl->inbox, NULL), **q = &newer;
        while (*q)
            q = &(*q)->tail[0].inbox_next;
        *q = rest;
        rest = newer;
    }
}

void rl__ready_push_joined(RLRunLoopRef rl, rl__memb *m) {
    struct RLRunLoopSource *s = m->item;
    if (s->has_ctx && s->tail[0].inbox_rl == rl)
        return; /* on rl's inbox already: its drain pushes every membership of s in rl */
    if (s->has_ctx && s->tail[0].inbox_rl == NULL && !inbox_empty(rl)) {
        inbox_push(rl, s); /* behind what other threads signalled before */
        return;
    }
    ready_push(m);
}

void rl__source_home_recompute(struct RLRunLoopSource *s) {
    RLRunLoopRef h = NULL;
    rl__memb *m;
    RL_ITEMQ_FOREACH(m, &s->membs) {
        RLRunLoopRef r = rl__memb_rl(m);
        if (h && h != r) {
            h = RL__HOME_MANY;
            break;
        }
        h = r;
    }
    s->tail[0].home = h;
}

/* The one loop s is in, NULL if none or several. Its item lock held. */
static inline RLRunLoopRef source_one_loop(struct RLRunLoopSource *s) {
    if (RL__LIKELY(s->has_ctx)) {
        RLRunLoopRef h = s->tail[0].home;
        return h == RL__HOME_MANY ? NULL : h;
    }
    rl__memb *first = RL_ITEMQ_FIRST(&s->membs), *m;
    RLRunLoopRef one = first ? rl__memb_rl(first) : NULL;
    for (m = first; m && one; m = RL_ITEMQ_NEXT(m))
        if (rl__memb_rl(m) != one)
            one = NULL;
    return one;
}

/* The general way, s signalled now: its loops are noted under its item
 * lock (held on entry, released here) and visited after it, each under its
 * own lock (its inbox drained first: what other threads signalled before
 * goes first) and then the item lock again (its memberships there may have
 * changed meanwhile: a loop the source has left has none to push; a loop
 * it joins meanwhile sees `signalled` when it adds it, rl_add_locked). */
static __attribute__((noinline)) void signal_each_loop(struct RLRunLoopSource *s) {
    rl__loopset ls;
    rl__loopset_init(&ls);
    rl__loopset_collect(&ls, s, NULL);
    rl__olock_unlock(&s->lock);
    for (size_t i = 0; i < ls.n; i++) {
        rl__loop_lock(ls.a[i]);
        if (!inbox_empty(ls.a[i]))
            rl__inbox_drain(ls.a[i]);
        rl__olock_lock(&s->lock);
        if (s->signalled)
            ready_push_source(ls.a[i], s);
        rl__olock_unlock(&s->lock);
        rl__loop_unlock(ls.a[i]);
    }
    rl__loopset_free(&ls);
}

bool rl__source_signal(struct RLRunLoopSource *s) {
    /* Its caller found it not signalled (rl__source_signalled_already),
     * but another signal may have come meanwhile: the lock says. */
    rl__olock_lock(&s->lock);
    bool ok = s->valid;
    if (ok && !s->signalled) {
        rl__poke(s->signalled, true);
        /* The usual source is in one loop. Its own thread takes its lock
         * (by the owner bias, no atomic operation), while the item lock is
         * still held, if no other thread's signal waits in the inbox (which
         * would then have to go first); another thread puts it on the
         * inbox. Else (several loops, a loop busy, an fd source, which has
         * no room for the inbox link): the general way. */
        RLRunLoopRef one = source_one_loop(s);
        if (one && one == rl__tls && inbox_empty(one) && rl__loop_trylock(one)) {
            ready_push_source(one, s);
            rl__loop_unlock(one);
        } else if (one && s->has_ctx && s->tail[0].inbox_rl == NULL) {
            inbox_push(one, s);
        } else if (one || RL_ITEMQ_FIRST(&s->membs)) {
            signal_each_loop(s); /* releases the item lock */
            return ok;
        }
    }
    rl__olock_unlock(&s->lock);
    return ok;
}

/* ---- a pass's side ---- */

/* A source and its order side by side: sorting compares keys in the array,
 * not through 100k pointers into the sources (a cache miss each). */
typedef struct okey {
    RLIndex order;
    struct RLRunLoopSource *s;
} okey;

/* Stable merge of the sorted runs k[lo, mid) and k[mid, hi) through tmp. */
static void merge_keys(okey *k, okey *tmp, size_t lo, size_t mid, size_t hi) {
    size_t i = lo, j = mid, o = lo;
    while (i < mid && j < hi)
        tmp[o++] = k[j].order < k[i].order ? k[j++] : k[i++];
    while (i < mid)
        tmp[o++] = k[i++];
    while (j < hi)
        tmp[o++] = k[j++];
    memcpy(k + lo, tmp + lo, (hi - lo) * sizeof *k);
}

/* Sorts by order, keeping signal order among equals (as the perform order
 * is defined): O(n) when already in order, the usual case (one order for
 * all), a bottom-up merge sort, O(n log n), otherwise. */
static void sort_sources(struct RLRunLoopSource **a, size_t n) {
    size_t i = 1;
    while (i < n && a[i - 1]->order <= a[i]->order)
        i++;
    if (i >= n)
        return;
    okey *k = malloc(2 * n * sizeof *k);
    if (!k) {
        /* Out of memory: the same order, by insertion (slow, but right). */
        for (; i < n; i++) {
            struct RLRunLoopSource *s = a[i];
            size_t j = i;
            for (; j > 0 && a[j - 1]->order > s->order; j--)
                a[j] = a[j - 1];
            a[j] = s;
        }
        return;
    }
    for (size_t j = 0; j < n; j++)
        k[j] = (okey){a[j]->order, a[j]};
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo + w < n; lo += 2 * w)
            merge_keys(k, k + n, lo, lo + w, lo + 2 * w < n ? lo + 2 * w : n);
    }
    for (size_t j = 0; j < n; j++)
        a[j] = k[j].s;
    free(k);
}

/* Takes the signalled sources of mode m off its ready list (retained), in
 * perform order. Entries of sources no longer signalled (performed through
 * another mode or loop) or invalid are dropped. Loop lock held. */
size_t rl__ready_take(rl__mode *m, struct RLRunLoopSource ***out, struct RLRunLoopSource **small,
                      size_t nsmall) {
    size_t n = 0;
    struct RLRunLoopSource **a = m->nready <= nsmall ? small : malloc(m->nready * sizeof *a);
    if (!a)
        return 0; /* out of memory: they stay listed for the next pass */
    rl__memb *x;
    while ((x = TAILQ_FIRST(&m->ready)) != NULL) {
        struct RLRunLoopSource *s = x->item;
        rl__ready_unlink(x);
        /* Read without the item lock: the pass checks again under it before
         * performing, and a signal that this read misses pushes the
         * membership again after this loop lock is released. */
        if (rl__peek(s->valid) && rl__peek(s->signalled)) {
            rl__retain_raw(s);
            a[n++] = s;
        }
    }
    sort_sources(a, n);
    *out = a;
    return n;
}

/* Each enclosing pass's unreached sources go back (rl_ready.h). */
void rl__ready_requeue_inflight(rl__mode *m) {
    for (struct rl__inflight *fl = m->inflight; fl; fl = fl->outer) {
        rl__ready_put_back(m, fl->a, fl->next, fl->n);
        fl->requeued = true;
    }
}

/* Puts the sources a[from..n) that are still signalled, valid and in m
 * back at the head of m's ready list, in their order (last first), ahead
 * of those signalled since. Loop lock held. */
void rl__ready_put_back(rl__mode *m, struct RLRunLoopSource **a, size_t from, size_t n) {
    for (size_t j = n; j-- > from;) {
        rl__olock_lock(&a[j]->lock);
        rl__memb *x = a[j]->signalled && a[j]->valid ? rl__memb_find(a[j], RL_KIND_SOURCE, m) : NULL;
        rl__olock_unlock(&a[j]->lock);
        if (x && !x->queued) {
            x->queued = true;
            TAILQ_INSERT_HEAD(&m->ready, x, ready_link);
            m->nready++;
        }
    }
}
