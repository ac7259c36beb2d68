/* Observer activities of a run woken by a one-shot timer: the loop sleeps,
 * the timer fires, the mode is then empty. */
#include "diff.h"

static void fired(CFRunLoopTimerRef t, void *info) { trace("timer fired"); }

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.05, 0, 0, 0, fired, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    trace("timer valid: %d", CFRunLoopTimerIsValid(t));
    CFRelease(t);
    CFRunLoopRemoveObserver(rl, obs, kCFRunLoopDefaultMode);
    CFRelease(obs);
}
