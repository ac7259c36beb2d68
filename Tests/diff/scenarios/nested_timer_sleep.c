/* A nested run of the same mode from inside a timer's callout sleeps: the
 * timer being fired (its date already past) does not arm the inner run's
 * wake-up. Counted through the BeforeWaiting/AfterWaiting observer calls of
 * the inner run (a sleeping run: a handful; a spinning one: thousands), for
 * a one-shot timer and for a repeating one whose next date is far away. */
#include "diff.h"

static int waits, wakes;
static bool counting;

static void count_activity(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    if (!counting) return;
    if (a == kCFRunLoopBeforeWaiting) waits++;
    if (a == kCFRunLoopAfterWaiting) wakes++;
}

static void nested_run(CFRunLoopTimerRef t, void *info) {
    trace("%s timer fired; nested run of the same mode", (const char *)info);
    waits = wakes = 0;
    counting = true;
    run_mode("inner", kCFRunLoopDefaultMode, 0.1, false);
    counting = false;
    trace("inner run slept: %s", waits <= 5 && wakes <= 5 ? "yes (a handful of waits)" : "no (it spun)");
    if (CFRunLoopTimerDoesRepeat(t)) CFRunLoopTimerInvalidate(t);
}

void scenario(void) {
    CFRunLoopRef loop = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting | kCFRunLoopAfterWaiting, true, 0,
                                                       count_activity, NULL);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);

    CFRunLoopTimerContext one = {0, "one-shot", NULL, NULL, NULL};
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.01, 0, 0, 0, nested_run, &one);
    CFRunLoopAddTimer(loop, t, kCFRunLoopDefaultMode);
    run_mode("outer", kCFRunLoopDefaultMode, 5, false);
    CFRelease(t);

    CFRunLoopTimerContext rep = {0, "repeating", NULL, NULL, NULL};
    t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.01, 1000, 0, 0, nested_run, &rep);
    CFRunLoopAddTimer(loop, t, kCFRunLoopDefaultMode);
    run_mode("outer", kCFRunLoopDefaultMode, 5, false);
    CFRelease(t);

    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
