/*
 * fuzz_main.c — the randomized differential test's program (built twice,
 * like every differential scenario: against CoreFoundation with -DDIFF_CF,
 * against CRunLoop through <crunloop/cf_compat.h>). scripts/fuzz-diff.sh
 * runs both builds on the same seeds and compares their traces.
 *
 *   fuzz seeds START COUNT   run the programs of seeds START..START+COUNT-1,
 *                            each on a fresh thread, each trace after a line
 *                            "== seed N"
 *   fuzz print SEED          print the program of a seed (the text format
 *                            fuzz_interp.c documents)
 *   fuzz file PATH           run the program in a file
 *
 * FUZZ_KNOWN=1 in the environment lets the generator use the operations of
 * the known open bugs (see fz_known_bugs in fuzz_interp.c).
 */
#include "fuzz_interp.c"

#include <signal.h>


/* A sequence that takes far longer than any should is a hang: say which
 * one and end the batch (the script reports the seed). */
static void on_alarm(int sig) {
    static const char msg[] = "HANG (sequence did not finish in 60 s)\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    const char *known = getenv("FUZZ_KNOWN");
    fz_known_bugs = known && *known && strcmp(known, "0") != 0;
    signal(SIGALRM, on_alarm);
    static struct fz_program p;
    if (argc == 4 && strcmp(argv[1], "seeds") == 0) {
        unsigned long long start = strtoull(argv[2], NULL, 0), count = strtoull(argv[3], NULL, 0);
        for (unsigned long long s = start; s < start + count; s++) {
            fz_generate(s, &p);
            printf("== seed %llu\n", s);
            fflush(stdout); /* the seed line is out before anything can crash */
            alarm(60);
            fz_run_program(&p);
        }
        alarm(0);
        fflush(stdout);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "print") == 0) {
        fz_generate(strtoull(argv[2], NULL, 0), &p);
        fz_print_program(&p, stdout);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "file") == 0) {
        char *text = read_file(argv[2]);
        if (!text) {
            fprintf(stderr, "fuzz: cannot read %s\n", argv[2]);
            return 2;
        }
        if (!fz_parse(text, &p)) return 2;
        alarm(60);
        fz_run_program(&p);
        fflush(stdout);
        return 0;
    }
    fprintf(stderr, "usage: fuzz seeds START COUNT | print SEED | file PATH\n");
    return 2;
}
