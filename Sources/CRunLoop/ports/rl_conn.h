/*
 * rl_conn.h — serving framed connections for ports that receive over
 * stream sockets (message ports over Unix sockets, socket ports over TCP),
 * and the blocking-with-a-deadline helpers their senders use. Private.
 *
 * A server has no reactor of its own: its listening sockets and its
 * clients' connections are fd objects (RLFileDescriptor), each with a
 * run-loop source, and its stall check is a run-loop timer. They sit in
 * every run loop and mode the port's own source is in (the port's source
 * schedules and cancels them), so the loops that serve the port watch its
 * sockets with their own pollers, and a port's callouts run on those
 * loops' threads as before. Callbacks are one-shot per enable: the loop
 * that takes a connection's event owns the connection until it enables it
 * again, so a port whose source is in several loops never has two threads
 * reading one stream. A client that begins a frame must finish it within
 * the stall timeout; one that sends a bad frame, stalls or is refused
 * loses its connection, the drop is counted with its reason, and everyone
 * else is served on.
 *
 * What a frame means is the port's business: the server hands each frame
 * to ops->dispatch, and each new client to ops->admit first. Neither runs
 * with the server's lock held.
 */
#ifndef CRUNLOOP_RL_CONN_H
#define CRUNLOOP_RL_CONN_H

#include "RLBase.h"
#include "rl_callout.h"
#include "rl_fdobj.h"
#include "rl_weak.h"
#include "rl_wire.h"

#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoopTimer.h>
#include <crunloop/RLRunLoop.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

struct rl__server;

typedef struct rl__conn {
    int fd;
    struct sockaddr_storage addr; /* the peer's address, as accept saw it */
    socklen_t addrlen;
    uid_t uid; /* SO_PEERCRED for Unix sockets; -1 otherwise */
    gid_t gid;
    pid_t pid;
    bool listening;     /* a listening socket of the server, not a client */
    bool busy;          /* a loop is serving it (its event was taken, one-shot) */
    bool closed;        /* the server let go of it while it was busy */
    double frame_since; /* monotonic time its current frame began; 0: between frames */
    rl__wire_reader rd;
    uint8_t *out; /* bytes not yet written (the client reads slowly) */
    size_t out_len, out_off;
    struct rl__conn *next;
    /* Its watch: the fd object's context holds a reference on the
     * connection (refs), the server's list another. */
    struct rl__server *srv;
    rl__weak *link; /* the port's (retained): a callout holds the port while it serves */
    atomic_int refs;
    RLFileDescriptorRef fdobj;
    RLRunLoopSourceRef src;
    /* What the port keeps for this client while it is connected
     * (RLSocketPort: the remote port its last frame named for replies, so
     * that replies to it share one connection, in order), retained,
     * released with the connection; set by the owner's dispatch (one
     * loop at a time serves a connection). */
    RLTypeRef kept;
} rl__conn;

typedef struct rl__server_ops {
    /* A new client, before it is served; false refuses it (it writes why
     * into why[n]; the refusal is counted as a drop). */
    bool (*admit)(void *owner, rl__conn *c, char *why, size_t n);
    /* One complete frame from c (dispatch owns it: rl__wire_frame_free).
     * False drops the connection (*why says why). */
    bool (*dispatch)(void *owner, rl__conn *c, rl__wire_frame *f, const char **why);
    /* How the slow-callout report names the callouts the server makes for
     * its owner (kind port, the program's function: rl_health.h). */
    rl__callout_owner how;
} rl__server_ops;

/* A run loop and mode the port's source is in, and the stall timer there. */
typedef struct rl__conn_sched {
    RLRunLoopRef rl; /* retained */
    RLRunLoopMode mode;
    RLRunLoopTimerRef timer;
    bool timer_in; /* the timer is in rl (while a client is mid-frame) */
    struct rl__conn_sched *next;
} rl__conn_sched;

typedef struct rl__server {
    /* Held while the watches join or leave loops (schedule, cancel, a new
     * client, close), so every watch is in exactly the loops and modes in
     * `scheds`; taken before mu. */
    pthread_mutex_t sched_mu;
    pthread_mutex_t mu; /* everything below; never held while ops run */
    bool valid;
    double stall;    /* seconds a client may take to finish a frame */
    double stall_at; /* monotonic time the stall timers are set for (INFINITY: none) */
    uint32_t limit;  /* largest frame body accepted */
    uint32_t max_comps; /* most components a frame may have (0: no limit but the body's) */
    RLIndex order;      /* of the port's source: its watches' order */
    rl__conn *conns;
    rl__conn *listeners; /* the first is the main one (rl__server_replace_listener) */
    rl__conn_sched *scheds;
    size_t dropped;      /* connections dropped for bad frames or refusals */
    char last_drop[128]; /* why the last one was */
    const rl__server_ops *ops;
    void *owner;
    rl__weak *link; /* the port's (not retained: the port outlives its server) */
    pid_t made_by; /* a fork()'s child closes its copies of the listening
                    * sockets but never cuts the connections it shares with
                    * its parent */
} rl__server;

/* Also takes clients from another bound, listening, non-blocking socket
 * (taken over, also on failure). The handle, or NULL (errno set). */
RL__HIDDEN rl__conn *rl__server_add_listener(rl__server *s, int lfd);
/* Stops listening on it (its address is free at once unless a loop is
 * accepting on it right now: then when that loop is done). */
RL__HIDDEN void rl__server_remove_listener(rl__server *s, rl__conn *listener);
/* Listens on lfd (bound, listening, non-blocking; taken over, also on
 * failure) instead of the socket given to rl__server_init, which is closed:
 * its address is free when this returns (unless a loop is accepting on it
 * right now). 0, or the errno that failed (nothing changed). */
RL__HIDDEN int rl__server_replace_listener(rl__server *s, int lfd);
/* In a fork()'s child (from its atfork handler): closes the child's copies
 * of the listening sockets, so that the parent's name or address is free
 * the moment the parent closes it, whatever the child does. */
RL__HIDDEN void rl__server_drop_listeners_in_child(rl__server *s);
/* Frames with more components are refused on their header (0: no limit);
 * applies to every connection, from its next frame on. */
RL__HIDDEN void rl__server_set_max_comps(rl__server *s, uint32_t max);

/* Writes a frame to c, or queues what the socket does not take now (it is
 * flushed when c is writable). Call from dispatch only. False: no memory
 * or the connection broke. */
RL__HIDDEN bool rl__conn_write(rl__conn *c, uint8_t *frame, size_t len);

/* ---- senders: blocking with a deadline (monotonic seconds) ---- */

RL__HIDDEN double rl__deadline_after(double seconds);
/* Milliseconds left until deadline, for poll. */
RL__HIDDEN int rl__ms_left(double deadline);
/* Writes all of buf to a non-blocking fd, waiting for room until deadline.
 * 0, ETIMEDOUT, or the errno that broke the connection; *sent says how
 * much went out. */
RL__HIDDEN int rl__write_all(int fd, const uint8_t *buf, size_t len, double deadline, size_t *sent);
/* Reads from a non-blocking fd into rd until a frame is complete (1, frame
 * in *f), the fd has no more (0), or the stream ended or went bad (-1;
 * *why says how). Small wants read up to RL_WIRE_AHEAD bytes at once, so
 * after a 1 the next frames may be in rd already: a caller that waits for
 * the fd to be readable asks rl__read_pending first. */
RL__HIDDEN int rl__read_frame(int fd, rl__wire_reader *rd, rl__wire_frame *f, const char **why);
/* Whether rd holds bytes read ahead that no frame has taken yet. */
RL__HIDDEN bool rl__read_pending(const rl__wire_reader *rd);
/* After a 1 from rl__read_frame: whether the stream was empty when the
 * frame was read (nothing read ahead, and the last read came up short), so
 * another read now would most likely say EAGAIN. */
RL__HIDDEN bool rl__read_drained(const rl__wire_reader *rd);

/* ---- the one send path of remote ports ----
 *
 * A remote port's send, whatever the port: wait for the port's send lock
 * by the deadline, have the connection (conn: looked up, made or checked
 * by the port), have the frame (made under the lock, or before it), and
 * write it whole by the deadline. What each outcome means to the caller
 * (its result code, its error, whether the port becomes invalid) is the
 * front end's business; with RL_SEND_SENT, _TIMEOUT and _BROKE the lock is
 * still held (a message port then waits for its reply under it). */
typedef struct rl__send_job {
    pthread_mutex_t *mu; /* the port's send lock */
    void *port;
    /* mu held: the fd to write on, connected by deadline if need be; or
     * -1, having let go of mu and set the error (RL_SEND_STOPPED). */
    int (*conn)(void *port, double deadline);
    /* mu held: the frame (malloc'ed; freed by rl__send) and its length, or
     * NULL if memory is short. NULL: `frame` and `len` are written. */
    uint8_t *(*make)(void *port, void *arg, size_t *len);
    void *arg;
    const uint8_t *frame;
    size_t len;
} rl__send_job;

typedef enum rl__send_result {
    RL_SEND_SENT,    /* written whole */
    RL_SEND_BUSY,    /* another send held the lock past the deadline (not held) */
    RL_SEND_STOPPED, /* conn said no (lock let go, error set) */
    RL_SEND_NOMEM,   /* the frame could not be made (lock let go) */
    RL_SEND_TIMEOUT, /* the deadline passed: *sent bytes went out, maybe 0 */
    RL_SEND_BROKE,   /* the connection broke (*err) */
} rl__send_result;

/* The send; *sent and *err say how far the write went. */
RL__HIDDEN rl__send_result rl__send(const rl__send_job *sd, double deadline, size_t *sent, int *err);

/* ---- the part every port that listens on a socket shares ----
 *
 * A message port and a socket port embed an rl__netport right after their
 * object header (checked with RL__NETPORT_CHECK): validity, context,
 * invalidation callback, message limit, the server, and the run-loop
 * source that takes the server's watches into the loops it is added to. The port's own lock is np.mu. */

/* Same layout as RLMessagePortContext and RLSocketPortContext. */
typedef struct rl__netport_context {
    RLIndex version;
    void *info;
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
    char *(*copyDescription)(const void *info);
} rl__netport_context;

/* A port's invalidation callback, stored without its type; the port casts
 * it back to its own callback type to call it. */
typedef void (*rl__netport_fn)(void);

typedef struct rl__netport {
    rl__weak *link;     /* what its fd object points at (rl_weak.h) */
    pthread_mutex_t mu; /* the port's state; never held while user code runs */
    /* Valid until invalidated; the invalidation callback called once, then
     * the context's info released once (rl_fdobj.h; under mu). */
    rl__fdobj life;
    rl__fdobj_end inval_end; /* what the invalidation under way still has to do */
    bool serving; /* srv is set up */
    rl__netport_context ctx;
    rl__netport_fn inval;
    uint32_t limit; /* the largest frame body accepted or sent */
    rl__server srv;
    RLRunLoopSourceRef source; /* schedules the server's watches where it goes */
    /* The port holds a reference on itself from the moment it has a
     * run-loop source until it is invalidated: as CF's source retains its
     * port, a port whose source is in a loop keeps serving after its
     * creator released it (the guide's Listing 3-17 does exactly that). */
    bool kept_by_source;
    struct rl__netport *reg_next; /* in the port family's registry */
} rl__netport;

struct rl__netport_probe {
    rl__object base;
    rl__netport np;
};
#define RL__NETPORT_OFFSET offsetof(struct rl__netport_probe, np)
#define RL__NETPORT_CHECK(type) \
    _Static_assert(offsetof(type, np) == RL__NETPORT_OFFSET, #type ": np must follow the object header")

enum { RL_NETPORT_MIN_LIMIT = 64 };

/* Sets np up for obj (valid). False if memory is short (nothing to undo
 * but rl__netport_finalize). */
RL__HIDDEN bool rl__netport_init(rl__netport *np, void *obj);
RL__HIDDEN void rl__netport_finalize(rl__netport *np);
/* Checks the context's version. */
RL__HIDDEN bool rl__netport_check_context(const void *context, const char *fn);
/* Keeps a copy of the context (NULL: none). */
RL__HIDDEN void rl__netport_set_context(rl__netport *np, const void *context);
/* Calls the context's retain on its info: user code, so with no lock held.
 * The invalidation releases it, once (rl__netport_end_invalidate). */
RL__HIDDEN void rl__netport_retain_context(rl__netport *np);
RL__HIDDEN bool rl__netport_get_context(rl__netport *np, void *context, const char *fn);
/* Serves a bound, listening socket (taken over). 0 or an errno. */
RL__HIDDEN int rl__netport_listen(rl__netport *np, int lfd, const rl__server_ops *ops, void *owner);
RL__HIDDEN bool rl__netport_is_valid(rl__netport *np);
/* Marks np invalid; true if it was valid, and the caller then tears its
 * own parts down and calls rl__netport_finish_invalidate. */
RL__HIDDEN bool rl__netport_begin_invalidate(rl__netport *np);
/* Stops the server, cuts the link, takes the source out of every loop.
 * Returns the invalidation callback to call (once), or NULL. */
RL__HIDDEN rl__netport_fn rl__netport_finish_invalidate(rl__netport *np);
/* Releases the context's info (once: after the invalidation callback the
 * caller made) and drops the reference the port held on itself while it
 * had a source. The last step of a port's invalidation: it may destroy
 * the port. */
RL__HIDDEN void rl__netport_end_invalidate(rl__netport *np);
/* Sets the callback and returns true; on an invalid port sets nothing and
 * returns false (the caller calls it at once, as CF does). */
RL__HIDDEN bool rl__netport_set_inval(rl__netport *np, rl__netport_fn fn);
RL__HIDDEN rl__netport_fn rl__netport_get_inval(rl__netport *np);
RL__HIDDEN bool rl__netport_set_limit(rl__netport *np, RLIndex bytes, const char *fn);
RL__HIDDEN bool rl__netport_set_stall(rl__netport *np, bool remote, RLTimeInterval seconds, const char *fn);
RL__HIDDEN RLRunLoopSourceRef rl__netport_create_source(rl__netport *np, bool remote, RLIndex order, const char *fn);
/* Dropped connections, and the last reason (into why[n]). */
RL__HIDDEN size_t rl__netport_dropped(rl__netport *np, char *why, size_t n);

/* A port family's list of ports, for lookups by name or address. */
typedef struct rl__netport_registry {
    pthread_mutex_t mu;
    rl__netport *head;
} rl__netport_registry;
RL__HIDDEN void rl__registry_add_locked(rl__netport_registry *r, rl__netport *np);
RL__HIDDEN void rl__registry_remove(rl__netport_registry *r, rl__netport *np);
/* The port object an entry belongs to. */
static inline void *rl__netport_object(rl__netport *np) { return (char *)np - RL__NETPORT_OFFSET; }

#endif /* CRUNLOOP_RL_CONN_H */
