/* RLSocketInternal.h — what other files of the library use of RLSocket.c
 * beyond its public API. */
#ifndef CRUNLOOP_RLSOCKET_INTERNAL_H
#define CRUNLOOP_RLSOCKET_INTERNAL_H

#include "RLBase.h"

#include <crunloop/RLData.h>
#include <crunloop/RLSocket.h>

/* True if `address` is a live RLData the size of a socket address (at
 * least a family, at most a sockaddr_storage); else false, with error
 * kRLErrorInvalidArgument (NULL, a bad size) or kRLErrorInvalidObject (not
 * a live RLData) set in the name of `fn`. */
RL__HIDDEN bool rl__socket_address_ok(RLDataRef address, const char *fn);

/* For the tests (test_socket_memory.c): the memory s holds as its own
 * (RLSocket.c says which). */
RL__HIDDEN size_t rl__socket_footprint(RLSocketRef s);

#endif
