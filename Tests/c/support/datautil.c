/* datautil.c — see datautil.h. */
#include "datautil.h"

#include <string.h>

RLDataRef rl_test_text(const char *t) { return RLDataCreate(NULL, (const uint8_t *)t, (RLIndex)strlen(t)); }

void rl_test_assert_data_is(RLDataRef d, const char *want, const char *file, int line) {
    _assert_true(d != NULL, "d != NULL", file, line);
    _assert_int_equal((LargestIntegralType)RLDataGetLength(d), strlen(want), file, line);
    _assert_memory_equal(RLDataGetBytePtr(d), want, strlen(want), file, line);
}
