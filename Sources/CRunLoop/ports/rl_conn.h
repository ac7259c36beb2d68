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

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

struct rl_server;

typedef struct rl_conn {
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
    rl_wire_reader rd;
    uint8_t *out; /* bytes not yet written (the client reads slowly) */
    size_t out_len, out_off;
    struct rl_conn *next;
    /* Its watch: the fd object's context holds a reference on the
     * connection (refs), the server's list another. */
    struct rl_server *srv;
    rl__weak *link; /* the port's (retained): a callout holds the port while it serves */
    atomic_int refs;
    RLFileDescriptorRef fdobj;
    RLRunLoopSourceRef src;
} rl_conn;

typedef struct rl_server_ops {
    /* A new client, before it is served; false refuses it (it writes why
     * into why[n]; the refusal is counted as a drop). */
    bool (*admit)(void *owner, rl_conn *c, char *why, size_t n);
    /* One complete frame from c (dispatch owns it: rl__wire_frame_free).
     * False drops the connection (*why says why). */
    bool (*dispatch)(void *owner, rl_conn *c, rl_wire_frame *f, const char **why);
    /* How the slow-callout report names the callouts the server makes for
     * its owner (kind port, the program's function: rl_health.h). */
    rl__callout_owner how;
} rl_server_ops;

/* A run loop and mode the port's source is in, and the stall timer there. */
typedef struct rl_sched {
    RLRunLoopRef rl; /* retained */
    RLRunLoopMode mode;
    RLRunLoopTimerRef timer;
    bool timer_in; /* the timer is in rl (while a client is mid-frame) */
    struct rl_sched *next;
} rl_sched;

typedef struct rl_server {
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
    rl_conn *conns;
    rl_conn *listeners; /* the first is the main one (rl__server_replace_listener) */
    rl_sched *scheds;
    size_t dropped;      /* connections dropped for bad frames or refusals */
    char last_drop[128]; /* why the last one was */
    const rl_server_ops *ops;
    void *owner;
    rl__weak *link; /* the port's (not retained: the port outlives its server) */
    pid_t made_by; /* a fork()'s child closes its copies of the listening
                    * sockets but never cuts the connections it shares with
                    * its parent */
} rl_server;

/* Sets up a server around a bound, listening, non-blocking socket (taken
 * over, also on failure), for the port `owner` whose weak link is `link`.
 * 0, or the errno that failed. */
RL__HIDDEN int rl__server_init(rl_server *s, int lfd, uint32_t limit, const rl_server_ops *ops, void *owner,
                               rl__weak *link);
/* Also takes clients from another bound, listening, non-blocking socket
 * (taken over, also on failure). The handle, or NULL (errno set). */
RL__HIDDEN rl_conn *rl__server_add_listener(rl_server *s, int lfd);
/* Stops listening on it (its address is free at once unless a loop is
 * accepting on it right now: then when that loop is done). */
RL__HIDDEN void rl__server_remove_listener(rl_server *s, rl_conn *listener);
/* Listens on lfd (bound, listening, non-blocking; taken over, also on
 * failure) instead of the socket given to rl__server_init, which is closed:
 * its address is free when this returns (unless a loop is accepting on it
 * right now). 0, or the errno that failed (nothing changed). */
RL__HIDDEN int rl__server_replace_listener(rl_server *s, int lfd);
/* The order of the port's source, for the watches (set before the source
 * joins a loop). */
RL__HIDDEN void rl__server_set_order(rl_server *s, RLIndex order);
/* The port's source joined (schedule) or left (cancel) mode of rl: the
 * server's watches follow it. */
RL__HIDDEN void rl__server_schedule(rl_server *s, RLRunLoopRef rl, RLRunLoopMode mode);
RL__HIDDEN void rl__server_cancel(rl_server *s, RLRunLoopRef rl, RLRunLoopMode mode);
/* Stops listening and drops every client (a connection being served is
 * dropped by the thread serving it); the watches leave every loop.
 * Idempotent. */
RL__HIDDEN void rl__server_close(rl_server *s);
/* In a fork()'s child (from its atfork handler): closes the child's copies
 * of the listening sockets, so that the parent's name or address is free
 * the moment the parent closes it, whatever the child does. */
RL__HIDDEN void rl__server_drop_listeners_in_child(rl_server *s);
/* Frees what close left (call once, after close). */
RL__HIDDEN void rl__server_destroy(rl_server *s);
RL__HIDDEN void rl__server_set_limit(rl_server *s, uint32_t limit);
RL__HIDDEN void rl__server_set_stall(rl_server *s, double seconds);
/* Frames with more components are refused on their header (0: no limit);
 * applies to every connection, from its next frame on. */
RL__HIDDEN void rl__server_set_max_comps(rl_server *s, uint32_t max);
/* Connections dropped so far; the last reason goes into why (n bytes). */
RL__HIDDEN size_t rl__server_dropped(rl_server *s, char *why, size_t n);

/* Writes a frame to c, or queues what the socket does not take now (it is
 * flushed when c is writable). Call from dispatch only. False: no memory
 * or the connection broke. */
RL__HIDDEN bool rl__conn_write(rl_conn *c, uint8_t *frame, size_t len);

/* ---- senders: blocking with a deadline (monotonic seconds) ---- */

RL__HIDDEN double rl__deadline_after(double seconds);
/* Milliseconds left until deadline, for poll. */
RL__HIDDEN int rl__ms_left(double deadline);
/* Locks mu, waiting no later than deadline. 0 or ETIMEDOUT. */
RL__HIDDEN int rl__lock_until(pthread_mutex_t *mu, double deadline);
/* Writes all of buf to a non-blocking fd, waiting for room until deadline.
 * 0, ETIMEDOUT, or the errno that broke the connection; *sent says how
 * much went out. */
RL__HIDDEN int rl__write_all(int fd, const uint8_t *buf, size_t len, double deadline, size_t *sent);
/* Reads from a non-blocking fd into rd until a frame is complete (1, frame
 * in *f), the fd has no more (0), or the stream ended or went bad (-1;
 * *why says how). Small wants read up to RL_WIRE_AHEAD bytes at once, so
 * after a 1 the next frames may be in rd already: a caller that waits for
 * the fd to be readable asks rl__read_pending first. */
RL__HIDDEN int rl__read_frame(int fd, rl_wire_reader *rd, rl_wire_frame *f, const char **why);
/* Whether rd holds bytes read ahead that no frame has taken yet. */
RL__HIDDEN bool rl__read_pending(const rl_wire_reader *rd);
/* After a 1 from rl__read_frame: whether the stream was empty when the
 * frame was read (nothing read ahead, and the last read came up short), so
 * another read now would most likely say EAGAIN. */
RL__HIDDEN bool rl__read_drained(const rl_wire_reader *rd);

/* ---- the one send path of remote ports ----
 *
 * A remote port's send, whatever the port: wait for the port's send lock
 * by the deadline, have the connection (conn: looked up, made or checked
 * by the port), have the frame (made under the lock, or before it), and
 * write it whole by the deadline. What each outcome means to the caller
 * (its result code, its error, whether the port becomes invalid) is the
 * front end's business; with RL_SEND_SENT, _TIMEOUT and _BROKE the lock is
 * still held (a message port then waits for its reply under it). */
typedef struct rl_send {
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
} rl_send;

typedef enum rl_send_result {
    RL_SEND_SENT,    /* written whole */
    RL_SEND_BUSY,    /* another send held the lock past the deadline (not held) */
    RL_SEND_STOPPED, /* conn said no (lock let go, error set) */
    RL_SEND_NOMEM,   /* the frame could not be made (lock let go) */
    RL_SEND_TIMEOUT, /* the deadline passed: *sent bytes went out, maybe 0 */
    RL_SEND_BROKE,   /* the connection broke (*err) */
} rl_send_result;

/* The send; *sent and *err say how far the write went. */
RL__HIDDEN rl_send_result rl__send(const rl_send *sd, double deadline, size_t *sent, int *err);

/* ---- the part every port that listens on a socket shares ----
 *
 * A message port and a socket port embed an rl_netport right after their
 * object header (checked with RL__NETPORT_CHECK): validity, context,
 * invalidation callback, message limit, the server, and the run-loop
 * source that takes the server's watches into the loops it is added to. The port's own lock is np.mu. */

/* Same layout as RLMessagePortContext and RLSocketPortContext. */
typedef struct rl_netport_context {
    RLIndex version;
    void *info;
    const void *(*retain)(const void *info);
    void (*release)(const void *info);
    char *(*copyDescription)(const void *info);
} rl_netport_context;

/* A port's invalidation callback, stored without its type; the port casts
 * it back to its own callback type to call it. */
typedef void (*rl_netport_fn)(void);

typedef struct rl_netport {
    rl__weak *link;     /* what its fd object points at (rl_weak.h) */
    pthread_mutex_t mu; /* the port's state; never held while user code runs */
    /* Valid until invalidated; the invalidation callback called once, then
     * the context's info released once (rl_fdobj.h; under mu). */
    rl_fdobj life;
    rl_fdobj_end inval_end; /* what the invalidation under way still has to do */
    bool serving; /* srv is set up */
    rl_netport_context ctx;
    rl_netport_fn inval;
    uint32_t limit; /* the largest frame body accepted or sent */
    rl_server srv;
    RLRunLoopSourceRef source; /* schedules the server's watches where it goes */
    /* The port holds a reference on itself from the moment it has a
     * run-loop source until it is invalidated: as CF's source retains its
     * port, a port whose source is in a loop keeps serving after its
     * creator released it (the guide's Listing 3-17 does exactly that). */
    bool kept_by_source;
    struct rl_netport *reg_next; /* in the port family's registry */
} rl_netport;

struct rl__netport_probe {
    rl__object base;
    rl_netport np;
};
#define RL__NETPORT_OFFSET offsetof(struct rl__netport_probe, np)
#define RL__NETPORT_CHECK(type) \
    _Static_assert(offsetof(type, np) == RL__NETPORT_OFFSET, #type ": np must follow the object header")

enum { RL_NETPORT_MIN_LIMIT = 64 };

/* Sets np up for obj (valid). False if memory is short (nothing to undo
 * but rl__netport_finalize). */
RL__HIDDEN bool rl__netport_init(rl_netport *np, void *obj);
RL__HIDDEN void rl__netport_finalize(rl_netport *np);
/* Checks the context's version. */
RL__HIDDEN bool rl__netport_check_context(const void *context, const char *fn);
/* Keeps a copy of the context (NULL: none). */
RL__HIDDEN void rl__netport_set_context(rl_netport *np, const void *context);
/* Calls the context's retain on its info: user code, so with no lock held.
 * The invalidation releases it, once (rl__netport_end_invalidate). */
RL__HIDDEN void rl__netport_retain_context(rl_netport *np);
RL__HIDDEN bool rl__netport_get_context(rl_netport *np, void *context, const char *fn);
/* Serves a bound, listening socket (taken over). 0 or an errno. */
RL__HIDDEN int rl__netport_listen(rl_netport *np, int lfd, const rl_server_ops *ops, void *owner);
RL__HIDDEN bool rl__netport_is_valid(rl_netport *np);
/* Marks np invalid; true if it was valid, and the caller then tears its
 * own parts down and calls rl__netport_finish_invalidate. */
RL__HIDDEN bool rl__netport_begin_invalidate(rl_netport *np);
/* Stops the server, cuts the link, takes the source out of every loop.
 * Returns the invalidation callback to call (once), or NULL. */
RL__HIDDEN rl_netport_fn rl__netport_finish_invalidate(rl_netport *np);
/* Releases the context's info (once: after the invalidation callback the
 * caller made) and drops the reference the port held on itself while it
 * had a source. The last step of a port's invalidation: it may destroy
 * the port. */
RL__HIDDEN void rl__netport_end_invalidate(rl_netport *np);
/* Sets the callback and returns true; on an invalid port sets nothing and
 * returns false (the caller calls it at once, as CF does). */
RL__HIDDEN bool rl__netport_set_inval(rl_netport *np, rl_netport_fn fn);
RL__HIDDEN rl_netport_fn rl__netport_get_inval(rl_netport *np);
RL__HIDDEN bool rl__netport_set_limit(rl_netport *np, RLIndex bytes, const char *fn);
RL__HIDDEN bool rl__netport_set_stall(rl_netport *np, bool remote, RLTimeInterval seconds, const char *fn);
RL__HIDDEN RLRunLoopSourceRef rl__netport_create_source(rl_netport *np, bool remote, RLIndex order, const char *fn);
/* Dropped connections, and the last reason (into why[n]). */
RL__HIDDEN size_t rl__netport_dropped(rl_netport *np, char *why, size_t n);

/* A port family's list of ports, for lookups by name or address. */
typedef struct rl_netport_registry {
    pthread_mutex_t mu;
    rl_netport *head;
} rl_netport_registry;
RL__HIDDEN void rl__registry_add_locked(rl_netport_registry *r, rl_netport *np);
RL__HIDDEN void rl__registry_remove(rl_netport_registry *r, rl_netport *np);
/* The port object an entry belongs to. */
static inline void *rl__netport_object(rl_netport *np) { return (char *)np - RL__NETPORT_OFFSET; }

#endif /* CRUNLOOP_RL_CONN_H */
