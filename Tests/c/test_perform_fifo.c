/* test_perform_fifo.c — one queue per loop: requests that one producer
 * thread makes to one worker's loop through every front end
 * (RLRunLoopPerform*, RLThreadPerform*, RLWorkerThreadPerform*, function and
 * block forms, with and without a release) run in the order they were made. */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>

enum { N = 3000, FORMS = 9 };

/* Written on the worker only; read by the producer after a waiting request
 * returned (the wait orders them). */
static int ran[N + 64];
static int nran;
static int released;

static void note(void *info) { ran[nran++] = (int)(intptr_t)info; }
static void count_release(void *info) {
    (void)info;
    released++;
}

/* Makes request i through front end i % FORMS. */
static void submit(RLWorkerThreadRef w, RLThreadRef t, RLRunLoopRef rl, int i) {
    void *info = (void *)(intptr_t)i;
    const RLRunLoopMode common[] = {kRLRunLoopCommonModes};
    switch (i % FORMS) {
    case 0: assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, note, info)); break;
    case 1: assert_true(RLThreadPerform(t, note, info, NULL, false)); break;
    case 2: assert_true(RLWorkerThreadPerformAsync(w, note, info)); break;
    case 3: assert_true(RLRunLoopPerformFunctionInModes(rl, common, 1, note, info, count_release)); break;
    case 4: assert_true(RLThreadPerformWithRelease(t, note, info, count_release, NULL, false)); break;
    case 5: assert_true(RLWorkerThreadPerformAsyncWithRelease(w, note, info, count_release)); break;
#if __BLOCKS__
    case 6: assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{ note(info); })); break;
    case 7: assert_true(RLThreadPerformBlock(t, NULL, false, ^{ note(info); })); break;
    case 8: assert_true(RLWorkerThreadPerformBlockAsync(w, ^{ note(info); })); break;
#else
    case 6: assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, note, info, NULL)); break;
    case 7: assert_true(RLThreadPerformWithRelease(t, note, info, NULL, NULL, false)); break;
    case 8: assert_true(RLWorkerThreadPerformAsync(w, note, info)); break;
#endif
    default: fail();
    }
}

static void test_fifo_across_front_ends(void **state) {
    (void)state;
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "fifo");
    assert_non_null(w);
    assert_true(RLWorkerThreadStart(w));
    RLThreadRef t = RLWorkerThreadGetThread(w);
    RLRunLoopRef rl = RLWorkerThreadGetRunLoop(w);
    assert_non_null(t);
    assert_non_null(rl);
    for (int i = 0; i < N; i++) {
        submit(w, t, rl, i);
        /* Now and then a waiting request, through each waiting front end:
         * it too takes its turn behind what came before. */
        if (i % 500 == 499)
            assert_true((i / 500) % 2 ? RLThreadPerform(t, note, (void *)(intptr_t)-1, NULL, true)
                                      : RLWorkerThreadPerformSync(w, note, (void *)(intptr_t)-1));
    }
    assert_true(RLWorkerThreadPerformSync(w, note, (void *)(intptr_t)-1));
    int next = 0, waits = 0;
    for (int k = 0; k < nran; k++) {
        if (ran[k] == -1) {
            waits++;
            continue;
        }
        assert_int_equal(ran[k], next);
        next++;
    }
    assert_int_equal(next, N);
    assert_int_equal(waits, N / 500 + 1);
    assert_int_equal(released, 3 * (N / FORMS));
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_across_front_ends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
