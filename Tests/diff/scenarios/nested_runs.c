/* Nested runs: the same mode and another mode, from a source, a timer and
 * a block; what is visible inside (current mode, other mode's timers and
 * sources, the source being performed) and the observers of both runs. */
#include "diff.h"

static CFRunLoopRef loop;
static CFRunLoopSourceRef outer_src, other_src;
static int outer_performs;

static void outer_perform(void *info) {
    outer_performs++;
    trace("outer perform %d in %s", outer_performs, current_mode(loop));
    if (outer_performs > 1) return;
    trace("signal myself and other_src, nest in the same mode");
    CFRunLoopSourceSignal(outer_src);
    CFRunLoopSourceSignal(other_src);
    run_mode("nested default (returnAfterSourceHandled)", kCFRunLoopDefaultMode, 1, true);
    trace("current mode after nested run: %s", current_mode(loop));
    trace("nest in mode B");
    run_mode("nested B", CFSTR("B"), 0.1, false);
    trace("current mode after nested B: %s", current_mode(loop));
}

static void other_perform(void *info) { trace("other_src perform in %s", current_mode(loop)); }

static void default_timer(CFRunLoopTimerRef t, void *info) { trace("default-mode timer fired in %s", current_mode(loop)); }

static void b_timer(CFRunLoopTimerRef t, void *info) {
    trace("B timer fired in %s, nesting CFRunLoopRunInMode(default, 0)", current_mode(loop));
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("default block in %s", current_mode(loop)); });
    run_mode("nested default poll from a timer", kCFRunLoopDefaultMode, 0, false);
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    CFRunLoopObserverRef od = trace_observer("obs(default)", kCFRunLoopEntry | kCFRunLoopExit, 0);
    CFRunLoopObserverRef ob = trace_observer("obs(B)", kCFRunLoopEntry | kCFRunLoopExit, 0);
    CFRunLoopAddObserver(loop, od, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(loop, ob, CFSTR("B"));
    CFRunLoopSourceContext oc = {0};
    oc.perform = outer_perform;
    outer_src = CFRunLoopSourceCreate(NULL, 0, &oc);
    CFRunLoopSourceContext xc = {0};
    xc.perform = other_perform;
    other_src = CFRunLoopSourceCreate(NULL, 1, &xc);
    CFRunLoopAddSource(loop, outer_src, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(loop, other_src, kCFRunLoopDefaultMode);
    CFRunLoopTimerRef dt = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, default_timer, NULL);
    CFRunLoopTimerRef bt = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.02, 0, 0, 0, b_timer, NULL);
    CFRunLoopAddTimer(loop, bt, CFSTR("B"));
    trace("current mode outside any run: %s", current_mode(loop));

    trace("-- nested from a source perform");
    CFRunLoopSourceSignal(outer_src);
    run_mode("outer poll", kCFRunLoopDefaultMode, 0, false);
    trace("-- the default timer becomes due; outer run");
    CFRunLoopAddTimer(loop, dt, kCFRunLoopDefaultMode);
    run_mode("outer run", kCFRunLoopDefaultMode, 0.1, false);
    CFRunLoopTimerInvalidate(dt);
    CFRunLoopTimerInvalidate(bt);
    CFRelease(dt);
    CFRelease(bt);
    CFRunLoopSourceInvalidate(outer_src);
    CFRunLoopSourceInvalidate(other_src);
    CFRelease(outer_src);
    CFRelease(other_src);
    CFRunLoopObserverInvalidate(od);
    CFRunLoopObserverInvalidate(ob);
    CFRelease(od);
    CFRelease(ob);
}
