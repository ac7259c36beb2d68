/* CFRunLoopPerformBlock: blocks for other modes stay queued, in order,
 * ahead of later ones; a nested run from a block sees only the blocks
 * queued since the outer pass took its list, and what each level leaves
 * queued comes back oldest first. Also thousands of blocks in several
 * modes at once (our queue stores them in chunks of a few hundred). */
#include "diff.h"

static CFRunLoopRef loop;

/* Per-mode order check for the many-blocks part: block i of mode m must
 * run after block i-1 of m. */
enum { NMODES = 4, PER_MODE = 1500 };
static int next_of[NMODES], out_of_order[NMODES];

static CFRunLoopMode many_mode(int m) {
    switch (m) {
    case 0: return kCFRunLoopDefaultMode;
    case 1: return kCFRunLoopCommonModes;
    case 2: return CFSTR("M2");
    default: return CFSTR("M3");
    }
}

static void many_ran(int m, int i) {
    if (next_of[m] != i) out_of_order[m]++;
    next_of[m] = i + 1;
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(loop, keep, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(loop, keep, CFSTR("X"));
    CFRunLoopAddSource(loop, keep, CFSTR("Y"));
    CFRunLoopAddSource(loop, keep, CFSTR("Z"));

    trace("-- kept blocks stay ahead of later ones");
    CFRunLoopPerformBlock(loop, CFSTR("X"), ^{ trace("x1"); });
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("d1"); });
    CFRunLoopPerformBlock(loop, CFSTR("X"), ^{ trace("x2"); });
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopPerformBlock(loop, CFSTR("X"), ^{ trace("x3"); });
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("d2"); });
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);
    run_mode("X poll", CFSTR("X"), 0, false);

    trace("-- a nested run from a block");
    CFRunLoopPerformBlock(loop, CFSTR("Y"), ^{ trace("y1"); });
    CFRunLoopPerformBlock(loop, CFSTR("X"), ^{
        trace("x-outer: queues z1 and y2, runs Y");
        CFRunLoopPerformBlock(loop, CFSTR("Z"), ^{ trace("z1"); });
        CFRunLoopPerformBlock(loop, CFSTR("Y"), ^{ trace("y2"); });
        run_mode("nested Y poll", CFSTR("Y"), 0, false);
        CFRunLoopPerformBlock(loop, CFSTR("Y"), ^{ trace("y4"); });
    });
    CFRunLoopPerformBlock(loop, CFSTR("Y"), ^{ trace("y3"); });
    run_mode("X poll", CFSTR("X"), 0, false);
    run_mode("Y poll", CFSTR("Y"), 0, false);
    run_mode("Z poll", CFSTR("Z"), 0, false);
    run_mode("Y poll again", CFSTR("Y"), 0, false);

    trace("-- a nested run in the same mode");
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{
        trace("outer");
        CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("queued inside"); });
        run_mode("nested default poll", kCFRunLoopDefaultMode, 0, false);
    });
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("after outer"); });
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);

    trace("-- %d blocks in 4 modes, interleaved", NMODES * PER_MODE);
    for (int i = 0; i < PER_MODE; i++)
        for (int m = 0; m < NMODES; m++) CFRunLoopPerformBlock(loop, many_mode(m), ^{ many_ran(m, i); });
    run_mode("M3 poll", CFSTR("M3"), 0, false);
    trace("M3 ran %d, out of order %d; default ran %d", next_of[3], out_of_order[3], next_of[0]);
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);
    trace("default ran %d, common ran %d, out of order %d %d", next_of[0], next_of[1], out_of_order[0],
          out_of_order[1]);
    CFRunLoopAddCommonMode(loop, CFSTR("M2"));
    run_mode("M2 poll (now common)", CFSTR("M2"), 0, false);
    trace("M2 ran %d, out of order %d", next_of[2], out_of_order[2]);

    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
}
