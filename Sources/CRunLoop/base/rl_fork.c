/*
 * rl_fork.c — fork() safety: the process's fork generation and the one
 * pthread_atfork registration of the library.
 *
 * Two things go wrong in a child without this:
 *   - a lock another thread held at the moment of fork() is copied locked,
 *     and nobody in the child will ever release it (the object pool's lock
 *     deadlocked about one child in three while another thread allocated);
 *   - a run loop's epoll fd, eventfd and timerfd are shared with the parent:
 *     a child that waits on them, arms them or writes them steals or
 *     disturbs the parent's wake-ups (a child running its inherited loop
 *     hung both).
 *
 * So: prepare takes every global lock of the library, in one fixed order
 * (outer locks before the ones taken under them; rl__fork_order in
 * rl_fork.h), and parent and child release them; the child then starts a
 * new fork generation. Run loops,
 * threads and workers record the generation they were made in; one from
 * an older generation is inherited, and every call on it fails with
 * kRLErrorInvalidState (rl__fork_inherited). The calling thread of the
 * child gets a new run loop and RLThread when it asks for them.
 *
 * Per-object locks (a thread's, a worker's, a loop's perform queue) are
 * not taken: the child never takes the lock of an inherited object, which
 * is what the generation check at every entry point guarantees.
 */
#include "rl_fork.h"

#include <pthread.h>
#include <stdlib.h>

_Atomic unsigned rl__fork_generation;

bool rl__fork_fail(const char *fn, const char *what) {
    return rl__fail(kRLErrorInvalidState, fn,
                    "the %s was inherited across fork(): it belongs to the parent process; "
                    "create a new one in the child",
                    what);
}

/* One slot per rl__fork_order, filled at load time by the files that own
 * global locks. A slot's hooks are written before `ready` is set (release),
 * so a fork() in another thread while libraries load sees a slot either
 * whole or not at all. Static storage: nothing here allocates, and the
 * child handler runs in a process where malloc's locks may be held. */
typedef struct fork_slot {
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
    _Atomic bool ready;
} fork_slot;
static fork_slot fork_slots[RL_FORK_SLOTS];

/* The slots whose prepare hook this thread ran in its current fork():
 * parent and child release exactly those, even if a slot were filled
 * between prepare and fork(). A bit per slot; the child is the same
 * thread, so it sees the same value. */
static _Thread_local unsigned fork_taken;
_Static_assert(RL_FORK_SLOTS <= 32, "fork_taken has a bit per slot");

void rl__fork_register(rl__fork_order order, void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    if ((unsigned)order >= RL_FORK_SLOTS || !prepare || !parent || !child)
        abort(); /* a wrong call in the library itself */
    fork_slot *s = &fork_slots[order];
    if (atomic_load_explicit(&s->ready, memory_order_acquire)) {
        if (s->prepare != prepare || s->parent != parent || s->child != child)
            abort(); /* two files claim one place in the lock order */
        return;
    }
    s->prepare = prepare;
    s->parent = parent;
    s->child = child;
    atomic_store_explicit(&s->ready, true, memory_order_release);
}

static void fork_prepare(void) {
    unsigned taken = 0;
    for (int i = 0; i < RL_FORK_SLOTS; i++) {
        fork_slot *s = &fork_slots[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire))
            continue;
        s->prepare();
        taken |= 1u << i;
    }
    fork_taken = taken;
}

static void fork_parent(void) {
    for (int i = RL_FORK_SLOTS - 1; i >= 0; i--)
        if (fork_taken & (1u << i))
            fork_slots[i].parent();
    fork_taken = 0;
}

static void fork_child(void) {
    atomic_fetch_add_explicit(&rl__fork_generation, 1, memory_order_relaxed);
    for (int i = RL_FORK_SLOTS - 1; i >= 0; i--)
        if (fork_taken & (1u << i))
            fork_slots[i].child();
    fork_taken = 0;
}

/* At load time, before any thread of the program can fork. The files that
 * own locks fill their slots from their own constructors, in any order:
 * the slot number, not the order of registration, fixes the lock order. */
__attribute__((constructor)) static void fork_install(void) {
    if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
        abort(); /* ENOMEM at load time: nothing would be fork-safe */
}
