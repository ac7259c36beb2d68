/* rl_pool.h — slab memory for the library's objects (rl_pool.c). */
#ifndef CRUNLOOP_RL_POOL_H
#define CRUNLOOP_RL_POOL_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

/* The largest object the pool serves (bigger ones use malloc). */
#define RL_POOL_MAX 1024

/* Whether objects of `size` bytes come from the pool: more than one cache
 * line, at most RL_POOL_MAX. */
RL__HIDDEN bool rl__pool_serves(size_t size);

/* A zeroed block of `size` bytes (rl__pool_serves(size)), starting on a
 * cache line; NULL if memory is short. Thread-safe. */
RL__HIDDEN void *rl__pool_alloc(size_t size);

/* Gives back a block from rl__pool_alloc. Thread-safe. */
RL__HIDDEN void rl__pool_free(void *p);

#endif
