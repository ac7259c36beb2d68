/* test_perform_modes.c — one request for several modes
 * (RLRunLoopPerformFunctionInModes, RLRunLoopPerformBlockInModes, the
 * thread forms with a mode list): queued once, runs once, in the first of
 * its modes that the loop runs, in FIFO order with the other requests;
 * released once if it never runs; misuse. */
#include "testutil.h"
#include "owned.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What ran, in order, and in which mode. */
typedef struct trace {
    int n;
    const char *what[16];
    RLStringRef mode[16];
} trace;

static trace tr;

static void trace_reset(void) {
    for (int i = 0; i < tr.n; i++)
        RLRelease(tr.mode[i]);
    memset(&tr, 0, sizeof tr);
}

static void note(void *what) {
    assert_true(tr.n < 16);
    tr.what[tr.n] = what;
    tr.mode[tr.n] = RLRunLoopCopyCurrentMode(RLRunLoopGetCurrent());
    tr.n++;
}

static void run_once(RLRunLoopMode mode) {
    RLRunLoopSourceRef keep = rl_test_keep_mode(mode);
    RLRunLoopRunInMode(mode, 0, false);
    rl_test_unkeep(keep);
}

static void test_runs_once_in_the_first_mode_that_runs(void **state) {
    (void)state;
    trace_reset();
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    const RLRunLoopMode ab[] = {"MA", "MB"};
    assert_true(RLRunLoopPerformFunctionInModes(rl, ab, 2, note, "x", NULL));
    run_once("MC"); /* not one of its modes */
    assert_int_equal(tr.n, 0);
    run_once("MB");
    assert_int_equal(tr.n, 1);
    assert_string_equal(tr.what[0], "x");
    assert_string_equal(tr.mode[0], "MB");
    run_once("MA"); /* ran already: not again */
    run_once("MB");
    assert_int_equal(tr.n, 1);
    trace_reset();
}

static void test_common_default_and_duplicates_count_once(void **state) {
    (void)state;
    trace_reset();
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    const RLRunLoopMode m[] = {"MD", kRLRunLoopCommonModes, "MD", kRLRunLoopDefaultMode, kRLRunLoopCommonModes};
    owned o = {0};
    assert_true(RLRunLoopPerformFunctionInModes(rl, m, 5, owned_run, &o, owned_release));
    run_once(kRLRunLoopDefaultMode);
    run_once("MD");
    run_once(kRLRunLoopDefaultMode);
    assert_int_equal(atomic_load(&o.ran), 1);
    assert_int_equal(atomic_load(&o.released), 1);
    assert_int_equal(atomic_load(&o.released_after_run), 1);

    /* The common modes as they are when it runs: a mode made common after
     * the request was queued runs it. */
    assert_true(RLRunLoopPerformFunctionInModes(rl, (const RLRunLoopMode[]){kRLRunLoopCommonModes}, 1, note, "c",
                                                NULL));
    assert_true(RLRunLoopAddCommonMode(rl, "MLaterCommon"));
    run_once("MLaterCommon");
    assert_int_equal(tr.n, 1);
    assert_string_equal(tr.mode[0], "MLaterCommon");
    trace_reset();
}

static void test_fifo_across_modes(void **state) {
    (void)state;
    trace_reset();
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    const RLRunLoopMode ef[] = {"ME", "MF"};
    assert_true(RLRunLoopPerformFunctionInModes(rl, ef, 2, note, "1 in E,F", NULL));
    assert_true(RLRunLoopPerformFunction(rl, "ME", note, "2 in E"));
    assert_true(RLRunLoopPerformFunction(rl, "MF", note, "3 in F"));
    assert_true(RLRunLoopPerformFunctionInModes(rl, ef, 2, note, "4 in E,F", NULL));
    run_once("MF");
    assert_int_equal(tr.n, 3);
    assert_string_equal(tr.what[0], "1 in E,F");
    assert_string_equal(tr.what[1], "3 in F");
    assert_string_equal(tr.what[2], "4 in E,F");
    run_once("ME");
    assert_int_equal(tr.n, 4);
    assert_string_equal(tr.what[3], "2 in E");
    trace_reset();
}

#if __BLOCKS__
static void test_block_in_modes(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    const RLRunLoopMode gh[] = {"MG", "MH"};
    __block int ran = 0; /* a __block capture: the block has copy/dispose helpers */
    struct {
        long w[16];
    } big = {{0}}; /* too big for a slab copy: Block_copy */
    assert_true(RLRunLoopPerformBlockInModes(rl, gh, 2, ^{ ran++; }));
    assert_true(RLRunLoopPerformBlockInModes(rl, gh, 2, ^{ ran += 10 + (int)big.w[3]; }));
    run_once("MH");
    run_once("MG");
    assert_int_equal(ran, 11);
}
#endif

/* ---- released once if it never runs ---- */

typedef struct dropper {
    RLRunLoopRef loop; /* retained */
    owned o;
#if __BLOCKS__
    _Atomic int block_ran;
#endif
} dropper;

static void *queue_then_exit(void *arg) {
    dropper *d = arg;
    d->loop = (RLRunLoopRef)RLRetain(RLRunLoopGetCurrent());
    const RLRunLoopMode xy[] = {"MX", "MY"};
    assert_true(RLRunLoopPerformFunctionInModes(d->loop, xy, 2, owned_run, &d->o, owned_release));
#if __BLOCKS__
    __block int captured = 0; /* helpers: the drop runs the dispose helper */
    assert_true(RLRunLoopPerformBlockInModes(d->loop, xy, 2, ^{
        atomic_store(&d->block_ran, ++captured);
    }));
#endif
    run_once(kRLRunLoopDefaultMode); /* none of its modes */
    return NULL;
}

static void test_never_run_is_released_once(void **state) {
    (void)state;
    dropper d = {0};
    rl_test_on_other_thread(queue_then_exit, &d);
    /* The thread exited without RLThread: its loop's key destructor tore
     * the loop down and dropped the request. */
    assert_int_equal(atomic_load(&d.o.ran), 0);
    assert_int_equal(atomic_load(&d.o.released), 1);
#if __BLOCKS__
    assert_int_equal(atomic_load(&d.block_ran), 0);
#endif
    /* The loop is torn down: it refuses new requests, releasing them. */
    owned late = {0};
    const RLRunLoopMode xy[] = {"MX", "MY"};
    assert_rl_fails(RLRunLoopPerformFunctionInModes(d.loop, xy, 2, owned_run, &late, owned_release),
                    kRLErrorInvalidState);
    assert_int_equal(atomic_load(&late.released), 1);
    RLRelease(d.loop);
}

/* ---- thread performs with a mode list: one request ---- */

static _Atomic int thread_runs;
static void count_run(void *arg) {
    (void)arg;
    atomic_fetch_add(&thread_runs, 1);
}

static void *run_modes_then_return(void *arg) {
    _Atomic int *ready = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    (void)rl;
    atomic_store(ready, 1);
    while (atomic_load(ready) != 2)
        usleep(1000);
    run_once("TA");
    run_once("TB");
    run_once(kRLRunLoopDefaultMode);
    return NULL;
}

static void test_thread_perform_in_modes_runs_once(void **state) {
    (void)state;
    atomic_store(&thread_runs, 0);
    _Atomic int ready = 0;
    RLThreadRef t = RLThreadCreate(NULL, run_modes_then_return, &ready);
    assert_non_null(t);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    while (!atomic_load(&ready))
        usleep(1000);
    const RLRunLoopMode modes[] = {"TB", "TA", kRLRunLoopCommonModes, NULL};
    assert_true(RLThreadPerform(t, count_run, NULL, modes, false));
    atomic_store(&ready, 2);
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(atomic_load(&thread_runs), 1);
    RLRelease(t);
}

/* ---- misuse ---- */

static void test_in_modes_misuse(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    const RLRunLoopMode ok[] = {"MZ"};
    const RLRunLoopMode with_null[] = {"MZ", NULL};
    const RLRunLoopMode with_empty[] = {"MZ", ""};
    struct {
        RLRunLoopRef rl;
        const RLRunLoopMode *modes;
        RLIndex count;
        void (*fn)(void *);
    } cases[] = {
        {NULL, ok, 1, owned_run},       {rl, NULL, 1, owned_run},       {rl, ok, 0, owned_run},
        {rl, ok, -1, owned_run},        {rl, with_null, 2, owned_run}, {rl, with_empty, 2, owned_run},
        {rl, ok, 1, NULL},
    };
    static owned refused;
    memset(&refused, 0, sizeof refused);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_rl_fails(RLRunLoopPerformFunctionInModes(cases[i].rl, cases[i].modes, cases[i].count, cases[i].fn,
                                                        &refused, owned_release),
                        kRLErrorInvalidArgument);
        /* refused: released before returning */
        assert_int_equal(atomic_load(&refused.released), (int)i + 1);
        /* Without a release callback the same calls fail the same way. */
        assert_rl_fails(RLRunLoopPerformFunctionInModes(cases[i].rl, cases[i].modes, cases[i].count, cases[i].fn,
                                                        &refused, NULL),
                        kRLErrorInvalidArgument);
    }
    /* An object of another kind is not a run loop. */
    RLRunLoopSourceContext ctx = {0};
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &ctx);
    owned o = {0};
    assert_rl_fails(RLRunLoopPerformFunctionInModes((RLRunLoopRef)src, ok, 1, owned_run, &o, owned_release),
                    kRLErrorInvalidObject);
    assert_int_equal(atomic_load(&o.released), 1);
    RLRelease(src);
#if __BLOCKS__
    assert_rl_fails(RLRunLoopPerformBlockInModes(rl, ok, 1, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformBlockInModes(NULL, ok, 1, ^{}), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformBlockInModes(rl, NULL, 1, ^{}), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformBlockInModes(rl, ok, 0, ^{}), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformBlockInModes(rl, with_empty, 2, ^{}), kRLErrorInvalidArgument);
#endif
    /* Nothing was queued by the refused calls. */
    run_once("MZ");
    run_once(kRLRunLoopDefaultMode);
    assert_int_equal(atomic_load(&refused.ran), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_once_in_the_first_mode_that_runs),
        cmocka_unit_test(test_common_default_and_duplicates_count_once),
        cmocka_unit_test(test_fifo_across_modes),
#if __BLOCKS__
        cmocka_unit_test(test_block_in_modes),
#endif
        cmocka_unit_test(test_never_run_is_released_once),
        cmocka_unit_test(test_thread_perform_in_modes_runs_once),
        cmocka_unit_test(test_in_modes_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
