/*
 * internal.h — private helpers shared by the CRunLoop implementation files.
 * Names use the rl__ prefix; nothing here is exported from the library.
 */
#ifndef CRUNLOOP_INTERNAL_H
#define CRUNLOOP_INTERNAL_H

#include <crunloop/RLBase.h>
#include <crunloop/RLError.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <time.h>

#define RL__HIDDEN __attribute__((visibility("hidden")))

#if __BLOCKS__
/* The BlocksRuntime entry points (what <Block.h> wraps); declared here
 * because Block.h is not on the default include path of every toolchain. */
extern void *_Block_copy(const void *block);
extern void _Block_release(const void *block);
#define Block_copy(b) ((__typeof__(b))_Block_copy((const void *)(b)))
#define Block_release(b) _Block_release((const void *)(b))
#endif
#define RL__LIKELY(x) __builtin_expect(!!(x), 1)
#define RL__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Speed tricks, each with a plain twin, all listed here. `make PLAIN=1`
 * (-DRL_PLAIN=1) turns them all off; -DRL_TRICK_<NAME>=0 turns off one,
 * which is how `make bench-tricks` (scripts/bench-tricks.py, a row or two
 * per trick) measures what each buys on its own. The plain build runs the
 * C tests, the differential tests and TSan in CI too. How the loop waits
 * (SPIN, PACE, COALESCE for the loop) is all in loop/rl_waitpolicy.h.
 *   POOL       objects from size-class slabs (rl_pool.c); plain: calloc/free
 *   SPIN       adaptive spin before sleeping, for the loop's wait
 *              (rl_waitpolicy.h) and for a waitUntilDone sender
 *              (rl_spin.h); plain: sleep at once
 *   PACE       a loop yields to a same-CPU producer and pauses between big
 *              request batches before it waits (rl_waitpolicy.h); plain:
 *              none
 *   YIELD      a waitUntilDone sender on a shared CPU yields before it
 *              sleeps (RLRunLoopPerform.c); plain: sleep at once
 *   BLOCK_COPY the perform queue copies small stack blocks into the loop's
 *              slabs (RLRunLoopPerform.c); plain: Block_copy/Block_release
 *   PQ_SPIN    the perform queue's lock spins, then yields (rl_pqueue.c);
 *              plain: a futex mutex, asleep at once when it is held
 *   KEPT       an fd callout whose owner enables again what it got (an
 *              RLSocket's auto-re-enabled read type) finds it left enabled,
 *              its registration untouched (rl_fdtab.c); plain: turned off
 *              before each callout and on again after (one-shot)
 *   COALESCE   a loop whose pass read bulk chunks from two or more
 *              sockets naps a few microseconds before it waits, so the
 *              next reads are bigger (rl_waitpolicy.h); plain: waits at
 *              once
 *   SOCK_RECYCLE an RLSocket reads into its thread's buffer and hands a
 *              short read out in the thread's recycled data (RLSocket.c),
 *              and a ring's receives copy into the thread's few kept
 *              chunks (rl_rxq.c); plain: a new buffer and a new data for
 *              every read, a new chunk for every receive
 *   PORT_REUSE a port refills one message object for a batch of records
 *              (RLPort.c); plain: a new message per record
 *   BIAS       a run loop's lock is biased to the loop's thread, which then
 *              takes it with no locked instruction (loop/rl_bias.c; off
 *              under ThreadSanitizer, which does not model membarrier);
 *              plain: always the mutex */
#ifndef RL_PLAIN
#define RL_PLAIN 0
#endif
#ifndef RL_TRICK_POOL
#define RL_TRICK_POOL (!RL_PLAIN)
#endif
#ifndef RL_TRICK_SPIN
#define RL_TRICK_SPIN (!RL_PLAIN)
#endif
#ifndef RL_TRICK_PACE
#define RL_TRICK_PACE (!RL_PLAIN)
#endif
#ifndef RL_TRICK_YIELD
#define RL_TRICK_YIELD (!RL_PLAIN)
#endif
#ifndef RL_TRICK_BLOCK_COPY
#define RL_TRICK_BLOCK_COPY (!RL_PLAIN)
#endif
#ifndef RL_TRICK_PQ_SPIN
#define RL_TRICK_PQ_SPIN (!RL_PLAIN)
#endif
#ifndef RL_TRICK_KEPT
#define RL_TRICK_KEPT (!RL_PLAIN)
#endif
#ifndef RL_TRICK_COALESCE
#define RL_TRICK_COALESCE (!RL_PLAIN)
#endif
#ifndef RL_TRICK_SOCK_RECYCLE
#define RL_TRICK_SOCK_RECYCLE (!RL_PLAIN)
#endif
/* 1 in a ThreadSanitizer build (gcc's spelling, then clang's). */
#if defined(__SANITIZE_THREAD__)
#define RL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RL_TSAN 1
#endif
#endif
#ifndef RL_TSAN
#define RL_TSAN 0
#endif
#ifndef RL_TRICK_BIAS
#define RL_TRICK_BIAS (!RL_PLAIN && !RL_TSAN)
#endif
#ifndef RL_TRICK_PORT_REUSE
#define RL_TRICK_PORT_REUSE (!RL_PLAIN)
#endif

/* One spin-wait pause (x86 `pause`, ARM `yield`), for every busy-wait in
 * the library. */
static inline void rl__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* The calling thread's identity (never 0): its thread pointer, which glibc
 * also returns as pthread_self(), read without a call into libc. */
static inline uintptr_t rl__thread_pointer(void) {
    uintptr_t tp;
#if defined(__x86_64__)
    __asm__("mov %%fs:0, %0" : "=r"(tp));
#elif defined(__aarch64__)
    __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#else
    tp = (uintptr_t)pthread_self();
#endif
    return tp;
}

/* ---- errors (RLError.c) ---- */

/* Records code + formatted message ("fn: ...") as the thread's last error and
 * returns false, so a failing path reads `return rl__fail(...)`. */
RL__HIDDEN bool rl__fail(RLErrorCode code, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));
/* As rl__fail, with errno text appended and systemErrno set to err. */
RL__HIDDEN bool rl__fail_errno(int err, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));

/* glibc's C pthread_cleanup_push keeps its argument in a local that only
 * the unwind path (a longjmp back into the pushing frame) reads, so the
 * compiler does not see a local struct passed to it escape: it may keep the
 * struct's fields in registers across calls, and the handler then reads
 * stale values after RLThreadExit. Call this right after the push to
 * publish the struct's address. */
static inline void rl__cleanup_arg_escapes(void *p) {
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* ---- the one library value that is not an rl__object ----
 * An RLString's pointer is its characters (RLString.c). The generic object
 * functions (RLBase.c) reach strings through this table, which RLString.c
 * hands over with its first string: until then no pointer can be a string.
 * A table rather than calls, so the object model does not call up into the
 * string family built on it. */
typedef struct rl__string_ops {
    /* Is p a live string? Reads nothing at p (asks the registry). */
    bool (*known)(const void *p);
    /* Retain / release / count a string `known` accepted. */
    bool (*retain)(const void *p, const char *fn);
    bool (*release)(const void *p, const char *fn);
    long (*retain_count)(const void *p);
    /* If p is a string released recently, sets the error ("already
     * released", naming fn) and returns true; false otherwise. */
    bool (*explain_released)(const void *p, const char *fn);
    RLTypeID (*type_id)(void);
} rl__string_ops;
/* Installs the string table (RLString.c, at each string it makes: a
 * relaxed load and nothing more once it is there). */
RL__HIDDEN void rl__object_set_string_ops(const rl__string_ops *ops);
/* Live strings whose first four bytes read as a live object's magic: while
 * there are any, the generic functions ask the registry before trusting a
 * magic they read. Almost always zero. Defined in RLBase.c; RLString.c
 * counts. */
RL__HIDDEN extern _Atomic long rl__string_objectlike;

#endif /* CRUNLOOP_INTERNAL_H */
