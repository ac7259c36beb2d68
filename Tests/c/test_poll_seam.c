/* test_poll_seam.c — the kernel seam's registrations (rl_poll.h), below
 * any run loop: both backends give epoll_ctl's answers — EEXIST, ENOENT,
 * EBADF, EPERM — for the same calls, including on an fd number that was
 * closed and now names another file (the io_uring backend keeps a file's
 * identity in one word per registration), report what a registration asks
 * for under its tag, and report nothing for a registration removed or
 * replaced. The io_uring backend refuses the events it cannot keep. Each
 * test runs on epoll and on io_uring (skipped, as skipped, where the
 * kernel or a PLAIN build has no io_uring). */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rl_poll.h"

/* A poller as a loop makes one, on the backend `name`; its thread is the
 * caller's. The test is skipped (cmocka's skip leaves it) where the
 * backend is refused: io_uring in a PLAIN build or where the kernel
 * refuses it (test_backend checks that the refusal is right). */
static void open_or_skip(rl__poller *p, _Atomic int *nap, const char *name) {
    memset(p, 0, sizeof *p);
    p->epfd = p->evfd = p->tfd = -1;
    p->owner = pthread_self();
    p->nap_word = nap;
    const char *was = getenv("RL_BACKEND");
    char *saved = was ? strdup(was) : NULL;
    setenv("RL_BACKEND", name, 1);
    bool ok = rl__poll_open(p, "test_poll_seam");
    if (saved) {
        setenv("RL_BACKEND", saved, 1);
        free(saved);
    } else {
        unsetenv("RL_BACKEND");
    }
    if (!ok) {
        rl__poll_close(p);
        skip();
    }
    assert_string_equal(rl__poll_backend_name(p), name);
}

/* The reports of one wait of at most `ms` for fd (others ignored: the
 * loop's own eventfd and timerfd carry tag 0): how many, their events and
 * tag in *events and *gen (the last one). */
static int reports_for(rl__poller *p, int fd, int ms, uint32_t *events, uint32_t *gen) {
    struct epoll_event ev[16];
    int n = rl__poll_wait(p, ev, 16, ms);
    assert_true(n >= 0);
    int got = 0;
    for (int i = 0; i < n; i++) {
        if (rl__ev_fd(&ev[i]) != fd || rl__ev_gen(&ev[i]) == 0)
            continue;
        got++;
        *events = ev[i].events;
        *gen = rl__ev_gen(&ev[i]);
    }
    return got;
}

static void pipe_nb(int fds[2]) { assert_int_equal(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0); }

static void answers_on(const char *name) {
    rl__poller p;
    _Atomic int nap = 0;
    open_or_skip(&p, &nap, name);
    int a[2], b[2];
    pipe_nb(a);
    /* Absent: MOD and DEL say ENOENT; ADD once, then EEXIST. */
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_MOD, a[0], EPOLLIN, 7), ENOENT);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_DEL, a[0], 0, 0), ENOENT);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, a[0], EPOLLIN | EPOLLONESHOT, 7), 0);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, a[0], EPOLLIN | EPOLLONESHOT, 8), EEXIST);
    /* A closed number: EBADF; a negative one too. */
    pipe_nb(b);
    int dead = b[0];
    close(b[0]);
    close(b[1]);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, dead, EPOLLIN, 9), EBADF);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_MOD, -1, EPOLLIN, 9), EBADF);
    /* A regular file: EPERM, as epoll refuses files without poll. */
    char path[] = "/tmp/test_poll_seam.XXXXXX";
    int file = mkstemp(path);
    assert_true(file >= 0);
    unlink(path);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, file, EPOLLIN, 10), EPERM);
    close(file);
    /* Its report comes once, under its tag; the one-shot then waits for a MOD. */
    assert_int_equal(write(a[1], "x", 1), 1);
    uint32_t events = 0, gen = 0;
    assert_int_equal(reports_for(&p, a[0], 5000, &events, &gen), 1);
    assert_true(events & EPOLLIN);
    assert_int_equal(gen, 7);
    assert_int_equal(reports_for(&p, a[0], 50, &events, &gen), 0);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_MOD, a[0], EPOLLIN | EPOLLONESHOT, 11), 0);
    assert_int_equal(reports_for(&p, a[0], 5000, &events, &gen), 1);
    assert_int_equal(gen, 11);
    /* Removed: no report, though the pipe still holds its byte. */
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_DEL, a[0], 0, 0), 0);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_MOD, a[0], EPOLLIN, 12), ENOENT);
    assert_int_equal(reports_for(&p, a[0], 50, &events, &gen), 0);
    close(a[0]);
    close(a[1]);
    rl__poll_close(&p);
}

static void test_epoll_ctls_answers_on_epoll(void **state) {
    (void)state;
    answers_on("epoll");
}

static void test_epoll_ctls_answers_on_io_uring(void **state) {
    (void)state;
    answers_on("io_uring");
}

/* A registered number closed behind the seam's back and reused by another
 * file (a socket for a pipe): the old registration is gone with its file,
 * as epoll's is: MOD and DEL say ENOENT, ADD makes a new one, whose
 * reports are the new file's under the new tag; the old file's readiness
 * is never reported. */
static void reused_on(const char *name) {
    rl__poller p;
    _Atomic int nap = 0;
    open_or_skip(&p, &nap, name);
    for (int round = 0; round < 3; round++) {
        int a[2];
        pipe_nb(a);
        assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, a[0], EPOLLIN, 20), 0);
        int keep = dup(a[1]);
        int num = a[0];
        close(a[0]);
        close(a[1]);
        int s[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, s), 0);
        if (s[0] != num) {
            /* Put the socket on the old number. */
            assert_int_equal(dup3(s[0], num, O_CLOEXEC), num);
            close(s[0]);
            s[0] = num;
        }
        /* The old pipe made readable (epoll: it has no reader left, EPIPE;
         * io_uring: its poll still holds the read end): never reported. */
        (void)!write(keep, "o", 1);
        if (round == 0) {
            assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_MOD, num, EPOLLIN, 21), ENOENT);
        } else if (round == 1) {
            assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_DEL, num, 0, 0), ENOENT);
        }
        assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, num, EPOLLIN, 22), 0);
        uint32_t events = 0, gen = 0;
        assert_int_equal(reports_for(&p, num, 50, &events, &gen), 0);
        assert_int_equal(write(s[1], "n", 1), 1);
        int got = 0;
        for (int i = 0; i < 100 && !got; i++)
            got = reports_for(&p, num, 100, &events, &gen);
        assert_true(got >= 1);
        assert_int_equal(gen, 22);
        assert_true(events & EPOLLIN);
        assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_DEL, num, 0, 0), 0);
        close(keep);
        close(s[0]);
        close(s[1]);
    }
    rl__poll_close(&p);
}

static void test_a_reused_number_is_another_file_on_epoll(void **state) {
    (void)state;
    reused_on("epoll");
}

static void test_a_reused_number_is_another_file_on_io_uring(void **state) {
    (void)state;
    reused_on("io_uring");
}

/* The ring keeps epoll's events in 16 bits: EPOLLWAKEUP and EPOLLEXCLUSIVE,
 * which no loop asks for, are refused clearly (EINVAL) and change nothing;
 * every event a loop asks for is kept. */
static void test_io_uring_refuses_events_it_cannot_keep(void **state) {
    (void)state;
    rl__poller p;
    _Atomic int nap = 0;
    open_or_skip(&p, &nap, "io_uring");
    int a[2];
    pipe_nb(a);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, a[0], EPOLLIN | EPOLLEXCLUSIVE, 30), EINVAL);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_MOD, a[0], EPOLLIN, 30), ENOENT); /* nothing made */
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_ADD, a[0], EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, 31), 0);
    assert_int_equal(rl__poll_ctl(&p, EPOLL_CTL_MOD, a[0], EPOLLIN | EPOLLWAKEUP, 32), EINVAL);
    /* The registration as it was: one-shot, tag 31. */
    close(a[1]);
    uint32_t events = 0, gen = 0;
    assert_int_equal(reports_for(&p, a[0], 5000, &events, &gen), 1);
    assert_int_equal(gen, 31);
    assert_true(events & (EPOLLHUP | EPOLLIN));
    assert_int_equal(reports_for(&p, a[0], 50, &events, &gen), 0);
    close(a[0]);
    rl__poll_close(&p);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epoll_ctls_answers_on_epoll),
        cmocka_unit_test(test_epoll_ctls_answers_on_io_uring),
        cmocka_unit_test(test_a_reused_number_is_another_file_on_epoll),
        cmocka_unit_test(test_a_reused_number_is_another_file_on_io_uring),
        cmocka_unit_test(test_io_uring_refuses_events_it_cannot_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
