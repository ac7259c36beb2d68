/*
 * port_checkin.c — the Threading Programming Guide's port-based worker
 * (Listings 3-12 to 3-15, "Configuring a Port-Based Input Source"), in C
 * with RLPort where the guide uses NSMachPort:
 *
 *   - the main thread creates its port, adds it to its run loop and starts a
 *     worker thread, handing it the port (launchThread, Listing 3-12);
 *   - the worker creates its own port, adds it to its run loop and sends a
 *     check-in message to the main thread's port, with its own port as the
 *     message's send port (Listings 3-14 and 3-15);
 *   - the main thread's handler keeps that send port (Listing 3-13) and from
 *     then on sends the worker jobs through it; the worker answers each job
 *     through the send port of the job's message;
 *   - a last message tells the worker to exit; its thread ends.
 *
 * Every message crosses threads as a run-loop source callout: no locks in
 * this file, and the order of the replies is the order of the jobs.
 */
#include "example_support.h"

#include <crunloop/RLPort.h>

#include <pthread.h>

enum { kCheckinMessage = 100, kJobMessage = 101, kResultMessage = 102, kExitMessage = 103 };
enum { kJobs = 5 };

/* ---- the worker (Listings 3-14, 3-15) ---- */

typedef struct Worker {
    RLPortRef distantPort; /* the main thread's port */
    bool exit;
} Worker;

static void worker_handle_port_message(RLPortRef port, RLPortMessageRef message, void *info) {
    Worker *worker = info;
    switch (RLPortMessageGetMsgid(message)) {
    case kJobMessage: {
        RLDataRef job = (RLDataRef)RLPortMessageGetComponent(message, 0);
        char text[64];
        snprintf(text, sizeof text, "%.*s done", (int)RLDataGetLength(job), (const char *)RLDataGetBytePtr(job));
        RLDataRef result = RLDataCreate(NULL, (const uint8_t *)text, (RLIndex)strlen(text));
        RLTypeRef components[] = {result};
        EXAMPLE_CHECK(RLPortSendBeforeDate(RLPortMessageGetSendPort(message), RLAbsoluteTimeGetCurrent() + 5,
                                           kResultMessage, components, 1, port));
        RLRelease(result);
        break;
    }
    case kExitMessage:
        printf("  [worker] exit message: leaving the run loop\n");
        worker->exit = true;
        break;
    }
}

static void *LaunchThreadWithPort(void *inData) {
    Worker worker = {.distantPort = inData};
    RLThreadSetName(RLThreadGetCurrent(), "worker");

    /* sendCheckinMessage: (Listing 3-15): our own port, in our run loop... */
    RLPortContext context = {0, &worker, NULL, NULL, NULL};
    RLPortRef myPort = RLPortCreate(NULL, worker_handle_port_message, &context);
    EXAMPLE_CHECK(myPort != NULL);
    EXAMPLE_CHECK(RLRunLoopAddPort(RLRunLoopGetCurrent(), myPort, kRLRunLoopDefaultMode));
    /* ...and the check-in message, whose send port is ours. */
    printf("  [worker] checking in with the main thread\n");
    EXAMPLE_CHECK(RLPortSendBeforeDate(worker.distantPort, RLAbsoluteTimeGetCurrent() + 5, kCheckinMessage, NULL, 0,
                                       myPort));

    while (!worker.exit)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true);
    RLPortInvalidate(myPort);
    RLRelease(myPort);
    return NULL;
}

/* ---- the main thread (Listings 3-12, 3-13) ---- */

typedef struct MainState {
    RLPortRef distantPort; /* the worker's port, from its check-in */
    int results;
} MainState;

static void main_handle_port_message(RLPortRef port, RLPortMessageRef message, void *info) {
    MainState *state = info;
    switch (RLPortMessageGetMsgid(message)) {
    case kCheckinMessage:
        /* Listing 3-13: keep the worker's port for later use. */
        state->distantPort = (RLPortRef)RLRetain(RLPortMessageGetSendPort(message));
        printf("  [main] check-in received: the worker's port is kept\n");
        break;
    case kResultMessage: {
        RLDataRef result = (RLDataRef)RLPortMessageGetComponent(message, 0);
        printf("  [main] %.*s\n", (int)RLDataGetLength(result), (const char *)RLDataGetBytePtr(result));
        state->results++;
        break;
    }
    }
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    printf("port check-in (Listings 3-12 to 3-15), %s pace\n", example_pace_name());
    MainState state = {0};

    /* Listing 3-12, launchThread: our port, in our run loop, handed to the
     * new thread. */
    RLPortContext context = {0, &state, NULL, NULL, NULL};
    RLPortRef myPort = RLPortCreate(NULL, main_handle_port_message, &context);
    EXAMPLE_CHECK(myPort != NULL);
    EXAMPLE_CHECK(RLRunLoopAddPort(RLRunLoopGetCurrent(), myPort, kRLRunLoopDefaultMode));
    pthread_t worker;
    EXAMPLE_CHECK(pthread_create(&worker, NULL, LaunchThreadWithPort, myPort) == 0);

    while (!state.distantPort)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true);

    for (int i = 1; i <= kJobs; i++) {
        char job[16];
        snprintf(job, sizeof job, "job %d", i);
        RLDataRef data = RLDataCreate(NULL, (const uint8_t *)job, (RLIndex)strlen(job));
        RLTypeRef components[] = {data};
        EXAMPLE_CHECK(RLPortSendBeforeDate(state.distantPort, RLAbsoluteTimeGetCurrent() + 5, kJobMessage,
                                           components, 1, myPort));
        RLRelease(data);
        printf("  [main] sent %s\n", job);
    }
    while (state.results < kJobs)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true);

    EXAMPLE_CHECK(RLPortSendBeforeDate(state.distantPort, RLAbsoluteTimeGetCurrent() + 5, kExitMessage, NULL, 0,
                                       NULL));
    pthread_join(worker, NULL);
    printf("  [main] worker gone; its port is %s\n", RLPortIsValid(state.distantPort) ? "still valid" : "invalid");
    RLRelease(state.distantPort);
    RLRunLoopRemovePort(RLRunLoopGetCurrent(), myPort, kRLRunLoopDefaultMode);
    RLPortInvalidate(myPort);
    RLRelease(myPort);
    printf("port check-in: done (%d results)\n", state.results);
    return 0;
}
