/*
 * rl_pqueue.h — private: a run loop's perform queue as storage (rl_pqueue.c):
 * request records, waiters, the block copies in the loop's slabs, running
 * and dropping requests. The queuing front end (RLRunLoopPerform.c) and the
 * loop (creation, teardown, its iteration) use it; it calls neither.
 */
#ifndef CRUNLOOP_RL_PQUEUE_H
#define CRUNLOOP_RL_PQUEUE_H

#include "RLRunLoopPerformInternal.h"
#include "runloop_internal.h"

/* A waitUntilDone sender's completion word, on its stack: PENDING until
 * the request ran (DONE) or was dropped (FAILED); SLEEPING while the sender
 * is (about to be) asleep on it in the kernel. */
enum { RL_WAIT_PENDING = 0, RL_WAIT_SLEEPING = 1, RL_WAIT_DONE = 2, RL_WAIT_FAILED = 3 };

typedef struct rl_waiter {
    _Atomic uint32_t state;
} rl_waiter;

enum { RL_PEXT_SHARED, RL_PEXT_HEAP, RL_PEXT_CALLER };

/* What a request holds besides its slot (see the file comment). */
typedef struct rl_pext {
    RLPerformReleaseCallBack release; /* release(slot's arg) once; or NULL */
    rl_waiter *waiter;                /* on the waiting caller's stack; or NULL */
    uint8_t where;                    /* RL_PEXT_*: who owns this record */
    bool common;                      /* in the common modes (as they are when it runs) */
    bool dflt;                        /* in the default mode */
    uint32_t nnames;                  /* other modes, by name */
    const char *const *names;
} rl_pext;

RL__HIDDEN bool rl__modes_check(const rl__preq *r, const char *fname);
RL__HIDDEN rl_pext *rl__pext_make(const rl__preq *r, rl_pext *on_stack, const char **names, bool *failed, const char *fname);
RL__HIDDEN uint32_t rl__waiter_wait(rl_waiter *w, rl__spin *spin, bool same_cpu);

#if __BLOCKS__
/* How a queued block is run and let go: its slot's function. */
RL__HIDDEN void rl__call_block(void *b);
RL__HIDDEN void rl__call_borrowed(void *b);
RL__HIDDEN void rl__call_global(void *b);
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

RL__HIDDEN void rl__call_bslot(void *s);
RL__HIDDEN bool rl__bslab_add(rl__perform_queue *q);
enum { RL_BCOPY_MAX = 64 /* the biggest block copied into a slab (rl_pqueue.c) */ };

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

static inline rl_bslab *rl__bslab_of(void *copy) { return (rl_bslab *)((uintptr_t)copy & ~(uintptr_t)(RL_BSLAB_SIZE - 1)); }
static inline unsigned rl__bcopy_size(size_t size) { return (unsigned)((size + RL_BGRAIN - 1) & ~(size_t)(RL_BGRAIN - 1)); }

/* Takes `bytes` off a slab's count; true if that made it zero: the caller
 * recycles it. */
static inline bool rl__bslab_sub(rl_bslab *sl, unsigned bytes) {
    return atomic_fetch_sub_explicit(&sl->remaining, bytes, memory_order_acq_rel) == bytes;
}

/* Space for a copy of `size` bytes, queue lock held; NULL if a slab is
 * needed. */
static inline void *rl__bslot_take_locked(rl__perform_queue *q, size_t size) {
    unsigned need = rl__bcopy_size(size);
    rl_bslab *sl = q->bcur;
    if (sl && q->bcur_used + need > sizeof sl->data) {
        /* Full. If all its copies are back already, start over in it. */
        q->bcur = NULL;
        if (rl__bslab_sub(sl, RL_BSLAB_BIAS - q->bcur_used)) {
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

/* A copy that will not run (or ran, alone): disposes of the captures,
 * gives the space back. */
RL__HIDDEN void rl__bslot_dispose(void *s);

/* Copies a block of `size` bytes (a multiple of 8, at least the 32-byte
 * header, at most RL_BCOPY_MAX) word by word, inline: compilers turn a
 * switch of fixed-size memcpy calls back into one library call. */
static inline void rl__bcopy_bytes(void *dst, const void *src, size_t size) {
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
static inline bool rl__bslot_fits(const rl_block_layout *b, int flags) {
    size_t size = b->descriptor->size;
    return b->isa == (void *)_NSConcreteStackBlock &&
           !(flags & (RL_BLOCK_NEEDS_FREE | RL_BLOCK_HAS_CTOR | RL_BLOCK_IS_GC)) && size <= RL_BCOPY_MAX &&
           size >= 32 && size % 8 == 0;
}
#endif /* RL_TRICK_BLOCK_COPY */
#endif /* __BLOCKS__ */

#endif /* CRUNLOOP_RL_PQUEUE_H */
