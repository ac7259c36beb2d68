/*
 * rl_wire.h — the framing of port messages between processes and hosts
 * (message ports over Unix-domain sockets, socket ports over TCP). Private.
 *
 * A frame is a 24-byte header and a body, all integers little-endian:
 *
 *   offset size  field
 *   0      4     magic    "RLPM"
 *   4      1     version  RL_WIRE_VERSION
 *   5      1     kind     rl__wire_kind
 *   6      2     flags    0 (a receiver refuses other values: room to grow)
 *   8      4     msgid    the sender's message id (signed, as CFMessagePort's)
 *   12     4     seq      request/reply matching (0 for one-way frames)
 *   16     4     ncomp    number of components
 *   20     4     bodylen  bytes that follow the header
 *
 *   body: ncomp components, back to back, each
 *   0      1     type     rl__wire_ctype
 *   1      3     zero
 *   4      4     len      bytes that follow
 *   8      len   bytes
 *
 * A receiver checks everything before it trusts anything: the magic, the
 * version, the flags, the kind, bodylen against its limit, ncomp against
 * what bodylen can hold (and against the reader's component limit, if it
 * has one), and that the components fill the body exactly. A
 * frame that fails is refused whole, with a reason; the connection it came
 * on is then dropped (a stream cannot resynchronize).
 *
 * The reader reads straight into the frame's one buffer (rl__wire_want /
 * rl__wire_got), so a message's bytes are copied once, from the kernel.
 */
#ifndef CRUNLOOP_RL_WIRE_H
#define CRUNLOOP_RL_WIRE_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RL_WIRE_MAGIC 0x4d504c52u /* "RLPM" read as a little-endian u32 */
#define RL_WIRE_VERSION 1
#define RL_WIRE_HEADER 24
#define RL_WIRE_CHEADER 8
/* The default largest body a receiver accepts (64 MiB); ports may lower it. */
#define RL_WIRE_MAX_BODY (64u << 20)

typedef enum rl__wire_kind {
    RL_WIRE_ONEWAY = 1,  /* a message that wants no reply */
    RL_WIRE_REQUEST = 2, /* a message whose sender waits for a RL_WIRE_REPLY with its seq */
    RL_WIRE_REPLY = 3,   /* the answer to the request with the same seq */
    RL_WIRE_HELLO = 4,   /* first frame on a connection: component 0 names the sender */
} rl__wire_kind;

typedef enum rl__wire_ctype {
    RL_WIRE_DATA = 1, /* bytes */
    RL_WIRE_PORT = 2, /* a port, by its name (UTF-8, no NUL) */
} rl__wire_ctype;

typedef struct rl__wire_comp {
    uint8_t type;
    uint32_t len;
    const uint8_t *bytes; /* into the frame's body */
} rl__wire_comp;

typedef struct rl__wire_header {
    uint8_t kind;
    int32_t msgid;
    uint32_t seq;
    uint32_t ncomp;
    uint32_t bodylen;
} rl__wire_header;

/* What went wrong with a frame (0: nothing). */
typedef enum rl__wire_error {
    RL_WIRE_OK = 0,
    RL_WIRE_BAD_MAGIC,
    RL_WIRE_BAD_VERSION,
    RL_WIRE_BAD_FLAGS,
    RL_WIRE_BAD_KIND,
    RL_WIRE_TOO_BIG,
    RL_WIRE_TOO_MANY_COMPONENTS,
    RL_WIRE_BAD_COMPONENT,
    RL_WIRE_SHORT_BODY,
    RL_WIRE_LONG_BODY,
    RL_WIRE_NO_MEMORY,
    RL_WIRE_COMPONENT_LIMIT,
} rl__wire_error;

RL__HIDDEN const char *rl__wire_error_text(rl__wire_error e);

/* The size of a frame carrying these components. */
RL__HIDDEN size_t rl__wire_size(const rl__wire_comp *comps, uint32_t ncomp);

/* Writes the frame into out (rl__wire_size bytes); returns its size. */
RL__HIDDEN size_t rl__wire_encode(uint8_t *out, rl__wire_kind kind, int32_t msgid, uint32_t seq,
                                  const rl__wire_comp *comps, uint32_t ncomp);

/* ---- an incremental reader for one stream ---- */

enum { RL_WIRE_AHEAD = 1024 };

typedef struct rl__wire_reader {
    uint32_t max_body;
    /* most components a frame may have (0: as many as its body holds);
     * atomic: a port's setter may change it while a loop reads */
    _Atomic uint32_t max_comps;
    uint8_t hdr[RL_WIRE_HEADER];
    size_t got;        /* bytes of the current frame so far (header, then body) */
    rl__wire_header h;  /* valid once the header is complete */
    uint8_t *body;     /* malloc'ed once the header is complete */
    rl__wire_comp *comps;
    /* Bytes read from the stream ahead of what the frame wanted, not yet
     * handed to the reader: rl__read_frame (rl_conn.c) reads small wants
     * a buffer at a time, so a small frame costs one system call, not one
     * for its header and one for its body. The decoder above never sees
     * this buffer. */
    uint32_t ahead_off, ahead_len;
    bool ahead_short; /* the last read ahead got less than it asked: the stream had no more then */
    uint8_t ahead[RL_WIRE_AHEAD];
} rl__wire_reader;

/* A frame taken from a reader: the caller owns body and comps (one free
 * each: rl__wire_frame_free). */
typedef struct rl__wire_frame {
    rl__wire_header h;
    uint8_t *body;
    rl__wire_comp *comps;
} rl__wire_frame;

/* A reader with no component limit (set r->max_comps for one: it applies
 * from the next header on). */
RL__HIDDEN void rl__wire_reader_init(rl__wire_reader *r, uint32_t max_body);
RL__HIDDEN void rl__wire_reader_free(rl__wire_reader *r);
/* Where the next bytes of the stream go, and how many are wanted (> 0). */
RL__HIDDEN void rl__wire_want(rl__wire_reader *r, uint8_t **at, size_t *len);
/* n bytes were written where rl__wire_want said. Returns RL_WIRE_OK with
 * *done set when a whole frame is in (take it with rl__wire_take), with
 * *done clear when more is wanted; any other value: the stream is bad. */
RL__HIDDEN rl__wire_error rl__wire_got(rl__wire_reader *r, size_t n, bool *done);
/* Hands the complete frame over and readies the reader for the next. */
RL__HIDDEN void rl__wire_take(rl__wire_reader *r, rl__wire_frame *f);
/* True if the reader is between frames (a clean place for a stream to end). */
RL__HIDDEN bool rl__wire_idle(const rl__wire_reader *r);
RL__HIDDEN void rl__wire_frame_free(rl__wire_frame *f);

#endif /* CRUNLOOP_RL_WIRE_H */
