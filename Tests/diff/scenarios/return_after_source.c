/* returnAfterSourceHandled: one source per run when true, all of them when
 * false; blocks and timers do not count as handled sources. */
#include "diff.h"

static void fired(CFRunLoopTimerRef t, void *info) { trace("timer fired"); }

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef a = trace_source("a", 1, false);
    CFRunLoopSourceRef b = trace_source("b", 2, false);
    CFRunLoopSourceRef c = trace_source("c", 3, false);
    CFRunLoopAddSource(rl, a, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, b, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, c, kCFRunLoopDefaultMode);

    trace("-- three signalled, returnAfterSourceHandled");
    CFRunLoopSourceSignal(a);
    CFRunLoopSourceSignal(b);
    CFRunLoopSourceSignal(c);
    run_mode("run 1", kCFRunLoopDefaultMode, 1, true);
    run_mode("run 2", kCFRunLoopDefaultMode, 1, true);
    run_mode("run 3", kCFRunLoopDefaultMode, 1, true);
    run_mode("run 4", kCFRunLoopDefaultMode, 0.05, true);

    trace("-- three signalled, not returning after a source");
    CFRunLoopSourceSignal(c);
    CFRunLoopSourceSignal(b);
    CFRunLoopSourceSignal(a);
    run_mode("run", kCFRunLoopDefaultMode, 0.05, false);

    trace("-- a block only, returnAfterSourceHandled");
    CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{ trace("block"); });
    run_mode("run", kCFRunLoopDefaultMode, 0.05, true);

    trace("-- a due timer only, returnAfterSourceHandled");
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, fired, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0.2, true);
    CFRelease(t);

    trace("-- a signalled source inside a block, returnAfterSourceHandled");
    CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{ trace("block signals b"); CFRunLoopSourceSignal(b); });
    run_mode("run", kCFRunLoopDefaultMode, 1, true);

    CFRunLoopSourceInvalidate(a);
    CFRunLoopSourceInvalidate(b);
    CFRunLoopSourceInvalidate(c);
    CFRelease(a);
    CFRelease(b);
    CFRelease(c);
}
