/* One source in two threads' run loops (schedule/cancel per loop), and a
 * timer that belongs to one run loop: adding it to a second one is refused. */
#include "diff.h"

static CFRunLoopRef loop1, loop2;
static sem_t ready, done;

static const char *which(CFRunLoopRef rl) { return rl == loop1 ? "loop1" : rl == loop2 ? "loop2" : "?"; }

static void schedule_cb(void *info, CFRunLoopRef rl, CFRunLoopMode mode) { trace("schedule in %s %s", which(rl), mode_str(mode)); }
static void cancel_cb(void *info, CFRunLoopRef rl, CFRunLoopMode mode) { trace("cancel in %s %s", which(rl), mode_str(mode)); }
static void perform_cb(void *info) { trace("perform on %s", which(CFRunLoopGetCurrent())); }
static void timer_cb(CFRunLoopTimerRef t, void *info) { trace("timer fired on %s", which(CFRunLoopGetCurrent())); }

static void second_thread(void *arg) {
    loop2 = CFRunLoopGetCurrent();
    sem_post(&ready);
    sem_wait_s(&done);
}

void scenario(void) {
    sem_init(&ready, 0, 0);
    sem_init(&done, 0, 0);
    loop1 = CFRunLoopGetCurrent();
    pthread_t t = spawn(second_thread, NULL);
    sem_wait_s(&ready);
    trace("two loops differ: %d", loop1 != loop2);

    trace("-- one source in both loops");
    CFRunLoopSourceContext c = {0, NULL, NULL, NULL, NULL, NULL, NULL, schedule_cb, cancel_cb, perform_cb};
    CFRunLoopSourceRef s = CFRunLoopSourceCreate(NULL, 0, &c);
    CFRunLoopAddSource(loop1, s, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(loop2, s, kCFRunLoopDefaultMode);
    trace("in loop1 %d, in loop2 %d", CFRunLoopContainsSource(loop1, s, kCFRunLoopDefaultMode),
          CFRunLoopContainsSource(loop2, s, kCFRunLoopDefaultMode));
    CFRunLoopSourceSignal(s);
    run_mode("loop1 poll", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopRemoveSource(loop2, s, kCFRunLoopDefaultMode);
    trace("in loop1 %d, in loop2 %d", CFRunLoopContainsSource(loop1, s, kCFRunLoopDefaultMode),
          CFRunLoopContainsSource(loop2, s, kCFRunLoopDefaultMode));
    CFRunLoopAddSource(loop2, s, CFSTR("A"));
    trace("-- invalidate: cancelled in both loops (in no defined order)");
    collect_begin();
    CFRunLoopSourceInvalidate(s);
    collect_end();
    CFRelease(s);

    trace("-- a timer belongs to one run loop");
    CFRunLoopTimerRef tm = CFRunLoopTimerCreate(NULL, CFAbsoluteTimeGetCurrent() - 1, 0, 0, 0, timer_cb, NULL);
    CFRunLoopAddTimer(loop2, tm, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(loop1, tm, kCFRunLoopDefaultMode);
    trace("in loop1 %d, in loop2 %d", CFRunLoopContainsTimer(loop1, tm, kCFRunLoopDefaultMode),
          CFRunLoopContainsTimer(loop2, tm, kCFRunLoopDefaultMode));
    run_mode("loop1 run", kCFRunLoopDefaultMode, 0.05, false);
    CFRunLoopRemoveTimer(loop2, tm, kCFRunLoopDefaultMode);
    CFRunLoopAddTimer(loop1, tm, kCFRunLoopDefaultMode);
    trace("after removal from loop2: in loop1 %d", CFRunLoopContainsTimer(loop1, tm, kCFRunLoopDefaultMode));
    CFRunLoopTimerInvalidate(tm);
    CFRelease(tm);
    sem_post(&done);
    join(t);
}
