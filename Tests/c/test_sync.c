/* test_sync.c — RLSyncEnter/RLSyncExit and RL_SYNCHRONIZED. */
#include "testutil.h"

#include <crunloop/RLSync.h>

#include <pthread.h>
#include <stdlib.h>

static int g_obj_a, g_obj_b;

static void test_enter_exit_recursive(void **state) {
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));
    assert_true(RLSyncEnter(&g_obj_a));
    assert_true(RLSyncIsHeldByCurrentThread(&g_obj_a));
    assert_true(RLSyncEnter(&g_obj_a));
    assert_true(RLSyncTryEnter(&g_obj_a));
    assert_true(RLSyncExit(&g_obj_a));
    assert_true(RLSyncExit(&g_obj_a));
    assert_true(RLSyncIsHeldByCurrentThread(&g_obj_a)); /* one entry left */
    assert_true(RLSyncExit(&g_obj_a));
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));
    /* One more exit than enters: an error, nothing changes. */
    assert_rl_fails(RLSyncExit(&g_obj_a), kRLErrorNotLocked);
    assert_true(RLSyncEnter(&g_obj_a));
    assert_true(RLSyncExit(&g_obj_a));
}

static void test_misuse(void **state) {
    assert_rl_fails(RLSyncEnter(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSyncTryEnter(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSyncExit(NULL), kRLErrorInvalidArgument);
    assert_false(RLSyncIsHeldByCurrentThread(NULL));
    /* Exit of an object never entered. */
    assert_rl_fails(RLSyncExit(&g_obj_b), kRLErrorNotLocked);
}

/* ---- another thread's view ---- */

typedef struct probe {
    const void *obj;
    bool try_result;
    RLErrorCode try_error;
    bool exit_result;
    RLErrorCode exit_error;
    bool held;
} probe;

static void *probe_thread(void *arg) {
    probe *p = arg;
    p->held = RLSyncIsHeldByCurrentThread(p->obj);
    p->exit_result = RLSyncExit(p->obj);
    p->exit_error = RLErrorGetLast().code;
    p->try_result = RLSyncTryEnter(p->obj);
    p->try_error = RLErrorGetLast().code;
    if (p->try_result)
        RLSyncExit(p->obj);
    return NULL;
}

static void run_probe(probe *p) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, probe_thread, p), 0);
    pthread_join(t, NULL);
}

static void test_exit_by_other_thread_is_refused(void **state) {
    assert_true(RLSyncEnter(&g_obj_a));
    probe p = {.obj = &g_obj_a};
    run_probe(&p);
    assert_false(p.held);
    assert_false(p.exit_result);
    assert_int_equal(p.exit_error, kRLErrorNotOwner);
    assert_false(p.try_result); /* busy */
    assert_int_equal(p.try_error, kRLErrorBusy);
    /* Still ours, still usable. */
    assert_true(RLSyncIsHeldByCurrentThread(&g_obj_a));
    assert_true(RLSyncExit(&g_obj_a));

    probe q = {.obj = &g_obj_a};
    run_probe(&q);
    assert_int_equal(q.exit_error, kRLErrorNotLocked);
    assert_true(q.try_result); /* free now */
}

/* More objects held at once than the per-thread cache keeps: the rest are
 * held outside it, recursion and misuse checks work the same for both, and
 * exits may come in any order. */
static void test_more_held_than_cached(void **state) {
    enum { N = 20 };
    static char objs[N];
    /* Re-enters monitors out of the order it first took them in, on
     * purpose: the lock-order detector (on under `make check-lockdep`)
     * would rightly report that. */
    bool lockdep = RLLockDebugIsEnabled();
    RLLockDebugSetEnabled(false);
    for (int i = 0; i < N; i++)
        assert_true(RLSyncEnter(&objs[i]));
    for (int i = 0; i < N; i++) {
        assert_true(RLSyncIsHeldByCurrentThread(&objs[i]));
        assert_true(RLSyncTryEnter(&objs[i])); /* recursive */
    }
    for (int i = 0; i < N; i += 3) {
        probe p = {.obj = &objs[i]};
        run_probe(&p);
        assert_false(p.held);
        assert_int_equal(p.exit_error, kRLErrorNotOwner);
        assert_false(p.try_result);
        assert_int_equal(p.try_error, kRLErrorBusy);
    }
    /* Out of order: odd ones fully, then the even ones. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 1; i < N; i += 2)
            assert_true(RLSyncExit(&objs[i]));
    for (int i = 1; i < N; i += 2) {
        assert_false(RLSyncIsHeldByCurrentThread(&objs[i]));
        assert_rl_fails(RLSyncExit(&objs[i]), kRLErrorNotLocked);
    }
    /* Re-enter some freed ones while the even ones are still held. */
    for (int i = 1; i < N; i += 4)
        assert_true(RLSyncEnter(&objs[i]));
    for (int i = 1; i < N; i += 4)
        assert_true(RLSyncExit(&objs[i]));
    for (int i = N - 2; i >= 0; i -= 2) {
        assert_true(RLSyncExit(&objs[i]));
        assert_true(RLSyncIsHeldByCurrentThread(&objs[i]));
        assert_true(RLSyncExit(&objs[i]));
    }
    for (int i = 0; i < N; i++) {
        assert_false(RLSyncIsHeldByCurrentThread(&objs[i]));
        probe p = {.obj = &objs[i]};
        run_probe(&p);
        assert_true(p.try_result); /* free for everyone */
        assert_int_equal(p.exit_error, kRLErrorNotLocked);
    }
    RLLockDebugSetEnabled(lockdep);
}

/* ---- RL_SYNCHRONIZED releases on every way out ---- */

static int returns_from_inside(const void *obj, int x) {
    RL_SYNCHRONIZED(obj) {
        if (x > 0)
            return x * 2;
    }
    return -1;
}

static void test_macro_releases_on_return(void **state) {
    assert_int_equal(returns_from_inside(&g_obj_a, 21), 42);
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));
    assert_int_equal(returns_from_inside(&g_obj_a, 0), -1);
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));
}

static void test_macro_releases_on_break_and_continue(void **state) {
    int passes = 0;
    RL_SYNCHRONIZED(&g_obj_a) {
        passes++;
        assert_true(RLSyncIsHeldByCurrentThread(&g_obj_a));
        break; /* leaves the synchronized block */
    }
    assert_int_equal(passes, 1);
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));

    RL_SYNCHRONIZED(&g_obj_a) {
        passes++;
        continue; /* also leaves it, once */
    }
    assert_int_equal(passes, 2);
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));

    /* A loop inside the block: its break is its own. */
    int loops = 0;
    RL_SYNCHRONIZED(&g_obj_a) {
        for (;;) {
            loops++;
            break;
        }
        assert_true(RLSyncIsHeldByCurrentThread(&g_obj_a));
        loops++;
    }
    assert_int_equal(loops, 2);
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));

    /* The block inside a loop, left by break on every pass. */
    for (int i = 0; i < 3; i++) {
        RL_SYNCHRONIZED(&g_obj_a) {
            if (i >= 0)
                break;
        }
        assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));
    }
}

static void test_macro_releases_on_goto_and_nesting(void **state) {
    RL_SYNCHRONIZED(&g_obj_a) {
        RL_SYNCHRONIZED(&g_obj_b) {
            RL_SYNCHRONIZED(&g_obj_a) { /* recursive */
                assert_true(RLSyncIsHeldByCurrentThread(&g_obj_b));
                goto out;
            }
        }
    }
    fail_msg("goto did not leave the blocks");
out:
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_a));
    assert_false(RLSyncIsHeldByCurrentThread(&g_obj_b));
}

static void test_macro_with_null_runs_unlocked(void **state) {
    int ran = 0;
    RL_SYNCHRONIZED(NULL) {
        ran = 1;
    }
    assert_int_equal(ran, 1);
    assert_rl_error(kRLErrorInvalidArgument);
}

/* ---- exclusion stress: exact totals, several objects sharing stripes ---- */

enum { THREADS = 8, OBJECTS = 3 };

typedef struct counter {
    long value;
    long inside;
} counter;

static counter g_counters[OBJECTS];
static _Atomic int g_overlap;

static void *stress_worker(void *arg) {
    long n = rl_test_iters(1000000);
    long id = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        counter *c = &g_counters[(id + i) % OBJECTS];
        if (i % 4 == 0) {
            RL_SYNCHRONIZED(c) {
                RL_SYNCHRONIZED(c) { /* recursion on the hot path */
                    if (++c->inside != 1)
                        g_overlap = 1;
                    c->value++;
                    c->inside--;
                }
            }
        } else {
            if (!RLSyncEnter(c))
                g_overlap = 2;
            if (++c->inside != 1)
                g_overlap = 1;
            c->value++;
            c->inside--;
            if (!RLSyncExit(c))
                g_overlap = 3;
        }
    }
    return NULL;
}

static void test_exclusion_exact_totals(void **state) {
    g_overlap = 0;
    for (int i = 0; i < OBJECTS; i++)
        g_counters[i] = (counter){0, 0};
    pthread_t t[THREADS];
    for (intptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stress_worker, (void *)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(g_overlap, 0);
    long total = 0;
    for (int i = 0; i < OBJECTS; i++)
        total += g_counters[i].value;
    assert_int_equal(total, THREADS * rl_test_iters(1000000));
    for (int i = 0; i < OBJECTS; i++)
        assert_false(RLSyncIsHeldByCurrentThread(&g_counters[i]));
}

/* Many distinct objects: monitors are created and freed on demand
 * (valgrind/LSan check that none is leaked). Held in batches of 32:
 * ThreadSanitizer cannot track more than 64 mutexes held by one thread. */
static void test_many_objects(void **state) {
    enum { N = 1024, BATCH = 32 };
    char *objs = malloc(N);
    assert_non_null(objs);
    for (int base = 0; base < N; base += BATCH) {
        for (int i = base; i < base + BATCH; i++)
            assert_true(RLSyncEnter(&objs[i]));
        for (int i = base; i < base + BATCH; i++)
            assert_true(RLSyncIsHeldByCurrentThread(&objs[i]));
        for (int i = base + BATCH - 1; i >= base; i--)
            assert_true(RLSyncExit(&objs[i]));
    }
    for (int i = 0; i < N; i++)
        assert_false(RLSyncIsHeldByCurrentThread(&objs[i]));
    free(objs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enter_exit_recursive),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_exit_by_other_thread_is_refused),
        cmocka_unit_test(test_more_held_than_cached),
        cmocka_unit_test(test_macro_releases_on_return),
        cmocka_unit_test(test_macro_releases_on_break_and_continue),
        cmocka_unit_test(test_macro_releases_on_goto_and_nesting),
        cmocka_unit_test(test_macro_with_null_runs_unlocked),
        cmocka_unit_test(test_exclusion_exact_totals),
        cmocka_unit_test(test_many_objects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
