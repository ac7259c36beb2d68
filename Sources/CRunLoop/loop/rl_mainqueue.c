/*
 * rl_mainqueue.c — the main dispatch queue as a source of every common mode
 * of the main thread's loop, as CoreFoundation does it (rl_mainqueue.h).
 *
 * libdispatch keeps the main queue's blocks until someone on the main thread
 * drains them: dispatch_main(), or a run loop through the two hooks it
 * exports for CF. The handle is an eventfd that libdispatch writes whenever
 * the queue goes from empty to non-empty (and again after a drain that left
 * blocks behind, such as one queued by a block); it never reads it back. The
 * loop watches it (edge-triggered) while it runs a mode where the queue is
 * served, reads it back when it reports (as CF does), and then calls the
 * drain hook, which runs the blocks pending at its start.
 *
 * The hooks are found with dlsym in what the process has loaded: a C
 * program that does not link libdispatch does not load it because of us.
 */
#include "rl_mainqueue.h"
#include "rl_health.h"

#include "rl_fork.h"
#include "rl_lock.h"
#include "rl_poll.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*handle_fn)(void);
typedef void (*drain_fn)(void *);

/* Set once, before the main loop is published (rl_main_mutex). */
static handle_fn handle;
static drain_fn drain;

/* libdispatch binds its main queue to the thread that loaded it, the
 * process's main thread; our main loop's thread is the one that loaded this
 * library (RLRunLoop.c). They are the same thread unless this library was
 * dlopen()ed from another one: then the main loop has no main queue (the
 * drain hook refuses any other thread, by crashing). */
static bool loaded_on_main_thread;

__attribute__((constructor)) static void record_loading_thread(void) {
    loaded_on_main_thread = syscall(SYS_gettid) == getpid();
}

void rl__mainq_attach(RLRunLoopRef rl) {
    /* A fork() child: libdispatch refuses to run in the child of a process
     * that used its main queue's handle. */
    if (!loaded_on_main_thread || rl__fork_gen() != 0)
        return;
    handle_fn h = (handle_fn)dlsym(RTLD_DEFAULT, "_dispatch_get_main_queue_handle_4CF");
    drain_fn d = (drain_fn)dlsym(RTLD_DEFAULT, "_dispatch_main_queue_callback_4CF");
    if (!h || !d)
        return; /* libdispatch is not loaded */
    handle = h;
    drain = d;
    rl->mainq = true;
}

bool rl__mainq_arm(RLRunLoopRef rl, const rl__mode *m) {
    bool want = rl__mainq_in_mode(rl, m);
    if (want == rl->mainq_armed)
        return true;
    /* The handle is asked for when the loop first waits in a mode that
     * serves the queue, as CF does: making it is what tells libdispatch
     * that fork() children may no longer use it. */
    if (rl->mainq_fd < 0) {
        rl->mainq_fd = handle();
        if (rl->mainq_fd < 0) {
            rl->mainq = false;
            return rl__fail(kRLErrorInvalidState, "RLRunLoopRunInMode", "libdispatch has no main queue handle");
        }
    }
    int err = rl__poll_ctl(&rl->kern, want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, rl->mainq_fd, EPOLLIN | EPOLLET, 0);
    if (err) {
        /* Out of the set already (the loop moved to a new epoll set) or in
         * it already: the state wanted. Anything else: not watched, tried
         * again before the next wait. */
        if (!(want ? err == EEXIST : err == ENOENT))
            return rl__fail_errno(err, "RLRunLoopRunInMode", "cannot watch the main dispatch queue");
    }
    rl->mainq_armed = want;
    return true;
}

bool rl__mainq_serve(RLRunLoopRef rl, rl__mode *m) {
    if (rl->mainq_fd < 0)
        return false; /* no wait has asked for the handle yet: nothing queued can be seen */
    rl__loop_lock(rl);
    bool go = rl__mainq_in_mode(rl, m);
    rl__loop_unlock(rl);
    if (!go)
        return false; /* reported while not served here: kept for a pass that serves it */
    rl->mainq_ready = false;
    uint64_t n;
    ssize_t r;
    do {
        r = read(rl->mainq_fd, &n, sizeof n);
    } while (r < 0 && errno == EINTR);
    if (r != (ssize_t)sizeof n)
        return false; /* EAGAIN: read back already; nothing came since */
    rl->mainq_serving = true;
    RL__CALLOUT(rl, kRLCalloutMainQueue, drain, NULL, m->name, drain(NULL));
    rl->mainq_serving = false;
    return true;
}
