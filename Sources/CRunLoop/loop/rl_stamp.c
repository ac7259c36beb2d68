/*
 * rl_stamp.c — the order of timers with equal fire dates (rl_stamp.h): the
 * logical clocks that stamp a timer when it gets its date, and the stamp a
 * timer takes when it arrives in a loop. Below the timer file and the
 * homes (rl_lock.c), which both stamp.
 */
#include "rl_stamp.h"

/* Timers with equal fire dates fire in the order they got them (created,
 * moved, refired), as seen by each thread: each of those stamps the timer
 * (runloop_internal.h) from a logical clock that nothing on the timer path
 * shares between threads or loops. Each thread has a clock, and each loop
 * one (timer_seq, under its lock). A stamp is one more than the larger of
 * the stamping thread's clock and, for a timer at home in a loop, the
 * loop's; both clocks take it. So on one thread, a stamp comes after every
 * stamp that thread gave before and after every stamp its loops gave
 * before (a timer created after its loop refired another one sorts after
 * it), and timers moved in one loop, from any thread, keep their order.
 *
 * Threads learn nothing from each other's clocks meanwhile (a thread's
 * creating timers writes only its own clock): a timer that got its date on
 * another thread than the one that adds it to a loop is ordered by that
 * add instead (rl__timer_arrive_locked), which is CF's rule (CF orders
 * equal dates by insertion). One that the adding thread stamped itself
 * keeps its stamp, and the loop's clock is raised to it. The thread's
 * number (seq_by) costs one atomic add in a thread's life, at its first
 * stamp, and breaks ties between clocks of equal value.
 *
 * The timer's home's lock held, or its item lock while it has none, or
 * not yet shared. */
__thread uint64_t rl__stamp_clock __attribute__((tls_model("initial-exec")));
__thread uint32_t rl__stamp_thread __attribute__((tls_model("initial-exec")));
static _Atomic uint32_t stamp_threads;

uint32_t rl__stamp_thread_first(void) {
    rl__stamp_thread = atomic_fetch_add_explicit(&stamp_threads, 1, memory_order_relaxed) + 1;
    return rl__stamp_thread;
}

