/*
 * rl_pqueue.c — perform requests: the one queue per run loop that every
 * perform call of the library goes through (RLRunLoopPerform*,
 * RLThreadPerform*, RLWorkerThreadPerform*, the Swift overlay): storage,
 * records, block copies, pushing, waiting, running, trimming and dropping
 * requests. The loop drives it (its iteration runs it, its teardown closes
 * it); it calls no run-loop file. The way in for the front ends is
 * rl__perform_submit (RLRunLoopPerform.c), which checks a request, brings
 * its modes into being and wakes the loop around the calls here. See
 * RLRunLoopPerformInternal.h.
 *
 * How a request is stored. The queue is a FIFO of 16-byte slots
 * {function, argument} (RLRunLoopPerformInternal.h). The usual request — a function or a
 * block for the default mode, nothing else — is one slot. Any other request
 * is two: a head slot {NULL, record} (no request has a NULL function) whose
 * record (rl_pext) holds the modes, the release callback and the waiter,
 * then the request's own slot. The record is malloc'ed with its mode names,
 * or shared (a request for the common modes only), or lives on the stack of
 * a caller that waits (it outlives the request: rl__perform_ticket).
 *
 * A block is queued as a slot whose function says how to run it and how to
 * let it go (rl_call_*). Small stack blocks are copied into the loop's own
 * slabs instead of Block_copy's malloc (the fast path, below); without it
 * (RL_TRICK_BLOCK_COPY=0, make PLAIN=1) blocks go through Block_copy and
 * Block_release only. A waiting caller's block is not copied at all: it
 * lives on the caller's stack until the request is done with.
 */
#include "RLLockInternal.h"
#include "RLRunLoopPerformInternal.h"
#include "runloop_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* storage: chunks of slots (see RLRunLoopPerformInternal.h)           */

static inline void rl_flist_push(rl_flist *l, void *block) {
    *(void **)block = l->head;
    l->head = block;
    l->n++;
}

static inline void *rl_flist_pop(rl_flist *l) {
    void *block = l->head;
    if (block) {
        l->head = *(void **)block;
        l->n--;
    }
    return block;
}

/* Appends k (1 or 2) slots, kept in one chunk; false when that needs a
 * chunk and the pool is empty (call rl_pq_grow without the lock, retry).
 * Lock held. */
static inline bool rl_pq_push_locked(rl_pqueue *pq, const rl_pslot *s, uint32_t k) {
    rl_pchunk *c = pq->q.tail;
    if (__builtin_expect(c == NULL || c->n + k > RL_PCHUNK_SLOTS, 0)) {
        c = rl_flist_pop(&pq->pool);
        if (!c)
            return false;
        c->next = NULL;
        c->n = 0;
        if (pq->q.tail) {
            pq->q.tail->next = c;
        } else {
            pq->q.head = c;
            atomic_store(&pq->queued, 1); /* sequentially consistent: see rl_pq_maybe_queued */
        }
        pq->q.tail = c;
    }
    c->s[c->n] = s[0];
    if (k > 1)
        c->s[c->n + 1] = s[1];
    c->n += k;
    return true;
}

#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
/* Whether k slots can be appended without a new chunk from malloc. Lock
 * held. */
static inline bool rl_pq_has_room_locked(const rl_pqueue *pq, uint32_t k) {
    const rl_pchunk *c = pq->q.tail;
    return (c && c->n + k <= RL_PCHUNK_SLOTS) || pq->pool.head != NULL;
}
#endif

/* The queued slots, handed over whole; the queue is left empty. Lock held. */
static inline rl_pchain rl_pq_take_locked(rl_pqueue *pq) {
    rl_pchain c = pq->q;
    pq->q.head = pq->q.tail = NULL;
    atomic_store_explicit(&pq->queued, 0, memory_order_relaxed);
    return c;
}

/* a ++ b, O(1). */
static inline rl_pchain rl_pchain_cat(rl_pchain a, rl_pchain b) {
    if (!a.head)
        return b;
    if (b.head) {
        a.tail->next = b.head;
        a.tail = b.tail;
    }
    return a;
}

/* A position in a chain: slot i of chunk c. */
typedef struct rl_pcur {
    rl_pchunk *c;
    uint32_t i;
} rl_pcur;

/* Reads the slot at r and moves past it; false at the end of the chain. */
static inline bool rl_pcur_read(rl_pcur *r, rl_pslot *out) {
    while (r->c && r->i >= r->c->n) {
        r->c = r->c->next;
        r->i = 0;
    }
    if (!r->c)
        return false;
    *out = r->c->s[r->i++];
    return true;
}

/* Writes at w and moves past it, for compacting a chain in place: w starts
 * at the head and trails the read cursor, so it only ever overwrites slots
 * already read. A chunk left behind is full. */
static inline void rl_pcur_write(rl_pcur *w, rl_pslot s) {
    if (w->i == RL_PCHUNK_SLOTS) {
        w->c->n = RL_PCHUNK_SLOTS;
        w->c = w->c->next;
        w->i = 0;
    }
    w->c->s[w->i++] = s;
}

/* Ends a compaction of `chain` whose writes stopped at w: returns the
 * chain of what was written (possibly empty) and sets *rest to the chunks
 * no longer needed (for rl_pq_recycle; NULL if none). */
static inline rl_pchain rl_pcur_finish(rl_pchain chain, rl_pcur w, rl_pchunk **rest) {
    if (!w.c || (w.c == chain.head && w.i == 0)) {
        *rest = chain.head;
        return (rl_pchain){NULL, NULL};
    }
    w.c->n = w.i;
    *rest = w.c->next;
    w.c->next = NULL;
    return (rl_pchain){chain.head, w.c};
}

/* Empty chunks kept per queue while its loop runs (the rest go back to
 * malloc): 4 MiB, a backlog of ~260k requests. Giving memory back to
 * malloc and taking it again costs page faults (glibc returns the top of
 * its heap to the kernel), so a busy loop keeps what it uses, and gives it
 * back when it goes to sleep (rl__perform_trim). */
enum { RL_PQ_POOL_MAX = 1024 };

#if RL_TRICK_PQ_SPIN
/* Critical sections are a few stores, so spinning beats a mutex at millions
 * of requests a second; after a short spin it yields, so that a preempted
 * holder costs little. */
void rl__pq_lock(rl_pqueue *pq) {
    for (int spins = 0;;) {
        if (!atomic_exchange_explicit(&pq->lock, 1, memory_order_acquire))
            return;
        while (atomic_load_explicit(&pq->lock, memory_order_relaxed)) {
            if (++spins > 64)
                sched_yield();
            else
                rl__cpu_relax();
        }
    }
}
#else
/* The plain twin: a futex mutex on the same word (0 free, 1 held, 2 held
 * and someone may sleep on it), which sleeps at once when it is held. */
void rl__pq_lock(rl_pqueue *pq) {
    _Atomic uint32_t *w = (_Atomic uint32_t *)&pq->lock;
    uint32_t c = 0;
    if (atomic_compare_exchange_strong_explicit(w, &c, 1, memory_order_acquire, memory_order_relaxed))
        return;
    if (c != 2)
        c = atomic_exchange_explicit(w, 2, memory_order_acquire);
    while (c != 0) {
        rl__futex_wait(w, 2, NULL);
        c = atomic_exchange_explicit(w, 2, memory_order_acquire);
    }
}

void rl__pq_wake_one(rl_pqueue *pq) { rl__futex_wake((_Atomic uint32_t *)&pq->lock, 1); }
#endif

static bool rl_pq_grow(rl_pqueue *pq) {
    rl_pchunk *c = malloc(sizeof *c);
    if (!c)
        return false;
    /* Fault its pages in now, not under the lock with a push. */
    volatile unsigned char *bytes = (volatile unsigned char *)c;
    bytes[0] = 0;
    bytes[sizeof *c - 1] = 0;
    rl__pq_lock(pq);
    rl_flist_push(&pq->pool, c);
    rl_pq_unlock(pq);
    return true;
}

/* Pushes blocks from the list `first` while l is shorter than max; returns
 * the rest. */
static void *rl_flist_fill(rl_flist *l, void *first, uint32_t max) {
    while (first && l->n < max) {
        void *next = *(void **)first;
        rl_flist_push(l, first);
        first = next;
    }
    return first;
}

/* Takes blocks off l until it is `keep` long; returns them as a list. */
static void *rl_flist_cut(rl_flist *l, uint32_t keep) {
    void *cut = NULL;
    while (l->n > keep) {
        void *block = rl_flist_pop(l);
        *(void **)block = cut;
        cut = block;
    }
    return cut;
}

/* free()s every block of a list. */
static void rl_flist_free(void *first) {
    while (first) {
        void *next = *(void **)first;
        free(first);
        first = next;
    }
}

/* Gives the chunks from `first` to the end of its list back: some to the
 * pool; returns the rest, for rl_flist_free without the lock. Lock
 * held. */
static rl_pchunk *rl_pq_recycle_locked(rl_pqueue *pq, rl_pchunk *first) {
    return rl_flist_fill(&pq->pool, first, RL_PQ_POOL_MAX);
}

/* rl_pq_recycle_locked and rl_flist_free; takes the lock itself. */
static void rl_pq_recycle(rl_pqueue *pq, rl_pchunk *first) {
    if (!first)
        return;
    rl__pq_lock(pq);
    first = rl_pq_recycle_locked(pq, first);
    rl_pq_unlock(pq);
    rl_flist_free(first);
}

/* Frees the pool and the queued chunks (their slots are the caller's to
 * dispose of first). No other thread may use the queue. */
static void rl_pq_destroy(rl_pqueue *pq) {
    rl_flist_free(pq->q.head);
    rl_flist_free(rl_flist_cut(&pq->pool, 0));
    pq->q.head = pq->q.tail = NULL;
}

/* ------------------------------------------------------------------ */
/* waiters                                                             */

/* Tells the waiter its request ran (DONE) or will not (FAILED). Called with
 * no lock held, after the request was disposed of. Once the exchange is
 * done the waiter may return and its record (on its stack) be gone: only
 * the address is used after it, by a private FUTEX_WAKE, which never
 * touches the memory (at worst a spurious wake-up of whatever sleeps there
 * later, and every futex sleeper re-checks its word). */
static void rl_waiter_complete(rl_waiter *w, uint32_t status) {
    if (atomic_exchange_explicit(&w->state, status, memory_order_acq_rel) == RL_WAIT_SLEEPING)
        rl__futex_wake(&w->state, 1);
}

/* Spins while the request is pending, until `until` (rl__spin_now
 * nanoseconds); true if it completed meanwhile. */
static bool rl_waiter_spin(rl_waiter *w, int64_t until) {
    do {
        for (int i = 0; i < 16; i++) {
            if (atomic_load_explicit(&w->state, memory_order_relaxed) != RL_WAIT_PENDING)
                return true;
            rl__cpu_relax();
        }
    } while (rl__spin_now() < until);
    return false;
}

/* Blocks until the request is done or dropped; returns DONE or FAILED.
 * With `spin` (the target's loop runs on another CPU), it first spins
 * within that budget (rl_spin.h): a request the target runs at once then
 * completes with neither thread sleeping. On the target's own CPU (or not
 * known to be another) spinning would keep the target from running: the
 * sender yields a few times instead, which hands the target the CPU; it
 * runs the request and yields back (the loop's pacing), and the reply comes
 * with no futex wait or wake. Without those tricks (RL_TRICK_SPIN,
 * RL_TRICK_YIELD) it just sleeps. */
static uint32_t rl_waiter_wait(rl_waiter *w, rl__spin *spin, bool same_cpu) {
    int64_t t0 = spin ? rl__spin_now() : 0;
    uint32_t budget = spin ? rl__spin_budget(spin) : 0; /* 0 without RL_TRICK_SPIN */
    if (budget > 0) {
        rl_waiter_spin(w, t0 + budget);
    } else if (same_cpu && RL_TRICK_YIELD) {
        for (int i = 0; i < 4 && atomic_load_explicit(&w->state, memory_order_relaxed) == RL_WAIT_PENDING; i++)
            sched_yield();
    }
    uint32_t s = RL_WAIT_PENDING;
    if (atomic_compare_exchange_strong_explicit(&w->state, &s, RL_WAIT_SLEEPING, memory_order_acquire,
                                                memory_order_acquire)) {
        do {
            rl__futex_wait(&w->state, RL_WAIT_SLEEPING, NULL);
            s = atomic_load_explicit(&w->state, memory_order_acquire);
        } while (s == RL_WAIT_SLEEPING);
    } /* else: already completed, s holds DONE or FAILED */
    if (spin)
        rl__spin_learn(spin, rl__spin_now() - t0, true);
    return s;
}

/* ------------------------------------------------------------------ */
/* request records                                                     */

static const rl_pext rl_pext_common = {.where = RL_PEXT_SHARED, .common = true};

static bool rl_pext_matches(const rl_pext *e, const rl_mode *m) {
    if (e->common && m->common)
        return true;
    if (e->dflt && m->is_default)
        return true;
    for (uint32_t i = 0; i < e->nnames; i++)
        if (strcmp(m->name, e->names[i]) == 0)
            return true;
    return false;
}

static bool rl_slot_matches(void *ext, const rl_mode *m) { return ext ? rl_pext_matches(ext, m) : m->is_default; }

static bool rl_is_default_name(RLRunLoopMode mode) {
    return mode == kRLRunLoopDefaultMode || strcmp(mode, kRLRunLoopDefaultMode) == 0;
}

static bool rl_is_common_name(RLRunLoopMode mode) {
    return mode == kRLRunLoopCommonModes || strcmp(mode, kRLRunLoopCommonModes) == 0;
}

/* Whether names[0, i) holds `name` already. */
static bool rl_names_have(const RLRunLoopMode *names, size_t i, RLRunLoopMode name) {
    for (size_t j = 0; j < i; j++)
        if (strcmp(names[j], name) == 0)
            return true;
    return false;
}

/* Fills the mode part of e from r; with `copy`, the names are copied into
 * `store` (room counted by rl_pext_size), else e points at r's. Returns
 * how many named modes there are. */
static uint32_t rl_pext_set_modes(rl_pext *e, const rl__preq *r, const char **names, char *store) {
    uint32_t n = 0;
    for (size_t i = 0; i < r->nmodes; i++) {
        RLRunLoopMode mode = r->modes[i];
        if (rl_is_common_name(mode)) {
            e->common = true;
        } else if (rl_is_default_name(mode)) {
            e->dflt = true;
        } else if (!rl_names_have(r->modes, i, mode)) {
            if (store) {
                size_t len = strlen(mode) + 1;
                memcpy(store, mode, len);
                names[n++] = store;
                store += len;
            } else {
                names[n++] = mode;
            }
        }
    }
    e->nnames = n;
    e->names = names;
    return n;
}

/* Bytes for a heap record of r with its names. */
static size_t rl_pext_size(const rl__preq *r) {
    size_t bytes = sizeof(rl_pext);
    for (size_t i = 0; i < r->nmodes; i++)
        bytes += sizeof(char *) + strlen(r->modes[i]) + 1;
    return bytes;
}

/* The record r needs, or NULL for none (the default mode only, nothing
 * else); *failed if memory is short (error set). A waiting caller's record
 * is `on_stack`, with room for its names in `names`. */
static rl_pext *rl_pext_make(const rl__preq *r, rl_pext *on_stack, const char **names, bool *failed,
                             const char *fname) {
    *failed = false;
    if (!r->release && !r->wait && r->nmodes == 1) {
        if (rl_is_default_name(r->modes[0]))
            return NULL;
        if (rl_is_common_name(r->modes[0]))
            return (rl_pext *)&rl_pext_common;
    }
    rl_pext *e = on_stack;
    if (r->wait) {
        *e = (rl_pext){.where = RL_PEXT_CALLER};
        rl_pext_set_modes(e, r, names, NULL);
    } else {
        e = malloc(rl_pext_size(r));
        if (!e) {
            *failed = true;
            rl__fail(kRLErrorNoMemory, fname, "out of memory");
            return NULL;
        }
        *e = (rl_pext){.where = RL_PEXT_HEAP};
        const char **heap_names = (const char **)(e + 1);
        rl_pext_set_modes(e, r, heap_names, (char *)(heap_names + r->nmodes));
    }
    e->release = r->release;
    return e;
}

/* ------------------------------------------------------------------ */
/* blocks                                                              */

#if __BLOCKS__
#if RL_TRICK_BLOCK_COPY
/* Small stack blocks are queued without Block_copy's malloc (and without
 * the free on the loop's thread, which was most of a request's cost).
 *
 * The block ABI, as clang's "Block Implementation Specification" describes
 * it, as far as the queue reads it: a block is an isa, a 32-bit flags word,
 * a 32-bit reserved word, its invoke function and a descriptor pointer,
 * followed by the captured variables. The descriptor holds a reserved word,
 * the size of the whole block, and, when BLOCK_HAS_COPY_DISPOSE is set, the
 * copy helper (dst, src) and dispose helper (block) with which Block_copy
 * and Block_release retain and release the captures (__block variables,
 * captured blocks, Swift contexts). Block_copy of a stack block is: copy
 * descriptor->size bytes to new memory, then call the copy helper on
 * (new, old); the last Block_release calls the dispose helper, then frees.
 * A stack block of at most RL_BCOPY_MAX bytes without C++ captures is
 * copied the same way into the loop's own memory (slabs, below), runs from
 * there, and then gets its dispose helper and its space goes back. Nothing
 * but the queue ever sees that copy (it keeps the stack block's isa and
 * flags), and it never moves. Anything else takes the general
 * path: a global block is queued as it is (Block_copy would return it
 * unchanged), a heap block (from Swift, or copied already) and an unusual
 * block (C++ captures, a bigger one, another isa) go through Block_copy,
 * which for a heap block only increments its reference count. */
enum {
    RL_BLOCK_NEEDS_FREE = 1 << 24,       /* a heap block: reference counted */
    RL_BLOCK_HAS_COPY_DISPOSE = 1 << 25, /* the descriptor has the helpers */
    RL_BLOCK_HAS_CTOR = 1 << 26,         /* the helpers run C++ code */
    RL_BLOCK_IS_GC = 1 << 27,
    RL_BLOCK_IS_GLOBAL = 1 << 28, /* static storage: never copied */
};

typedef struct rl_block_descriptor {
    unsigned long reserved;
    unsigned long size; /* of the whole block, captures included */
    /* Only with RL_BLOCK_HAS_COPY_DISPOSE: */
    void (*copy_helper)(void *dst, void *src);
    void (*dispose_helper)(void *block);
} rl_block_descriptor;

typedef struct rl_block_layout {
    void *isa;
    int flags;
    int reserved;
    void (*invoke)(void *block);
    rl_block_descriptor *descriptor;
} rl_block_layout;

/* The BlocksRuntime's isa of block literals on the stack. */
extern void *_NSConcreteStackBlock[];

enum { RL_BCOPY_MAX = 64 /* the biggest block copied into a slab */ };

/* Block copies are packed in 16-byte granules (what malloc gives the
 * runtime's copies) into 16 KiB slabs, handed out in order under the queue
 * lock. A slab whose copies have all come back is reused (a few are kept)
 * or freed: memory follows the backlog, and a loop that keeps up with its
 * producers cycles through the same few slabs without any malloc. A slab is
 * found from a copy by alignment. Giving copies back takes no lock: each
 * slab counts down `remaining`, which starts at RL_BSLAB_BIAS; returns
 * subtract their sizes, and the producer that fills the slab subtracts
 * RL_BSLAB_BIAS minus the bytes it handed out, so the count reaches zero
 * exactly once, after the last of both, and whoever takes it there
 * recycles the slab. */
enum {
    RL_BGRAIN = 16,
    RL_BSLAB_SIZE = 16384,
    RL_BSLAB_CACHE = 64,     /* kept while the loop runs (1 MiB) */
    RL_BSLAB_CACHE_IDLE = 4, /* kept while it sleeps (rl__perform_trim) */
    RL_BSLAB_BIAS = 1 << 30,
};
typedef struct rl_bslab {
    struct rl_bslab *next;  /* in the cache (an rl_flist: must come first) */
    rl__perform_queue *q;   /* the owner (slabs go with it) */
    _Atomic unsigned remaining; /* see above */
    _Alignas(64) unsigned char data[RL_BSLAB_SIZE - 64];
} rl_bslab;
_Static_assert(sizeof(rl_bslab) == RL_BSLAB_SIZE, "a slab is RL_BSLAB_SIZE bytes");

static inline rl_bslab *rl_bslab_of(void *copy) { return (rl_bslab *)((uintptr_t)copy & ~(uintptr_t)(RL_BSLAB_SIZE - 1)); }
static inline unsigned rl_bcopy_size(size_t size) { return (unsigned)((size + RL_BGRAIN - 1) & ~(size_t)(RL_BGRAIN - 1)); }

/* Takes `bytes` off a slab's count; true if that made it zero: the caller
 * recycles it. */
static inline bool rl_bslab_sub(rl_bslab *sl, unsigned bytes) {
    return atomic_fetch_sub_explicit(&sl->remaining, bytes, memory_order_acq_rel) == bytes;
}

/* Space for a copy of `size` bytes, queue lock held; NULL if a slab is
 * needed. */
static inline void *rl_bslot_take_locked(rl__perform_queue *q, size_t size) {
    unsigned need = rl_bcopy_size(size);
    rl_bslab *sl = q->bcur;
    if (sl && q->bcur_used + need > sizeof sl->data) {
        /* Full. If all its copies are back already, start over in it. */
        q->bcur = NULL;
        if (rl_bslab_sub(sl, RL_BSLAB_BIAS - q->bcur_used)) {
            atomic_store_explicit(&sl->remaining, RL_BSLAB_BIAS, memory_order_relaxed);
            q->bcur = sl;
            q->bcur_used = 0;
        } else {
            sl = NULL;
        }
    }
    if (!sl) {
        sl = rl_flist_pop(&q->bcache);
        if (!sl)
            return NULL;
        q->bcur = sl;
        q->bcur_used = 0;
    }
    void *s = sl->data + q->bcur_used;
    q->bcur_used += need;
    return s;
}

/* Copies a block of `size` bytes (a multiple of 8, at least the 32-byte
 * header, at most RL_BCOPY_MAX) word by word, inline: compilers turn a
 * switch of fixed-size memcpy calls back into one library call. */
static inline void rl_bcopy_bytes(void *dst, const void *src, size_t size) {
    typedef uint64_t __attribute__((may_alias, aligned(1))) rl_word;
    rl_word *d = dst;
    const rl_word *s = src;
    d[0] = s[0];
    d[1] = s[1];
    d[2] = s[2];
    d[3] = s[3];
    switch (size / 8) {
    case 8: d[7] = s[7]; /* fall through */
    case 7: d[6] = s[6]; /* fall through */
    case 6: d[5] = s[5]; /* fall through */
    case 5: d[4] = s[4]; /* fall through */
    default: break;
    }
}

/* Whether block b can be copied into a slab. */
static inline bool rl_bslot_fits(const rl_block_layout *b, int flags) {
    size_t size = b->descriptor->size;
    return b->isa == (void *)_NSConcreteStackBlock &&
           !(flags & (RL_BLOCK_NEEDS_FREE | RL_BLOCK_HAS_CTOR | RL_BLOCK_IS_GC)) && size <= RL_BCOPY_MAX &&
           size >= 32 && size % 8 == 0;
}
#endif /* RL_TRICK_BLOCK_COPY */
#endif /* __BLOCKS__ */

#if __BLOCKS__
/* A block copied by Block_copy: released after it ran. */
static void rl_call_block(void *b) { ((void (^)(void))b)(); }
/* A waiting caller's block, not copied: nothing to release. */
static void rl_call_borrowed(void *b) { ((void (^)(void))b)(); }

#if RL_TRICK_BLOCK_COPY
/* Runs a global block: nothing to release. */
static void rl_call_global(void *b) { ((void (^)(void))b)(); }

/* Runs a block from its copy; the batch disposes of it and gives the space
 * back (with the others of the batch). */
static void rl_call_bslot(void *s) { ((void (^)(void))s)(); }

static void rl_bslot_dispose_captures(void *s) {
    rl_block_layout *b = s;
    if (b->flags & RL_BLOCK_HAS_COPY_DISPOSE)
        b->descriptor->dispose_helper(b);
}

/* Empties slab sl, whose count reached zero, and keeps it in its queue's
 * cache or frees it. Queue lock not held. */
static void rl_bslab_recycle(rl_bslab *sl) {
    rl__perform_queue *q = sl->q;
    atomic_store_explicit(&sl->remaining, RL_BSLAB_BIAS, memory_order_relaxed);
    rl__pq_lock(&q->pq);
    bool keep = q->bcache.n < RL_BSLAB_CACHE;
    if (keep)
        rl_flist_push(&q->bcache, sl);
    rl_pq_unlock(&q->pq);
    if (!keep)
        free(sl);
}

/* Gives back n copies (their captures disposed of already). Runs of copies
 * from one slab (the usual case: they were handed out in order) cost one
 * atomic operation. */
static void rl_bslots_put(void *const *copies, size_t n) {
    for (size_t i = 0; i < n;) {
        rl_bslab *sl = rl_bslab_of(copies[i]);
        unsigned bytes = 0;
        for (; i < n && rl_bslab_of(copies[i]) == sl; i++)
            bytes += rl_bcopy_size(((rl_block_layout *)copies[i])->descriptor->size);
        if (rl_bslab_sub(sl, bytes))
            rl_bslab_recycle(sl);
    }
}

/* Gives a new slab to the queue (to its cache); false if memory is short. */
static bool rl_bslab_add(rl__perform_queue *q) {
    rl_bslab *sl = aligned_alloc(RL_BSLAB_SIZE, sizeof *sl);
    if (!sl)
        return false;
    /* Fault its pages in now, not under the queue's lock with a copy. */
    for (size_t off = 0; off < sizeof *sl; off += 4096)
        ((volatile unsigned char *)sl)[off] = 0;
    sl->q = q;
    atomic_init(&sl->remaining, RL_BSLAB_BIAS);
    rl__pq_lock(&q->pq);
    rl_flist_push(&q->bcache, sl);
    rl_pq_unlock(&q->pq);
    return true;
}

/* A copy that will not run (or ran, alone): disposes of the captures,
 * gives the space back. */
static void rl_bslot_dispose(void *s) {
    rl_bslot_dispose_captures(s);
    rl_bslots_put(&s, 1);
}

#endif /* RL_TRICK_BLOCK_COPY */

/* Lets go of the block of request slot s (it ran or is dropped). */
static void rl_block_dispose(rl_pslot s) {
    if (s.fn == rl_call_block)
        Block_release((void (^)(void))s.arg);
#if RL_TRICK_BLOCK_COPY
    else if (s.fn == rl_call_bslot)
        rl_bslot_dispose(s.arg);
#endif
}
#endif /* __BLOCKS__ */

/* ------------------------------------------------------------------ */
/* pushing                                                             */

/* Appends a request and its head; false if that needs a new chunk. Queue
 * lock held. */
static inline bool rl_push_locked(rl__perform_queue *q, rl_pext *e, void (*fn)(void *), void *arg) {
    rl_pslot s[2] = {{NULL, e}, {fn, arg}};
    return e ? rl_pq_push_locked(&q->pq, s, 2) : rl_pq_push_locked(&q->pq, s + 1, 1);
}

static bool rl_closed_fail(const char *fname) {
    return rl__fail(kRLErrorInvalidState, fname, "the run loop's thread has exited");
}

/* Queues a request; false (error set, nothing queued, nothing released) if
 * memory is short or the queue is closed. */
static bool rl_push(rl__perform_queue *q, rl_pext *e, void (*fn)(void *), void *arg, const char *fname) {
    for (;;) {
        rl__pq_lock(&q->pq);
        bool closed = atomic_load_explicit(&q->closed, memory_order_relaxed);
        bool ok = !closed && rl_push_locked(q, e, fn, arg);
        rl_pq_unlock(&q->pq);
        if (ok)
            return true;
        if (closed)
            return rl_closed_fail(fname);
        if (!rl_pq_grow(&q->pq))
            return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    }
}

#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
/* Queues a copy of the stack block b, in a slab; false (error set, nothing
 * queued) if memory is short or the queue is closed. Without helpers the
 * copy is a few stores, made under the queue's lock with the push; with
 * them, the slot is taken, filled (the copy helper is runtime code that may
 * allocate) and then pushed. */
static bool rl_push_bslot(rl__perform_queue *q, rl_pext *e, const rl_block_layout *b, const char *fname) {
    size_t size = b->descriptor->size;
    bool helpers = (b->flags & RL_BLOCK_HAS_COPY_DISPOSE) != 0;
    void *s;
    for (;;) {
        rl__pq_lock(&q->pq);
        if (atomic_load_explicit(&q->closed, memory_order_relaxed)) {
            rl_pq_unlock(&q->pq);
            return rl_closed_fail(fname);
        }
        if (!rl_pq_has_room_locked(&q->pq, e ? 2 : 1)) {
            rl_pq_unlock(&q->pq);
            if (!rl_pq_grow(&q->pq))
                return rl__fail(kRLErrorNoMemory, fname, "out of memory");
            continue;
        }
        s = rl_bslot_take_locked(q, size);
        if (s)
            break;
        rl_pq_unlock(&q->pq);
        if (!rl_bslab_add(q))
            return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    }
    if (!helpers) {
        rl_bcopy_bytes(s, b, size);
        rl_push_locked(q, e, rl_call_bslot, s); /* room checked above */
        rl_pq_unlock(&q->pq);
        return true;
    }
    rl_pq_unlock(&q->pq);
    rl_bcopy_bytes(s, b, size);
    b->descriptor->copy_helper(s, (void *)b);
    if (rl_push(q, e, rl_call_bslot, s, fname))
        return true;
    rl_bslot_dispose(s);
    return false;
}
#endif

#if __BLOCKS__
/* Queues block `block` with record e; false (error set, nothing queued)
 * if refused. */
static bool rl_push_block(rl__perform_queue *q, rl_pext *e, bool borrowed, void *block, const char *fname) {
    if (borrowed)
        return rl_push(q, e, rl_call_borrowed, block, fname);
#if RL_TRICK_BLOCK_COPY
    const rl_block_layout *b = block;
    /* Atomic: a heap block's reference count lives in its flags. */
    int flags = __atomic_load_n(&b->flags, __ATOMIC_RELAXED);
    if (flags & RL_BLOCK_IS_GLOBAL)
        return rl_push(q, e, rl_call_global, block, fname);
    if (rl_bslot_fits(b, flags))
        return rl_push_bslot(q, e, b, fname);
#endif
    void *copy = _Block_copy(block);
    if (rl_push(q, e, rl_call_block, copy, fname))
        return true;
    Block_release((void (^)(void))copy);
    return false;
}
#endif

bool rl__perform_push(rl__perform_queue *q, void (*fn)(void *), void *info, const char *fname) {
    return rl_push(q, NULL, fn, info, fname);
}

#if __BLOCKS__
bool rl__perform_push_block(rl__perform_queue *q, void *block, const char *fname) {
    return rl_push_block(q, NULL, false, block, fname);
}
#endif

bool rl__perform_enqueue(rl__perform_queue *q, const rl__preq *r, rl__perform_ticket *t, const char *fname) {
    /* A waiting caller's record and its names are on its stack (the
     * ticket); more names than fit there, in malloc'ed memory. */
    if (r->wait) {
        t->waiter = (rl_waiter){RL_WAIT_PENDING};
        t->names = t->small;
        if (r->nmodes > sizeof t->small / sizeof t->small[0]) {
            t->names = malloc(r->nmodes * sizeof *t->names);
            if (!t->names)
                return rl__fail(kRLErrorNoMemory, fname, "out of memory");
        }
    }
    bool failed;
    rl_pext *e = rl_pext_make(r, &t->ext, t->names, &failed, fname);
    bool ok = !failed;
    if (ok && r->wait)
        e->waiter = &t->waiter;
    if (ok) {
#if __BLOCKS__
        if (r->block)
            ok = rl_push_block(q, e, r->wait, r->block, fname);
        else
#endif
            ok = rl_push(q, e, r->fn, r->info, fname);
    }
    if (!ok) {
        if (e && e->where == RL_PEXT_HEAP)
            free(e);
        if (r->wait && t->names != t->small)
            free(t->names);
    }
    return ok;
}

bool rl__perform_wait(rl__perform_ticket *t, rl__spin *spin, const char *fname) {
    /* Without `spin` the loop is not known to run elsewhere: it records its
     * CPU only when it is about to sleep, and a loop kept busy by this very
     * exchange may not have. */
    uint32_t status = rl_waiter_wait(&t->waiter, spin, spin == NULL);
    if (t->names != t->small)
        free(t->names);
    if (status == RL_WAIT_FAILED)
        return rl__fail(kRLErrorInvalidState, fname, "the thread finished before it ran the request");
    return true;
}

/* ------------------------------------------------------------------ */
/* disposing of requests                                               */

/* A request is done with: it ran (RL_WAIT_DONE) or will not
 * (RL_WAIT_FAILED). Its block and its info go first, then its waiter is
 * told: what the request captured may live on the waiter's stack. */
static void rl_preq_finish(rl_pslot s, rl_pext *e, uint32_t status) {
#if __BLOCKS__
    rl_block_dispose(s);
#endif
    if (!e)
        return;
    if (e->release)
        e->release(s.arg);
    rl_waiter *w = e->waiter;
    if (e->where == RL_PEXT_HEAP)
        free(e);
    if (w)
        rl_waiter_complete(w, status);
}

/* Drops every request of chain c and gives its chunks back. */
static void rl_pchain_drop(rl__perform_queue *q, rl_pchain c) {
    rl_pcur r = {c.head, 0};
    rl_pslot s;
    while (rl_pcur_read(&r, &s)) {
        rl_pext *e = NULL;
        if (!s.fn) {
            e = s.arg;
            rl_pcur_read(&r, &s); /* a head is always followed by its request */
        }
        rl_preq_finish(s, e, RL_WAIT_FAILED);
    }
    rl_pq_recycle(&q->pq, c.head);
}

/* ------------------------------------------------------------------ */
/* running requests                                                    */

/* A batch of requests being run (rl__perform_run), where a thread
 * unwinding from one of them finds it. The batch's chain is compacted as
 * it is read: requests for other modes are written back at w, in order,
 * with their heads, and stay queued (q->held) for the modes they are for. */
typedef struct rl_batch {
    rl__perform_queue *q;
    uint32_t nrun; /* requests run */
    rl_pchain chain;
    rl_pcur r, w;
    rl_pslot cur;  /* the request running */
    rl_pext *cur_ext; /* and its record */
    bool running;  /* cur's function is running */
    rl_waiter *finishing; /* the waiter of a request being disposed of */
    const rl__perform_timing *timing; /* NULL: requests are not timed */
#if __BLOCKS__
    /* Blocks that ran (without a record) are released in batches, after
     * running: the frees (of memory the producer's thread allocated) come
     * together instead of interleaving with the calls. */
    void *ran[64]; /* block copies; slots (rl_call_bslot) tagged with bit 0 */
    size_t nran;
#endif
} rl_batch;

#if __BLOCKS__
/* Releases the blocks that ran: a copy by Block_release; a slot by its
 * dispose helper, the slots then going back to the pool in one step. */
static void rl_ran_flush(rl_batch *b) {
    size_t n = b->nran, nslots = 0;
    b->nran = 0; /* before any release: one could end the thread */
    void *slots[sizeof b->ran / sizeof b->ran[0]];
    for (size_t k = 0; k < n; k++) {
        uintptr_t p = (uintptr_t)b->ran[k];
        if (p & 1) {
#if RL_TRICK_BLOCK_COPY
            slots[nslots] = (void *)(p - 1);
            rl_bslot_dispose_captures(slots[nslots++]);
#endif
        } else {
            Block_release((void (^)(void))(void *)p);
        }
    }
#if RL_TRICK_BLOCK_COPY
    if (nslots) {
        rl_bslots_put(slots, nslots);
        b->q->trim_due = true; /* a slab may have gone back to the cache */
    }
#else
    (void)slots;
    (void)nslots;
#endif
}

/* Notes that request s (without a record) ran: its block is released in a
 * batch. */
static void rl_ran_add(rl_batch *b, rl_pslot s) {
    if (s.fn == rl_call_block)
        b->ran[b->nran++] = s.arg;
#if RL_TRICK_BLOCK_COPY
    else if (s.fn == rl_call_bslot)
        b->ran[b->nran++] = (void *)((uintptr_t)s.arg | 1);
#endif
    else
        return;
    if (b->nran == sizeof b->ran / sizeof b->ran[0])
        rl_ran_flush(b);
}
#endif

/* A request ran: disposes of it. */
static void rl_batch_done(rl_batch *b, rl_pslot s, rl_pext *e) {
    if (!e) {
#if __BLOCKS__
        rl_ran_add(b, s);
#endif
        return;
    }
    /* A release callback that ends the thread: the request ran, the
     * unwinding tells its waiter (rl_batch_unwind). */
    b->finishing = e->waiter;
    rl_preq_finish(s, e, RL_WAIT_DONE);
    b->finishing = NULL;
}

/* Reads the next request: *s and its record *e; false at the end. */
static bool rl_batch_next(rl_batch *b, rl_pslot *s, rl_pext **e) {
    if (!rl_pcur_read(&b->r, s))
        return false;
    *e = NULL;
    if (!s->fn) {
        *e = s->arg;
        rl_pcur_read(&b->r, s); /* a head is always followed by its request */
    }
    return true;
}

static void rl_batch_keep(rl_batch *b, rl_pslot s, rl_pext *e) {
    if (e)
        rl_pcur_write(&b->w, (rl_pslot){NULL, e});
    rl_pcur_write(&b->w, s);
}

/* The kept requests go in front of any that a nested run kept meanwhile
 * (those came later); the chunks no longer needed go back to the queue
 * with the next take (one lock round a pass, not two). */
static void rl_batch_finish(rl_batch *b) {
    rl_pchunk *rest;
    rl_pchain kept = rl_pcur_finish(b->chain, b->w, &rest);
    rl__perform_queue *q = b->q;
    q->held = rl_pchain_cat(kept, q->held);
    if (rest) {
        rl_pchunk *last = rest;
        while (last->next)
            last = last->next;
        last->next = q->spent;
        q->spent = rest;
        q->trim_due = true;
    }
}

/* The program's function of a request: a block's invoke function for
 * the block trampolines. */
static const void *rl_user_fn(rl_pslot s) {
#if __BLOCKS__
    bool block = s.fn == rl_call_block || s.fn == rl_call_borrowed;
#if RL_TRICK_BLOCK_COPY
    block = block || s.fn == rl_call_global || s.fn == rl_call_bslot;
#endif
    if (block) {
        /* Every block begins so (the blocks ABI). */
        const struct {
            void *isa;
            int flags, reserved;
            void (*invoke)(void *);
        } *layout = s.arg;
        return (const void *)layout->invoke;
    }
#endif
    return (const void *)s.fn;
}

static void rl_run_batch(rl_batch *b, rl_mode *m) {
    rl_pslot s;
    rl_pext *e;
    while (rl_batch_next(b, &s, &e)) {
        if (RL__UNLIKELY(rl__fork_inherited(b->q->fork_gen)))
            break; /* a request forked: the rest of the batch is the parent's */
        /* The requests were written on other threads: fetch a few ahead
         * (a block is read to run it, and written to release it). */
        if (b->r.c && b->r.i + 4 < b->r.c->n)
            __builtin_prefetch(b->r.c->s[b->r.i + 4].arg, 1);
        if (!rl_slot_matches(e, m)) {
            rl_batch_keep(b, s, e);
            continue;
        }
        b->cur = s;
        b->cur_ext = e;
        b->running = true;
        if (RL__LIKELY(!b->timing)) {
            s.fn(s.arg);
        } else {
            double t0 = RLMonotonicTimeGetCurrent();
            s.fn(s.arg);
            b->timing->after(b->timing->ctx, rl_user_fn(s), s.arg, RLMonotonicTimeGetCurrent() - t0);
        }
        b->running = false;
        b->nrun++;
        rl_batch_done(b, s, e);
    }
#if __BLOCKS__
    rl_ran_flush(b);
#endif
}

/* RLThreadExit (pthread_exit) from a request unwinds through here: the
 * running request counts as run (disposed of, its waiter told so), and the
 * requests not yet looked at stay queued with the kept ones, where the
 * thread's teardown drops them. */
static void rl_batch_unwind(void *p) {
    rl_batch *b = p;
    if (b->finishing) { /* a release callback ended the thread: the request ran */
        rl_waiter_complete(b->finishing, RL_WAIT_DONE);
        b->finishing = NULL;
    }
    if (b->running) {
        b->running = false;
        rl_batch_done(b, b->cur, b->cur_ext);
    }
#if __BLOCKS__
    rl_ran_flush(b);
#endif
    rl_pslot s;
    rl_pext *e;
    while (rl_batch_next(b, &s, &e))
        rl_batch_keep(b, s, e);
    rl_batch_finish(b);
}

/* Runs the queued requests for mode m: those kept from earlier passes
 * first (they are older), then all that came since, each once; requests
 * queued while these run wait for the next pass, as in CF. */
uint32_t rl__perform_run_timed(rl__perform_queue *q, rl_mode *m, const rl__perform_timing *timing) {
    if (!rl__perform_maybe_pending(q))
        return 0;
    rl__pq_lock(&q->pq);
    rl_pchain in = rl_pq_take_locked(&q->pq);
    rl_pchunk *spent = q->spent ? rl_pq_recycle_locked(&q->pq, q->spent) : NULL;
    rl_pq_unlock(&q->pq);
    q->spent = NULL;
    rl_flist_free(spent);
    if (!in.head && !q->held.head)
        return 0;
    rl_batch b;
    b.q = q;
    b.chain = rl_pchain_cat(q->held, in);
    q->held = (rl_pchain){NULL, NULL};
    b.r = b.w = (rl_pcur){b.chain.head, 0};
    b.running = false;
    b.finishing = NULL;
    b.timing = timing;
    b.nrun = 0;
#if __BLOCKS__
    b.nran = 0;
#endif
    pthread_cleanup_push(rl_batch_unwind, &b);
    rl__cleanup_arg_escapes(&b);
    rl_run_batch(&b, m);
    pthread_cleanup_pop(0);
    rl_batch_finish(&b);
    return b.nrun;
}

static bool rl_pchain_has_for(rl_pchain c, const rl_mode *m) {
    rl_pcur r = {c.head, 0};
    rl_pslot s;
    while (rl_pcur_read(&r, &s)) {
        if (s.fn) {
            if (m->is_default)
                return true;
        } else {
            if (rl_pext_matches(s.arg, m))
                return true;
            rl_pcur_read(&r, &s); /* its request */
        }
    }
    return false;
}

bool rl__perform_has_for(rl__perform_queue *q, const rl_mode *m) {
    if (rl_pchain_has_for(q->held, m))
        return true;
    if (!rl_pq_maybe_queued(&q->pq))
        return false;
    rl__pq_lock(&q->pq);
    bool has = rl_pchain_has_for(q->pq.q, m);
    rl_pq_unlock(&q->pq);
    return has;
}

/* ------------------------------------------------------------------ */
/* memory and teardown                                                 */

/* Only after passes that gave chunks or slabs back (the pools grow no
 * other way but for rare failure paths, which the next trim catches up
 * with), and not more often than every RL_TRIM_EVERY_NS while requests keep
 * coming: a loop that sleeps between the parts of a stream would otherwise
 * free chunks that the producer mallocs again at once, contending with it
 * for malloc's arena lock. A pass that ran no request trims at once. */
void rl__perform_trim(rl__perform_queue *q, bool busy) {
    enum { RL_PQ_POOL_IDLE = 16 };
    const int64_t RL_TRIM_EVERY_NS = 100 * 1000 * 1000;
    if (!q->trim_due)
        return;
    int64_t now = rl__spin_now();
    if (busy && now - q->trimmed_at < RL_TRIM_EVERY_NS)
        return;
    q->trimmed_at = now;
    q->trim_due = false;
    rl_pchunk *spent = q->spent;
    q->spent = NULL;
    rl__pq_lock(&q->pq); /* one lock round for both pools */
    spent = rl_pq_recycle_locked(&q->pq, spent);
    void *chunks = rl_flist_cut(&q->pq.pool, RL_PQ_POOL_IDLE);
#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
    void *slabs = rl_flist_cut(&q->bcache, RL_BSLAB_CACHE_IDLE);
#endif
    rl_pq_unlock(&q->pq);
    rl_flist_free(spent);
    rl_flist_free(chunks);
#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
    rl_flist_free(slabs);
#endif
}

/* Takes every queued request out (for dropping), closing the queue if
 * `close`. */
static rl_pchain rl_take_all(rl__perform_queue *q, bool close) {
    rl__pq_lock(&q->pq);
    if (close)
        atomic_store_explicit(&q->closed, true, memory_order_relaxed);
    rl_pchain c = rl_pq_take_locked(&q->pq);
    rl_pq_unlock(&q->pq);
    c = rl_pchain_cat(q->held, c);
    q->held = (rl_pchain){NULL, NULL};
    return c;
}

void rl__perform_close(rl__perform_queue *q) { rl_pchain_drop(q, rl_take_all(q, true)); }

void rl__perform_destroy(rl__perform_queue *q) {
    rl_pchain_drop(q, rl_take_all(q, true));
    rl_flist_free(q->spent);
    q->spent = NULL;
    rl_pq_destroy(&q->pq);
#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
    free(q->bcur);
    q->bcur = NULL;
    rl_flist_free(rl_flist_cut(&q->bcache, 0));
#endif
}
