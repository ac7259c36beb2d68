/* test_backend.c — the kernel backend a run loop waits on (rl_poll.h): by
 * default (RL_BACKEND unset, empty or auto) epoll, for timers, sources
 * and pipes alike, and io_uring from the first wait after a socket's
 * callout asked for the ring (a Data callback's read, an RLSocketSendData),
 * where the kernel allows it; epoll otherwise without error; RL_BACKEND=
 * epoll or io_uring (read as each loop is made) forces one, and a wrong
 * value or a refused forced io_uring fails the loop's creation clearly; a
 * refusal (simulated: the fault switch, and a real seccomp filter in a
 * fork()ed child) leaves loops on epoll, which work; RLRunLoopGetBackendName
 * and the loop's description say which; a fork() child's loop has its own
 * ring. Every loop here is exercised: a pipe's fd source and a timer, then
 * an echoing Data socket, every byte checked across the move. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "RLBase.h" /* rl__faults, RL_FAULT_* */

#if defined(__has_include) && __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#if defined(RL_PLAIN) && RL_PLAIN
enum { PLAIN_BUILD = 1 };
#else
enum { PLAIN_BUILD = 0 };
#endif

/* ThreadSanitizer and fork(): the children here start threads. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

/* Whether this kernel lets this process make an io_uring at all (asked
 * directly, not through the library). */
static bool kernel_allows_uring(void) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED; /* as the backend: 6.1 */
    long fd = syscall(__NR_io_uring_setup, 1, &p);
    if (fd < 0)
        return false;
    close((int)fd);
    return true;
}

/* Messages each echoing socket here gets. */
enum { ROUNDS = 5 };

/* What a default loop waits on before its sockets ask for the ring. */
static const char *expected_default(void) { return "epoll"; }
/* What it waits on after they did: io_uring where the kernel allows it. */
static const char *expected_with_sockets(void) { return !PLAIN_BUILD && kernel_allows_uring() ? "io_uring" : "epoll"; }

/* RL_BACKEND as the test started (`RL_BACKEND=io_uring make check-c`
 * runs every test on one backend): what this thread's loop, and a loop
 * made with RL_BACKEND as it was, get. */
static char initial_env[32];

static bool forced_initially(void) { return strcmp(initial_env, "epoll") == 0 || strcmp(initial_env, "io_uring") == 0; }
static const char *expected_current(void) { return forced_initially() ? initial_env : expected_default(); }
static const char *expected_current_with_sockets(void) {
    return forced_initially() ? initial_env : expected_with_sockets();
}

static void read_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    char b[16];
    (void)!read(RLFileDescriptorGetNativeDescriptor(f), b, sizeof b);
    (*(int *)info)++;
}

static void timer_cb(RLRunLoopTimerRef t, void *info) { (*(int *)info)++; }

/* Lets go of what loop_works and the move tests made: the timer, the
 * pipe's source and object (closing its read end), and its write end
 * (any of them NULL: not made). */
static void drop_pipe_and_timer(RLRunLoopTimerRef t, RLRunLoopSourceRef src, RLFileDescriptorRef f, int wfd) {
    if (t) {
        RLRunLoopTimerInvalidate(t);
        RLRelease(t);
    }
    if (src) {
        RLRunLoopSourceInvalidate(src);
        RLRelease(src);
    }
    if (f) {
        RLFileDescriptorInvalidate(f);
        RLRelease(f);
    }
    close(wfd);
}

/* The calling thread's loop serves a pipe's fd source (twice: re-enabled)
 * and a timer. true if it did. */
static bool loop_works(void) {
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return false;
    int reads = 0, fires = 0;
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, read_cb, &(RLFileDescriptorContext){0, &reads, NULL, NULL, NULL});
    RLRunLoopSourceRef src = f ? RLFileDescriptorCreateRunLoopSource(NULL, f, 0) : NULL;
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.01, 0, 0, 0, timer_cb,
                                               &(RLRunLoopTimerContext){0, &fires, NULL, NULL, NULL});
    bool ok = f && src && t;
    if (ok) {
        RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "BackendMode");
        RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "BackendMode");
        for (int round = 0; round < 2 && ok; round++) {
            RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
            ok = write(p[1], "x", 1) == 1 && RLRunLoopRunInMode("BackendMode", 5, true) == kRLRunLoopRunHandledSource &&
                 reads == round + 1;
        }
        for (int i = 0; i < 500 && ok && fires == 0; i++)
            RLRunLoopRunInMode("BackendMode", 0.01, true);
        ok = ok && fires == 1;
    }
    drop_pipe_and_timer(t, src, f, p[1]);
    return ok;
}

/* The echo of the calling thread's loop's socket: every message sent back
 * from the callout, through RLSocketSendData; a Data callback gets the
 * bytes, a Read callback reads them itself. */
typedef struct echo {
    int calls, failures;
    bool nested; /* each callout first runs the loop in NESTED_MODE for a moment (its wait: where a loop moves) */
    char nested_on[16]; /* the backend after the first callout's nested run */
} echo;

#define NESTED_MODE "BackendNested"

static void echo_cb(RLSocketRef s, RLSocketCallBackType type, RLDataRef address, const void *data, void *info) {
    (void)address;
    echo *e = info;
    RLDataRef got = NULL;
    if (type == kRLSocketReadCallBack) {
        char buf[256];
        ssize_t n = recv(RLSocketGetNative(s), buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0)
            return;
        got = RLDataCreate(NULL, (const uint8_t *)buf, (RLIndex)n);
        data = got;
    } else if (type != kRLSocketDataCallBack || RLDataGetLength(data) == 0) {
        return;
    }
    e->calls++;
    if (e->nested) {
        (void)RLRunLoopRunInMode(NESTED_MODE, 0.005, false);
        if (!e->nested_on[0])
            snprintf(e->nested_on, sizeof e->nested_on, "%s", RLRunLoopGetBackendName(RLRunLoopGetCurrent()));
    }
    if (RLSocketSendData(s, NULL, data, 5) != kRLSocketSuccess)
        e->failures++;
    if (got)
        RLRelease(got);
}

/* Reads exactly n bytes from the non-blocking fd within 5 s. */
static bool read_all(int fd, char *buf, size_t n) {
    size_t got = 0;
    for (int i = 0; i < 5000 && got < n; i++) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0 || errno != EAGAIN)
            return false;
        else
            usleep(1000);
    }
    return got == n;
}

/* The library's counts (testutil turns counting on): chunks Data callbacks
 * got from a ring, and sends a ring completed. */
RL__HIDDEN extern _Atomic unsigned long rl__socket_ring_reads;
static unsigned long ring_reads(void) { return atomic_load(&rl__socket_ring_reads); }
#if defined(RL_PLAIN) && RL_PLAIN
static unsigned long ring_sends(void) { return 0; }
#else
RL__HIDDEN extern _Atomic unsigned long rl__poll_uring_sends;
static unsigned long ring_sends(void) { return atomic_load(&rl__poll_uring_sends); }
#endif

/* What an echoing socket showed (socket_works). */
typedef struct sock_probe {
    bool works;              /* every byte came back */
    char after_first[16];    /* the backend after its first message (the callout asked for the ring in it) */
    char after[16];          /* and after its last */
    unsigned long reads_late, sends_late; /* the ring's reads and sends from the third message on */
    char nested_on[16];      /* echo's nested_on */
} sock_probe;

/* The calling thread's loop serves a socket (`type`: Data or Read callback)
 * that echoes: `rounds` messages, each one answered whole before the next
 * is sent. A default loop moves to the ring at the wait after the first
 * message's callout; the socket's reads go through the ring from the
 * callout after that one (the third message), its sends from the second. */
static sock_probe socket_works_ex(int rounds, RLSocketCallBackType type, bool nested) {
    sock_probe sp;
    memset(&sp, 0, sizeof sp);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return sp;
    echo e = {0, 0, nested, ""};
    RLSocketContext c = {0, &e, NULL, NULL, NULL};
    RLSocketRef s = RLSocketCreateWithNative(NULL, sv[0], type, echo_cb, &c);
    RLRunLoopSourceRef src = s ? RLSocketCreateRunLoopSource(NULL, s, 0) : NULL;
    bool ok = s && src;
    if (ok)
        RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "BackendMode");
    unsigned long reads = 0, sends = 0;
    for (int round = 0; round < rounds && ok; round++) {
        char msg[64], back[64];
        int n = snprintf(msg, sizeof msg, "message %d of %d, to be echoed whole", round + 1, rounds);
        if (round == 2) {
            reads = ring_reads();
            sends = ring_sends();
        }
        ok = write(sv[1], msg, (size_t)n) == n;
        /* Served (a short message is one callout), then echoed by the run's end. */
        int before = e.calls;
        for (int i = 0; i < 500 && ok && e.calls == before; i++)
            (void)RLRunLoopRunInMode("BackendMode", 0.01, true);
        ok = ok && e.calls == before + 1 && e.failures == 0 && read_all(sv[1], back, (size_t)n) &&
             memcmp(msg, back, (size_t)n) == 0;
        if (ok && round == 0) {
            (void)RLRunLoopRunInMode("BackendMode", 0, true); /* a wait: where the loop moves */
            snprintf(sp.after_first, sizeof sp.after_first, "%s", RLRunLoopGetBackendName(RLRunLoopGetCurrent()));
        }
    }
    sp.works = ok;
    snprintf(sp.nested_on, sizeof sp.nested_on, "%s", e.nested_on);
    sp.reads_late = ring_reads() - reads;
    sp.sends_late = ring_sends() - sends;
    if (ok)
        snprintf(sp.after, sizeof sp.after, "%s", RLRunLoopGetBackendName(RLRunLoopGetCurrent()));
    if (src) {
        RLRunLoopSourceInvalidate(src);
        RLRelease(src);
    }
    if (s) {
        RLSocketInvalidate(s); /* closes sv[0] */
        RLRelease(s);
    } else {
        close(sv[0]);
    }
    close(sv[1]);
    return sp;
}

static sock_probe socket_works(int rounds, RLSocketCallBackType type) { return socket_works_ex(rounds, type, false); }

/* sp (of `rounds` messages) went as a loop on `backend` makes it go: on a
 * ring, a Data socket's late messages were read by it, and a Read
 * socket's late replies sent by it; on epoll, neither. */
static bool sock_probe_ok(const sock_probe *sp, int rounds, RLSocketCallBackType type, const char *backend) {
    if (!sp->works || strcmp(sp->after_first, backend) != 0 || strcmp(sp->after, backend) != 0)
        return false;
    unsigned long late = (unsigned long)rounds - 2;
    if (strcmp(backend, "io_uring") != 0)
        return sp->reads_late == 0 && sp->sends_late == 0;
    return type == kRLSocketDataCallBack ? sp->reads_late >= late : sp->sends_late >= late;
}

/* What a new thread's loop is, under RL_BACKEND=env (NULL: unset). */
typedef struct probe {
    const char *env;
    char name[16];   /* the backend; "" if the loop could not be made */
    RLError err;     /* then: why (its message in msg: the thread's own buffer goes with it) */
    char msg[512];
    bool works;
    bool described;  /* its description names the backend */
    char after_pipe[16];   /* the backend after a pipe's fd source and a timer were served */
    sock_probe data, read; /* then an echoing Data socket; an echoing Read socket on a loop of its own */
    char after_socket[16]; /* the backend then */
    bool described_after;  /* the description names that one */
} probe;

static void *probe_thread(void *arg) {
    probe *pr = arg;
    RLErrorClear();
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    if (!rl) {
        pr->err = RLErrorGetLast();
        snprintf(pr->msg, sizeof pr->msg, "%s", pr->err.message);
        pr->err.message = NULL; /* gone with the thread: msg holds it */
        return NULL;
    }
    snprintf(pr->name, sizeof pr->name, "%s", RLRunLoopGetBackendName(rl));
    char *d = RLCopyDescription(rl);
    char want[48];
    snprintf(want, sizeof want, "backend = %s", pr->name);
    pr->described = d && strstr(d, want);
    free(d);
    pr->works = loop_works();
    snprintf(pr->after_pipe, sizeof pr->after_pipe, "%s", RLRunLoopGetBackendName(rl));
    pr->data = socket_works(ROUNDS, kRLSocketDataCallBack);
    snprintf(pr->after_socket, sizeof pr->after_socket, "%s", RLRunLoopGetBackendName(rl));
    /* Once moved, the loop stays, and its pipes and timers still work. */
    pr->works = pr->works && loop_works() && strcmp(RLRunLoopGetBackendName(rl), pr->after_socket) == 0;
    d = RLCopyDescription(rl);
    snprintf(want, sizeof want, "backend = %s", pr->after_socket);
    pr->described_after = d && strstr(d, want);
    free(d);
    return NULL;
}

static void *read_probe_thread(void *arg) {
    probe *pr = arg;
    if (RLRunLoopGetCurrent())
        pr->read = socket_works(ROUNDS, kRLSocketReadCallBack);
    return NULL;
}

/* pr's loop was made on `first`, served its pipe and timer there, and
 * served its socket on `then` from the first message's wait on; so did
 * another loop's Read socket. */
static void assert_probe(const probe *pr, const char *first, const char *then) {
    assert_string_equal(pr->name, first);
    assert_true(pr->described);
    assert_true(pr->works);
    assert_string_equal(pr->after_pipe, first);
    assert_true(sock_probe_ok(&pr->data, ROUNDS, kRLSocketDataCallBack, then));
    assert_true(sock_probe_ok(&pr->read, ROUNDS, kRLSocketReadCallBack, then));
    assert_string_equal(pr->after_socket, then);
    assert_true(pr->described_after);
}

static probe probe_with(const char *env) {
    probe pr;
    memset(&pr, 0, sizeof pr);
    pr.env = env;
    if (env)
        setenv("RL_BACKEND", env, 1);
    else
        unsetenv("RL_BACKEND");
    rl_test_on_other_thread(probe_thread, &pr);
    if (pr.name[0])
        rl_test_on_other_thread(read_probe_thread, &pr);
    if (initial_env[0])
        setenv("RL_BACKEND", initial_env, 1);
    else
        unsetenv("RL_BACKEND");
    return pr;
}

static void test_the_default_is_epoll_until_a_socket_asks_for_the_ring(void **state) {
    probe pr = probe_with(NULL);
    assert_probe(&pr, expected_default(), expected_with_sockets());
    pr = probe_with(""); /* empty: the default */
    assert_probe(&pr, expected_default(), expected_with_sockets());
    pr = probe_with("auto"); /* its name */
    assert_probe(&pr, expected_default(), expected_with_sockets());
    /* This thread's loop: RL_BACKEND as the test started. */
    assert_string_equal(RLRunLoopGetBackendName(RLRunLoopGetCurrent()), expected_current());
}

static void test_RL_BACKEND_epoll_is_honoured(void **state) {
    probe pr = probe_with("epoll");
    assert_probe(&pr, "epoll", "epoll");
}

static void test_RL_BACKEND_io_uring_is_honoured_or_fails_clearly(void **state) {
    probe pr = probe_with("io_uring");
    if (PLAIN_BUILD) {
        assert_string_equal(pr.name, "");
        assert_int_equal(pr.err.code, kRLErrorInvalidState);
        assert_non_null(strstr(pr.msg, "RL_BACKEND=io_uring"));
    } else if (kernel_allows_uring()) {
        assert_probe(&pr, "io_uring", "io_uring");
    } else {
        assert_string_equal(pr.name, "");
        assert_int_equal(pr.err.code, kRLErrorSystem);
        assert_non_null(strstr(pr.msg, "RL_BACKEND=io_uring"));
    }
}

static void test_a_wrong_RL_BACKEND_fails_the_loop_clearly(void **state) {
    probe pr = probe_with("kqueue");
    assert_string_equal(pr.name, "");
    assert_int_equal(pr.err.code, kRLErrorInvalidArgument);
    assert_non_null(strstr(pr.msg, "RL_BACKEND=kqueue"));
    assert_non_null(strstr(pr.msg, "epoll, io_uring or auto"));
    assert_non_null(strstr(pr.msg, "RLRunLoopGetCurrent"));
    /* Nothing lost: with RL_BACKEND fixed, the next thread's loop is made. */
    pr = probe_with(NULL);
    assert_probe(&pr, expected_default(), expected_with_sockets());
}

static void test_GetBackendName_misuse(void **state) {
    assert_rl_fails(RLRunLoopGetBackendName(NULL), kRLErrorInvalidArgument);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, timer_cb, NULL);
    assert_non_null(t);
    assert_rl_fails(RLRunLoopGetBackendName((RLRunLoopRef)(void *)t), kRLErrorInvalidObject);
    RLRelease(t);
}

/* ---- the move itself ---- */

/* Runs fn(arg) on a new thread whose loop is on the default backend
 * (RL_BACKEND unset while it is made). */
static void on_a_default_loop(void *(*fn)(void *), void *arg) {
    unsetenv("RL_BACKEND");
    rl_test_on_other_thread(fn, arg);
    if (initial_env[0])
        setenv("RL_BACKEND", initial_env, 1);
}

/* A result from a helper thread, checked on the test's. */
typedef struct verdict {
    bool ok;
    char why[160];
} verdict;

#define VERDICT(v, cond, ...)                                                                                          \
    do {                                                                                                               \
        if ((v)->ok && !(cond)) {                                                                                      \
            (v)->ok = false;                                                                                           \
            snprintf((v)->why, sizeof (v)->why, __VA_ARGS__);                                                           \
        }                                                                                                              \
    } while (0)

static void reenable_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    char b[16];
    (void)!read(RLFileDescriptorGetNativeDescriptor(f), b, sizeof b);
    (*(int *)info)++;
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack); /* kept enabled: a persistent registration */
}

/* Runs the loop in BackendMode until *count reaches `want` (5 s at most). */
static void run_until_count(const int *count, int want) {
    for (int i = 0; i < 500 && *count < want; i++)
        (void)RLRunLoopRunInMode("BackendMode", 0.01, true);
}

static void *watched_before_the_move(void *arg) {
    verdict *v = arg;
    v->ok = true;
    int p[2];
    VERDICT(v, pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0, "pipe: %s", strerror(errno));
    if (!v->ok)
        return NULL;
    int reads = 0, fires = 0;
    RLFileDescriptorRef f =
        RLFileDescriptorCreate(NULL, p[0], true, reenable_cb, &(RLFileDescriptorContext){0, &reads, NULL, NULL, NULL});
    RLRunLoopSourceRef src = f ? RLFileDescriptorCreateRunLoopSource(NULL, f, 0) : NULL;
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.5, 0, 0, 0, timer_cb,
                                               &(RLRunLoopTimerContext){0, &fires, NULL, NULL, NULL});
    VERDICT(v, f && src && t, "cannot make the pipe's source or the timer");
    if (v->ok) {
        RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "BackendMode");
        RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "BackendMode");
        RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    }
    /* Two reads on epoll: the pipe's registration is persistent there, and
     * the timer armed, when the socket's callout asks for the ring. */
    for (int round = 0; round < 2 && v->ok; round++) {
        VERDICT(v, write(p[1], "x", 1) == 1, "write");
        run_until_count(&reads, round + 1);
        VERDICT(v, reads == round + 1, "read %d on epoll: %d callouts", round + 1, reads);
    }
    const char *first = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    VERDICT(v, strcmp(first, "epoll") == 0, "the loop started on %s", first);
    sock_probe sp = socket_works(ROUNDS, kRLSocketDataCallBack);
    VERDICT(v, sock_probe_ok(&sp, ROUNDS, kRLSocketDataCallBack, expected_with_sockets()),
            "the socket: works %d, then on %s", sp.works, sp.after);
    /* The pipe and the timer, registered before the move, are served after
     * it, once each: no report lost, none made twice. */
    for (int round = 2; round < 5 && v->ok; round++) {
        VERDICT(v, write(p[1], "x", 1) == 1, "write");
        run_until_count(&reads, round + 1);
        VERDICT(v, reads == round + 1, "read %d after the move: %d callouts", round + 1, reads);
    }
    run_until_count(&fires, 1);
    (void)RLRunLoopRunInMode("BackendMode", 0.05, false);
    VERDICT(v, reads == 5 && fires == 1, "after the move: %d reads (5), %d fires (1)", reads, fires);
    drop_pipe_and_timer(t, src, f, p[1]);
    return NULL;
}

static void test_fds_and_timers_watched_before_the_move_are_served_after_it(void **state) {
    verdict v = {false, ""};
    on_a_default_loop(watched_before_the_move, &v);
    if (!v.ok)
        fail_msg("%s", v.why);
}

static void *move_in_a_nested_run(void *arg) {
    verdict *v = arg;
    v->ok = true;
    RLRunLoopSourceRef keep = rl_test_keep_mode(NESTED_MODE);
    sock_probe sp = socket_works_ex(ROUNDS, kRLSocketDataCallBack, true);
    VERDICT(v, sock_probe_ok(&sp, ROUNDS, kRLSocketDataCallBack, expected_with_sockets()),
            "the socket: works %d, on %s after its first message, %s after its last, %lu late ring reads", sp.works,
            sp.after_first, sp.after, sp.reads_late);
    /* Moved in the nested run's wait, inside the first callout. */
    VERDICT(v, strcmp(sp.nested_on, expected_with_sockets()) == 0, "on %s after the nested run", sp.nested_on);
    rl_test_unkeep(keep);
    return NULL;
}

static void test_a_move_made_by_a_run_nested_in_the_asking_callout(void **state) {
    /* The socket's first callout asks for the ring, then runs the loop in
     * another mode before it replies: the loop moves in that nested run's
     * wait, under the callout, whose reply and every later message go
     * through as they would. */
    verdict v = {false, ""};
    on_a_default_loop(move_in_a_nested_run, &v);
    if (!v.ok)
        fail_msg("%s", v.why);
}

/* Another thread's pipes, each added to the loop's BackendMode, enabled,
 * written once and removed after its callout. */
typedef struct adder {
    RLRunLoopRef rl;
    _Atomic int served;   /* callouts the loop made for them */
    _Atomic bool done;
    int pipes;            /* how many */
    verdict v;
} adder;

static void adder_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    char b[16];
    (void)!read(RLFileDescriptorGetNativeDescriptor(f), b, sizeof b);
    atomic_fetch_add(&((adder *)info)->served, 1);
}

static void *add_pipes(void *arg) {
    adder *a = arg;
    a->v.ok = true;
    for (int i = 0; i < a->pipes && a->v.ok; i++) {
        int p[2];
        VERDICT(&a->v, pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0, "pipe: %s", strerror(errno));
        if (!a->v.ok)
            break;
        RLFileDescriptorRef f =
            RLFileDescriptorCreate(NULL, p[0], true, adder_cb, &(RLFileDescriptorContext){0, a, NULL, NULL, NULL});
        RLRunLoopSourceRef src = f ? RLFileDescriptorCreateRunLoopSource(NULL, f, 0) : NULL;
        VERDICT(&a->v, f && src, "cannot make pipe %d's source", i);
        if (src) {
            RLRunLoopAddSource(a->rl, src, "BackendMode");
            RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
            VERDICT(&a->v, write(p[1], "x", 1) == 1, "write");
            double end = rl_test_now() + 5;
            while (atomic_load(&a->served) < i + 1 && rl_test_now() < end)
                usleep(100);
            VERDICT(&a->v, atomic_load(&a->served) == i + 1, "pipe %d: %d callouts in all", i, atomic_load(&a->served));
            RLRunLoopRemoveSource(a->rl, src, "BackendMode");
            RLRunLoopSourceInvalidate(src);
            RLRelease(src);
        }
        if (f) {
            RLFileDescriptorInvalidate(f); /* closes p[0] */
            RLRelease(f);
        }
        close(p[1]);
    }
    atomic_store(&a->done, true);
    return NULL;
}

static void *move_while_another_thread_registers(void *arg) {
    verdict *v = arg;
    v->ok = true;
    static adder a;
    memset(&a, 0, sizeof a);
    a.rl = RLRunLoopGetCurrent();
    a.pipes = 60;
    RLRunLoopSourceRef keep = rl_test_keep_mode("BackendMode");
    pthread_t t;
    VERDICT(v, pthread_create(&t, NULL, add_pipes, &a) == 0, "thread");
    if (!v->ok)
        return NULL;
    /* Some pipes served on epoll, then the socket's first message (the
     * move) while the other thread goes on adding and removing. */
    for (int i = 0; i < 500 && atomic_load(&a.served) < 10 && !atomic_load(&a.done); i++)
        (void)RLRunLoopRunInMode("BackendMode", 0.01, true);
    sock_probe sp = socket_works(ROUNDS, kRLSocketDataCallBack);
    for (int i = 0; i < 1000 && !atomic_load(&a.done); i++)
        (void)RLRunLoopRunInMode("BackendMode", 0.01, true);
    VERDICT(v, pthread_join(t, NULL) == 0, "join");
    VERDICT(v, a.v.ok, "the other thread: %.120s", a.v.why);
    VERDICT(v, atomic_load(&a.served) == a.pipes, "%d callouts for %d pipes", atomic_load(&a.served), a.pipes);
    VERDICT(v, sock_probe_ok(&sp, ROUNDS, kRLSocketDataCallBack, expected_with_sockets()),
            "the socket: works %d, then on %s", sp.works, sp.after);
    rl_test_unkeep(keep);
    return NULL;
}

static void test_another_threads_registrations_around_the_move(void **state) {
    /* Another thread adds a pipe's source to the loop, has it served and
     * removes it, 60 times, before, while and after the loop moves to the
     * ring: each one is served once (its changes are made under the loop's
     * lock, as the move is). Not under valgrind (make check-leak, which
     * keeps every other test's loops on epoll for this reason): valgrind
     * 3.19 runs no other thread while one sleeps in io_uring_enter, a call
     * it does not know blocks, so the other thread stalls (the ASan and
     * TSan runs have this test). */
    if (RUNNING_ON_VALGRIND)
        skip();
    verdict v = {false, ""};
    on_a_default_loop(move_while_another_thread_registers, &v);
    if (!v.ok)
        fail_msg("%s", v.why);
}

/* ---- another thread's removal lets go of the file at once ---- */

#define LETGO_MODE "LetGoMode"

typedef struct letgo {
    RLFileDescriptorRef f; /* its fd closed by its invalidation */
    int peer;              /* the other end */
    short revents;         /* what the peer saw right after */
    ssize_t got;           /* its read then */
} letgo;

static void letgo_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)f, (void)types, (void)info; /* nothing is written: never called */
}

/* On the test's helper thread, the loop asleep: the source invalidated
 * (its fd closed), then the peer asked at once, no waiting. */
static void invalidate_and_look(RLRunLoopRef rl, void *arg) {
    letgo *g = arg;
    RLFileDescriptorInvalidate(g->f);
    struct pollfd p = {g->peer, POLLIN, 0};
    g->revents = poll(&p, 1, 0) == 1 ? p.revents : 0;
    char c;
    g->got = g->revents ? read(g->peer, &c, 1) : -2;
    RLRunLoopStop(rl);
}

static void *letgo_rounds(void *arg) {
    verdict *v = arg;
    v->ok = true;
    RLRunLoopSourceRef keep = rl_test_keep_mode(LETGO_MODE);
    rl_test_settle_backend(LETGO_MODE);
    const char *backend = RLRunLoopGetBackendName(RLRunLoopGetCurrent());
    for (int i = 0; i < 20 && v->ok; i++) {
        int sv[2];
        VERDICT(v, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s", strerror(errno));
        if (!v->ok)
            break;
        letgo g = {.peer = sv[1]};
        g.f = RLFileDescriptorCreate(NULL, sv[0], true, letgo_cb, NULL);
        RLRunLoopSourceRef src = g.f ? RLFileDescriptorCreateRunLoopSource(NULL, g.f, 0) : NULL;
        VERDICT(v, g.f && src, "cannot make the source");
        if (src) {
            RLFileDescriptorEnableCallBacks(g.f, kRLFileDescriptorReadCallBack);
            RLRunLoopAddSource(RLRunLoopGetCurrent(), src, LETGO_MODE);
            rl_test_run_and_act_while_asleep(LETGO_MODE, false, invalidate_and_look, &g);
            VERDICT(v, (g.revents & (POLLIN | POLLHUP)) && g.got == 0,
                    "round %d on %s: right after the invalidation, the peer saw events %#x and read %zd (0: the end)",
                    i, backend, (unsigned)g.revents, g.got);
        }
        if (src)
            RLRelease(src);
        if (g.f)
            RLRelease(g.f);
        else
            close(sv[0]);
        close(sv[1]);
    }
    rl_test_unkeep(keep);
    return NULL;
}

static void test_another_threads_removal_lets_go_of_the_file_at_once(void **state) {
    /* Epoll lets go of a file when its registration is removed; a ring's
     * poll holds it open until the poll is cancelled. A removal made by
     * another thread while the loop sleeps is cancelled and let go of
     * before the removal returns, so the fd closed next is closed for its
     * peer at once: RLSocketPort's invalidation from another thread is
     * seen by its senders' next send. On the loop's backend after a
     * socket's first message (the ring where the kernel allows it, unless
     * RL_BACKEND forces one). */
    verdict v = {false, ""};
    rl_test_on_other_thread(letgo_rounds, &v);
    if (!v.ok)
        fail_msg("%s", v.why);
}

/* ---- refusals, in fork()ed children (a refusal is remembered by the
 * process: later loops go to epoll without asking) ---- */

/* What a refused process sees: loops on epoll that work, and a forced
 * io_uring that fails with `err`. */
static bool refused_child_checks(int err) {
    probe pr = probe_with(NULL);
    if (strcmp(pr.name, "epoll") != 0 || !pr.works || !pr.described ||
        !sock_probe_ok(&pr.data, ROUNDS, kRLSocketDataCallBack, "epoll") ||
        !sock_probe_ok(&pr.read, ROUNDS, kRLSocketReadCallBack, "epoll") || !pr.described_after) {
        fprintf(stderr, "child: default loop on '%s', then '%s' (works %d, sockets %d %d): %s\n", pr.name,
                pr.after_socket, pr.works, pr.data.works, pr.read.works, pr.msg);
        return false;
    }
    pr = probe_with("io_uring");
    RLErrorCode code = err == EPERM ? kRLErrorPermission : kRLErrorSystem;
    if (pr.name[0] || pr.err.code != code || pr.err.systemErrno != err ||
        !strstr(pr.msg, "RL_BACKEND=io_uring")) {
        fprintf(stderr, "child: forced io_uring gave '%s', error %d/%d \"%s\"\n", pr.name, pr.err.code,
                pr.err.systemErrno, pr.msg);
        return false;
    }
    return true;
}

static bool child_fault(void *arg) {
    atomic_store(&rl__faults, RL_FAULT_URING_SETUP);
    bool ok = refused_child_checks(ENOSYS);
    atomic_store(&rl__faults, 0);
    return ok;
}

static void test_a_refused_io_uring_falls_back_to_epoll_simulated(void **state) {
    if (PLAIN_BUILD)
        return; /* epoll only: nothing to refuse (the PLAIN checks above) */
    rl_test_in_child(child_fault, NULL, "io_uring refused (fault switch)");
}

/* A seccomp filter that makes io_uring_setup fail with EPERM, as a
 * container's profile does; everything else is allowed. */
static bool install_uring_filter(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

static bool child_seccomp(void *arg) {
    if (!install_uring_filter()) {
        fprintf(stderr, "child: cannot install the seccomp filter: %s\n", strerror(errno));
        return false;
    }
    if (kernel_allows_uring()) {
        fprintf(stderr, "child: the filter does not refuse io_uring_setup\n");
        return false;
    }
    return refused_child_checks(EPERM);
}

static void test_a_seccomp_filter_refusing_io_uring_falls_back_to_epoll(void **state) {
#if defined(__x86_64__)
    if (PLAIN_BUILD)
        return;
    rl_test_in_child(child_seccomp, NULL, "io_uring refused (seccomp)");
#endif
}

/* ---- fork() ---- */

static bool child_own_ring(void *arg) {
    RLRunLoopRef parents = arg;
    /* The parent's loop is the parent's. */
    RLErrorClear();
    if (RLRunLoopGetBackendName(parents) != NULL || RLErrorGetLast().code != kRLErrorInvalidState) {
        fprintf(stderr, "child: the inherited loop answered\n");
        return false;
    }
    RLRunLoopRef mine = RLRunLoopGetCurrent();
    if (!mine || mine == parents || strcmp(RLRunLoopGetBackendName(mine), expected_current()) != 0) {
        fprintf(stderr, "child: no loop of its own on %s\n", expected_current());
        return false;
    }
    sock_probe sp = socket_works(ROUNDS, kRLSocketDataCallBack);
    if (!loop_works() || !sock_probe_ok(&sp, ROUNDS, kRLSocketDataCallBack, expected_current_with_sockets())) {
        fprintf(stderr, "child: its loop's socket on '%s', not %s\n", sp.after, expected_current_with_sockets());
        return false;
    }
    return true;
}

static void test_a_fork_child_gets_its_own_ring(void **state) {
    /* The parent's loop has served fds and a socket (on a ring where the
     * kernel allows it) and is in use; the child's new loop (its own ring,
     * not the parent's mapped memory) works, and so does the parent's
     * afterwards. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(loop_works());
    sock_probe sp = socket_works(ROUNDS, kRLSocketDataCallBack);
    assert_true(sp.works);
    assert_string_equal(sp.after, expected_current_with_sockets());
    rl_test_in_child(child_own_ring, rl, "fork child's own ring");
    assert_true(loop_works());
    sp = socket_works(ROUNDS, kRLSocketDataCallBack);
    assert_true(sock_probe_ok(&sp, ROUNDS, kRLSocketDataCallBack, expected_current_with_sockets()));
    assert_string_equal(RLRunLoopGetBackendName(rl), expected_current_with_sockets());
}

int main(void) {
    const char *env = getenv("RL_BACKEND");
    snprintf(initial_env, sizeof initial_env, "%s", env ? env : "");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_default_is_epoll_until_a_socket_asks_for_the_ring),
        cmocka_unit_test(test_RL_BACKEND_epoll_is_honoured),
        cmocka_unit_test(test_RL_BACKEND_io_uring_is_honoured_or_fails_clearly),
        cmocka_unit_test(test_a_wrong_RL_BACKEND_fails_the_loop_clearly),
        cmocka_unit_test(test_GetBackendName_misuse),
        cmocka_unit_test(test_a_refused_io_uring_falls_back_to_epoll_simulated),
        cmocka_unit_test(test_a_seccomp_filter_refusing_io_uring_falls_back_to_epoll),
        cmocka_unit_test(test_a_fork_child_gets_its_own_ring),
        cmocka_unit_test(test_fds_and_timers_watched_before_the_move_are_served_after_it),
        cmocka_unit_test(test_a_move_made_by_a_run_nested_in_the_asking_callout),
        cmocka_unit_test(test_another_threads_registrations_around_the_move),
        cmocka_unit_test(test_another_threads_removal_lets_go_of_the_file_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
