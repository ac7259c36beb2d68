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

/* Seconds since an arbitrary monotonic origin. */
double rl_test_now(void);

/* Starts `n` pthreads running fn(arg_i) where arg_i = base + i*stride bytes,
 * and joins them all. Fails the test if a thread cannot be created. */
void rl_test_run_threads(int n, void *(*fn)(void *), void *base, size_t stride);

#endif
