/* Seeds 81837 and 97159 (written small by hand): sources signalled when a
 * pass began keep their signal until their own perform, so a run of the
 * same mode nested in an earlier source's perform performs them (and the
 * pass then skips them), with returnAfterSourceHandled or not.
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_nested_run_signalled_source.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main csrc 0 1 plain\n"
    "main csrc 1 2 plain\n"
    "main add S 0 default\n"
    "main add S 1 default\n"
    "main sig 1\n"
    "main sig 0\n"
    "main run default 0 rash\n"
    "main sig 1\n"
    "main sig 0\n"
    "main run default 0 all\n"
    "S0 run default 0 all\n"
    ;

void scenario(void) { fz_run_text(program); }
