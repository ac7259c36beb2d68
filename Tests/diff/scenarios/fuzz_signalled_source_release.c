/* Seed 73230 (minimized): a source is signalled, added, removed and
 * released. CF destroys it at that release (its context release runs:
 * "S1 freed"); a pending signal must hold no reference on the source
 * (Tests/c/test_source.c: test_signalled_source_freed_at_last_release).
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_signalled_source_release.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main csrc 1 2 plain\n"
    "main sig 1\n"
    "main add S 1 default\n"
    "main rem S 1 default\n"
    "main rel S 1\n"
    ;

void scenario(void) { fz_run_text(program); }
