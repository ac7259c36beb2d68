/* lockutil.h — what the lock tests (test_lock.c, test_recursive_lock.c,
 * test_rwlock.c, test_condition.c, test_condition_lock.c) share: the
 * exact-total stress run, a thread that holds a lock until told to let go,
 * and "what does another thread get if it tries?". Each lock kind plugs in
 * through small bool (*)(void *lock) adapters written next to its test. */
#ifndef RL_LOCKUTIL_H
#define RL_LOCKUTIL_H

#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A lock operation of some kind: lock, unlock, try... false on failure. */
typedef bool (*rl_lock_fn)(void *lock);

/* ---- exact-total stress ------------------------------------------------ */

enum { RL_STRESS_THREADS = 8 };

typedef struct rl_stress rl_stress;

/* One round on one of the stress threads: take s->lock by some entry point
 * (vary it with `round` so each is exercised under contention), call
 * rl_stress_bump while holding it exclusively, give it back. Returns false
 * if any call failed. */
typedef bool (*rl_stress_round_fn)(rl_stress *s, long round);

struct rl_stress {
    void *lock;
    rl_stress_round_fn round;
    long rounds;          /* per thread: rl_test_iters(1000000) */
    long counter, mirror; /* written only under the exclusive lock */
    atomic_int failures;  /* rounds that returned false */
    atomic_int torn;      /* a shared holder saw counter != mirror */
};

/* Inside the exclusive lock: both counters go up by one. */
static inline void rl_stress_bump(rl_stress *s) {
    s->counter++;
    s->mirror++;
}

/* Inside a shared (read) hold: a writer inside at the same time would show
 * as counter != mirror. */
static inline void rl_stress_check(rl_stress *s) {
    if (s->counter != s->mirror)
        atomic_store(&s->torn, 1);
}

/* Runs RL_STRESS_THREADS threads, each doing s->rounds (set here) rounds of
 * s->round on s->lock; s->lock and s->round must be set. */
void rl_stress_run(rl_stress *s);

/* After rl_stress_run: no call failed, no read was torn, and exactly
 * RL_STRESS_THREADS x rounds increments happened. */
#define assert_rl_stress_exact_total(s)                                   \
    do {                                                                  \
        assert_int_equal(atomic_load(&(s)->failures), 0);                 \
        assert_int_equal(atomic_load(&(s)->torn), 0);                     \
        assert_int_equal((s)->counter, RL_STRESS_THREADS * (s)->rounds);  \
        assert_int_equal((s)->mirror, (s)->counter);                      \
    } while (0)

/* ---- a lock held by another thread ------------------------------------ */

/* A thread that takes a lock `depth` times (more than once for recursive
 * locks), holds it until told to let go, then gives it back as often. */
typedef struct rl_holder {
    void *lock;
    rl_lock_fn take, drop;
    int depth;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int phase; /* 1: the holder has the lock; 2: it may let go */
} rl_holder;

/* Starts the holder and returns once it has the lock. */
void rl_holder_start(rl_holder *h, void *lock, rl_lock_fn take, rl_lock_fn drop, int depth);

/* Tells the holder to let go; it may still hold the lock on return, so a
 * blocking lock call right after really waits for it. */
void rl_holder_let_go(rl_holder *h);

/* Waits for the holder thread to end (after rl_holder_let_go). */
void rl_holder_join(rl_holder *h);

/* ---- what another thread gets ------------------------------------------ */

/* rl_try_elsewhere's result when the other thread got the lock. */
enum { RL_TRY_GOT_IT = -1 };

/* Calls try_fn(lock) on a new thread: RL_TRY_GOT_IT if it succeeded (drop
 * then gives the lock back at once), else the error code it left. */
intptr_t rl_try_elsewhere(void *lock, rl_lock_fn try_fn, rl_lock_fn drop);

#endif
