/*
 * rl_conn.h — serving framed connections for ports that receive over
 * stream sockets (message ports over Unix sockets, socket ports over TCP),
 * and the blocking-with-a-deadline helpers their senders use. Private.
 *
 * A server owns a listening socket, an epoll set and a stall timer. The
 * epoll set is the one fd a run loop watches for the port (through an
 * RLFileDescriptor), however many clients it has. Every connection is
 * armed one-shot: the run loop that takes its event owns the connection
 * until it re-arms it, so a port whose source is in several loops never
 * has two threads reading one stream. A client that begins a frame must
 * finish it within the stall timeout; one that sends a bad frame, stalls
 * or is refused loses its connection, the drop is counted with its reason,
 * and everyone else is served on.
 *
 * What a frame means is the port's business: the server hands each frame
 * to ops->dispatch, and each new client to ops->admit first. Neither runs
 * with the server's lock held.
 */
#ifndef CRUNLOOP_RL_CONN_H
#define CRUNLOOP_RL_CONN_H

#include "rl_wire.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>

typedef struct rl_conn {
    int fd;
    struct sockaddr_storage addr; /* the peer's address, as accept saw it */
    socklen_t addrlen;
    uid_t uid; /* SO_PEERCRED for Unix sockets; -1 otherwise */
    gid_t gid;
    pid_t pid;
    bool busy;          /* a loop is serving it (its event was taken, one-shot) */
    bool closed;        /* the server closed while it was busy */
    double frame_since; /* monotonic time its current frame began; 0: between frames */
    rl_wire_reader rd;
    uint8_t *out; /* bytes not yet written (the client reads slowly) */
    size_t out_len, out_off;
    struct rl_conn *next;
} rl_conn;

typedef struct rl_server_ops {
    /* A new client, before it is served; false refuses it (it writes why
     * into why[n]; the refusal is counted as a drop). */
    bool (*admit)(void *owner, rl_conn *c, char *why, size_t n);
    /* One complete frame from c (dispatch owns it: rl__wire_frame_free).
     * False drops the connection (*why says why). */
    bool (*dispatch)(void *owner, rl_conn *c, rl_wire_frame *f, const char **why);
} rl_server_ops;

typedef struct rl_server {
    pthread_mutex_t mu; /* everything below; never held while ops run */
    bool valid;
    int lfd, epfd, tfd;
    double stall;     /* seconds a client may take to finish a frame */
    bool stall_armed; /* tfd is set */
    uint32_t limit;   /* largest frame body accepted */
    rl_conn *conns;
    size_t dropped;      /* connections dropped for bad frames or refusals */
    char last_drop[128]; /* why the last one was */
    const rl_server_ops *ops;
    void *owner;
} rl_server;

/* Sets up a server around a bound, listening, non-blocking socket (taken
 * over, also on failure). 0, or the errno that failed. */
RL__HIDDEN int rl__server_init(rl_server *s, int lfd, uint32_t limit, const rl_server_ops *ops, void *owner);
/* The fd a run loop watches (readable when there is work). */
RL__HIDDEN int rl__server_fd(const rl_server *s);
/* Does what is ready: accepts, serves a batch of frames, drops stalled
 * clients. Call on the loop's thread when rl__server_fd is readable. */
RL__HIDDEN void rl__server_serve(rl_server *s);
/* Stops listening and drops every client (a connection being served is
 * dropped by the thread serving it). Idempotent. */
RL__HIDDEN void rl__server_close(rl_server *s);
/* Frees what close left (call once, after close, when no loop serves it). */
RL__HIDDEN void rl__server_destroy(rl_server *s);
RL__HIDDEN void rl__server_set_limit(rl_server *s, uint32_t limit);
RL__HIDDEN void rl__server_set_stall(rl_server *s, double seconds);
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
 * *why says how). */
RL__HIDDEN int rl__read_frame(int fd, rl_wire_reader *rd, rl_wire_frame *f, const char **why);

#endif /* CRUNLOOP_RL_CONN_H */
