/* Timers changed from another thread while the loop sleeps: a timer added,
 * a timer moved earlier. The sleeping loop must wake for them. */
#include "diff.h"

static CFRunLoopRef loop;
static sem_t asleep;
static CFRunLoopTimerRef moved;

static void on_before_waiting(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) { sem_post(&asleep); }

static void fired(CFRunLoopTimerRef t, void *info) {
    trace("%s fired", (const char *)info);
    CFRunLoopStop(CFRunLoopGetCurrent());
}

static void adder(void *arg) {
    if (!sem_wait_s(&asleep)) return;
    wait_until_waiting(loop);
    trace("other thread adds a timer due in 50 ms");
    CFRunLoopTimerContext ctx = {0, "added timer", NULL, NULL, NULL};
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.05, 0, 0, 0, fired, &ctx);
    CFRunLoopAddTimer(loop, t, kCFRunLoopDefaultMode);
    CFRelease(t);
}

static void mover(void *arg) {
    if (!sem_wait_s(&asleep)) return;
    wait_until_waiting(loop);
    trace("other thread moves the timer from 1000 s to 50 ms ahead");
    CFRunLoopTimerSetNextFireDate(moved, CFAbsoluteTimeGetCurrent() + 0.05);
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    sem_init(&asleep, 0, 0);
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(loop, keep, kCFRunLoopDefaultMode);
    CFRunLoopObserverRef hook = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting, true, 0, on_before_waiting, NULL);
    CFRunLoopAddObserver(loop, hook, kCFRunLoopDefaultMode);

    trace("-- timer added from another thread");
    pthread_t t = spawn(adder, NULL);
    run_mode("run (10 s limit)", kCFRunLoopDefaultMode, 10, false);
    join(t);

    trace("-- timer moved earlier from another thread");
    CFRunLoopTimerContext ctx = {0, "moved timer", NULL, NULL, NULL};
    moved = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, fired, &ctx);
    CFRunLoopAddTimer(loop, moved, kCFRunLoopDefaultMode);
    while (sem_trywait(&asleep) == 0) {
    }
    t = spawn(mover, NULL);
    run_mode("run (10 s limit)", kCFRunLoopDefaultMode, 10, false);
    join(t);
    CFRelease(moved);
    CFRunLoopObserverInvalidate(hook);
    CFRelease(hook);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
}
