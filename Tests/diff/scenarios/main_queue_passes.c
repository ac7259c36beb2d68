/* Where in a pass the main dispatch queue is served: a block queued by a
 * timer callout is served at the start of the next pass, without waiting
 * (no BeforeWaiting/AfterWaiting), as CF checks the queue before it waits
 * when the pass before did not serve it; a block queued by a block (the
 * pass before served the queue) is served after the wait. Runs on the main
 * thread. */
#include "diff.h"

#include <dispatch/dispatch.h>

const bool diff_on_main_thread = true;

static void queue_stop(const char *name) {
    dispatch_async(dispatch_get_main_queue(), ^{
      trace("block %s", name);
      CFRunLoopStop(CFRunLoopGetCurrent());
    });
}

static void timer_queues(CFRunLoopTimerRef t, void *info) {
    trace("timer");
    queue_stop("from-timer");
}

static void source_queues(void *info) {
    trace("source");
    queue_stop("from-source");
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(rl, obs, kCFRunLoopDefaultMode);
    trace("-- a block queued by a timer callout");
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, timer_queues, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 5, false);
    CFRelease(t);
    trace("-- a block queued by a source");
    CFRunLoopSourceContext c = {0};
    c.perform = source_queues;
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &c);
    CFRunLoopAddSource(rl, s, kCFRunLoopDefaultMode);
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, 5, false);
    trace("-- the same, returnAfterSourceHandled");
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    run_mode("run", kCFRunLoopDefaultMode, 5, true);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
    trace("-- a block queued by a block");
    dispatch_async(dispatch_get_main_queue(), ^{
      trace("block outer");
      queue_stop("inner");
    });
    run_mode("run", kCFRunLoopDefaultMode, 5, false);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
