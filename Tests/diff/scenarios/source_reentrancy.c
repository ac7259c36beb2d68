/* Sources changed from inside a perform: invalidating itself, removing or
 * invalidating a signalled source that has not been performed yet, adding
 * and signalling a new source, signalling itself again. */
#include "diff.h"

static CFRunLoopRef loop;
static CFRunLoopSourceRef first, second, third, fresh;
static int first_runs;

static void first_perform(void *info) {
    first_runs++;
    trace("first perform %d", first_runs);
    if (first_runs == 1) {
        trace("first: invalidates second, removes third, adds+signals fresh, signals itself");
        CFRunLoopSourceInvalidate(second);
        CFRunLoopRemoveSource(loop, third, kCFRunLoopDefaultMode);
        CFRunLoopAddSource(loop, fresh, kCFRunLoopDefaultMode);
        CFRunLoopSourceSignal(fresh);
        CFRunLoopSourceSignal(first);
    } else if (first_runs == 2) {
        trace("first: invalidates itself");
        CFRunLoopSourceInvalidate(first);
        trace("first valid: %d", CFRunLoopSourceIsValid(first));
    }
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    CFRunLoopSourceContext c = {0};
    c.perform = first_perform;
    first = CFRunLoopSourceCreate(NULL, 0, &c);
    second = trace_source("second", 1, true);
    third = trace_source("third", 2, true);
    fresh = trace_source("fresh", -1, true);
    CFRunLoopAddSource(loop, first, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(loop, second, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(loop, third, kCFRunLoopDefaultMode);
    CFRunLoopSourceSignal(first);
    CFRunLoopSourceSignal(second);
    CFRunLoopSourceSignal(third);
    run_mode("poll 1", kCFRunLoopDefaultMode, 0, false);
    run_mode("poll 2", kCFRunLoopDefaultMode, 0, false);
    trace("third re-added: its signal is still pending");
    CFRunLoopAddSource(loop, third, kCFRunLoopDefaultMode);
    run_mode("poll 3", kCFRunLoopDefaultMode, 0, false);
    run_mode("run 4", kCFRunLoopDefaultMode, 0.05, false);
    CFRunLoopSourceInvalidate(third);
    CFRunLoopSourceInvalidate(fresh);
    run_mode("run 5 (nothing left)", kCFRunLoopDefaultMode, 0.05, false);
    CFRelease(first); CFRelease(second); CFRelease(third); CFRelease(fresh);
}
