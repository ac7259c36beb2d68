/* fdutil.h — what the fd-object tests share: a run-loop source for an
 * RLFileDescriptor in the current loop, and a count of the loop's
 * wake-ups. */
#ifndef RL_TEST_FDUTIL_H
#define RL_TEST_FDUTIL_H

#include "testutil.h"

/* f's run-loop source, added to `mode` of the current loop (the caller
 * releases it, with rl_test_fd_drop). */
RLRunLoopSourceRef rl_test_fd_add(RLFileDescriptorRef f, const char *mode);
/* Invalidates f and releases it and its source s. */
void rl_test_fd_drop(RLFileDescriptorRef f, RLRunLoopSourceRef s);
/* Counts the current loop's wake-ups (after-waiting activities) in `mode`
 * into *wakes until rl_test_uncount_wakes. */
RLRunLoopObserverRef rl_test_count_wakes(const char *mode, long *wakes);
void rl_test_uncount_wakes(RLRunLoopObserverRef o);
/* Runs `mode` of the current loop for 0.2 s (kept from being empty by the
 * caller) and asserts that it delivered nothing (count() the same after as
 * before) and slept: it timed out after two wake-ups at most, not a spin. */
void rl_test_assert_quiet(const char *mode, int (*count)(void));

#endif
