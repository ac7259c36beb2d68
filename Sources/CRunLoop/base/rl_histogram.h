/*
 * rl_histogram.h — private: a latency histogram of fixed size with
 * log-linear buckets (as HdrHistogram does): each power of two of
 * nanoseconds is cut into RL_HIST_SUB equal buckets, so a value is kept to
 * within 1/RL_HIST_SUB of itself, from 1 ns to about 18 minutes (longer
 * values count in the last bucket; the maximum is kept exactly). One
 * thread records (relaxed stores, no read-modify-write); any thread may
 * read a copy (relaxed loads): a copy taken while a value is recorded may
 * miss that value, never tear one.
 */
#ifndef CRUNLOOP_RL_HISTOGRAM_H
#define CRUNLOOP_RL_HISTOGRAM_H

#include "internal.h"

#include <stdint.h>

enum {
    RL_HIST_SUB_BITS = 4,
    RL_HIST_SUB = 1 << RL_HIST_SUB_BITS,
    RL_HIST_TOP_BIT = 40, /* 2^40 ns ≈ 18 min */
    RL_HIST_BUCKETS = (RL_HIST_TOP_BIT - RL_HIST_SUB_BITS + 2) * RL_HIST_SUB,
};

typedef struct rl__histogram {
    _Atomic uint32_t count[RL_HIST_BUCKETS];
    _Atomic uint64_t total; /* values recorded */
    _Atomic uint64_t max;   /* ns */
} rl__histogram;

/* The bucket of a value in ns. */
static inline unsigned rl__hist_bucket(uint64_t ns) {
    if (ns < RL_HIST_SUB)
        return (unsigned)ns; /* exact below RL_HIST_SUB */
    unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
    if (msb > RL_HIST_TOP_BIT)
        return RL_HIST_BUCKETS - 1;
    unsigned shift = msb - RL_HIST_SUB_BITS;
    return (shift + 1) * RL_HIST_SUB + (unsigned)((ns >> shift) & (RL_HIST_SUB - 1));
}

/* Records one value (the recording thread only). */
static inline void rl__hist_record(rl__histogram *h, uint64_t ns) {
    _Atomic uint32_t *c = &h->count[rl__hist_bucket(ns)];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
    atomic_store_explicit(&h->total, atomic_load_explicit(&h->total, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (ns > atomic_load_explicit(&h->max, memory_order_relaxed))
        atomic_store_explicit(&h->max, ns, memory_order_relaxed);
}

/* The largest value a bucket holds, in ns. */
RL__HIDDEN uint64_t rl__hist_bucket_top(unsigned bucket);
/* Copies h into out (any thread). */
RL__HIDDEN void rl__hist_copy(const rl__histogram *h, rl__histogram *out);
/* out = a - b, bucket by bucket (b: an earlier copy of the same
 * histogram); the maximum is a's. */
RL__HIDDEN void rl__hist_sub(const rl__histogram *a, const rl__histogram *b, rl__histogram *out);
/* The value at quantile q (0..1) in ns: the top of the bucket it falls in,
 * never above the maximum; 0 for an empty histogram. */
RL__HIDDEN uint64_t rl__hist_quantile(const rl__histogram *h, double q);

#endif /* CRUNLOOP_RL_HISTOGRAM_H */
