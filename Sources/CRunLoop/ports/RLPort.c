/*
 * RLPort.c — local ports and port messages (RLPort.h).
 *
 * A port is a FIFO of message records behind one mutex, and a version-0
 * run-loop source whose schedule/cancel callbacks tell the port which loops
 * it is in. A send appends a record to the port's array of pointer-sized
 * slots (the message's id and count, its reply port, then its components,
 * retained: no object is made and nothing is copied), and
 * only the send that makes the queue non-empty signals the source and wakes
 * those loops (a wake-up of an awake loop is two atomic operations,
 * RLRunLoop.c). The source's perform swaps the slot array for its spare
 * in one lock round and hands the records to the handler with no lock held,
 * each dressed as an RLPortMessage: one message object serves the whole
 * batch, refilled for each record, unless a handler keeps (retains) it —
 * then that one is the handler's and the next record gets a new one. So a
 * message costs its sender a lock round and the retains of its parts, and
 * no allocation, no system call and no reference to the port itself once
 * the arrays have grown to the traffic. Senders that find the queue full
 * wait on a condition variable until the drain makes room, the port is
 * invalidated, or their limit date passes.
 */
#include "RLDataInternal.h"
#include "RLLockInternal.h"
#include "rl_fdobj.h"
#include "rl_weak.h"

#include <crunloop/RLPort.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopSource.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Refilling one message object for a batch, instead of a new object per
 * record, is a speed trick (RL_TRICK_PORT_REUSE, internal.h): its plain
 * twin makes a message per record. */

enum {
    RL_PORT_DEFAULT_LIMIT = 1024,
    RL_PORT_INLINE_LOOPS = 4,
    RL_PORT_INLINE_COMPS = 3, /* components a message object holds without an array of its own */
    RL_PORT_FIRST_SLOTS = 64,
    RL_PORT_KEEP_SLOTS = 16384, /* a drained array larger than this is not kept as the spare */
};

/* The queue is an array of these: a message is a header slot, its reply
 * port, then its components (2 + count slots; 16 bytes for a message
 * without components, 24 with one), whose references pass to the message
 * object that delivers it. */
typedef union port_slot {
    struct {
        uint32_t msgid;
        uint32_t count;
    } h;
    struct RLPort *reply; /* retained, or NULL */
    RLTypeRef comp;       /* retained */
} port_slot;

struct RLPortMessage {
    rl__object base;
    uint32_t msgid;
    struct RLPort *send_port; /* retained, or NULL */
    struct RLPort *recv_port; /* retained, or NULL; borrowed while the drain delivers it */
    bool recv_borrowed;
    RLIndex count;
    RLTypeRef *comps; /* retained: `inl`, or a malloc'ed array (comps_heap) */
    bool comps_heap;
    RLTypeRef inl[RL_PORT_INLINE_COMPS];
};

typedef struct port_loop {
    RLRunLoopRef rl; /* retained */
    unsigned modes;  /* memberships of the source in rl */
} port_loop;

struct RLPort {
    rl__object base;
    /* The queue, the loops and the state: a futex mutex whose uncontended
     * lock and unlock are inline (RLLockInternal.h); never held while user
     * code runs. */
    rl__mutex mu;
    /* Senders that wait for room sleep on `room` under `wait_mu`, apart
     * from the queue's lock, so that the common send never touches them:
     * a drain that made room broadcasts only if `waiting` says someone
     * waits (both sides use sequentially consistent atomics: a sender
     * either sees the room or is seen waiting). */
    pthread_mutex_t wait_mu;
    pthread_cond_t room;
    _Atomic unsigned waiting;
    /* Valid until invalidated (read without the lock by the drain and the
     * senders); the invalidation callback called once, then the context's
     * info released once, after the drain that was handed it (rl_fdobj.h;
     * a port has no handle of its own). */
    rl__fdobj life;
    /* The queue: `queued` messages in slots[0, nslots), in send order, and
     * a spare array the drain hands back, so that steady traffic allocates
     * nothing. */
    port_slot *slots, *spare;
    RLIndex queued, nslots, cap, spare_cap, limit;
    RLPortCallBack callout;
#if __BLOCKS__
    void (^handler)(RLPortMessageRef);
#endif
    RLPortContext ctx;
    RLPortInvalidationCallBack inval;
    RLRunLoopSourceRef source; /* created on first use */
    rl__weak *self;            /* what the source's context points at */
    port_loop *loops;
    size_t nloops, caploops;
    port_loop inline_loops[RL_PORT_INLINE_LOOPS];
};

/* The release of p's info (rl__fdobj_releaser): its context's. */
static rl__fdobj_release_fn port_releaser(const rl__fdobj *o) {
    const struct RLPort *p = (const void *)((const char *)o - offsetof(struct RLPort, life));
    return p->ctx.release;
}

static inline void port_lock(struct RLPort *p) {
    if (RL__UNLIKELY(!rl__mutex_trylock(&p->mu)))
        rl__mutex_lock_slow(&p->mu, NULL);
}
static inline void port_unlock(struct RLPort *p) { rl__mutex_unlock(&p->mu); }

/* Wakes the senders waiting for room, if any. */
static void port_room(struct RLPort *p) {
    if (atomic_load(&p->waiting) == 0)
        return;
    pthread_mutex_lock(&p->wait_mu);
    pthread_cond_broadcast(&p->room);
    pthread_mutex_unlock(&p->wait_mu);
}

/* ---- messages ---- */

/* Lets go of a message's parts; it holds none afterwards. */
static void msg_clear(struct RLPortMessage *m) {
    for (RLIndex i = 0; i < m->count; i++)
        RLRelease(m->comps[i]);
    if (m->comps_heap)
        free(m->comps);
    m->comps = m->inl;
    m->comps_heap = false;
    m->count = 0;
    if (m->send_port)
        RLRelease(m->send_port);
    m->send_port = NULL;
    if (m->recv_port && !m->recv_borrowed)
        RLRelease(m->recv_port);
    m->recv_port = NULL;
    m->recv_borrowed = false;
}

static void msg_finalize(void *obj) { msg_clear(obj); }

/* Lets go of the references of the message at s; returns the next one. */
static port_slot *slots_clear_one(port_slot *s) {
    uint32_t count = s[0].h.count;
    if (s[1].reply)
        RLRelease(s[1].reply);
    for (uint32_t i = 0; i < count; i++)
        RLRelease(s[2 + i].comp);
    return s + 2 + count;
}

static void slots_clear(port_slot *s, RLIndex n) {
    for (port_slot *end = s + n; s < end;)
        s = slots_clear_one(s);
}

static char *msg_describe(const void *obj) {
    const struct RLPortMessage *m = obj;
    char *s = NULL;
    if (asprintf(&s, "<RLPortMessage %p>{msgid = %u, %ld component(s)}", obj, m->msgid, (long)m->count) < 0)
        return NULL;
    return s;
}

static const rl__class port_message_class = {"RLPortMessage", msg_finalize, NULL, msg_describe};

static void port_finalize(void *obj);
static bool port_can_destroy(void *obj);
static char *port_describe(const void *obj);
static const rl__class port_class = {"RLPort", port_finalize, port_can_destroy, port_describe};

static bool port_ok(RLPortRef p, const char *fn) { return rl__object_check(p, &port_class, fn); }
static bool msg_ok(RLPortMessageRef m, const char *fn) { return rl__object_check(m, &port_message_class, fn); }

static bool is_port(const void *obj) {
    const rl__object *o = obj;
    return o && atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE && rl__is_class(o, &port_class);
}

static bool comps_ok(const RLTypeRef *comps, RLIndex count, const char *fn) {
    if (count < 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "negative component count %ld", (long)count);
    if (count > 0 && !comps)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL components with count %ld", (long)count);
    if (count > (RLIndex)(UINT32_MAX / 2)) /* a queued message counts them in 32 bits */
        return rl__fail(kRLErrorInvalidArgument, fn, "%ld components are too many", (long)count);
    for (RLIndex i = 0; i < count; i++)
        if (!rl__is_data(comps[i]) && !is_port(comps[i]))
            return rl__fail(kRLErrorInvalidObject, fn, "component %ld (%p) is neither a live RLData nor an RLPort",
                            (long)i, comps[i]);
    return true;
}

/* An empty message (no parts). NULL (error set) if memory is short. */
static struct RLPortMessage *msg_alloc(const char *fn) {
    struct RLPortMessage *m = rl__object_alloc(&port_message_class, sizeof *m, fn);
    if (m)
        m->comps = m->inl;
    return m;
}

static struct RLPortMessage *msg_new(struct RLPort *send, struct RLPort *recv, uint32_t msgid, const RLTypeRef *comps,
                                     RLIndex count, const char *fn) {
    RLTypeRef *heap = NULL;
    if (count > RL_PORT_INLINE_COMPS && !(heap = malloc((size_t)count * sizeof *heap)))
        return rl__fail(kRLErrorNoMemory, fn, "out of memory"), NULL;
    struct RLPortMessage *m = msg_alloc(fn);
    if (!m) {
        free(heap);
        return NULL;
    }
    m->msgid = msgid;
    m->send_port = send ? (struct RLPort *)RLRetain(send) : NULL;
    m->recv_port = recv ? (struct RLPort *)RLRetain(recv) : NULL;
    if (heap) {
        m->comps = heap;
        m->comps_heap = true;
    }
    for (RLIndex i = 0; i < count; i++)
        m->comps[i] = RLRetain(comps[i]);
    m->count = count;
    return m;
}

/* Retains a message's parts (for the queue, which the send then fills). */
static void refs_retain(const RLTypeRef *comps, RLIndex count, struct RLPort *reply) {
    for (RLIndex i = 0; i < count; i++)
        RLRetain(comps[i]);
    if (reply)
        RLRetain(reply);
}

static void refs_release(const RLTypeRef *comps, RLIndex count, struct RLPort *reply) {
    for (RLIndex i = 0; i < count; i++)
        RLRelease(comps[i]);
    if (reply)
        RLRelease(reply);
}

/* Moves the queued message at s into message m (which holds no parts): m
 * now owns its references. Returns the next queued message, or NULL if m
 * cannot hold the parts (no memory: they are released, undelivered). */
static port_slot *msg_take_slots(struct RLPortMessage *m, port_slot *s, struct RLPort *recv) {
    uint32_t count = s[0].h.count;
    if (count > RL_PORT_INLINE_COMPS) {
        RLTypeRef *heap = malloc((size_t)count * sizeof *heap);
        if (!heap) {
            slots_clear_one(s);
            return NULL;
        }
        m->comps = heap;
        m->comps_heap = true;
    }
    m->msgid = s[0].h.msgid;
    m->send_port = s[1].reply;
    m->recv_port = recv;
    m->recv_borrowed = true;
    m->count = count;
    for (uint32_t i = 0; i < count; i++)
        m->comps[i] = s[2 + i].comp;
    return s + 2 + count;
}

RLPortMessageRef RLPortMessageCreate(RLAllocatorRef allocator, RLPortRef sendPort, RLPortRef receivePort,
                                     const RLTypeRef *components, RLIndex count) {
    if ((sendPort && !port_ok(sendPort, __func__)) || (receivePort && !port_ok(receivePort, __func__)))
        return NULL;
    if (!comps_ok(components, count, __func__))
        return NULL;
    /* Foundation's view: send_port is where the message goes, recv_port
     * where replies go. A queued message is stored as its receiver sees
     * it (send_port: the reply port; recv_port: the port it arrives on),
     * so sending either kind goes to send_port and replies to recv_port. */
    return msg_new(sendPort, receivePort, 0, components, count, __func__);
}

uint32_t RLPortMessageGetMsgid(RLPortMessageRef m) { return msg_ok(m, __func__) ? m->msgid : 0; }

bool RLPortMessageSetMsgid(RLPortMessageRef m, uint32_t msgid) {
    if (!msg_ok(m, __func__))
        return false;
    m->msgid = msgid;
    return true;
}

RLIndex RLPortMessageGetComponentCount(RLPortMessageRef m) { return msg_ok(m, __func__) ? m->count : -1; }

RLTypeRef RLPortMessageGetComponent(RLPortMessageRef m, RLIndex i) {
    if (!msg_ok(m, __func__))
        return NULL;
    if (i < 0 || i >= m->count)
        return rl__fail(kRLErrorInvalidArgument, __func__, "component %ld of %ld", (long)i, (long)m->count), NULL;
    return m->comps[i];
}

RLPortRef RLPortMessageGetSendPort(RLPortMessageRef m) { return msg_ok(m, __func__) ? m->send_port : NULL; }
RLPortRef RLPortMessageGetReceivePort(RLPortMessageRef m) { return msg_ok(m, __func__) ? m->recv_port : NULL; }

/* ---- ports ---- */

static void port_finalize(void *obj) {
    struct RLPort *p = obj;
    rl__fdobj_finalize(&p->life, port_releaser); /* released by the invalidation that precedes this, or here */
#if __BLOCKS__
    if (p->handler)
        _Block_release(p->handler);
#endif
    if (p->self)
        rl__weak_release(p->self);
    if (p->loops != p->inline_loops)
        free(p->loops);
    free(p->slots);
    free(p->spare);
    pthread_cond_destroy(&p->room);
    pthread_mutex_destroy(&p->wait_mu);
}

static char *port_describe(const void *obj) {
    struct RLPort *p = (struct RLPort *)obj;
    port_lock(p);
    char *s = NULL;
    int r = asprintf(&s, "<RLPort %p>{%s%ld queued of %ld, in %zu loop(s)}", obj,
                     rl__fdobj_valid(&p->life) ? "" : "invalid, ", (long)p->queued, (long)p->limit, p->nloops);
    port_unlock(p);
    return r < 0 ? NULL : s;
}

static struct RLPort *port_new(const char *fn) {
    struct RLPort *p = rl__object_alloc(&port_class, sizeof *p, fn);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->wait_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->room, &ca);
    pthread_condattr_destroy(&ca);
    p->limit = RL_PORT_DEFAULT_LIMIT;
    p->loops = p->inline_loops;
    p->caploops = RL_PORT_INLINE_LOOPS;
    p->self = rl__weak_new(p);
    if (!p->self) {
        RLRelease(p);
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    rl__fdobj_init(&p->life, -1);
    return p;
}

RLPortRef RLPortCreate(RLAllocatorRef allocator, RLPortCallBack callout, const RLPortContext *context) {
    if (context && context->version != 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, "context version %ld is not supported (use 0)",
                        (long)context->version), NULL;
    struct RLPort *p = port_new(__func__);
    if (!p)
        return NULL;
    p->callout = callout;
    if (context) {
        p->ctx = *context;
        if (p->ctx.retain)
            p->ctx.info = (void *)p->ctx.retain(p->ctx.info);
        rl__fdobj_set_context(&p->life, p->ctx.info, p->ctx.release);
    }
    return p;
}

#if __BLOCKS__
RLPortRef RLPortCreateWithHandler(RLAllocatorRef allocator, void (^handler)(RLPortMessageRef message)) {
    struct RLPort *p = port_new(__func__);
    if (!p)
        return NULL;
    if (handler)
        p->handler = _Block_copy(handler);
    return p;
}
#endif

bool RLPortGetContext(RLPortRef p, RLPortContext *context) {
    if (!port_ok(p, __func__))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL context");
    *context = p->ctx;
    return true;
}

bool RLPortSetQueueLimit(RLPortRef p, RLIndex messages) {
    if (!port_ok(p, __func__))
        return false;
    if (messages < 1)
        return rl__fail(kRLErrorInvalidArgument, __func__, "a queue limit is at least 1, not %ld", (long)messages);
    port_lock(p);
    p->limit = messages;
    port_unlock(p);
    port_room(p); /* a raised limit lets waiting senders in */
    return true;
}

RLIndex RLPortGetQueuedCount(RLPortRef p) {
    if (!port_ok(p, __func__))
        return -1;
    port_lock(p);
    RLIndex n = p->queued;
    port_unlock(p);
    return n;
}

bool RLPortIsValid(RLPortRef p) {
    if (!port_ok(p, __func__))
        return false;
    port_lock(p);
    bool v = rl__fdobj_valid(&p->life);
    port_unlock(p);
    return v;
}

static void invalidate(struct RLPort *p) {
    port_lock(p);
    RLPortInvalidationCallBack cb = p->inval;
    rl__fdobj_end end;
    if (!rl__fdobj_invalidate(&p->life, cb ? RL_FDOBJ_CALLBACK : 0, &end, port_releaser)) {
        port_unlock(p);
        return;
    }
    port_slot *q = p->slots;
    RLIndex nq = p->nslots;
    p->slots = NULL;
    p->queued = p->nslots = p->cap = 0;
    RLRunLoopSourceRef source = p->source;
    p->source = NULL;
    port_unlock(p);
    port_room(p);
    rl__weak_cut(p->self);
    slots_clear(q, nq);
    free(q);
    if (source) {
        RLRunLoopSourceInvalidate(source);
        RLRelease(source);
    }
    /* The link is cut, so the source's cancel callbacks did not touch the
     * loop list: let go of the loops here. Releasing a loop runs no user
     * code and never calls back into the port, so the lock may be held. */
    port_lock(p);
    for (size_t i = 0; i < p->nloops; i++)
        RLRelease(p->loops[i].rl);
    p->nloops = 0;
    port_unlock(p);
    if (end.call_inval)
        cb(p, p->ctx.info);
    rl__fdobj_finish(&end); /* then the info, once (or after the drain that runs with it) */
}

static bool port_can_destroy(void *obj) {
    invalidate(obj);
    return true;
}

bool RLPortInvalidate(RLPortRef p) {
    if (!port_ok(p, __func__))
        return false;
    RLRetain(p);
    invalidate(p);
    RLRelease(p);
    return true;
}

bool RLPortSetInvalidationCallBack(RLPortRef p, RLPortInvalidationCallBack callout) {
    if (!port_ok(p, __func__))
        return false;
    port_lock(p);
    bool valid = rl__fdobj_valid(&p->life);
    if (valid)
        p->inval = callout;
    port_unlock(p);
    if (!valid && callout)
        callout(p, p->ctx.info);
    return true;
}

/* ---- the source ---- */

static void src_schedule(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    struct RLPort *p = rl__weak_get(info);
    if (!p)
        return;
    port_lock(p);
    size_t i = 0;
    while (i < p->nloops && p->loops[i].rl != rl)
        i++;
    if (i == p->nloops) {
        if (p->nloops == p->caploops) {
            size_t cap = p->caploops * 2;
            port_loop *a = malloc(cap * sizeof *a);
            if (!a) { /* the loop is not woken by sends; it still sees the signal when it next runs */
                port_unlock(p);
                RLRelease(p);
                return;
            }
            memcpy(a, p->loops, p->nloops * sizeof *a);
            if (p->loops != p->inline_loops)
                free(p->loops);
            p->loops = a;
            p->caploops = cap;
        }
        p->loops[p->nloops++] = (port_loop){(RLRunLoopRef)RLRetain(rl), 0};
    }
    p->loops[i].modes++;
    bool pending = p->queued > 0;
    port_unlock(p);
    if (pending) { /* sent before the port was in any loop */
        RLRunLoopSourceRef s = p->source;
        if (s)
            RLRunLoopSourceSignal(s);
    }
    RLRelease(p);
}

static void src_cancel(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    /* During invalidation the link is cut already: invalidate() lets go of
     * the loops itself. */
    struct RLPort *p = rl__weak_get(info);
    if (!p)
        return;
    RLRunLoopRef drop = NULL;
    port_lock(p);
    for (size_t i = 0; i < p->nloops; i++)
        if (p->loops[i].rl == rl) {
            if (--p->loops[i].modes == 0) {
                drop = rl;
                p->loops[i] = p->loops[--p->nloops];
            }
            break;
        }
    port_unlock(p);
    if (drop)
        RLRelease(drop);
    RLRelease(p);
}

static void deliver(struct RLPort *p, struct RLPortMessage *m) {
#if __BLOCKS__
    if (p->handler) {
        p->handler(m);
        return;
    }
#endif
    if (p->callout)
        p->callout(p, m, p->ctx.info);
}

/* After a handler ran: whether anyone but the drain holds message m.
 * Acquire: a holder that released it meanwhile is done with its fields. */
static bool msg_kept(struct RLPortMessage *m) {
    return (atomic_load_explicit(&m->base.rc, memory_order_acquire) & RL__RC_MASK) != 1;
}

static void src_perform(void *info) {
    struct RLPort *p = rl__weak_get(info);
    if (!p)
        return;
    /* Everything queued now, in one lock round (the record array swapped
     * for the spare); what comes while these run waits for the next pass
     * (as perform requests do), so a flood on one port does not keep the
     * loop from its other sources. */
    port_lock(p);
    port_slot *batch = p->slots;
    RLIndex n = p->nslots, cap = p->cap;
    p->slots = p->spare;
    p->cap = p->spare_cap;
    p->spare = NULL;
    p->spare_cap = 0;
    p->queued = p->nslots = 0;
    /* Counted while the handlers run with the info: an invalidation
     * meanwhile leaves its release to the end of the batch. */
    bool entered = rl__fdobj_enter(&p->life);
    port_unlock(p);
    port_room(p);
    /* The port is held (rl__weak_get) for the whole batch, so a message
     * borrows its receive port while it is delivered; a handler that keeps
     * the message makes that reference its own. */
    struct RLPortMessage *m = NULL;
    port_slot *at = batch, *end = batch + n;
    while (at < end) {
        if (!m && !(m = msg_alloc("RLPort"))) /* no memory: the rest are released undelivered */
            break;
        port_slot *next = msg_take_slots(m, at, p);
        if (!next) { /* no memory for its parts: that one is lost */
            at += 2 + at[0].h.count;
            continue;
        }
        at = next;
        if (rl__fdobj_valid(&p->life))
            deliver(p, m);
        if (RL_TRICK_PORT_REUSE && !msg_kept(m)) {
            msg_clear(m); /* refilled for the next record */
            continue;
        }
        RLRetain(p);
        m->recv_borrowed = false;
        RLRelease(m);
        m = NULL;
    }
    slots_clear(at, end - at);
    if (m)
        RLRelease(m);
    /* The drained array becomes the spare, unless a spare came back first
     * or it grew past what steady traffic needs. */
    rl__fdobj_end left = {.fd = -1};
    port_lock(p);
    if (!p->spare && cap <= RL_PORT_KEEP_SLOTS) {
        p->spare = batch;
        p->spare_cap = cap;
        batch = NULL;
    }
    if (entered)
        rl__fdobj_leave(&p->life, &left, port_releaser);
    port_unlock(p);
    rl__fdobj_finish(&left);
    free(batch);
    RLRelease(p);
}

RLRunLoopSourceRef RLPortCreateRunLoopSource(RLAllocatorRef allocator, RLPortRef p, RLIndex order) {
    if (!port_ok(p, __func__))
        return NULL;
    port_lock(p);
    if (!rl__fdobj_valid(&p->life)) {
        port_unlock(p);
        return rl__fail(kRLErrorInvalidObject, __func__, "the port is invalid"), NULL;
    }
    if (p->source) {
        RLRunLoopSourceRef s = (RLRunLoopSourceRef)RLRetain(p->source);
        port_unlock(p);
        return s;
    }
    RLRunLoopSourceContext ctx = {0};
    ctx.info = p->self;
    ctx.retain = rl__weak_retain;
    ctx.release = rl__weak_release;
    ctx.schedule = src_schedule;
    ctx.cancel = src_cancel;
    ctx.perform = src_perform;
    /* Created under the port's lock: the source calls none of the
     * callbacks above until it is added to a loop. */
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, order, &ctx);
    if (s)
        p->source = (RLRunLoopSourceRef)RLRetain(s);
    port_unlock(p);
    return s;
}

static bool port_membership(RLRunLoopRef rl, RLPortRef p, RLRunLoopMode mode, int op, const char *fn) {
    if (!port_ok(p, fn))
        return false;
    RLRunLoopSourceRef s;
    if (op == 0) {
        s = RLPortCreateRunLoopSource(NULL, p, 0);
    } else {
        port_lock(p);
        s = p->source ? (RLRunLoopSourceRef)RLRetain(p->source) : NULL;
        port_unlock(p);
        if (!s) /* never in any loop: nothing to remove (harmless, as RLRunLoopRemoveSource) */
            return op == 1;
    }
    if (!s)
        return false;
    bool ok = op == 0 ? RLRunLoopAddSource(rl, s, mode)
                      : op == 1 ? RLRunLoopRemoveSource(rl, s, mode) : RLRunLoopContainsSource(rl, s, mode);
    RLRelease(s);
    return ok;
}

bool RLRunLoopAddPort(RLRunLoopRef rl, RLPortRef p, RLRunLoopMode mode) { return port_membership(rl, p, mode, 0, __func__); }
bool RLRunLoopRemovePort(RLRunLoopRef rl, RLPortRef p, RLRunLoopMode mode) {
    return port_membership(rl, p, mode, 1, __func__);
}
bool RLRunLoopContainsPort(RLRunLoopRef rl, RLPortRef p, RLRunLoopMode mode) {
    return port_membership(rl, p, mode, 2, __func__);
}

/* ---- sending ---- */

/* Waits (without the queue's lock) until the queue has room, the port is
 * invalid, or `limit` passes. Called with nothing held; returns with the
 * queue's lock held when there is room (true), without it otherwise. */
static bool wait_for_room(struct RLPort *p, RLAbsoluteTime limit, const char *fn) {
    struct timespec deadline = rl__monotonic_deadline_for_date(limit);
    pthread_mutex_lock(&p->wait_mu);
    atomic_fetch_add(&p->waiting, 1);
    int outcome; /* 1: room (queue locked), 0: invalid, -1: timed out */
    bool timed_out = false;
    for (;;) {
        port_lock(p);
        if (!rl__fdobj_valid(&p->life)) {
            port_unlock(p);
            outcome = 0;
            break;
        }
        if (p->queued < p->limit) {
            outcome = 1; /* the queue's lock stays held for the caller */
            break;
        }
        port_unlock(p);
        if (timed_out) {
            outcome = -1;
            break;
        }
        timed_out = pthread_cond_timedwait(&p->room, &p->wait_mu, &deadline) == ETIMEDOUT;
    }
    atomic_fetch_sub(&p->waiting, 1);
    pthread_mutex_unlock(&p->wait_mu);
    if (outcome < 0)
        return rl__fail(kRLErrorTimedOut, fn, "the port's queue stayed full (%ld messages) until the limit date",
                        (long)p->limit);
    if (outcome == 0)
        return rl__fail(kRLErrorInvalidObject, fn, "the port is invalid");
    return true;
}

/* Queues a message whose parts the caller retained for it; they pass to
 * the queue (on failure they stay the caller's). Only the message that
 * makes the queue non-empty signals the source and wakes the loops: the
 * others ride on the pass it starts. */
static bool send_refs(struct RLPort *p, uint32_t msgid, const RLTypeRef *comps, RLIndex count, struct RLPort *reply,
                      RLAbsoluteTime limit, const char *fn) {
    port_lock(p);
    if (RL__UNLIKELY(!rl__fdobj_valid(&p->life) || p->queued >= p->limit)) {
        bool invalid = !rl__fdobj_valid(&p->life);
        port_unlock(p);
        if (invalid)
            return rl__fail(kRLErrorInvalidObject, fn, "the port is invalid");
        if (!wait_for_room(p, limit, fn))
            return false;
    }
    /* A queued message does not keep its port alive: the port owns its
     * queue, and a port released with messages queued goes and releases
     * them. */
    RLIndex need = 2 + count;
    if (RL__UNLIKELY(p->nslots + need > p->cap)) {
        RLIndex cap = p->cap ? p->cap * 2 : RL_PORT_FIRST_SLOTS;
        if (cap < p->nslots + need)
            cap = p->nslots + need;
        port_slot *grown = realloc(p->slots, (size_t)cap * sizeof *grown);
        if (!grown) {
            port_unlock(p);
            return rl__fail(kRLErrorNoMemory, fn, "out of memory");
        }
        p->slots = grown;
        p->cap = cap;
    }
    port_slot *at = p->slots + p->nslots;
    at[0].h.msgid = msgid;
    at[0].h.count = (uint32_t)count;
    at[1].reply = reply;
    for (RLIndex i = 0; i < count; i++)
        at[2 + i].comp = comps[i];
    p->nslots += need;
    bool first = ++p->queued == 1;
    RLRunLoopSourceRef s = NULL;
    RLRunLoopRef wake[RL_PORT_INLINE_LOOPS];
    size_t nwake = 0;
    if (first && p->source) {
        s = (RLRunLoopSourceRef)RLRetain(p->source);
        for (size_t i = 0; i < p->nloops && nwake < RL_PORT_INLINE_LOOPS; i++)
            wake[nwake++] = (RLRunLoopRef)RLRetain(p->loops[i].rl);
    }
    size_t more_loops = first && p->source && p->nloops > RL_PORT_INLINE_LOOPS;
    port_unlock(p);
    if (s) {
        RLRunLoopSourceSignal(s);
        RLRelease(s);
    }
    for (size_t i = 0; i < nwake; i++) {
        RLRunLoopWakeUp(wake[i]);
        RLRelease(wake[i]);
    }
    if (more_loops) { /* rare: a port in more than a few loops */
        port_lock(p);
        size_t n = p->nloops;
        RLRunLoopRef *all = malloc(n * sizeof *all);
        for (size_t i = 0; all && i < n; i++)
            all[i] = (RLRunLoopRef)RLRetain(p->loops[i].rl);
        port_unlock(p);
        for (size_t i = 0; all && i < n; i++) {
            RLRunLoopWakeUp(all[i]);
            RLRelease(all[i]);
        }
        free(all);
    }
    return true;
}

bool RLPortSendBeforeDate(RLPortRef p, RLAbsoluteTime limitDate, uint32_t msgid, const RLTypeRef *components,
                          RLIndex count, RLPortRef replyPort) {
    if (!port_ok(p, __func__) || (replyPort && !port_ok(replyPort, __func__)))
        return false;
    if (!rl__date_valid(limitDate))
        return rl__fail(kRLErrorInvalidArgument, __func__, "NaN limit date");
    if (!comps_ok(components, count, __func__))
        return false;
    refs_retain(components, count, replyPort);
    if (!send_refs(p, msgid, components, count, replyPort, limitDate, __func__)) {
        refs_release(components, count, replyPort);
        return false;
    }
    return true;
}

bool RLPortMessageSendBeforeDate(RLPortMessageRef m, RLAbsoluteTime limitDate) {
    if (!msg_ok(m, __func__))
        return false;
    if (!m->send_port)
        return rl__fail(kRLErrorInvalidState, __func__, "the message has no send port to go to");
    if (!rl__date_valid(limitDate))
        return rl__fail(kRLErrorInvalidArgument, __func__, "NaN limit date");
    /* The receiver's view: replies go to the message's receive port. The
     * components are shared (retained), not copied. */
    refs_retain(m->comps, m->count, m->recv_port);
    if (!send_refs(m->send_port, m->msgid, m->comps, m->count, m->recv_port, limitDate, __func__)) {
        refs_release(m->comps, m->count, m->recv_port);
        return false;
    }
    return true;
}
