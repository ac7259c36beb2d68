/* test_loop_memory.c — what a run-loop thread holds while it sleeps with
 * one timer (the memory table's thread row, bench_memory.c): the loop
 * object fits its 1 KiB pool slot, and the loop's own allocations (modes,
 * names, arrays, timer heaps) are sized for what it holds, with nothing
 * made for what it does not use (no histograms, no fd table, no array of
 * due timers). Counted by the loop itself (rl__loop_held_bytes), not by
 * RSS. Then what a loop made that small does on first use of each thing
 * it has not made yet: many timers and modes, timing turned on later, a
 * fork() child's own loop, a timer array that cannot grow. */
#include "testutil.h"
#include <crunloop/RLLockDebug.h>
#include <crunloop/RLWorkerThread.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "RLBase.h"
#include "rl_poll_backend.h"
#include "RLRunLoopMode.h"
#include "rl_lock.h"

static void nothing(RLRunLoopTimerRef t, void *info) { (void)t, (void)info; }

/* A loop thread asleep in its default mode with one timer an hour away,
 * until stopped. */
typedef struct {
    pthread_t th;
    _Atomic(RLRunLoopRef) rl;
    bool nested; /* its loop ran nested in callouts before it sleeps (run_nested) */
} sleeper;

/* A timer's callout that runs the loop nested. */
static void run_nested(RLRunLoopTimerRef t, void *info) {
    (void)t, (void)info;
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.001, false);
}

static void *sleeper_main(void *arg) {
    sleeper *s = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, nothing, NULL);
    assert_non_null(t);
    RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode);
    RLRelease(t);
    if (s->nested) { /* its callouts run the loop nested, before it sleeps */
        RLRunLoopTimerRef n = RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, run_nested, NULL);
        assert_non_null(n);
        RLRunLoopAddTimer(rl, n, kRLRunLoopDefaultMode);
        RLRelease(n);
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.05, false);
    }
    atomic_store(&s->rl, rl);
    while (RLRunLoopRunInMode(kRLRunLoopDefaultMode, 60, false) != kRLRunLoopRunStopped) {}
    return NULL;
}

static RLRunLoopRef sleeper_start(sleeper *s) {
    atomic_store(&s->rl, NULL);
    s->nested = false;
    assert_int_equal(pthread_create(&s->th, NULL, sleeper_main, s), 0);
    RLRunLoopRef rl;
    while (!(rl = atomic_load(&s->rl))) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    rl_test_wait_until_waiting(rl);
    return rl;
}

static void sleeper_stop(sleeper *s) {
    RLRunLoopStop(atomic_load(&s->rl));
    assert_int_equal(pthread_join(s->th, NULL), 0);
}

static void test_the_loop_object_fits_one_kib(void **state) {
    (void)state;
    /* The pool's 1,024-byte class (rl_pool.c): one byte more and every
     * loop takes a 1,088-byte slot. */
    assert_true(sizeof(struct RLRunLoop) <= 1024);
}

/* Before: 772 bytes (room for 8 modes, 16 timers in the heap, 16 homed
 * timers, copies of the default mode's name); now about 350. */
static void test_a_sleeping_loop_holds_what_it_uses_only(void **state) {
    (void)state;
    sleeper s;
    RLRunLoopRef rl = sleeper_start(&s);
    rl__loop_mem mem;
    size_t held = rl__loop_held_bytes(rl, &mem);
    assert_int_equal(mem.stats, 0); /* timing never on, never reset */
    assert_int_equal(mem.fds, 0);   /* no fd source ever added */
    assert_int_equal(mem.due, 0);   /* no timer ever fired */
    assert_int_equal(held, mem.modes + mem.arrays);
    if (held > 400)
        fail_msg("a loop asleep with one timer holds %zu bytes (modes %zu, arrays %zu)", held, mem.modes, mem.arrays);
    sleeper_stop(&s);
}

/* The pages of its stack a loop thread touches to start its loop, add a
 * timer and go to sleep (they stay resident as long as the thread lives):
 * on a stack of its own, fresh from mmap, so that no earlier thread's
 * pages count, counted with mincore. The top page holds the thread's
 * descriptor and TLS (glibc), the next the first frames. Sanitizer builds
 * use far more stack: their bound only checks that the count is sane. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RL_TEST_SANITIZED 1
#endif
#endif
#ifdef RL_TEST_SANITIZED
enum { STACK_SIZE = 1024 * 1024, STACK_PAGES_MAX = 64 };
#else
/* 2: the top page (glibc's thread descriptor and TLS, the entry's frame)
 * and the run's; do_fds, with its array of 64 fd callouts, is out of line
 * (RLRunLoopRun.c): inlined, it took the run's frame into a third page. */
enum { STACK_SIZE = 64 * 1024, STACK_PAGES_MAX = 2 };
#endif

static size_t resident_pages(void *base, size_t size) {
    long page = sysconf(_SC_PAGESIZE);
    size_t n = size / (size_t)page, in = 0;
    unsigned char *v = calloc(n, 1);
    assert_non_null(v);
    assert_int_equal(mincore(base, size, v), 0);
    for (size_t i = 0; i < n; i++)
        in += v[i] & 1;
    free(v);
    return in;
}

/* A loop thread on a fresh stack of its own, asleep: how many pages of
 * its stack it touched. */
static size_t sleeper_stack_pages(bool nested) {
    void *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(stack != MAP_FAILED);
    pthread_attr_t a;
    assert_int_equal(pthread_attr_init(&a), 0);
    assert_int_equal(pthread_attr_setstack(&a, stack, STACK_SIZE), 0);
    sleeper s;
    atomic_store(&s.rl, NULL);
    s.nested = nested;
    assert_int_equal(pthread_create(&s.th, &a, sleeper_main, &s), 0);
    pthread_attr_destroy(&a);
    RLRunLoopRef rl;
    while (!(rl = atomic_load(&s.rl))) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    rl_test_wait_until_waiting(rl);
    size_t pages = resident_pages(stack, STACK_SIZE);
    sleeper_stop(&s);
    assert_int_equal(munmap(stack, STACK_SIZE), 0);
    return pages;
}

static void test_a_sleeping_loop_thread_touches_few_stack_pages(void **state) {
    (void)state;
    /* The second such thread: the first to call a libc function in the
     * process binds it (the dynamic linker's lazy binding, 3 KiB of stack
     * below the call), once per process, not per thread. */
    sleeper_stack_pages(false);
    size_t pages = sleeper_stack_pages(false);
    /* With the lock-order detector on (make check-lockdep), its
     * bookkeeping runs on the loop's stack too: a page more. */
    size_t max = STACK_PAGES_MAX + (RLLockDebugIsEnabled() ? 1 : 0);
    if (pages > max || pages < 1)
        fail_msg("a sleeping loop thread touched %zu pages of its stack (at most %zu)", pages, max);
}

/* Its loop ran nested in a timer's callout before it sleeps: still the
 * two pages. A run's frame is under every callout and
 * nested run: the wait's events on it are a few (a batch in the loop's own
 * array once a wait filled them), the due timers are fired out of line,
 * and the error message is not in every thread's TLS (RLError.c). Before:
 * three pages. */
static void test_a_loop_thread_that_ran_nested_sleeps_on_few_pages(void **state) {
    (void)state;
    sleeper_stack_pages(true);
    size_t pages = sleeper_stack_pages(true);
    size_t max = STACK_PAGES_MAX + (RLLockDebugIsEnabled() ? 1 : 0);
    if (pages > max || pages < 1)
        fail_msg("a loop thread that ran nested touched %zu pages of its stack (at most %zu)", pages, max);
}

/* ---- a worker thread's stack ---- */

/* Where a worker's request found its thread's stack, and the part below
 * its frame it filled with a pattern (to see how deep the stack went
 * after). */
typedef struct {
    char *top, *low, *filled_to;
    _Atomic bool done;
} stack_probe;

enum { PROBE_BYTE = 0xA5, PROBE_SPAN = 48 * 1024, PROBE_GAP = 512 };

/* Not inlined: its frame and memset's lie within PROBE_GAP below its
 * frame's address. */
static __attribute__((noinline)) void probe_fill(stack_probe *p) {
    char *sp = __builtin_frame_address(0);
    pthread_attr_t a;
    void *addr;
    size_t size;
    assert_int_equal(pthread_getattr_np(pthread_self(), &a), 0);
    assert_int_equal(pthread_attr_getstack(&a, &addr, &size), 0);
    pthread_attr_destroy(&a);
    p->top = (char *)addr + size; /* glibc's thread descriptor and TLS sit at the top */
    p->low = p->top - PROBE_SPAN > (char *)addr ? p->top - PROBE_SPAN : (char *)addr;
    p->filled_to = sp - PROBE_GAP;
    memset(p->low, PROBE_BYTE, (size_t)(p->filled_to - p->low));
}

/* A worker's request, as the Swift overlay's `async` makes one: adds a
 * timer an hour away to the worker's loop (which then sleeps). */
static void worker_adds_timer(void *arg) {
    stack_probe *p = arg;
    probe_fill(p);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, nothing, NULL);
    assert_non_null(t);
    assert_true(RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, kRLRunLoopDefaultMode));
    RLRelease(t);
    atomic_store(&p->done, true);
}

/* How deep (bytes from the top of its stack) the worker's stack went from
 * its request on: the lowest byte not left as filled. */
static size_t probe_depth(const stack_probe *p) {
    const unsigned char *b = (const unsigned char *)p->low;
    while (b < (const unsigned char *)p->filled_to && *b == PROBE_BYTE)
        b++;
    return (size_t)(p->top - (const char *)b);
}

/* A started worker that ran one request adding a timer, asleep: how deep
 * its stack went, request and sleep included: within two pages. Before:
 * three (8,752 bytes, in this program: 64 events and the due
 * timers' callouts on the run's frame, the error message in TLS, a source
 * keeping the loop alive); now about 7,100. */
static void test_a_sleeping_worker_thread_stays_within_two_pages(void **state) {
    (void)state;
#ifdef RL_TEST_SANITIZED
    skip(); /* sanitizers' frames: the count says nothing */
#else
    const char *scale = getenv("RL_TEST_SCALE");
    if (scale && strcmp(scale, "valgrind") == 0)
        skip(); /* valgrind's frames, and it takes the fill below the stack pointer for a bad write */
    long page = sysconf(_SC_PAGESIZE);
    /* The shallowest of three rounds after a first: a round whose loop
     * took a way to sleep for the first time in the process (the spin, the
     * nap: under load) also bound its libc functions then (the dynamic
     * linker's frame, once); the loop's own depth is in every round. */
    size_t depth = SIZE_MAX;
    for (int round = 0; round < 4; round++) {
        RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, "probe");
        assert_non_null(w);
        assert_true(RLWorkerThreadStart(w));
        stack_probe p = {0};
        assert_true(RLWorkerThreadPerformAsync(w, worker_adds_timer, &p));
        RLRunLoopRef rl = RLWorkerThreadCopyRunLoop(w);
        assert_non_null(rl);
        double until = rl_test_now() + 20;
        while (!atomic_load(&p.done) && rl_test_now() < until) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        assert_true(atomic_load(&p.done));
        rl_test_wait_until_waiting(rl);
        if (round > 0 && probe_depth(&p) < depth)
            depth = probe_depth(&p);
        RLRelease(rl);
        assert_true(RLWorkerThreadStop(w));
        RLRelease(w);
    }
    size_t max = (2 + (RLLockDebugIsEnabled() ? 1 : 0)) * (size_t)page;
    if (depth > max)
        fail_msg("a sleeping worker's stack went %zu bytes deep (at most %zu)", depth, max);
#endif
}

/* ---- the fd table: records for the fds a loop watches, not for every
 * number below them ---- */

typedef struct {
    int fd;
    RLFileDescriptorRef f;
    RLRunLoopSourceRef s;
    int calls;
} watched;

static void on_readable(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    watched *w = info;
    uint64_t v;
    assert_true(types & kRLFileDescriptorReadCallBack);
    assert_int_equal(read(w->fd, &v, sizeof v), (ssize_t)sizeof v);
    w->calls++;
    RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
}

/* An eventfd numbered `at` or above, watched for reading in `mode` of the
 * current loop. */
static void watch_at(watched *w, int at, RLRunLoopMode mode) {
    int e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(e >= 0);
    w->fd = fcntl(e, F_DUPFD_CLOEXEC, at);
    assert_true(w->fd >= at);
    close(e);
    w->calls = 0;
    RLFileDescriptorContext ctx = {0, w, NULL, NULL, NULL};
    w->f = RLFileDescriptorCreate(NULL, w->fd, true, on_readable, &ctx);
    assert_non_null(w->f);
    RLFileDescriptorEnableCallBacks(w->f, kRLFileDescriptorReadCallBack);
    w->s = RLFileDescriptorCreateRunLoopSource(NULL, w->f, 0);
    assert_non_null(w->s);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), w->s, mode);
}

static void unwatch(watched *w) {
    RLFileDescriptorInvalidate(w->f); /* closes the fd */
    RLRelease(w->s);
    RLRelease(w->f);
}

static void poke(watched *w) {
    uint64_t one = 1;
    assert_int_equal(write(w->fd, &one, sizeof one), (ssize_t)sizeof one);
}

/* Before: one fd numbered 900 made the table 1,024 records (48 KiB), all
 * written; now 16, from 900 up. */
static void test_one_high_fd_holds_few_records(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    watched w;
    watch_at(&w, 900, "test.fd.high");
    rl__loop_mem mem;
    rl__loop_held_bytes(rl, &mem);
    if (mem.fds > 16 * sizeof(rl__fdreg) + 64)
        fail_msg("one fd numbered %d: the fd table holds %zu bytes", w.fd, mem.fds);
    poke(&w);
    RLRunLoopRunInMode("test.fd.high", 5, true);
    assert_int_equal(w.calls, 1);
    unwatch(&w);
}

/* fds added from high to low and low to high, so that the table grows at
 * both ends: each one's callout comes, its own, as it is poked; removed and
 * added again, the same. */
static void test_fds_at_both_ends_of_the_table(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    enum { N = 6 };
    static const int at[N] = {700, 300, 950, 40, 701, 2000};
    watched w[N];
    for (int i = 0; i < N; i++)
        watch_at(&w[i], at[i], "test.fd.ends");
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            poke(&w[i]);
            int before = w[i].calls;
            for (int k = 0; k < 50 && w[i].calls == before; k++)
                RLRunLoopRunInMode("test.fd.ends", 1, true);
            assert_int_equal(w[i].calls, before + 1);
            for (int j = 0; j < N; j++)
                assert_int_equal(w[j].calls, j <= i ? round + 1 : round);
        }
        /* Out of the mode and back in, in the other order. */
        for (int i = 0; i < N; i++)
            RLRunLoopRemoveSource(rl, w[i].s, "test.fd.ends");
        for (int i = N - 1; i >= 0; i--)
            RLRunLoopAddSource(rl, w[i].s, "test.fd.ends");
    }
    rl__loop_mem mem;
    rl__loop_held_bytes(rl, &mem);
    assert_true(mem.fds < 4096 * sizeof(rl__fdreg)); /* the span 40..2000, not more */
    for (int i = 0; i < N; i++)
        unwatch(&w[i]);
}

/* A wait's events: a few on the run's frame, and a batch of 64 in the
 * loop's own array made the first time a wait filled the few. A loop
 * whose fds come ready a few at a time never makes it; one with many ready
 * at once gets all of them from one wait again, and a run nested in one
 * of their callouts (the array in use) waits with its own few. */
enum { NBUSY = 20 };
static watched busy[NBUSY], inner;
static int nested_calls;

static void run_nested_in_callout(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    on_readable(f, types, info);
    /* Nested: the outer wait's events are in the array; an fd that was not
     * among them comes ready, and its callout comes from the nested run. */
    poke(&inner);
    int before = inner.calls;
    for (int k = 0; k < 50 && inner.calls == before; k++)
        RLRunLoopRunInMode("test.fd.batch", 1, true);
    nested_calls += inner.calls - before;
}

/* The fd callouts one pass makes with every one of the n fds poked. */
static int one_pass(int n) {
    int before = 0, after = 0;
    for (int i = 0; i < n; i++) {
        poke(&busy[i]);
        before += busy[i].calls;
    }
    RLRunLoopRunInMode("test.fd.batch", 0, false);
    for (int i = 0; i < n; i++)
        after += busy[i].calls;
    return after - before;
}

static void *events_few_then_batch(void *arg) {
    (void)arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    for (int i = 0; i < NBUSY; i++)
        watch_at(&busy[i], 100 + i, "test.fd.batch");
    watch_at(&inner, 200, "test.fd.batch");
    /* Three at a time: the few. */
    for (int round = 0; round < 3; round++)
        assert_int_equal(one_pass(3), 3);
    assert_null(rl->ev_big);
    /* Twenty at once: a wait fills the few (8 events, a wake-up of the
     * loop's own among them at most)... */
    int first = one_pass(NBUSY);
    assert_true(first >= 7 && first <= 8);
    assert_non_null(rl->ev_big);
    for (int k = 0; k < 10; k++)
        RLRunLoopRunInMode("test.fd.batch", 0, false); /* the rest */
    /* ...and from then on one wait brings all twenty. */
    assert_int_equal(one_pass(NBUSY), NBUSY);
    assert_int_equal(one_pass(NBUSY), NBUSY);
    /* A run nested in a callout while the array holds the outer wait's
     * events: its own events come, and the outer pass's callouts too. */
    RLFileDescriptorRef f = busy[NBUSY - 1].f;
    RLFileDescriptorContext ctx = {0, &busy[NBUSY - 1], NULL, NULL, NULL};
    RLRunLoopSourceRef old = busy[NBUSY - 1].s;
    RLRunLoopRemoveSource(rl, old, "test.fd.batch");
    RLRelease(old);
    RLFileDescriptorInvalidate(f);
    RLRelease(f);
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(fd >= 0);
    busy[NBUSY - 1].fd = fd;
    busy[NBUSY - 1].f = RLFileDescriptorCreate(NULL, fd, true, run_nested_in_callout, &ctx);
    RLFileDescriptorEnableCallBacks(busy[NBUSY - 1].f, kRLFileDescriptorReadCallBack);
    busy[NBUSY - 1].s = RLFileDescriptorCreateRunLoopSource(NULL, busy[NBUSY - 1].f, 0);
    RLRunLoopAddSource(rl, busy[NBUSY - 1].s, "test.fd.batch");
    nested_calls = 0;
    int calls = 0;
    for (int k = 0; k < 3; k++)
        calls += one_pass(NBUSY);
    assert_true(calls >= NBUSY); /* every fd served (the nested run took some) */
    assert_true(nested_calls >= 3);
    assert_false(rl->ev_big_busy);
    for (int i = 0; i < NBUSY; i++)
        unwatch(&busy[i]);
    unwatch(&inner);
    return NULL;
}

static void test_a_waits_events_few_on_the_frame_a_batch_when_busy(void **state) {
    (void)state;
    rl_test_on_other_thread(events_few_then_batch, NULL);
}

/* A worker's loop kept alive without an item (no source that never
 * fires, with its memberships): its default mode holds nothing, and does
 * not finish (test_worker: the semantics). */
static void worker_loop_items(void *arg) {
    size_t *n = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    rl__loop_lock(rl);
    rl__mode *m = rl__mode_find(rl, kRLRunLoopDefaultMode);
    *n = m ? (size_t)atomic_load(&m->counts) : 99;
    rl__loop_unlock(rl);
    *(n + 1) = RLRunLoopIsFinished(rl, kRLRunLoopDefaultMode);
}

static void test_a_workers_loop_is_kept_alive_without_an_item(void **state) {
    (void)state;
    RLWorkerThreadRef w = RLWorkerThreadCreate(NULL, NULL);
    assert_non_null(w);
    assert_true(RLWorkerThreadStart(w));
    size_t got[2] = {99, 99};
    assert_true(RLWorkerThreadPerformSync(w, worker_loop_items, got));
    assert_int_equal(got[0], 0);
    assert_int_equal(got[1], false);
    assert_true(RLWorkerThreadStop(w));
    RLRelease(w);
}

#if RL_TRICK_URING
/* A loop on io_uring made in a process with hundreds of fds open: its
 * table of registrations (its own eventfd, timerfd and kick, numbered
 * high) spans those few numbers. Before: every number from 0 (40 KiB). */
static void *uring_loop_regs(void *arg) {
    size_t *bytes = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_non_null(rl);
    assert_string_equal(RLRunLoopGetBackendName(rl), "io_uring");
    *bytes = rl__poll_uring_regs_bytes(&rl->kern);
    /* And it works: an fd numbered below them, then one above. */
    watched lo, hi;
    watch_at(&lo, 3, kRLRunLoopDefaultMode);
    watch_at(&hi, 1500, kRLRunLoopDefaultMode);
    poke(&lo);
    poke(&hi);
    for (int k = 0; k < 50 && (lo.calls == 0 || hi.calls == 0); k++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, true);
    assert_int_equal(lo.calls, 1);
    assert_int_equal(hi.calls, 1);
    unwatch(&lo);
    unwatch(&hi);
    return NULL;
}

static void test_a_uring_loop_in_a_process_with_many_fds(void **state) {
    (void)state;
    if (!rl__poll_uring_usable())
        skip(); /* refused here: every loop is on epoll (test_backend checks that) */
    enum { NFDS = 600 };
    int fds[NFDS];
    for (int i = 0; i < NFDS; i++)
        assert_true((fds[i] = dup(0)) >= 0);
    const char *was = getenv("RL_BACKEND");
    char *saved = was ? strdup(was) : NULL;
    setenv("RL_BACKEND", "io_uring", 1);
    size_t bytes = 0;
    rl_test_on_other_thread(uring_loop_regs, &bytes);
    if (saved) {
        setenv("RL_BACKEND", saved, 1);
        free(saved);
    } else {
        unsetenv("RL_BACKEND");
    }
    for (int i = 0; i < NFDS; i++)
        close(fds[i]);
    if (bytes == 0 || bytes > 4096)
        fail_msg("a loop on io_uring with its fds numbered above %d: %zu bytes of registrations", NFDS, bytes);
}
#endif

/* ---- first use of what a small loop has not made yet ---- */

enum { NTIMERS = 300 };

typedef struct {
    _Atomic int fired;
    _Atomic int order_broken;
    _Atomic int last;
} fire_log;

static fire_log flog;

static void fire_in_order(RLRunLoopTimerRef t, void *info) {
    (void)t;
    int i = (int)(intptr_t)info;
    if (i < atomic_load(&flog.last))
        atomic_store(&flog.order_broken, 1);
    atomic_store(&flog.last, i);
    atomic_fetch_add(&flog.fired, 1);
}

/* NTIMERS timers due in index order, soon, added to `mode` of rl. */
static void add_timers_in_order(RLRunLoopRef rl, RLRunLoopMode mode, double from) {
    for (int i = 0; i < NTIMERS; i++) {
        RLRunLoopTimerContext ctx = {0, (void *)(intptr_t)i, NULL, NULL, NULL};
        RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, from + i * 1e-4, 0, 0, 0, fire_in_order, &ctx);
        assert_non_null(t);
        RLRunLoopAddTimer(rl, t, mode);
        RLRelease(t);
    }
}

/* Runs the current thread's loop in `mode` until NTIMERS timers fired
 * (the run finishes when the last one leaves the mode empty). */
static void run_until_fired(RLRunLoopMode mode) {
    double until = rl_test_now() + 20;
    while (atomic_load(&flog.fired) < NTIMERS && rl_test_now() < until)
        RLRunLoopRunInMode(mode, 1, false);
    assert_int_equal(atomic_load(&flog.fired), NTIMERS);
    assert_int_equal(atomic_load(&flog.order_broken), 0);
}

static void wait_fired(int n) {
    double until = rl_test_now() + 20;
    while (atomic_load(&flog.fired) < n && rl_test_now() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(atomic_load(&flog.fired), n);
    assert_int_equal(atomic_load(&flog.order_broken), 0);
}

/* Timers added from another thread to a loop that went to sleep with its
 * arrays at their smallest: they grow, and every timer fires, in order. */
static void test_many_timers_after_sleeping_small(void **state) {
    (void)state;
    memset(&flog, 0, sizeof flog);
    sleeper s;
    RLRunLoopRef rl = sleeper_start(&s);
    add_timers_in_order(rl, kRLRunLoopDefaultMode, RLAbsoluteTimeGetCurrent() + 0.05);
    wait_fired(NTIMERS);
    rl__loop_mem mem;
    rl__loop_held_bytes(rl, &mem);
    assert_true(mem.due > 0); /* the due timers' array, kept for the next pass */
    sleeper_stop(&s);
}

/* More modes than the modes array first has room for, and a common mode:
 * each one's timers fire when the loop runs in it. */
static void test_modes_after_sleeping_small(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopAddCommonMode(rl, "test.common");
    RLArrayRef had = RLRunLoopCopyAllModes(rl);
    assert_non_null(had);
    RLIndex nhad = RLArrayGetCount(had);
    RLRelease(had);
    char name[32];
    for (int k = 0; k < 12; k++) {
        memset(&flog, 0, sizeof flog);
        snprintf(name, sizeof name, "test.mode.%d", k);
        add_timers_in_order(rl, name, RLAbsoluteTimeGetCurrent());
        run_until_fired(name);
    }
    /* The default mode's name still answers to its constant and to a copy
     * of it (the loop keeps the constant, not a copy of its own). */
    RLArrayRef modes = RLRunLoopCopyAllModes(rl);
    assert_non_null(modes);
    assert_int_equal(RLArrayGetCount(modes), nhad + 12); /* a common mode is made when an item needs it */
    RLRelease(modes);
    char copy[64];
    snprintf(copy, sizeof copy, "%s", kRLRunLoopDefaultMode);
    memset(&flog, 0, sizeof flog);
    add_timers_in_order(rl, copy, RLAbsoluteTimeGetCurrent());
    run_until_fired(kRLRunLoopDefaultMode);
    /* A timer in the common modes is in the default mode too. */
    memset(&flog, 0, sizeof flog);
    add_timers_in_order(rl, kRLRunLoopCommonModes, RLAbsoluteTimeGetCurrent());
    run_until_fired(copy);
}

static void fire_and_sleep(RLRunLoopTimerRef t, void *info) {
    (void)t, (void)info;
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    atomic_fetch_add(&flog.fired, 1);
}

/* Timing turned on for a loop that slept without its histograms: they are
 * made then, and record what the loop does from then on. */
static void test_timing_turned_on_after_sleeping(void **state) {
    (void)state;
    memset(&flog, 0, sizeof flog);
    sleeper s;
    RLRunLoopRef rl = sleeper_start(&s);
    rl__loop_mem mem;
    rl__loop_held_bytes(rl, &mem);
    assert_int_equal(mem.stats, 0);
    assert_true(RLRunLoopSetTimingEnabled(rl, true));
    rl__loop_held_bytes(rl, &mem);
    assert_true(mem.stats > 0);
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.01, 0, 0, 0, fire_and_sleep, NULL);
    RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode);
    RLRelease(t);
    double until = rl_test_now() + 20;
    while (atomic_load(&flog.fired) < 1 && rl_test_now() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    rl_test_wait_until_waiting(rl);
    RLRunLoopStatistics st;
    assert_true(RLRunLoopCopyStatistics(rl, &st));
    assert_true(st.timing);
    assert_true(st.calloutDuration.count >= 1);
    assert_true(st.calloutDuration.max >= 0.001);
    assert_true(RLRunLoopSetTimingEnabled(rl, false));
    sleeper_stop(&s);
}

/* A fork() child, with the parent's sleeping loop inherited: its own loop
 * starts as small, and grows as it is used. */
static bool child_loop(void *arg) {
    (void)arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    if (!rl)
        return false;
    RLRunLoopTimerRef one = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, nothing, NULL);
    RLRunLoopAddTimer(rl, one, kRLRunLoopDefaultMode);
    RLRelease(one);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    rl__loop_mem mem;
    size_t held = rl__loop_held_bytes(rl, &mem);
    if (held > 400 || mem.stats || mem.fds)
        return false;
    memset(&flog, 0, sizeof flog);
    add_timers_in_order(rl, kRLRunLoopDefaultMode, RLAbsoluteTimeGetCurrent());
    double until = rl_test_now() + 10;
    while (atomic_load(&flog.fired) < NTIMERS && rl_test_now() < until)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, true);
    return atomic_load(&flog.fired) == NTIMERS && !atomic_load(&flog.order_broken);
}

static void test_a_fork_childs_loop_starts_small(void **state) {
    (void)state;
    sleeper s;
    sleeper_start(&s);
    rl_test_in_child(child_loop, NULL, "a fork() child's own loop");
    sleeper_stop(&s);
}

/* The timer array cannot grow past its first, small size: the timers that
 * do not fit wait on the pending list, and every one still fires, in
 * order (out of memory makes the loop slower, never wrong). */
static void test_timer_array_cannot_grow_from_small(void **state) {
    (void)state;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    memset(&flog, 0, sizeof flog);
    RLRunLoopTimerRef one = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 3600, 0, 0, 0, nothing, NULL);
    RLRunLoopAddTimer(rl, one, "test.nogrow");
    RLRunLoopRunInMode("test.nogrow", 0, false); /* its array made, at its first size */
    atomic_store(&rl__faults, RL_FAULT_TIMER_ARRAY);
    add_timers_in_order(rl, "test.nogrow", RLAbsoluteTimeGetCurrent());
    run_until_fired("test.nogrow");
    atomic_store(&rl__faults, 0);
    RLRunLoopTimerInvalidate(one);
    RLRelease(one);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_loop_object_fits_one_kib),
        cmocka_unit_test(test_a_sleeping_loop_holds_what_it_uses_only),
        cmocka_unit_test(test_a_sleeping_loop_thread_touches_few_stack_pages),
        cmocka_unit_test(test_a_loop_thread_that_ran_nested_sleeps_on_few_pages),
        cmocka_unit_test(test_a_sleeping_worker_thread_stays_within_two_pages),
        cmocka_unit_test(test_one_high_fd_holds_few_records),
        cmocka_unit_test(test_fds_at_both_ends_of_the_table),
        cmocka_unit_test(test_a_waits_events_few_on_the_frame_a_batch_when_busy),
        cmocka_unit_test(test_a_workers_loop_is_kept_alive_without_an_item),
#if RL_TRICK_URING
        cmocka_unit_test(test_a_uring_loop_in_a_process_with_many_fds),
#endif
        cmocka_unit_test(test_many_timers_after_sleeping_small),
        cmocka_unit_test(test_modes_after_sleeping_small),
        cmocka_unit_test(test_timing_turned_on_after_sleeping),
        cmocka_unit_test(test_a_fork_childs_loop_starts_small),
        cmocka_unit_test(test_timer_array_cannot_grow_from_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
