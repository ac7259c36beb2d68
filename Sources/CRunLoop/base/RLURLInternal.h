/* RLURLInternal.h — what other files (the file streams) read of an RLURL. */
#ifndef CRUNLOOP_RLURLINTERNAL_H
#define CRUNLOOP_RLURLINTERNAL_H

#include "internal.h"
#include <crunloop/RLURL.h>

/* The URL's absolute path (valid while the URL lives), or NULL with the
 * error set, naming fn, if url is not a live URL. */
RL__HIDDEN const char *rl__url_path(RLURLRef url, const char *fn);

#endif /* CRUNLOOP_RLURLINTERNAL_H */
