/*
 * rl_callout.h — private: how the slow-callout report (rl_health.h) names
 * the callouts a library object makes through an fd source of its own: a
 * socket (rl__fdsrc_init), a port, a signal source (rl__fd_set_owner). Alone so that those
 * rooms need nothing else of the loop's.
 */
#ifndef CRUNLOOP_RL_CALLOUT_H
#define CRUNLOOP_RL_CALLOUT_H
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>

typedef struct rl__callout_owner {
    int kind;                                   /* an RLCalloutKind */
    const void *(*function)(const void *owner); /* the program's callout; may be NULL */
    /* The callout of the fd sources that owners make themselves
     * (rl__fdsrc_init); NULL for owners that make none. */
    RLFileDescriptorCallBack part_callout;
} rl__callout_owner;

/* Tears down the calling thread's run loop the CF way (sources cancelled
 * on this thread, everything released). Safe to call more than once; the
 * run loop's own pthread-key destructor calls it for threads that exit
 * without it. RLThread calls it after the entry returns and before the
 * will-exit notifications. */
RL__HIDDEN void rl__runloop_teardown_current_thread(void);

/* The run loop of `thread` (Get rule: the reference lasts until that thread
 * tears its loop down; retain it to keep it longer), creating it if the
 * thread has none yet, as CF's _CFRunLoopGet0(pthread_t): when `thread`
 * later calls RLRunLoopGetCurrent it gets this same loop. The caller must
 * know that `thread` is alive and will tear its loop down when it exits
 * (an RLThread before its exit sequence closed its perform requests), or a
 * loop made for it would outlive it. NULL (error set) if out of resources. */
RL__HIDDEN RLRunLoopRef rl__runloop_get_for_thread(pthread_t thread);

/* The fd source of an owner that makes its own (an RLSocket): one block
 * for the owner, its RL_FD_OWNER_SIZE bytes first, and its fd source
 * after them, RL_FD_SOURCE_SIZE bytes (runloop_internal.h's RL__FDSOURCE_SIZE
 * says who holds what). The functions below take that source (or an
 * RLFileDescriptor's). */
#define RL_FD_OWNER_SIZE 72
#define RL_FD_SOURCE_SIZE 136
/* Where in an fd source its fd is (an int, set by rl__fdsrc_init and never
 * changed): the owner reads its fd there instead of keeping a copy. */
#define RL_FD_SOURCE_FD_OFFSET 112

/* Makes the fd source at `at` (which must be owner + RL_FD_OWNER_SIZE,
 * zeroed) for fd (which must be open): asleep (no reference counts it, in
 * no loop), its fd valid, no callback enabled. Its callouts call
 * how->part_callout (every such owner is an RLSocket, with one how) with
 * the owner as their info; how names them (rl__fd_set_owner). It takes no
 * reference on the owner until woken (rl__fdsrc_wake). false (error set
 * for fn) if fd is not open. */
RL__HIDDEN bool rl__fdsrc_init(void *at, int fd, const void *owner, const rl__callout_owner *how, const char *fn);
/* The owner's CreateRunLoopSource: s retained, woken if asleep (then of
 * order `order`, holding a reference on the owner until its last
 * reference goes); NULL (error set for fn) if its fd was invalidated. */
RL__HIDDEN RLRunLoopSourceRef rl__fdsrc_wake(RLRunLoopSourceRef s, RLIndex order, const char *fn);
/* Turns the callback types on or off (RLFileDescriptorEnableCallBacks and
 * Disable): false (error set for fn) if invalidated, or stale. */
RL__HIDDEN bool rl__fdsrc_set_enabled(RLRunLoopSourceRef s, RLOptionFlags types, bool on, const char *fn);
/* Invalidates s's fd, once: no callout after (those running finish), its
 * callbacks off, and, if awake, the source invalidated and out of every
 * loop. Closes nothing and releases nothing of the owner's. Returns
 * whether it was valid. No lock held. */
RL__HIDDEN bool rl__fdsrc_invalidate(RLRunLoopSourceRef s);

/* From a callout of s, on its loop's thread: whether that loop would serve
 * s now (its fd and it valid, it in the mode being run, the run not told
 * to stop). A callout that hands over what the fd has in several pieces
 * asks before each further one (RLFileDescriptor.c). */
RL__HIDDEN bool rl__fd_served_now(RLRunLoopSourceRef s);

/* From a callout of s: whether the readiness it serves came with no
 * hang-up and no error (epoll's report had none of EPOLLRDHUP, EPOLLHUP,
 * EPOLLERR): the peer had not ended the stream when the loop waited, so
 * no system call need ask. False: it may have, or unknown (not in a
 * callout of s; an always-ready file). */
RL__HIDDEN bool rl__fd_report_quiet(RLRunLoopSourceRef s);

/* From a callout of s, on its loop's thread: asks that loop's kernel
 * backend to read s's stream through its ring from its fd's next arming
 * for reading (rl__poll_recv_into, rl_rxq.h), the reader's chunk `want`
 * bytes. The ring's read-ahead queues (a reference, the caller's), where
 * the reader takes what the ring read under its fd before it reads the
 * fd; NULL: it cannot (epoll; no provided buffers), or this is not a
 * callout of s: the caller reads the fd itself. `*later`: it cannot now,
 * but may from a later callout (a loop on the default backend, which moves
 * to io_uring before it waits again: rl__poll_upgrade). */
struct rl__rxq;
RL__HIDDEN struct rl__rxq *rl__fd_recv_into(RLRunLoopSourceRef s, size_t want, bool *later);

/* From a callout of s, on its loop's thread, for a stream read through
 * its ring (rl__fd_recv_into): `self`, the reader reads the fd itself from
 * now on, the ring only polls it; else the ring reads it again
 * (rl__poll_recv_self). Nothing elsewhere. */
RL__HIDDEN void rl__fd_recv_self(RLRunLoopSourceRef s, bool self);

/* On the thread of the loop whose ring sends q, or, for q's first send
 * (no ring has it yet), from a callout of s on its loop's thread: n bytes
 * queued for that loop's ring to send (rl__poll_send, rl_txq.h: 1; the
 * run's end waits up to `timeout` for them to be sent), an
 * earlier ring send's error told (-errno); 0: not this thread's ring, or
 * it cannot (epoll): the caller sends itself. */
struct rl__txq;
/* Whether this is a callout of s on a loop whose backend sends through a
 * ring: a first rl__fd_send_via would queue (the send queue is made only
 * then). A callout of s on a loop of the default backend asks it to move
 * to the ring (rl__poll_sends): the callouts after that wait send through
 * it. */
RL__HIDDEN bool rl__fd_ring_sends(RLRunLoopSourceRef s);
RL__HIDDEN int rl__fd_send_via(RLRunLoopSourceRef s, struct rl__txq *q, const void *bytes, size_t n, double timeout);
/* On the thread of the loop whose ring sends q: its queued sends seen
 * through now, as at a run's end (each up to its writer's timeout): true.
 * false: another thread's ring (or none), which only its thread moves. */
RL__HIDDEN bool rl__fd_ring_flush(struct rl__txq *q);

/* From an fd callout: how many more fd callouts the loop's pass has still
 * to make after it (others ready in the same wake). A hint for how long
 * the callout may take: RLSocket reads in bigger chunks when it is 0. */
RL__HIDDEN size_t rl__fd_pass_left(void);

/* The callback types enabled on s's fd now (a snapshot: the loops clear
 * what they deliver, any thread may enable). */
RL__HIDDEN RLOptionFlags rl__fd_enabled(RLRunLoopSourceRef s);

/* The types s's owner enables again after each callout that got them
 * (rl__fdstate's `kept`): the loop may leave them on meanwhile. */
RL__HIDDEN void rl__fd_set_kept(RLRunLoopSourceRef s, RLOptionFlags types);

/* For the tests: the loop's epoll fd, to break it (test_runloop_kernel.c). */
RL__HIDDEN int rl__loop_poll_fd_for_tests(RLRunLoopRef rl);

#endif /* CRUNLOOP_RL_CALLOUT_H */
