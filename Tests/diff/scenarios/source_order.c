/* Signalled sources are performed by ascending `order`, whatever the order
 * of signalling or adding; negative orders come first. */
#include "diff.h"

static CFRunLoopSourceRef s1, s200;

static void signal_others(void *info) {
    trace("order 10 perform, signals 1 and 200");
    CFRunLoopSourceSignal(s1);
    CFRunLoopSourceSignal(s200);
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceRef s5 = trace_source("order 5", 5, false);
    CFRunLoopSourceRef sm = trace_source("order -3", -3, false);
    CFRunLoopSourceRef s2 = trace_source("order 2", 2, false);
    CFRunLoopSourceRef s100 = trace_source("order 100", 100, false);
    CFRunLoopAddSource(rl, s2, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, s100, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, s5, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, sm, kCFRunLoopDefaultMode);
    trace("orders: %ld %ld %ld %ld", (long)CFRunLoopSourceGetOrder(s5), (long)CFRunLoopSourceGetOrder(sm),
          (long)CFRunLoopSourceGetOrder(s2), (long)CFRunLoopSourceGetOrder(s100));
    trace("-- signalled 100, 5, 2, -3");
    CFRunLoopSourceSignal(s100);
    CFRunLoopSourceSignal(s5);
    CFRunLoopSourceSignal(s2);
    CFRunLoopSourceSignal(sm);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("-- signalled -3, 2, 100");
    CFRunLoopSourceSignal(sm);
    CFRunLoopSourceSignal(s2);
    CFRunLoopSourceSignal(s100);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("-- signalled twice before one run: performed once");
    CFRunLoopSourceSignal(s5);
    CFRunLoopSourceSignal(s5);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("-- a perform signals a lower-order and a higher-order source");
    s1 = trace_source("order 1", 1, false);
    s200 = trace_source("order 200", 200, false);
    CFRunLoopAddSource(rl, s1, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, s200, kCFRunLoopDefaultMode);
    CFRunLoopSourceContext ctx = {0};
    ctx.perform = signal_others;
    CFRunLoopSourceRef s10 = CFRunLoopSourceCreate(NULL, 10, &ctx);
    CFRunLoopAddSource(rl, s10, kCFRunLoopDefaultMode);
    CFRunLoopSourceSignal(s10);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopSourceInvalidate(s10);
    CFRunLoopSourceInvalidate(s200);
    CFRunLoopSourceInvalidate(s1);
    CFRunLoopSourceInvalidate(s2);
    CFRunLoopSourceInvalidate(s5);
    CFRunLoopSourceInvalidate(sm);
    CFRunLoopSourceInvalidate(s100);
    CFRelease(s1); CFRelease(s2); CFRelease(s5); CFRelease(sm); CFRelease(s100); CFRelease(s10); CFRelease(s200);
}
