/* datautil.h — RLData helpers shared by the message-port C tests. */
#ifndef RL_DATAUTIL_H
#define RL_DATAUTIL_H

#include "testutil.h"

/* A new RLData of t's bytes (no terminating NUL); the caller releases it. */
RLDataRef rl_test_text(const char *t);

/* Asserts that d is not NULL and holds exactly want's bytes. A macro, so
 * that cmocka reports the test's own line. */
#define assert_data_is(d, want) rl_test_assert_data_is((d), (want), __FILE__, __LINE__)
void rl_test_assert_data_is(RLDataRef d, const char *want, const char *file, int line);

#endif
