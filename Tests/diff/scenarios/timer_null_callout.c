/* A timer created without a callout: accepted, it keeps its mode alive and
 * fires like any other (a one-shot is invalidated after its fire date, a
 * repeating one moves along its grid), doing nothing. */
#include "diff.h"

void scenario(void) {
    CFRunLoopRef loop = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopBeforeTimers | kCFRunLoopExit, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);

    CFAbsoluteTime now = CFAbsoluteTimeGetCurrent();
    CFRunLoopTimerRef once = CFRunLoopTimerCreate(NULL, now + 0.01, 0, 0, 0, NULL, NULL);
    trace("one-shot created: %d", once != NULL);
    if (!once) return;
    CFRunLoopAddTimer(loop, once, kCFRunLoopDefaultMode);
    run_mode("one-shot", kCFRunLoopDefaultMode, 5, false);
    trace("one-shot valid after its fire: %d", CFRunLoopTimerIsValid(once));
    CFRelease(once);

    now = CFAbsoluteTimeGetCurrent();
    CFRunLoopTimerRef rep = CFRunLoopTimerCreate(NULL, now - 0.5, 1000, 0, 0, NULL, NULL);
    trace("repeating created: %d", rep != NULL);
    if (!rep) return;
    CFRunLoopAddTimer(loop, rep, kCFRunLoopDefaultMode);
    run_mode("repeating", kCFRunLoopDefaultMode, 0, false);
    trace("repeating moved to its next grid point: %d", CFRunLoopTimerGetNextFireDate(rep) > now + 900);
    run_mode("repeating keeps the mode alive", kCFRunLoopDefaultMode, 0.05, false);
    CFRunLoopTimerInvalidate(rep);
    CFRelease(rep);

    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
