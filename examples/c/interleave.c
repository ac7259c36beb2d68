/*
 * interleave.c — two threads writing to one terminal, three ways (the
 * tutorial's NSThread and @synchronized examples, in C).
 *
 * The main thread prints "Main thread x = N" five times. A second thread
 * prints "[My]" five times, one character per call. The three rounds:
 *
 *   1. without sleeping: whichever thread runs first usually prints all of
 *      its lines before the other gets going;
 *   2. with RLThreadSleepForTimeInterval(0.001) after every character and
 *      every main-thread line: each thread yields often, so the characters
 *      of "[My]" land between the main thread's lines;
 *   3. with sleeping and RL_SYNCHRONIZED(common) around each whole group
 *      ("[My]\n", or the main thread's line): a group is printed as a unit,
 *      so every output line is whole again.
 *
 * Rounds 1 and 2 may look different on every run (that is the lesson);
 * round 3 always shows ten whole lines. The pace options change nothing
 * here: the sleeps are the tutorial's 1 ms in every mode.
 */
#include "example_support.h"

typedef struct Round {
    bool sleep;          /* sleep 1 ms after each print */
    bool synchronized;   /* hold `common`'s monitor around each group */
    const char *common;  /* the object both threads synchronize on */
} Round;

/* One character, then (maybe) a short sleep to let the other thread in. */
static void print_char(const Round *round, char ch) {
    putchar(ch);
    if (round->sleep) RLThreadSleepForTimeInterval(0.001);
}

static void print_group(const Round *round) {
    print_char(round, '[');
    print_char(round, 'M');
    print_char(round, 'y');
    print_char(round, ']');
    print_char(round, '\n');
}

/* The second thread's entry: five "[My]" groups. */
static void *run(void *arg) {
    const Round *round = arg;
    for (int i = 0; i < 5; i++) {
        if (round->synchronized) {
            /* The monitor is left at the end of the block, however the block
             * is left. */
            RL_SYNCHRONIZED(round->common) { print_group(round); }
        } else {
            print_group(round);
        }
    }
    return NULL;
}

static void run_round(int number, const char *title, Round round) {
    printf("--- round %d: %s ---\n", number, title);
    fflush(stdout);

    RLThreadRef thread = RLThreadCreate(NULL, run, &round);
    EXAMPLE_CHECK(thread != NULL);
    EXAMPLE_CHECK(RLThreadSetName(thread, "MyThread"));
    EXAMPLE_CHECK(RLThreadSetJoinable(thread, true)); /* so the round can wait for it */
    EXAMPLE_CHECK(RLThreadStart(thread));

    for (int x = 0; x < 5; x++) {
        if (round.synchronized) {
            RL_SYNCHRONIZED(round.common) { printf("Main thread x = %d\n", x); }
        } else {
            printf("Main thread x = %d\n", x);
        }
        if (round.sleep) RLThreadSleepForTimeInterval(0.001);
    }

    /* The tutorial waits for a key press; joining is the honest way to wait
     * for the other thread. */
    EXAMPLE_CHECK(RLThreadJoin(thread, NULL));
    RLRelease(thread);
    fflush(stdout);
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    /* Both threads share one object; its address names the monitor. */
    static const char common[] = "common object";

    printf("interleave: two threads printing at once (%s pace)\n", example_pace_name());
    run_round(1, "without sleeping", (Round){.sleep = false, .synchronized = false, .common = common});
    run_round(2, "with RLThreadSleepForTimeInterval(0.001)", (Round){.sleep = true, .synchronized = false, .common = common});
    run_round(3, "with sleeping and RL_SYNCHRONIZED(common) around each group",
              (Round){.sleep = true, .synchronized = true, .common = common});
    printf("--- end ---\n");
    printf("in round 3 every line is whole: a group is printed while its thread holds the monitor\n");
    return 0;
}
