/*
 * bench_memory_example.c — the shipped echo server (examples/c/echo_server.c,
 * installed as crunloop-echo-server), included unchanged as
 * Tests/c/test_echo.c does, started on a thread of the bench's process, so
 * that bench_memory's "shipped" connection row counts what a user running
 * that command spends per idle connection: the library's part and the
 * server's own.
 */
#define main echo_server_main
#include "../examples/c/echo_server.c"
#undef main

#include <pthread.h>

#include "bench_memory.h"

static void *example_thread(void *arg) {
    FILE *out = arg;
    (void)echo_server_run("127.0.0.1", 0, false, out);
    return NULL;
}

int bm_example_start(unsigned *port) {
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    FILE *out = fdopen(fds[1], "w");
    FILE *in = fdopen(fds[0], "r");
    if (!out || !in)
        return -1;
    pthread_t t;
    if (pthread_create(&t, NULL, example_thread, out) != 0)
        return -1;
    pthread_detach(t);
    /* Its first line: "listening on PORT". The server runs until the
     * measuring process exits. */
    return fscanf(in, "listening on %u", port) == 1 ? 0 : -1;
}
