/*
 * RLRunLoopPerform.c — queuing perform requests: the checks, the push into a
 * loop's queue (rl_pqueue.c) with its wake-up, waitUntilDone, and the public
 * RLRunLoopPerform* calls. Above the loop core: it wakes the loop and finds
 * its queue and modes; the loop never calls into it.
 */
#include "RLLockInternal.h"
#include "RLRunLoopMode.h"
#include "rl_pqueue.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* queuing                                                             */

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
        if (!rl__pq_grow(&q->pq))
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
            if (!rl__pq_grow(&q->pq))
                return rl__fail(kRLErrorNoMemory, fname, "out of memory");
            continue;
        }
        s = rl__bslot_take_locked(q, size);
        if (s)
            break;
        rl_pq_unlock(&q->pq);
        if (!rl__bslab_add(q))
            return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    }
    if (!helpers) {
        rl__bcopy_bytes(s, b, size);
        rl_push_locked(q, e, rl__call_bslot, s); /* room checked above */
        rl_pq_unlock(&q->pq);
        return true;
    }
    rl_pq_unlock(&q->pq);
    rl__bcopy_bytes(s, b, size);
    b->descriptor->copy_helper(s, (void *)b);
    if (rl_push(q, e, rl__call_bslot, s, fname))
        return true;
    rl__bslot_dispose(s);
    return false;
}
#endif

#if __BLOCKS__
/* Queues block `block` with record e; false (error set, nothing queued)
 * if refused. */
static bool rl_push_block(rl__perform_queue *q, rl_pext *e, bool borrowed, void *block, const char *fname) {
    if (borrowed)
        return rl_push(q, e, rl__call_borrowed, block, fname);
#if RL_TRICK_BLOCK_COPY
    const rl_block_layout *b = block;
    /* Atomic: a heap block's reference count lives in its flags. */
    int flags = __atomic_load_n(&b->flags, __ATOMIC_RELAXED);
    if (flags & RL_BLOCK_IS_GLOBAL)
        return rl_push(q, e, rl__call_global, block, fname);
    if (rl__bslot_fits(b, flags))
        return rl_push_bslot(q, e, b, fname);
#endif
    void *copy = _Block_copy(block);
    if (rl_push(q, e, rl__call_block, copy, fname))
        return true;
    Block_release((void (^)(void))copy);
    return false;
}
#endif

/* rl__perform_submit once the loop and the request are checked. *queued
 * tells whether the request got into the queue (then it is disposed of by
 * the queue, ran or dropped, whatever this returns). */
static bool rl_submit(RLRunLoopRef rl, rl__perform_queue *q, const rl__preq *r, bool *queued, const char *fname) {
    *queued = false;
    /* Room for a waiting caller's record and its names (on this stack). */
    rl_pext stack_ext;
    const char *small_names[8];
    const char **names = small_names;
    if (r->wait && r->nmodes > sizeof small_names / sizeof small_names[0]) {
        names = malloc(r->nmodes * sizeof *names);
        if (!names)
            return rl__fail(kRLErrorNoMemory, fname, "out of memory");
    }
    bool failed;
    rl_pext *e = rl__pext_make(r, &stack_ext, names, &failed, fname);
    bool ok = !failed;
    for (uint32_t i = 0; ok && e && i < e->nnames; i++)
        ok = rl__runloop_mode_create(rl, e->names[i], fname);
    rl_waiter waiter = {RL_WAIT_PENDING};
    rl__spin *spin = NULL;
    if (ok && r->wait) {
        e->waiter = &waiter;
        int cpu = rl__runloop_cpu(rl);
        if (cpu >= 0 && cpu != rl__spin_cpu())
            spin = &q->wait_spin;
    }
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
        if (names != small_names)
            free(names);
        return false;
    }
    *queued = true;
    if (r->wake)
        RLRunLoopWakeUp(rl);
    if (!r->wait)
        return true;
    /* Not known to run elsewhere: the loop records its CPU only when it is
     * about to sleep, and a loop kept busy by this very exchange may not
     * have. */
    uint32_t status = rl__waiter_wait(&waiter, spin, spin == NULL);
    if (names != small_names)
        free(names);
    if (status == RL_WAIT_FAILED)
        return rl__fail(kRLErrorInvalidState, fname, "the thread finished before it ran the request");
    return true;
}

bool rl__preq_check(const rl__preq *r, const char *fname) {
    if (!rl__modes_check(r, fname))
        return false;
    if (!r->fn && !r->block)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
    return true;
}

/* Whether r is the usual request: a function or a block for the default
 * mode, with nothing else (one slot, no record, no check that can fail). */
static inline bool rl_is_usual(const rl__preq *r) {
    return (r->fn || r->block) && !r->release && !r->wait && r->nmodes == 1 && r->modes &&
           r->modes[0] == kRLRunLoopDefaultMode;
}

bool rl__perform_submit(RLRunLoopRef rl, const rl__preq *r, const char *fname) {
    rl__perform_queue *q = rl__runloop_perform_queue(rl, fname);
    if (RL__LIKELY(q && rl_is_usual(r))) {
        bool ok;
#if __BLOCKS__
        if (r->block)
            ok = rl_push_block(q, NULL, false, r->block, fname);
        else
#endif
            ok = rl_push(q, NULL, r->fn, r->info, fname);
        if (ok && r->wake)
            RLRunLoopWakeUp(rl);
        return ok;
    }
    bool ok = q && rl__preq_check(r, fname);
    if (ok && atomic_load_explicit(&q->closed, memory_order_relaxed))
        ok = rl_closed_fail(fname);
    bool queued = false;
    if (ok)
        ok = rl_submit(rl, q, r, &queued, fname);
    if (!queued && r->release)
        r->release(r->info); /* refused: ownership was passed all the same */
    return ok;
}

void rl__perform_run_now(const rl__preq *r) {
#if __BLOCKS__
    if (r->block) {
        ((void (^)(void))r->block)();
        return;
    }
#endif
    /* Released also when fn ends the thread (RLThreadExit unwinds). */
    if (!r->release) {
        r->fn(r->info);
        return;
    }
    pthread_cleanup_push(r->release, r->info);
    r->fn(r->info);
    pthread_cleanup_pop(1);
}

/* ------------------------------------------------------------------ */
/* the public run-loop calls                                           */

bool RLRunLoopPerformFunction(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *info), void *info) {
    /* The usual request straight to the queue: millions a second. */
    rl__perform_queue *q;
    if (RL__LIKELY(mode == kRLRunLoopDefaultMode && fn && (q = rl__runloop_perform_queue(rl, __func__))))
        return rl_push(q, NULL, fn, info, __func__);
    rl__preq r = {.fn = fn, .info = info, .modes = &mode, .nmodes = 1};
    return rl__perform_submit(rl, &r, __func__);
}

bool RLRunLoopPerformFunctionWithRelease(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *info), void *info,
                                         RLPerformReleaseCallBack release) {
    rl__preq r = {.fn = fn, .info = info, .modes = &mode, .nmodes = 1, .release = release};
    return rl__perform_submit(rl, &r, __func__);
}

/* A count for the mode-list forms; false (error set) if it is negative. */
static bool rl_count_ok(RLIndex count, const char *fname) {
    if (count < 0)
        return rl__fail(kRLErrorInvalidArgument, fname, "negative mode count %ld", (long)count);
    return true;
}

bool RLRunLoopPerformFunctionInModes(RLRunLoopRef rl, const RLRunLoopMode *modes, RLIndex count,
                                     void (*fn)(void *info), void *info, RLPerformReleaseCallBack release) {
    if (!rl_count_ok(count, __func__)) {
        if (release)
            release(info);
        return false;
    }
    rl__preq r = {.fn = fn, .info = info, .modes = modes, .nmodes = (size_t)count, .release = release};
    return rl__perform_submit(rl, &r, __func__);
}

#if __BLOCKS__
bool RLRunLoopPerformBlock(RLRunLoopRef rl, RLRunLoopMode mode, void (^block)(void)) {
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
    rl__perform_queue *q;
    if (RL__LIKELY(mode == kRLRunLoopDefaultMode && (q = rl__runloop_perform_queue(rl, __func__))))
        return rl_push_block(q, NULL, false, (void *)block, __func__);
    rl__preq r = {.block = (void *)block, .modes = &mode, .nmodes = 1};
    return rl__perform_submit(rl, &r, __func__);
}

bool RLRunLoopPerformBlockInModes(RLRunLoopRef rl, const RLRunLoopMode *modes, RLIndex count, void (^block)(void)) {
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
    if (!rl_count_ok(count, __func__))
        return false;
    rl__preq r = {.block = (void *)block, .modes = modes, .nmodes = (size_t)count};
    return rl__perform_submit(rl, &r, __func__);
}
#endif

