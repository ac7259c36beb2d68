/*
 * RLRunLoopMembership.h — private: memberships (RLRunLoopMembership.c),
 * for the object files that invalidate or move their items and for a
 * loop's teardown. The membership record itself (rl__memb) is in
 * runloop_internal.h because items and modes embed its lists.
 */
#ifndef CRUNLOOP_RLRUNLOOPMEMBERSHIP_H
#define CRUNLOOP_RLRUNLOOPMEMBERSHIP_H

#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>

/* Removes every membership of a timer or an observer (all in its home),
 * deferring the releases. Its home's lock held. */
RL__HIDDEN void rl__remove_item_everywhere_locked(void *item, rl__kind kind, rl__defer *d);
/* Invalidates s and removes it from every mode of every loop (cancel
 * callouts deferred to d). No lock held. */
RL__HIDDEN void rl__source_invalidate(struct RLRunLoopSource *s, rl__defer *d);
/* Timers: the date moved; fix its heap slots and re-arm a sleeping home.
 * What guards t held (rl__item_lock). */
RL__HIDDEN void rl__timer_moved_locked(struct RLRunLoopTimer *t);
/* A loop's teardown: every item leaves every mode of rl, the common items
 * are forgotten, and the items at home in rl go homeless. Cancel callouts
 * and releases deferred to d. rl locked. */
RL__HIDDEN void rl__memberships_clear_locked(RLRunLoopRef rl, rl__defer *d);

#endif /* CRUNLOOP_RLRUNLOOPMEMBERSHIP_H */
