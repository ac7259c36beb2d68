/* test_perform_blocks.c — RLRunLoopPerformBlock with every kind of block:
 * small stack blocks (queued in the loop's own slots, without Block_copy),
 * blocks with copy/dispose helpers (__block variables, captured blocks),
 * big blocks (the Block_copy fallback), global blocks and heap blocks. Each
 * runs exactly once, in FIFO order per mode, and every capture is released
 * exactly once: after running, and when dropped at thread exit. Captured
 * heap blocks serve as the counter: their reference count (read from the
 * block ABI's flags word, clang's "Block Implementation Specification") goes
 * up when a queued copy retains them and back down when it is disposed of;
 * ASan and valgrind catch what the count cannot. */
#include "testutil.h"
#include "trace.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __BLOCKS__
extern void *_Block_copy(const void *block);
extern void _Block_release(const void *block);

/* The start of a block (the ABI): isa, flags, reserved, invoke, descriptor. */
struct test_block {
    void *isa;
    int flags;
    int reserved;
    void *invoke;
    struct {
        unsigned long reserved, size;
    } *descriptor;
};
enum { T_NEEDS_FREE = 1 << 24, T_HAS_COPY_DISPOSE = 1 << 25, T_IS_GLOBAL = 1 << 28, T_RC_MASK = 0xfffe };

typedef void (^blk)(void);

/* Arrays cannot be captured; structs holding them can (by value). */
typedef struct {
    char s[100];
} big100;

static int block_flags(const void *b) { return __atomic_load_n(&((const struct test_block *)b)->flags, __ATOMIC_SEQ_CST); }
static unsigned long block_size(const void *b) { return ((const struct test_block *)b)->descriptor->size; }
/* The reference count of a heap block. The runtime keeps it in the low bits
 * of flags, in steps of 2 in the Swift toolchain's BlocksRuntime (bit 0 marks
 * a block being freed) and of 1 in Debian's libblocksruntime: the step is
 * measured once, by copying a heap block. */
static int rc_step(void) {
    static int step;
    if (!step) {
        int x = 1;
        void *h = _Block_copy((const void *)(blk) ^{ (void)x; });
        int before = block_flags(h) & 0xffff;
        void *again = _Block_copy(h);
        step = (block_flags(h) & 0xffff) - before;
        _Block_release(again);
        _Block_release(h);
    }
    return step;
}
static int heap_rc(const void *b) {
    int step = rc_step();
    return (block_flags(b) & (step == 2 ? T_RC_MASK : 0xffff)) / step;
}

static blk heap_block(const char *label) {
    return (blk)_Block_copy((const void *)(blk) ^{ rl_trace_add(label); });
}

static void run_mode(RLRunLoopMode mode) { assert_int_equal(RLRunLoopRunInMode(mode, 0, false), kRLRunLoopRunTimedOut); }

static void test_small_block_runs_once(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
    int n = 0, *np = &n;
    blk b = ^{ (*np)++; };
    assert_false(block_flags((void *)b) & (T_NEEDS_FREE | T_IS_GLOBAL | T_HAS_COPY_DISPOSE));
    assert_true(block_size((void *)b) <= 64);
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, b));
    n = 10; /* the queued copy holds the pointer, not the value */
    run_mode(kRLRunLoopDefaultMode);
    assert_int_equal(n, 11);
    run_mode(kRLRunLoopDefaultMode);
    assert_int_equal(n, 11);
    rl_test_unkeep(k);
}

static void test_block_variables(void **state) {
    /* __block variables: the copy helper moves them to the heap, shared by
     * the caller's frame and every queued copy; the dispose helper lets go. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
    __block long sum = 0;
    __block int runs = 0;
    for (int i = 1; i <= 300; i++) {
        blk b = ^{
            sum += i;
            runs++;
        };
        assert_true(block_flags((void *)b) & T_HAS_COPY_DISPOSE);
        assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, b));
    }
    sum += 1000000; /* seen by the queued blocks: the variable is shared */
    run_mode(kRLRunLoopDefaultMode);
    assert_int_equal(runs, 300);
    assert_int_equal(sum, 1000000 + 300 * 301 / 2);
    rl_test_unkeep(k);
}

static void test_captured_blocks_retained_and_released_once(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
    blk inner = heap_block("inner");
    assert_int_equal(heap_rc((void *)inner), 1);
    for (int i = 0; i < 3; i++) {
        blk outer = ^{ inner(); };
        assert_true(block_flags((void *)outer) & T_HAS_COPY_DISPOSE);
        assert_true(block_size((void *)outer) <= 64);
        assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, outer));
    }
    assert_int_equal(heap_rc((void *)inner), 4); /* one per queued copy */
    run_mode(kRLRunLoopDefaultMode);
    assert_trace("inner inner inner");
    assert_int_equal(heap_rc((void *)inner), 1);
    _Block_release((void *)inner);
    rl_test_unkeep(k);
}

static void test_big_blocks_take_the_fallback(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
    blk inner = heap_block("in");
    struct {
        char s[200];
    } big;
    for (size_t i = 0; i < sizeof big.s; i++)
        big.s[i] = (char)('a' + i % 26);
    big.s[sizeof big.s - 1] = 0;
    __block int ok = 0;
    blk b = ^{
        ok += strlen(big.s) == sizeof big.s - 1 && big.s[27] == 'b';
        inner();
    };
    assert_true(block_size((void *)b) > 64);
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, b));
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, b));
    memset(big.s, 0, sizeof big.s); /* captured by value at the copy */
    assert_int_equal(heap_rc((void *)inner), 3);
    run_mode(kRLRunLoopDefaultMode);
    assert_int_equal(ok, 2);
    assert_trace("in in");
    assert_int_equal(heap_rc((void *)inner), 1);
    _Block_release((void *)inner);
    rl_test_unkeep(k);
}

static int global_runs;
static void test_global_blocks(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
    blk g = ^{ global_runs++; };
    assert_true(block_flags((void *)g) & T_IS_GLOBAL);
    global_runs = 0;
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, g));
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, g));
    run_mode(kRLRunLoopDefaultMode);
    assert_int_equal(global_runs, 2);
    rl_test_unkeep(k);
}

static void test_heap_blocks_passed_in(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
    blk h = heap_block("h");
    assert_true(block_flags((void *)h) & T_NEEDS_FREE);
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, h));
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, h));
    assert_int_equal(heap_rc((void *)h), 3); /* a reference each, no copy */
    run_mode(kRLRunLoopDefaultMode);
    assert_trace("h h");
    assert_int_equal(heap_rc((void *)h), 1);
    _Block_release((void *)h);
    rl_test_unkeep(k);
}

static void test_every_kind_fifo_per_mode(void **state) {
    /* Small, helper, big, global and heap blocks interleaved over two modes:
     * each mode's requests run in order; the others wait, in order. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k1 = rl_test_keep_mode("FA"), k2 = rl_test_keep_mode("FB");
    blk h = heap_block("heap");
    __block int shared = 0;
    big100 pad = {"big"};
    for (int i = 0; i < 2; i++) {
        RLRunLoopMode m = i == 0 ? "FA" : "FB";
        const char *tag = i == 0 ? "A" : "B";
        assert_true(RLRunLoopPerformBlock(rl, m, ^{ rl_trace_addf("%s.small", tag); }));
        assert_true(RLRunLoopPerformBlock(rl, m, ^{ rl_trace_addf("%s.var%d", tag, shared++); }));
        assert_true(RLRunLoopPerformBlock(rl, m, ^{ rl_trace_addf("%s.%s", tag, pad.s); }));
        assert_true(RLRunLoopPerformBlock(rl, m, ^{ rl_trace_add("global"); }));
        assert_true(RLRunLoopPerformBlock(rl, m, h));
        assert_true(RLRunLoopPerformBlock(rl, m, ^{ h(); }));
    }
    run_mode("FB");
    assert_trace("B.small B.var0 B.big global heap heap");
    run_mode("FA");
    assert_trace("B.small B.var0 B.big global heap heap A.small A.var1 A.big global heap heap");
    assert_int_equal(heap_rc((void *)h), 1);
    _Block_release((void *)h);
    rl_test_unkeep(k1);
    rl_test_unkeep(k2);
}

/* ---- from another thread: many blocks, slabs filled and recycled ---- */

struct feeder {
    RLRunLoopRef rl;
    long n;
    long *next_expected;
    long *bad;
    blk inner;
};

static void *feed(void *arg) {
    struct feeder *f = arg;
    long *next = f->next_expected, *bad = f->bad;
    blk inner = f->inner;
    big100 big = {{1}};
    for (long i = 0; i < f->n; i++) {
        bool ok;
        switch (i % 4) {
        case 0: /* small, no helpers */
            ok = RLRunLoopPerformBlock(f->rl, kRLRunLoopDefaultMode, ^{ *bad += *next != i, *next = i + 1; });
            break;
        case 1: /* small, with helpers */
            ok = RLRunLoopPerformBlock(f->rl, kRLRunLoopDefaultMode, ^{
                inner();
                *bad += *next != i, *next = i + 1;
            });
            break;
        case 2: /* big */
            ok = RLRunLoopPerformBlock(f->rl, kRLRunLoopDefaultMode, ^{ *bad += *next != i || big.s[0] != 1, *next = i + 1; });
            break;
        default: /* small again, so that runs of them span slabs */
            ok = RLRunLoopPerformBlock(f->rl, kRLRunLoopDefaultMode, ^{ *bad += *next != i, *next = i + 1; });
        }
        if (!ok)
            (*bad)++;
        RLRunLoopWakeUp(f->rl);
    }
    return NULL;
}

static void test_from_another_thread_in_order(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode(kRLRunLoopDefaultMode);
    __block long calls = 0;
    blk inner = (blk)_Block_copy((const void *)(blk) ^{ calls++; });
    long n = rl_test_iters(40000);
    for (int round = 0; round < 3; round++) {
        long next = 0, bad = 0;
        struct feeder f = {rl, n, &next, &bad, inner};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, feed, &f), 0);
        double t0 = rl_test_now();
        while (next < n && rl_test_now() - t0 < 60)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, false);
        pthread_join(t, NULL);
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
        assert_int_equal(next, n);
        assert_int_equal(bad, 0);
    }
    assert_int_equal(calls, 3 * ((n + 2) / 4)); /* the i % 4 == 1 ones */
    assert_int_equal(heap_rc((void *)inner), 1);
    _Block_release((void *)inner);
    rl_test_unkeep(k);
}

/* ---- dropped at thread exit, or refused ---- */

static void *queue_and_exit(void *arg) {
    blk inner = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    __block int v = 0;
    big100 big = {"x"};
    /* Never run: one mode is never run, and the thread never runs its loop. */
    for (int i = 0; i < 300; i++) {
        RLRunLoopMode m = i % 2 ? "never" : kRLRunLoopDefaultMode;
        assert_true(RLRunLoopPerformBlock(rl, m, ^{ inner(); }));
        assert_true(RLRunLoopPerformBlock(rl, m, ^{
            v++;
            inner();
        }));
        assert_true(RLRunLoopPerformBlock(rl, m, ^{
            rl_trace_add(big.s);
            inner();
        }));
        assert_true(RLRunLoopPerformBlock(rl, m, inner));
    }
    assert_int_equal(heap_rc((void *)inner), 1 + 4 * 300);
    assert_int_equal(v, 0);
    return NULL;
}

static void test_pending_blocks_disposed_at_thread_exit(void **state) {
    blk inner = heap_block("never");
    rl_test_on_other_thread(queue_and_exit, (void *)inner);
    assert_trace("");
    assert_int_equal(heap_rc((void *)inner), 1);
    _Block_release((void *)inner);
}

static void *grab_loop(void *arg) {
    *(RLRunLoopRef *)arg = (RLRunLoopRef)RLRetain(RLRunLoopGetCurrent());
    return NULL;
}

static void test_refused_blocks_are_not_retained(void **state) {
    RLRunLoopRef dead = NULL;
    rl_test_on_other_thread(grab_loop, &dead);
    blk inner = heap_block("no");
    big100 big = {"no"};
    assert_rl_fails(RLRunLoopPerformBlock(dead, kRLRunLoopDefaultMode, ^{ inner(); }), kRLErrorInvalidState);
    assert_rl_fails(RLRunLoopPerformBlock(dead, "M", ^{
                        rl_trace_add(big.s);
                        inner();
                    }), kRLErrorInvalidState);
    assert_rl_fails(RLRunLoopPerformBlock(dead, kRLRunLoopDefaultMode, inner), kRLErrorInvalidState);
    assert_rl_fails(RLRunLoopPerformBlock(RLRunLoopGetCurrent(), NULL, ^{ inner(); }), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopPerformBlock(RLRunLoopGetCurrent(), kRLRunLoopDefaultMode, NULL), kRLErrorInvalidArgument);
    assert_int_equal(heap_rc((void *)inner), 1);
    _Block_release((void *)inner);
    RLRelease(dead);
    assert_trace("");
}

static void *exit_from_a_block(void *arg) {
    blk inner = arg;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{ inner(); }));
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{
        inner();
        RLThreadExit();
    }));
    assert_true(RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{ inner(); }));
    assert_true(RLRunLoopPerformBlock(rl, "other", ^{ inner(); }));
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, false);
    rl_trace_add("not reached");
    return NULL;
}

static void test_thread_exit_from_a_block_disposes_the_rest(void **state) {
    blk inner = heap_block("ran");
    rl_test_on_other_thread(exit_from_a_block, (void *)inner);
    assert_trace("ran ran");
    assert_int_equal(heap_rc((void *)inner), 1);
    _Block_release((void *)inner);
}
#endif

#if __BLOCKS__
int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_small_block_runs_once, rl_trace_setup),
        cmocka_unit_test_setup(test_block_variables, rl_trace_setup),
        cmocka_unit_test_setup(test_captured_blocks_retained_and_released_once, rl_trace_setup),
        cmocka_unit_test_setup(test_big_blocks_take_the_fallback, rl_trace_setup),
        cmocka_unit_test_setup(test_global_blocks, rl_trace_setup),
        cmocka_unit_test_setup(test_heap_blocks_passed_in, rl_trace_setup),
        cmocka_unit_test_setup(test_every_kind_fifo_per_mode, rl_trace_setup),
        cmocka_unit_test_setup(test_from_another_thread_in_order, rl_trace_setup),
        cmocka_unit_test_setup(test_pending_blocks_disposed_at_thread_exit, rl_trace_setup),
        cmocka_unit_test_setup(test_refused_blocks_are_not_retained, rl_trace_setup),
        cmocka_unit_test_setup(test_thread_exit_from_a_block_disposes_the_rest, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
/* Without -fblocks (gcc) the block API does not exist; nothing here to run,
 * and nothing is reported as a passing test. */
int main(void) {
    puts("test_perform_blocks: block APIs need clang -fblocks; no tests in this build");
    return 0;
}
#endif
