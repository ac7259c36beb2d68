/* RLRunLoopSource.c — version-0 sources (and the carrier of fd sources). */
#include "rl_lock.h"
#include "RLRunLoopMembership.h"
#include "rl_ready.h"
#include "rl_pool.h"
#include "RLRunLoopSourceInternal.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopSource.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

static void source_finalize(void *obj) {
    struct RLRunLoopSource *s = obj;
    if (rl__source_is_fd(s)) {
        /* Asleep again (RL__FDSOURCE_SIZE), in its owner's block: its owner's
         * wake sees it so under the item lock. Then the reference it held
         * on its owner goes, last: it may take the block with it. */
        const void *owner = rl__fdsrc_owner(s);
        rl__olock_lock(&s->lock);
        atomic_store_explicit(&s->base.magic, RL__MAGIC_ASLEEP, memory_order_relaxed);
        rl__olock_unlock(&s->lock);
        RLRelease(owner);
        return;
    }
    if (s->tail[0].ctx.release)
        s->tail[0].ctx.release(s->tail[0].ctx.info);
}

static char *source_describe(const void *obj) {
    const struct RLRunLoopSource *s = obj;
    const RLRunLoopSourceContext *c = rl__source_ctx(s);
    char *info = c->copyDescription ? c->copyDescription(c->info) : NULL;
    char *out = NULL;
    if (asprintf(&out, "<RLRunLoopSource %p order %ld%s%s>", obj, s->order, info ? " " : "", info ? info : "") < 0)
        out = NULL;
    free(info);
    return out;
}

const rl__class rl__source_class = {"RLRunLoopSource", source_finalize, NULL, source_describe};

const RLRunLoopSourceContext rl__source_no_ctx;

RLTypeID RLRunLoopSourceGetTypeID(void) { return rl__type_id(&rl__source_class); }

static bool source_ok(RLRunLoopSourceRef s, const char *fn) {
    return rl__object_check(s, &rl__source_class, fn);
}

RLRunLoopSourceRef RLRunLoopSourceCreate(RLAllocatorRef allocator, RLIndex order, RLRunLoopSourceContext *context) {
    const char *fn = __func__;
    if (!context) {
        rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
        return NULL;
    }
    if (context->version != 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)", context->version);
        return NULL;
    }
    struct RLRunLoopSource *s = rl__object_alloc(&rl__source_class, sizeof *s + sizeof s->tail[0], fn);
    if (!s)
        return NULL;
    s->order = order;
    s->has_ctx = true;
    s->tail[0].ctx = *context;
    s->tail[0].inbox_rl = NULL;
    s->tail[0].inbox_next = NULL;
    s->tail[0].home = NULL;
    s->valid = true;
    s->membs.first = NULL;
    RLRunLoopSourceContext *c = &s->tail[0].ctx;
    if (c->retain)
        c->info = (void *)c->retain(c->info);
    /* Computed once: the equality buckets of the modes are keyed by it, and
     * the hash callback is user code, not to be called under the lock. */
    s->tail[0].hash = c->hash ? c->hash(c->info) : (RLHashCode)(uintptr_t)c->info;
    return s;
}

size_t rl__source_footprint(RLRunLoopSourceRef s) {
    /* An fd source's block is its owner's, counted there. */
    size_t n = rl__source_is_fd(s) ? 0 : rl__obj_pooled(s) ? rl__pool_block_size(s) : malloc_usable_size(s) + sizeof(size_t);
    rl__olock_lock(&s->lock);
    rl__memb *m;
    RL_ITEMQ_FOREACH(m, &s->membs) {
        if (m != rl__source_inline_memb(s))
            n += malloc_usable_size(m) + sizeof(size_t);
    }
    rl__olock_unlock(&s->lock);
    return n;
}

RLIndex RLRunLoopSourceGetOrder(RLRunLoopSourceRef s) {
    if (!source_ok(s, __func__))
        return 0;
    return s->order;
}

bool RLRunLoopSourceInvalidate(RLRunLoopSourceRef s) {
    if (!source_ok(s, __func__))
        return false;
    rl__defer d;
    rl__defer_init(&d);
    rl__source_invalidate(s, &d);
    rl__defer_run(&d);
    return true;
}

bool RLRunLoopSourceIsValid(RLRunLoopSourceRef s) {
    if (!source_ok(s, __func__))
        return false;
    rl__olock_lock(&s->lock);
    bool v = s->valid;
    rl__olock_unlock(&s->lock);
    return v;
}

bool RLRunLoopSourceGetContext(RLRunLoopSourceRef s, RLRunLoopSourceContext *context) {
    const char *fn = __func__;
    if (!source_ok(s, fn))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
    *context = *rl__source_ctx(s);
    return true;
}

static bool signal_invalid(void) __attribute__((cold, noinline));
static bool signal_invalid(void) {
    return rl__fail(kRLErrorInvalidObject, "RLRunLoopSourceSignal", "the source has been invalidated");
}

/* Signalling a source that is signalled already (a producer that signals
 * faster than the loop performs) is a check and two loads, no call. */
bool RLRunLoopSourceSignal(RLRunLoopSourceRef s) {
    if (RL__UNLIKELY(!source_ok(s, __func__)))
        return false;
    if (RL__LIKELY(rl__source_signalled_already(s)) || RL__LIKELY(rl__source_signal(s)))
        return true;
    return signal_invalid();
}
