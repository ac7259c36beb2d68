/* RLNumberInternal.h — what other files of the library may ask of
 * RLBoolean and RLNumber beyond their public API (RLNumber.c). */
#ifndef CRUNLOOP_RLNUMBER_INTERNAL_H
#define CRUNLOOP_RLNUMBER_INTERNAL_H

#include "RLBase.h"

#include <crunloop/RLNumber.h>

/* Whether obj is one of the two booleans (compares pointers only). */
RL__HIDDEN bool rl__is_boolean(const void *obj);
/* Whether obj is a live RLNumber (no error is left when it is not). */
RL__HIDDEN bool rl__is_number(const void *obj);

#endif /* CRUNLOOP_RLNUMBER_INTERNAL_H */
