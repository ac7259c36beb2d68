/* test_source.c — version-0 sources: perform order, schedule/cancel per mode,
 * signals held until a mode containing the source runs, invalidation from a
 * callout, context retain/release balance. */
#include "testutil.h"
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void perform_tr(void *info) { rl_trace_add((const char *)info); }

static void schedule_tr(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    rl_trace_addf("sched(%s,%s)", (const char *)info, mode);
}

static void cancel_tr(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    rl_trace_addf("cancel(%s,%s)", (const char *)info, mode);
}

static RLRunLoopSourceRef make(const char *name, RLIndex order) {
    RLRunLoopSourceContext c = {0};
    c.info = (void *)name;
    c.perform = perform_tr;
    c.schedule = schedule_tr;
    c.cancel = cancel_tr;
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, order, &c);
    assert_non_null(s);
    return s;
}

static void test_perform_in_order(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make("A", 3), b = make("B", -1), c = make("C", 1);
    assert_true(RLRunLoopAddSource(rl, a, "Ord"));
    assert_true(RLRunLoopAddSource(rl, b, "Ord"));
    assert_true(RLRunLoopAddSource(rl, c, "Ord"));
    rl_trace_clear();
    RLRunLoopSourceSignal(a);
    RLRunLoopSourceSignal(c);
    RLRunLoopSourceSignal(b);
    assert_int_equal(RLRunLoopRunInMode("Ord", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("B C A");
    assert_int_equal(RLRunLoopSourceGetOrder(b), -1);
    RLRunLoopSourceInvalidate(a);
    RLRunLoopSourceInvalidate(b);
    RLRunLoopSourceInvalidate(c);
    RLRelease(a);
    RLRelease(b);
    RLRelease(c);
}

static void test_return_after_one_source(void **state) {
    /* With returnAfterSourceHandled only the first source performs; the
     * other keeps its signal for the next run. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make("A", 1), b = make("B", 2);
    assert_true(RLRunLoopAddSource(rl, a, "One"));
    assert_true(RLRunLoopAddSource(rl, b, "One"));
    rl_trace_clear();
    RLRunLoopSourceSignal(b);
    RLRunLoopSourceSignal(a);
    assert_int_equal(RLRunLoopRunInMode("One", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("A");
    assert_int_equal(RLRunLoopRunInMode("One", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("A B");
    RLRunLoopSourceInvalidate(a);
    RLRunLoopSourceInvalidate(b);
    RLRelease(a);
    RLRelease(b);
}

static void test_schedule_and_cancel_per_mode(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef s = make("S", 0);
    assert_true(RLRunLoopAddSource(rl, s, "M1"));
    assert_true(RLRunLoopAddSource(rl, s, "M1")); /* twice: harmless, no second schedule */
    assert_true(RLRunLoopAddSource(rl, s, "M2"));
    assert_true(RLRunLoopRemoveSource(rl, s, "M1"));
    assert_true(RLRunLoopRemoveSource(rl, s, "M1")); /* not there: nothing */
    assert_true(RLRunLoopSourceInvalidate(s));
    assert_false(RLRunLoopSourceIsValid(s));
    assert_true(RLRunLoopSourceInvalidate(s)); /* idempotent */
    assert_trace("sched(S,M1) sched(S,M2) cancel(S,M1) cancel(S,M2)");
    RLRelease(s);
}

static void test_signal_held_until_mode_runs(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef s = make("S", 0);
    RLRunLoopSourceRef other = make("O", 0);
    assert_true(RLRunLoopAddSource(rl, s, "Held"));
    assert_true(RLRunLoopAddSource(rl, other, "Elsewhere"));
    rl_trace_clear();
    assert_true(RLRunLoopSourceSignal(s));
    assert_int_equal(RLRunLoopRunInMode("Elsewhere", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("");
    assert_int_equal(RLRunLoopRunInMode("Held", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("S");

    /* A source signalled before it is in any loop keeps the signal too. */
    RLRunLoopSourceRef late = make("L", 0);
    assert_true(RLRunLoopSourceSignal(late));
    assert_true(RLRunLoopAddSource(rl, late, "Held"));
    rl_trace_clear();
    assert_int_equal(RLRunLoopRunInMode("Held", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("L");
    RLRunLoopSourceInvalidate(s);
    RLRunLoopSourceInvalidate(other);
    RLRunLoopSourceInvalidate(late);
    RLRelease(s);
    RLRelease(other);
    RLRelease(late);
}

static RLRunLoopSourceRef victim, self_src;

static void invalidate_other(void *info) {
    rl_trace_add("first");
    RLRunLoopSourceInvalidate(victim);
    RLRunLoopSourceInvalidate(self_src);
}

static void test_invalidate_from_callout(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceContext c = {0};
    c.perform = invalidate_other;
    self_src = RLRunLoopSourceCreate(NULL, 0, &c);
    victim = make("V", 5);
    assert_true(RLRunLoopAddSource(rl, self_src, "Inv"));
    assert_true(RLRunLoopAddSource(rl, victim, "Inv"));
    rl_trace_clear();
    RLRunLoopSourceSignal(self_src);
    RLRunLoopSourceSignal(victim);
    /* The first source invalidates itself and the victim: the victim never
     * performs, and the mode is then empty. */
    assert_int_equal(RLRunLoopRunInMode("Inv", 10, false), kRLRunLoopRunFinished);
    assert_trace("first cancel(V,Inv)");
    assert_rl_fails(RLRunLoopSourceSignal(self_src), kRLErrorInvalidObject);
    RLRelease(self_src);
    RLRelease(victim);
}

static int retains, releases;

static const void *ctx_retain(const void *info) {
    retains++;
    return info;
}
static void ctx_release(const void *info) { releases++; }
static char *ctx_describe(const void *info) { return strdup("my-info"); }

static void test_context_retain_release_balance(void **state) {
    retains = releases = 0;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceContext c = {0, (void *)"X", ctx_retain, ctx_release, ctx_describe, NULL, NULL, NULL, NULL, perform_tr};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_int_equal(retains, 1);
    assert_true(RLRunLoopAddSource(rl, s, kRLRunLoopCommonModes));
    assert_true(RLRunLoopAddSource(rl, s, "Bal"));
    RLRunLoopSourceContext got;
    assert_true(RLRunLoopSourceGetContext(s, &got));
    assert_string_equal((const char *)got.info, "X");
    char *d = RLCopyDescription(s);
    assert_non_null(strstr(d, "my-info"));
    free(d);
    RLRunLoopSourceSignal(s);
    rl_trace_clear();
    assert_int_equal(RLRunLoopRunInMode("Bal", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("X");
    assert_int_equal(RLGetRetainCount(s), 4); /* ours + common item + default + Bal */
    assert_true(RLRunLoopSourceInvalidate(s));
    assert_int_equal(RLGetRetainCount(s), 1);
    assert_int_equal(releases, 0);
    assert_true(RLRelease(s));
    assert_int_equal(retains, 1);
    assert_int_equal(releases, 1);
}

/* A pending signal holds no reference: a source signalled, added, removed
 * and released is destroyed by that release (its context release runs), as
 * in CF. The signal must not keep a membership or the object alive. */
static void test_signalled_source_freed_at_last_release(void **state) {
    retains = releases = 0;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceContext c = {0, (void *)"X", ctx_retain, ctx_release, NULL, NULL, NULL, NULL, NULL, perform_tr};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(s);
    assert_true(RLRunLoopSourceSignal(s));
    assert_true(RLRunLoopAddSource(rl, s, "SigRel"));
    assert_true(RLRunLoopRemoveSource(rl, s, "SigRel"));
    assert_int_equal(RLGetRetainCount(s), 1);
    assert_true(RLRelease(s));
    assert_int_equal(releases, 1);

    /* The same with the signal given while the source is in the mode. */
    releases = 0;
    s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_true(RLRunLoopAddSource(rl, s, "SigRel"));
    assert_true(RLRunLoopSourceSignal(s));
    assert_true(RLRunLoopRemoveSource(rl, s, "SigRel"));
    assert_true(RLRelease(s));
    assert_int_equal(releases, 1);
    /* And the mode, now empty, has nothing left to perform. */
    rl_trace_clear();
    assert_int_equal(RLRunLoopRunInMode("SigRel", 0, false), kRLRunLoopRunFinished);
    assert_trace("");
}

/* Sources signalled when a pass began and not reached yet keep their signal
 * until they are performed, as in CF: a run of the same mode nested in an
 * earlier source's perform performs them, and the outer pass then skips
 * them. */
static RLRunLoopSourceRef nest_second;
static int nest_result;
static bool nesting;

static void perform_and_nest(void *info) {
    rl_trace_add((const char *)info);
    nesting = true;
    nest_result = RLRunLoopRunInMode("NestSrc", 0, false);
    nesting = false;
}

static void perform_where(void *info) { rl_trace_addf("%s%s", (const char *)info, nesting ? "(nested)" : ""); }

static void test_nested_run_performs_sources_the_pass_has_not_reached(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    for (int rash = 0; rash < 2; rash++) {
        RLRunLoopSourceContext c = {0};
        c.info = (void *)"first";
        c.perform = perform_and_nest;
        RLRunLoopSourceRef first = RLRunLoopSourceCreate(NULL, 1, &c);
        c.info = (void *)"second";
        c.perform = perform_where;
        nest_second = RLRunLoopSourceCreate(NULL, 2, &c);
        assert_true(RLRunLoopAddSource(rl, first, "NestSrc"));
        assert_true(RLRunLoopAddSource(rl, nest_second, "NestSrc"));
        assert_true(RLRunLoopSourceSignal(nest_second));
        assert_true(RLRunLoopSourceSignal(first));
        rl_trace_clear();
        nest_result = -1;
        assert_int_equal(RLRunLoopRunInMode("NestSrc", 0, rash), rash ? kRLRunLoopRunHandledSource
                                                                         : kRLRunLoopRunTimedOut);
        assert_trace("first second(nested)");
        assert_int_equal(nest_result, kRLRunLoopRunTimedOut);
        /* Performed once: nothing is left for the next run. */
        rl_trace_clear();
        assert_int_equal(RLRunLoopRunInMode("NestSrc", 0, false), kRLRunLoopRunTimedOut);
        assert_trace("");
        RLRunLoopSourceInvalidate(first);
        RLRunLoopSourceInvalidate(nest_second);
        RLRelease(first);
        RLRelease(nest_second);
    }
}

static void test_source_in_two_loops_performs_once(void **state) {
    /* The signal is a flag of the source: whichever loop runs first takes it. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef s = make("S", 0);
    assert_true(RLRunLoopAddSource(rl, s, "A"));
    assert_true(RLRunLoopAddSource(rl, s, "B"));
    rl_trace_clear();
    RLRunLoopSourceSignal(s);
    assert_int_equal(RLRunLoopRunInMode("A", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(RLRunLoopRunInMode("B", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("S");
    RLRunLoopSourceInvalidate(s);
    RLRelease(s);
}

/* ---- equal sources ---- */

static bool same_first_char(const void *a, const void *b) { return *(const char *)a == *(const char *)b; }
static RLHashCode first_char_hash(const void *a) { return (RLHashCode)(unsigned char)*(const char *)a; }

static RLRunLoopSourceRef make_keyed(const char *name) {
    RLRunLoopSourceContext c = {0};
    c.info = (void *)name;
    c.perform = perform_tr;
    c.schedule = schedule_tr;
    c.cancel = cancel_tr;
    c.equal = same_first_char;
    c.hash = first_char_hash;
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(s);
    return s;
}

static bool equal_adds_inside; /* an add from inside an equal callback */
static bool add_inside_equal(const void *a, const void *b) {
    if (!equal_adds_inside) {
        equal_adds_inside = true;
        RLRunLoopSourceRef other = make("Z", 0);
        assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), other, "EqInner"));
        assert_true(RLRunLoopContainsSource(RLRunLoopGetCurrent(), other, "EqInner"));
        rl_test_unkeep(other);
    }
    return same_first_char(a, b);
}

static void test_equal_source_is_the_same_source(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make_keyed("a1"), twin = make_keyed("a2"), b = make_keyed("b1");
    assert_true(RLRunLoopAddSource(rl, a, "Eq"));
    assert_true(RLRunLoopAddSource(rl, twin, "Eq")); /* a no-op: no schedule */
    assert_true(RLRunLoopAddSource(rl, b, "Eq"));
    assert_trace("sched(a1,Eq) sched(b1,Eq)");
    rl_trace_clear();
    assert_true(RLRunLoopContainsSource(rl, twin, "Eq"));
    RLRunLoopSourceSignal(a);
    RLRunLoopSourceSignal(twin); /* not in the loop: nothing to perform */
    RLRunLoopSourceSignal(b);
    assert_int_equal(RLRunLoopRunInMode("Eq", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("a1 b1");
    rl_trace_clear();
    /* Removing the twin removes the one in the mode (cancel names the twin, as CF). */
    assert_true(RLRunLoopRemoveSource(rl, twin, "Eq"));
    assert_trace("cancel(a2,Eq)");
    rl_trace_clear();
    assert_false(RLRunLoopContainsSource(rl, a, "Eq"));
    assert_true(RLRunLoopContainsSource(rl, b, "Eq"));
    /* Same info and callbacks without an equal callback: equal too. */
    RLRunLoopSourceRef c1 = make("c", 0), c2 = make("c", 0), c3 = make("c", 1);
    assert_true(RLRunLoopAddSource(rl, c1, "Eq"));
    assert_true(RLRunLoopAddSource(rl, c2, "Eq"));
    assert_true(RLRunLoopAddSource(rl, c3, "Eq")); /* another order: another source */
    assert_trace("sched(c,Eq) sched(c,Eq)");
    rl_trace_clear();
    /* The equal callback is called without the library's lock: it may call in. */
    RLRunLoopSourceContext k = {0};
    k.info = "a3";
    k.perform = perform_tr;
    k.equal = add_inside_equal;
    k.hash = first_char_hash;
    RLRunLoopSourceRef d1 = RLRunLoopSourceCreate(NULL, 0, &k);
    k.info = "a4";
    RLRunLoopSourceRef d2 = RLRunLoopSourceCreate(NULL, 0, &k);
    equal_adds_inside = false;
    assert_true(RLRunLoopAddSource(rl, d1, "Eq"));
    assert_true(RLRunLoopAddSource(rl, d2, "Eq"));
    assert_true(equal_adds_inside);
    assert_true(RLRunLoopContainsSource(rl, d2, "Eq"));
    RLRunLoopSourceRef all[] = {a, twin, b, c1, c2, c3, d1, d2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rl_test_unkeep(all[i]);
}


/* The pattern of Apple's Run Loops guide (Listings 3-3 to 3-8): another
 * thread appends a command to a mutex-protected queue, then signals the
 * loop's source and wakes the loop; the source's perform takes the whole
 * queue. A signal that finds the source still signalled does nothing (its
 * perform is still to come): every command is taken, none is left behind
 * once the producer is done and the loop has run. */
enum { GUIDE_COMMANDS = 200000 };

typedef struct {
    pthread_mutex_t mu;
    long queued, taken, performs;
    RLRunLoopSourceRef src;
    RLRunLoopRef rl;
    atomic_bool sent_all;
} guide_state;

static void guide_perform(void *info) {
    guide_state *g = info;
    pthread_mutex_lock(&g->mu);
    g->taken += g->queued;
    g->queued = 0;
    pthread_mutex_unlock(&g->mu);
    g->performs++;
}

static void *guide_producer(void *arg) {
    guide_state *g = arg;
    for (long i = 0; i < GUIDE_COMMANDS; i++) {
        pthread_mutex_lock(&g->mu);
        g->queued++;
        pthread_mutex_unlock(&g->mu);
        assert_true(RLRunLoopSourceSignal(g->src));
        assert_true(RLRunLoopWakeUp(g->rl));
    }
    atomic_store(&g->sent_all, true);
    assert_true(RLRunLoopWakeUp(g->rl));
    return NULL;
}

static void test_guide_pattern_from_another_thread_loses_no_command(void **state) {
    guide_state g = {.rl = RLRunLoopGetCurrent()};
    pthread_mutex_init(&g.mu, NULL);
    RLRunLoopSourceContext c = {0};
    c.info = &g;
    c.perform = guide_perform;
    g.src = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(g.src);
    assert_true(RLRunLoopAddSource(g.rl, g.src, "Guide"));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, guide_producer, &g), 0);
    /* Until the producer is done and its last signal is performed: a
     * command left in the queue with no perform to come would hang here
     * (the generous limit ends the test instead). */
    double limit = RLAbsoluteTimeGetCurrent() + 60;
    for (;;) {
        bool done = atomic_load(&g.sent_all);
        RLRunLoopRunInMode("Guide", 0.05, false);
        pthread_mutex_lock(&g.mu);
        long taken = g.taken;
        pthread_mutex_unlock(&g.mu);
        if ((done && taken == GUIDE_COMMANDS) || RLAbsoluteTimeGetCurrent() > limit)
            break;
    }
    pthread_join(t, NULL);
    assert_int_equal(g.taken, GUIDE_COMMANDS);
    assert_int_equal(g.queued, 0);
    assert_true(g.performs >= 1 && g.performs <= GUIDE_COMMANDS);
    RLRunLoopSourceInvalidate(g.src);
    RLRelease(g.src);
    pthread_mutex_destroy(&g.mu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_perform_in_order, rl_trace_setup),
        cmocka_unit_test_setup(test_return_after_one_source, rl_trace_setup),
        cmocka_unit_test_setup(test_schedule_and_cancel_per_mode, rl_trace_setup),
        cmocka_unit_test_setup(test_signal_held_until_mode_runs, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_from_callout, rl_trace_setup),
        cmocka_unit_test_setup(test_context_retain_release_balance, rl_trace_setup),
        cmocka_unit_test_setup(test_signalled_source_freed_at_last_release, rl_trace_setup),
        cmocka_unit_test_setup(test_nested_run_performs_sources_the_pass_has_not_reached, rl_trace_setup),
        cmocka_unit_test_setup(test_source_in_two_loops_performs_once, rl_trace_setup),
        cmocka_unit_test_setup(test_equal_source_is_the_same_source, rl_trace_setup),
        cmocka_unit_test(test_guide_pattern_from_another_thread_loses_no_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
