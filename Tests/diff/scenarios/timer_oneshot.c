/* One-shot timers: fire once, are invalidated, leave the mode; interval 0
 * and negative intervals; order among due timers; accessors. */
#include "diff.h"

static void fired(CFRunLoopTimerRef t, void *info) {
    trace("%s fired, valid in callout: %d", (const char *)info, CFRunLoopTimerIsValid(t));
}

static CFRunLoopTimerRef make(const char *name, CFAbsoluteTime when, CFTimeInterval interval, CFIndex order) {
    CFRunLoopTimerContext ctx = {0, (void *)name, NULL, NULL, NULL};
    return CFRunLoopTimerCreate(NULL, when, interval, 0, order, fired, &ctx);
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFAbsoluteTime now = CFAbsoluteTimeGetCurrent();
    CFRunLoopTimerRef a = make("a", now + 0.05, 0, 0);
    trace("a: repeats %d, interval %g, order %ld, valid %d", CFRunLoopTimerDoesRepeat(a),
          CFRunLoopTimerGetInterval(a), (long)CFRunLoopTimerGetOrder(a), CFRunLoopTimerIsValid(a));
    CFRunLoopTimerRef b = make("b(negative interval)", now - 1, -5, 0);
    trace("b: repeats %d, interval %g", CFRunLoopTimerDoesRepeat(b), CFRunLoopTimerGetInterval(b));
    CFRunLoopAddTimer(rl, a, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(rl, b, kCFRunLoopDefaultMode);
    trace("next timer fire date is b's: %d", CFRunLoopGetNextTimerFireDate(rl, kCFRunLoopDefaultMode) ==
                                                  CFRunLoopTimerGetNextFireDate(b));
    trace("next fire date in an unknown mode: %g", CFRunLoopGetNextTimerFireDate(rl, CFSTR("none")));
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    trace("valid: a %d b %d; contains a: %d", CFRunLoopTimerIsValid(a), CFRunLoopTimerIsValid(b),
          CFRunLoopContainsTimer(rl, a, kCFRunLoopDefaultMode));
    trace("next timer fire date now: %g", CFRunLoopGetNextTimerFireDate(rl, kCFRunLoopDefaultMode));

    trace("-- three timers due in 30, 10 and 20 ms, orders 3, 1, 2: by date");
    now = CFAbsoluteTimeGetCurrent();
    CFRunLoopTimerRef t3 = make("order 3", now + 0.03, 0, 3);
    CFRunLoopTimerRef t1 = make("order 1", now + 0.01, 0, 1);
    CFRunLoopTimerRef t2 = make("order 2", now + 0.02, 0, 2);
    CFRunLoopAddTimer(rl, t3, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(rl, t1, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(rl, t2, kCFRunLoopDefaultMode);
    sleep_s(0.05);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);

    trace("-- re-adding an invalidated timer");
    CFRunLoopAddTimer(rl, a, kCFRunLoopDefaultMode);
    trace("contains a: %d", CFRunLoopContainsTimer(rl, a, kCFRunLoopDefaultMode));
    run_mode("run", kCFRunLoopDefaultMode, 0.05, false);

    trace("-- removing a pending timer (it stays valid)");
    CFRunLoopTimerRef r = make("removed", CFAbsoluteTimeGetCurrent() - 1, 0, 0);
    CFRunLoopAddTimer(rl, r, kCFRunLoopDefaultMode);
    CFRunLoopRemoveTimer(rl, r, kCFRunLoopDefaultMode);
    trace("valid: %d", CFRunLoopTimerIsValid(r));
    run_mode("run", kCFRunLoopDefaultMode, 0.05, false);
    CFRunLoopTimerInvalidate(r);
    CFRelease(r);
    CFRelease(a);
    CFRelease(b);
    CFRelease(t1);
    CFRelease(t2);
    CFRelease(t3);
}
