/*
 * rl_waitpolicy.c — the out-of-line side of the wait policy
 * (rl_waitpolicy.h, where how the loop waits is decided and done): the
 * sockets' bulk-read hint, the tests' hooks and the cold error reports.
 */
#include "rl_waitpolicy.h"
#include <crunloop/RLRunLoop.h>

/* For the tests: the nap's length (rl_waitpolicy.h). */
_Atomic long long rl__coalesce_ns_for_tests;

/* The sockets' hint (internal.h): a callout of the calling thread's loop
 * read a bulk chunk from `who`. */
void rl__wait_note_bulk_read(const void *who, size_t n) {
    RLRunLoopRef rl = rl__tls;
    if (!rl || !rl->frame)
        return;
    rl->pass_bulk_bytes += n;
    if (rl->bulk_last != who) {
        rl->bulk_last = who;
        rl->pass_bulk++;
    }
}

bool rl__wait_bulk_may_nap(void) {
    RLRunLoopRef rl = rl__tls;
    return rl && rl->frame && (rl->pass_bulk > 0 || rl->fd_pass_left > 0);
}

unsigned long rl__loop_coalesced_waits(RLRunLoopRef rl) {
    rl__loop_lock(rl);
    unsigned long n = rl->ncoalesced;
    rl__loop_unlock(rl);
    return n;
}

/* The kernel refused to arm the timerfd (errno err): the wait about to
 * start ends by its deadline through its own timeout instead, and the
 * loop's thread is told (docs/runloop.md). */
void rl__wait_report_unarmed(int err) {
    rl__fail_errno(err, "RLRunLoopRunInMode",
                   "timerfd_settime refused to arm the loop's timerfd; waiting with a timeout instead");
}

/* The kernel refused the wait itself (errno err, not EINTR): the loop's
 * epoll set or ring is broken. Counting it as "no events" would go round
 * again at once, a busy loop; the run ends instead (rl_run_frame), the
 * error set, naming the backend's call. */
void rl__wait_report_failed(RLRunLoopRef rl, int err) {
    rl__fail_errno(err, "RLRunLoopRunInMode", "%s on the loop's %s set failed; the run ends", rl__poll_wait_call(&rl->kern),
                   rl__poll_backend_name(&rl->kern));
}
