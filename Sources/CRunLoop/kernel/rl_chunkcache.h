/*
 * rl_chunkcache.h — private: a thread's cache of malloc'd blocks of one
 * kind (rl_chunkcache.c), so that a stream's buffers are the thread's,
 * not the stream's: a chunk a loop's thread is done with waits here for
 * the next one it makes, whichever stream that is for, and an idle stream
 * holds no buffer. The ring's receive chunks (rl_rxq.c) and
 * send chunks (rl_txq.c) have one each.
 *
 * A cache is one thread's (a `static __thread` rl__chunkcache, zeroed),
 * of one kind (an rl__chunkkind, static, shared by the threads): it keeps
 * blocks of kind->min_block to kind->max_block bytes, kind->bytes in all
 * at most,
 * and frees them when its thread exits (a key of the kind's, made on the
 * first block kept). A block a cache does not keep is freed. While kept,
 * a block's first 16 bytes are the cache's (its link and size): the
 * caller's fields there are set again when it takes the block back.
 * Only its own thread touches a cache. Part of RL_TRICK_SOCK_RECYCLE: the
 * plain build keeps nothing (each take is a malloc, each give a free).
 */
#ifndef CRUNLOOP_RL_CHUNKCACHE_H
#define CRUNLOOP_RL_CHUNKCACHE_H

#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rl__cached {
    struct rl__cached *next;
    size_t size; /* the block's bytes, as given back */
} rl__cached;

typedef struct rl__chunkkind {
    uint32_t min_block; /* smaller blocks are not kept (at least sizeof(rl__cached)) */
    uint32_t max_block; /* larger blocks are not kept */
    uint32_t bytes;     /* what one thread keeps at most */
    pthread_mutex_t lock; /* making the key (PTHREAD_MUTEX_INITIALIZER) */
    pthread_key_t key;
    bool keyed;         /* key made */
    bool failed;        /* no key could be made: nothing is kept */
} rl__chunkkind;

typedef struct rl__chunkcache {
    rl__cached *top;
    uint32_t room; /* bytes it may keep yet (0 until its thread's key is set) */
    bool keyed;    /* its thread's key holds it: freed at the thread's exit */
    bool closed;   /* the thread is exiting: nothing more kept */
} rl__chunkcache;

/* A block of at least `need` bytes (*size: its bytes), one of the
 * cache's if one of the first few fits, else a new one of
 * max(need, least) bytes; NULL: no memory. */
RL__HIDDEN void *rl__chunkcache_take_slow(rl__chunkcache *c, size_t need, size_t least, size_t *size);
static inline void *rl__chunkcache_take(rl__chunkcache *c, size_t need, size_t least, size_t *size) {
#if RL_TRICK_SOCK_RECYCLE
    rl__cached *b = c->top;
    if (RL__LIKELY(b != NULL && b->size >= need)) {
        c->top = b->next;
        c->room += (uint32_t)b->size;
        *size = b->size;
        return b;
    }
#endif
    return rl__chunkcache_take_slow(c, need, least, size);
}

/* The caller is done with block p of `size` bytes (as take gave it):
 * kept, or freed. */
RL__HIDDEN void rl__chunkcache_give_slow(rl__chunkcache *c, rl__chunkkind *k, void *p, size_t size);
static inline void rl__chunkcache_give(rl__chunkcache *c, rl__chunkkind *k, void *p, size_t size) {
#if RL_TRICK_SOCK_RECYCLE
    if (RL__LIKELY(size <= c->room) && size - k->min_block <= (size_t)(k->max_block - k->min_block)) {
        rl__cached *b = p;
        b->size = size;
        b->next = c->top;
        c->top = b;
        c->room -= (uint32_t)size;
        return;
    }
#endif
    rl__chunkcache_give_slow(c, k, p, size);
}

/* The blocks the cache keeps now, and their bytes (for the tests). */
RL__HIDDEN size_t rl__chunkcache_count(const rl__chunkcache *c);
RL__HIDDEN size_t rl__chunkcache_bytes(const rl__chunkcache *c);

#endif /* CRUNLOOP_RL_CHUNKCACHE_H */
