/*
 * rl_ready.h — private: the ready lists of signalled sources (rl_ready.c).
 * A list is a mode's (rl__mode.ready, runloop_internal.h); its entries are
 * memberships, flagged `queued` while on it. The list holds no reference:
 * a membership leaves it when removed. A loop's inbox (rl->inbox) holds
 * the sources other threads signalled, not on the lists yet; no reference
 * either: a source leaves it with its last membership in that loop. Loop
 * lock held unless said otherwise.
 */
#ifndef CRUNLOOP_RL_READY_H
#define CRUNLOOP_RL_READY_H

#include "runloop_internal.h"

/* A membership leaves its mode's list (no-op if it is not on it). */
RL__HIDDEN void rl__ready_unlink(rl__memb *m);
/* Signals s: false if it is invalid. Its loops get it on their ready
 * lists, one loop lock at a time. No lock held. */
RL__HIDDEN bool rl__source_signal(struct RLRunLoopSource *s);

/* Moves rl's inbox (rl_ready.c: sources other threads signalled) onto its
 * modes' ready lists, oldest first. rl locked, no item lock held. */
RL__HIDDEN void rl__inbox_drain(RLRunLoopRef rl);
/* Whether rl's inbox may hold sources: the pass's look, with no lock. */
static inline bool rl__inbox_any(RLRunLoopRef rl) { return atomic_load(&rl->inbox) != NULL; }
/* Takes s off rl's inbox, the rest kept in order: s's last membership in rl
 * goes. rl locked, s's item lock held, s on rl's inbox. */
RL__HIDDEN void rl__inbox_detach(RLRunLoopRef rl, struct RLRunLoopSource *s);

/* A signalled source's new membership m, in rl: onto its mode's ready
 * list, behind the sources other threads signalled before (rl's inbox).
 * rl locked, the source's item lock held. */
RL__HIDDEN void rl__ready_push_joined(RLRunLoopRef rl, rl__memb *m);

/* Whether s is signalled already, its perform not begun: a signal then has
 * nothing to do (a producer that signals faster than the loop performs,
 * the guide's pattern), and writes nothing to the source's line, which the
 * loop reads. Inline, so that such a signal costs a few loads and no call.
 * The fence pairs with the one the pass makes after clearing `signalled`
 * and before the perform (RLRunLoopRun.c): either the second load sees the
 * clear, and the caller signals in full (rl__source_signal), or the
 * perform sees what the caller stored before signalling. gcc and clang
 * make it a locked no-op on the stack (`lock or`): after the caller's own
 * mutex unlock it costs next to nothing, where an mfence cost 15 ns on the
 * bench machine (Zen 4). An
 * invalidation clears `signalled` too, so a set flag also says the source
 * is valid. A source not signalled (the usual signal on the loop's own
 * thread) pays no fence: rl__source_signal's locks order it. */
static inline bool rl__source_signalled_already(struct RLRunLoopSource *s) {
    if (!rl__peek(s->signalled))
        return false;
    atomic_thread_fence(memory_order_seq_cst);
    return rl__peek(s->signalled);
}

/* Takes the signalled sources of mode m off its list (retained), in
 * perform order, into *out (small, of nsmall entries, if they fit; else
 * malloc'ed). Returns how many. */
RL__HIDDEN size_t rl__ready_take(rl__mode *m, struct RLRunLoopSource ***out, struct RLRunLoopSource **small,
                                 size_t nsmall);
/* Puts a[from..n) back at the head of m's list, in their order, those
 * still signalled, valid and in m. */
RL__HIDDEN void rl__ready_put_back(rl__mode *m, struct RLRunLoopSource **a, size_t from, size_t n);

/* What a pass of a mode took off its ready list and has not performed yet:
 * a[next..n). As in CF, a source keeps its signal until its own perform, so
 * a run of the same mode nested in an earlier perform must see them. The
 * pass links it on its mode (rl__mode.inflight) while it performs. */
struct rl__inflight {
    struct RLRunLoopSource **a;
    size_t next, n;
    bool requeued; /* a nested pass put a[next..n) back on the ready list */
    struct rl__inflight *outer;
};

/* Puts the still signalled sources that enclosing passes of m took and
 * have not reached back at the head of m's list, in their order, for a
 * pass of m nested in one of their performs. */
RL__HIDDEN void rl__ready_requeue_inflight(rl__mode *m);

#endif /* CRUNLOOP_RL_READY_H */
