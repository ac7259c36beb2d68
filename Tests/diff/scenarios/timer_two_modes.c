/* One timer in two modes: it fires in whichever mode runs, once per date;
 * removing it from one mode keeps it in the other. */
#include "diff.h"

static int fires;
static void fired(CFRunLoopTimerRef t, void *info) {
    fires++;
    trace("timer fired in %s (%d)", current_mode(CFRunLoopGetCurrent()), fires);
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() + 0.02, 0.05, 0, 0, fired, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(rl, t, CFSTR("A"));
    trace("in default %d, in A %d", CFRunLoopContainsTimer(rl, t, kCFRunLoopDefaultMode),
          CFRunLoopContainsTimer(rl, t, CFSTR("A")));
    CFRunLoopObserverRef stopper = CFRunLoopObserverCreateWithHandler(NULL, kCFRunLoopBeforeWaiting, true, 0,
        ^(CFRunLoopObserverRef o, CFRunLoopActivity a) {
            if (fires > 0) CFRunLoopStop(CFRunLoopGetCurrent());
        });
    CFRunLoopAddObserver(rl, stopper, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(rl, stopper, CFSTR("A"));
    trace("-- run A until it fired");
    run_mode("A", CFSTR("A"), 5, false);
    fires = 0;
    trace("-- run default until it fired");
    run_mode("default", kCFRunLoopDefaultMode, 5, false);
    fires = 0;
    trace("-- remove from A; A is empty now, default still fires");
    CFRunLoopRemoveTimer(rl, t, CFSTR("A"));
    run_mode("A", CFSTR("A"), 0.1, false);
    run_mode("default", kCFRunLoopDefaultMode, 5, false);
    trace("valid %d, in default %d, in A %d", CFRunLoopTimerIsValid(t), CFRunLoopContainsTimer(rl, t, kCFRunLoopDefaultMode),
          CFRunLoopContainsTimer(rl, t, CFSTR("A")));
    trace("-- invalidate removes it from every mode");
    CFRunLoopAddTimer(rl, t, CFSTR("A"));
    CFRunLoopTimerInvalidate(t);
    trace("in default %d, in A %d", CFRunLoopContainsTimer(rl, t, kCFRunLoopDefaultMode),
          CFRunLoopContainsTimer(rl, t, CFSTR("A")));
    CFRelease(t);
    CFRunLoopObserverInvalidate(stopper);
    CFRelease(stopper);
}
