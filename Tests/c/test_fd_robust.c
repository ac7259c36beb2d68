/* test_fd_robust.c — fd sources on descriptors epoll cannot watch, and on
 * fds closed behind the object's back: regular files and /dev/null are
 * always ready (as poll and kqueue say); a number reused by a new object
 * serves the new object; a registration left behind by a closed fd (a dup
 * keeps its file open) never makes the loop spin, and the stale object
 * says so. */
#include "fdutil.h"
#include "testutil.h"
#include "trace.h"

#include "RLBase.h" /* rl__faults, RL_FAULT_* */

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int ncalls;

static void fd_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    ncalls++;
    rl_trace_addf("%s:%s%s", (const char *)info, (types & kRLFileDescriptorReadCallBack) ? "r" : "",
                  (types & kRLFileDescriptorWriteCallBack) ? "w" : "");
}

static RLFileDescriptorRef make(int fd, const char *name, bool close_it) {
    RLFileDescriptorContext c = {0, (void *)name, NULL, NULL, NULL};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, fd, close_it, fd_cb, &c);
    assert_non_null(f);
    return f;
}

/* ---- descriptors epoll refuses ---- */

static void always_ready(int fd, const char *mode) {
    ncalls = 0;
    RLFileDescriptorRef f = make(fd, "file", true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, mode);
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack | kRLFileDescriptorWriteCallBack));
    assert_int_equal(RLRunLoopRunInMode(mode, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("file:rw");
    /* One-shot as ever: not enabled again, so the loop sleeps. */
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes(mode, &wakes);
    assert_int_equal(RLRunLoopRunInMode(mode, 0.05, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(ncalls, 1);
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorWriteCallBack));
    assert_int_equal(RLRunLoopRunInMode(mode, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("file:rw file:w");
    /* Enabled but its mode not running: nothing. */
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    RLRunLoopSourceRef keep = rl_test_keep_mode("Elsewhere");
    assert_int_equal(RLRunLoopRunInMode("Elsewhere", 0.02, false), kRLRunLoopRunTimedOut);
    rl_test_unkeep(keep);
    assert_trace("file:rw file:w");
    assert_int_equal(RLRunLoopRunInMode(mode, 10, true), kRLRunLoopRunHandledSource);
    assert_trace("file:rw file:w file:r");
    rl_test_uncount_wakes(o);
    rl_test_fd_drop(f, s);
}

static void test_regular_file_is_always_ready(void **state) {
    char path[] = "/tmp/rl_fd_robust_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(unlink(path), 0);
    always_ready(fd, "File");
}

static void test_dev_null_is_always_ready(void **state) {
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    always_ready(fd, "Null");
}

/* ---- fds closed behind the object's back ---- */

/* An object on the read end of a new pipe, enabled, watched by the loop
 * (one run of `mode`, so that the kernel holds its registration). */
static RLFileDescriptorRef watched_pipe(int p[2], const char *name, const char *mode, RLRunLoopSourceRef *s,
                                        bool close_it) {
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], name, close_it);
    *s = rl_test_fd_add(f, mode);
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode(mode, 0.01, false), kRLRunLoopRunTimedOut);
    return f;
}

enum { STALE_KEPT, STALE_INVALIDATED_BEFORE, STALE_INVALIDATED_AFTER };

static void reused_number(int when) {
    int p[2], q[2];
    RLRunLoopSourceRef s1, s2;
    RLFileDescriptorRef f1 = watched_pipe(p, "old", "Reuse", &s1, false);
    /* The user closes the fd but forgets the object. */
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(close(p[1]), 0);
    if (when == STALE_INVALIDATED_BEFORE)
        rl_test_fd_drop(f1, s1);
    assert_int_equal(pipe(q), 0);
    assert_int_equal(q[0], p[0]); /* the lowest free number: the same */
    RLFileDescriptorRef f2 = make(q[0], "new", true);
    s2 = rl_test_fd_add(f2, "Reuse");
    assert_true(RLFileDescriptorEnableCallBacks(f2, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(q[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("Reuse", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("new:r");
    if (when == STALE_INVALIDATED_AFTER)
        rl_test_fd_drop(f1, s1);
    assert_true(RLFileDescriptorEnableCallBacks(f2, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Reuse", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("new:r new:r");
    if (when == STALE_KEPT) {
        /* The stale object heard nothing, and says what happened. */
        assert_rl_fails(RLFileDescriptorEnableCallBacks(f1, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
        rl_test_fd_drop(f1, s1);
    }
    assert_true(fcntl(q[0], F_GETFD) >= 0); /* nobody closed the new one's fd */
    rl_test_fd_drop(f2, s2);
    close(q[1]);
}

static void test_reused_number_serves_the_new_object(void **state) { reused_number(STALE_KEPT); }
static void test_reused_number_stale_invalidated_before(void **state) { reused_number(STALE_INVALIDATED_BEFORE); }
static void test_reused_number_stale_invalidated_after(void **state) { reused_number(STALE_INVALIDATED_AFTER); }

static void test_closed_fd_with_open_dup_does_not_spin(void **state) {
    int p[2];
    RLRunLoopSourceRef s;
    ncalls = 0;
    /* closeOnInvalidate: invalidating the stale object later must not
     * close whatever the number refers to by then. */
    RLFileDescriptorRef f = watched_pipe(p, "old", "Dup", &s, true);
    int keep = dup(p[0]);
    assert_true(keep >= 0);
    assert_int_equal(close(p[0]), 0);
    /* The file stays open through the dup, and becomes readable for good. */
    assert_int_equal(write(p[1], "x", 1), 1);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("Dup", &wakes);
    RLRunLoopSourceRef keepmode = rl_test_keep_mode("Dup");
    assert_int_equal(RLRunLoopRunInMode("Dup", 0.2, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 5); /* not hundreds of thousands */
    assert_true(ncalls <= 1);
    /* Enabling it again is refused: its fd is gone. */
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    wakes = 0;
    assert_int_equal(RLRunLoopRunInMode("Dup", 0.1, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_true(ncalls <= 1);
    char *d = RLCopyDescription(f);
    assert_non_null(strstr(d, "stale"));
    free(d);
    /* The number, reused, is not closed by the stale object's invalidation. */
    int p2[2];
    assert_int_equal(pipe(p2), 0);
    assert_int_equal(p2[0], p[0]);
    rl_test_fd_drop(f, s);
    assert_true(fcntl(p2[0], F_GETFD) >= 0);
    rl_test_uncount_wakes(o);
    rl_test_unkeep(keepmode);
    close(p2[0]);
    close(p2[1]);
    close(keep);
    close(p[1]);
}

/* A file that hung up (the pipe's writer gone) with only its write
 * callback enabled: the hang-up, which the kernel reports whatever was
 * asked, is told to the write side (as poll(2) does: a write there fails
 * at once), once; the loop does not wake at full speed for a report it
 * never delivers. */
static int hup_calls;
static RLOptionFlags hup_types;
static void hup_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)f, (void)info;
    hup_calls++;
    hup_types |= types;
}

static void test_a_hang_up_with_only_write_enabled_is_told_not_spun_on(void **state) {
    (void)state;
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    assert_int_equal(close(p[1]), 0);
    hup_calls = 0;
    hup_types = 0;
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, hup_cb, NULL);
    assert_non_null(f);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Hup");
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorWriteCallBack));
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("Hup", &wakes);
    RLRunLoopSourceRef keepmode = rl_test_keep_mode("Hup");
    (void)RLRunLoopRunInMode("Hup", 0.1, false);
    assert_int_equal(hup_calls, 1);
    assert_int_equal(hup_types, kRLFileDescriptorWriteCallBack);
    assert_true(wakes <= 3); /* not tens of thousands */
    rl_test_uncount_wakes(o);
    rl_test_unkeep(keepmode);
    rl_test_fd_drop(f, s);
}

/* Writes fd (non-blocking) until it has no room: the bytes written. */
static size_t fill_up(int fd) {
    char fill[4096];
    memset(fill, 'f', sizeof fill);
    size_t n = 0;
    ssize_t w;
    while ((w = write(fd, fill, sizeof fill)) > 0)
        n += (size_t)w;
    assert_true(w < 0 && errno == EAGAIN);
    return n;
}

/* Reads n bytes from fd. */
static void drain(int fd, size_t n) {
    char buf[8192];
    while (n > 0) {
        ssize_t r = read(fd, buf, n < sizeof buf ? n : sizeof buf);
        assert_true(r > 0);
        n -= (size_t)r;
    }
}

/* A socket whose send buffer is full, with only its write callback
 * enabled, and whose peer shuts down its writing side: the half-close is
 * a read-side event nobody asked for. The loop stays asleep (io_uring's
 * poll reports POLLRDHUP whatever it is asked, which armed again at once
 * made the loop spin: tens of thousands of wake-ups in 0.2 s), and the
 * write callout comes, once, when the peer makes room. The same with
 * the write callback enabled through a persistent watch (a disabled
 * read callback asked again, then disabled). */
static void test_a_peer_half_close_with_only_write_enabled_does_not_spin(void **state) {
    (void)state;
    for (int round = 0; round < 2; round++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        size_t filled = fill_up(sv[0]);
        hup_calls = 0;
        hup_types = 0;
        RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, sv[0], true, hup_cb, NULL);
        assert_non_null(f);
        RLRunLoopSourceRef s = rl_test_fd_add(f, "HalfClose");
        if (round == 1) {
            assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
            RLFileDescriptorDisableCallBacks(f, kRLFileDescriptorReadCallBack);
        }
        assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorWriteCallBack));
        assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
        long wakes = 0;
        RLRunLoopObserverRef o = rl_test_count_wakes("HalfClose", &wakes);
        RLRunLoopSourceRef keepmode = rl_test_keep_mode("HalfClose");
        (void)RLRunLoopRunInMode("HalfClose", 0.2, false);
        if (wakes > 5)
            fail_msg("round %d (%s): %ld wake-ups in 0.2 s for a half-close nobody asked about", round,
                     RLRunLoopGetBackendName(RLRunLoopGetCurrent()), wakes);
        assert_int_equal(hup_calls, 0); /* not writable: nothing told */
        drain(sv[1], filled); /* the peer reads it all: room, told once */
        double end = rl_test_now() + 10;
        while (hup_calls == 0 && rl_test_now() < end)
            (void)RLRunLoopRunInMode("HalfClose", 0.1, true);
        assert_int_equal(hup_calls, 1);
        assert_int_equal(hup_types, kRLFileDescriptorWriteCallBack);
        rl_test_uncount_wakes(o);
        rl_test_unkeep(keepmode);
        rl_test_fd_drop(f, s);
        close(sv[1]);
    }
}

/* Readiness that came and went between two runs is not told: the loop's
 * wait says what the file is when it hands out the report, as epoll_wait
 * does, not what woke it meanwhile (io_uring's poll completion carries
 * the wake-up's events, taken at the loop's next enter: a file written to
 * fullness again after room came, or read empty again after data came,
 * got a callout that found it not ready, where a blocking write or read
 * hangs). Each callout checks the file is ready for what it is told. */
static int gone_calls, gone_unready;
static void gone_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)info;
    gone_calls++;
    struct pollfd p = {.fd = RLFileDescriptorGetNativeDescriptor(f), .events = POLLIN | POLLOUT};
    (void)poll(&p, 1, 0);
    if (((types & kRLFileDescriptorReadCallBack) && !(p.revents & (POLLIN | POLLHUP | POLLERR))) ||
        ((types & kRLFileDescriptorWriteCallBack) && !(p.revents & (POLLOUT | POLLHUP | POLLERR))))
        gone_unready++;
}

static void test_readiness_that_came_and_went_between_runs_is_not_told(void **state) {
    (void)state;
    for (int round = 0; round < 2; round++) {
        bool writing = round == 1;
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        size_t filled = writing ? fill_up(sv[0]) : 0;
        gone_calls = gone_unready = 0;
        RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, sv[0], true, gone_cb, NULL);
        assert_non_null(f);
        RLRunLoopSourceRef s = rl_test_fd_add(f, "Gone");
        RLRunLoopSourceRef keepmode = rl_test_keep_mode("Gone");
        RLOptionFlags type = writing ? kRLFileDescriptorWriteCallBack : kRLFileDescriptorReadCallBack;
        for (int k = 0; k < 20; k++) {
            assert_true(RLFileDescriptorEnableCallBacks(f, type));
            (void)RLRunLoopRunInMode("Gone", 0, false); /* armed, not ready */
            /* Ready and not ready again, outside any run. */
            if (writing) {
                drain(sv[1], filled);
                filled = fill_up(sv[0]);
            } else {
                assert_int_equal(write(sv[1], "x", 1), 1);
                drain(sv[0], 1);
            }
            (void)RLRunLoopRunInMode("Gone", 0.01, false);
        }
        if (gone_unready)
            fail_msg("round %d (%s, %s): %d of %d callouts found the file not ready for what they were told",
                     round, writing ? "write" : "read", RLRunLoopGetBackendName(RLRunLoopGetCurrent()), gone_unready,
                     gone_calls);
        assert_int_equal(gone_calls, 0);
        /* Still watched: ready for real, told. */
        if (writing)
            drain(sv[1], filled);
        else
            assert_int_equal(write(sv[1], "x", 1), 1);
        double end = rl_test_now() + 10;
        while (gone_calls == 0 && rl_test_now() < end)
            (void)RLRunLoopRunInMode("Gone", 0.1, true);
        assert_int_equal(gone_calls, 1);
        assert_int_equal(gone_unready, 0);
        rl_test_unkeep(keepmode);
        rl_test_fd_drop(f, s);
        close(sv[1]);
    }
}

/* A file that became ready while the program ran, whose report an enter
 * outside the wait took early (another source's removal runs the ring's
 * completion work: RL_FAULT_URING_TAKE_EARLY makes every submission do
 * it), and whose registration the program then changed (its write
 * callback enabled too, never ready on a pipe's read end): the next
 * poll-only run tells it. On
 * io_uring the kept report was dropped (its registration changed) and
 * held back the new arming, which waited for the enter after: a run late. */
static int late_calls;
static void late_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)types, (void)info;
    late_calls++;
    char b;
    (void)read(RLFileDescriptorGetNativeDescriptor(f), &b, 1);
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack); /* kept enabled: persistent */
}

static void test_a_changed_registration_is_told_in_the_next_poll_only_run(void **state) {
    (void)state;
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            atomic_fetch_or(&rl__faults, RL_FAULT_URING_TAKE_EARLY);
        int p[2], q[2];
        assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
        assert_int_equal(pipe2(q, O_NONBLOCK | O_CLOEXEC), 0);
        late_calls = 0;
        RLFileDescriptorRef a = RLFileDescriptorCreate(NULL, p[0], true, late_cb, NULL);
        RLFileDescriptorRef b = RLFileDescriptorCreate(NULL, q[0], true, late_cb, NULL);
        assert_non_null(a);
        assert_non_null(b);
        RLRunLoopSourceRef sa = rl_test_fd_add(a, "Late"), sb = rl_test_fd_add(b, "Late");
        RLRunLoopSourceRef keepmode = rl_test_keep_mode("Late");
        assert_true(RLFileDescriptorEnableCallBacks(a, kRLFileDescriptorReadCallBack));
        assert_true(RLFileDescriptorEnableCallBacks(b, kRLFileDescriptorReadCallBack));
        for (int k = 0; k < 3; k++) { /* a's callout keeps it enabled: a persistent registration */
            assert_int_equal(write(p[1], "x", 1), 1);
            (void)RLRunLoopRunInMode("Late", 1, true);
        }
        assert_int_equal(late_calls, 3);
        (void)RLRunLoopRunInMode("Late", 0, false); /* armed, nothing there */
        assert_int_equal(write(p[1], "y", 1), 1);  /* ready while the program runs */
        RLFileDescriptorInvalidate(b);              /* a removal: the ring's work runs now */
        assert_true(RLFileDescriptorEnableCallBacks(a, kRLFileDescriptorWriteCallBack)); /* asks more: changed */
        (void)RLRunLoopRunInMode("Late", 0, false);
        if (late_calls != 4)
            fail_msg("round %d (%s): the poll-only run made %d callouts for a ready file, not 1", round,
                     RLRunLoopGetBackendName(RLRunLoopGetCurrent()), late_calls - 3);
        atomic_fetch_and(&rl__faults, ~(unsigned)RL_FAULT_URING_TAKE_EARLY);
        rl_test_unkeep(keepmode);
        rl_test_fd_drop(a, sa);
        RLRelease(sb);
        RLRelease(b); /* invalidated above */
        close(p[1]);
        close(q[1]);
    }
}

static void test_reused_number_while_a_dup_keeps_the_old_file(void **state) {
    /* The kernel keeps the old registration (its file is open through the
     * dup, the loop cannot name it any more): it must neither spin the loop
     * nor fire the new object. */
    int p[2], q[2];
    RLRunLoopSourceRef s1, s2;
    ncalls = 0;
    RLFileDescriptorRef f1 = watched_pipe(p, "old", "DupReuse", &s1, false);
    int keep = dup(p[0]);
    assert_true(keep >= 0);
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(pipe(q), 0);
    assert_int_equal(q[0], p[0]);
    RLFileDescriptorRef f2 = make(q[0], "new", true);
    s2 = rl_test_fd_add(f2, "DupReuse");
    assert_true(RLFileDescriptorEnableCallBacks(f2, kRLFileDescriptorReadCallBack));
    /* The old file becomes readable, the new one not (yet). */
    assert_int_equal(write(p[1], "x", 1), 1);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes("DupReuse", &wakes);
    assert_int_equal(RLRunLoopRunInMode("DupReuse", 0.2, false), kRLRunLoopRunTimedOut);
    assert_true(wakes <= 5);
    assert_int_equal(ncalls, 0);
    assert_trace("");
    assert_int_equal(write(q[1], "y", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("DupReuse", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("new:r");
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f1, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    rl_test_fd_drop(f1, s1);
    assert_true(RLFileDescriptorEnableCallBacks(f2, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("DupReuse", 10, true), kRLRunLoopRunHandledSource);
    assert_trace("new:r new:r");
    rl_test_uncount_wakes(o);
    rl_test_fd_drop(f2, s2);
    close(q[1]);
    close(keep);
    close(p[1]);
}

static void test_reused_number_never_watched_before(void **state) {
    /* The old object never had a kernel registration to lose: the loop
     * tells by the file the number names now. */
    int p[2], q[2];
    ncalls = 0;
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f1 = make(p[0], "old", false);
    RLRunLoopSourceRef s1 = rl_test_fd_add(f1, "Never");
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(close(p[1]), 0);
    assert_int_equal(pipe(q), 0);
    assert_int_equal(q[0], p[0]);
    RLFileDescriptorRef f2 = make(q[0], "new", true);
    RLRunLoopSourceRef s2 = rl_test_fd_add(f2, "Never");
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f1, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    assert_true(RLFileDescriptorDisableCallBacks(f1, kRLFileDescriptorReadCallBack)); /* harmless */
    assert_true(RLFileDescriptorEnableCallBacks(f2, kRLFileDescriptorReadCallBack));
    assert_int_equal(write(q[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode("Never", 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(RLRunLoopRunInMode("Never", 0.02, false), kRLRunLoopRunTimedOut);
    assert_trace("new:r");
    rl_test_fd_drop(f1, s1);
    rl_test_fd_drop(f2, s2);
    close(q[1]);
}

static void test_object_older_than_the_reused_number(void **state) {
    /* Made for one file, added to a loop after its number was closed and
     * reused: it is stale from the start, and the new file is not its. */
    int p[2], q[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "old", true);
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(close(p[1]), 0);
    assert_int_equal(pipe(q), 0);
    assert_int_equal(q[0], p[0]);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Older");
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    rl_test_fd_drop(f, s);
    assert_true(fcntl(q[0], F_GETFD) >= 0); /* not closed: not its file */
    close(q[0]);
    close(q[1]);
}

static void test_reused_by_a_stranger_before_first_enable(void **state) {
    /* Added, never enabled (no registration); its number is closed and
     * reused by code that knows nothing of it: enabling it must not watch
     * the stranger's file. */
    int p[2], q[2];
    ncalls = 0;
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = make(p[0], "old", true);
    RLRunLoopSourceRef s = rl_test_fd_add(f, "Stranger");
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(close(p[1]), 0);
    assert_int_equal(pipe(q), 0);
    assert_int_equal(q[0], p[0]);
    assert_int_equal(write(q[1], "x", 1), 1);
    RLRunLoopSourceRef keep = rl_test_keep_mode("Stranger");
    /* Its mode is not running: nothing is asked of the kernel yet, so the
     * enable succeeds; the loop finds out when it is about to watch the fd
     * (the mode runs), and the next enable says so. */
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(RLRunLoopRunInMode("Stranger", 0.05, false), kRLRunLoopRunTimedOut);
    assert_int_equal(ncalls, 0);
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    rl_test_unkeep(keep);
    rl_test_fd_drop(f, s);
    assert_true(fcntl(q[0], F_GETFD) >= 0);
    close(q[0]);
    close(q[1]);
}

static void test_closed_fd_found_when_enabled_again(void **state) {
    /* Closed with nothing else holding its file: the kernel dropped the
     * registration; the loop notices when it next asks the kernel. */
    int p[2];
    RLRunLoopSourceRef s;
    RLFileDescriptorRef f = watched_pipe(p, "old", "Closed", &s, false);
    assert_true(RLFileDescriptorDisableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_int_equal(close(p[0]), 0);
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack), kRLErrorInvalidState);
    assert_rl_fails(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorWriteCallBack), kRLErrorInvalidState);
    assert_true(RLFileDescriptorDisableCallBacks(f, kRLFileDescriptorReadCallBack));
    assert_true(RLFileDescriptorIsValid(f)); /* still the owner's to invalidate */
    rl_test_fd_drop(f, s);
    close(p[1]);
}

/* ---- a watched socket closed by its owner ---- */

/* The owner of a watched socket invalidates its object and closes the fd
 * in a timer's callout, then stops the loop: its peer sees the end at
 * once, whether or not the loop runs again (epoll's registration goes
 * with the file; on io_uring the poll held the file open until the
 * loop's next wait: here every time, in test_socket_port's stall drop
 * about one run in ten). Rounds, each with a persistent watch, as a
 * served connection has, on fd numbers used again. */
typedef struct {
    RLFileDescriptorRef f;
    int fd;
    int reads;
} owned_sock;

static void owned_read(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    owned_sock *o = info;
    char b[16];
    (void)!read(o->fd, b, sizeof b);
    o->reads++;
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack); /* served on: a persistent watch */
}

static void owner_drops(RLRunLoopTimerRef t, void *info) {
    owned_sock *o = info;
    RLFileDescriptorInvalidate(o->f);
    close(o->fd);
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void test_a_socket_closed_by_its_owner_is_closed_for_its_peer_at_once(void **state) {
    for (int round = 0; round < 40; round++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        owned_sock o = {.fd = sv[0]};
        RLFileDescriptorContext c = {0, &o, NULL, NULL, NULL};
        o.f = RLFileDescriptorCreate(NULL, sv[0], false, owned_read, &c);
        assert_non_null(o.f);
        RLRunLoopSourceRef s = rl_test_fd_add(o.f, "Owned");
        assert_true(RLFileDescriptorEnableCallBacks(o.f, kRLFileDescriptorReadCallBack));
        for (int k = 0; k < 3; k++) {
            assert_int_equal(write(sv[1], "x", 1), 1);
            assert_int_equal(RLRunLoopRunInMode("Owned", 10, true), kRLRunLoopRunHandledSource);
        }
        assert_int_equal(o.reads, 3);
        RLRunLoopTimerContext tc = {0, &o, NULL, NULL, NULL};
        RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent(), 0, 0, 0, owner_drops, &tc);
        RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "Owned");
        assert_int_equal(RLRunLoopRunInMode("Owned", 10, false), kRLRunLoopRunStopped);
        struct pollfd p = {.fd = sv[1], .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            fail_msg("round %d: the peer of a socket its owner closed still sees it open after 5 s (backend %s)", round,
                     RLRunLoopGetBackendName(RLRunLoopGetCurrent()));
        char b;
        assert_int_equal(read(sv[1], &b, 1), 0); /* the end */
        close(sv[1]);
        RLRelease(t);
        RLRelease(s);
        RLRelease(o.f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_regular_file_is_always_ready, rl_trace_setup),
        cmocka_unit_test_setup(test_dev_null_is_always_ready, rl_trace_setup),
        cmocka_unit_test_setup(test_reused_number_serves_the_new_object, rl_trace_setup),
        cmocka_unit_test_setup(test_reused_number_stale_invalidated_before, rl_trace_setup),
        cmocka_unit_test_setup(test_reused_number_stale_invalidated_after, rl_trace_setup),
        cmocka_unit_test_setup(test_closed_fd_with_open_dup_does_not_spin, rl_trace_setup),
        cmocka_unit_test_setup(test_reused_number_while_a_dup_keeps_the_old_file, rl_trace_setup),
        cmocka_unit_test_setup(test_reused_number_never_watched_before, rl_trace_setup),
        cmocka_unit_test_setup(test_object_older_than_the_reused_number, rl_trace_setup),
        cmocka_unit_test_setup(test_reused_by_a_stranger_before_first_enable, rl_trace_setup),
        cmocka_unit_test_setup(test_closed_fd_found_when_enabled_again, rl_trace_setup),
        cmocka_unit_test(test_a_socket_closed_by_its_owner_is_closed_for_its_peer_at_once),
        cmocka_unit_test(test_a_hang_up_with_only_write_enabled_is_told_not_spun_on),
        cmocka_unit_test(test_a_peer_half_close_with_only_write_enabled_does_not_spin),
        cmocka_unit_test(test_readiness_that_came_and_went_between_runs_is_not_told),
        cmocka_unit_test(test_a_changed_registration_is_told_in_the_next_poll_only_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
