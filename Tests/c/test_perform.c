/* test_perform.c — perform requests: FIFO, modes, common modes (as of the
 * request), from another thread + WakeUp, blocks, teardown of pending ones. */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char trace[8192];

static void tr(const char *s) {
    if (trace[0])
        strcat(trace, " ");
    strcat(trace, s);
}

static int setup(void **state) {
    trace[0] = '\0';
    return 0;
}

static void fn_tr(void *info) { tr((const char *)info); }

/* A source nobody signals keeps a mode from being empty. */
static RLRunLoopSourceRef keep_mode(const char *mode) {
    RLRunLoopSourceContext c = {0};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), s, mode));
    return s;
}

static void unkeep(RLRunLoopSourceRef s) {
    RLRunLoopSourceInvalidate(s);
    RLRelease(s);
}

static void test_fifo_and_modes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k1 = keep_mode("PA"), k2 = keep_mode("PB");
    assert_true(RLRunLoopPerformFunction(rl, "PA", fn_tr, "a1"));
    assert_true(RLRunLoopPerformFunction(rl, "PB", fn_tr, "b1"));
    assert_true(RLRunLoopPerformFunction(rl, "PA", fn_tr, "a2"));
    assert_true(RLRunLoopPerformFunction(rl, "PB", fn_tr, "b2"));
    assert_true(RLRunLoopPerformFunction(rl, "PA", fn_tr, "a3"));
    assert_int_equal(RLRunLoopRunInMode("PA", 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(trace, "a1 a2 a3");
    assert_int_equal(RLRunLoopRunInMode("PB", 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(trace, "a1 a2 a3 b1 b2");
    unkeep(k1);
    unkeep(k2);
}

static void test_common_modes_when_the_request_runs(void **state) {
    /* As CF: a request for the common modes runs in any mode that is
     * common when the loop gets to it, even one made common afterwards. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k1 = keep_mode("CommonLate"), k2 = keep_mode("NotCommon");
    RLRunLoopSourceRef k3 = keep_mode(kRLRunLoopDefaultMode);
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopCommonModes, fn_tr, "c1"));
    assert_int_equal(RLRunLoopRunInMode("CommonLate", 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(trace, "");
    assert_true(RLRunLoopAddCommonMode(rl, "CommonLate"));
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopCommonModes, fn_tr, "c2"));
    assert_int_equal(RLRunLoopRunInMode("NotCommon", 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(trace, "");
    assert_int_equal(RLRunLoopRunInMode("CommonLate", 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(trace, "c1 c2");
    unkeep(k1);
    unkeep(k2);
    unkeep(k3);
}

static void test_blocks_keep_a_mode_alive(void **state) {
    /* As CF: queuing for a mode creates it, and a mode with only a request
     * in it is not empty: the request runs, then the run times out. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopPerformFunction(rl, "OnlyBlocks", fn_tr, "x"));
    assert_int_equal(RLRunLoopRunInMode("OnlyBlocks", 0.01, false), kRLRunLoopRunTimedOut);
    assert_string_equal(trace, "x");
    assert_int_equal(RLRunLoopRunInMode("OnlyBlocks", 0.01, false), kRLRunLoopRunFinished);
}

static void nested_perform(void *info) {
    tr("outer");
    RLRunLoopPerformFunction(RLRunLoopGetCurrent(), "PN", fn_tr, "queued-inside");
    RLRunLoopRunInMode("PN", 0, false);
}

static void test_perform_from_a_perform_and_nested(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = keep_mode("PN");
    assert_true(RLRunLoopPerformFunction(rl, "PN", nested_perform, NULL));
    assert_true(RLRunLoopPerformFunction(rl, "PN", fn_tr, "second"));
    assert_int_equal(RLRunLoopRunInMode("PN", 0, false), kRLRunLoopRunTimedOut);
    /* The nested run takes what was queued after the outer one detached
     * its batch, exactly as CF. */
    assert_string_equal(trace, "outer queued-inside second");
    unkeep(k);
}

struct producer {
    RLRunLoopRef rl;
    long n;
    long *counter;
};

static void count_fn(void *info) { (*(long *)info)++; }

static void *produce(void *arg) {
    struct producer *p = arg;
    for (long i = 0; i < p->n; i++) {
        RLRunLoopPerformFunction(p->rl, kRLRunLoopDefaultMode, count_fn, p->counter);
        RLRunLoopWakeUp(p->rl);
    }
    return NULL;
}

static void test_from_other_threads_with_wakeup(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = keep_mode(kRLRunLoopDefaultMode);
    long counter = 0;
    long n = rl_test_iters(100000);
    struct producer p[2] = {{rl, n, &counter}, {rl, n, &counter}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, produce, &p[i]), 0);
    double t0 = rl_test_now();
    while (counter < 2 * n && rl_test_now() - t0 < 60)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, false);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    assert_int_equal(counter, 2 * n);
    unkeep(k);
}

#if __BLOCKS__
static void test_blocks(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = keep_mode("Blk");
    __block int order = 0;
    __block int first = -1, second = -1;
    assert_true(RLRunLoopPerformBlock(rl, "Blk", ^{ first = order++; }));
    assert_true(RLRunLoopPerformBlock(rl, "Blk", ^{ second = order++; }));
    assert_int_equal(RLRunLoopRunInMode("Blk", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(first, 0);
    assert_int_equal(second, 1);
    unkeep(k);
}
#endif

static void *teardown_with_pending(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, fn_tr, "never");
#if __BLOCKS__
    char *big = strdup("captured");
    RLRunLoopPerformBlock(rl, "M", ^{ tr(big); });
    free(big); /* the block only holds the pointer; it never runs */
#endif
    return NULL;
}

static void test_pending_requests_dropped_at_thread_exit(void **state) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, teardown_with_pending, NULL), 0);
    pthread_join(t, NULL);
    assert_string_equal(trace, "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fifo_and_modes, setup),
        cmocka_unit_test_setup(test_common_modes_when_the_request_runs, setup),
        cmocka_unit_test_setup(test_blocks_keep_a_mode_alive, setup),
        cmocka_unit_test_setup(test_perform_from_a_perform_and_nested, setup),
        cmocka_unit_test_setup(test_from_other_threads_with_wakeup, setup),
#if __BLOCKS__
        cmocka_unit_test_setup(test_blocks, setup),
#endif
        cmocka_unit_test_setup(test_pending_requests_dropped_at_thread_exit, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
