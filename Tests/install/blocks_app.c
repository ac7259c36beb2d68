/* Built by scripts/check-install.sh with clang -fblocks against the
 * installed library and, beside it, the Swift toolchain's BlocksRuntime, as
 * a Swift program that links libcrunloop.so would be: blocks made here are
 * copied and released inside the library (perform requests, a timer). */
#include <crunloop/crunloop.h>
#include <Block.h>
#include <stdio.h>

int main(void) {
    __block int performed = 0, ticks = 0;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopPerformBlock(rl, kRLRunLoopDefaultMode, ^{ performed++; });
    RLRunLoopTimerRef timer = RLRunLoopTimerCreateWithHandler(NULL, RLAbsoluteTimeGetCurrent(), 0.001, 0, 0,
                                                              ^(RLRunLoopTimerRef t) {
                                                                  if (++ticks == 3) RLRunLoopTimerInvalidate(t);
                                                              });
    if (!timer)
        return 1;
    RLRunLoopAddTimer(rl, timer, kRLRunLoopDefaultMode);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, false);
    RLRelease(timer);
    void (^copied)(void) = Block_copy(^{ performed++; });
    copied();
    Block_release(copied);
    printf("performed=%d ticks=%d\n", performed, ticks);
    return (performed == 2 && ticks == 3) ? 0 : 2;
}
