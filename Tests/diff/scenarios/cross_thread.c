/* Other threads acting on a loop that is busy in a callout or asleep:
 * Stop during a callout, the only source removed while the loop sleeps;
 * GetMain from a secondary thread. */
#include "diff.h"

static CFRunLoopRef loop;
static sem_t in_callout, go_on, asleep;
static CFRunLoopSourceRef only;

static void busy_perform(void *info) {
    trace("perform: waiting for the other thread");
    sem_post(&in_callout);
    sem_wait_s(&go_on);
    trace("perform returns");
}

static void stopper(void *arg) {
    sem_wait_s(&in_callout);
    trace("other thread: stop while busy, waiting: %d", CFRunLoopIsWaiting(loop));
    CFRunLoopStop(loop);
    sem_post(&go_on);
}

static void on_before_waiting(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) { sem_post(&asleep); }

static void remover(void *arg) {
    sem_wait_s(&asleep);
    wait_until_waiting(loop);
    trace("other thread: removes the only source, then wakes the loop");
    CFRunLoopRemoveSource(loop, only, kCFRunLoopDefaultMode);
    CFRunLoopWakeUp(loop);
}

static void main_checker(void *arg) {
    trace("on another thread: GetMain == GetCurrent %d", CFRunLoopGetMain() == CFRunLoopGetCurrent());
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    sem_init(&in_callout, 0, 0);
    sem_init(&go_on, 0, 0);
    sem_init(&asleep, 0, 0);
    trace("secondary thread: GetMain == GetCurrent %d, GetCurrent stable %d", CFRunLoopGetMain() == loop,
          CFRunLoopGetCurrent() == loop);
    join(spawn(main_checker, NULL));
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);

    trace("-- stop while a source perform runs");
    CFRunLoopSourceContext c = {0};
    c.perform = busy_perform;
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &c);
    CFRunLoopAddSource(loop, s, kCFRunLoopDefaultMode);
    CFRunLoopSourceSignal(s);
    pthread_t t = spawn(stopper, NULL);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    join(t);
    CFRunLoopSourceInvalidate(s);
    CFRelease(s);

    trace("-- the only source removed from another thread while asleep");
    only = trace_source("only", 0, true);
    CFRunLoopAddSource(loop, only, kCFRunLoopDefaultMode);
    CFRunLoopObserverRef hook = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting, false, 100, on_before_waiting, NULL);
    CFRunLoopAddObserver(loop, hook, kCFRunLoopDefaultMode);
    t = spawn(remover, NULL);
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    join(t);
    CFRelease(hook);
    CFRelease(only);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
