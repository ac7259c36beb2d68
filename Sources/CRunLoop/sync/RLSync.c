/* RLSync.c — @synchronized monitors keyed by object address.
 *
 * A fixed array of stripes, each a short mutex and a chain of the monitors
 * whose object hashes to it. A monitor lives while it has users: each
 * thread that holds or waits for it outside the thread's cache, and each
 * thread cache entry naming it. The stripe mutex is held only to find,
 * create, count and free monitors — never while waiting for a monitor — so
 * unrelated objects that share a stripe contend only for those few
 * instructions.
 *
 * The fast path: each thread keeps a small cache of (object -> monitor)
 * entries, and each entry keeps its monitor alive. Entering or leaving an
 * object found there touches only the monitor's own futex mutex and the
 * thread's cache — no stripe lock, no allocation — so an uncontended
 * @synchronized costs about what a mutex does. An entry is replaced only
 * when the thread does not hold its monitor, which keeps the rule "a held
 * monitor found in the cache is held through the cache" simple: a monitor
 * entered while the cache is full of held monitors is held uncached and
 * left through the stripe, as before. Freed monitors go to a short
 * per-stripe free list rather than back to malloc.
 *
 * Ownership: `owner` is the holder's thread id (a per-process counter, so
 * a thread that ended holding a monitor is never mistaken for a new thread
 * that got the same pthread_t), written only by the holder (set after
 * taking the mutex, cleared before releasing it). Another thread can
 * therefore never read its own id there unless it is the holder, which
 * makes the unlocked "is it me?" test sound; it is atomic so that the test
 * is not a data race. `recursion` is touched only by the holder. */
#include "rl_fork.h"
#include "RLLockDebugInternal.h"
#include "RLLockInternal.h"

#include <crunloop/RLSync.h>

#include <pthread.h>
#include <stdlib.h>

enum {
    RL__SYNC_STRIPES = 64,
    RL__SYNC_CACHE = 8,      /* per-thread cached monitors */
    RL__SYNC_FREE_MAX = 4,   /* spare monitors kept per stripe */
};

typedef struct sync_monitor {
    struct sync_monitor *next;
    const void *obj;
    rl__mutex mutex;
    _Atomic uint64_t owner;  /* thread id of the holder, 0 if none */
    unsigned long recursion; /* holder only */
    unsigned long users;     /* guarded by the stripe */
} sync_monitor;

typedef struct monitor_stripe {
    pthread_mutex_t mu;
    sync_monitor *head;
    sync_monitor *spare;      /* free list, linked through next */
    int nspare;
} __attribute__((aligned(64))) monitor_stripe; /* one cache line each: no false sharing */

typedef struct sync_entry {
    const void *obj; /* NULL: empty */
    sync_monitor *m;  /* one user reference, owned by this entry */
} sync_entry;

typedef struct sync_thread {
    uint64_t id;     /* 0 until the thread first needs one */
    unsigned victim; /* round-robin replacement cursor */
    bool registered; /* the thread-exit destructor is armed */
    sync_entry e[RL__SYNC_CACHE];
} sync_thread;

static monitor_stripe g_stripes[RL__SYNC_STRIPES];
static pthread_once_t g_stripes_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_thread_key;
static _Atomic uint64_t g_next_id;
static __thread sync_thread t_sync;

static void thread_exit(void *arg);

static void stripes_init(void) {
    for (int i = 0; i < RL__SYNC_STRIPES; i++)
        pthread_mutex_init(&g_stripes[i].mu, NULL);
    (void)pthread_key_create(&g_thread_key, thread_exit);
}

static monitor_stripe *stripe_for(const void *obj) {
    pthread_once(&g_stripes_once, stripes_init);
    uintptr_t x = (uintptr_t)obj;
    /* Objects are usually 16-byte aligned: drop the constant low bits and
     * mix, so neighbouring objects land on different stripes. */
    x = (x >> 4) * (uintptr_t)0x9e3779b97f4a7c15ull;
    return &g_stripes[(x >> 24) % RL__SYNC_STRIPES];
}

static uint64_t self_id(sync_thread *t) {
    if (RL__UNLIKELY(t->id == 0))
        t->id = atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed) + 1;
    return t->id;
}

static bool held_by(sync_monitor *m, uint64_t id) {
    return id != 0 && atomic_load_explicit(&m->owner, memory_order_relaxed) == id;
}

static sync_entry *cache_find(sync_thread *t, const void *obj) {
    for (int i = 0; i < RL__SYNC_CACHE; i++)
        if (t->e[i].obj == obj)
            return &t->e[i];
    return NULL;
}

/* ---- monitors (stripe lock held) ---- */

static sync_monitor *monitor_find(monitor_stripe *s, const void *obj) {
    for (sync_monitor *m = s->head; m; m = m->next)
        if (m->obj == obj)
            return m;
    return NULL;
}

static sync_monitor *monitor_get(monitor_stripe *s, const void *obj) {
    sync_monitor *m = monitor_find(s, obj);
    if (m)
        return m;
    if (s->spare) {
        m = s->spare;
        s->spare = m->next;
        s->nspare--;
    } else {
        m = malloc(sizeof *m);
        if (!m)
            return NULL;
    }
    /* A spare's mutex is unlocked and its fields stale: reset them all. */
    *m = (sync_monitor){.obj = obj};
    m->next = s->head;
    s->head = m;
    return m;
}

static void monitor_unuse(monitor_stripe *s, sync_monitor *m) {
    if (--m->users != 0)
        return;
    sync_monitor **pp = &s->head;
    while (*pp != m)
        pp = &(*pp)->next;
    *pp = m->next;
    if (s->nspare < RL__SYNC_FREE_MAX) {
        m->next = s->spare;
        s->spare = m;
        s->nspare++;
        return;
    }
    free(m);
}

static void monitor_release_ref(sync_monitor *m) {
    monitor_stripe *s = stripe_for(m->obj);
    pthread_mutex_lock(&s->mu);
    monitor_unuse(s, m);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the thread cache ---- */

/* Called by pthreads when a thread that used the cache ends: drop the
 * references of the monitors it does not hold. One it still holds stays
 * held (and alive) forever, as documented. */
static void thread_exit(void *arg) {
    sync_thread *t = arg;
    for (int i = 0; i < RL__SYNC_CACHE; i++) {
        sync_entry *e = &t->e[i];
        if (e->obj && !held_by(e->m, t->id))
            monitor_release_ref(e->m);
        e->obj = NULL;
        e->m = NULL;
    }
    t->registered = false;
}

/* Empties a slot the thread may reuse: an empty one, or one whose monitor
 * the thread does not hold (its reference is dropped). NULL when every
 * entry names a monitor the thread holds. */
static sync_entry *cache_free_slot(sync_thread *t) {
    for (int i = 0; i < RL__SYNC_CACHE; i++)
        if (t->e[i].obj == NULL)
            return &t->e[i];
    for (int k = 0; k < RL__SYNC_CACHE; k++) {
        sync_entry *e = &t->e[t->victim++ % RL__SYNC_CACHE];
        if (!held_by(e->m, t->id)) {
            sync_monitor *m = e->m;
            e->obj = NULL;
            e->m = NULL;
            monitor_release_ref(m);
            return e;
        }
    }
    return NULL;
}

static void cache_arm(sync_thread *t) {
    if (RL__UNLIKELY(!t->registered)) {
        t->registered = true;
        (void)pthread_setspecific(g_thread_key, t);
    }
}

/* ---- enter / exit ---- */

typedef enum { ENTER_BLOCK, ENTER_TRY } enter_mode;

static bool busy(const char *fn, const void *obj) {
    return rl__fail(kRLErrorBusy, fn, "%p is held by another thread", obj);
}

/* Takes m's mutex for a thread that does not hold it. */
static bool monitor_acquire(sync_monitor *m, uint64_t me, enter_mode mode, const char *fn,
                            const void *where) {
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (mode == ENTER_TRY) {
        if (!rl__mutex_trylock(&m->mutex))
            return busy(fn, m->obj);
    } else {
        if (debug)
            rl__lockdep_will_acquire_kind(RL__LOCKDEP_SYNC, m->obj, NULL, where);
        if (!rl__mutex_trylock(&m->mutex))
            (void)rl__mutex_lock_slow(&m->mutex, NULL);
    }
    atomic_store_explicit(&m->owner, me, memory_order_relaxed);
    m->recursion = 1;
    if (debug)
        rl__lockdep_acquired_kind(RL__LOCKDEP_SYNC, m->obj, NULL, where);
    return true;
}

static bool enter_slow(sync_thread *t, const void *obj, enter_mode mode, const char *fn,
                       const void *where) {
    uint64_t me = self_id(t);
    monitor_stripe *s = stripe_for(obj);

    /* Held outside the cache: a recursive entry, counted in the monitor. */
    pthread_mutex_lock(&s->mu);
    sync_monitor *m = monitor_find(s, obj);
    if (m && held_by(m, me)) {
        m->recursion++;
        pthread_mutex_unlock(&s->mu);
        return true;
    }
    pthread_mutex_unlock(&s->mu);

    /* Make room first: dropping a victim's reference takes its stripe's
     * lock, which must not nest inside ours. */
    sync_entry *slot = cache_free_slot(t);

    pthread_mutex_lock(&s->mu);
    m = monitor_get(s, obj);
    if (!m) {
        pthread_mutex_unlock(&s->mu);
        return rl__fail(kRLErrorNoMemory, fn, "out of memory for the monitor of %p", obj);
    }
    m->users++; /* the cache's reference, or ours while we hold or wait */
    pthread_mutex_unlock(&s->mu);

    if (slot) {
        slot->obj = obj;
        slot->m = m;
        cache_arm(t);
        return monitor_acquire(m, me, mode, fn, where);
    }
    if (monitor_acquire(m, me, mode, fn, where))
        return true;
    monitor_release_ref(m); /* a failed try: we neither hold nor wait */
    return false;
}

static inline bool enter(const void *obj, enter_mode mode, const char *fn, const void *where) {
    if (RL__UNLIKELY(obj == NULL))
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL object");
    sync_thread *t = &t_sync;
    sync_entry *e = cache_find(t, obj);
    if (RL__UNLIKELY(e == NULL))
        return enter_slow(t, obj, mode, fn, where);
    sync_monitor *m = e->m;
    if (held_by(m, t->id)) {
        m->recursion++;
        return true;
    }
    return monitor_acquire(m, t->id, mode, fn, where);
}

bool RLSyncEnter(const void *obj) {
    return enter(obj, ENTER_BLOCK, __func__, __builtin_return_address(0));
}

bool RLSyncTryEnter(const void *obj) {
    return enter(obj, ENTER_TRY, __func__, __builtin_return_address(0));
}

static bool not_held(const void *obj, uint64_t owner) {
    if (owner == 0)
        return rl__fail(kRLErrorNotLocked, "RLSyncExit", "%p is not entered by any thread", obj);
    return rl__fail(kRLErrorNotOwner, "RLSyncExit", "%p is held by another thread, not the calling one",
                    obj);
}

/* The caller holds m once (recursion reached 0): release it. */
static void monitor_release(sync_monitor *m) {
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    rl__mutex_unlock(&m->mutex);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released_kind(RL__LOCKDEP_SYNC, m->obj);
}

static bool exit_slow(sync_thread *t, const void *obj) {
    monitor_stripe *s = stripe_for(obj);
    pthread_mutex_lock(&s->mu);
    sync_monitor *m = monitor_find(s, obj);
    uint64_t owner = m ? atomic_load_explicit(&m->owner, memory_order_relaxed) : 0;
    if (owner == 0 || owner != t->id) {
        pthread_mutex_unlock(&s->mu);
        return not_held(obj, owner);
    }
    if (--m->recursion > 0) {
        pthread_mutex_unlock(&s->mu);
        return true;
    }
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    rl__mutex_unlock(&m->mutex);
    monitor_unuse(s, m);
    pthread_mutex_unlock(&s->mu);
    if (RL__UNLIKELY(rl__lockdep_enabled()))
        rl__lockdep_released_kind(RL__LOCKDEP_SYNC, obj);
    return true;
}

bool RLSyncExit(const void *obj) {
    if (RL__UNLIKELY(obj == NULL))
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL object");
    sync_thread *t = &t_sync;
    sync_entry *e = cache_find(t, obj);
    if (RL__UNLIKELY(e == NULL))
        return exit_slow(t, obj);
    sync_monitor *m = e->m;
    uint64_t owner = atomic_load_explicit(&m->owner, memory_order_relaxed);
    if (RL__UNLIKELY(owner == 0 || owner != t->id))
        return not_held(obj, owner);
    if (--m->recursion == 0)
        monitor_release(m);
    return true;
}

bool RLSyncIsHeldByCurrentThread(const void *obj) {
    if (!obj)
        return false;
    sync_thread *t = &t_sync;
    sync_entry *e = cache_find(t, obj);
    if (e)
        return held_by(e->m, t->id);
    monitor_stripe *s = stripe_for(obj);
    pthread_mutex_lock(&s->mu);
    sync_monitor *m = monitor_find(s, obj);
    bool held = m && held_by(m, t->id);
    pthread_mutex_unlock(&s->mu);
    return held;
}

/* fork(): every stripe lock is held across it (rl_fork.c), so a child
 * forked while another thread finds or frees a monitor gets consistent
 * chains and free stripes. A monitor held by another thread stays held in
 * the child, as any user lock does. */
static void fork_prepare(void) {
    pthread_once(&g_stripes_once, stripes_init);
    for (int i = 0; i < RL__SYNC_STRIPES; i++)
        pthread_mutex_lock(&g_stripes[i].mu);
}

static void fork_parent(void) {
    for (int i = RL__SYNC_STRIPES - 1; i >= 0; i--)
        pthread_mutex_unlock(&g_stripes[i].mu);
}

static void fork_child(void) { fork_parent(); }

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_SYNC, fork_prepare, fork_parent, fork_child);
}
