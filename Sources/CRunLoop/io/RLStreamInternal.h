/*
 * RLStreamInternal.h — the stream object (RLStream.c) as its backends see
 * it, and what the object asks of a backend.
 *
 * A read or write stream is one object: status, error, client, pending
 * events and the (loop, mode) pairs it is scheduled in, all under the
 * stream's lock. What the bytes come from or go to is a backend — memory
 * (RLStreamMemory.c), file (RLStreamFile.c), bound pair (RLStreamPair.c),
 * socket (RLStreamSocket.c) — with its state stored right after the
 * common part. The arrows run one way: a backend includes this header and
 * calls the rl__stream_* helpers; the object reaches a backend only
 * through the operations table the backend gave when it made the stream.
 *
 * Locks (docs/locking.md, "Sockets, streams and signals"): a socket
 * stream's connection lock comes before the stream lock, which comes
 * before the run loop's locks. A backend never takes a stream lock while
 * holding another stream's lock, and the object never calls a backend
 * operation with its lock held.
 */
#ifndef CRUNLOOP_RLSTREAMINTERNAL_H
#define CRUNLOOP_RLSTREAMINTERNAL_H

#include "RLBase.h"
#include "rl_lockclass.h"

#include <crunloop/RLStream.h>
#include <crunloop/RLRunLoop.h>

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct rl__stream rl__stream;

/* The properties streams know (RLStreamProperty.c maps their names), as
 * bits of a backend's `properties` answer. */
typedef enum rl__prop {
    RL_PROP_APPEND_TO_FILE,        /* RLBoolean */
    RL_PROP_FILE_CURRENT_OFFSET,   /* RLNumber */
    RL_PROP_DATA_WRITTEN,          /* RLData, read-only */
    RL_PROP_SOCKET_NATIVE_HANDLE,  /* RLData of an int, read-only */
    RL_PROP_SHOULD_CLOSE_NATIVE,   /* RLBoolean */
    RL_PROP_COUNT
} rl__prop;
#define RL_PROP_BIT(p) (1u << (p))

/* A property value after the object checked its type: the boolean or the
 * integer (one of them, by the property). */
typedef struct rl__prop_value {
    bool boolean;
    int64_t integer;
} rl__prop_value;

/* What a backend does for the stream object. The object calls every
 * operation with no lock held. NULL entries: the default named. */
typedef struct rl__stream_ops {
    const char *kind;  /* "file", "memory"…: names the stream in errors */
    size_t state_size; /* bytes of backend state after the common part */
    /* Open: 1 open now (the object reports OpenCompleted); 0 the backend
     * reports the outcome itself (rl__stream_open_finished_locked), now or
     * later; -1 failed (the backend failed the stream and set the error).
     * NULL: open at once. */
    int (*open)(rl__stream *s, const char *fn);
    /* Read or Write (one of them, by the stream's direction): the bytes
     * moved, 0 at the end (reading), -1 with *err an errno. May block. */
    ssize_t (*read)(rl__stream *s, uint8_t *buf, size_t n, int *err);
    ssize_t (*write)(rl__stream *s, const uint8_t *buf, size_t n, int *err);
    /* GetBuffer (read streams; NULL: no buffer to lend): up to max of the
     * backend's own bytes in place, which count as read; *n their number,
     * *at_end whether none are left after them. */
    const uint8_t *(*get_buffer)(rl__stream *s, size_t max, size_t *n, bool *at_end);
    /* Could a Read (Write) move bytes, or see the end, without blocking? */
    bool (*ready)(rl__stream *s);
    /* A read stream whose source is used up (NULL: never): it reaches its
     * end without a Read that returns 0. */
    bool (*exhausted)(rl__stream *s);
    /* Not ready now: post the readiness event when it is (NULL: the
     * backend posts it anyway, e.g. from the peer's Write). */
    void (*watch)(rl__stream *s);
    /* An opened stream is closed (by Close or at finalize). */
    void (*close)(rl__stream *s);
    /* Read and Write on an opening stream wait here until the open is done
     * (NULL: opening never lasts). */
    void (*wait_open)(rl__stream *s);
    /* GetStatus: advance an open in progress without blocking (NULL: none). */
    void (*poll_status)(rl__stream *s);
    /* The stream joined (left) a loop's mode (NULL: nothing to do). Left is
     * also called for every schedule still held at finalize. */
    void (*scheduled)(rl__stream *s, RLRunLoopRef rl, RLRunLoopMode mode);
    void (*unscheduled)(rl__stream *s, RLRunLoopRef rl, RLRunLoopMode mode);
    /* The stream is being freed: drop the backend's state (NULL: none). */
    void (*finalize)(rl__stream *s);
    /* Properties. `properties`: the RL_PROP_BIT set this stream has (NULL:
     * none). The object checks the name, that the stream has it, that it
     * is not read-only and the value's type before it calls copy_property
     * (an owned value, or NULL with the error set) or set_property (false
     * with the error set; nothing changed). */
    unsigned (*properties)(rl__stream *s);
    RLTypeRef (*copy_property)(rl__stream *s, rl__prop p, const char *fn);
    bool (*set_property)(rl__stream *s, rl__prop p, const rl__prop_value *v, const char *fn);
} rl__stream_ops;

struct rl__sched {
    RLRunLoopRef rl; /* retained */
    char *mode;
};

struct rl__stream {
    rl__object base;
    const rl__stream_ops *ops;
    bool is_read;
    pthread_mutex_t lock; /* everything below but state */
    RLStreamStatus status;
    RLStreamError error;
    RLOptionFlags client_events;
    void (*callback)(void);
    RLStreamClientContext ctx;
    RLOptionFlags pending;
    bool armed; /* the next HasBytes/CanAccept is reported */
    RLRunLoopSourceRef source;
    struct rl__sched *scheds;
    size_t nscheds;
    _Alignas(max_align_t) unsigned char state[]; /* the backend's, ops->state_size bytes */
};

/* A new stream (NotOpen) with zeroed backend state; NULL with the error
 * set if out of memory. fn names the public call. */
RL__HIDDEN rl__stream *rl__stream_new(bool is_read, const rl__stream_ops *ops, const char *fn);
/* ref as a stream of that direction, or NULL with the error set. */
RL__HIDDEN rl__stream *rl__stream_check(const void *ref, bool is_read, const char *fn);

/* The stream lock, reporting to the lock-order detector when it is on. */
RL__HIDDEN void rl__stream_lock(rl__stream *s);
RL__HIDDEN void rl__stream_unlock(rl__stream *s);

/* Records events and wakes the loops the stream is in (_locked: the
 * stream lock held). HasBytes/CanAccept are dropped unless armed. */
RL__HIDDEN void rl__stream_post_locked(rl__stream *s, RLOptionFlags ev);
RL__HIDDEN void rl__stream_post(rl__stream *s, RLOptionFlags ev);
RL__HIDDEN void rl__stream_fail(rl__stream *s, RLIndex domain, int err);
/* A backend that answered 0 from open reports here (stream lock held):
 * err 0 opens the stream, anything else fails it; nothing happens unless
 * the stream is still Opening. */
RL__HIDDEN void rl__stream_open_finished_locked(rl__stream *s, RLIndex domain, int err);
/* If the stream waits for readiness (armed), reports what it can do now:
 * its end, or readiness. For a backend whose peer changed (closed). */
RL__HIDDEN void rl__stream_recheck(rl__stream *s);
/* Adds src to every (loop, mode) the stream is scheduled in. */
RL__HIDDEN void rl__stream_add_to_schedules(rl__stream *s, RLRunLoopSourceRef src);
/* An owned reference to kRLBooleanTrue or kRLBooleanFalse. */
RL__HIDDEN RLTypeRef rl__boolean_copy(bool value);
/* Is the stream scheduled in that mode of that loop? */
RL__HIDDEN bool rl__stream_is_scheduled(rl__stream *s, RLRunLoopRef rl, RLRunLoopMode mode);

#endif /* CRUNLOOP_RLSTREAMINTERNAL_H */
