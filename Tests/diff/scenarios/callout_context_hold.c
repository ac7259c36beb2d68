/* What a callout may rely on about its context's info: CF retains a timer's
 * info (the context's retain callback) for the length of each callout and
 * releases it after, so a timer callout may invalidate and release its own
 * timer and still use info. Printed: how many references on info are held
 * inside each callout (timer, observer, source), and after the callout. */
#include "diff.h"

static int held;
static const void *ctx_retain(const void *info) { held++; return info; }
static void ctx_release(const void *info) { held--; }

static CFRunLoopTimerRef own;

static void timer_cb(CFRunLoopTimerRef t, void *info) {
    trace("timer callout: info held %d", held);
    if (t == own) {
        CFRunLoopTimerInvalidate(t);
        CFRelease(t);
        own = NULL;
        trace("timer callout after invalidating and releasing itself: info held %d", held);
    }
}

static void observer_cb(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    trace("observer callout: info held %d", held);
}

static void perform_cb(void *info) { trace("source perform: info held %d", held); }

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();

    trace("-- repeating timer");
    held = 0;
    CFRunLoopTimerContext tc = {0, "t", ctx_retain, ctx_release, NULL};
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 1000, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held);
    CFRunLoopTimerInvalidate(t);
    CFRelease(t);
    trace("invalidated and released: info held %d", held);

    trace("-- one-shot timer");
    held = 0;
    t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held);
    CFRelease(t);

    trace("-- timer invalidating and releasing itself");
    held = 0;
    own = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 1000, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, own, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held);

    trace("-- observer");
    held = 0;
    CFRunLoopObserverContext oc = {0, "o", ctx_retain, ctx_release, NULL};
    CFRunLoopObserverRef o = CFRunLoopObserverCreate(NULL, kCFRunLoopEntry, true, 0, observer_cb, &oc);
    CFRunLoopAddObserver(rl, o, kCFRunLoopDefaultMode);
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held);
    CFRunLoopObserverInvalidate(o);
    CFRelease(o);

    trace("-- source");
    held = 0;
    CFRunLoopSourceContext sc = {0, "s", ctx_retain, ctx_release, NULL, NULL, NULL, NULL, NULL, perform_cb};
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &sc);
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
    trace("released: info held %d", held);
}
