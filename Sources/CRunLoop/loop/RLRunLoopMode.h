/*
 * RLRunLoopMode.h — private: a loop's modes (RLRunLoopMode.c). The lookup
 * is inline: every add, remove and pass finds its mode first.
 */
#ifndef CRUNLOOP_RLRUNLOOPMODE_H
#define CRUNLOOP_RLRUNLOOPMODE_H

#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>

#include <string.h>

RL__HIDDEN rl__mode *rl__mode_find_slow(RLRunLoopRef rl, const char *name);
RL__HIDDEN rl__common_name *rl__common_find(RLRunLoopRef rl, const char *name);
RL__HIDDEN void *rl__grow(void *a, size_t *cap, size_t need, size_t elem);
RL__HIDDEN rl__mode *rl__mode_new(RLRunLoopRef rl, const char *name, const char *fn);
RL__HIDDEN void rl__mode_free(rl__mode *m);
RL__HIDDEN void rl__mode_recompute_mask(rl__mode *m);
RL__HIDDEN bool rl__runloop_mode_create(RLRunLoopRef rl, RLRunLoopMode mode, const char *fname);

/* What a loop holds besides its object, in bytes asked of malloc (not its
 * chunks' overhead), by part: its modes (records, names, equality buckets,
 * timer heaps), its arrays (modes, common modes and items, homed timers),
 * the due timers' array kept between passes, the fd table (records and
 * their per-source arrays), the statistics (timing histograms, the copy at
 * the last reset). For the tests of what a sleeping loop thread costs
 * (test_loop_memory.c). Takes rl's lock; any thread. */
typedef struct rl__loop_mem {
    size_t modes, arrays, due, fds, stats;
} rl__loop_mem;
RL__HIDDEN size_t rl__loop_held_bytes(RLRunLoopRef rl, rl__loop_mem *out);

/* Mode-name checks, inline: every add, remove and contains makes them. */
static inline bool rl__mode_name_ok(RLRunLoopMode mode, const char *fn) {
    if (mode == NULL)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL mode");
    if (mode[0] == '\0')
        return rl__fail(kRLErrorInvalidArgument, fn, "empty mode name");
    return true;
}

static inline bool rl__is_common(RLRunLoopMode mode) {
    if (mode == kRLRunLoopDefaultMode)
        return false;
    return mode == kRLRunLoopCommonModes || (mode[0] == 'k' && strcmp(mode, kRLRunLoopCommonModes) == 0);
}

__attribute__((always_inline)) static inline rl__mode *rl__mode_find(RLRunLoopRef rl, const char *name) {
    /* Programs mostly touch one mode at a time: try the last one found. The
     * default mode's constant is recognised by its address. */
    rl__mode *last = rl->last_mode;
    if (last && (name == kRLRunLoopDefaultMode ? last->is_default : strcmp(last->name, name) == 0))
        return last;
    return rl__mode_find_slow(rl, name);
}

/* The mode named `name`, created if needed; NULL (error set) on OOM. */
__attribute__((always_inline)) static inline rl__mode *rl__mode_get(RLRunLoopRef rl, const char *name,
                                                                  const char *fn) {
    rl__mode *m = rl__mode_find(rl, name);
    return m ? m : rl__mode_new(rl, name, fn);
}

/* As CF, queuing a request for a named mode brings the mode into being. */
RL__HIDDEN bool rl__runloop_mode_create(RLRunLoopRef rl, RLRunLoopMode mode, const char *fname);

#endif /* CRUNLOOP_RLRUNLOOPMODE_H */
