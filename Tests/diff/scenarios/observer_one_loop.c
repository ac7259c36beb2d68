/* An observer belongs to one run loop at a time, like a timer: adding it to
 * a second loop is ignored; once removed from every mode of the first, it
 * can join another. */
#include "diff.h"

static CFRunLoopObserverRef obs;
static CFRunLoopTimerRef tmr;

static void nop_observer(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {}
static void nop_timer(CFRunLoopTimerRef t, void *info) {}

static void add_here(void *arg) {
    CFRunLoopRef mine = CFRunLoopGetCurrent();
    CFRunLoopAddObserver(mine, obs, kCFRunLoopDefaultMode);
    trace("%s: observer in the other thread's loop: %d", (const char *)arg,
          CFRunLoopContainsObserver(mine, obs, kCFRunLoopDefaultMode));
    CFRunLoopAddTimer(mine, tmr, kCFRunLoopDefaultMode);
    trace("%s: timer in the other thread's loop: %d", (const char *)arg,
          CFRunLoopContainsTimer(mine, tmr, kCFRunLoopDefaultMode));
    CFRunLoopRemoveObserver(mine, obs, kCFRunLoopDefaultMode);
    CFRunLoopRemoveTimer(mine, tmr, kCFRunLoopDefaultMode);
}

void scenario(void) {
    CFRunLoopRef loop = CFRunLoopGetCurrent();
    obs = CFRunLoopObserverCreate(NULL, kCFRunLoopAllActivities, true, 0, nop_observer, NULL);
    tmr = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 1000, 0, 0, 0, nop_timer, NULL);
    CFRunLoopAddObserver(loop, obs, CFSTR("Mine"));
    CFRunLoopAddTimer(loop, tmr, CFSTR("Mine"));
    join(spawn(add_here, "while in this loop"));
    trace("still in this loop: %d %d", CFRunLoopContainsObserver(loop, obs, CFSTR("Mine")),
          CFRunLoopContainsTimer(loop, tmr, CFSTR("Mine")));
    CFRunLoopRemoveObserver(loop, obs, CFSTR("Mine"));
    CFRunLoopRemoveTimer(loop, tmr, CFSTR("Mine"));
    join(spawn(add_here, "after leaving this loop"));
    CFRunLoopObserverInvalidate(obs);
    CFRunLoopTimerInvalidate(tmr);
    CFRelease(obs);
    CFRelease(tmr);
}
