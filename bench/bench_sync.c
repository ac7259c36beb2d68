/*
 * bench_sync.c — the synchronization toolkit against its raw peers.
 *
 * Every row times one of our operations and the pthread / C11 operation it
 * replaces in the same process, interleaved run by run (ours, peer, peer,
 * ours, ...) so that a neighbour stealing the CPU hurts both sides alike.
 * Each ns/op cell is the median over many short runs; the ratio is the
 * median of the per-run ours/peer ratios, so below 1.00 means we are
 * faster; "best" divides the fastest runs, which noise from other
 * processes cannot lower. Targets: uncontended RLLock within
 * 1.1x of pthread_mutex, atomics within 1.05x of C11, contended counter
 * throughput at least pthread's (ratio <= 1.00). @synchronized has no
 * pthread twin: its peer is the recursive mutex one would write by hand.
 *
 * Environment: RL_BENCH_RUNS (default 51) and RL_BENCH_SCALE (a multiplier
 * on every iteration count, default 1; e.g. 0.1 for a quick look);
 * BENCH_CSV=file writes the rows for the charts (bench_results.h).
 */
#include <crunloop/crunloop.h>
#include <crunloop/RLAtomic.h>
#include <crunloop/RLLock.h>
#include <crunloop/RLCondition.h>
#include <crunloop/RLReadWriteLock.h>
#include <crunloop/RLSpinLock.h>
#include <crunloop/RLSync.h>

#include "bench_results.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS 63

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what) {
    RLError e = RLErrorGetLast();
    fprintf(stderr, "bench_sync: %s failed (%s)\n", what, e.message);
    exit(1);
}

/* `object` fresh from its Create function, named `what`; exits if NULL. */
static void *created(void *object, const char *what) {
    if (!object)
        die(what);
    return object;
}

/* Keeps the compiler from proving a loop body useless. */
static volatile long sink;

/* Mean ns per pass of the loop body (the statements after n), run n times
 * with `i` as the pass number: the timing loop of every single-thread row.
 * A macro rather than a function taking a callback, so that the body is
 * compiled in place, as in a user's code, and no indirect call is timed
 * along with it. */
#define NS_PER_PASS(i, n, ...)            \
    __extension__({                       \
        double t0_ = now_ns();            \
        for (long i = 0; i < (n); i++) {  \
            __VA_ARGS__;                  \
        }                                 \
        (now_ns() - t0_) / (double)(n);   \
    })

/* ---- uncontended lock + unlock ----------------------------------------- */

static double peer_mutex(long n) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    double ns = NS_PER_PASS(i, n, pthread_mutex_lock(&m); pthread_mutex_unlock(&m));
    pthread_mutex_destroy(&m);
    return ns;
}

static double peer_recursive_mutex(long n) {
    pthread_mutex_t m;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&m, &a);
    pthread_mutexattr_destroy(&a);
    double ns = NS_PER_PASS(i, n, pthread_mutex_lock(&m); pthread_mutex_unlock(&m));
    pthread_mutex_destroy(&m);
    return ns;
}

static double peer_rwlock_read(long n) {
    pthread_rwlock_t l = PTHREAD_RWLOCK_INITIALIZER;
    double ns = NS_PER_PASS(i, n, pthread_rwlock_rdlock(&l); pthread_rwlock_unlock(&l));
    pthread_rwlock_destroy(&l);
    return ns;
}

static double peer_spin(long n) {
    pthread_spinlock_t s;
    pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE);
    double ns = NS_PER_PASS(i, n, pthread_spin_lock(&s); pthread_spin_unlock(&s));
    pthread_spin_destroy(&s);
    return ns;
}

/* ---- atomics ------------------------------------------------------------ */

static _Atomic int32_t c11_counter32;
static int32_t rl_counter32;

static double peer_atomic_add(long n) {
    double ns = NS_PER_PASS(i, n, atomic_fetch_add(&c11_counter32, 1));
    sink = atomic_load(&c11_counter32);
    return ns;
}

static double peer_cas(long n) {
    atomic_store(&c11_counter32, 0);
    double ns = NS_PER_PASS(i, n, int32_t expected = (int32_t)i;
                            atomic_compare_exchange_strong(&c11_counter32, &expected, (int32_t)(i + 1)));
    if (atomic_load(&c11_counter32) != (int32_t)n) {
        fprintf(stderr, "bench_sync: atomic_compare_exchange_strong missed a swap\n");
        exit(1);
    }
    return ns;
}

/* ---- condition ping-pong between two threads --------------------------- */

/* One round trip: the main thread hands the turn to the partner and waits
 * for it back; each hand-over is a signal answered by a wait. */
typedef struct pp_peer {
    pthread_mutex_t m;
    pthread_cond_t c;
    int turn; /* 0: main's turn, 1: partner's turn, 2: stop */
} pp_peer;

static void *pp_peer_partner(void *arg) {
    pp_peer *p = arg;
    pthread_mutex_lock(&p->m);
    for (;;) {
        while (p->turn == 0)
            pthread_cond_wait(&p->c, &p->m);
        if (p->turn == 2)
            break;
        p->turn = 0;
        pthread_cond_signal(&p->c);
    }
    pthread_mutex_unlock(&p->m);
    return NULL;
}

static double peer_cond_pingpong(long n) {
    pp_peer p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_t t;
    pthread_create(&t, NULL, pp_peer_partner, &p);
    double t0 = now_ns();
    pthread_mutex_lock(&p.m);
    for (long i = 0; i < n; i++) {
        p.turn = 1;
        pthread_cond_signal(&p.c);
        while (p.turn != 0)
            pthread_cond_wait(&p.c, &p.m);
    }
    p.turn = 2;
    pthread_cond_signal(&p.c);
    pthread_mutex_unlock(&p.m);
    double t1 = now_ns();
    pthread_join(t, NULL);
    pthread_mutex_destroy(&p.m);
    pthread_cond_destroy(&p.c);
    return (t1 - t0) / (double)n;
}

/* ---- two-thread contended counter -------------------------------------- */

typedef struct contended {
    void (*lock)(void *);
    void (*unlock)(void *);
    void *lk;
    long per_thread;
    long counter;
    _Atomic int ready;
} contended;

static void *contended_worker(void *arg) {
    contended *c = arg;
    atomic_fetch_add(&c->ready, 1);
    while (atomic_load(&c->ready) < 2) {
    }
    for (long i = 0; i < c->per_thread; i++) {
        c->lock(c->lk);
        c->counter++;
        c->unlock(c->lk);
    }
    return NULL;
}

/* ns per increment over both threads: lower means more throughput. */
static double run_contended(contended *c, long n) {
    c->per_thread = n / 2;
    c->counter = 0;
    atomic_store(&c->ready, 0);
    pthread_t th[2];
    double t0 = now_ns();
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, contended_worker, c);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    double t = now_ns() - t0;
    if (c->counter != 2 * c->per_thread) {
        fprintf(stderr, "bench_sync: contended counter %ld, expected %ld\n", c->counter,
                2 * c->per_thread);
        exit(1);
    }
    return t / (double)(2 * c->per_thread);
}

static void pmutex_lock(void *m) { pthread_mutex_lock(m); }
static void pmutex_unlock(void *m) { pthread_mutex_unlock(m); }

static double peer_contended(long n) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    contended c = {pmutex_lock, pmutex_unlock, &m, 0, 0, 0};
    double r = run_contended(&c, n);
    pthread_mutex_destroy(&m);
    return r;
}

/* ---- ours --------------------------------------------------------------- */

static double ours_lock(long n) {
    RLLockRef l = created(RLLockCreate(), "RLLockCreate");
    double ns = NS_PER_PASS(i, n, RLLockLock(l); RLLockUnlock(l));
    RLRelease(l);
    return ns;
}

static double ours_recursive(long n) {
    RLRecursiveLockRef l = created(RLRecursiveLockCreate(), "RLRecursiveLockCreate");
    double ns = NS_PER_PASS(i, n, RLRecursiveLockLock(l); RLRecursiveLockUnlock(l));
    RLRelease(l);
    return ns;
}

static double ours_rwlock_read(long n) {
    RLReadWriteLockRef l = created(RLReadWriteLockCreate(), "RLReadWriteLockCreate");
    double ns = NS_PER_PASS(i, n, RLReadWriteLockReadLock(l); RLReadWriteLockUnlock(l));
    RLRelease(l);
    return ns;
}

static double ours_spin(long n) {
    RLSpinLock s = RL_SPINLOCK_INIT;
    return NS_PER_PASS(i, n, RLSpinLockLock(&s); RLSpinLockUnlock(&s));
}

static double ours_sync(long n) {
    static int object;
    return NS_PER_PASS(i, n, RLSyncEnter(&object); RLSyncExit(&object));
}

static double ours_atomic_add(long n) {
    double ns = NS_PER_PASS(i, n, RLAtomicAdd32Barrier(1, &rl_counter32));
    sink = rl_counter32;
    return ns;
}

static double ours_cas(long n) {
    rl_counter32 = 0;
    double ns =
        NS_PER_PASS(i, n, RLAtomicCompareAndSwap32Barrier((int32_t)i, (int32_t)(i + 1), &rl_counter32));
    if (rl_counter32 != (int32_t)n) {
        fprintf(stderr, "bench_sync: RLAtomicCompareAndSwap32Barrier missed a swap\n");
        exit(1);
    }
    return ns;
}

typedef struct pp_ours {
    RLConditionRef c;
    int turn; /* guarded by c */
} pp_ours;

static void *pp_ours_partner(void *arg) {
    pp_ours *p = arg;
    RLConditionLock(p->c);
    for (;;) {
        while (p->turn == 0)
            RLConditionWait(p->c);
        if (p->turn == 2)
            break;
        p->turn = 0;
        RLConditionSignal(p->c);
    }
    RLConditionUnlock(p->c);
    return NULL;
}

static double ours_cond_pingpong(long n) {
    pp_ours p = {created(RLConditionCreate(), "RLConditionCreate"), 0};
    pthread_t t;
    pthread_create(&t, NULL, pp_ours_partner, &p);
    double t0 = now_ns();
    RLConditionLock(p.c);
    for (long i = 0; i < n; i++) {
        p.turn = 1;
        RLConditionSignal(p.c);
        while (p.turn != 0)
            RLConditionWait(p.c);
    }
    p.turn = 2;
    RLConditionSignal(p.c);
    RLConditionUnlock(p.c);
    double t1 = now_ns();
    pthread_join(t, NULL);
    RLRelease(p.c);
    return (t1 - t0) / (double)n;
}

static void rllock_lock(void *l) { RLLockLock(l); }
static void rllock_unlock(void *l) { RLLockUnlock(l); }

static double ours_contended(long n) {
    RLLockRef l = created(RLLockCreate(), "RLLockCreate");
    contended c = {rllock_lock, rllock_unlock, l, 0, 0, 0};
    double r = run_contended(&c, n);
    RLRelease(l);
    return r;
}

/* ---- the table ---------------------------------------------------------- */

typedef struct row {
    const char *op;
    double (*ours)(long n);
    const char *peer_name;
    double (*peer)(long n);
    long iters;
    int runs;      /* 0: RL_BENCH_RUNS; slow rows ask for fewer */
    double target; /* highest acceptable ours/peer; 0: none */
} row;

static const row rows[] = {
    {"RLLock lock+unlock", ours_lock, "pthread_mutex", peer_mutex, 100000, 0, 1.10},
    {"RLRecursiveLock lock+unlock", ours_recursive, "pthread_mutex RECURSIVE", peer_recursive_mutex, 100000, 0, 0},
    {"RLReadWriteLock read lock+unlock", ours_rwlock_read, "pthread_rwlock rdlock", peer_rwlock_read, 100000, 0, 0},
    {"RLSpinLock lock+unlock", ours_spin, "pthread_spinlock", peer_spin, 100000, 0, 0},
    {"RLSyncEnter+RLSyncExit", ours_sync, "pthread_mutex RECURSIVE", peer_recursive_mutex, 100000, 0, 0},
    {"RLCondition ping-pong (round trip)", ours_cond_pingpong, "pthread_cond ping-pong", peer_cond_pingpong, 2000, 15, 0},
    {"RLAtomicAdd32Barrier", ours_atomic_add, "atomic_fetch_add", peer_atomic_add, 200000, 0, 1.05},
    {"RLAtomicCompareAndSwap32Barrier", ours_cas, "atomic_compare_exchange_strong", peer_cas, 200000, 0, 1.05},
    {"RLLock contended, 2 threads", ours_contended, "pthread_mutex contended", peer_contended, 400000, 31, 1.00},
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double env_double(const char *name, double fallback) {
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    double v = strtod(s, &end);
    return (*end || v <= 0) ? fallback : v;
}

int main(void) {
    int runs = (int)env_double("RL_BENCH_RUNS", 51);
    if (runs > MAX_RUNS)
        runs = MAX_RUNS;
    double scale = env_double("RL_BENCH_SCALE", 1);
    int misses = 0;
    FILE *results = bench_results_open();

    printf("CRunLoop synchronization benchmark: ns/op, median of %d short runs per cell,\n"
           "ours and peer interleaved run by run in the same process\n\n",
           runs);
    printf("%-36s %9s  %-31s %9s  %7s  %7s  %-8s\n", "operation (ours)", "ours", "peer", "peer", "ratio",
           "best", "target");
    printf("%-36s %9s  %-31s %9s  %7s  %7s  %-8s\n", "----------------", "----", "----", "----", "-----",
           "----", "------");
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const row *w = &rows[r];
        long n = (long)((double)w->iters * scale);
        if (n < 2)
            n = 2;
        int nr = w->runs ? w->runs : runs;
        if (nr > MAX_RUNS)
            nr = MAX_RUNS;
        double ours[MAX_RUNS], peer[MAX_RUNS], ratios[MAX_RUNS];
        /* One untimed warm-up of each, then alternate which goes first. */
        w->ours(n / 10 + 1);
        w->peer(n / 10 + 1);
        for (int i = 0; i < nr; i++) {
            if (i % 2 == 0) {
                ours[i] = w->ours(n);
                peer[i] = w->peer(n);
            } else {
                peer[i] = w->peer(n);
                ours[i] = w->ours(n);
            }
            ratios[i] = ours[i] / peer[i];
        }
        /* The ratio is the median of the per-run ratios: each pair ran
         * back to back, so it shares the machine's load of the moment. */
        double best_o = ours[0], best_p = peer[0];
        for (int i = 1; i < nr; i++) {
            best_o = ours[i] < best_o ? ours[i] : best_o;
            best_p = peer[i] < best_p ? peer[i] : best_p;
        }
        /* The chart's peer is the family the row's peer belongs to. */
        bench_results_row(results, "synchronization", w->op,
                          strncmp(w->peer_name, "atomic", 6) == 0 ? "C11 atomics" : "pthreads", ratios, nr,
                          median(ours, nr), median(peer, nr), "ns/op");
        double o = median(ours, nr), p = median(peer, nr), ratio = median(ratios, nr);
        char target[32] = "-";
        if (w->target > 0) {
            bool met = ratio <= w->target;
            misses += !met;
            snprintf(target, sizeof target, "<=%.2fx %s", w->target, met ? "met" : "MISSED");
        }
        printf("%-36s %9.2f  %-31s %9.2f  %6.2fx  %6.2fx  %s\n", w->op, o, w->peer_name, p, ratio,
               best_o / best_p, target);
        fflush(stdout);
    }
    printf("\nratio = median over runs of ours/peer in ns/op (below 1.00: ours is faster); the\n"
           "target is judged on it. best = fastest ours / fastest peer: on a loaded machine,\n"
           "where neighbours only ever add time, it is the steadier estimate of the cost.\n"
           "%d target(s) missed.\n",
           misses);
    bench_results_close(results);
    return 0;
}
