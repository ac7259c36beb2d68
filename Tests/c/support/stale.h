/* stale.h — misuse tests on released objects.
 *
 * A call given a released object is refused with kRLErrorInvalidObject in
 * a normal build (the object's memory is quarantined, RLBase.h). Under
 * AddressSanitizer or valgrind the stale read is the checker's report
 * instead, which ends the program: there the call runs in a fork()ed
 * child, which must not finish cleanly. */
#ifndef RL_STALE_H
#define RL_STALE_H

#include "testutil.h"

#include <stdbool.h>

/* Runs refused(stale): it returns true when the call reported failure
 * (false, NULL, 0 or -1, by the call). Normal build: asserts that, and
 * that the thread's error is kRLErrorInvalidObject. Checked build: asserts
 * the child running it was stopped by the checker. */
void rl_test_stale(bool (*refused)(const void *stale), const void *stale);

#endif /* RL_STALE_H */
