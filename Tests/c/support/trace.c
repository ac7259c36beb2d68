#include "trace.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static char trace[8192];
static bool overflowed;
static pthread_mutex_t trace_mutex = PTHREAD_MUTEX_INITIALIZER;

void rl_trace_add(const char *word) {
    pthread_mutex_lock(&trace_mutex);
    size_t len = strlen(trace), need = strlen(word) + (len ? 1 : 0);
    if (len + need >= sizeof trace) {
        overflowed = true;
    } else {
        if (len)
            trace[len++] = ' ';
        memcpy(trace + len, word, strlen(word) + 1);
    }
    pthread_mutex_unlock(&trace_mutex);
}

void rl_trace_addf(const char *fmt, ...) {
    char word[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(word, sizeof word, fmt, ap);
    va_end(ap);
    rl_trace_add(word);
}

void rl_trace_clear(void) {
    pthread_mutex_lock(&trace_mutex);
    trace[0] = '\0';
    overflowed = false;
    pthread_mutex_unlock(&trace_mutex);
}

const char *rl_trace_get(void) {
    return overflowed ? "(the trace outgrew its 8192 bytes)" : trace;
}

int rl_trace_setup(void **state) {
    rl_trace_clear();
    return 0;
}

const char *rl_trace_activity_name(RLRunLoopActivity activity) {
    switch (activity) {
    case kRLRunLoopEntry: return "E";
    case kRLRunLoopBeforeTimers: return "BT";
    case kRLRunLoopBeforeSources: return "BS";
    case kRLRunLoopBeforeWaiting: return "BW";
    case kRLRunLoopAfterWaiting: return "AW";
    case kRLRunLoopExit: return "X";
    default: return "?";
    }
}

void rl_trace_observer(RLRunLoopObserverRef observer, RLRunLoopActivity activity, void *info) {
    rl_trace_add(rl_trace_activity_name(activity));
}
