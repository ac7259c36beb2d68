/* test_perform_exited.c — performing on a thread that has exited: the main
 * thread after RLThreadExit (with or without a run loop of its own), and a
 * library thread; every form fails at once with kRLErrorInvalidState and
 * calls the release function, and a call that succeeds leaves no error.
 *
 * The main thread cannot exit inside the test runner: each main-thread case
 * runs in a child process (this program again, run with --main-exits, so
 * that no cmocka state lives on the stack of the main thread that exits)
 * whose main thread calls RLThreadExit while a second thread sends the
 * requests and reports through the exit status. An alarm ends a child that
 * hangs (what a waiting request did before). */
#include "testutil.h"
#include "owned.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- in the child: no cmocka (its jump buffer is on the exited main
 * thread's stack); each check that fails exits with its own code ---- */

static void check(bool ok, int code) {
    if (!ok)
        _exit(code);
}

static void not_run(void *arg) {
    (void)arg;
    _exit(90); /* a request ran on a thread that is gone */
}

static void count_release(void *arg) { atomic_fetch_add((_Atomic int *)arg, 1); }

/* Whether the kernel has the process's main thread as a zombie: it has
 * exited, the process lives on. */
static bool main_thread_is_gone(void) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

static void check_refused(bool ok, _Atomic int *released, int code) {
    check(!ok, code);
    check(RLErrorGetLast().code == kRLErrorInvalidState, code + 1);
    if (released)
        check(atomic_load(released) == 1, code + 2);
}

static void *sender(void *arg) {
    (void)arg;
    for (int i = 0; i < 20000 && !main_thread_is_gone(); i++)
        usleep(1000);
    check(main_thread_is_gone(), 10);

    _Atomic int released = 0;
    check_refused(RLThreadPerformOnMainWithRelease(not_run, &released, count_release, NULL, true), &released, 20);
    atomic_store(&released, 0);
    check_refused(RLThreadPerformOnMainWithRelease(not_run, &released, count_release, NULL, false), &released, 30);
    check_refused(RLThreadPerformOnMain(not_run, NULL, NULL, true), NULL, 40);
    check_refused(RLThreadPerformOnMain(not_run, NULL, NULL, false), NULL, 50);
#if __BLOCKS__
    check_refused(RLThreadPerformBlockOnMain(NULL, true, ^{ not_run(NULL); }), NULL, 60);
    check_refused(RLThreadPerformBlockOnMain(NULL, false, ^{ not_run(NULL); }), NULL, 70);
#endif
    /* The main loop, torn down with the thread, refuses too. */
    atomic_store(&released, 0);
    check_refused(RLRunLoopPerformFunctionWithRelease(RLRunLoopGetMain(), kRLRunLoopDefaultMode, not_run,
                                                      &released, count_release),
                  &released, 80);
    check(RLThreadIsFinished(RLThreadGetMain()), 11);
    _exit(0);
}

/* ---- the main thread exits from inside a request of its loop ---- */

static void exit_here(void *arg) {
    (void)arg;
    RLThreadExit();
}

static void *sender_behind_exit(void *arg) {
    RLRunLoopRef main_loop = arg;
    for (int i = 0; i < 20000 && !RLRunLoopIsWaiting(main_loop); i++)
        usleep(1000);
    /* Both in one batch: the first ends the thread, the second (waited for)
     * is behind it and must be dropped, not left waiting. */
    check(RLRunLoopPerformFunction(main_loop, kRLRunLoopDefaultMode, exit_here, NULL), 100);
    _Atomic int released = 0;
    check_refused(RLThreadPerformOnMainWithRelease(not_run, &released, count_release, NULL, true), &released, 110);
    return sender(NULL);
}

/* The child's main thread: maybe makes (or runs) its loop, then exits. */
static void child(int how) {
    alarm(30);
    pthread_t t;
    if (how == 2) {
        RLRunLoopRef rl = RLRunLoopGetCurrent();
        RLRunLoopSourceContext ctx = {0};
        RLRunLoopSourceRef keep = RLRunLoopSourceCreate(NULL, 0, &ctx);
        RLRunLoopAddSource(rl, keep, kRLRunLoopDefaultMode);
        check(pthread_create(&t, NULL, sender_behind_exit, rl) == 0, 2);
        RLRunLoopRun(); /* ends in RLThreadExit */
        _exit(4);
    }
    if (how == 1)
        RLRunLoopGetCurrent();
    check(pthread_create(&t, NULL, sender, NULL) == 0, 2);
    RLThreadExit();
}

static const char *self_path; /* argv[0] (not /proc/self/exe: under valgrind that is the tool) */

static void run_child(int how) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char arg[2] = {(char)('0' + how), '\0'};
        execl(self_path, self_path, "--main-exits", arg, (char *)NULL);
        _exit(3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("child killed by signal %d (SIGALRM: a request hung)", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_perform_on_exited_main_thread(void **state) {
    (void)state;
    run_child(0);
}

static void test_perform_on_exited_main_thread_with_its_loop(void **state) {
    (void)state;
    run_child(1);
}

static void test_main_thread_exits_inside_a_batch(void **state) {
    (void)state;
    run_child(2);
}

/* ---- a library thread that has exited ---- */

static void *return_at_once(void *arg) { return arg; }

static void test_perform_on_exited_thread(void **state) {
    (void)state;
    RLThreadRef t = RLThreadCreate(NULL, return_at_once, NULL);
    assert_non_null(t);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    owned o = {0};
    assert_rl_fails(RLThreadPerformWithRelease(t, owned_run, &o, owned_release, NULL, true), kRLErrorInvalidState);
    assert_int_equal(atomic_load(&o.released), 1);
    assert_int_equal(atomic_load(&o.ran), 0);
    owned o2 = {0};
    assert_rl_fails(RLThreadPerformWithRelease(t, owned_run, &o2, owned_release, NULL, false), kRLErrorInvalidState);
    assert_int_equal(atomic_load(&o2.released), 1);
    assert_int_equal(atomic_load(&o2.ran), 0);
    RLRelease(t);
}

/* ---- a call that succeeds leaves no error ---- */

static void nothing(void *arg) { (void)arg; }

static void *loop_until_stopped(void *arg) {
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    atomic_store((_Atomic int *)arg, 1);
    RLRunLoopRun();
    rl_test_unkeep(keep);
    return NULL;
}

static void stop_here(void *arg) {
    (void)arg;
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void test_success_leaves_no_error(void **state) {
    (void)state;
    _Atomic int ready = 0;
    RLThreadRef t = RLThreadCreate(NULL, loop_until_stopped, &ready);
    assert_non_null(t);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    while (!atomic_load(&ready))
        usleep(1000);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    const RLRunLoopMode two[] = {"a", kRLRunLoopDefaultMode};
    const RLRunLoopMode list[] = {"a", kRLRunLoopCommonModes, NULL};
    owned o = {0};
    _Atomic int released = 0;
    RLErrorClear();
    assert_true(RLRunLoopPerformFunction(rl, kRLRunLoopDefaultMode, nothing, NULL));
    assert_true(RLRunLoopPerformFunction(rl, "a", nothing, NULL));
    assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopCommonModes, nothing, (void *)&released,
                                                    count_release));
    assert_true(RLRunLoopPerformFunctionInModes(rl, two, 2, nothing, NULL, NULL));
    assert_true(RLThreadPerform(t, nothing, NULL, NULL, false));
    assert_true(RLThreadPerform(t, nothing, NULL, list, true));
    assert_true(RLThreadPerformWithRelease(t, owned_run, &o, owned_release, NULL, true));
    assert_true(RLThreadPerform(RLThreadGetCurrent(), nothing, NULL, NULL, true)); /* on itself: runs now */
#if __BLOCKS__
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{}));
    assert_true(RLRunLoopPerformBlockInModes(rl, two, 2, ^{}));
    assert_true(RLThreadPerformBlock(t, NULL, true, ^{}));
    assert_true(RLThreadPerformBlock(t, NULL, false, ^{}));
#endif
    assert_int_equal(RLErrorGetLast().code, kRLErrorNone);
    assert_int_equal(atomic_load(&o.ran), 1);
    assert_int_equal(atomic_load(&o.released), 1);
    /* Runs (and releases) what this thread's loop holds. */
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    RLRunLoopSourceRef keep_a = rl_test_keep_mode("a");
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    RLRunLoopRunInMode("a", 0, false);
    rl_test_unkeep(keep);
    rl_test_unkeep(keep_a);
    assert_int_equal(atomic_load(&released), 1);
    assert_true(RLThreadPerform(t, stop_here, NULL, NULL, false));
    assert_true(RLThreadJoin(t, NULL));
    RLRelease(t);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--main-exits") == 0)
        child(atoi(argv[2]));
    self_path = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perform_on_exited_main_thread),
        cmocka_unit_test(test_perform_on_exited_main_thread_with_its_loop),
        cmocka_unit_test(test_main_thread_exits_inside_a_batch),
        cmocka_unit_test(test_perform_on_exited_thread),
        cmocka_unit_test(test_success_leaves_no_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
