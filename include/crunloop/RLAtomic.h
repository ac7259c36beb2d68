/*
 * RLAtomic.h — the OSAtomic.h table (Threading Programming Guide, Table 4-3)
 * with RL names.
 *
 * Every function is inline and compiles to the one atomic instruction (or
 * the short compare-and-swap loop) the hardware offers, so an atomic costs
 * what a C11 atomic costs. They exist for code ported from Darwin and for
 * Swift, which imports them as ordinary functions.
 *
 * What a caller may rely on:
 *   - Plain forms (RLAtomicAdd32, ...) are atomic but order nothing else:
 *     memory_order_relaxed, which is what OSAtomic's plain forms guarantee.
 *   - Barrier forms (RLAtomicAdd32Barrier, ...) are sequentially consistent:
 *     memory before the call is visible to any thread that sees the result,
 *     and no later access moves before it.
 *   - Arithmetic and logic forms return the NEW value; the Orig forms of the
 *     logic operations return the value before the operation.
 *   - Load and Store (not in OSAtomic, which left them to plain C) read or
 *     write the whole value atomically, never torn: plain forms relaxed,
 *     Barrier forms sequentially consistent (so a LoadBarrier is at least
 *     an acquire and a StoreBarrier at least a release: data written before
 *     a StoreBarrier is visible to a thread whose LoadBarrier sees the
 *     stored value).
 *   - CompareAndSwap stores newValue only if *value == oldValue and returns
 *     whether it did; it never fails spuriously.
 *   - TestAndSet/TestAndClear use Apple's bit numbering: bit n is the mask
 *     (0x80 >> (n & 7)) in byte ((uint8_t *)address + (n >> 3)). On a
 *     little-endian int32_t holding 0, bit 0 sets 128, bit 7 sets 1 and
 *     bit 15 sets 256 (the guide's Listing 4-1). They return the bit's
 *     previous value. Only the addressed byte is touched.
 *   - Pointers must be valid and naturally aligned; 64-bit operands must be
 *     8-byte aligned (RLAtomic_int64_aligned64_t says so on 32-bit targets).
 *     The functions do no NULL check: they are the instruction.
 */
#ifndef CRUNLOOP_RLATOMIC_H
#define CRUNLOOP_RLATOMIC_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

/* A 64-bit integer aligned to 8 bytes even where the ABI would align it to
 * 4, so that 64-bit atomics are single instructions (as OSAtomic's type). */
typedef int64_t RLAtomic_int64_aligned64_t __attribute__((aligned(8)));

/* Plain forms are relaxed; *Barrier forms are sequentially consistent. */

/* ---- add, increment, decrement: return the new value ---- */

RL_INLINE int32_t RLAtomicAdd32(int32_t amount, volatile int32_t *value) {
    return __atomic_add_fetch(value, amount, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicAdd32Barrier(int32_t amount, volatile int32_t *value) {
    return __atomic_add_fetch(value, amount, __ATOMIC_SEQ_CST);
}
RL_INLINE int32_t RLAtomicIncrement32(volatile int32_t *value) {
    return __atomic_add_fetch(value, 1, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicIncrement32Barrier(volatile int32_t *value) {
    return __atomic_add_fetch(value, 1, __ATOMIC_SEQ_CST);
}
RL_INLINE int32_t RLAtomicDecrement32(volatile int32_t *value) {
    return __atomic_sub_fetch(value, 1, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicDecrement32Barrier(volatile int32_t *value) {
    return __atomic_sub_fetch(value, 1, __ATOMIC_SEQ_CST);
}

RL_INLINE int64_t RLAtomicAdd64(int64_t amount, volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_add_fetch(value, amount, __ATOMIC_RELAXED);
}
RL_INLINE int64_t RLAtomicAdd64Barrier(int64_t amount, volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_add_fetch(value, amount, __ATOMIC_SEQ_CST);
}
RL_INLINE int64_t RLAtomicIncrement64(volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_add_fetch(value, 1, __ATOMIC_RELAXED);
}
RL_INLINE int64_t RLAtomicIncrement64Barrier(volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_add_fetch(value, 1, __ATOMIC_SEQ_CST);
}
RL_INLINE int64_t RLAtomicDecrement64(volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_sub_fetch(value, 1, __ATOMIC_RELAXED);
}
RL_INLINE int64_t RLAtomicDecrement64Barrier(volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_sub_fetch(value, 1, __ATOMIC_SEQ_CST);
}

/* ---- logic on 32 bits: the plain forms return the new value, the Orig
 * forms the original one (as int32_t, like OSAtomic) ---- */

RL_INLINE int32_t RLAtomicOr32(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_or_fetch(value, mask, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicOr32Barrier(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_or_fetch(value, mask, __ATOMIC_SEQ_CST);
}
RL_INLINE int32_t RLAtomicOr32Orig(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_fetch_or(value, mask, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicOr32OrigBarrier(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_fetch_or(value, mask, __ATOMIC_SEQ_CST);
}
RL_INLINE int32_t RLAtomicAnd32(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_and_fetch(value, mask, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicAnd32Barrier(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_and_fetch(value, mask, __ATOMIC_SEQ_CST);
}
RL_INLINE int32_t RLAtomicAnd32Orig(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_fetch_and(value, mask, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicAnd32OrigBarrier(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_fetch_and(value, mask, __ATOMIC_SEQ_CST);
}
RL_INLINE int32_t RLAtomicXor32(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_xor_fetch(value, mask, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicXor32Barrier(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_xor_fetch(value, mask, __ATOMIC_SEQ_CST);
}
RL_INLINE int32_t RLAtomicXor32Orig(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_fetch_xor(value, mask, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicXor32OrigBarrier(uint32_t mask, volatile uint32_t *value) {
    return (int32_t)__atomic_fetch_xor(value, mask, __ATOMIC_SEQ_CST);
}

/* ---- compare and swap: true if *value was oldValue and is now newValue ---- */

/* The strong exchange: OSAtomic's CAS never fails spuriously, and callers
 * that do not loop (Listing 4-1) rely on that. */
RL_INLINE bool RLAtomicCompareAndSwap32(int32_t oldValue, int32_t newValue, volatile int32_t *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwap32Barrier(int32_t oldValue, int32_t newValue,
                                               volatile int32_t *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwap64(int64_t oldValue, int64_t newValue,
                                        volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwap64Barrier(int64_t oldValue, int64_t newValue,
                                               volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwapPtr(void *oldValue, void *newValue, void *volatile *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwapPtrBarrier(void *oldValue, void *newValue,
                                                void *volatile *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwapInt(int oldValue, int newValue, volatile int *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwapIntBarrier(int oldValue, int newValue, volatile int *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwapLong(long oldValue, long newValue, volatile long *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
RL_INLINE bool RLAtomicCompareAndSwapLongBarrier(long oldValue, long newValue,
                                                 volatile long *value) {
    return __atomic_compare_exchange_n(value, &oldValue, newValue, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/* ---- load and store ---- */

RL_INLINE int32_t RLAtomicLoad32(volatile int32_t *value) {
    return __atomic_load_n(value, __ATOMIC_RELAXED);
}
RL_INLINE int32_t RLAtomicLoad32Barrier(volatile int32_t *value) {
    return __atomic_load_n(value, __ATOMIC_SEQ_CST);
}
RL_INLINE int64_t RLAtomicLoad64(volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_load_n(value, __ATOMIC_RELAXED);
}
RL_INLINE int64_t RLAtomicLoad64Barrier(volatile RLAtomic_int64_aligned64_t *value) {
    return __atomic_load_n(value, __ATOMIC_SEQ_CST);
}
RL_INLINE void *RLAtomicLoadPtr(void *volatile *value) {
    return __atomic_load_n(value, __ATOMIC_RELAXED);
}
RL_INLINE void *RLAtomicLoadPtrBarrier(void *volatile *value) {
    return __atomic_load_n(value, __ATOMIC_SEQ_CST);
}

RL_INLINE void RLAtomicStore32(int32_t newValue, volatile int32_t *value) {
    __atomic_store_n(value, newValue, __ATOMIC_RELAXED);
}
RL_INLINE void RLAtomicStore32Barrier(int32_t newValue, volatile int32_t *value) {
    __atomic_store_n(value, newValue, __ATOMIC_SEQ_CST);
}
RL_INLINE void RLAtomicStore64(int64_t newValue, volatile RLAtomic_int64_aligned64_t *value) {
    __atomic_store_n(value, newValue, __ATOMIC_RELAXED);
}
RL_INLINE void RLAtomicStore64Barrier(int64_t newValue, volatile RLAtomic_int64_aligned64_t *value) {
    __atomic_store_n(value, newValue, __ATOMIC_SEQ_CST);
}
RL_INLINE void RLAtomicStorePtr(void *newValue, void *volatile *value) {
    __atomic_store_n(value, newValue, __ATOMIC_RELAXED);
}
RL_INLINE void RLAtomicStorePtrBarrier(void *newValue, void *volatile *value) {
    __atomic_store_n(value, newValue, __ATOMIC_SEQ_CST);
}

/* ---- test and set / clear, Apple's bit numbering; return the old bit ---- */

RL_INLINE bool RLAtomicTestAndSet(uint32_t n, volatile void *address) {
    uint8_t mask = (uint8_t)(0x80u >> (n & 7u));
    return (__atomic_fetch_or((volatile uint8_t *)address + (n >> 3), mask, __ATOMIC_RELAXED) & mask) != 0;
}
RL_INLINE bool RLAtomicTestAndSetBarrier(uint32_t n, volatile void *address) {
    uint8_t mask = (uint8_t)(0x80u >> (n & 7u));
    return (__atomic_fetch_or((volatile uint8_t *)address + (n >> 3), mask, __ATOMIC_SEQ_CST) & mask) != 0;
}
RL_INLINE bool RLAtomicTestAndClear(uint32_t n, volatile void *address) {
    uint8_t mask = (uint8_t)(0x80u >> (n & 7u));
    return (__atomic_fetch_and((volatile uint8_t *)address + (n >> 3), (uint8_t)~mask, __ATOMIC_RELAXED) &
            mask) != 0;
}
RL_INLINE bool RLAtomicTestAndClearBarrier(uint32_t n, volatile void *address) {
    uint8_t mask = (uint8_t)(0x80u >> (n & 7u));
    return (__atomic_fetch_and((volatile uint8_t *)address + (n >> 3), (uint8_t)~mask, __ATOMIC_SEQ_CST) &
            mask) != 0;
}

/* ---- fence ---- */

/* A full (sequentially consistent) memory barrier, as OSMemoryBarrier. */
RL_INLINE void RLMemoryBarrier(void) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLATOMIC_H */
