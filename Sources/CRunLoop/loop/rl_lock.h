/*
 * rl_lock.h — private: the run loop's locking protocol (rl_lock.c; the
 * whole protocol as a table: docs/locking.md). The loop lock and the item
 * locks (inline: every add, remove and pass takes them), the homes that
 * say which lock guards a timer or an observer, loop sets (an operation
 * that starts at a source visits its loops one loop lock at a time), and
 * the work deferred until no lock is held.
 */
#ifndef CRUNLOOP_RL_LOCK_H
#define CRUNLOOP_RL_LOCK_H

#include "runloop_internal.h"
#include "rl_loop.h"
#include "rl_lockclass.h"
#include "RLLockDebugInternal.h"
#include <crunloop/RLRunLoop.h>

/* ---- item locks ---- */

/* The loop and item locks report to the lock-order detector as the
 * classes RL_LOCKCLASS_LOOP and RL_LOCKCLASS_ITEM (rl_lockclass.h), so that
 * the protocol (loop before item; never two of a class) is checked for all
 * loops and items at once. */

/* The item lock: a 32-bit futex word (0 free, 1 held, 2 held with
 * sleepers, RL__OLOCK_BRIEF held by a loop's thread inside its biased
 * loop lock), so that it fits in a timer's first cache line. Held for a
 * few stores at a time. Nobody sleeps on a brief hold: a thread that finds
 * one spins, then yields, until it ends; so the holder ends it with a plain
 * store (rl__olock_unlock_brief), not the locked exchange that a sleeper's
 * wake-up needs, which cost a timer's first add a third of its time. The
 * word goes to 2 only from 1 or 0 (rl_lock.c), never from a brief hold. */
enum { RL__OLOCK_BRIEF = 3 };
RL__HIDDEN void rl__olock_lock_slow(rl__olock *l);
__attribute__((always_inline)) static inline void rl__olock_lock(rl__olock *l) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_ITEM, __builtin_return_address(0));
    uint32_t expected = 0;
    if (RL__UNLIKELY(!atomic_compare_exchange_strong_explicit(&l->word, &expected, 1, memory_order_acquire,
                                                              memory_order_relaxed)))
        rl__olock_lock_slow(l);
}
/* The item lock if it is free, without waiting, held briefly: for a
 * biased loop lock's section, which must not block (rl__loop_lock_biased)
 * and is not preempted by a fork (the fork handlers take every loop lock
 * the whole way: rl__bias_lock_full). Ended by rl__olock_unlock_brief. No
 * lock-order report: a biased section runs only with the detector off. */
__attribute__((always_inline)) static inline bool rl__olock_trylock_brief(rl__olock *l) {
    uint32_t expected = 0;
    return atomic_compare_exchange_strong_explicit(&l->word, &expected, RL__OLOCK_BRIEF, memory_order_acquire,
                                                   memory_order_relaxed);
}
__attribute__((always_inline)) static inline void rl__olock_unlock_brief(rl__olock *l) {
    atomic_store_explicit(&l->word, 0, memory_order_release);
}
__attribute__((always_inline)) static inline void rl__olock_unlock(rl__olock *l) {
    if (RL__UNLIKELY(atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2))
        rl__futex_wake(&l->word, 1);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_ITEM);
}

/* ---- the loop lock ----
 * A futex mutex (rl__mutex) biased to the loop's thread, the owner (the
 * thread whose rl__tls is the loop), which uses its own loop far more than
 * any other thread does: an asymmetric Dekker handshake, the fast side a
 * plain store and a plain load, the slow side membarrier(2) (rl_bias.c).
 *   - The owner, biased (bias.on == 1): stores bias.in = 1, a compiler
 *     barrier, loads bias.on; still 1: it is in, without the mutex, and
 *     leaves by a release store bias.in = 0. Found another value: clears
 *     bias.in, takes the mutex.
 *   - Any other thread takes the mutex; if it finds the lock biased it
 *     revokes the bias: bias.on = 2 (revoking), membarrier(PRIVATE_
 *     EXPEDITED) (every running thread of the process passes a full
 *     barrier: either the owner's bias.in = 1 is seen now, or the owner's
 *     load of bias.on sees 2 and it goes to the mutex), then waits until
 *     bias.in is 0 and sets bias.on = 0. A try-lock that finds the owner
 *     inside does not wait: it fails and leaves bias.on at 2, so that the
 *     next holder of the mutex waits (the owner, holding it, knows it is
 *     not inside).
 *   - bias.on changes only under the mutex: set by the owner after `need`
 *     acquisitions of its own in a row (another thread's acquisition starts
 *     the count again; each revocation doubles `need`, to a cap), so a loop
 *     that other threads lock often stays a plain mutex.
 * Never biased under PLAIN=1 and ThreadSanitizer (RL_TRICK_BIAS), nor in a
 * process where membarrier registration is refused (old kernel, seccomp,
 * valgrind, RL_BIAS=0 in the environment). The fork() handlers take every
 * loop's lock the whole way (rl__bias_lock_full: a bias is revoked, so the
 * child inherits none). */
RL__HIDDEN void rl__bias_owner_lock(RLRunLoopRef rl);
RL__HIDDEN bool rl__bias_owner_trylock(RLRunLoopRef rl);
RL__HIDDEN void rl__bias_revoke(RLRunLoopRef rl);
/* Revokes without waiting for the owner: false (the mutex released) if
 * the owner is inside. */
RL__HIDDEN bool rl__bias_revoke_try(RLRunLoopRef rl);
/* The whole lock, no lock-order hooks: the fork() handlers (undone by
 * rl__mutex_unlock). */
RL__HIDDEN void rl__bias_lock_full(RLRunLoopRef rl);
/* The owner's thread gives its loop up (teardown): the bias goes, with no
 * barrier (no other thread can be inside by it). */
RL__HIDDEN void rl__bias_disown(RLRunLoopRef rl);
/* In a fork() child: membarrier registration again (the child is a new
 * process); refused, no lock is biased there. */
RL__HIDDEN void rl__bias_fork_child(void);
/* For tests: whether rl's lock is biased now; whether this process may bias. */
RL__HIDDEN bool rl__loop_biased(RLRunLoopRef rl);
RL__HIDDEN bool rl__bias_usable(void);

/* Inline: every add and remove takes it once, and a call into libc's mutex
 * was a measurable part of a 10 ns timer add. */
__attribute__((always_inline)) static inline void rl__loop_lock(RLRunLoopRef rl) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_LOOP, __builtin_return_address(0));
#if RL_TRICK_BIAS
    if (RL__LIKELY(rl == rl__tls)) {
        atomic_store_explicit(&rl->bias.in, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (RL__LIKELY(atomic_load_explicit(&rl->bias.on, memory_order_acquire) == 1))
            return;
        atomic_store_explicit(&rl->bias.in, 0, memory_order_relaxed);
        rl__bias_owner_lock(rl);
        return;
    }
#endif
    if (RL__UNLIKELY(!rl__mutex_trylock(&rl->lock)))
        rl__mutex_lock_slow(&rl->lock, NULL);
    if (RL__UNLIKELY(atomic_load_explicit(&rl->bias.on, memory_order_relaxed)))
        rl__bias_revoke(rl);
}

__attribute__((always_inline)) static inline void rl__loop_unlock(RLRunLoopRef rl) {
#if RL_TRICK_BIAS
    if (RL__LIKELY(rl == rl__tls) && RL__LIKELY(atomic_load_explicit(&rl->bias.in, memory_order_relaxed)))
        atomic_store_explicit(&rl->bias.in, 0, memory_order_release);
    else
#endif
        rl__mutex_unlock(&rl->lock);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_LOOP);
}

/* The loop's thread's way in by the bias alone, for a hot path that makes
 * no call while inside: true if in (leave with rl__loop_unlock_biased);
 * false, with nothing taken, if the caller is not the loop's thread, the
 * lock is not biased, or the lock-order detector is on. */
__attribute__((always_inline)) static inline bool rl__loop_lock_biased(RLRunLoopRef rl) {
#if RL_TRICK_BIAS
    if (rl != rl__tls || RL__UNLIKELY(rl__lockclass_on()))
        return false;
    atomic_store_explicit(&rl->bias.in, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (RL__LIKELY(atomic_load_explicit(&rl->bias.on, memory_order_acquire) == 1))
        return true;
    atomic_store_explicit(&rl->bias.in, 0, memory_order_relaxed);
#endif
    return false;
}
__attribute__((always_inline)) static inline void rl__loop_unlock_biased(RLRunLoopRef rl) {
    atomic_store_explicit(&rl->bias.in, 0, memory_order_release);
}

/* A try-lock: the one way a loop lock may be taken under an item lock (it
 * cannot deadlock: a bias found with the owner inside is revoked, and the
 * try fails rather than wait for the owner). */
static inline bool rl__loop_trylock(RLRunLoopRef rl) {
#if RL_TRICK_BIAS
    if (rl == rl__tls) {
        atomic_store_explicit(&rl->bias.in, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&rl->bias.on, memory_order_acquire) != 1) {
            atomic_store_explicit(&rl->bias.in, 0, memory_order_relaxed);
            if (!rl__bias_owner_trylock(rl))
                return false;
        }
    } else
#endif
    {
        if (!rl__mutex_trylock(&rl->lock))
            return false;
        if (RL__UNLIKELY(atomic_load_explicit(&rl->bias.on, memory_order_relaxed)) && !rl__bias_revoke_try(rl))
            return false;
    }
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_took(RL_LOCKCLASS_LOOP, __builtin_return_address(0));
    return true;
}

/* ---- homes: what guards a timer's or an observer's state ----
 * The home is the loop the item was last added to. It stays when the item
 * leaves the loop's modes (so adding and removing it again costs the loop
 * lock only) and goes when the item joins another loop, when the loop is
 * torn down, and when the item is freed. The home pointer changes only
 * under both the home loop's lock and the item lock. */

/* Locks what guards item (a timer or an observer): returns its home,
 * locked, or NULL with the item lock held. rl__item_unlock undoes it. */
/* ---- a loop's idle timers (rl_lock.c) ----
 * A timer at home in a loop and in none of its modes is found through the
 * loop's array RLRunLoop.homed (each knows its slot, home_idx), so that
 * the loop's teardown takes it homeless; one in a mode is found through
 * the mode. A timer is listed when it is first in no mode at home (its
 * last mode left, or its first add there failed) and stays listed until
 * it leaves home, modes or not: so a timer waiting in a loop costs no slot
 * (100,000 timers added: no array), and one added and removed over and
 * over is listed once. The loop lock held. */
RL__HIDDEN bool rl__homed_grow(RLRunLoopRef rl);

static inline bool rl__timer_in_no_mode(const struct RLRunLoopTimer *t) { return !t->inline_used && !t->multi; }

/* Lists t, at home in rl (no-op if it is); false if the array cannot grow. */
static inline bool rl__homed_list(RLRunLoopRef rl, struct RLRunLoopTimer *t) {
    if (t->listed)
        return true;
    if (RL__UNLIKELY(rl->nhomed == rl->caphomed) && !rl__homed_grow(rl))
        return false;
    t->home_idx = rl->nhomed;
    rl->homed[rl->nhomed++] = t;
    t->listed = true;
    return true;
}

/* Takes t out of rl's array if it is listed; the last slot's timer takes its slot. */
static inline void rl__homed_unlist(RLRunLoopRef rl, struct RLRunLoopTimer *t) {
    if (!t->listed)
        return;
    struct RLRunLoopTimer *last = rl->homed[--rl->nhomed];
    rl->homed[t->home_idx] = last;
    last->home_idx = t->home_idx;
    t->listed = false;
}

RL__HIDDEN RLRunLoopRef rl__item_lock(void *item, rl__kind kind);
RL__HIDDEN void rl__item_unlock(void *item, rl__kind kind, RLRunLoopRef home);
/* The item is being freed: it leaves its home's list. */
RL__HIDDEN void rl__item_leave_home(void *item, rl__kind kind);
/* rl becomes the home of item; rl locked, item lock held, no home yet.
 * Always true (a timer is listed in rl's array only once it is in no
 * mode there: rl__homed_list). */
RL__HIDDEN bool rl__home_set_locked(RLRunLoopRef rl, void *item, rl__kind kind);
/* item leaves rl, its home; rl locked. Its state goes under its item lock. */
RL__HIDDEN void rl__home_clear_locked(RLRunLoopRef rl, void *item, rl__kind kind);

/* The item lock of a source, a timer or an observer. */
static inline rl__olock *rl__item_olock(void *item, rl__kind kind) {
    switch (kind) {
    case RL_KIND_SOURCE:
        return &((struct RLRunLoopSource *)item)->lock;
    case RL_KIND_TIMER:
        return &((struct RLRunLoopTimer *)item)->lock;
    default:
        return &((struct RLRunLoopObserver *)item)->lock;
    }
}

/* ---- loop sets ---- */

/* The distinct loops a source is in (its item lock held when collected),
 * retained, except the caller's own loop: visited one at a time after the
 * item lock is dropped. */
typedef struct rl__loopset {
    RLRunLoopRef *a;
    size_t n, cap;
    RLRunLoopRef mine;
    RLRunLoopRef inl[4];
} rl__loopset;

RL__HIDDEN void rl__loopset_init(rl__loopset *ls);
/* Notes the loops of s's memberships but `except` (s's item lock held). */
RL__HIDDEN void rl__loopset_collect(rl__loopset *ls, struct RLRunLoopSource *s, RLRunLoopRef except);
/* Releases what rl__loopset_collect retained; ls is empty again. */
RL__HIDDEN void rl__loopset_free(rl__loopset *ls);

/* Work collected under a lock and done after unlocking: cancel and
 * schedule callouts, context releases and object releases. */
typedef struct rl__defer_entry {
    int what; /* RL_DEFER_* */
    void *obj;
    RLRunLoopRef rl;
    const char *mode;
    void (*cfn)(const void *); /* RL_DEFER_CTX_RELEASE: cfn(carg) */
    const void *carg;
} rl__defer_entry;
enum {
    RL_DEFER_RELEASE = 0,
    RL_DEFER_CANCEL = 1,
    RL_DEFER_SCHEDULE = 2,
    RL_DEFER_CTX_RELEASE = 3,
    RL_DEFER_UNHOLD = 4,
    RL_DEFER_FINALIZE = 5 /* an object at count 0 the loop kept (rl__object_finalize) */
};

struct rl__defer {
    rl__defer_entry *e;
    size_t n, cap;
    rl__defer_entry inline_e[8];
};

RL__HIDDEN void rl__defer_grow(rl__defer *d);
/* Inline, as rl__defer_unhold: removing a timer makes both. */
static inline void rl__defer_init(rl__defer *d) {
    d->e = d->inline_e;
    d->n = 0;
    d->cap = sizeof d->inline_e / sizeof d->inline_e[0];
}
static inline void rl__defer_add(rl__defer *d, rl__defer_entry e) {
    if (RL__UNLIKELY(d->n == d->cap))
        rl__defer_grow(d);
    d->e[d->n++] = e;
}
/* Queues an entry; retains obj (and rl) so they outlive the unlock. */
RL__HIDDEN void rl__defer_push(rl__defer *d, int what, void *obj, RLRunLoopRef rl, const char *mode);
/* Queues the release of a reference the caller already owns (no retain). */
RL__HIDDEN void rl__defer_release(rl__defer *d, void *obj);
/* Queues a context release callout, release(info). */
RL__HIDDEN void rl__defer_ctx_release(rl__defer *d, void (*release)(const void *), const void *info);
/* Queues the drop of a reference taken with rl__hold_raw. */
static inline void rl__defer_unhold(rl__defer *d, void *obj) {
    rl__defer_add(d, (rl__defer_entry){RL_DEFER_UNHOLD, obj, NULL, NULL, NULL, NULL});
}
/* Drops a reference taken with rl__hold_raw at once, under the lock, if it
 * is not the object's last (the usual case: the caller holds its own);
 * otherwise queues the drop on d, for after the unlock (the last reference
 * finalizes, which may call user code). Removing a timer from its loop then
 * leaves nothing to run after the unlock. */
static inline void rl__unhold_or_defer(rl__defer *d, void *obj) {
    rl__object *o = obj;
    long rc = atomic_load_explicit(&o->rc, memory_order_relaxed);
    while ((rc & RL__RC_MASK) > 1 && rc >= RL__HELD_ONE)
        if (atomic_compare_exchange_weak_explicit(&o->rc, &rc, rc - (1 + RL__HELD_ONE), memory_order_release,
                                                  memory_order_relaxed))
            return;
    rl__defer_unhold(d, obj);
}
/* Timer t's inline membership ends, and with it the loop's virtual
 * reference (see RLRunLoopTimer.inline_used), the home's loop lock held:
 * true if t is an orphan (its count 0: no reference but the loop's), for
 * the caller to finalize after the unlock. */
static inline bool rl__timer_vref_drop_locked(struct RLRunLoopTimer *t) {
    t->inline_used = false;
    return (atomic_load_explicit(&((rl__object *)t)->rc, memory_order_relaxed) & RL__RC_MASK) == 0;
}

/* Runs the entries in order, without locks, and frees d. */
RL__HIDDEN void rl__defer_run(rl__defer *d);

/* A reference the loop keeps for a membership (or a common-modes item):
 * marked as the library's (RLBase.c), so that a caller who releases once
 * too often is refused instead of freeing what the loop still uses.
 * Dropped with rl__defer_unhold. */
static inline void rl__hold_raw(void *obj) {
    atomic_fetch_add_explicit(&((rl__object *)obj)->rc, 1 + RL__HELD_ONE, memory_order_relaxed);
}

#endif /* CRUNLOOP_RL_LOCK_H */
