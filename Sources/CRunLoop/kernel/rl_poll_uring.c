/*
 * rl_poll_uring.c — the io_uring backend of the kernel seam (rl_poll.h).
 * A loop's set is one io_uring (rl->epfd: its fd). Each registration is a
 * poll request in the ring, keyed by its fd and a sequence number in the
 * request's user_data; the wait is one io_uring_enter that submits what
 * was queued and waits for completions, which are turned into the
 * epoll_event records the core reads (tag: the registration's gen).
 *
 * epoll's semantics, as the core uses them (rl_fdtab.c), are kept:
 *   - EPOLLONESHOT: a single-shot poll; it reports once, then the
 *     registration stays, disarmed, until a MOD arms it again.
 *   - level-triggered (neither ONESHOT nor ET, a persistent registration):
 *     a single-shot poll queued again as each report is handed out, so the
 *     next wait (the same enter) asks the file again and reports while it
 *     is ready, as epoll_wait does — no system call of its own. A report
 *     kept for a later harvest (more came than the caller asked for) is
 *     its registration's only one until it is handed out: asked again
 *     before, the file, not read yet, reported again at every fill (256
 *     Read-callback sockets: thousands of kept reports, callouts that
 *     found nothing to read, the other fds waiting behind them).
 *   - EPOLLET (the loop's eventfd and timerfd, the main queue's eventfd):
 *     a multishot poll, one report per wake-up of the file; armed again if
 *     the kernel ends it.
 *   - epoll_ctl's answers: EEXIST (ADD of a present fd), ENOENT (MOD/DEL
 *     of an absent one, or of a number that names another file now:
 *     fstat's identity), EBADF (a closed fd), EPERM (a file without poll:
 *     regular files, directories, and devices epoll refuses, asked of a
 *     throwaway epoll set). A poll holds its file open, which epoll does not:
 *     a registration whose fd was closed is cancelled as soon as the loop
 *     learns of it, and removals are submitted at once.
 *   - a report says what the file is when it is handed out, as epoll_wait
 *     asks each ready file: a poll's completion carries what woke the
 *     file, so a report of a poll armed before the enter and woken while
 *     the program ran, or one kept from an earlier harvest, is asked again
 *     of the file (uring_recheck); a poll answered with nothing asked
 *     (POLLRDHUP, which io_uring's poll reports unasked) is no report.
 * A report of a request that was replaced (its sequence number is no
 * longer the fd's) is dropped: the request that replaced it asks the file
 * again when it is armed.
 *
 * The ring has one issuer, the loop's thread (IORING_SETUP_SINGLE_ISSUER,
 * enabled by its first wait), and runs the kernel's completion work only
 * when that thread asks for completions (IORING_SETUP_DEFER_TASKRUN): no
 * other thread's system calls are ever interrupted for the ring (a poll
 * submitted by a thread makes that thread run its completion, and
 * interrupts its blocking calls with EINTR, otherwise). A change is made
 * in the registration table, under a mutex of the backend, by whichever
 * thread changes a registration (under the loop lock): epoll's answer is
 * given at once, and the fd is put on a list of changes that the loop's
 * thread turns into submissions before each enter. A change made by
 * another thread wakes the wait through a second eventfd (`kick`) whose
 * reports the backend keeps to itself; a removal made on the loop's thread
 * is submitted at once (the poll holds the file open), and one made by
 * another thread while the loop's thread sleeps in its wait is submitted
 * by that thread as it wakes, and waited for (uring_ctl). A fork() child
 * inherits the ring's fd and mapping with the parent's loop and never uses
 * them (every call on an inherited loop is refused; its close unmaps the
 * child's view only); its own loops get rings of their own. (Not
 * io_uring_ring_dontfork: valgrind's address-space map does not follow
 * MADV_DONTFORK, and a child's next mmap aborts it.) Linux 6.1 or later
 * (else epoll). A ring is made when a loop is (RL_BACKEND=io_uring), or
 * when a loop of the default backend moves from epoll (rl__poll_upgrade,
 * on the loop's thread before a wait): the same open either way.
 *
 * Reading through the ring (rl__poll_recv_into): a registration marked a
 * reader (its stream's bytes queued under its fd in the ring's read-ahead
 * queues, u->rx, rl_rxq.h: an fd's entry there holds chunks only while bytes wait, so
 * an idle stream costs the ring nothing but its registration; the queues
 * outlive the ring for the streams that hold them) is armed for reading alone as a
 * multishot receive into the loop's provided buffers (a buffer ring of
 * URING_BUFS buffers, registered with the first such registration;
 * consumed incrementally where the kernel can, Linux 6.12: a receive takes
 * only the bytes it read from a buffer, which stays in the ring until it
 * is used up, so 64 buffers serve thousands of small reads between two
 * enters instead of 64) instead of a poll. The receive stays in the ring across callouts and
 * re-armings: the kernel reads each time bytes come (until EAGAIN), a
 * completion per buffer, and no request is submitted per read (a single
 * receive instead if the reader asks for less than a buffer at a time).
 * A change of the registration that still reads keeps it; one that stops
 * reading, a removal or a closed file cancels it; one the kernel ended
 * (no IORING_CQE_F_MORE: no buffer free, the end, an error) is submitted
 * again by the next arming. Every receive's result is queued at once,
 * copied out of its buffer, which goes back to the ring: a receive's bytes
 * are never dropped, even when its registration was changed or removed
 * meanwhile (a cancelled receive that had read still queues what it read
 * under its fd, unless the number was found naming another file since:
 * uring_dying). Epoll's level semantics
 * come from the queue: the kernel drains the socket into it, so the
 * socket is readable exactly while the queue holds chunks. Bytes that come
 * while the registration is armed are reported (EPOLLIN; EPOLLRDHUP at the
 * end, EPOLLERR on an error), one-shot or level as for polls; bytes that
 * come while it is not (one-shot, reported and not armed again yet) are
 * only queued, and a queue that holds chunks when its registration is
 * armed is reported at once, without asking the kernel. No buffer free
 * when data came (ENOBUFS, nothing read): that arming is done again as a
 * poll, and the reader reads the fd itself. So does a reader that asks to
 * (uring_recv_self: a stream in bulk, which its socket reads a chunk at a
 * time with no copy): its live receive is cancelled (what it read still
 * queued), its armings are polls until it asks for the ring again.
 * Every completion is taken from the ring as soon as an enter returns
 * (reports beyond what the caller
 * asked for wait in `pend`; completions the kernel kept aside when the
 * queue was full are fetched too), so no receive's bytes sit unseen while
 * the reader reads the fd directly; and the receive itself runs only
 * inside the loop thread's enters (IORING_SETUP_DEFER_TASKRUN), so a read
 * of the fd by the reader between two enters is never overtaken.
 *
 * Sending through the ring (rl__poll_send): a stream's writes made on
 * the loop's thread are queued in its send queue (rl_txq.h), and each
 * queue with chunks has one IORING_OP_SEND in flight, of its head chunk
 * from where the last one stopped, submitted with the loop's next enter
 * (or at once when the loop is not in a run); its completion pops the
 * chunk or continues a short send, and lists the queue again while it has
 * chunks. A queue's send made in a run needs no list: its entry is made
 * at once (the enter that ends the callouts' pass submits it). user_data:
 * URING_TX with the queue's address (the ring holds a reference while it
 * is listed or in flight, the queue on the ring's list `txheld`, for the
 * ring's end). An error drops the queue's chunks
 * and is kept for the writer's next send. Like the receives, a send that
 * waits for room in the socket goes on only inside the loop thread's
 * enters (IORING_SETUP_DEFER_TASKRUN): so the end of a run, and a send
 * made outside one, enter and wait until no queue holds bytes (each up to
 * its writer's timeout: uring_tx_finish), and the program never finds its
 * bytes waiting for a run that may not come.
 *
 * Why fd sources stay single-shot polls (not multishot ones kept across
 * callouts): a multishot poll reports the file's wake-ups, not its state.
 * Epoll's level and re-arm semantics need the file asked again after each
 * report (a callout that read less than was there, a writable socket), and
 * on io_uring asking again is a request, whether a new poll or a poll
 * update; a stream read through the ring needs none, its queue says. The
 * one exception is a file that answers with nothing the registration
 * asked for: io_uring's poll always reports POLLRDHUP (epoll only when
 * asked), and a socket whose peer shut down its writing side says so for
 * good; asked again single-shot, it would answer at once, forever. Such a
 * registration (`quiet`) is asked with a multishot poll, which answers
 * wake-ups, and at its arming the file's state, as a single-shot one.
 *
 * Where an echo server's time goes (2026-12-05, perf cpu-clock of the
 * server thread, bench_echo_instr rt16: 64-byte round trips over 16
 * connections, ours-ur against raw epoll): the kernel's TCP send, which
 * delivers over loopback to the client's socket within the sender's call,
 * is about 70% of either server's CPU and the same on both; the ring saves
 * the system calls (recvfrom, sendto, epoll_wait: entry, fdget/fput, ep
 * polls) and spends instead about 8% in its own work (io_submit_sqes,
 * io_send and its prep, the send's fget, the multishot receive's task
 * work and buffer selection) and about 5% in user space (2,590 steps per
 * round trip against epoll's ~1,750). The ratio depends on where the
 * threads run: client and server pinned to the same CPU 0.5x epoll's CPU
 * per round trip (~3.9 against 7.5 us), on separate CPUs 0.85-0.9x (5.6-5.7
 * against 6.3-7 us): there the ring's server is done sooner and sleeps at
 * every round trip (finish_task_switch 3% of its samples, against 0.5%
 * for epoll's, whose later waits find the next message there). Bulk (4 KB
 * writes over 16 connections): the copies of the bytes in user space were
 * 17% of the server's samples (provided buffer to the read-ahead queue,
 * the queue's buffers joined for a delivery, the reply into the send
 * queue); a write over 4 KB is now sent from its RLData (rl_txq.h), and
 * 9% are left. Tried and dropped: joining a reap's consecutive full
 * buffers for one queue into one chunk as they are queued (grown to the
 * reader's chunk by realloc: the server's CPU per MB went up, 7 of 8 runs
 * alternated), and timing the wait's retry with the coarse clock (the
 * server's waits have no timeout: no clock is read there).
 *
 * Measured again (2026-12-05, bench_echo's rt16, rt256 and tp16 rows,
 * threads not pinned, perf cpu-clock of the server thread; each change
 * below against the same build without it, runs alternated, medians of
 * paired ours-ur/epoll ratios): at 256 connections 83% of the ring
 * server's samples are the kernel's TCP work (the send 70%, the receive
 * 12%), 7.5% io_uring's own (submission, the receives' task work,
 * completions), 4.6% user space, 3% (6% at 16 connections) switching
 * back in after a sleep (it sleeps about once per 10 round trips here),
 * 1.5% the sends' fget/fput. So with no work of its own at all the ring
 * server would be at ~0.73x epoll's CPU per round trip; measured 0.86-0.92x
 * at 16 connections and 0.80-0.87x at 256. Tried and dropped:
 *   - fixed files (each socket in a sparse registered table, slot = fd,
 *     IOSQE_FIXED_FILE on its receive and sends): fget/fput 1.5% -> 0.1%
 *     of the samples at 256 connections, the CPU per round trip unmoved
 *     (0.881x both at 16, 8 pairs; 0.807x against 0.803x at 256, 14
 *     pairs), and the table holds every socket open until its slot is
 *     cleared: a close would reach the peer only after that update.
 *   - a registered ring fd (IORING_ENTER_REGISTERED_RING: no fget/fput of
 *     the ring's fd per enter, 0.3% of the samples): 0.898x against 0.856x
 *     at 16, 0.818x against 0.817x at 256 (10 pairs).
 *   - batching the wait (min_wait_usec, Linux 6.12: wait for as many
 *     completions as receives in flight, at most 16, or the few us): 2 and
 *     5 us doubled the CPU per round trip at 16 connections (10-14 against
 *     5.2 us), halved the rate and stalled waits (p99 ~4 ms); 10 us +20%.
 *   - a bounded spin before sleeping (IORING_SETUP_TASKRUN_FLAG's
 *     IORING_SQ_TASKRUN watched for up to 2 us while 2 or more receives
 *     are live: completions wait as task work, not in the CQ, under
 *     DEFER_TASKRUN): it caught 31% of the sleeps, the CPU per round trip
 *     unmoved (0.885x both at 16, 0.847x against 0.843x at 256, 8 pairs),
 *     bulk CPU per MB +24% (1.49x against 1.20x epoll's, 6 pairs).
 * Bulk is where the ring server loses: 12-17% of its samples at 16
 * connections are page faults, in the read-ahead queue's copies (a
 * receive's chunk over 4 KiB, a delivery's chunks joined by realloc, a
 * chunk filled from the fd: malloc'd and freed each time; an echo's
 * reply over 4 KB is sent from the delivered data, which so outlives its
 * callout and is freed when the send completes, never reused as the
 * epoll path's read buffer is; glibc trims the heap's top and the next
 * growth faults the pages in again, zeroed). With glibc's trimming held
 * off for the run (GLIBC_TUNABLES=glibc.malloc.trim_threshold=64M:
 * glibc.malloc.top_pad=4M, bench only) the CPU per MB fell from 0.98 to
 * 0.85 ms at 16 connections (1.23x -> 1.04x epoll's, 6 pairs; 0.90 ->
 * 0.86 in a later 6) and from 0.46 to 0.30 ms on 1 connection (1.20x ->
 * 0.94x): keeping those blocks for the thread's next receives is the
 * lever there. Delivering the ring's chunks unjoined instead (no realloc,
 * no fill from the fd) was worse: 1.27x against 1.09x at 16, 1.60x
 * against 1.20x on 1 (6 pairs).
 *
 * Sorted by kind of work (2026-12-06, `make bench-echo-profile`, tp16:
 * 3,000 MB over 16 connections), the ring server's user space is 0.13-0.19
 * ms per MB against raw epoll's 0.02 (13-18% of its CPU: the copies out of
 * the provided buffers and the reader's joins), the rest about level; page
 * faults in those copies vary from run to run (10,000-58,000 minor faults
 * a 2,000 MB run, the same build), as glibc gives the arena's free pages
 * back or not. Tried and dropped: a full receive's chunk made the reader's
 * size (64 KiB) and the receives after it appended to it under the queue's
 * lock (no chunk of their own, no join), those chunks kept by the thread
 * (4 and 32 blocks tried) and given back when the data made of them is
 * done: user space -0.04 s but system time +0.17 s a 2,000 MB run, minor
 * faults 36,000 -> 106,000 (10 pairs alternated, whole process): the
 * bigger blocks grew and trimmed the heap more often than the 16 KiB ones.
 */
#include "rl_poll_backend.h"
#include "RLLockInternal.h"

#if RL_TRICK_URING

#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

enum {
    URING_SQ = 128,   /* submission queue entries at most (full: submitted early) */
    URING_CQ = 1024,  /* completion queue entries at most (more: kept by the kernel, IORING_FEAT_NODROP) */
    /* A ring starts with the queues that fit a page each (the entries 4
     * KiB, the completions with the rings' heads 2.4 KiB): 8 KiB in all
     * against 28 KiB at the sizes above, most of an idle loop thread's
     * cost on this backend. Where the kernel can resize a ring (Linux
     * 6.13), a queue that fills is doubled, up to the sizes above
     * (uring_grow_rings); elsewhere rings are made at those sizes. */
    URING_SQ_MIN = 64,
    URING_CQ_MIN = 128,
    URING_BUFS = 64,  /* provided buffers for receives (a power of 2) */
    URING_BUF_SIZE = 16384,
    URING_BGID = 0,   /* their group */
};
#define URING_REMOVE UINT64_MAX /* user_data of a removal: its completion is not a report */
/* What a completion is (uring_take): no report; a report of what is so
 * (a receive's queue, an edge's wake-up); a poll's report, which tells
 * what woke the file, maybe before the program changed it (uring_recheck);
 * the report of a poll the enter just made submitted, which asked the file
 * then (or woke while the enter waited): what is so. */
enum { URING_NO_REPORT, URING_REPORT, URING_POLL_REPORT, URING_NEW_POLL_REPORT };
#define URING_RX 0x80000000u    /* in a request's sequence number: a receive (the rest: 30 bits) */
#define URING_SEQ 0x3fffffffu   /* a sequence number's bits */
/* Incrementally consumed provided buffers (Linux 6.12; liburing 2.3's
 * headers predate them): a receive takes only the bytes it read from a
 * buffer, which stays in the ring until it is full. */
#ifndef IOU_PBUF_RING_INC
#define IOU_PBUF_RING_INC 2
#endif
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE (1U << 4)
#endif
/* user_data of a send: this bit (a sequence number's bit 30, which none
 * has) with its queue's address (below 2^62: rl__txq_ring_ok). */
#define URING_TX (1ull << 62)

/* What the ring holds for one fd: epoll's registration. */
typedef struct uring_reg {
    uint32_t seq;   /* the submitted poll's sequence number; 0: none live */
    uint32_t gen;   /* the core's tag for its reports */
    uint32_t ident; /* the file the fd named when added (uring_ident) */
    uint16_t events; /* epoll's, in 16 bits (uring_events16: URING_ONESHOT, URING_ET) */
    uint16_t rx_len; /* what the live receive asked for (at most URING_BUF_SIZE) */
    uint16_t epoch; /* changed by each change the core makes (add, modify, remove): a kept report of an
                       earlier epoch is dropped (uring_harvest) */
    uint8_t npend;  /* its reports of this epoch kept in `pend` (an earlier epoch's are dropped, and hold
                       nothing back), not handed out yet: a level-triggered
                       registration is not asked again meanwhile (uring_fill). Stops at UINT8_MAX: more
                       kept (an edge-triggered one's wake-ups) are counted as fewer, so that it is asked
                       again sooner, a report more at worst */
    bool present : 1;  /* registered (armed or not), as epoll would have it */
    bool dirty : 1;    /* on the list of changes to submit */
    bool arm : 1;      /* a poll for `events` is to be submitted */
    bool reader : 1;   /* reads through the ring, into the ring's queues (u->rx) under its fd; else polls only */
    bool rx_poll : 1;  /* the next arming is a poll (no buffer was free) */
    bool rx_armed : 1; /* armed as a reader: the live receive's next bytes are reported (else only queued) */
    bool rx_self : 1;  /* a reader that reads the fd itself for now (uring_recv_self): armed as a poll */
    bool quiet : 1;    /* the file answered a poll with nothing asked for (a peer's half-close): armed as a
                          multishot poll until the core changes the registration (uring_take) */
} uring_reg;
/* One a watched fd number, in the table the loop's lowest to highest spans
 * (an idle ring connection's bytes: bench_memory's conn-ur row). 20 bytes:
 * a removal waiting for its submission is on the ring's list of them
 * (`cancels`), not in the registration, the file's identity is one word
 * and the events 16 bits (before: 40, with the removal's sequence number,
 * the device in 32 bits and the inode in 64, the events and counts in 32
 * bits; 48, with its flags a byte
 * each and the device in 64 bits; 56, with a reference on the stream's
 * own read-ahead queue besides). */
_Static_assert(sizeof(uring_reg) == 20, "a ring registration: 20 bytes");
_Static_assert(URING_BUF_SIZE <= UINT16_MAX, "a receive's length fits rx_len");

/* A registration's EPOLLONESHOT and EPOLLET, in the two bits of the low 16
 * that epoll gives no meaning (uring_reg's events). */
#define URING_ONESHOT 0x4000u
#define URING_ET 0x8000u
/* The epoll events a registration can keep: the low 14 bits (EPOLLIN,
 * EPOLLPRI, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDHUP, ...), EPOLLONESHOT
 * and EPOLLET; EPOLLWAKEUP and EPOLLEXCLUSIVE are refused (EINVAL): the
 * core asks neither. */
#define URING_KEPT_EVENTS (0x3fffu | EPOLLONESHOT | EPOLLET)

/* The events a registration is told of: those it asks for, and the error
 * and hang-up that epoll reports unasked. */
static inline uint32_t uring_asked(const uring_reg *r) { return (r->events & 0x3fffu) | EPOLLERR | EPOLLHUP; }

static inline uint16_t uring_events16(uint32_t ev) {
    return (uint16_t)((ev & 0x3fffu) | (ev & EPOLLONESHOT ? URING_ONESHOT : 0) | (ev & EPOLLET ? URING_ET : 0));
}

/* A file's identity in the one word a registration keeps, to tell the file
 * a slot was made for from another that the fd number may name now (the
 * number closed and reused): the inode's low 32 bits, with its device and
 * its high bits mixed in. Two files of one device with inode numbers below
 * 2^32 (sockets, pipes: their file system numbers them in 32 bits) never
 * share a word; files of different devices do once in 2^32. Like
 * fstat's pair, it cannot tell apart files that share an inode (eventfds
 * and timerfds share one), which epoll's registration, made per open
 * file, can: such a number reused is taken for the same file, as
 * before. */
static inline uint32_t uring_ident(const struct stat *st) {
    uint64_t d = (uint64_t)st->st_dev, hi = (uint64_t)st->st_ino >> 32;
    uint64_t mix = (d + hi * 0xff51afd7ed558ccdull) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)st->st_ino ^ (uint32_t)(mix >> 32);
}

/* A report kept for a later harvest, with the epoch of its registration. */
typedef struct uring_kept {
    struct epoll_event ev;
    uint16_t epoch;
    bool polled; /* a poll's report, asked again when handed out (uring_recheck) */
} uring_kept;

/* A level-triggered reader just reported, its receive live: its queue is
 * looked at by the next fill (uring_fill_level), as epoll asks a ready fd
 * at every wait, without a trip through the change list. */
typedef struct uring_level {
    int fd;
    uint16_t epoch; /* its registration's then: changed since, the change's arming decides */
} uring_level;

/* A receive cancelled while in flight: its completion still queues what it
 * read under its fd, unless the fd's number was found naming another file
 * since (`lost`: its bytes are the old file's, dropped). */
typedef struct uring_dying {
    uint64_t data;
    bool lost;
} uring_dying;

typedef struct uring uring;
static void uring_reap(uring *u, struct epoll_event *ev, int maxev, int *n);
static void uring_lock(uring *u);
static void uring_unlock(uring *u);

typedef struct uring {
    struct io_uring ring;
    rl__mutex lock; /* regs, the change list, the submission queue (uncontended: no system call) */
    uring_reg *regs; /* regs[i]: fd lo + i's registration (uring_reg_at) */
    uint32_t nregs, lo;
    int *dirty;     /* fds with changes to submit */
    size_t ndirty, capdirty;
    uint64_t *cancels; /* user_data of live requests to remove with the next submission (uring_disarm) */
    size_t ncancels, capcancels;
    uring_level *level; /* level-triggered readers reported (uring_fill_level) */
    size_t nlevel, caplevel;
    uint32_t seq;   /* the last sequence number given */
    int kick;       /* eventfd: another thread's change wakes the wait */
    bool parked;    /* the loop's thread is in its wait, from its enter's submission to its harvest (lock) */
    uint32_t xasked; /* removals by other threads that wait for it to let go of their files (lock) */
    _Atomic uint32_t xdone; /* how many of them it has (uring_unpark); their futex word */
    bool enabled;   /* the loop's thread is the ring's issuer */
    struct io_uring_buf_ring *br; /* the provided buffers' ring (NULL: not made) */
    uint8_t *bufs;  /* nbufs * URING_BUF_SIZE bytes, mapped (uring_bufs) */
    bool br_failed; /* the kernel refused it: polls only */
    unsigned nbufs; /* how many (a power of 2) */
    uint32_t *boff; /* incremental buffers (IOU_PBUF_RING_INC): the bytes of each taken so far; NULL: whole
                       buffers */
    uring_dying *dying;
    size_t ndying, capdying;
    rl__rxq *rx;    /* what the receives read, queued by fd (a reference; rl_rxq.h); NULL: no reader yet */
    bool cancelled;           /* a live request's removal made and no GETEVENTS enter since (uring_submit_now) */
    uring_kept *pend;         /* reports taken from the ring, not yet handed out */
    size_t npend, headpend, cappend;
    int *polled;              /* the harvest's polls' reports, by their index in its array (uring_recheck) */
    size_t npolled, cappolled;
    bool recheck;             /* the last wait's enter found completion work pending (IORING_SQ_TASKRUN) */
    uint32_t seq_mark;        /* the last sequence number given before the last wait's enter: polls after
                                 it were submitted by that enter */
    rl__txq *txheld;          /* send queues listed or in flight (a reference each; rl__txq's ring_next) */
    rl__txq **txl;            /* queues whose next send is to be submitted */
    size_t ntxl, captxl;
    rl__txq **txfast;         /* queues with a silent send in flight (uring_tx_settle) */
    size_t ntxfast, captxfast;
    bool grow_sq, grow_cq;    /* a queue filled: doubled once nothing waits in the submission queue */
    bool broken;              /* the kernel resized the ring and its new queues could not be mapped */
    bool resizable;           /* made small, without the index array (uring_open_small): only such a ring grows */
} uring;

static void uring_lock(uring *u) {
    if (RL__UNLIKELY(!rl__mutex_trylock(&u->lock)))
        (void)rl__mutex_lock_slow(&u->lock, NULL);
}

static void uring_unlock(uring *u) { rl__mutex_unlock(&u->lock); }

/* For the tests: receives submitted. */
RL__HIDDEN _Atomic unsigned long rl__poll_uring_rx_submits;
_Atomic unsigned long rl__poll_uring_rx_submits;

/* A refusal of io_uring by this process's kernel (EPERM: the sysctl, a
 * seccomp filter; ENOSYS; a kernel without what this backend needs): later
 * loops go to epoll without asking. */
static _Atomic int uring_refused;

int rl__poll_uring_usable(void) { return !atomic_load_explicit(&uring_refused, memory_order_relaxed); }

static uint64_t uring_data(int fd, uint32_t seq) { return (uint64_t)seq << 32 | (uint32_t)fd; }

/* fd's registration record, NULL if the table has none (a negative fd
 * included). The table spans the lowest to the highest fd the ring
 * watches, not every number from 0: a loop made in a process with many
 * fds open (its own eventfd and timerfd numbered in the hundreds) holds a
 * few records, not hundreds (a loop thread's memory, docs/runloop.md). */
static inline uring_reg *uring_reg_at(uring *u, int fd) {
    uint32_t i = (uint32_t)fd - u->lo;
    return i < u->nregs ? &u->regs[i] : NULL;
}

size_t rl__poll_uring_regs_bytes(rl__poller *rl) {
    uring *u = rl->kops == &rl__poll_uring_ops ? rl->kstate : NULL;
    return u ? u->nregs * sizeof *u->regs : 0;
}

/* Room in u->regs for fd (>= 0), as rl_span.h grows such a table. false:
 * out of memory (nothing changed). */
static bool uring_room(uring *u, int fd) {
    if (uring_reg_at(u, fd))
        return true;
    void *a = u->regs;
    if (!rl__span_room(&a, &u->lo, &u->nregs, sizeof *u->regs, fd))
        return false;
    u->regs = a;
    return true;
}

/* Room for `need` elements of `elem` bytes in the array *pa of *cap
 * (grown by doubling, from `first`): every list of the ring grows so.
 * false: out of memory (nothing changed). */
static bool uring_grow(void *pa, size_t *cap, size_t need, size_t elem, size_t first) {
    if (RL__LIKELY(need <= *cap))
        return true;
    size_t c = *cap ? *cap * 2 : first;
    while (c < need)
        c *= 2;
    void *a = realloc(*(void **)pa, c * elem);
    if (!a)
        return false;
    *(void **)pa = a;
    *cap = c;
    return true;
}

/* Puts fd on the change list. Lock held. false: out of memory. */
static bool uring_touch(uring *u, int fd, uring_reg *r) {
    if (r->dirty)
        return true;
    if (!uring_grow(&u->dirty, &u->capdirty, u->ndirty + 1, sizeof *u->dirty, 64))
        return false;
    u->dirty[u->ndirty++] = fd;
    r->dirty = true;
    return true;
}

/* A poll for fd as r says is to be submitted. Lock held. */
static int uring_arm(uring *u, int fd, uring_reg *r) {
    if (!uring_touch(u, fd, r))
        return ENOMEM;
    r->arm = true;
    return 0;
}

/* Notes a receive cancelled in flight (data: its user_data). false: out
 * of memory. Lock held. */
static bool uring_dying_add(uring *u, uint64_t data) {
    if (!uring_grow(&u->dying, &u->capdying, u->ndying + 1, sizeof *u->dying, 16))
        return false;
    u->dying[u->ndying++] = (uring_dying){data, false};
    return true;
}

/* Whether `data` is a cancelled receive whose bytes are still to be queued
 * (not lost). `last`: its last completion (a multishot receive makes more
 * before its cancellation ends it): the entry goes. Lock held. */
static bool uring_dying_get(uring *u, uint64_t data, bool last) {
    for (size_t i = 0; i < u->ndying; i++) {
        if (u->dying[i].data == data) {
            bool keep = !u->dying[i].lost;
            if (last)
                u->dying[i] = u->dying[--u->ndying];
            return keep;
        }
    }
    return false;
}

/* A report kept for the caller's next harvest. Lock held. */
static void uring_pend(uring *u, const struct epoll_event *ev, bool polled) {
    if (u->npend == u->cappend) {
        if (u->headpend > 0) {
            memmove(u->pend, u->pend + u->headpend, (u->npend - u->headpend) * sizeof *u->pend);
            u->npend -= u->headpend;
            u->headpend = 0;
        }
        if (!uring_grow(&u->pend, &u->cappend, u->npend + 1, sizeof *u->pend, 64))
            return; /* out of memory: this report is lost; the reader's next arming asks again */
    }
    uring_reg *r = uring_reg_at(u, rl__ev_fd(ev));
    if (r && r->npend < UINT8_MAX)
        r->npend++;
    u->pend[u->npend++] = (uring_kept){*ev, r ? r->epoch : 0, polled};
}

/* fd's live poll, if any, is to be removed; a report it still makes is
 * dropped. Lock held. */
static void uring_disarm(uring *u, int fd, uring_reg *r) {
    r->arm = false;
    r->rx_armed = false;
    if (r->seq == 0)
        return;
    if ((r->seq & URING_RX) && !uring_dying_add(u, uring_data(fd, r->seq)))
        return; /* out of memory: left to run (its bytes are queued when it ends); a report of it is dropped (seq) */
    if (!uring_grow(&u->cancels, &u->capcancels, u->ncancels + 1, sizeof *u->cancels, 16))
        return; /* out of memory: left to run; it ends with its file */
    u->cancels[u->ncancels++] = uring_data(fd, r->seq);
    u->cancelled = true;
    r->seq = 0;
}

/* fd leaves the set: its request removed. Its reading through the ring,
 * and what the ring queued for it, stay with the slot while the slot names
 * the same file (`keep`): the file added again reads through the ring
 * again, and what is queued for it is reported then (a source that left
 * and joins again, a loop in another mode for a while, has not lost what
 * the ring read for it; its reader takes it meanwhile, from any loop);
 * else the number names another file now (or none): what the ring read of
 * the old file is dropped, and so is what its cancelled receives still
 * bring. Lock held. */
static void uring_forget(uring *u, int fd, uring_reg *r, bool keep) {
    uring_disarm(u, fd, r);
    r->present = false;
    if (r->reader && !keep) {
        r->reader = false;
        rl__rxq_drop(u->rx, fd);
        for (size_t i = 0; i < u->ndying; i++) {
            if ((int)(uint32_t)u->dying[i].data == fd)
                u->dying[i].lost = true;
        }
    }
}

/* The next sequence number (30 bits, never 0). Lock held. */
static uint32_t uring_next_seq(uring *u) {
    u->seq = (u->seq + 1) & URING_SEQ;
    if (u->seq == 0)
        u->seq = 1;
    return u->seq;
}

/* Whether r's arming is a receive into a provided buffer. */
static bool uring_reads(const uring *u, const uring_reg *r) {
    return r->reader && u->br && !r->rx_poll && !r->rx_self && !(r->events & URING_ET) &&
           (r->events & (EPOLLIN | EPOLLOUT | EPOLLPRI)) == EPOLLIN;
}

/* The level-triggered readers reported since the last fill: reported
 * again if their queue holds chunks (and looked at again by the next
 * fill), else armed (their live receive's next bytes are reported). One
 * changed since is left to its change; one whose receive ended is armed
 * through the change list (a receive submitted). Lock held, the loop's
 * thread. */
static void uring_fill_level(uring *u) {
    size_t keep = 0;
    for (size_t i = 0; i < u->nlevel; i++) {
        uring_level l = u->level[i];
        uring_reg *r = uring_reg_at(u, l.fd);
        if (!r || !r->present || r->epoch != l.epoch || r->dirty || r->rx_armed)
            continue;
        if (r->npend) {
            u->level[keep++] = l; /* its report not handed out yet: that one tells of the queue */
            continue;
        }
        if (!(r->seq & URING_RX)) {
            (void)uring_arm(u, l.fd, r);
        } else if (rl__rxq_holds(u->rx, l.fd)) {
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = rl__ev_data(l.fd, r->gen)};
            uring_pend(u, &ev, false);
            u->level[keep++] = l;
        } else {
            r->rx_armed = true;
        }
    }
    u->nlevel = keep;
}

/* Turns the change list into submission entries, as many as fit: the
 * removals, then (`arms`) the armings. Lock held, the loop's thread.
 * Whether all did. A level-triggered reader whose queue holds chunks is
 * reported now and stays on the list: asked again at the next fill, as
 * epoll asks a ready fd at every wait. */
static bool uring_fill(uring *u, bool arms) {
    size_t c = 0;
    for (; c < u->ncancels && io_uring_sq_space_left(&u->ring) > 0; c++) {
        /* The removals first: a request replaced by one armed below goes
         * before its successor comes. */
        struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
        uint64_t data = u->cancels[c];
        if ((uint32_t)(data >> 32) & URING_RX)
            io_uring_prep_cancel64(sqe, data, 0);
        else
            io_uring_prep_poll_remove(sqe, data);
        io_uring_sqe_set_data64(sqe, URING_REMOVE);
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    }
    if (c < u->ncancels) {
        memmove(u->cancels, u->cancels + c, (u->ncancels - c) * sizeof *u->cancels);
        u->ncancels -= c;
        return false;
    }
    u->ncancels = 0;
    if (!arms)
        return true;
    size_t i = 0, keep = 0;
    for (; i < u->ndirty; i++) {
        int fd = u->dirty[i];
        uring_reg *r = uring_reg_at(u, fd);
        if (io_uring_sq_space_left(&u->ring) == 0)
            break;
        if (r->arm && r->present && r->npend && !(r->events & (URING_ONESHOT | URING_ET))) {
            /* Level-triggered, a report of it kept and not handed out
             * yet: the file, not read meanwhile, would only report again
             * (and again at each fill until the first report's callout
             * reads it: kept reports pile up, the other fds' wait behind
             * them, callouts find nothing to read). Asked again at the
             * first fill after the report is handed out, as epoll_wait
             * reports a ready fd once per wait. */
            u->dirty[keep++] = fd;
            continue;
        }
        if (r->arm && r->present && r->reader && (r->events & (EPOLLIN | URING_ET)) == EPOLLIN &&
            rl__rxq_holds(u->rx, fd)) {
            /* Readable already (its queue holds bytes): reported without
             * asking the kernel, whatever else the arming asks for (a
             * write side is asked again by the arming after this report). */
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = rl__ev_data(fd, r->gen)};
            uring_pend(u, &ev, false);
            r->rx_armed = false; /* a receive's bytes meanwhile are queued, reported by the next fill */
            if (!(r->events & URING_ONESHOT)) {
                u->dirty[keep++] = fd; /* level: again at the next fill */
                continue;
            }
        } else if (r->arm && r->present && uring_reads(u, r)) {
            r->rx_armed = true;
            if (!(r->seq & URING_RX)) {
                /* No receive live: a multishot one, which stays (reading
                 * each time bytes come, into the queue) until it is
                 * cancelled or ends; a single one if the reader asks for
                 * less than a buffer at a time. */
                struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
                size_t want = rl__rxq_want(u->rx);
                if (want > 0 && want < URING_BUF_SIZE) {
                    r->rx_len = (uint16_t)want;
                    io_uring_prep_recv(sqe, fd, NULL, r->rx_len, 0);
                } else {
                    r->rx_len = URING_BUF_SIZE;
                    io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
                }
                sqe->flags |= IOSQE_BUFFER_SELECT;
                sqe->buf_group = URING_BGID;
                r->seq = uring_next_seq(u) | URING_RX;
                io_uring_sqe_set_data64(sqe, uring_data(fd, r->seq));
                rl__test_count(&rl__poll_uring_rx_submits);
            }
        } else if (r->arm && r->present) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
            uint32_t mask = r->events & ~(URING_ONESHOT | URING_ET);
            if (((r->events & URING_ET) && !(r->events & URING_ONESHOT)) || r->quiet)
                io_uring_prep_poll_multishot(sqe, fd, mask);
            else
                io_uring_prep_poll_add(sqe, fd, mask);
            r->seq = uring_next_seq(u);
            io_uring_sqe_set_data64(sqe, uring_data(fd, r->seq));
        }
        r->arm = false;
        r->dirty = false;
    }
    bool all = i == u->ndirty;
    if (i < u->ndirty)
        memmove(u->dirty + keep, u->dirty + i, (u->ndirty - i) * sizeof *u->dirty);
    u->ndirty = keep + (u->ndirty - i);
    return all;
}

/* The submission queue's new entries made visible to the kernel: how many
 * an enter may submit (liburing's own flush, which io_uring_submit does).
 * Lock held. */
static unsigned uring_flush(uring *u) {
    struct io_uring_sq *sq = &u->ring.sq;
    unsigned tail = sq->sqe_tail;
    if (sq->sqe_head != tail) {
        sq->sqe_head = tail;
        __atomic_store_n(sq->ktail, tail, __ATOMIC_RELEASE);
    }
    return tail - __atomic_load_n(sq->khead, __ATOMIC_ACQUIRE);
}

/* Makes the loop's thread the ring's issuer (its first wait). Lock held. */
static int uring_enable(uring *u) {
    if (u->enabled)
        return 0;
    int r = io_uring_register(u->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
    if (r < 0)
        return -r;
    u->enabled = true;
    return 0;
}

/* q's next send (its head, from where the last send stopped) into a
 * submission entry. false: the submission queue is full. The loop's
 * thread (the send queues and the submission queue's entries are its
 * own: no lock). */
static bool uring_tx_start(uring *u, rl__txq *q) {
    if (io_uring_sq_space_left(&u->ring) < 1)
        return false;
    size_t len = q->head->len - q->head->off;
    if (rl__fault(RL_FAULT_URING_SHORT_SEND) && len > 1)
        len /= 2;
    /* Silent where it can be: a send that must not wait (MSG_DONTWAIT)
     * and must send it all (MSG_WAITALL) is done within the enter that
     * submits it, and makes a completion only if it did not send it all
     * (its result: the bytes sent, or -EAGAIN, or the error), so the wait
     * is not woken by the loop's own sends; one that found no room is sent
     * again as a send that waits (`slow`). Out of memory for the list of
     * silent sends: one that makes a completion. */
    bool fast = !q->slow && uring_grow(&u->txfast, &u->captxfast, u->ntxfast + 1, sizeof *u->txfast, 16);
    q->sqpos = u->ring.sq.sqe_tail;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    io_uring_prep_send(sqe, __atomic_load_n(&q->fd, __ATOMIC_ACQUIRE), q->head->p + q->head->off, len,
                       MSG_NOSIGNAL | (fast ? MSG_DONTWAIT | MSG_WAITALL : 0));
    io_uring_sqe_set_data64(sqe, URING_TX | (uint64_t)(uintptr_t)q);
    if (fast) {
        /* Silent only with nothing queued behind it: a silent send
         * submitted by the loop's wait completes inside that wait and
         * wakes nothing, so the chunks behind it, sent only once it is
         * settled, would wait with the loop asleep (the peer waiting for
         * them: a stall). One with chunks behind reports its completion. */
        if (!q->head->next)
            sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
        u->txfast[u->ntxfast++] = q;
    }
    q->fast = fast;
    q->inlen = len;
    q->inflight = true;
    return true;
}

/* q's silent send, in flight, now has a chunk behind it: it reports its
 * completion (which lists q for its next send), as uring_tx_start makes
 * one with chunks behind it. Its entry is not submitted yet: every enter
 * that submits is followed by a harvest, which settles what it submitted,
 * before any callout or caller can queue more. The loop's thread. */
static void uring_tx_loud(uring *u, rl__txq *q) {
    unsigned khead = __atomic_load_n(u->ring.sq.khead, __ATOMIC_ACQUIRE);
    if ((int)(khead - q->sqpos) > 0)
        return; /* taken by the kernel (not reached: see above) */
    unsigned shift = (u->ring.flags & IORING_SETUP_SQE128) ? 1 : 0; /* as io_uring_get_sqe finds it */
    u->ring.sq.sqes[(q->sqpos & u->ring.sq.ring_mask) << shift].flags &= (uint8_t)~IOSQE_CQE_SKIP_SUCCESS;
}

/* The listed send queues' next sends into submission entries, as many as
 * fit (one in flight per queue). Whether all did. The loop's thread. */
static void uring_tx_done(uring *u, rl__txq *q);
static bool uring_fill_tx(uring *u) {
    size_t i = 0;
    for (; i < u->ntxl; i++) {
        rl__txq *q = u->txl[i];
        if (q->inflight || !q->head) {
            q->listed = false;
            uring_tx_done(u, q);
            continue;
        }
        if (!uring_tx_start(u, q))
            break;
        q->listed = false;
    }
    if (i > 0)
        memmove(u->txl, u->txl + i, (u->ntxl - i) * sizeof *u->txl);
    u->ntxl -= i;
    return u->ntxl == 0;
}

/* Submits every change (the loop's thread), the armings only if `arms`
 * (a wait's enter: see uring_submit_now): enters as often as the queue
 * fills; the entries of the last fill are left for the caller's enter.
 * Lock held. The number to submit, or -errno. */
static int uring_prepare(uring *u, bool arms) {
    int err = uring_enable(u);
    if (err)
        return -err;
    if (arms && u->nlevel)
        uring_fill_level(u);
    while (!uring_fill(u, arms) || !uring_fill_tx(u)) {
        u->grow_sq = true;
        int r = io_uring_enter(u->ring.enter_ring_fd, uring_flush(u), 0, 0, NULL);
        if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
            return r;
    }
    return (int)uring_flush(u);
}

/* Submits the removals and the sends now (a removal on the loop's thread:
 * the poll holds the file open; a send made out of a run). Lock held.
 * The armings wait for the loop's next wait: made here, in the middle of a
 * pass's callouts, a level-triggered fd's new poll, or the one of an fd
 * enabled again, would answer at once for a readiness the pass has
 * reported already and whose callout has not run yet (a Read callback
 * that comes later in the pass than another's removal), and that second
 * report, kept for the next harvest, would call the callback again when
 * its read had taken everything: a spurious Read callout, whose blocking
 * read hangs the loop. Epoll asks the file at each wait; so does the ring,
 * by arming only in the wait's own enter. */
static void uring_submit_now(uring *u) {
    int n = uring_prepare(u, false);
    /* A request's removal (a receive's or a poll's): with GETEVENTS, the
     * kernel's deferred completion work is run too, so the removed request
     * lets go of its file now (a socket closed by its owner is closed for
     * its peer, whether or not the loop runs again). Without it a poll's
     * removal usually let go at once, but not always: test_socket_port's
     * peer dropped by a stall timer stayed open for its peer, about one run
     * in ten on a loaded machine, until the loop's next wait. The
     * completions this takes of other fds are kept for the next harvest in
     * order, with their registrations' epochs (RL_FAULT_URING_TAKE_EARLY
     * makes every submission here take them: test_runloop_kernel). */
    bool getevents = u->cancelled || rl__fault(RL_FAULT_URING_TAKE_EARLY);
    u->cancelled = false;
    if (n > 0 || getevents)
        (void)io_uring_enter(u->ring.enter_ring_fd, (unsigned)(n > 0 ? n : 0), 0,
                             getevents ? IORING_ENTER_GETEVENTS : 0, NULL);
    /* What a cancelled receive read last, and what live ones read in this
     * enter's completion work: queued now, before the reader reads the fd
     * itself. */
    int none = 0;
    uring_reap(u, NULL, 0, &none);
}

/* Whether epoll would refuse fd (a file without poll). Lock held. */
static bool uring_unpollable(int fd, const struct stat *st) {
    if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
        return true;
    if (!S_ISCHR(st->st_mode) && !S_ISBLK(st->st_mode))
        return false; /* sockets, pipes, eventfds, timerfds, signalfds... */
    /* A device: epoll is asked, in a set of its own made for the question
     * (not kept: a loop holds no more fds than it says, docs/runloop.md). */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return false;
    struct epoll_event ev = {.events = EPOLLIN};
    bool refused = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EPERM;
    (void)close(ep);
    return refused;
}

static int uring_ctl_locked(rl__poller *rl, uring *u, int op, int fd, uint32_t events, uint32_t gen, bool *now) {
    struct stat st;
    if (fd < 0 || fd == rl->epfd)
        return fd < 0 ? EBADF : EINVAL;
    if (op != EPOLL_CTL_DEL && (events & ~(uint32_t)URING_KEPT_EVENTS))
        return EINVAL;
    int serr = fstat(fd, &st) == 0 ? 0 : errno;
    uring_reg *r = uring_reg_at(u, fd);
    bool ident = r && !serr && r->ident == uring_ident(&st); /* the file the slot was made for */
    bool same = ident && r->present;
    if (r && r->present && !same) {
        /* Closed, or the number reused: the poll would keep the old file
         * open. Gone, as epoll's registration goes with its file. */
        uring_forget(u, fd, r, false);
        *now = true;
    }
    if (r && !same)
        uring_forget(u, fd, r, ident);
    switch (op) {
    case EPOLL_CTL_ADD:
        if (serr)
            return serr;
        if (same)
            return EEXIST;
        if (uring_unpollable(fd, &st))
            return EPERM;
        if (!uring_room(u, fd))
            return ENOMEM;
        r = uring_reg_at(u, fd);
        *r = (uring_reg){.present = true, .gen = gen, .events = uring_events16(events), .ident = uring_ident(&st),
                         .reader = r->reader, /* kept only for the same file (above) */
                         /* npend 0: reports still kept are another epoch's, dropped */
                         .epoch = (uint16_t)(r->epoch + 1)};
        if (uring_arm(u, fd, r) != 0) {
            r->present = false; /* as epoll: no registration made */
            return ENOMEM;
        }
        return 0;
    case EPOLL_CTL_MOD:
        if (serr)
            return serr;
        if (!same)
            return ENOENT;
        r->gen = gen;
        r->epoch++;
        r->npend = 0; /* its kept reports are dropped: they hold no arming back */
        if (r->seq & URING_RX) {
            /* A receive live: kept if the registration still reads (its
             * next bytes reported once the arming is filled). */
            uint16_t was = r->events;
            r->events = uring_events16(events);
            if (uring_reads(u, r)) {
                r->rx_armed = false;
                return uring_arm(u, fd, r);
            }
            r->events = was;
        }
        uring_disarm(u, fd, r);
        r->rx_poll = false;
        r->quiet = false;
        r->events = uring_events16(events);
        return uring_arm(u, fd, r);
    case EPOLL_CTL_DEL:
        *now = true; /* the poll holds the file open: let it go at once */
        if (serr)
            return serr;
        if (!same)
            return ENOENT;
        uring_forget(u, fd, r, true);
        r->epoch++;
        r->npend = 0;
        return 0;
    default:
        return EINVAL;
    }
}

/* How long another thread's removal waits at most for the loop's thread
 * to let go of the file (uring_ctl): the thread is woken at once, so only
 * a kernel that does not answer reaches it; the file then goes with the
 * loop's next enter, as when the thread was not asleep. */
#define URING_LETGO_WAIT_NS 2000000000LL

/* Waits until the loop's thread has let go of the files of the removals
 * numbered up to `ticket` (uring_unpark), URING_LETGO_WAIT_NS at most.
 * No lock held. */
static void uring_await_letgo(uring *u, uint32_t ticket) {
    struct timespec end;
    (void)clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += URING_LETGO_WAIT_NS / 1000000000;
    for (;;) {
        uint32_t done = atomic_load_explicit(&u->xdone, memory_order_acquire);
        if ((int32_t)(done - ticket) >= 0 || rl__futex_wait(&u->xdone, done, &end) == ETIMEDOUT)
            return;
    }
}

/* epoll_ctl on the ring. A removal (or a closed file found) lets go of
 * the file before it returns, as epoll's does: the poll or receive in
 * flight holds the file open (a socket closed next by its owner would
 * stay open for its peer). On the loop's thread it is submitted at once
 * (uring_submit_now). Made by another thread while the loop's thread
 * sleeps in its wait, it is submitted by that thread, woken by the kick,
 * and waited for (uring_unpark): the loop's thread takes no lock of the
 * caller's on that path (the caller may hold the loop's). While the
 * loop's thread is busy (callouts) or not running the loop, the removal
 * is not waited for: it goes with the thread's next enter. */
static int uring_ctl(rl__poller *rl, int op, int fd, uint32_t events, uint32_t gen) {
    uring *u = rl->kstate;
    bool now = false; /* a file to let go of */
    uring_lock(u);
    size_t cancels = u->ncancels;
    int err = uring_ctl_locked(rl, u, op, fd, events, gen, &now);
    bool mine = pthread_equal(pthread_self(), rl->owner);
    bool changed = u->ndirty > 0 || u->ncancels > 0;
    if (mine && now && changed)
        uring_submit_now(u);
    uint32_t ticket = 0;
    bool await = !mine && now && u->ncancels > cancels && u->parked;
    if (await)
        ticket = ++u->xasked;
    uring_unlock(u);
    if (!mine && changed) {
        /* The loop's thread submits it: its wait is woken (the kick). */
        uint64_t one = 1;
        ssize_t w;
        do {
            w = write(u->kick, &one, sizeof one);
        } while (w < 0 && errno == EINTR);
    }
    if (await)
        uring_await_letgo(u, ticket);
    return err;
}

/* Makes what the ring lacks known: features and the poll opcodes. */
static int uring_check(struct io_uring *ring) {
    unsigned need = IORING_FEAT_NODROP | IORING_FEAT_EXT_ARG | IORING_FEAT_RSRC_TAGS; /* 5.13: multishot polls */
    if ((ring->features & need) != need)
        return ENOSYS;
    static _Atomic int probed; /* 0: not yet, 1: fine, 2: lacking */
    int p = atomic_load_explicit(&probed, memory_order_relaxed);
    if (p == 0) {
        struct io_uring_probe *pr = io_uring_get_probe_ring(ring);
        p = pr && io_uring_opcode_supported(pr, IORING_OP_POLL_ADD) && io_uring_opcode_supported(pr, IORING_OP_POLL_REMOVE)
                ? 1
                : 2;
        if (pr)
            io_uring_free_probe(pr);
        atomic_store_explicit(&probed, p, memory_order_relaxed);
    }
    return p == 1 ? 0 : ENOSYS;
}

/* Adds one of the loop's own fds (edge-triggered, tag 0). Lock held. */
static int uring_watch_own(uring *u, int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        return errno;
    if (!uring_room(u, fd))
        return ENOMEM;
    uring_reg *r = uring_reg_at(u, fd);
    *r = (uring_reg){.present = true, .events = uring_events16(EPOLLIN | EPOLLET), .ident = uring_ident(&st)};
    return uring_arm(u, fd, r);
}

#ifndef IORING_SETUP_NO_SQARRAY
#define IORING_SETUP_NO_SQARRAY (1U << 16) /* Linux 6.6; liburing 2.3's headers predate it */
#endif

/* Maps the queues of ring fd `fd` as the kernel described them in p
 * (io_uring_setup's answer, or a resize's) into *ring, a view made afresh
 * (its fd, features and `flags`, the ring's setup flags, set); the index
 * array, if the ring has one, maps each slot to its entry. With libc's
 * mmap, not liburing's (whose Debian x86-64 build makes its own system
 * calls, past libc): ThreadSanitizer sees a mapping made through libc
 * and forgets what it saw at those addresses before, so a ring mapped
 * where other memory was is new memory to it (else the first writes of
 * a ring's entries were reported as races with whatever thread had used
 * the addresses: CI's check-swift-tsan, 2026-12-07). The queues are one
 * mapping (IORING_FEAT_SINGLE_MMAP, Linux 5.4), the entries another. 0,
 * or -errno (nothing mapped). */
static int uring_map(int fd, const struct io_uring_params *p, unsigned flags, struct io_uring *ring) {
    if (!(p->features & IORING_FEAT_SINGLE_MMAP))
        return -ENOSYS;
    size_t cqe = sizeof(struct io_uring_cqe) << ((flags & IORING_SETUP_CQE32) ? 1 : 0);
    size_t sqe = sizeof(struct io_uring_sqe) << ((flags & IORING_SETUP_SQE128) ? 1 : 0);
    bool indexed = !(flags & IORING_SETUP_NO_SQARRAY);
    size_t rsz = p->cq_off.cqes + p->cq_entries * cqe;
    if (indexed && p->sq_off.array + p->sq_entries * sizeof(unsigned) > rsz)
        rsz = p->sq_off.array + p->sq_entries * sizeof(unsigned);
    char *rp = mmap(NULL, rsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (rp == MAP_FAILED)
        return -errno;
    void *sp = mmap(NULL, sqe * p->sq_entries, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (sp == MAP_FAILED) {
        int err = errno;
        (void)munmap(rp, rsz);
        return -err;
    }
    memset(ring, 0, sizeof *ring);
    struct io_uring_sq *sq = &ring->sq;
    sq->khead = (unsigned *)(rp + p->sq_off.head);
    sq->ktail = (unsigned *)(rp + p->sq_off.tail);
    sq->kring_mask = (unsigned *)(rp + p->sq_off.ring_mask);
    sq->kring_entries = (unsigned *)(rp + p->sq_off.ring_entries);
    sq->kflags = (unsigned *)(rp + p->sq_off.flags);
    sq->kdropped = (unsigned *)(rp + p->sq_off.dropped);
    sq->array = indexed ? (unsigned *)(rp + p->sq_off.array) : NULL;
    sq->sqes = sp;
    sq->ring_sz = rsz;
    sq->ring_ptr = rp;
    sq->ring_mask = *sq->kring_mask;
    sq->ring_entries = *sq->kring_entries;
    struct io_uring_cq *cq = &ring->cq;
    cq->khead = (unsigned *)(rp + p->cq_off.head);
    cq->ktail = (unsigned *)(rp + p->cq_off.tail);
    cq->kring_mask = (unsigned *)(rp + p->cq_off.ring_mask);
    cq->kring_entries = (unsigned *)(rp + p->cq_off.ring_entries);
    cq->koverflow = (unsigned *)(rp + p->cq_off.overflow);
    cq->cqes = (struct io_uring_cqe *)(rp + p->cq_off.cqes);
    cq->kflags = p->cq_off.flags ? (unsigned *)(rp + p->cq_off.flags) : NULL;
    cq->ring_sz = rsz;
    cq->ring_ptr = rp;
    cq->ring_mask = *cq->kring_mask;
    cq->ring_entries = *cq->kring_entries;
    for (unsigned i = 0; indexed && i < sq->ring_entries; i++)
        sq->array[i] = i;
    ring->flags = flags;
    ring->features = p->features;
    ring->ring_fd = ring->enter_ring_fd = fd;
    return 0;
}

/* Unmaps what uring_map mapped into *ring (its fd stays open). Reads
 * nothing in the ring (a fork() child's view of its parent's). */
static void uring_unmap(const struct io_uring *ring) {
    size_t sqe = sizeof(struct io_uring_sqe) << ((ring->flags & IORING_SETUP_SQE128) ? 1 : 0);
    if (ring->sq.sqes)
        (void)munmap(ring->sq.sqes, sqe * ring->sq.ring_entries);
    if (ring->sq.ring_ptr)
        (void)munmap(ring->sq.ring_ptr, ring->sq.ring_sz);
}

/* Whether this kernel resizes rings (0: not asked yet, 1: yes, 2: no;
 * learnt by the first ring made). */
static _Atomic int uring_resizable;
static int uring_resize(uring *u, unsigned sq, unsigned cq);

/* u's ring with the small queues, to be grown (uring_grow_rings): made
 * without the submission queue's index array (IORING_SETUP_NO_SQARRAY:
 * the entries are taken in ring order, as liburing fills them; a resized
 * ring's array would sit where the kernel does not say), so mapped here,
 * liburing 2.3 knowing nothing of it. The first such ring asks whether
 * the kernel resizes it (to its own sizes). 0, or -errno: nothing made
 * (a kernel that lacks either: the caller makes the largest queues). */
static int uring_open_small(uring *u, struct io_uring_params p) {
    p.flags |= IORING_SETUP_NO_SQARRAY;
    p.cq_entries = URING_CQ_MIN;
    int fd = io_uring_setup(URING_SQ_MIN, &p);
    if (fd < 0)
        return -EINVAL; /* the caller's io_uring_setup says why, if it fails too */
    int r = uring_map(fd, &p, p.flags, &u->ring);
    if (r < 0) {
        (void)close(fd);
        return r;
    }
    if (atomic_load_explicit(&uring_resizable, memory_order_relaxed) == 0) {
        int ok = uring_resize(u, URING_SQ_MIN, URING_CQ_MIN) == 0 ? 1 : 2;
        atomic_store_explicit(&uring_resizable, ok, memory_order_relaxed);
        if (ok == 2) {
            uring_unmap(&u->ring);
            (void)close(u->ring.ring_fd);
            u->broken = false;
            memset(&u->ring, 0, sizeof u->ring);
            return -EOPNOTSUPP;
        }
    }
    u->resizable = true;
    return 0;
}

static int uring_open(rl__poller *rl) {
    if (rl__fault(RL_FAULT_URING_SETUP)) {
        atomic_store_explicit(&uring_refused, 1, memory_order_relaxed);
        return ENOSYS;
    }
    uring *u = calloc(1, sizeof *u);
    if (!u)
        return ENOMEM;
    u->kick = -1;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
              IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED;
    /* Small queues where the kernel resizes rings (learnt by the first
     * ring: resized to its own sizes), else the largest at once. */
    int r = -EINVAL;
    if (atomic_load_explicit(&uring_resizable, memory_order_relaxed) != 2)
        r = uring_open_small(u, p);
    if (r < 0) {
        p.cq_entries = URING_CQ;
        int fd = r = io_uring_setup(URING_SQ, &p);
        if (fd >= 0 && (r = uring_map(fd, &p, p.flags, &u->ring)) < 0)
            (void)close(fd);
    }
    if (r < 0) {
        free(u);
        if (r == -EPERM || r == -ENOSYS || r == -EINVAL)
            atomic_store_explicit(&uring_refused, 1, memory_order_relaxed);
        return -r;
    }
    int err;
    rl->kstate = u;
    rl->epfd = u->ring.ring_fd;
    if ((err = uring_check(&u->ring)) != 0) {
        atomic_store_explicit(&uring_refused, 1, memory_order_relaxed);
        return err;
    }
    u->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (u->kick < 0)
        return errno;
    uring_lock(u);
    err = uring_watch_own(u, rl->evfd);
    if (!err)
        err = uring_watch_own(u, rl->tfd);
    if (!err)
        err = uring_watch_own(u, u->kick);
    uring_unlock(u);
    return err; /* submitted by the loop's thread's first wait */
}

static void uring_close(rl__poller *rl) {
    uring *u = rl->kstate;
    if (!u)
        return;
    /* In a fork() child, of an inherited loop: the child's view and fd only
     * (uring_unmap reads nothing in the ring). */
    uring_unmap(&u->ring);
    (void)close(u->ring.ring_fd);
    if (u->kick >= 0)
        (void)close(u->kick);
    rl__rxq_release(u->rx); /* what it queued stays for the streams it read (their references) */
    for (size_t i = 0; i < u->ntxfast; i++) {
        rl__txq *q = u->txfast[i];
        if (!q->inflight || !q->fast || q->held)
            continue; /* settled, or held on txheld (below) */
        rl__txq_drop(q);
        __atomic_store_n(&q->owner, (const void *)NULL, __ATOMIC_RELAXED);
        q->inflight = q->fast = false;
        rl__txq_release(q); /* the silent send's own reference */
    }
    for (rl__txq *q = u->txheld, *next; q; q = next) {
        next = q->ring_next;
        /* The loop is gone: what its ring did not send is dropped (a
         * handed-over fd closed). */
        rl__txq_drop(q);
        __atomic_store_n(&q->owner, (const void *)NULL, __ATOMIC_RELAXED);
        q->held = q->inflight = q->listed = false;
        q->ring_next = q->ring_prev = NULL;
        rl__txq_release(q);
    }
    free(u->txl);
    free(u->txfast);
    if (u->br) {
        (void)munmap(u->br, u->nbufs * sizeof(struct io_uring_buf));
        (void)munmap(u->bufs, (size_t)u->nbufs * URING_BUF_SIZE);
    }
    free(u->boff);
    free(u->dying);
    free(u->pend);
    free(u->polled);
    rl__span_free(u->regs, u->nregs, sizeof *u->regs);
    free(u->dirty);
    free(u->cancels);
    free(u->level);
    free(u);
    rl->kstate = NULL;
}

/* Every registration but the loop's eventfd, timerfd and kick removed (the
 * core adds its fds again). Rl's thread. */
static int uring_renew(rl__poller *rl) {
    uring *u = rl->kstate;
    uring_lock(u);
    for (size_t i = 0; i < u->nregs; i++) {
        uring_reg *r = &u->regs[i];
        int fd = (int)(u->lo + (uint32_t)i);
        if (r->present && fd != rl->evfd && fd != rl->tfd && fd != u->kick)
            uring_forget(u, fd, r, true);
    }
    uring_submit_now(u);
    uring_unlock(u);
    return 0;
}

/* For the tests: receives that found no buffer free (ENOBUFS). */
RL__HIDDEN _Atomic unsigned long rl__poll_uring_nobufs;
_Atomic unsigned long rl__poll_uring_nobufs;

/* A receive's result queued under fd (`into`; else dropped: its file is
 * gone): its bytes (out of their buffer, which goes back to the ring), the
 * end, or its error. Whether something was queued (nothing: no buffer was
 * free, or it was cancelled). Lock held. */
static bool uring_rx_queue(uring *u, int fd, bool into, const struct io_uring_cqe *cqe, size_t asked) {
    int res = cqe->res;
    unsigned flags = cqe->flags, bid = flags >> IORING_CQE_BUFFER_SHIFT;
    size_t n = res > 0 ? (size_t)res : 0;
    bool full = n == asked; /* filled what it could read into: asked for, or the rest of its buffer (below) */
    uint8_t *buf = NULL;    /* its buffer, to give back to the ring (NULL: none, or it stays) */
    const uint8_t *from = NULL;
    if ((flags & IORING_CQE_F_BUFFER) && bid < u->nbufs) {
        buf = u->bufs + (size_t)bid * URING_BUF_SIZE;
        size_t at = 0; /* where this receive's bytes start */
        if (u->boff) {
            /* Incremental: the rest of the buffer stays in the ring. */
            at = u->boff[bid];
            bool more = (flags & IORING_CQE_F_BUF_MORE) != 0;
            u->boff[bid] = more ? (uint32_t)(at + n) : 0;
            full = full || (n > 0 && !more);
            from = buf + at;
            if (more)
                buf = NULL;
        } else {
            from = buf;
        }
        if (at + n > URING_BUF_SIZE)
            from = NULL;
    }
    bool queue = res >= 0 || (res != -ENOBUFS && res != -ECANCELED && res != -EINTR && res != -EAGAIN);
    rl__rxchunk *c = queue ? rl__rxq_chunk(u->rx, n) : NULL;
    if (c) {
        c->len = n;
        c->err = res < 0 ? -res : 0;
        c->full = full;
        if (n && from)
            memcpy(c->bytes, from, n);
    }
    if (buf) {
        io_uring_buf_ring_add(u->br, buf, URING_BUF_SIZE, (unsigned short)bid, io_uring_buf_ring_mask(u->nbufs), 0);
        io_uring_buf_ring_advance(u->br, 1);
    }
    if (!queue)
        return false;
    if (!c) {
        /* No memory for the bytes: the stream cannot go on whole; it ends
         * with that error, as a failed read would. */
        c = malloc(sizeof *c);
        if (!c)
            return false; /* nothing left: the reader's next read finds what follows (the bytes are lost) */
        c->cap = 0;
        c->len = 0;
        c->err = ENOMEM;
        c->full = false;
    }
    if (into && rl__rxq_push(u->rx, fd, c))
        return true;
    /* Its file gone; or no memory for fd's entry in the table (the bytes
     * are lost: the reader's next read finds what follows). */
    free(c);
    return into ? false : true;
}

/* A receive's completion: its result queued; into ev its report (true),
 * or none. A multishot receive's completions but the last carry
 * IORING_CQE_F_MORE: it goes on reading. Its bytes are reported while the
 * registration is armed as a reader (rx_armed), else only queued: the
 * next arming finds them. Lock held. */
static bool uring_take_rx(uring *u, int fd, uint32_t seq, uring_reg *r, const struct io_uring_cqe *cqe,
                          struct epoll_event *ev) {
    uint64_t data = uring_data(fd, seq);
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    bool live = r && r->present && r->seq == seq;
    bool dead = !live && uring_dying_get(u, data, !more); /* its file's bytes: queued still */
    bool queued = uring_rx_queue(u, fd, live || dead, cqe, live ? r->rx_len : URING_BUF_SIZE);
    if (!live) {
        /* Cancelled, or ended as it was: a registration of the same file
         * reading through the ring that waits for more is told of what
         * came. */
        if (queued && dead && r && r->present && r->reader) {
            if (r->seq & URING_RX) {
                if (r->rx_armed)
                    (void)uring_arm(u, fd, r); /* the next fill reports the queue */
            } else if (r->seq || r->arm) {
                uring_disarm(u, fd, r);
                (void)uring_arm(u, fd, r);
            }
        }
        return false;
    }
    if (!more)
        r->seq = 0; /* ended: the next arming submits another */
    if (!queued) {
        /* No buffer was free (nothing read, the receive ended: asked
         * again as a poll), or cancelled by the kernel: asked again. */
        if (cqe->res == -ENOBUFS) {
            r->rx_poll = true;
            rl__test_count(&rl__poll_uring_nobufs);
        }
        if (!more && r->rx_armed)
            (void)uring_arm(u, fd, r);
        return false;
    }
    if (!r->rx_armed)
        return false; /* queued: reported when armed (uring_fill) */
    r->rx_armed = false;
    if (!(r->events & URING_ONESHOT)) {
        /* level: the next fill reports the queue, or waits for the live receive */
        if (!more || r->dirty || !uring_grow(&u->level, &u->caplevel, u->nlevel + 1, sizeof *u->level, 16))
            (void)uring_arm(u, fd, r);
        else
            u->level[u->nlevel++] = (uring_level){fd, r->epoch};
    }
    ev->events = EPOLLIN | (cqe->res == 0 ? EPOLLRDHUP : 0) | (cqe->res < 0 ? EPOLLERR | EPOLLHUP | EPOLLRDHUP : 0);
    ev->data.u64 = rl__ev_data(fd, r->gen);
    return true;
}

/* q held by the ring (a reference, on its list `txheld`) while a send of
 * it is listed or in flight. The loop's thread. */
static void uring_tx_hold(uring *u, rl__txq *q) {
    if (q->held)
        return;
    q->held = true;
    rl__txq_retain(q);
    q->ring_prev = NULL;
    q->ring_next = u->txheld;
    if (u->txheld)
        u->txheld->ring_prev = q;
    u->txheld = q;
}

/* q is listed to have its next send submitted (held if it was not).
 * false: out of memory. The loop's thread. */
static bool uring_tx_list(uring *u, rl__txq *q) {
    uring_tx_hold(u, q);
    if (q->listed || q->inflight)
        return true;
    if (!uring_grow(&u->txl, &u->captxl, u->ntxl + 1, sizeof *u->txl, 16))
        return false;
    u->txl[u->ntxl++] = q;
    q->listed = true;
    return true;
}

/* q has nothing more to send: let go. The loop's thread. */
static void uring_tx_done(uring *u, rl__txq *q) {
    if (!q->held || q->listed || q->inflight)
        return;
    if (q->ring_prev)
        q->ring_prev->ring_next = q->ring_next;
    else
        u->txheld = q->ring_next;
    if (q->ring_next)
        q->ring_next->ring_prev = q->ring_prev;
    q->ring_next = q->ring_prev = NULL;
    q->held = false;
    rl__txq_release(q);
}

/* For the tests: sends through the ring completed (bytes sent), and those
 * of them that were short and continued. */
RL__HIDDEN _Atomic unsigned long rl__poll_uring_sends, rl__poll_uring_short_sends;
_Atomic unsigned long rl__poll_uring_sends, rl__poll_uring_short_sends;

/* A send's completion (res: bytes sent, or -errno): the head chunk done
 * or continued; an error ends q (its chunks dropped, the errno kept for
 * the writer). Lock held. */
static void uring_take_tx(uring *u, rl__txq *q, int res) {
    q->inflight = false;
    bool was_fast = q->fast;
    q->fast = false;
    bool ref = false; /* a silent send's own reference (uring_send) */
    if (was_fast) {
        /* Off the list of silent sends now (q may go below). */
        for (size_t i = 0; i < u->ntxfast; i++) {
            if (u->txfast[i] == q) {
                u->txfast[i] = u->txfast[--u->ntxfast];
                break;
            }
        }
        ref = !q->held;
    }
    if (was_fast && res != (int)q->inlen)
        q->slow = true; /* no room: the sends wait for it until the queue is empty */
    if (res == -EAGAIN || res == -EINTR || res == 0) {
        /* asked again (a silent send found no room: now one that waits) */
    } else if (res < 0) {
        if (!q->err)
            q->err = -res;
        rl__txq_drop(q); /* the stream is broken: what follows cannot be sent */
    } else if (q->head) {
        rl__test_count(&rl__poll_uring_sends);
        q->head->off += (size_t)res;
        if (q->head->off >= q->head->len)
            rl__txq_pop(q);
        else
            rl__test_count(&rl__poll_uring_short_sends);
    }
    if (!q->head)
        q->slow = false;
    if (!q->head || !uring_tx_list(u, q))
        uring_tx_done(u, q); /* out of memory to list it: its chunks wait for the writer's next send */
    if (ref)
        rl__txq_release(q);
}

/* One completion into ev, or dropped: what it is (URING_NO_REPORT, ...).
 * Lock held. */
static int uring_take(uring *u, const struct io_uring_cqe *cqe, struct epoll_event *ev) {
    uint64_t data = io_uring_cqe_get_data64(cqe);
    if (data == URING_REMOVE)
        return URING_NO_REPORT;
    if ((data >> 62) == 1) { /* URING_TX: a send */
        uring_take_tx(u, (rl__txq *)(uintptr_t)(data & ~URING_TX), cqe->res);
        return URING_NO_REPORT;
    }
    int fd = (int)(uint32_t)data;
    uint32_t seq = (uint32_t)(data >> 32);
    uring_reg *r = uring_reg_at(u, fd);
    if (seq & URING_RX)
        return uring_take_rx(u, fd, seq, r, cqe, ev) ? URING_REPORT : URING_NO_REPORT;
    if (!r || !r->present || r->seq != seq)
        return URING_NO_REPORT; /* replaced or removed */
    r->rx_poll = false; /* a reader's poll after ENOBUFS: the next arming reads again */
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    if (fd == u->kick) {
        /* Another thread's change: submitted by the wait's next enter. */
        if (!more) {
            r->seq = 0;
            (void)uring_arm(u, fd, r);
        }
        return URING_NO_REPORT;
    }
    bool level = !(r->events & (URING_ONESHOT | URING_ET));
    if (cqe->res == -EBADF && level) {
        /* The number was closed behind the loop's back while it kept the
         * fd enabled: reported as ready for what it asked (the callouts'
         * reads fail), as epoll reports a file a dup keeps open, until the
         * loop's periodic check of a persistent registration (rl_fdtab.c)
         * finds the number closed. */
        r->seq = 0;
        (void)uring_arm(u, fd, r);
        ev->events = r->events & (EPOLLIN | EPOLLOUT);
        ev->data.u64 = rl__ev_data(fd, r->gen);
        return URING_REPORT;
    }
    if (cqe->res < 0) {
        /* The file went (EBADF: a one-shot registration falls silent, as
         * epoll's goes with its file), or the kernel ended a multishot
         * poll (ECANCELED, ENOMEM): no report; a live file is asked again. */
        if (!more)
            r->seq = 0;
        if (cqe->res != -EBADF && !more)
            (void)uring_arm(u, fd, r);
        return URING_NO_REPORT;
    }
    if (cqe->res > 0 && !((uint32_t)cqe->res & uring_asked(r))) {
        /* Nothing asked for: a poll reports POLLRDHUP (a peer that shut
         * down its writing side) whatever it asks, where epoll, not asked,
         * stays asleep. The half-close is a state that stays: a single-shot
         * poll asked again would answer at once, again and again (a write
         * side waiting for room spun the loop). So the registration is
         * asked with a multishot poll from now on, which answers the
         * file's wake-ups (room, data, its end), once at its arming if
         * ready then, as a single-shot one does. */
        if (!more) {
            r->seq = 0;
            if (!(r->events & URING_ET))
                r->quiet = true;
            (void)uring_arm(u, fd, r); /* nothing reported: armed still, as epoll's */
        }
        return URING_NO_REPORT;
    }
    if (more && r->quiet) {
        /* A quiet registration's multishot poll told of what was asked:
         * it goes, as a single-shot poll would have ended; a level one is
         * asked again by the next wait (a multishot poll again, whose
         * arming asks the file). */
        uring_disarm(u, fd, r);
        if (level)
            (void)uring_arm(u, fd, r);
    } else if (!more) {
        r->seq = 0;
        if (level || (r->events & (URING_ET | URING_ONESHOT)) == URING_ET)
            (void)uring_arm(u, fd, r); /* level: asked again by the next wait; multishot ended: again */
    }
    ev->events = (uint32_t)cqe->res;
    ev->data.u64 = rl__ev_data(fd, r->gen);
    if (r->events & URING_ET)
        return URING_REPORT;
    bool fresh = ((seq - u->seq_mark - 1) & URING_SEQ) < ((u->seq - u->seq_mark) & URING_SEQ);
    return fresh ? URING_NEW_POLL_REPORT : URING_POLL_REPORT;
}

/* Enters ring, submitting `submit` entries and, if `wait`, waiting for a
 * completion up to ns nanoseconds (negative: no limit); without `wait`,
 * runs the kernel's completion work. liburing's result (-errno). */
static int uring_enter_for(struct io_uring *ring, unsigned submit, bool wait, long long ns) {
    if (wait && ns >= 0) {
        struct __kernel_timespec ts = {ns / 1000000000, ns % 1000000000};
        struct io_uring_getevents_arg arg = {.sigmask_sz = _NSIG / 8, .ts = (uint64_t)(uintptr_t)&ts};
        return io_uring_enter2(ring->enter_ring_fd, submit, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
                               (sigset_t *)&arg, sizeof arg);
    }
    return io_uring_enter(ring->enter_ring_fd, submit, wait ? 1 : 0, IORING_ENTER_GETEVENTS, NULL);
}

/* One enter: submits the changes and, if `wait` and nothing is complete
 * yet, waits up to `ns` (negative: no limit) for a completion; without
 * `wait`, runs the kernel's completion work (a look). 0, or the errno
 * (ETIME: nothing came). */
static int uring_enter(uring *u, bool wait, long long ns) {
    if (RL__UNLIKELY(u->broken))
        return EIO; /* resized, and its new queues could not be mapped (uring_resize) */
    uring_lock(u);
    u->seq_mark = u->seq;
    int submit = uring_prepare(u, true);
    bool kept = u->headpend < u->npend; /* reports at hand: no waiting */
    /* A removal submitted: this enter (GETEVENTS) runs its completion work,
     * so the next removal's submission need not (uring_submit_now). */
    bool removed = submit >= 0 && u->cancelled;
    if (removed)
        u->cancelled = false;
    u->parked = submit >= 0; /* until uring_unpark */
    uring_unlock(u);
    if (submit < 0)
        return -submit;
    wait = wait && !kept;
    wait = wait && io_uring_cq_ready(&u->ring) == 0;
    if (!submit && !wait && !removed && io_uring_cq_ready(&u->ring) > 0) {
        u->recheck = true; /* completed before this wait */
        return 0; /* reports at hand */
    }
    /* Completion work pending: files woke since the last enter, while the
     * program ran, and may have changed since (uring_recheck). */
    u->recheck = (__atomic_load_n(u->ring.sq.kflags, __ATOMIC_RELAXED) & IORING_SQ_TASKRUN) != 0;
    int r = uring_enter_for(&u->ring, (unsigned)submit, wait, ns);
    return r < 0 ? -r : 0; /* liburing's calls give -errno */
}

/* The silent sends the kernel has taken (its submission head is past
 * their entries) and that made no completion (those that did were taken
 * first): sent whole. Lock held, after the completions were taken. */
static void uring_tx_settle(uring *u) {
    unsigned khead = __atomic_load_n(u->ring.sq.khead, __ATOMIC_ACQUIRE);
    size_t keep = 0;
    for (size_t i = 0; i < u->ntxfast; i++) {
        rl__txq *q = u->txfast[i];
        if (!q->inflight || !q->fast)
            continue; /* its completion came: taken by uring_take_tx */
        if ((int)(khead - q->sqpos) <= 0) {
            u->txfast[keep++] = q; /* not submitted yet */
            continue;
        }
        bool ref = !q->held; /* the silent send's own reference (uring_send) */
        q->inflight = q->fast = false;
        rl__test_count(&rl__poll_uring_sends);
        q->head->off += q->inlen;
        if (q->head->off >= q->head->len)
            rl__txq_pop(q);
        else
            rl__test_count(&rl__poll_uring_short_sends);
        if (!q->head)
            q->slow = false;
        if (!q->head || !uring_tx_list(u, q))
            uring_tx_done(u, q);
        if (ref)
            rl__txq_release(q);
    }
    u->ntxfast = keep;
}

/* The report at index i of the harvest's array is a poll's (uring_recheck).
 * Out of memory: not noted, handed out as the kernel gave it. Lock held. */
static void uring_note_polled(uring *u, int i) {
    if (uring_grow(&u->polled, &u->cappolled, u->npolled + 1, sizeof *u->polled, 16))
        u->polled[u->npolled++] = i;
}

/* Takes every completion from the ring: the reports made go to ev (up to
 * maxev; *n of them so far), the rest to u->pend. Lock held. */
static void uring_reap(uring *u, struct epoll_event *ev, int maxev, int *n) {
    for (;;) {
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&u->ring, head, cqe) {
            seen++;
            struct epoll_event one;
            int kind = uring_take(u, cqe, *n < maxev ? &ev[*n] : &one);
            if (kind == URING_NO_REPORT)
                continue;
            if (*n >= maxev) {
                uring_pend(u, &one, kind >= URING_POLL_REPORT); /* asked again when handed out */
                continue;
            }
            if (kind == URING_POLL_REPORT)
                uring_note_polled(u, *n);
            (*n)++;
        }
        io_uring_cq_advance(&u->ring, seen);
        /* Completions the kernel kept aside (the queue was full) are
         * taken too: a receive's bytes never wait there while the reader
         * reads the fd directly. */
        bool over = io_uring_cq_has_overflow(&u->ring);
        if (over || seen > u->ring.cq.ring_entries / 2)
            u->grow_cq = true;
        if (!over || io_uring_get_events(&u->ring) < 0)
            break;
    }
    if (u->ntxfast)
        uring_tx_settle(u);
}

#ifndef IORING_REGISTER_RESIZE_RINGS
#define IORING_REGISTER_RESIZE_RINGS 33 /* Linux 6.13; liburing 2.3's headers predate it */
#endif

/* Gives u's ring queues of sq and cq entries (the kernel moves what they
 * hold) and maps them in place of the old ones. Nothing may wait in the
 * submission queue unsubmitted (the kernel moves only what it was
 * given). 0, or the errno: the kernel refused (the ring as it was), or
 * the new queues could not be mapped (the ring is broken: its waits fail
 * from then on). Lock held, the loop's thread (or the opener, before the
 * ring is enabled). */
static int uring_resize(uring *u, unsigned sq, unsigned cq) {
    struct io_uring old = u->ring;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.sq_entries = sq;
    p.cq_entries = cq;
    p.flags = IORING_SETUP_CQSIZE;
    int r = io_uring_register(old.ring_fd, IORING_REGISTER_RESIZE_RINGS, &p, 1);
    if (r < 0)
        return -r;
    p.features = old.features; /* what the mapping reads (one mapping for both queues) */
    r = uring_map(old.ring_fd, &p, old.flags, &u->ring);
    if (r < 0) {
        u->ring = old;
        u->broken = true;
        return -r;
    }
    /* uring_map starts the ring's view afresh: what it cannot know is
     * taken from the old one. */
    u->ring.enter_ring_fd = old.enter_ring_fd;
    u->ring.int_flags = old.int_flags;
    u->ring.sq.sqe_head = old.sq.sqe_head;
    u->ring.sq.sqe_tail = old.sq.sqe_tail; /* no index array to set up: IORING_SETUP_NO_SQARRAY */
    uring_unmap(&old);
    return 0;
}

/* For the tests: rings resized to grow. */
RL__HIDDEN _Atomic unsigned long rl__poll_uring_grown;
_Atomic unsigned long rl__poll_uring_grown;

/* A queue that filled (more to submit than it held, or more than half of
 * it completed at one harvest, or completions kept aside by the kernel)
 * is doubled, up to URING_SQ and URING_CQ, once nothing waits in the
 * submission queue. A kernel that refuses keeps the ring as it is (its
 * completions beyond the queue kept by the kernel, IORING_FEAT_NODROP).
 * Lock held, the loop's thread. */
static void uring_grow_rings(uring *u) {
    if (!u->resizable) {
        /* A ring made at the largest sizes, with liburing's index array,
         * which a resized ring would lose (uring_open_small). */
        u->grow_sq = u->grow_cq = false;
        return;
    }
    unsigned sq = u->ring.sq.ring_entries, cq = u->ring.cq.ring_entries;
    unsigned nsq = u->grow_sq && sq < URING_SQ ? sq * 2 : sq;
    unsigned ncq = u->grow_cq && cq < URING_CQ ? cq * 2 : cq;
    if (ncq < 2 * nsq)
        ncq = 2 * nsq;
    if (ncq > URING_CQ)
        ncq = URING_CQ;
    u->grow_sq = u->grow_cq = false;
    if (nsq == sq && ncq == cq)
        return;
    struct io_uring_sq *q = &u->ring.sq;
    if (q->sqe_head != q->sqe_tail || __atomic_load_n(q->khead, __ATOMIC_ACQUIRE) != q->sqe_tail) {
        u->grow_sq = nsq != sq; /* entries not submitted yet: at a later harvest */
        u->grow_cq = ncq != cq;
        return;
    }
    if (uring_resize(u, nsq, ncq) == 0)
        rl__test_count(&rl__poll_uring_grown);
}

/* rl__poll_uring_ring_sizes (rl_poll_backend.h). */
void rl__poll_uring_ring_sizes(rl__poller *rl, unsigned *sq, unsigned *cq) {
    uring *u = rl->kstate;
    *sq = *cq = 0;
    if (rl->kops != &rl__poll_uring_ops || !u)
        return;
    uring_lock(u);
    *sq = u->ring.sq.ring_entries;
    *cq = u->ring.cq.ring_entries;
    uring_unlock(u);
}

/* A poll's report tells what woke the file (the wake-up's events, taken
 * when the kernel ran the poll's completion work, at the loop's next enter
 * with IORING_SETUP_DEFER_TASKRUN), not the file's state when the report
 * is handed out. Epoll's wait asks every ready file again as it hands it
 * out. Where they differ: a file that woke while the program ran (between
 * two enters: the enter found completion work pending, u->recheck) or
 * whose report was kept from an earlier harvest, and that the program
 * changed since: written to fullness after room came, read empty after
 * data came. Handed out as it was, its callout was made for what is gone
 * (a blocking read or write in it hangs). So those reports, the harvest's
 * u->polled, are asked again of their files, with one poll(2) for up to
 * 64: a report of what is still so goes out with the file's events now; a
 * report of nothing asked any more is dropped, and its registration, a
 * single-shot one that ended with it, armed again (epoll's one-shot
 * registration stays armed until it reports). A report a wait's own sleep
 * brought is the file's state then, and goes out as it is. n: the
 * reports in ev; the reports left. Lock held. */
static int uring_recheck(uring *u, struct epoll_event *ev, int n) {
    enum { CHUNK = 64 };
    struct pollfd pf[CHUNK];
    bool dropped = false;
    for (size_t base = 0; base < u->npolled; base += CHUNK) {
        size_t m = u->npolled - base < CHUNK ? u->npolled - base : CHUNK;
        for (size_t j = 0; j < m; j++) {
            int fd = rl__ev_fd(&ev[u->polled[base + j]]);
            uring_reg *r = uring_reg_at(u, fd);
            bool live = r && r->present;
            pf[j] = (struct pollfd){.fd = live ? fd : -1,
                                    .events = live ? (short)(r->events & (EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP)) : 0};
        }
        int got;
        do
            got = poll(pf, (nfds_t)m, 0);
        while (got < 0 && errno == EINTR);
        if (got < 0)
            continue; /* handed out as the kernel gave them */
        for (size_t j = 0; j < m; j++) {
            int fd = pf[j].fd;
            if (fd < 0 || (pf[j].revents & POLLNVAL))
                continue; /* closed: the core finds it so */
            uring_reg *r = uring_reg_at(u, fd);
            uint32_t now = (uint32_t)pf[j].revents & uring_asked(r);
            if (r->reader && (r->events & EPOLLIN) && u->rx && rl__rxq_holds(u->rx, fd))
                now |= EPOLLIN; /* the ring read it: its queue holds it */
            int *i = &u->polled[base + j];
            if (now) {
                ev[*i].events = now;
                continue;
            }
            if ((r->events & URING_ONESHOT) && r->seq == 0)
                (void)uring_arm(u, fd, r);
            *i = -1 - *i; /* dropped */
            dropped = true;
        }
    }
    if (!dropped)
        return n;
    int w = 0;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        while (k < u->npolled && (u->polled[k] < 0 ? -1 - u->polled[k] : u->polled[k]) < i)
            k++;
        if (k < u->npolled && u->polled[k] == -1 - i)
            continue;
        ev[w++] = ev[i];
    }
    return w;
}

/* Up to maxev reports into ev: those kept before first, then the ring's.
 * Lock taken. */
/* The loop's thread is out of its enter: the removals other threads made
 * meanwhile, and wait for (uring_ctl), are submitted now, their
 * completion work run (the files let go), and their threads told. Lock
 * held, the loop's thread. */
static void uring_unpark(uring *u) {
    u->parked = false;
    if (u->xasked == atomic_load_explicit(&u->xdone, memory_order_relaxed))
        return;
    u->cancelled = true; /* their removals' completion work runs with the submission */
    uring_submit_now(u);
    atomic_store_explicit(&u->xdone, u->xasked, memory_order_release);
    rl__futex_wake(&u->xdone, INT_MAX);
}

static int uring_harvest(uring *u, struct epoll_event *ev, int maxev) {
    int n = 0;
    uring_lock(u);
    uring_unpark(u);
    u->npolled = 0;
    /* A kept report whose registration the core changed since is dropped,
     * as epoll drops a ready event the fd's modification finds no longer
     * ready: the new arming reports the fd if it is (a report kept from a
     * run nested in a callout, handed out after the outer pass had enabled
     * the fd again, made that pass's callouts be skipped, then its arming). */
    while (n < maxev && u->headpend < u->npend) {
        uring_kept *k = &u->pend[u->headpend++];
        uring_reg *r = uring_reg_at(u, rl__ev_fd(&k->ev));
        if (r && r->epoch == k->epoch && r->npend)
            r->npend--;
        if (r && r->present && r->epoch == k->epoch) {
            if (k->polled)
                uring_note_polled(u, n);
            ev[n++] = k->ev;
        }
    }
    if (u->headpend == u->npend)
        u->headpend = u->npend = 0;
    size_t kept = u->npolled; /* reports of an earlier harvest: asked again */
    uring_reap(u, ev, maxev, &n);
    if (!u->recheck)
        u->npolled = kept; /* this wait's: woken while it slept */
    if (u->npolled)
        n = uring_recheck(u, ev, n);
    if (RL__UNLIKELY(u->grow_sq || u->grow_cq))
        uring_grow_rings(u);
    uring_unlock(u);
    return n;
}

static long long uring_now_ns(void) {
    struct timespec t;
    (void)clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* epoll_wait's contract: completions that are all dropped (replaced
 * requests) do not end a wait early. */
static int uring_wait(rl__poller *rl, struct epoll_event *ev, int maxev, int timeout_ms) {
    uring *u = rl->kstate;
    long long end = timeout_ms > 0 ? uring_now_ns() + (long long)timeout_ms * 1000000 : 0;
    long long ns = timeout_ms < 0 ? -1 : (long long)timeout_ms * 1000000;
    for (;;) {
        int err = uring_enter(u, timeout_ms != 0, ns);
        if (err && err != ETIME && err != EINTR && err != EBUSY && err != EAGAIN) {
            uring_lock(u);
            uring_unpark(u);
            uring_unlock(u);
            errno = err;
            return -1;
        }
        int n = uring_harvest(u, ev, maxev);
        if (n > 0 || timeout_ms == 0 || err == ETIME)
            return n;
        if (err == EINTR) {
            errno = EINTR; /* rl__poll_wait waits again */
            return -1;
        }
        if (timeout_ms > 0 && (ns = end - uring_now_ns()) <= 0)
            return 0;
    }
}

/* How many provided buffers a loop's ring gets (a power of 2; the tests
 * make it small to run out of them). */
RL__HIDDEN _Atomic unsigned rl__poll_uring_nbufs;
_Atomic unsigned rl__poll_uring_nbufs = URING_BUFS;

/* The provided buffers, made and registered on first use. Lock held, the
 * loop's thread. */
static bool uring_bufs(uring *u) {
    if (u->br || u->br_failed)
        return u->br != NULL;
    u->nbufs = atomic_load_explicit(&rl__poll_uring_nbufs, memory_order_relaxed);
    if (u->nbufs == 0 || (u->nbufs & (u->nbufs - 1)) || u->nbufs > 32768)
        u->nbufs = URING_BUFS;
    size_t rsz = u->nbufs * sizeof(struct io_uring_buf);
    size_t bsz = (size_t)u->nbufs * URING_BUF_SIZE;
    void *mem = mmap(NULL, rsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* The buffers mapped, not malloc'd: glibc frees a block this big with
     * munmap and then raises its dynamic mmap threshold to its size, so
     * the process's later large arrays (a loop's timers, a table) would
     * come from the arenas and stay resident after they are freed. */
    void *bmem = mmap(NULL, bsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED || bmem == MAP_FAILED) {
        if (mem != MAP_FAILED)
            (void)munmap(mem, rsz);
        if (bmem != MAP_FAILED)
            (void)munmap(bmem, bsz);
        return false; /* out of memory: asked again by the next reader */
    }
    uint8_t *bufs = bmem;
    struct io_uring_buf_reg reg;
    memset(&reg, 0, sizeof reg);
    reg.ring_addr = (uint64_t)(uintptr_t)mem;
    reg.ring_entries = u->nbufs;
    reg.bgid = URING_BGID;
    uint32_t *boff = calloc(u->nbufs, sizeof *boff);
    reg.pad = boff ? IOU_PBUF_RING_INC : 0; /* the kernel's `flags` (its old `pad`) */
    int rr = rl__fault(RL_FAULT_URING_BUFS) ? -EINVAL : io_uring_register_buf_ring(&u->ring, &reg, 0);
    if (rr == -EINVAL && reg.pad && !rl__fault(RL_FAULT_URING_BUFS)) {
        /* A kernel without incremental buffers: whole ones. */
        free(boff);
        boff = NULL;
        reg.pad = 0;
        rr = io_uring_register_buf_ring(&u->ring, &reg, 0);
    }
    u->boff = boff;
    if (rr != 0) {
        free(u->boff);
        u->boff = NULL;
        (void)munmap(mem, rsz);
        (void)munmap(bufs, bsz);
        u->br_failed = true; /* a kernel without provided-buffer rings: polls only */
        return false;
    }
    u->br = mem;
    u->bufs = bufs;
    io_uring_buf_ring_init(u->br);
    for (unsigned i = 0; i < u->nbufs; i++)
        io_uring_buf_ring_add(u->br, bufs + (size_t)i * URING_BUF_SIZE, URING_BUF_SIZE, (unsigned short)i,
                              io_uring_buf_ring_mask(u->nbufs), (int)i);
    io_uring_buf_ring_advance(u->br, u->nbufs);
    return true;
}

static rl__rxq *uring_recv_into(rl__poller *rl, int fd, size_t want) {
    uring *u = rl->kstate;
    if (fd < 0 || !pthread_equal(pthread_self(), rl->owner))
        return NULL;
    uring_lock(u);
    uring_reg *r = uring_reg_at(u, fd);
    bool ok = r && r->present && u->enabled && uring_bufs(u) && (u->rx || (u->rx = rl__rxq_new()) != NULL);
    if (ok) {
        r->reader = true;
        rl__rxq_set_want(u->rx, want);
    }
    uring_unlock(u);
    return ok ? rl__rxq_retain(u->rx) : NULL;
}

/* fd's reader reads it itself for now (`self`: its live receive, if any,
 * cancelled, what it read still queued; its arming a poll) or through the
 * ring again (from its next arming). */
RL__HIDDEN _Atomic unsigned long rl__poll_uring_rx_selves; /* for the tests: readers turned to reading themselves */
_Atomic unsigned long rl__poll_uring_rx_selves;

static void uring_recv_self(rl__poller *rl, int fd, bool self) {
    uring *u = rl->kstate;
    if (fd < 0 || !pthread_equal(pthread_self(), rl->owner))
        return;
    uring_lock(u);
    uring_reg *r = uring_reg_at(u, fd);
    if (r && r->present && r->reader && r->rx_self != self) {
        r->rx_self = self;
        if (self)
            rl__test_count(&rl__poll_uring_rx_selves);
        if (self && (r->seq & URING_RX)) {
            bool armed = r->rx_armed || r->arm;
            uring_disarm(u, fd, r);
            if (armed)
                (void)uring_arm(u, fd, r);
        }
    }
    uring_unlock(u);
}

/* Queues n bytes of q's for the ring to send (rl__poll_send); outside a
 * run (!soon), sees them through before it returns (uring_tx_finish, up
 * to `timeout`). 1: queued; 0: not this ring's (the caller sends);
 * -errno: an earlier send's error, reported now (nothing queued), or no
 * memory. */
static void uring_tx_finish(uring *u);
static int uring_send(rl__poller *rl, rl__txq *q, const void *bytes, size_t n, bool soon, double timeout) {
    uring *u = rl->kstate;
    const void *owner = __atomic_load_n(&q->owner, __ATOMIC_RELAXED);
    /* The caller is the loop's thread (rl__poll_send). A queue whose
     * address does not fit user_data beside URING_TX (a tagged pointer)
     * is sent by the caller. */
    if ((owner && owner != rl) || !u->enabled || ((uint64_t)(uintptr_t)q >> 62) != 0)
        return 0;
    if (q->err) {
        int err = q->err;
        q->err = 0;
        return -err;
    }
    /* The send queues are the loop thread's alone (filled, taken and
     * settled on it): no lock but for a submission now. */
    __atomic_store_n(&q->owner, (const void *)rl, __ATOMIC_RELAXED);
    int r = 1;
    q->wait_for = timeout;
    if (!rl__txq_push(q, bytes, n)) {
        r = -ENOMEM;
    } else if (q->inflight || q->listed) {
        /* sent after what is in flight (uring_take_tx, uring_tx_settle) */
        if (q->inflight && q->fast)
            uring_tx_loud(u, q);
    } else if (uring_tx_start(u, q)) {
        /* In flight: submitted by the next enter. A silent send's queue is
         * held by its entry in the list of silent sends (a reference, not
         * linked on txheld: uring_tx_settle lets go); another's, held. */
        if (!q->fast)
            uring_tx_hold(u, q);
        else if (!q->held)
            rl__txq_retain(q);
    } else if (!uring_tx_list(u, q)) {
        /* Out of memory to list it: this chunk goes back. */
        uring_tx_done(u, q);
        rl__txchunk **p = &q->head;
        while ((*p)->next)
            p = &(*p)->next;
        if ((*p)->keep)
            RLRelease((*p)->keep);
        free(*p);
        *p = NULL;
        q->tail = p;
        atomic_fetch_sub_explicit(&q->state, 2, memory_order_acq_rel);
        r = -ENOMEM;
    }
    if (r > 0 && !soon) {
        uring_lock(u);
        uring_tx_finish(u);
        uring_unlock(u);
    }
    return r;
}

/* The longest any queue the ring holds with bytes on their way (a send in
 * flight or listed) waits for them (seconds, INFINITY: no limit), or -1:
 * none has any. Lock held. */
static double uring_tx_left(const uring *u) {
    double wait = -1;
    for (const rl__txq *q = u->txheld; q; q = q->ring_next) {
        if (!q->head || !(q->inflight || q->listed))
            continue;
        double w = q->wait_for > 0 ? q->wait_for : INFINITY;
        if (w > wait)
            wait = w;
    }
    return wait;
}

/* The queued sends submitted and seen through: back from a run (or from
 * a send made outside one), the program finds its bytes in the kernel, as
 * a send on epoll (or CFSocketSendData) would have left them, not waiting
 * in the ring for a next run that may never come (a thread whose run ends
 * when its last socket is invalidated, and exits). Sends that wait for
 * room progress only inside enters on the loop's thread: this enters, and
 * waits for completions, until no queue holds bytes, or for as long as
 * the writers' timeouts allow (their last send's; no limit for a timeout
 * of 0 or less, as the send itself waits on epoll); what is left then
 * waits for the next run, as before. The armings wait for the next wait
 * (uring_submit_now); reports that come meanwhile are kept for it. The
 * loop's thread, lock held. */
static void uring_tx_finish(uring *u) {
    uring_submit_now(u);
    double wait = uring_tx_left(u);
    if (wait < 0)
        return;
    long long start = uring_now_ns();
    for (; wait >= 0 && !u->broken; wait = uring_tx_left(u)) {
        long long ns = -1;
        if (wait < INFINITY) {
            ns = (long long)(wait * 1e9) - (uring_now_ns() - start);
            if (ns <= 0)
                return; /* the writers' timeouts passed: the rest goes with the next run */
        }
        int n = uring_prepare(u, false);
        if (n < 0)
            return;
        uring_unlock(u);
        /* Sends to submit (a short one continued): no waiting, a silent
         * send makes no completion to wait for (done within this enter,
         * settled by the harvest below); else a send that waits for room. */
        (void)uring_enter_for(&u->ring, (unsigned)n, n == 0, ns);
        uring_lock(u);
        int none = 0;
        uring_reap(u, NULL, 0, &none);
    }
}

/* Submits the queued sends now and sees them through (a run's end). */
static void uring_flush_sends(rl__poller *rl) {
    uring *u = rl->kstate;
    if (!u || !pthread_equal(pthread_self(), rl->owner) ||
        (!u->ntxl && !u->txheld && !u->ntxfast && u->ring.sq.sqe_tail == u->ring.sq.sqe_head))
        return; /* sends listed, held or in flight, or entries made and not yet submitted: the loop thread's own */
    uring_lock(u);
    uring_tx_finish(u);
    uring_unlock(u);
}

const rl__poll_ops rl__poll_uring_ops = {
    .name = "io_uring",
    .wait_call = "io_uring_enter",
    .open = uring_open,
    .close = uring_close,
    .renew = uring_renew,
    .ctl = uring_ctl,
    .wait = uring_wait,
    .recv_into = uring_recv_into,
    .recv_self = uring_recv_self,
    .send = uring_send,
    .flush = uring_flush_sends,
};

#endif /* RL_TRICK_URING */
