/*
 * listing_2_3.c — the Threading Programming Guide's Listing 2-3, "Checking
 * for an exit condition during a long job", in C and runnable.
 *
 * A secondary thread works through a long job in chunks. After each chunk
 * it runs its run loop once without waiting (RunInMode with 0 seconds: the
 * guide's runUntilDate:[NSDate date]) so that a message that arrived on its
 * input source gets handled, then looks at the exit flag. The flag lives in
 * the thread dictionary under "ThreadShouldExitNow", because the input
 * source's handler cannot reach the loop's local variable.
 *
 * Who tells the thread to stop: the main thread. The input source's
 * schedule callback (which runs when the source is installed) hands the
 * source and the thread's run loop to the main thread; once the worker has
 * done a few chunks, the main thread signals the source and wakes the run
 * loop. The handler runs on the worker, sets the flag, and the worker
 * leaves its loop after the current chunk — long before the job is done.
 */
#include "example_support.h"

static const char kExitKey[] = "ThreadShouldExitNow";
enum { kTotalChunks = 100000, kSignalAfterChunks = 5 };

/* What the worker shares with the main thread, under `cond`. */
static struct {
    RLConditionRef cond;
    RLRunLoopSourceRef source; /* set by the schedule callback */
    RLRunLoopRef runLoop;      /* the worker's run loop */
    long chunksDone;
    bool cancelled;            /* the source's cancel callback ran */
} shared;

static RLTimeInterval chunk_time;

/* ---- the custom input source (version 0) ---- */

/* The source object the callbacks receive as info. */
typedef struct ExitRequestSource {
    RLRunLoopSourceRef source;
} ExitRequestSource;

/* On the worker, when the source is added to its run loop: tell the main
 * thread where to send the exit request. */
static void source_schedule(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    EXAMPLE_CHECK(RLConditionLock(shared.cond));
    shared.source = ((ExitRequestSource *)info)->source;
    shared.runLoop = rl;
    EXAMPLE_CHECK(RLConditionBroadcast(shared.cond));
    EXAMPLE_CHECK(RLConditionUnlock(shared.cond));
}

/* On the worker, inside its run loop, once per signal: set the flag. */
static void source_perform(void *info) {
    printf("  [worker] input source fired: setting %s in the thread dictionary\n", kExitKey);
    EXAMPLE_CHECK(RLThreadDictionarySetValue(RLThreadGetCurrent(), kExitKey, (void *)(intptr_t)true, NULL));
}

/* When the source leaves the run loop: the main thread must not use it any
 * more. */
static void source_cancel(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    EXAMPLE_CHECK(RLConditionLock(shared.cond));
    shared.cancelled = true;
    shared.source = NULL;
    shared.runLoop = NULL;
    EXAMPLE_CHECK(RLConditionUnlock(shared.cond));
    printf("  [worker] input source cancelled (removed from the run loop)\n");
}

static RLRunLoopSourceRef install_custom_input_source(ExitRequestSource *holder) {
    RLRunLoopSourceContext context = {.version = 0,
                                      .info = holder,
                                      .schedule = source_schedule,
                                      .cancel = source_cancel,
                                      .perform = source_perform};
    holder->source = RLRunLoopSourceCreate(NULL, 0, &context);
    EXAMPLE_CHECK(holder->source != NULL);
    return holder->source;
}

/* ---- the thread's main routine (the listing) ---- */

static void do_one_chunk(long chunk) {
    /* Stands for a slice of real work. */
    RLThreadSleepForTimeInterval(chunk_time);
    EXAMPLE_CHECK(RLConditionLock(shared.cond));
    shared.chunksDone = chunk;
    EXAMPLE_CHECK(RLConditionBroadcast(shared.cond));
    EXAMPLE_CHECK(RLConditionUnlock(shared.cond));
}

static void *thread_main_routine(void *arg) {
    bool moreWorkToDo = true;
    bool exitNow = false;
    RLRunLoopRef runLoop = RLRunLoopGetCurrent();
    RLThreadRef thread = RLThreadGetCurrent();

    /* Add the exitNow flag to the thread dictionary. */
    EXAMPLE_CHECK(RLThreadDictionarySetValue(thread, kExitKey, (void *)(intptr_t)exitNow, NULL));

    /* Install an input source. */
    ExitRequestSource holder;
    RLRunLoopSourceRef source = install_custom_input_source(&holder);
    EXAMPLE_CHECK(RLRunLoopAddSource(runLoop, source, kRLRunLoopDefaultMode));

    long chunk = 0;
    while (moreWorkToDo && !exitNow) {
        /* Do one chunk of a larger body of work here. */
        do_one_chunk(++chunk);
        if (chunk <= kSignalAfterChunks || chunk % 10 == 0) printf("  [worker] chunk %ld done\n", chunk);
        if (chunk == kTotalChunks) moreWorkToDo = false;

        /* Run the run loop, but time out at once if the input source is not
         * waiting to fire. */
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);

        /* Did an input source handler change the exit flag? */
        void *value = NULL;
        EXAMPLE_CHECK(RLThreadDictionaryGetValue(thread, kExitKey, &value));
        exitNow = value != NULL;
    }
    printf("  [worker] exit flag seen after chunk %ld of %d; leaving the job early\n", chunk, kTotalChunks);

    EXAMPLE_CHECK(RLRunLoopRemoveSource(runLoop, source, kRLRunLoopDefaultMode));
    RLRelease(source);
    return (void *)(intptr_t)chunk;
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    chunk_time = example_pick(0.1, 0.05, 0.001);
    printf("listing_2_3: a long job that checks an exit flag set by an input source (%s pace)\n",
           example_pace_name());
    shared.cond = RLConditionCreate();
    EXAMPLE_CHECK(shared.cond != NULL);

    RLThreadRef worker = RLThreadCreate(NULL, thread_main_routine, NULL);
    EXAMPLE_CHECK(worker != NULL);
    EXAMPLE_CHECK(RLThreadSetName(worker, "long job"));
    EXAMPLE_CHECK(RLThreadSetJoinable(worker, true));
    EXAMPLE_CHECK(RLThreadStart(worker));

    /* Wait until the source is installed and a few chunks are done. */
    EXAMPLE_CHECK(RLConditionLock(shared.cond));
    while (shared.source == NULL || shared.chunksDone < kSignalAfterChunks) EXAMPLE_CHECK(RLConditionWait(shared.cond));
    printf("  [main] the worker has done %d chunks; signalling its input source\n", kSignalAfterChunks);
    /* Signal and wake while holding the lock: the cancel callback cannot
     * run in between, so the source and run loop are still the worker's. */
    EXAMPLE_CHECK(RLRunLoopSourceSignal(shared.source));
    EXAMPLE_CHECK(RLRunLoopWakeUp(shared.runLoop));
    EXAMPLE_CHECK(RLConditionUnlock(shared.cond));

    void *result = NULL;
    EXAMPLE_CHECK(RLThreadJoin(worker, &result));
    RLRelease(worker);
    long chunks = (long)(intptr_t)result;
    printf("  [main] worker returned after %ld of %d chunks; source cancelled: %s\n", chunks, kTotalChunks,
           shared.cancelled ? "yes" : "no");
    bool ok = chunks >= kSignalAfterChunks && chunks < kTotalChunks && shared.cancelled;
    printf("listing_2_3: %s\n", ok ? "the job stopped early on request" : "FAILED");
    RLRelease(shared.cond);
    return ok ? 0 : 1;
}
