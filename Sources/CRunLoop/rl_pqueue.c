/* rl_pqueue.c — the perform queue's chunks: the lock, the pool, teardown.
 * See rl_pqueue.h. */
#include "rl_pqueue.h"

#include "internal.h"

#include <sched.h>
#include <stdlib.h>

/* Empty chunks kept per queue while its loop runs (the rest go back to
 * malloc): 4 MiB, a backlog of ~260k requests. Giving memory back to
 * malloc and taking it again costs page faults (glibc returns the top of
 * its heap to the kernel), so a busy loop keeps what it uses, and gives it
 * back when it goes to sleep (rl_perform_trim in RLRunLoop.c). */
enum { RL_PQ_POOL_MAX = 1024 };

/* Critical sections are a few stores, so spinning beats a mutex at millions
 * of requests a second; after a short spin it yields, so that a preempted
 * holder costs little. */
void rl_pq_lock(rl_pqueue *pq) {
    for (int spins = 0;;) {
        if (!atomic_exchange_explicit(&pq->lock, 1, memory_order_acquire))
            return;
        while (atomic_load_explicit(&pq->lock, memory_order_relaxed)) {
            if (++spins > 64)
                sched_yield();
            else
                rl__cpu_relax();
        }
    }
}

bool rl_pq_grow(rl_pqueue *pq) {
    rl_pchunk *c = malloc(sizeof *c);
    if (!c)
        return false;
    /* Fault its pages in now, not under the lock with a push. */
    volatile unsigned char *bytes = (volatile unsigned char *)c;
    bytes[0] = 0;
    bytes[sizeof *c - 1] = 0;
    rl_pq_lock(pq);
    rl_flist_push(&pq->pool, c);
    rl_pq_unlock(pq);
    return true;
}

void *rl_flist_fill(rl_flist *l, void *first, uint32_t max) {
    while (first && l->n < max) {
        void *next = *(void **)first;
        rl_flist_push(l, first);
        first = next;
    }
    return first;
}

void *rl_flist_cut(rl_flist *l, uint32_t keep) {
    void *cut = NULL;
    while (l->n > keep) {
        void *block = rl_flist_pop(l);
        *(void **)block = cut;
        cut = block;
    }
    return cut;
}

void rl_flist_free(void *first) {
    while (first) {
        void *next = *(void **)first;
        free(first);
        first = next;
    }
}

rl_pchunk *rl_pq_recycle_locked(rl_pqueue *pq, rl_pchunk *first) {
    return rl_flist_fill(&pq->pool, first, RL_PQ_POOL_MAX);
}

void rl_pq_recycle(rl_pqueue *pq, rl_pchunk *first) {
    if (!first)
        return;
    rl_pq_lock(pq);
    first = rl_pq_recycle_locked(pq, first);
    rl_pq_unlock(pq);
    rl_flist_free(first);
}

void rl_pq_destroy(rl_pqueue *pq) {
    rl_flist_free(pq->q.head);
    rl_flist_free(rl_flist_cut(&pq->pool, 0));
    pq->q.head = pq->q.tail = NULL;
}
