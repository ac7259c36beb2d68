/* testutil.h — helpers shared by the cmocka C tests. */
#ifndef RL_TESTUTIL_H
#define RL_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <crunloop/crunloop.h>

/* Iteration count for stress loops: `full` normally, scaled down under
 * RL_TEST_SCALE=asan (/4), tsan (/20), valgrind (/100) or a number N (/N),
 * never below 1. Totals stay exact; only the amount of work changes. */
long rl_test_iters(long full);

/* Asserts that the calling thread's last error has `code`, printing the
 * message on mismatch, then clears it. */
#define assert_rl_error(code) rl_test_assert_error((code), #code, __FILE__, __LINE__)
void rl_test_assert_error(RLErrorCode code, const char *name, const char *file, int line);

/* Asserts that `call` fails (returns false or NULL) and leaves error `code`:
 * the shape of every misuse check. A macro, like the one above, so that
 * cmocka reports the test's own line and the call's text. */
#define assert_rl_fails(call, code) \
    do {                            \
        assert_false(call);         \
        assert_rl_error(code);      \
    } while (0)

/* Seconds since an arbitrary monotonic origin. */
double rl_test_now(void);

/* Starts `n` pthreads running fn(arg_i) where arg_i = base + i*stride bytes,
 * and joins them all. Fails the test if a thread cannot be created. */
void rl_test_run_threads(int n, void *(*fn)(void *), void *base, size_t stride);

/* Runs child(arg) in a fork()ed child under a 10 s alarm; the child ends in
 * exec when it returns true (a leak checker checks every process at exit).
 * Fails the test, naming `what`, if the child fails, hangs or dies. */
void rl_test_in_child(bool (*child)(void *), void *arg, const char *what);

/* fork() while another thread churns: runs churn(arg) over and over on a
 * new thread (it returns false on a failure) and forks `forks` times
 * meanwhile; each child runs child(arg) under a 10 s alarm and ends in
 * exec when it returns true (a leak checker checks every process at exit,
 * and a child holds what the parent's other thread had made). Fails the
 * test if a child fails, hangs or dies, or the churn fails. */
void rl_test_fork_while_churning(long forks, bool (*churn)(void *), bool (*child)(void *), void *arg);

/* Runs fn(arg) on a new thread, joins it and returns its result: how a test
 * asks "what does another thread see?" (a lock held here, a loop's owner). */
void *rl_test_on_other_thread(void *(*fn)(void *), void *arg);

/* A version-0 source nobody signals, added to `mode` of the current loop:
 * it keeps the mode from being empty (an empty mode finishes at once).
 * rl_test_unkeep invalidates and releases it. */
RLRunLoopSourceRef rl_test_keep_mode(RLRunLoopMode mode);
void rl_test_unkeep(RLRunLoopSourceRef source);

/* Ends a fork()ed child of a test with `code`: 0 by exec'ing /bin/true,
 * so that valgrind (make check-leak, which does not follow exec) never
 * leak-checks the child, a copy of a process whose other threads held
 * memory in their registers at the fork (it would look lost); any other
 * code by _exit. */
_Noreturn void rl_test_child_exit(int code);

/* A loop on the default backend (RL_BACKEND unset) is on epoll until a
 * socket's callout asks for the ring (a Data callback's read, an
 * RLSocketSendData), and moves to io_uring, where the kernel allows it,
 * at its next wait. This makes the calling thread's loop take that step
 * now, in `mode`: a scratch Data socket's one delivery, then a wait. A
 * test that counts the ring's work, or the loop's descriptors, from here
 * on sees the backend the loop keeps. Nothing on a forced backend. */
void rl_test_settle_backend(RLRunLoopMode mode);

/* Polls until `rl` sleeps waiting for work (at most 10 s; the caller's
 * assertions catch a loop that never does). For a thread that must act on
 * a loop that is already asleep. */
void rl_test_wait_until_waiting(RLRunLoopRef rl);

/* Runs the current thread's loop in `mode` (up to 30 s) while a helper
 * thread waits until the loop sleeps and then calls act(loop, arg): how a
 * test checks what a stop, wake-up, signal or timer change from another
 * thread does to a sleeping loop. Returns the run's result after joining
 * the helper. */
RLRunLoopRunResult rl_test_run_and_act_while_asleep(RLRunLoopMode mode, bool return_after_source,
                                                    void (*act)(RLRunLoopRef rl, void *arg), void *arg);

#endif
