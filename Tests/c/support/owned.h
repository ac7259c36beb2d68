/* owned.h — an `info` whose run and release the perform tests count, to
 * check the …WithRelease rule: release exactly once, after the run (if it
 * ran). */
#ifndef RL_TEST_OWNED_H
#define RL_TEST_OWNED_H

#include <stdatomic.h>

typedef struct owned {
    _Atomic int ran, released, released_after_run;
} owned;

/* The request's function: fails the test if the info was already released. */
void owned_run(void *arg);
/* The release callback. */
void owned_release(void *arg);

#endif
