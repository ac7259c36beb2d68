/* test_scale.c — 100,000 sources and timers: what the loop does with them is
 * exactly what it does with three (each signalled source performs once, by
 * `order`, ties in the order they were signalled; every timer added to the
 * common modes is in each of them and fires once). No timing here: the
 * bench (make bench, BRL_ONLY=scale) shows the cost; a quadratic path would
 * only make this program slow, never wrong. */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct scale_log {
    long *seen; /* index of each perform/fire, in call order */
    long n;
} scale_log;

static scale_log slog;

typedef struct scale_item {
    long index;
    long rank; /* when it was signalled */
} scale_item;

static void perform(void *info) { slog.seen[slog.n++] = ((scale_item *)info)->index; }

static void fire(RLRunLoopTimerRef t, void *info) { slog.seen[slog.n++] = (long)(intptr_t)info; }

/* A fixed permutation of 0..n-1 (n and the multiplier are coprime). */
static long permute(long i, long n) { return (long)(((uint64_t)i * 7919u + 13) % (uint64_t)n); }

static void signal_many_in(RLRunLoopMode add_mode, RLRunLoopMode run_mode) {
    long n = rl_test_iters(100000);
    if (n % 7919 == 0)
        n++;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef *src = calloc((size_t)n, sizeof *src);
    scale_item *items = calloc((size_t)n, sizeof *items);
    slog.seen = calloc((size_t)n * 2, sizeof *slog.seen);
    slog.n = 0;
    assert_non_null(src);
    assert_non_null(items);
    assert_non_null(slog.seen);
    for (long i = 0; i < n; i++) {
        items[i].index = i;
        RLRunLoopSourceContext c = {0};
        c.info = &items[i];
        c.perform = perform;
        src[i] = RLRunLoopSourceCreate(NULL, i % 5, &c); /* orders 0..4, interleaved */
        assert_non_null(src[i]);
        assert_true(RLRunLoopAddSource(rl, src[i], add_mode));
    }
    /* Each signalled twice, in a scrambled order: the second is a no-op. */
    for (long k = 0; k < n; k++) {
        long i = permute(k, n);
        items[i].rank = k;
        assert_true(RLRunLoopSourceSignal(src[i]));
    }
    for (long k = 0; k < n; k++)
        assert_true(RLRunLoopSourceSignal(src[permute(k, n)]));
    /* One pass (a poll) performs every signalled source. */
    assert_int_equal(RLRunLoopRunInMode(run_mode, 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(slog.n, n);
    char *once = calloc((size_t)n, 1);
    assert_non_null(once);
    for (long j = 0; j < n; j++) {
        long i = slog.seen[j];
        assert_false(once[i]);
        once[i] = 1;
        if (j > 0) {
            long p = slog.seen[j - 1];
            long oi = i % 5, op = p % 5;
            assert_true(op <= oi); /* by order */
            if (op == oi)
                assert_true(items[p].rank < items[i].rank); /* ties: as signalled */
        }
    }
    /* Nothing left: a second pass performs nothing. */
    assert_int_equal(RLRunLoopRunInMode(run_mode, 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(slog.n, n);
    for (long i = 0; i < n; i++) {
        assert_true(RLRunLoopSourceInvalidate(src[i]));
        RLRelease(src[i]);
    }
    free(once);
    free(src);
    free(items);
    free(slog.seen);
}

static void test_100k_signalled_sources_perform_once_by_order(void **state) {
    signal_many_in("Scale", "Scale");
}

static void test_100k_signalled_common_sources_perform_once_by_order(void **state) {
    signal_many_in(kRLRunLoopCommonModes, kRLRunLoopDefaultMode);
}

static void test_100k_timers_in_common_modes(void **state) {
    long n = rl_test_iters(100000);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef *t = calloc((size_t)n, sizeof *t);
    slog.seen = calloc((size_t)n * 2, sizeof *slog.seen);
    slog.n = 0;
    assert_non_null(t);
    assert_non_null(slog.seen);
    assert_true(RLRunLoopAddCommonMode(rl, "ScaleA"));
    /* Already due: all of them fire in the first pass, in creation order. */
    double due = RLAbsoluteTimeGetCurrent() - 1;
    for (long i = 0; i < n; i++) {
        RLRunLoopTimerContext c = {0, (void *)(intptr_t)i, NULL, NULL, NULL};
        t[i] = RLRunLoopTimerCreate(NULL, due, 0, 0, 0, fire, &c);
        assert_non_null(t[i]);
        assert_true(RLRunLoopAddTimer(rl, t[i], kRLRunLoopCommonModes));
        assert_true(RLRunLoopAddTimer(rl, t[i], kRLRunLoopCommonModes)); /* no-op */
    }
    /* A common mode made later gets every common item. */
    assert_true(RLRunLoopAddCommonMode(rl, "ScaleB"));
    for (long i = 0; i < n; i++) {
        assert_true(RLRunLoopContainsTimer(rl, t[i], kRLRunLoopCommonModes));
        assert_true(RLRunLoopContainsTimer(rl, t[i], kRLRunLoopDefaultMode));
        assert_true(RLRunLoopContainsTimer(rl, t[i], "ScaleA"));
        assert_true(RLRunLoopContainsTimer(rl, t[i], "ScaleB"));
    }
    /* Every odd one leaves the common modes (all of them at once). */
    for (long i = 1; i < n; i += 2) {
        assert_true(RLRunLoopRemoveTimer(rl, t[i], kRLRunLoopCommonModes));
        assert_false(RLRunLoopContainsTimer(rl, t[i], kRLRunLoopCommonModes));
        assert_false(RLRunLoopContainsTimer(rl, t[i], "ScaleB"));
    }
    assert_int_equal(RLRunLoopRunInMode("ScaleB", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(slog.n, (n + 1) / 2);
    for (long j = 0; j < slog.n; j++)
        assert_int_equal(slog.seen[j], 2 * j); /* once each, in creation order */
    for (long i = 0; i < n; i++) {
        assert_false(RLRunLoopContainsTimer(rl, t[i], kRLRunLoopCommonModes)); /* fired: invalid, gone */
        RLRunLoopTimerInvalidate(t[i]);
        RLRelease(t[i]);
    }
    free(t);
    free(slog.seen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_100k_signalled_sources_perform_once_by_order),
        cmocka_unit_test(test_100k_signalled_common_sources_perform_once_by_order),
        cmocka_unit_test(test_100k_timers_in_common_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
