/* rl_lockclass.c — the lock-order classes (rl_lockclass.h): how the
 * run loop's, sockets', streams' and the signal table's locks report to the
 * lock-order detector (RLLockDebug.c) as one lock per class. The protocol
 * they follow: docs/locking.md. */
#include "rl_lockclass.h"
#include "RLLockDebugInternal.h"

#include <string.h>

/* Each class has a key (the first lock of the class a thread takes) and a
 * "second" key (any further one while the first is held). The detector
 * learns, from every first acquisition, that the second key comes before
 * the first; so a thread that takes a second lock of a class while holding
 * one closes a cycle, and the detector reports it like any inversion. A
 * lock taken under one of another class teaches the detector that order
 * ("loop before item", "stream before loop"), so the reverse is reported
 * too. */
static const char class_key[RL_LOCKCLASS_COUNT], class_second[RL_LOCKCLASS_COUNT];
static const char *const class_name[RL_LOCKCLASS_COUNT] = {
    [RL_LOCKCLASS_LOOP] = "run-loop lock (any loop)",
    [RL_LOCKCLASS_ITEM] = "run-loop item lock (any item)",
    [RL_LOCKCLASS_SOCKET] = "RLSocket lock (any socket)",
    [RL_LOCKCLASS_STREAM_SOCKET] = "socket stream connection lock (any connection)",
    [RL_LOCKCLASS_STREAM] = "stream lock (any stream)",
    [RL_LOCKCLASS_STREAM_PAIR] = "bound pair lock (any pair)",
    [RL_LOCKCLASS_RESOLVER] = "stream resolver lock",
    [RL_LOCKCLASS_SIGNAL] = "signal table lock",
};
static const char *const class_second_name[RL_LOCKCLASS_COUNT] = {
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
static const int class_rank[RL_LOCKCLASS_COUNT] = {
    [RL_LOCKCLASS_SOCKET] = 0, [RL_LOCKCLASS_STREAM_SOCKET] = 0, [RL_LOCKCLASS_STREAM] = 1,
    [RL_LOCKCLASS_LOOP] = 2,   [RL_LOCKCLASS_ITEM] = 3,          [RL_LOCKCLASS_STREAM_PAIR] = 4,
    [RL_LOCKCLASS_RESOLVER] = 4, [RL_LOCKCLASS_SIGNAL] = 4,
};
static __thread int class_depth[RL_LOCKCLASS_COUNT];
static __thread unsigned class_epoch;

/* Depths counted before the detector was last switched on are stale (a
 * lock taken then and released while it was off was never counted down). */
static void class_sync_epoch(void) {
    unsigned e = rl__lockdep_epoch();
    if (class_epoch != e) {
        class_epoch = e;
        memset(class_depth, 0, sizeof class_depth);
    }
}

/* Is a lock of a class that comes after c in the order held? */
static bool class_later_held(rl__lockclass c) {
    for (int k = 0; k < RL_LOCKCLASS_COUNT; k++)
        if (class_depth[k] > 0 && class_rank[k] > class_rank[c])
            return true;
    return false;
}

void rl__lockclass_take(rl__lockclass c, const void *where) {
    const void *first = &class_key[c], *second = &class_second[c];
    class_sync_epoch();
    if (class_depth[c]++ > 0) {
        rl__lockdep_will_acquire(second, class_second_name[c], where);
        rl__lockdep_acquired(second, class_second_name[c], where);
        return;
    }
    /* A lock taken under one that comes after it is reported by the next
     * call: teaching the "second" order through it would report the same
     * fault twice. */
    bool teach = !class_later_held(c);
    if (teach) {
        rl__lockdep_will_acquire(second, class_second_name[c], where);
        rl__lockdep_acquired(second, class_second_name[c], where);
    }
    rl__lockdep_will_acquire(first, class_name[c], where);
    rl__lockdep_acquired(first, class_name[c], where);
    if (teach)
        rl__lockdep_released(second);
}

void rl__lockclass_took(rl__lockclass c, const void *where) {
    class_sync_epoch();
    /* A try-lock cannot deadlock: recorded as held (later locks order after
     * it), with no order edge into it. */
    if (class_depth[c]++ > 0)
        rl__lockdep_acquired(&class_second[c], class_second_name[c], where);
    else
        rl__lockdep_acquired(&class_key[c], class_name[c], where);
}

void rl__lockclass_drop(rl__lockclass c) {
    class_sync_epoch();
    /* Taken before the detector was switched on: nothing recorded. */
    if (class_depth[c] <= 0)
        return;
    if (--class_depth[c] > 0)
        rl__lockdep_released(&class_second[c]);
    else
        rl__lockdep_released(&class_key[c]);
}
