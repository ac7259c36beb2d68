/* RLReadWriteLock.c — a writer-preferring shared-exclusive lock on futexes.
 *
 * One 64-bit state word says everything the fast paths need:
 *   bits 0..31   readers holding the lock
 *   bits 32..62  writers waiting for it (they keep new readers out)
 *   bit  63      a writer holds it
 * A read lock is one CAS when no writer holds or waits; a write lock is one
 * CAS from 0. Sleepers wait on separate 32-bit futex sequence words, read
 * before the state is examined, so a change made after that read always
 * makes the sleep return at once.
 *
 * Each thread records the read holds it has (lock address + count) in a small
 * thread-local table. That is what lets Unlock know whether it releases a
 * read or the write hold, lets a reader re-enter while a writer waits (it
 * would otherwise wait for a writer that waits for it), and lets an upgrade
 * attempt fail with kRLErrorWouldDeadlock instead of hanging. */
#include "RLLockDebugInternal.h"
#include "RLLockInternal.h"
#include <crunloop/RLReadWriteLock.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RW_READER 1ull
#define RW_READERS_MASK 0xffffffffull
#define RW_WAITING_WRITER (1ull << 32)
#define RW_WAITING_MASK (0x7fffffffull << 32)
#define RW_WRITER (1ull << 63)

struct RLReadWriteLock {
    rl__object base;
    _Atomic uint64_t state;
    _Atomic uintptr_t writer; /* the write holder's id; see RLLockInternal.h */
    _Atomic uint32_t reader_seq;
    _Atomic uint32_t writer_seq;
    _Atomic uint32_t reader_sleepers;
    rl__lockname name;
};

typedef struct RLReadWriteLock *RW;

/* ---- the calling thread's read holds ---- */

typedef struct read_hold {
    const void *lock;
    unsigned long count;
} read_hold;

enum { RL__READ_HOLDS_INLINE = 8 };

typedef struct read_holds {
    read_hold *v; /* inline_holds, or a heap array freed at thread exit */
    size_t n, cap;
    read_hold inline_holds[RL__READ_HOLDS_INLINE];
} read_holds;

static __thread read_holds thread_holds;
static pthread_key_t holds_key;
static pthread_once_t holds_key_once = PTHREAD_ONCE_INIT;

/* Runs on the exiting thread: later use in another destructor on the same
 * thread starts again from the inline table instead of freed memory. */
static void holds_free(void *heap) {
    thread_holds.v = NULL;
    thread_holds.n = 0;
    thread_holds.cap = 0;
    free(heap);
}
static void holds_make_key(void) { pthread_key_create(&holds_key, holds_free); }

static read_hold *hold_find(const void *lock) {
    read_holds *h = &thread_holds;
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].lock == lock)
            return &h->v[i];
    return NULL;
}

/* Makes room for one more hold before the lock is taken, so that running out
 * of memory fails the call instead of leaving a hold nobody recorded. */
static bool hold_reserve(const char *fn) {
    read_holds *h = &thread_holds;
    if (!h->v) {
        h->v = h->inline_holds;
        h->cap = RL__READ_HOLDS_INLINE;
    }
    if (h->n < h->cap)
        return true;
    size_t cap = h->cap * 2;
    read_hold *v = malloc(cap * sizeof *v);
    if (!v)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory recording the read hold");
    memcpy(v, h->v, h->n * sizeof *v);
    pthread_once(&holds_key_once, holds_make_key);
    if (h->v != h->inline_holds)
        free(h->v);
    h->v = v;
    h->cap = cap;
    pthread_setspecific(holds_key, v);
    return true;
}

static void hold_add(const void *lock) {
    read_holds *h = &thread_holds;
    h->v[h->n].lock = lock;
    h->v[h->n].count = 1;
    h->n++;
}

static void hold_drop(read_hold *hold) {
    read_holds *h = &thread_holds;
    if (--hold->count == 0)
        *hold = h->v[--h->n];
}

/* ---- object ---- */

static bool rw_can_destroy(void *obj) {
    RW lock = obj;
    if (atomic_load(&lock->state) & (RW_WRITER | RW_READERS_MASK))
        return rl__fail(kRLErrorBusy, "RLRelease", "the RLReadWriteLock is still locked");
    return true;
}

static void rw_finalize(void *obj) {
    RW lock = obj;
    rl__lockdep_forget(lock);
    rl__lockname_free(&lock->name);
}

static char *rw_describe(const void *obj) {
    RW lock = (RW)obj;
    uint64_t s = atomic_load(&lock->state);
    char state[96];
    snprintf(state, sizeof state, "%s, readers=%u waiting-writers=%u", (s & RW_WRITER) ? "write-locked" : (s & RW_READERS_MASK) ? "read-locked" : "unlocked",
             (unsigned)(s & RW_READERS_MASK), (unsigned)((s & RW_WAITING_MASK) >> 32));
    return rl__lock_describe("RLReadWriteLock", obj, &lock->name, state);
}

static const rl__class rwlock_class = {"RLReadWriteLock", rw_finalize, rw_can_destroy, rw_describe};

RLReadWriteLockRef RLReadWriteLockCreate(void) {
    return rl__object_alloc(&rwlock_class, sizeof(struct RLReadWriteLock), __func__);
}

/* ---- wake-ups ---- */

static void wake_one_writer(RW lock) {
    atomic_fetch_add(&lock->writer_seq, 1);
    rl__futex_wake(&lock->writer_seq, 1);
}

static void wake_readers(RW lock) {
    if (atomic_load(&lock->reader_sleepers) == 0)
        return;
    atomic_fetch_add(&lock->reader_seq, 1);
    rl__futex_wake(&lock->reader_seq, INT_MAX);
}

/* After the state lost its writer or a waiting writer: a waiting writer goes
 * next (writer preference); with none left, sleeping readers may enter. */
static void wake_after_writer(RW lock, uint64_t s) {
    if (s & RW_WAITING_MASK)
        wake_one_writer(lock);
    else
        wake_readers(lock);
}

/* ---- read ---- */

static bool read_try_enter(RW lock, uint64_t *s) {
    while (!(*s & (RW_WRITER | RW_WAITING_MASK))) {
        if (atomic_compare_exchange_weak_explicit(&lock->state, s, *s + RW_READER, memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    }
    return false;
}

static bool read_lock_slow(RW lock, const struct timespec *deadline) {
    atomic_fetch_add(&lock->reader_sleepers, 1);
    bool ok = true;
    for (;;) {
        uint32_t seq = atomic_load(&lock->reader_seq);
        uint64_t s = atomic_load(&lock->state);
        if (read_try_enter(lock, &s))
            break;
        if (rl__futex_wait(&lock->reader_seq, seq, deadline) == ETIMEDOUT) {
            s = atomic_load(&lock->state);
            ok = read_try_enter(lock, &s);
            break;
        }
    }
    atomic_fetch_sub(&lock->reader_sleepers, 1);
    return ok;
}

/* mode: 0 blocking, 1 try, 2 timed (deadline set). */
static bool read_lock(RW lock, int mode, const struct timespec *deadline, const char *fn, const void *where) {
    if (RL__UNLIKELY(atomic_load_explicit(&lock->writer, memory_order_relaxed) == rl__self())) {
        if (mode == 1)
            return rl__fail(kRLErrorBusy, fn, "the calling thread holds the write lock");
        return rl__fail(kRLErrorWouldDeadlock, fn, "the calling thread holds the write lock");
    }
    read_hold *hold = hold_find(lock);
    if (hold) {
        /* A reader holds it, so no writer can: entering cannot wait. */
        atomic_fetch_add_explicit(&lock->state, RW_READER, memory_order_relaxed);
        hold->count++;
        return true;
    }
    if (!hold_reserve(fn))
        return false;
    /* The detector records order edges on will_acquire, so a blocking call
     * announces itself even when it will not have to wait; a try never can
     * deadlock and only reports the hold. */
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug && mode != 1)
        rl__lockdep_will_acquire_shared(lock, rl__lockname_get(&lock->name), where);
    uint64_t s = atomic_load_explicit(&lock->state, memory_order_relaxed);
    if (!read_try_enter(lock, &s)) {
        if (mode == 1)
            return rl__fail(kRLErrorBusy, fn, "a writer holds or waits for the lock");
        if (!read_lock_slow(lock, deadline))
            return rl__fail(kRLErrorTimedOut, fn, "the read lock was not acquired before the date");
    }
    hold_add(lock);
    if (debug)
        rl__lockdep_acquired_shared(lock, rl__lockname_get(&lock->name), where);
    return true;
}

bool RLReadWriteLockReadLock(RLReadWriteLockRef lock) {
    if (!rl__check(lock, &rwlock_class, __func__))
        return false;
    /* Fast path: this thread reads nothing yet, and no writer holds or waits
     * (so neither does this thread). One CAS, one record. */
    read_holds *h = &thread_holds;
    if (RL__LIKELY(h->n == 0 && h->v != NULL) && RL__LIKELY(!rl__lockdep_enabled())) {
        uint64_t st = atomic_load_explicit(&lock->state, memory_order_relaxed);
        if (RL__LIKELY(!(st & (RW_WRITER | RW_WAITING_MASK))) &&
            RL__LIKELY(atomic_compare_exchange_weak_explicit(&lock->state, &st, st + RW_READER,
                                                             memory_order_acquire, memory_order_relaxed))) {
            hold_add(lock);
            return true;
        }
    }
    return read_lock(lock, 0, NULL, __func__, __builtin_return_address(0));
}

bool RLReadWriteLockTryReadLock(RLReadWriteLockRef lock) {
    if (!rl__check(lock, &rwlock_class, __func__))
        return false;
    return read_lock(lock, 1, NULL, __func__, __builtin_return_address(0));
}

bool RLReadWriteLockReadLockBeforeDate(RLReadWriteLockRef lock, RLAbsoluteTime limit) {
    const char *fn = __func__;
    struct timespec deadline;
    if (!rl__check(lock, &rwlock_class, fn) || !rl__deadline_for(limit, &deadline, fn))
        return false;
    return read_lock(lock, 2, &deadline, fn, __builtin_return_address(0));
}

/* ---- write ---- */

static bool write_lock_slow(RW lock, const struct timespec *deadline) {
    atomic_fetch_add(&lock->state, RW_WAITING_WRITER);
    for (;;) {
        uint32_t seq = atomic_load(&lock->writer_seq);
        uint64_t s = atomic_load(&lock->state);
        while (!(s & (RW_WRITER | RW_READERS_MASK))) {
            if (atomic_compare_exchange_weak(&lock->state, &s, (s - RW_WAITING_WRITER) | RW_WRITER))
                return true;
        }
        if (rl__futex_wait(&lock->writer_seq, seq, deadline) == ETIMEDOUT)
            break;
    }
    uint64_t s = atomic_load(&lock->state);
    while (!(s & (RW_WRITER | RW_READERS_MASK))) {
        if (atomic_compare_exchange_weak(&lock->state, &s, (s - RW_WAITING_WRITER) | RW_WRITER))
            return true;
    }
    /* Leaving the queue: readers we kept out may enter now, and a wake-up we
     * may have absorbed is passed on to the next writer. */
    s = atomic_fetch_sub(&lock->state, RW_WAITING_WRITER) - RW_WAITING_WRITER;
    wake_after_writer(lock, s);
    return false;
}

static bool write_lock(RW lock, int mode, const struct timespec *deadline, const char *fn, const void *where) {
    if (RL__UNLIKELY(atomic_load_explicit(&lock->writer, memory_order_relaxed) == rl__self()))
        return rl__fail(mode == 1 ? kRLErrorBusy : kRLErrorWouldDeadlock, fn,
                        "the calling thread already holds the write lock");
    if (RL__UNLIKELY(hold_find(lock) != NULL))
        return rl__fail(mode == 1 ? kRLErrorBusy : kRLErrorWouldDeadlock, fn,
                        "the calling thread holds a read lock (upgrading would wait for itself)");
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (debug && mode != 1)
        rl__lockdep_will_acquire(lock, rl__lockname_get(&lock->name), where);
    uint64_t s = 0;
    if (!atomic_compare_exchange_strong_explicit(&lock->state, &s, RW_WRITER, memory_order_acquire,
                                                 memory_order_relaxed)) {
        if (mode == 1)
            return rl__fail(kRLErrorBusy, fn, "the lock is held or a writer waits");
        if (!write_lock_slow(lock, deadline))
            return rl__fail(kRLErrorTimedOut, fn, "the write lock was not acquired before the date");
    }
    atomic_store_explicit(&lock->writer, rl__self(), memory_order_relaxed);
    if (debug)
        rl__lockdep_write_acquired(lock, rl__lockname_get(&lock->name), where);
    return true;
}

bool RLReadWriteLockWriteLock(RLReadWriteLockRef lock) {
    if (!rl__check(lock, &rwlock_class, __func__))
        return false;
    return write_lock(lock, 0, NULL, __func__, __builtin_return_address(0));
}

bool RLReadWriteLockTryWriteLock(RLReadWriteLockRef lock) {
    if (!rl__check(lock, &rwlock_class, __func__))
        return false;
    return write_lock(lock, 1, NULL, __func__, __builtin_return_address(0));
}

bool RLReadWriteLockWriteLockBeforeDate(RLReadWriteLockRef lock, RLAbsoluteTime limit) {
    const char *fn = __func__;
    struct timespec deadline;
    if (!rl__check(lock, &rwlock_class, fn) || !rl__deadline_for(limit, &deadline, fn))
        return false;
    return write_lock(lock, 2, &deadline, fn, __builtin_return_address(0));
}

/* ---- unlock ---- */

bool RLReadWriteLockUnlock(RLReadWriteLockRef lock) {
    const char *fn = __func__;
    if (!rl__check(lock, &rwlock_class, fn))
        return false;
    /* Fast path: the one read hold this thread has, taken once. A thread
     * with a read hold on a lock never holds its write lock (an upgrade is
     * refused), so this needs no look at the writer. */
    read_holds *h = &thread_holds;
    if (RL__LIKELY(h->n == 1) && RL__LIKELY(h->v[0].lock == lock && h->v[0].count == 1) &&
        RL__LIKELY(!rl__lockdep_enabled())) {
        h->n = 0;
        uint64_t s = atomic_fetch_sub_explicit(&lock->state, RW_READER, memory_order_release) - RW_READER;
        if (RL__UNLIKELY(!(s & RW_READERS_MASK) && (s & RW_WAITING_MASK)))
            wake_one_writer(lock);
        return true;
    }
    bool debug = RL__UNLIKELY(rl__lockdep_enabled());
    if (atomic_load_explicit(&lock->writer, memory_order_relaxed) == rl__self()) {
        if (debug)
            rl__lockdep_released(lock);
        atomic_store_explicit(&lock->writer, 0, memory_order_relaxed);
        uint64_t s = atomic_fetch_and(&lock->state, ~RW_WRITER) & ~RW_WRITER;
        wake_after_writer(lock, s);
        return true;
    }
    read_hold *hold = hold_find(lock);
    if (RL__UNLIKELY(!hold)) {
        if (atomic_load(&lock->state) & (RW_WRITER | RW_READERS_MASK))
            return rl__fail(kRLErrorNotOwner, fn, "the calling thread holds no lock on %p", (void *)lock);
        return rl__fail(kRLErrorNotLocked, fn, "%p is not locked", (void *)lock);
    }
    bool last_hold = hold->count == 1;
    hold_drop(hold);
    if (debug && last_hold)
        rl__lockdep_released(lock);
    uint64_t s = atomic_fetch_sub(&lock->state, RW_READER) - RW_READER;
    if (!(s & RW_READERS_MASK) && (s & RW_WAITING_MASK))
        wake_one_writer(lock);
    return true;
}

bool RLReadWriteLockSetName(RLReadWriteLockRef lock, const char *name) {
    if (!rl__check(lock, &rwlock_class, __func__))
        return false;
    return rl__lockname_set(&lock->name, name, __func__);
}

char *RLReadWriteLockCopyName(RLReadWriteLockRef lock) {
    if (!rl__check(lock, &rwlock_class, __func__))
        return NULL;
    return rl__lockname_copy(&lock->name, __func__);
}
