/* test_socket_kept.c — an RLSocket whose Data callback the loop keeps
 * enabled between wakes (auto-re-enable on, its registration persistent
 * after a few deliveries): whatever the callback does to its socket, its
 * source or its loop in the middle of that, the socket behaves as CFSocket
 * does with its one-shot callbacks. Nothing is delivered twice or
 * concurrently, nothing is lost, a muted socket does not make its loop
 * spin, and a file closed and reused behind the socket's back is found
 * out. Each test warms up with plain deliveries first, so that the later
 * ones take the kept path. */
#include "fdutil.h"
#include "testutil.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h" /* RL_TRICK_KEPT */

RL__HIDDEN unsigned long rl__fd_kept_calls(RLRunLoopRef rl);

#define MODE "KEPT"
#define OTHER "KEPT-OTHER"
enum { WARM = 6 };

/* What the callback does on its call number `at` (0: nothing). */
enum action { ACT_NONE, ACT_DISABLE, ACT_REMOVE, ACT_INVALIDATE, ACT_JOIN_OTHER, ACT_NEST_OTHER_MODE, ACT_FORK };

static struct {
    pthread_mutex_t mu;
    char bytes[65536];
    size_t len;
    int calls;
    _Atomic int depth, max_depth;
    _Atomic int calls_elsewhere; /* made on another thread than the test's */
    enum action act;
    int at;
    RLRunLoopSourceRef src;
    RLRunLoopRef other; /* ACT_JOIN_OTHER: the loop the source joins */
    RLRunLoopRunResult nested;
    int fork_status;
    pthread_t main;
} k = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void reset(void) {
    pthread_mutex_lock(&k.mu);
    k.len = 0;
    k.calls = 0;
    pthread_mutex_unlock(&k.mu);
    k.depth = k.max_depth = k.calls_elsewhere = 0;
    k.act = ACT_NONE;
    k.at = 0;
    k.src = NULL;
    k.other = NULL;
    k.nested = 0;
    k.fork_status = -1;
    k.main = pthread_self();
}

static int calls(void) {
    pthread_mutex_lock(&k.mu);
    int n = k.calls;
    pthread_mutex_unlock(&k.mu);
    return n;
}

static size_t got(void) {
    pthread_mutex_lock(&k.mu);
    size_t n = k.len;
    pthread_mutex_unlock(&k.mu);
    return n;
}

static void act(RLSocketRef s, enum action a) {
    switch (a) {
    case ACT_DISABLE: assert_true(RLSocketDisableCallBacks(s, kRLSocketDataCallBack)); break;
    case ACT_REMOVE: assert_true(RLRunLoopRemoveSource(RLRunLoopGetCurrent(), k.src, MODE)); break;
    case ACT_INVALIDATE: assert_true(RLSocketInvalidate(s)); break;
    case ACT_JOIN_OTHER:
        assert_true(RLRunLoopAddSource(k.other, k.src, MODE));
        RLRunLoopWakeUp(k.other);
        /* Give the other loop time to look at the socket while this
         * callout still runs: it must not deliver it meanwhile. */
        usleep(50000);
        break;
    case ACT_NEST_OTHER_MODE: k.nested = RLRunLoopRunInMode(OTHER, 0.1, false); break;
    case ACT_FORK: {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            /* The child's own business: it must not change the parent's
             * registration of the socket. */
            (void)RLSocketDisableCallBacks(s, kRLSocketDataCallBack);
            (void)RLSocketEnableCallBacks(s, kRLSocketDataCallBack);
            rl_test_child_exit(0);
        }
        assert_int_equal(waitpid(pid, &k.fork_status, 0), pid);
        break;
    }
    default: break;
    }
}

static void data_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address, (void)info;
    if (type != kRLSocketDataCallBack || RLDataGetLength(data) == 0)
        return;
    int d = atomic_fetch_add(&k.depth, 1) + 1;
    int m = atomic_load(&k.max_depth);
    while (d > m && !atomic_compare_exchange_weak(&k.max_depth, &m, d))
        ;
    if (!pthread_equal(pthread_self(), k.main))
        atomic_fetch_add(&k.calls_elsewhere, 1);
    pthread_mutex_lock(&k.mu);
    size_t n = (size_t)RLDataGetLength(data);
    if (k.len + n <= sizeof k.bytes) {
        memcpy(k.bytes + k.len, RLDataGetBytePtr(data), n);
        k.len += n;
    }
    int call = ++k.calls;
    pthread_mutex_unlock(&k.mu);
    if (call == k.at)
        act(s, k.act);
    atomic_fetch_sub(&k.depth, 1);
}

/* A Data socket on sv[0] (a new stream pair), its source in MODE of this
 * thread's loop (k.src: the caller's reference), warmed up by WARM
 * deliveries of one byte each. */
static RLSocketRef kept_socket(int sv[2]) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, data_cb, NULL);
    assert_non_null(s);
    k.src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(k.src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), k.src, MODE));
    for (int i = 0; i < WARM; i++) {
        assert_int_equal(write(sv[1], "w", 1), 1);
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    }
    assert_int_equal(calls(), WARM);
    return s;
}

static void drop(RLSocketRef s, int sv[2]) {
    RLSocketInvalidate(s);
    RLRelease(s);
    if (k.src) {
        RLRunLoopSourceInvalidate(k.src);
        RLRelease(k.src);
        k.src = NULL;
    }
    close(sv[1]);
}

/* Runs MODE until n bytes in all came (at most 10 s). */
static void run_until_got(size_t n) {
    double end = rl_test_now() + 10;
    while (got() < n && rl_test_now() < end)
        RLRunLoopRunInMode(MODE, 0.05, true);
    assert_int_equal(got(), n);
}

/* The path these tests are about is the one taken: after the warm-up the
 * loop leaves the socket's Data callback enabled through its callouts
 * (unless the build turns the trick off: then it never does). */
static void test_a_warm_socket_is_kept(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    unsigned long before = rl__fd_kept_calls(rl);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(write(sv[1], "k", 1), 1);
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    }
    assert_int_equal(calls(), WARM + 10);
    unsigned long kept = rl__fd_kept_calls(rl) - before;
    if (RL_TRICK_KEPT)
        assert_true(kept >= 9);
    else
        assert_int_equal(kept, 0);
    drop(s, sv);
}

/* The callback does `a` in the next (kept) wake, which delivers "a". */
static void act_in_next_wake(int sv[2], enum action a) {
    k.act = a;
    k.at = WARM + 1;
    assert_int_equal(write(sv[1], "a", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(calls(), WARM + 1);
}

/* A run of MODE that delivers nothing more (the mode kept from being empty
 * by the caller) and sleeps rather than spins. */
static void assert_quiet(void) { rl_test_assert_quiet(MODE, calls); }

/* The callback disables its own Data callback in a kept wake: muted (the
 * loop sleeps, bytes waiting) until enabled again, then the bytes come. */
static void test_disable_in_a_kept_callback_mutes_until_enabled(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    act_in_next_wake(sv, ACT_DISABLE);
    assert_int_equal(write(sv[1], "b", 1), 1);
    assert_quiet();
    assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(calls(), WARM + 2);
    assert_memory_equal(k.bytes, "wwwwwwab", WARM + 2);
    rl_test_unkeep(keep);
    drop(s, sv);
}

/* The callback removes its source from the mode in a kept wake: nothing
 * more until it is added again, then the waiting bytes come. */
static void test_remove_in_a_kept_callback_stops_deliveries(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    act_in_next_wake(sv, ACT_REMOVE);
    assert_int_equal(write(sv[1], "b", 1), 1);
    assert_quiet();
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), k.src, MODE));
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(calls(), WARM + 2);
    assert_memory_equal(k.bytes, "wwwwwwab", WARM + 2);
    rl_test_unkeep(keep);
    drop(s, sv);
}

/* The callback invalidates its socket in a kept wake: the socket is
 * closed (the peer reads the end), nothing more is delivered, and the
 * loop does not spin on the fd. */
static void test_invalidate_in_a_kept_callback(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    act_in_next_wake(sv, ACT_INVALIDATE);
    assert_false(RLSocketIsValid(s));
    char c;
    assert_int_equal(read(sv[1], &c, 1), 0); /* closed on invalidation */
    assert_quiet();
    rl_test_unkeep(keep);
    drop(s, sv);
}

/* The callback runs its loop, nested, in another mode (the socket's
 * source is not there) while more bytes wait: nothing delivered there, no
 * spin, and the bytes come in the next run of the socket's mode. */
static void test_nested_run_in_another_mode_in_a_kept_callback(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    k.act = ACT_NEST_OTHER_MODE;
    k.at = WARM + 1;
    RLRunLoopSourceRef keep = rl_test_keep_mode(OTHER);
    long wakes = 0;
    RLRunLoopObserverRef o = rl_test_count_wakes(OTHER, &wakes);
    assert_int_equal(write(sv[1], "a", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(k.nested, kRLRunLoopRunTimedOut);
    assert_true(wakes <= 2);
    assert_int_equal(calls(), WARM + 1);
    assert_int_equal(write(sv[1], "b", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(calls(), WARM + 2);
    assert_int_equal(atomic_load(&k.max_depth), 1);
    rl_test_uncount_wakes(o);
    rl_test_unkeep(keep);
    drop(s, sv);
}

/* ---- the source joins another thread's loop during a kept callout ---- */

static struct {
    _Atomic int ready, quit;
    RLRunLoopRef rl;
} other;

static void *other_loop(void *arg) {
    (void)arg;
    other.rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    atomic_store(&other.ready, 1);
    while (!atomic_load(&other.quit))
        RLRunLoopRunInMode(MODE, 0.05, false);
    rl_test_unkeep(keep);
    return NULL;
}

/* The other loop must not deliver the socket while this one's callout
 * runs, and must deliver it once that callout is done: the bytes written
 * while only it runs come, each byte once, never two callouts at once. */
static void test_source_joining_another_loop_during_a_kept_callout(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    atomic_store(&other.ready, 0);
    atomic_store(&other.quit, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_loop, NULL), 0);
    while (!atomic_load(&other.ready))
        usleep(1000);
    k.other = other.rl;
    k.act = ACT_JOIN_OTHER;
    k.at = WARM + 1;
    /* Bytes wait while the callout that adds the source runs. */
    assert_int_equal(write(sv[1], "a", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_int_equal(atomic_load(&k.max_depth), 1);
    /* Only the other loop runs now: it gets what is written. */
    char msg[64];
    for (int i = 0; i < 20; i++) {
        snprintf(msg, sizeof msg, "%02d", i);
        assert_int_equal(write(sv[1], msg, 2), 2);
        double end = rl_test_now() + 10;
        while (got() < (size_t)WARM + 1 + 2 * (size_t)(i + 1) && rl_test_now() < end)
            usleep(1000);
        assert_int_equal(got(), (size_t)WARM + 1 + 2 * (size_t)(i + 1));
    }
    assert_true(atomic_load(&k.calls_elsewhere) >= 1);
    /* Both run: every byte once, one callout at a time. */
    size_t want = got();
    for (int i = 0; i < 200; i++) {
        assert_int_equal(write(sv[1], "z", 1), 1);
        want++;
        RLRunLoopRunInMode(MODE, 0, true);
    }
    run_until_got(want);
    assert_int_equal(atomic_load(&k.max_depth), 1);
    atomic_store(&other.quit, 1);
    RLRunLoopWakeUp(other.rl);
    pthread_join(t, NULL);
    drop(s, sv);
}

/* ---- the file under a kept registration changes ---- */

/* The socket's fd is closed and its number reused for another socket
 * behind the RLSocket's back (dup2) while the loop keeps it enabled: the
 * loop finds out within a bounded number of deliveries, and the socket
 * goes quiet instead of reading a stranger's bytes forever. */
static void test_number_reused_behind_a_kept_socket_is_found_out(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    int nv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, nv), 0);
    assert_int_equal(dup2(nv[0], sv[0]), sv[0]);
    close(nv[0]);
    int before = calls();
    RLRunLoopSourceRef keep = rl_test_keep_mode(MODE);
    /* Non-blocking: once the socket is quiet nobody reads the stranger. */
    assert_int_equal(fcntl(nv[1], F_SETFL, O_NONBLOCK), 0);
    for (int i = 0; i < 300; i++) {
        ssize_t w = write(nv[1], "n", 1);
        assert_true(w == 1 || (w < 0 && errno == EAGAIN));
        RLRunLoopRunInMode(MODE, 0.01, true);
    }
    int after = calls();
    /* Found out within the loop's identity check period (64 deliveries). */
    assert_true(after - before <= 80);
    /* Quiet from then on, though the stranger's bytes wait. */
    assert_quiet();
    rl_test_unkeep(keep);
    close(nv[1]);
    drop(s, sv);
}

/* A fork() in a kept callback: the child's calls on the socket leave the
 * parent's registration alone, and the parent's deliveries go on. */
static void test_fork_in_a_kept_callback(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    k.act = ACT_FORK;
    k.at = WARM + 1;
    assert_int_equal(write(sv[1], "a", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    assert_true(WIFEXITED(k.fork_status) && WEXITSTATUS(k.fork_status) == 0);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(write(sv[1], "f", 1), 1);
        assert_int_equal(RLRunLoopRunInMode(MODE, 10, true), kRLRunLoopRunHandledSource);
    }
    assert_int_equal(calls(), WARM + 21);
    drop(s, sv);
}

/* Another thread disables and enables the socket's Data callback, and
 * adds its source to its own loop and removes it, all the while: every
 * byte still comes once, one callout at a time. */
static _Atomic int churn_quit;
static RLSocketRef churn_sock;

static void *churn(void *arg) {
    (void)arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    unsigned i = 0;
    while (!atomic_load(&churn_quit)) {
        switch (i++ % 4) {
        case 0: (void)RLSocketDisableCallBacks(churn_sock, kRLSocketDataCallBack); break;
        case 1: (void)RLSocketEnableCallBacks(churn_sock, kRLSocketDataCallBack); break;
        case 2: (void)RLRunLoopAddSource(rl, k.src, MODE); break;
        default:
            RLRunLoopRunInMode(MODE, 0, true);
            (void)RLRunLoopRemoveSource(rl, k.src, MODE);
            break;
        }
    }
    (void)RLRunLoopRemoveSource(rl, k.src, MODE);
    return NULL;
}

static void test_kept_socket_under_churn_from_another_thread(void **state) {
    (void)state;
    reset();
    int sv[2];
    RLSocketRef s = kept_socket(sv);
    churn_sock = s;
    atomic_store(&churn_quit, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, churn, NULL), 0);
    size_t want = got();
    long n = rl_test_iters(3000);
    for (long i = 0; i < n; i++) {
        assert_int_equal(write(sv[1], "c", 1), 1);
        want++;
        RLRunLoopRunInMode(MODE, 0, true);
    }
    atomic_store(&churn_quit, 1);
    pthread_join(t, NULL);
    assert_true(RLSocketEnableCallBacks(s, kRLSocketDataCallBack));
    run_until_got(want);
    assert_int_equal(atomic_load(&k.max_depth), 1);
    for (size_t i = WARM; i < want; i++)
        assert_int_equal(k.bytes[i], 'c');
    drop(s, sv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_warm_socket_is_kept),
        cmocka_unit_test(test_disable_in_a_kept_callback_mutes_until_enabled),
        cmocka_unit_test(test_remove_in_a_kept_callback_stops_deliveries),
        cmocka_unit_test(test_invalidate_in_a_kept_callback),
        cmocka_unit_test(test_nested_run_in_another_mode_in_a_kept_callback),
        cmocka_unit_test(test_source_joining_another_loop_during_a_kept_callout),
        cmocka_unit_test(test_number_reused_behind_a_kept_socket_is_found_out),
        cmocka_unit_test(test_fork_in_a_kept_callback),
        cmocka_unit_test(test_kept_socket_under_churn_from_another_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
