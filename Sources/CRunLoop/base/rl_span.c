/* rl_span.c — fd-indexed tables over the span of their fds (rl_span.h).
 *
 * A table of RL_SPAN_MAPPED bytes or more is a mapping of its own
 * (mmap, grown by mremap): its pages not written yet are the kernel's
 * zero pages, so a table doubled to fit one more fd costs memory only for
 * the pages of the records in use, and growing it neither copies nor
 * zeroes the rest, nor leaves the old copy behind in the heap (a server's
 * loop with 4,000 connections: its table's doublings left ~24 KB of heap
 * behind, 6 bytes a connection). Smaller tables (a loop watching a few
 * fds) stay in the heap. */
#include "rl_span.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Under AddressSanitizer, LeakSanitizer does not look inside mappings of
 * our own for pointers: a mapped table is registered with it as a root
 * region, so what its records point to (an io_uring registration's
 * read-ahead queue) is not reported as leaked while the table lives. */
#if defined(__SANITIZE_ADDRESS__)
#define SPAN_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPAN_LSAN 1
#endif
#endif
#ifdef SPAN_LSAN
#include <sanitizer/lsan_interface.h>
static void span_seen(const void *m, size_t bytes) { __lsan_register_root_region(m, bytes); }
static void span_unseen(const void *m, size_t bytes) { __lsan_unregister_root_region(m, bytes); }
#else
static void span_seen(const void *m, size_t bytes) { (void)m, (void)bytes; }
static void span_unseen(const void *m, size_t bytes) { (void)m, (void)bytes; }
#endif

/* Tables of at least this many bytes are mappings (a page). */
enum { RL_SPAN_MAPPED = 4096 };

static bool span_mapped(size_t bytes) { return bytes >= RL_SPAN_MAPPED; }

/* The table t of `old` bytes grown to `bytes` (more); what is past `old`
 * reads as zero unless `zeroed` is false. NULL: no memory (t unchanged). */
static char *span_grow(char *t, size_t old, size_t bytes, bool *zeroed) {
    if (!span_mapped(bytes)) {
        *zeroed = false;
        return realloc(t, bytes);
    }
    *zeroed = true;
    if (t && span_mapped(old)) {
        void *m = mremap(t, old, bytes, MREMAP_MAYMOVE);
        if (m == MAP_FAILED)
            return NULL;
        span_unseen(t, old);
        span_seen(m, bytes);
        return m;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    span_seen(m, bytes);
    if (t) {
        memcpy(m, t, old);
        free(t);
    }
    return m;
}

bool rl__span_room(void **tab, uint32_t *lo, uint32_t *n, size_t size, int fd) {
    uint32_t f = (uint32_t)fd;
    uint32_t first = *n ? *lo : f;
    uint32_t past = *n ? *lo + *n : f + 1; /* past the last */
    uint32_t nlo = f < first ? f : first;
    size_t need = (size_t)(f >= past ? f + 1 : past) - nlo;
    size_t cap = *n ? *n : 16;
    while (cap < need)
        cap *= 2;
    if (cap > UINT32_MAX)
        return false;
    size_t old = *n;
    bool zeroed;
    char *t = span_grow(*tab, old * size, cap * size, &zeroed);
    if (!t)
        return false;
    size_t shift = first - nlo;
    if (shift && old) {
        memmove(t + shift * size, t, old * size);
        zeroed = false; /* the records moved up leave their old places written */
    }
    memset(t, 0, shift * size);
    if (!zeroed)
        memset(t + (shift + old) * size, 0, (cap - shift - old) * size);
    *tab = t;
    *lo = nlo;
    *n = (uint32_t)cap;
    return true;
}

void rl__span_free(void *tab, uint32_t n, size_t size) {
    if (tab && span_mapped((size_t)n * size)) {
        span_unseen(tab, (size_t)n * size);
        (void)munmap(tab, (size_t)n * size);
    }
    else
        free(tab);
}
