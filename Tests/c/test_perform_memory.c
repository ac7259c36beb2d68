/* test_perform_memory.c — what a loop's perform queue holds (rl_pqueue.c),
 * counted by the queue itself (rl__perform_held_bytes), not by RSS: no
 * chunk before the first request; a small first chunk for a loop that
 * gets a request now and then (a worker thread's start); chunks that grow
 * to full size under a backlog and go back to a few once the loop sleeps;
 * block copies through malloc, not a 16 KiB slab, until a queue has seen
 * many. */
#include "testutil.h"

#include <crunloop/RLWorkerThread.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runloop_internal.h"

static size_t held(RLRunLoopRef rl, size_t *nchunks) { return rl__perform_held_bytes(&rl->pq, nchunks); }

static void nothing_timer(RLRunLoopTimerRef t, void *info) { (void)t, (void)info; }

/* A loop thread with one timer that runs its loop for a moment: its queue
 * never got a request. */
static void *never_asked_main(void *arg) {
    size_t *out = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, nothing_timer, NULL);
    RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
    out[0] = held(rl, &out[1]);
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    return NULL;
}

static void test_a_loop_never_asked_holds_no_chunk(void **state) {
    (void)state;
    size_t out[2] = {1, 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, never_asked_main, out), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 0);
}

static void nothing(void *arg) { (void)arg; }

/* Before: its start's one request left a 4 KiB chunk in every worker's
 * pool for good (two pages touched: most of what a worker thread cost
 * beyond a plain loop thread). Now: small chunks, and no bigger ones for
 * requests that come one at a time. */
static void test_a_started_worker_holds_small_chunks(void **state) {
    (void)state;
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "probe");
    assert_non_null(w);
    assert_true(RLWorkerThreadStart(w));
    RLRunLoopRef rl = RLWorkerThreadCopyRunLoop(w);
    assert_non_null(rl);
    /* Its start's request ran; a few more, one at a time. */
    for (int i = 0; i < 4; i++)
        assert_true(RLWorkerThreadPerformSync(w, nothing, NULL));
    rl_test_wait_until_waiting(rl);
    size_t nchunks, bytes = held(rl, &nchunks);
    if (nchunks > 2 || bytes > 2 * RL_PCHUNK_FIRST_BYTES)
        fail_msg("a sleeping worker holds %zu chunks, %zu bytes of perform queue", nchunks, bytes);
    RLRelease(rl);
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);
}

static void count_run(void *arg) { (*(long *)arg)++; }

/* A backlog grows the chunks to full size (few chunks for many requests),
 * and once the loop sleeps it keeps a few at most. */
static void test_a_backlog_grows_the_chunks_and_sleep_trims_them(void **state) {
    (void)state;
    enum { N = 10000 };
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    long ran = 0;
    for (int i = 0; i < N; i++)
        assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, count_run, &ran));
    size_t nchunks;
    size_t bytes = held(rl, &nchunks);
    /* 7 + 7 + 15 + 31 + 63 + 127 slots (the first chunk of an empty
     * queue does not grow the next), then 255 a chunk. */
    size_t small = 7 + 7 + 15 + 31 + 63 + 127, per = RL_PCHUNK_SLOTS_IN(RL_PCHUNK_BYTES);
    size_t full = (N - small + per - 1) / per;
    if (nchunks > 6 + full)
        fail_msg("%d requests in %zu chunks (at most %zu)", N, nchunks, 6 + full);
    assert_true(bytes < (size_t)N * sizeof(rl__pslot) + 2 * RL_PCHUNK_BYTES);
    /* Runs them, then sleeps a moment (the trim). */
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false), kRLRunLoopRunTimedOut);
    assert_int_equal(ran, N);
    bytes = held(rl, &nchunks);
    if (nchunks > 16 || bytes > 16 * RL_PCHUNK_BYTES)
        fail_msg("a sleeping loop keeps %zu chunks (%zu bytes) after a backlog", nchunks, bytes);
    /* The next request reuses a kept chunk. */
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, count_run, &ran));
    assert_int_equal(held(rl, NULL), bytes);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(ran, N + 1);
    rl_test_unkeep(keep);
}

#if __BLOCKS__
/* A loop handed a block with captures now and then: its copy is malloc'ed
 * (Block_copy), no 16 KiB slab made for it. Before: one slab, all its
 * pages touched, for the first such block. */
static void test_a_few_blocks_make_no_slab(void **state) {
    (void)state;
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "blocks");
    assert_non_null(w);
    assert_true(RLWorkerThreadStart(w));
    RLRunLoopRef rl = RLWorkerThreadCopyRunLoop(w);
    assert_non_null(rl);
    __block long ran = 0;
    long *seen = &ran;
    for (int i = 0; i < 8; i++)
        assert_true(RLWorkerThreadPerformBlockAsync(w, ^{ (*seen)++; }));
    assert_true(RLWorkerThreadPerformSync(w, nothing, NULL));
    assert_int_equal(ran, 8);
    rl_test_wait_until_waiting(rl);
    size_t bytes = held(rl, NULL);
    if (bytes > 8 * RL_PCHUNK_FIRST_BYTES)
        fail_msg("a worker that ran 8 blocks holds %zu bytes of perform queue", bytes);
    RLRelease(rl);
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_loop_never_asked_holds_no_chunk),
        cmocka_unit_test(test_a_started_worker_holds_small_chunks),
        cmocka_unit_test(test_a_backlog_grows_the_chunks_and_sleep_trims_them),
#if __BLOCKS__
        cmocka_unit_test(test_a_few_blocks_make_no_slab),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
