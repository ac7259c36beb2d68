/*
 * message_ports.c — "Configuring a Port-Based Input Source in Core
 * Foundation" from the Run Loops chapter of Apple's Threading Programming
 * Guide: Listings 3-17 (the main thread attaches a CFMessagePort and
 * launches a worker), 3-18 (the main thread receives the worker's check-in)
 * and 3-19 (the worker sets up its own port and checks in), compiled
 * unchanged through <crunloop/cf_compat.h> and run twice:
 *
 *   - threads:   the worker is a thread of this process;
 *   - processes: the worker is a second process (this program, exec'ed
 *                again), talking to the first through the same named ports.
 *
 * Each flow runs in its own process (this program exec'ed with
 * "--flow NAME") so that the main port's fixed name is free again when the
 * next flow starts. After the check-in the main thread sends the worker a
 * few requests and waits for the replies, then tells it to quit.
 *
 * What the guide leaves out and this file fills in (outside the listings):
 * the Multiprocessing Services calls (MPCreateTask, MPCurrentTaskID, MPExit;
 * a thread or a process here), AddPortToListOfActiveThreads, and the
 * worker's ProcessClientRequest. The listings themselves are between the
 * "Listing 3-17" and "end of the listings" markers, as the guide prints them.
 */
#include <crunloop/cf_compat.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- Multiprocessing Services, as far as the listings use them --------- */

typedef OSStatus (*TaskProc)(void *parameter);
typedef int MPTaskID; /* the task's kernel thread id (a process id for a process) */
typedef void *MPQueueID;
typedef size_t ByteCount;
typedef UInt32 MPTaskOptions;
#define noErr 0

static MPTaskID MPCurrentTaskID(void) { return (MPTaskID)syscall(SYS_gettid); }

/* How MPCreateTask runs a task in this run of the example. */
static enum { TASK_THREAD, TASK_PROCESS } g_task_kind;
static const char *g_self; /* this program, for the process form */
static pthread_t g_worker_thread;
static pid_t g_worker_pid;

struct task_start {
    TaskProc entry;
    void *parameter;
    MPTaskID id;
    sem_t started;
};

static void *task_trampoline(void *arg) {
    struct task_start *start = arg;
    TaskProc entry = start->entry;
    void *parameter = start->parameter;
    start->id = MPCurrentTaskID();
    sem_post(&start->started);
    /* ServerThreadEntryPoint ends without a return statement: its value is
     * never looked at. */
    entry(parameter);
    return NULL;
}

static void MPExit(OSStatus status) {
    if (g_task_kind == TASK_PROCESS)
        exit(status);
    pthread_exit(NULL);
}

/* A thread running entry(parameter), or, in the process form, this program
 * exec'ed as "--worker NAME" where the parameter is the main port's name
 * (a CFStringRef the new task owns: the child makes its own copy and this
 * process releases the one it was given). The stack size is a minimum. */
static OSStatus MPCreateTask(TaskProc entryPoint, void *parameter, ByteCount stackSize, MPQueueID notifyQueue,
                             void *terminationParameter1, void *terminationParameter2, MPTaskOptions options,
                             MPTaskID *task) {
    if (g_task_kind == TASK_PROCESS) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
            return -errno;
        if (pid == 0) {
            execl(g_self, g_self, "--worker", (const char *)parameter, (char *)NULL);
            perror("exec");
            _exit(127);
        }
        CFRelease((CFStringRef)parameter);
        g_worker_pid = pid;
        *task = pid;
        return noErr;
    }
    struct task_start start = {.entry = entryPoint, .parameter = parameter};
    if (sem_init(&start.started, 0, 0) != 0)
        return -errno;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stackSize < (1u << 20) ? (1u << 20) : stackSize);
    int err = pthread_create(&g_worker_thread, &attr, task_trampoline, &start);
    pthread_attr_destroy(&attr);
    if (err == 0) {
        while (sem_wait(&start.started) != 0 && errno == EINTR) {
        }
        *task = start.id;
    }
    sem_destroy(&start.started);
    return -err;
}

/* ---- what the listings call but the guide does not show --------------- */

#define kWorkRequest 200
#define kQuitMessage 300

static CFMessagePortRef g_active[4];
static int g_active_count;

/* Keeps a checked-in worker's port (retained) and stops the main loop's
 * wait for the check-in. */
static void AddPortToListOfActiveThreads(CFMessagePortRef port) {
    printf("[main] checked in: %s\n", CFMessagePortGetName(port));
    if (g_active_count < 4)
        g_active[g_active_count++] = (CFMessagePortRef)CFRetain(port);
    CFRunLoopStop(CFRunLoopGetCurrent());
}

/* The worker's port callout: answers work requests; a quit message stops
 * the worker's run loop (CFRunLoopRun in Listing 3-19 then returns). */
static CFDataRef ProcessClientRequest(CFMessagePortRef local, SInt32 msgid, CFDataRef data, void *info) {
    if (msgid == kWorkRequest) {
        char request[64] = "";
        CFIndex n = data ? CFDataGetLength(data) : 0;
        if (n > 0 && n < (CFIndex)sizeof request)
            CFDataGetBytes(data, CFRangeMake(0, n), (UInt8 *)request);
        printf("[worker] request %d: \"%s\"\n", (int)msgid, request);
        CFStringRef answer = CFStringCreateWithFormat(NULL, NULL, CFSTR("done: %s (by %s)"), request,
                                                      CFMessagePortGetName(local));
        CFDataRef reply = CFDataCreate(NULL, (const UInt8 *)answer, (CFIndex)strlen(answer));
        CFRelease(answer);
        return reply; /* the port releases it after sending */
    }
    if (msgid == kQuitMessage) {
        printf("[worker] quit: leaving the run loop\n");
        /* The port to the main thread, which Listing 3-19 keeps as this
         * port's info for the thread's lifetime: the thread is done with it. */
        CFRelease((CFMessagePortRef)info);
        CFRunLoopStop(CFRunLoopGetCurrent());
    }
    return NULL;
}

OSStatus ServerThreadEntryPoint(void *param);
CFDataRef MainThreadResponseHandler(CFMessagePortRef local, SInt32 msgid, CFDataRef data, void *info);

/* The listings as the guide prints them. Two warnings concern the guide's
 * own code, not the mapping: Listing 3-19 declares shouldAbort and
 * returnData without using them, and ends without a return statement. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wreturn-type"

/* ---- Listing 3-17 ------------------------------------------------------ */

#define kThreadStackSize        (8 *4096)

OSStatus MySpawnThread()
{
    // Create a local port for receiving responses.
    CFStringRef myPortName;
    CFMessagePortRef myPort;
    CFRunLoopSourceRef rlSource;
    CFMessagePortContext context = {0, NULL, NULL, NULL, NULL};
    Boolean shouldFreeInfo;

    // Create a string with the port name.
    myPortName = CFStringCreateWithFormat(NULL, NULL, CFSTR("com.myapp.MainThread"));

    // Create the port.
    myPort = CFMessagePortCreateLocal(NULL,
                myPortName,
                &MainThreadResponseHandler,
                &context,
                &shouldFreeInfo);

    if (myPort != NULL)
    {
        // The port was successfully created.
        // Now create a run loop source for it.
        rlSource = CFMessagePortCreateRunLoopSource(NULL, myPort, 0);

        if (rlSource)
        {
            // Add the source to the current run loop.
            CFRunLoopAddSource(CFRunLoopGetCurrent(), rlSource, kCFRunLoopDefaultMode);

            // Once installed, these can be freed.
            CFRelease(myPort);
            CFRelease(rlSource);
        }
    }

    // Create the thread and continue processing.
    MPTaskID        taskID;
    return(MPCreateTask(&ServerThreadEntryPoint,
                    (void*)myPortName,
                    kThreadStackSize,
                    NULL,
                    NULL,
                    NULL,
                    0,
                    &taskID));
}

/* ---- Listing 3-18 ------------------------------------------------------ */

#define kCheckinMessage 100

// Main thread port message handler
CFDataRef MainThreadResponseHandler(CFMessagePortRef local,
                    SInt32 msgid,
                    CFDataRef data,
                    void* info)
{
    if (msgid == kCheckinMessage)
    {
        CFMessagePortRef messagePort;
        CFStringRef threadPortName;
        CFIndex bufferLength = CFDataGetLength(data);
        UInt8* buffer = CFAllocatorAllocate(NULL, bufferLength, 0);

        CFDataGetBytes(data, CFRangeMake(0, bufferLength), buffer);
        threadPortName = CFStringCreateWithBytes (NULL, buffer, bufferLength, kCFStringEncodingASCII, FALSE);

        // You must obtain a remote message port by name.
        messagePort = CFMessagePortCreateRemote(NULL, (CFStringRef)threadPortName);

        if (messagePort)
        {
            // Retain and save the thread’s comm port for future reference.
            AddPortToListOfActiveThreads(messagePort);

            // Since the port is retained by the previous function, release
            // it here.
            CFRelease(messagePort);
        }

        // Clean up.
        CFRelease(threadPortName);
        CFAllocatorDeallocate(NULL, buffer);
    }
    else
    {
        // Process other messages.
    }

    return NULL;
}

/* ---- Listing 3-19 ------------------------------------------------------ */

OSStatus ServerThreadEntryPoint(void* param)
{
    // Create the remote port to the main thread.
    CFMessagePortRef mainThreadPort;
    CFStringRef portName = (CFStringRef)param;

    mainThreadPort = CFMessagePortCreateRemote(NULL, portName);

    // Free the string that was passed in param.
    CFRelease(portName);

    // Create a port for the worker thread.
    CFStringRef myPortName = CFStringCreateWithFormat(NULL, NULL, CFSTR("com.MyApp.Thread-%d"), MPCurrentTaskID());

    // Store the port in this thread’s context info for later reference.
    CFMessagePortContext context = {0, mainThreadPort, NULL, NULL, NULL};
    Boolean shouldFreeInfo;
    Boolean shouldAbort = TRUE;

    CFMessagePortRef myPort = CFMessagePortCreateLocal(NULL,
                myPortName,
                &ProcessClientRequest,
                &context,
                &shouldFreeInfo);

    if (shouldFreeInfo)
    {
        // Couldn't create a local port, so kill the thread.
        MPExit(0);
    }

    CFRunLoopSourceRef rlSource = CFMessagePortCreateRunLoopSource(NULL, myPort, 0);
    if (!rlSource)
    {
        // Couldn't create a local port, so kill the thread.
        MPExit(0);
    }

    // Add the source to the current run loop.
    CFRunLoopAddSource(CFRunLoopGetCurrent(), rlSource, kCFRunLoopDefaultMode);

    // Once installed, these can be freed.
    CFRelease(myPort);
    CFRelease(rlSource);

    // Package up the port name and send the check-in message.
    CFDataRef returnData = nil;
    CFDataRef outData;
    CFIndex stringLength = CFStringGetLength(myPortName);
    UInt8* buffer = CFAllocatorAllocate(NULL, stringLength, 0);

    CFStringGetBytes(myPortName,
                CFRangeMake(0,stringLength),
                kCFStringEncodingASCII,
                0,
                FALSE,
                buffer,
                stringLength,
                NULL);

    outData = CFDataCreate(NULL, buffer, stringLength);

    CFMessagePortSendRequest(mainThreadPort, kCheckinMessage, outData, 0.1, 0.0, NULL, NULL);

    // Clean up thread data structures.
    CFRelease(outData);
    CFAllocatorDeallocate(NULL, buffer);

    // Enter the run loop.
    CFRunLoopRun();
}

/* ---- end of the listings ----------------------------------------------- */
#pragma GCC diagnostic pop

/* ---- the main thread's side of one flow -------------------------------- */

/* Waits (bounded) until no port serves the main port's name: an earlier
 * run of this example, or of the other flow, may still be closing it. */
static bool wait_for_free_main_name(void) {
    for (int i = 0; i < 200; i++) {
        CFMessagePortRef probe = CFMessagePortCreateRemote(NULL, CFSTR("com.myapp.MainThread"));
        if (!probe)
            return true;
        CFMessagePortInvalidate(probe);
        CFRelease(probe);
        usleep(50 * 1000);
    }
    return false;
}

static int run_flow(const char *flow) {
    g_task_kind = strcmp(flow, "processes") == 0 ? TASK_PROCESS : TASK_THREAD;
    printf("== flow: the worker is a %s ==\n", g_task_kind == TASK_PROCESS ? "second process" : "thread");
    if (!wait_for_free_main_name()) {
        printf("[main] the port name com.myapp.MainThread stays taken by another program\n");
        return 1;
    }
    printf("[main] MySpawnThread: port com.myapp.MainThread on the main run loop, then the worker\n");
    if (MySpawnThread() != noErr) {
        printf("[main] MySpawnThread failed: %s\n", RLErrorGetLast().message);
        return 1;
    }
    /* Listing 3-18's handler stops this wait when the check-in arrives. */
    for (int i = 0; i < 100 && g_active_count == 0; i++)
        CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.1, false);
    if (g_active_count == 0) {
        printf("[main] no check-in\n");
        return 1;
    }
    CFMessagePortRef worker = g_active[0];
    int failures = 0;
    for (int job = 1; job <= 3; job++) {
        char text[32];
        snprintf(text, sizeof text, "job %d", job);
        CFDataRef request = CFDataCreate(NULL, (const UInt8 *)text, (CFIndex)strlen(text));
        CFDataRef reply = NULL;
        SInt32 status = CFMessagePortSendRequest(worker, kWorkRequest, request, 5.0, 5.0, kCFRunLoopDefaultMode, &reply);
        CFRelease(request);
        if (status != kCFMessagePortSuccess || !reply) {
            printf("[main] request %d failed: status %d\n", job, (int)status);
            failures++;
            continue;
        }
        CFStringRef answer = CFStringCreateWithBytes(NULL, CFDataGetBytePtr(reply), CFDataGetLength(reply),
                                                     kCFStringEncodingUTF8, FALSE);
        printf("[main] reply %d: \"%s\"\n", job, answer ? answer : "(not text)");
        if (answer)
            CFRelease(answer);
        CFRelease(reply);
    }
    SInt32 status = CFMessagePortSendRequest(worker, kQuitMessage, NULL, 5.0, 0.0, NULL, NULL);
    printf("[main] quit sent: %s\n", status == kCFMessagePortSuccess ? "ok" : "failed");
    if (g_task_kind == TASK_PROCESS) {
        int wstatus = 0;
        while (waitpid(g_worker_pid, &wstatus, 0) < 0 && errno == EINTR) {
        }
        printf("[main] worker process exited with status %d\n", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    } else {
        pthread_join(g_worker_thread, NULL);
        printf("[main] worker thread finished\n");
    }
    for (int i = 0; i < g_active_count; i++)
        CFRelease(g_active[i]);
    return failures == 0 && status == kCFMessagePortSuccess ? 0 : 1;
}

/* Runs this program again as "--flow NAME" and waits for it. */
static int run_flow_process(const char *flow) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        execl(g_self, g_self, "--flow", flow, (char *)NULL);
        perror("exec");
        _exit(127);
    }
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines, in order, across processes */
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("readlink /proc/self/exe");
        return 1;
    }
    self[n] = '\0';
    g_self = self;

    if (argc == 3 && strcmp(argv[1], "--worker") == 0) {
        /* The worker process: Listing 3-19 on this process's main thread. */
        g_task_kind = TASK_PROCESS;
        ServerThreadEntryPoint((void *)CFStringCreateWithCString(NULL, argv[2], kCFStringEncodingUTF8));
        printf("[worker] run loop returned; process exits\n");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--flow") == 0)
        return run_flow(argv[2]);

    int status = run_flow_process("threads");
    status |= run_flow_process("processes");
    printf("message_ports: %s\n", status == 0 ? "OK" : "FAILED");
    return status;
}
