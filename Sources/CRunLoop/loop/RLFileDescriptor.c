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
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

/* An RLFileDescriptor is one block: the object (its context) and its fd
 * source after it, asleep until CreateRunLoopSource wakes it (see
 * RL__FDSOURCE_SIZE in runloop_internal.h for who holds what). The fd state
 * (valid, enabled, stale...) is in the source, under its item lock. */

/* Closes the object's fd, unless the loop found that the number no longer
 * names the object's file: closing it would close someone else's. */
static void fd_close_own(const struct RLFileDescriptor *f, int stale) {
    if ((f->ctx.owner_close & 1u) && !stale)
        close(rl__fdst(rl__fd_source(f))->fd);
}

const struct rl__callout_owner *rl__fd_part_how;

static void fd_finalize(void *obj) {
    struct RLFileDescriptor *f = obj;
    /* An awake source holds a reference on f: its source is asleep here,
     * and the block goes with f (rl__object_finalize). */
    rl__fdstate *st = rl__fdst(rl__fd_source(f));
    if (st->valid) {
        fd_close_own(f, rl__peek(st->stale));
        if (f->ctx.release)
            f->ctx.release(f->ctx.info);
    }
}

/* Another thread may enable, disable or invalidate meanwhile: the state is
 * copied under the lock that guards it, printed after. */
static char *fd_describe(const void *obj) {
    struct RLFileDescriptor *f = (struct RLFileDescriptor *)obj;
    struct RLRunLoopSource *s = rl__fd_source(f);
    rl__fdstate *st = rl__fdst(s);
    rl__olock_lock(&s->lock);
    bool valid = st->valid;
    RLOptionFlags enabled = atomic_load_explicit(&st->enabled, memory_order_relaxed);
    int stale = rl__peek(st->stale);
    rl__olock_unlock(&s->lock);
    char *out = NULL;
    if (asprintf(&out, "<RLFileDescriptor %p fd %d%s%s%s%s>", obj, st->fd, valid ? "" : " invalid",
                 (enabled & kRLFileDescriptorReadCallBack) ? " read" : "",
                 (enabled & kRLFileDescriptorWriteCallBack) ? " write" : "", stale ? " stale" : "") < 0)
        out = NULL;
    return out;
}

_Static_assert(RL__FD_OWNER_SIZE == RL_FD_OWNER_SIZE, "rl_callout.h says the size of an fd source's owner");
_Static_assert(RL__FDSOURCE_SIZE == RL_FD_SOURCE_SIZE, "rl_callout.h says the size of an fd source");
_Static_assert(sizeof(struct RLRunLoopSource) + offsetof(rl__fdstate, fd) == RL_FD_SOURCE_FD_OFFSET,
               "rl_callout.h says where an fd source's fd is");
_Static_assert(sizeof(((rl__fdstate *)0)->fd) == sizeof(int), "an fd source's fd is an int");
_Static_assert(RL__FD_OWNER_SIZE + RL__FDSOURCE_SIZE == 208, "an fd source and its owner: one block of 208 bytes");

const rl__class rl__fd_class = {"RLFileDescriptor", fd_finalize, NULL, fd_describe};

static bool fd_ok(RLFileDescriptorRef f, const char *fn) { return rl__object_check(f, &rl__fd_class, fn); }

bool rl__fdsrc_init(void *at, int fd, const void *owner, const rl__callout_owner *how, const char *fn) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "%d is not an open file descriptor", fd);
        return false;
    }
    if ((const char *)at != (const char *)owner + RL__FD_OWNER_SIZE)
        abort(); /* rl__fdsrc_owner finds the owner there */
    if (how) {
        const rl__callout_owner *was = __atomic_load_n(&rl__fd_part_how, __ATOMIC_RELAXED);
        if (was && was != how)
            abort(); /* rl__fd_owner_how: one how for every such owner */
        if (!was)
            __atomic_store_n(&rl__fd_part_how, how, __ATOMIC_RELAXED);
    }
    struct RLRunLoopSource *s = at;
    rl__object_init_part(s, &rl__source_class);
    atomic_store_explicit(&s->base.rc, 0, memory_order_relaxed);
    atomic_store_explicit(&s->base.magic, RL__MAGIC_ASLEEP, memory_order_relaxed);
    rl__fdstate *f = rl__fdst(s);
    f->fd = fd;
    f->dev = rl__fd_dev32(st.st_dev);
    f->ino = st.st_ino;
    f->valid = true;
    return true;
}

RLFileDescriptorRef RLFileDescriptorCreate(RLAllocatorRef allocator, RLFileDescriptorNativeDescriptor fd,
                                           bool closeOnInvalidate, RLFileDescriptorCallBack callout,
                                           const RLFileDescriptorContext *context) {
    const char *fn = __func__;
    if (!callout) {
        rl__fail(kRLErrorInvalidArgument, fn, "NULL callout");
        return NULL;
    }
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "%d is not an open file descriptor", fd);
        return NULL;
    }
    if (context && context->version != 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)", context->version);
        return NULL;
    }
    struct RLFileDescriptor *f = rl__object_alloc_packed(&rl__fd_class, RL__FD_OWNER_SIZE + RL__FDSOURCE_SIZE, fn);
    if (!f)
        return NULL;
    if (!rl__fdsrc_init(rl__fd_source(f), fd, f, NULL, fn)) { /* its fd closed meanwhile */
        RLRelease(f);
        return NULL;
    }
    f->ctx.callout = callout;
    if (context) {
        f->ctx = (rl__fdctx){context->retain, context->release, context->copyDescription, 0, NULL, NULL, callout};
        f->ctx.info = context->retain ? (void *)context->retain(context->info) : context->info;
    }
    f->ctx.owner_close = closeOnInvalidate ? 1u : 0u; /* no owner yet (rl__fd_set_owner) */
    return f;
}

RLFileDescriptorNativeDescriptor RLFileDescriptorGetNativeDescriptor(RLFileDescriptorRef f) {
    return fd_ok(f, __func__) ? rl__fdst(rl__fd_source(f))->fd : -1;
}

bool RLFileDescriptorGetContext(RLFileDescriptorRef f, RLFileDescriptorContext *context) {
    const char *fn = __func__;
    if (!fd_ok(f, fn))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL context");
    *context = (RLFileDescriptorContext){0, f->ctx.info, f->ctx.retain, f->ctx.release, f->ctx.copyDescription};
    return true;
}

/* Takes a reference on an awake source that may be on its way out (its
 * count may already have reached zero while its finalizer waits for its
 * item lock); false on an asleep one (no count). */
static bool try_retain(struct RLRunLoopSource *s) {
    long rc = atomic_load(&s->base.rc);
    while (rc > 0) {
        if (atomic_compare_exchange_weak(&s->base.rc, &rc, rc + 1))
            return true;
    }
    return false;
}

bool rl__fdsrc_set_enabled(RLRunLoopSourceRef s, RLOptionFlags types, bool on, const char *fn) {
    RLOptionFlags known = kRLFileDescriptorReadCallBack | kRLFileDescriptorWriteCallBack;
    if (types & ~known)
        return rl__fail(kRLErrorInvalidArgument, fn, "unknown callback types 0x%lx", types & ~known);
    rl__fdstate *f = rl__fdst(s);
    rl__olock_lock(&s->lock);
    bool ok = f->valid;
    bool resync = false, borrowed = false;
    if (ok && !(on && rl__peek(f->stale))) {
        RLOptionFlags was = on ? atomic_fetch_or_explicit(&f->enabled, types, memory_order_relaxed)
                               : atomic_fetch_and_explicit(&f->enabled, ~types, memory_order_relaxed);
        /* Whoever changes these bits re-arms the loops after (here, or the
         * loop that cleared what it delivered), so a call that changes
         * none (an RLSocket disabling, after each callout, what it does
         * not want) has nothing to re-arm. A stale fd (its bits cleared
         * by one loop) re-arms them all, as before. An asleep source is
         * in no loop: nothing to re-arm. */
        bool changed = (on ? (was & types) != types : (was & types) != 0) || rl__peek(f->stale);
        /* A callout enabling its own fd borrows the reference its loop
         * keeps on the source until the callout returns. */
        resync = changed && ((borrowed = rl__fd_callout_running(s)) || try_retain(s));
    }
    rl__olock_unlock(&s->lock);
    if (resync) {
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
    return fd_ok(f, __func__) && rl__fdsrc_set_enabled(rl__fd_source(f), types, true, __func__);
}

bool RLFileDescriptorDisableCallBacks(RLFileDescriptorRef f, RLOptionFlags types) {
    return fd_ok(f, __func__) && rl__fdsrc_set_enabled(rl__fd_source(f), types, false, __func__);
}

bool rl__fdsrc_invalidate(RLRunLoopSourceRef s) {
    rl__defer d;
    rl__defer_init(&d);
    rl__fdstate *f = rl__fdst(s);
    rl__olock_lock(&s->lock);
    bool was = f->valid;
    bool awake = false;
    if (was) {
        atomic_store_explicit(&f->enabled, 0, memory_order_relaxed);
        awake = try_retain(s);
        rl__poke(f->valid, false);
    }
    rl__olock_unlock(&s->lock);
    if (awake) {
        rl__source_invalidate(s, &d); /* leaves every loop */
        rl__defer_release(&d, s);
    }
    rl__defer_run(&d);
    return was;
}

bool RLFileDescriptorInvalidate(RLFileDescriptorRef f) {
    if (!fd_ok(f, __func__))
        return false;
    struct RLRunLoopSource *s = rl__fd_source(f);
    int stale = rl__peek(rl__fdst(s)->stale);
    if (rl__fdsrc_invalidate(s)) {
        fd_close_own(f, stale);
        if (f->ctx.release)
            f->ctx.release(f->ctx.info);
    }
    return true;
}

bool RLFileDescriptorIsValid(RLFileDescriptorRef f) {
    if (!fd_ok(f, __func__))
        return false;
    struct RLRunLoopSource *s = rl__fd_source(f);
    rl__olock_lock(&s->lock);
    bool v = rl__fdst(s)->valid;
    rl__olock_unlock(&s->lock);
    return v;
}

RLRunLoopSourceRef rl__fdsrc_wake(RLRunLoopSourceRef s, RLIndex order, const char *fn) {
    for (;;) {
        rl__olock_lock(&s->lock);
        if (!rl__fdst(s)->valid) {
            rl__olock_unlock(&s->lock);
            rl__fail(kRLErrorInvalidObject, fn, "the descriptor object has been invalidated");
            return NULL;
        }
        uint32_t magic = atomic_load_explicit(&s->base.magic, memory_order_relaxed);
        if (magic == RL__MAGIC_ALIVE && try_retain(s)) {
            rl__olock_unlock(&s->lock); /* awake: one source per descriptor */
            return s;
        }
        if (magic == RL__MAGIC_ASLEEP) {
            /* Its owner is the caller's to pass, so alive: the source holds
             * a reference on it from now until its own last one goes. */
            RLRetain(rl__fdsrc_owner(s));
            s->order = order;
            s->valid = true;
            s->signalled = false;
            s->inline_used = false;
            s->membs.first = NULL;
            atomic_store_explicit(&s->base.rc, 1, memory_order_relaxed);
            atomic_store_explicit(&s->base.magic, RL__MAGIC_ALIVE, memory_order_release);
            rl__olock_unlock(&s->lock);
            return s;
        }
        /* Its last reference just went: its finalizer is on its way to put
         * it to sleep (under this lock). */
        rl__olock_unlock(&s->lock);
        sched_yield();
    }
}

RLRunLoopSourceRef RLFileDescriptorCreateRunLoopSource(RLAllocatorRef allocator, RLFileDescriptorRef f,
                                                       RLIndex order) {
    const char *fn = __func__;
    if (!fd_ok(f, fn))
        return NULL;
    return rl__fdsrc_wake(rl__fd_source(f), order, fn);
}

/* Asked between the pieces of one wake (an RLSocket's Data chunks, its
 * accepted connections), so that a callback that removes the source from
 * the mode, invalidates it or stops the run gets nothing more in this
 * wake; the loop's innermost run is the one making the callout. */
bool rl__fd_served_now(RLRunLoopSourceRef s) {
    RLRunLoopRef rl = rl__tls;
    if (!rl)
        return false;
    rl__loop_lock(rl);
    rl__mode *m = rl->frame && !rl->frame->stopped ? rl->frame->mode : NULL; /* modes live as long as the loop */
    rl__loop_unlock(rl);
    if (!m)
        return false;
    bool borrowed = rl__fd_callout_running(s);
    if (!borrowed && !try_retain(s))
        return false; /* asleep: in no loop */
    rl__olock_lock(&s->lock);
    bool served = rl__fdst(s)->valid && s->valid && rl__memb_in_mode(s, RL_KIND_SOURCE, m);
    rl__olock_unlock(&s->lock);
    if (!borrowed)
        rl__release_raw(s);
    return served;
}

RLOptionFlags rl__fd_enabled(RLRunLoopSourceRef s) {
    return atomic_load_explicit(&rl__fdst(s)->enabled, memory_order_relaxed);
}

void rl__fd_set_kept(RLRunLoopSourceRef s, RLOptionFlags types) {
    atomic_store_explicit(&rl__fdst(s)->kept, (uint8_t)types, memory_order_relaxed);
}

bool rl__fd_report_quiet(RLRunLoopSourceRef s) {
    RLRunLoopRef rl = rl__tls;
    return rl && rl->src_in_callout == s && rl->fd_quiet;
}

struct rl__rxq *rl__fd_recv_into(RLRunLoopSourceRef s, size_t want, bool *later) {
    RLRunLoopRef rl = rl__tls;
    *later = false;
    if (!rl || rl->src_in_callout != s || !rl__of_this_process(rl))
        return NULL;
    struct rl__rxq *q = rl__poll_recv_into(&rl->kern, rl__fdst(s)->fd, want);
    *later = !q && rl__poll_may_upgrade(&rl->kern);
    return q;
}

void rl__fd_recv_self(RLRunLoopSourceRef s, bool self) {
    RLRunLoopRef rl = rl__tls;
    if (rl && rl->src_in_callout == s && rl__of_this_process(rl))
        rl__poll_recv_self(&rl->kern, rl__fdst(s)->fd, self);
}

bool rl__fd_ring_sends(RLRunLoopSourceRef s) {
    RLRunLoopRef rl = rl__tls;
    return rl && rl->src_in_callout == s && rl__of_this_process(rl) && rl__poll_sends(&rl->kern);
}

bool rl__fd_ring_flush(struct rl__txq *q) {
    RLRunLoopRef rl = rl__tls;
    if (!rl || !rl__of_this_process(rl) || __atomic_load_n(&q->owner, __ATOMIC_RELAXED) != &rl->kern)
        return false;
    rl__poll_flush(&rl->kern);
    return true;
}

int rl__fd_send_via(RLRunLoopSourceRef s, struct rl__txq *q, const void *bytes, size_t n, double timeout) {
    RLRunLoopRef rl = rl__tls;
    if (!rl || !rl__of_this_process(rl))
        return 0;
    const void *owner = __atomic_load_n(&q->owner, __ATOMIC_RELAXED); /* set once, by the owner's thread */
    if (owner != &rl->kern && (owner || rl->src_in_callout != s))
        return 0;
    return rl__poll_send(&rl->kern, q, bytes, n, rl->frame != NULL, timeout);
}

size_t rl__fd_pass_left(void) {
    RLRunLoopRef rl = rl__tls;
    return rl ? rl->fd_pass_left : 0;
}
