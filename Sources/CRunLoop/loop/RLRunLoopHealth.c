/*
 * RLRunLoopHealth.c — the public calls of loop health (RLRunLoopHealth.h)
 * that take a loop: each checks it (rl_loop.h) and hands the work to the
 * report (rl_health.c) or the statistics (rl_stats.c), which sit below the
 * loop object and know nothing of the checks.
 */
#include "rl_health.h"
#include "rl_loop.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <math.h>

bool RLRunLoopSetSlowCalloutThreshold(RLRunLoopRef rl, double seconds) {
    const char *fn = "RLRunLoopSetSlowCalloutThreshold";
    if (rl && !rl__check_loop(rl, fn))
        return false;
    if (isnan(seconds) || isinf(seconds) || seconds < 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "a threshold is a finite number of seconds, 0 or more (got %g)",
                        seconds);
    rl__health_set_threshold(rl, seconds);
    return true;
}

double RLRunLoopGetSlowCalloutThreshold(RLRunLoopRef rl) {
    if (rl && !rl__check_loop(rl, "RLRunLoopGetSlowCalloutThreshold"))
        return -1;
    return rl__health_threshold(rl);
}

bool RLRunLoopSetTimingEnabled(RLRunLoopRef rl, bool enabled) {
    const char *fn = "RLRunLoopSetTimingEnabled";
    return rl__check_loop(rl, fn) && rl__stats_set_timing(rl, enabled, fn);
}

bool RLRunLoopIsTimingEnabled(RLRunLoopRef rl) {
    return rl__check_loop(rl, "RLRunLoopIsTimingEnabled") && rl__stats_timing(rl);
}

bool RLRunLoopCopyStatistics(RLRunLoopRef rl, RLRunLoopStatistics *out) {
    const char *fn = "RLRunLoopCopyStatistics";
    if (!rl__check_loop(rl, fn))
        return false;
    if (!out)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL statistics pointer");
    return rl__stats_copy(rl, out, fn);
}

bool RLRunLoopResetStatistics(RLRunLoopRef rl) {
    const char *fn = "RLRunLoopResetStatistics";
    return rl__check_loop(rl, fn) && rl__stats_reset(rl, fn);
}
