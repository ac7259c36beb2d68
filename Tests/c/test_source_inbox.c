/* test_source_inbox.c — sources signalled from another thread (the loop
 * takes them from its inbox at its next pass): they keep the signal order
 * with the loop thread's own signals; one removed before that pass is not
 * performed there, keeps its signal for the mode it joins next, and is
 * freed at its last release, not at the loop's next pass; and, with
 * producers signalling at full speed while the loop thread removes,
 * invalidates and releases the sources, no source is performed after its
 * removal or invalidation returned, and every one is freed (TSan runs this
 * too). */
#include "testutil.h"
#include "trace.h"

#include "rl_lock.h" /* rl__loop_biased */

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

RL__HIDDEN extern _Atomic unsigned long rl__bias_revokes;

static void perform_tr(void *info) { rl_trace_add((const char *)info); }

static int releases;
static const void *ctx_retain(const void *info) { return info; }
static void ctx_release(const void *info) { (void)info, releases++; }

static RLRunLoopSourceRef make(const char *name) {
    RLRunLoopSourceContext c = {0, (void *)name, ctx_retain, ctx_release, NULL, NULL, NULL, NULL, NULL, perform_tr};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(s);
    return s;
}

/* Another thread signals srcs[0..n), in that order, and ends. */
typedef struct {
    RLRunLoopSourceRef srcs[8];
    int n;
} signaller;

static void *signal_all(void *arg) {
    signaller *g = arg;
    for (int i = 0; i < g->n; i++)
        RLRunLoopSourceSignal(g->srcs[i]);
    return NULL;
}

static void signal_from_thread(signaller g) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, signal_all, &g), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

static void drop(RLRunLoopSourceRef *s, int n) {
    for (int i = 0; i < n; i++) {
        RLRunLoopSourceInvalidate(s[i]);
        RLRelease(s[i]);
    }
}

static void test_signal_order_across_threads(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make("A"), b = make("B"), c = make("C"), d = make("D");
    RLRunLoopSourceRef all[] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        assert_true(RLRunLoopAddSource(rl, all[i], "Ord"));
    /* Another thread's signals, then the loop thread's own: in that order. */
    signal_from_thread((signaller){{b, a}, 2});
    RLRunLoopSourceSignal(d);
    RLRunLoopSourceSignal(c);
    assert_int_equal(RLRunLoopRunInMode("Ord", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("B A D C");
    /* The loop thread's first, then another thread's. */
    rl_trace_clear();
    RLRunLoopSourceSignal(c);
    signal_from_thread((signaller){{d, a, b}, 3});
    assert_int_equal(RLRunLoopRunInMode("Ord", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("C D A B");
    /* Mixed: the loop's own signal after another thread's goes after it. */
    rl_trace_clear();
    signal_from_thread((signaller){{a}, 1});
    RLRunLoopSourceSignal(b);
    signal_from_thread((signaller){{c}, 1});
    RLRunLoopSourceSignal(d);
    assert_int_equal(RLRunLoopRunInMode("Ord", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("A B C D");
    drop(all, 4);
}

static void test_signal_order_with_a_source_in_two_modes(void **state) {
    /* A source in two modes is signalled through the general way (its
     * modes' ready lists directly, under the loop lock): what another
     * thread signalled before still goes first. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make("A"), b = make("B");
    assert_true(RLRunLoopAddSource(rl, a, "Two"));
    assert_true(RLRunLoopAddSource(rl, b, "Two"));
    assert_true(RLRunLoopAddSource(rl, b, "Other"));
    signal_from_thread((signaller){{a, b}, 2});
    assert_int_equal(RLRunLoopRunInMode("Two", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("A B");
    rl_trace_clear();
    signal_from_thread((signaller){{a}, 1});
    RLRunLoopSourceSignal(b);
    assert_int_equal(RLRunLoopRunInMode("Two", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("A B");
    RLRunLoopSourceRef all[] = {a, b};
    drop(all, 2);
}

static void test_removed_before_the_pass(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef p = make("P"), q = make("Q"), r = make("R"), s = make("S"), t = make("T");
    RLRunLoopSourceRef all[] = {p, q, r, s, t};
    for (int i = 0; i < 5; i++)
        assert_true(RLRunLoopAddSource(rl, all[i], "Rm"));
    signal_from_thread((signaller){{p, q, r, s, t}, 5});
    /* The newest, the oldest and one between leave before the loop's pass:
     * the others are performed, in order; those are not. */
    assert_true(RLRunLoopRemoveSource(rl, t, "Rm"));
    assert_true(RLRunLoopRemoveSource(rl, p, "Rm"));
    assert_true(RLRunLoopRemoveSource(rl, r, "Rm"));
    assert_int_equal(RLRunLoopRunInMode("Rm", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("Q S");
    /* Removed and released before the pass: freed at that release, on
     * this thread, not later. */
    releases = 0;
    RLRunLoopSourceRef x = make("X");
    assert_true(RLRunLoopAddSource(rl, x, "Rm"));
    signal_from_thread((signaller){{x}, 1});
    assert_true(RLRunLoopRemoveSource(rl, x, "Rm"));
    assert_int_equal(RLGetRetainCount(x), 1);
    assert_true(RLRelease(x));
    assert_int_equal(releases, 1);
    /* Invalidated before the pass: never performed. */
    rl_trace_clear();
    signal_from_thread((signaller){{q, s}, 2});
    assert_true(RLRunLoopSourceInvalidate(q));
    assert_int_equal(RLRunLoopRunInMode("Rm", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("S");
    drop(all, 5);
}

static void test_signal_kept_for_the_mode_joined_next(void **state) {
    /* As with the loop's own signals (test_source): a source removed from
     * its mode before the pass keeps its signal and is performed when a
     * mode it joins runs. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make("A"), b = make("B");
    assert_true(RLRunLoopAddSource(rl, a, "M1"));
    assert_true(RLRunLoopAddSource(rl, b, "M1"));
    signal_from_thread((signaller){{a, b}, 2});
    assert_true(RLRunLoopRemoveSource(rl, a, "M1"));
    assert_true(RLRunLoopAddSource(rl, a, "M2"));
    /* Signalled while in a mode that is not running: kept for it. */
    assert_true(RLRunLoopAddSource(rl, b, "M3"));
    assert_true(RLRunLoopRemoveSource(rl, b, "M1"));
    assert_int_equal(RLRunLoopRunInMode("M1", 0, false), kRLRunLoopRunFinished);
    assert_trace("");
    assert_int_equal(RLRunLoopRunInMode("M2", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("A");
    assert_int_equal(RLRunLoopRunInMode("M3", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("A B");
    RLRunLoopSourceRef all[] = {a, b};
    drop(all, 2);
}

static void test_a_mode_joined_keeps_the_signal_order(void **state) {
    /* Signalled sources added to another mode before the loop's pass take
     * their places there behind what was signalled before (as if each were
     * signalled as it joins): B signalled after A, added before it. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make("A"), b = make("B"), c = make("C");
    assert_true(RLRunLoopAddSource(rl, a, "J1"));
    assert_true(RLRunLoopAddSource(rl, b, "J1"));
    assert_true(RLRunLoopAddSource(rl, c, "J2"));
    signal_from_thread((signaller){{a, b}, 2});
    assert_true(RLRunLoopAddSource(rl, b, "J2"));
    assert_true(RLRunLoopAddSource(rl, a, "J2"));
    assert_int_equal(RLRunLoopRunInMode("J2", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("A B");
    /* Signalled before it joins any loop, it joins behind C, which another
     * thread signalled before the join. */
    rl_trace_clear();
    RLRunLoopSourceRef d = make("D");
    RLRunLoopSourceSignal(d);
    signal_from_thread((signaller){{c}, 1});
    assert_true(RLRunLoopAddSource(rl, d, "J2"));
    assert_int_equal(RLRunLoopRunInMode("J2", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("C D");
    RLRunLoopSourceRef all[] = {a, b, c, d};
    drop(all, 4);
}

static void test_other_threads_signals_leave_the_loop_lock_biased(void **state) {
    /* They take no loop lock, so they do not revoke its owner bias (the
     * owner's passes then take it with no atomic operation). */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef a = make("A");
    assert_true(RLRunLoopAddSource(rl, a, "Bias"));
    for (int i = 0; i < 200; i++)
        RLRunLoopRunInMode("Bias", 0, false);
    assert_int_equal(rl__loop_biased(rl), rl__bias_usable());
    unsigned long before = atomic_load(&rl__bias_revokes);
    for (int i = 0; i < 50; i++) {
        signal_from_thread((signaller){{a}, 1});
        RLRunLoopRunInMode("Bias", 0, false);
    }
    assert_int_equal(atomic_load(&rl__bias_revokes), before);
    assert_int_equal(rl__loop_biased(rl), rl__bias_usable());
    assert_int_equal(strlen(rl_trace_get()), 50 * 2 - 1); /* "A A ... A": 50 performs */
    /* Signalled from another thread after leaving its only loop: it keeps
     * the signal (performed once it is back), and its last release frees
     * it (ASan would see a loop's inbox still pointing at it). */
    rl_trace_clear();
    assert_true(RLRunLoopRemoveSource(rl, a, "Bias"));
    signal_from_thread((signaller){{a}, 1});
    RLRunLoopRunInMode("Bias", 0, false);
    assert_trace("");
    assert_true(RLRunLoopAddSource(rl, a, "Bias"));
    RLRunLoopRunInMode("Bias", 0, false);
    assert_trace("A");
    assert_true(RLRunLoopRemoveSource(rl, a, "Bias"));
    releases = 0;
    signal_from_thread((signaller){{a}, 1});
    RLRelease(a);
    assert_int_equal(releases, 1);
    RLRunLoopRunInMode("Bias", 0, false);
}

/* ---- a source that moves between loops ---- */

typedef struct {
    _Atomic(RLRunLoopRef) rl;
    _Atomic bool stop;
} loop_thread;


/* Runs its own loop in mode "B" until told to stop. */
static void *run_b(void *arg) {
    loop_thread *lt = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    /* A source of its own keeps the mode from being empty. */
    RLRunLoopSourceContext c = {0};
    RLRunLoopSourceRef keep = RLRunLoopSourceCreate(NULL, 0, &c);
    RLRunLoopAddSource(rl, keep, "B");
    atomic_store(&lt->rl, rl);
    while (!atomic_load(&lt->stop))
        RLRunLoopRunInMode("B", 0.01, false);
    RLRunLoopSourceInvalidate(keep);
    RLRelease(keep);
    return NULL;
}

static void *signal_from(void *arg) {
    RLRunLoopSourceRef s = arg;
    RLRunLoopSourceSignal(s);
    return NULL;
}

static _Atomic long performs_a, performs_b;
static RLRunLoopRef a_loop;

/* Runs this thread's loop in "A" (or sleeps, when "A" is empty) until *v
 * reaches want; a generous limit. */
static bool wait_for(_Atomic long *v, long want) {
    double limit = RLAbsoluteTimeGetCurrent() + 20;
    while (atomic_load(v) < want && RLAbsoluteTimeGetCurrent() < limit)
        if (RLRunLoopRunInMode("A", 0.001, false) == kRLRunLoopRunFinished)
            usleep(100);
    return atomic_load(v) >= want;
}

static void perform_by_loop(void *info) {
    (void)info;
    atomic_fetch_add(RLRunLoopGetCurrent() == a_loop ? &performs_a : &performs_b, 1);
}

static void test_source_moving_between_loops(void **state) {
    a_loop = RLRunLoopGetCurrent();
    atomic_store(&performs_a, 0);
    atomic_store(&performs_b, 0);
    loop_thread lt = {0};
    pthread_t tb;
    assert_int_equal(pthread_create(&tb, NULL, run_b, &lt), 0);
    RLRunLoopRef b;
    while ((b = atomic_load(&lt.rl)) == NULL)
        sched_yield();
    RLRunLoopSourceContext c = {0};
    c.perform = perform_by_loop;
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(s);
    /* Ours only, signalled from another thread: performed here. */
    assert_true(RLRunLoopAddSource(a_loop, s, "A"));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, signal_from, s), 0);
    pthread_join(t, NULL);
    assert_true(wait_for(&performs_a, 1));
    /* In both loops: performed once, by one of them. */
    assert_true(RLRunLoopAddSource(b, s, "B"));
    assert_int_equal(pthread_create(&t, NULL, signal_from, s), 0);
    pthread_join(t, NULL);
    RLRunLoopWakeUp(b);
    double limit = RLAbsoluteTimeGetCurrent() + 20;
    while (atomic_load(&performs_a) + atomic_load(&performs_b) < 2 && RLAbsoluteTimeGetCurrent() < limit)
        RLRunLoopRunInMode("A", 0.001, false);
    usleep(2000); /* a second perform, were there one, would come now */
    assert_int_equal(atomic_load(&performs_a) + atomic_load(&performs_b), 2);
    /* Left ours: the other loop alone performs it, from now on. */
    assert_true(RLRunLoopRemoveSource(a_loop, s, "A"));
    long before_a = atomic_load(&performs_a), before_b = atomic_load(&performs_b);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(pthread_create(&t, NULL, signal_from, s), 0);
        pthread_join(t, NULL);
        RLRunLoopWakeUp(b);
        assert_true(wait_for(&performs_b, before_b + i + 1));
    }
    RLRunLoopRunInMode("A", 0, false);
    assert_int_equal(atomic_load(&performs_a), before_a);
    /* Back to ours only: performed here again. */
    assert_true(RLRunLoopAddSource(a_loop, s, "A"));
    assert_true(RLRunLoopRemoveSource(b, s, "B"));
    for (int i = 0; i < 20; i++) {
        assert_int_equal(pthread_create(&t, NULL, signal_from, s), 0);
        pthread_join(t, NULL);
        assert_true(wait_for(&performs_a, before_a + i + 1));
    }
    atomic_store(&lt.stop, true);
    RLRunLoopWakeUp(b);
    pthread_join(tb, NULL);
    RLRunLoopSourceInvalidate(s);
    RLRelease(s);
}

/* ---- producers at full speed while the loop removes and invalidates ---- */

enum { STRESS_ROUNDS = 300, STRESS_PRODUCERS = 2, STRESS_SLOTS = 4 };

typedef struct stress_src {
    _Atomic bool gone;     /* removed or invalidated: a perform now is an error */
    _Atomic long performs; /* performs after `gone` */
} stress_src;

static _Atomic long stress_late, stress_released, stress_performed;

static const void *stress_retain(const void *info) { return info; }
static void stress_release(const void *info) {
    free((void *)info);
    atomic_fetch_add(&stress_released, 1);
}
static void stress_perform(void *info) {
    stress_src *x = info;
    atomic_fetch_add(&stress_performed, 1);
    if (atomic_load(&x->gone))
        atomic_fetch_add(&stress_late, 1);
}

typedef struct {
    RLRunLoopRef rl;
    _Atomic(RLRunLoopSourceRef) slot[STRESS_SLOTS]; /* each holds a reference for a producer */
    _Atomic bool stop;
} stress_state;

/* Takes a source from a slot and signals it, waking the loop, until the
 * loop thread has removed or invalidated it, and a little after. */
static void *stress_producer(void *arg) {
    stress_state *g = arg;
    unsigned k = 0;
    while (!atomic_load(&g->stop)) {
        RLRunLoopSourceRef s = atomic_exchange(&g->slot[k++ % STRESS_SLOTS], NULL);
        if (!s) {
            sched_yield();
            continue;
        }
        RLRunLoopSourceContext c;
        assert_true(RLRunLoopSourceGetContext(s, &c));
        stress_src *x = c.info; /* alive: its release waits for this reference */
        int after = 64;
        for (long i = 0; after > 0 && i < 1000000 && !atomic_load(&g->stop); i++) {
            RLRunLoopSourceSignal(s);
            RLRunLoopWakeUp(g->rl);
            if (atomic_load(&x->gone))
                after--;
        }
        RLRelease(s);
    }
    return NULL;
}

static void test_producers_race_removal_and_invalidation(void **state) {
    stress_state g = {.rl = RLRunLoopGetCurrent()};
    atomic_store(&stress_late, 0);
    atomic_store(&stress_released, 0);
    atomic_store(&stress_performed, 0);
    pthread_t t[STRESS_PRODUCERS];
    for (int i = 0; i < STRESS_PRODUCERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stress_producer, &g), 0);
    for (int round = 0; round < STRESS_ROUNDS; round++) {
        RLRunLoopSourceRef s[3];
        stress_src *x[3];
        for (int j = 0; j < 3; j++) {
            x[j] = calloc(1, sizeof *x[j]);
            assert_non_null(x[j]);
            RLRunLoopSourceContext c = {0, x[j], stress_retain, stress_release, NULL, NULL, NULL, NULL, NULL,
                                        stress_perform};
            s[j] = RLRunLoopSourceCreate(NULL, 0, &c);
            assert_non_null(s[j]);
            assert_true(RLRunLoopAddSource(g.rl, s[j], "Race"));
            if (j == 2)
                assert_true(RLRunLoopAddSource(g.rl, s[j], "RaceOther")); /* in two modes */
            /* A reference for whichever producer takes it; one left over
             * from an earlier round is dropped here. */
            RLRetain(s[j]);
            RLRunLoopSourceRef old = atomic_exchange(&g.slot[(round * 3 + j) % STRESS_SLOTS], s[j]);
            if (old)
                RLRelease(old);
        }
        /* A few passes, each over when a source was performed or after a
         * millisecond: the producers signal meanwhile. */
        for (int pass = 0; pass < 1 + round % 3; pass++)
            RLRunLoopRunInMode("Race", 0.001, true);
        /* One removed, one invalidated, one removed from one mode then
         * invalidated; a perform of any after that is late. */
        atomic_store(&x[0]->gone, true);
        assert_true(RLRunLoopRemoveSource(g.rl, s[0], "Race"));
        RLRunLoopSourceInvalidate(s[1]);
        atomic_store(&x[1]->gone, true);
        assert_true(RLRunLoopRemoveSource(g.rl, s[2], "Race"));
        RLRunLoopSourceInvalidate(s[2]);
        atomic_store(&x[2]->gone, true);
        RLRunLoopRunInMode("Race", 0, false);
        RLRunLoopRunInMode("RaceOther", 0, false);
        for (int j = 0; j < 3; j++)
            RLRelease(s[j]);
    }
    atomic_store(&g.stop, true);
    for (int i = 0; i < STRESS_PRODUCERS; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < STRESS_SLOTS; k++) {
        RLRunLoopSourceRef old = atomic_exchange(&g.slot[k], NULL);
        if (old)
            RLRelease(old);
    }
    /* No source performed after its removal or invalidation returned, and
     * every source freed once every reference is gone: the inbox kept none. */
    assert_int_equal(atomic_load(&stress_late), 0);
    assert_int_equal(atomic_load(&stress_released), 3 * STRESS_ROUNDS);
    assert_true(atomic_load(&stress_performed) > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_signal_order_across_threads, rl_trace_setup),
        cmocka_unit_test_setup(test_signal_order_with_a_source_in_two_modes, rl_trace_setup),
        cmocka_unit_test_setup(test_removed_before_the_pass, rl_trace_setup),
        cmocka_unit_test_setup(test_signal_kept_for_the_mode_joined_next, rl_trace_setup),
        cmocka_unit_test_setup(test_a_mode_joined_keeps_the_signal_order, rl_trace_setup),
        cmocka_unit_test_setup(test_other_threads_signals_leave_the_loop_lock_biased, rl_trace_setup),
        cmocka_unit_test(test_source_moving_between_loops),
        cmocka_unit_test(test_producers_race_removal_and_invalidation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
