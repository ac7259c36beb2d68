/* test_distributed_lock.c — RLDistributedLock across objects and processes:
 * exclusion between racing processes, recovery after a holder is killed,
 * the owner record, and every misuse. */
#include "testutil.h"

#include <crunloop/RLDistributedLock.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fixture {
    char dir[64];
    char lock_path[128];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/rl_dlock_XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->lock_path, sizeof f->lock_path, "%s/app.lock", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* Files in the directory other than the lock: the unique files must never
 * be left behind. */
static int stray_files(const fixture *f) {
    char cmd[192];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -v '^app.lock$' | wc -l", f->dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* ---- one process ---- */

static void test_lock_unlock_and_record(void **state) {
    fixture *f = *state;
    RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
    assert_non_null(lock);
    assert_string_equal(RLDistributedLockGetPath(lock), f->lock_path);
    assert_string_equal(RLGetTypeName(lock), "RLDistributedLock");
    assert_false(RLDistributedLockIsHeld(lock));
    assert_true(access(f->lock_path, F_OK) != 0); /* Create does not lock */

    RLAbsoluteTime before = RLAbsoluteTimeGetCurrent();
    assert_true(RLDistributedLockTryLock(lock));
    assert_true(RLDistributedLockIsHeld(lock));
    assert_int_equal(access(f->lock_path, F_OK), 0);
    assert_int_equal(stray_files(f), 0);

    RLDistributedLockOwner owner;
    assert_true(RLDistributedLockCopyOwner(lock, &owner));
    char host[256];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    assert_string_equal(owner.hostName, host);
    assert_int_equal(owner.pid, getpid());
    assert_true(owner.processStartTicks > 0);
    assert_true(owner.lockDate >= before - 1.0);
    assert_int_equal(RLDistributedLockOwnerGetState(&owner), kRLDistributedLockOwnerStateAlive);

    /* The lock date is the lock file's; the file system clock may be
     * coarse, so only sanity is checked, not timing. */
    RLAbsoluteTime date = RLDistributedLockCopyLockDate(lock);
    assert_false(isnan(date));
    assert_true(fabs(date - owner.lockDate) < 60.0);

    assert_true(RLDistributedLockUnlock(lock));
    assert_false(RLDistributedLockIsHeld(lock));
    assert_true(access(f->lock_path, F_OK) != 0);
    assert_true(isnan(RLDistributedLockCopyLockDate(lock)));
    assert_rl_error(kRLErrorNotLocked);
    assert_rl_fails(RLDistributedLockCopyOwner(lock, &owner), kRLErrorNotLocked);

    /* And again: the lock is reusable. */
    assert_true(RLDistributedLockTryLock(lock));
    assert_true(RLDistributedLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_two_objects_exclude_each_other(void **state) {
    fixture *f = *state;
    RLDistributedLockRef a = RLDistributedLockCreate(f->lock_path);
    RLDistributedLockRef b = RLDistributedLockCreate(f->lock_path);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(RLDistributedLockTryLock(a));
    assert_false(RLDistributedLockTryLock(b));
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorBusy);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "pid %d", (int)getpid());
    assert_non_null(strstr(e.message, pid_text)); /* the message names the holder */
    RLErrorClear();
    assert_int_equal(stray_files(f), 0);

    /* The same object again: already held. */
    assert_rl_fails(RLDistributedLockTryLock(a), kRLErrorExists);

    /* Only the holder may unlock. */
    assert_rl_fails(RLDistributedLockUnlock(b), kRLErrorNotLocked);
    assert_true(RLDistributedLockIsHeld(a));

    /* Releasing a held lock object is refused and changes nothing. */
    assert_rl_fails(RLRelease(a), kRLErrorBusy);
    assert_true(RLDistributedLockIsHeld(a));

    assert_true(RLDistributedLockUnlock(a));
    assert_rl_fails(RLDistributedLockUnlock(a), kRLErrorNotLocked);
    assert_true(RLDistributedLockTryLock(b));
    assert_true(RLDistributedLockUnlock(b));
    assert_true(RLRelease(a));
    assert_true(RLRelease(b));
}

static void test_break_lock(void **state) {
    fixture *f = *state;
    RLDistributedLockRef holder = RLDistributedLockCreate(f->lock_path);
    RLDistributedLockRef breaker = RLDistributedLockCreate(f->lock_path);
    RLDistributedLockRef third = RLDistributedLockCreate(f->lock_path);
    assert_true(RLDistributedLockTryLock(holder));

    assert_true(RLDistributedLockBreakLock(breaker));
    assert_true(access(f->lock_path, F_OK) != 0);
    assert_rl_fails(RLDistributedLockBreakLock(breaker), kRLErrorNotLocked);

    /* Someone else takes it; the old holder's unlock must not remove it. */
    assert_true(RLDistributedLockTryLock(third));
    assert_rl_fails(RLDistributedLockUnlock(holder), kRLErrorNotOwner);
    assert_false(RLDistributedLockIsHeld(holder));
    assert_int_equal(access(f->lock_path, F_OK), 0);
    assert_true(RLDistributedLockIsHeld(third));

    /* Breaking one's own lock leaves it unheld. */
    assert_true(RLDistributedLockBreakLock(third));
    assert_false(RLDistributedLockIsHeld(third));
    assert_true(RLRelease(third));
    assert_true(RLRelease(holder));
    assert_true(RLRelease(breaker));
}

static void test_foreign_lock_file(void **state) {
    fixture *f = *state;
    /* A lock file made by other software: it still excludes us, but has no
     * record to read. */
    int fd = open(f->lock_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "1234\n", 5), 5);
    close(fd);
    RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
    assert_rl_fails(RLDistributedLockTryLock(lock), kRLErrorBusy);
    RLDistributedLockOwner owner;
    assert_rl_fails(RLDistributedLockCopyOwner(lock, &owner), kRLErrorInvalidState);
    assert_false(isnan(RLDistributedLockCopyLockDate(lock)));
    assert_true(RLDistributedLockBreakLock(lock));
    assert_true(RLDistributedLockTryLock(lock));
    assert_true(RLDistributedLockUnlock(lock));
    assert_true(RLRelease(lock));
}

/* ---- what else may sit at the lock path ---- */

/* Each call below must return at once: a FIFO at the lock path used to
 * block TryLock, CopyOwner and Unlock in open() forever. The alarm is only
 * a bound that turns such a hang into a failure of this program. */
static void test_fifo_at_lock_path_never_blocks(void **state) {
    fixture *f = *state;
    assert_int_equal(mkfifo(f->lock_path, 0644), 0);
    alarm(60);
    RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
    assert_non_null(lock);
    /* It occupies the path (it excludes us, as any file there does)... */
    assert_false(RLDistributedLockTryLock(lock));
    assert_non_null(strstr(RLErrorGetLast().message, "FIFO"));
    assert_rl_error(kRLErrorBusy);
    /* ...but holds no owner record. */
    RLDistributedLockOwner owner;
    assert_rl_fails(RLDistributedLockCopyOwner(lock, &owner), kRLErrorInvalidState);
    assert_rl_fails(RLDistributedLockUnlock(lock), kRLErrorNotLocked);
    /* Breaking it removes it; then the lock works. */
    assert_true(RLDistributedLockBreakLock(lock));
    assert_true(RLDistributedLockTryLock(lock));
    /* Our record replaced by a FIFO while we hold the lock: Unlock reports
     * it and leaves the FIFO alone. */
    assert_int_equal(unlink(f->lock_path), 0);
    assert_int_equal(mkfifo(f->lock_path, 0644), 0);
    assert_rl_fails(RLDistributedLockUnlock(lock), kRLErrorNotOwner);
    assert_false(RLDistributedLockIsHeld(lock));
    struct stat st;
    assert_int_equal(lstat(f->lock_path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    alarm(0);
    assert_true(RLRelease(lock));
}

static void test_symlink_to_fifo_at_lock_path_never_blocks(void **state) {
    fixture *f = *state;
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/fifo", f->dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(symlink(fifo, f->lock_path), 0);
    alarm(60);
    RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
    assert_non_null(lock);
    assert_rl_fails(RLDistributedLockTryLock(lock), kRLErrorBusy);
    RLDistributedLockOwner owner;
    assert_rl_fails(RLDistributedLockCopyOwner(lock, &owner), kRLErrorInvalidState);
    alarm(0);
    assert_true(RLRelease(lock));
}

/* A lock name as long as the file system takes (255 bytes on ext4 and
 * tmpfs): the unique file beside it must still fit. */
static void test_longest_file_names_work(void **state) {
    fixture *f = *state;
    long name_max = pathconf(f->dir, _PC_NAME_MAX);
    assert_true(name_max >= 250);
    long lengths[] = {250, name_max};
    for (int i = 0; i < 2; i++) {
        char name[512], path[640];
        memset(name, 'n', (size_t)lengths[i]);
        name[lengths[i]] = '\0';
        snprintf(path, sizeof path, "%s/%s", f->dir, name);
        RLDistributedLockRef lock = RLDistributedLockCreate(path);
        assert_non_null(lock);
        assert_true(RLDistributedLockTryLock(lock));
        RLDistributedLockOwner owner;
        assert_true(RLDistributedLockCopyOwner(lock, &owner));
        assert_int_equal(owner.pid, getpid());
        RLDistributedLockRef other = RLDistributedLockCreate(path);
        assert_rl_fails(RLDistributedLockTryLock(other), kRLErrorBusy);
        assert_true(RLDistributedLockUnlock(lock));
        assert_true(RLDistributedLockTryLock(other));
        assert_true(RLDistributedLockUnlock(other));
        assert_true(RLRelease(other));
        assert_true(RLRelease(lock));
        assert_int_equal(access(path, F_OK), -1);
    }
    /* One byte more is the file system's refusal, reported as such. */
    char name[512], path[640];
    memset(name, 'n', (size_t)name_max + 1);
    name[name_max + 1] = '\0';
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    RLDistributedLockRef lock = RLDistributedLockCreate(path);
    if (lock) {
        assert_false(RLDistributedLockTryLock(lock));
        RLErrorClear();
        assert_true(RLRelease(lock));
    } else {
        RLErrorClear();
    }
    assert_int_equal(stray_files(f), 0);
}

/* ---- misuse ---- */

static void test_create_misuse(void **state) {
    fixture *f = *state;
    char path[256];

    assert_rl_fails(RLDistributedLockCreate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLDistributedLockCreate(""), kRLErrorInvalidArgument);

    snprintf(path, sizeof path, "%s/missing/app.lock", f->dir);
    assert_rl_fails(RLDistributedLockCreate(path), kRLErrorNotFound);

    /* The lock path is a directory: link could never succeed. */
    assert_rl_fails(RLDistributedLockCreate(f->dir), kRLErrorInvalidArgument);
    snprintf(path, sizeof path, "%s/", f->dir);
    assert_rl_fails(RLDistributedLockCreate(path), kRLErrorInvalidArgument);

    /* A directory that takes no new files, even for root. */
    assert_rl_fails(RLDistributedLockCreate("/proc/self/app.lock"), kRLErrorPermission);

    /* A file where the directory should be. */
    snprintf(path, sizeof path, "%s/file", f->dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
    snprintf(path, sizeof path, "%s/file/app.lock", f->dir);
    assert_rl_fails(RLDistributedLockCreate(path), kRLErrorNotFound);

    /* Functions on NULL. */
    assert_rl_fails(RLDistributedLockTryLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLDistributedLockUnlock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLDistributedLockBreakLock(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLDistributedLockIsHeld(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLDistributedLockGetPath(NULL), kRLErrorInvalidArgument);
    assert_true(isnan(RLDistributedLockCopyLockDate(NULL)));
    assert_rl_error(kRLErrorInvalidArgument);
    RLDistributedLockOwner owner;
    assert_rl_fails(RLDistributedLockCopyOwner(NULL, &owner), kRLErrorInvalidArgument);
    assert_int_equal(RLDistributedLockOwnerGetState(NULL), kRLDistributedLockOwnerStateUnknown);
    assert_rl_error(kRLErrorInvalidArgument);

    RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
    assert_rl_fails(RLDistributedLockCopyOwner(lock, NULL), kRLErrorInvalidArgument);
    assert_true(RLRelease(lock));

    /* Not a distributed lock. */
    long not_a_lock[8] = {0};
    assert_rl_fails(RLDistributedLockTryLock((RLDistributedLockRef)not_a_lock), kRLErrorInvalidObject);
}

/* Tests run as root, which ignores permission bits: drop to nobody in a
 * child to see an unwritable directory refused. */
static void test_unwritable_directory_for_unprivileged_user(void **state) {
    fixture *f = *state;
    char dir[128], path[192];
    snprintf(dir, sizeof dir, "%s/readonly", f->dir);
    /* Read-only for its owner too, so the test also holds when not run as
     * root; as root, the bits are ignored and only dropping to nobody (for
     * whom the root-owned directory is not writable) shows the refusal. */
    assert_int_equal(mkdir(dir, 0555), 0);
    assert_int_equal(chmod(f->dir, 0755), 0);
    snprintf(path, sizeof path, "%s/app.lock", dir);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(10);
        RLDistributedLockRef lock = RLDistributedLockCreate(path);
        if (lock != NULL)
            _exit(11);
        if (RLErrorGetLast().code != kRLErrorPermission)
            _exit(12);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- several processes racing ---- */

enum { RACERS = 4 };

/* The critical section: a read-modify-write of a counter file that loses
 * updates unless exactly one process runs it at a time, plus a marker file
 * whose O_EXCL creation fails if another process is inside. */
static int racer(const char *lock_path, const char *counter_path, const char *inside_path, long rounds) {
    RLDistributedLockRef lock = RLDistributedLockCreate(lock_path);
    if (!lock)
        return 20;
    int rc = 0;
    for (long i = 0; i < rounds && rc == 0; i++) {
        while (!RLDistributedLockTryLock(lock)) {
            if (RLErrorGetLast().code != kRLErrorBusy) {
                rc = 21;
                break;
            }
            sched_yield();
        }
        if (rc)
            break;
        int marker = open(inside_path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (marker < 0) {
            rc = 22; /* someone else is inside */
        } else {
            close(marker);
        }
        FILE *c = fopen(counter_path, "r+");
        long value = -1;
        if (!c || fscanf(c, "%ld", &value) != 1) {
            rc = 23;
        } else {
            rewind(c);
            fprintf(c, "%ld\n", value + 1);
        }
        if (c)
            fclose(c);
        if (marker >= 0 && unlink(inside_path) != 0)
            rc = 24;
        if (!RLDistributedLockUnlock(lock))
            rc = 25;
    }
    RLRelease(lock);
    return rc;
}

static void test_processes_race_exactly_one_holder(void **state) {
    fixture *f = *state;
    char counter_path[160], inside_path[160];
    snprintf(counter_path, sizeof counter_path, "%s/counter", f->dir);
    snprintf(inside_path, sizeof inside_path, "%s/inside", f->dir);
    FILE *c = fopen(counter_path, "w");
    assert_non_null(c);
    fprintf(c, "0\n");
    fclose(c);
    long rounds = rl_test_iters(200);

    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0)
            _exit(racer(f->lock_path, counter_path, inside_path, rounds));
    }
    for (int i = 0; i < RACERS; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    c = fopen(counter_path, "r");
    long total = -1;
    assert_non_null(c);
    assert_int_equal(fscanf(c, "%ld", &total), 1);
    fclose(c);
    assert_int_equal(total, RACERS * rounds);
    assert_true(access(f->lock_path, F_OK) != 0);
    unlink(counter_path);
    assert_int_equal(stray_files(f), 0);
}

/* ---- a holder that dies ---- */

static void test_dead_holder_detected_and_broken(void **state) {
    fixture *f = *state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
        char ok = (lock && RLDistributedLockTryLock(lock)) ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause(); /* holds the lock until killed */
    }
    close(ready[1]);
    char ok = 0;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    close(ready[0]);
    assert_int_equal(ok, 'y');

    RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
    assert_non_null(lock);
    assert_rl_fails(RLDistributedLockTryLock(lock), kRLErrorBusy);
    RLDistributedLockOwner owner;
    assert_true(RLDistributedLockCopyOwner(lock, &owner));
    assert_int_equal(owner.pid, pid);
    assert_int_equal(RLDistributedLockOwnerGetState(&owner), kRLDistributedLockOwnerStateAlive);

    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    /* The lock outlives its holder; the record tells it is stale. */
    assert_rl_fails(RLDistributedLockTryLock(lock), kRLErrorBusy);
    assert_true(RLDistributedLockCopyOwner(lock, &owner));
    assert_int_equal(owner.pid, pid);
    assert_int_equal(RLDistributedLockOwnerGetState(&owner), kRLDistributedLockOwnerStateDead);
    assert_true(RLDistributedLockBreakLock(lock));
    assert_true(RLDistributedLockTryLock(lock));
    assert_true(RLDistributedLockCopyOwner(lock, &owner));
    assert_int_equal(owner.pid, getpid());
    assert_true(RLDistributedLockUnlock(lock));
    assert_true(RLRelease(lock));
}

static void test_owner_state_rules(void **state) {
    fixture *f = *state;
    RLDistributedLockRef lock = RLDistributedLockCreate(f->lock_path);
    assert_true(RLDistributedLockTryLock(lock));
    RLDistributedLockOwner me;
    assert_true(RLDistributedLockCopyOwner(lock, &me));
    assert_true(RLDistributedLockUnlock(lock));
    assert_true(RLRelease(lock));
    assert_int_equal(RLDistributedLockOwnerGetState(&me), kRLDistributedLockOwnerStateAlive);

    /* Another host: cannot be judged from here. */
    RLDistributedLockOwner other = me;
    snprintf(other.hostName, sizeof other.hostName, "rl-test-host.elsewhere.invalid");
    RLErrorClear();
    assert_int_equal(RLDistributedLockOwnerGetState(&other), kRLDistributedLockOwnerStateUnknown);
    assert_rl_error(kRLErrorNone);

    /* Our pid, but another start time: the pid was reused. */
    RLDistributedLockOwner reused = me;
    reused.processStartTicks = me.processStartTicks + 1;
    assert_int_equal(RLDistributedLockOwnerGetState(&reused), kRLDistributedLockOwnerStateDead);

    /* Recorded during another boot. */
    RLDistributedLockOwner rebooted = me;
    snprintf(rebooted.bootID, sizeof rebooted.bootID, "00000000-0000-0000-0000-000000000000");
    assert_int_equal(RLDistributedLockOwnerGetState(&rebooted), kRLDistributedLockOwnerStateDead);

    /* A pid that cannot exist (above the kernel's pid_max limit). */
    RLDistributedLockOwner gone = me;
    gone.pid = 0x7ffffff0;
    assert_int_equal(RLDistributedLockOwnerGetState(&gone), kRLDistributedLockOwnerStateDead);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_unlock_and_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_objects_exclude_each_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_break_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_lock_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_at_lock_path_never_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_to_fifo_at_lock_path_never_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_longest_file_names_work, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_misuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_directory_for_unprivileged_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_processes_race_exactly_one_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_holder_detected_and_broken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner_state_rules, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
