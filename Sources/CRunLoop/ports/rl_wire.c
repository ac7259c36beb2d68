/* rl_wire.c — encoding and checking port message frames (rl_wire.h). */
#include "rl_wire.h"

#include <stdlib.h>
#include <string.h>

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

const char *rl__wire_error_text(rl__wire_error e) {
    switch (e) {
    case RL_WIRE_OK: return "no error";
    case RL_WIRE_BAD_MAGIC: return "not a port message (bad magic)";
    case RL_WIRE_BAD_VERSION: return "unknown frame version";
    case RL_WIRE_BAD_FLAGS: return "unknown frame flags";
    case RL_WIRE_BAD_KIND: return "unknown frame kind";
    case RL_WIRE_TOO_BIG: return "frame larger than the receiver's limit";
    case RL_WIRE_TOO_MANY_COMPONENTS: return "more components than the body can hold";
    case RL_WIRE_BAD_COMPONENT: return "component of unknown type or with non-zero padding";
    case RL_WIRE_SHORT_BODY: return "components run past the end of the body";
    case RL_WIRE_LONG_BODY: return "bytes left over after the last component";
    case RL_WIRE_NO_MEMORY: return "out of memory for the frame";
    case RL_WIRE_COMPONENT_LIMIT: return "more components than the receiver accepts";
    }
    return "unknown frame error";
}

/* Checks a header; fills *h. max_body: the receiver's limit. */
static rl__wire_error wire_parse_header(const uint8_t hdr[RL_WIRE_HEADER], uint32_t max_body, rl__wire_header *h) {
    if (get32(hdr) != RL_WIRE_MAGIC)
        return RL_WIRE_BAD_MAGIC;
    if (hdr[4] != RL_WIRE_VERSION)
        return RL_WIRE_BAD_VERSION;
    if (hdr[6] != 0 || hdr[7] != 0)
        return RL_WIRE_BAD_FLAGS;
    if (hdr[5] < RL_WIRE_ONEWAY || hdr[5] > RL_WIRE_HELLO)
        return RL_WIRE_BAD_KIND;
    h->kind = hdr[5];
    h->msgid = (int32_t)get32(hdr + 8);
    h->seq = get32(hdr + 12);
    h->ncomp = get32(hdr + 16);
    h->bodylen = get32(hdr + 20);
    if (h->bodylen > max_body)
        return RL_WIRE_TOO_BIG;
    /* Every component takes at least its own header: this bounds the
     * component array a receiver allocates by the body it accepted. */
    if (h->ncomp > h->bodylen / RL_WIRE_CHEADER)
        return RL_WIRE_TOO_MANY_COMPONENTS;
    return RL_WIRE_OK;
}

/* Splits a body of h->bodylen bytes into h->ncomp components (comps has
 * room for them), checking that they fill it exactly. */
static rl__wire_error wire_parse_body(const rl__wire_header *h, const uint8_t *body, rl__wire_comp *comps) {
    size_t off = 0;
    for (uint32_t i = 0; i < h->ncomp; i++) {
        if (h->bodylen - off < RL_WIRE_CHEADER)
            return RL_WIRE_SHORT_BODY;
        const uint8_t *c = body + off;
        if ((c[0] != RL_WIRE_DATA && c[0] != RL_WIRE_PORT) || c[1] || c[2] || c[3])
            return RL_WIRE_BAD_COMPONENT;
        uint32_t len = get32(c + 4);
        off += RL_WIRE_CHEADER;
        if (len > h->bodylen - off)
            return RL_WIRE_SHORT_BODY;
        comps[i] = (rl__wire_comp){c[0], len, body + off};
        off += len;
    }
    return off == h->bodylen ? RL_WIRE_OK : RL_WIRE_LONG_BODY;
}

size_t rl__wire_size(const rl__wire_comp *comps, uint32_t ncomp) {
    size_t n = RL_WIRE_HEADER;
    for (uint32_t i = 0; i < ncomp; i++)
        n += RL_WIRE_CHEADER + comps[i].len;
    return n;
}

size_t rl__wire_encode(uint8_t *out, rl__wire_kind kind, int32_t msgid, uint32_t seq, const rl__wire_comp *comps,
                       uint32_t ncomp) {
    size_t total = rl__wire_size(comps, ncomp);
    put32(out, RL_WIRE_MAGIC);
    out[4] = RL_WIRE_VERSION;
    out[5] = (uint8_t)kind;
    out[6] = out[7] = 0;
    put32(out + 8, (uint32_t)msgid);
    put32(out + 12, seq);
    put32(out + 16, ncomp);
    put32(out + 20, (uint32_t)(total - RL_WIRE_HEADER));
    uint8_t *p = out + RL_WIRE_HEADER;
    for (uint32_t i = 0; i < ncomp; i++) {
        p[0] = comps[i].type;
        p[1] = p[2] = p[3] = 0;
        put32(p + 4, comps[i].len);
        if (comps[i].len)
            memcpy(p + RL_WIRE_CHEADER, comps[i].bytes, comps[i].len);
        p += RL_WIRE_CHEADER + comps[i].len;
    }
    return total;
}

/* ---- the reader ---- */

void rl__wire_reader_init(rl__wire_reader *r, uint32_t max_body) {
    memset(r, 0, sizeof *r);
    r->max_body = max_body;
}

void rl__wire_reader_free(rl__wire_reader *r) {
    free(r->body);
    free(r->comps);
    r->body = NULL;
    r->comps = NULL;
    r->got = 0;
    r->ahead_off = r->ahead_len = 0;
    r->ahead_short = false;
}

void rl__wire_want(rl__wire_reader *r, uint8_t **at, size_t *len) {
    if (r->got < RL_WIRE_HEADER) {
        *at = r->hdr + r->got;
        *len = RL_WIRE_HEADER - r->got;
    } else {
        size_t in_body = r->got - RL_WIRE_HEADER;
        *at = r->body + in_body;
        *len = r->h.bodylen - in_body;
    }
}

static rl__wire_error header_done(rl__wire_reader *r, bool *done) {
    rl__wire_error e = wire_parse_header(r->hdr, r->max_body, &r->h);
    if (e)
        return e;
    /* Refused before anything is allocated or read for the body. */
    uint32_t max_comps = atomic_load_explicit(&r->max_comps, memory_order_relaxed);
    if (max_comps && r->h.ncomp > max_comps)
        return RL_WIRE_COMPONENT_LIMIT;
    /* malloc(0) may return NULL: keep one byte so a NULL always means failure. */
    r->body = r->h.bodylen ? malloc(r->h.bodylen) : calloc(1, 1);
    r->comps = malloc((r->h.ncomp ? r->h.ncomp : 1) * sizeof *r->comps);
    if (!r->body || !r->comps)
        return RL_WIRE_NO_MEMORY;
    *done = r->h.bodylen == 0;
    return *done ? wire_parse_body(&r->h, r->body, r->comps) : RL_WIRE_OK;
}

rl__wire_error rl__wire_got(rl__wire_reader *r, size_t n, bool *done) {
    *done = false;
    bool had_header = r->got >= RL_WIRE_HEADER;
    r->got += n;
    if (!had_header) {
        /* Refuse a stream that is not ours as soon as its first bytes say
         * so, rather than after a whole header's worth (a peer speaking
         * another protocol may send fewer). */
        uint8_t magic[4] = {(uint8_t)RL_WIRE_MAGIC, (uint8_t)(RL_WIRE_MAGIC >> 8), (uint8_t)(RL_WIRE_MAGIC >> 16),
                            (uint8_t)(RL_WIRE_MAGIC >> 24)};
        if (memcmp(r->hdr, magic, r->got < 4 ? r->got : 4) != 0)
            return RL_WIRE_BAD_MAGIC;
        return r->got == RL_WIRE_HEADER ? header_done(r, done) : RL_WIRE_OK;
    }
    if (r->got - RL_WIRE_HEADER < r->h.bodylen)
        return RL_WIRE_OK;
    *done = true;
    return wire_parse_body(&r->h, r->body, r->comps);
}

void rl__wire_take(rl__wire_reader *r, rl__wire_frame *f) {
    f->h = r->h;
    f->body = r->body;
    f->comps = r->comps;
    r->body = NULL;
    r->comps = NULL;
    r->got = 0;
}

bool rl__wire_idle(const rl__wire_reader *r) { return r->got == 0; }

void rl__wire_frame_free(rl__wire_frame *f) {
    free(f->body);
    free(f->comps);
    f->body = NULL;
    f->comps = NULL;
}
