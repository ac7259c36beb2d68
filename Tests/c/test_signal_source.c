/* test_signal_source.c — signals as run-loop callouts: delivery on the
 * loop's thread with a count, 10,000 realtime signals from another process
 * all counted, standard signals coalescing, several loops watching one
 * signal, the disposition and mask restored by the last watcher, fork()
 * while another thread creates sources, and the misuse of every public
 * function. */
#include "testutil.h"
#include "trace.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODE "SIG"

static _Atomic long total;
static pthread_t callout_thread;

static void count_cb(RLSignalSourceRef s, int signum, RLIndex count, void *info) {
    (void)s;
    callout_thread = pthread_self();
    atomic_fetch_add(&total, count);
    if (info)
        rl_trace_addf("%s:%d:%ld", (const char *)info, signum, (long)count);
}

static RLSignalSourceRef watch(int signum, const char *name) {
    RLSignalSourceContext c = {0, (void *)name, NULL, NULL, NULL};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, signum, count_cb, &c);
    assert_non_null(s);
    assert_true(RLRunLoopAddSignalSource(RLRunLoopGetCurrent(), s, MODE));
    return s;
}

static void done(RLSignalSourceRef s) {
    assert_true(RLSignalSourceInvalidate(s));
    assert_true(RLRelease(s));
}

static bool blocked_here(int signum) {
    sigset_t cur;
    assert_int_equal(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
    return sigismember(&cur, signum) == 1;
}

static void test_raise_runs_the_callout_on_the_loop_thread(void **state) {
    (void)state;
    atomic_store(&total, 0);
    RLSignalSourceRef s = watch(SIGUSR1, "u1");
    assert_int_equal(RLSignalSourceGetSignal(s), SIGUSR1);
    assert_true(blocked_here(SIGUSR1));
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("u1:10:1");
    assert_true(pthread_equal(callout_thread, pthread_self()));
    /* A standard signal raised three times before the loop runs is pending
     * once: the kernel merges it, the count is 1. */
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("u1:10:1 u1:10:1");
    done(s);
    assert_false(blocked_here(SIGUSR1));
}

static void test_realtime_signals_queue_and_are_counted_together(void **state) {
    (void)state;
    int sig = SIGRTMIN + 1;
    RLSignalSourceRef s = watch(sig, "rt");
    union sigval v = {0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(sigqueue(getpid(), sig, v), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    char want[32];
    snprintf(want, sizeof want, "rt:%d:3", sig);
    assert_trace(want);
    done(s);
}

/* Sends n signals to the parent from a child process, retrying while the
 * parent's realtime queue is full. Returns the child's pid. */
static pid_t send_from_child(int signum, long n) {
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        union sigval v = {0};
        for (long i = 0; i < n; i++) {
            while (sigqueue(parent, signum, v) < 0) {
                if (errno != EAGAIN)
                    _exit(1);
                usleep(100); /* the queue is full: the parent is reading */
            }
        }
        rl_test_child_exit(0);
    }
    return pid;
}

static void run_until_total(long want) {
    double end = rl_test_now() + 60;
    while (atomic_load(&total) < want && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.1, true);
}

static void test_ten_thousand_realtime_signals_from_another_process(void **state) {
    (void)state;
    long n = 10000;
    int sig = SIGRTMIN + 2;
    atomic_store(&total, 0);
    RLSignalSourceRef s = watch(sig, NULL);
    pid_t pid = send_from_child(sig, n);
    run_until_total(n);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* Nothing more arrives after the sender is gone. */
    for (int i = 0; i < 3; i++)
        RLRunLoopRunInMode(MODE, 0.02, false);
    assert_int_equal(atomic_load(&total), n);
    done(s);
}

static void test_ten_thousand_standard_signals_coalesce(void **state) {
    (void)state;
    long n = 10000;
    atomic_store(&total, 0);
    RLSignalSourceRef s = watch(SIGUSR2, NULL);
    pid_t pid = send_from_child(SIGUSR2, n);
    int status;
    double end = rl_test_now() + 60;
    while (waitpid(pid, &status, WNOHANG) == 0 && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.01, true);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 3; i++)
        RLRunLoopRunInMode(MODE, 0.02, false);
    /* Each one sent while one was pending merged into it: at least one is
     * counted, never more than were sent. */
    long got = atomic_load(&total);
    assert_true(got >= 1);
    assert_true(got <= n);
    done(s);
}

/* Several loops watch one signal: each sees every delivery. */
typedef struct loop_arg {
    int signum;
    long want;
    _Atomic long got;
    _Atomic int ready;
    RLRunLoopRef rl;
} loop_arg;

static void loop_cb(RLSignalSourceRef s, int signum, RLIndex count, void *info) {
    (void)s, (void)signum;
    loop_arg *a = info;
    atomic_fetch_add(&a->got, count);
}

static void *loop_thread(void *p) {
    loop_arg *a = p;
    RLSignalSourceContext c = {0, a, NULL, NULL, NULL};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, a->signum, loop_cb, &c);
    assert_non_null(s);
    assert_true(RLRunLoopAddSignalSource(RLRunLoopGetCurrent(), s, MODE));
    a->rl = RLRunLoopGetCurrent();
    atomic_store(&a->ready, 1);
    double end = rl_test_now() + 60;
    while (atomic_load(&a->got) < a->want && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.1, true);
    assert_true(RLSignalSourceInvalidate(s));
    RLRelease(s);
    return NULL;
}

static void test_several_loops_watch_one_signal(void **state) {
    (void)state;
    int sig = SIGRTMIN + 3;
    long n = rl_test_iters(2000);
    /* The main thread watches first, so the threads below inherit the
     * blocked signal (the documented rule). */
    atomic_store(&total, 0);
    RLSignalSourceRef mine = watch(sig, NULL);
    loop_arg args[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].signum = sig;
        args[i].want = n;
        assert_int_equal(pthread_create(&th[i], NULL, loop_thread, &args[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        while (!atomic_load(&args[i].ready))
            usleep(1000);
    pid_t pid = send_from_child(sig, n);
    run_until_total(n);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(atomic_load(&total), n);
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&args[i].got), n);
    done(mine);
}

static void old_handler(int signum) { (void)signum; }

static void test_last_watcher_restores_disposition_and_mask(void **state) {
    (void)state;
    struct sigaction sa, before, now;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = old_handler;
    assert_int_equal(sigaction(SIGWINCH, &sa, &before), 0);
    assert_false(blocked_here(SIGWINCH));
    RLSignalSourceRef a = watch(SIGWINCH, "a");
    RLSignalSourceRef b = watch(SIGWINCH, "b");
    assert_int_equal(sigaction(SIGWINCH, NULL, &now), 0);
    assert_true(now.sa_handler != old_handler);
    assert_true(blocked_here(SIGWINCH));
    /* Both watchers in one loop see the one delivery. */
    assert_int_equal(raise(SIGWINCH), 0);
    RLRunLoopRunInMode(MODE, 10, true);
    RLRunLoopRunInMode(MODE, 0.05, false);
    const char *t = rl_trace_get();
    assert_true(strcmp(t, "a:28:1 b:28:1") == 0 || strcmp(t, "b:28:1 a:28:1") == 0);
    done(a);
    assert_int_equal(sigaction(SIGWINCH, NULL, &now), 0);
    assert_true(now.sa_handler != old_handler); /* b still watches */
    assert_true(blocked_here(SIGWINCH));
    done(b);
    assert_int_equal(sigaction(SIGWINCH, NULL, &now), 0);
    assert_true(now.sa_handler == old_handler);
    assert_false(blocked_here(SIGWINCH));

    /* Blocked before: stays blocked. Ignored before: ignored again, and
     * watched meanwhile (SIG_IGN would have discarded it). */
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGWINCH);
    assert_int_equal(pthread_sigmask(SIG_BLOCK, &one, NULL), 0);
    sa.sa_handler = SIG_IGN;
    assert_int_equal(sigaction(SIGWINCH, &sa, NULL), 0);
    rl_trace_clear();
    RLSignalSourceRef c = watch(SIGWINCH, "c");
    assert_int_equal(raise(SIGWINCH), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("c:28:1");
    done(c);
    assert_true(blocked_here(SIGWINCH));
    assert_int_equal(sigaction(SIGWINCH, NULL, &now), 0);
    assert_true(now.sa_handler == SIG_IGN);
    assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &one, NULL), 0);
    assert_int_equal(sigaction(SIGWINCH, &before, NULL), 0);
}

/* A signal sent while it was watched belongs to the watchers: one still
 * pending when the last of them goes (the loop never ran to read it) is
 * dropped, not delivered with the restored disposition — for SIGUSR1 the
 * default, which ends the process. In a child, which that would end. */
static bool drop_pending_child(void *arg) {
    (void)arg;
    RLSignalSourceContext c = {0};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR1, count_cb, &c);
    bool ok = s && RLRunLoopAddSignalSource(RLRunLoopGetCurrent(), s, MODE);
    ok = ok && kill(getpid(), SIGUSR1) == 0; /* blocked: pending */
    ok = ok && RLSignalSourceInvalidate(s) && RLRelease(s);
    struct sigaction now;
    return ok && sigaction(SIGUSR1, NULL, &now) == 0 && now.sa_handler == SIG_DFL && !blocked_here(SIGUSR1);
}

static void test_pending_delivery_dropped_when_the_last_watcher_goes(void **state) {
    (void)state;
    rl_test_in_child(drop_pending_child, NULL, "pending SIGUSR1 at the last invalidate");
}

static void test_pending_before_the_source_is_in_a_loop(void **state) {
    (void)state;
    RLSignalSourceContext c = {0, "late", NULL, NULL, NULL};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR1, count_cb, &c);
    assert_non_null(s);
    assert_int_equal(raise(SIGUSR1), 0);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(RLRunLoopRunInMode(MODE, 0.02, true), kRLRunLoopRunTimedOut);
    assert_trace("");
    assert_true(RLRunLoopAddSignalSource(RLRunLoopGetCurrent(), s, MODE));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("late:10:1");
    rl_test_unkeep(keep);
    done(s);
}

/* A standard signal sent to the loop's own thread (pthread_kill) before
 * its source is added to that loop from another thread: the signal is
 * pending on the loop's thread only, so only that thread can see it, and
 * a second one sent before the add merges into it (both are sent before
 * the add, so the loop's thread cannot have taken the first one between
 * them, however the threads are scheduled). The loop's thread looks for
 * itself once the source joins it, and sees one. */
typedef struct sig_loop {
    pthread_t t;
    _Atomic(RLRunLoopRef) rl;
    _Atomic bool quit;
} sig_loop;

static void *sig_loop_main(void *arg) {
    sig_loop *l = arg;
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    atomic_store(&l->rl, RLRunLoopGetCurrent());
    while (!atomic_load(&l->quit))
        RLRunLoopRunInMode(MODE, 10, false);
    rl_test_unkeep(keep);
    return NULL;
}

static void test_thread_directed_signal_pending_before_a_cross_thread_add(void **state) {
    (void)state;
    atomic_store(&total, 0);
    RLSignalSourceContext c = {0, "tdir", NULL, NULL, NULL};
    /* Made first: it blocks SIGUSR1 here, and the loop's thread inherits
     * the mask (the documented rule for threads started later). */
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR1, count_cb, &c);
    assert_non_null(s);
    sig_loop l;
    memset(&l, 0, sizeof l);
    assert_int_equal(pthread_create(&l.t, NULL, sig_loop_main, &l), 0);
    while (!atomic_load(&l.rl))
        usleep(1000);
    usleep(20000); /* the loop's thread is asleep in its run */
    assert_int_equal(pthread_kill(l.t, SIGUSR1), 0);
    assert_int_equal(pthread_kill(l.t, SIGUSR1), 0); /* merges into the pending one */
    assert_true(RLRunLoopAddSignalSource(atomic_load(&l.rl), s, MODE));
    double t0 = rl_test_now();
    while (atomic_load(&total) < 1 && rl_test_now() - t0 < 10)
        usleep(1000);
    usleep(20000); /* a second callout, were there one, comes meanwhile */
    assert_int_equal(atomic_load(&total), 1);
    assert_true(pthread_equal(callout_thread, l.t));
    atomic_store(&l.quit, true);
    assert_true(RLRunLoopStop(atomic_load(&l.rl)));
    assert_int_equal(pthread_join(l.t, NULL), 0);
    done(s);
}

/* Invalidated from another thread while its callout runs on the loop's
 * thread: the context's info is released once, after the callout returns
 * (the callout was handed info), not under it. */
static _Atomic int pin_released, pin_in_callout, pin_go, pin_released_during;
static void pin_release(const void *p) { (void)p; atomic_fetch_add(&pin_released, 1); }
static const void *pin_retain(const void *p) { return p; }
static void pin_cb(RLSignalSourceRef s, int signum, RLIndex count, void *info) {
    (void)s, (void)signum, (void)count, (void)info;
    atomic_store(&pin_in_callout, 1);
    double t0 = rl_test_now();
    while (!atomic_load(&pin_go) && rl_test_now() - t0 < 10)
        usleep(500);
    usleep(20000); /* an early release would have happened by now */
    atomic_store(&pin_released_during, atomic_load(&pin_released));
    atomic_store(&pin_in_callout, 2);
}

static void test_context_released_after_a_running_callout(void **state) {
    (void)state;
    atomic_store(&pin_released, 0);
    atomic_store(&pin_in_callout, 0);
    atomic_store(&pin_go, 0);
    RLSignalSourceContext c = {0, "pin", pin_retain, pin_release, NULL};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR2, pin_cb, &c);
    assert_non_null(s);
    sig_loop l;
    memset(&l, 0, sizeof l);
    assert_int_equal(pthread_create(&l.t, NULL, sig_loop_main, &l), 0);
    while (!atomic_load(&l.rl))
        usleep(1000);
    assert_true(RLRunLoopAddSignalSource(atomic_load(&l.rl), s, MODE));
    assert_int_equal(pthread_kill(l.t, SIGUSR2), 0);
    double t0 = rl_test_now();
    while (atomic_load(&pin_in_callout) != 1 && rl_test_now() - t0 < 10)
        usleep(100);
    assert_int_equal(atomic_load(&pin_in_callout), 1);
    assert_true(RLSignalSourceInvalidate(s));
    atomic_store(&pin_go, 1);
    while (atomic_load(&pin_in_callout) != 2 && rl_test_now() - t0 < 20)
        usleep(100);
    atomic_store(&l.quit, true);
    assert_true(RLRunLoopStop(atomic_load(&l.rl)));
    assert_int_equal(pthread_join(l.t, NULL), 0);
    assert_int_equal(atomic_load(&pin_released_during), 0);
    assert_int_equal(atomic_load(&pin_released), 1);
    assert_true(RLRelease(s));
    assert_int_equal(atomic_load(&pin_released), 1);
}

static int released;
static const void *ctx_retain(const void *p) { return p; }
static void ctx_release(const void *p) { (void)p; released++; }

static void self_invalidate_cb(RLSignalSourceRef s, int signum, RLIndex count, void *info) {
    (void)signum, (void)count, (void)info;
    rl_trace_add("cb");
    assert_true(RLSignalSourceInvalidate(s));
    assert_true(RLSignalSourceInvalidate(s));
}

static void test_invalidate_inside_the_callout_and_context(void **state) {
    (void)state;
    RLSignalSourceContext c = {0, "x", ctx_retain, ctx_release, NULL};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR1, self_invalidate_cb, &c);
    assert_non_null(s);
    RLSignalSourceContext got;
    assert_true(RLSignalSourceGetContext(s, &got));
    assert_string_equal(got.info, "x");
    RLRunLoopSourceRef src = RLSignalSourceCreateRunLoopSource(NULL, s, 0);
    RLRunLoopSourceRef again = RLSignalSourceCreateRunLoopSource(NULL, s, 3);
    assert_ptr_equal(src, again);
    /* Added twice to one mode: still one callout per delivery. */
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, MODE));
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("cb");
    assert_false(RLSignalSourceIsValid(s));
    assert_false(RLRunLoopSourceIsValid(src));
    assert_int_equal(released, 1);
    /* Unblocked again; nothing pending was lost to a default action. */
    assert_false(blocked_here(SIGUSR1));
    rl_test_unkeep(keep);
    RLRelease(src);
    RLRelease(again);
    assert_true(RLRelease(s));
}

/* The process's open descriptors now. */
static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* As every object that owns a kernel handle: its signalfd is closed by the
 * invalidation, not when the last reference goes (a source kept invalid
 * holds no descriptor). */
static void test_invalidate_closes_the_signalfd(void **state) {
    (void)state;
    int before = open_fds();
    RLSignalSourceRef s = watch(SIGUSR2, NULL);
    assert_true(open_fds() > before);
    RLRetain(s); /* someone else still holds it */
    assert_true(RLSignalSourceInvalidate(s));
    assert_int_equal(open_fds(), before);
    assert_true(RLSignalSourceInvalidate(s)); /* once: nothing more */
    RLRelease(s);
    RLRelease(s);
    assert_int_equal(open_fds(), before);
}

static void test_misuse(void **state) {
    (void)state;
    int bad[] = {0, -1, SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, _NSIG, 1000, 32};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_rl_fails(RLSignalSourceCreate(NULL, bad[i], count_cb, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSignalSourceCreate(NULL, SIGUSR1, NULL, NULL), kRLErrorInvalidArgument);
    RLSignalSourceContext v1 = {1, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLSignalSourceCreate(NULL, SIGUSR1, count_cb, &v1), kRLErrorInvalidArgument);
    /* Nothing was left blocked by the failed calls. */
    assert_false(blocked_here(SIGUSR1));

    assert_rl_fails(RLSignalSourceInvalidate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSignalSourceIsValid(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLSignalSourceGetSignal(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLSignalSourceGetContext(NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLSignalSourceCreateRunLoopSource(NULL, NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddSignalSource(RLRunLoopGetCurrent(), NULL, MODE), kRLErrorInvalidArgument);

    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR1, count_cb, NULL);
    assert_non_null(s);
    assert_rl_fails(RLSignalSourceGetContext(s, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddSignalSource(NULL, s, MODE), kRLErrorInvalidArgument);
    assert_rl_fails(RLSignalSourceIsValid((RLSignalSourceRef)RLRunLoopGetCurrent()), kRLErrorInvalidObject);
    assert_true(RLSignalSourceInvalidate(s));
    assert_true(RLSignalSourceInvalidate(s));
    assert_rl_fails(RLSignalSourceCreateRunLoopSource(NULL, s, 0), kRLErrorInvalidObject);
    assert_rl_fails(RLRunLoopAddSignalSource(RLRunLoopGetCurrent(), s, MODE), kRLErrorInvalidObject);
    assert_int_equal(RLSignalSourceGetSignal(s), SIGUSR1);
    assert_true(RLRelease(s));
}

/* fork() while another thread creates and invalidates signal sources: the
 * signal table's lock is held across fork() (its slot in rl_fork.c's
 * order), so the child finds it free and can watch a signal of its own. A
 * child that finds it locked by a thread it does not have hangs: the alarm
 * ends it, and the parent sees it die. */
static bool churn_signal_sources(void *arg) {
    (void)arg;
    RLSignalSourceContext c = {0};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR2, count_cb, &c);
    return s && RLSignalSourceInvalidate(s) && RLRelease(s);
}

static bool child_watches_a_signal(void *arg) {
    (void)arg;
    RLSignalSourceContext c = {0};
    RLSignalSourceRef s = RLSignalSourceCreate(NULL, SIGUSR1, count_cb, &c);
    return s && RLSignalSourceInvalidate(s) && RLRelease(s);
}

static void test_fork_while_another_thread_creates_sources(void **state) {
    (void)state;
    rl_test_fork_while_churning(rl_test_iters(200), churn_signal_sources, child_watches_a_signal, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_raise_runs_the_callout_on_the_loop_thread, rl_trace_setup),
        cmocka_unit_test_setup(test_realtime_signals_queue_and_are_counted_together, rl_trace_setup),
        cmocka_unit_test_setup(test_ten_thousand_realtime_signals_from_another_process, rl_trace_setup),
        cmocka_unit_test_setup(test_ten_thousand_standard_signals_coalesce, rl_trace_setup),
        cmocka_unit_test_setup(test_several_loops_watch_one_signal, rl_trace_setup),
        cmocka_unit_test_setup(test_last_watcher_restores_disposition_and_mask, rl_trace_setup),
        cmocka_unit_test_setup(test_pending_delivery_dropped_when_the_last_watcher_goes, rl_trace_setup),
        cmocka_unit_test_setup(test_pending_before_the_source_is_in_a_loop, rl_trace_setup),
        cmocka_unit_test_setup(test_thread_directed_signal_pending_before_a_cross_thread_add, rl_trace_setup),
        cmocka_unit_test_setup(test_context_released_after_a_running_callout, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_inside_the_callout_and_context, rl_trace_setup),
        cmocka_unit_test_setup(test_fork_while_another_thread_creates_sources, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_closes_the_signalfd, rl_trace_setup),
        cmocka_unit_test_setup(test_misuse, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
