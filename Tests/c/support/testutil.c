#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The library's test-only event counters (RLBase.h: rl__test_count) count in
 * every test program, from before main; in use they do not. */
__attribute__((visibility("hidden"))) extern _Atomic bool rl__counting;
/* stdout line-buffered too: a test program that dies (a sanitizer's report,
 * a crash) after a failure keeps cmocka's lines saying which test failed. */
__attribute__((constructor)) static void rl_test_counting_on(void) {
    atomic_store(&rl__counting, true);
    setvbuf(stdout, NULL, _IOLBF, 0);
}

long rl_test_iters(long full) {
    const char *s = getenv("RL_TEST_SCALE");
    long div = 1;
    if (s && *s) {
        if (strcmp(s, "asan") == 0) div = 4;
        else if (strcmp(s, "tsan") == 0) div = 20;
        else if (strcmp(s, "valgrind") == 0) div = 100;
        else { long n = strtol(s, NULL, 10); if (n > 0) div = n; }
    }
    long r = full / div;
    return r < 1 ? 1 : r;
}

void rl_test_assert_error(RLErrorCode code, const char *name, const char *file, int line) {
    RLError e = RLErrorGetLast();
    if (e.code != code) {
        print_error("%s:%d: expected error %s, got %s: \"%s\"\n", file, line, name,
                    RLErrorCodeGetName(e.code), e.message);
        _fail(file, line);
    }
    if (code != kRLErrorNone && (e.message == NULL || e.message[0] == '\0')) {
        print_error("%s:%d: error %s has an empty message\n", file, line, name);
        _fail(file, line);
    }
    RLErrorClear();
}

double rl_test_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void rl_test_run_threads(int n, void *(*fn)(void *), void *base, size_t stride) {
    pthread_t *t = calloc((size_t)n, sizeof *t);
    assert_non_null(t);
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fn, (char *)base + (size_t)i * stride), 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    free(t);
}

void *rl_test_on_other_thread(void *(*fn)(void *), void *arg) {
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    pthread_join(t, &res);
    return res;
}

RLRunLoopSourceRef rl_test_keep_mode(RLRunLoopMode mode) {
    RLRunLoopSourceContext c = {0};
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &c);
    assert_non_null(s);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), s, mode));
    return s;
}

void rl_test_unkeep(RLRunLoopSourceRef source) {
    RLRunLoopSourceInvalidate(source);
    RLRelease(source);
}

static void settle_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)s, (void)type, (void)address;
    *(size_t *)info += RLDataGetLength(data);
}

void rl_test_settle_backend(RLRunLoopMode mode) {
    int sv[2];
    size_t got = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    RLSocketContext c = {0, &got, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], kRLSocketDataCallBack, settle_cb, &c);
    assert_non_null(s);
    RLRunLoopSourceRef src = RLSocketCreateRunLoopSource(NULL, s, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, mode));
    assert_int_equal(write(sv[1], "w", 1), 1);
    for (int i = 0; i < 1000 && got == 0; i++)
        (void)RLRunLoopRunInMode(mode, 0.01, true);
    assert_int_equal(got, 1);
    (void)RLRunLoopRunInMode(mode, 0, true); /* a wait: where a default loop moves */
    assert_true(RLSocketInvalidate(s)); /* closes sv[0] */
    RLRelease(src);
    RLRelease(s);
    close(sv[1]);
}

void rl_test_wait_until_waiting(RLRunLoopRef rl) {
    double t0 = rl_test_now();
    while (!RLRunLoopIsWaiting(rl) && rl_test_now() - t0 < 10)
        usleep(100);
}

typedef struct asleep_act {
    RLRunLoopRef rl;
    void (*act)(RLRunLoopRef rl, void *arg);
    void *arg;
} asleep_act;

static void *act_once_asleep(void *p) {
    asleep_act *a = p;
    rl_test_wait_until_waiting(a->rl);
    a->act(a->rl, a->arg);
    return NULL;
}

RLRunLoopRunResult rl_test_run_and_act_while_asleep(RLRunLoopMode mode, bool return_after_source,
                                                    void (*act)(RLRunLoopRef rl, void *arg), void *arg) {
    asleep_act a = {RLRunLoopGetCurrent(), act, arg};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, act_once_asleep, &a), 0);
    RLRunLoopRunResult r = RLRunLoopRunInMode(mode, 30, return_after_source);
    pthread_join(t, NULL);
    return r;
}

typedef struct {
    bool (*churn)(void *);
    void *arg;
    _Atomic bool running;
} rl_churner;

static void *rl_churn_main(void *p) {
    rl_churner *c = p;
    while (atomic_load(&c->running))
        if (!c->churn(c->arg))
            return (void *)1;
    return NULL;
}

void rl_test_child_exit(int code) {
    if (code == 0)
        execl("/bin/true", "true", (char *)NULL);
    _exit(code);
}

/* Runs child(arg) in a fork()ed child and waits for it: true when it exited
 * 0, else false with what became of it in `why`. Reports nothing itself, so
 * that a caller with threads of its own can stop them before it fails. */
static bool rl_child_ok(bool (*child)(void *), void *arg, char *why, size_t n) {
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, n, "fork() failed: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        alarm(10);
        rl_test_child_exit(child(arg) ? 0 : 1);
    }
    int status;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (w != pid) {
        snprintf(why, n, "waitpid() failed: %s", strerror(errno));
        return false;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return true;
    if (WIFSIGNALED(status))
        snprintf(why, n, "the child died of signal %d%s", WTERMSIG(status),
                 WTERMSIG(status) == SIGALRM ? " (hung for 10 s)" : "");
    else
        snprintf(why, n, "the child exited with %d", WEXITSTATUS(status));
    return false;
}

void rl_test_in_child(bool (*child)(void *), void *arg, const char *what) {
    char why[96];
    if (!rl_child_ok(child, arg, why, sizeof why))
        fail_msg("%s: %s", what, why);
}

void rl_test_fork_while_churning(long forks, bool (*churn)(void *), bool (*child)(void *), void *arg) {
    rl_churner c = {churn, arg, true};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, rl_churn_main, &c), 0);
    char why[96] = "";
    long k = 0;
    while (k < forks && rl_child_ok(child, arg, why, sizeof why))
        k++;
    /* The churner stops before anything fails: it lives on this frame. */
    atomic_store(&c.running, false);
    void *r;
    assert_int_equal(pthread_join(t, &r), 0);
    if (k < forks)
        fail_msg("fork %ld of %ld: %s", k, forks, why);
    assert_null(r);
}
