/* CFRunLoopIsWaiting while asleep / running / idle, and CFRunLoopWakeUp:
 * a wake-up without work makes the loop go round and sleep again. */
#include "diff.h"

static CFRunLoopRef loop;
static sem_t asleep, done;

static void on_before_waiting(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) { sem_post(&asleep); }

static void waker(void *arg) {
    if (!sem_wait_s(&asleep)) return;
    trace("other thread sees waiting: %d", wait_until_waiting(loop));
    trace("-- wake-up 1");
    CFRunLoopWakeUp(loop);
    if (!sem_wait_s(&asleep)) return;
    wait_until_waiting(loop);
    trace("-- wake-up 2");
    CFRunLoopWakeUp(loop);
    if (!sem_wait_s(&asleep)) return;
    wait_until_waiting(loop);
    trace("-- stop");
    CFRunLoopStop(loop);
    sem_post(&done);
}

static void in_perform(void *info) { trace("IsWaiting inside a callout: %d", CFRunLoopIsWaiting(CFRunLoopGetCurrent())); }

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    sem_init(&asleep, 0, 0);
    sem_init(&done, 0, 0);
    trace("IsWaiting before any run: %d", CFRunLoopIsWaiting(loop));
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);
    CFRunLoopObserverRef hook = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting, true, 100, on_before_waiting, NULL);
    CFRunLoopAddObserver(loop, hook, kCFRunLoopDefaultMode);
    CFRunLoopSourceContext ctx = {0};
    ctx.perform = in_perform;
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &ctx);
    CFRunLoopAddSource(loop, s, kCFRunLoopDefaultMode);
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{
        trace("IsWaiting inside a block: %d", CFRunLoopIsWaiting(CFRunLoopGetCurrent()));
    });
    pthread_t t = spawn(waker, NULL);
    run_mode("run (returnAfterSourceHandled: wake-ups are not sources)", kCFRunLoopDefaultMode, 10, true);
    sem_wait_s(&done);
    join(t);
    trace("IsWaiting after the run: %d", CFRunLoopIsWaiting(loop));
    trace("-- wake-up before a poll");
    CFRunLoopWakeUp(loop);
    CFRunLoopRemoveObserver(loop, hook, kCFRunLoopDefaultMode);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);
    CFRelease(hook);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
