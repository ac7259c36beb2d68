/*
 * rl_mainqueue.h — private: the main dispatch queue as a source of every
 * common mode of the main thread's loop, as in CoreFoundation
 * (rl_mainqueue.c).
 *
 * libdispatch exports two hooks for CF: `_dispatch_get_main_queue_handle_4CF`
 * (on Linux an eventfd that libdispatch writes when the main queue gets work)
 * and `_dispatch_main_queue_callback_4CF` (runs the blocks queued on the main
 * queue, on the main thread). They are looked up at run time in the libraries
 * the process has already loaded, so a program that never links libdispatch
 * never loads it: its main loop has no main queue (mainq false) and pays
 * nothing.
 *
 * Only the main loop's thread calls these (the wait and the pass), except
 * rl__mainq_attach, called once when the main loop is made.
 */
#ifndef CRUNLOOP_RL_MAINQUEUE_H
#define CRUNLOOP_RL_MAINQUEUE_H

#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>

/* At the main loop's creation: if libdispatch is loaded, this is the
 * process's first (not a fork() child's) main loop and its thread is the
 * process's main thread, finds the hooks and sets rl->mainq. The handle is
 * asked for, and registered, by rl__mainq_arm before a wait. */
RL__HIDDEN void rl__mainq_attach(RLRunLoopRef rl);

/* Whether the main queue keeps mode m of rl from being empty and is
 * served in it: rl has a main queue, m is one of its common modes, and the
 * thread is not inside a serve (a run nested in a main-queue block neither
 * serves the queue nor counts it, as in CF). Loop lock held. */
static inline bool rl__mainq_in_mode(RLRunLoopRef rl, const rl__mode *m) {
    return rl->mainq && m->common && !rl->mainq_serving;
}

/* Before a wait of mode m (loop lock held, rl->mainq set): the handle
 * is in the loop's epoll set exactly while the queue is served in m, so a
 * block queued while the loop runs a private mode does not wake it. A
 * handle that becomes readable while it is out of the set is reported when
 * it is added again. Returns false (error set) if epoll refused. */
RL__HIDDEN bool rl__mainq_arm(RLRunLoopRef rl, const rl__mode *m);

/* Serves the main queue if it is served in m and its handle is readable
 * (the wait reported it: rl->mainq_ready; or before a wait, when the pass
 * before did not serve it, one read looks): reads the handle back and runs
 * libdispatch's callback (every block pending at its start). Returns
 * whether it served (a handled source, as in CF). No lock held; the loop's
 * thread. */
RL__HIDDEN bool rl__mainq_serve(RLRunLoopRef rl, rl__mode *m);

#endif /* CRUNLOOP_RL_MAINQUEUE_H */
