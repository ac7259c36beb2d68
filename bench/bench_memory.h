/*
 * bench_memory.h — the memory benchmark's run-loop scenarios, that
 * bench_memory_cf.c implements twice (CoreFoundation's run loop from the
 * Swift toolchain with -DBM_CF, ours through cf_compat.h without), the way
 * bench_runloop_cf.c is built. bench_memory.c has libuv's, GLib's and the
 * driver.
 */
#ifndef BENCH_MEMORY_H
#define BENCH_MEMORY_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct bm_peer {
    const char *name;
    /* Adds n one-shot timers, an hour away, to the calling thread's loop
     * (the loop keeps them; nothing is released). 0, or -1. */
    int (*timers)(long n);
    /* Starts one detached thread with a stack of `stack` bytes that gets its
     * loop, adds one timer an hour away, adds 1 to *ready and runs its loop
     * for ever. 0, or -1. */
    int (*thread)(size_t stack, atomic_long *ready);
} bm_peer;

extern const bm_peer bm_peer_rl;
extern const bm_peer bm_peer_cf;

/* bench_memory_example.c: starts the shipped echo server
 * (examples/c/echo_server.c) on a thread of this process, listening on
 * 127.0.0.1; its port into *port. 0, or -1. */
int bm_example_start(unsigned *port);

#endif /* BENCH_MEMORY_H */
