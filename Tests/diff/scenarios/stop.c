/* CFRunLoopStop: from a source callout, a timer callout, a block, another
 * thread while the loop sleeps, and before the run starts. */
#include "diff.h"

static CFRunLoopRef loop;
static sem_t asleep;

static void stop_perform(void *info) {
    trace("perform, stopping");
    CFRunLoopStop(CFRunLoopGetCurrent());
    trace("after stop, still in perform");
}

static void stop_timer(CFRunLoopTimerRef t, void *info) {
    trace("timer, stopping");
    CFRunLoopStop(CFRunLoopGetCurrent());
}

static void on_before_waiting(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) { sem_post(&asleep); }

static void stopper(void *arg) {
    if (!sem_wait_s(&asleep)) return;
    wait_until_waiting(loop);
    CFRunLoopStop(loop);
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    sem_init(&asleep, 0, 0);
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopEntry | kCFRunLoopExit, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);
    CFRunLoopSourceContext ctx = {0};
    ctx.perform = stop_perform;
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &ctx);
    CFRunLoopAddSource(loop, s, kCFRunLoopDefaultMode);

    trace("-- from a source perform, CFRunLoopRun");
    CFRunLoopSourceSignal(s);
    CFRunLoopRun();
    trace("CFRunLoopRun returned");

    trace("-- from a source perform, RunInMode returnAfterSourceHandled");
    CFRunLoopSourceSignal(s);
    run_mode("run", kCFRunLoopDefaultMode, 10, true);

    trace("-- from a timer callout");
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.02, 0, 0, 0, stop_timer, NULL);
    CFRunLoopAddTimer(loop, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    CFRelease(t);

    trace("-- from a block");
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{
        trace("block, stopping");
        CFRunLoopStop(CFRunLoopGetCurrent());
    });
    run_mode("run", kCFRunLoopDefaultMode, 10, false);

    trace("-- from another thread while asleep");
    CFRunLoopObserverRef hook = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting, false, 0, on_before_waiting, NULL);
    CFRunLoopAddObserver(loop, hook, kCFRunLoopDefaultMode);
    pthread_t th = spawn(stopper, NULL);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    join(th);
    trace("one-shot hook still valid: %d", CFRunLoopObserverIsValid(hook));
    CFRelease(hook);

    trace("-- before the run");
    CFRunLoopStop(loop);
    run_mode("run", kCFRunLoopDefaultMode, 0.05, false);
    run_mode("next run", kCFRunLoopDefaultMode, 0.05, false);

    trace("-- twice in one callout, then a new run");
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{
        CFRunLoopStop(CFRunLoopGetCurrent());
        CFRunLoopStop(CFRunLoopGetCurrent());
    });
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    run_mode("next run", kCFRunLoopDefaultMode, 0.05, false);

    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
