/* Seeds 584 and 6000 (minimized from 584): CFRunLoopStop from an Entry
 * observer ends the run before its first pass (Entry, Exit, Stopped), a
 * poll as well as a waiting run (Tests/c/test_runloop.c).
 * A program of scripts/fuzz-diff.sh, run through
 * Tests/diff/fuzz/fuzz_interp.c (which documents its format). Replay:
 * `scripts/fuzz-diff.sh show Tests/diff/scenarios/fuzz_stop_from_entry.c`. */
#include "../fuzz/fuzz_interp.c"

static const char program[] =
    "main cobs 0 0xe7 rep 2\n"
    "main csrc 0 2 plain\n"
    "main add S 0 default\n"
    "main add O 0 default\n"
    "main run default 0 all\n"
    "O0 stop\n"
    ;

void scenario(void) { fz_run_text(program); }
