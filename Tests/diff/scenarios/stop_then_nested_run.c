/* A block stops the loop, then a later block of the same pass nests a poll
 * (from the fuzzer's seed 41821). CF checks a stop only after the pass's
 * wait, and the nested poll took the wake-up the stop gave: the outer run
 * goes to sleep with its stop pending and here times out. CRunLoop ends the
 * stopped run after the pass (Stopped). Listed in known-differences.txt:
 * the scenario shows the difference, Tests/c/test_runloop.c tests ours. */
#include "diff.h"

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
    CFRunLoopSourceRef keep = trace_source("keep", 0, false);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);
    CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{
        trace("block: stop");
        CFRunLoopStop(CFRunLoopGetCurrent());
    });
    CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{
        trace("block: nested poll");
        run_mode("nested poll", kCFRunLoopDefaultMode, 0, false);
    });
    run_mode("outer run", kCFRunLoopDefaultMode, 0.3, false);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
