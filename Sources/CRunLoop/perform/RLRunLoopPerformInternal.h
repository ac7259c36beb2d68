/*
 * RLRunLoopPerformInternal.h — perform requests, private: the perform
 * room's one way in (RLRunLoopPerform.c), for its front ends.
 *
 * Who is who:
 *   RLRunLoopPerform.c  rl__perform_submit, the one way in of every front
 *                       end: checks a request, brings its modes into being,
 *                       queues it (queue/rl_pqueue.c), wakes the loop,
 *                       waits. The public RLRunLoopPerform* calls.
 *   RLPerform.c         RLThreadPerform* (a thread's loop) and delayed
 *                       performs; RLWorkerThread.c: RLWorkerThreadPerform*
 *                       (the worker's loop). The Swift overlay uses these.
 * The queue itself (storage, records, block copies, running) is the room
 * below the loop, queue/rl_pqueue.c.
 */
#ifndef CRUNLOOP_RLRUNLOOPPERFORMINTERNAL_H
#define CRUNLOOP_RLRUNLOOPPERFORMINTERNAL_H

#include "rl_pqueue.h"
#include <crunloop/RLRunLoop.h>

/* ---- the front end (RLRunLoopPerform.c) ---- */

/* Queues r on rl (validated, refused with an error as the public calls
 * document: a bad loop, mode, function; a loop whose thread has exited,
 * kRLErrorInvalidState). With r->wait, returns once the request ran (true)
 * or was dropped unrun (false, kRLErrorInvalidState). A refused request has
 * its release called (and no block copied). On success no error is set. */
RL__HIDDEN bool rl__perform_submit(RLRunLoopRef rl, const rl__preq *r, const char *fname);

/* Whether r is well formed (modes, a function or block); error set if not. */
RL__HIDDEN bool rl__preq_check(const rl__preq *r, const char *fname);

/* Runs the request r now, on the calling thread, as if it had been queued
 * and run (release called): a wait on the target's own thread. */
RL__HIDDEN void rl__perform_run_now(const rl__preq *r);

#endif /* CRUNLOOP_RLRUNLOOPPERFORMINTERNAL_H */
