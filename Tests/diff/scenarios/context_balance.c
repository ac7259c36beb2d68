/* The context retain/release callbacks of sources, timers and observers:
 * counts after create, add, remove, invalidate, GetContext and release. */
#include "diff.h"

static int retains, releases;
static const void *ctx_retain(const void *info) { retains++; return info; }
static void ctx_release(const void *info) { releases++; }
static void perform_cb(void *info) {}
static void timer_cb(CFRunLoopTimerRef t, void *info) { trace("timer fired"); }
static void observer_cb(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {}

/* Only what is still held matters (how many retains CF takes around a
 * callout is its own business): "held" is retains minus releases. */
#define COUNTS(what) trace("%-34s info held %d", what, retains - releases)

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    trace("-- source");
    CFRunLoopSourceContext sc = {0, "s", ctx_retain, ctx_release, NULL, NULL, NULL, NULL, NULL, perform_cb};
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &sc);
    COUNTS("created");
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, s, CFSTR("A"));
    COUNTS("added to two modes");
    CFRunLoopSourceContext got = {0};
    CFRunLoopSourceGetContext(s, &got);
    COUNTS("GetContext");
    trace("GetContext: info %d, perform %d", got.info == sc.info, got.perform == perform_cb);
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    COUNTS("performed");
    CFRunLoopRemoveSource(rl, s, CFSTR("A"));
    COUNTS("removed from A");
    CFRunLoopSourceInvalidate(s);
    COUNTS("invalidated");
    CFRelease(s);
    COUNTS("released");

    trace("-- timer");
    retains = releases = 0;
    CFRunLoopTimerContext tc = {0, "t", ctx_retain, ctx_release, NULL};
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, timer_cb, &tc);
    COUNTS("created");
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    COUNTS("added");
    CFRunLoopTimerContext tgot = {0};
    CFRunLoopTimerGetContext(t, &tgot);
    COUNTS("GetContext");
    trace("GetContext: info %d", tgot.info == tc.info);
    run_mode("run", kCFRunLoopDefaultMode, 1, false);
    COUNTS("fired (one-shot, invalidated)");
    CFRelease(t);
    COUNTS("released");

    trace("-- timer released while scheduled, then invalidated");
    retains = releases = 0;
    t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    CFRelease(t);
    COUNTS("released while in the loop");
    CFRunLoopTimerInvalidate(t);
    COUNTS("invalidated");

    trace("-- observer");
    retains = releases = 0;
    CFRunLoopObserverContext oc = {0, "o", ctx_retain, ctx_release, NULL};
    CFRunLoopObserverRef o = CFRunLoopObserverCreate(NULL, kCFRunLoopAllActivities, false, 0, observer_cb, &oc);
    COUNTS("created");
    CFRunLoopAddObserver(rl, o, kCFRunLoopDefaultMode);
    COUNTS("added");
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    COUNTS("one-shot observer called");
    trace("observer valid: %d", CFRunLoopObserverIsValid(o));
    CFRelease(o);
    COUNTS("released");
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);

    trace("-- NULL retain/release callbacks");
    CFRunLoopSourceContext nc = {0, "n", NULL, NULL, NULL, NULL, NULL, NULL, NULL, perform_cb};
    CFRunLoopSourceRef n = CFRunLoopSourceCreate(NULL, 0, &nc);
    CFRelease(n);
    trace("no crash");
}
