/* rl_pool.h — slab memory for the library's objects (rl_pool.c). */
#ifndef CRUNLOOP_RL_POOL_H
#define CRUNLOOP_RL_POOL_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>

/* The largest object the pool serves (bigger ones use malloc, without the
 * pool's quarantine of released slots). */
#define RL_POOL_MAX 2048

/* Whether objects of `size` bytes come from the pool: at most RL_POOL_MAX. */
RL__HIDDEN bool rl__pool_serves(size_t size);

/* A block of `size` bytes (rl__pool_serves(size)), starting on a cache
 * line, with its first `zero` bytes zeroed (the caller fills the rest at
 * once); NULL if memory is short. Thread-safe. */
RL__HIDDEN void *rl__pool_alloc_zeroing(size_t size, size_t zero);

/* The same, from a class that fits `size` to 16 bytes where that saves
 * memory (sizes of 129 to 256 bytes): the block starts on a 16-byte
 * boundary, not a line. For objects made by the 100,000 (timers). */
RL__HIDDEN void *rl__pool_alloc_packed(size_t size, size_t zero);

/* Gives back a block from rl__pool_alloc_zeroing. The block is not handed out
 * again before RL_QUARANTINE (rl_pool.c) more blocks of its size class
 * were given back by the same thread (after that thread's exit: by any),
 * so a stale pointer to it keeps reading the object header it had when it
 * was released. Thread-safe. */
RL__HIDDEN void rl__pool_free(void *p);

/* The bytes of the block p (from rl__pool_alloc_zeroing) takes: its size
 * class. For the tests that count an object's memory. */
RL__HIDDEN size_t rl__pool_block_size(const void *p);

/* What the pool holds now, for tests of its ceilings: its slabs (64 KiB
 * each) and the bytes of every living thread's caches; and the size of one
 * quarantine ring (a thread has one per class it released objects of;
 * longer under AddressSanitizer). Any of them may be NULL. */
RL__HIDDEN void rl__pool_stats(long *slabs, long *cache_bytes, long *ring_bytes);

#endif
