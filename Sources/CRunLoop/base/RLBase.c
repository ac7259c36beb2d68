/* RLBase.c — reference counting, descriptions and clocks. */
#include "RLBase.h"
#include "rl_pool.h"

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define RL_BASE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL_BASE_ASAN 1
#endif
#endif
#ifdef RL_BASE_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* Objects that do not come from the pool (the plain build, objects over
 * RL_POOL_MAX) are not freed at once either: like the pool's slots they
 * wait in a quarantine, here a ring of the last RL_MALLOC_QUARANTINE such
 * objects, so that malloc does not hand their memory to the next object
 * while a stale pointer may still reach it (the dead header then refuses
 * it). Lock-free: a release swaps its object into the next slot and frees
 * what it pushed out, so no lock is held across fork. Under
 * AddressSanitizer the waiting object is poisoned: a stale use is
 * reported, as for the pool. */
enum {
#ifdef RL_BASE_ASAN
    RL_MALLOC_QUARANTINE = 1024,
#else
    RL_MALLOC_QUARANTINE = 64,
#endif
};
static void *_Atomic malloc_quarantine[RL_MALLOC_QUARANTINE];
static _Atomic unsigned malloc_quarantine_next;

static void free_later(void *o) {
#ifdef RL_BASE_ASAN
    ASAN_POISON_MEMORY_REGION(o, malloc_usable_size(o));
#endif
    unsigned i = atomic_fetch_add_explicit(&malloc_quarantine_next, 1, memory_order_relaxed);
    void *out = atomic_exchange_explicit(&malloc_quarantine[i % RL_MALLOC_QUARANTINE], o, memory_order_acq_rel);
    if (!out)
        return;
#ifdef RL_BASE_ASAN
    ASAN_UNPOISON_MEMORY_REGION(out, malloc_usable_size(out));
#endif
    free(out);
}

void *rl__object_alloc(const rl__class *cls, size_t size, const char *fn) {
    return rl__object_alloc_head(cls, size, 0, fn);
}

__attribute__((always_inline)) static inline void *object_alloc(const rl__class *cls, size_t head, size_t tail, bool packed,
                                                             const char *fn) {
    size_t size = head + tail;
    bool pooled = RL_TRICK_POOL && rl__pool_serves(size);
    rl__object *o;
    if (pooled) {
        o = packed ? rl__pool_alloc_packed(size, head) : rl__pool_alloc_zeroing(size, head);
    } else if (tail == 0) {
        o = calloc(1, size);
    } else {
        o = malloc(size);
        if (o)
            memset(o, 0, head);
    }
    if (!o) {
        rl__fail(kRLErrorNoMemory, fn, "out of memory allocating %s", cls->name);
        return NULL;
    }
    o->kind = rl__obj_kind(cls, pooled);
    atomic_init(&o->rc, 1);
    atomic_init(&o->magic, RL__MAGIC_ALIVE);
    return o;
}

void *rl__object_alloc_head(const rl__class *cls, size_t head, size_t tail, const char *fn) {
    return object_alloc(cls, head, tail, false, fn);
}

void *rl__object_alloc_packed(const rl__class *cls, size_t size, const char *fn) {
    return object_alloc(cls, size, 0, true, fn);
}

_Atomic long rl__string_objectlike;

/* The strings' table (internal.h), NULL until the first string is made. */
static _Atomic(const rl__string_ops *) string_ops;

void rl__object_set_string_ops(const rl__string_ops *ops) {
    if (atomic_load_explicit(&string_ops, memory_order_relaxed) != ops)
        atomic_store_explicit(&string_ops, ops, memory_order_release);
}

static const rl__string_ops *strings(void) { return atomic_load_explicit(&string_ops, memory_order_acquire); }

static bool string_known(const void *obj) {
    const rl__string_ops *ops = strings();
    return ops && ops->known(obj);
}

bool rl__object_check_fail(const void *obj, const rl__class *cls, const char *fn) {
    if (RL__UNLIKELY(obj == NULL))
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL object");
    /* A string's text may begin like a magic; its "class" is text. */
    if (string_known(obj))
        return rl__fail(kRLErrorInvalidObject, fn, "%p is an RLString, not a %s", obj,
                        cls ? cls->name : "CRunLoop object");
    const rl__object *o = obj;
    if (RL__UNLIKELY(atomic_load_explicit(&o->magic, memory_order_relaxed) != RL__MAGIC_ALIVE))
        return rl__fail(kRLErrorInvalidObject, fn, "%p is not a live CRunLoop object (released?)", obj);
    if (RL__UNLIKELY(cls != NULL && !rl__is_class(o, cls)))
        return rl__fail(kRLErrorInvalidObject, fn, "%p is a %s, not a %s", obj, rl__cls(o)->name, cls->name);
    return true;
}

/* kRLAllocatorNull's value: only its address matters. */
static const char allocator_null;
const RLAllocatorRef kRLAllocatorNull = &allocator_null;

/* What a pointer given to a generic function (retain, release, count,
 * type name, description) is. RLString's pointers are their characters,
 * not objects (RLString.c): the string registry decides for a pointer that
 * does not read as a live object, and for every pointer while some
 * string's text begins like an object's magic. An object pays one load of
 * a global that almost never changes. A misaligned pointer is never read
 * (objects and strings are 8-aligned). */
enum { RL_ANY_FAILED, RL_ANY_OBJECT, RL_ANY_STRING };
static int check_any(const void *obj, const char *fn) {
    const rl__object *o = obj;
    bool aligned = ((uintptr_t)obj & 7) == 0;
    if (RL__LIKELY(o != NULL && aligned &&
                   atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE &&
                   atomic_load_explicit(&rl__string_objectlike, memory_order_relaxed) == 0))
        return RL_ANY_OBJECT;
    if (string_known(obj))
        return RL_ANY_STRING;
    const rl__string_ops *ops = strings();
    if (ops && ops->explain_released(obj, fn))
        return RL_ANY_FAILED;
    if (o != NULL && !aligned) {
        rl__fail(kRLErrorInvalidObject, fn, "%p is not a live CRunLoop object or string", obj);
        return RL_ANY_FAILED;
    }
    return rl__object_check(obj, NULL, fn) ? RL_ANY_OBJECT : RL_ANY_FAILED;
}

RLTypeRef RLRetain(RLTypeRef obj) {
    int kind = check_any(obj, "RLRetain");
    if (kind == RL_ANY_STRING)
        return strings()->retain(obj, "RLRetain") ? obj : NULL;
    if (kind != RL_ANY_OBJECT)
        return NULL;
    rl__object *o = (rl__object *)obj;
    atomic_fetch_add_explicit(&o->rc, 1, memory_order_relaxed);
    return obj;
}

/* The kept class (RLBase.h), NULL until registered. */
static _Atomic(const rl__kept_class *) kept_class;

void rl__object_set_kept_class(const rl__kept_class *k) {
    if (atomic_load_explicit(&kept_class, memory_order_relaxed) != k)
        atomic_store_explicit(&kept_class, k, memory_order_release);
}

static inline const rl__kept_class *kept_for(const rl__object *o) {
    const rl__kept_class *k = atomic_load_explicit(&kept_class, memory_order_acquire);
    return k && rl__is_class(o, k->cls) ? k : NULL;
}

/* Drops one reference: `held` says whether it is one the library marked
 * as its own (rl__object_unhold) or a caller's (RLRelease, which also
 * takes a library string). */
static bool release_object(const void *obj, bool held, const char *fn) {
    int kind = held ? (rl__object_check(obj, NULL, fn) ? RL_ANY_OBJECT : RL_ANY_FAILED) : check_any(obj, fn);
    if (kind == RL_ANY_STRING)
        return strings()->release(obj, fn);
    if (kind != RL_ANY_OBJECT)
        return false;
    rl__object *o = (rl__object *)obj;
    long step = held ? 1 + RL__HELD_ONE : 1;
    long rc = atomic_load_explicit(&o->rc, memory_order_relaxed);
    for (;;) {
        long count = rc & RL__RC_MASK, kept = rc / RL__HELD_ONE;
        if (RL__UNLIKELY(count <= 0)) {
            if (!held && kept_for(o))
                return rl__object_not_owner(obj, fn); /* a run loop keeps it (see last_release) */
            return rl__fail(kRLErrorInvalidObject, fn, "%p was already released", obj);
        }
        if (RL__UNLIKELY(!held && count <= kept))
            return rl__object_not_owner(obj, fn);
        if (count == 1) {
            /* Not a static boolean: its count never comes down to 1 (held). */
            bool (*can_destroy)(void *) = rl__cls_dynamic(o)->can_destroy;
            if (can_destroy && !can_destroy(o))
                return false;
        }
        const rl__kept_class *k = count == 1 ? kept_for(o) : NULL;
        if (k) {
            int r = k->last_release(o, step, fn);
            if (r == RL__LAST_FINALIZE)
                break;
            if (r != RL__LAST_PLAIN)
                return r == RL__LAST_DONE;
            rc = atomic_load_explicit(&o->rc, memory_order_relaxed);
            if ((rc & RL__RC_MASK) != 1)
                continue;
        }
        if (atomic_compare_exchange_weak_explicit(&o->rc, &rc, rc - step, memory_order_release,
                                                  memory_order_relaxed)) {
            if ((rc & RL__RC_MASK) != 1)
                return true;
            break;
        }
    }
    rl__object_finalize(o);
    return true;
}

bool rl__object_not_owner(const void *obj, const char *fn) {
    return rl__fail(kRLErrorNotOwner, fn,
                    "%p (%s) is kept by the library: its references all belong to CRunLoop (a Get-rule "
                    "result is not the caller's to release; release only what Create, Copy or RLRetain gave)",
                    obj, rl__cls(obj)->name);
}

void rl__object_finalize(void *obj) {
    rl__object *o = obj;
    /* Acquire what every earlier release did to the object before its
     * memory goes (an acquire load rather than a fence: ThreadSanitizer
     * models the one, not the other, and pooled memory is reused without
     * going through free). */
    (void)atomic_load_explicit(&o->rc, memory_order_acquire);
    atomic_store_explicit(&o->magic, RL__MAGIC_DEAD, memory_order_relaxed);
    uint32_t pooled = rl__obj_pooled(o); /* a part's finalizer may free its block: read before */
    const rl__class *cls = rl__cls_dynamic(o); /* a static boolean is never finalized */
    if (cls->finalize)
        cls->finalize(o);
    if (pooled >= RL__POOLED_PART)
        return; /* the block goes with its first object */
    if (pooled)
        rl__pool_free(o);
    else
        free_later(o);
}

void rl__object_init_part(void *obj, const rl__class *cls) {
    rl__object *o = obj;
    o->kind = rl__obj_kind(cls, RL__POOLED_PART);
    atomic_init(&o->rc, 1);
    atomic_init(&o->magic, RL__MAGIC_ALIVE);
}

size_t rl__object_block_bytes(const void *first) {
    const rl__object *o = first;
    return rl__obj_pooled(o) ? rl__pool_block_size(o) : malloc_usable_size((void *)o) + sizeof(size_t);
}

bool RLRelease(RLTypeRef obj) { return release_object(obj, false, "RLRelease"); }

void rl__object_hold(const void *obj) {
    atomic_fetch_add_explicit(&((rl__object *)obj)->rc, RL__HELD_ONE, memory_order_relaxed);
}

bool rl__object_unhold(const void *obj) { return release_object(obj, true, "RLRelease"); }

RLIndex RLGetRetainCount(RLTypeRef obj) {
    int kind = check_any(obj, "RLGetRetainCount");
    if (kind == RL_ANY_STRING)
        return strings()->retain_count(obj);
    if (kind != RL_ANY_OBJECT)
        return -1;
    const rl__object *o = obj;
    long n = atomic_load_explicit(&o->rc, memory_order_relaxed) & RL__RC_MASK;
    const rl__kept_class *k = kept_for(o);
    return k ? n + k->count_extra(o) : n;
}

const char *RLGetTypeName(RLTypeRef obj) {
    int kind = check_any(obj, "RLGetTypeName");
    if (kind == RL_ANY_STRING)
        return "RLString";
    if (kind != RL_ANY_OBJECT)
        return NULL;
    return rl__cls(obj)->name;
}

RLTypeID RLGetTypeID(RLTypeRef obj) {
    int kind = check_any(obj, "RLGetTypeID");
    if (kind == RL_ANY_STRING)
        return strings()->type_id();
    if (kind != RL_ANY_OBJECT)
        return 0;
    return rl__type_id(rl__cls(obj));
}

char *RLCopyDescription(RLTypeRef obj) {
    int kind = check_any(obj, "RLCopyDescription");
    if (kind == RL_ANY_STRING) {
        char *copy = strdup(obj);
        if (!copy)
            rl__fail(kRLErrorNoMemory, "RLCopyDescription", "out of memory");
        return copy;
    }
    if (kind != RL_ANY_OBJECT)
        return NULL;
    const rl__object *o = obj;
    if (rl__cls(o)->describe)
        return rl__cls(o)->describe(o);
    char *s = NULL;
    if (asprintf(&s, "<%s %p>", rl__cls(o)->name, obj) < 0) {
        rl__fail(kRLErrorNoMemory, "RLCopyDescription", "out of memory");
        return NULL;
    }
    return s;
}

/* ---- clocks ---- */

static double clock_seconds(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

RLAbsoluteTime RLAbsoluteTimeGetCurrent(void) {
    return clock_seconds(CLOCK_REALTIME) - kRLAbsoluteTimeIntervalSince1970;
}

double RLMonotonicTimeGetCurrent(void) { return clock_seconds(CLOCK_MONOTONIC); }

bool rl__date_valid(RLAbsoluteTime date) { return !isnan(date); }

struct timespec rl__timespec_from_seconds(double s) {
    struct timespec ts;
    if (!(s > 0)) {
        ts.tv_sec = 0;
        ts.tv_nsec = 0;
        return ts;
    }
    if (s > 4e15) /* far beyond any real wait; keeps tv_sec representable */
        s = 4e15;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    if (ts.tv_nsec < 0)
        ts.tv_nsec = 0;
    return ts;
}

struct timespec rl__monotonic_deadline_for_date(RLAbsoluteTime date) {
    double remaining = date - RLAbsoluteTimeGetCurrent();
    if (!(remaining > 0))
        remaining = 0;
    return rl__timespec_from_seconds(RLMonotonicTimeGetCurrent() + remaining);
}
