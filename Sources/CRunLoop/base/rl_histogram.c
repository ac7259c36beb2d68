/*
 * rl_histogram.c — reading the log-linear latency histograms
 * (rl_histogram.h; recording is inline there).
 */
#include "rl_histogram.h"

#include <math.h>

uint64_t rl__hist_bucket_top(unsigned bucket) {
    if (bucket < RL_HIST_SUB)
        return bucket;
    unsigned shift = bucket / RL_HIST_SUB - 1;
    uint64_t sub = bucket % RL_HIST_SUB;
    /* The bucket holds [(SUB + sub) << shift, (SUB + sub + 1) << shift). */
    return (((uint64_t)RL_HIST_SUB + sub + 1) << shift) - 1;
}

void rl__hist_copy(const rl__histogram *h, rl__histogram *out) {
    for (unsigned i = 0; i < RL_HIST_BUCKETS; i++)
        atomic_store_explicit(&out->count[i], atomic_load_explicit(&h->count[i], memory_order_relaxed),
                              memory_order_relaxed);
    atomic_store_explicit(&out->total, atomic_load_explicit(&h->total, memory_order_relaxed), memory_order_relaxed);
    atomic_store_explicit(&out->max, atomic_load_explicit(&h->max, memory_order_relaxed), memory_order_relaxed);
}

void rl__hist_sub(const rl__histogram *a, const rl__histogram *b, rl__histogram *out) {
    uint64_t total = 0;
    for (unsigned i = 0; i < RL_HIST_BUCKETS; i++) {
        uint32_t x = atomic_load_explicit(&a->count[i], memory_order_relaxed);
        uint32_t y = atomic_load_explicit(&b->count[i], memory_order_relaxed);
        uint32_t d = x >= y ? x - y : 0;
        atomic_store_explicit(&out->count[i], d, memory_order_relaxed);
        total += d;
    }
    atomic_store_explicit(&out->total, total, memory_order_relaxed);
    atomic_store_explicit(&out->max, total ? atomic_load_explicit(&a->max, memory_order_relaxed) : 0,
                          memory_order_relaxed);
}

uint64_t rl__hist_quantile(const rl__histogram *h, double q) {
    uint64_t total = 0;
    for (unsigned i = 0; i < RL_HIST_BUCKETS; i++)
        total += atomic_load_explicit(&h->count[i], memory_order_relaxed);
    if (total == 0)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    /* The rank of the value asked for, 1-based: the smallest whose share
     * of the values at or below it reaches q. */
    uint64_t rank = (uint64_t)ceil(q * (double)total);
    if (rank == 0)
        rank = 1;
    uint64_t max = atomic_load_explicit(&h->max, memory_order_relaxed);
    uint64_t seen = 0;
    for (unsigned i = 0; i < RL_HIST_BUCKETS; i++) {
        seen += atomic_load_explicit(&h->count[i], memory_order_relaxed);
        if (seen >= rank) {
            uint64_t top = rl__hist_bucket_top(i);
            return top < max ? top : max;
        }
    }
    return max;
}
