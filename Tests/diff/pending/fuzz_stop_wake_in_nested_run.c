/* Seed 11868 (minimized): a block stops the loop (CFRunLoopStop also wakes
 * it), then another block nests a run of mode A whose only block empties A.
 * In CF the stop's wake-up is still pending: the nested run's first wait
 * returns at once and the run ends Finished; ours sleeps (the wake-up was
 * dropped), until the helper stops it.
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/pending/fuzz_stop_wake_in_nested_run.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main blk 3 common\n"
    "main blk 1 default\n"
    "main run default W rash\n"
    "B1 run A W all\n"
    "B3 stop\n"
    "B3 fn 2 A\n"
    ;

void scenario(void) { fz_run_text(program); }
