/* rl_lock.c — the run loop's internal locks: the item lock's slow path
 * (the protocol: docs/locking.md; the loop and item locks report to the
 * lock-order detector through rl_lockclass.c). */
#include "runloop_internal.h"

/* The spins of RLLock's futex mutex (RLLock.c, measured there), behind the
 * same switch (RL_TRICK_LOCK_SPIN; none in the plain build). */
enum { RL__OLOCK_SPINS = RL_TRICK_LOCK_SPIN ? 4 : 0 };

void rl__olock_lock_slow(rl__olock *l) {
    for (int i = 0; i < RL__OLOCK_SPINS; i++) {
        uint32_t w = atomic_load_explicit(&l->word, memory_order_relaxed), expected = 0;
        if (w == 0 && atomic_compare_exchange_weak_explicit(&l->word, &expected, 1, memory_order_acquire,
                                                            memory_order_relaxed))
            return;
        if (w == 2) /* others already sleep: spinning would only delay joining them */
            break;
        rl__cpu_relax();
    }
    /* 2: held, and someone may sleep; the unlock that sees it wakes one. */
    while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
        rl__futex_wait(&l->word, 2, NULL);
}
