/*
 * rl_stats.c — a loop's statistics (RLRunLoopHealth.h): the counts its
 * thread keeps as it runs (inline in rl_health.h and here), the timing
 * histograms, copies and resets from any thread.
 *
 * Only the loop's thread writes a loop's counts and histograms; a reset
 * therefore does not clear them but keeps a copy of them as they were
 * (rl->stats_base), and a copy of the statistics is the difference.
 */
#include "rl_stats.h"
#include "rl_histogram.h"
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The histograms of a loop with timing on. */
typedef struct rl__loop_timing {
    rl__histogram callouts;
    rl__histogram lateness;
} rl__loop_timing;

/* The counts and histograms at the last reset. */
typedef struct rl__stats_base {
    uint64_t passes, sleeps, wakeups[kRLWakeUpCauseCount], callouts[kRLCalloutKindCount];
    uint64_t asleep_ns, busy_ns;
    rl__loop_timing timing; /* zero when timing was never on */
} rl__stats_base;

/* Serializes copies and resets (of any loop): rare, never on a loop's
 * path. */
static pthread_mutex_t base_mu = PTHREAD_MUTEX_INITIALIZER;

_Atomic int rl__health_on;

#if RL_HAVE_PROBES
/* The probes' semaphores (rl_probes.h), where sys/sdt.h's notes point. */
#define RL__PROBE_SEMAPHORE_DEF(name) \
    __attribute__((section(".probes"))) volatile unsigned short crunloop_##name##_semaphore
RL__PROBE_SEMAPHORE_DEF(pass_start);
RL__PROBE_SEMAPHORE_DEF(pass_end);
RL__PROBE_SEMAPHORE_DEF(sleep_start);
RL__PROBE_SEMAPHORE_DEF(sleep_end);
RL__PROBE_SEMAPHORE_DEF(callout_start);
RL__PROBE_SEMAPHORE_DEF(callout_end);
RL__PROBE_SEMAPHORE_DEF(wakeup);
RL__PROBE_SEMAPHORE_DEF(timer_fire);
#endif

double rl__health_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *const cause_names[kRLWakeUpCauseCount] = {
    "timer", "source", "fd", "perform", "explicit", "main queue",
};

const char *RLWakeUpCauseGetName(RLWakeUpCause cause) {
    return (unsigned)cause < kRLWakeUpCauseCount ? cause_names[cause] : "unknown";
}

static uint64_t ns_of(double s) { return s <= 0 ? 0 : (uint64_t)(s * 1e9 + 0.5); }

static uint64_t get(const _Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

const uint8_t rl__wake_cause_of[kRLCalloutKindCount] = {
    [kRLCalloutTimer] = kRLWakeUpTimer,
    [kRLCalloutSource] = kRLWakeUpSource,
    [kRLCalloutObserver] = kRLWakeUpExplicit, /* never asked: observers do not settle a wake-up */
    [kRLCalloutPerform] = kRLWakeUpPerform,
    [kRLCalloutFileDescriptor] = kRLWakeUpFileDescriptor,
    [kRLCalloutSocket] = kRLWakeUpFileDescriptor,
    [kRLCalloutPort] = kRLWakeUpFileDescriptor,
    [kRLCalloutSignal] = kRLWakeUpFileDescriptor,
    [kRLCalloutMainQueue] = kRLWakeUpMainQueue,
    [kRLCalloutStream] = kRLWakeUpFileDescriptor,
};

/* A wake-up that no callout followed: explicit. */
static void settle_wake(RLRunLoopRef rl) { rl__stats_settle_wake(rl); }

/* Whether rl keeps times (its thread: a relaxed load of its own line). */
static bool timed(RLRunLoopRef rl) { return atomic_load_explicit(&rl->timing_on, memory_order_relaxed); }

/* Ends the busy stretch that began at rl->busy_from, at now. */
static void close_busy(RLRunLoopRef rl, double now) {
    if (rl->busy_from > 0 && now > rl->busy_from)
        rl__count(&rl->counters.busy_ns, ns_of(now - rl->busy_from));
    rl->busy_from = now;
}

/* Times are kept with timing on only (two clock reads per run and per
 * sleep); busy_from 0 means "not timed since": a stretch that began before
 * timing was turned on is not counted. */
void rl__stats_run_enter(RLRunLoopRef rl) {
    if (!timed(rl)) {
        rl->run_depth++;
        rl->busy_from = 0;
        return;
    }
    double now = rl__health_now();
    if (rl->run_depth++ == 0)
        rl->busy_from = now; /* the time between runs is not the loop's */
    else
        close_busy(rl, now); /* a nested run: the outer one's stretch ends here */
}

void rl__stats_run_leave(RLRunLoopRef rl) {
    if (timed(rl))
        close_busy(rl, rl__health_now());
    else
        rl->busy_from = 0;
    settle_wake(rl);
    if (rl->run_depth > 0)
        rl->run_depth--;
}

void rl__stats_sleep_begin_timed(RLRunLoopRef rl) { close_busy(rl, rl__health_now()); }

void rl__stats_sleep_end_timed(RLRunLoopRef rl) {
    double now = rl__health_now();
    if (rl->busy_from > 0 && now > rl->busy_from)
        rl__count(&rl->counters.asleep_ns, ns_of(now - rl->busy_from));
    rl->busy_from = now;
}

void rl__stats_timer_late(RLRunLoopRef rl, double late_s) {
    rl__loop_timing *t = atomic_load_explicit(&rl->timing, memory_order_acquire);
    if (t && atomic_load_explicit(&rl->timing_on, memory_order_relaxed))
        rl__hist_record(&t->lateness, ns_of(late_s));
}

void rl__stats_callout_took(RLRunLoopRef rl, double took_s) {
    rl__loop_timing *t = atomic_load_explicit(&rl->timing, memory_order_acquire);
    if (t && atomic_load_explicit(&rl->timing_on, memory_order_relaxed))
        rl__hist_record(&t->callouts, ns_of(took_s));
}

void rl__stats_free(RLRunLoopRef rl) {
    if (atomic_load_explicit(&rl->timing_on, memory_order_relaxed))
        atomic_fetch_sub_explicit(&rl__health_on, 1, memory_order_relaxed);
    free(atomic_load_explicit(&rl->timing, memory_order_relaxed));
    free(rl->stats_base);
}

size_t rl__stats_bytes(RLRunLoopRef rl) {
    size_t n = atomic_load_explicit(&rl->timing, memory_order_acquire) ? sizeof(rl__loop_timing) : 0;
    pthread_mutex_lock(&base_mu);
    n += rl->stats_base ? sizeof(rl__stats_base) : 0;
    pthread_mutex_unlock(&base_mu);
    return n;
}

bool rl__stats_set_timing(RLRunLoopRef rl, bool enabled, const char *fn) {
    if (enabled && !atomic_load_explicit(&rl->timing, memory_order_acquire)) {
        rl__loop_timing *t = calloc(1, sizeof *t);
        if (!t)
            return rl__fail(kRLErrorNoMemory, fn, "out of memory for the loop's histograms");
        rl__loop_timing *none = NULL;
        if (!atomic_compare_exchange_strong(&rl->timing, &none, t))
            free(t); /* another thread made them first */
    }
    bool was = atomic_exchange(&rl->timing_on, enabled);
    if (!was && enabled)
        atomic_fetch_add_explicit(&rl__health_on, 1, memory_order_relaxed);
    else if (was && !enabled)
        atomic_fetch_sub_explicit(&rl__health_on, 1, memory_order_relaxed);
    return true;
}

bool rl__stats_timing(RLRunLoopRef rl) { return atomic_load(&rl->timing_on); }

/* The counts now, into b (its timing part too when there are histograms). */
static void take(RLRunLoopRef rl, rl__stats_base *b) {
    const rl__loop_counters *c = &rl->counters;
    b->passes = get(&c->passes);
    b->sleeps = get(&c->sleeps);
    for (int i = 0; i < kRLWakeUpCauseCount; i++)
        b->wakeups[i] = get(&c->wakeups[i]);
    for (int i = 0; i < kRLCalloutKindCount; i++)
        b->callouts[i] = get(&c->callouts[i]);
    b->asleep_ns = get(&c->asleep_ns);
    b->busy_ns = get(&c->busy_ns);
    rl__loop_timing *t = atomic_load_explicit(&rl->timing, memory_order_acquire);
    if (t) {
        rl__hist_copy(&t->callouts, &b->timing.callouts);
        rl__hist_copy(&t->lateness, &b->timing.lateness);
    }
}

static void summarize(const rl__histogram *h, RLLatencySummary *out) {
    out->count = atomic_load_explicit(&h->total, memory_order_relaxed);
    out->p50 = (double)rl__hist_quantile(h, 0.50) * 1e-9;
    out->p90 = (double)rl__hist_quantile(h, 0.90) * 1e-9;
    out->p99 = (double)rl__hist_quantile(h, 0.99) * 1e-9;
    out->p999 = (double)rl__hist_quantile(h, 0.999) * 1e-9;
    out->max = (double)atomic_load_explicit(&h->max, memory_order_relaxed) * 1e-9;
}

bool rl__stats_copy(RLRunLoopRef rl, RLRunLoopStatistics *out, const char *fn) {
    rl__stats_base *now = calloc(1, sizeof *now);
    if (!now)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    take(rl, now);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&base_mu);
    const rl__stats_base *b = rl->stats_base;
    static const rl__stats_base zero;
    if (!b)
        b = &zero;
    out->passes = now->passes - b->passes;
    out->sleeps = now->sleeps - b->sleeps;
    for (int i = 0; i < kRLWakeUpCauseCount; i++)
        out->wakeUps[i] = now->wakeups[i] - b->wakeups[i];
    for (int i = 0; i < kRLCalloutKindCount; i++)
        out->callouts[i] = now->callouts[i] - b->callouts[i];
    out->timeAsleep = (double)(now->asleep_ns - b->asleep_ns) * 1e-9;
    out->timeBusy = (double)(now->busy_ns - b->busy_ns) * 1e-9;
    rl__histogram *d = malloc(sizeof *d);
    if (d) {
        rl__hist_sub(&now->timing.callouts, &b->timing.callouts, d);
        summarize(d, &out->calloutDuration);
        rl__hist_sub(&now->timing.lateness, &b->timing.lateness, d);
        summarize(d, &out->timerLateness);
        free(d);
    }
    pthread_mutex_unlock(&base_mu);
    out->timing = atomic_load(&rl->timing_on);
    free(now);
    return d != NULL || rl__fail(kRLErrorNoMemory, fn, "out of memory");
}

bool rl__stats_reset(RLRunLoopRef rl, const char *fn) {
    rl__stats_base *now = calloc(1, sizeof *now);
    if (!now)
        return rl__fail(kRLErrorNoMemory, fn, "out of memory");
    take(rl, now);
    pthread_mutex_lock(&base_mu);
    rl__stats_base *old = rl->stats_base;
    rl->stats_base = now;
    pthread_mutex_unlock(&base_mu);
    free(old);
    return true;
}
