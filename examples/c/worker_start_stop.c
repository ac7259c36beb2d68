/*
 * worker_start_stop.c — the thread from "Controlling How NSThread and
 * NSRunLoop Exit": a thread with a run loop whose start returns when it is
 * ready for work and whose stop returns when it is gone.
 *
 * The post builds this by hand: a do-nothing source to keep the run loop
 * asleep instead of spinning, CFRunLoopStop performed on the thread to end
 * it, and a condition the controlling thread waits on at start and at stop.
 * RLWorkerThread is that pattern built in. This program shows each promise:
 *
 *   1. RLWorkerThreadStart returns once the worker's run loop is running:
 *      work queued right after it runs, with no sleep or retry.
 *   2. Work runs on the worker, in order (async requests, then a sync one
 *      that returns a value).
 *   3. An idle worker sleeps in its run loop: an observer counting its
 *      wake-ups sees none while nothing is sent to it.
 *   4. RLWorkerThreadStop returns once the thread has fully exited: the
 *      will-exit handler has already run on the worker and the thread
 *      reports itself finished when Stop returns.
 *   5. A stopped worker can be started again (on a new thread).
 */
#include "example_support.h"

static RLTimeInterval idle_time;

/* ---- what the will-exit handler records ---- */

static volatile int exit_handler_runs; /* written on the worker, read after Stop */
static char exit_handler_thread[64];

static void will_exit(RLThreadRef thread, void *info) {
    example_thread_name(exit_handler_thread, sizeof exit_handler_thread);
    printf("  [%s] will-exit handler: the run loop is torn down; the thread is about to end\n",
           exit_handler_thread);
    fflush(stdout);
    /* A short pause: if Stop did not wait for the thread, it would return
     * before this handler finished. */
    RLThreadSleepForTimeInterval(idle_time / 4);
    RLAtomicIncrement32Barrier((volatile int32_t *)&exit_handler_runs);
}

/* ---- work ---- */

static void say_hello(void *arg) {
    char name[64];
    printf("  [%s] job %d\n", example_thread_name(name, sizeof name), (int)(intptr_t)arg);
}

typedef struct SumRequest {
    int upTo;
    long result;
    bool onWorker;
    RLThreadRef worker;
} SumRequest;

static void sum_numbers(void *arg) {
    SumRequest *request = arg;
    request->onWorker = RLThreadGetCurrent() == request->worker;
    request->result = 0;
    for (int i = 1; i <= request->upTo; i++) request->result += i;
    char name[64];
    printf("  [%s] sync job: 1 + ... + %d = %ld\n", example_thread_name(name, sizeof name), request->upTo,
           request->result);
}

/* ---- counting the worker's wake-ups ---- */

static volatile int32_t wake_ups;

static void count_wake_up(RLRunLoopObserverRef observer, RLRunLoopActivity activity, void *info) {
    RLAtomicIncrement32Barrier(&wake_ups);
}

static void add_wake_up_observer(void *arg) {
    RLRunLoopObserverRef observer = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wake_up, NULL);
    EXAMPLE_CHECK(observer != NULL);
    EXAMPLE_CHECK(RLRunLoopAddObserver(RLRunLoopGetCurrent(), observer, kRLRunLoopCommonModes));
    RLRelease(observer); /* the run loop keeps it until the loop is torn down */
}

/* ---- one start/stop cycle ---- */

static bool cycle(RLWorkerThreadRef worker, int round) {
    exit_handler_runs = 0;
    printf("--- round %d ---\n", round);
    printf("  [main] starting the worker\n");
    EXAMPLE_CHECK(RLWorkerThreadStart(worker));
    RLThreadRef thread = (RLThreadRef)RLRetain(RLWorkerThreadGetThread(worker));
    EXAMPLE_CHECK(thread != NULL);
    printf("  [main] start returned; worker running: %s, its thread executing: %s\n",
           RLWorkerThreadIsRunning(worker) ? "yes" : "no", RLThreadIsExecuting(thread) ? "yes" : "no");

    /* Work queued at once after start: no waiting for the thread needed. */
    for (int i = 1; i <= 3; i++) EXAMPLE_CHECK(RLWorkerThreadPerformAsync(worker, say_hello, (void *)(intptr_t)i));
    SumRequest request = {.upTo = 100, .worker = thread};
    EXAMPLE_CHECK(RLWorkerThreadPerformSync(worker, sum_numbers, &request));
    printf("  [main] sync job returned %ld; it ran on the worker: %s\n", request.result,
           request.onWorker ? "yes" : "NO");

    bool idleOk = true;
    if (round == 1) {
        /* The observer is added from inside the worker's loop; after the
         * sync call returns the worker goes back to sleep. */
        EXAMPLE_CHECK(RLWorkerThreadPerformSync(worker, add_wake_up_observer, NULL));
        RLThreadSleepForTimeInterval(idle_time / 4); /* let it settle into its wait */
        int32_t before = RLAtomicAdd32Barrier(0, &wake_ups);
        RLThreadSleepForTimeInterval(idle_time);
        int32_t idleWakeUps = RLAtomicAdd32Barrier(0, &wake_ups) - before;
        printf("  [main] left the worker idle for %g s: it woke up %d times (no polling)\n", idle_time,
               (int)idleWakeUps);
        idleOk = idleWakeUps == 0;
        EXAMPLE_CHECK(RLWorkerThreadPerformSync(worker, say_hello, (void *)(intptr_t)4));
        printf("  [main] one more request woke it: %d wake-up(s)\n", (int)(RLAtomicAdd32Barrier(0, &wake_ups) - before));
    }

    printf("  [main] stopping the worker\n");
    EXAMPLE_CHECK(RLWorkerThreadStop(worker));
    bool handlerRan = RLAtomicAdd32Barrier(0, (volatile int32_t *)&exit_handler_runs) == 1;
    bool finished = RLThreadIsFinished(thread);
    printf("  [main] stop returned; the will-exit handler had run: %s; the thread is finished: %s; "
           "worker running: %s\n",
           handlerRan ? "yes" : "NO", finished ? "yes" : "NO", RLWorkerThreadIsRunning(worker) ? "yes" : "no");
    RLRelease(thread);
    return request.onWorker && request.result == 5050 && handlerRan && finished && idleOk;
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    idle_time = example_pick(1.0, 0.5, 0.05);
    printf("worker_start_stop: a run-loop thread with synchronous start and stop (%s pace)\n", example_pace_name());

    RLWorkerThreadRef worker = RLWorkerThreadCreate(NULL, "worker");
    EXAMPLE_CHECK(worker != NULL);
    EXAMPLE_CHECK(RLWorkerThreadAddWillExitHandler(worker, will_exit, NULL));

    bool ok = cycle(worker, 1);
    ok = cycle(worker, 2) && ok; /* started again: a new thread */

    EXAMPLE_CHECK(RLRelease(worker));
    printf("worker_start_stop: %s\n", ok ? "all promises kept" : "FAILED");
    return ok ? 0 : 1;
}
