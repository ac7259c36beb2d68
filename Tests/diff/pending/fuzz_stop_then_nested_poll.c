/* Seed 41821 (minimized): a block stops the loop, then another block of
 * the same pass nests a poll. CF forgets the stop (the outer run goes on
 * and sleeps; the helper stops it later); ours keeps it and the outer run
 * returns Stopped after the pass. CF's behaviour looks like an artefact of
 * its per-run data: copy it, or list it as an intended difference.
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/pending/fuzz_stop_then_nested_poll.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main blk 1 common\n"
    "main blk 0 default\n"
    "main run default W all\n"
    "B0 blk 3 common\n"
    "B0 run default 0 rash\n"
    "B1 stop\n"
    ;

void scenario(void) { fz_run_text(program); }
