/* The next fire date of an invalidated timer is 0: a one-shot after its
 * fire, a timer invalidated from its own callout (asked inside the callout
 * and after), one invalidated before it was ever added. */
#include "diff.h"

static CFAbsoluteTime created;

static const char *date_str(CFRunLoopTimerRef t) {
    CFAbsoluteTime d = CFRunLoopTimerGetNextFireDate(t);
    if (d == 0) return "0";
    return d > created - 10 && d < created + 2000 ? "a date" : "something else";
}

static void one_shot_cb(CFRunLoopTimerRef t, void *info) { trace("one-shot callout: next fire date %s", date_str(t)); }

static void self_invalidate_cb(CFRunLoopTimerRef t, void *info) {
    trace("callout: next fire date %s", date_str(t));
    CFRunLoopTimerInvalidate(t);
    trace("callout after invalidating itself: next fire date %s", date_str(t));
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    created = CFAbsoluteTimeGetCurrent();

    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, created - 1, 0, 0, 0, one_shot_cb, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("one-shot after its fire: valid %d, next fire date %s", CFRunLoopTimerIsValid(t), date_str(t));
    CFRelease(t);

    t = CFRunLoopTimerCreate(NULL, created - 1, 1000, 0, 0, self_invalidate_cb, NULL);
    CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    trace("repeating invalidated in its callout: next fire date %s", date_str(t));
    CFRelease(t);

    t = CFRunLoopTimerCreate(NULL, created + 1000, 0, 0, 0, one_shot_cb, NULL);
    trace("never added: next fire date %s", date_str(t));
    CFRunLoopTimerInvalidate(t);
    trace("never added, invalidated: next fire date %s", date_str(t));
    CFRelease(t);
}
