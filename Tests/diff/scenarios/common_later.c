/* Items added to kCFRunLoopCommonModes appear in a mode made common later:
 * sources (with a schedule callback), timers, observers, blocks. */
#include "diff.h"

static void fired(CFRunLoopTimerRef t, void *info) { trace("timer fired"); }

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef s = trace_source("src", 0, true);
    trace("-- add source, timer, observer to common modes");
    CFRunLoopAddSource(rl, s, kCFRunLoopCommonModes);
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, fired, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopCommonModes);
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopEntry | kCFRunLoopExit, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopCommonModes);
    trace("in X: source %d timer %d observer %d", CFRunLoopContainsSource(rl, s, CFSTR("X")),
          CFRunLoopContainsTimer(rl, t, CFSTR("X")), CFRunLoopContainsObserver(rl, obs, CFSTR("X")));
    CFRunLoopPerformBlock(rl, kCFRunLoopCommonModes, ^{ trace("common block"); });
    run_mode("X before it is common", CFSTR("X"), 0, false);
    trace("-- make X common");
    CFRunLoopAddCommonMode(rl, CFSTR("X"));
    trace("in X: source %d timer %d observer %d", CFRunLoopContainsSource(rl, s, CFSTR("X")),
          CFRunLoopContainsTimer(rl, t, CFSTR("X")), CFRunLoopContainsObserver(rl, obs, CFSTR("X")));
    CFRunLoopSourceSignal(s);
    run_mode("X", CFSTR("X"), 0, false);
    trace("-- make X common again");
    CFRunLoopAddCommonMode(rl, CFSTR("X"));
    trace("-- new common-mode source goes to default and X (in no defined order)");
    CFRunLoopSourceRef s2 = trace_source("src2", 0, true);
    collect_begin();
    CFRunLoopAddSource(rl, s2, kCFRunLoopCommonModes);
    collect_end();
    trace("-- remove from common modes");
    collect_begin();
    CFRunLoopRemoveSource(rl, s2, kCFRunLoopCommonModes);
    CFRunLoopRemoveSource(rl, s, kCFRunLoopCommonModes);
    collect_end();
    CFRunLoopRemoveTimer(rl, t, kCFRunLoopCommonModes);
    CFRunLoopRemoveObserver(rl, obs, kCFRunLoopCommonModes);
    trace("in X: source %d timer %d observer %d", CFRunLoopContainsSource(rl, s, CFSTR("X")),
          CFRunLoopContainsTimer(rl, t, CFSTR("X")), CFRunLoopContainsObserver(rl, obs, CFSTR("X")));
    run_mode("X now empty", CFSTR("X"), 0, false);
    CFRunLoopTimerInvalidate(t);
    CFRelease(t);
    CFRunLoopSourceInvalidate(s);
    CFRunLoopSourceInvalidate(s2);
    CFRelease(s);
    CFRelease(s2);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
