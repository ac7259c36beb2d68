/* Seeds 410, 824, 5255 and the other W-run TimedOut/HANG/TRACE FLOOD
 * mismatches (minimized from 410): a nested run of the same mode from a
 * timer's callout must sleep, not busy-spin (the firing timer does not arm
 * the loop's wake-up), here with the outer run a poll.
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_timer_nested_from_poll.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main ctim 1 past once 0 fn\n"
    "main add T 1 default\n"
    "main run default 0 rash\n"
    "T1 run default W rash\n"
    ;

void scenario(void) { fz_run_text(program); }
