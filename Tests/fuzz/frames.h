/* frames.h — shared by the fuzz targets that dispatch frames
 * (fuzz_msgport.c, fuzz_sockport.c): the input cut into frames by the
 * wire reader, and a deep copy of a frame for the handler to compare
 * with, since dispatch takes the frame itself over. */
#ifndef FUZZ_FRAMES_H
#define FUZZ_FRAMES_H

#include "rl_fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* *copy: f's header, body and components, the components pointing into
 * the copy's own body. Aborts if memory runs out. */
static inline void frame_copy(rl__wire_frame *copy, const rl__wire_frame *f) {
    *copy = *f;
    size_t blen = f->h.bodylen;
    copy->body = malloc(blen ? blen : 1);
    copy->comps = malloc((f->h.ncomp ? f->h.ncomp : 1) * sizeof *copy->comps);
    if (!copy->body || !copy->comps) {
        fprintf(stderr, "frame_copy: malloc\n");
        abort();
    }
    if (blen)
        memcpy(copy->body, f->body, blen);
    for (uint32_t i = 0; i < f->h.ncomp; i++) {
        copy->comps[i] = f->comps[i];
        copy->comps[i].bytes = copy->body + (f->comps[i].bytes - f->body);
    }
}

/* Feeds data[*pos, size) to r, as a connection would, until r holds a
 * whole frame: true with it in *f (the caller's), false when the input ran
 * out or r refused it (where a server drops the connection). */
static inline bool frame_next(rl__wire_reader *r, const uint8_t *data, size_t size, size_t *pos, rl__wire_frame *f) {
    while (*pos < size) {
        uint8_t *at;
        size_t want;
        rl__wire_want(r, &at, &want);
        size_t n = want < size - *pos ? want : size - *pos;
        memcpy(at, data + *pos, n);
        *pos += n;
        bool done;
        if (rl__wire_got(r, n, &done) != RL_WIRE_OK)
            return false;
        if (done) {
            rl__wire_take(r, f);
            return true;
        }
    }
    return false;
}

/* Frees what frame_copy allocated. */
static inline void frame_copy_free(rl__wire_frame *copy) {
    free(copy->body);
    free(copy->comps);
}

#endif
