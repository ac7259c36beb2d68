/* test_fd.c — file-descriptor sources: read and write readiness, one-shot
 * per enable, modes, several fds in one wake, invalidation, closeOnInvalidate,
 * several objects on one fd. */
#include "testutil.h"
#include "trace.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void fd_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    rl_trace_addf("%s:%s%s", (const char *)info, (types & kRLFileDescriptorReadCallBack) ? "r" : "",
                  (types & kRLFileDescriptorWriteCallBack) ? "w" : "");
}

static RLFileDescriptorRef make(int fd, const char *name, bool close_it) {
    RLFileDescriptorContext c = {0, (void *)name, NULL, NULL, NULL};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, fd, close_it, fd_cb, &c);
    assert_non_null(f);
    return f;
}

static RLRunLoopSourceRef add(RLFileDescriptorRef f, const char *mode) {
    RLRunLoopSourceRef s = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_non_null(s);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), s, mode));
    return s;
}

static void test_pipe_read_one_shot(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "pipe", true);
    assert_int_equal(RLFileDescriptorGetNativeDescriptor(f), p[0]);
    RLRunLoopSourceRef s = add(f, "FD");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("FD", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("pipe:r");
    /* Not re-enabled: still readable, but no second callback. */
    assert_int_equal(RLRunLoopRunInMode("FD", 0.02, true), kRLRunLoopRunTimedOut);
    assert_trace("pipe:r");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("FD", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("pipe:r pipe:r");
    /* Disabled: nothing. */
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorDisableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("FD", 0.02, true), kRLRunLoopRunTimedOut);
    assert_trace("pipe:r pipe:r");

    assert_true(RLFileDescriptorInvalidate(f));
    assert_false(RLFileDescriptorIsValid(f));
    assert_false(RLRunLoopSourceIsValid(s));
    assert_int_equal(fcntl(p[0], F_GETFD), -1); /* closed on invalidate */
    assert_int_equal(RLRunLoopRunInMode("FD", 0, false), kRLRunLoopRunFinished);
    RLRelease(s);
    RLRelease(f);
    close(p[1]);
}

/* The source of an fd object holds the object while anyone holds the
 * source: a program may let go of the object once its source is in a
 * loop, and the callouts go on; when the source's last reference goes,
 * so does the object (closing its fd, still valid). */
static void test_source_keeps_its_object(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "kept", true);
    RLRunLoopSourceRef s = add(f, "FD");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    RLRelease(f);
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("FD", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("kept:r");
    assert_int_not_equal(fcntl(p[0], F_GETFD), -1);
    RLRunLoopRemoveSource(RLRunLoopGetCurrent(), s, "FD");
    RLRelease(s);
    assert_int_equal(fcntl(p[0], F_GETFD), -1); /* the object went with its source, valid: closed */
    close(p[1]);
}

/* One source per object while anyone holds it (its order the first
 * one's); once it is gone, the object makes a working one again, of the
 * order then asked; none once the object is invalidated. */
static void test_source_made_again_after_release(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "again", true);
    RLRunLoopSourceRef a = RLFileDescriptorCreateRunLoopSource(NULL, f, 1);
    assert_non_null(a);
    RLRunLoopSourceRef b = RLFileDescriptorCreateRunLoopSource(NULL, f, 5);
    assert_ptr_equal(a, b);
    assert_int_equal(RLRunLoopSourceGetOrder(b), 1);
    RLRelease(b);
    RLRelease(a);
    RLRunLoopSourceRef c = RLFileDescriptorCreateRunLoopSource(NULL, f, 7);
    assert_non_null(c);
    assert_int_equal(RLRunLoopSourceGetOrder(c), 7);
    assert_true(RLRunLoopSourceIsValid(c));
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), c, "FD"));
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("FD", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("again:r");
    assert_true(RLFileDescriptorInvalidate(f));
    assert_false(RLRunLoopSourceIsValid(c));
    assert_null(RLFileDescriptorCreateRunLoopSource(NULL, f, 0));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidObject);
    RLRelease(c);
    RLRelease(f);
    close(p[1]);
}

static void test_socket_write_and_read_in_one_wake(void **state) {
    int sv[2], p[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef w = make(sv[0], "sock", false);
    RLFileDescriptorRef r = make(p[0], "pipe", false);
    RLRunLoopSourceRef sw = add(w, "Both");
    RLRunLoopSourceRef sr = add(r, "Both");
    assert_true(RLFileDescriptorEnableCallBacks(w, kRLFileDescriptorWriteCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(r, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("Both", 0.02, false), kRLRunLoopRunTimedOut);
    /* Both served in the first pass; sources of equal order in epoll order. */
    assert_true(strcmp(rl_trace_get(), "sock:w pipe:r") == 0 || strcmp(rl_trace_get(), "pipe:r sock:w") == 0);
    RLFileDescriptorInvalidate(w);
    RLFileDescriptorInvalidate(r);
    RLRelease(sw);
    RLRelease(sr);
    RLRelease(w);
    RLRelease(r);
    close(sv[0]);
    close(sv[1]);
    close(p[0]);
    close(p[1]);
}

static void test_fd_waits_for_its_mode(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "pipe", true);
    RLRunLoopSourceRef s = add(f, "Mine");
    RLRunLoopSourceRef again = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    assert_ptr_equal(again, s); /* one source per descriptor */
    RLRelease(again);
    RLRunLoopSourceContext c = {0};
    RLRunLoopSourceRef keep = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), keep, "Other"));
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("Other", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("");
    assert_int_equal(RLRunLoopRunInMode("Mine", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("pipe:r");
    RLRunLoopSourceInvalidate(keep);
    RLRelease(keep);
    RLFileDescriptorInvalidate(f);
    RLRelease(s);
    RLRelease(f);
    close(p[1]);
}

static void count_wakes(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    if (info)
        (*(int *)info)++;
}

static void test_hangup_with_callbacks_off_does_not_spin(void **state) {
    /* The write end closes while no callback is enabled: the loop must sleep
     * (time out), not report the hang-up forever. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "pipe", true);
    RLRunLoopSourceRef s = add(f, "Hup");
    close(p[1]);
    int wakes = 0;
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wakes, NULL);
    RLRunLoopObserverContext oc = {0, &wakes, NULL, NULL, NULL};
    RLRelease(o);
    o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wakes, &oc);
    assert_true(RLRunLoopAddObserver(RLRunLoopGetCurrent(), o, "Hup"));
    assert_int_equal(RLRunLoopRunInMode("Hup", 0.05, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2); /* the timeout, nothing else */
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Hup", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("pipe:r");
    RLFileDescriptorInvalidate(f);
    RLRelease(s);
    RLRelease(f);
}

static void write_a_byte(RLRunLoopRef rl, void *fd) {
    /* Should it fail, the loop sleeps on and the run's result tells. */
    if (write((int)(intptr_t)fd, "y", 1) != 1)
        return;
}

static void test_fd_wakes_a_sleeping_loop(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "pipe", true);
    RLRunLoopSourceRef s = add(f, "Sleep");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(rl_test_run_and_act_while_asleep("Sleep", true, write_a_byte, (void *)(intptr_t)p[1]),
                     kRLRunLoopRunHandledSource);
    assert_trace("pipe:r");
    RLFileDescriptorInvalidate(f);
    RLRelease(s);
    RLRelease(f);
    close(p[1]);
}

/* Several objects on one fd: epoll holds one registration per fd, so the
 * loop watches the union of what they want and serves each of them. */

static void test_two_objects_read_one_pipe(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef a = make(p[0], "a", false);
    RLFileDescriptorRef b = make(p[0], "b", false);
    RLRunLoopSourceRef sa = add(a, "Two");
    RLRunLoopSourceRef sb = add(b, "Two");
    assert_true(RLFileDescriptorEnableCallBacks(a, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(p[1], "x", 1), 1);
    /* Both in one wake (equal order: in the order they were added). */
    assert_int_equal(RLRunLoopRunInMode("Two", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("a:r b:r");
    /* One-shot each: still readable, nothing more. */
    assert_int_equal(RLRunLoopRunInMode("Two", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("a:r b:r");
    /* Only b re-enabled: only b hears. */
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Two", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("a:r b:r b:r");
    /* returnAfterSourceHandled: one object per run, the other next time. */
    assert_true(RLFileDescriptorEnableCallBacks(a, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Two", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("a:r b:r b:r a:r");
    assert_int_equal(RLRunLoopRunInMode("Two", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("a:r b:r b:r a:r b:r");
    RLFileDescriptorInvalidate(a);
    RLFileDescriptorInvalidate(b);
    RLRelease(sa);
    RLRelease(sb);
    RLRelease(a);
    RLRelease(b);
    close(p[0]);
    close(p[1]);
}

static void test_reader_and_writer_on_one_socket(void **state) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLFileDescriptorRef r = make(sv[0], "R", false);
    RLFileDescriptorRef w = make(sv[0], "W", false);
    RLRunLoopSourceRef sr = add(r, "RW");
    RLRunLoopSourceRef sw = add(w, "RW");
    assert_true(RLFileDescriptorEnableCallBacks(r, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(w, kRLFileDescriptorWriteCallBack));
    /* Writable, not readable: the writer only. */
    assert_int_equal(RLRunLoopRunInMode("RW", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("W:w");
    /* Readable now: the reader, with its own callback type only. */
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("RW", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("W:w R:r");
    /* Both armed and both ready: each gets its own callback in one wake. */
    assert_true(RLFileDescriptorEnableCallBacks(r, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(w, kRLFileDescriptorWriteCallBack));
    assert_int_equal(RLRunLoopRunInMode("RW", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("W:w R:r R:r W:w");
    RLFileDescriptorInvalidate(r);
    RLFileDescriptorInvalidate(w);
    RLRelease(sr);
    RLRelease(sw);
    RLRelease(r);
    RLRelease(w);
    close(sv[0]);
    close(sv[1]);
}

static void test_invalidating_one_leaves_the_other(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef a = make(p[0], "a", false);
    RLFileDescriptorRef b = make(p[0], "b", false);
    RLRunLoopSourceRef sa = add(a, "Inv");
    RLRunLoopSourceRef sb = add(b, "Inv");
    assert_true(RLFileDescriptorEnableCallBacks(a, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorInvalidate(a));
    assert_false(RLRunLoopSourceIsValid(sa));
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("Inv", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("b:r");
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Inv", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("b:r b:r");
    /* Removing the other's source (not invalidating) also leaves nothing
     * behind: the mode is empty. */
    RLRunLoopRemoveSource(RLRunLoopGetCurrent(), sb, "Inv");
    assert_int_equal(RLRunLoopRunInMode("Inv", 0, false), kRLRunLoopRunFinished);
    /* And back again. */
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), sb, "Inv"));
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Inv", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("b:r b:r b:r");
    RLFileDescriptorInvalidate(b);
    RLRelease(sa);
    RLRelease(sb);
    RLRelease(a);
    RLRelease(b);
    close(p[0]);
    close(p[1]);
}

static void test_two_objects_in_different_modes(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef a = make(p[0], "a", false);
    RLFileDescriptorRef b = make(p[0], "b", false);
    RLRunLoopSourceRef sa = add(a, "ModeA");
    RLRunLoopSourceRef sb = add(b, "ModeB");
    assert_true(RLFileDescriptorEnableCallBacks(a, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(p[1], "x", 1), 1);
    /* Each mode serves its own object only; b stays armed meanwhile. */
    assert_int_equal(RLRunLoopRunInMode("ModeA", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("a:r");
    assert_int_equal(RLRunLoopRunInMode("ModeB", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("a:r b:r");
    /* b re-enabled but its mode not run: ModeA (a one-shot spent) sleeps. */
    assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("ModeA", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("a:r b:r");
    assert_int_equal(RLRunLoopRunInMode("ModeB", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("a:r b:r b:r");
    RLFileDescriptorInvalidate(a);
    RLFileDescriptorInvalidate(b);
    RLRelease(sa);
    RLRelease(sb);
    RLRelease(a);
    RLRelease(b);
    close(p[0]);
    close(p[1]);
}

/* What nest_cb does in its first call: 1 enables its fd again and then
 * runs the loop, nested; 2 runs the loop nested first, then enables. */
static int nest_order;
static int nest_depth;

static void nest_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)types, (void)info;
    rl_trace_addf("r%d", nest_depth);
    if (nest_depth > 0)
        return; /* the nested delivery: not enabled again */
    nest_depth++;
    if (nest_order == 1)
        assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    int got = RLRunLoopRunInMode("FD", nest_order == 1 ? 10 : 0.05, true);
    assert_int_equal(got, nest_order == 1 ? kRLRunLoopRunHandledSource : kRLRunLoopRunTimedOut);
    if (nest_order == 2)
        assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    nest_depth--;
}

/* A callout that enables its own fd again is served by what it enabled
 * wherever the loop waits next: in a run it nests (the fd still ready is
 * delivered there) or, when it enables after such a run, in the next run
 * after it returns. (The loop reads the fd's wishes again after the
 * callout rather than at once: both places must see the enable.) */
static void test_enable_own_fd_around_a_nested_run(void **state) {
    (void)state;
    for (nest_order = 1; nest_order <= 2; nest_order++) {
        rl_trace_setup(NULL);
        int p[2];
        assert_int_equal(pipe(p), 0);
        RLFileDescriptorContext c = {0, NULL, NULL, NULL, NULL};
        RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, nest_cb, &c);
        assert_non_null(f);
        RLRunLoopSourceRef s = add(f, "FD");
        assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
        assert_int_equal(write(p[1], "x", 1), 1); /* never read: stays ready */
        assert_int_equal(RLRunLoopRunInMode("FD", 10, true), kRLRunLoopRunHandledSource);
        assert_trace(nest_order == 1 ? "r0 r1" : "r0");
        if (nest_order == 2) {
            assert_int_equal(RLRunLoopRunInMode("FD", 10, true), kRLRunLoopRunHandledSource);
            assert_trace("r0 r0");
        }
        assert_true(RLFileDescriptorInvalidate(f));
        RLRelease(s);
        RLRelease(f);
        close(p[1]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_pipe_read_one_shot, rl_trace_setup),
        cmocka_unit_test_setup(test_source_keeps_its_object, rl_trace_setup),
        cmocka_unit_test_setup(test_source_made_again_after_release, rl_trace_setup),
        cmocka_unit_test_setup(test_socket_write_and_read_in_one_wake, rl_trace_setup),
        cmocka_unit_test_setup(test_fd_waits_for_its_mode, rl_trace_setup),
        cmocka_unit_test_setup(test_hangup_with_callbacks_off_does_not_spin, rl_trace_setup),
        cmocka_unit_test_setup(test_fd_wakes_a_sleeping_loop, rl_trace_setup),
        cmocka_unit_test_setup(test_two_objects_read_one_pipe, rl_trace_setup),
        cmocka_unit_test_setup(test_reader_and_writer_on_one_socket, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidating_one_leaves_the_other, rl_trace_setup),
        cmocka_unit_test_setup(test_two_objects_in_different_modes, rl_trace_setup),
        cmocka_unit_test_setup(test_enable_own_fd_around_a_nested_run, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
