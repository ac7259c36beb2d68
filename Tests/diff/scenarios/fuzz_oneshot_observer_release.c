/* Seeds 4850, 4946 and others (minimized from 4850): a one-shot observer
 * is invalidated after its callout: its context release comes right
 * after that callout, before the next observer of the same activity.
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_oneshot_observer_release.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main cobs 2 0x4 once 1\n"
    "main cobs 0 0x6 rep 2\n"
    "main add O 2 common\n"
    "main blk 0 default\n"
    "main add O 0 default\n"
    "main run default -1 all\n"
    ;

void scenario(void) { fz_run_text(program); }
