/*
 * rl_fdobj.h — private: the life every object shares that owns a kernel
 * handle and a user's context and hands both to callouts (RLSocket,
 * RLSignalSource, RLPort, RLMessagePort and RLSocketPort through
 * rl__netport): valid from creation until invalidated, once; at that
 * invalidation the handle is closed and the context's info released,
 * once each, after the owner's invalidation callback (called once), and
 * after the last callout that was handed the info or reads the handle,
 * if some still run; never with the owner's lock held.
 *
 * The owner keeps its own lock (any one lock, always the same): every
 * call below but rl__fdobj_finish and rl__fdobj_finalize is made with it
 * held. What is to be done outside it is handed back in an rl__fdobj_end,
 * which the owner runs (rl__fdobj_finish) once it dropped the lock (and,
 * for an invalidation, after it took its handle out of every loop and
 * called its invalidation callback). `valid` may be read without the
 * lock (rl__fdobj_valid: atomic). The calls that may hand the info over
 * are given the owner's releaser, which names the release function the
 * owner keeps (its context's).
 */
#ifndef CRUNLOOP_RL_FDOBJ_H
#define CRUNLOOP_RL_FDOBJ_H

#include "internal.h"

typedef struct rl__fdobj rl__fdobj;
/* The function that releases an owner's info. */
typedef void (*rl__fdobj_release_fn)(const void *info);
/* Where an owner keeps that function (its context's release, which it
 * keeps anyway): asked only when the info is handed over, so the object
 * holds no copy of it. */
typedef rl__fdobj_release_fn (*rl__fdobj_releaser)(const rl__fdobj *o);

/* 16 bytes (before: 24, with the release function; 32, with a hole; an
 * RLSocket holds one). */
struct rl__fdobj {
    _Atomic bool valid;
    /* Bits of one byte, under the owner's lock. */
    bool inval_called : 1;    /* the invalidation callback was handed out */
    bool close_pending : 1;   /* invalidated while busy: the last callout closes fd */
    bool release_pending : 1; /* likewise releases the info */
    bool owes_release : 1;    /* the info is to be released (its owner's releaser names how), not yet handed over */
    uint16_t busy;            /* callouts running (nested at most that deep) that were handed info or read fd */
    int fd;                   /* the handle it closes, or -1 (none, or not its to close) */
    void *info;               /* the context's info, retained by the owner */
};
_Static_assert(sizeof(rl__fdobj) == 16, "rl__fdobj: 16 bytes");

/* What is left to do once the owner's lock is dropped (rl__fdobj_finish). */
typedef struct rl__fdobj_end {
    int fd; /* to close, or -1 */
    void *info;
    void (*release)(const void *info); /* to call on info, or NULL */
    bool call_inval; /* the owner calls its invalidation callback (once), before finishing */
} rl__fdobj_end;

/* How an invalidation goes (rl__fdobj_invalidate). */
enum {
    RL_FDOBJ_CLOSE = 1u,    /* fd is closed (else left open: the caller's) */
    RL_FDOBJ_CALLBACK = 2u, /* the owner has an invalidation callback to call once */
};

/* Valid, owning fd (-1: none), with no context yet. */
RL__HIDDEN void rl__fdobj_init(rl__fdobj *o, int fd);
/* The context's info (retained already), and whether it has a release
 * (the owner's releaser gives it then), for the invalidation to release. */
RL__HIDDEN void rl__fdobj_set_context(rl__fdobj *o, void *info, void (*release)(const void *info));
/* Whether it is still valid; no lock needed. */
static inline bool rl__fdobj_valid(const rl__fdobj *o) { return atomic_load_explicit(&o->valid, memory_order_acquire); }
/* A callout begins that will be handed the info or read fd: true if the
 * object is valid (the callout counted: it calls rl__fdobj_leave), false
 * if not (nothing counted: the callout does nothing). Inline, as leave
 * and finish are: every callout of a socket makes the three calls. */
static inline bool rl__fdobj_enter(rl__fdobj *o) {
    if (!rl__fdobj_valid(o))
        return false;
    o->busy++;
    return true;
}
RL__HIDDEN void rl__fdobj_leave_last(rl__fdobj *o, rl__fdobj_end *end, rl__fdobj_releaser releaser);
/* That callout is over: if it was the last one of an invalidated object,
 * *end holds the close and release the invalidation left to it. */
static inline void rl__fdobj_leave(rl__fdobj *o, rl__fdobj_end *end, rl__fdobj_releaser releaser) {
    end->fd = -1;
    end->release = NULL;
    end->call_inval = false;
    if (RL__UNLIKELY(--o->busy == 0 && (o->close_pending || o->release_pending)))
        rl__fdobj_leave_last(o, end, releaser);
}
/* Invalidates, once: returns whether it was valid. *end holds what to do
 * outside the lock: the invalidation callback to call (call_inval, once
 * in the object's life), then fd to close (RL_FDOBJ_CLOSE) and info to
 * release, unless callouts still run (the last one does it). */
RL__HIDDEN bool rl__fdobj_invalidate(rl__fdobj *o, unsigned how, rl__fdobj_end *end, rl__fdobj_releaser releaser);
RL__HIDDEN void rl__fdobj_finish_slow(rl__fdobj_end *end);
/* Runs *end with no lock held: closes, then releases. */
static inline void rl__fdobj_finish(rl__fdobj_end *end) {
    if (RL__UNLIKELY(end->fd >= 0 || end->release))
        rl__fdobj_finish_slow(end);
}
/* From the owner's finalizer (the last reference gone, no lock): releases
 * the info if no invalidation did (a creation that failed part-way). The
 * handle is left to the owner. */
RL__HIDDEN void rl__fdobj_finalize(rl__fdobj *o, rl__fdobj_releaser releaser);

#endif /* CRUNLOOP_RL_FDOBJ_H */
