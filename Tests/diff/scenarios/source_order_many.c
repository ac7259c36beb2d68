/* Thousands of signalled sources: one pass performs each signalled source
 * once, by ascending `order`, whatever the order of signalling; signalling
 * twice is once; a source removed while signalled and added again keeps
 * its signal; with returnAfterSourceHandled, each run performs the lowest
 * order left. */
#include "diff.h"

#include <stdint.h>
#include <stdlib.h>

enum { N = 3000, M = 40 };

static long seen[N + 1];
static long nseen;

static void perform(void *info) { seen[nseen++] = (long)(intptr_t)info; }

/* A fixed scramble of 0..n-1 (n and 7919 are coprime). */
static long scramble(long i, long n) { return (i * 7919 + 11) % n; }

static void report(const char *label) {
    long ascending = 1;
    unsigned long sum = 0;
    for (long j = 0; j < nseen; j++) {
        if (j > 0 && seen[j - 1] >= seen[j])
            ascending = 0;
        sum = sum * 31 + (unsigned long)seen[j];
    }
    trace("%s: %ld performed, ascending %ld, first %ld, last %ld, hash %lu", label, nseen, ascending,
          nseen ? seen[0] : -1, nseen ? seen[nseen - 1] : -1, sum);
    nseen = 0;
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    static CFRunLoopSourceRef s[N];
    for (long i = 0; i < N; i++) {
        /* order = the index, minus a bit: negative orders too */
        CFRunLoopSourceContext ctx = {0};
        ctx.info = (void *)(intptr_t)(i - 100);
        ctx.perform = perform;
        s[i] = CFRunLoopSourceCreate(NULL, i - 100, &ctx);
    }
    for (long i = 0; i < N; i++)
        CFRunLoopAddSource(rl, s[scramble(i, N)], kCFRunLoopDefaultMode);
    for (long i = 0; i < N; i += 7)
        CFRunLoopAddSource(rl, s[i], kCFRunLoopDefaultMode); /* already in: a no-op */
    for (long i = 0; i < N; i++)
        CFRunLoopSourceSignal(s[scramble(i, N)]);
    for (long i = 0; i < N; i += 3)
        CFRunLoopSourceSignal(s[i]);
    run_mode("all", kCFRunLoopDefaultMode, 0, false);
    report("all signalled");
    run_mode("again", kCFRunLoopDefaultMode, 0, false);
    report("nothing left");

    /* Every other one, then some removed while signalled and added back. */
    for (long i = 0; i < N; i += 2)
        CFRunLoopSourceSignal(s[scramble(i, N)]);
    for (long i = 0; i < N; i += 10) {
        CFRunLoopRemoveSource(rl, s[i], kCFRunLoopDefaultMode);
        CFRunLoopAddSource(rl, s[i], kCFRunLoopDefaultMode);
    }
    run_mode("half", kCFRunLoopDefaultMode, 0, false);
    report("half signalled");

    /* One source per run. */
    for (long i = 0; i < M; i++)
        CFRunLoopSourceSignal(s[scramble(i, M)]);
    for (long i = 0; i < M; i++) {
        CFRunLoopRunResult r = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, true);
        if (r != kCFRunLoopRunHandledSource)
            trace("run %ld: result %d", i, (int)r);
    }
    report("one per run");

    for (long i = 0; i < N; i++) {
        CFRunLoopSourceInvalidate(s[i]);
        CFRelease(s[i]);
    }
}
