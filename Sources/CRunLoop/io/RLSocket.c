/* RLSocket.c — CFSocket's API over the library's fd sources. Readiness
 * comes from the loop's epoll through one RLFileDescriptor per socket
 * (one-shot per enable); this file turns it into CF's callback kinds,
 * accepting and reading on the loop's thread, and re-arms what the socket
 * flags say. */
#include "RLDataInternal.h"
#include "rl_health.h"
#include "RLLockInternal.h"
#include "RLSocketInternal.h"
#include "rl_fdobj.h"
#include "rl_pool.h"
#include "rl_lockclass.h"
#include "RLLockDebugInternal.h"
#include "rl_waitpolicy.h"
#include "rl_rxq.h"
#include "rl_txq.h"

#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoopTimer.h>
#include <crunloop/RLSocket.h>
#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>
#include <crunloop/RLString.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RL_SOCKET_TYPES 0xFu
#define RL_SOCKET_FLAGS                                                                                      \
    (kRLSocketAutomaticallyReenableReadCallBack | kRLSocketAutomaticallyReenableAcceptCallBack |            \
     kRLSocketAutomaticallyReenableDataCallBack | kRLSocketAutomaticallyReenableWriteCallBack |             \
     kRLSocketLeaveErrors | kRLSocketCloseOnInvalidate)
/* At most this many connections are accepted in one wake, so that a flood
 * of connections cannot keep the loop from its other sources. */
#define RL_SOCKET_ACCEPT_BATCH 64
/* A stream's Data callback gets what is queued in chunks, one read each,
 * each handed over as soon as it is read; a chunk that fills its buffer is
 * followed by another in the same wake. The first is RL_SOCKET_READ_CHUNK
 * bytes at most. When no other fd waits for its callout in the same pass,
 * the next ones are RL_SOCKET_READ_GROW times as large (fewer system calls
 * per byte for a lone busy stream; measured with bench-echo's 1-connection
 * row, 128 KiB did best: 1.4-1.6x libuv, against 1.0x at 64 KiB and less
 * again at 256 KiB to 1 MiB, which also slowed the 16-connection row run
 * after it); when others wait, chunks stay small, so that each gets its
 * turn sooner. At most RL_SOCKET_READ_BATCH first chunks' worth (2 MiB)
 * is read in one wake, so that a peer that never stops sending cannot keep
 * the loop from its other sources; the rest comes on the next pass. */
#define RL_SOCKET_READ_CHUNK 65536
#define RL_SOCKET_READ_GROW 2
#define RL_SOCKET_READ_BATCH 32
/* A chunk of at most this many bytes is copied out of the thread's read
 * buffer into an RLData of its own; a longer one takes the buffer (see
 * sock_long_data_done). */
#define RL_SOCKET_COPY_MAX 4096
/* On a loop that reads its streams through an io_uring (rl_rxq.h), a
 * callout whose first delivery brings at least this many bytes from the
 * ring finds the stream in bulk: its socket reads the fd itself from then
 * on (one read of its chunk, no copy; the ring copies each buffer out and
 * the delivery joins them), until a callout's first read brings less than
 * a bulk read's worth (RL_BULK_READ): the ring reads it again (one system
 * call a wake, not two). Between the two, it stays as it is. */
#define RL_SOCKET_SELF_READ 16384

/* The chunk size in use: RL_SOCKET_READ_CHUNK, smaller only in the tests
 * that watch the batch limit at work (a socket pair cannot queue 2 MiB). */
RL__HIDDEN _Atomic size_t rl__socket_read_chunk;
_Atomic size_t rl__socket_read_chunk = RL_SOCKET_READ_CHUNK;
/* When accept fails for want of descriptors or memory, the connection
 * stays queued and the listener stays readable: instead of reporting that
 * readiness again at once (a loop spinning at full speed), the listener
 * rests this long, then tries again. */
#define RL_SOCKET_ACCEPT_RETRY 0.1

/* An IPv6 address as a socket keeps it: a sockaddr_in6 without its flow
 * information (0 in the addresses a peer's stream reports, unless the
 * socket asked for flow labels) and its scope (0 but for a link-local
 * peer): 20 bytes, not 28. One with either goes in an RLData. */
typedef struct sock_in6 {
    sa_family_t family;
    in_port_t port;
    struct in6_addr addr;
} sock_in6;

/* A peer address kept in the socket itself: an IPv4 one (or any of up to
 * 20 bytes but an IPv6 one) as it is, an IPv6 one without flow
 * information or scope as a sock_in6; another (a named Unix socket's, an
 * IPv6 one with a flow label or a scope) in an RLData. */
typedef union sock_peer_sa {
    struct sockaddr sa;
    struct sockaddr_in in;
    sock_in6 in6;
} sock_peer_sa;
_Static_assert(sizeof(sock_peer_sa) == 20, "a socket keeps a peer address in 20 bytes");

/* A peer address as the callbacks get it: any address a socket keeps. */
typedef union sock_peer_full {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
} sock_peer_full;
/* s->peer_len's length when the peer address is in s->rare->peer. */
#define RL_SOCKET_PEER_IN_DATA 0x7Fu
/* s->peer_len's bits that say the peer address's length. */
#define RL_SOCKET_PEER_LEN 0x7Fu
/* s->peer_len's bit set once the ring was asked for s and refused
 * (sock_ring_ask): its loop reads no ring. */
#define RL_SOCKET_NO_RING 0x80u

/* What few sockets need, in a block of its own made when first needed
 * (sock_rare_get): the context's callbacks (a program that gives any),
 * a peer address too long for the socket (a named Unix socket's), a
 * resting listener's timer, a ring's send queue. Made under the socket's
 * lock (or before anyone sees the socket), never replaced, freed with the
 * socket. A stream read through a ring needs only a reference on that
 * ring's read-ahead queues (shared by the ring's streams, rl_rxq.h):
 * s->rare is then that pointer itself, tagged (RL_SOCKET_RARE_RXQ), until
 * a rare part is needed, which takes it over. */
typedef struct sock_rare {
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
    char *(*copyDescription)(const void *info);
    RLDataRef peer; /* a peer address longer than peer_sa, else NULL */
    /* The callout, when the table of callouts was full (RL_SOCKET_CALLOUT_RARE). */
    RLSocketCallBack callout;
    /* Set while the listener rests after accept ran out of descriptors:
     * the one-shot timer (in the loop and mode that saw it) that wakes it. */
    RLRunLoopTimerRef accept_retry;
    /* A stream's writes queued for its loop's ring to send
     * (sock_ring_send, rl_txq.h): made by the first RLSocketSendData in a
     * callout on a loop with a ring; NULL: none. Set once, under the lock
     * (release), read without it (acquire). */
    rl__txq *txq;
    /* A Data stream read through its loop's ring (sock_ring_ask): the
     * ring's read-ahead queues (a reference), where what the ring read of
     * the stream waits under its fd, in order, taken before any read of
     * the fd. NULL: not asked yet, or refused (RL_SOCKET_NO_RING in
     * peer_len), or s->rare is the pointer itself (RL_SOCKET_RARE_RXQ).
     * Set once, under the lock (release), read without it (acquire). */
    rl__rxq *rxq;
} sock_rare;

/* s->rare's low bit: the word is a ring's read-ahead queues (rl__rxq,
 * sock_ring_ask), and there is no rare part yet. */
#define RL_SOCKET_RARE_RXQ ((uintptr_t)1)

/* Counts the frees of sockets whose peer address a thread's data may
 * hold (sock_peer_address): a socket made later at a freed one's address
 * is not taken for it. One word for all, in place of a serial in each
 * socket; a free only makes the next callback of each thread look the
 * address up again. */
static _Atomic uint32_t sock_peer_epoch;

/* The socket's size: its fd source follows it in its block. */
#define RL_SOCKET_SIZE 72

/* 72 bytes (checked below), followed in the same block by its run-loop
 * source, which carries the fd state the loops read (RL_FD_SOURCE_SIZE,
 * 136, its first membership inside): one allocation of 208 bytes, a
 * packed pool class (before: 224, with 24-byte object headers; 240, with a serial, the ring's queue and a
 * 24-byte peer address in the socket; before that 160 with a separate fd
 * object, and the source's 128 besides). Its fd is its source's (sock_fd), its context's
 * release in its rare part (sock_releaser). While valid, s holds a
 * reference on itself (released by RLSocketInvalidate); its source, once
 * woken by RLSocketCreateRunLoopSource, holds one on s until the
 * source's last reference goes (runloop_internal.h, RL__FDSOURCE_SIZE). */
struct RLSocket {
    rl__object base;
    /* Guards everything below that can change: a futex word (0 free, 1
     * held, 2 held and maybe waited for; sock_lock), not an rl__mutex,
     * whose owner field (12 bytes more) nobody asks of a socket. */
    _Atomic uint32_t lock;
    uint8_t sock_type; /* SOCK_STREAM, SOCK_DGRAM, ... */
    uint8_t types; /* the callback types it was made with (RL_SOCKET_TYPES) */
    uint8_t flags; /* RL_SOCKET_FLAGS */
    uint8_t disabled; /* callback types muted by the user or by a delivery */
    /* Bits of one byte, all under the lock. */
    bool listening : 1;
    bool connected : 1; /* a stream with a peer (datagram sockets count as connected) */
    bool connecting : 1; /* a background connect is under way */
    bool connect_reported : 1;
    bool at_eof : 1; /* the stream ended: no more read-side callbacks */
    /* The last look at what waited before a Read callback found a bulk
     * read's worth (sock_read_probe_due): the next callouts look again. */
    bool read_bulk : 1;
    /* What the fd source was last told its owner enables again after each
     * callout (rl__fd_set_kept): the read type, while it is wanted and
     * auto-re-enabled (kRLFileDescriptorReadCallBack or 0). */
    uint8_t kept : 2;
    /* Its callout: its number in sock_callouts (0: none), or
     * RL_SOCKET_CALLOUT_RARE: in rare (sock_callout_number). */
    uint8_t callout;
    /* The Data callback kept the last long read's data (a hint, read and
     * set by the callouts without the lock: relaxed atomic accesses). */
    bool keeps_long;
    /* A connected stream's peer address, for its Data callbacks (a
     * stream's peer never changes): looked up once (at creation, or on
     * first use), then never changed. Its RL_SOCKET_PEER_LEN bits: 0: not
     * yet; RL_SOCKET_PEER_IN_DATA: in rare->peer; else the length of the
     * address (as the callbacks get it) in peer_sa. Written once under the
     * lock (release), read without it (acquire). Its RL_SOCKET_NO_RING
     * bit: set once by the callouts (sock_ring_ask). Both set by an atomic
     * or, so neither loses the other. */
    _Atomic uint8_t peer_len;
    sock_peer_sa peer_sa;
    /* Its rare part (sock_rare_of), or its ring's read-ahead queues alone, tagged
     * RL_SOCKET_RARE_RXQ (sock_rxq_of); 0: neither yet. Changed under the
     * lock (release): 0 to either, a queue to the rare part that holds
     * it; read without it (acquire) by the callouts and the ring's sends. */
    uintptr_t rare;
    /* Valid until invalidated; the fd closed (kRLSocketCloseOnInvalidate)
     * and the context's info released then, once, after the callouts
     * that still read the fd or were handed the info (rl_fdobj.h: a
     * callout is counted while it runs, so none of them reads or accepts
     * on a number another open may have reused). Its info is the
     * context's (retained by the context's retain, in `rare`), which the
     * callouts get: set at creation, never changed. */
    rl__fdobj life;
};
_Static_assert(sizeof(struct RLSocket) <= RL_SOCKET_SIZE, "RLSocket outgrew its block");
_Static_assert(RL_SOCKET_SIZE % 8 == 0, "the fd source after the socket is 8-aligned");
_Static_assert(RL_SOCKET_SIZE == RL_FD_OWNER_SIZE, "the fd source sits where its loop looks for it");
_Static_assert(RL_SOCKET_SIZE + RL_FD_SOURCE_SIZE == 208, "a socket and its fd source: one block of 208 bytes");

/* The release of s's info (rl__fdobj_releaser): its context's, in its
 * rare part (made whenever the context has callbacks). */
static rl__fdobj_release_fn sock_releaser(const rl__fdobj *o);

/* The fd source that watches s's fd (its fd object, folded into its
 * run-loop source), after s in its block (sock_make). */
static inline RLRunLoopSourceRef sock_fdobj(const struct RLSocket *s) {
    return (RLRunLoopSourceRef)(void *)((char *)s + RL_SOCKET_SIZE);
}

/* s's fd: its fd source's (which never changes it), read once the
 * source is made (sock_make). */
static inline int sock_fd(const struct RLSocket *s) {
    return *(const int *)(const void *)((const char *)s + RL_SOCKET_SIZE + RL_FD_SOURCE_FD_OFFSET);
}

/* s's rare part; NULL: none yet (perhaps its read-ahead queue alone). */
static inline sock_rare *sock_rare_of(const struct RLSocket *s) {
    uintptr_t w = __atomic_load_n(&s->rare, __ATOMIC_ACQUIRE);
    return (w & RL_SOCKET_RARE_RXQ) ? NULL : (sock_rare *)w;
}

/* The read-ahead queues of the ring that reads s (sock_ring_ask); NULL:
 * none. Once set, s holds them until it is freed, wherever s->rare keeps
 * the pointer. */
static inline rl__rxq *sock_rxq_of(const struct RLSocket *s) {
    uintptr_t w = __atomic_load_n(&s->rare, __ATOMIC_ACQUIRE);
    if (w & RL_SOCKET_RARE_RXQ)
        return (rl__rxq *)(w & ~RL_SOCKET_RARE_RXQ);
    return w ? __atomic_load_n(&((sock_rare *)w)->rxq, __ATOMIC_ACQUIRE) : NULL;
}

/* s's rare part, made if need be (taking over a read-ahead queue kept
 * alone); NULL if memory is short. Its lock held, or s not seen by anyone
 * yet. A reader without the lock that loaded the queue alone still holds
 * it: the rare part holds the same queue. */
static sock_rare *sock_rare_get(struct RLSocket *s) {
    uintptr_t w = s->rare;
    if (w && !(w & RL_SOCKET_RARE_RXQ))
        return (sock_rare *)w;
    sock_rare *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->rxq = (rl__rxq *)(w & ~RL_SOCKET_RARE_RXQ);
    __atomic_store_n(&s->rare, (uintptr_t)r, __ATOMIC_RELEASE); /* read without the lock: sock_txq */
    return r;
}

static rl__fdobj_release_fn sock_releaser(const rl__fdobj *o) {
    const struct RLSocket *s = (const void *)((const char *)o - offsetof(struct RLSocket, life));
    const sock_rare *r = sock_rare_of(s);
    return r ? r->release : NULL;
}

/* The resting listener's timer, or NULL. Its lock held. */
static inline RLRunLoopTimerRef sock_retry_timer(const struct RLSocket *s) {
    const sock_rare *r = sock_rare_of(s);
    return r ? r->accept_retry : NULL;
}

/* Reports to the lock-order detector as one class for every socket
 * (docs/locking.md: before the loop and item locks). */
static __attribute__((noinline)) void sock_lock_slow(struct RLSocket *s) {
    /* 2: held, and someone may sleep; the unlock that sees it wakes one. */
    while (atomic_exchange_explicit(&s->lock, 2, memory_order_acquire) != 0)
        (void)rl__futex_wait(&s->lock, 2, NULL);
}

static inline void sock_lock(struct RLSocket *s) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_SOCKET, __builtin_return_address(0));
    uint32_t expected = 0;
    if (RL__UNLIKELY(!atomic_compare_exchange_strong_explicit(&s->lock, &expected, 1, memory_order_acquire,
                                                              memory_order_relaxed)))
        sock_lock_slow(s);
}

static inline void sock_unlock(struct RLSocket *s) {
    if (RL__UNLIKELY(atomic_exchange_explicit(&s->lock, 0, memory_order_release) == 2))
        rl__futex_wake(&s->lock, 1);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_SOCKET);
}

static void sock_finalize(void *obj) {
    struct RLSocket *s = obj;
    /* Valid sockets hold a reference on themselves, so a socket only gets
     * here invalidated, or from a failed creation; and an awake source
     * holds one, so its source is asleep: the block goes with s. */
    rl__rxq_release(sock_rxq_of(s));
    sock_rare *r = sock_rare_of(s);
    if (r) {
        if (r->peer)
            RLRelease(r->peer);
        rl__txq_release(r->txq);
        free(r);
    }
    if (atomic_load_explicit(&s->peer_len, memory_order_relaxed) & RL_SOCKET_PEER_LEN)
        atomic_fetch_add_explicit(&sock_peer_epoch, 1, memory_order_relaxed); /* sock_peer_address */
    rl__fdobj_finalize(&s->life, sock_releaser); /* nothing left to release once invalidated */
}

static char *sock_describe(const void *obj) {
    struct RLSocket *s = (struct RLSocket *)obj;
    sock_lock(s);
    bool valid = rl__fdobj_valid(&s->life);
    RLOptionFlags disabled = s->disabled, flags = s->flags;
    sock_unlock(s);
    char *out = NULL;
    if (asprintf(&out, "<RLSocket %p fd %d types 0x%lx disabled 0x%lx flags 0x%lx%s>", obj, sock_fd(s),
                 (RLOptionFlags)s->types, disabled, flags, valid ? "" : " invalid") < 0)
        out = NULL;
    return out;
}

static const rl__class socket_class = {"RLSocket", sock_finalize, NULL, sock_describe};

RLTypeID RLSocketGetTypeID(void) { return rl__type_id(&socket_class); }

static bool sock_ok(RLSocketRef s, const char *fn) { return rl__object_check(s, &socket_class, fn); }

static inline RLOptionFlags read_type(const struct RLSocket *s) { return s->types & 3u; }

/* Which readiness the loop should watch now (lock held). A stream that is
 * neither connected nor listening is readable and writable at once for
 * epoll (it reports a hang-up), so it is not watched until it connects. */
static RLOptionFlags sock_wanted_locked(const struct RLSocket *s) {
    RLOptionFlags want = 0;
    if (!rl__fdobj_valid(&s->life))
        return 0;
    RLOptionFlags rt = read_type(s);
    bool ready_side = s->sock_type != SOCK_STREAM || s->connected || s->listening;
    if (rt && !(s->disabled & rt) && !s->at_eof && ready_side && !sock_retry_timer(s))
        want |= kRLFileDescriptorReadCallBack;
    if (s->connecting)
        want |= kRLFileDescriptorWriteCallBack;
    else if ((s->types & kRLSocketWriteCallBack) && !(s->disabled & kRLSocketWriteCallBack) && s->connected)
        want |= kRLFileDescriptorWriteCallBack;
    return want;
}

/* Tells the fd source what to watch (lock held). */
static void sock_rearm_locked(struct RLSocket *s) {
    RLOptionFlags want = sock_wanted_locked(s);
    /* Read wanted again after every callout that got it, while the flags
     * re-enable the read type: the loop may leave it on meanwhile. */
    RLOptionFlags rt = read_type(s);
    RLOptionFlags kept = rt && (s->flags & rt) == rt ? want & kRLFileDescriptorReadCallBack : 0;
    if (kept != s->kept) {
        s->kept = kept & 3u;
        rl__fd_set_kept(sock_fdobj(s), kept);
    }
    /* Only what is on now is turned off: after each callout the socket
     * says again what it does not want, which is mostly off already. */
    RLOptionFlags on = rl__fd_enabled(sock_fdobj(s));
    RLOptionFlags off = (kRLFileDescriptorReadCallBack | kRLFileDescriptorWriteCallBack) & ~want & on;
    if (off)
        (void)rl__fdsrc_set_enabled(sock_fdobj(s), off, false, "RLFileDescriptorDisableCallBacks");
    /* Only what is off is turned on: a kept type is on already. A stale
     * fd source has everything off, so it is asked, and says so. */
    if ((want & ~on) && !rl__fdsrc_set_enabled(sock_fdobj(s), want & ~on, true, "RLFileDescriptorEnableCallBacks")) {
        /* The fd was closed behind our back or cannot be watched: the fd
         * object has said why; nothing would ever be delivered again. */
        s->disabled |= s->types;
    }
}

static RLDataRef sockaddr_data(const struct sockaddr_storage *ss, socklen_t len) {
    if (len == 0)
        return NULL;
    return RLDataCreate(NULL, (const uint8_t *)ss, (RLIndex)len);
}

/* The socket callouts of the process, each named by a number that the
 * socket keeps in a byte instead of the function's 8 bytes: a program has
 * a few of them, not one a socket. Slot 0 is NULL (no callout); a slot is
 * written once (claimed by a compare-and-swap, no lock: fork-safe), and
 * only the slots up to the first empty one are in use. A socket made when
 * all are taken keeps its callout in its rare part, and its number is the
 * last slot's, which calls that (no test on the callouts' path). */
#define RL_SOCKET_CALLOUTS 255
#define RL_SOCKET_CALLOUT_RARE 255u
static void sock_call_rare(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    sock_rare_of(s)->callout(s, type, address, data, info);
}
static _Atomic(RLSocketCallBack) sock_callouts[RL_SOCKET_CALLOUTS + 1] = {[RL_SOCKET_CALLOUT_RARE] = sock_call_rare};

/* cb's number (0 for NULL), or RL_SOCKET_CALLOUT_RARE if the table is full. */
static uint8_t sock_callout_number(RLSocketCallBack cb) {
    if (!cb)
        return 0;
    for (unsigned i = 1; i < RL_SOCKET_CALLOUTS; i++) {
        RLSocketCallBack seen = atomic_load_explicit(&sock_callouts[i], memory_order_acquire);
        if (!seen && atomic_compare_exchange_strong_explicit(&sock_callouts[i], &seen, cb, memory_order_acq_rel,
                                                             memory_order_acquire))
            return (uint8_t)i;
        if (seen == cb)
            return (uint8_t)i;
    }
    return RL_SOCKET_CALLOUT_RARE;
}

/* s's callout (NULL: none). */
static RLSocketCallBack sock_callout(const struct RLSocket *s) {
    return s->callout == RL_SOCKET_CALLOUT_RARE ? sock_rare_of(s)->callout
                                                 : atomic_load_explicit(&sock_callouts[s->callout], memory_order_relaxed);
}

static void sock_call(struct RLSocket *s, RLSocketCallBackType type, RLDataRef address, const void *data) {
    RLSocketCallBack cb = atomic_load_explicit(&sock_callouts[s->callout], memory_order_relaxed);
    if (cb)
        cb(s, type, address, data, s->life.info);
}

/* After a delivery of `type`: muted until enabled again, unless the flags
 * re-enable it (lock held). */
static void sock_delivered_locked(struct RLSocket *s, RLOptionFlags type) {
    if ((s->flags & type) != type)
        s->disabled |= type;
}

static void free_owner(void *p) { free(p); }

/* The thread's read buffer (RL_SOCKET_READ_CHUNK bytes): a stream chunk
 * is read into it, so that a short read, the common case (a request, a
 * line, an echo), costs one RLData with the bytes inside it instead of a
 * 64 KiB allocation trimmed by realloc after the read and an RLData of
 * its own (in the 64-byte round trip of `make bench-echo-instr`, about
 * 700 of the 3,800 user-space instructions the server spent). A long
 * read takes the buffer itself, with no copy, and the thread's next read
 * makes a new one. Only the thread uses its buffer, and only between a
 * read and the copy or hand-over that follows it, so a callback that
 * reads another socket (a nested run) finds it free. The thread's exit
 * frees it (a key's destructor). */
/* The thread's spare RLData: bytes once read must always reach the
 * callback, so an empty data is there before every read, to take them if
 * no memory is left after it. A short read goes out in a data of its own
 * (one allocation, the bytes inside), and the spare stays for the next;
 * anything else takes the spare. Both are the thread's, made on first
 * use, in one block a key's destructor frees at thread exit.
 * A short read's data that no one kept once its callback returned (the
 * common case: the bytes were used in the call) is the thread's too: the
 * next short read that fits it, without leaving more than three quarters
 * of it empty, goes out in it again, its bytes replaced (nobody else can
 * see it: rl__object_sole). That spares an allocation and a release with
 * its finalizer on each read. */
typedef struct sock_thread {
    uint8_t *read_buf;
    RLDataRef spare;
    /* For the Data callbacks' addresses (sock_peer_address), room for a
     * sock_peer_sa: one RLData a thread (128 bytes in the pool), in place
     * of one a connection. Part of RL_TRICK_SOCK_RECYCLE, like the rest of
     * the block: the plain build makes one for each callback. */
    RLDataRef peer;
    /* Whose address `peer` holds, and sock_peer_epoch then (a socket
     * freed since may have left its address to another); NULL while
     * `peer` is lent to a callback (or there is none). */
    const struct RLSocket *peer_of;
    uint32_t peer_epoch;
    RLDataRef reusable;
    size_t reusable_cap; /* the bytes `reusable` can hold */
} sock_thread;

static __thread sock_thread *t_sock;
static pthread_key_t sock_thread_key;
static pthread_once_t sock_thread_once = PTHREAD_ONCE_INIT;
static bool sock_thread_keyed;

static void sock_thread_free(void *p) {
    sock_thread *t = p;
    free(t->read_buf);
    if (t->spare)
        RLRelease(t->spare);
    if (t->reusable)
        RLRelease(t->reusable);
    if (t->peer)
        RLRelease(t->peer);
    free(t);
}

static void sock_thread_make_key(void) {
    sock_thread_keyed = pthread_key_create(&sock_thread_key, sock_thread_free) == 0;
}

/* The thread's block; NULL: no memory, or no key to free it with (reads
 * then use buffers and data of their own, made for each), or the plain
 * build (RL_TRICK_SOCK_RECYCLE off: always so). */
static sock_thread *sock_thread_get(void) {
    if (!RL_TRICK_SOCK_RECYCLE)
        return NULL;
    if (RL__LIKELY(t_sock != NULL))
        return t_sock;
    (void)pthread_once(&sock_thread_once, sock_thread_make_key);
    sock_thread *t = sock_thread_keyed ? calloc(1, sizeof *t) : NULL;
    if (t && pthread_setspecific(sock_thread_key, t) != 0) {
        free(t);
        t = NULL;
    }
    t_sock = t;
    return t;
}

/* The thread's read buffer, made on first use; NULL: none (the caller
 * reads into a buffer of its own). */
static uint8_t *read_buf_get(void) {
    sock_thread *t = sock_thread_get();
    if (t && !t->read_buf)
        t->read_buf = malloc(RL_SOCKET_READ_CHUNK);
    return t ? t->read_buf : NULL;
}

/* The buffer is the caller's now (handed over with what was read into it). */
static void read_buf_give_away(void) { t_sock->read_buf = NULL; }

/* The empty data the coming read fills, made before it: the thread's spare
 * (*spare true: the thread's until sock_spare_used), or without the
 * thread's block a new one. NULL: no memory, so nothing may be read. */
static RLDataRef sock_data_for_read(bool *spare) {
    *spare = false;
    if (rl__fault(RL_FAULT_SOCKET_DATA))
        return NULL; /* as if no spare were left and no memory for one */
    sock_thread *t = sock_thread_get();
    if (t && !t->spare)
        t->spare = rl__data_slice(NULL, 0, NULL, NULL, NULL);
    if (!t)
        return rl__data_slice(NULL, 0, NULL, NULL, NULL);
    *spare = t->spare != NULL;
    return t->spare;
}

/* The spare is the callback's now, with what the read brought. */
static void sock_spare_used(void) { t_sock->spare = NULL; }

/* A data holding the n bytes just read into the thread's buffer (a short
 * read): the thread's reusable one if it fits, else a new one of n bytes;
 * *cap: the bytes it can hold. NULL: no memory. */
static RLDataRef sock_short_data(const uint8_t *buf, size_t n, size_t *cap) {
    if (rl__fault(RL_FAULT_SOCKET_COPY))
        return NULL;
    sock_thread *t = t_sock; /* there: the read used its buffer */
    RLDataRef d = t->reusable;
    if (d && n <= t->reusable_cap && n * 4 >= t->reusable_cap) {
        t->reusable = NULL;
        *cap = t->reusable_cap;
        rl__data_refill(d, buf, n);
        return d;
    }
    *cap = n;
    return RLDataCreate(NULL, buf, n);
}

/* The callback is done with a short read's data (of `cap` bytes): if no
 * one else kept it, it is the thread's reusable one (the last such wins),
 * else the reference the read made goes. */
static void sock_short_data_done(RLDataRef d, size_t cap) {
    sock_thread *t = t_sock;
    if (t && rl__object_sole(d)) {
        if (t->reusable)
            RLRelease(t->reusable);
        t->reusable = d;
        t->reusable_cap = cap;
        return;
    }
    RLRelease(d);
}

/* Keeps a connected stream's peer address (len bytes), once: in the
 * socket if it fits, else in an RLData (out of memory: not kept, looked up
 * again next time). Lock held, or s not seen by anyone yet. */
static void sock_keep_peer_locked(struct RLSocket *s, const struct sockaddr_storage *ss, socklen_t len) {
    if (len == 0 || (atomic_load_explicit(&s->peer_len, memory_order_relaxed) & RL_SOCKET_PEER_LEN) != 0)
        return;
    if (ss->ss_family == AF_INET6 && len == sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)ss;
        if (in6->sin6_flowinfo == 0 && in6->sin6_scope_id == 0) {
            s->peer_sa.in6 = (sock_in6){in6->sin6_family, in6->sin6_port, in6->sin6_addr};
            atomic_fetch_or_explicit(&s->peer_len, (uint8_t)len, memory_order_release);
            return;
        }
    } else if (ss->ss_family != AF_INET6 && len <= sizeof s->peer_sa) {
        memcpy(&s->peer_sa, ss, len);
        atomic_fetch_or_explicit(&s->peer_len, (uint8_t)len, memory_order_release);
        return;
    }
    sock_rare *r = sock_rare_get(s);
    if (r && (r->peer = sockaddr_data(ss, len)) != NULL)
        atomic_fetch_or_explicit(&s->peer_len, RL_SOCKET_PEER_IN_DATA, memory_order_release);
}

/* The peer address looked up (the socket's creation could not): its
 * peer_len after, 0 if unknown. Out of line: the callbacks' path needs no
 * room for an address on its stack. */
static __attribute__((noinline)) unsigned sock_peer_lookup(struct RLSocket *s) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(sock_fd(s), (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    if (sl > sizeof ss)
        sl = sizeof ss;
    sock_lock(s); /* another loop's thread may be first */
    sock_keep_peer_locked(s, &ss, sl);
    sock_unlock(s);
    return atomic_load_explicit(&s->peer_len, memory_order_acquire) & RL_SOCKET_PEER_LEN;
}

/* The address a connected stream's Data callback gets (NULL: unknown),
 * looked up on first use if the socket's creation could not. An address
 * kept in the socket (an IP one) goes out in the thread's RLData for it,
 * filled again only when another socket's callback comes, and then only
 * if nobody kept it (rl__object_sole; else a new one takes its place), so
 * that a connection holds no RLData of its own. It is lent to one
 * callback at a time (peer_of NULL meanwhile): a nested run's callbacks
 * get data of their own. Without the thread's block (no memory; PLAIN=1),
 * a new one for each callback. After the callback, the caller gives it
 * back (*lent: the thread; its peer_of becomes s again) or releases *made.
 * This is all but the common case (sock_peer_address). */
static __attribute__((noinline)) RLDataRef sock_peer_address_slow(struct RLSocket *s, sock_thread **lent,
                                                                  RLDataRef *made) {
    unsigned len = atomic_load_explicit(&s->peer_len, memory_order_acquire) & RL_SOCKET_PEER_LEN;
    if (len == 0 && (len = sock_peer_lookup(s)) == 0)
        return NULL;
    if (len == RL_SOCKET_PEER_IN_DATA)
        return sock_rare_of(s)->peer; /* borrowed: s (held by the callout) keeps it */
    /* As the callbacks get it: an IPv6 one with its (zero) flow
     * information; another as kept. */
    const uint8_t *bytes = (const uint8_t *)&s->peer_sa;
    sock_peer_full full;
    if (s->peer_sa.sa.sa_family == AF_INET6) {
        full.in6 = (struct sockaddr_in6){.sin6_family = AF_INET6, .sin6_port = s->peer_sa.in6.port,
                                         .sin6_addr = s->peer_sa.in6.addr};
        bytes = (const uint8_t *)&full;
    }
    sock_thread *t = sock_thread_get();
    if (!t || (t->peer && !t->peer_of)) /* none, or lent to a callback still running */
        return *made = RLDataCreate(NULL, bytes, len);
    RLDataRef d = t->peer;
    if (d && !rl__object_sole(d)) { /* a callback kept it: it stays as it is, theirs */
        RLRelease(d);
        d = t->peer = NULL;
    }
    if (!d) {
        static const sock_peer_full none;
        d = RLDataCreate(NULL, (const uint8_t *)&none, sizeof none); /* room for any address kept in a socket */
        if (!d)
            return NULL;
        t->peer = d;
    }
    rl__data_refill(d, bytes, len);
    t->peer_epoch = atomic_load_explicit(&sock_peer_epoch, memory_order_relaxed);
    t->peer_of = NULL; /* lent */
    *lent = t;
    return d;
}

/* The common case, inline: the thread's data holds this socket's address
 * already (the last callback was this socket's) and is not lent, so it
 * goes out as it is (kept by a callback or not: its bytes do not change). */
static inline __attribute__((always_inline)) RLDataRef sock_peer_address(struct RLSocket *s, sock_thread **lent,
                                                                         RLDataRef *made) {
    *lent = NULL;
    *made = NULL;
    sock_thread *t = t_sock; /* NULL until the thread's first read (always so in PLAIN=1) */
    if (RL__LIKELY(t && t->peer_of == s && t->peer_epoch == atomic_load_explicit(&sock_peer_epoch, memory_order_relaxed))) {
        t->peer_of = NULL; /* lent */
        *lent = t;
        return t->peer;
    }
    /* The next most common, the rule with many connections (the last
     * callback was another socket's): an address kept in the socket as
     * the callbacks get it (not an IPv6 one, which goes out with its flow
     * information), into the thread's data, not lent and kept by nobody,
     * as the slow path would, without its call (a 16-connection echo
     * round trip: 19 of its 50 instructions). */
    if (RL__LIKELY(t && t->peer && t->peer_of)) {
        unsigned len = atomic_load_explicit(&s->peer_len, memory_order_acquire) & RL_SOCKET_PEER_LEN;
        if (len != 0 && len != RL_SOCKET_PEER_IN_DATA && s->peer_sa.sa.sa_family != AF_INET6 && rl__object_sole(t->peer)) {
            rl__data_refill(t->peer, (const uint8_t *)&s->peer_sa, len);
            t->peer_epoch = atomic_load_explicit(&sock_peer_epoch, memory_order_relaxed);
            t->peer_of = NULL; /* lent */
            *lent = t;
            return t->peer;
        }
    }
    return sock_peer_address_slow(s, lent, made);
}

/* A stream's Data callback, with its peer's address. */
static inline __attribute__((always_inline)) void sock_call_data(struct RLSocket *s, RLDataRef data) {
    sock_thread *lent;
    RLDataRef made;
    RLDataRef peer = sock_peer_address(s, &lent, &made);
    sock_call(s, kRLSocketDataCallBack, peer, data);
    if (lent)
        lent->peer_of = s; /* back: it holds s's address */
    if (made)
        RLRelease(made);
}

/* The callback is done with the data a long read (or the end) went out in,
 * the thread's spare before: if no one else kept it, the thread takes back
 * the read buffer it carries (`lent`) and keeps it as its spare again,
 * empty; else the reference the read made goes.
 *
 * Whether the socket's callback keeps long reads is noted for the next
 * one (keeps_long): a callback that does not (the bytes used in the
 * call: an echo, a parser) gets the whole buffer, with no copy and no
 * allocation, and gives it back; one that does gets it trimmed to the
 * bytes (realloc, in place), so that what it keeps holds little more than
 * its bytes. A socket starts as keeping, so a callback that keeps every
 * read never holds a whole buffer; one that changes its mind holds at most
 * one whole buffer (64 KiB, for more than 4 KiB) per change. */
static void sock_long_data_done(struct RLSocket *s, RLDataRef d, bool lent) {
    sock_thread *t = t_sock;
    bool sole = rl__object_sole(d);
    bool empty = RLDataGetLength(d) == 0; /* the end of the stream */
    if (!empty && sole == __atomic_load_n(&s->keeps_long, __ATOMIC_RELAXED))
        __atomic_store_n(&s->keeps_long, !sole, __ATOMIC_RELAXED);
    if (t && sole) {
        if (lent) {
            void *buf = rl__data_take_back(d);
            if (!t->read_buf) /* a nested read may have made another meanwhile */
                t->read_buf = buf;
            else
                free(buf);
        }
        if (!t->spare && (empty || lent)) { /* taken back: empty now */
            t->spare = d;
            return;
        }
    }
    RLRelease(d);
}

/* Reads up to `chunk` bytes of a stream: a short read into a data of its
 * own (*small, which can hold *small_cap bytes), anything else into a
 * malloc'd buffer (*out; *lent: it is the thread's read buffer, whole,
 * which the thread takes back if nobody keeps the data); the result is the
 * length. 0: the end of the stream; -1: an error or nothing there (errno;
 * ENOMEM: no buffer, nothing read), no buffer. */
static ssize_t stream_read_chunk(int fd, size_t chunk, bool whole, uint8_t **out, bool *lent, RLDataRef *small,
                                 size_t *small_cap) {
    uint8_t *buf = chunk <= RL_SOCKET_READ_CHUNK ? read_buf_get() : NULL;
    bool shared = buf != NULL;
    if (!buf)
        buf = malloc(chunk);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t n;
    do
        n = recv(fd, buf, chunk, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        if (!shared) {
            int err = errno;
            free(buf);
            errno = err;
        }
        return n;
    }
    if (shared) {
        /* Out of memory for the copy, the bytes, already read, go out in
         * the buffer itself. */
        *small = (size_t)n <= RL_SOCKET_COPY_MAX ? sock_short_data(buf, (size_t)n, small_cap) : NULL;
        if (*small)
            return n;
        read_buf_give_away();
        *lent = true;
        /* A long read, for a callback that does not keep them: the whole
         * buffer (a short one is here only for want of memory for its
         * copy, and is trimmed below like any the callback may keep). */
        if (whole && (size_t)n > RL_SOCKET_COPY_MAX) {
            *out = buf;
            return n;
        }
    }
    /* The callback may keep the data: a read that leaves much of the buffer
     * empty gives the rest back (in place, no copy). */
    if ((size_t)n < chunk / 2 || chunk - (size_t)n > RL_SOCKET_READ_CHUNK) {
        uint8_t *shrunk = realloc(buf, (size_t)n);
        if (shrunk)
            buf = shrunk;
        *lent = false; /* not the buffer's size any more */
    }
    *out = buf;
    return n;
}

/* ---- reading through the loop's ring (io_uring; rl_rxq.h) ---- */

/* For the tests: the chunks Data callbacks got from a ring, and those of
 * them whose bytes were copied into a data of their own. */
RL__HIDDEN _Atomic unsigned long rl__socket_ring_reads;
_Atomic unsigned long rl__socket_ring_reads;
RL__HIDDEN _Atomic unsigned long rl__socket_ring_copies;
_Atomic unsigned long rl__socket_ring_copies;

/* From the first Data callout of a stream: its loop's backend is asked to
 * read it through its ring from then on (the next arming), first chunks of
 * `chunk` bytes as sock_deliver_data's; the epoll backend declines, and
 * nothing changes. Once per socket (later callouts keep the chunk size
 * up to date), but for a loop on the default backend, which declines now
 * and moves to io_uring before its next wait: the next callout asks
 * again. */
static void sock_ring_ask(struct RLSocket *s, size_t chunk) {
    if (atomic_load_explicit(&s->peer_len, memory_order_relaxed) & RL_SOCKET_NO_RING)
        return;
    rl__rxq *has = sock_rxq_of(s);
    if (has) {
        rl__rxq_set_want(has, chunk); /* the ring reads first chunks as the fd would be read */
        return;
    }
    if (s->sock_type != SOCK_STREAM)
        return;
    /* Asked once, by the first Data callout (the callouts' thread only,
     * one at a time): the ring's read-ahead queues (one per ring, shared
     * by its streams: a stream's own queue is an entry there, holding
     * chunks only while bytes wait, rl_rxq.h) kept in s->rare alone
     * (RL_SOCKET_RARE_RXQ) when s has no rare part: no allocation for s.
     * The ring reads into them from its next arming, after this callout. */
    bool later;
    rl__rxq *q = rl__fd_recv_into(sock_fdobj(s), chunk, &later);
    if (q) {
        sock_lock(s);
        sock_rare *r = sock_rare_of(s);
        if (r)
            __atomic_store_n(&r->rxq, q, __ATOMIC_RELEASE);
        else
            __atomic_store_n(&s->rare, (uintptr_t)q | RL_SOCKET_RARE_RXQ, __ATOMIC_RELEASE);
        sock_unlock(s);
    } else if (!later) { /* a loop that moves to a ring is asked again by the next callout */
        atomic_fetch_or_explicit(&s->peer_len, RL_SOCKET_NO_RING, memory_order_relaxed);
    }
}

/* A ring's chunk that filled its buffer, smaller than the reader's chunk:
 * what follows in the fd read into it, up to `chunk` bytes, so that a
 * delivery holds what one read of the fd would (c->full: it is `chunk`
 * bytes long, more may follow). Safe with the queue empty: the backend
 * queues what a receive read as soon as the enter that brought it returns,
 * so a receive still in flight can only read what comes after. The end or
 * an error found here is left to the next read. */
static rl__rxchunk *sock_chunk_fill(struct RLSocket *s, rl__rxchunk *c, size_t chunk) {
    rl__rxchunk *big = realloc(c, sizeof *c + chunk);
    if (!big)
        return c; /* delivered as it is; the next read follows */
    big->cap = chunk;
    ssize_t n;
    do
        n = recv(sock_fd(s), big->bytes + big->len, chunk - big->len, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n > 0)
        big->len += (size_t)n;
    big->full = n != 0 && (n < 0 ? errno != EAGAIN && errno != EWOULDBLOCK : big->len == chunk);
    if (n == 0)
        big->full = true; /* the end: the next read says so */
    if (big->len < chunk / 2) { /* a callback may keep it: little more than its bytes */
        rl__rxchunk *trim = realloc(big, sizeof *big + big->len);
        if (trim) {
            big = trim;
            big->cap = big->len;
        }
    }
    return big;
}

/* The callback is done with the thread's spare data, which carried a
 * ring's chunk (c's bytes): if no one else kept it, the chunk goes back
 * to the thread's for the next receives and the data is the spare again,
 * empty; else the reference the delivery made goes (and the chunk with
 * the data, when whoever kept it lets go). */
static void sock_chunk_data_done(rl__rxq *q, RLDataRef d) {
    sock_thread *t = t_sock;
    if (t && !t->spare && rl__object_sole(d)) {
        rl__rxq_give_back(q, rl__data_take_back(d));
        t->spare = d;
        return;
    }
    RLRelease(d);
}

/* Delivers a chunk the ring read (c, the caller's; `more`: more of s's
 * were queued after it): its bytes, or the end of the stream or its error
 * as an empty data (false: the stream ended). `data`: the empty data made
 * for the read (`spare`: the thread's). */
static bool sock_deliver_chunk(struct RLSocket *s, rl__rxq *q, rl__rxchunk *c, bool more, size_t chunk,
                               RLDataRef data, bool spare, bool first, bool *full) {
    rl__test_count(&rl__socket_ring_reads);
    if (c->full && c->len < chunk && !more)
        c = sock_chunk_fill(s, c, chunk);
    *full = (c->full && c->len >= chunk) || more;
    if (first && c->len >= RL_SOCKET_SELF_READ)
        rl__fd_recv_self(sock_fdobj(s), true);
    if (c->len >= RL_BULK_READ)
        rl__wait_note_bulk_read(s, c->len);
    /* A short chunk little bigger than its bytes goes out in the thread's
     * spare data as it is, no copy (the ring copied it out of its buffer
     * already), and comes back to the thread after the callback: a 64-byte
     * echo's chunk of 256 bytes, for one. A callback that keeps the data
     * keeps at most four times its bytes, as with the copy below. */
    if (spare && c->len > 0 && c->len <= RL_SOCKET_COPY_MAX && c->len * 4 >= c->cap) {
        sock_spare_used();
        rl__data_adopt(data, c->bytes, c->len, c, free_owner);
        sock_call_data(s, data);
        sock_chunk_data_done(q, data);
        return true;
    }
    size_t cap = 0;
    RLDataRef small = c->len > 0 && c->len <= RL_SOCKET_COPY_MAX && sock_thread_get() ? sock_short_data(c->bytes, c->len, &cap)
                                                                                        : NULL;
    if (small) {
        rl__test_count(&rl__socket_ring_copies);
        rl__rxq_give_back(q, c); /* the thread's, for the next receive */
        if (!spare)
            RLRelease(data);
        sock_call_data(s, small);
        sock_short_data_done(small, cap);
        return true;
    }
    if (spare)
        sock_spare_used();
    bool ended = c->len == 0;
    if (ended)
        free(c);
    else
        rl__data_adopt(data, c->bytes, c->len, c, free_owner);
    sock_call_data(s, data);
    sock_long_data_done(s, data, false);
    return !ended;
}

/* Reads what is there (one datagram, or a chunk of a stream) and delivers
 * it; *full: a stream's chunk filled the buffer, so more may be queued.
 * Returns false when the stream ended or failed. Everything the delivery
 * needs is allocated before the read, which cannot be undone: out of
 * memory, nothing is read (the next wake tries again), and bytes once read
 * always reach the callback. */
static bool sock_deliver_data(struct RLSocket *s, size_t chunk, bool first, bool *full) {
    *full = false;
    bool spare;
    RLDataRef data = sock_data_for_read(&spare);
    if (!data)
        return true;
    if (s->sock_type == SOCK_STREAM) {
        /* What the ring read comes first, then the fd (a receive still in
         * flight reads only what comes after: see sock_chunk_fill). */
        rl__rxq *q = (atomic_load_explicit(&s->peer_len, memory_order_relaxed) & RL_SOCKET_NO_RING) ? NULL
                                                                                                     : sock_rxq_of(s);
        bool more;
        rl__rxchunk *c = q ? rl__rxq_pop_upto(q, sock_fd(s), chunk, &more) : NULL;
        if (c)
            return sock_deliver_chunk(s, q, c, more, chunk, data, spare, first, full);
        uint8_t *buf = NULL;
        RLDataRef small = NULL;
        size_t small_cap = 0;
        bool lent = false;
        bool whole = !__atomic_load_n(&s->keeps_long, __ATOMIC_RELAXED);
        ssize_t n = stream_read_chunk(sock_fd(s), chunk, whole, &buf, &lent, &small, &small_cap);
        if (n >= RL_BULK_READ)
            rl__wait_note_bulk_read(s, (size_t)n);
        else if (first && q && n > 0)
            rl__fd_recv_self(sock_fdobj(s), false);
        if (small || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOMEM))) {
            if (!spare)
                RLRelease(data);
            if (!small)
                return true; /* nothing after all, or no memory for the buffer: nothing was read */
            *full = (size_t)n == chunk;
            sock_call_data(s, small);
            sock_short_data_done(small, small_cap);
            return true;
        }
        if (spare)
            sock_spare_used();
        *full = n > 0 && (size_t)n == chunk;
        bool ended = n <= 0; /* the end, or an error: the empty data says so */
        if (!ended)
            rl__data_adopt(data, buf, (size_t)n, buf, free_owner);
        sock_call_data(s, data);
        sock_long_data_done(s, data, lent);
        return !ended;
    }
    if (spare)
        sock_spare_used(); /* a datagram's data: made for it, whatever comes */
    int avail = 0;
    if (ioctl(sock_fd(s), FIONREAD, &avail) < 0)
        avail = 0;
    size_t cap = avail > 0 ? (size_t)avail : 4096;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        RLRelease(data);
        return true; /* try again on the next wake; nothing was read */
    }
    struct sockaddr_storage from;
    socklen_t fromlen = sizeof from;
    ssize_t n;
    do
        n = recvfrom(sock_fd(s), buf, cap, MSG_DONTWAIT, (struct sockaddr *)&from, &fromlen);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        free(buf); /* nothing there after all */
        RLRelease(data);
        return true;
    }
    /* A datagram socket's error (say ECONNREFUSED from an ICMP), cleared
     * by the failed read, goes out as an empty data, as CFSocket does;
     * the socket goes on. */
    if (n > 0)
        rl__data_adopt(data, buf, (size_t)n, buf, free_owner);
    else
        free(buf); /* an empty datagram, or the error */
    /* Out of memory for the address: the datagram comes without it rather
     * than not at all. */
    RLDataRef addr = NULL;
    if (n < 0 || fromlen == 0 || fromlen > sizeof from) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        if (getpeername(sock_fd(s), (struct sockaddr *)&peer, &plen) == 0)
            addr = sockaddr_data(&peer, plen);
    } else {
        addr = sockaddr_data(&from, fromlen);
    }
    sock_call(s, kRLSocketDataCallBack, addr, data);
    RLRelease(data);
    if (addr)
        RLRelease(addr);
    return true;
}

static const void *sock_retain_cb(const void *info) { return RLRetain(info); }
static void sock_release_cb(const void *info) { RLRelease(info); }

/* The listener's rest is over: watch it again. */
static void sock_accept_retry_fire(RLRunLoopTimerRef t, void *info) {
    struct RLSocket *s = info;
    sock_lock(s);
    bool mine = sock_retry_timer(s) == t;
    if (mine)
        sock_rare_of(s)->accept_retry = NULL;
    if (rl__fdobj_valid(&s->life))
        sock_rearm_locked(s);
    sock_unlock(s);
    if (mine)
        RLRelease(t); /* a one-shot timer: the loop has let it go already */
}

/* Makes the listener rest (see RL_SOCKET_ACCEPT_RETRY): a one-shot timer
 * in the loop and mode of this callout wakes it. Without a timer (no
 * memory, not inside a run) it does not rest: the next wake tries again,
 * as it would have, rather than never. */
static void sock_rest_listener(struct RLSocket *s) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLStringRef mode = rl ? RLRunLoopCopyCurrentMode(rl) : NULL;
    if (!mode)
        return;
    RLRunLoopTimerContext ctx = {0, s, sock_retain_cb, sock_release_cb, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + RL_SOCKET_ACCEPT_RETRY, 0, 0, 0,
                                               sock_accept_retry_fire, &ctx);
    if (t) {
        sock_lock(s);
        sock_rare *r = rl__fdobj_valid(&s->life) && !sock_retry_timer(s) ? sock_rare_get(s) : NULL;
        bool take = r != NULL;
        if (take)
            r->accept_retry = t;
        sock_unlock(s);
        if (!take || !RLRunLoopAddTimer(rl, t, mode)) {
            sock_lock(s);
            if (sock_retry_timer(s) == t)
                sock_rare_of(s)->accept_retry = NULL;
            sock_unlock(s);
            RLRunLoopTimerInvalidate(t);
            RLRelease(t);
        }
    }
    RLRelease(mode);
}

/* Between the Data chunks of one wake: whether another goes to the
 * callback now — the socket valid, the callback still enabled (by the
 * flags, or again by the callback), and its loop still serving it
 * (rl__fd_served_now: not removed from the mode, the run not stopped). If
 * so it counts as delivered, as the first did. */
static bool sock_next_chunk(struct RLSocket *s) {
    if (!rl__fd_served_now(sock_fdobj(s)))
        return false;
    sock_lock(s);
    bool more = rl__fdobj_valid(&s->life) && !(s->disabled & kRLSocketDataCallBack);
    if (more)
        sock_delivered_locked(s, kRLSocketDataCallBack);
    sock_unlock(s);
    return more;
}

/* Accepts pending connections, one callback each, while the callback stays
 * enabled and the socket served. */
static void sock_deliver_accepts(struct RLSocket *s) {
    for (int i = 0; i < RL_SOCKET_ACCEPT_BATCH; i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int nfd = accept4(sock_fd(s), (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        if (nfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                sock_rest_listener(s);
            return; /* EAGAIN: none left; other errors (the connection is gone): the next wake */
        }
        RLDataRef addr = sockaddr_data(&peer, plen);
        sock_call(s, kRLSocketAcceptCallBack, addr, &nfd);
        if (addr)
            RLRelease(addr);
        /* This one counts as delivered; another follows while the
         * callback stays enabled and the loop would still serve it. */
        sock_lock(s);
        bool more = rl__fdobj_valid(&s->life) && !(s->disabled & kRLSocketAcceptCallBack);
        if (more)
            sock_delivered_locked(s, kRLSocketAcceptCallBack);
        more = more && !(s->disabled & kRLSocketAcceptCallBack);
        sock_unlock(s);
        if (!more || !rl__fd_served_now(sock_fdobj(s)))
            return;
    }
}

/* True if the stream's peer has closed (a read would return 0). Asked
 * without reading: a read, even a peek, takes the socket's pending error
 * (a reset), which is the Read callback's own read's to see. An error
 * pending is not the end (the read after it is). */
RL__HIDDEN _Atomic unsigned long rl__socket_eof_asks; /* for the tests: stream_at_eof calls */
_Atomic unsigned long rl__socket_eof_asks;

static bool stream_at_eof(int fd) {
    rl__test_count(&rl__socket_eof_asks);
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    int r;
    do
        r = poll(&p, 1, 0);
    while (r < 0 && errno == EINTR);
    if (r <= 0 || (p.revents & (POLLERR | POLLNVAL)) || !(p.revents & POLLRDHUP))
        return false;
    int queued = 0;
    if (ioctl(fd, FIONREAD, &queued) < 0)
        return false;
    return queued == 0;
}

/* What waits before a Read callback (RL_TRICK_COALESCE). A Read callback
 * reads for itself, so the loop never sees how much its socket brings, and
 * its wait policy, which naps before a wait while the bytes read per socket
 * after a nap outgrow those after a plain wait (rl__coalesce_due), could not
 * count these sockets: a server of 16 streams in that style used 1.7 times
 * the CPU per MB of the Data-callback one. So a Read callout asks the
 * kernel how many bytes wait (FIONREAD: what the callback's read can take
 * now) and tells the policy of a bulk read's worth, as a Data callout tells
 * it what it read. The look is a system call: it is made at every callout
 * of a socket whose last look found a bulk read's worth, and else at one
 * Read callout of the thread's in RL_READ_PROBE_EVERY, so that a request and
 * response exchange (short messages, never bulk) pays one in that many.
 * A socket in bulk whose callout is its pass's only one (no other socket
 * read in bulk yet, no fd callout after it: rl__wait_bulk_may_nap) cannot
 * make the loop nap, as one stream alone never does, and is looked at as
 * one not in bulk: a single Read-callback connection in bulk (bench_echo's
 * tp1) paid a look at every callout (1,609 looks in a run under strace,
 * 172 now). That row's rate against the Data-callback server hardly moved
 * (0.80-0.82x before, 0.81-0.85x after, alternated): its regimes set it
 * (bench_echo.c's header).
 * Stream sockets only (a datagram's reads are one message each). */
enum { RL_READ_PROBE_EVERY = 16 };

/* The thread's Read callouts to go until the next look at a socket not in
 * bulk (counted down from RL_READ_PROBE_EVERY - 1). */
static __thread uint8_t t_read_probe_turn;

RL__HIDDEN _Atomic unsigned long rl__socket_read_probes; /* for the tests: sock_read_probe calls */
_Atomic unsigned long rl__socket_read_probes;

/* Whether this Read callout looks at what waits (above); s locked. */
static inline bool sock_read_probe_due(const struct RLSocket *s) {
    if (!RL_TRICK_COALESCE || s->sock_type != SOCK_STREAM || s->listening)
        return false;
    if (s->read_bulk && rl__wait_bulk_may_nap())
        return true;
    if (t_read_probe_turn) {
        t_read_probe_turn--;
        return false;
    }
    t_read_probe_turn = RL_READ_PROBE_EVERY - 1;
    return true;
}

/* Tells the calling loop's wait policy what waits on s's fd before its
 * Read callback; true: a bulk read's worth (or more). */
static bool sock_read_probe(const struct RLSocket *s) {
    rl__test_count(&rl__socket_read_probes);
    int queued = 0;
    if (ioctl(sock_fd(s), FIONREAD, &queued) < 0 || queued < RL_BULK_READ)
        return false;
    rl__wait_note_bulk_read(s, (size_t)queued);
    return true;
}

static void sock_fd_callout_body(struct RLSocket *s, RLOptionFlags ready);

static void sock_fd_callout(RLFileDescriptorRef f, RLOptionFlags ready, void *info) {
    (void)f;
    struct RLSocket *s = info;
    /* A callback may invalidate the socket and release the caller's last
     * reference (the one its validity held goes with the invalidation):
     * this one keeps it alive until the callout is done with it. Taken
     * while valid, under the lock that an invalidation takes first (and
     * the source, which the loop holds through the callout, holds one on
     * s besides). */
    sock_lock(s);
    if (!rl__fdobj_enter(&s->life)) {
        sock_unlock(s);
        return;
    }
    rl__retain_raw(s);
    sock_fd_callout_body(s, ready); /* the lock held before and after */
    if (rl__fdobj_valid(&s->life))
        sock_rearm_locked(s);
    rl__fdobj_end end;
    rl__fdobj_leave(&s->life, &end, sock_releaser); /* the last one closes and releases what an invalidation left */
    sock_unlock(s);
    rl__fdobj_finish(&end);
    rl__release_raw(s);
}

/* The slow-callout report names a socket's callouts as the socket's. */
static const void *sock_callout_of(const void *owner) {
    return (const void *)sock_callout(owner);
}
static const rl__callout_owner sock_how = {kRLCalloutSocket, sock_callout_of, sock_fd_callout};

/* The callbacks of one fd callout; s locked on entry and on return (the
 * lock is let go around every system call and callback). */
static void sock_fd_callout_body(struct RLSocket *s, RLOptionFlags ready) {
    /* Connect first: its result decides whether the rest can happen. */
    if ((ready & kRLFileDescriptorWriteCallBack) && rl__fdobj_valid(&s->life) && s->connecting) {
        sock_unlock(s);
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(sock_fd(s), SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        sock_lock(s);
        s->connecting = false;
        s->connected = err == 0;
        bool report = rl__fdobj_valid(&s->life) && (s->types & kRLSocketConnectCallBack) && !s->connect_reported;
        s->connect_reported = true;
        sock_unlock(s);
        if (report) {
            int32_t e = err;
            sock_call(s, kRLSocketConnectCallBack, NULL, err ? &e : NULL);
        }
        /* The writability was the connect's; a Write callback waits for
         * the next wake, as it would have without the connect. */
        ready &= ~(RLOptionFlags)kRLFileDescriptorWriteCallBack;
        sock_lock(s);
    }

    if (ready & kRLFileDescriptorReadCallBack) {
        RLOptionFlags rt = read_type(s);
        bool go = rl__fdobj_valid(&s->life) && rt && !(s->disabled & rt) && !s->at_eof;
        bool accept = go && rt == kRLSocketAcceptCallBack;
        if (go && !accept)
            sock_delivered_locked(s, rt);
        bool listening = s->listening;
        bool probe = go && rt == kRLSocketReadCallBack && sock_read_probe_due(s), bulk = false;
        sock_unlock(s);
        if (accept) {
            sock_deliver_accepts(s);
        } else if (go && rt == kRLSocketDataCallBack) {
            /* Chunk after chunk while each fills the buffer: what is
             * queued is read in this wake, each piece handed over as soon
             * as it is read (an echo goes out while the next is read). */
            size_t base = atomic_load_explicit(&rl__socket_read_chunk, memory_order_relaxed);
            sock_ring_ask(s, base);
            size_t chunk = base, budget = base * RL_SOCKET_READ_BATCH;
            for (bool first = true;; first = false) {
                bool full;
                if (!sock_deliver_data(s, chunk, first, &full)) {
                    /* The end (or a read error) went out as an empty
                     * data: as CFSocket does, the stream is invalidated
                     * once its callback returned (the fd's close and the
                     * context's release wait for this callout's end). */
                    sock_lock(s);
                    s->at_eof = true;
                    sock_unlock(s);
                    (void)RLSocketInvalidate(s);
                    break;
                }
                budget -= chunk;
                if (!full || budget == 0 || !sock_next_chunk(s))
                    break;
                chunk = rl__fd_pass_left() == 0 ? base * RL_SOCKET_READ_GROW : base;
                if (chunk > budget)
                    chunk = budget;
            }
        } else if (go) {
            /* As CFSocket, nothing is read before a Read callback: a
             * pending error (a reset) is left for the callback's read,
             * kRLSocketLeaveErrors or not. */
            /* Whether the stream ended is asked of the kernel only when
             * the loop's report says the peer may have hung up: a Read
             * callout then costs what a Data one does, its callback's
             * read the only system call. */
            bool last = s->sock_type == SOCK_STREAM && !listening && !rl__fd_report_quiet(sock_fdobj(s)) &&
                        stream_at_eof(sock_fd(s));
            if (last) {
                sock_lock(s);
                s->at_eof = true;
                sock_unlock(s);
            }
            if (probe && !last)
                bulk = sock_read_probe(s);
            sock_call(s, kRLSocketReadCallBack, NULL, NULL);
        }
        sock_lock(s);
        if (probe)
            s->read_bulk = bulk;
    }

    if (ready & kRLFileDescriptorWriteCallBack) {
        bool go = rl__fdobj_valid(&s->life) && (s->types & kRLSocketWriteCallBack) &&
                  !(s->disabled & kRLSocketWriteCallBack) && s->connected;
        if (go) {
            sock_delivered_locked(s, kRLSocketWriteCallBack);
            sock_unlock(s);
            sock_call(s, kRLSocketWriteCallBack, NULL, NULL);
            sock_lock(s);
        }
    }
}

static RLSocketRef sock_make(RLAllocatorRef allocator, int fd, RLOptionFlags types,
                             RLSocketCallBack callout, const RLSocketContext *context, const char *fn) {
    (void)allocator;
    int stype = 0, acc = 0;
    socklen_t len = sizeof stype;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &stype, &len) < 0) {
        rl__fail_errno(errno, fn, "fd %d is not an open socket", fd);
        return NULL;
    }
    len = sizeof acc;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0)
        acc = 0;
    struct RLSocket *s = rl__object_alloc_packed(&socket_class, RL_SOCKET_SIZE + RL_FD_SOURCE_SIZE, fn);
    if (!s)
        return NULL;
    s->sock_type = (uint8_t)stype;
    s->types = (uint8_t)types;
    s->callout = sock_callout_number(callout);
    if (s->callout == RL_SOCKET_CALLOUT_RARE ||
        (context && (context->retain || context->release || context->copyDescription))) {
        sock_rare *r = sock_rare_get(s);
        if (!r) {
            rl__fail(kRLErrorNoMemory, fn, "out of memory");
            RLRelease(s);
            return NULL;
        }
        r->callout = callout;
        if (context)
            r->retain = context->retain, r->release = context->release, r->copyDescription = context->copyDescription;
    }
    /* CF's default: the socket's own read-side type re-enabled, close on
     * invalidate. */
    s->flags = (types & 3u) | kRLSocketCloseOnInvalidate;
    s->listening = acc != 0;
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    s->connected = stype != SOCK_STREAM || getpeername(fd, (struct sockaddr *)&peer, &plen) == 0;
    if (stype == SOCK_STREAM && s->connected)
        sock_keep_peer_locked(s, &peer, plen); /* for the Data callbacks (not kept: looked up then) */
    rl__fdobj_init(&s->life, fd);
    s->keeps_long = true; /* until a callback shows otherwise (sock_long_data_done) */
    if (s->listening && (types & 3u) == kRLSocketAcceptCallBack) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
            rl__fail_errno(errno, fn, "cannot make listening fd %d non-blocking", fd);
            RLRelease(s);
            return NULL;
        }
    }
    if (!rl__fdsrc_init(sock_fdobj(s), fd, s, &sock_how, fn)) {
        RLRelease(s);
        return NULL;
    }
    RLRetain(s); /* held while valid (RLSocketInvalidate releases it), as CF keeps every valid socket */
    if (context) {
        void *info = context->info;
        const sock_rare *r = sock_rare_of(s);
        if (r && r->retain)
            info = (void *)r->retain(info);
        rl__fdobj_set_context(&s->life, info, context->release);
    }
    sock_lock(s);
    sock_rearm_locked(s);
    sock_unlock(s);
    return s;
}

static bool check_create_args(RLOptionFlags types, const RLSocketContext *context, const char *fn) {
    if (types & ~(RLOptionFlags)RL_SOCKET_TYPES)
        return rl__fail(kRLErrorInvalidArgument, fn, "unknown callback types 0x%lx", types & ~(RLOptionFlags)RL_SOCKET_TYPES);
    if (context && context->version != 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)",
                        (long)context->version);
    return true;
}

RLSocketRef RLSocketCreate(RLAllocatorRef allocator, int32_t family, int32_t type, int32_t protocol,
                           RLOptionFlags types, RLSocketCallBack callout, const RLSocketContext *context) {
    const char *fn = __func__;
    if (!check_create_args(types, context, fn))
        return NULL;
    if (family <= 0)
        family = PF_INET;
    if (type <= 0)
        type = SOCK_STREAM;
    if (protocol <= 0 && (family == PF_INET || family == PF_INET6))
        protocol = type == SOCK_STREAM ? IPPROTO_TCP : (type == SOCK_DGRAM ? IPPROTO_UDP : 0);
    if (protocol < 0)
        protocol = 0;
    int fd = socket(family, type | SOCK_CLOEXEC, protocol);
    if (fd < 0) {
        rl__fail_errno(errno, fn, "socket(%d, %d, %d) failed", family, type, protocol);
        return NULL;
    }
    RLSocketRef s = sock_make(allocator, fd, types, callout, context, fn);
    if (!s)
        close(fd);
    return s;
}

RLSocketRef RLSocketCreateWithNative(RLAllocatorRef allocator, RLSocketNativeHandle sock, RLOptionFlags types,
                                     RLSocketCallBack callout, const RLSocketContext *context) {
    const char *fn = __func__;
    if (!check_create_args(types, context, fn))
        return NULL;
    if (sock < 0) {
        rl__fail(kRLErrorInvalidArgument, fn, "%d is not an open socket", sock);
        return NULL;
    }
    return sock_make(allocator, sock, types, callout, context, fn);
}

/* A usable socket address in an RLData, or false (error set). */
bool rl__socket_address_ok(RLDataRef address, const char *fn) {
    if (!address)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL address");
    if (!rl__is_data(address))
        return rl__fail(kRLErrorInvalidObject, fn, "the address is not a live RLData");
    RLIndex len = RLDataGetLength(address);
    if (len < (RLIndex)sizeof(sa_family_t) || len > (RLIndex)sizeof(struct sockaddr_storage))
        return rl__fail(kRLErrorInvalidArgument, fn, "an address of %ld bytes is not a socket address", (long)len);
    return true;
}

/* The fd of a valid socket, or -1 (error set). Validity is read without
 * the socket's lock (rl__fdobj_valid: atomic, as rl_fdobj.h allows): the
 * lock would be dropped before the fd is used anyway. */
static int sock_valid_fd(RLSocketRef s, const char *fn) {
    if (!sock_ok(s, fn))
        return -1;
    if (!rl__fdobj_valid(&s->life)) {
        rl__fail(kRLErrorInvalidObject, fn, "the socket has been invalidated");
        return -1;
    }
    return sock_fd(s);
}

/* A signature that names a usable address, or false (error set). */
static bool signature_ok(const RLSocketSignature *signature, const char *fn) {
    if (!signature)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL signature");
    return rl__socket_address_ok(signature->address, fn);
}

/* A failed signature function's socket goes (invalidated: its fd closed,
 * its context released). Neither call sets an error on a valid socket, so
 * the error of the step that failed (bind, listen, connect) stays. */
static void sock_discard(RLSocketRef s) {
    (void)RLSocketInvalidate(s);
    RLRelease(s);
}

RLSocketRef RLSocketCreateWithSocketSignature(RLAllocatorRef allocator, const RLSocketSignature *signature,
                                              RLOptionFlags types, RLSocketCallBack callout,
                                              const RLSocketContext *context) {
    const char *fn = __func__;
    if (!signature_ok(signature, fn) || !check_create_args(types, context, fn))
        return NULL;
    RLSocketRef s = RLSocketCreate(allocator, signature->protocolFamily, signature->socketType,
                                   signature->protocol, types, callout, context);
    if (s && RLSocketSetAddress(s, signature->address) != kRLSocketSuccess) {
        sock_discard(s);
        return NULL;
    }
    return s;
}

RLSocketRef RLSocketCreateConnectedToSocketSignature(RLAllocatorRef allocator, const RLSocketSignature *signature,
                                                     RLOptionFlags types, RLSocketCallBack callout,
                                                     const RLSocketContext *context, RLTimeInterval timeout) {
    const char *fn = __func__;
    if (!signature_ok(signature, fn) || !check_create_args(types, context, fn))
        return NULL;
    if (isnan(timeout))
        return rl__fail(kRLErrorInvalidArgument, fn, "NaN timeout"), NULL;
    RLSocketRef s = RLSocketCreate(allocator, signature->protocolFamily, signature->socketType,
                                   signature->protocol, types, callout, context);
    if (s && RLSocketConnectToAddress(s, signature->address, timeout) != kRLSocketSuccess) {
        sock_discard(s);
        return NULL;
    }
    return s;
}

RLSocketError RLSocketSetAddress(RLSocketRef s, RLDataRef address) {
    const char *fn = __func__;
    int fd = sock_valid_fd(s, fn);
    if (fd < 0)
        return kRLSocketError;
    if (!rl__socket_address_ok(address, fn))
        return kRLSocketError;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        return rl__fail_errno(errno, fn, "setsockopt(SO_REUSEADDR)"), kRLSocketError;
    if (bind(fd, (const struct sockaddr *)RLDataGetBytePtr(address), (socklen_t)RLDataGetLength(address)) < 0)
        return rl__fail_errno(errno, fn, "bind"), kRLSocketError;
    if (s->sock_type == SOCK_STREAM || s->sock_type == SOCK_SEQPACKET) {
        if (listen(fd, 256) < 0)
            return rl__fail_errno(errno, fn, "listen"), kRLSocketError;
        if ((s->types & 3u) == kRLSocketAcceptCallBack) {
            int fl = fcntl(fd, F_GETFL);
            if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return rl__fail_errno(errno, fn, "fcntl(O_NONBLOCK)"), kRLSocketError;
        }
        sock_lock(s);
        s->listening = true;
        sock_rearm_locked(s);
        sock_unlock(s);
    }
    return kRLSocketSuccess;
}

/* Waits for fd to become writable until deadline (monotonic seconds; <0:
 * no limit). 1 ready, 0 timed out, -1 error (errno). */
static int wait_writable(int fd, double deadline) {
    for (;;) {
        int ms = -1;
        if (deadline >= 0) {
            double left = deadline - RLMonotonicTimeGetCurrent();
            if (left <= 0)
                return 0;
            ms = (int)ceil(left * 1000.0);
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r > 0)
            return 1;
    }
}

RLSocketError RLSocketConnectToAddress(RLSocketRef s, RLDataRef address, RLTimeInterval timeout) {
    const char *fn = __func__;
    int fd = sock_valid_fd(s, fn);
    if (fd < 0)
        return kRLSocketError;
    if (!rl__socket_address_ok(address, fn))
        return kRLSocketError;
    if (isnan(timeout))
        return rl__fail(kRLErrorInvalidArgument, fn, "NaN timeout"), kRLSocketError;
    sock_lock(s);
    bool busy = s->connecting;
    sock_unlock(s);
    if (busy)
        return rl__fail(kRLErrorInvalidState, fn, "a background connect is already under way"), kRLSocketError;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return rl__fail_errno(errno, fn, "fcntl(F_GETFL)"), kRLSocketError;
    bool nonblocking = timeout != 0;
    if (nonblocking && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return rl__fail_errno(errno, fn, "fcntl(O_NONBLOCK)"), kRLSocketError;
    double deadline = timeout > 0 ? RLMonotonicTimeGetCurrent() + timeout : -1;
    const struct sockaddr *sa = (const struct sockaddr *)RLDataGetBytePtr(address);
    int r, err = 0;
    do
        r = connect(fd, sa, (socklen_t)RLDataGetLength(address));
    while (r < 0 && errno == EINTR && !nonblocking);
    if (r < 0)
        err = errno;
    RLSocketError result = kRLSocketSuccess;
    if (r < 0 && (err == EINPROGRESS || err == EINTR) && timeout < 0) {
        sock_lock(s);
        s->connecting = true;
        sock_rearm_locked(s);
        sock_unlock(s);
        return kRLSocketSuccess;
    }
    if (r < 0 && (err == EINPROGRESS || err == EINTR) && timeout > 0) {
        int w = wait_writable(fd, deadline);
        if (w == 0) {
            result = kRLSocketTimeout;
            rl__fail(kRLErrorTimedOut, fn, "connect did not finish within %g s", timeout);
        } else if (w < 0) {
            err = errno;
        } else {
            socklen_t len = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        }
        if (w != 0 && err == 0)
            r = 0;
    }
    if (nonblocking && timeout > 0 && !(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl) < 0 && r == 0) {
        err = errno;
        r = -1;
    }
    if (result == kRLSocketTimeout)
        return result;
    if (r < 0 && err) {
        rl__fail_errno(err, fn, "connect failed");
        return kRLSocketError;
    }
    sock_lock(s);
    s->connected = true;
    if (timeout < 0)
        s->connecting = true; /* connected at once: the Connect callback still comes from the loop */
    sock_rearm_locked(s);
    sock_unlock(s);
    return kRLSocketSuccess;
}

/* A stream's n bytes queued for its loop's ring to send (rl_txq.h), on
 * that loop's thread (the first time, in a callout of s): 1. 0: the
 * caller sends them itself (another thread, no ring: epoll), once what
 * the ring still holds is sent (waited for `timeout` seconds at most, no
 * limit if not positive: -ETIMEDOUT). -errno: an earlier ring send's error (the stream is
 * broken), or no memory. */
static int sock_ring_send(struct RLSocket *s, const void *p, size_t n, RLTimeInterval timeout) {
    sock_rare *rare = sock_rare_of(s);
    rl__txq *q = rare ? __atomic_load_n(&rare->txq, __ATOMIC_ACQUIRE) : NULL;
    if (!q) {
        if (!(__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & kRLSocketCloseOnInvalidate) ||
            !rl__fd_ring_sends(sock_fdobj(s)))
            return 0; /* no ring has sent for s: nothing to wait for */
        sock_lock(s);
        rare = sock_rare_get(s);
        if (rare && !rare->txq)
            __atomic_store_n(&rare->txq, rl__txq_new(sock_fd(s)), __ATOMIC_RELEASE);
        q = rare ? rare->txq : NULL;
        sock_unlock(s);
        if (!q)
            return 0; /* no memory: sent by the caller */
    }
    /* Only while the socket closes its fd itself: a queue that outlives
     * the socket's validity closes the fd when it is done with it (an fd
     * the caller closes could name another file by then). */
    int r = (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & kRLSocketCloseOnInvalidate)
                ? rl__fd_send_via(sock_fdobj(s), q, p, n, timeout)
                : 0;
    if (r != 0)
        return r;
    /* Not through the ring: what it holds goes first. This thread's ring
     * (the fd no longer closed by the socket) is moved by this thread
     * alone: seen through here; another's, waited for. */
    if (rl__txq_pending(q) > 0 && rl__fd_ring_flush(q))
        return rl__txq_pending(q) > 0 ? -ETIMEDOUT : 0;
    double deadline = timeout > 0 && rl__txq_pending(q) > 0 ? RLMonotonicTimeGetCurrent() + timeout : -1;
    while (rl__txq_pending(q) > 0) {
        if (deadline >= 0 && RLMonotonicTimeGetCurrent() >= deadline)
            return -ETIMEDOUT;
        struct timespec ms = {0, 1000000};
        (void)nanosleep(&ms, NULL);
    }
    return 0;
}

RLSocketError RLSocketSendData(RLSocketRef s, RLDataRef address, RLDataRef data, RLTimeInterval timeout) {
    const char *fn = __func__;
    int fd = sock_valid_fd(s, fn);
    if (fd < 0)
        return kRLSocketError;
    if (address && !rl__socket_address_ok(address, fn))
        return kRLSocketError;
    if (!data)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL data"), kRLSocketError;
    const uint8_t *p;
    size_t left;
    if (!rl__data_view(data, &p, &left))
        return rl__fail(kRLErrorInvalidObject, fn, "the data is not a live RLData"), kRLSocketError;
    if (isnan(timeout))
        return rl__fail(kRLErrorInvalidArgument, fn, "NaN timeout"), kRLSocketError;
    const struct sockaddr *sa = address ? (const struct sockaddr *)RLDataGetBytePtr(address) : NULL;
    socklen_t salen = address ? (socklen_t)RLDataGetLength(address) : 0;
    if (!sa && left > 0 && s->sock_type == SOCK_STREAM) {
        rl__txq_lend = data; /* a ring's queue holds the data rather than copy its bytes (rl_txq.h) */
        int r = sock_ring_send(s, p, left, timeout);
        rl__txq_lend = NULL;
        if (r > 0)
            return kRLSocketSuccess;
        if (r == -ETIMEDOUT)
            return rl__fail(kRLErrorTimedOut, fn, "%zu bytes not sent within %g s", left, timeout), kRLSocketTimeout;
        if (r < 0)
            return rl__fail_errno(-r, fn, "send failed"), kRLSocketError;
    }
    double deadline = timeout > 0 ? RLMonotonicTimeGetCurrent() + timeout : -1;
    bool first = true;
    while (left > 0 || first) {
        first = false;
        ssize_t n = sendto(fd, p, left, MSG_DONTWAIT | MSG_NOSIGNAL, sa, salen);
        if (n >= 0) {
            p += n;
            left -= (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return rl__fail_errno(errno, fn, "send failed"), kRLSocketError;
        int w = wait_writable(fd, deadline);
        if (w == 0)
            return rl__fail(kRLErrorTimedOut, fn, "%zu bytes not sent within %g s", left, timeout), kRLSocketTimeout;
        if (w < 0)
            return rl__fail_errno(errno, fn, "poll failed"), kRLSocketError;
    }
    return kRLSocketSuccess;
}

static bool sock_set_enabled(RLSocketRef s, RLOptionFlags types, bool on, const char *fn) {
    if (!sock_ok(s, fn))
        return false;
    if (types & ~(RLOptionFlags)s->types)
        return rl__fail(kRLErrorInvalidArgument, fn, "callback types 0x%lx are not among the socket's (0x%lx)",
                        types & ~(RLOptionFlags)s->types, (RLOptionFlags)s->types);
    sock_lock(s);
    bool valid = rl__fdobj_valid(&s->life);
    if (valid) {
        s->disabled = on ? (s->disabled & ~types) : (s->disabled | types);
        sock_rearm_locked(s);
    }
    sock_unlock(s);
    if (!valid)
        return rl__fail(kRLErrorInvalidObject, fn, "the socket has been invalidated");
    return true;
}

bool RLSocketEnableCallBacks(RLSocketRef s, RLOptionFlags types) {
    return sock_set_enabled(s, types, true, __func__);
}

bool RLSocketDisableCallBacks(RLSocketRef s, RLOptionFlags types) {
    return sock_set_enabled(s, types, false, __func__);
}

RLOptionFlags RLSocketGetSocketFlags(RLSocketRef s) {
    if (!sock_ok(s, __func__))
        return 0;
    sock_lock(s);
    RLOptionFlags f = s->flags;
    sock_unlock(s);
    return f;
}

bool RLSocketSetSocketFlags(RLSocketRef s, RLOptionFlags flags) {
    const char *fn = __func__;
    if (!sock_ok(s, fn))
        return false;
    if (flags & ~(RLOptionFlags)RL_SOCKET_FLAGS)
        return rl__fail(kRLErrorInvalidArgument, fn, "unknown socket flags 0x%lx", flags & ~(RLOptionFlags)RL_SOCKET_FLAGS);
    sock_lock(s);
    __atomic_store_n(&s->flags, (uint8_t)flags, __ATOMIC_RELAXED); /* read without the lock: sock_ring_send */
    sock_unlock(s);
    return true;
}

bool RLSocketInvalidate(RLSocketRef s) {
    if (!sock_ok(s, __func__))
        return false;
    sock_lock(s);
    rl__fdobj_end end;
    /* Writes still queued on a ring keep the fd open until they are sent:
     * their queue closes it then (rl_txq.h). An fd the program closes
     * itself (close-on-invalidate clear) goes back to it now: on the
     * ring's thread, what is queued is seen through first (its entries
     * made with the number are submitted, and the kernel holds the file
     * for them), and what a timeout leaves is sent on a duplicate of the
     * queue's own, closed once it is empty: the program's close loses
     * nothing, and a number reused meanwhile gets none of the old
     * socket's bytes. */
    const sock_rare *rare = sock_rare_of(s);
    rl__txq *q = rare ? rare->txq : NULL;
    if (q && !(s->flags & kRLSocketCloseOnInvalidate) && rl__fdobj_valid(&s->life) && rl__txq_pending(q) > 0) {
        sock_unlock(s);
        (void)rl__fd_ring_flush(q);
        sock_lock(s);
        if (rl__fdobj_valid(&s->life) && rl__txq_pending(q) > 0)
            rl__txq_send_on_dup(q);
    }
    bool close = (s->flags & kRLSocketCloseOnInvalidate) && rl__fdobj_valid(&s->life) && !(q && rl__txq_close_later(q));
    bool was = rl__fdobj_invalidate(&s->life, close ? RL_FDOBJ_CLOSE : 0, &end, sock_releaser);
    RLRunLoopTimerRef retry = sock_retry_timer(s);
    if (retry)
        sock_rare_of(s)->accept_retry = NULL;
    sock_unlock(s);
    if (retry) { /* the timer holds a reference on s: s outlives this */
        RLRunLoopTimerInvalidate(retry);
        RLRelease(retry);
    }
    if (!was)
        return true;
    (void)rl__fdsrc_invalidate(sock_fdobj(s)); /* leaves every loop */
    rl__fdobj_finish(&end); /* the fd closed, the info released (or left to the last running callout) */
    RLRelease(s); /* the reference its validity held (sock_make) */
    return true;
}

bool RLSocketIsValid(RLSocketRef s) {
    if (!sock_ok(s, __func__))
        return false;
    sock_lock(s);
    bool v = rl__fdobj_valid(&s->life);
    sock_unlock(s);
    return v;
}

RLSocketNativeHandle RLSocketGetNative(RLSocketRef s) { return sock_valid_fd(s, __func__); }

static RLDataRef copy_name(RLSocketRef s, bool peer, const char *fn) {
    int fd = sock_valid_fd(s, fn);
    if (fd < 0)
        return NULL;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int r = peer ? getpeername(fd, (struct sockaddr *)&ss, &len) : getsockname(fd, (struct sockaddr *)&ss, &len);
    if (r < 0) {
        rl__fail_errno(errno, fn, peer ? "getpeername" : "getsockname");
        return NULL;
    }
    if (len > sizeof ss)
        len = sizeof ss;
    return RLDataCreate(NULL, (const uint8_t *)&ss, (RLIndex)len);
}

RLDataRef RLSocketCopyAddress(RLSocketRef s) { return copy_name(s, false, __func__); }

RLDataRef RLSocketCopyPeerAddress(RLSocketRef s) { return copy_name(s, true, __func__); }

bool RLSocketGetContext(RLSocketRef s, RLSocketContext *context) {
    if (!sock_ok(s, __func__))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL context");
    sock_lock(s); /* another thread may be making s->rare */
    const sock_rare *r = sock_rare_of(s);
    *context = r ? (RLSocketContext){0, s->life.info, r->retain, r->release, r->copyDescription}
                 : (RLSocketContext){0, s->life.info, NULL, NULL, NULL};
    sock_unlock(s);
    return true;
}

RLRunLoopSourceRef RLSocketCreateRunLoopSource(RLAllocatorRef allocator, RLSocketRef s, RLIndex order) {
    if (sock_valid_fd(s, __func__) < 0)
        return NULL;
    return rl__fdsrc_wake(sock_fdobj(s), order, __func__);
}

/* For the tests: the bytes an object's block takes (its pool class, or
 * what malloc gave it). */
static size_t object_bytes(const void *obj) {
    const rl__object *o = obj;
    return rl__obj_pooled(o) ? rl__pool_block_size(o) : malloc_usable_size((void *)o);
}

/* For the tests: the memory s holds as its own: its block (with its fd
 * source), its rare part, what its ring's read-ahead queues hold for it
 * (nothing once delivered: the queues are the ring's, rl_rxq.h), its send
 * queue with what it holds, and a peer address kept in an RLData. Its membership is the
 * loop's (RLRunLoopMembership.c, rl_fdtab.c); read buffers and the chunks
 * its queues are done with are the thread's. Not for a socket another thread may be
 * using. */
size_t rl__socket_footprint(RLSocketRef s) {
    size_t n = rl__object_block_bytes(s); /* s and its fd source */
    const sock_rare *r = sock_rare_of(s);
    if (r)
        n += malloc_usable_size((void *)r) + sizeof(size_t);
    rl__rxq *q = sock_rxq_of(s);
    if (q)
        n += rl__rxq_footprint(q, sock_fd(s));
    rl__txq *tq = r ? __atomic_load_n(&r->txq, __ATOMIC_ACQUIRE) : NULL;
    if (tq)
        n += rl__txq_footprint(tq);
    if ((atomic_load_explicit(&s->peer_len, memory_order_acquire) & RL_SOCKET_PEER_LEN) == RL_SOCKET_PEER_IN_DATA)
        n += object_bytes(r->peer);
    return n;
}
