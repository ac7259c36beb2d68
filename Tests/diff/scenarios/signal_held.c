/* A signal is kept until the loop runs in a mode containing the source;
 * removing and re-adding; signal before adding. */
#include "diff.h"

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);
    CFRunLoopSourceRef s = trace_source("src", 0, false);
    CFRunLoopAddSource(rl, s, CFSTR("A"));
    trace("-- signalled; running default");
    CFRunLoopSourceSignal(s);
    run_mode("default", kCFRunLoopDefaultMode, 0.05, false);
    run_mode("default", kCFRunLoopDefaultMode, 0, false);
    trace("-- running A");
    run_mode("A", CFSTR("A"), 0.05, true);
    run_mode("A again", CFSTR("A"), 0.05, true);
    trace("-- signal, remove from A, add to B, run B");
    CFRunLoopSourceSignal(s);
    CFRunLoopRemoveSource(rl, s, CFSTR("A"));
    CFRunLoopAddSource(rl, s, CFSTR("B"));
    run_mode("B", CFSTR("B"), 0.05, true);
    trace("-- signal before it is added anywhere");
    CFRunLoopSourceRef t = trace_source("late", 0, false);
    CFRunLoopSourceSignal(t);
    CFRunLoopAddSource(rl, t, CFSTR("C"));
    run_mode("C", CFSTR("C"), 0.05, true);
    trace("-- signal, invalidate, re-run");
    CFRunLoopSourceSignal(s);
    CFRunLoopSourceInvalidate(s);
    run_mode("B", CFSTR("B"), 0.05, true);
    CFRunLoopSourceInvalidate(t);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(s);
    CFRelease(t);
    CFRelease(keep);
}
