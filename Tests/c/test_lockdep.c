/* test_lockdep.c — the lock-order detector (RLLockDebug.h) on deliberate
 * inversions. Every inversion here is provoked without any chance of a
 * real deadlock: the two orders run in threads that run one after the
 * other (thread 1 takes A then B and is joined; then thread 2 takes B then
 * A), which is exactly the case a detector must catch before it bites. */
#include "testutil.h"

#include <crunloop/RLLock.h>
#include <crunloop/RLLockDebug.h>
#include <crunloop/RLReadWriteLock.h>
#include <crunloop/RLSpinLock.h>
#include <crunloop/RLSync.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_argv0;

/* ---- collecting reports ---- */

typedef struct seen {
    int count;
    const void *held, *acquiring;
    char held_name[128], acquiring_name[128];
    char held_where[256], acquiring_where[256], prior_where[256];
    int path_length;
    char description[4096];
} seen;

static seen g_seen;
static pthread_mutex_t g_seen_mu = PTHREAD_MUTEX_INITIALIZER;

static void collect(const RLLockDebugReport *r, void *info) {
    seen *s = info;
    pthread_mutex_lock(&g_seen_mu);
    s->count++;
    s->held = r->heldLock;
    s->acquiring = r->acquiringLock;
    snprintf(s->held_name, sizeof s->held_name, "%s", r->heldLockName);
    snprintf(s->acquiring_name, sizeof s->acquiring_name, "%s", r->acquiringLockName);
    snprintf(s->held_where, sizeof s->held_where, "%s", r->heldLockWhereSymbol);
    snprintf(s->acquiring_where, sizeof s->acquiring_where, "%s", r->acquiringLockWhereSymbol);
    snprintf(s->prior_where, sizeof s->prior_where, "%s", r->priorHeldWhereSymbol);
    s->path_length = r->pathLength;
    snprintf(s->description, sizeof s->description, "%s", r->description);
    pthread_mutex_unlock(&g_seen_mu);
}

static int setup(void **state) {
    memset(&g_seen, 0, sizeof g_seen);
    RLLockDebugReset();
    RLLockDebugSetReportHandler(collect, &g_seen);
    RLLockDebugSetEnabled(true);
    return 0;
}

static int teardown(void **state) {
    RLLockDebugSetEnabled(false);
    RLLockDebugSetReportHandler(NULL, NULL);
    RLLockDebugReset();
    return 0;
}

static void run_in_thread(void *(*fn)(void *), void *arg) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    pthread_join(t, NULL);
}

/* ---- ABBA on @synchronized monitors ---- */

static int g_a, g_b, g_c;

typedef struct pair {
    const void *first, *second;
} pair;

static void *sync_in_order(void *arg) {
    pair *p = arg;
    RLSyncEnter(p->first);
    RLSyncEnter(p->second);
    RLSyncExit(p->second);
    RLSyncExit(p->first);
    return NULL;
}

static bool contains(const char *hay, const char *needle) {
    return strstr(hay, needle) != NULL;
}

static void test_sync_abba_reported(void **state) {
    pair ab = {&g_a, &g_b}, ba = {&g_b, &g_a};
    run_in_thread(sync_in_order, &ab);
    assert_int_equal(g_seen.count, 0);
    assert_int_equal(RLLockDebugGetReportCount(), 0);
    run_in_thread(sync_in_order, &ba);
    assert_int_equal(g_seen.count, 1);
    assert_int_equal(RLLockDebugGetReportCount(), 1);

    /* Thread 2 held B and was taking A. */
    assert_ptr_equal(g_seen.held, &g_b);
    assert_ptr_equal(g_seen.acquiring, &g_a);
    char name_a[64], name_b[64];
    snprintf(name_a, sizeof name_a, "@synchronized(%p)", (void *)&g_a);
    snprintf(name_b, sizeof name_b, "@synchronized(%p)", (void *)&g_b);
    assert_string_equal(g_seen.held_name, name_b);
    assert_string_equal(g_seen.acquiring_name, name_a);
    assert_int_equal(g_seen.path_length, 1);
    /* Where each was taken: the call sites are in sync_in_order. */
    assert_true(contains(g_seen.held_where, "test_lockdep"));
    assert_true(contains(g_seen.acquiring_where, "test_lockdep"));
    assert_true(contains(g_seen.prior_where, "test_lockdep"));
    assert_true(contains(g_seen.description, name_a));
    assert_true(contains(g_seen.description, name_b));
    assert_true(contains(g_seen.description, "lock-order inversion"));

    /* The same inversion again is not reported twice. */
    run_in_thread(sync_in_order, &ba);
    run_in_thread(sync_in_order, &ab);
    assert_int_equal(g_seen.count, 1);
    /* And the locks still work. */
    assert_true(RLSyncEnter(&g_a));
    assert_true(RLSyncExit(&g_a));
}

/* ---- ABBA on spin locks (the inline functions divert while debugging) ---- */

static RLSpinLock g_spin_a = RL_SPINLOCK_INIT, g_spin_b = RL_SPINLOCK_INIT;

static void *spin_in_order(void *arg) {
    pair *p = arg;
    RLSpinLock *first = (RLSpinLock *)p->first, *second = (RLSpinLock *)p->second;
    RLSpinLockLock(first);
    RLSpinLockLock(second);
    RLSpinLockUnlock(second);
    RLSpinLockUnlock(first);
    return NULL;
}

static void test_spinlock_abba_reported(void **state) {
    pair ab = {&g_spin_a, &g_spin_b}, ba = {&g_spin_b, &g_spin_a};
    run_in_thread(spin_in_order, &ab);
    assert_int_equal(g_seen.count, 0);
    run_in_thread(spin_in_order, &ba);
    assert_int_equal(g_seen.count, 1);
    char name_a[64];
    snprintf(name_a, sizeof name_a, "RLSpinLock %p", (void *)&g_spin_a);
    assert_string_equal(g_seen.acquiring_name, name_a);
    assert_ptr_equal(g_seen.held, &g_spin_b);
    assert_false(RLSpinLockIsLocked(&g_spin_a));
    assert_false(RLSpinLockIsLocked(&g_spin_b));
}

/* ---- ABBA on RLLock, with names ---- */

static void *rllock_in_order(void *arg) {
    pair *p = arg;
    RLLockLock((RLLockRef)p->first);
    RLLockLock((RLLockRef)p->second);
    RLLockUnlock((RLLockRef)p->second);
    RLLockUnlock((RLLockRef)p->first);
    return NULL;
}

static void test_rllock_abba_reported_with_names(void **state) {
    RLLockRef a = RLLockCreate(), b = RLLockCreate();
    assert_non_null(a);
    assert_non_null(b);
    assert_true(RLLockSetName(a, "accounts"));
    assert_true(RLLockSetName(b, "journal"));
    pair ab = {a, b}, ba = {b, a};
    run_in_thread(rllock_in_order, &ab);
    assert_int_equal(g_seen.count, 0);
    run_in_thread(rllock_in_order, &ba);
    assert_int_equal(g_seen.count, 1);
    assert_ptr_equal(g_seen.held, b);
    assert_ptr_equal(g_seen.acquiring, a);
    assert_true(contains(g_seen.held_name, "'journal'"));
    assert_true(contains(g_seen.acquiring_name, "'accounts'"));
    assert_true(contains(g_seen.description, "'journal'"));
    assert_true(contains(g_seen.description, "'accounts'"));
    assert_true(contains(g_seen.held_where, "test_lockdep")); /* static functions symbolize as file+offset */
    assert_true(RLRelease(a));
    assert_true(RLRelease(b));
}

/* Destroying a lock forgets its edges: a new lock at a reused address
 * starts clean. */
static void test_rllock_destroy_forgets(void **state) {
    RLLockRef a = RLLockCreate(), b = RLLockCreate();
    pair ab = {a, b};
    run_in_thread(rllock_in_order, &ab);
    assert_true(RLRelease(a));
    RLLockRef a2 = RLLockCreate();
    pair ba = {b, a2};
    run_in_thread(rllock_in_order, &ba);
    assert_int_equal(g_seen.count, 0);
    assert_true(RLRelease(a2));
    assert_true(RLRelease(b));
}

/* ---- mixed kinds and longer cycles ---- */

static void *mixed_sync_then_spin(void *arg) {
    RLSyncEnter(&g_a);
    RLSpinLockLock(&g_spin_a);
    RLSpinLockUnlock(&g_spin_a);
    RLSyncExit(&g_a);
    return NULL;
}

static void *mixed_spin_then_sync(void *arg) {
    RLSpinLockLock(&g_spin_a);
    RLSyncEnter(&g_a);
    RLSyncExit(&g_a);
    RLSpinLockUnlock(&g_spin_a);
    return NULL;
}

static void test_inversion_across_lock_kinds(void **state) {
    run_in_thread(mixed_sync_then_spin, NULL);
    run_in_thread(mixed_spin_then_sync, NULL);
    assert_int_equal(g_seen.count, 1);
    assert_ptr_equal(g_seen.held, &g_spin_a);
    assert_ptr_equal(g_seen.acquiring, &g_a);
}

static void test_three_lock_cycle_found_through_path(void **state) {
    pair ab = {&g_a, &g_b}, bc = {&g_b, &g_c}, ca = {&g_c, &g_a};
    run_in_thread(sync_in_order, &ab);
    run_in_thread(sync_in_order, &bc);
    assert_int_equal(g_seen.count, 0);
    /* No edge C -> A or A -> C exists directly; the path A -> B -> C does. */
    run_in_thread(sync_in_order, &ca);
    assert_int_equal(g_seen.count, 1);
    assert_ptr_equal(g_seen.held, &g_c);
    assert_ptr_equal(g_seen.acquiring, &g_a);
    assert_int_equal(g_seen.path_length, 2);
    char name_b[64];
    snprintf(name_b, sizeof name_b, "@synchronized(%p)", (void *)&g_b);
    assert_true(contains(g_seen.description, name_b)); /* the middle of the path */
}

/* ---- no false reports ---- */

static void *consistent_order(void *arg) {
    for (int i = 0; i < 100; i++) {
        RL_SYNCHRONIZED(&g_a) {
            RL_SYNCHRONIZED(&g_b) {
                RL_SYNCHRONIZED(&g_a) { /* recursive re-entry: no B -> A */
                    RL_SYNCHRONIZED(&g_c) {
                    }
                }
            }
        }
    }
    return NULL;
}

static void test_consistent_order_and_recursion_not_reported(void **state) {
    int dummy = 0;
    rl_test_run_threads(4, consistent_order, &dummy, 0);
    assert_int_equal(g_seen.count, 0);
    assert_int_equal(RLLockDebugGetReportCount(), 0);
}

static void *try_in_reverse(void *arg) {
    RLSyncEnter(&g_b);
    bool got = RLSyncTryEnter(&g_a); /* cannot block, so cannot deadlock */
    if (got)
        RLSyncExit(&g_a);
    RLSyncExit(&g_b);
    return NULL;
}

static void test_try_lock_not_reported(void **state) {
    pair ab = {&g_a, &g_b};
    run_in_thread(sync_in_order, &ab);
    run_in_thread(try_in_reverse, NULL);
    assert_int_equal(g_seen.count, 0);
}

static void test_forget_lock(void **state) {
    pair ab = {&g_a, &g_b}, ba = {&g_b, &g_a};
    run_in_thread(sync_in_order, &ab);
    assert_true(RLLockDebugForgetLock(&g_a));
    run_in_thread(sync_in_order, &ba);
    assert_int_equal(g_seen.count, 0);
    assert_rl_fails(RLLockDebugForgetLock(NULL), kRLErrorInvalidArgument);
}

static void test_disabled_records_nothing(void **state) {
    assert_true(RLLockDebugIsEnabled());
    RLLockDebugSetEnabled(false);
    assert_false(RLLockDebugIsEnabled());
    pair ab = {&g_a, &g_b}, ba = {&g_b, &g_a};
    run_in_thread(sync_in_order, &ab);
    run_in_thread(sync_in_order, &ba);
    assert_int_equal(g_seen.count, 0);

    /* A lock taken while on and released while off is not remembered as
     * held once debugging is back on. */
    RLLockDebugSetEnabled(true);
    RLSyncEnter(&g_b);
    RLLockDebugSetEnabled(false);
    RLSyncExit(&g_b);
    RLLockDebugSetEnabled(true);
    run_in_thread(sync_in_order, &ab);
    RLSyncEnter(&g_c); /* would be "B held while taking C" if B were stale */
    RLSyncExit(&g_c);
    pair cb = {&g_c, &g_b};
    run_in_thread(sync_in_order, &cb);
    assert_int_equal(g_seen.count, 0);
}

/* ---- the handler may take locks; the default goes to stderr ---- */

static RLSpinLock g_handler_lock = RL_SPINLOCK_INIT;
static int g_handler_calls;

static void locking_handler(const RLLockDebugReport *r, void *info) {
    /* Runs with no detector lock held: taking RL locks here is fine, and a
     * nested inversion here would be reported, not deadlock. */
    RLSpinLockLock(&g_handler_lock);
    RLSyncEnter(&g_c);
    g_handler_calls++;
    RLSyncExit(&g_c);
    RLSpinLockUnlock(&g_handler_lock);
}

static void test_handler_may_take_locks(void **state) {
    RLLockDebugSetReportHandler(locking_handler, NULL);
    g_handler_calls = 0;
    pair ab = {&g_a, &g_b}, ba = {&g_b, &g_a};
    run_in_thread(sync_in_order, &ab);
    run_in_thread(sync_in_order, &ba);
    assert_int_equal(g_handler_calls, 1);
    assert_int_equal(RLLockDebugGetReportCount(), 1);
}

static void test_default_report_goes_to_stderr(void **state) {
    RLLockDebugSetReportHandler(NULL, NULL);
    char path[] = "/tmp/rl_lockdep_stderr_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    pair ab = {&g_a, &g_b}, ba = {&g_b, &g_a};
    run_in_thread(sync_in_order, &ab);
    run_in_thread(sync_in_order, &ba);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = {0};
    assert_true(pread(fd, text, sizeof text - 1, 0) > 0);
    close(fd);
    unlink(path);
    char name_a[64];
    snprintf(name_a, sizeof name_a, "@synchronized(%p)", (void *)&g_a);
    assert_true(contains(text, "RLLockDebug: possible deadlock"));
    assert_true(contains(text, name_a));
    assert_int_equal(RLLockDebugGetReportCount(), 1);
}

#if __BLOCKS__
static void test_block_handler(void **state) {
    __block int calls = 0;
    __block const void *held = NULL;
    RLLockDebugSetReportBlock(^(const RLLockDebugReport *r) {
        calls++;
        held = r->heldLock;
    });
    pair ab = {&g_a, &g_b}, ba = {&g_b, &g_a};
    run_in_thread(sync_in_order, &ab);
    run_in_thread(sync_in_order, &ba);
    RLLockDebugSetReportBlock(NULL);
    assert_int_equal(calls, 1);
    assert_ptr_equal(held, &g_b);
}
#endif

/* ---- RL_LOCK_DEBUG=1 is read when the library loads ---- */

static void test_environment_variable(void **state) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "RL_LOCK_DEBUG=1 '%s' --print-enabled", g_argv0);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[32] = {0};
    assert_non_null(fgets(out, sizeof out, p));
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, "enabled=1\n");

    snprintf(cmd, sizeof cmd, "RL_LOCK_DEBUG= '%s' --print-enabled", g_argv0);
    p = popen(cmd, "r");
    assert_non_null(p);
    memset(out, 0, sizeof out);
    assert_non_null(fgets(out, sizeof out, p));
    assert_int_equal(pclose(p), 0);
    assert_string_equal(out, "enabled=0\n");
}

/* ---- read locks: readers do not block each other ---- */

typedef struct rw_order {
    RLReadWriteLockRef first, second;
    bool first_write, second_write;
} rw_order;

static bool rw_take(RLReadWriteLockRef l, bool write) {
    return write ? RLReadWriteLockWriteLock(l) : RLReadWriteLockReadLock(l);
}

static void *rw_in_order(void *arg) {
    rw_order *o = arg;
    bool ok = rw_take(o->first, o->first_write) && rw_take(o->second, o->second_write);
    RLReadWriteLockUnlock(o->second);
    RLReadWriteLockUnlock(o->first);
    return ok ? NULL : (void *)1;
}

static void run_rw(rw_order *o) {
    pthread_t t;
    void *r;
    assert_int_equal(pthread_create(&t, NULL, rw_in_order, o), 0);
    pthread_join(t, &r);
    assert_null(r);
}

static void test_read_read_abba_not_reported(void **state) {
    RLReadWriteLockRef a = RLReadWriteLockCreate(), b = RLReadWriteLockCreate();
    rw_order ab = {a, b, false, false}, ba = {b, a, false, false};
    run_rw(&ab);
    run_rw(&ba);
    run_rw(&ab);
    assert_int_equal(g_seen.count, 0);
    /* Once A and B have writers, queued writers can block the readers
     * between them (writer preference): the same orders now count. */
    RLReadWriteLockRef e = RLReadWriteLockCreate(), f = RLReadWriteLockCreate();
    assert_true(RLReadWriteLockWriteLock(e) && RLReadWriteLockUnlock(e));
    assert_true(RLReadWriteLockWriteLock(f) && RLReadWriteLockUnlock(f));
    rw_order ef = {e, f, false, false}, fe = {f, e, false, false};
    run_rw(&ef);
    assert_int_equal(g_seen.count, 0);
    run_rw(&fe);
    assert_int_equal(g_seen.count, 1);
    g_seen.count = 0;
    RLRelease(e);
    RLRelease(f);
    /* Read C then write D, against write D then read C: the second thread
     * can always join the first's read of C, so nothing is reported. */
    RLReadWriteLockRef c = RLReadWriteLockCreate(), d = RLReadWriteLockCreate();
    rw_order cd = {c, d, false, true}, dc = {d, c, true, false};
    run_rw(&cd);
    run_rw(&dc);
    assert_int_equal(g_seen.count, 0);
    /* Read D then write C against read C then write D: each writer waits
     * for the other's reader. Reported. */
    rw_order dc_rw = {d, c, false, true};
    run_rw(&dc_rw);
    assert_int_equal(g_seen.count, 1);
    RLRelease(a);
    RLRelease(b);
    RLRelease(c);
    RLRelease(d);
}

static void test_write_read_abba_reported(void **state) {
    RLReadWriteLockRef a = RLReadWriteLockCreate(), b = RLReadWriteLockCreate();
    assert_true(RLReadWriteLockSetName(a, "table A"));
    assert_true(RLReadWriteLockSetName(b, "table B"));
    /* Write A then read B; write B then read A. */
    rw_order ab = {a, b, true, false}, ba = {b, a, true, false};
    run_rw(&ab);
    assert_int_equal(g_seen.count, 0);
    run_rw(&ba);
    assert_int_equal(g_seen.count, 1);
    assert_ptr_equal(g_seen.held, b);
    assert_ptr_equal(g_seen.acquiring, a);
    assert_true(contains(g_seen.held_name, "table B"));
    assert_true(contains(g_seen.acquiring_name, "table A"));
    assert_true(contains(g_seen.acquiring_name, "for reading"));
    assert_false(contains(g_seen.held_name, "for reading"));
    RLRelease(a);
    RLRelease(b);
}

/* A reader-only junction in the middle of a longer cycle breaks it; a
 * writer there closes it. A -> B taken (write, read), B -> C (read, write):
 * B is entered and held shared, so C -> A (write, write) closes no cycle.
 * Then B -> C with B held for writing does. */
static void test_read_junction_breaks_longer_cycle(void **state) {
    RLReadWriteLockRef a = RLReadWriteLockCreate(), b = RLReadWriteLockCreate(),
                       c = RLReadWriteLockCreate();
    rw_order ab = {a, b, true, false}, bc = {b, c, false, true}, ca = {c, a, true, true};
    run_rw(&ab);
    run_rw(&bc);
    run_rw(&ca);
    assert_int_equal(g_seen.count, 0);
    rw_order bc_w = {b, c, true, true};
    run_rw(&bc_w);
    assert_int_equal(g_seen.count, 1);
    assert_ptr_equal(g_seen.held, b);
    assert_ptr_equal(g_seen.acquiring, c);
    assert_int_equal(g_seen.path_length, 2);
    RLRelease(a);
    RLRelease(b);
    RLRelease(c);
}

/* ---- explicit call sites (what the Swift overlay uses) ---- */

static void *locks_at_sites(void *arg) {
    pair *p = arg;
    RLLockDebugSetCallSite("Outer.swift", 10);
    RLLockLock((RLLockRef)p->first);
    RLLockDebugSetCallSite("Inner.swift", 20);
    RLLockLock((RLLockRef)p->second);
    RLLockUnlock((RLLockRef)p->second);
    RLLockUnlock((RLLockRef)p->first);
    return NULL;
}

static void test_call_site_names_the_source(void **state) {
    RLLockRef a = RLLockCreate(), b = RLLockCreate();
    pair ab = {a, b}, ba = {b, a};
    run_in_thread(locks_at_sites, &ab);
    run_in_thread(locks_at_sites, &ba);
    assert_int_equal(g_seen.count, 1);
    assert_string_equal(g_seen.held_where, "Outer.swift:10");
    assert_string_equal(g_seen.acquiring_where, "Inner.swift:20");
    assert_string_equal(g_seen.prior_where, "Outer.swift:10");
    assert_true(contains(g_seen.description, "Inner.swift:20"));
    /* Consumed by the acquisition: the next one falls back to addresses. */
    RLLockRef c = RLLockCreate();
    pair ac = {a, c}, ca = {c, a};
    run_in_thread(sync_in_order, &ac); /* RLSyncEnter on the addresses: other key space */
    run_in_thread(locks_at_sites, &ac);
    assert_int_equal(g_seen.count, 1);
    RLLockDebugSetCallSite("Stale.swift", 1);
    RLLockDebugSetCallSite(NULL, 0);
    assert_true(RLLockLock(c));
    assert_true(RLLockLock(a));
    assert_int_equal(g_seen.count, 2);
    assert_false(contains(g_seen.held_where, "Stale.swift"));
    assert_true(contains(g_seen.held_where, "test_lockdep"));
    assert_true(contains(g_seen.acquiring_where, "test_lockdep"));
    assert_true(RLLockUnlock(a));
    assert_true(RLLockUnlock(c));
    (void)ca;
    RLRelease(a);
    RLRelease(b);
    RLRelease(c);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--print-enabled") == 0) {
        printf("enabled=%d\n", RLLockDebugIsEnabled() ? 1 : 0);
        return 0;
    }
    /* The absolute path, so the re-run works whatever the cwd and however
     * we were started (valgrind reports its client here, not itself). */
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        g_argv0 = self;
    } else {
        g_argv0 = argv[0];
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sync_abba_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spinlock_abba_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rllock_abba_reported_with_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rllock_destroy_forgets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inversion_across_lock_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_three_lock_cycle_found_through_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consistent_order_and_recursion_not_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_try_lock_not_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forget_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_read_abba_not_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_read_abba_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_junction_breaks_longer_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_site_names_the_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disabled_records_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handler_may_take_locks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_report_goes_to_stderr, setup, teardown),
#if __BLOCKS__
        cmocka_unit_test_setup_teardown(test_block_handler, setup, teardown),
#endif
        cmocka_unit_test(test_environment_variable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
