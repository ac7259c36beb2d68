/* rl_weak.h — a weak reference to a library object, for the contexts of
 * the run-loop objects a port owns (its fd object, its source): they hold
 * the link, not the port, so there is no reference cycle, and a callout
 * that starts after the port went away finds NULL instead of freed memory.
 * Private. */
#ifndef CRUNLOOP_RL_WEAK_H
#define CRUNLOOP_RL_WEAK_H

#include "internal.h"

typedef struct rl__weak rl__weak;

/* A link to obj (not retained), with one reference; NULL if memory is short. */
RL__HIDDEN rl__weak *rl__weak_new(const void *obj);
/* Context-callback shaped retain/release of the link itself. */
RL__HIDDEN const void *rl__weak_retain(const void *w);
RL__HIDDEN void rl__weak_release(const void *w);
/* The object, retained, or NULL once the link was cut. */
RL__HIDDEN void *rl__weak_get(rl__weak *w);
/* From now on rl__weak_get returns NULL. Call before the object goes. */
RL__HIDDEN void rl__weak_cut(rl__weak *w);

#endif /* CRUNLOOP_RL_WEAK_H */
