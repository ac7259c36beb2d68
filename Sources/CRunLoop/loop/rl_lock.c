/* rl_lock.c — the run loop's locking protocol (docs/locking.md): the item
 * lock's slow path (the loop and item locks report to the lock-order
 * detector through rl_lockclass.c), the homes that say which lock
 * guards a timer or an observer, the loop sets through which an operation
 * on a source visits its loops one loop lock at a time, and the work
 * deferred until no lock is held (callouts, releases). Low in the run-loop
 * files: it calls only the object model and, in deferred work, the
 * sources' schedule and cancel callbacks. */
#include "rl_lock.h"
#include "rl_stamp.h"
#include "rl_loop.h"
#include <crunloop/RLRunLoop.h>

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* A busy item lock is waited for in the kernel at once, as RLLock's mutex
 * (RLLock.c says why it does not spin), unless it is held briefly (by a
 * loop's thread in its biased section, rl_lock.h): that hold ends with a
 * plain store, which wakes nobody, so it is waited for by spinning, then
 * yielding. 2: held, and someone may sleep; the unlock that sees it wakes
 * one. It is set from 1 (the holder's unlock then wakes) or from 0 (taken:
 * this thread's own unlock will), never from a brief hold. */
void rl__olock_lock_slow(rl__olock *l) {
    for (unsigned spins = 0;;) {
        uint32_t c = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (c == RL__OLOCK_BRIEF) {
            if (++spins < 64)
                rl__cpu_relax();
            else
                sched_yield();
            continue;
        }
        if (c == 0) {
            if (atomic_compare_exchange_weak_explicit(&l->word, &c, 2, memory_order_acquire, memory_order_relaxed))
                return;
            continue;
        }
        if (c == 1 && !atomic_compare_exchange_weak_explicit(&l->word, &c, 2, memory_order_relaxed,
                                                              memory_order_relaxed))
            continue;
        rl__futex_wait(&l->word, 2, NULL);
    }
}

/* ---- homes and item locks (rl_lock.h) ---- */

/* rl becomes the home of item; rl locked, item lock held, no home yet. */
/* Room for one more listed timer in rl's array; false if it cannot grow. */
__attribute__((noinline)) bool rl__homed_grow(RLRunLoopRef rl) {
    if (rl->caphomed >= UINT32_MAX / 2)
        return false;
    uint32_t cap = rl->caphomed ? rl->caphomed * 2 : 2; /* as a mode's timer heap (rl_heap.c) */
    struct RLRunLoopTimer **a = realloc(rl->homed, cap * sizeof *a);
    if (!a)
        return false;
    rl->homed = a;
    rl->caphomed = cap;
    return true;
}

bool rl__home_set_locked(RLRunLoopRef rl, void *item, rl__kind kind) {
    if (kind == RL_KIND_TIMER) {
        rl__timer_arrive_locked(rl, item); /* listed only once in no mode here (rl__homed_list) */
    } else {
        TAILQ_INSERT_TAIL(&rl->homed_observers, (struct RLRunLoopObserver *)item, home_link);
    }
    atomic_store_explicit(rl__item_home(item, kind), rl, memory_order_relaxed);
    return true;
}

/* item leaves rl, its home; rl locked. Its state goes under its item lock. */
void rl__home_clear_locked(RLRunLoopRef rl, void *item, rl__kind kind) {
    rl__olock *ol = rl__item_olock(item, kind);
    rl__olock_lock(ol);
    atomic_store_explicit(rl__item_home(item, kind), NULL, memory_order_relaxed);
    rl__olock_unlock(ol);
    if (kind == RL_KIND_TIMER)
        rl__homed_unlist(rl, item);
    else
        TAILQ_REMOVE(&rl->homed_observers, (struct RLRunLoopObserver *)item, home_link);
}

RLRunLoopRef rl__item_lock(void *item, rl__kind kind) {
    rl__olock *ol = rl__item_olock(item, kind);
    RLRunLoopRef mine = rl__tls;
    for (;;) {
        RLRunLoopRef h = rl__home_get(item, kind);
        if (h && h == mine) {
            /* The caller's own loop (the usual case: a timer moved from
             * its callout) cannot go away meanwhile. */
            rl__loop_lock(h);
            if (rl__home_get(item, kind) == h)
                return h;
            rl__loop_unlock(h);
            continue;
        }
        rl__olock_lock(ol);
        h = rl__home_get(item, kind);
        if (!h)
            return NULL; /* homeless, and stays so while the item lock is held */
        /* A home is cleared only under the item lock (by a thread that holds
         * its own reference on the loop), so h is alive here. */
        rl__retain_raw(h);
        rl__olock_unlock(ol);
        rl__loop_lock(h);
        if (rl__home_get(item, kind) == h) {
            /* Still home, so h's teardown has not cleared it yet, and h's
             * thread still holds its reference: ours cannot be the last. */
            atomic_fetch_sub_explicit(&((rl__object *)h)->rc, 1, memory_order_release);
            return h;
        }
        rl__loop_unlock(h);
        RLRelease(h);
    }
}

void rl__item_unlock(void *item, rl__kind kind, RLRunLoopRef home) {
    if (home)
        rl__loop_unlock(home);
    else
        rl__olock_unlock(rl__item_olock(item, kind));
}

void rl__item_leave_home(void *item, rl__kind kind) {
    RLRunLoopRef h = rl__item_lock(item, kind);
    if (h)
        rl__home_clear_locked(h, item, kind);
    rl__item_unlock(item, kind, h);
}

void rl__loopset_init(rl__loopset *ls) {
    ls->a = ls->inl;
    ls->n = 0;
    ls->cap = sizeof ls->inl / sizeof ls->inl[0];
    ls->mine = rl__tls;
}

void rl__loopset_collect(rl__loopset *ls, struct RLRunLoopSource *s, RLRunLoopRef except) {
    rl__memb *m;
    RL_ITEMQ_FOREACH(m, &s->membs) {
        RLRunLoopRef rl = rl__memb_rl(m);
        if (rl == except)
            continue;
        bool seen = false;
        for (size_t i = 0; i < ls->n && !seen; i++)
            seen = ls->a[i] == rl;
        if (seen)
            continue;
        if (ls->n == ls->cap) {
            size_t cap = ls->cap * 2;
            RLRunLoopRef *a = malloc(cap * sizeof *a);
            if (!a)
                abort(); /* a loop left out would miss a signal or keep an invalid source */
            memcpy(a, ls->a, ls->n * sizeof *a);
            if (ls->a != ls->inl)
                free(ls->a);
            ls->a = a;
            ls->cap = cap;
        }
        if (rl != ls->mine)
            rl__retain_raw(rl);
        ls->a[ls->n++] = rl;
    }
}

void rl__loopset_free(rl__loopset *ls) {
    for (size_t i = 0; i < ls->n; i++) {
        if (ls->a[i] != ls->mine)
            RLRelease(ls->a[i]);
    }
    if (ls->a != ls->inl)
        free(ls->a);
    rl__loopset_init(ls);
}

/* ---- deferred work ---- */

/* d is full: twice the room (the inline entries are copied out once). */
void rl__defer_grow(rl__defer *d) {
    size_t cap = d->cap * 2;
    rl__defer_entry *a = malloc(cap * sizeof *a);
    if (!a)
        abort(); /* losing a release would corrupt reference counts */
    memcpy(a, d->e, d->n * sizeof *a);
    if (d->e != d->inline_e)
        free(d->e);
    d->e = a;
    d->cap = cap;
}

void rl__defer_push(rl__defer *d, int what, void *obj, RLRunLoopRef rl, const char *mode) {
    if (obj)
        rl__retain_raw(obj);
    if (rl)
        rl__retain_raw(rl);
    rl__defer_add(d, (rl__defer_entry){what, obj, rl, mode, NULL, NULL});
}

void rl__defer_release(rl__defer *d, void *obj) {
    rl__defer_add(d, (rl__defer_entry){RL_DEFER_RELEASE, obj, NULL, NULL, NULL, NULL});
}

void rl__defer_ctx_release(rl__defer *d, void (*release)(const void *), const void *info) {
    if (release)
        rl__defer_add(d, (rl__defer_entry){RL_DEFER_CTX_RELEASE, NULL, NULL, NULL, release, info});
}

static void defer_call(rl__defer_entry *e) {
    struct RLRunLoopSource *s = e->obj;
    switch (e->what) {
    case RL_DEFER_SCHEDULE:
        if (rl__source_ctx(s)->schedule)
            s->tail[0].ctx.schedule(s->tail[0].ctx.info, e->rl, e->mode);
        break;
    case RL_DEFER_CANCEL:
        if (rl__source_ctx(s)->cancel)
            s->tail[0].ctx.cancel(s->tail[0].ctx.info, e->rl, e->mode);
        break;
    case RL_DEFER_CTX_RELEASE:
        e->cfn(e->carg);
        break;
    default:
        break;
    }
}

void rl__defer_run(rl__defer *d) {
    for (size_t i = 0; i < d->n; i++) {
        rl__defer_entry *e = &d->e[i];
        if (e->what == RL_DEFER_FINALIZE) {
            rl__object_finalize(e->obj);
            continue;
        }
        if (e->what != RL_DEFER_RELEASE && e->what != RL_DEFER_UNHOLD)
            defer_call(e);
        if (e->obj && e->what == RL_DEFER_UNHOLD)
            rl__object_unhold(e->obj);
        else if (e->obj)
            RLRelease(e->obj);
        if (e->rl)
            RLRelease(e->rl);
    }
    if (d->e != d->inline_e)
        free(d->e);
    rl__defer_init(d);
}
