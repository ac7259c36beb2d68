/* rl_bias.c — the loop lock's owner bias (the protocol: rl_lock.h and
 * docs/locking.md): the owner's way to the mutex and back to the bias, a
 * revocation by another thread (membarrier(2), then a wait for the owner
 * to leave), and the process's registration for membarrier. */
#include "rl_lock.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The owner's first `need`: its acquisitions in a row before the lock is
 * biased; each revocation doubles it, up to the cap (a loop that another
 * thread locks once per million of its own stays mostly biased). */
enum { BIAS_FIRST = 64, BIAS_CAP = 1u << 20, BIAS_SPINS = 256, BIAS_REVOKING = 2 };

/* Tests read how many revocations were made, and may lower the cap (to
 * BIAS_FIRST: the lock changes hands between bias and mutex all the time). */
RL__HIDDEN _Atomic unsigned long rl__bias_revokes;
RL__HIDDEN uint32_t rl__bias_cap = BIAS_CAP;

/* Whether this process may bias: 0 not asked yet, 1 registered, 2 refused. */
static _Atomic int bias_state;

static int membarrier(int cmd) { return (int)syscall(SYS_membarrier, cmd, 0, 0); }

/* Registers for MEMBARRIER_CMD_PRIVATE_EXPEDITED: 1 if it can be used, 2 if not. */
static int bias_register(void) {
    const char *env = getenv("RL_BIAS");
    if (!RL_TRICK_BIAS || (env && strcmp(env, "0") == 0) || rl__fault(RL_FAULT_MEMBARRIER))
        return 2;
    int saved = errno;
    int q = membarrier(MEMBARRIER_CMD_QUERY);
    int ok = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
             membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    errno = saved;
    return ok ? 1 : 2;
}

bool rl__bias_usable(void) {
    int st = atomic_load_explicit(&bias_state, memory_order_acquire);
    if (RL__UNLIKELY(st == 0)) {
        int mine = bias_register();
        st = 0;
        if (!atomic_compare_exchange_strong(&bias_state, &st, mine))
            return st == 1;
        st = mine;
    }
    return st == 1;
}

void rl__bias_fork_child(void) {
    if (atomic_load_explicit(&bias_state, memory_order_relaxed) != 0)
        atomic_store(&bias_state, bias_register());
}

bool rl__loop_biased(RLRunLoopRef rl) { return atomic_load_explicit(&rl->bias.on, memory_order_relaxed) == 1; }

/* The owner holds the mutex: a revocation left unfinished (BIAS_REVOKING)
 * was waiting for this thread, which is not inside by the bias; then it
 * counts its acquisition, and after enough in a row the lock is biased
 * from the next one. */
static void owner_count(RLRunLoopRef rl) {
    if (RL__UNLIKELY(atomic_load_explicit(&rl->bias.on, memory_order_relaxed) == BIAS_REVOKING))
        atomic_store_explicit(&rl->bias.on, 0, memory_order_relaxed);
    uint32_t need = rl->bias.need ? rl->bias.need : BIAS_FIRST;
    if (++rl->bias.run < need)
        return;
    rl->bias.run = 0;
    rl->bias.need = need;
    if (rl__bias_usable())
        atomic_store_explicit(&rl->bias.on, 1, memory_order_relaxed);
}

void rl__bias_owner_lock(RLRunLoopRef rl) {
    if (RL__UNLIKELY(!rl__mutex_trylock(&rl->lock)))
        rl__mutex_lock_slow(&rl->lock, NULL);
    owner_count(rl);
}

bool rl__bias_owner_trylock(RLRunLoopRef rl) {
    if (!rl__mutex_trylock(&rl->lock))
        return false;
    owner_count(rl);
    return true;
}

/* The mutex held, the lock biased: the bias goes. After the barrier the
 * owner is either seen inside (bias.in) or bound to find bias.on not 1
 * and take the mutex. Until the owner is seen outside, bias.on stays
 * BIAS_REVOKING: the next holder of the mutex waits for it (a try-lock
 * that cannot wait leaves that to the next one). */
static void revoke_start(RLRunLoopRef rl) {
    atomic_store_explicit(&rl->bias.on, BIAS_REVOKING, memory_order_relaxed);
    rl->bias.run = 0;
    uint32_t need = rl->bias.need ? rl->bias.need : BIAS_FIRST;
    uint32_t cap = rl__peek(rl__bias_cap);
    rl->bias.need = need >= cap / 2 ? cap : need * 2;
    atomic_fetch_add_explicit(&rl__bias_revokes, 1, memory_order_relaxed);
    if (rl__fault(RL_FAULT_BIAS_BREAK))
        return;
    int saved = errno;
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
        /* Registered, so this cannot fail: going on could put two threads
         * inside. */
        fprintf(stderr, "crunloop: membarrier failed (%s) revoking a loop lock's bias\n", strerror(errno));
        abort();
    }
    errno = saved;
}

static bool owner_inside(RLRunLoopRef rl) {
    return !rl__fault(RL_FAULT_BIAS_BREAK) && atomic_load_explicit(&rl->bias.in, memory_order_acquire) != 0;
}

void rl__bias_revoke(RLRunLoopRef rl) {
    if (atomic_load_explicit(&rl->bias.on, memory_order_relaxed) == 1)
        revoke_start(rl);
    /* The owner's critical sections are short (no user code runs under a
     * loop lock): spin a little, then yield the CPU to it. */
    for (unsigned i = 0; owner_inside(rl); i++) {
        if (i < BIAS_SPINS)
            rl__cpu_relax();
        else
            sched_yield();
    }
    atomic_store_explicit(&rl->bias.on, 0, memory_order_relaxed);
}

bool rl__bias_revoke_try(RLRunLoopRef rl) {
    if (atomic_load_explicit(&rl->bias.on, memory_order_relaxed) == 1)
        revoke_start(rl);
    if (owner_inside(rl)) {
        rl__mutex_unlock(&rl->lock);
        return false;
    }
    atomic_store_explicit(&rl->bias.on, 0, memory_order_relaxed);
    return true;
}

void rl__bias_lock_full(RLRunLoopRef rl) {
    rl__mutex_lock_slow(&rl->lock, NULL);
    if (atomic_load_explicit(&rl->bias.on, memory_order_relaxed))
        rl__bias_revoke(rl);
}

void rl__bias_disown(RLRunLoopRef rl) {
    if (!atomic_load_explicit(&rl->bias.on, memory_order_relaxed))
        return; /* only this thread sets it */
    if (!rl__mutex_trylock(&rl->lock))
        rl__mutex_lock_slow(&rl->lock, NULL);
    atomic_store_explicit(&rl->bias.on, 0, memory_order_relaxed);
    rl->bias.run = 0;
    rl__mutex_unlock(&rl->lock);
}
