/*
 * rl_chunkcache.c — a thread's cache of blocks of one kind: the slow
 * paths (rl_chunkcache.h has the rules and the inline fast paths).
 */
#include "rl_chunkcache.h"

#include <stdlib.h>

#if RL_TRICK_SOCK_RECYCLE /* a PLAIN build keeps no blocks */
/* A cache whose thread exits: its blocks freed, nothing kept after (a
 * later destructor's stream may still give blocks back: freed). */
static void chunkcache_free(void *p) {
    rl__chunkcache *c = p;
    c->closed = true;
    c->room = 0;
    for (rl__cached *b = c->top, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    c->top = NULL;
}
#endif

/* How many of the cache's blocks a take looks at after the first. */
enum { CHUNKCACHE_LOOK = 4 };

void *rl__chunkcache_take_slow(rl__chunkcache *c, size_t need, size_t least, size_t *size) {
#if RL_TRICK_SOCK_RECYCLE
    int look = CHUNKCACHE_LOOK;
    for (rl__cached **p = c->top ? &c->top->next : &c->top; *p && look-- > 0; p = &(*p)->next) {
        rl__cached *b = *p;
        if (b->size >= need) {
            *p = b->next;
            c->room += (uint32_t)b->size;
            *size = b->size;
            return b;
        }
    }
#else
    (void)c;
#endif
    size_t n = need < least ? least : need;
    void *b = malloc(n);
    if (b)
        *size = n;
    return b;
}

#if RL_TRICK_SOCK_RECYCLE
/* The kind's key, made once; false: none can be. */
static bool chunkcache_key(rl__chunkkind *k) {
    pthread_mutex_lock(&k->lock);
    if (!k->keyed && !k->failed) {
        k->keyed = pthread_key_create(&k->key, chunkcache_free) == 0;
        k->failed = !k->keyed;
    }
    bool keyed = k->keyed;
    pthread_mutex_unlock(&k->lock);
    return keyed;
}
#endif

void rl__chunkcache_give_slow(rl__chunkcache *c, rl__chunkkind *k, void *p, size_t size) {
#if RL_TRICK_SOCK_RECYCLE
    /* The thread's first block kept: its key set, so that its exit frees
     * what the cache then holds. */
    if (!c->keyed && !c->closed && size >= k->min_block && size <= k->max_block && size <= k->bytes &&
        chunkcache_key(k) && pthread_setspecific(k->key, c) == 0) {
        c->keyed = true;
        c->room = k->bytes;
        rl__chunkcache_give(c, k, p, size);
        return;
    }
#else
    (void)c, (void)k, (void)size;
#endif
    free(p);
}

size_t rl__chunkcache_count(const rl__chunkcache *c) {
    size_t n = 0;
    for (const rl__cached *b = c->top; b; b = b->next)
        n++;
    return n;
}

size_t rl__chunkcache_bytes(const rl__chunkcache *c) {
    size_t n = 0;
    for (const rl__cached *b = c->top; b; b = b->next)
        n += b->size;
    return n;
}
