/* netutil.h — raw loopback TCP sockets and wire bytes for the tests that
 * play a hostile or hand-made peer of a socket port. */
#ifndef RL_TEST_NETUTIL_H
#define RL_TEST_NETUTIL_H

#include "testutil.h"

#include <crunloop/RLSocketPort.h>

/* A TCP socket listening on 127.0.0.1 with `backlog`, on a port of the
 * system's choice (in *port); `flags` are or-ed into socket(2)'s type
 * (SOCK_CLOEXEC always is). */
int rl_test_raw_listener(int flags, int backlog, uint16_t *port);
/* A blocking TCP socket connected to 127.0.0.1:port. */
int rl_test_raw_connect(uint16_t port);
/* v as 4 little-endian bytes at p. */
void rl_test_put32(uint8_t *p, uint32_t v);
/* How many connections p dropped, as its description says (0 if it says
 * nothing). */
size_t rl_test_dropped_of(RLSocketPortRef p);

#endif
