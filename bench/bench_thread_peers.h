/*
 * bench_thread_peers.h — what bench_thread.c (ours and raw pthreads) and
 * bench_thread_cf.c (CoreFoundation's run loop, from the Swift toolchain)
 * share. The CF peer lives in its own translation unit because CF's headers
 * and ours cannot meet in one file; this header includes neither.
 */
#ifndef BENCH_THREAD_PEERS_H
#define BENCH_THREAD_PEERS_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Monotonic nanoseconds (vDSO clock_gettime: ~20 ns, no system call). */
static inline int64_t bth_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Pins the calling thread to CPU `cpu` (no-op if cpu < 0); false if the
 * kernel refused. Both files are built with -D_GNU_SOURCE. */
static inline bool bth_pin_self(int cpu) {
    if (cpu < 0) return true;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* A CF worker thread: it sits in CFRunLoopRun, kept alive by a
 * never-signalled source, pinned to CPU `cpu` first (cpu < 0: not pinned).
 * NULL if CF could not be set up. */
typedef struct bth_cf_worker bth_cf_worker;
bth_cf_worker *bth_cf_worker_start(int cpu);
/* n perform round trips onto the worker, each CFRunLoopPerformBlock +
 * CFRunLoopWakeUp from the calling thread, whose block posts a semaphore
 * the caller waits on; out[i] = round-trip time in ns (out may be NULL for
 * a warm-up). */
void bth_cf_round_trips(bth_cf_worker *w, double *out, long n);
/* Stops the worker's loop and joins its thread. */
void bth_cf_worker_stop(bth_cf_worker *w);

#endif /* BENCH_THREAD_PEERS_H */
