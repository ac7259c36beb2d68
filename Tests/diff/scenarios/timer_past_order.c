/* Which of several due timers fires first. CF ignores a timer's `order`
 * (its documentation says so) and clamps a fire date in the past to the
 * creation time, so timers created with past dates fire in creation order.
 * (Timers given one future date fire in no stable order in CF: it converts
 * each date with its own reading of the clock.) */
#include "diff.h"

static void fired(CFRunLoopTimerRef t, void *info) { trace("%s fired", (const char *)info); }

static CFRunLoopTimerRef make(const char *name, CFAbsoluteTime when, CFIndex order) {
    CFRunLoopTimerContext ctx = {0, (void *)name, NULL, NULL, NULL};
    return CFRunLoopTimerCreate(NULL, when, 0, 0, order, fired, &ctx);
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    trace("-- created 3 s, 1 s, 2 s in the past (orders 3, 1, 2)");
    CFAbsoluteTime now = CFAbsoluteTimeGetCurrent();
    CFRunLoopTimerRef t3 = make("past 3 s, order 3", now - 3, 3);
    CFRunLoopTimerRef t1 = make("past 1 s, order 1", now - 1, 1);
    CFRunLoopTimerRef t2 = make("past 2 s, order 2", now - 2, 2);
    CFRunLoopAddTimer(rl, t2, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(rl, t1, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(rl, t3, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    CFRelease(t1); CFRelease(t2); CFRelease(t3);
}
