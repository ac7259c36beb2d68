/* With fuzz_nested_run_signalled_source: a poll with
 * returnAfterSourceHandled nested in the first perform of a pass performs
 * the next signalled source only (which signals itself again); the outer
 * pass then performs that source again (signalled) and the third one, and
 * the next run the second once more.
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_nested_rash_run_signalled_sources.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main csrc 0 1 plain\n"
    "main csrc 1 2 plain\n"
    "main csrc 2 3 plain\n"
    "main add S 0 default\n"
    "main add S 1 default\n"
    "main add S 2 default\n"
    "main sig 2\n"
    "main sig 1\n"
    "main sig 0\n"
    "main run default 0 all\n"
    "main run default 0 all\n"
    "S0 run default 0 rash\n"
    "S1 sig 1\n"
    ;

void scenario(void) { fz_run_text(program); }
