/*
 * rl_pool.c — the memory of the library's objects (timers, sources,
 * observers, locks...): size classes of 64-byte multiples, each carved
 * from 64 KiB slabs; and, for objects that ask (rl__pool_alloc_packed: a
 * timer, of which a program may hold 100,000), classes of 16-byte
 * multiples between 128 and 256 bytes, whose slots are not each on a line
 * but waste at most 15 bytes instead of up to 63.
 *
 * Why not malloc: a run loop's hot paths (adding a timer, firing it) touch
 * the object's first cache lines, and with 100k timers those misses are the
 * cost. malloc hands out objects wherever its free lists have room, which
 * after some churn means one object per page, on lines shared with
 * anything; here objects of a class sit side by side in their slabs,
 * each starting on a cache line, so a burst of timers made together is a
 * dense, prefetchable run of memory.
 *
 * A slab is 64 KiB aligned, so an object finds its slab by masking its
 * address. The slab's header (at its start) holds its free slots as a stack
 * of 16-bit indices, so nothing is ever stored in a free slot: AddressSanitizer
 * poisoning and valgrind's mempool tracking cover the slots exactly (use
 * after free and leaks are reported as for malloc). Slabs with free slots
 * are on their class's list; a slab that empties is kept (one a class) or
 * freed, so memory follows use.
 *
 * A released slot is not handed out again at once: it waits in a
 * quarantine, a ring of the last RL_QUARANTINE slots of its class that the
 * releasing thread released, and is handed out again only when
 * RL_QUARANTINE later releases push it out. Until then its object header
 * still says "dead", so a stale pointer (an object released twice, or used
 * after its release) is refused by the object check instead of reaching a
 * new object that took the same address; without the quarantine the slot
 * was reused by the very next object of its size. Under AddressSanitizer
 * the ring is longer and the slot stays poisoned all that time, so the
 * stale use is reported.
 *
 * Threads share nothing while they make and release objects at a steady
 * rate (a loop per thread, each making its own timers): each thread has,
 * per class, its own quarantine and a few `ready` slots, which it hands
 * out without a lock; a slot pushed out of its quarantine becomes ready
 * for the same thread, whose cache still holds it. Only a thread that
 * runs out of ready slots (it makes more than it releases) takes its
 * class's mutex, and then takes a batch of slots from the slabs at once:
 * none beyond the one it needs the first time, then 1, 2, 4... up to
 * RL_BATCH, so a thread that makes one object of a class (a sleeping
 * loop's thread) holds no slots it will not use, and objects of many such
 * threads share pages; one that gathers more than RL_BATCH ready slots
 * gives them back at once.
 * The slabs, their lists and the class's own quarantine (for the slots of
 * exiting threads, which give everything back through a thread-specific
 * key's destructor, and of threads that could not get their caches) are
 * under the class's mutex.
 *
 * Memory ceiling: the slabs hold the live objects, at most one empty slab
 * a class and the slots in quarantines; a thread's caches are made class by
 * class on its first use of each (about 150 bytes a class it uses, and
 * the quarantine's ring, 512 bytes, on its first release of one; not
 * 21 KiB for all 32 classes up front) and hold at most RL_BATCH ready
 * and RL_QUARANTINE released slots of each; everything goes back when the
 * thread exits. So churn (objects made and dropped, threads come and gone)
 * leaves nothing behind beyond those bounds. PLAIN=1 (RL_TRICK_POOL=0)
 * uses malloc for every object instead.
 */
#include "rl_fork.h"
#include "rl_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define RL_POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL_POOL_ASAN 1
#endif
#endif
#ifdef RL_POOL_ASAN
#include <sanitizer/asan_interface.h>
#define RL_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define RL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define RL_POISON(p, n) ((void)(p), (void)(n))
#define RL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define RL_POOL_VALGRIND 1
#endif
#endif

enum {
    RL_SLAB_SIZE = 64 * 1024,
    RL_LINE = 64,
    RL_NLINE_CLASSES = RL_POOL_MAX / RL_LINE, /* 64, 128, ..., RL_POOL_MAX */
    RL_PACKED_STEP = 16,
    RL_PACKED_MIN = 128, /* packed classes: 144, 160, ..., RL_PACKED_MAX */
    RL_PACKED_MAX = 256,
    RL_NCLASSES = RL_NLINE_CLASSES + (RL_PACKED_MAX - RL_PACKED_MIN) / RL_PACKED_STEP,
#ifdef RL_POOL_ASAN
    RL_QUARANTINE = 1024,
#else
    RL_QUARANTINE = 64,
#endif
    RL_BATCH = 16, /* ready slots a thread keeps at most, and takes from the slabs at once */
};

typedef struct pclass pclass;

typedef struct slab_head {
    struct slab_head *next, *prev; /* the class's slabs with free slots */
    pclass *cls;
    uint16_t nfree;  /* entries in freeidx */
    uint16_t bump;   /* slots [bump, cap) never handed out yet */
    uint16_t live;   /* slots handed out */
    bool listed;     /* on the class's list */
    uint16_t freeidx[]; /* released slots, a stack */
} slab_head;

struct pclass {
    pthread_mutex_t lock;
    uint32_t size;  /* of a slot */
    uint32_t first; /* offset of slot 0 in a slab */
    uint16_t cap;   /* slots a slab */
    slab_head *list;  /* slabs with free slots */
    slab_head *empty; /* one empty slab kept */
    uint32_t qhead, qlen;           /* the quarantine: oldest entry, entries */
    void *quarantine[RL_QUARANTINE]; /* released slots not yet back in their slab */
};

static pclass size_classes[RL_NCLASSES];

/* What the pool holds, for rl__pool_stats (relaxed counters, off the hot
 * paths: slabs made and freed, thread caches made and given back). */
static _Atomic long nslabs, cached_bytes;
static pthread_once_t classes_once = PTHREAD_ONCE_INIT;

/* A thread's own slots of one class: `ready` ones, live for their slabs
 * and not handed out yet, and its quarantine of released ones. */
typedef struct tcache {
    uint32_t nready, qhead, qlen;
    uint32_t batch; /* ready slots the next refill takes besides the one needed */
    void *ready[RL_BATCH];
    /* RL_QUARANTINE entries, made on the thread's first release of the
     * class (a thread that only makes objects of a class never needs it). */
    void **ring;
} tcache;

/* A thread's caches, one per class, each made on the thread's first use of
 * that class (a sleeping loop's thread uses a handful of classes). Every
 * thread's block is on one list, so that a fork() child can give back
 * what its parent's other threads held, and leak checkers see them. */
typedef struct tblock {
    struct tblock *next, *prev;
    tcache *c[RL_NCLASSES];
} tblock;

static __thread tblock *tb;
/* The thread gave its caches back (it is exiting) or could not have them:
 * it takes the class's mutex for each slot. */
static __thread bool tb_off;
static pthread_key_t tb_key; /* its destructor gives a thread's block back */
static bool tb_key_ok;
static pthread_mutex_t tblocks_lock = PTHREAD_MUTEX_INITIALIZER; /* taken before a class's */
static tblock *tblocks;
static void tb_exit(void *block);

static void classes_init(void) {
    for (int k = 0; k < RL_NCLASSES; k++) {
        pclass *c = &size_classes[k];
        pthread_mutex_init(&c->lock, NULL);
        c->size = k < RL_NLINE_CLASSES ? (uint32_t)(k + 1) * RL_LINE
                                       : RL_PACKED_MIN + (uint32_t)(k - RL_NLINE_CLASSES + 1) * RL_PACKED_STEP;
        /* The largest cap whose header (with its index stack) fits before
         * slot 0. */
        uint32_t cap = RL_SLAB_SIZE / c->size;
        for (;; cap--) {
            size_t hdr = sizeof(slab_head) + cap * sizeof(uint16_t);
            uint32_t first = (uint32_t)((hdr + RL_LINE - 1) & ~(size_t)(RL_LINE - 1));
            if (first + (size_t)cap * c->size <= RL_SLAB_SIZE) {
                c->cap = (uint16_t)cap;
                c->first = first;
                break;
            }
        }
    }
    tb_key_ok = pthread_key_create(&tb_key, tb_exit) == 0;
}

static void tblocks_unlink_locked(tblock *b) {
    if (b->prev)
        b->prev->next = b->next;
    else
        tblocks = b->next;
    if (b->next)
        b->next->prev = b->prev;
}

/* The calling thread's cache for class c, or NULL: the caller then takes
 * the class's mutex for this slot. */
static tcache *tc_make(pclass *c);

static inline tcache *tc_get(pclass *c) {
    tblock *b = tb;
    tcache *t;
    if (RL__LIKELY(b != NULL) && RL__LIKELY((t = b->c[c - size_classes]) != NULL))
        return t;
    return tc_make(c);
}

/* The classes this thread has taken a slot of through the class's mutex:
 * its first slot of a class takes that way, and the thread's cache for
 * the class (and its block of caches) is made at the second. A loop
 * thread uses most classes once (its loop, its mode, a timer): no cache
 * for them, 650 bytes a thread less (a loop thread's memory,
 * docs/runloop.md). */
static __thread uint64_t tc_seen;
_Static_assert(RL_NCLASSES <= 64, "tc_seen has a bit per class");

/* tc_get's first use of class c by this thread (and of the pool). */
static __attribute__((noinline)) tcache *tc_make(pclass *c) {
    uint64_t bit = (uint64_t)1 << (c - size_classes);
    if (!(tc_seen & bit)) {
        tc_seen |= bit;
        return NULL; /* this slot through the class's mutex */
    }
    tblock *b = tb;
    if (b) {
        tcache *t = calloc(1, sizeof *t);
        if (t) {
            b->c[c - size_classes] = t;
            atomic_fetch_add_explicit(&cached_bytes, (long)sizeof *t, memory_order_relaxed);
        }
        return t; /* NULL: the class's mutex for each slot */
    }
    if (tb_off || !tb_key_ok)
        return NULL;
    b = calloc(1, sizeof *b);
    if (!b || pthread_setspecific(tb_key, b) != 0) {
        free(b);
        tb_off = true;
        return NULL;
    }
    atomic_fetch_add_explicit(&cached_bytes, (long)sizeof *b, memory_order_relaxed);
    pthread_mutex_lock(&tblocks_lock);
    b->next = tblocks;
    if (tblocks)
        tblocks->prev = b;
    tblocks = b;
    pthread_mutex_unlock(&tblocks_lock);
    tb = b;
    return tc_make(c);
}

bool rl__pool_serves(size_t size) { return size > 0 && size <= RL_POOL_MAX; }

static pclass *class_for(size_t size) { return &size_classes[(size + RL_LINE - 1) / RL_LINE - 1]; }

static pclass *packed_class_for(size_t size) {
    if (size <= RL_PACKED_MIN || size > RL_PACKED_MAX)
        return class_for(size);
    return &size_classes[RL_NLINE_CLASSES + (size - RL_PACKED_MIN + RL_PACKED_STEP - 1) / RL_PACKED_STEP - 1];
}

static slab_head *slab_of(void *p) { return (slab_head *)((uintptr_t)p & ~(uintptr_t)(RL_SLAB_SIZE - 1)); }

static void list_add(pclass *c, slab_head *s) {
    s->prev = NULL;
    s->next = c->list;
    if (c->list)
        c->list->prev = s;
    c->list = s;
    s->listed = true;
}

static void list_remove(pclass *c, slab_head *s) {
    if (s->prev)
        s->prev->next = s->next;
    else
        c->list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->listed = false;
}

/* A slab's memory: RL_SLAB_SIZE bytes on an RL_SLAB_SIZE boundary. Mapped
 * directly (a mapping twice the size, trimmed to the aligned part): malloc's
 * aligned_alloc of 64 KiB maps too, and touches a page before the slab for
 * its chunk header, 6 % more memory a slab. Under AddressSanitizer, malloc's
 * (its leak checker scans only what malloc gave for pointers). */
static void *slab_map(void) {
#ifdef RL_POOL_ASAN
    return aligned_alloc(RL_SLAB_SIZE, RL_SLAB_SIZE);
#else
    char *p = mmap(NULL, 2 * RL_SLAB_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    size_t lead = (RL_SLAB_SIZE - ((uintptr_t)p & (RL_SLAB_SIZE - 1))) & (RL_SLAB_SIZE - 1);
    if (lead && munmap(p, lead) != 0)
        abort(); /* unmapping a part of our own mapping cannot fail */
    if (munmap(p + lead + RL_SLAB_SIZE, RL_SLAB_SIZE - lead) != 0)
        abort();
    return p + lead;
#endif
}

static void slab_unmap(void *s) {
#ifdef RL_POOL_ASAN
    free(s);
#else
    if (munmap(s, RL_SLAB_SIZE) != 0)
        abort();
#endif
}

static slab_head *slab_new(pclass *c) {
    slab_head *s = slab_map();
    if (!s)
        return NULL;
    atomic_fetch_add_explicit(&nslabs, 1, memory_order_relaxed);
    s->cls = c;
    s->nfree = s->bump = s->live = 0;
    s->listed = false;
    /* Slots are off limits until handed out. */
    RL_POISON((char *)s + c->first, (size_t)c->cap * c->size);
#ifdef RL_POOL_VALGRIND
    VALGRIND_CREATE_MEMPOOL(s, 0, 0);
    VALGRIND_MAKE_MEM_NOACCESS((char *)s + c->first, (size_t)c->cap * c->size);
#endif
    return s;
}

static void slab_free(slab_head *s) {
    atomic_fetch_sub_explicit(&nslabs, 1, memory_order_relaxed);
    RL_UNPOISON(s, RL_SLAB_SIZE);
#ifdef RL_POOL_VALGRIND
    VALGRIND_DESTROY_MEMPOOL(s);
    VALGRIND_MAKE_MEM_UNDEFINED(s, RL_SLAB_SIZE);
#endif
    slab_unmap(s);
}

/* With c->lock held: a slot from a slab with room, or NULL if none has. */
static void *slot_take_locked(pclass *c) {
    slab_head *s = c->list;
    if (!s) {
        s = c->empty;
        c->empty = NULL;
        if (!s)
            return NULL;
        list_add(c, s);
    }
    uint16_t i = s->nfree ? s->freeidx[--s->nfree] : s->bump++;
    if (++s->live == c->cap)
        list_remove(c, s); /* full */
    return (char *)s + c->first + (size_t)i * c->size;
}

/* c->lock held on entry and on return: a slot, from a new slab (made
 * without the lock) if no slab has room; NULL if memory is short. */
static void *slot_take_or_grow_locked(pclass *c) {
    void *p = slot_take_locked(c);
    if (p)
        return p;
    pthread_mutex_unlock(&c->lock);
    slab_head *s = slab_new(c);
    pthread_mutex_lock(&c->lock);
    if (s && !c->empty) {
        c->empty = s; /* taken from just below */
        s = NULL;
    }
    p = slot_take_locked(c); /* another thread may have made room meanwhile */
    if (s)
        slab_free(s); /* and kept an empty slab: ours is not needed */
    return p;
}

/* A slot of class c: one of the thread's ready slots, or from the slabs,
 * then with up to RL_BATCH more made ready under the same lock. */
static void *slot_get(pclass *c) {
    tcache *t = tc_get(c);
    if (t && t->nready)
        return t->ready[--t->nready];
    pthread_mutex_lock(&c->lock);
    void *p = slot_take_or_grow_locked(c);
    uint32_t want = t ? t->batch : 0;
    if (t)
        t->batch = want ? (want * 2 < RL_BATCH ? want * 2 : RL_BATCH) : 1;
    while (p && t && t->nready < want) {
        void *q = slot_take_locked(c); /* only what the slabs already have */
        if (!q)
            break;
        t->ready[t->nready++] = q;
    }
    /* Taken from the slabs in rising address order, handed out from the
     * top of the stack: reversed, so that objects made in a row sit at
     * rising addresses (a program that walks them in that order, adding
     * 100k timers, is followed by the prefetcher: 50 ns an add became 18). */
    for (uint32_t a = 0, b = t ? t->nready : 0; b > 1 && a < --b; a++) {
        void *x = t->ready[a];
        t->ready[a] = t->ready[b];
        t->ready[b] = x;
    }
    pthread_mutex_unlock(&c->lock);
    return p;
}


__attribute__((always_inline)) static inline void *alloc_in(pclass *c, size_t size, size_t zero) {
    char *p = slot_get(c);
    if (!p)
        return NULL;
    RL_UNPOISON(p, c->size);
#ifdef RL_POOL_VALGRIND
    VALGRIND_MEMPOOL_ALLOC(slab_of(p), p, size);
#endif
    memset(p, 0, zero);
    return p;
}

void *rl__pool_alloc_zeroing(size_t size, size_t zero) {
    pthread_once(&classes_once, classes_init);
    return alloc_in(class_for(size), size, zero);
}

void *rl__pool_alloc_packed(size_t size, size_t zero) {
    pthread_once(&classes_once, classes_init);
    return alloc_in(packed_class_for(size), size, zero);
}

/* With c->lock held: gives slot p back to its slab. Returns a slab that
 * emptied and is not kept, for the caller to free after unlocking. */
static slab_head *slot_return_locked(pclass *c, void *p) {
    slab_head *s = slab_of(p);
    s->freeidx[s->nfree++] = (uint16_t)(((char *)p - (char *)s - c->first) / c->size);
    s->live--;
    if (!s->listed)
        list_add(c, s); /* was full */
    if (s->live != 0)
        return NULL;
    list_remove(c, s);
    s->nfree = s->bump = 0; /* hand slots out in address order again */
    if (!c->empty) {
        c->empty = s;
        return NULL;
    }
    return s;
}

/* With c->lock held: p joins the class's quarantine; when it is full, the
 * oldest entry leaves it for its slab. Returns a slab to free after
 * unlocking. */
static slab_head *quarantine_push_locked(pclass *c, void *p) {
    if (c->qlen < RL_QUARANTINE) {
        c->quarantine[(c->qhead + c->qlen++) % RL_QUARANTINE] = p;
        return NULL;
    }
    void *oldest = c->quarantine[c->qhead];
    c->quarantine[c->qhead] = p;
    c->qhead = (c->qhead + 1) % RL_QUARANTINE;
    return slot_return_locked(c, oldest);
}

/* Gives n (at most RL_BATCH) slots of class c under one lock: released
 * ones to the class's quarantine, or, with `unused`, slots never handed
 * out (or out of a quarantine) straight back to their slabs. */
static void slots_give(pclass *c, void *const *slots, size_t n, bool unused) {
    slab_head *drop[RL_BATCH];
    size_t ndrop = 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        slab_head *s = unused ? slot_return_locked(c, slots[i]) : quarantine_push_locked(c, slots[i]);
        if (s)
            drop[ndrop++] = s;
    }
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < ndrop; i++)
        slab_free(drop[i]);
}

void rl__pool_free(void *p) {
    pclass *c = slab_of(p)->cls;
    RL_POISON(p, c->size);
#ifdef RL_POOL_VALGRIND
    VALGRIND_MEMPOOL_FREE(slab_of(p), p);
#endif
    tcache *t = tc_get(c);
    if (RL__UNLIKELY(!t || !t->ring)) {
        void **ring = t ? malloc(RL_QUARANTINE * sizeof *ring) : NULL;
        if (!ring) {
            slots_give(c, &p, 1, false); /* the class's quarantine */
            return;
        }
        t->ring = ring;
        atomic_fetch_add_explicit(&cached_bytes, (long)(RL_QUARANTINE * sizeof *ring), memory_order_relaxed);
    }
    /* p joins the thread's quarantine; when it is full, the oldest entry
     * leaves it and is ready for this thread again. */
    if (t->qlen < RL_QUARANTINE) {
        t->ring[(t->qhead + t->qlen++) % RL_QUARANTINE] = p;
        return;
    }
    void *oldest = t->ring[t->qhead];
    t->ring[t->qhead] = p;
    t->qhead = (t->qhead + 1) % RL_QUARANTINE;
    if (t->nready == RL_BATCH) {
        slots_give(c, t->ready, RL_BATCH, true);
        t->nready = 0;
    }
    t->ready[t->nready++] = oldest;
}

/* Gives a thread's caches back and frees them: the ready slots to their
 * slabs, its quarantines, oldest first, to the classes' quarantines. The
 * block is off the list already. */
static void tblock_give_back(tblock *b) {
    for (int k = 0; k < RL_NCLASSES; k++) {
        tcache *t = b->c[k];
        if (!t)
            continue;
        if (t->nready)
            slots_give(&size_classes[k], t->ready, t->nready, true);
        while (t->qlen) {
            void *chunk[RL_BATCH];
            size_t n = 0;
            for (; n < RL_BATCH && t->qlen; n++, t->qlen--) {
                chunk[n] = t->ring[t->qhead];
                t->qhead = (t->qhead + 1) % RL_QUARANTINE;
            }
            slots_give(&size_classes[k], chunk, n, false);
        }
        if (t->ring) {
            free(t->ring);
            atomic_fetch_sub_explicit(&cached_bytes, (long)(RL_QUARANTINE * sizeof *t->ring), memory_order_relaxed);
        }
        free(t);
        atomic_fetch_sub_explicit(&cached_bytes, (long)sizeof *t, memory_order_relaxed);
    }
    free(b);
    atomic_fetch_sub_explicit(&cached_bytes, (long)sizeof *b, memory_order_relaxed);
}

/* A thread's exit (the key's destructor): whatever it makes or releases
 * after this takes the lock. */
static void tb_exit(void *block) {
    tblock *b = block;
    tb = NULL;
    tb_off = true;
    pthread_mutex_lock(&tblocks_lock);
    tblocks_unlink_locked(b);
    pthread_mutex_unlock(&tblocks_lock);
    tblock_give_back(b);
}

/* fork(): every class lock is held across it (rl_fork.c), in index order,
 * so that a child forked while another thread allocates finds the lists
 * consistent and the locks free. */
static void fork_prepare(void) {
    pthread_once(&classes_once, classes_init);
    pthread_mutex_lock(&tblocks_lock);
    for (int k = 0; k < RL_NCLASSES; k++)
        pthread_mutex_lock(&size_classes[k].lock);
}

static void fork_parent(void) {
    for (int k = RL_NCLASSES - 1; k >= 0; k--)
        pthread_mutex_unlock(&size_classes[k].lock);
    pthread_mutex_unlock(&tblocks_lock);
}

/* In the child only the forking thread lives on: what the others held in
 * their caches goes back to the classes. */
static void fork_child(void) {
    fork_parent();
    pthread_mutex_lock(&tblocks_lock);
    tblock *others = NULL;
    for (tblock *b = tblocks, *next; b; b = next) {
        next = b->next;
        if (b == tb)
            continue;
        tblocks_unlink_locked(b);
        b->next = others;
        others = b;
    }
    pthread_mutex_unlock(&tblocks_lock);
    while (others) {
        tblock *b = others;
        others = b->next;
        tblock_give_back(b);
    }
}

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_POOL, fork_prepare, fork_parent, fork_child);
}

void rl__pool_stats(long *slabs, long *cache_bytes, long *ring_bytes) {
    if (ring_bytes)
        *ring_bytes = (long)(RL_QUARANTINE * sizeof(void *));
    if (slabs)
        *slabs = atomic_load_explicit(&nslabs, memory_order_relaxed);
    if (cache_bytes)
        *cache_bytes = atomic_load_explicit(&cached_bytes, memory_order_relaxed);
}

size_t rl__pool_block_size(const void *p) { return slab_of((void *)p)->cls->size; }
