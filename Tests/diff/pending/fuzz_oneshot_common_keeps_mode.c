/* Seeds 538 and 1915 (minimized from 1915): a one-shot timer in the common modes
 * fires in one common mode and is invalidated; the other common mode (A) then
 * holds only a block: CF's run of A returns Finished after the block, ours
 * waits (the invalidated timer still counts in A).
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/pending/fuzz_oneshot_common_keeps_mode.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main ctim 2 past once 2 fn\n"
    "main addc A\n"
    "main add T 2 common\n"
    "main run default -1 all\n"
    "main blk 1 common\n"
    "main run A W all\n"
    ;

void scenario(void) { fz_run_text(program); }
