/* RLOnce.c — run-once tokens on a futex.
 *
 * rl_state: 0 never run, 1 running, 2 running with sleepers, 3 done.
 * rl_runner: the running thread's id, so that fn calling RLOnceRun on its own
 * token fails instead of sleeping forever on itself. The token is a plain
 * struct in the public header (no _Atomic, so C++ and Swift can hold it);
 * every access here goes through the __atomic builtins. */
#include "RLLockInternal.h"
#include <crunloop/RLOnce.h>

#include <limits.h>

enum { ONCE_NEW = 0, ONCE_RUNNING = 1, ONCE_SLEEPERS = 2, ONCE_DONE = 3 };

static bool once_run_slow(RLOnceToken *token, void (*fn)(void *), void *context, const char *fn_name) {
    uint32_t s = ONCE_NEW;
    if (__atomic_compare_exchange_n(&token->rl_state, &s, ONCE_RUNNING, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&token->rl_runner, rl__self(), __ATOMIC_RELAXED);
        fn(context);
        __atomic_store_n(&token->rl_runner, 0, __ATOMIC_RELAXED);
        if (__atomic_exchange_n(&token->rl_state, ONCE_DONE, __ATOMIC_RELEASE) == ONCE_SLEEPERS)
            rl__futex_wake((_Atomic uint32_t *)&token->rl_state, INT_MAX);
        return true;
    }
    for (;;) {
        if (s == ONCE_DONE)
            return true;
        if (__atomic_load_n(&token->rl_runner, __ATOMIC_RELAXED) == rl__self())
            return rl__fail(kRLErrorWouldDeadlock, fn_name, "called again from inside its own initializer");
        if (s == ONCE_RUNNING &&
            !__atomic_compare_exchange_n(&token->rl_state, &s, ONCE_SLEEPERS, false, __ATOMIC_ACQUIRE,
                                         __ATOMIC_ACQUIRE))
            continue; /* s now holds the new state */
        rl__futex_wait((_Atomic uint32_t *)&token->rl_state, ONCE_SLEEPERS, NULL);
        s = __atomic_load_n(&token->rl_state, __ATOMIC_ACQUIRE);
    }
}

static bool once_run(RLOnceToken *token, void (*fn)(void *), void *context, const char *fn_name) {
    if (RL__UNLIKELY(token == NULL || fn == NULL))
        return rl__fail(kRLErrorInvalidArgument, fn_name, "NULL %s", token ? "function" : "token");
    if (RL__LIKELY(__atomic_load_n(&token->rl_state, __ATOMIC_ACQUIRE) == ONCE_DONE))
        return true;
    if (RL__UNLIKELY(__atomic_load_n(&token->rl_state, __ATOMIC_RELAXED) > ONCE_DONE))
        return rl__fail(kRLErrorInvalidArgument, fn_name, "the token is not initialized (use RL_ONCE_INIT)");
    return once_run_slow(token, fn, context, fn_name);
}

bool RLOnceRun(RLOnceToken *token, void (*fn)(void *), void *context) {
    return once_run(token, fn, context, __func__);
}

#if __BLOCKS__
static void once_block_trampoline(void *context) {
    void (^block)(void) = (void (^)(void))context;
    block();
}

bool RLOnceRunBlock(RLOnceToken *token, void (^block)(void)) {
    if (RL__UNLIKELY(block == NULL))
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL block");
    return once_run(token, once_block_trampoline, (void *)block, __func__);
}
#endif
