/*
 * bench_thread_cf.c — CoreFoundation's run loop (the one Swift ships on
 * Linux, from libFoundation.so) as the peer of the perform round trip in
 * bench_thread.c. The usual CF way to hand work to a thread that sits in its
 * run loop: CFRunLoopPerformBlock + CFRunLoopWakeUp. Needs clang -fblocks.
 */
#include <CoreFoundation/CoreFoundation.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "bench_thread_peers.h"

struct bth_cf_worker {
    pthread_t thread;
    _Atomic(CFRunLoopRef) rl;
    atomic_bool done;
    int cpu;
    sem_t reply;
};

static void cf_nothing(void *info) { (void)info; }

static void *cf_worker_main(void *arg) {
    bth_cf_worker *w = arg;
    if (!bth_pin_self(w->cpu)) abort();
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFRunLoopSourceContext ctx = {0};
    ctx.perform = cf_nothing;
    CFRunLoopSourceRef keep = CFRunLoopSourceCreate(NULL, 0, &ctx);
    CFRunLoopAddSource(rl, keep, kCFRunLoopDefaultMode);
    CFRetain(rl); /* the sender uses it until after its last wake-up */
    atomic_store(&w->rl, rl);
    while (!atomic_load(&w->done)) CFRunLoopRun();
    CFRunLoopRemoveSource(rl, keep, kCFRunLoopDefaultMode);
    CFRelease(keep);
    return NULL;
}

bth_cf_worker *bth_cf_worker_start(int cpu) {
    bth_cf_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->cpu = cpu;
    sem_init(&w->reply, 0, 0);
    if (pthread_create(&w->thread, NULL, cf_worker_main, w) != 0) {
        free(w);
        return NULL;
    }
    while (atomic_load(&w->rl) == NULL) sched_yield();
    return w;
}

void bth_cf_round_trips(bth_cf_worker *w, double *out, long n) {
    CFRunLoopRef rl = atomic_load(&w->rl);
    sem_t *reply = &w->reply;
    for (long i = 0; i < n; i++) {
        int64_t t0 = bth_now_ns();
        CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{ sem_post(reply); });
        CFRunLoopWakeUp(rl);
        while (sem_wait(reply) != 0) {
        }
        if (out) out[i] = (double)(bth_now_ns() - t0);
    }
}

void bth_cf_worker_stop(bth_cf_worker *w) {
    CFRunLoopRef rl = atomic_load(&w->rl);
    /* The flag is set on the worker, so its loop cannot miss it between
     * two runs. */
    CFRunLoopPerformBlock(rl, kCFRunLoopDefaultMode, ^{
        atomic_store(&w->done, true);
        CFRunLoopStop(CFRunLoopGetCurrent());
    });
    CFRunLoopWakeUp(rl);
    pthread_join(w->thread, NULL);
    CFRelease(rl);
    sem_destroy(&w->reply);
    free(w);
}
