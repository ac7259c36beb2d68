/*
 * bench_memory_cf.c — the memory benchmark's run-loop scenarios
 * (bench_memory.h), written once against CoreFoundation's API and built
 * twice: -DBM_CF against CoreFoundation from the Swift toolchain (clang
 * with -fblocks), and without it against ours through cf_compat.h.
 */
#ifdef BM_CF
#include <CoreFoundation/CoreFoundation.h>
#define BM_PEER bm_peer_cf
#define BM_PEER_NAME "CF"
#else
#include <crunloop/cf_compat.h>
#define BM_PEER bm_peer_rl
#define BM_PEER_NAME "ours"
#endif
#include <pthread.h>

#include "bench_memory.h"

static void bm_fire(CFRunLoopTimerRef t, void *info) { (void)t, (void)info; }

static int bm_add_timers(CFRunLoopRef rl, long n) {
    CFAbsoluteTime when = CFAbsoluteTimeGetCurrent() + 3600;
    for (long i = 0; i < n; i++) {
        CFRunLoopTimerRef t = CFRunLoopTimerCreate(NULL, when + (double)i * 1e-6, 0, 0, 0, bm_fire, NULL);
        if (!t)
            return -1;
        CFRunLoopAddTimer(rl, t, kCFRunLoopDefaultMode);
        CFRelease(t);
    }
    return 0;
}

static int bm_timers(long n) { return bm_add_timers(CFRunLoopGetCurrent(), n); }

static void *bm_thread_main(void *arg) {
    atomic_long *ready = arg;
    if (bm_add_timers(CFRunLoopGetCurrent(), 1) != 0)
        return NULL;
    atomic_fetch_add(ready, 1);
    for (;;) CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1e9, false);
    return NULL;
}

static int bm_thread(size_t stack, atomic_long *ready) {
    pthread_attr_t a;
    pthread_t th;
    if (pthread_attr_init(&a) != 0)
        return -1;
    int rc = pthread_attr_setstacksize(&a, stack);
    if (rc == 0) rc = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (rc == 0) rc = pthread_create(&th, &a, bm_thread_main, ready);
    pthread_attr_destroy(&a);
    return rc == 0 ? 0 : -1;
}

const bm_peer BM_PEER = {BM_PEER_NAME, bm_timers, bm_thread};
