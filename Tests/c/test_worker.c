/* test_worker.c — RLWorkerThread: synchronous start/stop, work, idle sleep,
 * no leaked threads or fds, misuse. */
#include "testutil.h"
#include "owned.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int count_dir(const char *path) {
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Thread counts and thread ids from /proc/self/task. The kernel lists a
 * joined thread there for a moment after the join returns (the join waits
 * for the thread's tid to be cleared, which comes before the task is
 * reaped), so a count taken right after a join, a baseline included, can be
 * too high for a moment. These wait instead of comparing once; the deadline
 * is only there so that a leak fails instead of hanging. */
static bool task_exists(pid_t tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
    return access(path, F_OK) == 0;
}

static void assert_task_gone(pid_t tid) {
    double deadline = rl_test_now() + 60;
    while (task_exists(tid)) {
        if (rl_test_now() > deadline)
            fail_msg("thread %d still exists", (int)tid);
        usleep(1000);
    }
}

/* The count drops to `limit` or below (a baseline taken while a joined
 * thread was still listed is one too high, never too low). */
static void assert_task_count_at_most(int limit) {
    double deadline = rl_test_now() + 60;
    int n;
    while ((n = count_dir("/proc/self/task")) > limit) {
        if (rl_test_now() > deadline)
            fail_msg("the process has %d threads, expected at most %d", n, limit);
        usleep(1000);
    }
}

/* ---- start / stop ---- */

static void *running_mode_of(RLWorkerThreadRef w) {
    return (void *)RLRunLoopCopyCurrentMode(RLWorkerThreadGetRunLoop(w));
}

static void test_start_returns_when_loop_runs(void **state) {
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "worker-under-test");
    assert_non_null(w);
    assert_false(RLWorkerThreadIsRunning(w));
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadIsRunning(w));
    /* The loop is running already, not just the thread. */
    char *mode = running_mode_of(w);
    assert_non_null(mode);
    assert_string_equal(mode, kRLRunLoopDefaultMode);
    assert_true(RLRelease(mode));
    RLThreadRef t = RLWorkerThreadGetThread(w);
    assert_non_null(t);
    char *name = RLThreadCopyName(t);
    assert_string_equal(name, "worker-under-test");
    free(name);
    assert_true(RLWorkerThreadStop(w));
    assert_false(RLWorkerThreadIsRunning(w));
    assert_null(RLWorkerThreadGetThread(w));
    assert_rl_error(kRLErrorInvalidState);
    assert_null(RLWorkerThreadGetRunLoop(w));
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLRelease(w));
}

/* ---- work ---- */

typedef struct work_log {
    int n;
    int order[256];
    RLThreadRef ran_on;
    pid_t tid;
} work_log;

static void work(void *arg) {
    work_log *log = arg;
    log->ran_on = RLThreadGetCurrent();
    log->tid = gettid();
    if (log->n < 256)
        log->order[log->n] = log->n;
    log->n++;
}

static void test_perform_sync_and_async(void **state) {
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_true(RLWorkerThreadStart(w));
    work_log log;
    memset(&log, 0, sizeof log);
    for (int i = 0; i < 100; i++)
        assert_true(RLWorkerThreadPerformAsync(w, work, &log));
    assert_true(RLWorkerThreadPerformSync(w, work, &log));
    assert_int_equal(log.n, 101);
    for (int i = 0; i < 101; i++)
        assert_int_equal(log.order[i], i);
    assert_ptr_equal(log.ran_on, RLWorkerThreadGetThread(w));
    assert_true(log.tid != gettid());
#if __BLOCKS__
    __block int seen = 0;
    assert_true(RLWorkerThreadPerformBlockAsync(w, ^{
        seen += 1;
    }));
    assert_true(RLWorkerThreadPerformBlockSync(w, ^{
        seen += 2;
    }));
    assert_int_equal(seen, 3);
#endif
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);
}

static void test_work_queued_before_stop_runs(void **state) {
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_true(RLWorkerThreadStart(w));
    work_log log;
    memset(&log, 0, sizeof log);
    for (int i = 0; i < 200; i++)
        assert_true(RLWorkerThreadPerformAsync(w, work, &log));
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(log.n, 200);
    RLRelease(w);
}

/* ---- stop waits for the exit handlers and the thread ---- */

typedef struct exit_probe {
    _Atomic int handler_ran;
    RLThreadRef thread;
} exit_probe;

static void on_exit_handler(RLThreadRef thread, void *info) {
    exit_probe *p = info;
    p->thread = thread;
    usleep(20000); /* a slow handler: Stop must still wait for it */
    atomic_store(&p->handler_ran, 1);
}

static void test_stop_waits_for_exit_handlers(void **state) {
    exit_probe p;
    memset(&p, 0, sizeof p);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_true(RLWorkerThreadAddWillExitHandler(w, on_exit_handler, &p));
    assert_true(RLWorkerThreadStart(w));
    RLThreadRef t = (RLThreadRef)RLRetain(RLWorkerThreadGetThread(w));
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(atomic_load(&p.handler_ran), 1);
    assert_ptr_equal(p.thread, t);
    assert_true(RLThreadIsFinished(t));
    RLRelease(t);

    /* Registered handlers apply to the next start too. */
    memset(&p, 0, sizeof p);
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(atomic_load(&p.handler_ran), 1);
    RLRelease(w);
}

/* ---- an idle worker does not wake up ---- */

static long context_switches(pid_t tid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long total = 0, v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 ||
            sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
            total += v;
    }
    fclose(f);
    return total;
}

static void test_idle_worker_sleeps(void **state) {
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_true(RLWorkerThreadStart(w));
    work_log log;
    memset(&log, 0, sizeof log);
    assert_true(RLWorkerThreadPerformSync(w, work, &log));
    usleep(50000); /* let it settle into its wait */
    long before = context_switches(log.tid);
    usleep(300000);
    long after = context_switches(log.tid);
    /* Not one wake-up while idle. */
    assert_int_equal(after, before);
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);
}

/* ---- repeated start/stop leaks nothing ---- */

static void test_repeated_start_stop_leaks_nothing(void **state) {
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "cycler");
    /* Warm up: the first start may create process-wide state. */
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadStop(w));
    int fds = count_dir("/proc/self/fd");
    int tasks = count_dir("/proc/self/task");
    long cycles = rl_test_iters(200);
    work_log log;
    memset(&log, 0, sizeof log);
    for (long i = 0; i < cycles; i++) {
        assert_true(RLWorkerThreadStart(w));
        assert_true(RLWorkerThreadPerformAsync(w, work, &log));
        assert_true(RLWorkerThreadStop(w)); /* the work ran first (FIFO) */
        assert_task_gone(log.tid);
    }
    assert_int_equal(log.n, cycles);
    assert_int_equal(count_dir("/proc/self/fd"), fds);
    assert_task_count_at_most(tasks);

    /* Many workers at once, each on a thread of its own, then all stopped. */
    enum { N = 8 };
    RLWorkerThreadRef many[N];
    pid_t tids[N];
    for (int i = 0; i < N; i++) {
        many[i] = RLWorkerThreadCreate(NULL, NULL);
        assert_true(RLWorkerThreadStart(many[i]));
        memset(&log, 0, sizeof log);
        assert_true(RLWorkerThreadPerformSync(many[i], work, &log));
        tids[i] = log.tid;
        assert_true(task_exists(tids[i]));
        for (int j = 0; j < i; j++)
            assert_int_not_equal(tids[j], tids[i]);
    }
    assert_task_count_at_most(tasks + N);
    for (int i = 0; i < N; i++) {
        assert_true(RLWorkerThreadStop(many[i]));
        RLRelease(many[i]);
        assert_task_gone(tids[i]);
    }
    assert_int_equal(count_dir("/proc/self/fd"), fds);
    assert_task_count_at_most(tasks);
    RLRelease(w);
}

/* ---- 4 senders x 100,000 requests, FIFO per sender ---- */

enum { SENDERS = 4 };
static long per_sender;
static long last_seq[SENDERS];
static long received;
static long order_errors;

static void receive(void *arg) {
    uintptr_t v = (uintptr_t)arg;
    int s = (int)(v & 0xff);
    long seq = (long)(v >> 8);
    if (seq != last_seq[s] + 1)
        order_errors++;
    last_seq[s] = seq;
    received++;
}

typedef struct sender_arg {
    RLWorkerThreadRef w;
    int id;
    long failures;
} sender_arg;

static void *sender(void *arg) {
    sender_arg *s = arg;
    for (long i = 1; i <= per_sender; i++)
        if (!RLWorkerThreadPerformAsync(s->w, receive, (void *)(((uintptr_t)i << 8) | (uintptr_t)s->id)))
            s->failures++;
    return NULL;
}

static void nothing(void *arg) { (void)arg; }

static void test_four_senders_onto_one_worker(void **state) {
    per_sender = rl_test_iters(100000);
    memset(last_seq, 0, sizeof last_seq);
    received = 0;
    order_errors = 0;
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_true(RLWorkerThreadStart(w));
    sender_arg args[SENDERS];
    for (int i = 0; i < SENDERS; i++)
        args[i] = (sender_arg){w, i, 0};
    rl_test_run_threads(SENDERS, sender, args, sizeof args[0]);
    assert_true(RLWorkerThreadPerformSync(w, nothing, NULL));
    for (int i = 0; i < SENDERS; i++) {
        assert_int_equal(args[i].failures, 0);
        assert_int_equal(last_seq[i], per_sender);
    }
    assert_int_equal(received, SENDERS * per_sender);
    assert_int_equal(order_errors, 0);
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);
}

/* ---- misuse ---- */

typedef struct self_stop {
    RLWorkerThreadRef w;
    RLErrorCode stop_code, sync_ok;
} self_stop;

static void stop_from_inside(void *arg) {
    self_stop *s = arg;
    s->stop_code = RLWorkerThreadStop(s->w) ? kRLErrorNone : RLErrorGetLast().code;
    /* Sync on the worker itself runs inline instead of deadlocking. */
    s->sync_ok = RLWorkerThreadPerformSync(s->w, nothing, NULL) ? 1 : 0;
}

static void release_from_inside(void *arg) {
    self_stop *s = arg;
    s->stop_code = RLRelease(s->w) ? kRLErrorNone : RLErrorGetLast().code;
}

static void test_worker_misuse(void **state) {
    assert_false(RLWorkerThreadStart(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLWorkerThreadStop(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLWorkerThreadIsRunning(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLWorkerThreadPerformAsync(NULL, nothing, NULL));
    assert_rl_error(kRLErrorInvalidArgument);

    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_false(RLWorkerThreadStop(w));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLWorkerThreadPerformAsync(w, nothing, NULL));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLWorkerThreadPerformSync(w, nothing, NULL));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLWorkerThreadAddWillExitHandler(w, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);

    assert_true(RLWorkerThreadStart(w));
    assert_false(RLWorkerThreadStart(w));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLWorkerThreadPerformAsync(w, NULL, NULL));
    assert_rl_error(kRLErrorInvalidArgument);

    self_stop s = {w, kRLErrorNone, 0};
    assert_true(RLWorkerThreadPerformSync(w, stop_from_inside, &s));
    assert_int_equal(s.stop_code, kRLErrorWouldDeadlock);
    assert_int_equal(s.sync_ok, 1);
    assert_true(RLWorkerThreadIsRunning(w));

    /* From elsewhere, releasing the last reference stops the worker and
     * returns once its thread is gone (joined). */
    work_log log;
    memset(&log, 0, sizeof log);
    assert_true(RLWorkerThreadPerformSync(w, work, &log));
    assert_true(task_exists(log.tid));
    assert_true(RLRelease(w));
    assert_task_gone(log.tid);
}

static void test_release_last_reference_on_worker_itself(void **state) {
    exit_probe p;
    memset(&p, 0, sizeof p);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "self-release");
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadAddWillExitHandler(w, on_exit_handler, &p));
    RLThreadRef t = (RLThreadRef)RLRetain(RLWorkerThreadGetThread(w));
    work_log log;
    memset(&log, 0, sizeof log);
    assert_true(RLWorkerThreadPerformSync(w, work, &log));
    /* The release succeeds without waiting for itself; the thread then
     * leaves its loop, runs its exit handlers and goes, detached. */
    self_stop s = {w, kRLErrorWouldDeadlock, 0};
    assert_true(RLWorkerThreadPerformSync(w, release_from_inside, &s));
    assert_int_equal(s.stop_code, kRLErrorNone);
    double deadline = rl_test_now() + 60;
    while (!RLThreadIsFinished(t)) {
        assert_true(rl_test_now() < deadline);
        usleep(1000);
    }
    assert_int_equal(atomic_load(&p.handler_ran), 1);
    assert_ptr_equal(p.thread, t);
    RLRelease(t);
    assert_task_gone(log.tid);
}

/* ---- will-exit handlers: tokens, removal, blocks ---- */

static _Atomic int handler_hits[4];

static void hit_handler(RLThreadRef thread, void *info) {
    atomic_fetch_add(&handler_hits[(intptr_t)info], 1);
}

static void test_will_exit_handler_tokens(void **state) {
    for (int i = 0; i < 4; i++)
        atomic_store(&handler_hits[i], 0);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    RLThreadHandlerToken a = RLWorkerThreadAddWillExitHandler(w, hit_handler, (void *)0);
    RLThreadHandlerToken b = RLWorkerThreadAddWillExitHandler(w, hit_handler, (void *)1);
    assert_true(a != 0 && b != 0 && a != b);
    /* Removed before start: never runs. */
    assert_true(RLWorkerThreadRemoveWillExitHandler(w, a));
    assert_false(RLWorkerThreadRemoveWillExitHandler(w, a));
    assert_rl_error(kRLErrorNotFound);
    assert_true(RLWorkerThreadStart(w));
    /* Added and removed while running: neither this thread nor later ones. */
    RLThreadHandlerToken c = RLWorkerThreadAddWillExitHandler(w, hit_handler, (void *)2);
    assert_true(c != 0);
    assert_true(RLWorkerThreadRemoveWillExitHandler(w, c));
    /* Added while running: runs for this thread. */
    RLThreadHandlerToken d = RLWorkerThreadAddWillExitHandler(w, hit_handler, (void *)3);
    assert_true(d != 0);
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(atomic_load(&handler_hits[0]), 0);
    assert_int_equal(atomic_load(&handler_hits[1]), 1);
    assert_int_equal(atomic_load(&handler_hits[2]), 0);
    assert_int_equal(atomic_load(&handler_hits[3]), 1);
    /* And for the next thread. */
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(atomic_load(&handler_hits[1]), 2);
    assert_int_equal(atomic_load(&handler_hits[3]), 2);

#if __BLOCKS__
    __block int block_hits = 0;
    __block RLThreadRef block_thread = NULL;
    RLThreadHandlerToken e = RLWorkerThreadAddWillExitHandlerBlock(w, ^(RLThreadRef thread) {
        block_hits++;
        block_thread = thread;
    });
    assert_true(e != 0);
    assert_true(RLWorkerThreadStart(w));
    RLThreadRef t = (RLThreadRef)RLRetain(RLWorkerThreadGetThread(w));
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(block_hits, 1);
    assert_ptr_equal(block_thread, t);
    RLRelease(t);
    assert_true(RLWorkerThreadRemoveWillExitHandler(w, e));
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(block_hits, 1);
    /* A block still registered is released with the worker (no leak). */
    assert_true(RLWorkerThreadAddWillExitHandlerBlock(w, ^(RLThreadRef thread) { block_hits += 100; }) != 0);
#endif
    RLRelease(w);
}

static void test_will_exit_handler_misuse(void **state) {
    long fake[16] = {0};
    assert_int_equal(RLWorkerThreadAddWillExitHandler(NULL, hit_handler, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLWorkerThreadAddWillExitHandler((RLWorkerThreadRef)fake, hit_handler, NULL), 0);
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLWorkerThreadRemoveWillExitHandler(NULL, 1));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLWorkerThreadRemoveWillExitHandler((RLWorkerThreadRef)fake, 1));
    assert_rl_error(kRLErrorInvalidObject);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_false(RLWorkerThreadRemoveWillExitHandler(w, 0));
    assert_rl_error(kRLErrorNotFound);
    assert_false(RLWorkerThreadRemoveWillExitHandler(w, 12345));
    assert_rl_error(kRLErrorNotFound);
#if __BLOCKS__
    assert_int_equal(RLWorkerThreadAddWillExitHandlerBlock(NULL, ^(RLThreadRef t) {}), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLWorkerThreadAddWillExitHandlerBlock((RLWorkerThreadRef)fake, ^(RLThreadRef t) {}), 0);
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(RLWorkerThreadAddWillExitHandlerBlock(w, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
#endif
    RLRelease(w);
}

/* ---- perform with a release callback ---- */


static void test_perform_with_release(void **state) {
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_true(RLWorkerThreadStart(w));
    owned a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_true(RLWorkerThreadPerformAsyncWithRelease(w, owned_run, &a, owned_release));
    assert_true(RLWorkerThreadPerformSyncWithRelease(w, owned_run, &b, owned_release));
    /* Sync: ran and released before it returned; FIFO: a before b. */
    assert_int_equal(atomic_load(&b.released_after_run), 1);
    assert_int_equal(atomic_load(&b.released), 1);
    assert_int_equal(atomic_load(&a.released_after_run), 1);
    assert_int_equal(atomic_load(&a.released), 1);

    /* Dropped requests (the thread exits first) are released by
     * RLThreadPerformWithRelease, which these forward to: see
     * test_thread_perform.c. A stopped worker refuses new work. */
    assert_true(RLWorkerThreadStop(w));

    /* Refused (not running, NULL fn, bad worker): released by the call. */
    owned r;
    memset(&r, 0, sizeof r);
    long fake[16] = {0};
    assert_false(RLWorkerThreadPerformAsyncWithRelease(w, owned_run, &r, owned_release));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLWorkerThreadPerformSyncWithRelease(w, owned_run, &r, owned_release));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLWorkerThreadPerformAsyncWithRelease(NULL, owned_run, &r, owned_release));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLWorkerThreadPerformSyncWithRelease((RLWorkerThreadRef)fake, owned_run, &r, owned_release));
    assert_rl_error(kRLErrorInvalidObject);
    assert_true(RLWorkerThreadStart(w));
    assert_false(RLWorkerThreadPerformAsyncWithRelease(w, NULL, &r, owned_release));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLWorkerThreadPerformSyncWithRelease(w, NULL, &r, owned_release));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&r.released), 6);
    assert_int_equal(atomic_load(&r.ran), 0);
    RLRelease(w);
}

/* ---- RLThreadExit from a worker job ---- */

static void exit_job(void *arg) {
    ((work_log *)arg)->tid = gettid();
    RLThreadExit();
}

static void test_exit_from_worker_job(void **state) {
    exit_probe p;
    memset(&p, 0, sizeof p);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "exits");
    assert_true(RLWorkerThreadAddWillExitHandler(w, on_exit_handler, &p));
    assert_true(RLWorkerThreadStart(w));
    work_log ended, behind;
    memset(&ended, 0, sizeof ended);
    memset(&behind, 0, sizeof behind);
    /* The job ends the thread: the waiter behind it is told, not left
     * waiting, and the thread's exit handlers still run. */
    assert_true(RLWorkerThreadPerformAsync(w, exit_job, &ended));
    assert_false(RLWorkerThreadPerformSync(w, work, &behind));
    assert_rl_error(kRLErrorInvalidState);
    assert_int_equal(behind.n, 0);
    /* Stop still joins it; the worker can be started again. */
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(atomic_load(&p.handler_ran), 1);
    assert_task_gone(ended.tid);
    atomic_store(&p.handler_ran, 0);
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadPerformSync(w, work, &behind));
    assert_int_equal(behind.n, 1);
    /* Waiting on the job that ends the thread: it ran. */
    assert_true(RLWorkerThreadPerformSync(w, exit_job, &ended));
    assert_true(RLWorkerThreadStop(w));
    assert_int_equal(atomic_load(&p.handler_ran), 1);
    RLRelease(w);
}

/* A worker whose thread left through RLThreadExit is not running any
 * more, and can be started again without a Stop. */
static void test_not_running_after_thread_exit(void **state) {
    exit_probe p;
    memset(&p, 0, sizeof p);
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "exits-alone");
    assert_true(RLWorkerThreadAddWillExitHandler(w, on_exit_handler, &p));
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadIsRunning(w));
    work_log ended;
    memset(&ended, 0, sizeof ended);
    assert_true(RLWorkerThreadPerformSync(w, exit_job, &ended));
    /* The waiter above may be told before the thread's loop is over. */
    double deadline = rl_test_now() + 60;
    while (RLWorkerThreadIsRunning(w)) {
        if (rl_test_now() > deadline)
            fail_msg("the worker still reads as running after its thread called RLThreadExit");
        usleep(1000);
    }
    assert_task_gone(ended.tid);
    assert_int_equal(atomic_load(&p.handler_ran), 1);
    atomic_store(&p.handler_ran, 0);
    /* Start joins what is left of the old thread and makes a new one. */
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadIsRunning(w));
    work_log log;
    memset(&log, 0, sizeof log);
    assert_true(RLWorkerThreadPerformSync(w, work, &log));
    assert_int_equal(log.n, 1);
    assert_int_not_equal(log.tid, ended.tid);
    assert_true(RLWorkerThreadStop(w));
    assert_false(RLWorkerThreadIsRunning(w));
    assert_int_equal(atomic_load(&p.handler_ran), 1);
    /* Stop of a worker whose thread left alone joins it too. */
    assert_true(RLWorkerThreadStart(w));
    assert_true(RLWorkerThreadPerformSync(w, exit_job, &ended));
    assert_true(RLWorkerThreadStop(w));
    assert_false(RLWorkerThreadIsRunning(w));
    assert_task_gone(ended.tid);
    assert_true(RLRelease(w));
}

static void test_copy_thread_and_runloop(void **state) {
    assert_null(RLWorkerThreadCopyThread(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLWorkerThreadCopyRunLoop(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLLockRef not_a_worker = RLLockCreate();
    assert_null(RLWorkerThreadCopyThread((RLWorkerThreadRef)not_a_worker));
    assert_rl_error(kRLErrorInvalidObject);
    assert_null(RLWorkerThreadCopyRunLoop((RLWorkerThreadRef)not_a_worker));
    assert_rl_error(kRLErrorInvalidObject);
    RLRelease(not_a_worker);

    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "copied");
    assert_null(RLWorkerThreadCopyThread(w));
    assert_rl_error(kRLErrorInvalidState);
    assert_null(RLWorkerThreadCopyRunLoop(w));
    assert_rl_error(kRLErrorInvalidState);

    assert_true(RLWorkerThreadStart(w));
    RLThreadRef t = RLWorkerThreadCopyThread(w);
    RLRunLoopRef rl = RLWorkerThreadCopyRunLoop(w);
    assert_non_null(t);
    assert_non_null(rl);
    assert_ptr_equal(t, RLWorkerThreadGetThread(w));
    assert_ptr_equal(rl, RLWorkerThreadGetRunLoop(w));
    work_log log;
    memset(&log, 0, sizeof log);
    assert_true(RLWorkerThreadPerformSync(w, work, &log));
    assert_ptr_equal(log.ran_on, t);
    /* The copies outlive the Stop that drops the worker's references. */
    assert_true(RLWorkerThreadStop(w));
    assert_true(RLThreadIsFinished(t));
    assert_int_equal(RLGetRetainCount(t), 1);
    assert_int_equal(RLGetRetainCount(rl), 1);
    assert_true(RLRelease(t));
    assert_true(RLRelease(rl));
    assert_true(RLRelease(w));
}

/* Another thread keeps copying the worker's thread and loop while this one
 * starts and stops it: every copy stays usable until released. */
typedef struct copier {
    RLWorkerThreadRef w;
    _Atomic int stop;
    long copies;
} copier;

static void *copy_while_restarted(void *arg) {
    copier *c = arg;
    while (!atomic_load(&c->stop)) {
        RLThreadRef t = RLWorkerThreadCopyThread(c->w);
        RLRunLoopRef rl = RLWorkerThreadCopyRunLoop(c->w);
        if (t) {
            (void)RLThreadIsFinished(t);
            char *name = RLThreadCopyName(t);
            assert_non_null(name);
            free(name);
            assert_true(RLRelease(t));
            c->copies++;
        }
        if (rl) {
            assert_true(RLRunLoopWakeUp(rl));
            assert_true(RLRelease(rl));
        }
        RLErrorClear();
    }
    return NULL;
}

static void test_copies_survive_concurrent_stop(void **state) {
    copier c = {.w = RLWorkerThreadCreate(NULL, "restarted")};
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, copy_while_restarted, &c), 0);
    long rounds = rl_test_iters(200);
    for (long i = 0; i < rounds; i++) {
        assert_true(RLWorkerThreadStart(c.w));
        usleep(100);
        assert_true(RLWorkerThreadStop(c.w));
    }
    atomic_store(&c.stop, 1);
    assert_int_equal(pthread_join(pt, NULL), 0);
    assert_true(RLRelease(c.w));
}

/* A worker's loop is kept alive in its common modes while the worker
 * runs (no item needed): a run there from work does not finish, also in a
 * common mode the work adds; a mode that is not common finishes at once,
 * as any empty mode (CF); a plain thread's loop is not kept alive. */
typedef struct {
    RLRunLoopRunResult in_default, in_new_common, in_plain;
    bool finished_default, finished_plain;
} kept_alive;

static void runs_on_worker(void *arg) {
    kept_alive *k = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    k->finished_default = RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode);
    k->finished_plain = RLRunLoopIsFinished(rl, "test.kept.plain");
    k->in_default = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
    assert_true(RLRunLoopAddCommonMode(rl, "test.kept.common"));
    k->in_new_common = RLRunLoopRunInMode("test.kept.common", 0.01, false);
    k->in_plain = RLRunLoopRunInMode("test.kept.plain", 0.01, false);
}

static void *runs_on_plain_thread(void *arg) {
    kept_alive *k = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    k->finished_default = RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode);
    k->in_default = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.01, false);
    return NULL;
}

static void test_worker_loop_kept_alive_in_common_modes(void **state) {
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_non_null(w);
    assert_true(RLWorkerThreadStart(w));
    kept_alive k;
    memset(&k, 0, sizeof k);
    assert_true(RLWorkerThreadPerformSync(w, runs_on_worker, &k));
    assert_false(k.finished_default);
    assert_true(k.finished_plain);
    assert_int_equal(k.in_default, kRLRunLoopRunTimedOut);
    assert_int_equal(k.in_new_common, kRLRunLoopRunTimedOut);
    assert_int_equal(k.in_plain, kRLRunLoopRunFinished);
    /* Still stops, and its loop still ends when stopped. */
    assert_true(RLWorkerThreadStop(w));
    assert_false(RLWorkerThreadIsRunning(w));
    /* Started again: kept alive again. */
    assert_true(RLWorkerThreadStart(w));
    memset(&k, 0, sizeof k);
    assert_true(RLWorkerThreadPerformSync(w, runs_on_worker, &k));
    assert_int_equal(k.in_default, kRLRunLoopRunTimedOut);
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);

    memset(&k, 0, sizeof k);
    rl_test_on_other_thread(runs_on_plain_thread, &k);
    assert_true(k.finished_default);
    assert_int_equal(k.in_default, kRLRunLoopRunFinished);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_returns_when_loop_runs),
        cmocka_unit_test(test_perform_sync_and_async),
        cmocka_unit_test(test_work_queued_before_stop_runs),
        cmocka_unit_test(test_stop_waits_for_exit_handlers),
        cmocka_unit_test(test_idle_worker_sleeps),
        cmocka_unit_test(test_worker_loop_kept_alive_in_common_modes),
        cmocka_unit_test(test_repeated_start_stop_leaks_nothing),
        cmocka_unit_test(test_four_senders_onto_one_worker),
        cmocka_unit_test(test_worker_misuse),
        cmocka_unit_test(test_release_last_reference_on_worker_itself),
        cmocka_unit_test(test_will_exit_handler_tokens),
        cmocka_unit_test(test_will_exit_handler_misuse),
        cmocka_unit_test(test_perform_with_release),
        cmocka_unit_test(test_exit_from_worker_job),
        cmocka_unit_test(test_not_running_after_thread_exit),
        cmocka_unit_test(test_copy_thread_and_runloop),
        cmocka_unit_test(test_copies_survive_concurrent_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
