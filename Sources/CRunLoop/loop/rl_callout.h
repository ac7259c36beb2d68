/*
 * rl_callout.h — private: how the slow-callout report (rl_health.h) names
 * the callouts a library object makes through an fd object of its own: a
 * socket, a port, a signal source (rl__fd_set_owner). Alone so that those
 * rooms need nothing else of the loop's.
 */
#ifndef CRUNLOOP_RL_CALLOUT_H
#define CRUNLOOP_RL_CALLOUT_H
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>

typedef struct rl__callout_owner {
    int kind;                                   /* an RLCalloutKind */
    const void *(*function)(const void *owner); /* the program's callout; may be NULL */
    /* The callout of the fd objects that are parts of the owners' blocks
     * (rl__fd_init_part); NULL for owners that make none. */
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

/* From a callout of f, on its loop's thread: whether that loop would serve
 * f now (f and its source valid, the source in the mode being run, the run
 * not told to stop). A callout that hands over what the fd has in several
 * pieces asks before each further one (RLFileDescriptor.c). */
RL__HIDDEN bool rl__fd_served_now(RLFileDescriptorRef f);

/* From a callout of f: whether the readiness it serves came with no
 * hang-up and no error (epoll's report had none of EPOLLRDHUP, EPOLLHUP,
 * EPOLLERR): the peer had not ended the stream when the loop waited, so
 * no system call need ask. False: it may have, or unknown (not in a
 * callout of f; an always-ready file). */
RL__HIDDEN bool rl__fd_report_quiet(RLFileDescriptorRef f);

/* From a callout of f, on its loop's thread: asks that loop's kernel
 * backend to read f's stream through its ring into q from f's next arming
 * for reading (rl__poll_recv_into, rl_rxq.h). true: it will; false: it
 * cannot (epoll; no provided buffers; q read by another loop's ring), or
 * this is not a callout of f: the caller reads the fd itself, after what q
 * holds. */
struct rl__rxq;
RL__HIDDEN bool rl__fd_recv_into(RLFileDescriptorRef f, struct rl__rxq *q);

/* On the thread of the loop whose ring sends q, or, for q's first send
 * (no ring has it yet), from a callout of f on its loop's thread: n bytes
 * queued for that loop's ring to send (rl__poll_send, rl_txq.h: 1), an
 * earlier ring send's error told (-errno); 0: not this thread's ring, or
 * it cannot (epoll): the caller sends itself. */
struct rl__txq;
/* Whether this is a callout of f on a loop whose backend sends through a
 * ring: a first rl__fd_send_via would queue (the send queue is made only
 * then). */
RL__HIDDEN bool rl__fd_ring_sends(RLFileDescriptorRef f);
RL__HIDDEN int rl__fd_send_via(RLFileDescriptorRef f, struct rl__txq *q, const void *bytes, size_t n);

/* From an fd callout: how many more fd callouts the loop's pass has still
 * to make after it (others ready in the same wake). A hint for how long
 * the callout may take: RLSocket reads in bigger chunks when it is 0. */
RL__HIDDEN size_t rl__fd_pass_left(void);

/* The callback types enabled on f now (a snapshot: the loops clear what
 * they deliver, any thread may enable). */
RL__HIDDEN RLOptionFlags rl__fd_enabled(RLFileDescriptorRef f);

/* The types f's owner enables again after each callout that got them
 * (RLFileDescriptor's `kept`): the loop may leave them on meanwhile. */
RL__HIDDEN void rl__fd_set_kept(RLFileDescriptorRef f, RLOptionFlags types);

/* An fd object that is a part of its owner's block (an RLSocket's: one
 * allocation for both), RL_FD_PART_SIZE bytes at `at` (which must be
 * owner + RL_FD_PART_OFFSET: the part finds its owner there), for fd (which must
 * be open) with callout (how->part_callout; every part's owner is an
 * RLSocket, with one how), named by how (rl__fd_set_owner), with no context:
 * its callouts get owner as their info, and it holds a reference on owner
 * until invalidated (as a context's retain and release would). The owner
 * is the first object of the block (rl__object_share_block); the block
 * goes when both are finalized: the owner's finalizer calls
 * rl__fd_part_gone last. NULL (error set for fn) if fd is not open. */
#define RL_FD_PART_SIZE 64
#define RL_FD_PART_OFFSET 96 /* the owner's bytes before it: the part is at owner + RL_FD_PART_OFFSET */
/* Where in a part its fd is (an int, set by rl__fd_init_part and never
 * changed): the owner reads its fd there instead of keeping a copy. */
#define RL_FD_PART_FD_OFFSET 28
RL__HIDDEN RLFileDescriptorRef rl__fd_init_part(void *at, int fd, RLFileDescriptorCallBack callout, const void *owner,
                                                const rl__callout_owner *how, const char *fn);
RL__HIDDEN void rl__fd_part_gone(RLFileDescriptorRef f);

/* For the tests: the loop's epoll fd, to break it (test_runloop_kernel.c). */
RL__HIDDEN int rl__loop_poll_fd_for_tests(RLRunLoopRef rl);

#endif /* CRUNLOOP_RL_CALLOUT_H */
