/* RLRunLoopSourceInternal.h — private: making fd sources (RLRunLoopSource.c). */
#ifndef CRUNLOOP_RLRUNLOOPSOURCEINTERNAL_H
#define CRUNLOOP_RLRUNLOOPSOURCEINTERNAL_H

#include "runloop_internal.h"

/* A valid source of order `order` for fd object f, without a context (its
 * callbacks all NULL: rl__source_ctx), taking over a reference on f that
 * the caller took; NULL (the error set for fn) if memory is short, f's
 * reference then still the caller's. */
RL__HIDDEN struct RLRunLoopSource *rl__source_create_fd(RLIndex order, struct RLFileDescriptor *f, const char *fn);

/* The bytes source s holds: its block and its memberships beyond the
 * inline one. For the tests that count a connection's memory. */
RL__HIDDEN size_t rl__source_footprint(RLRunLoopSourceRef s);

#endif /* CRUNLOOP_RLRUNLOOPSOURCEINTERNAL_H */
