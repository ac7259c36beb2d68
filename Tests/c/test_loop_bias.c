/* test_loop_bias.c — the loop lock's owner bias (loop/rl_bias.c, the
 * protocol in rl_lock.h): the loop's thread alone makes its lock biased;
 * another thread taking it revokes the bias; no two threads are ever inside
 * a loop lock while the owner hammers adds, removes and passes and one to
 * three other threads add and remove timers, signal a source and wake the
 * loop (a non-atomic counter and an "inside" mark checked under the lock);
 * the same check sees two threads inside once the protocol is broken on
 * purpose (RL_FAULT_BIAS_BREAK); a process where membarrier is refused
 * (RL_FAULT_MEMBARRIER, RL_BIAS=0) biases no lock; fork() while an owner
 * hammers its loop neither deadlocks nor leaves the child a biased lock. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "RLBase.h" /* rl__faults, RL_FAULT_* */
#include "rl_lock.h"

RL__HIDDEN extern _Atomic unsigned long rl__bias_revokes;
RL__HIDDEN extern uint32_t rl__bias_cap;

typedef struct stress {
    RLRunLoopRef rl; /* the owner's loop */
    RLRunLoopSourceRef src;
    bool real;  /* timers, signals and passes as well as the bare lock */
    int others; /* threads besides the owner */
    _Atomic bool ready;
    _Atomic int done; /* other threads finished */
    _Atomic bool stop; /* for the broken-lock check: an overlap was seen */
    long iters;
    /* Under the loop lock only, accessed as plain memory. */
    long counter;
    int inside;
    _Atomic long entries, overlaps;
    _Atomic long performed;
    _Atomic bool owner_failed;
} stress;

typedef struct role {
    stress *s;
    int idx; /* 0: the owner */
} role;

/* Inside the lock: a mark that no other thread may see set, and a counter
 * that loses an increment if two threads are inside at once. */
static void crit(stress *s) {
    rl__loop_lock(s->rl);
    volatile int *in = &s->inside;
    volatile long *c = &s->counter;
    int v = *in;
    *in = v + 1;
    long n = *c;
    for (volatile int k = 0; k < 16; k++) {
    }
    *c = n + 1;
    bool bad = v != 0 || *in != v + 1;
    *in = v;
    rl__loop_unlock(s->rl);
    if (bad)
        atomic_fetch_add(&s->overlaps, 1);
    atomic_fetch_add_explicit(&s->entries, 1, memory_order_relaxed);
}

static void nop_timer(RLRunLoopTimerRef t, void *info) {}
static void count_perform(void *info) { atomic_fetch_add_explicit((_Atomic long *)info, 1, memory_order_relaxed); }

static RLRunLoopTimerRef far_timer(void) {
    return RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, nop_timer, NULL);
}

static void owner(stress *s) {
    s->rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t[4];
    for (int i = 0; i < 4; i++)
        t[i] = far_timer();
    RLRunLoopSourceContext c = {0};
    c.info = &s->performed;
    c.perform = count_perform;
    s->src = RLRunLoopSourceCreate(NULL, 0, &c);
    RLRunLoopAddSource(s->rl, s->src, kRLRunLoopDefaultMode);
    for (int i = 0; i < 4; i++)
        RLRunLoopAddTimer(s->rl, t[i], kRLRunLoopDefaultMode); /* their home: this loop */
    for (int i = 0; i < 1000; i++)
        crit(s);
    /* Alone so far: biased where the process may bias, never elsewhere. */
    if (rl__loop_biased(s->rl) != rl__bias_usable())
        atomic_store(&s->owner_failed, true);
    atomic_store(&s->ready, true);
    for (unsigned long k = 0; atomic_load(&s->done) < s->others && !atomic_load(&s->stop); k++) {
        for (int i = 0; i < 64; i++) {
            crit(s);
            if (s->real) {
                RLRunLoopTimerRef x = t[(k + i) & 3];
                if (!RLRunLoopRemoveTimer(s->rl, x, kRLRunLoopDefaultMode) ||
                    !RLRunLoopAddTimer(s->rl, x, kRLRunLoopDefaultMode))
                    atomic_store(&s->owner_failed, true);
            }
        }
        if (s->real)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, true);
    }
    /* Stopped early (the broken-lock check), another thread may be between
     * its look at `stop` and its next entry: this thread's loop, which goes
     * with the thread, must outlive their last entry (one entered the
     * freed loop's lock: ASan, 1 run in 140). */
    while (atomic_load(&s->done) < s->others)
        sched_yield();
    for (int i = 0; i < 4; i++) {
        RLRunLoopTimerInvalidate(t[i]);
        RLRelease(t[i]);
    }
    RLRunLoopSourceInvalidate(s->src);
}

/* Pauses until the owner has biased its lock again (where the process may
 * bias), at most a few milliseconds: so that the protocol, not only the
 * mutex, is exercised however the threads are scheduled (valgrind runs
 * one thread at a time, in long slices). Other threads still entering
 * may keep the owner from it: then the pause ends after 50 ms. */
static void wait_rebiased(stress *s) {
    usleep(20);
    if (!s->real || !rl__bias_usable())
        return; /* the broken-lock check: its owner may have stopped entering once `stop` is set */
    double end = rl_test_now() + 0.05;
    while (!rl__loop_biased(s->rl) && rl_test_now() < end)
        usleep(20);
}

static void other(stress *s, int idx) {
    while (!atomic_load(&s->ready))
        sched_yield();
    RLRunLoopTimerRef t = s->real ? far_timer() : NULL;
    for (long i = 0; i < s->iters && !atomic_load(&s->stop); i++) {
        crit(s);
        if (s->real) {
            RLRunLoopAddTimer(s->rl, t, kRLRunLoopDefaultMode);
            RLRunLoopRemoveTimer(s->rl, t, kRLRunLoopDefaultMode);
            RLRunLoopSourceSignal(s->src); /* a try-lock: may find the owner inside */
            RLRunLoopWakeUp(s->rl);
        }
        /* A pause now and then: the owner, alone, biases its lock again,
         * and this thread's next entry revokes it. */
        if ((i + idx) % 128 == 0)
            wait_rebiased(s);
    }
    if (t)
        RLRelease(t);
    atomic_fetch_add(&s->done, 1);
}

static void *role_main(void *arg) {
    role *r = arg;
    if (r->idx == 0)
        owner(r->s);
    else
        other(r->s, r->idx);
    return NULL;
}

static void run_stress(stress *s, int others) {
    role roles[4];
    s->others = others;
    for (int i = 0; i <= others; i++)
        roles[i] = (role){s, i};
    rl_test_run_threads(others + 1, role_main, roles, sizeof roles[0]);
    if (s->src)
        RLRelease(s->src);
}

static void test_the_owner_alone_biases_its_lock_and_another_thread_revokes_it(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    stress s = {.rl = rl};
    for (int i = 0; i < 1000; i++)
        crit(&s);
    assert_int_equal(rl__loop_biased(rl), rl__bias_usable());
    unsigned long before = atomic_load(&rl__bias_revokes);
    /* Another thread takes it: the bias goes, and the count sees both. */
    stress *sp = &s;
    rl_test_on_other_thread((void *(*)(void *))(void (*)(void))crit, sp);
    assert_false(rl__loop_biased(rl));
    assert_int_equal(atomic_load(&rl__bias_revokes) - before, rl__bias_usable() ? 1 : 0);
    assert_int_equal(s.counter, 1001);
}

static void stress_with(int others) {
    uint32_t cap = rl__bias_cap;
    rl__bias_cap = 64; /* biased and revoked over and over */
    unsigned long before = atomic_load(&rl__bias_revokes);
    stress s = {.real = true, .iters = rl_test_iters(20000)};
    run_stress(&s, others);
    rl__bias_cap = cap;
    unsigned long revokes = atomic_load(&rl__bias_revokes) - before;
    print_message("%d other thread(s): %ld entries, %lu revocations, %ld performs\n", others,
                  (long)atomic_load(&s.entries), revokes, (long)atomic_load(&s.performed));
    assert_false(atomic_load(&s.owner_failed));
    assert_int_equal(atomic_load(&s.overlaps), 0);
    assert_int_equal(s.counter, atomic_load(&s.entries));
    if (rl__bias_usable())
        assert_true(revokes >= 2); /* the protocol was exercised, not just the mutex */
    else
        assert_int_equal(revokes, 0);
}

static void test_no_two_threads_inside_with_one_other_thread(void **state) { stress_with(1); }
static void test_no_two_threads_inside_with_two_other_threads(void **state) { stress_with(2); }
static void test_no_two_threads_inside_with_three_other_threads(void **state) { stress_with(3); }

/* The check itself: with the handshake skipped, two threads are soon seen
 * inside at once (bare lock only: the loop's own state is left alone). */
static void test_the_check_sees_two_threads_inside_a_broken_lock(void **state) {
    if (!rl__bias_usable())
        skip(); /* no bias here (PLAIN=1, TSan, membarrier refused, RL_BIAS=0): nothing to break; the stress tests check the plain mutex */
    uint32_t cap = rl__bias_cap;
    rl__bias_cap = 64;
    atomic_fetch_or(&rl__faults, RL_FAULT_BIAS_BREAK);
    stress s = {.real = false, .iters = 200000000};
    role roles[2] = {{&s, 0}, {&s, 1}};
    s.others = 1;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, role_main, &roles[i]), 0);
    double end = rl_test_now() + 20;
    while (atomic_load(&s.overlaps) == 0 && rl_test_now() < end)
        usleep(1000);
    atomic_store(&s.stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    atomic_fetch_and(&rl__faults, ~(unsigned)RL_FAULT_BIAS_BREAK);
    rl__bias_cap = cap;
    if (s.src)
        RLRelease(s.src);
    print_message("broken lock: %ld overlaps in %ld entries\n", (long)atomic_load(&s.overlaps),
                  (long)atomic_load(&s.entries));
    assert_true(atomic_load(&s.overlaps) > 0);
}

/* In a child: nothing inherited is biased, and the child's own loop,
 * hammered by its thread, is biased only if the child may bias. */
static RLRunLoopRef parent_loop;
static bool child_expect_usable;

static bool child_checks(void *arg) {
    if (parent_loop && rl__loop_biased(parent_loop))
        return false;
    if (rl__bias_usable() != child_expect_usable)
        return false;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    stress s = {.rl = rl};
    for (int i = 0; i < 5000; i++)
        crit(&s);
    RLRunLoopTimerRef t = far_timer();
    for (int i = 0; i < 5000; i++)
        if (!RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode) || !RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode))
            return false;
    RLRelease(t);
    return rl__loop_biased(rl) == child_expect_usable && s.counter == 5000;
}

static void hammer_own(RLRunLoopRef *out) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    stress s = {.rl = rl};
    for (int i = 0; i < 1000; i++)
        crit(&s);
    *out = rl;
}

static void test_a_refused_membarrier_leaves_every_lock_a_mutex(void **state) {
    bool usable = rl__bias_usable();
    hammer_own(&parent_loop);
    assert_int_equal(rl__loop_biased(parent_loop), usable);
    /* The child registers again, and is refused: a fault... */
    atomic_fetch_or(&rl__faults, RL_FAULT_MEMBARRIER);
    child_expect_usable = false;
    rl_test_in_child(child_checks, NULL, "membarrier refused (fault)");
    atomic_fetch_and(&rl__faults, ~(unsigned)RL_FAULT_MEMBARRIER);
    /* ...or RL_BIAS=0 in its environment. */
    setenv("RL_BIAS", "0", 1);
    rl_test_in_child(child_checks, NULL, "RL_BIAS=0");
    unsetenv("RL_BIAS");
    /* Allowed: the child biases its own loop, not the inherited one. */
    child_expect_usable = usable;
    rl_test_in_child(child_checks, NULL, "membarrier allowed");
}

/* fork() while another thread hammers its own (biased) loop: the prepare
 * handler waits for the owner to leave and revokes, the child finds it
 * unbiased. */
static _Atomic(RLRunLoopRef) churn_loop;

static bool churn_own(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    atomic_store(&churn_loop, rl);
    static __thread RLRunLoopTimerRef t;
    if (!t)
        t = far_timer();
    stress s = {.rl = rl};
    for (int i = 0; i < 200; i++) {
        crit(&s);
        if (!RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode) || !RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode))
            return false;
    }
    return s.counter == 200;
}

static bool churn_child(void *arg) {
    RLRunLoopRef rl = atomic_load(&churn_loop);
    if (rl && rl__loop_biased(rl))
        return false;
    parent_loop = NULL;
    child_expect_usable = rl__bias_usable();
    return child_checks(NULL);
}

static void test_fork_while_an_owner_hammers_its_loop(void **state) {
    rl_test_fork_while_churning(rl_test_iters(40), churn_own, churn_child, NULL);
}

/* The loop's thread, its lock biased, takes a hot path of its own for a
 * timer in the default mode (RLRunLoopMembership.c): it keeps CF's
 * semantics. A timer the user released lives while in the mode and is
 * freed (its context released) the moment it leaves; adding twice and
 * removing twice are no-ops; bad arguments fail as on the other paths. */
static void count_release(const void *info) { (*(int *)info)++; }

/* The owner takes its loop's lock n times: after enough of them the lock
 * is biased, where the process may bias. */
static void lock_often(RLRunLoopRef rl, int n) {
    stress s = {.rl = rl};
    for (int i = 0; i < n; i++)
        crit(&s);
}

/* The owner's loop biased and its default mode made (a timer added and
 * removed); that timer, for the caller to invalidate and release. */
static RLRunLoopTimerRef bias_with_default_mode(RLRunLoopRef rl) {
    lock_often(rl, 1000);
    RLRunLoopTimerRef warm = far_timer();
    assert_true(RLRunLoopAddTimer(rl, warm, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveTimer(rl, warm, kRLRunLoopDefaultMode));
    return warm;
}

static void test_the_owners_hot_path_keeps_the_timer_rules(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    lock_often(rl, 1000);
    assert_int_equal(rl__loop_biased(rl), rl__bias_usable());
    int released = 0;
    RLRunLoopTimerContext c = {0};
    c.info = &released;
    c.release = count_release;
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, nop_timer, &c);
    for (int i = 0; i < 100; i++) { /* at home here, and the hot path warm */
        assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
        assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode)); /* there already */
        assert_true(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
        assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode));
        assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode)); /* not there: nothing to do */
        assert_false(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
    }
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRelease(t)); /* the loop's reference keeps it */
    assert_int_equal(released, 0);
    assert_true(RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveTimer(rl, t, kRLRunLoopDefaultMode)); /* its last reference: freed now */
    assert_int_equal(released, 1);
    /* Bad arguments, on the same path. */
    assert_false(RLRunLoopAddTimer(rl, NULL, kRLRunLoopDefaultMode));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopRemoveTimer(NULL, t, kRLRunLoopDefaultMode));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLRunLoopAddTimer(rl, (RLRunLoopTimerRef)(void *)rl, kRLRunLoopDefaultMode));
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(rl__loop_biased(rl), rl__bias_usable());
}

/* Several timers through the owner's hot path, on a fresh loop: the
 * pending list unlinks any of them (head, middle, tail), the mode's count
 * follows (its last timer gone, the mode is empty), and the one left
 * fires. */
static int fired_mask;
static void mark_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    fired_mask |= (int)(intptr_t)info;
}

static void *several_timers_thread(void *arg) {
    (void)arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    lock_often(rl, 1000);
    RLRunLoopTimerRef t[4];
    for (int i = 0; i < 4; i++) {
        RLRunLoopTimerContext c = {0};
        c.info = (void *)(intptr_t)(1 << i);
        t[i] = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0, mark_timer, &c);
        assert_non_null(t[i]);
        assert_true(RLRunLoopAddTimer(rl, t[i], kRLRunLoopDefaultMode)); /* claimed, then listed as idle */
        assert_true(RLRunLoopRemoveTimer(rl, t[i], kRLRunLoopDefaultMode));
    }
    assert_true(RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode));
    for (int i = 0; i < 4; i++)
        assert_true(RLRunLoopAddTimer(rl, t[i], kRLRunLoopDefaultMode));
    assert_false(RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveTimer(rl, t[1], kRLRunLoopDefaultMode)); /* the middle */
    assert_true(RLRunLoopRemoveTimer(rl, t[0], kRLRunLoopDefaultMode)); /* the head */
    assert_true(RLRunLoopRemoveTimer(rl, t[3], kRLRunLoopDefaultMode)); /* the tail */
    for (int i = 0; i < 4; i++)
        assert_int_equal(RLRunLoopContainsTimer(rl, t[i], kRLRunLoopDefaultMode), i == 2);
    assert_false(RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode));
    fired_mask = 0;
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(fired_mask, 1 << 2);
    assert_false(RLRunLoopTimerIsValid(t[2])); /* a one-shot: invalidated by its fire, and out of the mode */
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunFinished);
    /* Added again after the loop filed and fired timers: the same rules. */
    assert_true(RLRunLoopAddTimer(rl, t[0], kRLRunLoopDefaultMode));
    assert_true(RLRunLoopRemoveTimer(rl, t[0], kRLRunLoopDefaultMode));
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunFinished);
    assert_int_equal(fired_mask, 1 << 2);
    for (int i = 0; i < 4; i++)
        assert_true(RLRelease(t[i]));
    return NULL;
}

static void test_the_owners_hot_path_unlinks_any_of_several_timers(void **state) {
    (void)state;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, several_timers_thread, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
}

/* A timer's first add on the owner's biased path (claimed there: its item
 * lock taken without waiting) keeps the rules of the generic claim: equal
 * dates fire in the order the timers got them, a timer dated on another
 * thread being ordered by its add (CF's insertion order); the loop holds
 * one reference, however often the timer is added; a timer with a
 * tolerance goes the generic way and fires in the same order. */
static char claim_trace[16];
static void trace_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    size_t n = strlen(claim_trace);
    if (n + 1 < sizeof claim_trace) {
        claim_trace[n] = *(const char *)info;
        claim_trace[n + 1] = 0;
    }
}

typedef struct {
    RLAbsoluteTime date;
    RLRunLoopTimerRef made[2];
} made_elsewhere;

static RLRunLoopTimerRef traced_timer(RLAbsoluteTime date, const char *name) {
    RLRunLoopTimerContext c = {0};
    c.info = (void *)name;
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, date, 0, 0, 0, trace_timer, &c);
    assert_non_null(t);
    return t;
}

static void *make_two_elsewhere(void *arg) {
    made_elsewhere *m = arg;
    m->made[0] = traced_timer(m->date, "b");
    m->made[1] = traced_timer(m->date, "c");
    return NULL;
}

static void *claim_order_thread(void *arg) {
    (void)arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef warm = bias_with_default_mode(rl);
    assert_int_equal(rl__loop_biased(rl), rl__bias_usable());
    RLAbsoluteTime date = RLAbsoluteTimeGetCurrent() - 1;
    RLRunLoopTimerRef a = traced_timer(date, "a");
    made_elsewhere m = {.date = date};
    rl_test_on_other_thread(make_two_elsewhere, &m);
    RLIndex rc = RLGetRetainCount(a);
    /* Added c, a, d, b: a keeps its stamp (made here, first), c and b are
     * ordered by their adds, d was made here after c's add: a c d b. */
    assert_true(RLRunLoopAddTimer(rl, m.made[1], kRLRunLoopDefaultMode));
    RLRunLoopTimerRef d = traced_timer(date, "d");
    RLRunLoopTimerSetTolerance(d, 0.5);
    assert_true(RLRunLoopAddTimer(rl, a, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddTimer(rl, d, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddTimer(rl, m.made[0], kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddTimer(rl, a, kRLRunLoopDefaultMode)); /* there already */
    assert_int_equal(RLGetRetainCount(a), rc + 1); /* the loop's, once */
    assert_true(RLRunLoopContainsTimer(rl, a, kRLRunLoopDefaultMode));
    assert_int_equal(rl__loop_biased(rl), rl__bias_usable());
    claim_trace[0] = 0;
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunTimedOut);
    assert_string_equal(claim_trace, "acdb");
    RLRunLoopTimerRef all[] = {a, m.made[0], m.made[1], d, warm};
    for (int i = 0; i < 5; i++) {
        RLRunLoopTimerInvalidate(all[i]);
        assert_true(RLRelease(all[i]));
    }
    return NULL;
}

static void test_first_adds_on_the_owners_path_keep_the_timer_order(void **state) {
    (void)state;
    rl_test_on_other_thread(claim_order_thread, NULL);
}

/* Two loops' threads add one new timer to their own loops at the same
 * moment, over and over: exactly one claims it (true, and its loop has it),
 * the other is refused as CF refuses a timer in another loop (false,
 * kRLErrorInvalidState, and its loop has not), whichever way each took
 * (the owner's biased claim, or the generic one when the item lock was
 * busy). The loser's look at the winner's loop revokes that loop's bias;
 * with the cap lowered, each thread biases its lock again before the next
 * round, so that most rounds race a biased claim. The main thread moves
 * the timer's date at the same moment, and the move holds. The winner
 * invalidates the timer on its own thread. */
enum { CLAIM_ROUNDS = 2000 };

typedef struct {
    pthread_barrier_t go, added, checked, invalidated;
    RLRunLoopTimerRef _Atomic t;
    _Atomic int start; /* the round the racers may start */
    bool ok[2], contains[2], still[2];
    RLErrorCode err[2];
    _Atomic int biased_rounds; /* claims made with the claimer's lock biased */
} claim_race;

typedef struct {
    claim_race *r;
    int idx;
} claim_role;

static void *claim_racer(void *arg) {
    claim_role *role = arg;
    claim_race *r = role->r;
    int i = role->idx;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef warm = bias_with_default_mode(rl);
    for (int round = 0; round < CLAIM_ROUNDS; round++) {
        lock_often(rl, 100); /* biased again (the cap lowered), after the loser's look revoked it */
        pthread_barrier_wait(&r->go);
        while (atomic_load_explicit(&r->start, memory_order_acquire) != round + 1) {
        } /* both released by one store: their claims overlap */
        RLRunLoopTimerRef t = atomic_load(&r->t);
        bool biased = rl__loop_biased(rl);
        r->ok[i] = RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode);
        r->err[i] = r->ok[i] ? 0 : RLErrorGetLast().code;
        r->contains[i] = RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode);
        if (biased)
            atomic_fetch_add(&r->biased_rounds, 1);
        pthread_barrier_wait(&r->added);
        pthread_barrier_wait(&r->checked); /* what the adds did, looked at */
        if (r->ok[i])
            RLRunLoopTimerInvalidate(t);
        pthread_barrier_wait(&r->invalidated);
        r->still[i] = RLRunLoopContainsTimer(rl, t, kRLRunLoopDefaultMode);
        pthread_barrier_wait(&r->go); /* the round's end: the main thread checks */
    }
    RLRunLoopTimerInvalidate(warm);
    RLRelease(warm);
    return NULL;
}

static void test_two_owners_racing_to_claim_one_timer(void **state) {
    (void)state;
    claim_race r = {0};
    uint32_t cap = rl__bias_cap;
    rl__bias_cap = 64; /* the loser looks at the winner's loop, which revokes its bias */
    pthread_barrier_init(&r.go, NULL, 3);
    pthread_barrier_init(&r.added, NULL, 3);
    pthread_barrier_init(&r.checked, NULL, 3);
    pthread_barrier_init(&r.invalidated, NULL, 3);
    claim_role roles[2] = {{&r, 0}, {&r, 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, claim_racer, &roles[i]), 0);
    for (int round = 0; round < CLAIM_ROUNDS; round++) {
        RLRunLoopTimerRef t = far_timer();
        atomic_store(&r.t, t);
        pthread_barrier_wait(&r.go);
        usleep(50); /* both racers spinning */
        atomic_store_explicit(&r.start, round + 1, memory_order_release);
        /* A third thread moves it meanwhile: under its item lock while it
         * is homeless (met held briefly by a claim, or taken first), under
         * its home's loop lock after. */
        RLAbsoluteTime date = 1e9 + round;
        assert_true(RLRunLoopTimerSetNextFireDate(t, date));
        pthread_barrier_wait(&r.added);
        assert_true(RLRunLoopTimerGetNextFireDate(t) == date);
        assert_int_equal(r.ok[0] + r.ok[1], 1);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(r.contains[i], r.ok[i]);
            if (!r.ok[i])
                assert_int_equal(r.err[i], kRLErrorInvalidState);
        }
        pthread_barrier_wait(&r.checked);
        pthread_barrier_wait(&r.invalidated);
        pthread_barrier_wait(&r.go);
        assert_false(r.still[0] || r.still[1]);
        assert_false(RLRunLoopTimerIsValid(t));
        assert_true(RLRelease(t));
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    rl__bias_cap = cap;
    /* The biased claim raced, where the process may bias. */
    if (rl__bias_usable())
        assert_true(atomic_load(&r.biased_rounds) > CLAIM_ROUNDS / 2); /* of 2 * CLAIM_ROUNDS claims */
    pthread_barrier_destroy(&r.go);
    pthread_barrier_destroy(&r.added);
    pthread_barrier_destroy(&r.checked);
    pthread_barrier_destroy(&r.invalidated);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_owner_alone_biases_its_lock_and_another_thread_revokes_it),
        cmocka_unit_test(test_the_owners_hot_path_keeps_the_timer_rules),
        cmocka_unit_test(test_the_owners_hot_path_unlinks_any_of_several_timers),
        cmocka_unit_test(test_first_adds_on_the_owners_path_keep_the_timer_order),
        cmocka_unit_test(test_two_owners_racing_to_claim_one_timer),
        cmocka_unit_test(test_no_two_threads_inside_with_one_other_thread),
        cmocka_unit_test(test_no_two_threads_inside_with_two_other_threads),
        cmocka_unit_test(test_no_two_threads_inside_with_three_other_threads),
        cmocka_unit_test(test_the_check_sees_two_threads_inside_a_broken_lock),
        cmocka_unit_test(test_a_refused_membarrier_leaves_every_lock_a_mutex),
        cmocka_unit_test(test_fork_while_an_owner_hammers_its_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
