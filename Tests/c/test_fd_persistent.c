/* test_fd_persistent.c — what the loop asks of epoll while an fd's owner
 * keeps its callbacks enabled: a callback enabled again by its own callout
 * (an RLSocket's automatic re-enabling, an RLFileDescriptor callout that
 * enables itself) leaves the kernel's registration as it is, with no
 * system call per wake-up; and everything CF's one-shot callbacks promise
 * still holds: a disabled callback stays silent, a source whose mode is
 * not running neither fires nor spins the loop, several objects on one fd
 * are each served, and an fd closed behind the loop's back (its file kept
 * open by a dup, its number reused) never spins the loop. */
#include "fdutil.h"
#include "testutil.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The library's count of epoll_ctl calls on a loop's epoll set (rl_fdtab.c):
 * hidden, reachable from code linked with the static library. */
extern unsigned long rl__fd_ctl_calls(RLRunLoopRef rl);

typedef struct reader {
    const char *name;
    bool reenable;  /* enable the read callback again from the callout */
    bool consume;   /* read one byte per callout */
    int calls;
    int read_errno; /* the last failed read's errno */
} reader;

static void reader_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    reader *r = info;
    r->calls++;
    rl_trace_addf("%s:%s%s", r->name, (types & kRLFileDescriptorReadCallBack) ? "r" : "",
                  (types & kRLFileDescriptorWriteCallBack) ? "w" : "");
    if (r->consume) {
        char c;
        if (read(RLFileDescriptorGetNativeDescriptor(f), &c, 1) != 1)
            r->read_errno = errno;
    }
    if (r->reenable)
        (void)RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
}

static RLFileDescriptorRef make(int fd, reader *r, bool close_it) {
    RLFileDescriptorContext c = {0, r, NULL, NULL, NULL};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, fd, close_it, reader_cb, &c);
    assert_non_null(f);
    return f;
}

/* One byte in, one wake-up that reads it. */
static void one_wake(int wfd, const char *mode) {
    assert_int_equal(write(wfd, "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(mode, 10, true), kRLRunLoopRunHandledSource);
}

/* One byte in, one pass that serves every callback it makes ready. */
static void poll_wake(int wfd, const char *mode) {
    assert_int_equal(write(wfd, "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(mode, 0, false), kRLRunLoopRunTimedOut);
}

/* ---- no system call per wake-up while the interest stays ---- */

static void test_reader_enabling_itself_costs_no_rearm(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader r = {"p", true, true, 0, 0};
    RLFileDescriptorRef f = make(p[0], &r, true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Steady");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    for (int i = 0; i < 4; i++) /* the loop learns that the callout keeps it enabled */
        one_wake(p[1], "Steady");
    unsigned long before = rl__fd_ctl_calls(rl);
    for (int i = 0; i < 100; i++)
        one_wake(p[1], "Steady");
    /* One every few dozen wake-ups at most (the loop checks now and then
     * that the fd is still the one it watches); one per wake-up before. */
    assert_true(rl__fd_ctl_calls(rl) - before <= 4);
    assert_int_equal(r.calls, 104);
    assert_int_equal(r.read_errno, 0);
    rl_test_fd_drop(f, s);
    close(p[1]);
}

typedef struct sock_reader {
    int calls;
    long bytes;
} sock_reader;

static void sock_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    sock_reader *r = info;
    r->calls++;
    if (type == kRLSocketDataCallBack && data)
        r->bytes += RLDataGetLength((RLDataRef)data);
}

static void test_socket_reenabled_automatically_costs_no_rearm(void **state) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    sock_reader r = {0, 0};
    RLSocketContext c = {0, &r, NULL, NULL, NULL};
    RLSocketRef so = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, sock_cb, &c);
    assert_non_null(so);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, so, 0);
    assert_non_null(src);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopAddSource(rl, src, "Sock"));
    for (int i = 0; i < 4; i++)
        one_wake(sv[1], "Sock");
    unsigned long before = rl__fd_ctl_calls(rl);
    for (int i = 0; i < 100; i++)
        one_wake(sv[1], "Sock");
    assert_true(rl__fd_ctl_calls(rl) - before <= 4);
    assert_int_equal(r.calls, 104);
    assert_int_equal(r.bytes, 104);
    RLSocketInvalidate(so);
    RLRelease(src);
    RLRelease(so);
    close(sv[1]);
}

/* ---- what one-shot callbacks promise ---- */

static void test_disabled_by_its_callout_stays_silent(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader r = {"p", true, true, 0, 0};
    RLFileDescriptorRef f = make(p[0], &r, true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Quiet");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    for (int i = 0; i < 8; i++)
        one_wake(p[1], "Quiet");
    /* The callout stops enabling itself, with bytes still there to read:
     * one more callback, then silence, and the loop sleeps. */
    r.reenable = false;
    assert_int_equal(write(p[1], "abc", 3), 3);
    assert_int_equal(RLRunLoopRunInMode("Quiet", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(r.calls, 9);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("Quiet", &wakes);
    RLRunLoopSourceRef keep = rl_test_keep_mode("Quiet");
    assert_int_equal(RLRunLoopRunInMode("Quiet", 0.1, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2); /* not thousands */
    assert_int_equal(r.calls, 9);
    /* Disabled from outside while it is kept enabled: the same. */
    r.reenable = true;
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Quiet", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(r.calls, 10);
    assert_true(RLFileDescriptorDisableCallBacks(f, kRLFileDescriptorReadCallBack));
    wakes = 0;
    assert_int_equal(RLRunLoopRunInMode("Quiet", 0.1, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(r.calls, 10);
    /* Enabled again: the byte left is still there. */
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Quiet", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(r.calls, 11);
    rl_test_uncount_wakes(o);
    rl_test_unkeep(keep);
    rl_test_fd_drop(f, s);
    close(p[1]);
}

static void test_mode_not_running_neither_fires_nor_spins(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader r = {"p", true, true, 0, 0};
    RLFileDescriptorRef f = make(p[0], &r, true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Mine");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    for (int i = 0; i < 8; i++)
        one_wake(p[1], "Mine");
    /* Readable and enabled, its mode not running: the other mode sleeps. */
    assert_int_equal(write(p[1], "ab", 2), 2);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("Other", &wakes);
    RLRunLoopSourceRef keep = rl_test_keep_mode("Other");
    assert_int_equal(RLRunLoopRunInMode("Other", 0.1, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(r.calls, 8);
    /* Back in its mode: served, and kept enabled. */
    assert_int_equal(RLRunLoopRunInMode("Mine", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode("Mine", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(r.calls, 10);
    one_wake(p[1], "Mine");
    assert_int_equal(r.calls, 11);
    assert_int_equal(r.read_errno, 0);
    rl_test_uncount_wakes(o);
    rl_test_unkeep(keep);
    rl_test_fd_drop(f, s);
    close(p[1]);
}

/* The nested run's mode does not hold the fd: it runs from the fd's own
 * callout, with the fd still readable. */
typedef struct nester {
    reader r;
    long wakes;
    bool nested;
} nester;

static void nester_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    nester *n = info;
    reader_cb(f, types, &n->r);
    if (n->nested) {
        n->nested = false;
        RLRunLoopObserverRef o = rl_test_count_wakes("Inner", &n->wakes);
        RLRunLoopSourceRef keep = rl_test_keep_mode("Inner");
        (void)RLRunLoopRunInMode("Inner", 0.1, false);
        rl_test_unkeep(keep);
        rl_test_uncount_wakes(o);
    }
}

static void test_nested_run_in_another_mode_does_not_spin(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    nester n = {{"p", true, true, 0, 0}, 0, false};
    RLFileDescriptorContext c = {0, &n, NULL, NULL, NULL};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, nester_cb, &c);
    assert_non_null(f);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Outer");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    for (int i = 0; i < 8; i++)
        one_wake(p[1], "Outer");
    n.nested = true;
    assert_int_equal(write(p[1], "abc", 3), 3);
    assert_int_equal(RLRunLoopRunInMode("Outer", 10, true), kRLRunLoopRunHandledSource);
    assert_true(n.wakes <= 2);
    assert_int_equal(n.r.calls, 9);
    assert_int_equal(RLRunLoopRunInMode("Outer", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode("Outer", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(n.r.calls, 11);
    assert_int_equal(n.r.read_errno, 0);
    rl_test_fd_drop(f, s);
    close(p[1]);
}

/* A timer's callout runs the same mode nested, in the pass whose wait
 * reported the fd: the nested pass serves the readiness, and the outer
 * pass must not serve it a second time (the byte is gone by then). */
static void nest_from_timer(RLRunLoopTimerRef t, void *info) {
    (void)RLRunLoopRunInMode("Twice", 0.2, true);
}

static void test_readiness_served_by_a_nested_pass_is_not_served_again(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader r = {"p", true, true, 0, 0};
    RLFileDescriptorRef f = make(p[0], &r, true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Twice");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    for (int i = 0; i < 8; i++)
        one_wake(p[1], "Twice");
    /* A timer due now and a byte in the pipe: one wait reports both; the
     * timer fires first and its nested run reads the byte. */
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0, nest_from_timer, NULL);
    assert_non_null(t);
    assert_int_equal(write(p[1], "x", 1), 1);
    RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "Twice");
    /* Served once, by whichever pass gets it (the outer one may then wait
     * out its time). */
    (void)RLRunLoopRunInMode("Twice", 0.3, true);
    assert_int_equal(r.calls, 9);
    assert_int_equal(r.read_errno, 0); /* never called with nothing to read */
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    rl_test_fd_drop(f, s);
    close(p[1]);
}

static void test_two_objects_one_kept_enabled(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader a = {"a", true, true, 0, 0}, b = {"b", false, false, 0, 0};
    RLFileDescriptorRef fa = make(p[0], &a, false), fb = make(p[0], &b, false);
    RLRunLoopSourceRef sa = rl_test_fd_add(fa, "Both"), sb = rl_test_fd_add(fb, "Both");
    assert_true(RLFileDescriptorEnableCallBacks(fa, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(fb, kRLFileDescriptorReadCallBack));
    poll_wake(p[1], "Both");
    assert_trace("a:r b:r");
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    for (int i = 0; i < 8; i++)
        poll_wake(p[1], "Both");
    unsigned long before = rl__fd_ctl_calls(rl);
    for (int i = 0; i < 40; i++)
        poll_wake(p[1], "Both");
    assert_true(rl__fd_ctl_calls(rl) - before <= 3);
    assert_int_equal(a.calls, 49);
    assert_int_equal(b.calls, 1); /* never enabled again */
    /* b enabled again: both served by the next wake-up. */
    assert_true(RLFileDescriptorEnableCallBacks(fb, kRLFileDescriptorReadCallBack));
    poll_wake(p[1], "Both");
    assert_int_equal(a.calls, 50);
    assert_int_equal(b.calls, 2);
    /* a stops: b alone, once; then the loop sleeps though bytes wait. */
    a.reenable = false;
    assert_true(RLFileDescriptorEnableCallBacks(fb, kRLFileDescriptorReadCallBack));
    poll_wake(p[1], "Both");
    assert_int_equal(write(p[1], "zz", 2), 2);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("Both", &wakes);
    assert_int_equal(RLRunLoopRunInMode("Both", 0.1, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(a.calls, 51);
    assert_int_equal(b.calls, 3);
    rl_test_uncount_wakes(o);
    rl_test_fd_drop(fa, sa);
    rl_test_fd_drop(fb, sb);
    close(p[0]);
    close(p[1]);
}

/* A fork() child shares its parent's epoll set: what the child does with
 * the inherited loop's fd objects must not change the parent's
 * registration, persistent or not. */
static void test_fork_child_leaves_the_parents_registration(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader r = {"p", true, true, 0, 0};
    RLFileDescriptorRef f = make(p[0], &r, true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Forked");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    for (int i = 0; i < 8; i++)
        one_wake(p[1], "Forked");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Disable, invalidate: the child's own business. */
        (void)RLFileDescriptorDisableCallBacks(f, kRLFileDescriptorReadCallBack);
        (void)RLFileDescriptorInvalidate(f);
        rl_test_child_exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    unsigned long before = rl__fd_ctl_calls(rl);
    for (int i = 0; i < 20; i++)
        one_wake(p[1], "Forked");
    assert_int_equal(r.calls, 28);
    assert_int_equal(r.read_errno, 0);
    assert_true(rl__fd_ctl_calls(rl) - before <= 2);
    rl_test_fd_drop(f, s);
    close(p[1]);
}

/* ---- fds closed behind the loop's back ---- */

static void test_closed_with_a_dup_while_kept_enabled_does_not_spin(void **state) {
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader r = {"p", true, true, 0, 0};
    RLFileDescriptorRef f = make(p[0], &r, true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "DupKept");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    for (int i = 0; i < 8; i++)
        one_wake(p[1], "DupKept");
    /* The user closes the fd while a dup keeps its file open, and the file
     * becomes readable for good (nobody reads it). */
    int keep = dup(p[0]);
    assert_true(keep >= 0);
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(write(p[1], "x", 1), 1);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("DupKept", &wakes);
    RLRunLoopSourceRef keepmode = rl_test_keep_mode("DupKept");
    assert_int_equal(RLRunLoopRunInMode("DupKept", 0.2, false), kRLRunLoopRunTimedOut);
    /* The callout's reads fail until the loop finds out (bounded), then
     * silence: not hundreds of thousands of wake-ups. */
    assert_true(wakes <= 200);
    int calls = r.calls;
    assert_true(calls <= 8 + 200);
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    wakes = 0;
    assert_int_equal(RLRunLoopRunInMode("DupKept", 0.1, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(r.calls, calls);
    /* The loop still serves others. */
    int q[2];
    assert_int_equal(pipe2(q, O_NONBLOCK), 0);
    reader r2 = {"q", true, true, 0, 0};
    RLFileDescriptorRef f2 = make(q[0], &r2, true);
    RLRunLoopSourceRef s2 = rl_test_fd_add(f2, "DupKept");
    assert_true(RLFileDescriptorEnableCallBacks(f2, kRLFileDescriptorReadCallBack));
    one_wake(q[1], "DupKept");
    assert_int_equal(r2.calls, 1);
    rl_test_fd_drop(f2, s2);
    close(q[1]);
    rl_test_uncount_wakes(o);
    rl_test_unkeep(keepmode);
    rl_test_fd_drop(f, s);
    close(keep);
    close(p[1]);
}

static void test_reused_while_a_dup_keeps_the_kept_enabled_file(void **state) {
    int p[2], q[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    reader r1 = {"old", true, false, 0, 0};
    RLFileDescriptorRef f1 = make(p[0], &r1, false);
    RLRunLoopSourceRef s1 = rl_test_fd_add(f1, "DupReuse2");
    assert_true(RLFileDescriptorEnableCallBacks(f1, kRLFileDescriptorReadCallBack));
    for (int i = 0; i < 8; i++) {
        one_wake(p[1], "DupReuse2");
        char c;
        assert_int_equal(read(p[0], &c, 1), 1);
    }
    int keep = dup(p[0]);
    assert_true(keep >= 0);
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(pipe2(q, O_NONBLOCK), 0);
    assert_int_equal(q[0], p[0]);
    reader r2 = {"new", false, false, 0, 0};
    RLFileDescriptorRef f2 = make(q[0], &r2, true);
    RLRunLoopSourceRef s2 = rl_test_fd_add(f2, "DupReuse2");
    assert_true(RLFileDescriptorEnableCallBacks(f2, kRLFileDescriptorReadCallBack));
    /* The old file becomes readable for good, the new one not (yet). */
    assert_int_equal(write(p[1], "x", 1), 1);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("DupReuse2", &wakes);
    assert_int_equal(RLRunLoopRunInMode("DupReuse2", 0.2, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 5);
    assert_int_equal(r2.calls, 0);
    assert_int_equal(r1.calls, 8);
    assert_int_equal(write(q[1], "y", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("DupReuse2", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r1.calls, 8);
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f1, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    rl_test_uncount_wakes(o);
    rl_test_fd_drop(f1, s1);
    rl_test_fd_drop(f2, s2);
    close(q[1]);
    close(keep);
    close(p[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_reader_enabling_itself_costs_no_rearm, rl_trace_setup),
        cmocka_unit_test_setup(test_socket_reenabled_automatically_costs_no_rearm, rl_trace_setup),
        cmocka_unit_test_setup(test_disabled_by_its_callout_stays_silent, rl_trace_setup),
        cmocka_unit_test_setup(test_mode_not_running_neither_fires_nor_spins, rl_trace_setup),
        cmocka_unit_test_setup(test_nested_run_in_another_mode_does_not_spin, rl_trace_setup),
        cmocka_unit_test_setup(test_readiness_served_by_a_nested_pass_is_not_served_again, rl_trace_setup),
        cmocka_unit_test_setup(test_two_objects_one_kept_enabled, rl_trace_setup),
        cmocka_unit_test_setup(test_fork_child_leaves_the_parents_registration, rl_trace_setup),
        cmocka_unit_test_setup(test_closed_with_a_dup_while_kept_enabled_does_not_spin, rl_trace_setup),
        cmocka_unit_test_setup(test_reused_while_a_dup_keeps_the_kept_enabled_file, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
