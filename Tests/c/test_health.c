/* test_health.c — the slow-callout report (RLRunLoopHealth.h): a callout
 * over the threshold is reported once with its kind, function name, object,
 * mode and duration; one under it is not; a loop's threshold wins over the
 * process's; the handler may be replaced from inside a report; the stderr
 * line and its rate limit; RL_SLOW_CALLOUT_MS; a loop torn down after its
 * reports; misuse. Durations are made with usleep well past the threshold
 * (tens of ms against 2 ms), never asserted as speed. */
#include "stale.h"
#include "testutil.h"

#include <crunloop/RLRunLoopHealth.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOW_US 20000    /* a slow callout: 20 ms */
#define THRESHOLD 0.002 /* 2 ms */

/* What the handler saw (copied: a report is valid during the call only). */
typedef struct {
    int n;
    RLCalloutKind kind[16];
    char fname[16][96];
    char desc[16][160];
    char mode[16][64];
    double duration[16];
    RLRunLoopRef loop[16];
} seen;

static void record(const RLSlowCalloutReport *r, void *info) {
    seen *s = info;
    if (s->n >= 16)
        return;
    int i = s->n++;
    s->kind[i] = r->kind;
    snprintf(s->fname[i], sizeof s->fname[i], "%s", r->functionName);
    snprintf(s->desc[i], sizeof s->desc[i], "%s", r->objectDescription ? r->objectDescription : "");
    snprintf(s->mode[i], sizeof s->mode[i], "%s", r->mode ? r->mode : "");
    s->duration[i] = r->duration;
    s->loop[i] = r->runLoop;
}

static int reset(void **state) {
    (void)state;
    RLSetSlowCalloutHandler(NULL, NULL);
    RLRunLoopSetSlowCalloutThreshold(NULL, 0);
    RLRunLoopSetSlowCalloutThreshold(RLRunLoopGetCurrent(), 0);
    return 0;
}

/* Callouts, exported so that dladdr names them (the test links with
 * -rdynamic; the build hides symbols by default). */
#define NAMED __attribute__((visibility("default")))
NAMED void health_slow_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    (void)info;
    usleep(SLOW_US);
}
NAMED void health_fast_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    (*(int *)info)++;
}
NAMED void health_slow_perform(void *info) {
    (void)info;
    usleep(SLOW_US);
}
static void count_up(void *n) { (*(int *)n)++; }
NAMED void health_slow_observer(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    (void)o;
    (void)a;
    (void)info;
    usleep(SLOW_US);
}
NAMED void health_slow_fd(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)types;
    char b[8];
    (void)read(RLFileDescriptorGetNativeDescriptor(f), b, sizeof b);
    usleep(SLOW_US);
}

/* A mode of the tests' own: the default mode of a main loop may also hold
 * the main dispatch queue (a common-mode source where libdispatch is
 * loaded), which never lets it go empty. */
#define TIMER_MODE "health.timers"

static void run_timer_once(RLRunLoopTimerCallBack cb, void *info) {
    RLRunLoopTimerContext c = {0, info, NULL, NULL, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent(), 0, 0, 0, cb, &c);
    assert_non_null(t);
    RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, TIMER_MODE);
    /* The one-shot timer fires, then the mode is empty: Finished. */
    assert_int_equal(RLRunLoopRunInMode(TIMER_MODE, 5.0, false), kRLRunLoopRunFinished);
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
}

/* Reports of this thread's loop go to *s, over a threshold of THRESHOLD
 * of the loop's own. */
static RLRunLoopRef watch_this_loop(seen *s) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLSetSlowCalloutHandler(record, s);
    assert_true(RLRunLoopSetSlowCalloutThreshold(rl, THRESHOLD));
    return rl;
}

static void slow_timer_reported(void **state) {
    (void)state;
    seen s = {0};
    RLSetSlowCalloutHandler(record, &s);
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, THRESHOLD));
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.kind[0], kRLCalloutTimer);
    assert_string_equal(s.fname[0], "health_slow_timer");
    assert_non_null(strstr(s.desc[0], "RLRunLoopTimer"));
    assert_string_equal(s.mode[0], TIMER_MODE);
    assert_true(s.duration[0] >= SLOW_US * 1e-6);
    assert_ptr_equal(s.loop[0], RLRunLoopGetCurrent());
}

static void fast_callout_not_reported(void **state) {
    (void)state;
    seen s = {0};
    int fired = 0;
    RLSetSlowCalloutHandler(record, &s);
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, 1.0)); /* one second: never crossed here */
    run_timer_once(health_fast_timer, &fired);
    assert_int_equal(fired, 1);
    assert_int_equal(s.n, 0);
    /* Off again: a slow callout is not reported either. */
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, 0));
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(s.n, 0);
}

static void loop_threshold_wins(void **state) {
    (void)state;
    seen s = {0};
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLSetSlowCalloutHandler(record, &s);
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, THRESHOLD));
    assert_true(RLRunLoopSetSlowCalloutThreshold(rl, 10.0)); /* the loop's own: far above */
    assert_true(fabs(RLRunLoopGetSlowCalloutThreshold(rl) - 10.0) < 1e-12);
    assert_true(fabs(RLRunLoopGetSlowCalloutThreshold(NULL) - THRESHOLD) < 1e-12);
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(s.n, 0);
    /* The process's off, the loop's low: reported by the loop's. */
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, 0));
    assert_true(RLRunLoopSetSlowCalloutThreshold(rl, THRESHOLD));
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(s.n, 1);
}

static void every_kind_named(void **state) {
    (void)state;
    seen s = {0};
    RLRunLoopRef rl = watch_this_loop(&s);
    const char *mode = "health.mode";

    /* A version-0 source's perform. */
    RLRunLoopSourceContext sc = {0};
    sc.perform = health_slow_perform;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &sc);
    RLRunLoopAddSource(rl, src, mode);
    RLRunLoopSourceSignal(src);
    assert_int_equal(RLRunLoopRunInMode(mode, 5.0, true), kRLRunLoopRunHandledSource);
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.kind[0], kRLCalloutSource);
    assert_string_equal(s.fname[0], "health_slow_perform");
    assert_string_equal(s.mode[0], mode);

    /* An fd source. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorContext fc = {0};
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, health_slow_fd, &fc);
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    RLRunLoopSourceRef fs = RLFileDescriptorCreateRunLoopSource(NULL, f, 0);
    RLRunLoopAddSource(rl, fs, mode);
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(RLRunLoopRunInMode(mode, 5.0, true), kRLRunLoopRunHandledSource);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.kind[1], kRLCalloutFileDescriptor);
    assert_string_equal(s.fname[1], "health_slow_fd");
    assert_non_null(strstr(s.desc[1], "RLFileDescriptor"));
    RLRunLoopSourceInvalidate(fs);
    RLRelease(fs);
    RLFileDescriptorInvalidate(f);
    RLRelease(f);
    close(p[1]);

    /* An observer (its callout before the loop waits in a mode with a
     * timer that fires after the wait). */
    RLRunLoopObserverContext oc = {0};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeWaiting, false, 0, health_slow_observer, &oc);
    RLRunLoopAddObserver(rl, o, mode);
    int fired = 0;
    RLRunLoopTimerContext tc = {0, &fired, NULL, NULL, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.05, 0, 0, 0, health_fast_timer, &tc);
    RLRunLoopAddTimer(rl, t, mode);
    /* The timer fires after the wait; the mode is empty then (observers do
     * not keep a mode alive, as in CF). */
    assert_int_equal(RLRunLoopRunInMode(mode, 5.0, false), kRLRunLoopRunFinished);
    assert_int_equal(fired, 1);
    assert_true(s.n >= 3);
    assert_int_equal(s.kind[2], kRLCalloutObserver);
    assert_string_equal(s.fname[2], "health_slow_observer");
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
}

NAMED RLDataRef health_slow_port(RLMessagePortRef port, int32_t msgid, RLDataRef data, void *info) {
    (void)port;
    (void)msgid;
    (void)data;
    (void)info;
    usleep(SLOW_US);
    return NULL;
}

static void *send_one(void *name) {
    RLMessagePortRef remote = RLMessagePortCreateRemote(NULL, name);
    assert_non_null(remote);
    assert_int_equal(RLMessagePortSendRequest(remote, 7, NULL, 5.0, 0, NULL, NULL), kRLMessagePortSuccess);
    RLMessagePortInvalidate(remote);
    RLRelease(remote);
    return NULL;
}

/* A message port's callout is reported as the port's: kind port, the
 * program's callout function, the port's description (not the library's
 * connection object inside). */
static void port_callout_named(void **state) {
    (void)state;
    seen s = {0};
    RLRunLoopRef rl = watch_this_loop(&s);
    char name[64];
    snprintf(name, sizeof name, "health.port.%d", (int)getpid());
    RLMessagePortRef local = RLMessagePortCreateLocal(NULL, name, health_slow_port, NULL, NULL);
    assert_non_null(local);
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, local, 0);
    RLRunLoopAddSource(rl, src, "health.port");
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, send_one, name), 0);
    double until = RLAbsoluteTimeGetCurrent() + 30;
    while (s.n == 0 && RLAbsoluteTimeGetCurrent() < until)
        RLRunLoopRunInMode("health.port", 0.1, true);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.kind[0], kRLCalloutPort);
    assert_string_equal(s.fname[0], "health_slow_port");
    assert_non_null(strstr(s.desc[0], "RLMessagePort"));
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
    RLMessagePortInvalidate(local);
    RLRelease(local);
}

NAMED void health_slow_socket(RLSocketRef sock, RLSocketCallBackType type, RLDataRef address, const void *data,
                              void *info) {
    (void)sock, (void)type, (void)address, (void)data, (void)info;
    usleep(SLOW_US);
}
NAMED void health_slow_signal(RLSignalSourceRef src, int signum, RLIndex count, void *info) {
    (void)src, (void)signum, (void)count, (void)info;
    usleep(SLOW_US);
}

/* A socket's and a signal source's callouts are reported as theirs: kind
 * socket / signal, the program's callout, their descriptions. */
static void socket_and_signal_named(void **state) {
    (void)state;
    seen s = {0};
    RLRunLoopRef rl = watch_this_loop(&s);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketContext sc = {0};
    RLSocketRef sock = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, health_slow_socket, &sc);
    assert_non_null(sock);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, sock, 0);
    RLRunLoopAddSource(rl, src, "health.sock");
    assert_int_equal(write(sv[1], "x", 1), 1);
    RLRunLoopRunInMode("health.sock", 5.0, true);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.kind[0], kRLCalloutSocket);
    assert_string_equal(s.fname[0], "health_slow_socket");
    assert_non_null(strstr(s.desc[0], "RLSocket"));
    RLSocketInvalidate(sock);
    RLRelease(src);
    RLRelease(sock);
    close(sv[1]);

    RLSignalSourceContext gc = {0};
    RLSignalSourceRef sig = RLSignalSourceCreate(NULL, SIGUSR2, health_slow_signal, &gc);
    assert_non_null(sig);
    assert_true(RLRunLoopAddSignalSource(rl, sig, "health.sig"));
    raise(SIGUSR2);
    RLRunLoopRunInMode("health.sig", 5.0, true);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.kind[1], kRLCalloutSignal);
    assert_string_equal(s.fname[1], "health_slow_signal");
    RLSignalSourceInvalidate(sig);
    RLRelease(sig);
}

/* Perform requests are timed one by one: a slow one is reported with the
 * program's function (a block's invoke function for a block). */
static void perform_named(void **state) {
    (void)state;
    seen s = {0};
    RLRunLoopRef rl = watch_this_loop(&s);
    int fast = 0;
    assert_true(RLRunLoopPerformFunction(rl, "health.perform", count_up, &fast));
    assert_true(RLRunLoopPerformFunction(rl, "health.perform", health_slow_perform, NULL));
    RLRunLoopRunInMode("health.perform", 0, false);
    assert_int_equal(fast, 1);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.kind[0], kRLCalloutPerform);
    assert_string_equal(s.fname[0], "health_slow_perform");
    assert_string_equal(s.mode[0], "health.perform");
#if __BLOCKS__
    assert_true(RLRunLoopPerformBlock(rl, "health.perform", ^{
      usleep(SLOW_US);
    }));
    RLRunLoopRunInMode("health.perform", 0, false);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.kind[1], kRLCalloutPerform);
    assert_true(strcmp(s.fname[1], "health_slow_perform") != 0); /* the block's own invoke function */
#endif
}

/* A handler that replaces itself from inside its own call: that report is
 * still its own; the next goes to the new one. */
static seen first_seen, second_seen;
static void second_handler(const RLSlowCalloutReport *r, void *info) { record(r, info); }
static void first_handler(const RLSlowCalloutReport *r, void *info) {
    RLSetSlowCalloutHandler(second_handler, &second_seen);
    record(r, info);
}

static void handler_replaced_from_inside(void **state) {
    (void)state;
    memset(&first_seen, 0, sizeof first_seen);
    memset(&second_seen, 0, sizeof second_seen);
    RLSetSlowCalloutHandler(first_handler, &first_seen);
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, THRESHOLD));
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(first_seen.n, 1);
    assert_int_equal(second_seen.n, 0);
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(first_seen.n, 1);
    assert_int_equal(second_seen.n, 1);
}

#if __BLOCKS__
static void block_handler(void **state) {
    (void)state;
    __block int n = 0;
    __block RLCalloutKind kind = kRLCalloutKindCount;
    RLSetSlowCalloutHandlerBlock(^(const RLSlowCalloutReport *r) {
      n++;
      kind = r->kind;
    });
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, THRESHOLD));
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(kind, kRLCalloutTimer);
    RLSetSlowCalloutHandlerBlock(NULL); /* back to stderr; the block is released (ASan/leak check) */
}
#endif

/* Runs f with stderr going into a pipe; returns what it printed. */
static char *capture_stderr(void (*f)(void)) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    fflush(stderr);
    int saved = dup(2);
    dup2(p[1], 2);
    f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    static char buf[16384];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    close(p[0]);
    return buf;
}

static int count_lines(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void fifteen_slow_timers(void) {
    for (int i = 0; i < 15; i++)
        run_timer_once(health_slow_timer, NULL);
}

static void one_more_after_a_second(void) {
    usleep(1100000);
    run_timer_once(health_slow_timer, NULL);
}

static void stderr_line_rate_limited(void **state) {
    (void)state;
    RLSetSlowCalloutHandler(NULL, NULL);
    assert_true(RLRunLoopSetSlowCalloutThreshold(NULL, THRESHOLD));
    /* 15 reports well within one second (15 x 20 ms): 10 lines. */
    char *out = capture_stderr(fifteen_slow_timers);
    assert_int_equal(count_lines(out, "crunloop: slow callout: timer health_slow_timer held the run loop"), 10);
    assert_non_null(strstr(out, "in mode " TIMER_MODE));
    /* The next second's first line tells how many were dropped. */
    out = capture_stderr(one_more_after_a_second);
    assert_non_null(strstr(out, "crunloop: 5 slow-callout report(s) not printed"));
    assert_int_equal(count_lines(out, "crunloop: slow callout: timer"), 1);
}

/* A loop on another thread, its own threshold set, makes a slow callout and
 * the thread ends: the report came on that thread before the loop went;
 * the loop's threshold then counts no more (a released loop is refused). */
static seen thread_seen;
static RLRunLoopRef thread_loop;
static void *thread_main(void *arg) {
    (void)arg;
    thread_loop = RLRunLoopGetCurrent();
    RLRetain(thread_loop);
    assert_true(RLRunLoopSetSlowCalloutThreshold(thread_loop, THRESHOLD));
    run_timer_once(health_slow_timer, NULL);
    return NULL;
}

static bool get_refused(const void *stale) { return RLRunLoopGetSlowCalloutThreshold((RLRunLoopRef)stale) == -1; }
static bool set_refused(const void *stale) { return !RLRunLoopSetSlowCalloutThreshold((RLRunLoopRef)stale, 1); }

static void loop_torn_down_after_reports(void **state) {
    (void)state;
    memset(&thread_seen, 0, sizeof thread_seen);
    RLSetSlowCalloutHandler(record, &thread_seen);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, thread_main, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(thread_seen.n, 1);
    assert_ptr_equal(thread_seen.loop[0], thread_loop);
    RLRelease(thread_loop); /* the loop goes now, its threshold with it */
    rl_test_stale(get_refused, thread_loop);
    rl_test_stale(set_refused, thread_loop);
    /* This thread's loop was never given a threshold: not reported. */
    run_timer_once(health_slow_timer, NULL);
    assert_int_equal(thread_seen.n, 1);
}

static void misuse(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopSetSlowCalloutThreshold(rl, 0.5));
    const double bad[] = {-1, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RLErrorClear();
        assert_false(RLRunLoopSetSlowCalloutThreshold(rl, bad[i]));
        assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
        assert_false(RLRunLoopSetSlowCalloutThreshold(NULL, bad[i]));
        /* Nothing lost: the threshold is what it was. */
        assert_true(fabs(RLRunLoopGetSlowCalloutThreshold(rl) - 0.5) < 1e-12);
    }
    RLErrorClear();
    assert_false(RLRunLoopSetSlowCalloutThreshold((RLRunLoopRef)(void *)"not a loop, a string", 1));
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidObject);
    assert_string_equal(RLCalloutKindGetName(kRLCalloutTimer), "timer");
    assert_string_equal(RLCalloutKindGetName(kRLCalloutMainQueue), "main queue");
    assert_string_equal(RLCalloutKindGetName((RLCalloutKind)99), "unknown");
    assert_string_equal(RLCalloutKindGetName((RLCalloutKind)-1), "unknown");
}

/* RL_SLOW_CALLOUT_MS, read once as the first loop is made: a fresh process
 * (this program again) with the variable set reports on stderr. */
static const char *self_path; /* argv[0] (under valgrind /proc/self/exe is valgrind's) */

static void environment_threshold(void **state) {
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 2);
        setenv("RL_SLOW_CALLOUT_MS", "2", 1);
        execl(self_path, self_path, "--env-child", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    close(p[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(buf, "crunloop: slow callout: timer health_slow_timer"));
    assert_non_null(strstr(buf, "(threshold 2.000 ms)"));
}

static int env_child(void) {
    if (fabs(RLRunLoopGetSlowCalloutThreshold(NULL) - 0.002) > 1e-12)
        return 2;
    RLRunLoopTimerContext c = {0};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent(), 0, 0, 0, health_slow_timer, &c);
    RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, TIMER_MODE);
    RLRunLoopRunInMode(TIMER_MODE, 5.0, false);
    RLRunLoopTimerInvalidate(t);
    RLRelease(t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--env-child") == 0)
        return env_child();
    self_path = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(slow_timer_reported, reset, reset),
        cmocka_unit_test_setup_teardown(fast_callout_not_reported, reset, reset),
        cmocka_unit_test_setup_teardown(loop_threshold_wins, reset, reset),
        cmocka_unit_test_setup_teardown(every_kind_named, reset, reset),
        cmocka_unit_test_setup_teardown(port_callout_named, reset, reset),
        cmocka_unit_test_setup_teardown(perform_named, reset, reset),
        cmocka_unit_test_setup_teardown(socket_and_signal_named, reset, reset),
        cmocka_unit_test_setup_teardown(handler_replaced_from_inside, reset, reset),
#if __BLOCKS__
        cmocka_unit_test_setup_teardown(block_handler, reset, reset),
#endif
        cmocka_unit_test_setup_teardown(stderr_line_rate_limited, reset, reset),
        cmocka_unit_test_setup_teardown(loop_torn_down_after_reports, reset, reset),
        cmocka_unit_test_setup_teardown(misuse, reset, reset),
        cmocka_unit_test_setup_teardown(environment_threshold, reset, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
