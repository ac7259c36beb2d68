/* RLRunLoopSourceInternal.h — private: what the tests ask of a source (RLRunLoopSource.c). */
#ifndef CRUNLOOP_RLRUNLOOPSOURCEINTERNAL_H
#define CRUNLOOP_RLRUNLOOPSOURCEINTERNAL_H

#include "runloop_internal.h"

/* The bytes source s holds: its block (an fd source's: none, its block
 * is its owner's) and its memberships beyond the inline one. For the
 * tests that count a connection's memory. */
RL__HIDDEN size_t rl__source_footprint(RLRunLoopSourceRef s);

#endif /* CRUNLOOP_RLRUNLOOPSOURCEINTERNAL_H */
