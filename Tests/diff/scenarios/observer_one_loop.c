/* An observer belongs to one run loop at a time, like a timer: adding it to
 * a second loop while it is in a mode of the first is refused; once removed
 * from the first, the second takes it and calls it. */
#include "diff.h"

static CFRunLoopRef loop1, loop2;
static sem_t ready, go, done;
static CFRunLoopObserverRef obs;

static const char *which(CFRunLoopRef rl) { return rl == loop1 ? "loop1" : rl == loop2 ? "loop2" : "?"; }

static void obs_cb(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    if (a == kCFRunLoopEntry)
        trace("observer entry on %s", which(CFRunLoopGetCurrent()));
}
static void nothing(void *info) {}

static void second_thread(void *arg) {
    loop2 = CFRunLoopGetCurrent();
    CFRunLoopSourceContext c = {0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, nothing};
    CFRunLoopSourceRef keep = CFRunLoopSourceCreate(NULL, 0, &c);
    CFRunLoopAddSource(loop2, keep, kCFRunLoopDefaultMode);
    sem_post(&ready);
    for (int round = 0; round < 2; round++) {
        sem_wait_s(&go);
        run_mode("loop2 poll", kCFRunLoopDefaultMode, 0, false);
        sem_post(&done);
    }
    CFRunLoopRemoveSource(loop2, keep, kCFRunLoopDefaultMode);
    CFRelease(keep);
}

void scenario(void) {
    sem_init(&ready, 0, 0);
    sem_init(&go, 0, 0);
    sem_init(&done, 0, 0);
    loop1 = CFRunLoopGetCurrent();
    pthread_t t = spawn(second_thread, NULL);
    sem_wait_s(&ready);
    obs = CFRunLoopObserverCreate(NULL, kCFRunLoopEntry, true, 0, obs_cb, NULL);
    CFRunLoopAddObserver(loop1, obs, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(loop2, obs, kCFRunLoopDefaultMode);
    trace("in loop1 %d, in loop2 %d", CFRunLoopContainsObserver(loop1, obs, kCFRunLoopDefaultMode),
          CFRunLoopContainsObserver(loop2, obs, kCFRunLoopDefaultMode));
    sem_post(&go);
    sem_wait_s(&done);
    CFRunLoopRemoveObserver(loop1, obs, kCFRunLoopDefaultMode);
    CFRunLoopAddObserver(loop2, obs, kCFRunLoopDefaultMode);
    trace("after removal from loop1: in loop1 %d, in loop2 %d",
          CFRunLoopContainsObserver(loop1, obs, kCFRunLoopDefaultMode),
          CFRunLoopContainsObserver(loop2, obs, kCFRunLoopDefaultMode));
    sem_post(&go);
    sem_wait_s(&done);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
    join(t);
}
