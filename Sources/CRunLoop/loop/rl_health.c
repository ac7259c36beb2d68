/*
 * rl_health.c — the slow-callout report (RLRunLoopHealth.h): thresholds
 * per loop and per process, the handler, the default stderr line and its
 * rate limit. The timing itself is inline at each callout (rl_health.h).
 */
#include "rl_health.h"
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* The process's threshold, in seconds (0: none). */
static _Atomic double process_threshold;

/* The handler: a record with a reference per report being delivered, so
 * that a handler replaced meanwhile (from inside itself, or by another
 * thread) is freed only when no report uses it any more. NULL: stderr. */
typedef struct handler_rec {
    RLSlowCalloutHandler fn;
    void *info;
#if __BLOCKS__
    void (^block)(const RLSlowCalloutReport *);
#endif
    int refs; /* the handler slot's own, plus one per delivery; under handler_mu */
} handler_rec;

static pthread_mutex_t handler_mu = PTHREAD_MUTEX_INITIALIZER;
static handler_rec *handler;

/* The stderr lines' rate limit: the second the window began, lines printed
 * in it, reports dropped since the last line. Under stderr_mu. */
static pthread_mutex_t stderr_mu = PTHREAD_MUTEX_INITIALIZER;
static double window_start = -1;
static int window_lines;
static unsigned long dropped;

static const char *const kind_names[kRLCalloutKindCount] = {
    "timer", "source", "observer", "perform", "fd", "socket", "port", "signal", "main queue", "stream",
};

const char *RLCalloutKindGetName(RLCalloutKind kind) {
    return (unsigned)kind < kRLCalloutKindCount ? kind_names[kind] : "unknown";
}

/* Moves the process's count for a threshold going from `was` to `now`. */
static void count_threshold(double was, double now) {
    if (was == 0 && now > 0)
        atomic_fetch_add_explicit(&rl__health_on, 1, memory_order_relaxed);
    else if (was > 0 && now == 0)
        atomic_fetch_sub_explicit(&rl__health_on, 1, memory_order_relaxed);
}

static void init_from_env(void) {
    const char *v = getenv("RL_SLOW_CALLOUT_MS");
    if (!v || !*v)
        return;
    char *end;
    double ms = strtod(v, &end);
    if (*end != '\0' || !(ms > 0) || isinf(ms)) {
        fprintf(stderr, "crunloop: RL_SLOW_CALLOUT_MS=%s ignored (a positive number of milliseconds)\n", v);
        return;
    }
    double was = atomic_exchange(&process_threshold, ms / 1000.0);
    count_threshold(was, ms / 1000.0);
}

void rl__health_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_from_env);
}

void rl__health_set_threshold(RLRunLoopRef rl, double seconds) {
    rl__health_init(); /* the environment's value never overrides a later call */
    _Atomic double *slot = rl ? &rl->slow_threshold : &process_threshold;
    double was = atomic_exchange(slot, seconds);
    count_threshold(was, seconds);
}

double rl__health_threshold(RLRunLoopRef rl) {
    rl__health_init();
    return atomic_load(rl ? &rl->slow_threshold : &process_threshold);
}

void rl__health_loop_gone(RLRunLoopRef rl) {
    double was = atomic_exchange(&rl->slow_threshold, 0.0);
    count_threshold(was, 0);
}

static void drop_rec(handler_rec *h) {
    if (!h)
        return;
    pthread_mutex_lock(&handler_mu);
    bool last = --h->refs == 0;
    pthread_mutex_unlock(&handler_mu);
    if (!last)
        return;
#if __BLOCKS__
    if (h->block)
        Block_release(h->block);
#endif
    free(h);
}

static void set_rec(handler_rec *h) {
    pthread_mutex_lock(&handler_mu);
    handler_rec *old = handler;
    handler = h;
    pthread_mutex_unlock(&handler_mu);
    drop_rec(old);
}

void RLSetSlowCalloutHandler(RLSlowCalloutHandler fn, void *info) {
    handler_rec *h = NULL;
    if (fn) {
        h = calloc(1, sizeof *h);
        if (!h) {
            rl__fail(kRLErrorNoMemory, "RLSetSlowCalloutHandler", "out of memory: the handler is unchanged");
            return;
        }
        h->fn = fn;
        h->info = info;
        h->refs = 1;
    }
    set_rec(h);
}

#if __BLOCKS__
void RLSetSlowCalloutHandlerBlock(void (^block)(const RLSlowCalloutReport *)) {
    handler_rec *h = NULL;
    if (block) {
        h = calloc(1, sizeof *h);
        if (!h) {
            rl__fail(kRLErrorNoMemory, "RLSetSlowCalloutHandlerBlock", "out of memory: the handler is unchanged");
            return;
        }
        h->block = Block_copy(block);
        h->refs = 1;
    }
    set_rec(h);
}
#endif

static void print_line(const RLSlowCalloutReport *r) {
    pthread_mutex_lock(&stderr_mu);
    double now = rl__health_now();
    if (window_start < 0 || now - window_start >= 1.0) {
        window_start = now;
        window_lines = 0;
    }
    if (window_lines >= kRLSlowCalloutStderrBurst) {
        dropped++;
        pthread_mutex_unlock(&stderr_mu);
        return;
    }
    window_lines++;
    unsigned long before = dropped;
    dropped = 0;
    if (before)
        fprintf(stderr, "crunloop: %lu slow-callout report(s) not printed (at most %d lines a second)\n", before,
                (int)kRLSlowCalloutStderrBurst);
    fprintf(stderr, "crunloop: slow callout: %s %s held the run loop %.3f ms in mode %s (threshold %.3f ms): %s\n",
            RLCalloutKindGetName(r->kind), r->functionName, r->duration * 1e3, r->mode ? r->mode : "(none)",
            r->threshold * 1e3, r->objectDescription ? r->objectDescription : "(no description)");
    pthread_mutex_unlock(&stderr_mu);
}

void rl__fd_set_owner(RLFileDescriptorRef f, const void *owner, const rl__callout_owner *how) {
    f->ctx.owner_close = (uintptr_t)owner | (f->ctx.owner_close & 1u); /* keeps the close bit */
    f->ctx.owner_how = how;
}

/* The library object an fd source calls for (a socket, a port, a signal
 * source: rl__fd_set_owner): its kind and function replace the fd
 * source's own, its description the fd object's. */
static const void *owner_of(const void *obj, RLCalloutKind *kind, const void **fn) {
    bool fd_object = *kind == kRLCalloutFileDescriptor || *kind == kRLCalloutSocket || *kind == kRLCalloutPort ||
                     *kind == kRLCalloutSignal || *kind == kRLCalloutStream;
    if (!fd_object || !obj)
        return obj;
    const struct RLRunLoopSource *s = obj; /* the fd source (RLRunLoopRun.c's do_fds) */
    const void *owner = rl__fd_owner(s);
    const struct rl__callout_owner *how = rl__fd_owner_how(s);
    if (!owner || !how)
        return rl__fdsrc_owner(s); /* a program's RLFileDescriptor */
    *kind = (RLCalloutKind)how->kind;
    *fn = how->function ? how->function(owner) : NULL;
    return owner;
}

void rl__health_after(RLRunLoopRef rl, double took, RLCalloutKind kind, const void *fn, const void *obj,
                      const char *mode) {
    rl__stats_callout_took(rl, took);
    double limit = atomic_load_explicit(&rl->slow_threshold, memory_order_relaxed);
    if (limit == 0)
        limit = atomic_load_explicit(&process_threshold, memory_order_relaxed);
    if (limit == 0 || took <= limit)
        return;
    const void *what = owner_of(obj, &kind, &fn);
    char addr[32], *desc = what ? RLCopyDescription(what) : NULL;
    const char *name = NULL;
    Dl_info di;
    if (fn && dladdr(fn, &di) && di.dli_sname && di.dli_saddr == fn)
        name = di.dli_sname;
    if (!name) {
        snprintf(addr, sizeof addr, "%p", fn);
        name = addr;
    }
    RLSlowCalloutReport r = {rl, kind, fn, name, desc, mode, took, limit};
    pthread_mutex_lock(&handler_mu);
    handler_rec *h = handler;
    if (h)
        h->refs++;
    pthread_mutex_unlock(&handler_mu);
    if (!h) {
        print_line(&r);
    } else {
#if __BLOCKS__
        if (h->block)
            h->block(&r);
        else
#endif
            h->fn(&r, h->info);
        drop_rec(h);
    }
    free(desc);
}
