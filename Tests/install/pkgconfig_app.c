/* Built by scripts/check-install.sh against an installed copy of the library
 * through pkg-config, with gcc and with clang: proves the headers, the
 * libraries and crunloop.pc work for a program outside this tree. */
#include <crunloop/crunloop.h>
#include <crunloop/cf_compat.h>
#include <stdio.h>

static int ticks;

static void tick(CFRunLoopTimerRef timer, void *info) {
    (void)info;
    if (++ticks == 3)
        CFRunLoopTimerInvalidate(timer);
}

int main(void) {
    RLLockRef lock = RLLockCreate();
    if (!lock || !RLLockLock(lock) || !RLLockUnlock(lock))
        return 1;
    if (RLLockUnlock(lock) || RLErrorGetLast().code != kRLErrorNotLocked)
        return 2;
    RLRelease(lock);

    CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent(), 0.001, 0, 0, tick, NULL);
    CFRunLoopAddTimer(CFRunLoopGetCurrent(), t, kCFRunLoopDefaultMode);
    CFRunLoopRunResult r = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 10, false);
    CFRelease(t);
    printf("ticks=%d result=%d\n", ticks, (int)r);
    return (ticks == 3 && r == kCFRunLoopRunFinished) ? 0 : 3;
}
