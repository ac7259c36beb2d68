/* test_atomic.c — the OSAtomic table (RLAtomic.h): every function, the
 * guide's Listing 4-1, and exact totals under contention. */
#include "testutil.h"

#include <crunloop/RLAtomic.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>

/* ---- Listing 4-1, value for value ---- */

static void test_listing_4_1(void **state) {
    int32_t theValue = 0;
    assert_false(RLAtomicTestAndSet(0, &theValue));
    assert_int_equal(theValue, 128);

    theValue = 0;
    assert_false(RLAtomicTestAndSet(7, &theValue));
    assert_int_equal(theValue, 1);

    theValue = 0;
    assert_false(RLAtomicTestAndSet(15, &theValue));
    assert_int_equal(theValue, 256);

    assert_true(RLAtomicCompareAndSwap32(256, 512, &theValue));
    assert_int_equal(theValue, 512);

    assert_false(RLAtomicCompareAndSwap32(256, 1024, &theValue));
    assert_int_equal(theValue, 512);
}

/* ---- arithmetic: return the new value ---- */

static void test_add_increment_decrement_32(void **state) {
    volatile int32_t v = 10;
    assert_int_equal(RLAtomicAdd32(5, &v), 15);
    assert_int_equal(RLAtomicAdd32(-20, &v), -5);
    assert_int_equal(RLAtomicAdd32Barrier(7, &v), 2);
    assert_int_equal(RLAtomicIncrement32(&v), 3);
    assert_int_equal(RLAtomicIncrement32Barrier(&v), 4);
    assert_int_equal(RLAtomicDecrement32(&v), 3);
    assert_int_equal(RLAtomicDecrement32Barrier(&v), 2);
    assert_int_equal(v, 2);

    /* Wraps like the hardware (two's complement), as OSAtomic does. */
    v = INT32_MAX;
    assert_int_equal(RLAtomicIncrement32(&v), INT32_MIN);
}

static void test_add_increment_decrement_64(void **state) {
    volatile RLAtomic_int64_aligned64_t v = 0x100000000LL; /* needs all 64 bits */
    assert_true(RLAtomicAdd64(5, &v) == 0x100000005LL);
    assert_true(RLAtomicAdd64(-0x100000006LL, &v) == -1);
    assert_true(RLAtomicAdd64Barrier(0x7fffffffffLL, &v) == 0x7ffffffffeLL);
    assert_true(RLAtomicIncrement64(&v) == 0x7fffffffffLL);
    assert_true(RLAtomicIncrement64Barrier(&v) == 0x8000000000LL);
    assert_true(RLAtomicDecrement64(&v) == 0x7fffffffffLL);
    assert_true(RLAtomicDecrement64Barrier(&v) == 0x7ffffffffeLL);
    assert_true(v == 0x7ffffffffeLL);
}

/* ---- logic: plain forms return the new value, Orig forms the old ---- */

static void test_logic_32(void **state) {
    volatile uint32_t v = 0x0f0f0000u;
    assert_int_equal((uint32_t)RLAtomicOr32(0x000000f0u, &v), 0x0f0f00f0u);
    assert_int_equal((uint32_t)RLAtomicOr32Barrier(0x1u, &v), 0x0f0f00f1u);
    assert_int_equal((uint32_t)RLAtomicOr32Orig(0x100u, &v), 0x0f0f00f1u);
    assert_int_equal(v, 0x0f0f01f1u);
    assert_int_equal((uint32_t)RLAtomicOr32OrigBarrier(0x200u, &v), 0x0f0f01f1u);
    assert_int_equal(v, 0x0f0f03f1u);

    assert_int_equal((uint32_t)RLAtomicAnd32(0xffff00ffu, &v), 0x0f0f00f1u);
    assert_int_equal((uint32_t)RLAtomicAnd32Barrier(0x0f0000ffu, &v), 0x0f0000f1u);
    assert_int_equal((uint32_t)RLAtomicAnd32Orig(0x0f00000fu, &v), 0x0f0000f1u);
    assert_int_equal(v, 0x0f000001u);
    assert_int_equal((uint32_t)RLAtomicAnd32OrigBarrier(0xffu, &v), 0x0f000001u);
    assert_int_equal(v, 0x1u);

    assert_int_equal((uint32_t)RLAtomicXor32(0x3u, &v), 0x2u);
    assert_int_equal((uint32_t)RLAtomicXor32Barrier(0xf0u, &v), 0xf2u);
    assert_int_equal((uint32_t)RLAtomicXor32Orig(0xffu, &v), 0xf2u);
    assert_int_equal(v, 0x0du);
    assert_int_equal((uint32_t)RLAtomicXor32OrigBarrier(0x80000000u, &v), 0x0du);
    assert_int_equal(v, 0x8000000du);

    /* The result is the bit pattern as int32_t: negative when bit 31 is set. */
    assert_true(RLAtomicOr32(0, &v) < 0);
}

/* ---- compare and swap, every width ---- */

static void test_compare_and_swap_all_widths(void **state) {
    volatile int32_t i32 = 1;
    assert_true(RLAtomicCompareAndSwap32(1, 2, &i32));
    assert_false(RLAtomicCompareAndSwap32(1, 3, &i32));
    assert_true(RLAtomicCompareAndSwap32Barrier(2, 4, &i32));
    assert_false(RLAtomicCompareAndSwap32Barrier(2, 5, &i32));
    assert_int_equal(i32, 4);

    volatile RLAtomic_int64_aligned64_t i64 = 0x123456789LL;
    assert_true(RLAtomicCompareAndSwap64(0x123456789LL, 0x987654321LL, &i64));
    /* Only the low half matches: must not swap. */
    assert_false(RLAtomicCompareAndSwap64(0x087654321LL, 1, &i64));
    assert_true(RLAtomicCompareAndSwap64Barrier(0x987654321LL, -1, &i64));
    assert_false(RLAtomicCompareAndSwap64Barrier(0x987654321LL, 0, &i64));
    assert_true(i64 == -1);

    int a = 0, b = 0;
    void *volatile ptr = &a;
    assert_true(RLAtomicCompareAndSwapPtr(&a, &b, &ptr));
    assert_false(RLAtomicCompareAndSwapPtr(&a, NULL, &ptr));
    assert_ptr_equal(ptr, &b);
    assert_true(RLAtomicCompareAndSwapPtrBarrier(&b, NULL, &ptr));
    assert_false(RLAtomicCompareAndSwapPtrBarrier(&b, &a, &ptr));
    assert_null(ptr);

    volatile int vi = -7;
    assert_true(RLAtomicCompareAndSwapInt(-7, 7, &vi));
    assert_false(RLAtomicCompareAndSwapInt(-7, 8, &vi));
    assert_true(RLAtomicCompareAndSwapIntBarrier(7, 9, &vi));
    assert_false(RLAtomicCompareAndSwapIntBarrier(7, 10, &vi));
    assert_int_equal(vi, 9);

    volatile long vl = 1L << 40;
    assert_true(RLAtomicCompareAndSwapLong(1L << 40, 3, &vl));
    assert_false(RLAtomicCompareAndSwapLong(1L << 40, 4, &vl));
    assert_true(RLAtomicCompareAndSwapLongBarrier(3, -3, &vl));
    assert_false(RLAtomicCompareAndSwapLongBarrier(3, 5, &vl));
    assert_int_equal(vl, -3);
}

/* ---- test-and-set / clear: Apple's bit numbering over any buffer ---- */

static void test_test_and_set_bit_numbering(void **state) {
    uint8_t bytes[8];
    for (uint32_t n = 0; n < 64; n++) {
        memset(bytes, 0, sizeof bytes);
        assert_false(RLAtomicTestAndSet(n, bytes));
        /* Exactly one bit, 0x80 >> (n & 7) of byte n >> 3, is set. */
        for (uint32_t i = 0; i < sizeof bytes; i++)
            assert_int_equal(bytes[i], i == n >> 3 ? (0x80u >> (n & 7)) : 0);
        assert_true(RLAtomicTestAndSet(n, bytes));    /* now it was set */
        assert_true(RLAtomicTestAndClear(n, bytes));  /* and it was set */
        assert_false(RLAtomicTestAndClear(n, bytes)); /* now clear */
        for (uint32_t i = 0; i < sizeof bytes; i++)
            assert_int_equal(bytes[i], 0);
    }

    /* Barrier forms, and clearing leaves the other bits alone. */
    memset(bytes, 0xff, sizeof bytes);
    assert_true(RLAtomicTestAndClearBarrier(24, bytes)); /* bit 31's byte, top bit */
    assert_int_equal(bytes[3], 0x7f);
    assert_false(RLAtomicTestAndClearBarrier(24, bytes));
    assert_false(RLAtomicTestAndSetBarrier(24, bytes));
    assert_true(RLAtomicTestAndSetBarrier(24, bytes));
    for (uint32_t i = 0; i < sizeof bytes; i++)
        assert_int_equal(bytes[i], 0xff);

    /* The guide's remark: on a 32-bit integer, bit 7 is its lowest bit and
     * bit 24 its highest (little-endian). */
    uint32_t word = 0;
    RLAtomicTestAndSet(7, &word);
    assert_int_equal(word, 1u);
    word = 0;
    RLAtomicTestAndSet(24, &word);
    assert_int_equal(word, 0x80000000u);
}

static void test_memory_barrier(void **state) {
    /* A fence has no observable single-thread effect beyond not crashing;
     * its ordering is exercised by the message-passing stress below. */
    RLMemoryBarrier();
}

/* ---- contention: exact totals ---- */

enum { THREADS = 8 };

static volatile int32_t g_add32;
static volatile RLAtomic_int64_aligned64_t g_add64;
static volatile int32_t g_cas32;
static volatile RLAtomic_int64_aligned64_t g_cas64;
static volatile long g_casl;
static volatile uint32_t g_bits;

static void *add_worker(void *arg) {
    long n = rl_test_iters(1000000);
    for (long i = 0; i < n; i++) {
        if (i & 1) {
            RLAtomicAdd32(3, &g_add32);
            RLAtomicIncrement64(&g_add64);
        } else {
            RLAtomicAdd32Barrier(3, &g_add32);
            RLAtomicIncrement64Barrier(&g_add64);
        }
    }
    return NULL;
}

static void test_add_totals_under_contention(void **state) {
    g_add32 = 0;
    g_add64 = 0x100000000LL;
    rl_test_run_threads(THREADS, add_worker, NULL, 0);
    long n = rl_test_iters(1000000);
    assert_int_equal(g_add32, 3 * THREADS * n);
    assert_true(g_add64 == 0x100000000LL + THREADS * n);
}

static void *cas_worker(void *arg) {
    long n = rl_test_iters(1000000);
    for (long i = 0; i < n; i++) {
        int32_t old;
        do
            old = __atomic_load_n(&g_cas32, __ATOMIC_RELAXED); /* a plain read would race */
        while (!((i & 1) ? RLAtomicCompareAndSwap32(old, old + 1, &g_cas32)
                         : RLAtomicCompareAndSwap32Barrier(old, old + 1, &g_cas32)));
        int64_t old64;
        do
            old64 = __atomic_load_n(&g_cas64, __ATOMIC_RELAXED);
        while (!RLAtomicCompareAndSwap64Barrier(old64, old64 + 2, &g_cas64));
        long oldl;
        do
            oldl = __atomic_load_n(&g_casl, __ATOMIC_RELAXED);
        while (!RLAtomicCompareAndSwapLong(oldl, oldl - 1, &g_casl));
    }
    return NULL;
}

static void test_cas_totals_under_contention(void **state) {
    g_cas32 = 0;
    g_cas64 = 0;
    g_casl = 0;
    rl_test_run_threads(THREADS, cas_worker, NULL, 0);
    long n = rl_test_iters(1000000);
    assert_int_equal(g_cas32, THREADS * n);
    assert_true(g_cas64 == 2 * (int64_t)THREADS * n);
    assert_int_equal(g_casl, -THREADS * n);
}

/* Each thread owns one bit (Apple numbering) and toggles it; no thread's
 * update may be lost to another's on the same word. */
static void *bit_worker(void *arg) {
    uint32_t n = (uint32_t)(uintptr_t)arg;
    long iters = rl_test_iters(100000);
    for (long i = 0; i < iters; i++) {
        if (RLAtomicTestAndSet(n, &g_bits))
            return (void *)1;
        if (!RLAtomicTestAndClearBarrier(n, &g_bits))
            return (void *)1;
        RLAtomicXor32Orig(0, &g_bits); /* contend on the word too */
    }
    RLAtomicTestAndSetBarrier(n, &g_bits); /* leave our bit set */
    return NULL;
}

static void test_bits_under_contention(void **state) {
    g_bits = 0;
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, bit_worker, (void *)(i * 4)), 0);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        assert_null(r);
    }
    /* Bits 0,4,...,28 in Apple numbering: 0x80 and 0x08 in each byte. */
    assert_int_equal(g_bits, 0x88888888u);
}

/* Message passing: a Barrier store publishes data written before it. */
static int g_payload;
static volatile int32_t g_flag;

static void *mp_reader(void *arg) {
    long n = rl_test_iters(5000);
    for (long i = 1; i <= n; i++) {
        while (RLAtomicAdd32Barrier(0, &g_flag) != (int32_t)(2 * i - 1))
            sched_yield(); /* the writer may share our CPU */
        if (__atomic_load_n(&g_payload, __ATOMIC_RELAXED) != i)
            return (void *)1;
        RLAtomicIncrement32Barrier(&g_flag);
    }
    return NULL;
}

static void test_barrier_publishes(void **state) {
    g_payload = 0;
    g_flag = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, mp_reader, NULL), 0);
    long n = rl_test_iters(5000);
    for (long i = 1; i <= n; i++) {
        __atomic_store_n(&g_payload, (int)i, __ATOMIC_RELAXED);
        RLMemoryBarrier();
        RLAtomicIncrement32Barrier(&g_flag);
        while (RLAtomicAdd32Barrier(0, &g_flag) != (int32_t)(2 * i))
            sched_yield();
    }
    void *r;
    pthread_join(t, &r);
    assert_null(r);
}

/* ---- load and store ---- */

static void test_load_store_all_widths(void **state) {
    volatile int32_t v32 = 0;
    RLAtomicStore32(-7, &v32);
    assert_int_equal(RLAtomicLoad32(&v32), -7);
    RLAtomicStore32Barrier(INT32_MAX, &v32);
    assert_int_equal(RLAtomicLoad32Barrier(&v32), INT32_MAX);
    assert_int_equal(v32, INT32_MAX);

    volatile RLAtomic_int64_aligned64_t v64 = 0;
    RLAtomicStore64(INT64_MIN, &v64);
    assert_true(RLAtomicLoad64(&v64) == INT64_MIN);
    RLAtomicStore64Barrier((int64_t)0x0123456789abcdefLL, &v64);
    assert_true(RLAtomicLoad64Barrier(&v64) == (int64_t)0x0123456789abcdefLL);

    int target;
    void *volatile ptr = NULL;
    assert_null(RLAtomicLoadPtr(&ptr));
    RLAtomicStorePtr(&target, &ptr);
    assert_ptr_equal(RLAtomicLoadPtr(&ptr), &target);
    RLAtomicStorePtrBarrier(NULL, &ptr);
    assert_null(RLAtomicLoadPtrBarrier(&ptr));
}

/* Message passing with the load/store pair: a StoreBarrier of a pointer
 * publishes the payload written before it to a LoadBarrier that sees it. */
typedef struct message {
    long serial;
    long check;
} message;

static void *volatile g_mailbox;
static volatile int32_t g_acked;

static void *ls_reader(void *arg) {
    long n = rl_test_iters(5000);
    for (long i = 1; i <= n; i++) {
        message *m;
        while ((m = RLAtomicLoadPtrBarrier(&g_mailbox)) == NULL)
            sched_yield();
        if (m->serial != i || m->check != ~i)
            return (void *)1;
        RLAtomicStorePtr(NULL, &g_mailbox);
        RLAtomicStore32Barrier((int32_t)i, &g_acked);
    }
    return NULL;
}

static void test_load_store_publish(void **state) {
    g_mailbox = NULL;
    g_acked = 0;
    message box[2];
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ls_reader, NULL), 0);
    long n = rl_test_iters(5000);
    for (long i = 1; i <= n; i++) {
        message *m = &box[i & 1];
        m->serial = i;
        m->check = ~i;
        RLAtomicStorePtrBarrier(m, &g_mailbox);
        while (RLAtomicLoad32Barrier(&g_acked) != (int32_t)i)
            sched_yield();
    }
    void *r;
    pthread_join(t, &r);
    assert_null(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listing_4_1),
        cmocka_unit_test(test_add_increment_decrement_32),
        cmocka_unit_test(test_add_increment_decrement_64),
        cmocka_unit_test(test_logic_32),
        cmocka_unit_test(test_compare_and_swap_all_widths),
        cmocka_unit_test(test_test_and_set_bit_numbering),
        cmocka_unit_test(test_memory_barrier),
        cmocka_unit_test(test_add_totals_under_contention),
        cmocka_unit_test(test_cas_totals_under_contention),
        cmocka_unit_test(test_bits_under_contention),
        cmocka_unit_test(test_barrier_publishes),
        cmocka_unit_test(test_load_store_all_widths),
        cmocka_unit_test(test_load_store_publish),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
