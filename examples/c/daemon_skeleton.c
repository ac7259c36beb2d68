/*
 * daemon_skeleton.c — the skeleton of a long-running service: Unix signals
 * handled on the main run loop, worker threads stopped with the worker
 * lifecycle.
 *
 *   - SIGTERM and SIGINT stop it cleanly: the job timer goes, each worker
 *     is stopped (RLWorkerThreadStop returns once its thread has finished
 *     its queued work, run its will-exit handler and exited), the main
 *     loop returns, and the process exits with status 0. The signal
 *     sources stay until the process exits: a second stop signal (Ctrl-C
 *     twice, a service manager's SIGTERM after a Ctrl-C) is read and
 *     ignored. Invalidating the last source of SIGTERM would restore its
 *     default action, and one arriving during the shutdown would end the
 *     process half-way (status 143).
 *   - SIGHUP reloads: the configuration generation goes up and the workers
 *     are restarted with it (stop returns when the old thread is gone,
 *     start when the new one is ready for work).
 *
 * The signals arrive as ordinary callouts on the main thread
 * (RLSignalSource reads them from a signalfd in the loop's epoll set): no
 * code runs in a signal handler, so the callouts may do anything.
 * The sources are created before any other thread starts, so every thread
 * inherits the blocked mask and only the main loop sees the signals (see
 * RLSignalSource.h).
 *
 * Meanwhile a timer on the main loop hands a job to the workers in turn.
 *
 *   daemon_skeleton            a job every 1 s
 *   daemon_skeleton --tour     a job every 0.2 s
 *   daemon_skeleton --fast     a job every 20 ms (tests)
 * It runs until a signal stops it: `kill -HUP PID`, `kill PID` or Ctrl-C.
 */
#include "example_support.h"

#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

enum { kWorkers = 2 };

typedef struct Daemon {
    RLWorkerThreadRef workers[kWorkers];
    RLRunLoopTimerRef jobTimer;
    RLSignalSourceRef signals[3];
    int generation; /* of the configuration; SIGHUP reloads it */
    int reloads;
    int nextWorker;
    int jobsSent;
    atomic_int jobsDone;
    bool stopping;
} Daemon;

typedef struct Job {
    Daemon *daemon;
    int number;
    int generation;
} Job;

/* ---- the workers ---- */

/* Runs on a worker thread. */
static void do_job(void *arg) {
    Job *job = arg;
    char name[64];
    printf("  [%s] job %d (configuration %d)\n", example_thread_name(name, sizeof name), job->number,
           job->generation);
    atomic_fetch_add(&job->daemon->jobsDone, 1);
}

static void worker_will_exit(RLThreadRef thread, void *info) {
    (void)thread;
    (void)info;
    char name[64];
    printf("  [%s] will-exit handler: the worker thread is finishing\n", example_thread_name(name, sizeof name));
}

static void start_workers(Daemon *daemon) {
    for (int i = 0; i < kWorkers; i++) {
        EXAMPLE_CHECK(RLWorkerThreadStart(daemon->workers[i]));
        printf("  [main] worker-%d started (configuration %d)\n", i + 1, daemon->generation);
    }
}

/* Each Stop returns once that worker's thread is gone: its queued jobs
 * ran, its will-exit handler ran, it was joined. */
static void stop_workers(Daemon *daemon) {
    for (int i = 0; i < kWorkers; i++) {
        EXAMPLE_CHECK(RLWorkerThreadStop(daemon->workers[i]));
        printf("  [main] worker-%d stopped\n", i + 1);
    }
}

/* ---- the main loop's timer ---- */

static void send_job(RLRunLoopTimerRef timer, void *info) {
    (void)timer;
    Daemon *daemon = info;
    Job *job = malloc(sizeof *job);
    EXAMPLE_CHECK(job != NULL);
    *job = (Job){.daemon = daemon, .number = ++daemon->jobsSent, .generation = daemon->generation};
    RLWorkerThreadRef worker = daemon->workers[daemon->nextWorker];
    daemon->nextWorker = (daemon->nextWorker + 1) % kWorkers;
    /* The request owns the job: freed after it ran, or if it is dropped. */
    EXAMPLE_CHECK(RLWorkerThreadPerformAsyncWithRelease(worker, do_job, job, free));
}

/* ---- signals, on the main thread ---- */

static const char *signal_name(int signum) {
    switch (signum) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    default: return "?";
    }
}

static void reload(Daemon *daemon) {
    daemon->generation++;
    daemon->reloads++;
    printf("  [main] reload: configuration %d; restarting the workers\n", daemon->generation);
    stop_workers(daemon);
    start_workers(daemon);
    printf("  [main] reload done\n");
}

static void shut_down(Daemon *daemon) {
    daemon->stopping = true;
    printf("  [main] stopping: no more jobs; stopping the workers\n");
    EXAMPLE_CHECK(RLRunLoopTimerInvalidate(daemon->jobTimer));
    stop_workers(daemon);
    /* The signal sources are not invalidated: see the top of the file. */
    EXAMPLE_CHECK(RLRunLoopStop(RLRunLoopGetCurrent()));
}

static void on_signal(RLSignalSourceRef source, int signum, RLIndex count, void *info) {
    (void)source;
    Daemon *daemon = info;
    char name[64];
    printf("  [%s] %s received", example_thread_name(name, sizeof name), signal_name(signum));
    if (count > 1) printf(" (%ld deliveries merged)", (long)count);
    printf("\n");
    if (daemon->stopping) return;
    if (signum == SIGHUP)
        reload(daemon);
    else
        shut_down(daemon);
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0); /* whoever reads our output sees each line at once */
    RLTimeInterval jobInterval = example_pick(1.0, 0.2, 0.02);
    EXAMPLE_CHECK(RLThreadSetName(RLThreadGetCurrent(), "main"));
    Daemon daemon = {.generation = 1};

    /* First the signal sources, while this is the only thread: the
     * threads started later inherit the blocked signals. */
    const int watched[3] = {SIGTERM, SIGINT, SIGHUP};
    RLSignalSourceContext context = {.version = 0, .info = &daemon};
    for (int i = 0; i < 3; i++) {
        daemon.signals[i] = RLSignalSourceCreate(NULL, watched[i], on_signal, &context);
        EXAMPLE_CHECK(daemon.signals[i] != NULL);
        EXAMPLE_CHECK(RLRunLoopAddSignalSource(RLRunLoopGetCurrent(), daemon.signals[i], kRLRunLoopDefaultMode));
    }

    for (int i = 0; i < kWorkers; i++) {
        char name[32];
        snprintf(name, sizeof name, "worker-%d", i + 1);
        daemon.workers[i] = RLWorkerThreadCreate(NULL, name);
        EXAMPLE_CHECK(daemon.workers[i] != NULL);
        EXAMPLE_CHECK(RLWorkerThreadAddWillExitHandler(daemon.workers[i], worker_will_exit, NULL) != 0);
    }
    start_workers(&daemon);

    RLRunLoopTimerContext timerContext = {.version = 0, .info = &daemon};
    daemon.jobTimer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + jobInterval, jobInterval, 0, 0,
                                           send_job, &timerContext);
    EXAMPLE_CHECK(daemon.jobTimer != NULL);
    EXAMPLE_CHECK(RLRunLoopAddTimer(RLRunLoopGetCurrent(), daemon.jobTimer, kRLRunLoopDefaultMode));

    printf("daemon_skeleton: ready (pid %ld, %s pace): SIGHUP reloads, SIGTERM or SIGINT stops\n", (long)getpid(),
           example_pace_name());
    RLRunLoopRunResult result;
    do {
        result = RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e10, false);
    } while (!daemon.stopping && result != kRLRunLoopRunFinished);

    RLRelease(daemon.jobTimer);
    /* Still valid and in the main loop, which holds them until exit. */
    for (int i = 0; i < 3; i++) RLRelease(daemon.signals[i]);
    for (int i = 0; i < kWorkers; i++) RLRelease(daemon.workers[i]);
    int done = atomic_load(&daemon.jobsDone);
    printf("daemon_skeleton: stopped cleanly: %d jobs sent, %d done, %d reloads\n", daemon.jobsSent, done,
           daemon.reloads);
    return done == daemon.jobsSent ? 0 : 1;
}
