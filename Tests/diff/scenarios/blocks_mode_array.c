/* CFRunLoopPerformBlock with an array of modes: the block is queued once
 * and runs once, in the first of its modes that runs (a named mode, the
 * default mode, or any common mode when the array holds the common-modes
 * name); duplicates do not make it run twice; FIFO with one-mode blocks. */
#include "diff.h"

static CFArrayRef modes_of(const void **names, CFIndex n) {
    return CFArrayCreate(NULL, names, n, &kCFTypeArrayCallBacks);
}

void scenario(void) {
    CFRunLoopRef loop = CFRunLoopGetCurrent();
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(loop, keep, kCFRunLoopCommonModes);
    CFRunLoopAddSource(loop, keep, CFSTR("A"));
    CFRunLoopAddSource(loop, keep, CFSTR("B"));
    CFRunLoopAddSource(loop, keep, CFSTR("C"));

    trace("-- two named modes: runs once, in the first that runs");
    CFArrayRef ab = modes_of((const void *[]){CFSTR("A"), CFSTR("B")}, 2);
    trace("array count: %ld", (long)CFArrayGetCount(ab));
    CFRunLoopPerformBlock(loop, ab, ^{ trace("AB block in %s", current_mode(CFRunLoopGetCurrent())); });
    run_mode("C poll", CFSTR("C"), 0, false);
    run_mode("B poll", CFSTR("B"), 0, false);
    run_mode("A poll", CFSTR("A"), 0, false);
    run_mode("B poll", CFSTR("B"), 0, false);

    trace("-- FIFO with one-mode blocks");
    CFRunLoopPerformBlock(loop, CFSTR("B"), ^{ trace("B block 1"); });
    CFRunLoopPerformBlock(loop, ab, ^{ trace("AB block 2"); });
    CFRunLoopPerformBlock(loop, CFSTR("A"), ^{ trace("A block 3"); });
    CFRunLoopPerformBlock(loop, ab, ^{ trace("AB block 4"); });
    run_mode("A poll", CFSTR("A"), 0, false);
    run_mode("B poll", CFSTR("B"), 0, false);

    trace("-- default and common in the array, with duplicates");
    CFArrayRef dc = modes_of((const void *[]){CFSTR("A"), kCFRunLoopDefaultMode, CFSTR("A")}, 3);
    CFRunLoopPerformBlock(loop, dc, ^{ trace("A+default block in %s", current_mode(CFRunLoopGetCurrent())); });
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);
    run_mode("A poll", CFSTR("A"), 0, false);
    CFArrayRef cc = modes_of((const void *[]){CFSTR("C"), kCFRunLoopCommonModes}, 2);
    CFRunLoopPerformBlock(loop, cc, ^{ trace("C+common block in %s", current_mode(CFRunLoopGetCurrent())); });
    run_mode("B poll (B not common)", CFSTR("B"), 0, false);
    CFRunLoopAddCommonMode(loop, CFSTR("B"));
    run_mode("B poll (B common)", CFSTR("B"), 0, false);
    run_mode("C poll", CFSTR("C"), 0, false);
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);

    trace("-- a mode with only an array block in it");
    CFArrayRef only = modes_of((const void *[]){CFSTR("onlyblock")}, 1);
    CFRunLoopPerformBlock(loop, only, ^{ trace("onlyblock block"); });
    run_mode("onlyblock run", CFSTR("onlyblock"), 0.1, false);
    run_mode("onlyblock run again", CFSTR("onlyblock"), 0.1, false);

    CFRelease(ab);
    CFRelease(dc);
    CFRelease(cc);
    CFRelease(only);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
}
