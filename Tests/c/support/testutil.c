#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
