/* Every RunInMode result code, and what makes a mode "empty" (Finished). */
#include "diff.h"

static void noop_perform(void *info) { trace("perform"); }
static void noop_timer(CFRunLoopTimerRef t, void *info) { trace("timer"); }
static void noop_observer(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    run_mode("unknown mode", CFSTR("never.used"), 0.05, false);
    run_mode("default mode, nothing in it", kCFRunLoopDefaultMode, 0.05, false);

    CFRunLoopObserverRef o = CFRunLoopObserverCreate(NULL, kCFRunLoopAllActivities, true, 0, noop_observer, NULL);
    CFRunLoopAddObserver(rl, o, CFSTR("obs.only"));
    run_mode("mode with only an observer", CFSTR("obs.only"), 0.05, false);

    CFRunLoopSourceContext ctx = {0};
    ctx.perform = noop_perform;
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &ctx);
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    run_mode("source, timeout", kCFRunLoopDefaultMode, 0.05, false);
    CFRunLoopSourceSignal(s);
    run_mode("source signalled, returnAfterSourceHandled", kCFRunLoopDefaultMode, 0.05, true);
    CFRunLoopStop(rl);
    run_mode("stopped before the run", kCFRunLoopDefaultMode, 0.05, false);
    CFRunLoopRemoveSource(rl, s, kCFRunLoopDefaultMode);
    run_mode("source removed", kCFRunLoopDefaultMode, 0.05, false);

    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, noop_timer, NULL);
    CFRunLoopAddTimer(rl, t, CFSTR("timer.only"));
    run_mode("mode with only a far timer", CFSTR("timer.only"), 0.05, false);
    CFRunLoopTimerInvalidate(t);
    run_mode("timer invalidated", CFSTR("timer.only"), 0.05, false);

    CFRunLoopSourceInvalidate(s);
    run_mode("invalid source, kept nothing", kCFRunLoopDefaultMode, 0.05, false);
    trace("-- CFRunLoopRun returns once the default mode is empty");
    CFRunLoopTimerRef u = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.02, 0, 0, 0, noop_timer, NULL);
    CFRunLoopAddTimer(rl, u, kCFRunLoopDefaultMode);
    CFRunLoopRun();
    trace("CFRunLoopRun returned");
    CFRelease(u);
    CFRunLoopObserverInvalidate(o);
    CFRelease(o);
    CFRelease(t);
    CFRelease(s);
}
