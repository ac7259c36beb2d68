/*
 * test_main_queue.c — the main dispatch queue on the main thread's loop, as
 * CoreFoundation serves it: a source of every common mode of the main loop
 * (docs/runloop.md). Linked with the Swift toolchain's libdispatch; runs on
 * the main thread. Blocks are queued with dispatch_async_f (gcc has no
 * blocks); one test uses dispatch_async with a block under clang.
 */
#ifndef __has_feature /* gcc 12: the toolchain's dispatch headers use it */
#define __has_feature(x) 0
#endif
#ifndef __has_extension
#define __has_extension(x) 0
#endif
#include <dispatch/dispatch.h>

#include "testutil.h"
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static RLRunLoopRef main_loop(void) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_ptr_equal(rl, RLRunLoopGetMain());
    return rl;
}

/* The passes of a run: "BT" at each, and BW/AW around each wait. */
static RLRunLoopObserverRef observe(RLRunLoopMode mode, RLOptionFlags what) {
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, what, true, 0, rl_trace_observer, NULL);
    assert_non_null(o);
    assert_true(RLRunLoopAddObserver(RLRunLoopGetCurrent(), o, mode));
    return o;
}

static void unobserve(RLRunLoopObserverRef o) {
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
}

/* A block that records its name (a string literal). */
static void named(void *name) { rl_trace_add(name); }

static void queue(const char *name) { dispatch_async_f(dispatch_get_main_queue(), (void *)name, named); }

static void mark_done(void *p) { atomic_store((atomic_int *)p, 1); }

/* Runs the main loop's default mode until every block queued so far ran. */
static void drain(void) {
    atomic_int done = 0;
    dispatch_async_f(dispatch_get_main_queue(), &done, mark_done);
    double t0 = rl_test_now();
    while (!atomic_load(&done) && rl_test_now() - t0 < 10)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, true);
    assert_true(atomic_load(&done));
}

static void test_blocks_run_in_order_and_count_as_a_handled_source(void **state) {
    main_loop();
    queue("a");
    queue("b");
    queue("c");
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    assert_trace("a b c");
}

static void test_a_poll_serves_the_queue(void **state) {
    main_loop();
    queue("p1");
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, true), kRLRunLoopRunHandledSource);
    queue("p2");
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunTimedOut);
    assert_trace("p1 p2");
}

static void queue_from_block(void *name) {
    rl_trace_add(name);
    queue("inner");
}

static void test_a_block_queued_by_a_block_runs_in_the_next_pass(void **state) {
    main_loop();
    RLRunLoopObserverRef o = observe(kRLRunLoopDefaultMode, kRLRunLoopBeforeTimers);
    dispatch_async_f(dispatch_get_main_queue(), "outer", queue_from_block);
    queue("second");
    /* One serve: the blocks pending at its start, in one pass. */
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    unobserve(o);
    assert_trace("BT outer second BT inner");
}

static void test_the_main_default_mode_is_never_empty(void **state) {
    RLRunLoopRef rl = main_loop();
    assert_false(RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode));
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.02, false), kRLRunLoopRunTimedOut);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunTimedOut);
    /* A private mode with nothing in it is empty, as anywhere. */
    assert_int_equal(RLRunLoopRunInMode("MQEmptyPrivate", 0.02, false), kRLRunLoopRunFinished);
}

static void test_served_in_every_common_mode(void **state) {
    RLRunLoopRef rl = main_loop();
    RLRunLoopAddCommonMode(rl, "MQCommon");
    /* The mode exists once something is in it; the queue then keeps it. */
    RLRunLoopTimerRef far = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1e6, 0, 0, 0, NULL, NULL);
    assert_true(RLRunLoopAddTimer(rl, far, "MQCommon"));
    queue("in-common");
    assert_int_equal(RLRunLoopRunInMode("MQCommon", 5, true), kRLRunLoopRunHandledSource);
    assert_trace("in-common");
    RLRunLoopTimerInvalidate(far);
    RLRelease(far);
    assert_false(RLRunLoopIsFinished(rl, "MQCommon"));
    /* A private mode made common later serves it from then on. */
    far = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1e6, 0, 0, 0, NULL, NULL);
    assert_true(RLRunLoopAddTimer(rl, far, "MQLater"));
    queue("later");
    assert_int_equal(RLRunLoopRunInMode("MQLater", 0, true), kRLRunLoopRunTimedOut);
    RLRunLoopAddCommonMode(rl, "MQLater");
    assert_int_equal(RLRunLoopRunInMode("MQLater", 5, true), kRLRunLoopRunHandledSource);
    assert_trace("in-common later");
    RLRunLoopTimerInvalidate(far);
    RLRelease(far);
}

typedef struct {
    RLRunLoopRef rl;
    const char *name;
} queue_later_arg;

static void *queue_while_waiting(void *p) {
    queue_later_arg *a = p;
    rl_test_wait_until_waiting(a->rl);
    queue(a->name);
    return NULL;
}

static void test_not_served_in_a_private_mode_nor_woken_there(void **state) {
    RLRunLoopRef rl = main_loop();
    RLRunLoopSourceRef keep = rl_test_keep_mode("MQPrivate");
    RLRunLoopObserverRef o = observe("MQPrivate", kRLRunLoopBeforeWaiting | kRLRunLoopAfterWaiting);
    queue("early");
    assert_int_equal(RLRunLoopRunInMode("MQPrivate", 0, true), kRLRunLoopRunTimedOut);
    /* A block queued while the loop sleeps in the private mode does not
     * wake it: one wait, to its timeout. */
    queue_later_arg a = {rl, "late"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_while_waiting, &a), 0);
    assert_int_equal(RLRunLoopRunInMode("MQPrivate", 0.3, false), kRLRunLoopRunTimedOut);
    pthread_join(t, NULL);
    unobserve(o);
    rl_test_unkeep(keep);
    assert_trace("BW AW");
    /* Back in the default mode, both run, without waiting first. */
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    assert_trace("BW AW early late");
}

static void test_a_block_from_another_thread_wakes_the_sleeping_loop(void **state) {
    RLRunLoopRef rl = main_loop();
    queue_later_arg a = {rl, "woke"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, queue_while_waiting, &a), 0);
    double t0 = rl_test_now();
    /* Long enough that only the block can end it in time. */
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 30, true), kRLRunLoopRunHandledSource);
    assert_true(rl_test_now() - t0 < 25);
    pthread_join(t, NULL);
    assert_trace("woke");
}

static void record_when(void *p) { *(double *)p = rl_test_now(); }

static void test_dispatch_after_is_never_early(void **state) {
    main_loop();
    double fired = 0;
    double t0 = rl_test_now();
    dispatch_after_f(dispatch_time(DISPATCH_TIME_NOW, 50 * 1000 * 1000), dispatch_get_main_queue(), &fired,
                     record_when);
    while (fired == 0 && rl_test_now() - t0 < 10)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true);
    assert_true(fired > 0);
    assert_true(fired - t0 >= 0.050);
}

static void nested_run_in_block(void *p) {
    rl_trace_add("A");
    queue("B");
    /* The queue is not served, and not counted, inside one of its blocks:
     * the default mode is empty here. */
    rl_trace_add(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false) == kRLRunLoopRunFinished ? "fin" : "not-fin");
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    rl_trace_add(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false) == kRLRunLoopRunTimedOut ? "timeout" : "?");
    rl_test_unkeep(keep);
    rl_trace_add("A-end");
}

static void test_a_run_nested_in_a_block_does_not_serve_the_queue(void **state) {
    main_loop();
    dispatch_async_f(dispatch_get_main_queue(), NULL, nested_run_in_block);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    assert_trace("A fin timeout A-end B");
}

static void nested_run_in_timer(RLRunLoopTimerRef t, void *info) {
    rl_trace_add("T");
    queue("in-timer");
    rl_trace_add(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true) == kRLRunLoopRunHandledSource ? "handled" : "?");
}

static void test_a_run_nested_in_a_timer_serves_the_queue(void **state) {
    RLRunLoopRef rl = main_loop();
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent(), 0, 0, 0, nested_run_in_timer, NULL);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunTimedOut);
    RLRelease(t);
    assert_trace("T in-timer handled");
}

static void stop_block(void *name) {
    rl_trace_add(name);
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void timer_queues(RLRunLoopTimerRef t, void *info) {
    rl_trace_add("T");
    dispatch_async_f(dispatch_get_main_queue(), "B", stop_block);
}

/* As CF: a pass that follows one that did not serve the queue looks at it
 * before waiting, and serves it without waiting (no BeforeWaiting); a pass
 * that follows a serve waits first. */
static void test_looked_at_before_the_wait_unless_just_served(void **state) {
    RLRunLoopRef rl = main_loop();
    RLRunLoopObserverRef o =
        observe(kRLRunLoopDefaultMode, kRLRunLoopBeforeTimers | kRLRunLoopBeforeWaiting | kRLRunLoopAfterWaiting);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0, timer_queues, NULL);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, false), kRLRunLoopRunStopped);
    RLRelease(t);
    assert_trace("BT BW AW T BT B");
    rl_trace_clear();
    dispatch_async_f(dispatch_get_main_queue(), "outer", queue_from_block);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 5, true), kRLRunLoopRunHandledSource);
    unobserve(o);
    assert_trace("BT BW AW outer BT BW AW inner");
}

static void nested_run_after_a_report(RLRunLoopTimerRef t, void *info) {
    double t0 = rl_test_now();
    RLRunLoopRunResult r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 30, true);
    rl_trace_add(r == kRLRunLoopRunHandledSource ? "nested-handled" : "?");
    rl_trace_add(rl_test_now() - t0 < 20 ? "at-once" : "slept");
}

/* The wait that woke for a timer also saw the queue's handle: a run nested
 * in the timer's callout serves the queue without sleeping first (the
 * handle reports once; the loop remembers it). */
static void test_a_run_nested_after_the_report_does_not_sleep(void **state) {
    RLRunLoopRef rl = main_loop();
    queue("pending");
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0,
                                               nested_run_after_a_report, NULL);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.2, true), kRLRunLoopRunTimedOut);
    RLRelease(t);
    assert_trace("pending nested-handled at-once");
}

static void *run_own_loop(void *p) {
    /* Another thread's default mode: empty, and the queue is not served. */
    RLRunLoopRunResult empty = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false);
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    RLRunLoopRunResult kept = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, false);
    rl_test_unkeep(keep);
    return (void *)(intptr_t)(empty == kRLRunLoopRunFinished && kept == kRLRunLoopRunTimedOut);
}

static void test_never_served_by_another_threads_loop(void **state) {
    main_loop();
    queue("main-only");
    assert_ptr_equal(rl_test_on_other_thread(run_own_loop, NULL), (void *)1);
    assert_trace("");
    drain();
    assert_trace("main-only");
}

static bool child_main_loop_is_plain(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    return rl == RLRunLoopGetMain() && RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode) &&
           RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false) == kRLRunLoopRunFinished;
}

/* libdispatch may not be used in the child of a process that used the main
 * queue's handle: a fork() child's main loop has no main queue, and its
 * empty default mode finishes. */
static void test_a_fork_child_has_no_main_queue(void **state) {
    main_loop();
    queue("before-fork");
    drain();
    rl_test_in_child(child_main_loop_is_plain, NULL, "fork child's main loop");
    queue("after-fork");
    drain();
    assert_trace("before-fork after-fork");
}

#if __BLOCKS__
static void test_blocks_with_dispatch_async(void **state) {
    main_loop();
    __block int n = 0;
    for (int i = 0; i < 3; i++)
        dispatch_async(dispatch_get_main_queue(), ^{
          if (n == i)
              n++;
        });
    drain();
    assert_int_equal(n, 3);
}
#endif

/* 100,000 blocks from two threads: every one runs, in order per producer. */
enum { PRODUCERS = 2 };

typedef struct {
    int producer;
    long count;
    long next[PRODUCERS]; /* the main thread's: the next number expected per producer */
    atomic_long ran;
    atomic_long out_of_order;
} stream;

typedef struct {
    stream *s;
    int producer;
    long seq;
} item;

static void run_item(void *p) {
    item *it = p;
    stream *s = it->s;
    if (s->next[it->producer] != it->seq)
        atomic_fetch_add(&s->out_of_order, 1);
    s->next[it->producer] = it->seq + 1;
    atomic_fetch_add(&s->ran, 1);
}

typedef struct {
    stream *s;
    int producer;
    item *items;
} producer_arg;

static void *produce(void *p) {
    producer_arg *a = p;
    for (long i = 0; i < a->s->count; i++) {
        a->items[i] = (item){a->s, a->producer, i};
        dispatch_async_f(dispatch_get_main_queue(), &a->items[i], run_item);
    }
    return NULL;
}

static void test_many_blocks_from_two_threads(void **state) {
    main_loop();
    stream s = {.count = rl_test_iters(50000)};
    producer_arg args[PRODUCERS];
    pthread_t t[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        args[i] = (producer_arg){&s, i, calloc((size_t)s.count, sizeof(item))};
        assert_non_null(args[i].items);
        assert_int_equal(pthread_create(&t[i], NULL, produce, &args[i]), 0);
    }
    double t0 = rl_test_now();
    while (atomic_load(&s.ran) < PRODUCERS * s.count && rl_test_now() - t0 < 60)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, false);
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(t[i], NULL);
        free(args[i].items);
    }
    assert_int_equal(atomic_load(&s.ran), PRODUCERS * s.count);
    assert_int_equal(atomic_load(&s.out_of_order), 0);
    for (int i = 0; i < PRODUCERS; i++)
        assert_int_equal(s.next[i], s.count);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_blocks_run_in_order_and_count_as_a_handled_source, rl_trace_setup),
        cmocka_unit_test_setup(test_a_poll_serves_the_queue, rl_trace_setup),
        cmocka_unit_test_setup(test_a_block_queued_by_a_block_runs_in_the_next_pass, rl_trace_setup),
        cmocka_unit_test_setup(test_the_main_default_mode_is_never_empty, rl_trace_setup),
        cmocka_unit_test_setup(test_served_in_every_common_mode, rl_trace_setup),
        cmocka_unit_test_setup(test_not_served_in_a_private_mode_nor_woken_there, rl_trace_setup),
        cmocka_unit_test_setup(test_a_block_from_another_thread_wakes_the_sleeping_loop, rl_trace_setup),
        cmocka_unit_test_setup(test_dispatch_after_is_never_early, rl_trace_setup),
        cmocka_unit_test_setup(test_a_run_nested_in_a_block_does_not_serve_the_queue, rl_trace_setup),
        cmocka_unit_test_setup(test_a_run_nested_in_a_timer_serves_the_queue, rl_trace_setup),
        cmocka_unit_test_setup(test_a_run_nested_after_the_report_does_not_sleep, rl_trace_setup),
        cmocka_unit_test_setup(test_never_served_by_another_threads_loop, rl_trace_setup),
        cmocka_unit_test_setup(test_looked_at_before_the_wait_unless_just_served, rl_trace_setup),
        cmocka_unit_test_setup(test_a_fork_child_has_no_main_queue, rl_trace_setup),
#if __BLOCKS__
        cmocka_unit_test_setup(test_blocks_with_dispatch_async, rl_trace_setup),
#endif
        cmocka_unit_test_setup(test_many_blocks_from_two_threads, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
