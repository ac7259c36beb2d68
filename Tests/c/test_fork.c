/* test_fork.c — fork(): what a child does never affects the parent, the
 * library's locks survive a fork taken while other threads use them,
 * inherited loops, threads and workers fail cleanly in the child, and new
 * ones work there.
 *
 * A child must never return into cmocka (it would go on running the other
 * tests): child code checks with CHILD_CHECK, which prints and _exit()s,
 * and ends with child_done(). Every wait is bounded: the child arms alarm(),
 * the parent polls waitpid with a deadline and kills a child that hangs,
 * and the parent arms alarm() around its own runs, so a regression fails
 * instead of hanging CI. */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ThreadSanitizer kills a child that starts threads after a multi-threaded
 * fork unless told otherwise; the child here is single-threaded until it
 * starts its own threads, which is what this test checks. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

enum { EXIT_TIMED_OUT = 3 };

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_fork: timed out (SIGALRM): something hung\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(EXIT_TIMED_OUT);
}

static void arm_alarm(unsigned seconds) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
}

#define CHILD_CHECK(cond)                                                                                 \
    do {                                                                                                  \
        if (!(cond)) {                                                                                    \
            RLError e_ = RLErrorGetLast();                                                                \
            fprintf(stderr, "child %d: %s:%d: check failed: %s (last error %s: \"%s\")\n", (int)getpid(), \
                    __FILE__, __LINE__, #cond, RLErrorCodeGetName(e_.code), e_.message);                  \
            _exit(10);                                                                                    \
        }                                                                                                 \
    } while (0)

/* The call failed with kRLErrorInvalidState and a message naming fork. */
#define CHILD_CHECK_INHERITED(call)                                                     \
    do {                                                                                \
        RLErrorClear();                                                                 \
        CHILD_CHECK(!(call));                                                           \
        RLError e2_ = RLErrorGetLast();                                                 \
        CHILD_CHECK(e2_.code == kRLErrorInvalidState);                                  \
        CHILD_CHECK(strstr(e2_.message, "fork") != NULL);                               \
        RLErrorClear();                                                                 \
    } while (0)

/* A child's successful end: rl_test_child_exit execs /bin/true, because
 * valgrind checks leaks at every process's exit, and a child of a
 * multi-threaded parent "loses" whatever only the parent's other threads
 * (which do not exist in the child) referenced. exec runs no leak check. */
static void child_done(void) __attribute__((noreturn));
static void child_done(void) { rl_test_child_exit(0); }

/* Waits for the child (at most `seconds`, then kills it) and fails the test
 * unless it exited with 0. */
static void wait_child(pid_t pid, double seconds) {
    double deadline = rl_test_now() + seconds;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            fail_msg("waitpid: %s", strerror(errno));
        if (rl_test_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("child %d hung (killed after %.0f s)", (int)pid, seconds);
        }
        usleep(1000);
    }
    if (WIFSIGNALED(status))
        fail_msg("child %d died of signal %d", (int)pid, WTERMSIG(status));
    if (WEXITSTATUS(status) == EXIT_TIMED_OUT)
        fail_msg("child %d timed out: it hung", (int)pid);
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void count_fire(RLRunLoopTimerRef t, void *info) {
    (void)t;
    atomic_fetch_add((_Atomic int *)info, 1);
}

static void noop(void *info) { (void)info; }
static void noop_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    (void)info;
}

static RLRunLoopTimerRef make_timer(double after, double interval, _Atomic int *count) {
    RLRunLoopTimerContext ctx = {0, count, NULL, NULL, NULL};
    RLRunLoopTimerRef t =
        RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + after, interval, 0, 0, count_fire, &ctx);
    return t;
}

static _Atomic int g_released;
static _Atomic int g_ran;
static void count_release(void *info) {
    (void)info;
    atomic_fetch_add(&g_released, 1);
}
static void count_run(void *info) {
    (void)info;
    atomic_fetch_add(&g_ran, 1);
}

/* In a child: the current thread's loop is a new one, and it works: a
 * timer fires in it. */
static void child_new_loop_works(RLRunLoopRef inherited) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    CHILD_CHECK(rl != NULL);
    CHILD_CHECK(rl != inherited);
    CHILD_CHECK(RLRunLoopGetMain() == rl); /* the forking thread is the child's main thread */
    _Atomic int fired = 0;
    RLRunLoopTimerRef t = make_timer(0.001, 0, &fired);
    CHILD_CHECK(t != NULL);
    CHILD_CHECK(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    /* A one-shot timer: the mode empties once it fired. */
    CHILD_CHECK(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, false) == kRLRunLoopRunFinished);
    CHILD_CHECK(atomic_load(&fired) == 1);
    RLRelease(t);
    /* Requests into the new loop run. */
    atomic_store(&g_ran, 0);
    atomic_store(&g_released, 0);
    CHILD_CHECK(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, count_run, NULL, count_release));
    RLRunLoopSourceContext sctx;
    memset(&sctx, 0, sizeof sctx);
    sctx.perform = noop;
    RLRunLoopSourceRef keep = RLRunLoopSourceCreate(NULL, 0, &sctx);
    CHILD_CHECK(keep && RLRunLoopAddSource(rl, keep, kRLRunLoopDefaultMode));
    CHILD_CHECK(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false) == kRLRunLoopRunTimedOut);
    CHILD_CHECK(atomic_load(&g_ran) == 1 && atomic_load(&g_released) == 1);
    RLRunLoopSourceInvalidate(keep);
    RLRelease(keep);
}

/* In a child: every way into an inherited loop fails at once (never a
 * hang), and a refused perform releases what it was given. */
static void child_inherited_loop_fails(RLRunLoopRef inherited) {
    atomic_store(&g_released, 0);
    atomic_store(&g_ran, 0);
    CHILD_CHECK_INHERITED(RLRunLoopPerformFunctionWithRelease(inherited, kRLRunLoopDefaultMode, count_run, NULL,
                                                              count_release));
    CHILD_CHECK(atomic_load(&g_released) == 1);
    CHILD_CHECK_INHERITED(RLRunLoopPerformFunction(inherited, kRLRunLoopDefaultMode, count_run, NULL));
#if __BLOCKS__
    CHILD_CHECK_INHERITED(RLRunLoopPerformBlock(inherited, kRLRunLoopDefaultMode, ^{
        atomic_fetch_add(&g_ran, 1);
    }));
#endif
    CHILD_CHECK_INHERITED(RLRunLoopWakeUp(inherited));
    CHILD_CHECK_INHERITED(RLRunLoopStop(inherited));
    CHILD_CHECK_INHERITED(RLRunLoopIsWaiting(inherited));
    CHILD_CHECK_INHERITED(RLRunLoopCopyCurrentMode(inherited));
    CHILD_CHECK_INHERITED(RLRunLoopAddCommonMode(inherited, "child-mode"));
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 1, 0, 0, 0, noop_timer, NULL);
    CHILD_CHECK(t != NULL);
    CHILD_CHECK_INHERITED(RLRunLoopAddTimer(inherited, t, kRLRunLoopDefaultMode));
    RLRelease(t);
    CHILD_CHECK(atomic_load(&g_ran) == 0);
}

/* ---- a single-threaded parent, a child that runs "its" loop ---- */

static void test_child_runs_loop_parent_timers_keep_firing(void **state) {
    (void)state;
    arm_alarm(120);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    _Atomic int fires = 0;
    RLRunLoopTimerRef t = make_timer(0.002, 0.002, &fires);
    assert_non_null(t);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    /* The loop's timerfd, eventfd and epoll fd are all in use before the fork. */
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.02, false), kRLRunLoopRunTimedOut);
    assert_true(atomic_load(&fires) > 0);

    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        /* "Its" loop is a new one: the inherited timer is not in it, so
         * running it finishes at once instead of sharing the parent's
         * timerfd. */
        CHILD_CHECK(RLRunLoopGetCurrent() != rl);
        CHILD_CHECK(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.5, false) == kRLRunLoopRunFinished);
        child_inherited_loop_fails(rl);
        /* An inherited timer is still in the inherited loop: it cannot join
         * the new one, and invalidating it touches nothing of the parent's. */
        CHILD_CHECK(!RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, kRLRunLoopDefaultMode));
        RLErrorClear();
        CHILD_CHECK(RLRunLoopTimerInvalidate(t));
        child_new_loop_works(rl);
        /* Keep the child alive (and busy) while the parent's timer runs. */
        child_new_loop_works(rl);
        /* The parent is single-threaded, so everything the child can reach
         * is really its own: it ends through exit() and its leak check
         * (LeakSanitizer, valgrind) counts. */
        RLRelease(t);
        exit(0);
    }
    /* The parent's loop keeps working while the child runs, and after. */
    int before = atomic_load(&fires);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.2, false), kRLRunLoopRunTimedOut);
    wait_child(pid, 60);
    int during = atomic_load(&fires);
    assert_true(during > before);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false), kRLRunLoopRunTimedOut);
    assert_true(atomic_load(&fires) > during);
    assert_true(RLRunLoopTimerIsValid(t)); /* the child's invalidation was the child's */
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    alarm(0);
}

/* ---- a fork from inside a callout of a running loop ---- */

typedef struct {
    pid_t pid;
    _Atomic int fires;
} fork_in_callout;

static void fork_from_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    fork_in_callout *f = info;
    atomic_fetch_add(&f->fires, 1);
    if (f->pid != -1)
        return;
    fflush(NULL);
    f->pid = fork();
    if (f->pid == 0)
        alarm(20);
}

static void test_fork_inside_callout_child_run_returns(void **state) {
    (void)state;
    arm_alarm(120);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    fork_in_callout f = {.pid = -1};
    RLRunLoopTimerContext ctx = {0, &f, NULL, NULL, NULL};
    RLRunLoopTimerRef t =
        RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.005, 0.005, 0, 0, fork_from_timer, &ctx);
    assert_non_null(t);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    RLErrorClear();
    RLRunLoopRunResult r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.3, false);
    if (f.pid == 0) {
        /* The child came back from the callout into the inherited run: it
         * ends at once, with the reason. */
        RLError e = RLErrorGetLast();
        CHILD_CHECK(r == kRLRunLoopRunFinished);
        CHILD_CHECK(e.code == kRLErrorInvalidState && strstr(e.message, "fork") != NULL);
        RLErrorClear();
        child_inherited_loop_fails(rl);
        child_new_loop_works(rl);
        child_done();
    }
    assert_int_equal(r, kRLRunLoopRunTimedOut);
    assert_true(f.pid > 0);
    wait_child(f.pid, 60);
    int n = atomic_load(&f.fires);
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false), kRLRunLoopRunTimedOut);
    assert_true(atomic_load(&f.fires) > n);
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    alarm(0);
}

/* ---- a fork from a request or timer: the rest of what the pass
 * collected is the parent's ---- */

typedef struct {
    pid_t pid;
    _Atomic int later; /* requests and timers that ran after the forking one */
} fork_in_batch;

static void fork_from_request(void *info) {
    fork_in_batch *f = info;
    fflush(NULL);
    f->pid = fork();
    if (f->pid == 0)
        alarm(20);
}

static void later_request(void *info) { atomic_fetch_add(&((fork_in_batch *)info)->later, 1); }

static void fork_from_timer_once(RLRunLoopTimerRef t, void *info) {
    (void)t;
    fork_from_request(info);
}

static void later_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    later_request(info);
}

static void check_child_left_run(RLRunLoopRunResult r, fork_in_batch *f) {
    RLError e = RLErrorGetLast();
    CHILD_CHECK(r == kRLRunLoopRunFinished);
    CHILD_CHECK(e.code == kRLErrorInvalidState && strstr(e.message, "fork") != NULL);
    CHILD_CHECK(atomic_load(&f->later) == 0);
    child_done();
}

static void test_fork_inside_batch_rest_stays_with_parent(void **state) {
    (void)state;
    arm_alarm(120);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);

    /* Three requests taken in one batch; the first forks. */
    fork_in_batch f = {.pid = -1};
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, fork_from_request, &f));
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, later_request, &f));
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, later_request, &f));
    RLErrorClear();
    RLRunLoopRunResult r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false);
    if (f.pid == 0)
        check_child_left_run(r, &f);
    assert_int_equal(r, kRLRunLoopRunTimedOut);
    wait_child(f.pid, 60);
    assert_int_equal(atomic_load(&f.later), 2);

    /* Two timers due on the same wake-up; the first forks. */
    fork_in_batch g = {.pid = -1};
    RLRunLoopTimerContext ctx = {0, &g, NULL, NULL, NULL};
    double at = RLAbsoluteTimeGetCurrent() + 0.005;
    RLRunLoopTimerRef t1 = RLRunLoopTimerCreate(NULL, at, 0, 0, 0, fork_from_timer_once, &ctx);
    RLRunLoopTimerRef t2 = RLRunLoopTimerCreate(NULL, at, 0, 0, 0, later_timer, &ctx);
    assert_true(RLRunLoopAddTimer(rl, t1, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopAddTimer(rl, t2, kRLRunLoopDefaultMode));
    RLErrorClear();
    r = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, false);
    if (g.pid == 0)
        check_child_left_run(r, &g);
    assert_int_equal(r, kRLRunLoopRunTimedOut);
    wait_child(g.pid, 60);
    assert_int_equal(atomic_load(&g.later), 1);
    RLRelease(t1);
    RLRelease(t2);
    rl_test_unkeep(keep);
    alarm(0);
}

/* ---- fork while other threads use every internal lock ---- */

typedef struct {
    _Atomic bool stop;
    _Atomic long rounds;
    int kind;
} hammer_arg;

static void *thread_entry_noop(void *arg) { return arg; }

static void *hammer(void *p) {
    hammer_arg *a = p;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    static int obj[8];
    while (!atomic_load(&a->stop)) {
        if (a->kind == 0) {
            /* Object pool and loop locks. */
            for (int i = 0; i < 32; i++) {
                RLRunLoopTimerRef t =
                    RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 100, 0, 0, 0, noop_timer, NULL);
                if (t) {
                    RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode);
                    RLRunLoopTimerInvalidate(t);
                    RLRelease(t);
                }
            }
            RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, noop, NULL);
        } else if (a->kind == 1) {
            /* Thread registries, the thread -> loop table, perform requests. */
            RLThreadRef t = RLThreadCreate(NULL, thread_entry_noop, NULL);
            if (t) {
                RLThreadSetJoinable(t, true);
                if (RLThreadStart(t)) {
                    RLThreadPerform(t, noop, NULL, NULL, false);
                    RLThreadJoin(t, NULL);
                }
                RLRelease(t);
            }
        } else if (a->kind == 3) {
            /* The message-port registry. */
            char name[64];
            snprintf(name, sizeof name, "rl-test-fork-%d-%ld", (int)getpid(), atomic_load(&a->rounds));
            RLMessagePortRef port = RLMessagePortCreateLocal(NULL, name, NULL, NULL, NULL);
            if (port) {
                RLMessagePortInvalidate(port);
                RLRelease(port);
            }
        } else {
            /* @synchronized stripes, lock objects and the lock-order
             * detector (two locks nested: it records the edge). */
            for (int i = 0; i < 64; i++) {
                RLSyncEnter(&obj[i & 7]);
                RLSyncExit(&obj[i & 7]);
            }
            RLLockRef l = RLLockCreate(), l2 = RLLockCreate();
            if (l && l2) {
                RLLockLock(l);
                RLLockLock(l2);
                RLLockUnlock(l2);
                RLLockUnlock(l);
            }
            if (l)
                RLRelease(l);
            if (l2)
                RLRelease(l2);
        }
        atomic_fetch_add(&a->rounds, 1);
    }
    return NULL;
}

static void child_after_storm(void) {
    alarm(20);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    CHILD_CHECK(rl != NULL);
    /* Allocation in every pool class the storm used. */
    for (int i = 0; i < 200; i++) {
        RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 100, 0, 0, 0, noop_timer, NULL);
        CHILD_CHECK(t != NULL);
        CHILD_CHECK(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
        CHILD_CHECK(RLRunLoopTimerInvalidate(t));
        RLRelease(t);
    }
    static int obj;
    CHILD_CHECK(RLSyncEnter(&obj) && RLSyncExit(&obj));
    RLLockRef l = RLLockCreate(), l2 = RLLockCreate();
    CHILD_CHECK(l && l2 && RLLockLock(l) && RLLockLock(l2) && RLLockUnlock(l2) && RLLockUnlock(l));
    RLRelease(l);
    RLRelease(l2);
    char name[64];
    snprintf(name, sizeof name, "rl-test-fork-child-%d", (int)getpid());
    RLMessagePortRef port = RLMessagePortCreateLocal(NULL, name, NULL, NULL, NULL);
    CHILD_CHECK(port != NULL && RLMessagePortInvalidate(port));
    RLRelease(port);
    child_new_loop_works(NULL);
    /* New threads and workers work in the child. */
    RLThreadRef t = RLThreadCreate(NULL, thread_entry_noop, NULL);
    CHILD_CHECK(t && RLThreadSetJoinable(t, true) && RLThreadStart(t) && RLThreadJoin(t, NULL));
    RLRelease(t);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "child-worker");
    CHILD_CHECK(w && RLWorkerThreadStart(w));
    atomic_store(&g_ran, 0);
    CHILD_CHECK(RLWorkerThreadPerformSync(w, count_run, NULL));
    CHILD_CHECK(atomic_load(&g_ran) == 1);
    CHILD_CHECK(RLWorkerThreadStop(w));
    RLRelease(w);
    child_done();
}

static void test_fork_while_threads_hammer_locks(void **state) {
    (void)state;
    arm_alarm(600);
    enum { NH = 4 };
    bool lockdep_was = RLLockDebugIsEnabled();
    RLLockDebugSetEnabled(true);
    hammer_arg args[NH];
    pthread_t th[NH];
    for (int i = 0; i < NH; i++) {
        atomic_init(&args[i].stop, false);
        atomic_init(&args[i].rounds, 0);
        args[i].kind = i;
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
    }
    long forks = rl_test_iters(60);
    if (forks < 10)
        forks = 10;
    for (long k = 0; k < forks; k++) {
        /* Fork at a different point of the hammering each time. */
        usleep((useconds_t)(200 + (k * 337) % 2000));
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child_after_storm();
        wait_child(pid, 60);
    }
    for (int i = 0; i < NH; i++) {
        atomic_store(&args[i].stop, true);
        pthread_join(th[i], NULL);
        assert_true(atomic_load(&args[i].rounds) > 0);
    }
    RLLockDebugSetEnabled(lockdep_was);
    alarm(0);
}

/* ---- inherited threads and workers ---- */

static void test_inherited_threads_and_workers_fail_in_child(void **state) {
    (void)state;
    arm_alarm(120);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "parent-worker");
    assert_non_null(w);
    assert_true(RLWorkerThreadStart(w));
    RLThreadRef wt = (RLThreadRef)RLRetain(RLWorkerThreadGetThread(w));
    RLRunLoopRef wrl = (RLRunLoopRef)RLRetain(RLWorkerThreadGetRunLoop(w));
    RLWorkerThreadRef idle = RLWorkerThreadCreate(NULL, "never-started");
    assert_non_null(idle);
    RLThreadRef unstarted = RLThreadCreate(NULL, thread_entry_noop, NULL);
    assert_non_null(unstarted);
    RLThreadRef main_before = RLThreadGetMain();
    assert_non_null(main_before);
    RLRunLoopRef main_loop_before = RLRunLoopGetMain();

    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        /* Work sent to the parent's worker: refused, arg released. */
        atomic_store(&g_released, 0);
        CHILD_CHECK_INHERITED(RLWorkerThreadPerformAsyncWithRelease(w, count_run, NULL, count_release));
        CHILD_CHECK(atomic_load(&g_released) == 1);
        CHILD_CHECK_INHERITED(RLWorkerThreadPerformSyncWithRelease(w, count_run, NULL, count_release));
        CHILD_CHECK(atomic_load(&g_released) == 2);
        CHILD_CHECK_INHERITED(RLWorkerThreadPerformSync(w, count_run, NULL));
#if __BLOCKS__
        CHILD_CHECK_INHERITED(RLWorkerThreadPerformBlockSync(w, ^{
            atomic_fetch_add(&g_ran, 1);
        }));
#endif
        CHILD_CHECK_INHERITED(RLThreadPerformWithRelease(wt, count_run, NULL, count_release, NULL, true));
        CHILD_CHECK(atomic_load(&g_released) == 3);
        CHILD_CHECK_INHERITED(RLThreadPerformWithRelease(wt, count_run, NULL, count_release, NULL, false));
        CHILD_CHECK(atomic_load(&g_released) == 4);
        CHILD_CHECK_INHERITED(RLRunLoopPerformFunctionWithRelease(wrl, kRLRunLoopDefaultMode, count_run, NULL,
                                                                  count_release));
        CHILD_CHECK(atomic_load(&g_released) == 5);
        CHILD_CHECK(atomic_load(&g_ran) == 0);
        CHILD_CHECK_INHERITED(RLWorkerThreadStop(w));
        CHILD_CHECK_INHERITED(RLWorkerThreadGetRunLoop(w));
        CHILD_CHECK_INHERITED(RLWorkerThreadIsRunning(w));
        CHILD_CHECK_INHERITED(RLWorkerThreadStart(idle));
        CHILD_CHECK_INHERITED(RLThreadJoin(wt, NULL));
        CHILD_CHECK_INHERITED(RLThreadSetName(wt, "x"));
        CHILD_CHECK_INHERITED(RLThreadStart(unstarted));
        CHILD_CHECK_INHERITED(RLThreadIsExecuting(wt));
        char *desc = RLCopyDescription(wt); /* no lock of the parent's taken */
        CHILD_CHECK(desc && strstr(desc, "fork"));
        free(desc);
        CHILD_CHECK_INHERITED(RLThreadPerformWithRelease(main_before, count_run, NULL, count_release, NULL, true));
        CHILD_CHECK(atomic_load(&g_released) == 6);
        CHILD_CHECK(atomic_load(&g_ran) == 0);
        /* Releasing them in the child neither hangs nor touches the parent. */
        RLRelease(w);
        RLRelease(idle);
        RLRelease(wt);
        RLRelease(wrl);
        RLRelease(unstarted);
        /* The child's own main thread and loop are new. */
        RLThreadRef me = RLThreadGetCurrent();
        CHILD_CHECK(me != NULL && me != main_before);
        CHILD_CHECK(RLThreadGetMain() == me);
        CHILD_CHECK(RLThreadIsMain(me));
        CHILD_CHECK(RLRunLoopGetMain() != main_loop_before);
        atomic_store(&g_ran, 0);
        CHILD_CHECK(RLThreadPerformOnMain(count_run, NULL, NULL, true));
        CHILD_CHECK(atomic_load(&g_ran) == 1);
        child_new_loop_works(main_loop_before);
        /* New workers work. */
        RLWorkerThreadRef w2 = RLWorkerThreadCreate(NULL, "child-worker");
        CHILD_CHECK(w2 && RLWorkerThreadStart(w2));
        CHILD_CHECK(RLWorkerThreadPerformSync(w2, count_run, NULL));
        CHILD_CHECK(atomic_load(&g_ran) == 2);
        CHILD_CHECK(RLWorkerThreadStop(w2));
        RLRelease(w2);
        child_done();
    }
    wait_child(pid, 60);
    /* The parent's worker is untouched. */
    atomic_store(&g_ran, 0);
    assert_true(RLWorkerThreadPerformSync(w, count_run, NULL));
    assert_int_equal(atomic_load(&g_ran), 1);
    assert_true(RLWorkerThreadStop(w));
    RLRelease(wt);
    RLRelease(wrl);
    RLRelease(w);
    RLRelease(idle);
    RLRelease(unstarted);
    alarm(0);
}

/* ---- a fork from a thread other than the main one ---- */

typedef struct {
    RLRunLoopRef parent_main_loop;
    RLRunLoopRef forker_loop;
    RLThreadRef forker;
    pid_t pid;
} side_fork;

static void end_child(void *p) {
    (void)p;
    child_done();
}

static void *fork_from_side_thread(void *p) {
    side_fork *f = p;
    f->forker = RLThreadGetCurrent();
    f->forker_loop = RLRunLoopGetCurrent();
    _Atomic int fires = 0;
    RLRunLoopTimerRef t = make_timer(0.001, 0.001, &fires);
    RLRunLoopAddTimer(f->forker_loop, t, kRLRunLoopDefaultMode);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
    fflush(NULL);
    f->pid = fork();
    if (f->pid == 0) {
        alarm(20);
        /* The forking thread is the child's main thread now. */
        CHILD_CHECK(RLThreadIsMainThread());
        RLThreadRef me = RLThreadGetCurrent();
        CHILD_CHECK(me && me != f->forker && RLThreadIsMain(me) && RLThreadGetMain() == me);
        CHILD_CHECK(RLRunLoopGetCurrent() != f->forker_loop);
        CHILD_CHECK(RLRunLoopGetCurrent() != f->parent_main_loop);
        CHILD_CHECK(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.5, false) == kRLRunLoopRunFinished);
        child_inherited_loop_fails(f->forker_loop);
        child_inherited_loop_fails(f->parent_main_loop);
        CHILD_CHECK_INHERITED(RLThreadSetName(f->forker, "x"));
        child_new_loop_works(f->parent_main_loop);
        /* The child's thread ends by returning from the parent's RLThread
         * entry: its exit sequence must leave the parent's thread object
         * alone and not hang. A key destructor (run after it) ends the
         * child before exit()'s leak check, which would count what the
         * parent's other threads held. */
        pthread_key_t k;
        CHILD_CHECK(pthread_key_create(&k, end_child) == 0 && pthread_setspecific(k, f) == 0);
        return NULL;
    }
    int before = atomic_load(&fires);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false);
    int after = atomic_load(&fires);
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    return (void *)(intptr_t)(after > before);
}

static void test_fork_from_other_thread(void **state) {
    (void)state;
    arm_alarm(120);
    side_fork f = {.parent_main_loop = RLRunLoopGetMain()};
    RLThreadRef t = RLThreadCreate(NULL, fork_from_side_thread, &f);
    assert_non_null(t);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    void *fired = NULL;
    assert_true(RLThreadJoin(t, &fired));
    RLRelease(t);
    assert_true(f.pid > 0);
    wait_child(f.pid, 60);
    assert_true(fired != NULL); /* the forking thread's loop kept firing in the parent */
    alarm(0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_child_runs_loop_parent_timers_keep_firing),
        cmocka_unit_test(test_fork_inside_callout_child_run_returns),
        cmocka_unit_test(test_fork_inside_batch_rest_stays_with_parent),
        cmocka_unit_test(test_inherited_threads_and_workers_fail_in_child),
        cmocka_unit_test(test_fork_from_other_thread),
        cmocka_unit_test(test_fork_while_threads_hammer_locks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
