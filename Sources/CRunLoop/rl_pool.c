/*
 * rl_pool.c — the memory of the library's objects (timers, sources,
 * observers, locks...): size classes of 64-byte multiples, each carved
 * from 64 KiB slabs.
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
 * A released slot is not handed out again at once: it waits in its class's
 * quarantine, a ring of the last RL_QUARANTINE slots released, and goes
 * back to its slab only when RL_QUARANTINE later releases push it out.
 * Until then its object header still says "dead", so a stale pointer (an
 * object released twice, or used after its release) is refused by the
 * object check instead of reaching a new object that took the same
 * address; without the quarantine the slot was reused by the very next
 * object of its size. Under AddressSanitizer the ring is longer and the
 * slot stays poisoned all that time, so the stale use is reported.
 *
 * One mutex per class; allocation and release are a few stores under it
 * (creating and releasing objects is not a hot path; using them is).
 */
#include "rl_fork.h"
#include "rl_pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    RL_NCLASSES = RL_POOL_MAX / RL_LINE, /* 64, 128, ..., RL_POOL_MAX */
#ifdef RL_POOL_ASAN
    RL_QUARANTINE = 1024,
#else
    RL_QUARANTINE = 64,
#endif
};

typedef struct rl_pclass rl_pclass;

typedef struct rl_slab {
    struct rl_slab *next, *prev; /* the class's slabs with free slots */
    rl_pclass *cls;
    uint16_t nfree;  /* entries in freeidx */
    uint16_t bump;   /* slots [bump, cap) never handed out yet */
    uint16_t live;   /* slots handed out */
    bool listed;     /* on the class's list */
    uint16_t freeidx[]; /* released slots, a stack */
} rl_slab;

struct rl_pclass {
    pthread_mutex_t lock;
    uint32_t size;  /* of a slot */
    uint32_t first; /* offset of slot 0 in a slab */
    uint16_t cap;   /* slots a slab */
    rl_slab *list;  /* slabs with free slots */
    rl_slab *empty; /* one empty slab kept */
    uint32_t qhead, qlen;           /* the quarantine: oldest entry, entries */
    void *quarantine[RL_QUARANTINE]; /* released slots not yet back in their slab */
};

static rl_pclass rl_classes[RL_NCLASSES];
static pthread_once_t rl_classes_once = PTHREAD_ONCE_INIT;

static void rl_classes_init(void) {
    for (int k = 0; k < RL_NCLASSES; k++) {
        rl_pclass *c = &rl_classes[k];
        pthread_mutex_init(&c->lock, NULL);
        c->size = (uint32_t)(k + 1) * RL_LINE;
        /* The largest cap whose header (with its index stack) fits before
         * slot 0. */
        uint32_t cap = RL_SLAB_SIZE / c->size;
        for (;; cap--) {
            size_t hdr = sizeof(rl_slab) + cap * sizeof(uint16_t);
            uint32_t first = (uint32_t)((hdr + RL_LINE - 1) & ~(size_t)(RL_LINE - 1));
            if (first + (size_t)cap * c->size <= RL_SLAB_SIZE) {
                c->cap = (uint16_t)cap;
                c->first = first;
                break;
            }
        }
    }
}

bool rl__pool_serves(size_t size) { return size > 0 && size <= RL_POOL_MAX; }

static rl_pclass *rl_class_for(size_t size) { return &rl_classes[(size + RL_LINE - 1) / RL_LINE - 1]; }

static rl_slab *rl_slab_of(void *p) { return (rl_slab *)((uintptr_t)p & ~(uintptr_t)(RL_SLAB_SIZE - 1)); }

static void rl_list_add(rl_pclass *c, rl_slab *s) {
    s->prev = NULL;
    s->next = c->list;
    if (c->list)
        c->list->prev = s;
    c->list = s;
    s->listed = true;
}

static void rl_list_remove(rl_pclass *c, rl_slab *s) {
    if (s->prev)
        s->prev->next = s->next;
    else
        c->list = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->listed = false;
}

static rl_slab *rl_slab_new(rl_pclass *c) {
    rl_slab *s = aligned_alloc(RL_SLAB_SIZE, RL_SLAB_SIZE);
    if (!s)
        return NULL;
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

static void rl_slab_free(rl_slab *s) {
    RL_UNPOISON(s, RL_SLAB_SIZE);
#ifdef RL_POOL_VALGRIND
    VALGRIND_DESTROY_MEMPOOL(s);
    VALGRIND_MAKE_MEM_UNDEFINED(s, RL_SLAB_SIZE);
#endif
    free(s);
}

void *rl__pool_alloc(size_t size) {
    pthread_once(&rl_classes_once, rl_classes_init);
    rl_pclass *c = rl_class_for(size);
    pthread_mutex_lock(&c->lock);
    rl_slab *s = c->list;
    if (!s) {
        s = c->empty;
        c->empty = NULL;
        if (!s) {
            pthread_mutex_unlock(&c->lock);
            s = rl_slab_new(c);
            if (!s)
                return NULL;
            pthread_mutex_lock(&c->lock);
        }
        rl_list_add(c, s);
    }
    uint16_t i = s->nfree ? s->freeidx[--s->nfree] : s->bump++;
    if (++s->live == c->cap)
        rl_list_remove(c, s); /* full */
    pthread_mutex_unlock(&c->lock);
    char *p = (char *)s + c->first + (size_t)i * c->size;
    RL_UNPOISON(p, c->size);
#ifdef RL_POOL_VALGRIND
    VALGRIND_MEMPOOL_ALLOC(s, p, size);
#endif
    memset(p, 0, size);
    return p;
}

/* With c->lock held: gives slot p back to its slab. Returns a slab that
 * emptied and is not kept, for the caller to free after unlocking. */
static rl_slab *rl_slot_return_locked(rl_pclass *c, void *p) {
    rl_slab *s = rl_slab_of(p);
    s->freeidx[s->nfree++] = (uint16_t)(((char *)p - (char *)s - c->first) / c->size);
    s->live--;
    if (!s->listed)
        rl_list_add(c, s); /* was full */
    if (s->live != 0)
        return NULL;
    rl_list_remove(c, s);
    s->nfree = s->bump = 0; /* hand slots out in address order again */
    if (!c->empty) {
        c->empty = s;
        return NULL;
    }
    return s;
}

void rl__pool_free(void *p) {
    rl_pclass *c = rl_slab_of(p)->cls;
    RL_POISON(p, c->size);
#ifdef RL_POOL_VALGRIND
    VALGRIND_MEMPOOL_FREE(rl_slab_of(p), p);
#endif
    rl_slab *drop = NULL;
    pthread_mutex_lock(&c->lock);
    /* p joins the quarantine; when it is full, the oldest entry leaves it
     * for its slab. */
    if (c->qlen == RL_QUARANTINE) {
        void *oldest = c->quarantine[c->qhead];
        c->quarantine[c->qhead] = p;
        c->qhead = (c->qhead + 1) % RL_QUARANTINE;
        drop = rl_slot_return_locked(c, oldest);
    } else {
        c->quarantine[(c->qhead + c->qlen++) % RL_QUARANTINE] = p;
    }
    pthread_mutex_unlock(&c->lock);
    if (drop)
        rl_slab_free(drop);
}

/* fork(): every class lock is held across it (rl_fork.c), in index order,
 * so that a child forked while another thread allocates finds the lists
 * consistent and the locks free. */
static void fork_prepare(void) {
    pthread_once(&rl_classes_once, rl_classes_init);
    for (int k = 0; k < RL_NCLASSES; k++)
        pthread_mutex_lock(&rl_classes[k].lock);
}

static void fork_parent(void) {
    for (int k = RL_NCLASSES - 1; k >= 0; k--)
        pthread_mutex_unlock(&rl_classes[k].lock);
}

static void fork_child(void) { fork_parent(); }

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_POOL, fork_prepare, fork_parent, fork_child);
}
