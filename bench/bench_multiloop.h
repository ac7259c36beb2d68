/*
 * bench_multiloop.h — the multi-loop benchmark: K threads, each running its
 * own loop and touching nothing but it, as a server with one loop per core
 * does. Each operation below is timed for K = 1, 2, 4, 8 and reported as
 * aggregate operations per second over all K threads; a library whose
 * loops share no state scales with the cores (this machine: 2) and holds
 * that rate beyond them.
 *
 * Every peer implements bml_peer in its own translation unit
 * (bench_multiloop_cf.c is built twice: CoreFoundation with -DBRL_CF, ours
 * through cf_compat.h; bench_multiloop_uv.c: K independent uv_loop_t), and
 * bench_multiloop.c runs them all in one process.
 */
#ifndef BENCH_MULTILOOP_H
#define BENCH_MULTILOOP_H

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

enum bml_op {
    BML_TIMER,   /* add a (far-future) timer to the loop, then remove it: one op */
    BML_PERFORM, /* queue a request to the thread's own loop; a pass runs each batch */
    BML_SIGNAL,  /* signal a source of the loop, then run one pass that performs it */
    BML_MOVE,    /* move a timer in the loop to a new (far-future) date: an idle timeout pushed back */
    BML_FIRE,    /* make a timer in the loop due, then run one pass that fires it */
    BML_CREATE,  /* create a timer and release it (a one-shot timeout per request starts so) */
    BML_NOPS
};

/* Requests queued per pass in BML_PERFORM. */
enum { BML_BATCH = 16 };

typedef struct bml_peer {
    const char *name;
    /* Per thread: set up its loop (arg: the thread's own state, from
     * setup), run n operations of kind op, tear down. NULL setup: the peer
     * has no equivalent of op. */
    void *(*setup)(enum bml_op op);
    void (*run)(void *state, enum bml_op op, long n);
    void (*finish)(void *state, enum bml_op op);
} bml_peer;

extern const bml_peer bml_peer_rl;
extern const bml_peer bml_peer_cf;
extern const bml_peer bml_peer_uv;

static inline double bml_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* BENCH_MULTILOOP_H */
