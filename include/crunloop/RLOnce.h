/*
 * RLOnce.h — run an initializer exactly once (pthread_once / dispatch_once).
 *
 *     static RLOnceToken once = RL_ONCE_INIT;   (a zeroed token works too)
 *     RLOnceRun(&once, init_tables, NULL);
 *
 * What a caller may rely on:
 *   - fn runs once per token, ever; every RLOnceRun on the token returns only
 *     after it finished, and sees everything fn wrote.
 *   - The first call runs fn on the calling thread; concurrent callers sleep
 *     (no spinning) until it is done. Once done, a call costs one load.
 *   - Calling RLOnceRun on the same token from inside fn returns false with
 *     kRLErrorWouldDeadlock instead of hanging (pthread_once hangs).
 *   - NULL token or fn: false, kRLErrorInvalidArgument.
 *   - The token must stay at one address (do not copy it while in use).
 */
#ifndef CRUNLOOP_RLONCE_H
#define CRUNLOOP_RLONCE_H

#include <crunloop/RLBase.h>

RL_EXTERN_C_BEGIN

/* Opaque: touch only through RLOnceRun. */
typedef struct RLOnceToken {
    uint32_t rl_state;
    uintptr_t rl_runner;
} RLOnceToken;

#define RL_ONCE_INIT {0, 0}

/* Runs fn(context) unless it already ran on this token; true once it has. */
RL_EXPORT bool RLOnceRun(RLOnceToken *token, void (*fn)(void *RL_NULLABLE context),
                         void *RL_NULLABLE context);

#if __BLOCKS__
/* The block form of RLOnceRun. */
RL_EXPORT bool RLOnceRunBlock(RLOnceToken *token, void (^block)(void));
#endif

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLONCE_H */
