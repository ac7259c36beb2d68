/* A wake-up that arrives while the loop is busy in the callouts of the
 * pass after a wake-up: CF drops it (that pass and the next look at every
 * source, block and timer anyway), so the loop does not go round once more
 * before it sleeps again. */
#include "diff.h"

static CFRunLoopRef loop;
static sem_t in_callout, go_on;

static void busy_timer(CFRunLoopTimerRef t, void *info) {
    trace("timer: waiting for the other thread");
    sem_post(&in_callout);
    sem_wait_s(&go_on);
    trace("timer returns");
}

static void waker(void *arg) {
    sem_wait_s(&in_callout);
    trace("other thread: wake-up while busy");
    CFRunLoopWakeUp(loop);
    sem_post(&go_on);
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    sem_init(&in_callout, 0, 0);
    sem_init(&go_on, 0, 0);
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(loop, keep, kCFRunLoopDefaultMode);
    CFRunLoopTimerRef tm = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.01, 0, 0, 0, busy_timer, NULL);
    CFRunLoopAddTimer(loop, tm, kCFRunLoopDefaultMode);
    pthread_t t = spawn(waker, NULL);
    run_mode("run (1 s)", kCFRunLoopDefaultMode, 1, false);
    join(t);
    CFRelease(tm);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
