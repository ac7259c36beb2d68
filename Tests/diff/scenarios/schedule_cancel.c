/* The schedule and cancel callbacks: once per mode added/removed, with the
 * mode's name; adding twice; removing from a mode it is not in; common
 * modes; invalidation while scheduled in several modes. */
#include "diff.h"

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef s = trace_source("src", 0, true);
    trace("-- add default");
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    trace("-- add default again");
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    trace("-- add A");
    CFRunLoopAddSource(rl, s, CFSTR("A"));
    trace("contains: default %d, A %d, B %d", CFRunLoopContainsSource(rl, s, kCFRunLoopDefaultMode),
          CFRunLoopContainsSource(rl, s, CFSTR("A")), CFRunLoopContainsSource(rl, s, CFSTR("B")));
    trace("-- remove from B (not in it)");
    CFRunLoopRemoveSource(rl, s, CFSTR("B"));
    trace("-- remove from A");
    CFRunLoopRemoveSource(rl, s, CFSTR("A"));
    trace("-- remove from A again");
    CFRunLoopRemoveSource(rl, s, CFSTR("A"));
    trace("-- remove from default");
    CFRunLoopRemoveSource(rl, s, kCFRunLoopDefaultMode);
    trace("valid: %d", CFRunLoopSourceIsValid(s));
    trace("-- add to common modes (default is common)");
    CFRunLoopAddSource(rl, s, kCFRunLoopCommonModes);
    trace("contains: default %d, common %d", CFRunLoopContainsSource(rl, s, kCFRunLoopDefaultMode),
          CFRunLoopContainsSource(rl, s, kCFRunLoopCommonModes));
    trace("-- remove from default only");
    CFRunLoopRemoveSource(rl, s, kCFRunLoopDefaultMode);
    trace("contains: default %d, common %d", CFRunLoopContainsSource(rl, s, kCFRunLoopDefaultMode),
          CFRunLoopContainsSource(rl, s, kCFRunLoopCommonModes));
    trace("-- remove from common modes");
    CFRunLoopRemoveSource(rl, s, kCFRunLoopCommonModes);
    trace("-- add B, then invalidate");
    CFRunLoopAddSource(rl, s, CFSTR("B"));
    CFRunLoopSourceInvalidate(s);
    trace("valid: %d, contains B: %d", CFRunLoopSourceIsValid(s), CFRunLoopContainsSource(rl, s, CFSTR("B")));
    trace("-- add after invalidate");
    CFRunLoopAddSource(rl, s, CFSTR("B"));
    trace("contains B: %d", CFRunLoopContainsSource(rl, s, CFSTR("B")));
    trace("-- invalidate again");
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);

    trace("-- a second source: schedule happens on the adding thread, synchronously");
    CFRunLoopSourceRef s2 = trace_source("src2", 0, true);
    CFRunLoopAddSource(rl, s2, CFSTR("C"));
    trace("added");
    trace("modes: %s", all_modes(rl));
    CFRelease(s2);
    trace("-- released while scheduled: nothing yet");
    CFRunLoopRemoveSource(rl, s2, CFSTR("C"));
    trace("removed");
}
