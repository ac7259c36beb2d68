/* frame_copy.h — shared by the fuzz targets that dispatch frames
 * (fuzz_msgport.c, fuzz_sockport.c): a deep copy of a frame for the
 * handler to compare with, since dispatch takes the frame itself over. */
#ifndef FUZZ_FRAME_COPY_H
#define FUZZ_FRAME_COPY_H

#include "rl_fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* *copy: f's header, body and components, the components pointing into
 * the copy's own body. Aborts if memory runs out. */
static inline void frame_copy(rl_wire_frame *copy, const rl_wire_frame *f) {
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

/* Frees what frame_copy allocated. */
static inline void frame_copy_free(rl_wire_frame *copy) {
    free(copy->body);
    free(copy->comps);
}

#endif
