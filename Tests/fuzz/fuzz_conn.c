/* fuzz_conn.c — libFuzzer target for the connection reader
 * (rl__read_frame in Sources/CRunLoop/ports/rl_conn.c) with its read-ahead: the
 * input is a byte stream as a peer would send it, written into a Unix
 * socket pair in pieces while the reader reads the other end. The first
 * byte picks the size of the pieces (whole, 1..15 bytes, or multiples of
 * 211 bytes, which straddle the read-ahead buffer's 1024).
 * Properties checked: no out-of-bounds access (ASan); every frame the
 * reader hands over re-encodes to exactly the next bytes of the stream; a
 * reader that says "no more now" holds no bytes read ahead; one that says
 * the stream was drained after a frame reads nothing more until more is
 * written; at the end of the stream, it says the peer closed the connection
 * cleanly exactly when every byte went into a frame.
 */
#include "rl_conn.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void check(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_conn: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    size_t piece = data[0] & 15;
    if (data[0] & 16)
        piece = (piece + 1) * 211;
    data++;
    size--;
    if (piece == 0)
        piece = size ? size : 1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    int sndbuf = 1 << 20;
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    rl__wire_reader rd;
    rl__wire_reader_init(&rd, 1u << 16);
    size_t written = 0, framed = 0;
    bool shut = false, over = false;
    while (!over) {
        /* the next piece, or the end of the stream */
        if (written < size) {
            size_t n = size - written < piece ? size - written : piece;
            ssize_t w = send(sv[1], data + written, n, MSG_NOSIGNAL);
            check(w > 0, "the socket pair took nothing");
            written += (size_t)w;
        } else if (!shut) {
            check(shutdown(sv[1], SHUT_WR) == 0, "shutdown");
            shut = true;
        }
        /* read what is there */
        for (;;) {
            rl__wire_frame f;
            const char *why = NULL;
            int r = rl__read_frame(sv[0], &rd, &f, &why);
            if (r == 0) {
                check(!rl__read_pending(&rd), "no more, with bytes read ahead");
                check(!shut, "no more after the end of the stream");
                break;
            }
            if (r < 0) {
                check(why != NULL, "a bad stream without a reason");
                if (shut && written == size && strcmp(why, "peer closed the connection") == 0)
                    check(framed == size, "a clean end with bytes not in a frame");
                if (shut && framed == size)
                    check(strcmp(why, "peer closed the connection") == 0, "every byte framed, yet not a clean end");
                over = true;
                break;
            }
            size_t len = rl__wire_size(f.comps, f.h.ncomp);
            check(len <= written - framed, "a frame longer than what was written");
            uint8_t *again = malloc(len);
            check(again != NULL, "malloc");
            rl__wire_encode(again, f.h.kind, f.h.msgid, f.h.seq, f.comps, f.h.ncomp);
            check(memcmp(again, data + framed, len) == 0, "a frame that does not re-encode to its bytes");
            free(again);
            rl__wire_frame_free(&f);
            framed += len;
            if (rl__read_drained(&rd) && !shut) {
                /* the stream was empty: nothing more until the next piece */
                rl__wire_frame g;
                int r2 = rl__read_frame(sv[0], &rd, &g, &why);
                check(r2 != 1, "a frame after the reader said the stream was drained");
                if (r2 < 0) {
                    over = true;
                    break;
                }
            }
        }
    }
    rl__wire_reader_free(&rd);
    close(sv[0]);
    close(sv[1]);
    return 0;
}
