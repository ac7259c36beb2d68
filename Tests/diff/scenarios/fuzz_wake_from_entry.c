/* Seed 1873 (minimized): a WakeUp from an Entry observer, then a pass that
 * empties the mode (its only block runs): wake-ups count from the start of
 * a run, so the first wait returns at once and the run ends Finished
 * instead of sleeping.
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_wake_from_entry.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main cobs 0 0x1 rep 2\n"
    "main blk 1 default\n"
    "main run default W all\n"
    "main blk 1 default\n"
    "main runall\n"
    "O0 wake\n"
    "B1 add O 0 default\n"
    ;

void scenario(void) { fz_run_text(program); }
