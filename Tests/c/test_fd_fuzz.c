/* test_fd_fuzz.c — a seeded, model-based randomized test of RLFileDescriptor.
 *
 * Each iteration (one seed) makes 2-6 objects, each over one end of a
 * socketpair (read and write side), of a pipe's read end or of a pipe's
 * write end, adds their sources to mode "FZ" of this thread's loop and does
 * 150-300 random operations: the peers write (a position-dependent byte
 * pattern), shut down or close; the objects' own ends are filled and their
 * peers drain them; callbacks are enabled and disabled; the loop runs in
 * "FZ" (poll-only, a short timeout, returnAfterSourceHandled or not) or in
 * "OTHER" (a keep-alive source only); sources leave the mode and come back;
 * objects are invalidated (closeOnInvalidate or not) and new ones made,
 * their numbers reused. Callbacks do the same things at random: read part
 * of what is there, enable again or not, disable the other type,
 * invalidate themselves or another object, write to a peer, run the loop
 * nested.
 *
 * A model of every object (valid, in the mode, enabled types, bytes written
 * and read on each side) is checked at every callout:
 *   - the object is valid and in the mode, the run's mode is "FZ", and the
 *     types reported are ones the model has enabled (then off: one-shot);
 *   - a read callout finds the fd readable (poll: data, end or error), a
 *     write callout finds it writable (nothing else reads or writes it);
 *   - the loop consumed nothing: for every live object the bytes in each
 *     direction's buffer (FIONREAD) are exactly written - read, and every
 *     byte read has the pattern's value for its position;
 * and after every run:
 *   - liveness: an object valid, in "FZ", with a type enabled and its fd
 *     ready for it when the run started got that callback in the run
 *     (unless something during the run disabled it, took it out of the
 *     mode, invalidated it or made it no longer ready); with
 *     returnAfterSourceHandled, some callback came and the run says so;
 *   - a timed run did not spin: it woke a few times more than it made
 *     callouts at most;
 *   - a run of "OTHER" made no callout of ours.
 * At the end of each iteration every byte written must arrive exactly once
 * and in order (read in callbacks, the end seen where the peer ended the
 * stream), and every fd is closed again (/proc/self/fd counted).
 *
 * Runs on both backends (make check-c, make check-uring, the sanitizer and
 * leak runs): the same programs, the same checks. What it found on them is
 * fixed (a hang-up or a peer's half-close with only write enabled spun the
 * loop; on io_uring, a removal in a pass armed polls early, callouts came
 * for readiness that was gone, a ready fd came a run late). One rule of the
 * model is CF's, not the stricter one the checks above state: a pass calls
 * out what it collected even if an earlier callout of the pass removed the
 * source from the mode or changed its enabled types (CF's version-0
 * sources check only validity); the comments at removed_this_pass and
 * cleared_this_pass say exactly when, and the summary line counts them.
 * RL_FZ_STRICT=1 holds the library to the stricter rule (and fails).
 *
 * Reproducing: every failure prints its profile, seed and backend and the
 * last operations; RL_TEST_SEED=<seed> runs that seed only (in each test),
 * RL_FZ_LOG=1 prints every operation as it is made. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a small deterministic PRNG (splitmix64 seeding xorshift64*) ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_state;

static void rng_seed(uint64_t seed) {
    uint64_t x = seed;
    rng_state = splitmix64(&x);
    if (rng_state == 0)
        rng_state = 1;
}

static uint64_t rng_next(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n) (n > 0). */
static uint32_t rnd(uint32_t n) { return (uint32_t)((rng_next() >> 32) % n); }
/* True with probability permille/1000. */
static bool chance(int permille) { return permille > 0 && (int)rnd(1000) < permille; }
/* A size in [1, max], about log-uniform: mostly small, sometimes large. */
static size_t rnd_size(size_t max) {
    int bits = 0;
    while (((size_t)1 << bits) < max)
        bits++;
    size_t top = (size_t)1 << rnd((uint32_t)bits + 1);
    size_t n = 1 + rnd((uint32_t)(top > max ? max : top));
    return n > max ? max : n;
}

/* ---- the byte pattern: a byte's value depends on its stream and position ---- */

static uint8_t pat(uint32_t salt, uint64_t pos) {
    uint64_t x = pos * 0x9E3779B97F4A7C15ull + (uint64_t)salt * 0xD6E8FEB86659FD93ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (uint8_t)(x >> 56);
}

static void pat_fill(uint8_t *buf, size_t n, uint32_t salt, uint64_t pos) {
    for (size_t i = 0; i < n; i++)
        buf[i] = pat(salt, pos + i);
}

/* The index of the first byte of buf that is not the pattern's, or -1. */
static long pat_mismatch(const uint8_t *buf, size_t n, uint32_t salt, uint64_t pos) {
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pat(salt, pos + i))
            return (long)i;
    return -1;
}

enum { BUFSZ = 256 * 1024 };
static uint8_t iobuf[BUFSZ];

/* ---- the model ---- */

enum { K_SOCK, K_PIPE_R, K_PIPE_W, K_KINDS };
static const char *const kind_name[K_KINDS] = {"sock", "pipe-r", "pipe-w"};

enum { RD = kRLFileDescriptorReadCallBack, WR = kRLFileDescriptorWriteCallBack, RW = RD | WR };

typedef struct fz_obj {
    int id;   /* instance number in the iteration */
    int slot; /* its place among the K */
    int kind;
    RLFileDescriptorRef f;
    RLRunLoopSourceRef s;
    int fd;   /* the object's end */
    int peer; /* the other end, -1 once closed */
    bool close_on_inv;
    bool valid;
    bool in_mode;
    unsigned enabled; /* what the model says is enabled */
    unsigned owed;    /* callbacks the current run owes it (liveness) */
    int depth;        /* its callouts on the stack */
    uint64_t removed_ev; /* when it last left the mode (fz.ev) */
    uint64_t deliv_ev[2]; /* when it last got each type (fz.ev) */
    uint64_t enable_ev[2]; /* when each type was last enabled (fz.ev) */
    uint64_t clear_ev[2];  /* when each type was last disabled or delivered (fz.ev) */
    unsigned missed;     /* owed by the last run and not delivered */
    long calls_at[2];
    bool late;
    long calls[2];
    /* rx: peer -> fd (sock, pipe-r) */
    bool has_rx;
    uint32_t rx_salt;
    uint64_t rx_written, rx_read;
    bool rx_ended;   /* the peer shut down or closed its writing side */
    bool rx_eof;     /* a read found the end */
    bool rx_reset;   /* the peer closed with bytes it had not read: one ECONNRESET may come */
    /* tx: fd -> peer (sock, pipe-w) */
    bool has_tx;
    uint32_t tx_salt;
    uint64_t tx_written, tx_read;
    bool tx_dead;    /* the peer's reading side is gone: bytes in flight are lost */
    bool peer_shut;  /* sock: shutdown(peer, SHUT_WR) done */
} fz_obj;

typedef struct fz_profile {
    const char *name;
    uint32_t salt;
    int kind_w[K_KINDS];
    /* driver operations, weights */
    int w_peer_write, w_peer_end, w_peer_drain, w_fill, w_enable, w_disable, w_remove, w_add, w_invalidate,
        w_respawn, w_run, w_run_other;
    /* inside callbacks, per mille */
    int c_read, c_reenable, c_enable_other, c_disable_other, c_inv_self, c_inv_other, c_peer_write, c_fill,
        c_remove, c_add, c_respawn, c_nested, c_peer_end;
} fz_profile;

enum { MAX_SLOTS = 6, MAX_OBJS = 2048, CB_BUDGET = 24, LOG_LINES = 96, LOG_LEN = 160 };

static struct {
    const fz_profile *p;
    uint64_t seed;
    int op;
    RLRunLoopRef rl;
    const char *backend;
    RLRunLoopSourceRef keep_fz, keep_other;
    RLRunLoopObserverRef wake_obs, pass_obs;
    long wakes;
    uint64_t ev;            /* a clock of passes and removals */
    uint64_t pass_start[8]; /* when the current pass of the run at each depth began */
    long removed_callouts;  /* callouts allowed (CF): removed in the pass that collected them */
    long renested_callouts; /* callouts allowed (CF): disabled, enabled or delivered again in their pass */
    /* what was exercised */
    long n_inv_in_callout, n_inv_self, n_inv, n_nested, n_made, n_reused, n_removed, n_rash_runs, n_timed_runs;
    bool fd_seen[1024];
    int nslots;
    fz_obj *slot[MAX_SLOTS];
    fz_obj *all[MAX_OBJS];
    int nall;
    /* runs */
    const char *mode_stack[8];
    int mode_depth;
    long run_calls;     /* callouts in the current outermost run */
    long run_active;    /* of which acted at random (CB_BUDGET at most) */
    int nested_runs;
    bool strict;        /* RL_FZ_STRICT: the stricter rule, not CF's */
    bool draining;
    long total_calls, total_runs, total_bytes;
    /* failure */
    bool failed;
    char msg[1024];
    char log[LOG_LINES][LOG_LEN];
    long nlog;
    bool verbose;
} fz;

static void logop(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logop(const char *fmt, ...) {
    char *line = fz.log[fz.nlog % LOG_LINES];
    int pre = snprintf(line, LOG_LEN, "#%d%*s ", fz.op, fz.mode_depth * 2, "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + pre, LOG_LEN - (size_t)pre, fmt, ap);
    va_end(ap);
    fz.nlog++;
    if (fz.verbose)
        fprintf(stderr, "fz: %s\n", line);
}

/* Records the first failure (with the seed) and stops the innermost run:
 * the driver reports it after the run (a callout does not longjmp through
 * the loop). */
static void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fz_fail(const char *fmt, ...) {
    if (!fz.failed) {
        fz.failed = true;
        int n = snprintf(fz.msg, sizeof fz.msg, "[profile %s, seed %llu, backend %s, op #%d] ", fz.p->name,
                         (unsigned long long)fz.seed, fz.backend, fz.op);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(fz.msg + n, sizeof fz.msg - (size_t)n, fmt, ap);
        va_end(ap);
        logop("FAIL: %s", fz.msg + n);
    }
    if (fz.mode_depth > 0)
        RLRunLoopStop(fz.rl);
}

#define FZ_CHECK(cond, ...)             \
    do {                                \
        if (!(cond))                    \
            fz_fail(__VA_ARGS__);       \
    } while (0)

/* Fails the cmocka test with the recorded failure, the seed to reproduce
 * it, and the last operations. */
static void fz_report(void) {
    if (!fz.failed)
        return;
    print_error("test_fd_fuzz: %s\n", fz.msg);
    print_error("reproduce: RL_TEST_SEED=%llu RL_BACKEND=%s build/clang/tests/test_fd_fuzz (test %s); "
                "RL_FZ_LOG=1 prints every operation\nlast operations:\n",
                (unsigned long long)fz.seed, fz.backend, fz.p->name);
    long first = fz.nlog > LOG_LINES ? fz.nlog - LOG_LINES : 0;
    for (long i = first; i < fz.nlog; i++)
        print_error("  %s\n", fz.log[i % LOG_LINES]);
    /* What is left goes, so that the next test starts clean. */
    for (int i = 0; i < fz.nall; i++) {
        fz_obj *o = fz.all[i];
        if (o->valid) {
            RLFileDescriptorInvalidate(o->f);
            if (!o->close_on_inv)
                close(o->fd);
            if (o->peer >= 0)
                close(o->peer);
            RLRelease(o->s);
            RLRelease(o->f);
        }
        free(o);
    }
    fz.nall = 0;
    RLRunLoopObserverInvalidate(fz.wake_obs);
    RLRelease(fz.wake_obs);
    RLRunLoopObserverInvalidate(fz.pass_obs);
    RLRelease(fz.pass_obs);
    rl_test_unkeep(fz.keep_fz);
    rl_test_unkeep(fz.keep_other);
    fail_msg("%s", fz.msg);
}

static const char *types_str(unsigned t) {
    return t == RW ? "rw" : t == RD ? "r" : t == WR ? "w" : t == 0 ? "-" : "?";
}

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* poll(2)'s view of fd now: which callbacks the loop may report (as
 * rl_fdtab.c maps epoll's events: data, end, hang-up or error for read;
 * room, hang-up or error for write). */
static unsigned ready_now(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
    if (poll(&p, 1, 0) != 1)
        return 0;
    unsigned r = 0;
    if (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
        r |= RD;
    if (p.revents & (POLLOUT | POLLERR | POLLHUP))
        r |= WR;
    return r;
}

static long inq(int fd) {
    int n = -1;
    if (ioctl(fd, FIONREAD, &n) != 0)
        return -1;
    return n;
}

/* The loop never reads or writes: the bytes waiting in each direction are
 * what the model says. */
static void check_bytes_all(const char *where) {
    for (int i = 0; i < fz.nslots; i++) {
        fz_obj *o = fz.slot[i];
        if (!o || !o->valid)
            continue;
        if (o->has_rx) {
            long n = inq(o->fd);
            FZ_CHECK(n == (long)(o->rx_written - o->rx_read),
                     "%s: obj %d (%s fd %d) holds %ld bytes to read, the model says %llu (written %llu, read %llu)",
                     where, o->id, kind_name[o->kind], o->fd, n, (unsigned long long)(o->rx_written - o->rx_read),
                     (unsigned long long)o->rx_written, (unsigned long long)o->rx_read);
        }
        if (o->has_tx && !o->tx_dead && o->peer >= 0) {
            long n = inq(o->peer);
            FZ_CHECK(n == (long)(o->tx_written - o->tx_read),
                     "%s: the peer of obj %d (%s fd %d) holds %ld bytes, the model says %llu", where, o->id,
                     kind_name[o->kind], o->fd, n, (unsigned long long)(o->tx_written - o->tx_read));
        }
    }
}

/* ---- operations on objects (the driver's and the callbacks') ---- */

static void fz_callout(RLFileDescriptorRef f, RLOptionFlags types, void *info);

static fz_obj *obj_make(int slot) {
    if (fz.nall >= MAX_OBJS)
        return NULL;
    fz_obj *o = calloc(1, sizeof *o);
    assert_non_null(o);
    o->id = fz.nall;
    o->slot = slot;
    int tw = 0;
    for (int k = 0; k < K_KINDS; k++)
        tw += fz.p->kind_w[k];
    int r = (int)rnd((uint32_t)tw);
    o->kind = 0;
    while (r >= fz.p->kind_w[o->kind])
        r -= fz.p->kind_w[o->kind++];
    int two[2];
    if (o->kind == K_SOCK) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, two), 0);
        o->fd = two[0];
        o->peer = two[1];
        o->has_rx = o->has_tx = true;
        if (chance(300)) { /* a small send buffer: writability comes and goes */
            int sz = 2048 + (int)rnd(16384);
            (void)setsockopt(o->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        }
    } else {
        assert_int_equal(pipe2(two, O_NONBLOCK | O_CLOEXEC), 0);
        if (chance(300))
            (void)fcntl(two[0], F_SETPIPE_SZ, 4096);
        if (o->kind == K_PIPE_R) {
            o->fd = two[0];
            o->peer = two[1];
            o->has_rx = true;
        } else {
            o->fd = two[1];
            o->peer = two[0];
            o->has_tx = true;
        }
    }
    o->rx_salt = (uint32_t)(fz.seed * 7919u) + (uint32_t)o->id * 2u;
    o->tx_salt = o->rx_salt + 1u;
    o->close_on_inv = chance(500);
    RLFileDescriptorContext c = {0, o, NULL, NULL, NULL};
    o->f = RLFileDescriptorCreate(NULL, o->fd, o->close_on_inv, fz_callout, &c);
    assert_non_null(o->f);
    o->s = RLFileDescriptorCreateRunLoopSource(NULL, o->f, (RLIndex)rnd(3));
    assert_non_null(o->s);
    o->valid = true;
    fz.n_made++;
    if (o->fd < 1024) {
        fz.n_reused += fz.fd_seen[o->fd];
        fz.fd_seen[o->fd] = true;
    }
    fz.all[fz.nall++] = o;
    fz.slot[slot] = o;
    FZ_CHECK(RLRunLoopAddSource(fz.rl, o->s, "FZ"), "RLRunLoopAddSource of new obj %d failed", o->id);
    o->in_mode = true;
    logop("make obj %d slot %d %s fd %d peer %d closeOnInvalidate %d", o->id, slot, kind_name[o->kind], o->fd,
          o->peer, o->close_on_inv);
    return o;
}

static void obj_enable(fz_obj *o, unsigned t) {
    bool ok = RLFileDescriptorEnableCallBacks(o->f, t);
    FZ_CHECK(ok, "RLFileDescriptorEnableCallBacks(obj %d, %s) failed: %s", o->id, types_str(t),
             RLErrorGetLast().message ? RLErrorGetLast().message : "");
    o->enabled |= t;
    for (unsigned i = 0; i < 2; i++)
        if (t & (1u << i))
            o->enable_ev[i] = ++fz.ev;
    logop("enable obj %d %s -> %s", o->id, types_str(t), types_str(o->enabled));
}

static void obj_disable(fz_obj *o, unsigned t) {
    bool ok = RLFileDescriptorDisableCallBacks(o->f, t);
    FZ_CHECK(ok, "RLFileDescriptorDisableCallBacks(obj %d, %s) failed", o->id, types_str(t));
    o->enabled &= ~t;
    o->owed &= ~t;
    for (unsigned i = 0; i < 2; i++)
        if (t & (1u << i))
            o->clear_ev[i] = ++fz.ev;
    logop("disable obj %d %s -> %s", o->id, types_str(t), types_str(o->enabled));
}

static void obj_remove(fz_obj *o) {
    RLRunLoopRemoveSource(fz.rl, o->s, "FZ");
    o->in_mode = false;
    o->removed_ev = ++fz.ev;
    fz.n_removed++;
    o->owed = 0;
    logop("remove obj %d from FZ", o->id);
}

static void obj_add(fz_obj *o) {
    FZ_CHECK(RLRunLoopAddSource(fz.rl, o->s, "FZ"), "RLRunLoopAddSource(obj %d) failed", o->id);
    o->in_mode = true;
    logop("add obj %d to FZ", o->id);
}

static void obj_invalidate(fz_obj *o) {
    logop("invalidate obj %d (fd %d, closeOnInvalidate %d, in callout %d)", o->id, o->fd, o->close_on_inv,
          o->depth);
    FZ_CHECK(RLFileDescriptorInvalidate(o->f), "RLFileDescriptorInvalidate(obj %d) failed", o->id);
    fz.n_inv++;
    fz.n_inv_in_callout += fz.mode_depth > 0;
    fz.n_inv_self += o->depth > 0;
    o->valid = false;
    o->in_mode = false;
    o->enabled = 0;
    o->owed = 0;
    FZ_CHECK(!RLFileDescriptorIsValid(o->f), "obj %d still valid after RLFileDescriptorInvalidate", o->id);
    FZ_CHECK(!RLRunLoopSourceIsValid(o->s), "obj %d's source still valid after RLFileDescriptorInvalidate", o->id);
    int r = fcntl(o->fd, F_GETFD);
    if (o->close_on_inv) {
        FZ_CHECK(r == -1 && errno == EBADF, "obj %d: closeOnInvalidate, but fd %d is still open after invalidate",
                 o->id, o->fd);
    } else {
        FZ_CHECK(r != -1, "obj %d: not closeOnInvalidate, but fd %d was closed by invalidate", o->id, o->fd);
        close(o->fd);
    }
    if (o->peer >= 0)
        close(o->peer);
    o->peer = -1;
    RLRelease(o->s);
    RLRelease(o->f);
    o->s = NULL;
    o->f = NULL;
    if (fz.slot[o->slot] == o)
        fz.slot[o->slot] = NULL;
}

/* The peer writes up to `want` bytes of the rx stream. */
static void peer_write(fz_obj *o, size_t want) {
    if (!o->valid || !o->has_rx || o->rx_ended || o->peer < 0)
        return;
    if (want > BUFSZ)
        want = BUFSZ;
    pat_fill(iobuf, want, o->rx_salt, o->rx_written);
    ssize_t n = o->kind == K_SOCK ? send(o->peer, iobuf, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                                  : write(o->peer, iobuf, want);
    int e = errno;
    FZ_CHECK(n >= 0 || e == EAGAIN, "peer write of obj %d (%s): %s", o->id, kind_name[o->kind], strerror(e));
    if (n > 0) {
        o->rx_written += (uint64_t)n;
        fz.total_bytes += n;
        /* Bytes the object's own (readable) fd got: its write readiness is
         * not touched; a read owed stays owed. */
    }
    logop("peer write obj %d: %zu -> %zd (written %llu)", o->id, want, n, (unsigned long long)o->rx_written);
}

/* The peer ends the rx stream: shutdown (sock, half) or close. */
static void peer_end(fz_obj *o) {
    if (!o->valid || o->peer < 0)
        return;
    if (o->kind == K_SOCK && !o->peer_shut && chance(500)) {
        FZ_CHECK(shutdown(o->peer, SHUT_WR) == 0, "shutdown of obj %d's peer: %s", o->id, strerror(errno));
        o->peer_shut = true;
        o->rx_ended = true;
        logop("peer shutdown(SHUT_WR) obj %d", o->id);
        return;
    }
    if (o->has_tx && !o->tx_dead) {
        long pending = (long)(o->tx_written - o->tx_read);
        if (o->kind == K_SOCK && pending > 0)
            o->rx_reset = true; /* AF_UNIX: the close of a socket holding unread bytes resets its peer */
        o->tx_dead = true;
    }
    close(o->peer);
    o->peer = -1;
    o->rx_ended = true;
    /* The object's write readiness may change (an error now): a write owed stays owed, poll says so. */
    logop("peer close obj %d", o->id);
}

/* The peer reads up to `want` bytes of the tx stream and checks them. */
static void peer_drain(fz_obj *o, size_t want) {
    if (!o->valid || !o->has_tx || o->tx_dead || o->peer < 0)
        return;
    if (want > BUFSZ)
        want = BUFSZ;
    ssize_t n = read(o->peer, iobuf, want);
    int e = errno;
    if (n < 0) {
        FZ_CHECK(e == EAGAIN, "peer read of obj %d: %s", o->id, strerror(e));
        FZ_CHECK(o->tx_written == o->tx_read, "peer read of obj %d: EAGAIN with %llu bytes in flight", o->id,
                 (unsigned long long)(o->tx_written - o->tx_read));
    } else {
        FZ_CHECK(n > 0 || want == 0, "peer read of obj %d: end of stream, but the object never ended it", o->id);
        long bad = pat_mismatch(iobuf, (size_t)n, o->tx_salt, o->tx_read);
        FZ_CHECK(bad < 0, "peer of obj %d read a wrong byte at tx position %llu", o->id,
                 (unsigned long long)(o->tx_read + (uint64_t)bad));
        o->tx_read += (uint64_t)n;
        FZ_CHECK(o->tx_read <= o->tx_written, "peer of obj %d read %llu bytes, only %llu were written", o->id,
                 (unsigned long long)o->tx_read, (unsigned long long)o->tx_written);
    }
    logop("peer drain obj %d: %zu -> %zd (read %llu of %llu)", o->id, want, n, (unsigned long long)o->tx_read,
          (unsigned long long)o->tx_written);
}

/* The object's side writes up to `want` bytes of the tx stream into its fd. */
static void obj_fill(fz_obj *o, size_t want) {
    if (!o->valid || !o->has_tx)
        return;
    if (want > BUFSZ)
        want = BUFSZ;
    pat_fill(iobuf, want, o->tx_salt, o->tx_written);
    ssize_t n = o->kind == K_SOCK ? send(o->fd, iobuf, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                                  : write(o->fd, iobuf, want);
    int e = errno;
    if (n < 0)
        FZ_CHECK(e == EAGAIN || (o->tx_dead && (e == EPIPE || e == ECONNRESET)), "write to obj %d's fd: %s", o->id,
                 strerror(e));
    if (n > 0 && !o->tx_dead)
        o->tx_written += (uint64_t)n;
    /* Less room now: a write owed may no longer be (poll decides nothing
     * here; the run's check must not ask for it). */
    o->owed &= ~(unsigned)WR;
    logop("fill obj %d: %zu -> %zd", o->id, want, n);
}

/* The object's side reads up to `want` bytes of the rx stream from its fd
 * (in a callout) and checks them. Returns false at the end (or reset). */
static bool obj_read(fz_obj *o, size_t want) {
    if (!o->valid || !o->has_rx)
        return false;
    if (want > BUFSZ)
        want = BUFSZ;
    ssize_t n = read(o->fd, iobuf, want);
    int e = errno;
    bool more = true;
    if (n < 0) {
        if (e == ECONNRESET) {
            FZ_CHECK(o->rx_reset && o->rx_read == o->rx_written,
                     "obj %d: read says ECONNRESET, %llu bytes still unread (peer closed with unread bytes: %d)",
                     o->id, (unsigned long long)(o->rx_written - o->rx_read), o->rx_reset);
            o->rx_reset = false;
            o->rx_eof = true;
            more = false;
        } else {
            FZ_CHECK(e == EAGAIN, "obj %d: read: %s", o->id, strerror(e));
            FZ_CHECK(o->rx_read == o->rx_written && !o->rx_ended,
                     "obj %d: read found nothing (EAGAIN) but the model has %llu bytes%s to read", o->id,
                     (unsigned long long)(o->rx_written - o->rx_read), o->rx_ended ? " and the end" : "");
            more = false;
        }
    } else if (n == 0 && want > 0) {
        FZ_CHECK(o->rx_ended && o->rx_read == o->rx_written,
                 "obj %d: read found the end, but %llu bytes are unread and the peer %s", o->id,
                 (unsigned long long)(o->rx_written - o->rx_read), o->rx_ended ? "ended" : "did not end");
        o->rx_eof = true;
        more = false;
    } else if (n > 0) {
        long bad = pat_mismatch(iobuf, (size_t)n, o->rx_salt, o->rx_read);
        FZ_CHECK(bad < 0, "obj %d read a wrong byte at rx position %llu (read %zd at %llu)", o->id,
                 (unsigned long long)(o->rx_read + (uint64_t)bad), n, (unsigned long long)o->rx_read);
        o->rx_read += (uint64_t)n;
        FZ_CHECK(o->rx_read <= o->rx_written, "obj %d read %llu bytes, only %llu were written", o->id,
                 (unsigned long long)o->rx_read, (unsigned long long)o->rx_written);
    }
    logop("read obj %d: %zu -> %zd (read %llu of %llu)", o->id, want, n, (unsigned long long)o->rx_read,
          (unsigned long long)o->rx_written);
    return more;
}

/* A random live object (NULL if none); `in_mode_only`: in FZ. */
static fz_obj *pick_live(bool in_mode_only) {
    fz_obj *c[MAX_SLOTS];
    int n = 0;
    for (int i = 0; i < fz.nslots; i++)
        if (fz.slot[i] && fz.slot[i]->valid && (!in_mode_only || fz.slot[i]->in_mode))
            c[n++] = fz.slot[i];
    return n ? c[rnd((uint32_t)n)] : NULL;
}

static int pick_empty_slot(void) {
    int c[MAX_SLOTS], n = 0;
    for (int i = 0; i < fz.nslots; i++)
        if (!fz.slot[i])
            c[n++] = i;
    return n ? c[rnd((uint32_t)n)] : -1;
}

static fz_obj *respawn(void) {
    int s = pick_empty_slot();
    if (s < 0)
        return NULL;
    fz_obj *o = obj_make(s);
    if (o && chance(600))
        obj_enable(o, 1 + rnd(3));
    return o;
}

/* ---- runs ---- */

static RLRunLoopRunResult run_mode(const char *mode, double secs, bool rash) {
    fz.mode_stack[fz.mode_depth++] = mode;
    logop("run %s %.4f s%s {", mode, secs, rash ? " returnAfterSourceHandled" : "");
    RLRunLoopRunResult r = RLRunLoopRunInMode(mode, secs, rash);
    fz.mode_depth--;
    logop("} run %s -> %d", mode, (int)r);
    return r;
}

/* A run that ends without a callback that was enabled and ready when it
 * started: one more poll-only run, then a 0.1 s run (their callouts
 * passive), to say in the failure whether it was late or lost. */
static void check_missed(double secs, bool rash) {
    fz.run_active = CB_BUDGET;
    logop("(liveness: callbacks missed; one more poll-only run to tell late from lost)");
    run_mode("FZ", 0, false);
    bool next_ok = true;
    for (int i = 0; i < fz.nall; i++) {
        fz_obj *o = fz.all[i];
        o->late = ((o->missed & RD) && o->calls[0] > o->calls_at[0]) ||
                  ((o->missed & WR) && o->calls[1] > o->calls_at[1]);
        if (o->missed && !o->late)
            next_ok = false;
        if (rash && o->late)
            next_ok = true; /* any one of them would have done */
    }
    if (!next_ok && !fz.failed) {
        logop("(liveness: and a 0.1 s run)");
        run_mode("FZ", 0.1, false);
    }
    if (fz.failed)
        return;
    for (int i = 0; i < fz.nall; i++) {
        fz_obj *o = fz.all[i];
        if (!o->missed)
            continue;
        bool later = ((o->missed & RD) && o->calls[0] > o->calls_at[0]) ||
                     ((o->missed & WR) && o->calls[1] > o->calls_at[1]);
        fz_fail("liveness: obj %d (%s fd %d) was valid, in FZ, enabled for %s and ready for it when a run (%.4f s%s) "
                "started; the run ended without %s (enabled now %s, ready %s); %s",
                o->id, kind_name[o->kind], o->fd, types_str(o->missed), secs, rash ? ", returnAfterSourceHandled" : "",
                rash ? "any callout" : "that callback", types_str(o->enabled),
                o->valid ? types_str(ready_now(o->fd)) : "-",
                o->late ? "the next poll-only run delivered it (late)"
                        : later ? "a 0.1 s run after delivered it (late)" : "no run after delivered it (lost)");
        return;
    }
}

/* A run from the driver (the outermost), with the liveness checks. */
static void driver_run(const char *mode, double secs, bool rash) {
    bool fzmode = strcmp(mode, "FZ") == 0;
    bool any_owed = false;
    for (int i = 0; i < fz.nall; i++) {
        fz_obj *o = fz.all[i];
        o->owed = 0;
        if (fzmode && o->valid && o->in_mode && o->enabled) {
            o->owed = o->enabled & ready_now(o->fd);
            any_owed |= o->owed != 0;
        }
    }
    if (rash && any_owed && secs > 0)
        secs = 5; /* something is owed: it returns at once (or the check below fails) */
    fz.run_calls = fz.run_active = 0;
    fz.nested_runs = 0;
    fz.wakes = 0;
    fz.total_runs++;
    fz.n_rash_runs += rash;
    fz.n_timed_runs += secs > 0;
    RLRunLoopRunResult r = run_mode(mode, secs, rash);
    if (fz.failed)
        return;
    RLRunLoopRunResult want = rash && fz.run_calls > 0 ? kRLRunLoopRunHandledSource : kRLRunLoopRunTimedOut;
    FZ_CHECK(r == want, "RLRunLoopRunInMode(%s, %.3f, %d) returned %d, expected %d (%ld callouts in the run)", mode,
             secs, rash, (int)r, (int)want, fz.run_calls);
    if (!fzmode) {
        FZ_CHECK(fz.run_calls == 0, "%ld callouts in a run of mode %s, which holds none of the objects",
                 fz.run_calls, mode);
        return;
    }
    if (!rash) {
        bool spun = fz.wakes > fz.run_calls + 2L * fz.nested_runs + 8;
        if (secs > 0)
            FZ_CHECK(!spun, "spin: a %.4f s run of FZ woke %ld times for %ld callouts", secs, fz.wakes, fz.run_calls);
    }
    /* Liveness: with returnAfterSourceHandled some callout, else every
     * one owed. */
    int nmissed = 0;
    for (int i = 0; i < fz.nall; i++) {
        fz_obj *o = fz.all[i];
        o->missed = rash ? (fz.run_calls == 0 ? o->owed : 0) : o->owed;
        o->calls_at[0] = o->calls[0];
        o->calls_at[1] = o->calls[1];
        nmissed += o->missed != 0;
    }
    if (nmissed > 0)
        check_missed(secs, rash);
    for (int i = 0; i < fz.nall; i++)
        fz.all[i]->owed = 0;
}

static void count_wake(RLRunLoopObserverRef ob, RLRunLoopActivity a, void *info) {
    (void)ob, (void)a, (void)info;
    fz.wakes++;
}

static void note_pass(RLRunLoopObserverRef ob, RLRunLoopActivity a, void *info) {
    (void)ob, (void)a, (void)info;
    if (fz.mode_depth > 0)
        fz.pass_start[fz.mode_depth - 1] = ++fz.ev;
    if (fz.verbose)
        logop("pass");
}

/* CF's rule, kept by the library on both backends: a source removed from
 * the mode by a callout still gets the callout its pass collected before
 * (its fd reported in the same wait), as CF's version-0 sources do
 * (__CFRunLoopDoSources0 performs each collected source that is valid),
 * though RLSocket's pieces stop at such a removal (rl__fd_served_now).
 * Allowed when the removal came after the start of the pass making the
 * callout, unless RL_FZ_STRICT is set. */
static bool removed_this_pass(const fz_obj *o) {
    return !fz.strict && fz.mode_depth > 0 && o->removed_ev > fz.pass_start[fz.mode_depth - 1];
}

/* CF's rule again, for the enabled types. A pass takes (disables) the types it will deliver when it
 * collects them, and calls out without looking at them again: a disable
 * made in between (by an earlier callout of the pass, or in a run nested
 * in one) does not cancel the callout, which comes for a type that is not
 * enabled; an enable made in between is not consumed by the callout, so
 * the type is still enabled after its callback (which the header says it
 * is not) and a second callout follows; and if a run nested in an earlier
 * callout of the pass delivers such a type again, the pass still makes
 * its own callout for it, when it is not enabled. The model follows the
 * library (kept_enabled, cleared_this_pass), counted, unless RL_FZ_STRICT
 * is set: a callout for a type not enabled is allowed when each such type
 * was disabled or delivered after the start of the callout's pass.
 *
 * kept_enabled: the types of this callout that stay enabled after it:
 * enabled again after the start of its pass (after the pass took them)
 * and after their last delivery (a nested pass's take). */
static unsigned kept_enabled(const fz_obj *o, unsigned types) {
    unsigned keep = 0;
    if (fz.strict || fz.mode_depth == 0)
        return 0;
    for (unsigned t = 0; t < 2; t++)
        if ((types & o->enabled & (1u << t)) && o->enable_ev[t] > fz.pass_start[fz.mode_depth - 1] &&
            o->enable_ev[t] > o->deliv_ev[t])
            keep |= 1u << t;
    return keep;
}

static bool cleared_this_pass(const fz_obj *o, unsigned types) {
    if (fz.strict || fz.mode_depth == 0)
        return false;
    for (unsigned t = 0; t < 2; t++)
        if ((types & (1u << t)) && o->clear_ev[t] <= fz.pass_start[fz.mode_depth - 1])
            return false;
    return true;
}

/* ---- the callout ---- */

/* What a callback does at random (within its run's budget). o is valid. */
static void callout_actions(fz_obj *o, unsigned types) {
    const fz_profile *p = fz.p;
    if ((types & RD) && o->has_rx && chance(p->c_read)) {
        /* read part of what is there (0..65536) */
        obj_read(o, rnd(65537));
    }
    if ((types & WR) && o->has_tx && chance(p->c_fill))
        obj_fill(o, rnd_size(200000));
    if (chance(p->c_peer_write)) {
        fz_obj *t = pick_live(false);
        if (t)
            peer_write(t, rnd_size(100000));
    }
    if (chance(p->c_peer_end)) {
        fz_obj *t = pick_live(false);
        if (t)
            peer_end(t);
    }
    if (o->valid && chance(p->c_reenable))
        obj_enable(o, types);
    if (o->valid && chance(p->c_enable_other))
        obj_enable(o, RW & ~types);
    if (o->valid && chance(p->c_disable_other))
        obj_disable(o, RW & ~types);
    if (chance(p->c_remove)) {
        fz_obj *t = chance(500) ? o : pick_live(true);
        if (t && t->valid && t->in_mode)
            obj_remove(t);
    }
    if (chance(p->c_add)) {
        fz_obj *t = pick_live(false);
        if (t && !t->in_mode)
            obj_add(t);
    }
    if (chance(p->c_inv_other)) {
        fz_obj *t = pick_live(false);
        if (t && t != o)
            obj_invalidate(t);
    }
    if (chance(p->c_respawn))
        respawn();
    if (fz.mode_depth < 3 && chance(p->c_nested)) {
        bool other = chance(300);
        fz.nested_runs++;
        fz.n_nested++;
        RLRunLoopRunResult r = run_mode(other ? "OTHER" : "FZ", chance(800) ? 0 : 0.001, chance(500));
        FZ_CHECK(r == kRLRunLoopRunTimedOut || r == kRLRunLoopRunHandledSource || fz.failed,
                 "a nested run returned %d", (int)r);
    }
    if (o->valid && chance(p->c_inv_self))
        obj_invalidate(o);
}

static void fz_callout(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    fz_obj *o = info;
    if (fz.failed)
        return;
    fz.run_calls++;
    fz.total_calls++;
    logop("callout obj %d %s (enabled %s, depth %d)", o->id, types_str((unsigned)types), types_str(o->enabled),
          o->depth);
    FZ_CHECK(o->valid, "callout (%s) of obj %d after it was invalidated", types_str((unsigned)types), o->id);
    if (!o->valid)
        return;
    FZ_CHECK(f == o->f, "callout of obj %d with another object", o->id);
    FZ_CHECK(RLFileDescriptorIsValid(f), "callout of obj %d, which says it is not valid", o->id);
    FZ_CHECK(RLFileDescriptorGetNativeDescriptor(f) == o->fd, "callout of obj %d: its fd is %d, made with %d", o->id,
             RLFileDescriptorGetNativeDescriptor(f), o->fd);
    if (!o->in_mode && removed_this_pass(o)) {
        fz.removed_callouts++;
        logop("(callout allowed, as CF: obj %d left the mode during the pass that collected it)", o->id);
    } else {
        FZ_CHECK(o->in_mode, "callout (%s) of obj %d, which is not in mode FZ (removed)",
                 types_str((unsigned)types), o->id);
    }
    const char *mode = fz.mode_depth > 0 ? fz.mode_stack[fz.mode_depth - 1] : "(no run)";
    FZ_CHECK(strcmp(mode, "FZ") == 0, "callout (%s) of obj %d in a run of mode %s", types_str((unsigned)types),
             o->id, mode);
    FZ_CHECK(types != 0 && (types & ~(RLOptionFlags)RW) == 0, "callout of obj %d with types 0x%lx", o->id,
             (unsigned long)types);
    unsigned not_enabled = (unsigned)types & ~o->enabled;
    if (not_enabled && cleared_this_pass(o, not_enabled)) {
        fz.renested_callouts++;
        logop("(callout allowed, as CF: obj %d's %s was disabled, or delivered by a nested run, after this pass took it)",
              o->id, types_str(not_enabled));
    } else {
        FZ_CHECK(not_enabled == 0, "callout of obj %d for %s, but only %s is enabled", o->id,
                 types_str((unsigned)types), types_str(o->enabled));
    }
    unsigned ready = ready_now(o->fd);
    bool rd_bad = (types & RD) && !(ready & RD), wr_bad = (types & WR) && !(ready & WR);
    FZ_CHECK(!rd_bad,
             "read callout of obj %d (%s fd %d), whose fd is not readable (no data, end or error; %llu bytes unread)",
             o->id, kind_name[o->kind], o->fd, (unsigned long long)(o->rx_written - o->rx_read));
    FZ_CHECK(!wr_bad, "write callout of obj %d (%s fd %d), whose fd is not writable", o->id, kind_name[o->kind], o->fd);
    check_bytes_all("at a callout");
    if (fz.failed)
        return;
    unsigned keep = kept_enabled(o, (unsigned)types);
    if (keep) {
        fz.renested_callouts++;
        logop("(model: obj %d's %s stays enabled after this callout: enabled again after its pass took it)", o->id,
              types_str(keep));
    }
    o->enabled &= ~((unsigned)types & ~keep); /* one-shot */
    o->owed &= ~(unsigned)types;
    for (unsigned t = 0; t < 2; t++) {
        if (types & (1u << t)) {
            o->calls[t]++;
            o->deliv_ev[t] = o->clear_ev[t] = ++fz.ev;
        }
    }
    o->depth++;
    if (fz.draining) {
        /* Read all there is, and ask again until the end (or all bytes, if
         * the peer did not end the stream). */
        if ((types & RD) && o->has_rx) {
            while (obj_read(o, BUFSZ) && !fz.failed)
                ;
            bool done = o->rx_read == o->rx_written && (!o->rx_ended || o->rx_eof);
            if (!done && o->valid)
                obj_enable(o, RD);
        }
    } else if (fz.run_active < CB_BUDGET) {
        fz.run_active++;
        callout_actions(o, (unsigned)types);
    }
    o->depth--;
    if (o->valid)
        check_bytes_all("after a callout");
}

/* ---- one iteration ---- */

static void driver_op(void) {
    const fz_profile *p = fz.p;
    int w[] = {p->w_peer_write, p->w_peer_end, p->w_peer_drain, p->w_fill,       p->w_enable,  p->w_disable,
               p->w_remove,     p->w_add,      p->w_invalidate, p->w_respawn,    p->w_run,     p->w_run_other};
    int total = 0;
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        total += w[i];
    int r = (int)rnd((uint32_t)total), k = 0;
    while (r >= w[k])
        r -= w[k++];
    fz_obj *o = pick_live(false);
    switch (k) {
    case 0:
        if (o)
            peer_write(o, rnd_size(100000));
        break;
    case 1:
        if (o && chance(300)) /* rarer than its weight: once per object */
            peer_end(o);
        break;
    case 2:
        if (o)
            peer_drain(o, rnd_size(BUFSZ));
        break;
    case 3:
        if (o)
            obj_fill(o, rnd_size(200000));
        break;
    case 4:
        if (o)
            obj_enable(o, 1 + rnd(3));
        break;
    case 5:
        if (o)
            obj_disable(o, 1 + rnd(3));
        break;
    case 6:
        if (o && o->in_mode)
            obj_remove(o);
        break;
    case 7:
        if (o && !o->in_mode)
            obj_add(o);
        break;
    case 8:
        if (o)
            obj_invalidate(o);
        break;
    case 9:
        respawn();
        break;
    case 10: {
        bool rash = chance(400);
        double secs = chance(700) ? 0 : 0.0002 * (1 + rnd(5));
        driver_run("FZ", secs, rash);
        break;
    }
    case 11:
        driver_run("OTHER", chance(600) ? 0 : 0.0005, chance(500));
        break;
    }
}

/* Every byte arrives exactly once, in order, and the end where the peer
 * ended the stream: read in callouts; the tx side by the peers. */
static void drain_all(void) {
    fz.op = -1;
    logop("drain");
    fz.draining = true;
    for (int i = 0; i < fz.nslots && !fz.failed; i++) {
        fz_obj *o = fz.slot[i];
        if (!o || !o->valid)
            continue;
        if (!o->in_mode)
            obj_add(o);
        if (o->has_rx)
            obj_enable(o, RD);
    }
    double t0 = rl_test_now();
    for (;;) {
        bool done = true;
        for (int i = 0; i < fz.nslots; i++) {
            fz_obj *o = fz.slot[i];
            if (o && o->valid && o->has_rx && !(o->rx_read == o->rx_written && (!o->rx_ended || o->rx_eof)))
                done = false;
        }
        if (done || fz.failed || rl_test_now() - t0 > 10)
            break;
        long before = fz.total_calls;
        driver_run("FZ", 0, false);
        if (fz.total_calls == before && !fz.failed)
            driver_run("FZ", 0.001, false); /* nothing came: wait a little */
    }
    for (int i = 0; i < fz.nslots && !fz.failed; i++) {
        fz_obj *o = fz.slot[i];
        if (!o || !o->valid)
            continue;
        if (o->has_rx) {
            FZ_CHECK(o->rx_read == o->rx_written,
                     "after the drain (10 s at most) obj %d (%s fd %d) has read %llu of %llu bytes (callbacks r %ld "
                     "w %ld)",
                     o->id, kind_name[o->kind], o->fd, (unsigned long long)o->rx_read,
                     (unsigned long long)o->rx_written, o->calls[0], o->calls[1]);
            FZ_CHECK(!o->rx_ended || o->rx_eof,
                     "after the drain (10 s at most) obj %d (%s fd %d) never saw the end its peer made", o->id,
                     kind_name[o->kind], o->fd);
        }
        if (o->has_tx && !o->tx_dead && o->peer >= 0) {
            while (o->tx_read < o->tx_written && !fz.failed)
                peer_drain(o, BUFSZ);
            FZ_CHECK(o->tx_read == o->tx_written, "obj %d's peer read %llu of %llu bytes", o->id,
                     (unsigned long long)o->tx_read, (unsigned long long)o->tx_written);
            /* Nothing more than was written. */
            ssize_t n = read(o->peer, iobuf, 1);
            FZ_CHECK(n < 0 && errno == EAGAIN, "obj %d's peer: a byte more than was written (read %zd)", o->id, n);
        }
    }
    fz.draining = false;
}

static void iteration(void) {
    rng_seed(fz.seed * 0x100000001B3ull ^ fz.p->salt);
    memset(fz.fd_seen, 0, sizeof fz.fd_seen);
    fz.nall = 0;
    fz.nlog = 0;
    fz.op = 0;
    memset(fz.slot, 0, sizeof fz.slot);
    int fds_before = count_fds();
    fz.nslots = 2 + (int)rnd(5);
    for (int i = 0; i < fz.nslots; i++) {
        fz_obj *o = obj_make(i);
        if (chance(500))
            obj_enable(o, 1 + rnd(3));
    }
    int nops = 150 + (int)rnd(151);
    for (fz.op = 1; fz.op <= nops && !fz.failed; fz.op++) {
        driver_op();
        if (!fz.failed)
            check_bytes_all("after an operation");
    }
    if (!fz.failed)
        drain_all();
    /* The end: everything invalidated, then a run makes no callout. */
    for (int i = 0; i < fz.nslots && !fz.failed; i++)
        if (fz.slot[i] && fz.slot[i]->valid)
            obj_invalidate(fz.slot[i]);
    if (!fz.failed)
        driver_run("FZ", 0.001, false);
    fz_report();
    for (int i = 0; i < fz.nall; i++)
        free(fz.all[i]);
    fz.nall = 0;
    int fds_after = count_fds();
    if (fds_after != fds_before)
        fz_fail("%d fds open before the iteration, %d after", fds_before, fds_after);
    fz_report();
}

static void run_profile(const fz_profile *p, long full) {
    memset(&fz, 0, sizeof fz);
    fz.p = p;
    fz.rl = RLRunLoopGetCurrent();
    fz.backend = RLRunLoopGetBackendName(fz.rl);
    if (!fz.backend)
        fz.backend = "?";
    fz.verbose = getenv("RL_FZ_LOG") != NULL;
    fz.strict = getenv("RL_FZ_STRICT") != NULL;
    signal(SIGPIPE, SIG_IGN);
    fz.keep_fz = rl_test_keep_mode("FZ");
    fz.keep_other = rl_test_keep_mode("OTHER");
    RLRunLoopObserverContext oc = {0, NULL, NULL, NULL, NULL};
    fz.wake_obs = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wake, &oc);
    assert_non_null(fz.wake_obs);
    assert_true(RLRunLoopAddObserver(fz.rl, fz.wake_obs, "FZ"));
    fz.pass_obs = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeSources, true, 0, note_pass, &oc);
    assert_non_null(fz.pass_obs);
    assert_true(RLRunLoopAddObserver(fz.rl, fz.pass_obs, "FZ"));
    /* The loop's own fds exist before the first count. */
    assert_int_equal(RLRunLoopRunInMode("FZ", 0.001, false), kRLRunLoopRunTimedOut);
    assert_int_equal(RLRunLoopRunInMode("OTHER", 0, false), kRLRunLoopRunTimedOut);

    const char *env = getenv("RL_TEST_SEED");
    long iters = rl_test_iters(full);
    uint64_t first = 1;
    if (env && *env) {
        first = strtoull(env, NULL, 0);
        iters = 1;
    }
    double t0 = rl_test_now();
    for (long i = 0; i < iters; i++) {
        fz.seed = first + (uint64_t)i;
        iteration();
    }
    print_message("test_fd_fuzz %s (%s): %ld seeds from %llu in %.2f s: %ld objects (%ld on a reused fd number), "
                  "%ld runs (%ld timed, %ld returnAfterSourceHandled, %ld nested), %ld callouts, %ld bytes, %ld "
                  "removals, %ld invalidations (%ld in callouts, %ld of the callout's own object)\n",
                  p->name, fz.backend, iters, (unsigned long long)first, rl_test_now() - t0, fz.n_made, fz.n_reused,
                  fz.total_runs, fz.n_timed_runs, fz.n_rash_runs, fz.n_nested, fz.total_calls, fz.total_bytes,
                  fz.n_removed, fz.n_inv, fz.n_inv_in_callout, fz.n_inv_self);
    print_message("test_fd_fuzz %s (%s): as CF (see removed_this_pass; RL_FZ_STRICT=1 fails them): %ld "
                  "callouts after removal in the pass, %ld callouts after a disable, "
                  "enable or nested delivery in their pass\n",
                  p->name, fz.backend, fz.removed_callouts, fz.renested_callouts);
    RLRunLoopObserverInvalidate(fz.wake_obs);
    RLRelease(fz.wake_obs);
    RLRunLoopObserverInvalidate(fz.pass_obs);
    RLRelease(fz.pass_obs);
    rl_test_unkeep(fz.keep_fz);
    rl_test_unkeep(fz.keep_other);
}

/* ---- the profiles ---- */

static const fz_profile read_side = {
    .name = "read_side", .salt = 0x52454144u, .kind_w = {5, 5, 1},
    .w_peer_write = 30, .w_peer_end = 3, .w_peer_drain = 3, .w_fill = 3, .w_enable = 70, .w_disable = 6,
    .w_remove = 3, .w_add = 4, .w_invalidate = 1, .w_respawn = 2, .w_run = 30, .w_run_other = 4,
    .c_read = 800, .c_reenable = 750, .c_enable_other = 100, .c_disable_other = 150, .c_inv_self = 15,
    .c_inv_other = 10, .c_peer_write = 300, .c_fill = 100, .c_remove = 30, .c_add = 50, .c_respawn = 10,
    .c_nested = 20, .c_peer_end = 10,
};

static const fz_profile write_side = {
    .name = "write_side", .salt = 0x57524954u, .kind_w = {5, 1, 5},
    .w_peer_write = 8, .w_peer_end = 2, .w_peer_drain = 25, .w_fill = 25, .w_enable = 70, .w_disable = 6,
    .w_remove = 3, .w_add = 4, .w_invalidate = 1, .w_respawn = 2, .w_run = 30, .w_run_other = 4,
    .c_read = 700, .c_reenable = 700, .c_enable_other = 200, .c_disable_other = 150, .c_inv_self = 15,
    .c_inv_other = 10, .c_peer_write = 100, .c_fill = 500, .c_remove = 30, .c_add = 50, .c_respawn = 10,
    .c_nested = 20, .c_peer_end = 10,
};

static const fz_profile churn = {
    .name = "invalidate_churn", .salt = 0x494E5641u, .kind_w = {4, 3, 3},
    .w_peer_write = 20, .w_peer_end = 4, .w_peer_drain = 8, .w_fill = 8, .w_enable = 70, .w_disable = 5,
    .w_remove = 8, .w_add = 8, .w_invalidate = 6, .w_respawn = 10, .w_run = 30, .w_run_other = 5,
    .c_read = 700, .c_reenable = 700, .c_enable_other = 150, .c_disable_other = 150, .c_inv_self = 80,
    .c_inv_other = 80, .c_peer_write = 250, .c_fill = 200, .c_remove = 120, .c_add = 120, .c_respawn = 120,
    .c_nested = 60, .c_peer_end = 30,
};

enum { FULL_ITERS = 100 };

static void test_fuzz_read_side(void **state) { run_profile(&read_side, FULL_ITERS); }
static void test_fuzz_write_side(void **state) { run_profile(&write_side, FULL_ITERS); }
static void test_fuzz_invalidate_churn(void **state) { run_profile(&churn, FULL_ITERS); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_read_side),
        cmocka_unit_test(test_fuzz_write_side),
        cmocka_unit_test(test_fuzz_invalidate_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
