/*
 * sync_tour.c — a tour of the synchronization tools of the Threading
 * Programming Guide's "Synchronization" chapter, as CRunLoop provides them:
 *
 *   1. atomic operations: Listing 4-1's test-and-set and compare-and-swap
 *      values, and a counter incremented from four threads;
 *   2. RLLock (NSLock): a shared counter, a try-lock that finds it busy, and
 *      a relock by the holder reported instead of deadlocking;
 *   3. RLRecursiveLock (NSRecursiveLock): a recursive function taking it at
 *      every level;
 *   4. RLCondition (NSCondition): Listings 4-5 and 4-6 — a thread waits
 *      until a predicate is set, another sets it and signals;
 *   5. RLReadWriteLock: readers share, a writer excludes, no reader ever
 *      sees a half-written value;
 *   6. RLDistributedLock (NSDistributedLock): a lock file in a temporary
 *      directory, held by this process while a second process tries it;
 *   7. the lock-order detector: two locks taken in opposite orders (ABBA)
 *      on two threads, one after the other, so nothing deadlocks — and the
 *      detector still reports the inversion.
 *
 * Each section prints what it checked; the program ends with
 * "sync_tour: OK" when every check held.
 */
#include "example_support.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int failures;

static void check(bool ok, const char *what) {
    printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
    if (!ok) failures++;
}

/* Runs fn(arg) on `count` threads at once and waits for all of them. */
static void run_threads(int count, void *(*fn)(void *), void *arg) {
    RLThreadRef threads[8];
    for (int i = 0; i < count; i++) {
        threads[i] = RLThreadCreate(NULL, fn, arg);
        EXAMPLE_CHECK(threads[i] != NULL);
        EXAMPLE_CHECK(RLThreadSetJoinable(threads[i], true));
        EXAMPLE_CHECK(RLThreadStart(threads[i]));
    }
    for (int i = 0; i < count; i++) {
        EXAMPLE_CHECK(RLThreadJoin(threads[i], NULL));
        RLRelease(threads[i]);
    }
}

enum { kThreads = 4, kIncrements = 20000 };

/* ---- 1. atomics ---- */

static volatile int32_t atomic_counter;

static void *increment_atomically(void *arg) {
    for (int i = 0; i < kIncrements; i++) RLAtomicIncrement32(&atomic_counter);
    return NULL;
}

static void atomics(void) {
    printf("--- 1. atomic operations (Listing 4-1) ---\n");
    int32_t theValue = 0;
    RLAtomicTestAndSet(0, &theValue);
    printf("  TestAndSet(0) on 0    -> %d\n", (int)theValue);
    check(theValue == 128, "bit 0 is the high bit of the first byte: 128");
    theValue = 0;
    RLAtomicTestAndSet(7, &theValue);
    printf("  TestAndSet(7) on 0    -> %d\n", (int)theValue);
    check(theValue == 1, "bit 7 is the low bit of the first byte: 1");
    theValue = 0;
    RLAtomicTestAndSet(15, &theValue);
    printf("  TestAndSet(15) on 0   -> %d\n", (int)theValue);
    check(theValue == 256, "bit 15 is the low bit of the second byte: 256");
    bool swapped = RLAtomicCompareAndSwap32(256, 512, &theValue);
    printf("  CompareAndSwap32(256, 512)  -> %s, value %d\n", swapped ? "swapped" : "not swapped", (int)theValue);
    check(swapped && theValue == 512, "256 was there, so 512 replaced it");
    swapped = RLAtomicCompareAndSwap32(256, 1024, &theValue);
    printf("  CompareAndSwap32(256, 1024) -> %s, value %d\n", swapped ? "swapped" : "not swapped", (int)theValue);
    check(!swapped && theValue == 512, "256 was not there, so the value stayed 512");

    atomic_counter = 0;
    run_threads(kThreads, increment_atomically, NULL);
    printf("  %d threads x %d RLAtomicIncrement32 -> %d\n", kThreads, kIncrements, (int)atomic_counter);
    check(atomic_counter == kThreads * kIncrements, "no increment lost");
}

/* ---- 2. RLLock ---- */

static RLLockRef counter_lock;
static long locked_counter;

static void *increment_under_lock(void *arg) {
    for (int i = 0; i < kIncrements; i++) {
        EXAMPLE_CHECK(RLLockLock(counter_lock));
        locked_counter++; /* a plain increment: the lock makes it safe */
        EXAMPLE_CHECK(RLLockUnlock(counter_lock));
    }
    return NULL;
}

static bool try_lock_result;

static void *try_the_lock(void *arg) {
    try_lock_result = RLLockTryLock(counter_lock);
    if (try_lock_result) RLLockUnlock(counter_lock);
    return NULL;
}

static void locks(void) {
    printf("--- 2. RLLock ---\n");
    counter_lock = RLLockCreate();
    EXAMPLE_CHECK(counter_lock != NULL);
    EXAMPLE_CHECK(RLLockSetName(counter_lock, "counter lock"));
    locked_counter = 0;
    run_threads(kThreads, increment_under_lock, NULL);
    printf("  %d threads x %d locked increments -> %ld\n", kThreads, kIncrements, locked_counter);
    check(locked_counter == kThreads * kIncrements, "no increment lost");

    EXAMPLE_CHECK(RLLockLock(counter_lock));
    run_threads(1, try_the_lock, NULL);
    check(!try_lock_result, "another thread's TryLock fails at once while the lock is held");
    bool relocked = RLLockLock(counter_lock);
    RLError error = RLErrorGetLast();
    /* The error's message names the lock by its address; the code says it all. */
    printf("  relocking by the holder: %s (%s: the calling thread holds it already)\n",
           relocked ? "succeeded?!" : "refused", RLErrorCodeGetName(error.code));
    check(!relocked && error.code == kRLErrorWouldDeadlock,
          "NSLock would deadlock here; RLLock reports kRLErrorWouldDeadlock");
    EXAMPLE_CHECK(RLLockUnlock(counter_lock));
    EXAMPLE_CHECK(RLRelease(counter_lock));
}

/* ---- 3. RLRecursiveLock ---- */

static RLRecursiveLockRef tree_lock;
static RLIndex deepest_count;

/* Takes the lock at every level, as a recursive routine protecting a
 * shared structure would. */
static void visit(int depth) {
    EXAMPLE_CHECK(RLRecursiveLockLock(tree_lock));
    if (depth > 1) visit(depth - 1);
    else deepest_count = RLRecursiveLockGetRecursionCount(tree_lock);
    EXAMPLE_CHECK(RLRecursiveLockUnlock(tree_lock));
}

static void recursive_lock(void) {
    printf("--- 3. RLRecursiveLock ---\n");
    tree_lock = RLRecursiveLockCreate();
    EXAMPLE_CHECK(tree_lock != NULL);
    visit(5);
    printf("  recursion 5 deep: held %ld times at the bottom, %ld times after unwinding\n", (long)deepest_count,
           (long)RLRecursiveLockGetRecursionCount(tree_lock));
    check(deepest_count == 5 && RLRecursiveLockGetRecursionCount(tree_lock) == 0,
          "taken once per level, free again after the last unlock");
    EXAMPLE_CHECK(RLRelease(tree_lock));
}

/* ---- 4. RLCondition (Listings 4-5 and 4-6) ---- */

static RLConditionRef condition;
static bool ready_to_go;
static bool waiter_saw_ready;

/* Listing 4-5: wait until the predicate is true. */
static void *wait_on_condition(void *arg) {
    EXAMPLE_CHECK(RLConditionLock(condition));
    /* If the predicate is already set the loop is skipped; otherwise sleep
     * until signalled. The loop also absorbs spurious wake-ups. */
    while (!ready_to_go) EXAMPLE_CHECK(RLConditionWait(condition));
    waiter_saw_ready = ready_to_go;
    printf("  [waiter] woke with ready_to_go = %s; doing the work\n", ready_to_go ? "true" : "false");
    ready_to_go = false; /* reset the predicate for next time */
    EXAMPLE_CHECK(RLConditionUnlock(condition));
    return NULL;
}

/* Listing 4-6: set the predicate and signal, holding the lock. */
static void signal_thread_using_condition(void) {
    EXAMPLE_CHECK(RLConditionLock(condition));
    ready_to_go = true;
    printf("  [signaller] ready_to_go = true; signalling\n");
    EXAMPLE_CHECK(RLConditionSignal(condition));
    EXAMPLE_CHECK(RLConditionUnlock(condition));
}

static void conditions(RLTimeInterval pause) {
    printf("--- 4. RLCondition (Listings 4-5 and 4-6) ---\n");
    condition = RLConditionCreate();
    EXAMPLE_CHECK(condition != NULL);
    ready_to_go = false;
    RLThreadRef waiter = RLThreadCreate(NULL, wait_on_condition, NULL);
    EXAMPLE_CHECK(waiter != NULL);
    EXAMPLE_CHECK(RLThreadSetJoinable(waiter, true));
    EXAMPLE_CHECK(RLThreadStart(waiter));
    RLThreadSleepForTimeInterval(pause); /* the waiter is most likely asleep by now; either way works */
    signal_thread_using_condition();
    EXAMPLE_CHECK(RLThreadJoin(waiter, NULL));
    RLRelease(waiter);
    check(waiter_saw_ready && !ready_to_go, "the waiter ran only once the predicate was set");
    EXAMPLE_CHECK(RLRelease(condition));
}

/* ---- 5. RLReadWriteLock ---- */

static RLReadWriteLockRef settings_lock;
static struct {
    long version;
    long checksum; /* always -version when consistent */
} settings;
static volatile int32_t torn_reads, reads_done, writer_done;

static void *reader(void *arg) {
    /* Keep reading until the writer has finished (and at least 1000 times). */
    for (int i = 0; i < 1000 || !RLAtomicAdd32Barrier(0, &writer_done); i++) {
        EXAMPLE_CHECK(RLReadWriteLockReadLock(settings_lock));
        if (settings.checksum != -settings.version) RLAtomicIncrement32(&torn_reads);
        EXAMPLE_CHECK(RLReadWriteLockUnlock(settings_lock));
        RLAtomicIncrement32(&reads_done);
    }
    return NULL;
}

static void *writer(void *arg) {
    for (long v = 1; v <= 2000; v++) {
        EXAMPLE_CHECK(RLReadWriteLockWriteLock(settings_lock));
        settings.version = v;
        settings.checksum = -v; /* two stores a reader must never see halfway */
        EXAMPLE_CHECK(RLReadWriteLockUnlock(settings_lock));
    }
    RLAtomicAdd32Barrier(1, &writer_done);
    return NULL;
}

static void *readers_and_writer(void *arg) {
    /* Thread 0 writes, the others read. */
    static volatile int32_t next_role;
    int role = RLAtomicIncrement32Barrier(&next_role) - 1;
    return role == 0 ? writer(arg) : reader(arg);
}

static bool other_read_result, other_write_result;

static void *try_read_and_write(void *arg) {
    other_read_result = RLReadWriteLockTryReadLock(settings_lock);
    if (other_read_result) EXAMPLE_CHECK(RLReadWriteLockUnlock(settings_lock));
    other_write_result = RLReadWriteLockTryWriteLock(settings_lock);
    if (other_write_result) EXAMPLE_CHECK(RLReadWriteLockUnlock(settings_lock));
    return NULL;
}

static void read_write_lock(void) {
    printf("--- 5. RLReadWriteLock ---\n");
    settings_lock = RLReadWriteLockCreate();
    EXAMPLE_CHECK(settings_lock != NULL);

    EXAMPLE_CHECK(RLReadWriteLockReadLock(settings_lock));
    run_threads(1, try_read_and_write, NULL);
    check(other_read_result, "while this thread reads, another thread may read too");
    check(!other_write_result, "... but may not write");
    EXAMPLE_CHECK(RLReadWriteLockUnlock(settings_lock));

    run_threads(kThreads, readers_and_writer, NULL);
    printf("  1 writer x 2000 updates, %d readers: %d reads, %d saw a half-written value\n", kThreads - 1,
           (int)reads_done, (int)torn_reads);
    check(torn_reads == 0 && settings.version == 2000, "every read saw a whole update");
    EXAMPLE_CHECK(RLRelease(settings_lock));
}

/* ---- 6. RLDistributedLock ---- */

/* The second process: `sync_tour --try-lock PATH` exits 0 if the lock was
 * busy, 1 if it could take it, 2 on error. */
static int try_lock_child(const char *path) {
    RLDistributedLockRef lock = RLDistributedLockCreate(path);
    if (!lock) return 2;
    bool taken = RLDistributedLockTryLock(lock);
    RLError error = RLErrorGetLast();
    /* The error's message names the temporary lock file; print the code. */
    if (taken)
        printf("  [second process] TryLock: taken\n");
    else
        printf("  [second process] TryLock: busy (%s: another process holds the lock)\n", RLErrorCodeGetName(error.code));
    fflush(stdout);
    if (taken) RLDistributedLockUnlock(lock);
    RLRelease(lock);
    return taken ? 1 : 0;
}

static int run_child(const char *path) {
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) return -1;
    self[length] = '\0';
    char *argv[] = {self, "--try-lock", (char *)path, NULL};
    fflush(stdout);
    pid_t pid;
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

static void distributed_lock(void) {
    printf("--- 6. RLDistributedLock ---\n");
    char dir[] = "/tmp/rl_sync_tour.XXXXXX";
    EXAMPLE_CHECK(mkdtemp(dir) != NULL);
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/app.lock", dir);
    printf("  lock file: <temporary directory>/app.lock\n");

    RLDistributedLockRef lock = RLDistributedLockCreate(path);
    EXAMPLE_CHECK(lock != NULL);
    check(RLDistributedLockTryLock(lock), "this process takes the lock");
    RLDistributedLockOwner owner;
    EXAMPLE_CHECK(RLDistributedLockCopyOwner(lock, &owner));
    check(owner.pid == getpid() && RLDistributedLockOwnerGetState(&owner) == kRLDistributedLockOwnerStateAlive,
          "the lock file names this process, which is alive");
    check(run_child(path) == 0, "a second process finds it busy");
    EXAMPLE_CHECK(RLDistributedLockUnlock(lock));
    check(run_child(path) == 1, "after Unlock the second process can take it");
    EXAMPLE_CHECK(RLRelease(lock));
    rmdir(dir);
}

/* ---- 7. the lock-order detector ---- */

static RLLockRef lock_a, lock_b;

static const char *lock_name(const void *lock) {
    return lock == lock_a ? "A" : lock == lock_b ? "B" : "?";
}

/* The report handler; without one the detector prints its full report
 * (with the code locations) to stderr. */
static void print_report(const RLLockDebugReport *report, void *info) {
    printf("  detector: possible deadlock: this thread holds %s and takes %s; "
           "earlier %s was held while %s was taken\n",
           lock_name(report->heldLock), lock_name(report->acquiringLock), lock_name(report->acquiringLock),
           lock_name(report->heldLock));
}

static void *a_then_b(void *arg) {
    EXAMPLE_CHECK(RLLockLock(lock_a));
    EXAMPLE_CHECK(RLLockLock(lock_b));
    printf("  [thread 1] took A, then B\n");
    EXAMPLE_CHECK(RLLockUnlock(lock_b));
    EXAMPLE_CHECK(RLLockUnlock(lock_a));
    return NULL;
}

static void lock_order(void) {
    printf("--- 7. the lock-order detector (a deliberate ABBA) ---\n");
    RLLockDebugSetEnabled(true);
    RLLockDebugSetReportHandler(print_report, NULL);
    long before = RLLockDebugGetReportCount();
    lock_a = RLLockCreate();
    lock_b = RLLockCreate();
    EXAMPLE_CHECK(lock_a && lock_b);
    EXAMPLE_CHECK(RLLockSetName(lock_a, "A"));
    EXAMPLE_CHECK(RLLockSetName(lock_b, "B"));

    /* The two orders never overlap in time, so this run cannot deadlock; an
     * unlucky schedule of the same code could. */
    run_threads(1, a_then_b, NULL);
    EXAMPLE_CHECK(RLLockLock(lock_b));
    printf("  [main] holding B, taking A\n");
    EXAMPLE_CHECK(RLLockLock(lock_a));
    EXAMPLE_CHECK(RLLockUnlock(lock_a));
    EXAMPLE_CHECK(RLLockUnlock(lock_b));

    long reports = RLLockDebugGetReportCount() - before;
    printf("  inversions reported: %ld\n", reports);
    check(reports == 1, "the ABBA order was reported once, though nothing deadlocked");
    RLLockDebugSetReportHandler(NULL, NULL);
    RLLockDebugSetEnabled(false);
    EXAMPLE_CHECK(RLRelease(lock_a));
    EXAMPLE_CHECK(RLRelease(lock_b));
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--try-lock") == 0) return try_lock_child(argv[2]);
    example_init(argc, argv);
    printf("sync_tour: the Synchronization chapter's tools (%s pace)\n", example_pace_name());
    atomics();
    locks();
    recursive_lock();
    conditions(example_pick(0.2, 0.1, 0.001));
    read_write_lock();
    distributed_lock();
    lock_order();
    printf("sync_tour: %s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
