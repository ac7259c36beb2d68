/*
 * rl_span.h — private: a table of records indexed by fd number that spans
 * the lowest to the highest fd it holds, not every number from 0 (a loop's
 * fd table, rl_fdtab.c; the io_uring backend's registrations): a loop made
 * in a process with hundreds of fds open watches a few high numbers and
 * holds records for those. Implemented in rl_span.c.
 */
#ifndef CRUNLOOP_RL_SPAN_H
#define CRUNLOOP_RL_SPAN_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* Room in the table *tab (*n records of `size` bytes, the first for fd
 * *lo) for fd (>= 0) that it has no record for: the first fd gets 16
 * records from its own number up; a higher one doubles the table until it
 * fits, a lower one moves the records up to start the table at it. New
 * records are zeroed. False: out of memory (nothing changed). A table of
 * a page or more is a mapping of its own whose pages cost memory only
 * once written (rl_span.c): free it with rl__span_free. */
RL__HIDDEN bool rl__span_room(void **tab, uint32_t *lo, uint32_t *n, size_t size, int fd);
/* Frees a table made by rl__span_room (*n records of `size` bytes). */
RL__HIDDEN void rl__span_free(void *tab, uint32_t n, size_t size);

#endif /* CRUNLOOP_RL_SPAN_H */
