/* Sources are compared as CF compares them: same order and callbacks, and
 * the context's equal callback (without one, the same info). Adding a
 * source equal to one already in the mode changes nothing: the twin counts
 * as contained, is not scheduled, and signalling it performs nothing;
 * removing the twin removes the one in the mode. */
#include "diff.h"

typedef struct key {
    int id;
    const char *name;
} key;

static Boolean key_equal(const void *a, const void *b) { return ((const key *)a)->id == ((const key *)b)->id; }
static CFHashCode key_hash(const void *a) { return (CFHashCode)((const key *)a)->id; }
static void key_perform(void *info) { trace("%s perform", ((key *)info)->name); }
static void key_schedule(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    trace("%s schedule %s", ((key *)info)->name, mode_str(mode));
}
static void key_cancel(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    trace("%s cancel %s", ((key *)info)->name, mode_str(mode));
}

static CFRunLoopSourceRef make(key *k, CFIndex order, bool with_equal) {
    CFRunLoopSourceContext c = {0, k, NULL, NULL, NULL, with_equal ? key_equal : NULL, with_equal ? key_hash : NULL,
                                key_schedule, key_cancel, key_perform};
    return CFRunLoopSourceCreate(NULL, order, &c);
}

static void pair(const char *what, CFRunLoopSourceRef a, CFRunLoopSourceRef b) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    trace("-- %s", what);
    CFRunLoopAddSource(rl, a, kCFRunLoopDefaultMode);
    CFRunLoopAddSource(rl, b, kCFRunLoopDefaultMode);
    trace("contains first %d, second %d", CFRunLoopContainsSource(rl, a, kCFRunLoopDefaultMode),
          CFRunLoopContainsSource(rl, b, kCFRunLoopDefaultMode));
    CFRunLoopSourceSignal(a);
    CFRunLoopSourceSignal(b);
    run_mode("run", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopSourceSignal(b);
    run_mode("run, second signalled", kCFRunLoopDefaultMode, 0, false);
    CFRunLoopRemoveSource(rl, b, kCFRunLoopDefaultMode);
    trace("after removing the second: contains first %d, second %d",
          CFRunLoopContainsSource(rl, a, kCFRunLoopDefaultMode), CFRunLoopContainsSource(rl, b, kCFRunLoopDefaultMode));
    CFRunLoopRemoveSource(rl, a, kCFRunLoopDefaultMode);
    CFRunLoopSourceInvalidate(a);
    CFRunLoopSourceInvalidate(b);
    CFRelease(a);
    CFRelease(b);
}

void scenario(void) {
    key k1 = {1, "k1"}, k1b = {1, "k1-twin"}, k2 = {2, "k2"};
    pair("equal by the equal callback", make(&k1, 0, true), make(&k1b, 0, true));
    pair("not equal by the equal callback", make(&k1, 0, true), make(&k2, 0, true));
    pair("same info, no equal callback", make(&k1, 0, false), make(&k1, 0, false));
    pair("different info, no equal callback", make(&k1, 0, false), make(&k1b, 0, false));
    pair("equal info, different order", make(&k1, 0, true), make(&k1b, 1, true));
}
