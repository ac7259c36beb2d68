/* rl_lockclass.h — lock-order classes for the detector (RLLockDebug.h).
 *
 * Locks that exist in numbers (one per loop, per item, per stream...) and
 * follow one protocol report to the detector as classes, not one by one:
 * every loop lock is one "run-loop lock", every stream lock one "stream
 * lock", so a rule broken with any two of them is reported the first time,
 * whichever objects a test happens to use. The protocol: docs/locking.md.
 * Implemented in rl_lockclass.c. Private. */
#ifndef CRUNLOOP_RL_LOCKCLASS_H
#define CRUNLOOP_RL_LOCKCLASS_H

#include "internal.h"
#include "RLLockDebugInternal.h"

/* In the documented order, earliest first, except where a comment says
 * otherwise; a lock may be taken while holding one of an earlier class. */
typedef enum rl__lockclass {
    RL_LOCKCLASS_LOOP = 0,      /* a run loop's lock */
    RL_LOCKCLASS_ITEM = 1,      /* a source's, timer's or observer's lock: under a loop lock */
    RL_LOCKCLASS_SOCKET,        /* an RLSocket's lock: before loop and item locks */
    RL_LOCKCLASS_STREAM_SOCKET, /* a socket stream's connection: before stream, loop and item */
    RL_LOCKCLASS_STREAM,        /* a read or write stream's lock: before loop and item */
    RL_LOCKCLASS_STREAM_PAIR,   /* a bound pair's ring: a leaf */
    RL_LOCKCLASS_RESOLVER,      /* the resolver's queue: a leaf, under a connection lock */
    RL_LOCKCLASS_SIGNAL,        /* the process's signal table: a leaf */
    RL_LOCKCLASS_COUNT
} rl__lockclass;

/* Whether the library's own locks report to the detector now: only in a
 * build made with RL_LOCKCLASS=1 (`make check-lockdep`'s), and there while
 * the detector is on. Two instructions on every lock and unlock of a loop,
 * item, socket or stream cost more than a tenth of a timer's or an fd's
 * wake-up; the orders they check are the library's, not the program's
 * (no user code runs under these locks), so the library's own CI checks
 * them and a program's build need not. The program's RL locks report in
 * every build (RLLockDebug.h). */
#ifndef RL_LOCKCLASS
#define RL_LOCKCLASS 0
#endif
static inline bool rl__lockclass_on(void) { return RL_LOCKCLASS && rl__lockdep_enabled(); }

/* Call only when rl__lockclass_on(). Before blocking on a lock of class
 * c: records the order edges from what the thread holds, reports an
 * inversion (or a second lock of a class taken under the first). */
RL__HIDDEN void rl__lockclass_take(rl__lockclass c, const void *where);
/* After a successful try-lock (no order edge: it cannot deadlock). */
RL__HIDDEN void rl__lockclass_took(rl__lockclass c, const void *where);
/* After the lock was released. */
RL__HIDDEN void rl__lockclass_drop(rl__lockclass c);

#endif /* CRUNLOOP_RL_LOCKCLASS_H */
