/* stale.c — see stale.h. */
#include "stale.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define RL_STALE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL_STALE_ASAN 1
#endif
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RL_STALE_VALGRIND 1
#endif
#endif

static bool memory_checked(void) {
#ifdef RL_STALE_ASAN
    return true;
#elif defined(RL_STALE_VALGRIND)
    return RUNNING_ON_VALGRIND != 0;
#else
    return false;
#endif
}

void rl_test_stale(bool (*refused)(const void *stale), const void *stale) {
    if (!memory_checked()) {
        RLErrorClear();
        assert_true(refused(stale));
        assert_rl_error(kRLErrorInvalidObject);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)refused(stale); /* AddressSanitizer ends the child here */
#ifdef RL_STALE_VALGRIND
        if (VALGRIND_COUNT_ERRORS > 0)
            _exit(1); /* valgrind reported the stale read */
#endif
        _exit(0); /* not reported: the parent fails the test */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
