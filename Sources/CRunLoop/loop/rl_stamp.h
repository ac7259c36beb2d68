/*
 * rl_stamp.h — private: stamping timers so that equal fire dates fire in
 * the order the timers got them (rl_stamp.c says how).
 */
#ifndef CRUNLOOP_RL_STAMP_H
#define CRUNLOOP_RL_STAMP_H

#include "runloop_internal.h"

/* Stamps t as it gets a date (created, moved, refired): after this
 * thread's stamps and, at home in a loop, after the loop's. The timer's
 * home's lock held, or its item lock while it has none, or not yet
 * shared. */
RL__HIDDEN void rl__timer_stamp_locked(struct RLRunLoopTimer *t);
/* t arrives in rl (rl locked): stamped elsewhere, it is ordered by this
 * add; the loop's and this thread's clocks catch up with each other. */
RL__HIDDEN void rl__timer_arrive_locked(RLRunLoopRef rl, struct RLRunLoopTimer *t);

#endif /* CRUNLOOP_RL_STAMP_H */
