/* CFRunLoopPerformBlock: FIFO order, per-mode queues, common modes, blocks
 * queued from a block, and from another thread with CFRunLoopWakeUp. */
#include "diff.h"

static CFRunLoopRef loop;
static sem_t asleep;

static void on_before_waiting(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) { sem_post(&asleep); }

static void other_thread(void *arg) {
    if (!sem_wait_s(&asleep)) return;
    wait_until_waiting(loop);
    trace("other thread queues 3 blocks without waking");
    for (int i = 1; i <= 3; i++)
        CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{
            trace("remote block %d", i);
            if (i == 3) CFRunLoopStop(CFRunLoopGetCurrent());
        });
    sleep_s(0.1);
    trace("still waiting: %d", CFRunLoopIsWaiting(loop));
    trace("other thread wakes the loop");
    CFRunLoopWakeUp(loop);
}

void scenario(void) {
    loop = CFRunLoopGetCurrent();
    sem_init(&asleep, 0, 0);
    CFRunLoopSourceRef keep = trace_source("keepalive", 0, false);
    CFRunLoopAddSource(loop, keep, kCFRunLoopCommonModes);
    CFRunLoopAddSource(loop, keep, CFSTR("A"));

    trace("-- FIFO");
    for (int i = 1; i <= 5; i++) CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("block %d", i); });
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);

    trace("-- per mode: A blocks wait for A; common blocks run in default");
    CFRunLoopPerformBlock(loop, CFSTR("A"), ^{ trace("A block 1"); });
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("default block 1"); });
    CFRunLoopPerformBlock(loop, kCFRunLoopCommonModes, ^{ trace("common block 1"); });
    CFRunLoopPerformBlock(loop, CFSTR("A"), ^{ trace("A block 2"); });
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("default block 2"); });
    run_mode("default poll", kCFRunLoopDefaultMode, 0, false);
    run_mode("A poll", CFSTR("A"), 0, false);
    run_mode("A poll again", CFSTR("A"), 0, false);

    trace("-- common blocks and a mode made common");
    CFRunLoopPerformBlock(loop, kCFRunLoopCommonModes, ^{ trace("common block 2"); });
    run_mode("B poll (B not common)", CFSTR("B"), 0, false);
    CFRunLoopAddCommonMode(loop, CFSTR("B"));
    run_mode("B poll (B common)", CFSTR("B"), 0, false);

    trace("-- a block queues blocks: they wait for the next pass");
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{
        trace("outer block");
        CFRunLoopPerformBlock(CFRunLoopGetCurrent(), kCFRunLoopDefaultMode, ^{ trace("inner block"); });
    });
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("second outer block"); });
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);
    run_mode("poll", kCFRunLoopDefaultMode, 0, false);

    trace("-- a mode with only a block in it");
    CFRunLoopPerformBlock(loop, CFSTR("blockonly"), ^{ trace("blockonly block"); });
    run_mode("blockonly run", CFSTR("blockonly"), 0.1, false);
    run_mode("blockonly run again", CFSTR("blockonly"), 0.1, false);

    trace("-- from another thread, then CFRunLoopWakeUp");
    CFRunLoopObserverRef hook = CFRunLoopObserverCreate(NULL, kCFRunLoopBeforeWaiting, false, 0, on_before_waiting, NULL);
    CFRunLoopAddObserver(loop, hook, kCFRunLoopDefaultMode);
    CFRunLoopObserverRef obs = trace_observer("obs", kCFRunLoopAfterWaiting, 0);
    CFRunLoopAddObserver(loop, obs, kCFRunLoopDefaultMode);
    pthread_t t = spawn(other_thread, NULL);
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode, ^{ trace("local block"); });
    run_mode("run (returnAfterSourceHandled)", kCFRunLoopDefaultMode, 10, true);
    join(t);
    CFRelease(hook);
    CFRunLoopObserverInvalidate(obs);
    CFRelease(obs);
    CFRunLoopSourceInvalidate(keep);
    CFRelease(keep);
}
