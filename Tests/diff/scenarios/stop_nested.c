/* Stop inside a nested run stops the innermost run only; the outer run
 * goes on. Nested in the same mode and in another mode. */
#include "diff.h"

static CFRunLoopSourceRef inner_src;
static int depth;

static void inner_perform(void *info) {
    trace("inner source perform at depth %d, stopping", depth);
    CFRunLoopStop(CFRunLoopGetCurrent());
}

static void outer_perform(void *info) {
    CFRunLoopMode mode = info ? CFSTR("inner") : kCFRunLoopDefaultMode;
    trace("outer perform: nesting in %s", mode_str(mode));
    depth++;
    CFRunLoopSourceSignal(inner_src);
    run_mode("nested run", mode, 10, false);
    trace("nested current mode after return: %s", current_mode(CFRunLoopGetCurrent()));
    depth--;
}

static void finish_timer(CFRunLoopTimerRef t, void *info) { trace("outer timer fired at depth %d", depth); }

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopEntry | kCFRunLoopExit, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopCommonModes);
    CFRunLoopAddObserver(rl, obs, CFSTR("inner"));
    CFRunLoopSourceContext ictx = {0};
    ictx.perform = inner_perform;
    inner_src = CFRunLoopSourceCreate(NULL, 0, &ictx);

    for (int variant = 0; variant < 2; variant++) {
        CFRunLoopMode nested = variant ? CFSTR("inner") : kCFRunLoopDefaultMode;
        trace("-- nested in %s", mode_str(nested));
        CFRunLoopAddSource(rl, inner_src, nested);
        CFRunLoopSourceContext octx = {0};
        octx.info = variant ? (void *)1 : NULL;
        octx.perform = outer_perform;
        CFRunLoopSourceRef outer = CFRunLoopSourceCreate(NULL, 10, &octx);
        CFRunLoopAddSource(rl, outer, kCFRunLoopDefaultMode);
        CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.1, 0, 0, 0, finish_timer, NULL);
        CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
        CFRunLoopSourceSignal(outer);
        run_mode("outer run (returnAfterSourceHandled)", kCFRunLoopDefaultMode, 10, true);
        CFRunLoopSourceSignal(outer);
        run_mode("outer run", kCFRunLoopDefaultMode, 0.5, false);
        trace("timer valid: %d", CFRunLoopTimerIsValid(t));
        CFRunLoopTimerInvalidate(t);
        CFRelease(t);
        CFRunLoopSourceInvalidate(outer);
        CFRelease(outer);
        CFRunLoopRemoveSource(rl, inner_src, nested);
    }
    CFRelease(inner_src);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
