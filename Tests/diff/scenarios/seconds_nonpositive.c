/* seconds <= 0: a single pass without waiting, for 0, negative values and
 * a timer that is already due. */
#include "diff.h"

static void fired(CFRunLoopTimerRef t, void *info) { trace("timer fired"); }

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
    CFRunLoopSourceRef s = trace_source("src", 0, false);
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    trace("-- seconds -1, signalled");
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, -1, false);
    trace("-- seconds -1, nothing");
    run_mode("run", kCFRunLoopDefaultMode, -1, false);
    trace("-- seconds -1e9, returnAfterSourceHandled, signalled");
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, -1e9, true);
    trace("-- seconds 0, block queued");
    CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{ trace("block"); });
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("-- seconds 0, a timer due a second ago");
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, fired, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("timer valid: %d", CFRunLoopTimerIsValid(t));
    trace("-- seconds 0, again");
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("timer valid: %d", CFRunLoopTimerIsValid(t));
    CFRunLoopTimerInvalidate(t);
    CFRelease(t);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
