/*
 * rl_fdtab.h — private: a loop's fd registrations (rl_fdtab.c): which fd
 * sources sit on each fd number, what epoll watches for, and the callouts
 * an epoll report turns into. The table's types (rl__fdreg) are in
 * runloop_internal.h because the loop embeds them. Loop lock held
 * throughout unless said otherwise.
 */
#ifndef CRUNLOOP_RL_FDTAB_H
#define CRUNLOOP_RL_FDTAB_H

#include "rl_loop.h"
#include "runloop_internal.h"
#include <crunloop/RLRunLoop.h>

/* Files src under its fd (src joins rl). False: out of memory (nothing
 * changed). src's item lock held. */
RL__HIDDEN bool rl__fd_register(RLRunLoopRef rl, struct RLRunLoopSource *src);
/* src leaves rl's table; its fd leaves the epoll set when no source is
 * left on it. src's item lock held. */
RL__HIDDEN void rl__fd_unregister(RLRunLoopRef rl, struct RLRunLoopSource *src);
/* Re-reads what src wants and re-arms its fd. src's item lock held. */
RL__HIDDEN void rl__fd_update(RLRunLoopRef rl, struct RLRunLoopSource *src);
/* The armed mode changed: every source's wish is read again, each under
 * its item lock in turn (no item lock held by the caller). */
RL__HIDDEN void rl__fd_sync_all(RLRunLoopRef rl);
/* Right after epoll_wait: reported one-shot registrations are disarmed,
 * and reports under a tag the loop gave up on are blanked. */
RL__HIDDEN void rl__fd_note_events(RLRunLoopRef rl, struct epoll_event *ev, int n);
struct rl__fd_fire;
/* After the callouts of a pass, for each callout made: one-shot, every
 * wish on its fd read again, then the registration settled
 * (rl__fd_settle) or, if a run nested in a callout settled it already,
 * brought in line. Kept: the firing mark cleared, and the registration
 * settled only if something changed it or the wishes meanwhile; if the
 * source joined another loop, fire->rearm_others is set (the caller
 * re-arms it there with no lock held). */
RL__HIDDEN void rl__fd_after_callout(RLRunLoopRef rl, struct rl__fd_fire *fire);
/* The same when the loop is a fork() child's copy: only the firing mark
 * of a kept callout is cleared (the parent's epoll set is left alone). */
RL__HIDDEN void rl__fd_after_callout_in_child(struct rl__fd_fire *fire);
/* Just before the loop waits: what is still to settle, and a new epoll set
 * if a registration the loop lost reported. */
RL__HIDDEN void rl__fd_before_wait(RLRunLoopRef rl);
/* Re-arms the fd of s in every loop s is in but `except`. No lock held. */
RL__HIDDEN void rl__fd_resync_except(struct RLRunLoopSource *s, RLRunLoopRef except);
/* What the fd object of s wants changed (enabled callbacks): re-arms its
 * fd in every loop s is in, but this thread's loop while it makes the
 * callout of that fd (it reads every wish again after: see
 * rl__fd_after_callout). No lock held. */
RL__HIDDEN void rl__source_fd_resync(struct RLRunLoopSource *s);
/* Whether this thread's loop is making the callout of s (the innermost
 * one, in a nested run): the loop keeps a reference on s until it returns,
 * which code called from the callout may borrow. */
static inline bool rl__fd_callout_running(const struct RLRunLoopSource *s) {
    RLRunLoopRef mine = rl__tls;
    return mine && mine->src_in_callout == s;
}

/* One callout an epoll report turns into: the source (retained), the
 * callback types it gets (already disabled: callbacks are one-shot; or
 * kept, below) and its fd (settled after the callouts). */
typedef struct rl__fd_fire {
    struct RLRunLoopSource *src;
    RLOptionFlags types;
    int fd;
    /* The source was in another loop too when its types were taken (and
     * turned off): that loop's copy of its wishes needs re-reading. A loop
     * it joins after reads them as they are then, off. */
    bool elsewhere;
    /* Kept (rl_fdtab.c): the types stay enabled and the registration as it
     * is; the fd object marks them firing. What the loop saw when it took
     * them, to tell after the callout whether anything changed. */
    bool kept;
    /* The report had no hang-up and no error in it (EPOLLRDHUP, EPOLLHUP,
     * EPOLLERR; a read registration asks for EPOLLRDHUP): when the loop
     * waited, the peer had not ended the stream (rl__fd_report_quiet). */
    bool quiet;
    /* After a kept callout: the source joined another loop meanwhile. */
    bool rearm_others;
    RLOptionFlags enabled_at;
    uint32_t gen_at, armed_at;
} rl__fd_fire;

/* The callouts the events of the wait numbered wait_no (rl->nwaits just
 * after it) turn into in mode m. */
RL__HIDDEN size_t rl__fd_collect(RLRunLoopRef rl, rl__mode *m, struct epoll_event *ev, int nev, uint64_t wait_no,
                                 bool stop_after_handle, rl__fd_fire **fire, rl__fd_fire *inl, size_t *cap);

/* For the tests: how many times the loop has called epoll_ctl for user fds. */
RL__HIDDEN unsigned long rl__fd_ctl_calls(RLRunLoopRef rl);

/* For the tests: the bytes rl's fd table takes (its entries and their
 * blocks of sources), *blocks (may be NULL): how many fds have a block
 * (more than one source on them at some point). */
RL__HIDDEN size_t rl__fd_table_bytes(RLRunLoopRef rl, size_t *blocks);

/* For the tests: how many callouts the loop has made kept. */
RL__HIDDEN unsigned long rl__fd_kept_calls(RLRunLoopRef rl);

#endif /* CRUNLOOP_RL_FDTAB_H */
