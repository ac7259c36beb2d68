/* test_resolver.c — the process-wide resolver thread (rl_resolver.c):
 * lookups are answered off the caller's thread, in turn, and a child of
 * fork() gets a resolver of its own even when the parent's was in the
 * middle of its queue. */
#include "testutil.h"
#include "rl_resolver.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

/* ThreadSanitizer kills a child that starts threads after a multi-threaded
 * fork unless told otherwise; starting its own resolver thread is what the
 * child here is checked for. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }

typedef struct answer {
    rl__lookup l;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    int eai;
    bool has_addr;
    pthread_t on;
} answer;

static void answered(rl__lookup *l, int eai, struct addrinfo *res) {
    answer *a = (answer *)l;
    pthread_mutex_lock(&a->lock);
    a->eai = eai;
    a->has_addr = res != NULL;
    a->on = pthread_self();
    a->done = true;
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
    if (res)
        freeaddrinfo(res);
}

/* Looks host up and waits for the answer (at most `secs`); false if none
 * came. */
static bool look_up(answer *a, const char *host, int secs) {
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    a->l.host = host;
    a->l.service = "80";
    a->l.done = answered;
    if (rl__resolver_lookup(&a->l) != 0)
        return false;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += secs;
    pthread_mutex_lock(&a->lock);
    while (!a->done && pthread_cond_timedwait(&a->cond, &a->lock, &until) == 0) {
    }
    bool done = a->done;
    pthread_mutex_unlock(&a->lock);
    return done;
}

static void test_lookups_are_answered_on_the_resolver_thread(void **state) {
    (void)state;
    answer a;
    assert_true(look_up(&a, "127.0.0.1", 30));
    assert_int_equal(a.eai, 0);
    assert_true(a.has_addr);
    assert_false(pthread_equal(a.on, pthread_self()));
    /* A name the resolver cannot find is answered with its EAI_ code. */
    assert_true(look_up(&a, "no-such-host.invalid", 30));
    assert_int_not_equal(a.eai, 0);
    assert_false(a.has_addr);
}

/* fork() while another thread keeps the resolver busy: its lock is held
 * across fork() (its slot in rl_fork.h's order), so the child never finds
 * it taken by a thread it does not have, and its first lookup starts a
 * resolver thread of the child's own. A child that hangs is ended by the
 * alarm, and the parent sees it die. */
static bool churn_lookups(void *arg) {
    (void)arg;
    answer a;
    if (!look_up(&a, "localhost", 30))
        return false;
    pthread_mutex_destroy(&a.lock);
    pthread_cond_destroy(&a.cond);
    return true;
}

static bool child_looks_up(void *arg) {
    (void)arg;
    answer a;
    return look_up(&a, "127.0.0.1", 8) && a.eai == 0 && a.has_addr;
}

static void test_fork_while_another_thread_looks_up(void **state) {
    (void)state;
    rl_test_fork_while_churning(rl_test_iters(100), churn_lookups, child_looks_up, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups_are_answered_on_the_resolver_thread),
        cmocka_unit_test(test_fork_while_another_thread_looks_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
