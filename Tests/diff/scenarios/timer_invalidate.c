/* Invalidating a timer: from its own callout, from another timer's
 * callout before it fires, and from another thread while the loop sleeps. */
#include "diff.h"

static int fires;
static CFRunLoopTimerRef victim;
static CFRunLoopRef loop;
static sem_t asleep;

static void self_invalidate(CFRunLoopTimerRef t, void *info) {
    fires++;
    trace("repeating timer fire %d, invalidating itself", fires);
    CFRunLoopTimerInvalidate(t);
    trace("valid after invalidate: %d", CFRunLoopTimerIsValid(t));
}

static void victim_fired(CFRunLoopTimerRef t, void *info) { trace("victim fired (must not happen)"); }

static void killer(CFRunLoopTimerRef t, void *info) {
    trace("killer fired, invalidating the victim");
    CFRunLoopTimerInvalidate(victim);
}

static void on_before_waiting(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) { sem_post(&asleep); }

static void other_thread(void *arg) {
    if (!sem_wait_s(&asleep)) return;
    wait_until_waiting(loop);
    trace("other thread invalidates the timer");
    CFRunLoopTimerInvalidate(victim);
    trace("valid: %d", CFRunLoopTimerIsValid(victim));
    sleep_s(0.1);
    trace("other thread wakes the loop");
    CFRunLoopWakeUp(loop);
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    sem_init(&asleep, 0, 0);
    trace("-- from its own callout");
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.01, 0.01, 0, 0, self_invalidate, NULL);
    CFRunLoopAddTimer(loop, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 5, false);
    trace("fires: %d", fires);
    CFRelease(t);

    trace("-- from another timer's callout, both due");
    CFAbsoluteTime now = CFAbsoluteTimeGetCurrent();
    CFRunLoopTimerRef k = CFRunLoopTimerCreate(NULL, now + 0.01, 0, 0, 0, killer, NULL);
    victim = CFRunLoopTimerCreate(NULL, now + 0.02, 0, 0, 0, victim_fired, NULL);
    CFRunLoopAddTimer(loop, k, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(loop, victim, kCFRunLoopDefaultMode);
    sleep_s(0.05);
    run_mode("run", kCFRunLoopDefaultMode, 5, false);
    CFRelease(k);
    CFRelease(victim);

    trace("-- from another thread while the loop sleeps on it");
    victim = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 5, 0, 0, 0, victim_fired, NULL);
    CFRunLoopAddTimer(loop, victim, kCFRunLoopDefaultMode);
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopBeforeWaiting | kCFRunLoopAfterWaiting | kCFRunLoopExit, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);
    CFRunLoopObserverRef hook = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting, false, 100, on_before_waiting, NULL);
    CFRunLoopAddObserver(loop, hook, kCFRunLoopDefaultMode);
    pthread_t th = spawn(other_thread, NULL);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    join(th);
    CFRelease(victim);
    CFRelease(hook);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
