/* RLDataInternal.h — what other files of the library may do with RLData
 * beyond its public API (RLData.c). */
#ifndef CRUNLOOP_RLDATA_INTERNAL_H
#define CRUNLOOP_RLDATA_INTERNAL_H

#include "RLBase.h"

#include <crunloop/RLData.h>

/* A buffer whose bytes belong to `owner`: retain(owner) now (if given),
 * release(owner) when the buffer goes. No copy. Create rule. */
RL__HIDDEN RLDataRef rl__data_slice(const uint8_t *bytes, size_t length, void *owner, void (*retain)(void *),
                                    void (*release)(void *));

/* Gives an empty buffer made by rl__data_slice(NULL, 0, NULL, NULL, NULL),
 * which nobody else has seen yet, its bytes (owned by `owner`, released as
 * in rl__data_slice). For reads that cannot be undone (a socket's): the
 * buffer is made before, so that bytes once read can always be handed on. */
RL__HIDDEN void rl__data_adopt(RLDataRef data, const uint8_t *bytes, size_t length, void *owner,
                               void (*release)(void *));

/* Puts `length` bytes into a buffer made by RLDataCreate with at least
 * that many (its bytes inside it), in place of what it held. Only for a
 * buffer nobody else can reach (rl__object_sole). */
RL__HIDDEN void rl__data_refill(RLDataRef data, const uint8_t *bytes, size_t length);

/* Takes the bytes of a buffer given them by rl__data_adopt back from it:
 * returns their owner, which is the caller's now (not released with the
 * buffer), and leaves the buffer empty, as rl__data_slice(NULL, 0, ...)
 * made it. Only for a buffer nobody else can reach (rl__object_sole). */
RL__HIDDEN void *rl__data_take_back(RLDataRef data);

/* Whether obj is a live RLData (no error is left when it is not). */
RL__HIDDEN bool rl__is_data(const void *obj);

/* A live RLData's bytes and length in one call (true), without the public
 * getters' checks each; false (nothing set, no error left): not one. */
RL__HIDDEN bool rl__data_view(RLDataRef data, const uint8_t **bytes, size_t *length);

#endif /* CRUNLOOP_RLDATA_INTERNAL_H */
