/*
 * fuzz_interp.c — the interpreter and the generator of the randomized
 * differential test (see fuzz_main.c and Tests/diff/README.md).
 *
 * A program is text, one operation a line: "<script> <op> <args>". The
 * script "main" runs on a fresh thread with a fresh run loop; the script
 * named after an object ("S0" for source 0, "T1" for timer 1, "O2" for
 * observer 2, "B3" for block body 3) runs inside that object's callout, for
 * its first FZ_SCRIPT_CALLS calls only, so every program ends. Any line may
 * be deleted and the program stays valid (an operation on an object that
 * does not exist is skipped): that is what the shrinker relies on.
 *
 * The same file is compiled against CoreFoundation (-DDIFF_CF) and against
 * CRunLoop through <crunloop/cf_compat.h>; both print the same trace when
 * they behave the same. Traces hold no times and no pointers: dates are
 * printed as "0", "past" or "future", modes by name.
 *
 * Determinism (the test must never flake):
 *   - timers are either clearly due ("past": one fixed date 100 s before the
 *     sequence started) or far away ("future": 100000 s ahead); repeating
 *     timers have an interval of 1000 s, so they fire once and move to a
 *     future grid point. No run ever waits for a timer;
 *   - runs either poll (seconds 0 or -1) or wait "until idle" (10 s upper
 *     bound, written "W"): a helper thread acts only when the loop thread is
 *     blocked in its wait with nothing pending, and then performs the next
 *     queued cross-thread action ("ext" lines), or stops the loop when none
 *     is queued. "Blocked" means: CFRunLoopIsWaiting says so and the kernel
 *     reports the thread sleeping (state S in /proc), twice, FZ_SETTLE_US
 *     apart, with no trace line in between. A wait that a pending wake-up
 *     or a due timer ends at once never looks like that, so every wait the
 *     helper ends is one that nothing else would have ended.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifdef DIFF_CF
#include <CoreFoundation/CoreFoundation.h>
#else
#include <crunloop/cf_compat.h>
#endif

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FZ_NSRC 4
#define FZ_NTIM 4
#define FZ_NOBS 3
#define FZ_NBLK 4
#define FZ_MAXOPS 512
#define FZ_SCRIPT_CALLS 2 /* a callout runs its script on its first calls only */
#define FZ_MAXDEPTH 3     /* nested runs deeper than this are skipped */
#define FZ_SETTLE_US 3000 /* how long the loop must stay blocked before the helper acts */
#define FZ_WAIT_SECONDS 10.0 /* only a loop that never sleeps waits this out: generous, for a loaded machine */
#define FZ_MAX_LINES 20000 /* a sequence tracing more loops: the process ends (see fz_trace) */

/* Generator switches. The known open bugs (being fixed elsewhere) are kept
 * out of generated programs unless fz_known_bugs is set, so that a long run
 * finds new bugs instead of the known ones ten thousand times:
 *   - timers with a NULL callout (CF accepts them; RL refuses),
 *   - sources with equal/hash callbacks (CF treats equal sources as one),
 *   - RunInMode(kCFRunLoopCommonModes) (CF: Finished, RL: 0),
 *   - GetNextFireDate of an invalidated timer (CF: 0),
 *   - a timer invalidated or released while its callout runs (from its own
 *     callout or one nested in it: CF retains the context's info around a
 *     timer callout).
 * Another known one cannot show here: the harness runs one loop (an
 * observer added to a second loop). */
static bool fz_known_bugs;

/* ---- Program representation ------------------------------------------- */

enum fz_kind { K_SRC, K_TIM, K_OBS };
enum fz_op {
    OP_CSRC, OP_CTIM, OP_COBS, OP_ADD, OP_REM, OP_HAS, OP_SIG, OP_INV, OP_REL, OP_VALID,
    OP_SETD, OP_NEXTD, OP_NTIM, OP_BLK, OP_FN, OP_RUN, OP_RUNALL, OP_STOP, OP_WAKE, OP_ADDC,
    OP_MODES, OP_CUR, OP_EXT, OP_COUNT
};
static const char *const fz_op_names[OP_COUNT] = {
    "csrc", "ctim", "cobs", "add", "rem", "has", "sig", "inv", "rel", "valid", "setd", "nextd",
    "ntim", "blk", "fn", "run", "runall", "stop", "wake", "addc", "modes", "cur", "ext"};

/* Scripts: 0 main, then S0..S3, T0..T3, O0..O2, B0..B3. */
#define FZ_NSCRIPTS (1 + FZ_NSRC + FZ_NTIM + FZ_NOBS + FZ_NBLK)
static int script_of(char k, int i) {
    switch (k) {
    case 'S': return 1 + i;
    case 'T': return 1 + FZ_NSRC + i;
    case 'O': return 1 + FZ_NSRC + FZ_NTIM + i;
    case 'B': return 1 + FZ_NSRC + FZ_NTIM + FZ_NOBS + i;
    }
    return 0;
}
static void script_name(int s, char out[8]) {
    if (s == 0) { strcpy(out, "main"); return; }
    s--;
    if (s < FZ_NSRC) { snprintf(out, 8, "S%d", s); return; }
    s -= FZ_NSRC;
    if (s < FZ_NTIM) { snprintf(out, 8, "T%d", s); return; }
    s -= FZ_NTIM;
    if (s < FZ_NOBS) { snprintf(out, 8, "O%d", s); return; }
    s -= FZ_NOBS;
    snprintf(out, 8, "B%d", s);
}

/* One operation. The meaning of a[] depends on op (see fz_format). For
 * OP_EXT, a[0] is the inner op (OP_WAKE, OP_STOP, OP_SIG, OP_BLK, OP_SETD,
 * OP_INV) and a[1..] its arguments. */
struct fz_line {
    int script;
    int op;
    int a[5];
};
struct fz_program {
    int n;
    struct fz_line l[FZ_MAXOPS];
};

/* Modes: 0 default, 1 common, 2 "A", 3 "B". */
static const char *const fz_mode_names[4] = {"default", "common", "A", "B"};
static CFRunLoopMode fz_mode(int m) {
    switch (m) {
    case 1: return kCFRunLoopCommonModes;
    case 2: return CFSTR("A");
    case 3: return CFSTR("B");
    default: return kCFRunLoopDefaultMode;
    }
}
static int parse_mode(const char *s) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, fz_mode_names[i]) == 0) return i;
    return -1;
}
static const char kind_char[3] = {'S', 'T', 'O'};
static int parse_kind(const char *s) {
    for (int i = 0; i < 3; i++)
        if (s[0] == kind_char[i] && s[1] == 0) return i;
    return -1;
}

/* The text of one line (without newline). */
static void fz_format(const struct fz_line *l, char *out, size_t cap) {
    char sn[8];
    script_name(l->script, sn);
    const int *a = l->a;
    int n = snprintf(out, cap, "%s ", sn);
    out += n;
    cap -= (size_t)n;
    int op = l->op;
    if (op == OP_EXT) {
        n = snprintf(out, cap, "ext ");
        out += n;
        cap -= (size_t)n;
        op = a[0];
        a++;
    }
    switch (op) {
    case OP_CSRC: snprintf(out, cap, "csrc %d %d %s", a[0], a[1], a[2] ? "eq" : "plain"); break;
    case OP_CTIM:
        snprintf(out, cap, "ctim %d %s %s %d %s", a[0], a[1] ? "future" : "past", a[2] ? "rep" : "once", a[3],
                 a[4] ? "null" : "fn");
        break;
    case OP_COBS: snprintf(out, cap, "cobs %d 0x%x %s %d", a[0], a[1], a[2] ? "rep" : "once", a[3]); break;
    case OP_ADD:
    case OP_REM:
    case OP_HAS: snprintf(out, cap, "%s %c %d %s", fz_op_names[op], kind_char[a[0]], a[1], fz_mode_names[a[2]]); break;
    case OP_SIG:
    case OP_NEXTD: snprintf(out, cap, "%s %d", fz_op_names[op], a[0]); break;
    case OP_INV:
    case OP_REL:
    case OP_VALID: snprintf(out, cap, "%s %c %d", fz_op_names[op], kind_char[a[0]], a[1]); break;
    case OP_SETD: snprintf(out, cap, "setd %d %s", a[0], a[1] ? "future" : "past"); break;
    case OP_NTIM:
    case OP_ADDC: snprintf(out, cap, "%s %s", fz_op_names[op], fz_mode_names[a[0]]); break;
    case OP_BLK:
    case OP_FN: snprintf(out, cap, "%s %d %s", fz_op_names[op], a[0], fz_mode_names[a[1]]); break;
    case OP_RUN:
        snprintf(out, cap, "run %s %s %s", fz_mode_names[a[0]], a[1] == 0 ? "0" : a[1] == 1 ? "-1" : "W",
                 a[2] ? "rash" : "all");
        break;
    default: snprintf(out, cap, "%s", fz_op_names[op]); break;
    }
}

static void fz_print_program(const struct fz_program *p, FILE *f) {
    char buf[128];
    for (int i = 0; i < p->n; i++) {
        fz_format(&p->l[i], buf, sizeof buf);
        fprintf(f, "%s\n", buf);
    }
}

static int parse_script(const char *s) {
    if (strcmp(s, "main") == 0) return 0;
    int i = s[1] - '0';
    if (s[1] == 0 || s[2] != 0 || i < 0) return -1;
    if (s[0] == 'S' && i < FZ_NSRC) return script_of('S', i);
    if (s[0] == 'T' && i < FZ_NTIM) return script_of('T', i);
    if (s[0] == 'O' && i < FZ_NOBS) return script_of('O', i);
    if (s[0] == 'B' && i < FZ_NBLK) return script_of('B', i);
    return -1;
}

/* Parses one line's words (after the script name) into l; false if bad. */
static bool parse_op(char **w, int nw, struct fz_line *l, int *a) {
    if (nw < 1) return false;
    int op = -1;
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(w[0], fz_op_names[i]) == 0) op = i;
    if (op < 0) return false;
    l->op = op;
    switch (op) {
    case OP_CSRC:
        if (nw != 4) return false;
        a[0] = atoi(w[1]); a[1] = atoi(w[2]); a[2] = strcmp(w[3], "eq") == 0;
        return a[0] >= 0 && a[0] < FZ_NSRC;
    case OP_CTIM:
        if (nw != 6) return false;
        a[0] = atoi(w[1]); a[1] = strcmp(w[2], "future") == 0; a[2] = strcmp(w[3], "rep") == 0;
        a[3] = atoi(w[4]); a[4] = strcmp(w[5], "null") == 0;
        return a[0] >= 0 && a[0] < FZ_NTIM;
    case OP_COBS:
        if (nw != 5) return false;
        a[0] = atoi(w[1]); a[1] = (int)strtol(w[2], NULL, 0); a[2] = strcmp(w[3], "rep") == 0; a[3] = atoi(w[4]);
        return a[0] >= 0 && a[0] < FZ_NOBS;
    case OP_ADD:
    case OP_REM:
    case OP_HAS:
        if (nw != 4) return false;
        a[0] = parse_kind(w[1]); a[1] = atoi(w[2]); a[2] = parse_mode(w[3]);
        return a[0] >= 0 && a[2] >= 0;
    case OP_SIG:
    case OP_NEXTD:
        if (nw != 2) return false;
        a[0] = atoi(w[1]);
        return true;
    case OP_INV:
    case OP_REL:
    case OP_VALID:
        if (nw != 3) return false;
        a[0] = parse_kind(w[1]); a[1] = atoi(w[2]);
        return a[0] >= 0;
    case OP_SETD:
        if (nw != 3) return false;
        a[0] = atoi(w[1]); a[1] = strcmp(w[2], "future") == 0;
        return true;
    case OP_NTIM:
    case OP_ADDC:
        if (nw != 2) return false;
        a[0] = parse_mode(w[1]);
        return a[0] >= 0;
    case OP_BLK:
    case OP_FN:
        if (nw != 3) return false;
        a[0] = atoi(w[1]); a[1] = parse_mode(w[2]);
        return a[0] >= 0 && a[0] < FZ_NBLK && a[1] >= 0;
    case OP_RUN:
        if (nw != 4) return false;
        a[0] = parse_mode(w[1]);
        a[1] = strcmp(w[2], "0") == 0 ? 0 : strcmp(w[2], "-1") == 0 ? 1 : 2;
        a[2] = strcmp(w[3], "rash") == 0;
        return a[0] >= 0;
    case OP_EXT: {
        struct fz_line inner;
        if (!parse_op(w + 1, nw - 1, &inner, a + 1)) return false;
        a[0] = inner.op;
        l->op = OP_EXT;
        return inner.op == OP_WAKE || inner.op == OP_STOP || inner.op == OP_SIG || inner.op == OP_BLK ||
               inner.op == OP_SETD || inner.op == OP_INV;
    }
    default: return nw == 1;
    }
}

/* Parses program text; lines starting with '#' and blank lines are
 * ignored. Returns false (and says why on stderr) on a bad line. */
static bool fz_parse(const char *text, struct fz_program *p) {
    p->n = 0;
    const char *s = text;
    int lineno = 0;
    while (*s) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char buf[256];
        lineno++;
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, s, len);
        buf[len] = 0;
        s = e ? e + 1 : s + len;
        char *w[12];
        int nw = 0;
        for (char *tok = strtok(buf, " \t\r"); tok && nw < 12; tok = strtok(NULL, " \t\r")) w[nw++] = tok;
        if (nw == 0 || w[0][0] == '#') continue;
        if (p->n >= FZ_MAXOPS) { fprintf(stderr, "fuzz: too many lines\n"); return false; }
        struct fz_line *l = &p->l[p->n];
        memset(l, 0, sizeof *l);
        l->script = parse_script(w[0]);
        if (l->script < 0 || !parse_op(w + 1, nw - 1, l, l->a)) {
            fprintf(stderr, "fuzz: bad line %d\n", lineno);
            return false;
        }
        p->n++;
    }
    return true;
}

/* ---- Generator ---------------------------------------------------------- */

/* splitmix64: the same numbers in both builds, whatever libc does. */
struct fz_rng {
    uint64_t s;
};
static uint64_t rng_next(struct fz_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rnd(struct fz_rng *r, int n) { return (int)(rng_next(r) % (uint64_t)n); }
static bool chance(struct fz_rng *r, int percent) { return rnd(r, 100) < percent; }

/* A mode for an item operation: mostly the concrete ones. */
static int gen_item_mode(struct fz_rng *r) {
    int x = rnd(r, 10);
    return x < 4 ? 0 : x < 6 ? 1 : x < 8 ? 2 : 3;
}
/* A mode to run: never the common pseudo-mode unless known bugs are on
 * (RunInMode(common) is a known open difference). */
static int gen_run_mode(struct fz_rng *r) {
    int x = rnd(r, 10);
    if (fz_known_bugs && x == 9) return 1;
    return x < 6 ? 0 : x < 8 ? 2 : 3;
}

/* A program either has due timers or wakes its loop from callouts, never
 * both. CF serves one port per wake-up: a due timer and a pending wake-up
 * (WakeUp or Stop from a callout) take two waits, and which comes first
 * depends on which fd got ready first; CRunLoop serves both on one wake-up
 * (an intended difference, docs/runloop.md "One wake, many events"). */
static bool gen_due_timers;
/* In a program with due timers each timer lives in one fixed concrete mode
 * and is never removed or invalidated before it fires: CF arms a mode's
 * timer fd when a due timer is added, and if the timer leaves the mode
 * before the mode runs (fired in another common mode, invalidated,
 * removed), the mode's next wait returns at once for nothing, which
 * CRunLoop does not copy. */
static int due_timer_mode(int i) { return i % 2 == 0 ? 0 : 2 + i / 2 % 2; }
/* T0 and T2 share the default mode there, so T2 always repeats: when two
 * due one-shot timers of a mode fire in one pass and leave it without
 * timers, CF leaves the mode's timer fd readable (armed for the second
 * one's past date while the first fired, never read or reset), and that
 * mode's next wait returns at once for nothing, which CRunLoop does not
 * copy (seed 34183). A repeating timer moves to a future date after its
 * fire, and arming for it resets the fd. */
static bool due_timer_repeats(int i) { return i == 2; }

static void gen_op(struct fz_rng *r, int script, struct fz_line *l) {
    memset(l, 0, sizeof *l);
    l->script = script;
    int *a = l->a;
    bool in_timer = script >= script_of('T', 0) && script < script_of('O', 0);
    int self_timer = in_timer ? script - script_of('T', 0) : -1;
    for (;;) {
        int x = rnd(r, 100);
        if (x < 5) {
            l->op = OP_CSRC; a[0] = rnd(r, FZ_NSRC); a[1] = rnd(r, 3);
            a[2] = fz_known_bugs && chance(r, 20);
        } else if (x < 10) {
            l->op = OP_CTIM; a[0] = rnd(r, FZ_NTIM); a[1] = chance(r, 35) || !gen_due_timers; a[2] = chance(r, 30); a[3] = rnd(r, 3);
            if (gen_due_timers && due_timer_repeats(a[0])) a[2] = 1;
            a[4] = fz_known_bugs && chance(r, 10);
        } else if (x < 14) {
            l->op = OP_COBS; a[0] = rnd(r, FZ_NOBS);
            static const int masks[] = {0x01 | 0x80, 0x20 | 0x40, 0x02 | 0x04, 0xe7, 0x20, 0x01, 0x80, 0x04};
            a[1] = masks[rnd(r, 8)]; a[2] = chance(r, 80); a[3] = rnd(r, 3);
        } else if (x < 30) {
            l->op = OP_ADD; a[0] = rnd(r, 3); a[1] = rnd(r, a[0] == K_OBS ? FZ_NOBS : 4); a[2] = gen_item_mode(r);
            if (gen_due_timers && a[0] == K_TIM) a[2] = due_timer_mode(a[1]);
        } else if (x < 34) {
            l->op = OP_REM; a[0] = rnd(r, 3); a[1] = rnd(r, a[0] == K_OBS ? FZ_NOBS : 4); a[2] = gen_item_mode(r);
            if (gen_due_timers && a[0] == K_TIM) continue;
        } else if (x < 37) {
            l->op = OP_HAS; a[0] = rnd(r, 3); a[1] = rnd(r, a[0] == K_OBS ? FZ_NOBS : 4); a[2] = gen_item_mode(r);
        } else if (x < 47) {
            l->op = OP_SIG; a[0] = rnd(r, FZ_NSRC);
        } else if (x < 51) {
            l->op = OP_INV; a[0] = rnd(r, 3); a[1] = rnd(r, a[0] == K_OBS ? FZ_NOBS : 4);
            if (!fz_known_bugs && a[0] == K_TIM && a[1] == self_timer) continue;
            if (gen_due_timers && a[0] == K_TIM) continue;
        } else if (x < 53) {
            l->op = OP_REL; a[0] = rnd(r, 3); a[1] = rnd(r, a[0] == K_OBS ? FZ_NOBS : 4);
            if (!fz_known_bugs && a[0] == K_TIM && a[1] == self_timer) continue;
        } else if (x < 55) {
            l->op = OP_VALID; a[0] = rnd(r, 3); a[1] = rnd(r, a[0] == K_OBS ? FZ_NOBS : 4);
        } else if (x < 58) {
            l->op = OP_SETD; a[0] = rnd(r, FZ_NTIM); a[1] = chance(r, 40) || !gen_due_timers;
        } else if (x < 61) {
            l->op = OP_NEXTD; a[0] = rnd(r, FZ_NTIM);
        } else if (x < 63) {
            l->op = OP_NTIM; a[0] = gen_item_mode(r);
            if (a[0] == 1) a[0] = 0;
        } else if (x < 68) {
            l->op = OP_BLK; a[0] = rnd(r, FZ_NBLK); a[1] = gen_item_mode(r);
        } else if (x < 70) {
            l->op = OP_FN; a[0] = rnd(r, FZ_NBLK); a[1] = gen_item_mode(r);
        } else if (x < 84) {
            l->op = OP_RUN; a[0] = gen_run_mode(r);
            int y = rnd(r, 10);
            a[1] = y < 4 ? 0 : y < 5 ? 1 : 2;
            a[2] = chance(r, 40);
        } else if (x < 85) {
            l->op = OP_RUNALL;
        } else if (x < 88) {
            l->op = OP_STOP;
            if (script != 0 && gen_due_timers) continue;
        } else if (x < 91) {
            l->op = OP_WAKE;
            if (script != 0 && gen_due_timers) continue;
        } else if (x < 93) {
            l->op = OP_ADDC; a[0] = 2 + rnd(r, 2);
        } else if (x < 95) {
            l->op = OP_MODES;
        } else if (x < 96) {
            l->op = OP_CUR;
        } else {
            l->op = OP_EXT;
            int y = rnd(r, 6);
            if (y == 0) a[0] = OP_WAKE;
            else if (y == 1) a[0] = OP_STOP;
            else if (y == 2) { a[0] = OP_SIG; a[1] = rnd(r, FZ_NSRC); }
            else if (y == 3) { a[0] = OP_BLK; a[1] = rnd(r, FZ_NBLK); a[2] = gen_item_mode(r); }
            else if (y == 4) {
                /* Not SetNextFireDate from another thread: CF wakes the loop
                 * for it, CRunLoop re-arms the sleeping loop's timerfd without
                 * a wake-up (an intended difference, docs/runloop.md). The
                 * draws stay so that other programs keep their seeds. */
                (void)rnd(r, FZ_NTIM); (void)chance(r, 50);
                a[0] = OP_WAKE;
            }
            else { a[0] = OP_INV; a[1] = rnd(r, 3); a[2] = rnd(r, a[1] == K_OBS ? FZ_NOBS : 4);
                   if (!fz_known_bugs && a[1] == K_TIM && a[2] == self_timer) continue;
                   if (gen_due_timers && a[1] == K_TIM) continue; }
        }
        return;
    }
}

/* The program of a seed: a few objects created first, then random main
 * operations, then short scripts for some of the callouts. */
static void fz_generate(uint64_t seed, struct fz_program *p) {
    struct fz_rng r = {seed * 0x2545f4914f6cdd1dULL + 1};
    p->n = 0;
    gen_due_timers = chance(&r, 50);
    int ncreate = 1 + rnd(&r, 5);
    for (int i = 0; i < ncreate; i++) {
        struct fz_line *l = &p->l[p->n++];
        do gen_op(&r, 0, l);
        while (l->op != OP_CSRC && l->op != OP_CTIM && l->op != OP_COBS);
    }
    int nmain = 4 + rnd(&r, 26);
    for (int i = 0; i < nmain; i++) gen_op(&r, 0, &p->l[p->n++]);
    for (int s = 1; s < FZ_NSCRIPTS; s++) {
        if (!chance(&r, 45)) continue;
        int n = 1 + rnd(&r, 3);
        for (int i = 0; i < n; i++) gen_op(&r, s, &p->l[p->n++]);
    }
}

/* ---- Trace ---------------------------------------------------------------- */

static pthread_mutex_t fz_trace_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong fz_trace_count; /* lines so far: the helper's "nothing happened" check */
static unsigned long fz_seq_first_line; /* fz_trace_count when the sequence began */
static bool fz_collecting;
static char *fz_collected[512];
static int fz_ncollected;

static void fz_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fz_trace(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&fz_trace_lock);
    /* No program traces this much unless the loop goes round without end
     * (a busy loop traces every pass to its observers): end the process,
     * as a crash, rather than write gigabytes. */
    if (atomic_fetch_add(&fz_trace_count, 1) - fz_seq_first_line > FZ_MAX_LINES) {
        printf("TRACE FLOOD (over %d lines in one sequence)\n", FZ_MAX_LINES);
        fflush(stdout);
        _exit(4);
    }
    if (fz_collecting) {
        if (fz_ncollected < 512 && vasprintf(&fz_collected[fz_ncollected], fmt, ap) >= 0) fz_ncollected++;
    } else {
        vprintf(fmt, ap);
        putchar('\n');
    }
    pthread_mutex_unlock(&fz_trace_lock);
    va_end(ap);
}
static int fz_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
/* Between these, lines are gathered and printed sorted on one line: for
 * callbacks whose order CF leaves unspecified (schedule/cancel of a source
 * in several common modes, the teardown at thread exit). */
static void fz_collect_begin(void) {
    pthread_mutex_lock(&fz_trace_lock);
    fz_collecting = true;
    pthread_mutex_unlock(&fz_trace_lock);
}
static void fz_collect_end(const char *label) {
    pthread_mutex_lock(&fz_trace_lock);
    fz_collecting = false;
    qsort(fz_collected, (size_t)fz_ncollected, sizeof fz_collected[0], fz_cmp_str);
    if (fz_ncollected) {
        printf("%s {", label);
        for (int i = 0; i < fz_ncollected; i++) {
            printf("%s%s", i ? " | " : "", fz_collected[i]);
            free(fz_collected[i]);
        }
        printf("}\n");
    }
    fz_ncollected = 0;
    pthread_mutex_unlock(&fz_trace_lock);
}

static const char *fz_norm_mode(const char *name) {
    if (!name) return "(null)";
    if (strcmp(name, "kCFRunLoopDefaultMode") == 0 || strcmp(name, "kRLRunLoopDefaultMode") == 0) return "default";
    if (strcmp(name, "kCFRunLoopCommonModes") == 0 || strcmp(name, "kRLRunLoopCommonModes") == 0) return "common";
    return name;
}
/* A mode name as text, into buf. */
static const char *fz_mode_text(CFRunLoopMode mode, char *buf, size_t cap) {
    char raw[128];
    if (!mode) return "(null)";
#ifdef DIFF_CF
    if (!CFStringGetCString(mode, raw, (CFIndex)sizeof raw, kCFStringEncodingUTF8)) return "(unprintable)";
#else
    snprintf(raw, sizeof raw, "%s", mode);
#endif
    snprintf(buf, cap, "%s", fz_norm_mode(raw));
    return buf;
}

/* ---- Sequence state ------------------------------------------------------- */

/* The info of every object's context: its name, a reference count kept
 * through the context's retain/release (traced "X freed" when it drops to
 * zero, which is robust to extra balanced retain/release pairs), and the
 * number of callouts so far. Never freed: CF may call release late. */
struct fz_info {
    char name[8];
    unsigned long seq; /* the sequence that made it */
    int refs;
    int key; /* equal/hash of "eq" sources */
    int calls;
    int script;
    struct fz_info *all_next; /* fz_all_infos */
};
/* Every info ever made, kept for the life of the process: an info must
 * outlive its last release so an over-release is traced (not a use after
 * free), and CF releases what a finished thread's loop held at a time of
 * its own, possibly during a later sequence. Keeping them listed (rather
 * than dropping the pointer) is what tells a leak checker they are owned. */
static struct fz_info *fz_all_infos;

struct fz_seq {
    const struct fz_program *p;
    CFRunLoopRef loop;
    pid_t tid;
    CFAbsoluteTime base;
    int depth;
    CFRunLoopSourceRef src[FZ_NSRC];
    CFRunLoopTimerRef tim[FZ_NTIM];
    CFRunLoopObserverRef obs[FZ_NOBS];
    int blk_calls[FZ_NBLK];
    int created; /* sources created so far */
    int tim_active[FZ_NTIM]; /* callouts of each timer running now */
    /* stop_pending[d]: a callout of the run at depth d (1 = outermost)
     * called Stop, and that run has not returned yet. */
    bool stop_pending[FZ_MAXDEPTH + 1];
    /* Cross-thread actions for the helper, in program order. */
    pthread_mutex_t ext_lock;
    const struct fz_line *ext[FZ_MAXOPS];
    int ext_head, ext_tail;
    atomic_bool done;
};
static struct fz_seq *fz_cur; /* the sequence being run (one at a time) */
/* The number of the sequence being run, and whether its scripts are still
 * running (not yet the thread's teardown). */
static atomic_ulong fz_seq_no;
static atomic_bool fz_in_scripts;

static void run_script(int script);

static const void *info_retain(const void *p) {
    struct fz_info *in = (struct fz_info *)p;
    pthread_mutex_lock(&fz_trace_lock);
    in->refs++;
    pthread_mutex_unlock(&fz_trace_lock);
    return p;
}
static void info_release(const void *p) {
    struct fz_info *in = (struct fz_info *)p;
    pthread_mutex_lock(&fz_trace_lock);
    int left = --in->refs;
    pthread_mutex_unlock(&fz_trace_lock);
    /* CF lets go of the timers and observers a loop still holds at thread
     * exit at a time of its own (sometimes while a later sequence runs), so
     * a release is traced only while its own sequence's scripts run. A
     * release that goes below zero is always an error. */
    bool mine = in->seq == atomic_load(&fz_seq_no) && atomic_load(&fz_in_scripts);
    if (left == 0 && mine) fz_trace("%s freed", in->name);
    if (left < 0) fz_trace("%s over-released", in->name);
}
static struct fz_info *new_info(char k, int i, int key) {
    struct fz_info *in = calloc(1, sizeof *in);
    if (!in) {
        fz_trace("out of memory");
        exit(2);
    }
    pthread_mutex_lock(&fz_trace_lock);
    in->all_next = fz_all_infos;
    fz_all_infos = in;
    pthread_mutex_unlock(&fz_trace_lock);
    snprintf(in->name, sizeof in->name, "%c%d", k, i);
    in->key = key;
    in->seq = atomic_load(&fz_seq_no);
    in->script = script_of(k, i);
    return in;
}

static const char *date_class(CFAbsoluteTime d) {
    if (d == 0) return "0";
    return d < CFAbsoluteTimeGetCurrent() ? "past" : "future";
}
static CFAbsoluteTime fz_date(int future) {
    /* One fixed past date for every due timer: CF orders due timers by the
     * time their date was set (it clamps past dates to "now"), CRunLoop by
     * date (ties in the order they got it); with one date both orders are
     * the order of creation/SetNextFireDate (known-differences.txt:
     * timer_past_order). */
    return future ? fz_cur->base + 100000.0 : fz_cur->base - 100.0;
}

static const char *cur_mode_text(char *buf, size_t cap) {
    CFStringRef m = CFRunLoopCopyCurrentMode(fz_cur->loop);
    if (!m) return "(none)";
    fz_mode_text(m, buf, cap);
    CFRelease(m);
    return buf;
}

/* Runs a callout's script, for its first FZ_SCRIPT_CALLS calls. */
static void callout_script(int script, int *calls) {
    if (++*calls > FZ_SCRIPT_CALLS) return;
    run_script(script);
}

/* Sources. */
static void src_schedule(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    char b[64];
    fz_trace("%s schedule %s", ((struct fz_info *)info)->name, fz_mode_text(mode, b, sizeof b));
}
static void src_cancel(void *info, CFRunLoopRef rl, CFRunLoopMode mode) {
    char b[64];
    fz_trace("%s cancel %s", ((struct fz_info *)info)->name, fz_mode_text(mode, b, sizeof b));
}
static void src_perform(void *info) {
    struct fz_info *in = info;
    char b[64];
    fz_trace("%s perform in %s", in->name, cur_mode_text(b, sizeof b));
    callout_script(in->script, &in->calls);
}
static Boolean src_equal(const void *a, const void *b) {
    return ((const struct fz_info *)a)->key == ((const struct fz_info *)b)->key;
}
static CFHashCode src_hash(const void *a) { return (CFHashCode)((const struct fz_info *)a)->key; }

/* Timers and observers. */
static void tim_fire(CFRunLoopTimerRef t, void *info) {
    struct fz_info *in = info;
    char b[64];
    int i = in->name[1] - '0';
    fz_trace("%s fire in %s next %s", in->name, cur_mode_text(b, sizeof b), date_class(CFRunLoopTimerGetNextFireDate(t)));
    fz_cur->tim_active[i]++;
    callout_script(in->script, &in->calls);
    fz_cur->tim_active[i]--;
}
static const char *fz_activity(CFRunLoopActivity a) {
    switch (a) {
    case kCFRunLoopEntry: return "Entry";
    case kCFRunLoopBeforeTimers: return "BeforeTimers";
    case kCFRunLoopBeforeSources: return "BeforeSources";
    case kCFRunLoopBeforeWaiting: return "BeforeWaiting";
    case kCFRunLoopAfterWaiting: return "AfterWaiting";
    case kCFRunLoopExit: return "Exit";
    default: return "activity?";
    }
}
static void obs_call(CFRunLoopObserverRef o, CFRunLoopActivity a, void *info) {
    struct fz_info *in = info;
    char b[64];
    fz_trace("%s %s in %s", in->name, fz_activity(a), cur_mode_text(b, sizeof b));
    callout_script(in->script, &in->calls);
}

static void block_body(int b) {
    char m[64];
    fz_trace("B%d runs in %s", b, cur_mode_text(m, sizeof m));
    callout_script(script_of('B', b), &fz_cur->blk_calls[b]);
}
#ifndef DIFF_CF
static void block_fn(void *info) { block_body((int)(intptr_t)info); }
#endif

static const char *result_text(int r) {
    switch (r) {
    case kCFRunLoopRunFinished: return "Finished";
    case kCFRunLoopRunStopped: return "Stopped";
    case kCFRunLoopRunTimedOut: return "TimedOut";
    case kCFRunLoopRunHandledSource: return "HandledSource";
    }
    static __thread char b[32];
    snprintf(b, sizeof b, "result(%d)", r);
    return b;
}

static void all_modes_text(char *out, size_t cap) {
    char *names[32];
    int n = 0;
    char b[64];
    CFArrayRef modes = CFRunLoopCopyAllModes(fz_cur->loop);
    for (CFIndex i = 0; modes && i < CFArrayGetCount(modes) && n < 32; i++) {
        /* CF lists a mode literally named kCFRunLoopCommonModes once a block
         * was queued for the common modes: a CF artefact (Tests/diff/README). */
        const char *t = fz_mode_text((CFStringRef)CFArrayGetValueAtIndex(modes, i), b, sizeof b);
        if (strcmp(t, "common") != 0) names[n++] = strdup(t);
    }
    if (modes) CFRelease(modes);
    qsort(names, (size_t)n, sizeof names[0], fz_cmp_str);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", names[i]);
        free(names[i]);
    }
}

/* ---- Executing one operation ---------------------------------------------- */

static CFTypeRef item(int kind, int i) {
    struct fz_seq *q = fz_cur;
    switch (kind) {
    case K_SRC: return i < FZ_NSRC ? (CFTypeRef)q->src[i] : NULL;
    case K_TIM: return i < FZ_NTIM ? (CFTypeRef)q->tim[i] : NULL;
    default: return i < FZ_NOBS ? (CFTypeRef)q->obs[i] : NULL;
    }
}

static void queue_block(int b, int m) {
    CFRunLoopPerformBlock(fz_cur->loop, fz_mode(m), ^{ block_body(b); });
}

/* No run is nested in a run whose callout called Stop: CF checks a stop
 * only after the pass's wait, and a nested run may take the wake-up the
 * stop gave (the outer run then sleeps on with its stop pending); CRunLoop
 * ends the stopped run after the pass whatever happened in it (an intended
 * difference, docs/runloop.md; scenario fuzz_stop_then_nested_poll in
 * known-differences.txt). */
static bool fz_nested_after_stop(const struct fz_seq *q) {
    return q->depth > 0 && q->stop_pending[q->depth];
}

/* The operations that only change membership call schedule/cancel and
 * release callbacks synchronously; their order among several common modes
 * is unspecified, so they are gathered and printed sorted. */
static void exec_line(const struct fz_line *l, bool from_helper) {
    struct fz_seq *q = fz_cur;
    const int *a = l->a;
    int op = l->op;
    char b[256];
    if (op == OP_EXT && !from_helper) {
        pthread_mutex_lock(&q->ext_lock);
        q->ext[q->ext_tail++] = l;
        pthread_mutex_unlock(&q->ext_lock);
        return;
    }
    if (op == OP_EXT) {
        op = a[0];
        a++;
        fz_format(l, b, sizeof b);
        fz_trace("helper: %s", strchr(b, ' ') + 5); /* without "<script> ext " */
    }
    switch (op) {
    case OP_CSRC: {
        if (q->src[a[0]]) return;
        struct fz_info *in = new_info('S', a[0], a[0] % 2);
        CFRunLoopSourceContext c = {0};
        c.info = in;
        c.retain = info_retain;
        c.release = info_release;
        c.schedule = src_schedule;
        c.cancel = src_cancel;
        c.perform = src_perform;
        if (a[2]) {
            c.equal = src_equal;
            c.hash = src_hash;
        }
        /* CF performs signalled sources of equal order in an order of its
         * own (that of a hashed set), so no two sources share an order:
         * the program's order, then the order of creation. */
        q->src[a[0]] = CFRunLoopSourceCreate(NULL, a[1] * 1000 + q->created++, &c);
        fz_trace("S%d created", a[0]);
        return;
    }
    case OP_CTIM: {
        if (q->tim[a[0]]) return;
        struct fz_info *in = new_info('T', a[0], 0);
        CFRunLoopTimerContext c = {0, in, info_retain, info_release, NULL};
        q->tim[a[0]] = CFRunLoopTimerCreate(NULL, fz_date(a[1]), a[2] ? 1000.0 : 0, 0, a[3], a[4] ? NULL : tim_fire, &c);
        fz_trace("T%d created: %s", a[0], q->tim[a[0]] ? "yes" : "no");
        return;
    }
    case OP_COBS: {
        if (q->obs[a[0]]) return;
        struct fz_info *in = new_info('O', a[0], 0);
        CFRunLoopObserverContext c = {0, in, info_retain, info_release, NULL};
        q->obs[a[0]] = CFRunLoopObserverCreate(NULL, (CFOptionFlags)a[1], a[2], a[3], obs_call, &c);
        fz_trace("O%d created", a[0]);
        return;
    }
    case OP_ADD:
    case OP_REM:
    case OP_HAS: {
        CFTypeRef it = item(a[0], a[1]);
        if (!it) return;
        CFRunLoopMode m = fz_mode(a[2]);
        fz_format(l, b, sizeof b);
        const char *text = strchr(b, ' ') + 1;
        if (op == OP_HAS) {
            bool r = a[0] == K_SRC   ? CFRunLoopContainsSource(q->loop, (CFRunLoopSourceRef)it, m)
                     : a[0] == K_TIM ? CFRunLoopContainsTimer(q->loop, (CFRunLoopTimerRef)it, m)
                                     : CFRunLoopContainsObserver(q->loop, (CFRunLoopObserverRef)it, m);
            fz_trace("%s: %s", text, r ? "yes" : "no");
            return;
        }
        fz_collect_begin();
        if (op == OP_ADD) {
            if (a[0] == K_SRC) CFRunLoopAddSource(q->loop, (CFRunLoopSourceRef)it, m);
            else if (a[0] == K_TIM) CFRunLoopAddTimer(q->loop, (CFRunLoopTimerRef)it, m);
            else CFRunLoopAddObserver(q->loop, (CFRunLoopObserverRef)it, m);
        } else {
            if (a[0] == K_SRC) CFRunLoopRemoveSource(q->loop, (CFRunLoopSourceRef)it, m);
            else if (a[0] == K_TIM) CFRunLoopRemoveTimer(q->loop, (CFRunLoopTimerRef)it, m);
            else CFRunLoopRemoveObserver(q->loop, (CFRunLoopObserverRef)it, m);
        }
        fz_collect_end(text);
        return;
    }
    case OP_SIG:
        if (a[0] >= FZ_NSRC || !q->src[a[0]]) return;
        CFRunLoopSourceSignal(q->src[a[0]]);
        return;
    case OP_INV:
    case OP_REL: {
        CFTypeRef it = item(a[0], a[1]);
        if (!it) return;
        /* Invalidating or releasing a timer while its callout runs (from
         * any callout nested in it) is a known open difference: CF retains
         * the context's info around a timer callout, so "freed" comes after
         * the callout. Skipped unless known bugs are on. */
        if (!fz_known_bugs && a[0] == K_TIM && q->tim_active[a[1]]) return;
        fz_format(l, b, sizeof b);
        const char *text = from_helper ? "helper inv" : strchr(b, ' ') + 1;
        fz_collect_begin();
        if (op == OP_REL) {
            if (a[0] == K_SRC) q->src[a[1]] = NULL;
            else if (a[0] == K_TIM) q->tim[a[1]] = NULL;
            else q->obs[a[1]] = NULL;
            CFRelease(it);
        } else if (a[0] == K_SRC) CFRunLoopSourceInvalidate((CFRunLoopSourceRef)it);
        else if (a[0] == K_TIM) CFRunLoopTimerInvalidate((CFRunLoopTimerRef)it);
        else CFRunLoopObserverInvalidate((CFRunLoopObserverRef)it);
        fz_collect_end(text);
        return;
    }
    case OP_VALID: {
        CFTypeRef it = item(a[0], a[1]);
        if (!it) return;
        bool v = a[0] == K_SRC   ? CFRunLoopSourceIsValid((CFRunLoopSourceRef)it)
                 : a[0] == K_TIM ? CFRunLoopTimerIsValid((CFRunLoopTimerRef)it)
                                 : CFRunLoopObserverIsValid((CFRunLoopObserverRef)it);
        fz_trace("valid %c%d: %s", kind_char[a[0]], a[1], v ? "yes" : "no");
        return;
    }
    case OP_SETD:
        if (a[0] >= FZ_NTIM || !q->tim[a[0]]) return;
        CFRunLoopTimerSetNextFireDate(q->tim[a[0]], fz_date(a[1]));
        return;
    case OP_NEXTD:
        if (a[0] >= FZ_NTIM || !q->tim[a[0]]) return;
        /* GetNextFireDate of an invalidated timer is a known open
         * difference (CF: 0): asked only of valid timers unless known
         * bugs are on. */
        if (!fz_known_bugs && !CFRunLoopTimerIsValid(q->tim[a[0]])) return;
        fz_trace("nextd T%d: %s", a[0], date_class(CFRunLoopTimerGetNextFireDate(q->tim[a[0]])));
        return;
    case OP_NTIM:
        fz_trace("ntim %s: %s", fz_mode_names[a[0]], date_class(CFRunLoopGetNextTimerFireDate(q->loop, fz_mode(a[0]))));
        return;
    case OP_BLK:
        queue_block(a[0], a[1]);
        return;
    case OP_FN:
#ifdef DIFF_CF
        queue_block(a[0], a[1]); /* CF has only the block form */
#else
        RLRunLoopPerformFunction(q->loop, fz_mode(a[1]), block_fn, (void *)(intptr_t)a[0]);
#endif
        return;
    case OP_RUN: {
        if (q->depth >= FZ_MAXDEPTH || fz_nested_after_stop(q)) return;
        fz_format(l, b, sizeof b);
        const char *text = strchr(b, ' ') + 1;
        fz_trace("> %s", text);
        q->depth++;
        CFTimeInterval secs = a[1] == 0 ? 0 : a[1] == 1 ? -1 : FZ_WAIT_SECONDS;
        int r = CFRunLoopRunInMode(fz_mode(a[0]), secs, a[2]);
        q->stop_pending[q->depth] = false;
        q->depth--;
        fz_trace("< %s: %s", text, result_text(r));
        return;
    }
    case OP_RUNALL:
        if (q->depth >= FZ_MAXDEPTH || fz_nested_after_stop(q)) return;
        fz_trace("> runall");
        q->depth++;
        CFRunLoopRun();
        q->stop_pending[q->depth] = false;
        q->depth--;
        fz_trace("< runall");
        return;
    case OP_STOP:
        if (!from_helper && q->depth > 0) q->stop_pending[q->depth] = true;
        CFRunLoopStop(q->loop);
        return;
    case OP_WAKE:
        CFRunLoopWakeUp(q->loop);
        return;
    case OP_ADDC:
        /* Schedules the common sources into the mode, in CF in the order
         * of a hashed set: gathered and sorted. */
        fz_collect_begin();
        CFRunLoopAddCommonMode(q->loop, fz_mode(a[0]));
        snprintf(b, sizeof b, "addc %s", fz_mode_names[a[0]]);
        fz_collect_end(b);
        return;
    case OP_MODES:
        all_modes_text(b, sizeof b);
        fz_trace("modes: %s", b);
        return;
    case OP_CUR:
        fz_trace("cur: %s", cur_mode_text(b, sizeof b));
        return;
    }
}

static void run_script(int script) {
    const struct fz_program *p = fz_cur->p;
    for (int i = 0; i < p->n; i++)
        if (p->l[i].script == script) exec_line(&p->l[i], false);
}

/* ---- The helper thread ---------------------------------------------------- */

/* True if the kernel reports the thread sleeping (state S: blocked, not
 * runnable). */
static bool thread_sleeping(pid_t tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static bool loop_blocked(struct fz_seq *q) {
    return CFRunLoopIsWaiting(q->loop) && thread_sleeping(q->tid);
}

static void *helper_main(void *arg) {
    struct fz_seq *q = arg;
    while (!atomic_load(&q->done)) {
        if (!loop_blocked(q)) {
            sleep_us(250);
            continue;
        }
        unsigned long before = atomic_load(&fz_trace_count);
        sleep_us(FZ_SETTLE_US);
        if (atomic_load(&q->done) || !loop_blocked(q) || atomic_load(&fz_trace_count) != before) continue;
        const struct fz_line *l = NULL;
        pthread_mutex_lock(&q->ext_lock);
        if (q->ext_head < q->ext_tail) l = q->ext[q->ext_head++];
        pthread_mutex_unlock(&q->ext_lock);
        if (!l) {
            fz_trace("helper: stop");
            /* Stop wakes the loop (its thread is runnable when this
             * returns), so the next look sees the next wait, however soon
             * it comes. */
            CFRunLoopStop(q->loop);
            continue;
        }
        exec_line(l, true);
        /* A cross-thread signal or block is followed by a wake-up, as CF
         * requires; the other actions wake the loop themselves or not at all
         * (then the loop stays blocked and gets the next action). */
        if (l->a[0] == OP_SIG || l->a[0] == OP_BLK) CFRunLoopWakeUp(q->loop);
    }
    return NULL;
}

/* ---- One sequence ----------------------------------------------------------- */

static void *sequence_main(void *arg) {
    struct fz_seq *q = arg;
    q->loop = CFRunLoopGetCurrent();
    q->tid = (pid_t)syscall(SYS_gettid);
    q->base = CFAbsoluteTimeGetCurrent();
    pthread_t helper;
    if (pthread_create(&helper, NULL, helper_main, q) != 0) {
        fz_trace("pthread_create failed");
        exit(2);
    }
    atomic_store(&fz_in_scripts, true);
    run_script(0);
    atomic_store(&q->done, true);
    pthread_join(helper, NULL);
    /* The program's own references go; what the loop still holds is
     * dropped at thread exit (sources cancelled: order unspecified). */
    fz_collect_begin();
    atomic_store(&fz_in_scripts, false);
    for (int i = 0; i < FZ_NSRC; i++)
        if (q->src[i]) CFRelease(q->src[i]);
    for (int i = 0; i < FZ_NTIM; i++)
        if (q->tim[i]) CFRelease(q->tim[i]);
    for (int i = 0; i < FZ_NOBS; i++)
        if (q->obs[i]) CFRelease(q->obs[i]);
    return NULL;
}

/* Runs one program on a fresh thread (a fresh run loop) and traces it. */
static void fz_run_program(const struct fz_program *p) {
    struct fz_seq *q = calloc(1, sizeof *q);
    q->p = p;
    pthread_mutex_init(&q->ext_lock, NULL);
    fz_cur = q;
    atomic_fetch_add(&fz_seq_no, 1);
    fz_seq_first_line = atomic_load(&fz_trace_count);
    pthread_t t;
    if (pthread_create(&t, NULL, sequence_main, q) != 0) {
        fz_trace("pthread_create failed");
        exit(2);
    }
    pthread_join(t, NULL);
    fz_collect_end("teardown");
    fflush(stdout);
    pthread_mutex_destroy(&q->ext_lock);
    free(q);
}

/* Parses and runs program text (for scenario files). */
static void fz_run_text(const char *text) {
    static struct fz_program p;
    if (!fz_parse(text, &p)) {
        printf("bad program\n");
        return;
    }
    fz_run_program(&p);
}
