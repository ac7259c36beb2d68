/* Running "in" kCFRunLoopCommonModes (a pseudo-mode, never a mode one runs
 * in) returns Finished at once, whatever the common modes hold, and calls
 * no observer. */
#include "diff.h"

#include <fcntl.h>
#include <unistd.h>

/* CF logs a complaint (with a time stamp) on stderr the first time: kept
 * out of the trace; what counts is the result. */
static void run_quietly(const char *label, CFRunLoopMode mode, CFTimeInterval seconds, bool once) {
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0) dup2(null, 2);
    CFRunLoopRunResult r = CFRunLoopRunInMode(mode, seconds, once);
    fflush(stderr);
    if (saved >= 0) { dup2(saved, 2); close(saved); }
    if (null >= 0) close(null);
    trace("%s: %s", label, result_str(r));
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    run_quietly("nothing anywhere", kCFRunLoopCommonModes, 0.05, false);
    CFRunLoopSourceRef s = trace_source("src", 0, false);
    CFRunLoopAddSource(rl, s, kCFRunLoopCommonModes);
    CFRunLoopObserverRef o = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(rl, o, kCFRunLoopCommonModes);
    CFRunLoopSourceSignal(s);
    run_quietly("a signalled source in the common modes", kCFRunLoopCommonModes, 0.05, false);
    run_quietly("one pass", kCFRunLoopCommonModes, 0, true);
    run_mode("the default mode", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopObserverInvalidate(o);
    CFRelease(o);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
}
