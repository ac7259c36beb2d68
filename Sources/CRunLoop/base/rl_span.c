/* rl_span.c — fd-indexed tables over the span of their fds (rl_span.h). */
#include "rl_span.h"

#include <stdlib.h>
#include <string.h>

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
    char *t = realloc(*tab, cap * size);
    if (!t)
        return false;
    size_t shift = first - nlo, old = *n;
    if (shift && old)
        memmove(t + shift * size, t, old * size);
    memset(t, 0, shift * size);
    memset(t + (shift + old) * size, 0, (cap - shift - old) * size);
    *tab = t;
    *lo = nlo;
    *n = (uint32_t)cap;
    return true;
}
