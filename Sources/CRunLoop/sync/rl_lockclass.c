/* rl_lockclass.c — the lock-order classes (rl_lockclass.h): how the
 * run loop's, sockets', streams' and the signal table's locks report to the
 * lock-order detector (RLLockDebug.c) as one lock per class. The protocol
 * they follow: docs/locking.md. */
#include "rl_lockclass.h"

#include <string.h>

/* Each class has a key (the first lock of the class a thread takes) and a
 * "second" key (any further one while the first is held). The detector
 * learns, from every first acquisition, that the second key comes before
 * the first; so a thread that takes a second lock of a class while holding
 * one closes a cycle, and the detector reports it like any inversion. A
 * lock taken under one of another class teaches the detector that order
 * ("loop before item", "stream before loop"), so the reverse is reported
 * too. */
static const char rl_class_key[RL_LOCKCLASS_COUNT], rl_class_second[RL_LOCKCLASS_COUNT];
static const char *const rl_class_name[RL_LOCKCLASS_COUNT] = {
    [RL_LOCKCLASS_LOOP] = "run-loop lock (any loop)",
    [RL_LOCKCLASS_ITEM] = "run-loop item lock (any item)",
    [RL_LOCKCLASS_SOCKET] = "RLSocket lock (any socket)",
    [RL_LOCKCLASS_STREAM_SOCKET] = "socket stream connection lock (any connection)",
    [RL_LOCKCLASS_STREAM] = "stream lock (any stream)",
    [RL_LOCKCLASS_STREAM_PAIR] = "bound pair lock (any pair)",
    [RL_LOCKCLASS_RESOLVER] = "stream resolver lock",
    [RL_LOCKCLASS_SIGNAL] = "signal table lock",
};
static const char *const rl_class_second_name[RL_LOCKCLASS_COUNT] = {
    [RL_LOCKCLASS_LOOP] = "a second run-loop lock",
    [RL_LOCKCLASS_ITEM] = "a second run-loop item lock",
    [RL_LOCKCLASS_SOCKET] = "a second RLSocket lock",
    [RL_LOCKCLASS_STREAM_SOCKET] = "a second socket stream connection lock",
    [RL_LOCKCLASS_STREAM] = "a second stream lock",
    [RL_LOCKCLASS_STREAM_PAIR] = "a second bound pair lock",
    [RL_LOCKCLASS_RESOLVER] = "the stream resolver lock again",
    [RL_LOCKCLASS_SIGNAL] = "the signal table lock again",
};
/* Where each class stands in the documented order (docs/locking.md): a
 * lock may be taken while holding one of a lower rank. Classes of one rank
 * are never held together. */
static const int rl_class_rank[RL_LOCKCLASS_COUNT] = {
    [RL_LOCKCLASS_SOCKET] = 0, [RL_LOCKCLASS_STREAM_SOCKET] = 0, [RL_LOCKCLASS_STREAM] = 1,
    [RL_LOCKCLASS_LOOP] = 2,   [RL_LOCKCLASS_ITEM] = 3,          [RL_LOCKCLASS_STREAM_PAIR] = 4,
    [RL_LOCKCLASS_RESOLVER] = 4, [RL_LOCKCLASS_SIGNAL] = 4,
};
static __thread int rl_class_depth[RL_LOCKCLASS_COUNT];
static __thread unsigned rl_class_epoch;

/* Depths counted before the detector was last switched on are stale (a
 * lock taken then and released while it was off was never counted down). */
static void rl_class_sync_epoch(void) {
    unsigned e = rl__lockdep_epoch();
    if (rl_class_epoch != e) {
        rl_class_epoch = e;
        memset(rl_class_depth, 0, sizeof rl_class_depth);
    }
}

/* Is a lock of a class that comes after c in the order held? */
static bool rl_class_later_held(rl_lockclass c) {
    for (int k = 0; k < RL_LOCKCLASS_COUNT; k++)
        if (rl_class_depth[k] > 0 && rl_class_rank[k] > rl_class_rank[c])
            return true;
    return false;
}

void rl__lockclass_take(rl_lockclass c, const void *where) {
    const void *first = &rl_class_key[c], *second = &rl_class_second[c];
    rl_class_sync_epoch();
    if (rl_class_depth[c]++ > 0) {
        rl__lockdep_will_acquire(second, rl_class_second_name[c], where);
        rl__lockdep_acquired(second, rl_class_second_name[c], where);
        return;
    }
    /* A lock taken under one that comes after it is reported by the next
     * call: teaching the "second" order through it would report the same
     * fault twice. */
    bool teach = !rl_class_later_held(c);
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
