/* Observer activities of a run woken by a source signalled from another
 * thread once the loop is asleep, with and without returnAfterSourceHandled. */
#include "diff.h"

static sem_t asleep;
static CFRunLoopRef loop;
static CFRunLoopSourceRef src;

static void on_before_waiting(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) { sem_post(&asleep); }

static void signaller(void *arg) {
    for (int i = 0; i < 2; i++) {
        if (!sem_wait_s(&asleep)) return;
        wait_until_waiting(loop);
        CFRunLoopSourceSignal(src);
        CFRunLoopWakeUp(loop);
    }
}

static void stopper_perform(void *info) {
    trace("source perform");
    if (info) CFRunLoopStop(CFRunLoopGetCurrent());
}

void scenario(void) {
    sem_init(&asleep, 0, 0);
    loop = CFRunLoopGetCurrent();
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAllActivities, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);
    CFRunLoopObserverRef hook = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting, true, 100, on_before_waiting, NULL);
    CFRunLoopAddObserver(loop, hook, kCFRunLoopDefaultMode);
    CFRunLoopSourceContext ctx = {0};
    ctx.perform = stopper_perform;
    src = CFRunLoopSourceCreate(NULL, 0, &ctx);
    CFRunLoopAddSource(loop, src, kCFRunLoopDefaultMode);
    pthread_t t = spawn(signaller, NULL);
    trace("-- returnAfterSourceHandled");
    run_mode("run", kCFRunLoopDefaultMode, 10, true);
    CFRunLoopSourceInvalidate(src);
    CFRelease(src);
    /* Second round: the perform stops the loop. */
    ctx.info = (void *)1;
    src = CFRunLoopSourceCreate(NULL, 0, &ctx);
    CFRunLoopAddSource(loop, src, kCFRunLoopDefaultMode);
    trace("-- perform stops the loop");
    run_mode("run", kCFRunLoopDefaultMode, 10, false);
    join(t);
    CFRunLoopSourceInvalidate(src);
    CFRelease(src);
    CFRunLoopObserverInvalidate(hook);
    CFRelease(hook);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
}
