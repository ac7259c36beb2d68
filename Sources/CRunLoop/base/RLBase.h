/*
 * RLBase.h — private: the object model (reference-counted objects with a
 * class and a liveness mark) and clocks, defined in RLBase.c; the tests'
 * fault injection and counters come with it (rl_testhook.h). Kept apart
 * from internal.h so that the inline check sits in the header of the file
 * that defines what it calls.
 * (The public <crunloop/RLBase.h> is a different file: always include that
 * one with its folder.)
 */
#ifndef CRUNLOOP_RLBASE_PRIVATE_H
#define CRUNLOOP_RLBASE_PRIVATE_H

#include "internal.h"

#include "rl_testhook.h"

/* ---- objects (RLBase.c) ---- */

typedef struct rl__class {
    const char *name;
    /* Frees what the object owns (not the object itself). May be NULL. */
    void (*finalize)(void *obj);
    /* Called when the last reference is about to go. Return false (after
     * rl__fail) to refuse destruction; the reference count stays at 1.
     * May be NULL. */
    bool (*can_destroy)(void *obj);
    /* malloc'ed description, or NULL for the default "<Name 0x...>". */
    char *(*describe)(const void *obj);
} rl__class;

/* A class whose objects a run loop may keep by a reference that is in no
 * count (a timer's inline membership, RLRunLoopTimer.c), registered by
 * rl__object_set_kept_class (one such class; the base room knows nothing
 * of timers). last_release: called instead of the drop when the count is
 * 1 (`step` as rl__object.rc goes down, fn for the error): RL__LAST_DONE
 * (dropped, the object stays: not its last), RL__LAST_FINALIZE (dropped,
 * the count 0: finalize it), RL__LAST_PLAIN (nothing done: drop it as any
 * other), RL__LAST_FAILED (error set). count_extra: the references such a
 * run loop keeps, for RLGetRetainCount. An object of the class at count 0
 * but alive is kept that way: releasing it is the caller's error
 * kRLErrorNotOwner. */
enum { RL__LAST_FAILED = -1, RL__LAST_DONE = 0, RL__LAST_FINALIZE = 1, RL__LAST_PLAIN = 2 };
typedef struct rl__kept_class {
    const rl__class *cls;
    int (*last_release)(void *obj, long step, const char *fn);
    long (*count_extra)(const void *obj);
} rl__kept_class;
/* Registers k (before the first object of k->cls is shared; the same k
 * every time). */
RL__HIDDEN void rl__object_set_kept_class(const rl__kept_class *k);

#define RL__MAGIC_ALIVE 0x524c4f42u /* "RLOB" */
#define RL__MAGIC_DEAD 0xdeadbeefu

/* The booleans' class (RLNumber.c): its two objects are static, and their
 * `kind` (rl__object) is the constant RL__KIND_BOOLEAN. */
RL__HIDDEN extern const rl__class rl__boolean_class;

/* 16 bytes (before: 24, with the class as a pointer and the pool flag in
 * a word of its own): a socket and its run-loop source, one block, hold
 * two. */
typedef struct rl__object {
    _Atomic uint32_t magic;
    /* Its class and where its memory is from, in one word (rl__cls,
     * rl__obj_pooled, rl__is_class): the low 32 bits of the class's
     * address (every class is a static, 8-aligned object of the library's,
     * in one image of less than 2 GiB: no two classes share them), its
     * low 2 bits 0 (malloc), 1 (the pool) or RL__POOLED_PART; the static
     * booleans' RL__KIND_BOOLEAN. Set at creation, never changed. So a
     * class check is one load, a mask and a compare with the class's
     * address, as with a pointer to the class. */
    uint32_t kind;
    /* Two counts in one word, so that both change in one atomic step: the
     * low bits count every reference, the bits from RL__HELD_ONE up count
     * those among them that the library keeps for itself (a thread's own
     * RLThread, a thread's run loop): RLRelease refuses to drop one of
     * those, so a caller who releases a Get-rule result gets an error
     * instead of leaving the library a dangling pointer. */
    _Atomic long rc;
} rl__object;

#define RL__HELD_ONE ((long)1 << 40)
#define RL__RC_MASK (RL__HELD_ONE - 1)

/* rl__object's `kind`'s bits that say where its memory is from. */
#define RL__POOLED_BITS 3u

/* The static booleans' `kind`: 4 in the class bits, which no class's
 * address (8-aligned) has, and 3 in the pool bits, which no allocation
 * has: a constant (a class's address is not one, in a shared library), and
 * never taken for another class's. They are never freed. */
#define RL__KIND_BOOLEAN 7u

/* The `kind` of an object of class cls whose memory is `pooled` (0, 1 or
 * RL__POOLED_PART). */
static inline uint32_t rl__obj_kind(const rl__class *cls, uint32_t pooled) {
    return (uint32_t)(uintptr_t)cls | pooled;
}

/* The class of o, which is not a static boolean (an object that can be
 * finalized): the class whose address has the low 32 bits o keeps, in the
 * library's image (within 2 GiB of any of its classes: counted from one). */
static inline const rl__class *rl__cls_dynamic(const void *o) {
    uintptr_t at = (uintptr_t)&rl__boolean_class;
    int32_t d = (int32_t)((((const rl__object *)o)->kind & ~RL__POOLED_BITS) - (uint32_t)at);
    return (const rl__class *)(at + (uintptr_t)(intptr_t)d);
}

/* o's class. */
static inline const rl__class *rl__cls(const void *o) {
    if (RL__UNLIKELY(((const rl__object *)o)->kind == RL__KIND_BOOLEAN))
        return &rl__boolean_class;
    return rl__cls_dynamic(o);
}

/* Whether o (a header read, alive or not) is of class cls (the static
 * booleans are told by their address, RLNumber.c). */
static inline bool rl__is_class(const void *o, const rl__class *cls) {
    return (((const rl__object *)o)->kind & ~RL__POOLED_BITS) == (uint32_t)(uintptr_t)cls;
}

/* Where o's memory is from: 0 (malloc), 1 (the pool), RL__POOLED_PART. */
static inline uint32_t rl__obj_pooled(const void *o) { return ((const rl__object *)o)->kind & RL__POOLED_BITS; }

/* Marks one reference the caller (library code) already has as kept by
 * the library: from now on only rl__object_unhold drops it. */
RL__HIDDEN void rl__object_hold(const void *obj);

/* Drops a reference marked by rl__object_hold (destroying the object if it
 * was the last). Returns false as RLRelease does. */
RL__HIDDEN bool rl__object_unhold(const void *obj);

/* Finalizes and frees obj, alive with its count already 0 (a run loop
 * kept it by a reference in no count: see rl__kept_class). No lock
 * held: the finalizer may call user code. */
RL__HIDDEN void rl__object_finalize(void *obj);

/* The error for releasing obj, alive, when its references all belong to
 * the library (kRLErrorNotOwner); false. */
RL__HIDDEN bool rl__object_not_owner(const void *obj, const char *fn) __attribute__((cold));

/* A class's type ID (RLTypeID): its address, unique and never 0. */
static inline RLTypeID rl__type_id(const void *cls) { return (RLTypeID)(uintptr_t)cls; }

/* Allocates a zeroed object of `size` bytes (which starts with rl__object)
 * with one reference. NULL (error set) on allocation failure. */
RL__HIDDEN void *rl__object_alloc(const rl__class *cls, size_t size, const char *fn);
/* The same for an object of `head` bytes zeroed followed by `tail` bytes
 * left as they are, for the caller to fill (an RLData's bytes). */
RL__HIDDEN void *rl__object_alloc_head(const rl__class *cls, size_t head, size_t tail, const char *fn);
/* rl__object_alloc for an object made by the 100,000 (a timer): its size
 * is fitted to 16 bytes, not rounded up to a cache line (rl_pool.h). */
RL__HIDDEN void *rl__object_alloc_packed(const rl__class *cls, size_t size, const char *fn);

/* An object inside another's block (an fd source in its RLSocket's or
 * RLFileDescriptor's: runloop_internal.h): its header says
 * RL__POOLED_PART (rl__obj_pooled), so releasing its last reference runs its finalizer and
 * frees nothing; the block goes with the block's first object, which
 * must outlive it (an fd source holds a reference on its owner while
 * counted). */
#define RL__POOLED_PART 2u
/* A header at o, one reference, class cls, in another object's block. */
RL__HIDDEN void rl__object_init_part(void *o, const rl__class *cls);
/* The bytes the block of object `first` (not a part) takes, its parts in it
 * (for the tests that count memory). */
RL__HIDDEN size_t rl__object_block_bytes(const void *first);

/* The failing half of rl__object_check: sets the error, returns false. */
RL__HIDDEN bool rl__object_check_fail(const void *obj, const rl__class *cls, const char *fn) __attribute__((cold));

/* True if obj is a live object of class cls (any class if cls is NULL);
 * otherwise false with kRLErrorInvalidArgument (NULL) or
 * kRLErrorInvalidObject set, naming fn. Inline: every call checks its
 * objects, and the hot paths (adding a timer, queuing a request) should
 * not pay a function call for it. */
static inline bool rl__object_check(const void *obj, const rl__class *cls, const char *fn) {
    const rl__object *o = obj;
    if (RL__LIKELY(o != NULL && atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE &&
                   (cls == NULL || rl__is_class(o, cls))))
        return true;
    return rl__object_check_fail(obj, cls, fn);
}

/* One more reference on a live object, with no check (the caller knows it
 * is alive: it holds a lock under which the object is referenced). Inline,
 * as the next: adding a timer takes one, and the loop one per fd callout. */
static inline void rl__retain_raw(void *obj) {
    atomic_fetch_add_explicit(&((rl__object *)obj)->rc, 1, memory_order_relaxed);
}

/* Drops a reference the library took on a live object (rl__retain_raw, or
 * one it made): inline and with no check while it is not the last; the
 * last goes through RLRelease (the finalizer, the class's veto). */
static inline void rl__release_raw(const void *obj) {
    rl__object *o = (rl__object *)obj;
    long rc = atomic_load_explicit(&o->rc, memory_order_relaxed);
    while ((rc & RL__RC_MASK) > 1)
        if (atomic_compare_exchange_weak_explicit(&o->rc, &rc, rc - 1, memory_order_release, memory_order_relaxed))
            return;
    (void)RLRelease(obj);
}

/* Whether the caller's reference to obj is the only one (none kept by the
 * library either): nobody else can reach the object, so the caller may
 * reuse it. Acquire: whatever another thread did with the object before
 * it let go of its reference is over. */
static inline bool rl__object_sole(const void *obj) {
    return atomic_load_explicit(&((const rl__object *)obj)->rc, memory_order_acquire) == 1;
}

/* ---- time (RLBase.c) ---- */

RL__HIDDEN struct timespec rl__timespec_from_seconds(double s);
/* The CLOCK_MONOTONIC instant corresponding to an RLAbsoluteTime date; dates
 * in the past map to now, +inf/huge dates to a far future. */
RL__HIDDEN struct timespec rl__monotonic_deadline_for_date(RLAbsoluteTime date);
/* True if date is a usable date (not NaN). */
RL__HIDDEN bool rl__date_valid(RLAbsoluteTime date);

#endif /* CRUNLOOP_RLBASE_PRIVATE_H */
