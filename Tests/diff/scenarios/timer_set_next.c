/* CFRunLoopTimerSetNextFireDate: earlier, later, from inside the timer's
 * own callout (the new date wins), on a one-shot timer after it fired, and
 * on a timer in no run loop. */
#include "diff.h"

static int fires;

static void fired(CFRunLoopTimerRef t, void *info) {
    fires++;
    const char *what = info;
    trace("%s fired (%d)", what, fires);
    if (what[0] == 'r') { /* "repeating 100 s": move itself */
        if (fires == 1) {
            trace("callout moves the timer to 20 ms from now");
            CFRunLoopTimerSetNextFireDate(t, CFAbsoluteTimeGetCurrent() + 0.02);
        } else if (fires == 2) {
            trace("callout moves the timer 1000 s ahead");
            CFRunLoopTimerSetNextFireDate(t, CFAbsoluteTimeGetCurrent() + 1000);
        }
    }
    if (what[0] == 'o' && fires == 1) { /* "one-shot": re-arm itself */
        trace("one-shot callout re-arms itself 20 ms ahead");
        CFRunLoopTimerSetNextFireDate(t, CFAbsoluteTimeGetCurrent() + 0.02);
    }
}

static CFRunLoopTimerRef make(const char *name, CFAbsoluteTime when, CFTimeInterval interval) {
    CFRunLoopTimerContext ctx = {0, (void *)name, NULL, NULL, NULL};
    return CFRunLoopTimerCreate(NULL, when, interval, 0, 0, fired, &ctx);
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);

    trace("-- earlier: 1000 s -> 20 ms");
    CFRunLoopTimerRef e = make("earlier", CFAbsoluteTimeGetCurrent() + 1000, 0);
    CFRunLoopAddTimer(rl, e, kCFRunLoopDefaultMode);
    CFAbsoluteTime want = CFAbsoluteTimeGetCurrent() + 0.02;
    CFRunLoopTimerSetNextFireDate(e, want);
    trace("get returns the set date: %d", CFRunLoopTimerGetNextFireDate(e) == want);
    trace("loop's next date is it: %d", CFRunLoopGetNextTimerFireDate(rl, kCFRunLoopDefaultMode) == want);
    run_mode("run 0.5 s", kCFRunLoopDefaultMode, 0.5, false);
    CFRelease(e);

    trace("-- later: 20 ms -> 1000 s");
    fires = 0;
    CFRunLoopTimerRef l = make("later", CFAbsoluteTimeGetCurrent() + 0.02, 0);
    CFRunLoopAddTimer(rl, l, kCFRunLoopDefaultMode);
    CFRunLoopTimerSetNextFireDate(l, CFAbsoluteTimeGetCurrent() + 1000);
    run_mode("run 0.2 s", kCFRunLoopDefaultMode, 0.2, false);
    trace("fires: %d, valid %d", fires, CFRunLoopTimerIsValid(l));
    CFRunLoopTimerInvalidate(l);
    CFRelease(l);

    trace("-- moved from another mode's loop while asleep is covered elsewhere; inside the callout:");
    fires = 0;
    CFRunLoopTimerRef r = make("repeating 100 s", CFAbsoluteTimeGetCurrent() + 0.02, 100);
    CFRunLoopAddTimer(rl, r, kCFRunLoopDefaultMode);
    run_mode("run 0.5 s", kCFRunLoopDefaultMode, 0.5, false);
    trace("fires: %d, valid %d", fires, CFRunLoopTimerIsValid(r));
    CFRunLoopTimerInvalidate(r);
    CFRelease(r);

    trace("-- a one-shot timer re-armed from its own callout");
    fires = 0;
    CFRunLoopTimerRef o = make("one-shot", CFAbsoluteTimeGetCurrent() + 0.02, 0);
    CFRunLoopAddTimer(rl, o, kCFRunLoopDefaultMode);
    run_mode("run 0.5 s", kCFRunLoopDefaultMode, 0.5, false);
    trace("fires: %d, valid %d", fires, CFRunLoopTimerIsValid(o));
    CFRunLoopTimerInvalidate(o);
    CFRelease(o);

    trace("-- set on a timer in no run loop, then added");
    fires = 0;
    CFRunLoopTimerRef n = make("unscheduled", CFAbsoluteTimeGetCurrent() + 1000, 0);
    CFRunLoopTimerSetNextFireDate(n, CFAbsoluteTimeGetCurrent() + 0.02);
    CFRunLoopAddTimer(rl, n, kCFRunLoopDefaultMode);
    run_mode("run 0.5 s", kCFRunLoopDefaultMode, 0.5, false);
    trace("fires: %d", fires);
    CFRelease(n);

    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
}
