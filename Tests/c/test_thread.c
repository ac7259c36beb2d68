/* test_thread.c — RLThread: start, join, attributes, dictionary,
 * cancellation, will-exit ordering, sleeping. Misuse: test_thread_misuse.c. */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Waits (generously) for *flag to become nonzero; fails instead of hanging. */
static void wait_for_flag(_Atomic int *flag) {
    double deadline = rl_test_now() + 30.0;
    while (!atomic_load(flag)) {
        assert_true(rl_test_now() < deadline);
        usleep(1000);
    }
}

static RLThreadRef joinable_thread(RLThreadEntry entry, void *arg) {
    RLThreadRef t = RLThreadCreate(NULL, entry, arg);
    assert_non_null(t);
    assert_true(RLThreadSetJoinable(t, true));
    return t;
}

/* ---- multi-threaded notification (must run before any other start) ---- */

static _Atomic int mt_calls;
static _Atomic int mt_was_multithreaded_in_handler = -1;

static void will_become_mt(void *info) {
    atomic_fetch_add(&mt_calls, 1);
    atomic_store(&mt_was_multithreaded_in_handler, RLThreadIsMultiThreaded());
    assert_ptr_equal(info, &mt_calls);
}

static void *return_arg(void *arg) { return arg; }

static void test_becomes_multithreaded_once(void **state) {
    assert_false(RLThreadIsMultiThreaded());
    assert_true(RLThreadAddWillBecomeMultiThreadedHandler(will_become_mt, &mt_calls));
#if __BLOCKS__
    __block int block_calls = 0;
    assert_true(RLThreadAddWillBecomeMultiThreadedHandlerBlock(^{
        /* after the function handler added before it */
        assert_int_equal(atomic_load(&mt_calls), 1);
        block_calls++;
    }));
#endif
    /* A plain pthread does not count. */
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, return_arg, NULL), 0);
    pthread_join(pt, NULL);
    assert_false(RLThreadIsMultiThreaded());
    assert_int_equal(atomic_load(&mt_calls), 0);

    for (int i = 0; i < 3; i++) {
        RLThreadRef t = joinable_thread(return_arg, NULL);
        assert_true(RLThreadStart(t));
        assert_true(RLThreadJoin(t, NULL));
        RLRelease(t);
    }
    assert_true(RLThreadIsMultiThreaded());
    assert_int_equal(atomic_load(&mt_calls), 1);
    assert_int_equal(atomic_load(&mt_was_multithreaded_in_handler), 0);
    assert_false(RLThreadAddWillBecomeMultiThreadedHandler(will_become_mt, NULL));
    assert_rl_error(kRLErrorInvalidState);
#if __BLOCKS__
    assert_int_equal(block_calls, 1);
    assert_false(RLThreadAddWillBecomeMultiThreadedHandlerBlock(^{ block_calls++; }));
    assert_rl_error(kRLErrorInvalidState);
    assert_false(RLThreadAddWillBecomeMultiThreadedHandlerBlock(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
#endif
}

/* ---- start and join ---- */

static void *double_it(void *arg) { return (void *)((intptr_t)arg * 2); }

static void test_start_and_join_returns_result(void **state) {
    RLThreadRef t = joinable_thread(double_it, (void *)(intptr_t)21);
    assert_string_equal(RLGetTypeName(t), "RLThread");
    assert_false(RLThreadIsExecuting(t));
    assert_false(RLThreadIsFinished(t));
    assert_true(RLThreadIsJoinable(t));
    assert_true(RLThreadStart(t));
    void *res = NULL;
    assert_true(RLThreadJoin(t, &res));
    assert_int_equal((intptr_t)res, 42);
    assert_false(RLThreadIsExecuting(t));
    assert_true(RLThreadIsFinished(t));
    char *desc = RLCopyDescription(t);
    assert_non_null(desc);
    assert_non_null(strstr(desc, "finished"));
    free(desc);
    assert_true(RLRelease(t));
}

static _Atomic int gate;
static void *wait_for_gate(void *arg) {
    while (!atomic_load(&gate))
        usleep(100);
    return arg;
}

static void test_executing_while_running(void **state) {
    atomic_store(&gate, 0);
    RLThreadRef t = joinable_thread(wait_for_gate, NULL);
    assert_true(RLThreadStart(t));
    assert_true(RLThreadIsExecuting(t));
    assert_false(RLThreadIsFinished(t));
    atomic_store(&gate, 1);
    assert_true(RLThreadJoin(t, NULL));
    assert_true(RLThreadIsFinished(t));
    RLRelease(t);
}

static void *sum_entry(void *arg) {
    atomic_fetch_add((_Atomic long *)arg, 1);
    return arg;
}

static void test_thousand_threads(void **state) {
    enum { BATCH = 50 };
    long total = rl_test_iters(1000);
    _Atomic long ran = 0;
    RLThreadRef batch[BATCH];
    for (long done = 0; done < total;) {
        int n = 0;
        for (; n < BATCH && done + n < total; n++) {
            batch[n] = joinable_thread(sum_entry, &ran);
            assert_true(RLThreadStart(batch[n]));
        }
        for (int i = 0; i < n; i++) {
            void *res = NULL;
            assert_true(RLThreadJoin(batch[i], &res));
            assert_ptr_equal(res, &ran);
            RLRelease(batch[i]);
        }
        done += n;
    }
    assert_int_equal(atomic_load(&ran), total);
}

/* Releasing a joinable thread without joining it must not leak it (the
 * valgrind and ASan runs check this). */
static void test_release_unjoined_joinable(void **state) {
    atomic_store(&gate, 0);
    RLThreadRef t = joinable_thread(wait_for_gate, NULL);
    RLRetain(t);
    assert_true(RLThreadStart(t));
    RLRelease(t);
    atomic_store(&gate, 1);
    double deadline = rl_test_now() + 30;
    while (!RLThreadIsFinished(t))
        assert_true(rl_test_now() < deadline), usleep(1000);
    RLRelease(t);
    /* Give the detached-at-release pthread time to go. */
    usleep(10000);
}

/* ---- detached threads, one-call helpers ---- */

static _Atomic int detached_ran;
static void *detached_entry(void *arg) {
    RLThreadRef self = RLThreadGetCurrent();
    assert_non_null(self);
    assert_false(RLThreadIsJoinable(self));
    atomic_store(&detached_ran, (int)(intptr_t)arg);
    return NULL;
}

static void test_detach_new(void **state) {
    atomic_store(&detached_ran, 0);
    assert_true(RLThreadDetachNew(detached_entry, (void *)(intptr_t)7));
    wait_for_flag(&detached_ran);
    assert_int_equal(atomic_load(&detached_ran), 7);
}

static _Atomic int bg_ran;
static void bg_fn(void *arg) { atomic_store(&bg_ran, *(int *)arg); }

static void test_perform_in_background(void **state) {
    static int value = 5;
    atomic_store(&bg_ran, 0);
    assert_true(RLThreadPerformInBackground(bg_fn, &value));
    wait_for_flag(&bg_ran);
    assert_int_equal(atomic_load(&bg_ran), 5);
}

#if __BLOCKS__
static void test_blocks(void **state) {
    __block int seen = 0;
    RLThreadRef t = RLThreadCreateWithBlock(NULL, ^{
        seen = 11;
    });
    assert_non_null(t);
    assert_true(RLThreadSetJoinable(t, true));
    __block RLThreadRef exited = NULL;
    __block int order = 0;
    assert_true(RLThreadAddWillExitHandlerBlock(t, ^(RLThreadRef th) {
        exited = th;
        order = seen;
    }) != 0);
    RLThreadHandlerToken removed = RLThreadAddWillExitHandlerBlock(t, ^(RLThreadRef th) {
        order = -1;
    });
    assert_true(RLThreadRemoveWillExitHandler(t, removed));
    assert_int_equal(RLThreadAddWillExitHandlerBlock(t, NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_true(RLThreadStart(t));
    void *res = (void *)1;
    assert_true(RLThreadJoin(t, &res));
    assert_null(res);
    assert_int_equal(seen, 11);
    assert_ptr_equal(exited, t);
    assert_int_equal(order, 11); /* after the entry */
    RLRelease(t);

    static _Atomic int flag;
    atomic_store(&flag, 0);
    assert_true(RLThreadDetachNewWithBlock(^{
        atomic_store(&flag, 1);
    }));
    wait_for_flag(&flag);
}
#endif

/* ---- current, main, foreign ---- */

static void *current_entry(void *arg) {
    RLThreadRef *out = arg;
    out[0] = RLThreadGetCurrent();
    out[1] = RLThreadGetCurrent();
    out[2] = RLThreadIsMainThread() ? out[0] : NULL;
    out[3] = RLThreadGetMain();
    return NULL;
}

static void test_current_and_main(void **state) {
    assert_true(RLThreadIsMainThread());
    RLThreadRef main_t = RLThreadGetMain();
    assert_non_null(main_t);
    assert_ptr_equal(RLThreadGetCurrent(), main_t);
    assert_true(RLThreadIsMain(main_t));
    assert_true(RLThreadIsExecuting(main_t));
    assert_true(RLThreadGetStackSize(main_t) > 0);

    RLThreadRef seen[4] = {0};
    RLThreadRef t = joinable_thread(current_entry, seen);
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_ptr_equal(seen[0], t);
    assert_ptr_equal(seen[1], t);
    assert_null(seen[2]);
    assert_ptr_equal(seen[3], main_t);
    assert_false(RLThreadIsMain(t));
    RLRelease(t);
}

static _Atomic int foreign_exit_calls;
static void foreign_will_exit(RLThreadRef thread, void *info) {
    assert_ptr_equal(thread, info);
    assert_ptr_equal(RLThreadGetCurrent(), thread);
    atomic_fetch_add(&foreign_exit_calls, 1);
}

static void *foreign_entry(void *arg) {
    RLThreadRef *out = arg;
    RLThreadRef t = RLThreadGetCurrent();
    assert_non_null(t);
    assert_ptr_equal(RLThreadGetCurrent(), t);
    assert_false(RLThreadIsMain(t));
    assert_false(RLThreadIsMainThread());
    assert_true(RLThreadIsExecuting(t));
    assert_true(RLThreadSetName(t, "foreign-thread-with-long-name"));
    RLRetain(t);
    *out = t;
    assert_true(RLThreadAddWillExitHandler(t, foreign_will_exit, t) != 0);
    /* Joining or starting a thread we did not create is refused. */
    assert_false(RLThreadStart(t));
    assert_rl_error(kRLErrorInvalidState);
    return NULL;
}

static void test_foreign_thread(void **state) {
    atomic_store(&foreign_exit_calls, 0);
    RLThreadRef t = NULL;
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, foreign_entry, &t), 0);
    pthread_join(pt, NULL);
    assert_non_null(t);
    assert_int_equal(atomic_load(&foreign_exit_calls), 1);
    assert_true(RLThreadIsFinished(t));
    char *name = RLThreadCopyName(t);
    assert_string_equal(name, "foreign-thread-with-long-name");
    free(name);
    assert_false(RLThreadJoin(t, NULL));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);
}

/* ---- names ---- */

typedef struct name_probe {
    _Atomic int ready, go;
    char kernel_before[32], kernel_after[32];
    char *own_name;
} name_probe;

static void *name_entry(void *arg) {
    name_probe *p = arg;
    pthread_getname_np(pthread_self(), p->kernel_before, sizeof p->kernel_before);
    p->own_name = RLThreadCopyName(RLThreadGetCurrent());
    atomic_store(&p->ready, 1);
    while (!atomic_load(&p->go))
        usleep(100);
    pthread_getname_np(pthread_self(), p->kernel_after, sizeof p->kernel_after);
    return NULL;
}

static void test_names(void **state) {
    name_probe p;
    memset(&p, 0, sizeof p);
    RLThreadRef t = joinable_thread(name_entry, &p);
    char *n0 = RLThreadCopyName(t);
    assert_string_equal(n0, "");
    free(n0);
    const char *longname = "com.example.a-rather-long-thread-name";
    assert_true(RLThreadSetName(t, longname));
    assert_true(RLThreadStart(t));
    wait_for_flag(&p.ready);
    assert_string_equal(p.kernel_before, "com.example.a-r");
    assert_string_equal(p.own_name, longname);
    free(p.own_name);
    /* Read from another thread: its own name, not the reader's. */
    char *other = RLThreadCopyName(t);
    assert_string_equal(other, longname);
    free(other);
    /* Renamed from here while it runs. */
    assert_true(RLThreadSetName(t, "renamed"));
    atomic_store(&p.go, 1);
    assert_true(RLThreadJoin(t, NULL));
    assert_string_equal(p.kernel_after, "renamed");
    char *after = RLThreadCopyName(t);
    assert_string_equal(after, "renamed");
    free(after);
    /* Settable after the thread finished too; NULL clears. */
    assert_true(RLThreadSetName(t, NULL));
    after = RLThreadCopyName(t);
    assert_string_equal(after, "");
    free(after);
    RLRelease(t);
}

static void *copy_name_of(void *thread) { return RLThreadCopyName(thread); }

/* Threads the library did not start read the kernel's name until one is
 * set through the library, as Foundation's Thread.name does. */
static void test_main_thread_name_is_the_kernels(void **state) {
    RLThreadRef main_thread = RLThreadGetMain();
    char saved[32];
    assert_int_equal(pthread_getname_np(pthread_self(), saved, sizeof saved), 0);
    /* The process name, cut to the kernel's 15 bytes: what the kernel
     * lists for the process (the program's name, or valgrind's when run
     * under it). */
    char expected[32] = "";
    FILE *comm = fopen("/proc/self/comm", "r");
    assert_non_null(comm);
    assert_non_null(fgets(expected, sizeof expected, comm));
    fclose(comm);
    expected[strcspn(expected, "\n")] = '\0';
    assert_true(strlen(expected) > 0 && strlen(expected) <= 15);
    char *name = RLThreadCopyName(main_thread);
    assert_string_equal(name, expected);
    free(name);
    /* Renamed behind the library's back: read from the kernel again, here
     * and from another thread. */
    assert_int_equal(pthread_setname_np(pthread_self(), "kernel-main"), 0);
    name = RLThreadCopyName(main_thread);
    assert_string_equal(name, "kernel-main");
    free(name);
    name = rl_test_on_other_thread(copy_name_of, main_thread);
    assert_string_equal(name, "kernel-main");
    free(name);
    assert_int_equal(pthread_setname_np(pthread_self(), saved), 0);
}

typedef struct foreign_name_probe {
    _Atomic int ready, go;
    RLThreadRef thread;
    char *own_before, *own_after;
} foreign_name_probe;

static void *foreign_name_entry(void *arg) {
    foreign_name_probe *p = arg;
    pthread_setname_np(pthread_self(), "set-by-pthread");
    p->thread = (RLThreadRef)RLRetain(RLThreadGetCurrent());
    p->own_before = RLThreadCopyName(p->thread);
    atomic_store(&p->ready, 1);
    while (!atomic_load(&p->go))
        usleep(100);
    p->own_after = RLThreadCopyName(p->thread);
    return NULL;
}

static void test_foreign_thread_name_is_the_kernels(void **state) {
    foreign_name_probe p;
    memset(&p, 0, sizeof p);
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, foreign_name_entry, &p), 0);
    wait_for_flag(&p.ready);
    assert_string_equal(p.own_before, "set-by-pthread");
    /* Read from this thread: the foreign thread's name, not ours. */
    char *other = RLThreadCopyName(p.thread);
    assert_string_equal(other, "set-by-pthread");
    free(other);
    /* A name set through the library wins, in full. */
    assert_true(RLThreadSetName(p.thread, "set-through-the-library"));
    atomic_store(&p.go, 1);
    assert_int_equal(pthread_join(pt, NULL), 0);
    assert_string_equal(p.own_after, "set-through-the-library");
    free(p.own_before);
    free(p.own_after);
    RLRelease(p.thread);
}

static void test_kernel_name_not_split_in_utf8(void **state) {
    name_probe p;
    memset(&p, 0, sizeof p);
    atomic_store(&p.go, 1);
    RLThreadRef t = joinable_thread(name_entry, &p);
    /* 14 ASCII bytes, then a 2-byte character that would straddle byte 15. */
    assert_true(RLThreadSetName(t, "abcdefghijklmn\xc3\xa9z"));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_string_equal(p.kernel_before, "abcdefghijklmn");
    assert_string_equal(p.own_name, "abcdefghijklmn\xc3\xa9z");
    free(p.own_name);
    RLRelease(t);
}

/* ---- stack size ---- */

static void *stack_entry(void *arg) {
    pthread_attr_t attr;
    size_t size = 0;
    assert_int_equal(pthread_getattr_np(pthread_self(), &attr), 0);
    pthread_attr_getstacksize(&attr, &size);
    pthread_attr_destroy(&attr);
    *(size_t *)arg = size;
    return NULL;
}

static void test_stack_size(void **state) {
    size_t seen = 0;
    RLThreadRef t = joinable_thread(stack_entry, &seen);
    assert_int_equal(RLThreadGetStackSize(t), 512 * 1024);
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    /* glibc may hand out a cached stack up to 4x the requested size, so
     * check the bounds: at least as asked, far below pthread's 8 MB. */
    assert_true(seen >= 512 * 1024 && seen <= 2 * 1024 * 1024);
    RLRelease(t);

    seen = 0;
    t = joinable_thread(stack_entry, &seen);
    assert_true(RLThreadSetStackSize(t, 16 * 1024 * 16));
    assert_int_equal(RLThreadGetStackSize(t), 256 * 1024);
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_true(seen >= 256 * 1024 && seen <= 1024 * 1024);
    RLRelease(t);

    seen = 0;
    t = joinable_thread(stack_entry, &seen);
    assert_true(RLThreadSetStackSize(t, 4 * 1024 * 1024));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_true(seen >= 4 * 1024 * 1024 && seen <= 16 * 1024 * 1024);
    RLRelease(t);

    /* The smallest allowed stack works. */
    seen = 0;
    t = joinable_thread(stack_entry, &seen);
    assert_true(RLThreadSetStackSize(t, 16 * 1024));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_true(seen >= 16 * 1024);
    RLRelease(t);
}

/* ---- priority ---- */

static void *nice_entry(void *arg) {
    errno = 0;
    *(int *)arg = getpriority(PRIO_PROCESS, (id_t)gettid());
    return NULL;
}

static void test_priority(void **state) {
    int base_nice = getpriority(PRIO_PROCESS, (id_t)gettid());
    int nice = -100;
    RLThreadRef t = joinable_thread(nice_entry, &nice);
    assert_true(RLThreadGetPriority(t) == 0.5);
    assert_true(RLThreadSetPriority(t, 0.25));
    assert_true(RLThreadGetPriority(t) == 0.25);
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    /* 0.25 lies halfway between the default (nice 0) and 0.0 (nice 19). */
    assert_int_equal(nice, base_nice > 10 ? base_nice : 10);
    assert_true(RLThreadGetPriority(t) == 0.25);
    RLRelease(t);

    /* Without an explicit priority a thread keeps its creator's nice. */
    nice = -100;
    t = joinable_thread(nice_entry, &nice);
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(nice, base_nice);
    RLRelease(t);

    /* Above default: applied where allowed, read back as set either way. */
    t = joinable_thread(nice_entry, &nice);
    assert_true(RLThreadSetPriority(t, 1.0));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_true(nice <= base_nice);
    assert_true(RLThreadGetPriority(t) == 1.0);
    RLRelease(t);
}

/* ---- dictionary ---- */

static _Atomic int destroyed_sum;
static void destroy_int(void *v) { atomic_fetch_add(&destroyed_sum, *(int *)v); }

static void test_dictionary(void **state) {
    static int one = 1, two = 2, four = 4;
    atomic_store(&destroyed_sum, 0);
    RLThreadRef t = joinable_thread(return_arg, NULL);
    void *v = NULL;
    assert_false(RLThreadDictionaryGetValue(t, "k", &v));
    assert_rl_error(kRLErrorNotFound);
    assert_true(RLThreadDictionarySetValue(t, "k", &one, destroy_int));
    assert_true(RLThreadDictionaryGetValue(t, "k", &v));
    assert_ptr_equal(v, &one);
    /* Replacing destroys the old value. */
    assert_true(RLThreadDictionarySetValue(t, "k", &two, destroy_int));
    assert_int_equal(atomic_load(&destroyed_sum), 1);
    assert_true(RLThreadDictionaryGetValue(t, "k", &v));
    assert_ptr_equal(v, &two);
    assert_true(RLThreadDictionarySetValue(t, "other", &four, destroy_int));
    assert_true(RLThreadDictionaryRemoveValue(t, "k"));
    assert_int_equal(atomic_load(&destroyed_sum), 3);
    assert_false(RLThreadDictionaryRemoveValue(t, "k"));
    assert_rl_error(kRLErrorNotFound);
    /* NULL values are values. */
    assert_true(RLThreadDictionarySetValue(t, "null", NULL, NULL));
    v = &one;
    assert_true(RLThreadDictionaryGetValue(t, "null", &v));
    assert_null(v);
    /* The thread's exit destroys what is left. */
    assert_true(RLThreadStart(t));
    assert_true(RLThreadJoin(t, NULL));
    assert_int_equal(atomic_load(&destroyed_sum), 7);
    RLRelease(t);
}

/* A reference-counted value, for RLThreadDictionaryCopyValue. */
typedef struct counted {
    _Atomic int rc;
    _Atomic int in_retain;
} counted;

static void counted_release(void *p) { atomic_fetch_sub(&((counted *)p)->rc, 1); }

static void *counted_retain(void *p) {
    atomic_fetch_add(&((counted *)p)->rc, 1);
    return p;
}

static RLThreadRef copy_thread;

/* Removes the entry while its value is being copied: the dictionary must
 * hold the destructor back until this returns. */
static void *counted_retain_and_remove(void *p) {
    counted *c = p;
    assert_true(RLThreadDictionaryRemoveValue(copy_thread, "k"));
    assert_int_equal(atomic_load(&c->rc), 1); /* not destroyed yet */
    return counted_retain(p);
}

static void test_dictionary_copy_value(void **state) {
    counted c = {1, 0}; /* the dictionary's reference */
    RLThreadRef t = joinable_thread(return_arg, NULL);
    copy_thread = t;
    assert_true(RLThreadDictionarySetValue(t, "k", &c, counted_release));
    void *v = NULL;
    assert_true(RLThreadDictionaryCopyValue(t, "k", counted_retain, &v));
    assert_ptr_equal(v, &c);
    assert_int_equal(atomic_load(&c.rc), 2);
    counted_release(v);

    v = NULL;
    assert_true(RLThreadDictionaryCopyValue(t, "k", counted_retain_and_remove, &v));
    assert_ptr_equal(v, &c);
    assert_int_equal(atomic_load(&c.rc), 1); /* ours; the dictionary's went after the copy */
    assert_false(RLThreadDictionaryGetValue(t, "k", NULL));
    assert_rl_error(kRLErrorNotFound);
    counted_release(v);
    assert_int_equal(atomic_load(&c.rc), 0);

    /* Misuse. */
    long fake[16] = {0};
    assert_false(RLThreadDictionaryCopyValue(NULL, "k", counted_retain, &v));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionaryCopyValue((RLThreadRef)fake, "k", counted_retain, &v));
    assert_rl_error(kRLErrorInvalidObject);
    assert_false(RLThreadDictionaryCopyValue(t, NULL, counted_retain, &v));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionaryCopyValue(t, "k", NULL, &v));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_false(RLThreadDictionaryCopyValue(t, "absent", counted_retain, &v));
    assert_rl_error(kRLErrorNotFound);
    RLRelease(t);
}

/* ---- cancellation ---- */

static _Atomic int cancelled_entry_ran;
static void *must_not_run(void *arg) {
    atomic_store(&cancelled_entry_ran, 1);
    return arg;
}

static void test_cancel_before_start(void **state) {
    atomic_store(&cancelled_entry_ran, 0);
    RLThreadRef t = joinable_thread(must_not_run, (void *)1);
    assert_true(RLThreadCancel(t));
    assert_true(RLThreadIsCancelled(t));
    assert_true(RLThreadStart(t));
    assert_true(RLThreadIsFinished(t));
    assert_false(RLThreadIsExecuting(t));
    void *res = (void *)2;
    assert_true(RLThreadJoin(t, &res));
    assert_null(res);
    assert_false(RLThreadStart(t));
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);

    /* Detached, too. */
    t = RLThreadCreate(NULL, must_not_run, NULL);
    assert_true(RLThreadCancel(t));
    assert_true(RLThreadStart(t));
    RLRelease(t);
    usleep(20000);
    assert_int_equal(atomic_load(&cancelled_entry_ran), 0);
}

static void *until_cancelled(void *arg) {
    RLThreadRef self = RLThreadGetCurrent();
    long spins = 0;
    while (!RLThreadIsCancelled(self)) {
        usleep(100);
        spins++;
    }
    return (void *)(intptr_t)(spins >= 0);
}

static void test_cancel_running(void **state) {
    RLThreadRef t = joinable_thread(until_cancelled, NULL);
    assert_true(RLThreadStart(t));
    assert_false(RLThreadIsCancelled(t));
    assert_true(RLThreadCancel(t));
    assert_true(RLThreadCancel(t));
    void *res = NULL;
    assert_true(RLThreadJoin(t, &res));
    assert_int_equal((intptr_t)res, 1);
    assert_true(RLThreadIsCancelled(t));
    RLRelease(t);
}

/* ---- will-exit ordering and RLThreadExit ---- */

typedef struct exit_log {
    _Atomic int n;
    char ev[16];
    pthread_t handler_pthread, entry_pthread;
    RLThreadRef handler_current;
} exit_log;

static void log_event(exit_log *log, char c) {
    int i = atomic_fetch_add(&log->n, 1);
    if (i < (int)sizeof log->ev - 1)
        log->ev[i] = c;
}

static exit_log *global_log;

static void handler_a(RLThreadRef thread, void *info) {
    exit_log *log = info;
    log->handler_pthread = pthread_self();
    log->handler_current = RLThreadGetCurrent();
    assert_true(RLThreadIsExecuting(thread));
    void *v = NULL;
    /* The dictionary is still there for handlers. */
    assert_true(RLThreadDictionaryGetValue(thread, "log", &v));
    log_event(log, 'A');
}
static void handler_b(RLThreadRef thread, void *info) { log_event(info, 'B'); }
static void handler_removed(RLThreadRef thread, void *info) { log_event(info, 'X'); }
static void handler_global(RLThreadRef thread, void *info) {
    exit_log *log = global_log;
    if (log && thread == log->handler_current)
        log_event(log, 'G');
}
static void dict_destructor(void *v) { log_event(v, 'D'); }

static void cleanup_handler(void *arg) { log_event(arg, 'C'); }

static void *logging_entry(void *arg) {
    exit_log *log = arg;
    log->entry_pthread = pthread_self();
    RLThreadRef self = RLThreadGetCurrent();
    assert_true(RLThreadDictionarySetValue(self, "log", log, dict_destructor));
    log_event(log, 'E');
    return arg;
}

static void *exiting_entry(void *arg) {
    exit_log *log = arg;
    log->entry_pthread = pthread_self();
    assert_true(RLThreadDictionarySetValue(RLThreadGetCurrent(), "log", log, dict_destructor));
    pthread_cleanup_push(cleanup_handler, log);
    log_event(log, 'E');
    RLThreadExit();
    log_event(log, 'Z'); /* never */
    pthread_cleanup_pop(0);
    return arg;
}

static void run_exit_order(RLThreadEntry entry, const char *expected, bool expect_result) {
    exit_log log;
    memset(&log, 0, sizeof log);
    RLThreadRef t = joinable_thread(entry, &log);
    log.handler_current = t; /* for the global handler's filter */
    global_log = &log;
    RLThreadHandlerToken ga = RLThreadAddWillExitHandler(NULL, handler_global, NULL);
    assert_true(ga != 0);
    assert_true(RLThreadAddWillExitHandler(t, handler_a, &log) != 0);
    RLThreadHandlerToken x = RLThreadAddWillExitHandler(t, handler_removed, &log);
    assert_true(RLThreadAddWillExitHandler(t, handler_b, &log) != 0);
    assert_true(RLThreadRemoveWillExitHandler(t, x));
    assert_false(RLThreadRemoveWillExitHandler(t, x));
    assert_rl_error(kRLErrorNotFound);
    assert_true(RLThreadStart(t));
    void *res = (void *)1;
    assert_true(RLThreadJoin(t, &res));
    assert_ptr_equal(res, expect_result ? (void *)&log : NULL);
    assert_true(RLThreadIsFinished(t));
    assert_string_equal(log.ev, expected);
    assert_true(pthread_equal(log.handler_pthread, log.entry_pthread));
    assert_ptr_equal(log.handler_current, t);
    assert_true(RLThreadRemoveWillExitHandler(NULL, ga));
    global_log = NULL;
    /* A finished thread takes no more handlers. */
    assert_int_equal(RLThreadAddWillExitHandler(t, handler_b, &log), 0);
    assert_rl_error(kRLErrorInvalidState);
    RLRelease(t);
}

static void test_will_exit_order(void **state) { run_exit_order(logging_entry, "EABGD", true); }

static void test_exit_runs_cleanup_first(void **state) { run_exit_order(exiting_entry, "ECABGD", false); }

/* ---- sleeping ---- */

static void on_usr1(int sig) { (void)sig; }

typedef struct sig_pest {
    pthread_t target;
    _Atomic int stop;
} sig_pest;

static void *pester(void *arg) {
    sig_pest *p = arg;
    while (!atomic_load(&p->stop)) {
        pthread_kill(p->target, SIGUSR1);
        usleep(2000);
    }
    return NULL;
}

static void test_sleep_not_cut_short_by_signals(void **state) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART: nanosleep would return EINTR */
    sigaction(SIGUSR1, &sa, &old);
    sig_pest p = {.target = pthread_self()};
    pthread_t pt;
    assert_int_equal(pthread_create(&pt, NULL, pester, &p), 0);

    double t0 = rl_test_now();
    assert_true(RLThreadSleepForTimeInterval(0.1));
    double slept = rl_test_now() - t0;
    assert_true(slept >= 0.1);

    RLAbsoluteTime until = RLAbsoluteTimeGetCurrent() + 0.05;
    assert_true(RLThreadSleepUntilDate(until));
    assert_true(RLAbsoluteTimeGetCurrent() >= until - 0.001);

    atomic_store(&p.stop, 1);
    pthread_join(pt, NULL);
    sigaction(SIGUSR1, &old, NULL);

    assert_true(RLThreadSleepForTimeInterval(0));
    assert_true(RLThreadSleepForTimeInterval(-5));
    assert_true(RLThreadSleepUntilDate(RLAbsoluteTimeGetCurrent() - 100));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_becomes_multithreaded_once),
        cmocka_unit_test(test_start_and_join_returns_result),
        cmocka_unit_test(test_executing_while_running),
        cmocka_unit_test(test_thousand_threads),
        cmocka_unit_test(test_release_unjoined_joinable),
        cmocka_unit_test(test_detach_new),
        cmocka_unit_test(test_perform_in_background),
#if __BLOCKS__
        cmocka_unit_test(test_blocks),
#endif
        cmocka_unit_test(test_current_and_main),
        cmocka_unit_test(test_foreign_thread),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_main_thread_name_is_the_kernels),
        cmocka_unit_test(test_foreign_thread_name_is_the_kernels),
        cmocka_unit_test(test_kernel_name_not_split_in_utf8),
        cmocka_unit_test(test_stack_size),
        cmocka_unit_test(test_priority),
        cmocka_unit_test(test_dictionary),
        cmocka_unit_test(test_dictionary_copy_value),
        cmocka_unit_test(test_cancel_before_start),
        cmocka_unit_test(test_cancel_running),
        cmocka_unit_test(test_will_exit_order),
        cmocka_unit_test(test_exit_runs_cleanup_first),
        cmocka_unit_test(test_sleep_not_cut_short_by_signals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
