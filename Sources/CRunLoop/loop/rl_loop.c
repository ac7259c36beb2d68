/*
 * rl_loop.c — the run-loop object at the bottom of the loop core: its
 * class and finalizer, the check every public call on a loop makes, and
 * the calling thread's loop pointer. Low so that every other run-loop
 * file may call it: it calls only the modes (RLRunLoopMode.c) and the
 * perform queue's storage (rl_pqueue.c), to free what a loop owns.
 * Creation, per-thread storage and teardown are RLRunLoop.c's.
 */
#include "rl_health.h"
#include "rl_loop.h"
#include "RLRunLoopMode.h"
#include "rl_pqueue.h"
#include "rl_span.h"
#include "rl_poll.h"
#include <crunloop/RLRunLoop.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__thread RLRunLoopRef rl__tls __attribute__((tls_model("initial-exec"))); /* see rl_loop.h */

static void loop_finalize(void *obj);
static char *describe_loop(const void *obj);

const rl__class rl__runloop_class = {"RLRunLoop", loop_finalize, NULL, describe_loop};

RLTypeID RLRunLoopGetTypeID(void) { return rl__type_id(&rl__runloop_class); }

static void loop_finalize(void *obj) {
    RLRunLoopRef rl = obj;
    rl__health_loop_gone(rl);
    rl__stats_free(rl);
    free(rl->due);
    free(rl->ev_big);
    free(rl->homed);
    for (size_t i = 0; i < rl->nmodes; i++)
        rl__mode_free(rl->modes[i]);
    free(rl->modes);
    for (size_t i = 0; i < rl->ncommon; i++)
        if (rl->common[i].name != kRLRunLoopDefaultMode) /* the first: the constant (loop_create) */
            free(rl->common[i].name);
    free(rl->common);
    free(rl->citems);
    free(rl->cidx);
    for (size_t i = 0; i < rl->nfdtab; i++) {
        if (rl->fdtab[i].many) /* else the one source sits in the entry */
            free(rl->fdtab[i].srcs.many);
    }
    rl__span_free(rl->fdtab, rl->nfdtab, sizeof *rl->fdtab);
    /* In a fork() child, an inherited loop's requests are the parent's (it
     * runs them): their release functions are not called here. */
    if (rl__of_this_process(rl))
        rl__perform_destroy(&rl->pq);
    rl__poll_close(&rl->kern);
}

/* "<RLRunLoop 0x...>{backend = io_uring}": the kernel backend it waits on
 * now (rl_poll.h: chosen when it was made; the default's epoll moves to
 * io_uring once, when its sockets ask for the ring). */
static char *describe_loop(const void *obj) {
    const struct RLRunLoop *rl = obj;
    char *s = NULL;
    const char *backend = rl__poll_backend_name(&rl->kern);
    if (asprintf(&s, "<RLRunLoop %p>{backend = %s}", obj, backend ? backend : "none") < 0) {
        rl__fail(kRLErrorNoMemory, "RLCopyDescription", "out of memory");
        return NULL;
    }
    return s;
}
