/*
 * rl_poll_backend.h — private: what a kernel backend is (rl__poll_ops) and
 * what it works on (rl__poller, the tagged epoll_event records). The seam
 * (rl_poll.h, rl_poll.c) chooses a backend and calls it; each backend is
 * one file (rl_poll_epoll.c, rl_poll_uring.c) that includes this header
 * only, so a backend never reaches back into the seam.
 */
#ifndef CRUNLOOP_RL_POLL_BACKEND_H
#define CRUNLOOP_RL_POLL_BACKEND_H

#include "RLBase.h"
#include "rl_rxq.h"
#include "rl_txq.h"
#include "rl_span.h" /* fd-indexed tables over the span of their fds */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

/* io_uring is built in unless PLAIN=1 (-DRL_PLAIN=1) or -DRL_TRICK_URING=0:
 * epoll only, no liburing needed. */
#ifndef RL_TRICK_URING
#define RL_TRICK_URING (!RL_PLAIN)
#endif

/* A loop's kernel objects: what the seam works on. A loop embeds one
 * (struct RLRunLoop's `kern`) and hands it to every call; the seam knows
 * nothing else of the loop. */
typedef struct rl__poller {
    int epfd, evfd, tfd;              /* -1: not made. epfd: the backend's set (an epoll fd, an io_uring fd) */
    /* The default backend's loop (rl__poll_open): on epoll, to move to
     * io_uring (rl__poll_upgrade) once its sockets would use the ring.
     * `lazy`: it may (set when made, cleared by the move or its failure);
     * `want_ring`: a callout on the loop's thread asked the ring to read or
     * send (rl__poll_recv_into, rl__poll_sends), so the loop moves before it
     * waits again. The loop's thread's, or under its lock (in the padding
     * after the fds: a loop's layout is tight). */
    bool lazy, want_ring;
    const struct rl__poll_ops *kops;  /* the backend, chosen by rl__poll_open */
    void *kstate;                     /* the backend's own state, if any */
    pthread_t owner;                  /* the loop's thread (io_uring: the only one that submits) */
    _Atomic int *nap_word;            /* the coalescing sleep's futex word (the loop's wake_pending) */
} rl__poller;

/* An event's data: the registration's tag above the fd (the loop's own
 * eventfd and timerfd have tag 0). */
static inline uint64_t rl__ev_data(int fd, uint32_t gen) { return (uint64_t)gen << 32 | (uint32_t)fd; }

static inline int rl__ev_fd(const struct epoll_event *ev) { return (int)(uint32_t)ev->data.u64; }

static inline uint32_t rl__ev_gen(const struct epoll_event *ev) { return (uint32_t)(ev->data.u64 >> 32); }

/* A kernel backend: what a loop's set of watched fds is made of. Each call
 * has the contract of the rl__poll_* call of the same name (rl_poll.h);
 * `open` makes the set (rl->epfd: its fd, the number a test may break)
 * with the loop's eventfd and timerfd (already made) in it,
 * edge-triggered, tag 0. */
typedef struct rl__poll_ops {
    const char *name;      /* what RLRunLoopGetBackendName says: "epoll", "io_uring" */
    const char *wait_call; /* the system call a refused wait names */
    int (*open)(rl__poller *rl);
    void (*close)(rl__poller *rl);
    int (*renew)(rl__poller *rl);
    int (*ctl)(rl__poller *rl, int op, int fd, uint32_t events, uint32_t gen);
    int (*wait)(rl__poller *rl, struct epoll_event *ev, int maxev, int timeout_ms);
    rl__rxq *(*recv_into)(rl__poller *rl, int fd, size_t want); /* NULL: the backend reads nothing itself (epoll) */
    void (*recv_self)(rl__poller *rl, int fd, bool self);          /* NULL: the backend reads nothing itself (epoll) */
    int (*send)(rl__poller *rl, rl__txq *q, const void *bytes, size_t n, bool soon,
                double timeout); /* NULL: sends nothing (epoll) */
    void (*flush)(rl__poller *rl);                         /* NULL: nothing to flush */
} rl__poll_ops;

RL__HIDDEN extern const rl__poll_ops rl__poll_epoll_ops; /* rl_poll_epoll.c */
#if RL_TRICK_URING
RL__HIDDEN extern const rl__poll_ops rl__poll_uring_ops; /* rl_poll_uring.c */
/* Whether this process may make io_uring instances (neither refused nor
 * failed yet; rl_poll_uring.c). A refusal (EPERM, ENOSYS: the
 * kernel.io_uring_disabled sysctl, a seccomp filter) is remembered: later
 * loops go to epoll at once. */
RL__HIDDEN int rl__poll_uring_usable(void);
/* The bytes of rl's table of registrations if rl is on io_uring, else 0
 * (tests: test_loop_memory). */
RL__HIDDEN size_t rl__poll_uring_regs_bytes(rl__poller *rl);
/* The entries of rl's submission and completion queues if rl is on
 * io_uring, else 0 and 0 (tests: test_socket_ring). */
RL__HIDDEN void rl__poll_uring_ring_sizes(rl__poller *rl, unsigned *sq, unsigned *cq);
#endif

#endif /* CRUNLOOP_RL_POLL_BACKEND_H */
