/*
 * delegate_thread.c — a background job that reports to its delegate on the
 * delegate's own thread (the tutorial's threaded XML parser with a
 * delegate, in C).
 *
 * The pattern:
 *   1. A job is created with a delegate (a callback and its context) and
 *      remembers the thread that created it: RLThreadGetCurrent().
 *   2. The job runs on a background thread.
 *   3. When it is done it does not call the delegate directly; it performs
 *      the call on the remembered thread (RLThreadPerform, no waiting). The
 *      delegate therefore runs where it lives, and needs no locks for its
 *      own state.
 *   4. The creating thread keeps running its run loop until the result has
 *      been delivered.
 *
 * Here the "parse" counts the words of a short text and finds the most
 * frequent ones. It is done twice: once started from the main thread and
 * once from a secondary thread ("ui-2"), to show that the result goes back
 * to whichever thread started the job, not always to the main thread.
 */
#include "example_support.h"

#include <ctype.h>

static const char kText[] =
    "a run loop waits for events and runs the code that handles them. a thread that runs a run loop "
    "sleeps while nothing happens and wakes when a source is signalled, a timer fires or a request is "
    "performed on it. the run loop of the main thread drives the user interface, so slow work goes to "
    "another thread and the result comes back to the main thread through its run loop.";

/* ---- the job ---- */

typedef struct ParseResult {
    int words;
    char top[3][16];
    int topCount[3];
} ParseResult;

typedef struct ParseDelegate {
    /* Called on the thread that created the job, from its run loop. */
    void (*parseDidComplete)(const ParseResult *result, void *info);
    void *info;
} ParseDelegate;

typedef struct ParseJob {
    ParseDelegate delegate;
    RLThreadRef delegateThread; /* retained: the thread that created the job */
    RLTimeInterval workTime;    /* pretend the work takes this long */
    ParseResult result;
} ParseJob;

static ParseJob *parse_job_create(ParseDelegate delegate, RLTimeInterval workTime) {
    ParseJob *job = calloc(1, sizeof *job);
    job->delegate = delegate;
    job->delegateThread = (RLThreadRef)RLRetain(RLThreadGetCurrent());
    job->workTime = workTime;
    return job;
}

static void parse_job_destroy(ParseJob *job) {
    RLRelease(job->delegateThread);
    free(job);
}

/* Word frequencies; the text is small, so a linear table will do. */
static void count_words(ParseResult *result) {
    char words[128][16];
    int counts[128] = {0}, distinct = 0;
    result->words = 0;
    for (const char *p = kText; *p;) {
        while (*p && !isalpha((unsigned char)*p)) p++;
        char word[16];
        size_t length = 0;
        while (isalpha((unsigned char)*p)) {
            if (length < sizeof word - 1) word[length++] = *p;
            p++;
        }
        if (length == 0) continue;
        word[length] = '\0';
        result->words++;
        int i = 0;
        while (i < distinct && strcmp(words[i], word) != 0) i++;
        if (i == distinct && distinct < 128) strcpy(words[distinct++], word);
        if (i < 128) counts[i]++;
    }
    /* The three most frequent, earliest first on ties. */
    for (int rank = 0; rank < 3; rank++) {
        int best = -1;
        for (int i = 0; i < distinct; i++)
            if (counts[i] > 0 && (best < 0 || counts[i] > counts[best])) best = i;
        if (best < 0) break;
        strcpy(result->top[rank], words[best]);
        result->topCount[rank] = counts[best];
        counts[best] = 0;
    }
}

/* Runs on the delegate's thread. */
static void deliver_result(void *arg) {
    ParseJob *job = arg;
    job->delegate.parseDidComplete(&job->result, job->delegate.info);
    parse_job_destroy(job);
}

/* Runs on the background thread. */
static void *parse_in_background(void *arg) {
    ParseJob *job = arg;
    char name[64];
    printf("  [%s] parsing in the background\n", example_thread_name(name, sizeof name));
    RLThreadSleepForTimeInterval(job->workTime);
    count_words(&job->result);
    printf("  [%s] parsed %d words; performing parseDidComplete on the delegate's thread\n", name,
           job->result.words);
    /* Not waiting: the delegate's thread runs it when its run loop comes
     * round. The job is freed there. */
    EXAMPLE_CHECK(RLThreadPerform(job->delegateThread, deliver_result, job, NULL, false));
    return NULL;
}

/* A detached, named background thread (RLThreadPerformInBackground would
 * do too; the name makes the output easier to follow). */
static void parse_job_start(ParseJob *job) {
    RLThreadRef thread = RLThreadCreate(NULL, parse_in_background, job);
    EXAMPLE_CHECK(thread != NULL);
    EXAMPLE_CHECK(RLThreadSetName(thread, "parser"));
    EXAMPLE_CHECK(RLThreadStart(thread));
    RLRelease(thread); /* a detached thread keeps itself alive while it runs */
}

/* ---- the delegate ---- */

typedef struct Controller {
    RLThreadRef home;        /* the controller's thread */
    bool delivered;
    bool onHomeThread;
} Controller;

static void controller_parse_did_complete(const ParseResult *result, void *info) {
    Controller *controller = info;
    char name[64];
    controller->delivered = true;
    controller->onHomeThread = RLThreadGetCurrent() == controller->home;
    printf("  [%s] parseDidComplete: %d words; most frequent: \"%s\" x%d, \"%s\" x%d, \"%s\" x%d\n",
           example_thread_name(name, sizeof name), result->words, result->top[0], result->topCount[0],
           result->top[1], result->topCount[1], result->top[2], result->topCount[2]);
    printf("  [%s] delivered on the thread that started the job: %s\n", name,
           controller->onHomeThread ? "yes" : "NO");
    /* The result is in: the starting thread may leave its run loop. */
    EXAMPLE_CHECK(RLRunLoopStop(RLRunLoopGetCurrent()));
}

/* Starts a job with a delegate living on the calling thread, then runs
 * this thread's run loop until the result has been delivered. */
static bool run_job_from_current_thread(RLTimeInterval workTime) {
    char name[64];
    example_thread_name(name, sizeof name);
    Controller controller = {.home = RLThreadGetCurrent()};

    /* Perform requests need the loop to run in a mode with at least one
     * source: a never-signalled source keeps the default mode waiting. */
    RLRunLoopSourceContext context = {.version = 0};
    RLRunLoopSourceRef keepAlive = RLRunLoopSourceCreate(NULL, 0, &context);
    EXAMPLE_CHECK(keepAlive != NULL);
    EXAMPLE_CHECK(RLRunLoopAddSource(RLRunLoopGetCurrent(), keepAlive, kRLRunLoopDefaultMode));

    ParseDelegate delegate = {.parseDidComplete = controller_parse_did_complete, .info = &controller};
    printf("  [%s] starting a parse job; its delegate lives on this thread\n", name);
    parse_job_start(parse_job_create(delegate, workTime));

    printf("  [%s] running this thread's run loop until the result arrives\n", name);
    while (!controller.delivered) RLRunLoopRun();
    printf("  [%s] run loop returned; result delivered\n", name);

    EXAMPLE_CHECK(RLRunLoopRemoveSource(RLRunLoopGetCurrent(), keepAlive, kRLRunLoopDefaultMode));
    RLRelease(keepAlive);
    return controller.onHomeThread;
}

static RLTimeInterval work_time;
static bool secondary_ok;

static void *secondary_thread_main(void *arg) {
    secondary_ok = run_job_from_current_thread(work_time);
    return NULL;
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    work_time = example_pick(0.5, 0.3, 0.0);
    printf("delegate_thread: results delivered on the delegate's own thread (%s pace)\n", example_pace_name());
    EXAMPLE_CHECK(RLThreadSetName(RLThreadGetCurrent(), "main"));

    printf("--- started from the main thread ---\n");
    bool mainOk = run_job_from_current_thread(work_time);

    printf("--- started from a secondary thread ---\n");
    RLThreadRef ui2 = RLThreadCreate(NULL, secondary_thread_main, NULL);
    EXAMPLE_CHECK(ui2 != NULL);
    EXAMPLE_CHECK(RLThreadSetName(ui2, "ui-2"));
    EXAMPLE_CHECK(RLThreadSetJoinable(ui2, true));
    EXAMPLE_CHECK(RLThreadStart(ui2));
    EXAMPLE_CHECK(RLThreadJoin(ui2, NULL));
    RLRelease(ui2);

    bool ok = mainOk && secondary_ok;
    printf("delegate_thread: %s\n", ok ? "both results came back to the thread that asked" : "FAILED");
    return ok ? 0 : 1;
}
