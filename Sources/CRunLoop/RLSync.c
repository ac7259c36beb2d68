/* RLSync.c — @synchronized monitors keyed by object address.
 *
 * A fixed array of stripes, each a short mutex and a chain of the monitors
 * whose object hashes to it. A monitor exists while some thread holds or
 * waits for it (`users`), so memory follows the monitors in use. The stripe
 * mutex is held only to find, create, count and free monitors — never while
 * waiting for a monitor — so unrelated objects that share a stripe contend
 * only for those few instructions.
 *
 * Ownership: `owner` is written only by the thread that holds the monitor's
 * mutex (set after taking it, cleared before releasing it). Another thread
 * can therefore never read its own id there unless it is the holder, which
 * makes the unlocked "is it me?" test sound; it is atomic so that the test
 * is not a data race. `recursion` is touched only by the holder. */
#include "RLLockDebugInternal.h"

#include <crunloop/RLSync.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

enum { RL__SYNC_STRIPES = 64 };

typedef struct rl__monitor {
    struct rl__monitor *next;
    const void *obj;
    _Atomic uintptr_t owner; /* pthread_self() of the holder, 0 if none */
    unsigned long recursion;
    unsigned long users;     /* holder + waiters; guarded by the stripe */
    pthread_mutex_t mutex;
} rl__monitor;

typedef struct rl__stripe {
    pthread_mutex_t mu;
    rl__monitor *head;
} __attribute__((aligned(64))) rl__stripe; /* one cache line each: no false sharing */

static rl__stripe g_stripes[RL__SYNC_STRIPES];
static pthread_once_t g_stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void) {
    for (int i = 0; i < RL__SYNC_STRIPES; i++)
        pthread_mutex_init(&g_stripes[i].mu, NULL);
}

static rl__stripe *stripe_for(const void *obj) {
    pthread_once(&g_stripes_once, stripes_init);
    uintptr_t x = (uintptr_t)obj;
    /* Objects are usually 16-byte aligned: drop the constant low bits and
     * mix, so neighbouring objects land on different stripes. */
    x = (x >> 4) * (uintptr_t)0x9e3779b97f4a7c15ull;
    return &g_stripes[(x >> 24) % RL__SYNC_STRIPES];
}

static uintptr_t self_id(void) {
    return (uintptr_t)pthread_self();
}

static rl__monitor *monitor_find(rl__stripe *s, const void *obj) {
    for (rl__monitor *m = s->head; m; m = m->next)
        if (m->obj == obj)
            return m;
    return NULL;
}

static void monitor_unuse(rl__stripe *s, rl__monitor *m) {
    if (--m->users != 0)
        return;
    rl__monitor **pp = &s->head;
    while (*pp != m)
        pp = &(*pp)->next;
    *pp = m->next;
    pthread_mutex_destroy(&m->mutex);
    free(m);
}

typedef enum { ENTER_BLOCK, ENTER_TRY } enter_mode;

static bool enter(const void *obj, enter_mode mode, const char *fn, const void *where) {
    if (RL__UNLIKELY(obj == NULL))
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL object");
    rl__stripe *s = stripe_for(obj);
    uintptr_t me = self_id();

    pthread_mutex_lock(&s->mu);
    rl__monitor *m = monitor_find(s, obj);
    if (m && atomic_load_explicit(&m->owner, memory_order_relaxed) == me) {
        m->recursion++;
        pthread_mutex_unlock(&s->mu);
        return true;
    }
    if (!m) {
        m = calloc(1, sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&s->mu);
            return rl__fail(kRLErrorNoMemory, fn, "out of memory for the monitor of %p", obj);
        }
        m->obj = obj;
        pthread_mutex_init(&m->mutex, NULL);
        m->next = s->head;
        s->head = m;
    }
    if (mode == ENTER_TRY) {
        /* Trying under the stripe lock cannot deadlock (trylock never waits)
         * and saves registering as a user only to back out. */
        if (pthread_mutex_trylock(&m->mutex) != 0) {
            m->users++;
            monitor_unuse(s, m); /* frees a monitor created just now */
            pthread_mutex_unlock(&s->mu);
            return false;
        }
        m->users++;
        atomic_store_explicit(&m->owner, me, memory_order_relaxed);
        m->recursion = 1;
        pthread_mutex_unlock(&s->mu);
        if (RL__UNLIKELY(rl__lockdep_enabled()))
            rl__lockdep_acquired_kind(RL__LOCKDEP_SYNC, obj, NULL, where);
        return true;
    }
    m->users++; /* keeps m alive while we wait without the stripe lock */
    pthread_mutex_unlock(&s->mu);

    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug)
        rl__lockdep_will_acquire_kind(RL__LOCKDEP_SYNC, obj, NULL, where);
    pthread_mutex_lock(&m->mutex);
    atomic_store_explicit(&m->owner, me, memory_order_relaxed);
    m->recursion = 1;
    if (debug)
        rl__lockdep_acquired_kind(RL__LOCKDEP_SYNC, obj, NULL, where);
    return true;
}

bool RLSyncEnter(const void *obj) {
    return enter(obj, ENTER_BLOCK, "RLSyncEnter", __builtin_return_address(0));
}

bool RLSyncTryEnter(const void *obj) {
    return enter(obj, ENTER_TRY, "RLSyncTryEnter", __builtin_return_address(0));
}

bool RLSyncExit(const void *obj) {
    if (RL__UNLIKELY(obj == NULL))
        return rl__fail(kRLErrorInvalidArgument, "RLSyncExit", "NULL object");
    rl__stripe *s = stripe_for(obj);
    uintptr_t me = self_id();

    pthread_mutex_lock(&s->mu);
    rl__monitor *m = monitor_find(s, obj);
    uintptr_t owner = m ? atomic_load_explicit(&m->owner, memory_order_relaxed) : 0;
    if (owner != me) {
        pthread_mutex_unlock(&s->mu);
        if (owner == 0)
            return rl__fail(kRLErrorNotLocked, "RLSyncExit", "%p is not entered by any thread", obj);
        return rl__fail(kRLErrorNotOwner, "RLSyncExit",
                        "%p is held by another thread, not the calling one", obj);
    }
    if (--m->recursion > 0) {
        pthread_mutex_unlock(&s->mu);
        return true;
    }
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&m->mutex);
    monitor_unuse(s, m);
    pthread_mutex_unlock(&s->mu);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released_kind(RL__LOCKDEP_SYNC, obj);
    return true;
}

bool RLSyncIsHeldByCurrentThread(const void *obj) {
    if (!obj)
        return false;
    rl__stripe *s = stripe_for(obj);
    pthread_mutex_lock(&s->mu);
    rl__monitor *m = monitor_find(s, obj);
    bool held = m && atomic_load_explicit(&m->owner, memory_order_relaxed) == self_id();
    pthread_mutex_unlock(&s->mu);
    return held;
}
