/* RLFileDescriptor.c — run-loop sources for any file descriptor. The loop
 * watches the fd with epoll (rl_fdtab.c) and never reads or writes it. */
#include "rl_fdtab.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "RLRunLoopMembership.h"
#include "RLRunLoopSourceInternal.h"
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopSource.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Closes the object's fd, unless the loop found that the number no longer
 * names the object's file: closing it would close someone else's. */
static void fd_close_own(const struct RLFileDescriptor *f, int stale) {
    if (f->close_on_invalidate && !stale)
        close(f->fd);
}

static void fd_owner_release(const void *owner) { RLRelease(owner); }

/* What f's invalidation releases: its context's info, or its owner. */
static void (*fd_release_fn(const struct RLFileDescriptor *f))(const void *) {
    if (f->has_ctx)
        return f->ctx[0].release;
    return rl__fd_owner_held(f) ? fd_owner_release : NULL;
}

const struct rl__callout_owner *rl__fd_part_how;

void rl__fd_part_gone(RLFileDescriptorRef f) {
    const void *block = rl__fd_part_owner(f); /* the block's first object */
    if (atomic_fetch_sub_explicit(&f->parts, 1, memory_order_acq_rel) == 1)
        rl__object_free_block((void *)block);
}

static void fd_finalize(void *obj) {
    struct RLFileDescriptor *f = obj;
    /* The source holds a reference on f, so no source is left here. */
    if (f->valid) {
        fd_close_own(f, rl__peek(f->stale));
        void (*release)(const void *) = fd_release_fn(f);
        if (release)
            release(rl__fd_info(f));
    }
    if (f->base.pooled == RL__POOLED_PART)
        rl__fd_part_gone(f); /* last: it may free f */
}

/* Another thread may enable, disable or invalidate meanwhile: the state is
 * copied under the lock that guards it, printed after. */
static char *fd_describe(const void *obj) {
    struct RLFileDescriptor *f = (struct RLFileDescriptor *)obj;
    rl__olock_lock(&f->lock);
    bool valid = f->valid;
    RLOptionFlags enabled = atomic_load_explicit(&f->enabled, memory_order_relaxed);
    int stale = rl__peek(f->stale);
    rl__olock_unlock(&f->lock);
    char *out = NULL;
    if (asprintf(&out, "<RLFileDescriptor %p fd %d%s%s%s%s>", obj, f->fd, valid ? "" : " invalid",
                 (enabled & kRLFileDescriptorReadCallBack) ? " read" : "",
                 (enabled & kRLFileDescriptorWriteCallBack) ? " write" : "", stale ? " stale" : "") < 0)
        out = NULL;
    return out;
}

/* A program's: one pool class of 128 bytes with its context; an
 * RLSocket's: 64 bytes, the socket's 96 making one block of 160. */
_Static_assert(sizeof(struct RLFileDescriptor) + sizeof(rl__fdctx) <= 128, "RLFileDescriptor outgrew its pool class");
_Static_assert(sizeof(struct RLFileDescriptor) == RL__FD_PART_SIZE, "an owner's fd object: 64 bytes");
_Static_assert(RL__FD_PART_SIZE == RL_FD_PART_SIZE, "rl_callout.h says the size of an owner's fd object");
_Static_assert(RL__FD_PART_OFFSET == RL_FD_PART_OFFSET, "rl_callout.h says where an owner's fd object sits");
_Static_assert(offsetof(struct RLFileDescriptor, fd) == RL_FD_PART_FD_OFFSET, "rl_callout.h says where a part's fd is");
_Static_assert(sizeof(((struct RLFileDescriptor *)0)->fd) == sizeof(int), "a part's fd is an int");

static const rl__class fd_class = {"RLFileDescriptor", fd_finalize, NULL, fd_describe};

static bool fd_ok(RLFileDescriptorRef f, const char *fn) { return rl__object_check(f, &fd_class, fn); }

RLFileDescriptorRef RLFileDescriptorCreate(RLAllocatorRef allocator, RLFileDescriptorNativeDescriptor fd,
                                           bool closeOnInvalidate, RLFileDescriptorCallBack callout,
                                           const RLFileDescriptorContext *context) {
    const char *fn = __func__;
    if (!callout) {
        rl__fail(kRLErrorInvalidArgument, fn, "NULL callout");
        return NULL;
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "%d is not an open file descriptor", fd);
        return NULL;
    }
    if (context && context->version != 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)", context->version);
        return NULL;
    }
    struct RLFileDescriptor *f = rl__object_alloc(&fd_class, sizeof *f + sizeof f->ctx[0], fn);
    if (!f)
        return NULL;
    f->fd = fd;
    f->dev = rl__fd_dev32(st.st_dev);
    f->ino = st.st_ino;
    f->close_on_invalidate = closeOnInvalidate;
    f->ctx[0].callout = callout;
    f->valid = true;
    f->has_ctx = true;
    if (context) {
        f->ctx[0] = (rl__fdctx){context->retain, context->release, context->copyDescription, NULL, NULL, NULL, callout};
        f->ctx[0].info = context->retain ? (void *)context->retain(context->info) : context->info;
    }
    return f;
}

RLFileDescriptorRef rl__fd_init_part(void *at, int fd, RLFileDescriptorCallBack callout, const void *owner,
                                     const rl__callout_owner *how, const char *fn) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "%d is not an open file descriptor", fd);
        return NULL;
    }
    const rl__callout_owner *was = __atomic_load_n(&rl__fd_part_how, __ATOMIC_RELAXED);
    if ((const char *)at != (const char *)owner + RL__FD_PART_OFFSET || how->part_callout != callout ||
        (was && was != how))
        abort(); /* rl__fd_info finds the owner there, rl__fd_callout the callout in the one how */
    struct RLFileDescriptor *f = at;
    memset(f, 0, sizeof *f);
    rl__object_init_part(f, &fd_class);
    f->fd = fd;
    f->dev = rl__fd_dev32(st.st_dev);
    f->ino = st.st_ino;
    f->valid = true;
    /* Parts are RLSocket's only: one `how` for all of them. */
    if (!was)
        __atomic_store_n(&rl__fd_part_how, how, __ATOMIC_RELAXED);
    atomic_init(&f->parts, 2);
    RLRetain(owner);
    return f;
}

RLFileDescriptorNativeDescriptor RLFileDescriptorGetNativeDescriptor(RLFileDescriptorRef f) {
    return fd_ok(f, __func__) ? f->fd : -1;
}

bool RLFileDescriptorGetContext(RLFileDescriptorRef f, RLFileDescriptorContext *context) {
    const char *fn = __func__;
    if (!fd_ok(f, fn))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
    if (f->has_ctx)
        *context = (RLFileDescriptorContext){0, f->ctx[0].info, f->ctx[0].retain, f->ctx[0].release,
                                             f->ctx[0].copyDescription};
    else
        *context = (RLFileDescriptorContext){0, rl__fd_info(f), NULL, NULL, NULL};
    return true;
}

/* Takes a reference on a source that may be on its way out (its count may
 * already have reached zero while its finalizer waits for f's lock). */
static bool try_retain(struct RLRunLoopSource *s) {
    long rc = atomic_load(&s->base.rc);
    while (rc > 0) {
        if (atomic_compare_exchange_weak(&s->base.rc, &rc, rc + 1))
            return true;
    }
    return false;
}

static bool fd_set_enabled(RLFileDescriptorRef f, RLOptionFlags types, bool on, const char *fn) {
    if (!fd_ok(f, fn))
        return false;
    RLOptionFlags known = kRLFileDescriptorReadCallBack | kRLFileDescriptorWriteCallBack;
    if (types & ~known)
        return rl__fail(kRLErrorInvalidArgument, fn, "unknown callback types 0x%lx", types & ~known);
    rl__olock_lock(&f->lock);
    bool ok = f->valid;
    struct RLRunLoopSource *s = NULL;
    bool borrowed = false;
    if (ok && !(on && rl__peek(f->stale))) {
        RLOptionFlags was = on ? atomic_fetch_or_explicit(&f->enabled, types, memory_order_relaxed)
                               : atomic_fetch_and_explicit(&f->enabled, ~types, memory_order_relaxed);
        /* Whoever changes these bits re-arms the loops after (here, or the
         * loop that cleared what it delivered), so a call that changes
         * none (an RLSocket disabling, after each callout, what it does
         * not want) has nothing to re-arm. A stale object (its bits
         * cleared by one loop) re-arms them all, as before. */
        bool changed = (on ? (was & types) != types : (was & types) != 0) || rl__peek(f->stale);
        /* A callout enabling its own fd borrows the reference its loop
         * keeps on the source until the callout returns. */
        if (changed && f->source && ((borrowed = rl__fd_callout_running(f->source)) || try_retain(f->source)))
            s = f->source;
    }
    rl__olock_unlock(&f->lock);
    if (s) {
        /* Re-arms the fd in each of its loops, one at a time; the kernel's
         * answer may show that it is stale. */
        rl__source_fd_resync(s);
        if (!borrowed)
            rl__release_raw(s);
    }
    int stale = on ? rl__peek(f->stale) : 0;
    if (!ok)
        return rl__fail(kRLErrorInvalidObject, fn, "the descriptor object has been invalidated");
    if (stale == ENOENT || stale == EBADF)
        return rl__fail(kRLErrorInvalidState, fn,
                        "fd %d was closed (or closed and its number reused) while this object was valid; "
                        "invalidate the object before closing its fd",
                        f->fd);
    if (stale)
        return rl__fail(kRLErrorInvalidState, fn, "the run loop cannot watch fd %d: %s", f->fd, strerror(stale));
    return true;
}

bool RLFileDescriptorEnableCallBacks(RLFileDescriptorRef f, RLOptionFlags types) {
    return fd_set_enabled(f, types, true, __func__);
}

bool RLFileDescriptorDisableCallBacks(RLFileDescriptorRef f, RLOptionFlags types) {
    return fd_set_enabled(f, types, false, __func__);
}

bool RLFileDescriptorInvalidate(RLFileDescriptorRef f) {
    if (!fd_ok(f, __func__))
        return false;
    rl__defer d;
    rl__defer_init(&d);
    rl__olock_lock(&f->lock);
    bool was = f->valid;
    struct RLRunLoopSource *s = NULL;
    int stale = rl__peek(f->stale);
    if (was) {
        atomic_store_explicit(&f->enabled, 0, memory_order_relaxed);
        if (f->source && try_retain(f->source))
            s = f->source;
        rl__poke(f->valid, false);
    }
    rl__olock_unlock(&f->lock);
    if (s) {
        rl__source_invalidate(s, &d); /* leaves every epoll set */
        rl__defer_release(&d, s);
    }
    if (was) {
        fd_close_own(f, stale);
        rl__defer_ctx_release(&d, fd_release_fn(f), rl__fd_info(f));
    }
    rl__defer_run(&d);
    return true;
}

bool RLFileDescriptorIsValid(RLFileDescriptorRef f) {
    if (!fd_ok(f, __func__))
        return false;
    rl__olock_lock(&f->lock);
    bool v = f->valid;
    rl__olock_unlock(&f->lock);
    return v;
}

RLRunLoopSourceRef RLFileDescriptorCreateRunLoopSource(RLAllocatorRef allocator, RLFileDescriptorRef f,
                                                       RLIndex order) {
    const char *fn = __func__;
    if (!fd_ok(f, fn))
        return NULL;
    rl__olock_lock(&f->lock);
    struct RLRunLoopSource *s = NULL;
    bool valid = f->valid;
    if (valid && f->source && try_retain(f->source))
        s = f->source;
    rl__olock_unlock(&f->lock);
    if (!valid) {
        rl__fail(kRLErrorInvalidObject, fn, "the descriptor object has been invalidated");
        return NULL;
    }
    if (s)
        return s;
    RLRetain(f);
    s = rl__source_create_fd(order, f, fn);
    if (!s) {
        RLRelease(f);
        return NULL;
    }
    rl__olock_lock(&f->lock);
    if (f->source && try_retain(f->source)) {
        /* Another thread made one meanwhile: one source per descriptor. */
        struct RLRunLoopSource *other = f->source;
        rl__olock_unlock(&f->lock);
        RLRelease(s);
        return other;
    }
    f->source = s;
    rl__olock_unlock(&f->lock);
    return s;
}

/* Asked between the pieces of one wake (an RLSocket's Data chunks, its
 * accepted connections), so that a callback that removes the source from
 * the mode, invalidates it or stops the run gets nothing more in this
 * wake; the loop's innermost run is the one making the callout. */
bool rl__fd_served_now(RLFileDescriptorRef f) {
    RLRunLoopRef rl = rl__tls;
    if (!rl)
        return false;
    rl__loop_lock(rl);
    rl__mode *m = rl->frame && !rl->frame->stopped ? rl->frame->mode : NULL; /* modes live as long as the loop */
    rl__loop_unlock(rl);
    if (!m)
        return false;
    rl__olock_lock(&f->lock);
    struct RLRunLoopSource *s = f->valid && f->source && try_retain(f->source) ? f->source : NULL;
    rl__olock_unlock(&f->lock);
    if (!s)
        return false;
    rl__olock_lock(&s->lock);
    bool served = s->valid && rl__memb_in_mode(s, RL_KIND_SOURCE, m);
    rl__olock_unlock(&s->lock);
    RLRelease(s);
    return served;
}

RLOptionFlags rl__fd_enabled(RLFileDescriptorRef f) { return atomic_load_explicit(&f->enabled, memory_order_relaxed); }

void rl__fd_set_kept(RLFileDescriptorRef f, RLOptionFlags types) {
    atomic_store_explicit(&f->kept, (uint8_t)types, memory_order_relaxed);
}

bool rl__fd_report_quiet(RLFileDescriptorRef f) {
    RLRunLoopRef rl = rl__tls;
    return rl && rl->src_in_callout && rl->src_in_callout->fdobj == f && rl->fd_quiet;
}

bool rl__fd_recv_into(RLFileDescriptorRef f, struct rl__rxq *q) {
    RLRunLoopRef rl = rl__tls;
    if (!rl || !rl->src_in_callout || rl->src_in_callout->fdobj != f || !rl__of_this_process(rl))
        return false;
    return rl__poll_recv_into(&rl->kern, f->fd, q);
}

bool rl__fd_ring_sends(RLFileDescriptorRef f) {
    RLRunLoopRef rl = rl__tls;
    return rl && rl->kern.kops && rl->kern.kops->send && rl->src_in_callout && rl->src_in_callout->fdobj == f &&
           rl__of_this_process(rl);
}

int rl__fd_send_via(RLFileDescriptorRef f, struct rl__txq *q, const void *bytes, size_t n) {
    RLRunLoopRef rl = rl__tls;
    if (!rl || !rl__of_this_process(rl))
        return 0;
    const void *owner = __atomic_load_n(&q->owner, __ATOMIC_RELAXED); /* set once, by the owner's thread */
    if (owner != &rl->kern && (owner || !rl->src_in_callout || rl->src_in_callout->fdobj != f))
        return 0;
    return rl__poll_send(&rl->kern, q, bytes, n, rl->frame != NULL);
}

size_t rl__fd_pass_left(void) {
    RLRunLoopRef rl = rl__tls;
    return rl ? rl->fd_pass_left : 0;
}
