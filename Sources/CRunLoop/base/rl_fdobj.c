/*
 * rl_fdobj.c — the life of an object that owns a kernel handle and a
 * user's context (rl_fdobj.h): valid, invalidated once, its handle closed
 * and its info released once, after the callouts that use them.
 */
#include "rl_fdobj.h"

#include <unistd.h>

static const rl__fdobj_end fdobj_nothing = {.fd = -1};

void rl__fdobj_init(rl__fdobj *o, int fd) {
    *o = (rl__fdobj){.fd = fd};
    atomic_store_explicit(&o->valid, true, memory_order_release);
}

void rl__fdobj_set_context(rl__fdobj *o, void *info, void (*release)(const void *info)) {
    o->info = info;
    o->owes_release = release != NULL;
}

/* What the object still owes: its fd if it closes it, its info. */
static void fdobj_hand_over(rl__fdobj *o, bool close_fd, rl__fdobj_end *end, rl__fdobj_releaser releaser) {
    if (close_fd) {
        end->fd = o->fd;
        o->fd = -1;
    }
    end->info = o->info;
    end->release = o->owes_release ? releaser(o) : NULL;
    o->owes_release = false;
}

/* The last callout of an invalidated object left (rl__fdobj_leave). */
void rl__fdobj_leave_last(rl__fdobj *o, rl__fdobj_end *end, rl__fdobj_releaser releaser) {
    fdobj_hand_over(o, o->close_pending, end, releaser);
    o->close_pending = o->release_pending = false;
}

bool rl__fdobj_invalidate(rl__fdobj *o, unsigned how, rl__fdobj_end *end, rl__fdobj_releaser releaser) {
    *end = fdobj_nothing;
    if (!rl__fdobj_valid(o))
        return false;
    atomic_store_explicit(&o->valid, false, memory_order_release);
    end->call_inval = (how & RL_FDOBJ_CALLBACK) && !o->inval_called;
    o->inval_called = o->inval_called || end->call_inval;
    if (o->busy > 0) {
        o->close_pending = (how & RL_FDOBJ_CLOSE) != 0;
        o->release_pending = true;
        return true;
    }
    fdobj_hand_over(o, (how & RL_FDOBJ_CLOSE) != 0, end, releaser);
    return true;
}

void rl__fdobj_finish_slow(rl__fdobj_end *end) {
    if (end->fd >= 0)
        (void)close(end->fd); /* nothing to do on failure: the number is gone either way */
    if (end->release)
        end->release(end->info);
    *end = fdobj_nothing;
}

void rl__fdobj_finalize(rl__fdobj *o, rl__fdobj_releaser releaser) {
    rl__fdobj_release_fn release = o->owes_release ? releaser(o) : NULL;
    o->owes_release = false;
    if (release)
        release(o->info);
}
