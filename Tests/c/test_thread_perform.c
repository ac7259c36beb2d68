/* test_thread_perform.c — perform requests: on a thread, on main, waiting,
 * FIFO, modes, delayed performs, cancellation, misuse. */
#include "testutil.h"
#include "owned.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void wait_for_flag(_Atomic int *flag) {
    double deadline = rl_test_now() + 60.0;
    while (!atomic_load(flag)) {
        assert_true(rl_test_now() < deadline);
        usleep(500);
    }
}

/* ---- a thread that runs its run loop until told to stop ---- */

typedef struct loop_thread {
    RLThreadRef thread;
    _Atomic int ready;
    _Atomic int stop;
} loop_thread;

static void nothing(void *info) { (void)info; }

static void *loop_entry(void *arg) {
    loop_thread *lt = arg;
    RLRunLoopSourceContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.perform = nothing;
    RLRunLoopSourceRef keepalive = RLRunLoopSourceCreate(NULL, 0, &ctx);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), keepalive, kRLRunLoopCommonModes);
    atomic_store(&lt->ready, 1);
    while (!atomic_load(&lt->stop))
        RLRunLoopRun();
    RLRunLoopRemoveSource(RLRunLoopGetCurrent(), keepalive, kRLRunLoopCommonModes);
    RLRelease(keepalive);
    return NULL;
}

static void stop_current_loop(void *arg) {
    atomic_store(&((loop_thread *)arg)->stop, 1);
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void loop_start(loop_thread *lt) {
    memset(lt, 0, sizeof *lt);
    lt->thread = RLThreadCreate(NULL, loop_entry, lt);
    assert_non_null(lt->thread);
    assert_true(RLThreadSetJoinable(lt->thread, true));
    assert_true(RLThreadStart(lt->thread));
}

static void loop_stop(loop_thread *lt) {
    assert_true(RLThreadPerform(lt->thread, stop_current_loop, lt, NULL, false));
    assert_true(RLThreadJoin(lt->thread, NULL));
    RLRelease(lt->thread);
}

/* ---- basic ---- */

typedef struct record {
    _Atomic int count;
    RLThreadRef ran_on[64];
    int order[64];
} record;

static record rec;

static void note(void *arg) {
    int i = atomic_fetch_add(&rec.count, 1);
    if (i < 64) {
        rec.ran_on[i] = RLThreadGetCurrent();
        rec.order[i] = (int)(intptr_t)arg;
    }
}

static void test_perform_on_thread_async_then_wait(void **state) {
    memset(&rec, 0, sizeof rec);
    loop_thread lt;
    loop_start(&lt);
    /* Queued before the thread may even have entered its loop. */
    for (int i = 0; i < 10; i++)
        assert_true(RLThreadPerform(lt.thread, note, (void *)(intptr_t)i, NULL, false));
    assert_true(RLThreadPerform(lt.thread, note, (void *)(intptr_t)10, NULL, true));
    assert_int_equal(atomic_load(&rec.count), 11);
    for (int i = 0; i < 11; i++) {
        assert_int_equal(rec.order[i], i);
        assert_ptr_equal(rec.ran_on[i], lt.thread);
    }
    loop_stop(&lt);
}

static void test_wait_on_self_runs_now(void **state) {
    memset(&rec, 0, sizeof rec);
    /* The main thread is not running its loop: the request runs inline. */
    assert_true(RLThreadPerformOnMain(note, (void *)(intptr_t)3, NULL, true));
    assert_int_equal(atomic_load(&rec.count), 1);
    assert_ptr_equal(rec.ran_on[0], RLThreadGetMain());
    assert_true(RLThreadPerform(RLThreadGetCurrent(), note, (void *)(intptr_t)4, NULL, true));
    assert_int_equal(atomic_load(&rec.count), 2);
}

static void *post_to_main(void *arg) {
    assert_true(RLThreadPerformOnMain(note, (void *)(intptr_t)1, NULL, false));
    assert_true(RLThreadPerformOnMain(note, (void *)(intptr_t)2, NULL, true));
    atomic_store((_Atomic int *)arg, 1);
    return NULL;
}

static void test_perform_on_main_from_elsewhere(void **state) {
    memset(&rec, 0, sizeof rec);
    _Atomic int done = 0;
    /* A source keeps the main loop's default mode from being empty, so each
     * run sleeps until the request wakes it (a run of an empty mode returns
     * at once, and a loop of those would spin and, under valgrind's
     * serialised threads, starve the posting thread). */
    RLRunLoopSourceContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.perform = nothing;
    RLRunLoopSourceRef keepalive = RLRunLoopSourceCreate(NULL, 0, &ctx);
    RLRunLoopAddSource(RLRunLoopGetMain(), keepalive, kRLRunLoopDefaultMode);
    RLThreadRef t = RLThreadCreate(NULL, post_to_main, &done);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    double deadline = rl_test_now() + 60;
    while (!atomic_load(&done)) {
        assert_true(rl_test_now() < deadline);
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false);
    }
    RLRunLoopRemoveSource(RLRunLoopGetMain(), keepalive, kRLRunLoopDefaultMode);
    RLRelease(keepalive);
    assert_true(RLThreadJoin(t, NULL));
    RLRelease(t);
    assert_int_equal(atomic_load(&rec.count), 2);
    assert_int_equal(rec.order[0], 1);
    assert_int_equal(rec.order[1], 2);
    assert_ptr_equal(rec.ran_on[0], RLThreadGetMain());
}

/* ---- every queued request runs in one pass; modes ---- */

static _Atomic int counter;
static void bump(void *arg) { atomic_fetch_add(&counter, 1); }

static void *one_pass_entry(void *arg) {
    RLThreadRef self = RLThreadGetCurrent();
    atomic_store(&counter, 0);
    /* As with CF, a run in a mode with no sources or timers returns at once
     * (kRLRunLoopRunFinished); give the explicit modes a source. */
    RLRunLoopSourceContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.perform = nothing;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &ctx);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "custom");
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "a");
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "b");
    RLRelease(src);
    for (int i = 0; i < 100; i++)
        assert_true(RLThreadPerform(self, bump, NULL, NULL, false));
    /* One pass, no waiting: all 100 run. */
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    assert_int_equal(atomic_load(&counter), 100);

    /* A request for a custom mode waits for that mode. */
    const RLRunLoopMode custom[] = {"custom", NULL};
    assert_true(RLThreadPerform(self, bump, NULL, custom, false));
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    assert_int_equal(atomic_load(&counter), 100);
    RLRunLoopRunInMode("custom", 0, false);
    assert_int_equal(atomic_load(&counter), 101);

    /* Common modes (the default) do not include an uncommon mode... */
    assert_true(RLThreadPerform(self, bump, NULL, NULL, false));
    RLRunLoopRunInMode("custom", 0, false);
    assert_int_equal(atomic_load(&counter), 101);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    assert_int_equal(atomic_load(&counter), 102);
    /* ...until it is made common. */
    assert_true(RLRunLoopAddCommonMode(RLRunLoopGetCurrent(), "custom"));
    assert_true(RLThreadPerform(self, bump, NULL, NULL, false));
    RLRunLoopRunInMode("custom", 0, false);
    assert_int_equal(atomic_load(&counter), 103);

    /* Several modes: runs once, in whichever comes first. */
    const RLRunLoopMode two[] = {"a", "b", NULL};
    assert_true(RLThreadPerform(self, bump, NULL, two, false));
    RLRunLoopRunInMode("b", 0, false);
    RLRunLoopRunInMode("a", 0, false);
    RLRunLoopRunInMode("b", 0, false);
    assert_int_equal(atomic_load(&counter), 104);
    return NULL;
}

static void test_all_queued_run_in_one_pass_and_modes(void **state) {
    RLThreadRef t = RLThreadCreate(NULL, one_pass_entry, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    RLRelease(t);
}

/* ---- waiting on a thread that finishes without running the request ---- */

static _Atomic int finish_gate;
static void *exit_without_loop(void *arg) {
    wait_for_flag(&finish_gate);
    return NULL;
}

typedef struct poster {
    RLThreadRef target;
    _Atomic int posting;
    bool ok;
    RLErrorCode code;
} poster;

static void *post_and_wait(void *arg) {
    poster *p = arg;
    atomic_store(&p->posting, 1);
    p->ok = RLThreadPerform(p->target, bump, NULL, NULL, true);
    p->code = RLErrorGetLast().code;
    return NULL;
}

static void test_wait_released_when_target_finishes(void **state) {
    atomic_store(&finish_gate, 0);
    atomic_store(&counter, 0);
    RLThreadRef t = RLThreadCreate(NULL, exit_without_loop, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    /* An async request that will be dropped (not leaked) at exit. */
    assert_true(RLThreadPerform(t, bump, NULL, NULL, false));
    poster p = {.target = t};
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, post_and_wait, &p), 0);
    wait_for_flag(&p.posting);
    usleep(20000); /* lets the waiter queue its request (either order is correct) */
    atomic_store(&finish_gate, 1);
    pthread_join(pt, NULL);
    assert_false(p.ok);
    assert_int_equal(p.code, kRLErrorInvalidState);
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(atomic_load(&counter), 0);

    /* And afterwards: an error at once, for waiting and not waiting. */
    assert_false(RLThreadPerform(t, bump, NULL, NULL, true));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLThreadPerform(t, bump, NULL, NULL, false));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);
}

/* ---- misuse ---- */

static void *return_arg(void *arg) { return arg; }

static void test_perform_misuse(void **state) {
    assert_false(RLThreadPerform(NULL, bump, NULL, NULL, false));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadPerform(RLThreadGetMain(), NULL, NULL, NULL, true));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadPerformOnMain(NULL, NULL, NULL, false));
    assert_rl_error(kRLErrorInvalidArgument);
    const RLRunLoopMode empty_list[] = {NULL};
    assert_false(RLThreadPerform(RLThreadGetMain(), bump, NULL, empty_list, false));
    assert_rl_error(kRLErrorInvalidArgument);
    const RLRunLoopMode empty_name[] = {"", NULL};
    assert_false(RLThreadPerform(RLThreadGetMain(), bump, NULL, empty_name, false));
    assert_rl_error(kRLErrorInvalidArgument);

    /* Never started: an error, not a hang. */
    RLThreadRef t = RLThreadCreate(NULL, return_arg, NULL);
    assert_false(RLThreadPerform(t, bump, NULL, NULL, true));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLThreadPerform(t, bump, NULL, NULL, false));
    assert_rl_error(kRLErrorInvalidState);
    /* Cancelled before start: finished without running. */
    assert_true(RLThreadCancel(t));
    assert_true(RLThreadStart(t));
    assert_false(RLThreadPerform(t, bump, NULL, NULL, true));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);

    long fake[16] = {0};
    assert_false(RLThreadPerform((RLThreadRef)fake, bump, NULL, NULL, true));
    assert_rl_error(kRLErrorInvalidObject);

    assert_int_equal(RLThreadPerformAfterDelay(NULL, NULL, 1, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLThreadPerformAfterDelay(bump, NULL, 0.0 / 0.0, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLThreadPerformAfterDelay(bump, NULL, 1, empty_list), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadCancelPerformRequest(0));
    assert_rl_error(kRLErrorNotFound);
    assert_false(RLThreadCancelPerformRequest(987654321));
    assert_rl_error(kRLErrorNotFound);
    assert_int_equal(RLThreadCancelPreviousPerformRequests(NULL, NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
#if __BLOCKS__
    assert_false(RLThreadPerformBlock(RLThreadGetMain(), NULL, false, NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLThreadPerformBlockAfterDelay(1, NULL, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
#endif
}

/* ---- delayed performs ---- */

static void *delayed_entry(void *arg) {
    atomic_store(&counter, 0);
    static int a, b;
    RLPerformToken t1 = RLThreadPerformAfterDelay(bump, &a, 0.01, NULL);
    RLPerformToken t2 = RLThreadPerformAfterDelay(bump, &b, 0.01, NULL);
    RLPerformToken t3 = RLThreadPerformAfterDelay(bump, &a, 0.01, NULL);
    RLPerformToken t4 = RLThreadPerformAfterDelay(bump, &b, 0.02, NULL);
    const RLRunLoopMode custom[] = {"later", NULL};
    RLPerformToken t5 = RLThreadPerformAfterDelay(bump, &b, 0, custom);
    assert_true(t1 && t2 && t3 && t4 && t5);
    assert_true(t1 != t2 && t2 != t3 && t3 != t4);
    /* Cancel one by token, two by fn+arg. */
    assert_true(RLThreadCancelPerformRequest(t2));
    assert_false(RLThreadCancelPerformRequest(t2));
    assert_rl_error(kRLErrorNotFound);
    assert_int_equal(RLThreadCancelPreviousPerformRequests(bump, &a), 2);
    assert_int_equal(RLThreadCancelPreviousPerformRequests(bump, &a), 0);
    /* t4 remains in the default modes, t5 in "later". */
    double deadline = rl_test_now() + 60;
    while (atomic_load(&counter) < 1) {
        assert_true(rl_test_now() < deadline);
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, true);
    }
    assert_int_equal(atomic_load(&counter), 1);
    assert_false(RLThreadCancelPerformRequest(t4)); /* already ran */
    assert_rl_error(kRLErrorNotFound);
    while (atomic_load(&counter) < 2) {
        assert_true(rl_test_now() < deadline);
        RLRunLoopRunInMode("later", 0.05, true);
    }
    /* One left pending at exit: dropped without running or leaking. */
    assert_true(RLThreadPerformAfterDelay(bump, &a, 1000, NULL) != 0);
    return NULL;
}

static void test_perform_after_delay_and_cancel(void **state) {
    RLThreadRef t = RLThreadCreate(NULL, delayed_entry, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(atomic_load(&counter), 2);
    RLRelease(t);
}

static void *cancel_token(void *arg) {
    bool ok = RLThreadCancelPerformRequest(*(RLPerformToken *)arg);
    return (void *)(intptr_t)(ok ? 0 : RLErrorGetLast().code);
}

static void test_cancel_from_other_thread_is_not_found(void **state) {
    /* Tokens belong to the thread that made them. */
    RLPerformToken tok = RLThreadPerformAfterDelay(bump, NULL, 1000, NULL);
    assert_true(tok != 0);
    RLThreadRef t = RLThreadCreate(NULL, cancel_token, &tok);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    void *res = NULL;
    assert_true(RLThreadJoin(t, &res));
    assert_int_equal((intptr_t)res, kRLErrorNotFound);
    RLRelease(t);
    assert_true(RLThreadCancelPerformRequest(tok));
}

/* ---- stress: 4 senders, FIFO per sender, nothing lost ---- */

enum { SENDERS = 4 };
static long per_sender;
static long last_seq[SENDERS];
static _Atomic long received;
static _Atomic int order_errors;

static void receive(void *arg) {
    uintptr_t v = (uintptr_t)arg;
    int sender = (int)(v & 0xff);
    long seq = (long)(v >> 8);
    if (seq != last_seq[sender] + 1)
        atomic_fetch_add(&order_errors, 1);
    last_seq[sender] = seq;
    atomic_fetch_add(&received, 1);
}

typedef struct sender_arg {
    RLThreadRef target;
    int id;
} sender_arg;

static void *sender(void *arg) {
    sender_arg *s = arg;
    for (long i = 1; i <= per_sender; i++) {
        uintptr_t v = ((uintptr_t)i << 8) | (uintptr_t)s->id;
        if (!RLThreadPerform(s->target, receive, (void *)v, NULL, false))
            fail_msg("perform failed: %s", RLErrorGetLast().message);
    }
    return NULL;
}

static void test_four_senders_fifo(void **state) {
    per_sender = rl_test_iters(100000);
    memset(last_seq, 0, sizeof last_seq);
    atomic_store(&received, 0);
    atomic_store(&order_errors, 0);
    loop_thread lt;
    loop_start(&lt);
    sender_arg args[SENDERS];
    for (int i = 0; i < SENDERS; i++)
        args[i] = (sender_arg){lt.thread, i};
    rl_test_run_threads(SENDERS, sender, args, sizeof args[0]);
    /* A waiting request from here runs after everything queued before it. */
    assert_true(RLThreadPerform(lt.thread, nothing, NULL, NULL, true));
    assert_int_equal(atomic_load(&received), SENDERS * per_sender);
    assert_int_equal(atomic_load(&order_errors), 0);
    for (int i = 0; i < SENDERS; i++)
        assert_int_equal(last_seq[i], per_sender);
    loop_stop(&lt);
}

#if __BLOCKS__
static void test_blocks(void **state) {
    loop_thread lt;
    loop_start(&lt);
    __block int seen = 0;
    __block RLThreadRef ran_on = NULL;
    assert_true(RLThreadPerformBlock(lt.thread, NULL, false, ^{
        seen += 1;
    }));
    assert_true(RLThreadPerformBlock(lt.thread, NULL, true, ^{
        seen += 10;
        ran_on = RLThreadGetCurrent();
    }));
    assert_int_equal(seen, 11);
    assert_ptr_equal(ran_on, lt.thread);
    assert_true(RLThreadPerformBlockOnMain(NULL, true, ^{
        seen += 100;
    }));
    assert_int_equal(seen, 111);
    loop_stop(&lt);
}
#endif

/* ---- will-exit handlers run after the run loop's teardown ---- */

static char teardown_log[8];
static _Atomic int teardown_n;

static void log_char(char c) {
    int i = atomic_fetch_add(&teardown_n, 1);
    if (i < 7)
        teardown_log[i] = c;
}

static void source_cancelled(void *info, RLRunLoopRef rl, RLRunLoopMode mode) { log_char('T'); }
static void will_exit_logger(RLThreadRef thread, void *info) { log_char('H'); }

static void *leave_source_behind(void *arg) {
    RLRunLoopSourceContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.perform = nothing;
    ctx.cancel = source_cancelled;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &ctx);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    RLRelease(src);
    log_char('E');
    return NULL;
}

static void test_will_exit_after_runloop_teardown(void **state) {
    memset(teardown_log, 0, sizeof teardown_log);
    atomic_store(&teardown_n, 0);
    RLThreadRef t = RLThreadCreate(NULL, leave_source_behind, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadAddWillExitHandler(t, will_exit_logger, NULL) != 0);
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_string_equal(teardown_log, "ETH");
    RLRelease(t);
}

/* ---- a thread not created by the library ---- */

typedef struct foreign_loop {
    RLThreadRef thread;
    _Atomic int ready, stop;
} foreign_loop;

static void stop_foreign(void *arg) {
    atomic_store(&((foreign_loop *)arg)->stop, 1);
    RLRunLoopStop(RLRunLoopGetCurrent());
}

static void *foreign_loop_entry(void *arg) {
    foreign_loop *fl = arg;
    fl->thread = (RLThreadRef)RLRetain(RLThreadGetCurrent());
    RLRunLoopSourceContext ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.perform = nothing;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &ctx);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, kRLRunLoopCommonModes);
    RLRelease(src);
    atomic_store(&fl->ready, 1);
    while (!atomic_load(&fl->stop))
        RLRunLoopRun();
    return NULL;
}

static void test_perform_on_foreign_thread(void **state) {
    memset(&rec, 0, sizeof rec);
    foreign_loop fl;
    memset(&fl, 0, sizeof fl);
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, foreign_loop_entry, &fl), 0);
    wait_for_flag(&fl.ready);
    assert_true(RLThreadPerform(fl.thread, note, (void *)(intptr_t)5, NULL, true));
    assert_int_equal(atomic_load(&rec.count), 1);
    assert_ptr_equal(rec.ran_on[0], fl.thread);
    assert_true(RLThreadPerform(fl.thread, stop_foreign, &fl, NULL, false));
    pthread_join(pt, NULL);
    assert_true(RLThreadIsFinished(fl.thread));
    assert_false(RLThreadPerform(fl.thread, note, NULL, NULL, true));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(fl.thread);
}

/* ---- lazy run loops ---- */

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

typedef struct lazy_probe {
    _Atomic int started, go, fds_seen;
    RLRunLoopRef loop_seen_by_request;
    RLRunLoopRef own_loop;
} lazy_probe;

static void record_loop(void *arg) {
    lazy_probe *p = arg;
    p->loop_seen_by_request = RLRunLoopGetCurrent();
}

static void *lazy_entry(void *arg) {
    lazy_probe *p = arg;
    atomic_store(&p->started, 1);
    wait_for_flag(&p->go);
    /* The loop the request was queued on is the one this thread gets. */
    p->own_loop = RLRunLoopGetCurrent();
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    return NULL;
}

static void test_threads_get_their_loop_lazily(void **state) {
    lazy_probe p;
    memset(&p, 0, sizeof p);
    int fds = count_fds();
    RLThreadRef t = RLThreadCreate(NULL, lazy_entry, &p);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    wait_for_flag(&p.started);
    /* A started thread that has not asked for a loop has none (no fds). */
    assert_int_equal(count_fds(), fds);
    /* A request makes it, on this thread's behalf... */
    assert_true(RLThreadPerform(t, record_loop, &p, NULL, false));
    /* a loop's fds: 3 on epoll, 4 on io_uring (docs/runloop.md) */
    bool uring = strcmp(RLRunLoopGetBackendName(RLRunLoopGetCurrent()), "io_uring") == 0;
    assert_int_equal(count_fds(), fds + (uring ? 4 : 3));
    atomic_store(&p.go, 1);
    assert_true(RLThreadJoin(t, NULL));
    /* ...and the thread found it, ran the request in it, and tore it down. */
    assert_non_null(p.own_loop);
    assert_ptr_equal(p.loop_seen_by_request, p.own_loop);
    assert_int_equal(count_fds(), fds);
    RLRelease(t);
}

static void *lazy_exit_unrun(void *arg) {
    wait_for_flag((_Atomic int *)arg);
    return NULL;
}

static void test_lazy_loop_of_thread_that_never_runs_it(void **state) {
    /* A loop made for a thread by a request is torn down when the thread
     * exits without ever asking for it: no fds or memory left behind. */
    _Atomic int go = 0;
    int fds = count_fds();
    RLThreadRef t = RLThreadCreate(NULL, lazy_exit_unrun, &go);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadPerform(t, bump, NULL, NULL, false));
    atomic_store(&go, 1);
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(count_fds(), fds);
    RLRelease(t);
}

/* ---- release callbacks ---- */


static void test_with_release_ran_then_released(void **state) {
    loop_thread lt;
    loop_start(&lt);
    owned a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    assert_true(RLThreadPerformWithRelease(lt.thread, owned_run, &a, owned_release, NULL, false));
    /* Waiting: released before the waiter wakes. */
    assert_true(RLThreadPerformWithRelease(lt.thread, owned_run, &b, owned_release, NULL, true));
    assert_int_equal(atomic_load(&b.ran), 1);
    assert_int_equal(atomic_load(&b.released), 1);
    assert_int_equal(atomic_load(&b.released_after_run), 1);
    assert_int_equal(atomic_load(&a.ran), 1);
    assert_int_equal(atomic_load(&a.released), 1);
    assert_int_equal(atomic_load(&a.released_after_run), 1);

    /* On main from main, waiting: runs at once, then released. */
    owned m;
    memset(&m, 0, sizeof m);
    assert_true(RLThreadPerformOnMainWithRelease(owned_run, &m, owned_release, NULL, true));
    assert_int_equal(atomic_load(&m.ran), 1);
    assert_int_equal(atomic_load(&m.released_after_run), 1);
    assert_int_equal(atomic_load(&m.released), 1);
    loop_stop(&lt);
}

typedef struct drop_waiter {
    RLThreadRef target;
    owned *o;
    _Atomic int posting;
    bool ok;
    RLErrorCode code;
} drop_waiter;

static void *post_owned_and_wait(void *arg) {
    drop_waiter *d = arg;
    atomic_store(&d->posting, 1);
    d->ok = RLThreadPerformWithRelease(d->target, owned_run, d->o, owned_release, NULL, true);
    d->code = RLErrorGetLast().code;
    /* Released before this waiter was woken. */
    assert_int_equal(atomic_load(&d->o->released), 1);
    return NULL;
}

static void test_with_release_dropped_at_thread_exit(void **state) {
    atomic_store(&finish_gate, 0);
    RLThreadRef t = RLThreadCreate(NULL, exit_without_loop, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    owned a, w;
    memset(&a, 0, sizeof a);
    memset(&w, 0, sizeof w);
    assert_true(RLThreadPerformWithRelease(t, owned_run, &a, owned_release, NULL, false));
    drop_waiter d = {.target = t, .o = &w};
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, post_owned_and_wait, &d), 0);
    wait_for_flag(&d.posting);
    usleep(20000);
    atomic_store(&finish_gate, 1);
    pthread_join(pt, NULL);
    assert_true(RLThreadJoin(t, NULL));
    assert_false(d.ok);
    assert_int_equal(d.code, kRLErrorInvalidState);
    assert_int_equal(atomic_load(&a.ran), 0);
    assert_int_equal(atomic_load(&a.released), 1);
    assert_int_equal(atomic_load(&w.ran), 0);
    assert_int_equal(atomic_load(&w.released), 1);

    /* Refused afterwards: released at once, by the call. */
    owned late;
    memset(&late, 0, sizeof late);
    assert_false(RLThreadPerformWithRelease(t, owned_run, &late, owned_release, NULL, false));
    assert_rl_error(kRLErrorInvalidState);
    assert_int_equal(atomic_load(&late.released), 1);
    RLRelease(t);
}

static owned delayed_ran, delayed_cancelled, delayed_by_fn, delayed_dropped;

static void *delayed_release_entry(void *arg) {
    RLPerformToken t1 = RLThreadPerformAfterDelayWithRelease(owned_run, &delayed_ran, owned_release, 0, NULL);
    RLPerformToken t2 = RLThreadPerformAfterDelayWithRelease(owned_run, &delayed_cancelled, owned_release, 1000, NULL);
    RLPerformToken t3 = RLThreadPerformAfterDelayWithRelease(owned_run, &delayed_by_fn, owned_release, 1000, NULL);
    RLPerformToken t4 = RLThreadPerformAfterDelayWithRelease(owned_run, &delayed_dropped, owned_release, 1000, NULL);
    assert_true(t1 && t2 && t3 && t4);
    assert_true(RLThreadCancelPerformRequest(t2));
    assert_int_equal(atomic_load(&delayed_cancelled.released), 1);
    assert_int_equal(RLThreadCancelPreviousPerformRequests(owned_run, &delayed_by_fn), 1);
    assert_int_equal(atomic_load(&delayed_by_fn.released), 1);
    double deadline = rl_test_now() + 60;
    while (!atomic_load(&delayed_ran.ran)) {
        assert_true(rl_test_now() < deadline);
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, true);
    }
    assert_int_equal(atomic_load(&delayed_ran.released_after_run), 1);
    assert_int_equal(atomic_load(&delayed_dropped.released), 0);
    return NULL; /* t4 is dropped at exit */
}

static void test_delayed_with_release(void **state) {
    RLThreadRef t = RLThreadCreate(NULL, delayed_release_entry, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    RLRelease(t);
    assert_int_equal(atomic_load(&delayed_ran.released), 1);
    assert_int_equal(atomic_load(&delayed_cancelled.ran), 0);
    assert_int_equal(atomic_load(&delayed_by_fn.ran), 0);
    assert_int_equal(atomic_load(&delayed_dropped.ran), 0);
    assert_int_equal(atomic_load(&delayed_dropped.released), 1);
}

static void test_with_release_misuse(void **state) {
    owned o;
    memset(&o, 0, sizeof o);
    long fake[16] = {0};
    const RLRunLoopMode empty_list[] = {NULL};
    const RLRunLoopMode empty_name[] = {"", NULL};
    int expect = 0;
    /* Every refused call releases arg exactly once. */
    assert_false(RLThreadPerformWithRelease(NULL, owned_run, &o, owned_release, NULL, false));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    assert_false(RLThreadPerformWithRelease((RLThreadRef)fake, owned_run, &o, owned_release, NULL, true));
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(atomic_load(&o.released), ++expect);
    assert_false(RLThreadPerformWithRelease(RLThreadGetMain(), NULL, &o, owned_release, NULL, false));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    assert_false(RLThreadPerformWithRelease(RLThreadGetMain(), owned_run, &o, owned_release, empty_list, false));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    assert_false(RLThreadPerformWithRelease(RLThreadGetMain(), owned_run, &o, owned_release, empty_name, false));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    assert_false(RLThreadPerformOnMainWithRelease(NULL, &o, owned_release, NULL, false));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    /* Never started. */
    RLThreadRef t = RLThreadCreate(NULL, return_arg, NULL);
    assert_false(RLThreadPerformWithRelease(t, owned_run, &o, owned_release, NULL, true));
    assert_rl_error(kRLErrorInvalidState);
    assert_int_equal(atomic_load(&o.released), ++expect);
    RLRelease(t);
    /* Delayed. */
    assert_int_equal(RLThreadPerformAfterDelayWithRelease(NULL, &o, owned_release, 1, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    assert_int_equal(RLThreadPerformAfterDelayWithRelease(owned_run, &o, owned_release, 0.0 / 0.0, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    assert_int_equal(RLThreadPerformAfterDelayWithRelease(owned_run, &o, owned_release, 1, empty_list), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), ++expect);
    /* A NULL release is the plain form (nothing to call). */
    assert_false(RLThreadPerformWithRelease(NULL, owned_run, &o, NULL, NULL, false));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(atomic_load(&o.released), expect);
    assert_int_equal(atomic_load(&o.ran), 0);
}

/* ---- RLThreadExit from inside work running in the loop ---- */

static _Atomic int exit_gate, exit_handler_ran;

static void exit_now(void *arg) {
    atomic_fetch_add(&((owned *)arg)->ran, 1);
    RLThreadExit();
}

static void note_exit(RLThreadRef thread, void *info) { atomic_fetch_add(&exit_handler_ran, 1); }

/* Runs its loop once the gate opens, with everything already queued: one
 * pass takes the whole batch, and the first request ends the thread. */
static RLRunLoopRef _Atomic gated_loop;

static void *run_loop_after_gate(void *arg) {
    atomic_store(&gated_loop, RLRunLoopGetCurrent());
    wait_for_flag(&exit_gate);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 30, false);
    return (void *)1; /* not reached */
}

static void test_exit_from_inside_a_request(void **state) {
    atomic_store(&exit_gate, 0);
    atomic_store(&exit_handler_ran, 0);
    atomic_store(&gated_loop, NULL);
    RLThreadRef t = RLThreadCreate(NULL, run_loop_after_gate, NULL);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadAddWillExitHandler(t, note_exit, NULL));
    assert_true(RLThreadStart(t));
    owned before, ender, after, waited;
    memset(&before, 0, sizeof before);
    memset(&ender, 0, sizeof ender);
    memset(&after, 0, sizeof after);
    memset(&waited, 0, sizeof waited);
    assert_true(RLThreadPerformWithRelease(t, owned_run, &before, owned_release, NULL, false));
    assert_true(RLThreadPerformWithRelease(t, exit_now, &ender, owned_release, NULL, false));
    assert_true(RLThreadPerformWithRelease(t, owned_run, &after, owned_release, NULL, false));
#if __BLOCKS__
    __block int block_ran = 0;
    assert_true(RLThreadPerformBlock(t, NULL, false, ^{
        block_ran = 1;
    }));
#endif
    /* The loop's own queue too: a block and a function with a release
     * behind the thread's drain. */
    RLRunLoopRef rl;
    for (double deadline = rl_test_now() + 60; !(rl = atomic_load(&gated_loop));)
        assert_true(rl_test_now() < deadline), usleep(500);
    owned loop_owned;
    memset(&loop_owned, 0, sizeof loop_owned);
    assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, owned_run, &loop_owned,
                                                    owned_release));
#if __BLOCKS__
    __block int loop_block_ran = 0;
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{
        loop_block_ran = 1;
    }));
#endif
    /* A waiter behind the request that ends the thread is told it failed,
     * not left waiting. */
    drop_waiter d = {.target = t, .o = &waited};
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, post_owned_and_wait, &d), 0);
    wait_for_flag(&d.posting);
    usleep(20000); /* lets it queue its request (either order is correct) */
    atomic_store(&exit_gate, 1);
    pthread_join(pt, NULL);
    void *result = (void *)2;
    assert_true(RLThreadJoin(t, &result));
    assert_null(result);
    assert_true(RLThreadIsFinished(t));
    assert_int_equal(atomic_load(&exit_handler_ran), 1);
    /* Ran and released, in order; what came after was released unrun. */
    assert_int_equal(atomic_load(&before.ran), 1);
    assert_int_equal(atomic_load(&before.released_after_run), 1);
    assert_int_equal(atomic_load(&ender.ran), 1);
    assert_int_equal(atomic_load(&ender.released), 1);
    assert_int_equal(atomic_load(&after.ran), 0);
    assert_int_equal(atomic_load(&after.released), 1);
    assert_false(d.ok);
    assert_int_equal(d.code, kRLErrorInvalidState);
    assert_int_equal(atomic_load(&waited.ran), 0);
    assert_int_equal(atomic_load(&waited.released), 1);
    assert_int_equal(atomic_load(&loop_owned.ran), 0);
    assert_int_equal(atomic_load(&loop_owned.released), 1);
#if __BLOCKS__
    assert_int_equal(block_ran, 0);
    assert_int_equal(loop_block_ran, 0);
#endif
    RLRelease(t);
}

/* A function queued on the loop itself (not a thread request) that ends
 * the thread: its release still runs, and what is queued behind it goes. */
static void *run_loop_with_exit_queued(void *arg) {
    owned *o = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, exit_now, &o[0], owned_release);
    RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, owned_run, &o[1], owned_release);
#if __BLOCKS__
    RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{
        atomic_fetch_add(&o[2].ran, 1);
    });
#endif
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 30, false);
    return (void *)1; /* not reached */
}

static void test_exit_from_inside_a_loop_function(void **state) {
    owned o[3];
    memset(o, 0, sizeof o);
    RLThreadRef t = RLThreadCreate(NULL, run_loop_with_exit_queued, o);
    assert_true(RLThreadSetJoinable(t, true));
    assert_true(RLThreadStart(t));
    void *result = (void *)2;
    assert_true(RLThreadJoin(t, &result));
    assert_null(result);
    assert_int_equal(atomic_load(&o[0].ran), 1);
    assert_int_equal(atomic_load(&o[0].released), 1);
    assert_int_equal(atomic_load(&o[1].ran), 0);
    assert_int_equal(atomic_load(&o[1].released), 1);
    assert_int_equal(atomic_load(&o[2].ran), 0);
    RLRelease(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perform_on_thread_async_then_wait),
        cmocka_unit_test(test_wait_on_self_runs_now),
        cmocka_unit_test(test_perform_on_main_from_elsewhere),
        cmocka_unit_test(test_all_queued_run_in_one_pass_and_modes),
        cmocka_unit_test(test_wait_released_when_target_finishes),
        cmocka_unit_test(test_perform_misuse),
        cmocka_unit_test(test_perform_after_delay_and_cancel),
        cmocka_unit_test(test_cancel_from_other_thread_is_not_found),
        cmocka_unit_test(test_four_senders_fifo),
        cmocka_unit_test(test_will_exit_after_runloop_teardown),
        cmocka_unit_test(test_perform_on_foreign_thread),
        cmocka_unit_test(test_threads_get_their_loop_lazily),
        cmocka_unit_test(test_lazy_loop_of_thread_that_never_runs_it),
        cmocka_unit_test(test_with_release_ran_then_released),
        cmocka_unit_test(test_with_release_dropped_at_thread_exit),
        cmocka_unit_test(test_delayed_with_release),
        cmocka_unit_test(test_with_release_misuse),
        cmocka_unit_test(test_exit_from_inside_a_request),
        cmocka_unit_test(test_exit_from_inside_a_loop_function),
#if __BLOCKS__
        cmocka_unit_test(test_blocks),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
