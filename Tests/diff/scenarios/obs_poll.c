/* Observer activities of a poll (seconds = 0): nothing ready, a signalled
 * source, a signalled source with returnAfterSourceHandled. */
#include "diff.h"

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
    CFRunLoopSourceRef s = trace_source("src", 0, false);
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    trace("-- nothing ready");
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("-- signalled");
    CFRunLoopSourceSignal(s);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("-- signalled, returnAfterSourceHandled");
    CFRunLoopSourceSignal(s);
    run_mode("poll", kCFRunLoopDefaultMode, 0, true);
    trace("-- nothing ready, returnAfterSourceHandled");
    run_mode("poll", kCFRunLoopDefaultMode, 0, true);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
