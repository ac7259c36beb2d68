/* The main dispatch queue on the main thread's loop: served in the default
 * and the common modes (a handled source), all blocks pending at a serve in
 * one pass, a block queued by a block in the next pass, not in a private
 * mode, not in a run nested in a main-queue block but in one nested in a
 * timer callout; a block from another thread wakes the loop; the default
 * mode is never empty. Runs on the main thread. */
#include "diff.h"

#include <dispatch/dispatch.h>

const bool diff_on_main_thread = true;

static void queue(const char *name) {
    dispatch_async(dispatch_get_main_queue(), ^{
      trace("block %s", name);
    });
}

static void nested_in_timer(CFRunLoopTimerRef t, void *info) {
    trace("timer");
    queue("in-timer");
    run_mode("nested in timer", kCFRunLoopDefaultMode, 5, true);
}

static void queue_when_waiting(void *rl) {
    if (wait_until_waiting(rl))
        queue("from-thread");
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    trace("main loop: %s", rl == CFRunLoopGetMain() ? "yes" : "no");
    trace("-- nothing queued: the default mode is not empty");
    run_mode("run", kCFRunLoopDefaultMode, 0.01, false);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);

    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
    trace("-- three blocks, returnAfterSourceHandled");
    queue("1");
    queue("2");
    queue("3");
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    trace("-- polls");
    queue("p1");
    run_mode("poll", kCFRunLoopDefaultMode, 0, true);
    queue("p2");
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("-- a block queued by a block");
    dispatch_async(dispatch_get_main_queue(), ^{
      trace("block outer");
      queue("inner");
    });
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    trace("-- a run nested in a block");
    dispatch_async(dispatch_get_main_queue(), ^{
      trace("block nesting");
      queue("queued-in-block");
      run_mode("nested in block", kCFRunLoopDefaultMode, 0.01, false);
    });
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    trace("-- a run nested in a timer callout");
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, nested_in_timer, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    CFRelease(t);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);

    trace("-- a private mode");
    CFRunLoopSourceRef keep = trace_source("keep", 0, false);
    CFRunLoopAddSource(rl, keep, CFSTR("Private"));
    queue("private");
    run_mode("poll private", CFSTR("Private"), 0, true);
    run_mode("run private", CFSTR("Private"), 0.05, true);
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    trace("-- a common mode");
    CFRunLoopAddCommonMode(rl, CFSTR("Common2"));
    CFRunLoopAddSource(rl, keep, CFSTR("Common2"));
    queue("common");
    run_mode("run common", CFSTR("Common2"), 5, true);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
    trace("-- a block from another thread wakes the loop");
    pthread_t th = spawn(queue_when_waiting, rl);
    run_mode("run", kCFRunLoopDefaultMode, 30, true);
    join(th);
}
