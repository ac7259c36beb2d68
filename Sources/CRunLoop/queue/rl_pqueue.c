/*
 * rl_pqueue.c — perform requests: the one queue per run loop that every
 * perform call of the library goes through (RLRunLoopPerform*,
 * RLThreadPerform*, RLWorkerThreadPerform*, the Swift overlay): storage,
 * records, block copies, pushing, waiting, running, trimming and dropping
 * requests. The loop drives it (its iteration runs it, its teardown closes
 * it); it calls no run-loop file. The way in for the front ends is
 * rl__perform_submit (RLRunLoopPerform.c), which checks a request, brings
 * its modes into being and wakes the loop around the calls here. See
 * rl_pqueue.h.
 *
 * How a request is stored. The queue is a FIFO of 16-byte slots
 * {function, argument} (rl_pqueue.h). The usual request — a function or a
 * block for the default mode, nothing else — is one slot. Any other request
 * is two: a head slot {NULL, record} (no request has a NULL function) whose
 * record (rl__pext) holds the modes, the release callback and the waiter,
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
#include "rl_pqueue.h"
#include "RLLockInternal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* The queue's lock: a spin lock (RL_TRICK_PQ_SPIN), or in the plain build
 * a futex mutex on the same word (rl_pqueue.c). */
static void pq_lock(rl__pqueue *pq);
#if RL_TRICK_PQ_SPIN
static inline void pq_unlock(rl__pqueue *pq) { atomic_store_explicit(&pq->lock, 0, memory_order_release); }
#else
static void pq_wake_one(rl__pqueue *pq);
static inline void pq_unlock(rl__pqueue *pq) {
    if (atomic_exchange_explicit(&pq->lock, 0, memory_order_release) == 2)
        pq_wake_one(pq); /* someone may sleep on it */
}
#endif

/* ------------------------------------------------------------------ */
/* storage: chunks of slots (see rl_pqueue.h)           */

static inline void flist_push(rl__flist *l, void *block) {
    *(void **)block = l->head;
    l->head = block;
    l->n++;
}

static inline void *flist_pop(rl__flist *l) {
    void *block = l->head;
    if (block) {
        l->head = *(void **)block;
        l->n--;
    }
    return block;
}

/* Appends k (1 or 2) slots, kept in one chunk; false when that needs a
 * chunk and the pool is empty (call pq_grow without the lock, retry).
 * Lock held. */
static inline bool pq_push_locked(rl__pqueue *pq, const rl__pslot *s, uint32_t k) {
    rl__pchunk *c = pq->q.tail;
    if (__builtin_expect(c == NULL || c->n + k > c->cap, 0)) {
        c = flist_pop(&pq->pool);
        if (!c)
            return false;
        c->next = NULL;
        c->n = 0;
        if (pq->q.tail) {
            pq->q.tail->next = c;
        } else {
            pq->q.head = c;
            atomic_store(&pq->queued, 1); /* sequentially consistent: see rl__pq_maybe_queued */
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
static inline bool pq_has_room_locked(const rl__pqueue *pq, uint32_t k) {
    const rl__pchunk *c = pq->q.tail;
    return (c && c->n + k <= c->cap) || pq->pool.head != NULL;
}
#endif

/* The queued slots, handed over whole; the queue is left empty. Lock held. */
static inline rl__pchain pq_take_locked(rl__pqueue *pq) {
    rl__pchain c = pq->q;
    pq->q.head = pq->q.tail = NULL;
    atomic_store_explicit(&pq->queued, 0, memory_order_relaxed);
    return c;
}

/* a ++ b, O(1). */
static inline rl__pchain pchain_cat(rl__pchain a, rl__pchain b) {
    if (!a.head)
        return b;
    if (b.head) {
        a.tail->next = b.head;
        a.tail = b.tail;
    }
    return a;
}

/* A position in a chain: slot i of chunk c. */
typedef struct pcur {
    rl__pchunk *c;
    uint32_t i;
} pcur;

/* Reads the slot at r and moves past it; false at the end of the chain. */
static inline bool pcur_read(pcur *r, rl__pslot *out) {
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
 * already read (it fills each chunk to its capacity, the reader read at
 * most that much of it: in one chunk the writer's index is never past the
 * reader's). A chunk left behind is full. */
static inline void pcur_write(pcur *w, rl__pslot s) {
    if (w->i == w->c->cap) {
        w->c->n = w->c->cap;
        w->c = w->c->next;
        w->i = 0;
    }
    w->c->s[w->i++] = s;
}

/* Ends a compaction of `chain` whose writes stopped at w: returns the
 * chain of what was written (possibly empty) and sets *rest to the chunks
 * no longer needed (for pq_recycle; NULL if none). */
static inline rl__pchain pcur_finish(rl__pchain chain, pcur w, rl__pchunk **rest) {
    if (!w.c || (w.c == chain.head && w.i == 0)) {
        *rest = chain.head;
        return (rl__pchain){NULL, NULL};
    }
    w.c->n = w.i;
    *rest = w.c->next;
    w.c->next = NULL;
    return (rl__pchain){chain.head, w.c};
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
static void pq_lock(rl__pqueue *pq) {
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
static void pq_lock(rl__pqueue *pq) {
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

static void pq_wake_one(rl__pqueue *pq) { rl__futex_wake((_Atomic uint32_t *)&pq->lock, 1); }
#endif

/* Puts a new empty chunk in the pool: the size q->next_bytes says (read
 * without the lock: producers racing here may make two of one size). The
 * next one is twice as big only if this one was needed for a backlog (the
 * queue's last chunk is full): a queue that is empty whenever a request
 * comes (its chunks on their way back from the loop) stays at small ones. */
static bool pq_grow(rl__perform_queue *q) {
    rl__pqueue *pq = &q->pq;
    uint32_t bytes = __atomic_load_n(&q->next_bytes, __ATOMIC_RELAXED);
    if (bytes < RL_PCHUNK_FIRST_BYTES)
        bytes = RL_PCHUNK_FIRST_BYTES;
    rl__pchunk *c = malloc(bytes);
    if (!c)
        return false;
    c->cap = RL_PCHUNK_SLOTS_IN(bytes);
    /* Fault its pages in now, not under the lock with a push. */
    volatile unsigned char *p = (volatile unsigned char *)c;
    p[bytes - 1] = 0;
    pq_lock(pq);
    flist_push(&pq->pool, c);
    if (bytes < RL_PCHUNK_BYTES && pq->q.tail)
        __atomic_store_n(&q->next_bytes, bytes * 2, __ATOMIC_RELAXED);
    pq_unlock(pq);
    return true;
}

/* Pushes blocks from the list `first` while l is shorter than max; returns
 * the rest. */
static void *flist_fill(rl__flist *l, void *first, uint32_t max) {
    while (first && l->n < max) {
        void *next = *(void **)first;
        flist_push(l, first);
        first = next;
    }
    return first;
}

/* Takes blocks off l until it is `keep` long; returns them as a list. */
static void *flist_cut(rl__flist *l, uint32_t keep) {
    void *cut = NULL;
    while (l->n > keep) {
        void *block = flist_pop(l);
        *(void **)block = cut;
        cut = block;
    }
    return cut;
}

/* free()s every block of a list. */
static void flist_free(void *first) {
    while (first) {
        void *next = *(void **)first;
        free(first);
        first = next;
    }
}

/* Gives the chunks from `first` to the end of its list back: some to the
 * pool; returns the rest, for flist_free without the lock. Lock
 * held. */
static rl__pchunk *pq_recycle_locked(rl__pqueue *pq, rl__pchunk *first) {
    return flist_fill(&pq->pool, first, RL_PQ_POOL_MAX);
}

/* pq_recycle_locked and flist_free; takes the lock itself. */
static void pq_recycle(rl__pqueue *pq, rl__pchunk *first) {
    if (!first)
        return;
    pq_lock(pq);
    first = pq_recycle_locked(pq, first);
    pq_unlock(pq);
    flist_free(first);
}

/* Frees the pool and the queued chunks (their slots are the caller's to
 * dispose of first). No other thread may use the queue. */
static void pq_destroy(rl__pqueue *pq) {
    flist_free(pq->q.head);
    flist_free(flist_cut(&pq->pool, 0));
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
static void waiter_complete(rl__waiter *w, uint32_t status) {
    if (atomic_exchange_explicit(&w->state, status, memory_order_acq_rel) == RL_WAIT_SLEEPING)
        rl__futex_wake(&w->state, 1);
}

/* Spins while the request is pending, until `until` (rl__spin_now
 * nanoseconds); true if it completed meanwhile. */
static bool waiter_spin(rl__waiter *w, int64_t until) {
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
static uint32_t waiter_wait(rl__waiter *w, rl__spin *spin, bool same_cpu) {
    int64_t t0 = spin ? rl__spin_now() : 0;
    uint32_t budget = spin ? rl__spin_budget(spin) : 0; /* 0 without RL_TRICK_SPIN */
    if (budget > 0) {
        waiter_spin(w, t0 + budget);
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

static const rl__pext pext_common = {.where = RL_PEXT_SHARED, .common = true};

static bool pext_matches(const rl__pext *e, const rl__perform_mode *m) {
    if (e->common && m->common)
        return true;
    if (e->dflt && m->is_default)
        return true;
    for (uint32_t i = 0; i < e->nnames; i++)
        if (strcmp(m->name, e->names[i]) == 0)
            return true;
    return false;
}

static bool slot_matches(void *ext, const rl__perform_mode *m) { return ext ? pext_matches(ext, m) : m->is_default; }

/* The linker merges equal string literals of one library, so a mode given
 * as kRLRunLoopDefaultMode (whose value is this literal) is usually found
 * by its address; strcmp for any other pointer. */
static const char *const default_name = RL__DEFAULT_MODE_NAME;
static const char *const common_name = RL__COMMON_MODES_NAME;

static bool is_default_name(const char *mode) {
    return mode == default_name || strcmp(mode, RL__DEFAULT_MODE_NAME) == 0;
}

static bool is_common_name(const char *mode) {
    return mode == common_name || strcmp(mode, RL__COMMON_MODES_NAME) == 0;
}

/* Whether names[0, i) holds `name` already. */
static bool names_have(const char *const *names, size_t i, const char *name) {
    for (size_t j = 0; j < i; j++)
        if (strcmp(names[j], name) == 0)
            return true;
    return false;
}

/* Fills the mode part of e from r; with `copy`, the names are copied into
 * `store` (room counted by pext_size), else e points at r's. Returns
 * how many named modes there are. */
static uint32_t pext_set_modes(rl__pext *e, const rl__preq *r, const char **names, char *store) {
    uint32_t n = 0;
    for (size_t i = 0; i < r->nmodes; i++) {
        const char *mode = r->modes[i];
        if (is_common_name(mode)) {
            e->common = true;
        } else if (is_default_name(mode)) {
            e->dflt = true;
        } else if (!names_have(r->modes, i, mode)) {
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
static size_t pext_size(const rl__preq *r) {
    size_t bytes = sizeof(rl__pext);
    for (size_t i = 0; i < r->nmodes; i++)
        bytes += sizeof(char *) + strlen(r->modes[i]) + 1;
    return bytes;
}

/* The record r needs, or NULL for none (the default mode only, nothing
 * else); *failed if memory is short (error set). A waiting caller's record
 * is `on_stack`, with room for its names in `names`. */
static rl__pext *pext_make(const rl__preq *r, rl__pext *on_stack, const char **names, bool *failed,
                             const char *fname) {
    *failed = false;
    if (!r->release && !r->wait && r->nmodes == 1) {
        if (is_default_name(r->modes[0]))
            return NULL;
        if (is_common_name(r->modes[0]))
            return (rl__pext *)&pext_common;
    }
    rl__pext *e = on_stack;
    if (r->wait) {
        *e = (rl__pext){.where = RL_PEXT_CALLER};
        pext_set_modes(e, r, names, NULL);
    } else {
        e = malloc(pext_size(r));
        if (!e) {
            *failed = true;
            rl__fail(kRLErrorNoMemory, fname, "out of memory");
            return NULL;
        }
        *e = (rl__pext){.where = RL_PEXT_HEAP};
        const char **heap_names = (const char **)(e + 1);
        pext_set_modes(e, r, heap_names, (char *)(heap_names + r->nmodes));
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

typedef struct block_descriptor {
    unsigned long reserved;
    unsigned long size; /* of the whole block, captures included */
    /* Only with RL_BLOCK_HAS_COPY_DISPOSE: */
    void (*copy_helper)(void *dst, void *src);
    void (*dispose_helper)(void *block);
} block_descriptor;

typedef struct block_layout {
    void *isa;
    int flags;
    int reserved;
    void (*invoke)(void *block);
    block_descriptor *descriptor;
} block_layout;

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
    RL_BSLAB_WARMUP = 64,    /* copies made by Block_copy before the first slab */
    RL_BSLAB_BIAS = 1 << 30,
};
typedef struct rl__bslab {
    struct rl__bslab *next;  /* in the cache (an rl__flist: must come first) */
    rl__perform_queue *q;   /* the owner (slabs go with it) */
    _Atomic unsigned remaining; /* see above */
    _Alignas(64) unsigned char data[RL_BSLAB_SIZE - 64];
} rl__bslab;
_Static_assert(sizeof(rl__bslab) == RL_BSLAB_SIZE, "a slab is RL_BSLAB_SIZE bytes");

static inline rl__bslab *bslab_of(void *copy) { return (rl__bslab *)((uintptr_t)copy & ~(uintptr_t)(RL_BSLAB_SIZE - 1)); }
static inline unsigned bcopy_size(size_t size) { return (unsigned)((size + RL_BGRAIN - 1) & ~(size_t)(RL_BGRAIN - 1)); }

/* Takes `bytes` off a slab's count; true if that made it zero: the caller
 * recycles it. */
static inline bool bslab_sub(rl__bslab *sl, unsigned bytes) {
    return atomic_fetch_sub_explicit(&sl->remaining, bytes, memory_order_acq_rel) == bytes;
}

/* Space for a copy of `size` bytes, queue lock held; NULL if a slab is
 * needed. */
static inline void *bslot_take_locked(rl__perform_queue *q, size_t size) {
    unsigned need = bcopy_size(size);
    rl__bslab *sl = q->bcur;
    if (sl && q->bcur_used + need > sizeof sl->data) {
        /* Full. If all its copies are back already, start over in it. */
        q->bcur = NULL;
        if (bslab_sub(sl, RL_BSLAB_BIAS - q->bcur_used)) {
            atomic_store_explicit(&sl->remaining, RL_BSLAB_BIAS, memory_order_relaxed);
            q->bcur = sl;
            q->bcur_used = 0;
        } else {
            sl = NULL;
        }
    }
    if (!sl) {
        sl = flist_pop(&q->bcache);
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
static inline void bcopy_bytes(void *dst, const void *src, size_t size) {
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
static inline bool bslot_fits(const block_layout *b, int flags) {
    size_t size = b->descriptor->size;
    return b->isa == (void *)_NSConcreteStackBlock &&
           !(flags & (RL_BLOCK_NEEDS_FREE | RL_BLOCK_HAS_CTOR | RL_BLOCK_IS_GC)) && size <= RL_BCOPY_MAX &&
           size >= 32 && size % 8 == 0;
}
#endif /* RL_TRICK_BLOCK_COPY */
#endif /* __BLOCKS__ */

#if __BLOCKS__
/* A block copied by Block_copy: released after it ran. */
static void call_block(void *b) { ((void (^)(void))b)(); }
/* A waiting caller's block, not copied: nothing to release. */
static void call_borrowed(void *b) { ((void (^)(void))b)(); }

#if RL_TRICK_BLOCK_COPY
/* Runs a global block: nothing to release. */
static void call_global(void *b) { ((void (^)(void))b)(); }

/* Runs a block from its copy; the batch disposes of it and gives the space
 * back (with the others of the batch). */
static void call_bslot(void *s) { ((void (^)(void))s)(); }

static void bslot_dispose_captures(void *s) {
    block_layout *b = s;
    if (b->flags & RL_BLOCK_HAS_COPY_DISPOSE)
        b->descriptor->dispose_helper(b);
}

/* Empties slab sl, whose count reached zero, and keeps it in its queue's
 * cache or frees it. Queue lock not held. */
static void bslab_recycle(rl__bslab *sl) {
    rl__perform_queue *q = sl->q;
    atomic_store_explicit(&sl->remaining, RL_BSLAB_BIAS, memory_order_relaxed);
    pq_lock(&q->pq);
    bool keep = q->bcache.n < RL_BSLAB_CACHE;
    if (keep)
        flist_push(&q->bcache, sl);
    pq_unlock(&q->pq);
    if (!keep)
        free(sl);
}

/* Gives back n copies (their captures disposed of already). Runs of copies
 * from one slab (the usual case: they were handed out in order) cost one
 * atomic operation. */
static void bslots_put(void *const *copies, size_t n) {
    for (size_t i = 0; i < n;) {
        rl__bslab *sl = bslab_of(copies[i]);
        unsigned bytes = 0;
        for (; i < n && bslab_of(copies[i]) == sl; i++)
            bytes += bcopy_size(((block_layout *)copies[i])->descriptor->size);
        if (bslab_sub(sl, bytes))
            bslab_recycle(sl);
    }
}

/* Gives a new slab to the queue (to its cache); false if memory is short. */
static bool bslab_add(rl__perform_queue *q) {
    rl__bslab *sl = aligned_alloc(RL_BSLAB_SIZE, sizeof *sl);
    if (!sl)
        return false;
    /* Fault its pages in now, not under the queue's lock with a copy. */
    for (size_t off = 0; off < sizeof *sl; off += 4096)
        ((volatile unsigned char *)sl)[off] = 0;
    sl->q = q;
    atomic_init(&sl->remaining, RL_BSLAB_BIAS);
    pq_lock(&q->pq);
    flist_push(&q->bcache, sl);
    pq_unlock(&q->pq);
    return true;
}

/* A copy that will not run (or ran, alone): disposes of the captures,
 * gives the space back. */
static void bslot_dispose(void *s) {
    bslot_dispose_captures(s);
    bslots_put(&s, 1);
}

#endif /* RL_TRICK_BLOCK_COPY */

/* Lets go of the block of request slot s (it ran or is dropped). */
static void block_dispose(rl__pslot s) {
    if (s.fn == call_block)
        Block_release((void (^)(void))s.arg);
#if RL_TRICK_BLOCK_COPY
    else if (s.fn == call_bslot)
        bslot_dispose(s.arg);
#endif
}
#endif /* __BLOCKS__ */

/* ------------------------------------------------------------------ */
/* pushing                                                             */

/* Appends a request and its head; false if that needs a new chunk. Queue
 * lock held. */
static inline bool push_locked(rl__perform_queue *q, rl__pext *e, void (*fn)(void *), void *arg) {
    rl__pslot s[2] = {{NULL, e}, {fn, arg}};
    return e ? pq_push_locked(&q->pq, s, 2) : pq_push_locked(&q->pq, s + 1, 1);
}

static bool closed_fail(const char *fname) {
    return rl__fail(kRLErrorInvalidState, fname, "the run loop's thread has exited");
}

/* Queues a request; false (error set, nothing queued, nothing released) if
 * memory is short or the queue is closed. */
static bool push_request(rl__perform_queue *q, rl__pext *e, void (*fn)(void *), void *arg, const char *fname) {
    for (;;) {
        pq_lock(&q->pq);
        bool closed = atomic_load_explicit(&q->closed, memory_order_relaxed);
        bool ok = !closed && push_locked(q, e, fn, arg);
        pq_unlock(&q->pq);
        if (ok)
            return true;
        if (closed)
            return closed_fail(fname);
        if (!pq_grow(q))
            return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    }
}

#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
/* Queues a copy of the stack block b, in a slab; false (error set, nothing
 * queued) if memory is short or the queue is closed. Without helpers the
 * copy is a few stores, made under the queue's lock with the push; with
 * them, the slot is taken, filled (the copy helper is runtime code that may
 * allocate) and then pushed. */
static bool push_bslot(rl__perform_queue *q, rl__pext *e, const block_layout *b, const char *fname) {
    size_t size = b->descriptor->size;
    bool helpers = (b->flags & RL_BLOCK_HAS_COPY_DISPOSE) != 0;
    void *s;
    for (;;) {
        pq_lock(&q->pq);
        if (atomic_load_explicit(&q->closed, memory_order_relaxed)) {
            pq_unlock(&q->pq);
            return closed_fail(fname);
        }
        if (!pq_has_room_locked(&q->pq, e ? 2 : 1)) {
            pq_unlock(&q->pq);
            if (!pq_grow(q))
                return rl__fail(kRLErrorNoMemory, fname, "out of memory");
            continue;
        }
        s = bslot_take_locked(q, size);
        if (s)
            break;
        pq_unlock(&q->pq);
        if (!bslab_add(q))
            return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    }
    if (!helpers) {
        bcopy_bytes(s, b, size);
        push_locked(q, e, call_bslot, s); /* room checked above */
        pq_unlock(&q->pq);
        return true;
    }
    pq_unlock(&q->pq);
    bcopy_bytes(s, b, size);
    b->descriptor->copy_helper(s, (void *)b);
    if (push_request(q, e, call_bslot, s, fname))
        return true;
    bslot_dispose(s);
    return false;
}
#endif

#if __BLOCKS__
/* Queues block `block` with record e; false (error set, nothing queued)
 * if refused. */
static bool push_block(rl__perform_queue *q, rl__pext *e, bool borrowed, void *block, const char *fname) {
    if (borrowed)
        return push_request(q, e, call_borrowed, block, fname);
#if RL_TRICK_BLOCK_COPY
    const block_layout *b = block;
    /* Atomic: a heap block's reference count lives in its flags. */
    int flags = __atomic_load_n(&b->flags, __ATOMIC_RELAXED);
    if (flags & RL_BLOCK_IS_GLOBAL)
        return push_request(q, e, call_global, block, fname);
    /* The first RL_BSLAB_WARMUP copies of a queue go through malloc: a
     * loop handed a block now and then holds no 16 KiB slab for it. */
    if (bslot_fits(b, flags)) {
        if (RL__LIKELY(__atomic_load_n(&q->bwarmup, __ATOMIC_RELAXED) >= RL_BSLAB_WARMUP))
            return push_bslot(q, e, b, fname);
        __atomic_fetch_add(&q->bwarmup, 1, __ATOMIC_RELAXED);
    }
#endif
    void *copy = _Block_copy(block);
    if (push_request(q, e, call_block, copy, fname))
        return true;
    Block_release((void (^)(void))copy);
    return false;
}
#endif

bool rl__perform_push(rl__perform_queue *q, void (*fn)(void *), void *info, const char *fname) {
    return push_request(q, NULL, fn, info, fname);
}

#if __BLOCKS__
bool rl__perform_push_block(rl__perform_queue *q, void *block, const char *fname) {
    return push_block(q, NULL, false, block, fname);
}
#endif

bool rl__perform_enqueue(rl__perform_queue *q, const rl__preq *r, rl__perform_ticket *t, const char *fname) {
    /* A waiting caller's record and its names are on its stack (the
     * ticket); more names than fit there, in malloc'ed memory. */
    if (r->wait) {
        t->waiter = (rl__waiter){RL_WAIT_PENDING};
        t->names = t->small;
        if (r->nmodes > sizeof t->small / sizeof t->small[0]) {
            t->names = malloc(r->nmodes * sizeof *t->names);
            if (!t->names)
                return rl__fail(kRLErrorNoMemory, fname, "out of memory");
        }
    }
    bool failed;
    rl__pext *e = pext_make(r, &t->ext, t->names, &failed, fname);
    bool ok = !failed;
    if (ok && r->wait)
        e->waiter = &t->waiter;
    if (ok) {
#if __BLOCKS__
        if (r->block)
            ok = push_block(q, e, r->wait, r->block, fname);
        else
#endif
            ok = push_request(q, e, r->fn, r->info, fname);
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
    uint32_t status = waiter_wait(&t->waiter, spin, spin == NULL);
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
static void preq_finish(rl__pslot s, rl__pext *e, uint32_t status) {
#if __BLOCKS__
    block_dispose(s);
#endif
    if (!e)
        return;
    if (e->release)
        e->release(s.arg);
    rl__waiter *w = e->waiter;
    if (e->where == RL_PEXT_HEAP)
        free(e);
    if (w)
        waiter_complete(w, status);
}

/* Drops every request of chain c and gives its chunks back. */
static void pchain_drop(rl__perform_queue *q, rl__pchain c) {
    pcur r = {c.head, 0};
    rl__pslot s;
    while (pcur_read(&r, &s)) {
        rl__pext *e = NULL;
        if (!s.fn) {
            e = s.arg;
            pcur_read(&r, &s); /* a head is always followed by its request */
        }
        preq_finish(s, e, RL_WAIT_FAILED);
    }
    pq_recycle(&q->pq, c.head);
}

/* ------------------------------------------------------------------ */
/* running requests                                                    */

/* A batch of requests being run (rl__perform_run), where a thread
 * unwinding from one of them finds it. The batch's chain is compacted as
 * it is read: requests for other modes are written back at w, in order,
 * with their heads, and stay queued (q->held) for the modes they are for. */
typedef struct req_batch {
    rl__perform_queue *q;
    uint32_t nrun; /* requests run */
    rl__pchain chain;
    pcur r, w;
    rl__pslot cur;  /* the request running */
    rl__pext *cur_ext; /* and its record */
    bool running;  /* cur's function is running */
    rl__waiter *finishing; /* the waiter of a request being disposed of */
    const rl__perform_timing *timing; /* NULL: requests are not timed */
#if __BLOCKS__
    /* Blocks that ran (without a record) are released in batches, after
     * running: the frees (of memory the producer's thread allocated) come
     * together instead of interleaving with the calls. */
    void *ran[16]; /* block copies; slots (call_bslot) tagged with bit 0 */
    size_t nran;
#endif
} req_batch;

#if __BLOCKS__
/* Releases the blocks that ran: a copy by Block_release; a slot by its
 * dispose helper, the slots then going back to the pool in one step
 * (gathered at the front of b->ran, behind the reads). Not inlined: the
 * batch's frame, under every request it runs, stays small (a loop thread's
 * stack pages are its memory). */
static __attribute__((noinline)) void ran_flush(req_batch *b) {
    size_t n = b->nran, nslots = 0;
    b->nran = 0; /* before any release: one could end the thread */
    for (size_t k = 0; k < n; k++) {
        uintptr_t p = (uintptr_t)b->ran[k];
        if (p & 1) {
#if RL_TRICK_BLOCK_COPY
            b->ran[nslots] = (void *)(p - 1);
            bslot_dispose_captures(b->ran[nslots++]);
#endif
        } else {
            Block_release((void (^)(void))(void *)p);
        }
    }
#if RL_TRICK_BLOCK_COPY
    if (nslots) {
        bslots_put(b->ran, nslots);
        b->q->trim_due = true; /* a slab may have gone back to the cache */
    }
#else
    (void)nslots;
#endif
}

/* Notes that request s (without a record) ran: its block is released in a
 * batch. */
static void ran_add(req_batch *b, rl__pslot s) {
    if (s.fn == call_block)
        b->ran[b->nran++] = s.arg;
#if RL_TRICK_BLOCK_COPY
    else if (s.fn == call_bslot)
        b->ran[b->nran++] = (void *)((uintptr_t)s.arg | 1);
#endif
    else
        return;
    if (b->nran == sizeof b->ran / sizeof b->ran[0])
        ran_flush(b);
}
#endif

/* A request ran: disposes of it. */
static void batch_done(req_batch *b, rl__pslot s, rl__pext *e) {
    if (!e) {
#if __BLOCKS__
        ran_add(b, s);
#endif
        return;
    }
    /* A release callback that ends the thread: the request ran, the
     * unwinding tells its waiter (batch_unwind). */
    b->finishing = e->waiter;
    preq_finish(s, e, RL_WAIT_DONE);
    b->finishing = NULL;
}

/* Reads the next request: *s and its record *e; false at the end. */
static bool batch_next(req_batch *b, rl__pslot *s, rl__pext **e) {
    if (!pcur_read(&b->r, s))
        return false;
    *e = NULL;
    if (!s->fn) {
        *e = s->arg;
        pcur_read(&b->r, s); /* a head is always followed by its request */
    }
    return true;
}

static void batch_keep(req_batch *b, rl__pslot s, rl__pext *e) {
    if (e)
        pcur_write(&b->w, (rl__pslot){NULL, e});
    pcur_write(&b->w, s);
}

/* The kept requests go in front of any that a nested run kept meanwhile
 * (those came later); the chunks no longer needed go back to the queue
 * with the next take (one lock round a pass, not two). */
static void batch_finish(req_batch *b) {
    rl__pchunk *rest;
    rl__pchain kept = pcur_finish(b->chain, b->w, &rest);
    rl__perform_queue *q = b->q;
    q->held = pchain_cat(kept, q->held);
    if (rest) {
        rl__pchunk *last = rest;
        while (last->next)
            last = last->next;
        last->next = q->spent;
        q->spent = rest;
        q->trim_due = true;
    }
}

/* The program's function of a request: a block's invoke function for
 * the block trampolines. */
static const void *user_fn(rl__pslot s) {
#if __BLOCKS__
    bool block = s.fn == call_block || s.fn == call_borrowed;
#if RL_TRICK_BLOCK_COPY
    block = block || s.fn == call_global || s.fn == call_bslot;
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

static void run_batch(req_batch *b, const rl__perform_mode *m) {
    rl__pslot s;
    rl__pext *e;
    while (batch_next(b, &s, &e)) {
        if (RL__UNLIKELY(rl__fork_inherited(b->q->fork_gen)))
            break; /* a request forked: the rest of the batch is the parent's */
        /* The requests were written on other threads: fetch a few ahead
         * (a block is read to run it, and written to release it). */
        if (b->r.c && b->r.i + 4 < b->r.c->n)
            __builtin_prefetch(b->r.c->s[b->r.i + 4].arg, 1);
        if (!slot_matches(e, m)) {
            batch_keep(b, s, e);
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
            b->timing->after(b->timing->ctx, user_fn(s), s.arg, RLMonotonicTimeGetCurrent() - t0);
        }
        b->running = false;
        b->nrun++;
        batch_done(b, s, e);
    }
#if __BLOCKS__
    ran_flush(b);
#endif
}

/* RLThreadExit (pthread_exit) from a request unwinds through here: the
 * running request counts as run (disposed of, its waiter told so), and the
 * requests not yet looked at stay queued with the kept ones, where the
 * thread's teardown drops them. */
static void batch_unwind(void *p) {
    req_batch *b = p;
    if (b->finishing) { /* a release callback ended the thread: the request ran */
        waiter_complete(b->finishing, RL_WAIT_DONE);
        b->finishing = NULL;
    }
    if (b->running) {
        b->running = false;
        batch_done(b, b->cur, b->cur_ext);
    }
#if __BLOCKS__
    ran_flush(b);
#endif
    rl__pslot s;
    rl__pext *e;
    while (batch_next(b, &s, &e))
        batch_keep(b, s, e);
    batch_finish(b);
}

/* Runs the queued requests for mode m: those kept from earlier passes
 * first (they are older), then all that came since, each once; requests
 * queued while these run wait for the next pass, as in CF. */
uint32_t rl__perform_run_timed(rl__perform_queue *q, const rl__perform_mode *m, const rl__perform_timing *timing) {
    if (!rl__perform_maybe_pending(q))
        return 0;
    pq_lock(&q->pq);
    rl__pchain in = pq_take_locked(&q->pq);
    rl__pchunk *spent = q->spent ? pq_recycle_locked(&q->pq, q->spent) : NULL;
    pq_unlock(&q->pq);
    q->spent = NULL;
    flist_free(spent);
    if (!in.head && !q->held.head)
        return 0;
    req_batch b;
    b.q = q;
    b.chain = pchain_cat(q->held, in);
    q->held = (rl__pchain){NULL, NULL};
    b.r = b.w = (pcur){b.chain.head, 0};
    b.running = false;
    b.finishing = NULL;
    b.timing = timing;
    b.nrun = 0;
#if __BLOCKS__
    b.nran = 0;
#endif
    pthread_cleanup_push(batch_unwind, &b);
    rl__cleanup_arg_escapes(&b);
    run_batch(&b, m);
    pthread_cleanup_pop(0);
    batch_finish(&b);
    return b.nrun;
}

static bool pchain_has_for(rl__pchain c, const rl__perform_mode *m) {
    pcur r = {c.head, 0};
    rl__pslot s;
    while (pcur_read(&r, &s)) {
        if (s.fn) {
            if (m->is_default)
                return true;
        } else {
            if (pext_matches(s.arg, m))
                return true;
            pcur_read(&r, &s); /* its request */
        }
    }
    return false;
}

bool rl__perform_has_for(rl__perform_queue *q, const rl__perform_mode *m) {
    if (pchain_has_for(q->held, m))
        return true;
    if (!rl__pq_maybe_queued(&q->pq))
        return false;
    pq_lock(&q->pq);
    bool has = pchain_has_for(q->pq.q, m);
    pq_unlock(&q->pq);
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
    rl__pchunk *spent = q->spent;
    q->spent = NULL;
    pq_lock(&q->pq); /* one lock round for both pools */
    spent = pq_recycle_locked(&q->pq, spent);
    void *chunks = flist_cut(&q->pq.pool, RL_PQ_POOL_IDLE);
#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
    void *slabs = flist_cut(&q->bcache, RL_BSLAB_CACHE_IDLE);
#endif
    pq_unlock(&q->pq);
    flist_free(spent);
    flist_free(chunks);
#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
    flist_free(slabs);
#endif
}

/* Takes every queued request out (for dropping), closing the queue if
 * `close`. */
static rl__pchain take_all(rl__perform_queue *q, bool close) {
    pq_lock(&q->pq);
    if (close)
        atomic_store_explicit(&q->closed, true, memory_order_relaxed);
    rl__pchain c = pq_take_locked(&q->pq);
    pq_unlock(&q->pq);
    c = pchain_cat(q->held, c);
    q->held = (rl__pchain){NULL, NULL};
    return c;
}

/* Adds the chunks of the list from c to *bytes and *n. */
static void chunks_count(const rl__pchunk *c, size_t *bytes, size_t *n) {
    for (; c; c = c->next) {
        *bytes += sizeof *c + (size_t)c->cap * sizeof c->s[0];
        (*n)++;
    }
}

size_t rl__perform_held_bytes(rl__perform_queue *q, size_t *nchunks) {
    size_t bytes = 0, n = 0;
    chunks_count(q->held.head, &bytes, &n);
    chunks_count(q->spent, &bytes, &n);
    pq_lock(&q->pq);
    chunks_count(q->pq.q.head, &bytes, &n);
    chunks_count(q->pq.pool.head, &bytes, &n);
#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
    bytes += ((size_t)q->bcache.n + (q->bcur != NULL)) * RL_BSLAB_SIZE;
#endif
    pq_unlock(&q->pq);
    if (nchunks)
        *nchunks = n;
    return bytes;
}

void rl__perform_close(rl__perform_queue *q) { pchain_drop(q, take_all(q, true)); }

void rl__perform_destroy(rl__perform_queue *q) {
    pchain_drop(q, take_all(q, true));
    flist_free(q->spent);
    q->spent = NULL;
    pq_destroy(&q->pq);
#if __BLOCKS__ && RL_TRICK_BLOCK_COPY
    free(q->bcur);
    q->bcur = NULL;
    flist_free(flist_cut(&q->bcache, 0));
#endif
}
