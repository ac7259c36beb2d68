/*
 * cf_listings.c — the Core Foundation parts of the "Run Loops" chapter of
 * Apple's Threading Programming Guide (Listings 3-1 to 3-11), plus the
 * usual "run until CFRunLoopStop" worker-thread exit pattern, written in CF
 * names and built on Linux against CRunLoop through <crunloop/cf_compat.h>.
 *
 * The guide's Objective-C objects (RunLoopSource, RunLoopContext, the
 * application delegate) become small C structs here; every run-loop call is
 * the CF call the guide makes. The program checks its own results and ends
 * with "cf_listings: OK" (exit status 0) or "cf_listings: FAILED".
 *
 * Built with -DCF_LISTINGS_REAL_CF it compiles unchanged against the real
 * CoreFoundation of the Swift toolchain instead.
 */
#ifdef CF_LISTINGS_REAL_CF
#include <CoreFoundation/CoreFoundation.h>
#else
#include <crunloop/cf_compat.h>
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(bool ok, const char *what) {
    printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
    if (!ok) failures++;
}

/* ------------------------------------------------------------------------
 * Listing 3-1: a thread's main routine that attaches an observer for every
 * activity to its run loop, schedules a repeating timer and runs the loop
 * a few times with a time limit.
 */

static int activity_counts[8];

static int activity_index(CFRunLoopActivity activity) {
    switch (activity) {
    case kCFRunLoopEntry: return 0;
    case kCFRunLoopBeforeTimers: return 1;
    case kCFRunLoopBeforeSources: return 2;
    case kCFRunLoopBeforeWaiting: return 3;
    case kCFRunLoopAfterWaiting: return 4;
    case kCFRunLoopExit: return 5;
    default: return 6;
    }
}

static void myRunLoopObserver(CFRunLoopObserverRef observer, CFRunLoopActivity activity, void *info) {
    activity_counts[activity_index(activity)]++;
}

static int timer_fires_3_1;

static void doFireTimer(CFRunLoopTimerRef timer, void *info) { timer_fires_3_1++; }

static void *threadMain(void *arg) {
    CFRunLoopRef myRunLoop = CFRunLoopGetCurrent();
    // Create a run loop observer and attach it to the run loop.
    CFRunLoopObserverContext context = {0, arg, NULL, NULL, NULL};
    CFRunLoopObserverRef observer =
        CFRunLoopObserverCreate(kCFAllocatorDefault, kCFRunLoopAllActivities, TRUE, 0, &myRunLoopObserver, &context);
    if (observer) CFRunLoopAddObserver(myRunLoop, observer, kCFRunLoopDefaultMode);

    // Create and schedule the timer (the guide uses an NSTimer here).
    CFRunLoopTimerRef timer = CFRunLoopTimerCreate(kCFAllocatorDefault, CFAbsoluteTimeGetCurrent() + 0.02, 0.02, 0,
                                                   0, &doFireTimer, NULL);
    CFRunLoopAddTimer(myRunLoop, timer, kCFRunLoopDefaultMode);

    int loopCount = 5;
    do {
        // Run the run loop 5 times to let the timer fire.
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, false);
        loopCount--;
    } while (loopCount);

    CFRunLoopTimerInvalidate(timer);
    CFRelease(timer);
    if (observer) {
        CFRunLoopRemoveObserver(myRunLoop, observer, kCFRunLoopDefaultMode);
        CFRelease(observer);
    }
    return NULL;
}

static void listing_3_1(void) {
    printf("Listing 3-1: a run loop observer on a thread running a repeating timer\n");
    pthread_t thread;
    pthread_create(&thread, NULL, threadMain, NULL);
    pthread_join(thread, NULL);
    static const char *names[] = {"Entry", "BeforeTimers", "BeforeSources", "BeforeWaiting", "AfterWaiting", "Exit"};
    for (int i = 0; i < 6; i++) printf("  observer saw %-14s %d times\n", names[i], activity_counts[i]);
    check(activity_counts[0] == 5 && activity_counts[5] == 5, "one Entry and one Exit per run (5 runs)");
    check(timer_fires_3_1 >= 2, "the repeating timer fired during the runs");
    check(activity_counts[3] >= 1 && activity_counts[4] >= 1, "the loop slept and woke between timer fires");
}

/* ------------------------------------------------------------------------
 * Listings 3-3 to 3-9: a custom input source with a command buffer.
 * RunLoopSource (3-3) owns the CFRunLoopSourceRef and a mutex-protected
 * command queue; the schedule routine (3-4) registers a RunLoopContext with
 * the "application delegate" (3-8) on the main thread, the perform routine
 * (3-5) drains the commands, the cancel routine (3-6) unregisters, 3-7
 * installs the source, 3-9 signals it and wakes the loop. The worker thread
 * runs the loop as in Listing 3-2.
 */

enum { kCommandPrint = 1, kCommandQuit = 2 };

typedef struct RunLoopSource {
    CFRunLoopSourceRef runLoopSource;
    pthread_mutex_t lock;
    int commands[64];
    int data[64];
    int count;
    int processed;
    bool quit;
} RunLoopSource;

typedef struct RunLoopContext {
    CFRunLoopRef runLoop;
    RunLoopSource *source;
} RunLoopContext;

/* The application delegate's list of sources to ping (Listing 3-8),
 * guarded because the schedule/cancel routines run on the worker thread. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    RunLoopContext sourcesToPing[4];
    int count;
    int registrations, removals;
} appDelegate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0}}, 0, 0, 0};

static void registerSource(RunLoopContext sourceInfo) {
    pthread_mutex_lock(&appDelegate.lock);
    appDelegate.sourcesToPing[appDelegate.count++] = sourceInfo;
    appDelegate.registrations++;
    pthread_cond_broadcast(&appDelegate.changed);
    pthread_mutex_unlock(&appDelegate.lock);
}

static void removeSource(RunLoopContext sourceInfo) {
    pthread_mutex_lock(&appDelegate.lock);
    for (int i = 0; i < appDelegate.count; i++) {
        if (appDelegate.sourcesToPing[i].source == sourceInfo.source &&
            appDelegate.sourcesToPing[i].runLoop == sourceInfo.runLoop) {
            appDelegate.sourcesToPing[i] = appDelegate.sourcesToPing[--appDelegate.count];
            break;
        }
    }
    appDelegate.removals++;
    pthread_cond_broadcast(&appDelegate.changed);
    pthread_mutex_unlock(&appDelegate.lock);
}

// Listing 3-4: Scheduling a run loop source
void RunLoopSourceScheduleRoutine(void *info, CFRunLoopRef rl, CFStringRef mode) {
    RunLoopSource *obj = (RunLoopSource *)info;
    RunLoopContext theContext = {rl, obj};
    registerSource(theContext);
}

static void sourceFired(RunLoopSource *obj) {
    int commands[64], data[64], n;
    pthread_mutex_lock(&obj->lock);
    n = obj->count;
    memcpy(commands, obj->commands, sizeof(int) * (size_t)n);
    memcpy(data, obj->data, sizeof(int) * (size_t)n);
    obj->count = 0;
    pthread_mutex_unlock(&obj->lock);
    for (int i = 0; i < n; i++) {
        if (commands[i] == kCommandPrint) {
            printf("  worker: command %d (data %d)\n", commands[i], data[i]);
            obj->processed++;
        } else if (commands[i] == kCommandQuit) {
            /* CFRunLoopStop alone is not enough here: a run started with
             * returnAfterSourceHandled reports kCFRunLoopRunHandledSource
             * for this perform, and a stop does not outlive its run. */
            printf("  worker: quit command\n");
            obj->quit = true;
            CFRunLoopStop(CFRunLoopGetCurrent());
        }
    }
}

// Listing 3-5: Performing work in the input source
void RunLoopSourcePerformRoutine(void *info) {
    RunLoopSource *obj = (RunLoopSource *)info;
    sourceFired(obj);
}

// Listing 3-6: Invalidating an input source
void RunLoopSourceCancelRoutine(void *info, CFRunLoopRef rl, CFStringRef mode) {
    RunLoopSource *obj = (RunLoopSource *)info;
    RunLoopContext theContext = {rl, obj};
    removeSource(theContext);
}

// Listing 3-7: Installing the run loop source
static RunLoopSource *RunLoopSourceInit(void) {
    RunLoopSource *self = calloc(1, sizeof *self);
    pthread_mutex_init(&self->lock, NULL);
    CFRunLoopSourceContext context = {0, self, NULL, NULL, NULL, NULL, NULL,
                                      &RunLoopSourceScheduleRoutine, RunLoopSourceCancelRoutine,
                                      RunLoopSourcePerformRoutine};
    self->runLoopSource = CFRunLoopSourceCreate(NULL, 0, &context);
    return self;
}

static void RunLoopSourceAddToCurrentRunLoop(RunLoopSource *self) {
    CFRunLoopRef runLoop = CFRunLoopGetCurrent();
    CFRunLoopAddSource(runLoop, self->runLoopSource, kCFRunLoopDefaultMode);
}

static void RunLoopSourceInvalidate(RunLoopSource *self) { CFRunLoopSourceInvalidate(self->runLoopSource); }

// The client interface (Listing 3-3)
static void RunLoopSourceAddCommand(RunLoopSource *self, int command, int data) {
    pthread_mutex_lock(&self->lock);
    self->commands[self->count] = command;
    self->data[self->count] = data;
    self->count++;
    pthread_mutex_unlock(&self->lock);
}

// Listing 3-9: Waking up the run loop
static void RunLoopSourceFireAllCommandsOnRunLoop(RunLoopSource *self, CFRunLoopRef runloop) {
    CFRunLoopSourceSignal(self->runLoopSource);
    CFRunLoopWakeUp(runloop);
}

static int results_seen[5];

// Listing 3-2: Running a run loop (the worker thread's main routine)
static void *skeletonThreadMain(void *arg) {
    RunLoopSource *source = arg;
    Boolean done = FALSE;
    // Add your sources or timers to the run loop and do any other setup.
    RunLoopSourceAddToCurrentRunLoop(source);
    do {
        // Start the run loop but return after each source is handled.
        SInt32 result = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 10, TRUE);
        if (result >= 1 && result <= 4) results_seen[result]++;
        // If a source explicitly stopped the run loop, or if there are no
        // sources or timers, go ahead and exit.
        if ((result == kCFRunLoopRunStopped) || (result == kCFRunLoopRunFinished)) done = TRUE;
        // Check for any other exit conditions here and set the
        // done variable as needed.
        if (source->quit) done = TRUE;
    } while (!done);
    // Clean up: invalidating the source calls its cancel routine.
    RunLoopSourceInvalidate(source);
    return NULL;
}

static void listings_3_2_to_3_9(void) {
    printf("Listings 3-2 to 3-9: a custom input source fed by the main thread\n");
    RunLoopSource *source = RunLoopSourceInit();
    pthread_t worker;
    pthread_create(&worker, NULL, skeletonThreadMain, source);

    // Wait for the schedule routine's registration (Listing 3-8).
    pthread_mutex_lock(&appDelegate.lock);
    while (appDelegate.count == 0) pthread_cond_wait(&appDelegate.changed, &appDelegate.lock);
    RunLoopContext target = appDelegate.sourcesToPing[0];
    pthread_mutex_unlock(&appDelegate.lock);
    check(target.source == source, "the schedule routine registered the source with the delegate");

    for (int batch = 0; batch < 3; batch++) {
        for (int i = 0; i < 2; i++) RunLoopSourceAddCommand(target.source, kCommandPrint, batch * 10 + i);
        RunLoopSourceFireAllCommandsOnRunLoop(target.source, target.runLoop);
    }
    RunLoopSourceAddCommand(target.source, kCommandQuit, 0);
    RunLoopSourceFireAllCommandsOnRunLoop(target.source, target.runLoop);
    pthread_join(worker, NULL);

    check(source->processed == 6, "all six commands were processed on the worker thread");
    check(results_seen[kCFRunLoopRunHandledSource] >= 1 && results_seen[kCFRunLoopRunStopped] == 0,
          "each run returned kCFRunLoopRunHandledSource, even the one whose perform called CFRunLoopStop");
    check(results_seen[kCFRunLoopRunTimedOut] == 0, "no run timed out");
    check(appDelegate.registrations == 1 && appDelegate.removals == 1 && appDelegate.count == 0,
          "invalidating the source called its cancel routine, which unregistered it");
    CFRelease(source->runLoopSource);
    pthread_mutex_destroy(&source->lock);
    free(source);
}

/* ------------------------------------------------------------------------
 * Listing 3-11: a timer created with Core Foundation functions. As in the
 * guide, the first fire date is 0.1 s after the reference date (2001), long
 * past, so it fires at once and then every 0.3 s.
 */

static int cf_timer_fires;

static void myCFTimerCallback(CFRunLoopTimerRef timer, void *info) {
    cf_timer_fires++;
    printf("  timer fired (%d)\n", cf_timer_fires);
    if (cf_timer_fires == 2) CFRunLoopStop(CFRunLoopGetCurrent());
}

static void *timerThread(void *arg) {
    CFRunLoopRef runLoop = CFRunLoopGetCurrent();
    CFRunLoopTimerContext context = {0, NULL, NULL, NULL, NULL};
    CFRunLoopTimerRef timer =
        CFRunLoopTimerCreate(kCFAllocatorDefault, 0.1, 0.3, 0, 0, &myCFTimerCallback, &context);
    CFRunLoopAddTimer(runLoop, timer, kCFRunLoopCommonModes);
    CFRunLoopRun();
    check(CFRunLoopTimerIsValid(timer), "the repeating timer is still valid after the loop stopped");
    CFRunLoopTimerInvalidate(timer);
    CFRelease(timer);
    return NULL;
}

static void listing_3_11(void) {
    printf("Listing 3-11: CFRunLoopTimerCreate in the common modes\n");
    pthread_t thread;
    pthread_create(&thread, NULL, timerThread, NULL);
    pthread_join(thread, NULL);
    check(cf_timer_fires == 2, "the timer fired at once, then after one interval");
}

/* ------------------------------------------------------------------------
 * The worker-thread exit pattern ("Controlling How NSThread and NSRunLoop
 * Exit"): a do-nothing source keeps CFRunLoopRun asleep; start waits until
 * the thread is ready; stop runs CFRunLoopStop on the thread itself and
 * waits until the thread has cleaned up.
 */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool ready, finished;
    CFRunLoopRef runLoop;
    Boolean stillValid;
} lifecycle = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, NULL, false};

static void DoNothingRunLoopCallback(void *info) {}

static void *threadProc(void *ignored) {
    CFRunLoopSourceContext context = {0};
    context.perform = DoNothingRunLoopCallback;

    CFRunLoopSourceRef source = CFRunLoopSourceCreate(NULL, 0, &context);
    CFRunLoopAddSource(CFRunLoopGetCurrent(), source, kCFRunLoopCommonModes);

    pthread_mutex_lock(&lifecycle.lock);
    lifecycle.runLoop = CFRunLoopGetCurrent();
    lifecycle.ready = true;
    pthread_cond_signal(&lifecycle.cond);
    pthread_mutex_unlock(&lifecycle.lock);

    // Keep processing events until the runloop is stopped.
    CFRunLoopRun();

    CFRunLoopRemoveSource(CFRunLoopGetCurrent(), source, kCFRunLoopCommonModes);

    pthread_mutex_lock(&lifecycle.lock);
    lifecycle.stillValid = CFRunLoopSourceIsValid(source);
    lifecycle.finished = true;
    pthread_cond_signal(&lifecycle.cond);
    pthread_mutex_unlock(&lifecycle.lock);
    CFRelease(source);
    return NULL;
}

#if !__BLOCKS__
static void stop_current(void *info) { CFRunLoopStop(CFRunLoopGetCurrent()); }
#endif

static void exit_pattern(void) {
    printf("Exit pattern: CFRunLoopRun until CFRunLoopStop, with synchronized start and stop\n");
    pthread_t thread;
    pthread_mutex_lock(&lifecycle.lock);
    pthread_create(&thread, NULL, threadProc, NULL);
    while (!lifecycle.ready) pthread_cond_wait(&lifecycle.cond, &lifecycle.lock);
    pthread_mutex_unlock(&lifecycle.lock);
    printf("  thread started and ready\n");

    // stop: run CFRunLoopStop on the thread itself (the post uses
    // performSelector:onThread:), then wait for its clean-up.
#if __BLOCKS__
    CFRunLoopPerformBlock(lifecycle.runLoop, kCFRunLoopDefaultMode, ^{ CFRunLoopStop(CFRunLoopGetCurrent()); });
#else
    RLRunLoopPerformFunction(lifecycle.runLoop, kCFRunLoopDefaultMode, stop_current, NULL);
#endif
    CFRunLoopWakeUp(lifecycle.runLoop);
    pthread_mutex_lock(&lifecycle.lock);
    while (!lifecycle.finished) pthread_cond_wait(&lifecycle.cond, &lifecycle.lock);
    pthread_mutex_unlock(&lifecycle.lock);
    pthread_join(thread, NULL);
    printf("  thread stopped and gone\n");
    check(lifecycle.stillValid, "CFRunLoopRun returned after CFRunLoopStop; the source was untouched");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    listing_3_1();
    listings_3_2_to_3_9();
    listing_3_11();
    exit_pattern();
    printf("cf_listings: %s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
