/* RLRunLoopObserver.c — observers of run-loop activities. */
#include "rl_lock.h"
#include "RLRunLoopMembership.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopObserver.h>

#include <stdio.h>
#include <stdlib.h>

static void observer_finalize(void *obj) {
    struct RLRunLoopObserver *o = obj;
    rl__item_leave_home(o, RL_KIND_OBSERVER);
    /* Invalidation already released the context; a never-invalidated
     * observer releases it here. */
    if (o->valid && o->ctx.release)
        o->ctx.release(o->ctx.info);
}

static char *observer_describe(const void *obj) {
    const struct RLRunLoopObserver *o = obj;
    char *out = NULL;
    if (asprintf(&out, "<RLRunLoopObserver %p activities 0x%lx order %ld%s>", obj, o->activities, o->order,
                 o->repeats ? " repeats" : "") < 0)
        out = NULL;
    return out;
}

const rl__class rl__observer_class = {"RLRunLoopObserver", observer_finalize, NULL, observer_describe};

RLTypeID RLRunLoopObserverGetTypeID(void) { return rl__type_id(&rl__observer_class); }

static bool observer_ok(RLRunLoopObserverRef o, const char *fn) {
    return rl__object_check(o, &rl__observer_class, fn);
}

RLRunLoopObserverRef RLRunLoopObserverCreate(RLAllocatorRef allocator, RLOptionFlags activities, bool repeats,
                                             RLIndex order, RLRunLoopObserverCallBack callout,
                                             RLRunLoopObserverContext *context) {
    const char *fn = __func__;
    if (!callout) {
        rl__fail(kRLErrorInvalidArgument, fn, "NULL callout");
        return NULL;
    }
    if (activities == 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "no activities to observe");
        return NULL;
    }
    if (context && context->version != 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)", context->version);
        return NULL;
    }
    struct RLRunLoopObserver *o = rl__object_alloc(&rl__observer_class, sizeof *o, fn);
    if (!o)
        return NULL;
    o->activities = activities;
    o->repeats = repeats;
    o->order = order;
    o->callout = callout;
    o->valid = true;
    o->membs.first = NULL;
    if (context) {
        o->ctx = *context;
        if (o->ctx.retain)
            o->ctx.info = (void *)o->ctx.retain(o->ctx.info);
    }
    return o;
}

#if __BLOCKS__
typedef void (^observer_block)(RLRunLoopObserverRef, RLRunLoopActivity);

static void observer_call_block(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    ((observer_block)info)(o, a);
}
static void observer_release_block(const void *info) { Block_release((observer_block)info); }

RLRunLoopObserverRef RLRunLoopObserverCreateWithHandler(RLAllocatorRef allocator, RLOptionFlags activities,
                                                        bool repeats, RLIndex order,
                                                        void (^block)(RLRunLoopObserverRef observer,
                                                                      RLRunLoopActivity activity)) {
    if (!block) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
        return NULL;
    }
    RLRunLoopObserverContext ctx = {0, (void *)Block_copy(block), NULL, observer_release_block, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(allocator, activities, repeats, order,
                                                     observer_call_block, &ctx);
    if (!o)
        Block_release((observer_block)ctx.info);
    return o;
}
#endif

RLOptionFlags RLRunLoopObserverGetActivities(RLRunLoopObserverRef o) {
    return observer_ok(o, __func__) ? o->activities : 0;
}

bool RLRunLoopObserverDoesRepeat(RLRunLoopObserverRef o) {
    return observer_ok(o, __func__) && o->repeats;
}

RLIndex RLRunLoopObserverGetOrder(RLRunLoopObserverRef o) {
    return observer_ok(o, __func__) ? o->order : 0;
}

void rl__observer_invalidate_locked(struct RLRunLoopObserver *o, rl__defer *d) {
    if (!o->valid)
        return;
    o->valid = false;
    rl__remove_item_everywhere_locked(o, RL_KIND_OBSERVER, d);
    /* As CF: invalidation gives the context back at once. */
    rl__defer_ctx_release(d, o->ctx.release, o->ctx.info);
}

bool RLRunLoopObserverInvalidate(RLRunLoopObserverRef o) {
    if (!observer_ok(o, __func__))
        return false;
    rl__defer d;
    rl__defer_init(&d);
    RLRunLoopRef h = rl__item_lock(o, RL_KIND_OBSERVER);
    rl__observer_invalidate_locked(o, &d);
    rl__item_unlock(o, RL_KIND_OBSERVER, h);
    rl__defer_run(&d);
    return true;
}

bool RLRunLoopObserverIsValid(RLRunLoopObserverRef o) {
    if (!observer_ok(o, __func__))
        return false;
    RLRunLoopRef h = rl__item_lock(o, RL_KIND_OBSERVER);
    bool v = o->valid;
    rl__item_unlock(o, RL_KIND_OBSERVER, h);
    return v;
}

bool RLRunLoopObserverGetContext(RLRunLoopObserverRef o, RLRunLoopObserverContext *context) {
    const char *fn = __func__;
    if (!observer_ok(o, fn))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
    *context = o->ctx;
    return true;
}
