/* rl_lock.c — the run loop's internal locks: the item lock's slow path and
 * the lock-order classes through which the loop and item locks report to
 * the lock-order detector (the protocol itself: docs/locking.md). */
#include "runloop_internal.h"

/* A busy item lock is waited for in the kernel at once, as RLLock's mutex
 * (RLLock.c says why it does not spin). */
void rl__olock_lock_slow(rl__olock *l) {
    /* 2: held, and someone may sleep; the unlock that sees it wakes one. */
    while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
        rl__futex_wait(&l->word, 2, NULL);
}

/* Each class has a key (the first lock of the class a thread takes) and a
 * "second" key (any further one while the first is held). The detector
 * learns, from every first acquisition, that the second key comes before
 * the first; so a thread that takes a second lock of a class while holding
 * one closes a cycle, and the detector reports it like any inversion. An
 * item lock taken under a loop lock teaches it "loop before item", so an
 * item lock held while taking a loop lock is reported too. */
static const char rl_class_key[2], rl_class_second[2];
static const char *const rl_class_name[2] = {"run-loop lock (any loop)", "run-loop item lock (any item)"};
static const char *const rl_class_second_name[2] = {"a second run-loop lock", "a second run-loop item lock"};
static __thread int rl_class_depth[2];
static __thread unsigned rl_class_epoch;

/* Depths counted before the detector was last switched on are stale (a
 * lock taken then and released while it was off was never counted down). */
static void rl_class_sync_epoch(void) {
    unsigned e = rl__lockdep_epoch();
    if (rl_class_epoch != e) {
        rl_class_epoch = e;
        rl_class_depth[0] = rl_class_depth[1] = 0;
    }
}

void rl__lockclass_take(rl_lockclass c, const void *where) {
    const void *first = &rl_class_key[c], *second = &rl_class_second[c];
    rl_class_sync_epoch();
    if (rl_class_depth[c]++ > 0) {
        rl__lockdep_will_acquire(second, rl_class_second_name[c], where);
        rl__lockdep_acquired(second, rl_class_second_name[c], where);
        return;
    }
    /* A loop lock under an item lock is reported by the next call: teaching
     * the "second" order through it would report the same fault twice. */
    bool teach = !(c == RL_LOCKCLASS_LOOP && rl_class_depth[RL_LOCKCLASS_ITEM] > 0);
    if (teach) {
        rl__lockdep_will_acquire(second, rl_class_second_name[c], where);
        rl__lockdep_acquired(second, rl_class_second_name[c], where);
    }
    rl__lockdep_will_acquire(first, rl_class_name[c], where);
    rl__lockdep_acquired(first, rl_class_name[c], where);
    if (teach)
        rl__lockdep_released(second);
}

void rl__lockclass_took(rl_lockclass c, const void *where) {
    rl_class_sync_epoch();
    /* A try-lock cannot deadlock: recorded as held (later locks order after
     * it), with no order edge into it. */
    if (rl_class_depth[c]++ > 0)
        rl__lockdep_acquired(&rl_class_second[c], rl_class_second_name[c], where);
    else
        rl__lockdep_acquired(&rl_class_key[c], rl_class_name[c], where);
}

void rl__lockclass_drop(rl_lockclass c) {
    rl_class_sync_epoch();
    /* Taken before the detector was switched on: nothing recorded. */
    if (rl_class_depth[c] <= 0)
        return;
    if (--rl_class_depth[c] > 0)
        rl__lockdep_released(&rl_class_second[c]);
    else
        rl__lockdep_released(&rl_class_key[c]);
}
