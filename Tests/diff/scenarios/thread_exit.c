/* When a thread exits, its run loop is torn down: each source still
 * scheduled is cancelled (on the exiting thread) and released; timers and
 * observers are released too. */
#include "diff.h"

static pthread_t worker_id;
static int retains, releases;

static const void *ctx_retain(const void *info) { retains++; return info; }
static void ctx_release(const void *info) { releases++; trace("release callback (%s)", (const char *)info); }

static void cancel_cb(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    trace("cancel %s in %s, on the exiting thread: %d", (const char *)info, mode_str(mode),
          pthread_equal(pthread_self(), worker_id));
}
static void schedule_cb(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    trace("schedule %s in %s", (const char *)info, mode_str(mode));
}
static void perform_cb(void *info) { trace("perform %s", (const char *)info); }
static void timer_cb(CFRunLoopTimerRef t, void *info) {}
static void observer_cb(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {}

static CFRunLoopSourceRef kept;

static void worker(void *arg) {
    worker_id = pthread_self();
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceContext c1 = {0, "owned", ctx_retain, ctx_release, NULL, NULL, NULL, schedule_cb, cancel_cb, perform_cb};
    CFRunLoopSourceRef s1 = CFRunLoopSourceCreate(NULL, 0, &c1);
    CFRunLoopSourceContext c2 = {0, "kept", ctx_retain, ctx_release, NULL, NULL, NULL, schedule_cb, cancel_cb, perform_cb};
    kept = CFRunLoopSourceCreate(NULL, 0, &c2);
    CFRunLoopAddSource(rl, s1, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, kept, CFSTR("A"));
    CFRunLoopTimerContext tc = {0, "timer", ctx_retain, ctx_release, NULL};
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, timer_cb, &tc);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    CFRunLoopObserverContext oc = {0, "observer", ctx_retain, ctx_release, NULL};
    CFRunLoopObserverRef o = CFRunLoopObserverCreate(NULL, kCFRunLoopAllActivities, true, 0, observer_cb, &oc);
    CFRunLoopAddObserver(rl, o, kCFRunLoopDefaultMode);
    CFRunLoopSourceSignal(s1);
    run_mode("worker run", kCFRunLoopDefaultMode, 0, false);
    CFRelease(s1);
    CFRelease(t);
    CFRelease(o);
    trace("worker exits; retains %d releases %d", retains, releases);
    collect_begin();
}

void scenario(void) {
    join(spawn(worker, NULL));
    collect_end();
    trace("joined; retains %d releases %d", retains, releases);
    trace("kept source valid: %d", CFRunLoopSourceIsValid(kept));
    CFRelease(kept);
    trace("after releasing kept: retains %d releases %d", retains, releases);
}
