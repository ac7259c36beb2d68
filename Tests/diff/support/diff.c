/*
 * diff.c — trace printing, name normalization, threads and the main()
 * shared by every differential scenario (see diff.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf */
#endif
#include "diff.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static bool collecting;
static char *collected[256];
static int ncollected;

void trace(const char *fmt, ...) {
    va_list ap;
    pthread_mutex_lock(&trace_lock);
    va_start(ap, fmt);
    if (collecting && ncollected < 256) {
        if (vasprintf(&collected[ncollected], fmt, ap) >= 0) ncollected++;
    } else {
        vprintf(fmt, ap);
        putchar('\n');
        fflush(stdout);
    }
    va_end(ap);
    pthread_mutex_unlock(&trace_lock);
}

void collect_begin(void) {
    pthread_mutex_lock(&trace_lock);
    collecting = true;
    pthread_mutex_unlock(&trace_lock);
}

static int cmp_str(const void *a, const void *b);

void collect_end(void) {
    pthread_mutex_lock(&trace_lock);
    collecting = false;
    qsort(collected, (size_t)ncollected, sizeof collected[0], cmp_str);
    for (int i = 0; i < ncollected; i++) {
        printf("%s%s", i ? " | " : "{", collected[i]);
        free(collected[i]);
    }
    printf(ncollected ? "}\n" : "{}\n");
    fflush(stdout);
    ncollected = 0;
    pthread_mutex_unlock(&trace_lock);
}

/* A ring of per-thread buffers so a trace line may hold several names. */
static char *scratch(void) {
    static __thread char ring[8][512];
    static __thread unsigned next;
    return ring[next++ % 8];
}

const char *result_str(CFRunLoopRunResult r) {
    switch ((int)r) {
    case kCFRunLoopRunFinished: return "Finished";
    case kCFRunLoopRunStopped: return "Stopped";
    case kCFRunLoopRunTimedOut: return "TimedOut";
    case kCFRunLoopRunHandledSource: return "HandledSource";
    }
    char *b = scratch();
    snprintf(b, 512, "result(%d)", (int)r);
    return b;
}

const char *activity_str(CFRunLoopActivity a) {
    switch (a) {
    case kCFRunLoopEntry: return "Entry";
    case kCFRunLoopBeforeTimers: return "BeforeTimers";
    case kCFRunLoopBeforeSources: return "BeforeSources";
    case kCFRunLoopBeforeWaiting: return "BeforeWaiting";
    case kCFRunLoopAfterWaiting: return "AfterWaiting";
    case kCFRunLoopExit: return "Exit";
    default: break;
    }
    char *b = scratch();
    snprintf(b, 512, "activity(0x%lx)", (unsigned long)a);
    return b;
}

static const char *normalize(const char *name) {
    if (!name) return "(null)";
    if (strcmp(name, "kCFRunLoopDefaultMode") == 0 || strcmp(name, "kRLRunLoopDefaultMode") == 0)
        return "default";
    if (strcmp(name, "kCFRunLoopCommonModes") == 0 || strcmp(name, "kRLRunLoopCommonModes") == 0)
        return "common";
    return name;
}

#ifdef DIFF_CF
static const char *cfstring_c(CFStringRef s) {
    char *b = scratch();
    if (!s) return NULL;
    if (!CFStringGetCString(s, b, 512, kCFStringEncodingUTF8)) strcpy(b, "(unprintable)");
    return b;
}
#endif

const char *mode_str(CFRunLoopMode mode) {
#ifdef DIFF_CF
    return normalize(cfstring_c(mode));
#else
    return normalize(mode);
#endif
}

const char *current_mode(CFRunLoopRef rl) {
    char *b = scratch();
    CFStringRef m = CFRunLoopCopyCurrentMode(rl);
    snprintf(b, 512, "%s", m ? mode_str(m) : "(none)");
    if (m) CFRelease(m);
    return b;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const char *all_modes(CFRunLoopRef rl) {
    char *names[64];
    int n = 0;
    CFArrayRef modes = CFRunLoopCopyAllModes(rl);
    for (CFIndex i = 0; modes && i < CFArrayGetCount(modes) && n < 64; i++)
        names[n++] = strdup(mode_str((CFStringRef)CFArrayGetValueAtIndex(modes, i)));
    if (modes) CFRelease(modes);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    char *b = scratch();
    b[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i) strncat(b, " ", 511 - strlen(b));
        strncat(b, names[i], 511 - strlen(b));
        free(names[i]);
    }
    return b;
}

CFRunLoopRunResult run_mode(const char *label, CFRunLoopMode mode, CFTimeInterval seconds,
                            bool returnAfterSourceHandled) {
    CFRunLoopRunResult r = CFRunLoopRunInMode(mode, seconds, returnAfterSourceHandled);
    trace("%s: %s", label, result_str(r));
    return r;
}

static void observer_cb(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    trace("%s %s", (const char *)info, activity_str(a));
}

CFRunLoopObserverRef trace_observer(const char *label, CFOptionFlags activities, CFIndex order) {
    CFRunLoopObserverContext ctx = {0, (void *)label, NULL, NULL, NULL};
    return CFRunLoopObserverCreate(NULL, activities, true, order, observer_cb, &ctx);
}

struct traced_source {
    const char *label;
    bool verbose;
};

static void source_schedule(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    struct traced_source *s = info;
    if (s->verbose) trace("%s schedule %s", s->label, mode_str(mode));
}

static void source_cancel(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    struct traced_source *s = info;
    if (s->verbose) trace("%s cancel %s", s->label, mode_str(mode));
}

static void source_perform(void *info) {
    struct traced_source *s = info;
    trace("%s perform", s->label);
}

static void source_free(const void *info) { free((void *)info); }

CFRunLoopSourceRef trace_source(const char *label, CFIndex order, bool verbose) {
    struct traced_source *s = malloc(sizeof *s);
    s->label = label;
    s->verbose = verbose;
    CFRunLoopSourceContext ctx = {0, s, NULL, source_free, NULL, NULL, NULL, source_schedule, source_cancel,
                                  source_perform};
    return CFRunLoopSourceCreate(NULL, order, &ctx);
}

struct spawn_arg {
    void (*fn)(void *);
    void *arg;
};

static void *spawn_main(void *p) {
    struct spawn_arg a = *(struct spawn_arg *)p;
    free(p);
    a.fn(a.arg);
    return NULL;
}

pthread_t spawn(void (*fn)(void *), void *arg) {
    struct spawn_arg *a = malloc(sizeof *a);
    a->fn = fn;
    a->arg = arg;
    pthread_t t;
    if (pthread_create(&t, NULL, spawn_main, a) != 0) {
        trace("pthread_create failed");
        exit(2);
    }
    return t;
}

void join(pthread_t t) { pthread_join(t, NULL); }

void sleep_s(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

bool sem_wait_s(sem_t *sem) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    while (sem_timedwait(sem, &ts) != 0) {
        if (errno == EINTR) continue;
        trace("sem timeout");
        return false;
    }
    return true;
}

bool wait_until_waiting(CFRunLoopRef rl) {
    for (int i = 0; i < 10000; i++) {
        if (CFRunLoopIsWaiting(rl)) return true;
        sleep_s(0.001);
    }
    trace("never saw the loop waiting");
    return false;
}

int held_count;

const void *held_retain(const void *info) {
    held_count++;
    return info;
}

void held_release(const void *info) {
    (void)info;
    held_count--;
}

static void scenario_thread(void *unused) { scenario(); }

/* Defined (true) by the scenarios that must run on the main thread: the
 * main dispatch queue's. */
extern const bool diff_on_main_thread __attribute__((weak));

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(60); /* a hang fails the scenario instead of the whole run */
    if (&diff_on_main_thread && diff_on_main_thread)
        scenario();
    else
        join(spawn(scenario_thread, NULL));
    trace("end");
    return 0;
}
