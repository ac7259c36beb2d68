/* Mode bookkeeping: CopyCurrentMode inside callouts of nested runs,
 * CopyAllModes as modes get created, AddCommonMode, GetNextTimerFireDate
 * per mode, Contains for the common pseudo-mode. */
#include "diff.h"

static CFRunLoopRef loop;

static void timer_cb(CFRunLoopTimerRef t, void *info) {}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    trace("modes at start: %s", all_modes(loop));
    trace("current mode outside a run: %s", current_mode(loop));
    CFRunLoopSourceRef s = trace_source("src", 0, false);
    CFRunLoopAddSource(loop, s, CFSTR("A"));
    trace("after adding to A: %s", all_modes(loop));
    CFRunLoopContainsSource(loop, s, CFSTR("probe"));
    run_mode("run in a mode nobody made", CFSTR("ghost"), 0, false);
    trace("after Contains(probe) and a run in ghost: %s", all_modes(loop));
    CFRunLoopAddCommonMode(loop, CFSTR("C"));
    trace("after AddCommonMode(C): %s", all_modes(loop));
    CFRunLoopAddCommonMode(loop, kCFRunLoopDefaultMode);
    trace("after AddCommonMode(default): %s", all_modes(loop));

    trace("-- current mode inside callouts");
    CFRunLoopAddSource(loop, s, kCFRunLoopDefaultMode);
    CFRunLoopPerformBlock(loop, CFSTR("A"), ^{
        trace("in A: current %s", current_mode(loop));
        CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("in default inside A: current %s", current_mode(loop)); });
        run_mode("nested default poll", kCFRunLoopDefaultMode, 0, false);
        trace("back in A: current %s", current_mode(loop));
    });
    run_mode("A poll", CFSTR("A"), 0, false);
    trace("after the run: current %s", current_mode(loop));

    trace("-- next timer fire date per mode");
    CFAbsoluteTime now = CFAbsoluteTimeGetCurrent();
    CFRunLoopTimerRef t1 = CFRunLoopTimerCreate(NULL, now + 100, 0, 0, 0, timer_cb, NULL);
    CFRunLoopTimerRef t2 = CFRunLoopTimerCreate(NULL, now + 50, 0, 0, 0, timer_cb, NULL);
    CFRunLoopAddTimer(loop, t1, CFSTR("A"));
    CFRunLoopAddTimer(loop, t2, kCFRunLoopCommonModes);
    trace("A: t1 %d; default: t2 %d; C (common): t2 %d; common pseudo-mode: %g",
          CFRunLoopGetNextTimerFireDate(loop, CFSTR("A")) == CFRunLoopTimerGetNextFireDate(t1),
          CFRunLoopGetNextTimerFireDate(loop, kCFRunLoopDefaultMode) == CFRunLoopTimerGetNextFireDate(t2),
          CFRunLoopGetNextTimerFireDate(loop, CFSTR("C")) == CFRunLoopTimerGetNextFireDate(t2),
          CFRunLoopGetNextTimerFireDate(loop, kCFRunLoopCommonModes));
    CFRunLoopAddTimer(loop, t2, CFSTR("A"));
    trace("A after adding t2: t2 %d", CFRunLoopGetNextTimerFireDate(loop, CFSTR("A")) == CFRunLoopTimerGetNextFireDate(t2));
    CFRunLoopTimerInvalidate(t2);
    trace("A after invalidating t2: t1 %d; default: %g", CFRunLoopGetNextTimerFireDate(loop, CFSTR("A")) == CFRunLoopTimerGetNextFireDate(t1),
          CFRunLoopGetNextTimerFireDate(loop, kCFRunLoopDefaultMode));
    CFRunLoopTimerInvalidate(t1);
    CFRelease(t1);
    CFRelease(t2);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
}
