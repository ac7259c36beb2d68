/*
 * rl_heap.h — private: a mode's timer set (heaps of timer memberships,
 * rl_heap.c), used under the loop lock. The types (rl__timerset, rl__heap,
 * rl__memb) are in runloop_internal.h because a mode embeds them.
 */
#ifndef CRUNLOOP_RL_HEAP_H
#define CRUNLOOP_RL_HEAP_H

#include "runloop_internal.h"

/* ---- timer heaps (rl_heap.c), the loop lock held ---- */

RL__HIDDEN void rl__tset_init(rl__timerset *ts);
RL__HIDDEN void rl__tset_free(rl__timerset *ts);
/* Makes the strict timers' array with its first room (2 entries) if it
 * has none; false if out of memory (the array is then made when timers
 * come, or they wait on the pending list). Called as a mode is made: else the
 * loop's first wait after its first timer made it, and malloc's frames
 * below the wait's were a loop thread's deepest stack (a page more,
 * resident for the thread's life; test_loop_memory). */
RL__HIDDEN bool rl__tset_reserve(rl__timerset *ts);
RL__HIDDEN bool rl__tset_add_slow(rl__timerset *ts, rl__memb *m);
/* Files a new membership (pending: no heap order yet, see rl_heap.c).
 * The common case, a strict timer, is inline and cannot fail: it goes on
 * the pending list, a few stores into the membership. */
/* The pending list (rl__timerset.pending): the membership of a link;
 * whether it is empty; each membership on it, in order (none unlinked on
 * the way). */
static inline rl__memb *rl__pending_memb(rl__ring *r) {
    return (rl__memb *)(void *)((char *)r - offsetof(rl__memb, plink));
}
static inline bool rl__pending_empty(const rl__timerset *ts) { return ts->pending.next == &ts->pending; }
#define RL__PENDING_FOREACH(m, ts)                                                                                     \
    for (rl__ring *rl__r_ = (ts)->pending.next; rl__r_ != &(ts)->pending && ((m) = rl__pending_memb(rl__r_), 1);  \
         rl__r_ = rl__r_->next)

/* A strict timer's (the caller checked: no tolerance): at the list's tail. */
static inline void rl__tset_add_strict(rl__timerset *ts, rl__memb *m) {
    m->lax = false;
    m->pending = true;
    rl__ring *head = &ts->pending, *last = head->prev;
    m->plink.next = head;
    m->plink.prev = last;
    last->next = &m->plink;
    head->prev = &m->plink;
}
static inline bool rl__tset_add(rl__timerset *ts, rl__memb *m) {
    const struct RLRunLoopTimer *t = m->item;
    if (RL__UNLIKELY(t->tolerant))
        return rl__tset_add_slow(ts, m);
    rl__tset_add_strict(ts, m);
    return true;
}
RL__HIDDEN void rl__tset_remove_slow(rl__timerset *ts, rl__memb *m);
/* Takes a membership out. The common case, a strict timer still pending
 * (added and removed before the loop looked), is inline: an unlink
 * (rl__tset_unlink_pending, for a caller that checked both already). */
static inline void rl__tset_unlink_pending(rl__timerset *ts, rl__memb *m) {
    (void)ts;
    rl__ring *next = m->plink.next, *prev = m->plink.prev;
    next->prev = prev;
    prev->next = next;
    m->pending = false;
}
static inline void rl__tset_remove(rl__timerset *ts, rl__memb *m) {
    if (RL__LIKELY(!m->lax && m->pending)) {
        rl__tset_unlink_pending(ts, m);
        return;
    }
    rl__tset_remove_slow(ts, m);
}
/* The timer's date or tolerance changed. */
RL__HIDDEN bool rl__tset_update(rl__timerset *ts, rl__memb *m);
/* Some membership (to empty the set), or NULL. */
RL__HIDDEN rl__memb *rl__tset_any(const rl__timerset *ts);
/* Earliest fire date (every timer) / earliest wake deadline (fire date +
 * tolerance) of the timers not being fired: a timer whose callout is running
 * is past its date, and letting it arm the wake-up would make a nested run
 * of the same mode spin until the callout returns (CF skips it too); it is
 * re-filed after its callout. False if there is none. */
RL__HIDDEN bool rl__tset_earliest_fire(rl__timerset *ts, double *date);
RL__HIDDEN bool rl__tset_earliest_deadline(rl__timerset *ts, double *date);
/* Appends to *out every membership whose fire date is <= now. */
RL__HIDDEN void rl__tset_collect_due(rl__timerset *ts, RLAbsoluteTime now, rl__memb ***out, size_t *n,
                                     size_t *cap);

#endif /* CRUNLOOP_RL_HEAP_H */
