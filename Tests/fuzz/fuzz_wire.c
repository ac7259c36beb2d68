/* fuzz_wire.c — libFuzzer target for the port message frame reader
 * (Sources/CRunLoop/ports/rl_wire.c). The input is a byte stream as a peer
 * would send it; its first byte picks how the stream is cut into reads
 * (1..16 bytes, or whole), so partial reads are exercised too.
 * Properties checked: the reader never reads or writes out of bounds (ASan),
 * never accepts a frame whose components do not fill its body, and every
 * frame it accepts re-encodes to exactly the bytes it was read from.
 */
#include "rl_wire.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    size_t step = data[0] % 17; /* 0: as much as wanted */
    data++;
    size--;
    rl__wire_reader r;
    rl__wire_reader_init(&r, 1u << 16);
    size_t pos = 0, frame_start = 0;
    while (pos < size) {
        uint8_t *at;
        size_t want;
        rl__wire_want(&r, &at, &want);
        size_t n = want;
        if (step && n > step)
            n = step;
        if (n > size - pos)
            n = size - pos;
        memcpy(at, data + pos, n);
        pos += n;
        bool done;
        if (rl__wire_got(&r, n, &done) != RL_WIRE_OK)
            break; /* refused: a real port drops the connection here */
        if (!done)
            continue;
        rl__wire_frame f;
        rl__wire_take(&r, &f);
        size_t len = rl__wire_size(f.comps, f.h.ncomp);
        if (len != pos - frame_start)
            abort();
        uint8_t *again = malloc(len);
        rl__wire_encode(again, f.h.kind, f.h.msgid, f.h.seq, f.comps, f.h.ncomp);
        if (memcmp(again, data + frame_start, len) != 0)
            abort();
        free(again);
        rl__wire_frame_free(&f);
        frame_start = pos;
    }
    rl__wire_reader_free(&r);
    return 0;
}
