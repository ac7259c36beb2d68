/* test_once.c — RLOnceRun: exactly once, concurrent callers wait for the
 * initializer, recursion is reported, bad arguments, the block form. */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

static void count_call(void *ctx) { atomic_fetch_add((_Atomic int *)ctx, 1); }

static void test_runs_once(void **state) {
    static RLOnceToken once = RL_ONCE_INIT;
    _Atomic int calls = 0;
    assert_true(RLOnceRun(&once, count_call, &calls));
    assert_true(RLOnceRun(&once, count_call, &calls));
    assert_int_equal(atomic_load(&calls), 1);

    /* A zeroed token is a fresh token too. */
    RLOnceToken zeroed;
    memset(&zeroed, 0, sizeof zeroed);
    assert_true(RLOnceRun(&zeroed, count_call, &calls));
    assert_int_equal(atomic_load(&calls), 2);
}

static void test_bad_arguments(void **state) {
    RLOnceToken once = RL_ONCE_INIT;
    _Atomic int calls = 0;
    assert_rl_fails(RLOnceRun(NULL, count_call, &calls), kRLErrorInvalidArgument);
    assert_rl_fails(RLOnceRun(&once, NULL, NULL), kRLErrorInvalidArgument);
    /* The failed call did not use up the token. */
    assert_true(RLOnceRun(&once, count_call, &calls));
    assert_int_equal(atomic_load(&calls), 1);

    RLOnceToken garbage;
    memset(&garbage, 0x5a, sizeof garbage);
    assert_rl_fails(RLOnceRun(&garbage, count_call, &calls), kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&calls), 1);
}

typedef struct recursion {
    RLOnceToken once;
    bool inner_result;
    RLErrorCode inner_error;
} recursion;

static void recurse(void *ctx) {
    recursion *r = ctx;
    r->inner_result = RLOnceRun(&r->once, recurse, r);
    r->inner_error = RLErrorGetLast().code;
    RLErrorClear();
}

static void test_recursion_is_reported(void **state) {
    recursion r = {RL_ONCE_INIT, true, kRLErrorNone};
    /* pthread_once would hang here. */
    assert_true(RLOnceRun(&r.once, recurse, &r));
    assert_false(r.inner_result);
    assert_int_equal(r.inner_error, kRLErrorWouldDeadlock);
}

typedef struct race {
    RLOnceToken once;
    _Atomic int calls;
    _Atomic int started;
    long payload; /* written by the initializer, read by every caller */
    _Atomic int wrong;
} race;

static void slow_init(void *ctx) {
    race *r = ctx;
    /* Stay in the initializer while the other callers arrive and wait. */
    for (int i = 0; i < 200 && atomic_load(&r->started) < 8; i++)
        sched_yield();
    r->payload = 42;
    atomic_fetch_add(&r->calls, 1);
}

static void *racer(void *arg) {
    race *r = *(race **)arg;
    atomic_fetch_add(&r->started, 1);
    if (!RLOnceRun(&r->once, slow_init, r) || r->payload != 42)
        atomic_store(&r->wrong, 1);
    return NULL;
}

static void test_concurrent_callers_wait(void **state) {
    enum { THREADS = 8 };
    long rounds = rl_test_iters(200);
    for (long round = 0; round < rounds; round++) {
        race r = {RL_ONCE_INIT, 0, 0, 0, 0};
        race *args[THREADS];
        for (int i = 0; i < THREADS; i++)
            args[i] = &r;
        rl_test_run_threads(THREADS, racer, args, sizeof args[0]);
        assert_int_equal(atomic_load(&r.calls), 1);
        assert_int_equal(atomic_load(&r.wrong), 0);
        assert_int_equal(r.payload, 42);
    }
}

#if __BLOCKS__
static void test_block_form(void **state) {
    static RLOnceToken once = RL_ONCE_INIT;
    __block int calls = 0;
    assert_true(RLOnceRunBlock(&once, ^{ calls++; }));
    assert_true(RLOnceRunBlock(&once, ^{ calls++; }));
    assert_int_equal(calls, 1);
    assert_rl_fails(RLOnceRunBlock(&once, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLOnceRunBlock(NULL, ^{ calls++; }), kRLErrorInvalidArgument);
    assert_int_equal(calls, 1);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_once),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_recursion_is_reported),
        cmocka_unit_test(test_concurrent_callers_wait),
#if __BLOCKS__
        cmocka_unit_test(test_block_form),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
