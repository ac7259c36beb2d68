/* Observers: called by ascending order, activity masks, one-shot observers,
 * observers removed or invalidated from inside a callout, an observer added
 * during a run, observers in common modes, accessors. */
#include "diff.h"

static CFRunLoopRef loop;
static CFRunLoopObserverRef late, victim;

static void named(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    trace("%s %s", (const char *)info, activity_str(a));
}

static void killer(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    trace("killer %s: invalidates victim, removes itself, adds late", activity_str(a));
    CFRunLoopObserverInvalidate(victim);
    CFRunLoopRemoveObserver(loop, o, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(loop, late, kCFRunLoopDefaultMode);
}

static CFRunLoopObserverRef make(const char *name, CFOptionFlags acts, Boolean repeats, CFIndex order) {
    CFRunLoopObserverContext ctx = {0, (void *)name, NULL, NULL, NULL};
    return CFRunLoopObserverCreate(NULL, acts, repeats, order, named, &ctx);
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(loop, keep, kCFRunLoopCommonModes);
    CFRunLoopAddSource(loop, keep, CFSTR("A"));

    trace("-- order: added 10, -5, 3; entry/exit only");
    CFRunLoopObserverRef o10 = make("order 10", kCFRunLoopEntry | kCFRunLoopExit, true, 10);
    CFRunLoopObserverRef om5 = make("order -5", kCFRunLoopEntry | kCFRunLoopExit, true, -5);
    CFRunLoopObserverRef o3 = make("order 3", kCFRunLoopEntry | kCFRunLoopExit, true, 3);
    CFRunLoopAddObserver(loop, o10, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(loop, om5, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(loop, o3, kCFRunLoopDefaultMode);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("accessors: activities 0x%lx repeats %d order %ld valid %d", (unsigned long)CFRunLoopObserverGetActivities(o10),
          CFRunLoopObserverDoesRepeat(o10), (long)CFRunLoopObserverGetOrder(o10), CFRunLoopObserverIsValid(o10));
    CFRunLoopObserverInvalidate(o10);
    CFRunLoopObserverInvalidate(om5);
    CFRunLoopObserverInvalidate(o3);

    trace("-- one-shot observer on BeforeTimers|BeforeSources");
    CFRunLoopObserverRef once = make("once", kCFRunLoopBeforeTimers | kCFRunLoopBeforeSources, false, 0);
    CFRunLoopAddObserver(loop, once, kCFRunLoopDefaultMode);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("once valid %d, contained %d", CFRunLoopObserverIsValid(once), CFRunLoopContainsObserver(loop, once, kCFRunLoopDefaultMode));
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);

    trace("-- changes from inside a callout");
    CFRunLoopObserverContext kc = {0};
    CFRunLoopObserverRef k = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeTimers, true, 0, killer, &kc);
    victim = make("victim", kCFRunLoopBeforeTimers | kCFRunLoopBeforeSources, true, 1);
    late = make("late", kCFRunLoopAllActivities, true, 2);
    CFRunLoopAddObserver(loop, k, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(loop, victim, kCFRunLoopDefaultMode);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    trace("victim valid %d; killer contained %d; late contained %d", CFRunLoopObserverIsValid(victim),
          CFRunLoopContainsObserver(loop, k, kCFRunLoopDefaultMode), CFRunLoopContainsObserver(loop, late, kCFRunLoopDefaultMode));
    CFRunLoopObserverInvalidate(late);

    trace("-- common-mode observer seen in A once A is common, not before");
    CFRunLoopObserverRef common = make("common", kCFRunLoopEntry, true, 0);
    CFRunLoopAddObserver(loop, common, kCFRunLoopCommonModes);
    run_mode("A poll", CFSTR("A"), 0, false);
    CFRunLoopAddCommonMode(loop, CFSTR("A"));
    run_mode("A poll", CFSTR("A"), 0, false);
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopObserverInvalidate(common);

    CFRelease(o10); CFRelease(om5); CFRelease(o3); CFRelease(once); CFRelease(k);
    CFRelease(victim); CFRelease(late); CFRelease(common);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
}
