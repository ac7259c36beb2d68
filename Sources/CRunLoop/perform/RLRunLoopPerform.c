/*
 * RLRunLoopPerform.c — the way in of perform requests: rl__perform_submit,
 * which every front end calls (RLRunLoopPerform* here, RLThreadPerform* in
 * RLPerform.c, RLWorkerThreadPerform* through it, the Swift overlay through
 * those), and the public RLRunLoopPerform* calls. It checks a request,
 * brings its modes into being, hands it to the loop's queue (rl_pqueue.c),
 * wakes the loop and waits for it: what needs the loop is done here, above
 * the loop, so that the queue, which the loop drives, calls no run-loop
 * file. The loop never calls into this file.
 */
#include "RLRunLoopPerformInternal.h"
#include "rl_loop.h"
#include "RLRunLoopMode.h"
#include <crunloop/RLRunLoop.h>

#include <string.h>

/* ------------------------------------------------------------------ */
/* checks                                                              */

/* The queue of loop rl, or NULL (error set) if rl is not a run loop. The
 * check is inline: the usual request costs a few dozen instructions. */
static inline rl__perform_queue *queue_of(RLRunLoopRef rl, const char *fname) {
    return rl__check_loop(rl, fname) ? &rl->pq : NULL;
}

/* Checks the modes of r: each a non-empty name. */
static bool modes_check(const rl__preq *r, const char *fname) {
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

bool rl__preq_check(const rl__preq *r, const char *fname) {
    if (!modes_check(r, fname))
        return false;
    if (!r->fn && !r->block)
        return rl__fail(kRLErrorInvalidArgument, fname, "NULL function");
    return true;
}

/* Whether r is the usual request: a function or a block for the default
 * mode, with nothing else (one slot, no record, no check that can fail). */
static inline bool is_usual(const rl__preq *r) {
    return (r->fn || r->block) && !r->release && !r->wait && r->nmodes == 1 && r->modes &&
           r->modes[0] == kRLRunLoopDefaultMode;
}

static bool closed_fail(const char *fname) {
    return rl__fail(kRLErrorInvalidState, fname, "the run loop's thread has exited");
}

/* As CF, queuing a request for a named mode brings the mode into being
 * (not kRLRunLoopCommonModes, which names a set). */
static bool modes_create(RLRunLoopRef rl, const rl__preq *r, const char *fname) {
    for (size_t i = 0; i < r->nmodes; i++) {
        RLRunLoopMode mode = r->modes[i];
        if (mode != kRLRunLoopCommonModes && strcmp(mode, kRLRunLoopCommonModes) != 0 &&
            !rl__runloop_mode_create(rl, mode, fname))
            return false;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* submitting                                                          */

bool rl__perform_submit(RLRunLoopRef rl, const rl__preq *r, const char *fname) {
    rl__perform_queue *q = queue_of(rl, fname);
    /* The usual request needs no check, and its mode exists. */
    bool ok = q && (is_usual(r) || (rl__preq_check(r, fname) &&
                                       (!atomic_load_explicit(&q->closed, memory_order_relaxed) ||
                                        closed_fail(fname)) &&
                                       modes_create(rl, r, fname)));
    rl__perform_ticket ticket;
    if (!ok || !rl__perform_enqueue(q, r, &ticket, fname)) {
        if (r->release)
            r->release(r->info); /* refused: ownership was passed all the same */
        return false;
    }
    /* Queued: the queue disposes of it, ran or dropped. */
    if (r->wake)
        RLRunLoopWakeUp(rl);
    if (!r->wait)
        return true;
    int cpu = rl__runloop_cpu(rl);
    return rl__perform_wait(&ticket, cpu >= 0 && cpu != rl__spin_cpu() ? &q->wait_spin : NULL, fname);
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
    if (RL__UNLIKELY(mode != kRLRunLoopDefaultMode || !fn || !(q = queue_of(rl, __func__)))) {
        rl__preq r = {.fn = fn, .info = info, .modes = &mode, .nmodes = 1};
        return rl__perform_submit(rl, &r, __func__);
    }
    return rl__perform_push(q, fn, info, __func__);
}

bool RLRunLoopPerformFunctionWithRelease(RLRunLoopRef rl, RLRunLoopMode mode, void (*fn)(void *info), void *info,
                                         RLPerformReleaseCallBack release) {
    rl__preq r = {.fn = fn, .info = info, .modes = &mode, .nmodes = 1, .release = release};
    return rl__perform_submit(rl, &r, __func__);
}

/* A count for the mode-list forms; false (error set) if it is negative. */
static bool count_ok(RLIndex count, const char *fname) {
    if (count < 0)
        return rl__fail(kRLErrorInvalidArgument, fname, "negative mode count %ld", (long)count);
    return true;
}

bool RLRunLoopPerformFunctionInModes(RLRunLoopRef rl, const RLRunLoopMode *modes, RLIndex count,
                                     void (*fn)(void *info), void *info, RLPerformReleaseCallBack release) {
    if (!count_ok(count, __func__)) {
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
    if (RL__UNLIKELY(mode != kRLRunLoopDefaultMode || !(q = queue_of(rl, __func__)))) {
        rl__preq r = {.block = (void *)block, .modes = &mode, .nmodes = 1};
        return rl__perform_submit(rl, &r, __func__);
    }
    return rl__perform_push_block(q, (void *)block, __func__);
}

bool RLRunLoopPerformBlockInModes(RLRunLoopRef rl, const RLRunLoopMode *modes, RLIndex count, void (^block)(void)) {
    if (!block)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
    if (!count_ok(count, __func__))
        return false;
    rl__preq r = {.block = (void *)block, .modes = modes, .nmodes = (size_t)count};
    return rl__perform_submit(rl, &r, __func__);
}
#endif

