/* test_signal_wakeup.c — no lost wake-up between a thread that signals a
 * version-0 source and wakes a loop, and the loop going to sleep: the guide's
 * pattern (a command queued under a mutex, RLRunLoopSourceSignal,
 * RLRunLoopWakeUp) one command at a time, each sent at a random moment of the
 * loop's way to sleep (BeforeWaiting, the spin, the sleep itself); a bare
 * RLRunLoopWakeUp made after the loop's BeforeWaiting always ends its wait;
 * several producers at full speed, the last command delivered without the run
 * timing out. The runs have long time limits: a lost wake-up shows as a
 * command the loop never takes (the producer gives up after a few seconds
 * and the test fails), never as one taken late by a timeout. */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

/* A cheap random stream per thread (xorshift). */
static uint32_t next_rand(uint32_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Waits a random while, up to a few microseconds, sometimes yielding:
 * where in the loop's way to sleep the next signal lands. */
static void random_delay(uint32_t *x) {
    uint32_t r = next_rand(x);
    switch (r % 8) {
    case 0:
        break; /* at once */
    case 1:
        sched_yield();
        break;
    default:
        for (uint32_t i = (r >> 3) % 3000; i > 0; i--)
            relax();
    }
}

/* ---- the guide's pattern, one command at a time ---- */

typedef struct {
    pthread_mutex_t mu;
    long queued;           /* commands in the queue, under mu */
    _Atomic long taken;    /* commands the performs took */
    _Atomic long befores;  /* BeforeWaiting activities of the loop */
    _Atomic long mark;     /* `befores` when the last perform took its commands */
    _Atomic bool done;     /* the producer is done (or gave up) */
    _Atomic long lost_at;  /* the command the loop never took; -1: none */
    long commands;
    RLRunLoopSourceRef src;
    RLRunLoopRef rl;
} lockstep;

static void lockstep_perform(void *info) {
    lockstep *g = info;
    pthread_mutex_lock(&g->mu);
    long n = g->queued;
    g->queued = 0;
    pthread_mutex_unlock(&g->mu);
    atomic_store(&g->mark, atomic_load(&g->befores));
    atomic_fetch_add(&g->taken, n);
}

/* Counts the loop's ways to sleep; ends the run once the producer is done
 * (a stop made here keeps the loop from sleeping). */
static void count_before_waiting(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    lockstep *g = info;
    atomic_fetch_add(&g->befores, 1);
    if (atomic_load(&g->done))
        RLRunLoopStop(RLRunLoopGetCurrent());
}

/* Until `*v` is above `floor`, at most 5 s (spinning a while, then
 * yielding): false if it never gets there. */
static bool wait_above(_Atomic long *v, long floor) {
    double t0 = rl_test_now();
    for (unsigned spins = 0; atomic_load(v) <= floor; spins++) {
        if (spins > 1000) {
            sched_yield();
            if (rl_test_now() - t0 > 5)
                return false;
        }
    }
    return true;
}

static void *lockstep_producer(void *arg) {
    lockstep *g = arg;
    uint32_t x = 0x9e3779b9u;
    for (long i = 0; i < g->commands; i++) {
        /* Half the commands are sent once the loop has begun its way to
         * sleep (its BeforeWaiting observer ran since the perform that took
         * the last command), a random while later; the others at a random
         * moment. With nothing left to do, the loop always gets there. */
        if (i % 2 == 0)
            (void)wait_above(&g->befores, atomic_load(&g->mark));
        random_delay(&x);
        pthread_mutex_lock(&g->mu);
        g->queued++;
        pthread_mutex_unlock(&g->mu);
        RLRunLoopSourceSignal(g->src);
        RLRunLoopWakeUp(g->rl);
        if (!wait_above(&g->taken, i)) {
            atomic_store(&g->lost_at, i);
            break;
        }
    }
    /* The loop is on its way to a BeforeWaiting that sees `done`, or past
     * it and woken by this. */
    atomic_store(&g->done, true);
    RLRunLoopWakeUp(g->rl);
    return NULL;
}

static void test_guide_command_sent_as_the_loop_sleeps_is_never_lost(void **state) {
    lockstep g = {.commands = rl_test_iters(20000), .lost_at = -1, .rl = RLRunLoopGetCurrent()};
    pthread_mutex_init(&g.mu, NULL);
    RLRunLoopSourceContext c = {0};
    c.info = &g;
    c.perform = lockstep_perform;
    g.src = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(g.src);
    assert_true(RLRunLoopAddSource(g.rl, g.src, "Lockstep"));
    RLRunLoopObserverContext oc = {0};
    oc.info = &g;
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeWaiting, true, 0, count_before_waiting, &oc);
    assert_non_null(o);
    RLRunLoopAddObserver(g.rl, o, "Lockstep");
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, lockstep_producer, &g), 0);
    /* One long run, which ends once the producer is done: a command whose
     * wake-up is lost is never taken (the producer gives up on it). */
    RLRunLoopRunResult r = RLRunLoopRunInMode("Lockstep", 60, false);
    pthread_join(t, NULL);
    if (atomic_load(&g.lost_at) >= 0)
        print_error("command %ld of %ld was never taken\n", atomic_load(&g.lost_at), g.commands);
    assert_int_equal(atomic_load(&g.lost_at), -1);
    assert_int_equal(r, kRLRunLoopRunStopped); /* not timed out: the last wake-up ended its wait */
    assert_int_equal(atomic_load(&g.taken), g.commands);
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    RLRunLoopSourceInvalidate(g.src);
    RLRelease(g.src);
    pthread_mutex_destroy(&g.mu);
}

/* ---- a bare wake-up after BeforeWaiting ---- */

typedef struct {
    _Atomic long befores, afters;
    _Atomic bool done;
    _Atomic long lost_at;
    long wakes;
    RLRunLoopRef rl;
} wakes;

static void count_waits(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    wakes *w = info;
    atomic_fetch_add(a == kRLRunLoopBeforeWaiting ? &w->befores : &w->afters, 1);
    if (atomic_load(&w->done))
        RLRunLoopStop(RLRunLoopGetCurrent());
}

static void *wake_producer(void *arg) {
    wakes *w = arg;
    uint32_t x = 0x2545f491u;
    for (long i = 0; i < w->wakes; i++) {
        /* The loop's (i+1)th BeforeWaiting: it is on its way to sleep, and
         * takes wake-ups; the one sent now ends the wait that follows. */
        (void)wait_above(&w->befores, i);
        random_delay(&x);
        RLRunLoopWakeUp(w->rl);
        if (!wait_above(&w->afters, i)) {
            atomic_store(&w->lost_at, i);
            break;
        }
    }
    atomic_store(&w->done, true);
    RLRunLoopWakeUp(w->rl);
    return NULL;
}

static void test_wake_up_after_before_waiting_always_ends_the_wait(void **state) {
    wakes w = {.wakes = rl_test_iters(10000), .lost_at = -1, .rl = RLRunLoopGetCurrent()};
    RLRunLoopSourceRef keep = rl_test_keep_mode("Wakes");
    RLRunLoopObserverContext oc = {0};
    oc.info = &w;
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeWaiting | kRLRunLoopAfterWaiting, true, 0,
                                                     count_waits, &oc);
    assert_non_null(o);
    RLRunLoopAddObserver(w.rl, o, "Wakes");
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wake_producer, &w), 0);
    RLRunLoopRunResult r = RLRunLoopRunInMode("Wakes", 60, false);
    pthread_join(t, NULL);
    if (atomic_load(&w.lost_at) >= 0)
        print_error("wake-up %ld of %ld did not end the wait\n", atomic_load(&w.lost_at), w.wakes);
    assert_int_equal(atomic_load(&w.lost_at), -1);
    assert_int_equal(r, kRLRunLoopRunStopped);
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    rl_test_unkeep(keep);
}

/* ---- several producers at full speed ---- */

enum { PRODUCERS = 3 };

typedef struct {
    pthread_mutex_t mu;
    long queued, taken, performs;
    long per_producer;
    RLRunLoopSourceRef src;
    RLRunLoopRef rl;
} stream;

static void stream_perform(void *info) {
    stream *s = info;
    pthread_mutex_lock(&s->mu);
    s->taken += s->queued;
    s->queued = 0;
    long taken = s->taken;
    pthread_mutex_unlock(&s->mu);
    s->performs++;
    if (taken == PRODUCERS * s->per_producer)
        RLRunLoopStop(RLRunLoopGetCurrent());
}

static void *stream_producer(void *arg) {
    stream *s = arg;
    uint32_t x = (uint32_t)(uintptr_t)&x | 1u;
    for (long i = 0; i < s->per_producer; i++) {
        pthread_mutex_lock(&s->mu);
        s->queued++;
        pthread_mutex_unlock(&s->mu);
        RLRunLoopSourceSignal(s->src);
        RLRunLoopWakeUp(s->rl);
        if (next_rand(&x) % 64 == 0)
            random_delay(&x); /* now and then, let the loop catch up and sleep */
    }
    return NULL;
}

static void *stream_producers(void *arg) {
    stream *s = arg;
    pthread_t t[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, stream_producer, s), 0);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(t[i], NULL);
    return NULL;
}

static void test_several_producers_every_command_taken_without_a_timeout(void **state) {
    stream s = {.per_producer = rl_test_iters(200000), .rl = RLRunLoopGetCurrent()};
    pthread_mutex_init(&s.mu, NULL);
    RLRunLoopSourceContext c = {0};
    c.info = &s;
    c.perform = stream_perform;
    s.src = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(s.src);
    assert_true(RLRunLoopAddSource(s.rl, s.src, "Stream"));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stream_producers, &s), 0);
    /* One run: only the perform that takes the last command stops it. A
     * lost wake-up after the last command leaves it asleep until the limit. */
    RLRunLoopRunResult r = RLRunLoopRunInMode("Stream", 60, false);
    pthread_join(t, NULL);
    assert_int_equal(r, kRLRunLoopRunStopped);
    assert_int_equal(s.taken, PRODUCERS * s.per_producer);
    assert_int_equal(s.queued, 0);
    assert_true(s.performs >= 1 && s.performs <= PRODUCERS * s.per_producer);
    RLRunLoopSourceInvalidate(s.src);
    RLRelease(s.src);
    pthread_mutex_destroy(&s.mu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guide_command_sent_as_the_loop_sleeps_is_never_lost),
        cmocka_unit_test(test_wake_up_after_before_waiting_always_ends_the_wait),
        cmocka_unit_test(test_several_producers_every_command_taken_without_a_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
