/*
 * RLRunLoopMode.c — a loop's modes: lookup (with a one-entry cache),
 * creation, the common-mode names, and the mode name constants. Under the
 * loop lock. Low in the run-loop files: it calls only the timer sets
 * (rl_heap.c) and the object model; memberships, the iteration and perform
 * requests call into it.
 */
#include "RLRunLoopMode.h"
#include "rl_lock.h"
#include "rl_heap.h"
#include "rl_stats.h"
#include <crunloop/RLRunLoop.h>

#include <stdlib.h>
#include <string.h>

const RLRunLoopMode kRLRunLoopDefaultMode = RL__DEFAULT_MODE_NAME;
const RLRunLoopMode kRLRunLoopCommonModes = RL__COMMON_MODES_NAME;

rl__mode *rl__mode_find_slow(RLRunLoopRef rl, const char *name) {
    for (size_t i = 0; i < rl->nmodes; i++) {
        if (strcmp(rl->modes[i]->name, name) == 0)
            return rl->last_mode = rl->modes[i];
    }
    return NULL;
}

rl__common_name *rl__common_find(RLRunLoopRef rl, const char *name) {
    for (size_t i = 0; i < rl->ncommon; i++) {
        if (strcmp(rl->common[i].name, name) == 0)
            return &rl->common[i];
    }
    return NULL;
}

void *rl__grow(void *a, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return a;
    size_t c = *cap ? *cap * 2 : 2; /* most loops have one or two modes */
    while (c < need)
        c *= 2;
    void *b = realloc(a, c * elem);
    if (b)
        *cap = c;
    return b;
}

rl__mode *rl__mode_new(RLRunLoopRef rl, const char *name, const char *fn) {
    rl__mode **a = rl__grow(rl->modes, &rl->capmodes, rl->nmodes + 1, sizeof *a);
    rl__mode *m = calloc(1, sizeof *m);
    /* The default mode (every loop has one) keeps the constant: no copy. */
    bool is_default = strcmp(name, kRLRunLoopDefaultMode) == 0;
    char *copy = is_default ? (char *)kRLRunLoopDefaultMode : strdup(name);
    if (!a || !m || !copy) {
        if (a)
            rl->modes = a;
        free(m);
        if (!is_default)
            free(copy);
        rl__fail(kRLErrorNoMemory, fn, "out of memory creating mode %s", name);
        return NULL;
    }
    rl->modes = a;
    m->name = copy;
    m->is_default = is_default;
    m->rl = rl;
    TAILQ_INIT(&m->sources);
    TAILQ_INIT(&m->ready);
    TAILQ_INIT(&m->observers);
    rl__tset_init(&m->timers);
    /* Room for its first timers now, not in the loop's first wait (see
     * rl_heap.h). Without it nothing is lost: the array is made (or the
     * timers wait on the pending list) when they come. */
    (void)rl__tset_reserve(&m->timers);
    rl__common_name *c = rl__common_find(rl, name);
    if (c)
        m->common = true;
    rl->modes[rl->nmodes++] = m;
    if (is_default && !atomic_load_explicit(&rl->dead, memory_order_relaxed))
        rl->timer_mode = m;
    return m;
}

void rl__mode_free(rl__mode *m) {
    rl__tset_free(&m->timers);
    free(m->sbuckets);
    if (!m->is_default)
        free(m->name);
    free(m);
}

void rl__mode_recompute_mask(rl__mode *m) {
    RLOptionFlags mask = 0;
    rl__memb *x;
    TAILQ_FOREACH(x, &m->observers, mode_link) {
        mask |= ((struct RLRunLoopObserver *)x->item)->activities;
    }
    atomic_store_explicit(&m->observer_mask, mask, memory_order_relaxed);
}

bool rl__runloop_mode_create(RLRunLoopRef rl, RLRunLoopMode mode, const char *fname) {
    rl__loop_lock(rl);
    bool ok = rl__mode_find_slow(rl, mode) || rl__mode_new(rl, mode, fname);
    rl__loop_unlock(rl);
    return ok;
}

static size_t heap_bytes(const rl__heap *h) { return h->cap * sizeof *h->a; }

static size_t mode_bytes(const rl__mode *m) {
    return sizeof *m + (m->is_default ? 0 : strlen(m->name) + 1) + m->nsbuckets * sizeof *m->sbuckets +
           heap_bytes(&m->timers.strict) + heap_bytes(&m->timers.lax_fire) + heap_bytes(&m->timers.lax_deadline);
}

size_t rl__loop_held_bytes(RLRunLoopRef rl, rl__loop_mem *out) {
    rl__loop_mem held = {0};
    rl__loop_lock(rl);
    for (size_t i = 0; i < rl->nmodes; i++)
        held.modes += mode_bytes(rl->modes[i]);
    held.arrays = rl->capmodes * sizeof *rl->modes + rl->capcommon * sizeof *rl->common +
                 rl->capci * sizeof *rl->citems + rl->capcidx * sizeof *rl->cidx + rl->caphomed * sizeof *rl->homed;
    for (size_t i = 0; i < rl->ncommon; i++)
        if (rl->common[i].name != kRLRunLoopDefaultMode)
            held.arrays += strlen(rl->common[i].name) + 1;
    if (rl->ev_big)
        held.arrays += 64 * sizeof *rl->ev_big; /* EV_BATCH (RLRunLoopRun.c) */
    held.due = rl->capdue * sizeof *rl->due;
    held.fds = rl->nfdtab * sizeof *rl->fdtab;
    for (size_t i = 0; i < rl->nfdtab; i++) /* one source lives in the entry; more in a block (rl_fdtab.c) */
        if (rl->fdtab[i].many)
            held.fds += rl__fdsrcs_bytes(rl->fdtab[i].srcs.many->cap);
    rl__loop_unlock(rl);
    held.stats = rl__stats_bytes(rl);
    if (out)
        *out = held;
    return held.modes + held.arrays + held.due + held.fds + held.stats;
}
