/*
 * rl_waitpolicy.h — private: how a run loop waits (rl_waitpolicy.c). A
 * pass (RLRunLoopRun.c) decides whether it waits or only looks; this file
 * decides how: it sleeps in the kernel at once (the plain way, every
 * trick off), or first spins for a wake-up from another CPU
 * (RL_TRICK_SPIN), yields to or pauses for a stream of requests
 * (RL_TRICK_PACE), naps so that bulk reads grow (RL_TRICK_COALESCE), and
 * then waits through the kernel seam (rl_poll.h). Whoever changes how the
 * loop sleeps edits rl_waitpolicy.c alone. Its hint from the sockets,
 * rl__wait_note_bulk_read, is declared in internal.h (the io room's view
 * of the loop).
 */
#ifndef CRUNLOOP_RL_WAITPOLICY_H
#define CRUNLOOP_RL_WAITPOLICY_H

#include "runloop_internal.h"

#include <sys/epoll.h>

/* Right before the pass's BeforeWaiting observers of a pass that will
 * wait: lets a stream of perform requests from another thread catch up
 * (RL_TRICK_PACE; nothing in the plain build). The loop's thread, without
 * the loop lock. */
RL__HIDDEN void rl__wait_pace(RLRunLoopRef rl);

/* The wait itself: blocks until an event, a wake-up, f's mode's next timer
 * or f's deadline; with `poll`, only looks (no system call when there is
 * nothing to ask the kernel). Called with the loop lock held, the fds to
 * watch armed; returns without it. The number of events in ev (up to
 * maxev; the loop's own eventfd and timerfd among them, already dealt
 * with), or -1 when the kernel refused the wait (the error set: the run
 * ends). */
RL__HIDDEN int rl__wait(RLRunLoopRef rl, rl_frame *f, bool poll, struct epoll_event *ev, int maxev);

#endif /* CRUNLOOP_RL_WAITPOLICY_H */
