/* test_describe.c — RLCopyDescription of timers and fd objects while another
 * thread changes them: the description reads a consistent state under the
 * object's lock (run under `make check-tsan` to see a race if it did not). */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void timer_cb(RLRunLoopTimerRef t, void *info) {}
static void fd_cb(RLFileDescriptorRef f, RLOptionFlags types, void *info) {}

static _Atomic bool stop_changing;

static void *move_timer(void *arg) {
    RLRunLoopTimerRef t = arg;
    for (long i = 0; !atomic_load(&stop_changing); i++) {
        if (!RLRunLoopTimerSetNextFireDate(t, 1e9 + (double)i))
            return (void *)1;
        if (!RLRunLoopTimerSetTolerance(t, (double)(i & 7)))
            return (void *)1;
    }
    return NULL;
}

static void test_timer_description_while_another_thread_moves_it(void **state) {
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 1e9, 0, 0, 0, timer_cb, NULL);
    assert_non_null(t);
    /* In a loop, as a user's timer is: moving it then touches the heaps too. */
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, kRLRunLoopDefaultMode));
    atomic_store(&stop_changing, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, move_timer, t), 0);
    long n = rl_test_iters(20000);
    for (long i = 0; i < n; i++) {
        char *d = RLCopyDescription(t);
        assert_non_null(d);
        assert_non_null(strstr(d, "RLRunLoopTimer"));
        free(d);
    }
    atomic_store(&stop_changing, true);
    void *res;
    assert_int_equal(pthread_join(th, &res), 0);
    assert_null(res);
    assert_true(RLRunLoopTimerInvalidate(t));
    char *d = RLCopyDescription(t);
    assert_non_null(strstr(d, "invalid"));
    free(d);
    RLRelease(t);
}

static void *toggle_fd(void *arg) {
    RLFileDescriptorRef f = arg;
    while (!atomic_load(&stop_changing)) {
        if (!RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack))
            return (void *)1;
        if (!RLFileDescriptorDisableCallBacks(f, kRLFileDescriptorReadCallBack))
            return (void *)1;
    }
    return NULL;
}

static void test_fd_description_while_another_thread_changes_it(void **state) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    RLFileDescriptorRef f = RLFileDescriptorCreate(NULL, p[0], true, fd_cb, NULL);
    assert_non_null(f);
    atomic_store(&stop_changing, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, toggle_fd, f), 0);
    long n = rl_test_iters(20000);
    for (long i = 0; i < n; i++) {
        char *d = RLCopyDescription(f);
        assert_non_null(d);
        assert_non_null(strstr(d, "RLFileDescriptor"));
        free(d);
    }
    atomic_store(&stop_changing, true);
    void *res;
    assert_int_equal(pthread_join(th, &res), 0);
    assert_null(res);
    assert_true(RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorWriteCallBack));
    char *d = RLCopyDescription(f);
    assert_non_null(strstr(d, " write"));
    free(d);
    assert_true(RLFileDescriptorInvalidate(f));
    d = RLCopyDescription(f);
    assert_non_null(strstr(d, "invalid"));
    free(d);
    RLRelease(f);
    close(p[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timer_description_while_another_thread_moves_it),
        cmocka_unit_test(test_fd_description_while_another_thread_changes_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
