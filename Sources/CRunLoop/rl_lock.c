/* rl_lock.c — the run loop's internal locks: the item lock's slow path
 * (the protocol: docs/locking.md; the loop and item locks report to the
 * lock-order detector through rl_lockclass.c). */
#include "runloop_internal.h"

/* A busy item lock is waited for in the kernel at once, as RLLock's mutex
 * (RLLock.c says why it does not spin). */
void rl__olock_lock_slow(rl__olock *l) {
    /* 2: held, and someone may sleep; the unlock that sees it wakes one. */
    while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
        rl__futex_wait(&l->word, 2, NULL);
}
