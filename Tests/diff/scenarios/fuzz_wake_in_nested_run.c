/* From seed 11868 (minimized): a block wakes the loop, then another block
 * of the same pass nests a run of mode A whose only block empties A. The
 * wake-up, given before the outer pass's wait, is still pending when the
 * nested run starts: its first wait returns at once and it ends Finished;
 * the outer run's wait then sleeps (the helper stops it). The seed had a
 * stop instead of the wake-up: the outer run then differs on purpose
 * (fuzz_stop_then_nested_poll, docs/runloop.md).
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_wake_in_nested_run.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main blk 3 common\n"
    "main blk 1 default\n"
    "main run default W rash\n"
    "B1 run A W all\n"
    "B3 wake\n"
    "B3 fn 2 A\n"
    ;

void scenario(void) { fz_run_text(program); }
