/* test_perform.c — perform requests: FIFO, modes, common modes (as of the
 * request), from another thread + WakeUp, blocks, teardown of pending ones. */
#include "testutil.h"
#include "trace.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fn_tr(void *info) { rl_trace_add((const char *)info); }

static void test_fifo_and_modes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k1 = rl_test_keep_mode("PA"), k2 = rl_test_keep_mode("PB");
    assert_true(RLRunLoopPerformFunction(rl, "PA", fn_tr, "a1"));
    assert_true(RLRunLoopPerformFunction(rl, "PB", fn_tr, "b1"));
    assert_true(RLRunLoopPerformFunction(rl, "PA", fn_tr, "a2"));
    assert_true(RLRunLoopPerformFunction(rl, "PB", fn_tr, "b2"));
    assert_true(RLRunLoopPerformFunction(rl, "PA", fn_tr, "a3"));
    assert_int_equal(RLRunLoopRunInMode("PA", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("a1 a2 a3");
    assert_int_equal(RLRunLoopRunInMode("PB", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("a1 a2 a3 b1 b2");
    rl_test_unkeep(k1);
    rl_test_unkeep(k2);
}

static void test_common_modes_when_the_request_runs(void **state) {
    /* As CF: a request for the common modes runs in any mode that is
     * common when the loop gets to it, even one made common afterwards. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k1 = rl_test_keep_mode("CommonLate"), k2 = rl_test_keep_mode("NotCommon");
    RLRunLoopSourceRef k3 = rl_test_keep_mode(kRLRunLoopDefaultMode);
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopCommonModes, fn_tr, "c1"));
    assert_int_equal(RLRunLoopRunInMode("CommonLate", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("");
    assert_true(RLRunLoopAddCommonMode(rl, "CommonLate"));
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopCommonModes, fn_tr, "c2"));
    assert_int_equal(RLRunLoopRunInMode("NotCommon", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("");
    assert_int_equal(RLRunLoopRunInMode("CommonLate", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("c1 c2");
    rl_test_unkeep(k1);
    rl_test_unkeep(k2);
    rl_test_unkeep(k3);
}

static void test_blocks_keep_a_mode_alive(void **state) {
    /* As CF: queuing for a mode creates it, and a mode with only a request
     * in it is not empty: the request runs, then the run times out. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopPerformFunction(rl, "OnlyBlocks", fn_tr, "x"));
    assert_int_equal(RLRunLoopRunInMode("OnlyBlocks", 0.01, false), kRLRunLoopRunTimedOut);
    assert_trace("x");
    assert_int_equal(RLRunLoopRunInMode("OnlyBlocks", 0.01, false), kRLRunLoopRunFinished);
}

static void nested_perform(void *info) {
    rl_trace_add("outer");
    RLRunLoopPerformFunction(RLRunLoopGetCurrent(), "PN", fn_tr, "queued-inside");
    RLRunLoopRunInMode("PN", 0, false);
}

static void test_perform_from_a_perform_and_nested(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("PN");
    assert_true(RLRunLoopPerformFunction(rl, "PN", nested_perform, NULL));
    assert_true(RLRunLoopPerformFunction(rl, "PN", fn_tr, "second"));
    assert_int_equal(RLRunLoopRunInMode("PN", 0, false), kRLRunLoopRunTimedOut);
    /* The nested run takes what was queued after the outer one detached
     * its batch, exactly as CF. */
    assert_trace("outer queued-inside second");
    rl_test_unkeep(k);
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
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
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
    rl_test_unkeep(k);
}

#if __BLOCKS__
static void test_blocks(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("Blk");
    __block int order = 0;
    __block int first = -1, second = -1;
    assert_true(RLRunLoopPerformBlock(rl, "Blk", ^{ first = order++; }));
    assert_true(RLRunLoopPerformBlock(rl, "Blk", ^{ second = order++; }));
    assert_int_equal(RLRunLoopRunInMode("Blk", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(first, 0);
    assert_int_equal(second, 1);
    rl_test_unkeep(k);
}
#endif

static void *teardown_with_pending(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, fn_tr, "never");
#if __BLOCKS__
    char *big = strdup("captured");
    RLRunLoopPerformBlock(rl, "M", ^{ rl_trace_add(big); });
    free(big); /* the block only holds the pointer; it never runs */
#endif
    return NULL;
}

static void test_pending_requests_dropped_at_thread_exit(void **state) {
    rl_test_on_other_thread(teardown_with_pending, NULL);
    assert_trace("");
}

static void *grab_loop(void *arg) {
    *(RLRunLoopRef *)arg = (RLRunLoopRef)RLRetain(RLRunLoopGetCurrent());
    return NULL;
}

/* ---- RLRunLoopPerformFunctionWithRelease ---- */

static void rel_tr(void *info) { rl_trace_addf("release(%s)", (const char *)info); }

static void test_with_release_ran_then_released(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, fn_tr, "a", rel_tr));
    assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopCommonModes, fn_tr, "b", rel_tr));
    /* A NULL release is the plain form. */
    assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, fn_tr, "c", NULL));
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    assert_trace("a release(a) b release(b) c");
}

static void *drop_with_release(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    /* A mode that is never run, and the default mode, never run either. */
    assert_true(RLRunLoopPerformFunctionWithRelease(rl, "never-run", fn_tr, "x", rel_tr));
    assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, fn_tr, "y", rel_tr));
    return arg;
}

static void test_with_release_dropped_at_thread_exit(void **state) {
    rl_test_on_other_thread(drop_with_release, NULL);
    assert_trace("release(x) release(y)");
}

static void test_with_release_dropped_when_loop_is_dead(void **state) {
    /* A loop whose thread has exited refuses the request: released at once. */
    RLRunLoopRef dead = NULL;
    rl_test_on_other_thread(grab_loop, &dead);
    assert_non_null(dead);
    assert_false(RLRunLoopPerformFunctionWithRelease(dead, kRLRunLoopDefaultMode, fn_tr, "d", rel_tr));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(dead);
    assert_trace("release(d)");
}

static void test_with_release_misuse(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    long fake[16] = {0};
    /* Every refused call still releases info, exactly once. */
    assert_false(RLRunLoopPerformFunctionWithRelease(NULL, kRLRunLoopDefaultMode, fn_tr, "1", rel_tr));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformFunctionWithRelease((RLRunLoopRef)fake, kRLRunLoopDefaultMode, fn_tr, "2", rel_tr));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, NULL, "3", rel_tr));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformFunctionWithRelease(rl, NULL, fn_tr, "4", rel_tr));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformFunctionWithRelease(rl, "", fn_tr, "5", rel_tr));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, NULL, "6", NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_trace("release(1) release(2) release(3) release(4) release(5)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fifo_and_modes, rl_trace_setup),
        cmocka_unit_test_setup(test_common_modes_when_the_request_runs, rl_trace_setup),
        cmocka_unit_test_setup(test_blocks_keep_a_mode_alive, rl_trace_setup),
        cmocka_unit_test_setup(test_perform_from_a_perform_and_nested, rl_trace_setup),
        cmocka_unit_test_setup(test_from_other_threads_with_wakeup, rl_trace_setup),
#if __BLOCKS__
        cmocka_unit_test_setup(test_blocks, rl_trace_setup),
#endif
        cmocka_unit_test_setup(test_pending_requests_dropped_at_thread_exit, rl_trace_setup),
        cmocka_unit_test_setup(test_with_release_ran_then_released, rl_trace_setup),
        cmocka_unit_test_setup(test_with_release_dropped_at_thread_exit, rl_trace_setup),
        cmocka_unit_test_setup(test_with_release_dropped_when_loop_is_dead, rl_trace_setup),
        cmocka_unit_test_setup(test_with_release_misuse, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
