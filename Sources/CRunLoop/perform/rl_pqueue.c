/*
 * rl_pqueue.c — perform requests: the one queue per run loop that every
 * perform call of the library goes through (RLRunLoopPerform*,
 * RLThreadPerform*, RLWorkerThreadPerform*, the Swift overlay), as storage:
 * records, block copies, running, trimming and dropping requests. Queuing
 * and the public RLRunLoopPerform* calls are in RLRunLoopPerform.c. See
 * RLRunLoopPerformInternal.h.
 *
 * How a request is stored. The queue is a FIFO of 16-byte slots
 * {function, argument} (RLRunLoopPerformInternal.h). The usual request — a function or a
 * block for the default mode, nothing else — is one slot. Any other request
 * is two: a head slot {NULL, record} (no request has a NULL function) whose
 * record (rl_pext) holds the modes, the release callback and the waiter,
 * then the request's own slot. The record is malloc'ed with its mode names,
 * or shared (a request for the common modes only), or lives on the stack of
 * a caller that waits (it outlives the request).
 *
 * A block is queued as a slot whose function says how to run it and how to
 * let it go (rl_call_*). Small stack blocks are copied into the loop's own
 * slabs instead of Block_copy's malloc (the fast path, below); without it
 * (RL_TRICK_BLOCK_COPY=0, make PLAIN=1) blocks go through Block_copy and
 * Block_release only. A waiting caller's block is not copied at all: it
 * lives on the caller's stack until the request is done with.
 */
#include "RLLockInternal.h"
#include "rl_pqueue.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* storage: chunks of slots (see RLRunLoopPerformInternal.h)           */

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

bool rl__pq_grow(rl_pqueue *pq) {
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
uint32_t rl__waiter_wait(rl_waiter *w, rl__spin *spin, bool same_cpu) {
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

/* Checks the modes of r: each a non-empty name. */
bool rl__modes_check(const rl__preq *r, const char *fname) {
    if (!r->modes || r->nmodes == 0)
        return rl__fail(kRLErrorInvalidArgument, fname, r->modes ? "empty mode list" : "NULL mode");
    for (size_t i = 0; i < r->nmodes; i++) {
        if (!r->modes[i])
            return rl__fail(kRLErrorInvalidArgument, fname, "NULL mode");
        if (r->modes[i][0] == '\0')
            return rl__fail(kRLErrorInvalidArgument, fname, "empty mode name");
    }
    return true;
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
rl_pext *rl__pext_make(const rl__preq *r, rl_pext *on_stack, const char **names, bool *failed,
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
/* A block copied by Block_copy: released after it ran. */
void rl__call_block(void *b) { ((void (^)(void))b)(); }
/* A waiting caller's block, not copied: nothing to release. */
void rl__call_borrowed(void *b) { ((void (^)(void))b)(); }

#if RL_TRICK_BLOCK_COPY
/* Runs a global block: nothing to release. */
void rl__call_global(void *b) { ((void (^)(void))b)(); }

/* Runs a block from its copy; the batch disposes of it and gives the space
 * back (with the others of the batch). */
void rl__call_bslot(void *s) { ((void (^)(void))s)(); }

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
        rl_bslab *sl = rl__bslab_of(copies[i]);
        unsigned bytes = 0;
        for (; i < n && rl__bslab_of(copies[i]) == sl; i++)
            bytes += rl__bcopy_size(((rl_block_layout *)copies[i])->descriptor->size);
        if (rl__bslab_sub(sl, bytes))
            rl_bslab_recycle(sl);
    }
}

/* Gives a new slab to the queue (to its cache); false if memory is short. */
bool rl__bslab_add(rl__perform_queue *q) {
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
void rl__bslot_dispose(void *s) {
    rl_bslot_dispose_captures(s);
    rl_bslots_put(&s, 1);
}

#endif /* RL_TRICK_BLOCK_COPY */

/* Lets go of the block of request slot s (it ran or is dropped). */
static void rl_block_dispose(rl_pslot s) {
    if (s.fn == rl__call_block)
        Block_release((void (^)(void))s.arg);
#if RL_TRICK_BLOCK_COPY
    else if (s.fn == rl__call_bslot)
        rl__bslot_dispose(s.arg);
#endif
}
#endif /* __BLOCKS__ */

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
#if __BLOCKS__
    /* Blocks that ran (without a record) are released in batches, after
     * running: the frees (of memory the producer's thread allocated) come
     * together instead of interleaving with the calls. */
    void *ran[64]; /* block copies; slots (rl__call_bslot) tagged with bit 0 */
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
    if (s.fn == rl__call_block)
        b->ran[b->nran++] = s.arg;
#if RL_TRICK_BLOCK_COPY
    else if (s.fn == rl__call_bslot)
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
        s.fn(s.arg);
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
uint32_t rl__perform_run(rl__perform_queue *q, rl_mode *m) {
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
