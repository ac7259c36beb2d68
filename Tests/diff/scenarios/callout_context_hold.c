/* What a callout may rely on about its context's info: CF retains a timer's
 * info (the context's retain callback) for the length of each callout and
 * releases it after, so a timer callout may invalidate and release its own
 * timer and still use info. Printed: how many references on info are held
 * inside each callout (timer, observer, source), and after the callout. */
#include "diff.h"


static CFRunLoopTimerRef own;

static void timer_cb(CFRunLoopTimerRef t, void *info) {
    trace("timer callout: info held %d", held_count);
    if (t == own) {
        CFRunLoopTimerInvalidate(t);
        CFRelease(t);
        own = NULL;
        trace("timer callout after invalidating and releasing itself: info held %d", held_count);
    }
}

static void observer_cb(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    trace("observer callout: info held %d", held_count);
}

static void perform_cb(void *info) { trace("source perform: info held %d", held_count); }

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();

    trace("-- repeating timer");
    held_count = 0;
    CFRunLoopTimerContext tc = {0, "t", held_retain, held_release, NULL};
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 1000, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held_count);
    CFRunLoopTimerInvalidate(t);
    CFRelease(t);
    trace("invalidated and released: info held %d", held_count);

    trace("-- one-shot timer");
    held_count = 0;
    t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held_count);
    CFRelease(t);

    trace("-- timer invalidating and releasing itself");
    held_count = 0;
    own = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 1000, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, own, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held_count);

    trace("-- observer");
    held_count = 0;
    CFRunLoopObserverContext oc = {0, "o", held_retain, held_release, NULL};
    CFRunLoopObserverRef o = CFRunLoopObserverCreate(NULL, kCFRunLoopEntry, true, 0, observer_cb, &oc);
    CFRunLoopAddObserver(rl, o, kCFRunLoopDefaultMode);
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held_count);
    CFRunLoopObserverInvalidate(o);
    CFRelease(o);

    trace("-- source");
    held_count = 0;
    CFRunLoopSourceContext sc = {0, "s", held_retain, held_release, NULL, NULL, NULL, NULL, NULL, perform_cb};
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &sc);
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("after the callout: info held %d", held_count);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
    trace("released: info held %d", held_count);
}
