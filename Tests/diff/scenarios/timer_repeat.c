/* Repeating timers: they stay on the grid fireDate + k*interval; after a
 * long callout the missed periods fire once, not once each. */
#include "diff.h"
#include <math.h>

static CFAbsoluteTime first;
static int fires;

static bool on_grid(CFAbsoluteTime date, CFTimeInterval interval) {
    double k = (date - first) / interval;
    return fabs(k - round(k)) < 0.02;
}

static void fired(CFRunLoopTimerRef t, void *info) {
    fires++;
    CFAbsoluteTime next = CFRunLoopTimerGetNextFireDate(t);
    CFAbsoluteTime now = CFAbsoluteTimeGetCurrent();
    trace("fire %d: next date on grid %d, in the future %d", fires, on_grid(next, 0.1), next > now);
    if (fires == 2) {
        trace("callout busy for 3.5 periods");
        sleep_s(0.35);
    }
    if (fires == 3) {
        CFAbsoluteTime n = CFRunLoopTimerGetNextFireDate(t);
        trace("after the busy callout: missed periods skipped %d, next on grid %d", n - first > 0.45,
              on_grid(n, 0.1));
    }
    if (fires == 4) CFRunLoopStop(CFRunLoopGetCurrent());
}

static int late_fires;
static void late(CFRunLoopTimerRef t, void *info) {
    late_fires++;
    trace("late timer fire %d, next date on its grid %d", late_fires,
          fabs(fmod(CFRunLoopTimerGetNextFireDate(t) - first, 1.0)) < 0.02 ||
              fabs(fmod(CFRunLoopTimerGetNextFireDate(t) - first, 1.0) - 1.0) < 0.02);
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    first = CFAbsoluteTimeGetCurrent() + 0.1;
    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, first, 0.1, 0, 0, fired, NULL);
    trace("repeats %d, interval %g", CFRunLoopTimerDoesRepeat(t), CFRunLoopTimerGetInterval(t));
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    trace("fires: %d, valid %d", fires, CFRunLoopTimerIsValid(t));
    CFRunLoopTimerInvalidate(t);
    CFRelease(t);

    trace("-- a repeating timer whose first date is 20.5 periods in the past");
    first = CFAbsoluteTimeGetCurrent() - 20.5;
    CFRunLoopTimerRef l = CFRunLoopTimerCreate(NULL, first, 1.0, 0, 0, late, NULL);
    CFRunLoopAddTimer(rl, l, kCFRunLoopDefaultMode);
    run_mode("run 0.2 s", kCFRunLoopDefaultMode, 0.2, false);
    trace("fires: %d", late_fires);
    CFRunLoopTimerInvalidate(l);
    CFRelease(l);
}
