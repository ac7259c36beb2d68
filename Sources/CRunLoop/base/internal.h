/*
 * internal.h — private helpers shared by the CRunLoop implementation files.
 * Names use the rl__ prefix; nothing here is exported from the library.
 */
#ifndef CRUNLOOP_INTERNAL_H
#define CRUNLOOP_INTERNAL_H

#include <crunloop/crunloop.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <time.h>

#define RL__HIDDEN __attribute__((visibility("hidden")))
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
 *              short read out in the thread's recycled data (RLSocket.c);
 *              plain: a new buffer and a new data for every read
 *   PORT_REUSE a port refills one message object for a batch of records
 *              (RLPort.c); plain: a new message per record */
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

/* ---- lock-order debugging (RLLockDebug.c) ----
 * Every RL lock calls these hooks, only when rl__lockdep_enabled() (one
 * relaxed load on the fast path). `where` is the caller's return address
 * (__builtin_return_address(0) in the public lock function), symbolized
 * only when a report is printed. `lock` identifies the lock; `name` is its
 * current name (may be NULL; copied by the detector). */
RL__HIDDEN extern _Atomic int rl__lockdep_on;
static inline bool rl__lockdep_enabled(void) {
    return atomic_load_explicit(&rl__lockdep_on, memory_order_relaxed) != 0;
}
/* Before blocking on `lock`: records the order edge held-lock -> lock for
 * every lock the thread holds and reports an inversion (never blocks). */
RL__HIDDEN void rl__lockdep_will_acquire(const void *lock, const char *name, const void *where);
/* After `lock` was taken (also after a successful try-lock). */
RL__HIDDEN void rl__lockdep_acquired(const void *lock, const char *name, const void *where);
/* After `lock` was released by the calling thread. */
RL__HIDDEN void rl__lockdep_released(const void *lock);
/* `lock` is being destroyed: forget its edges. */
RL__HIDDEN void rl__lockdep_forget(const void *lock);
/* Changes each time the detector is switched on: what a thread recorded
 * before (locks it held then) no longer counts. */
RL__HIDDEN unsigned rl__lockdep_epoch(void);

/* ---- run loop <-> threads (RLRunLoop.c, used by RLThread.c) ---- */

/* Tears down the calling thread's run loop the CF way (sources cancelled
 * on this thread, everything released). Safe to call more than once; the
 * run loop's own pthread-key destructor calls it for threads that exit
 * without it. RLThread calls it after the entry returns and before the
 * will-exit notifications. */
RL__HIDDEN void rl__runloop_teardown_current_thread(void);

/* The run loop of `thread` (Get rule: the reference lasts until that thread
 * tears its loop down; retain it to keep it longer), creating it if the
 * thread has none yet, as CF's _CFRunLoopGet0(pthread_t): when `thread`
 * later calls RLRunLoopGetCurrent it gets this same loop. The caller must
 * know that `thread` is alive and will tear its loop down when it exits
 * (an RLThread before its exit sequence closed its perform requests), or a
 * loop made for it would outlive it. NULL (error set) if out of resources. */
RL__HIDDEN RLRunLoopRef rl__runloop_get_for_thread(pthread_t thread);

/* From a callout of f, on its loop's thread: whether that loop would serve
 * f now (f and its source valid, the source in the mode being run, the run
 * not told to stop). A callout that hands over what the fd has in several
 * pieces asks before each further one (RLFileDescriptor.c). */
RL__HIDDEN bool rl__fd_served_now(RLFileDescriptorRef f);
/* From a callout of f: whether the readiness it serves came with no
 * hang-up and no error (epoll's report had none of EPOLLRDHUP, EPOLLHUP,
 * EPOLLERR): the peer had not ended the stream when the loop waited, so
 * no system call need ask. False: it may have, or unknown (not in a
 * callout of f; an always-ready file). */
RL__HIDDEN bool rl__fd_report_quiet(RLFileDescriptorRef f);
/* From an fd callout: how many more fd callouts the loop's pass has still
 * to make after it (others ready in the same wake). A hint for how long
 * the callout may take: RLSocket reads in bigger chunks when it is 0. */
RL__HIDDEN size_t rl__fd_pass_left(void);
/* The callback types enabled on f now (a snapshot: the loops clear what
 * they deliver, any thread may enable). */
RL__HIDDEN RLOptionFlags rl__fd_enabled(RLFileDescriptorRef f);
/* The types f's owner enables again after each callout that got them
 * (RLFileDescriptor's `kept`): the loop may leave them on meanwhile. */
RL__HIDDEN void rl__fd_set_kept(RLFileDescriptorRef f, RLOptionFlags types);
/* A read of at least this many bytes is a bulk one: the stream had a
 * chunk waiting, not a message. */
#define RL_BULK_READ 4096
/* The sockets' hint to the wait policy (rl_waitpolicy.c), from a callout
 * on the calling thread's loop: it read a bulk chunk from the socket `who`
 * (an RLSocket, or a socket stream the callout reads). Two or more sockets
 * between two waits make the loop coalesce before it waits
 * (RL_TRICK_COALESCE); more chunks from one socket in a row count once.
 * Outside a run of the thread's loop: nothing. */
RL__HIDDEN void rl__wait_note_bulk_read(const void *who);

#endif /* CRUNLOOP_INTERNAL_H */
