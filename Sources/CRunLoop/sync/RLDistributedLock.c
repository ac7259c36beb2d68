/* RLDistributedLock.c — NSDistributedLock: a lock file taken with link(2).
 *
 * Why link and not open(O_CREAT|O_EXCL): O_EXCL was not atomic on older NFS
 * clients, while link() to an existing name fails atomically on every file
 * system; the record is complete before the lock path appears, so a reader
 * never sees a half-written owner. The NFS caveat (a retransmitted LINK
 * whose first reply was lost answers EEXIST although it succeeded) is
 * resolved by the unique file's link count, as open(2)'s NFS notes
 * describe. Nothing here ever checks for the lock file and then creates it.
 *
 * The lock belongs to the object: `held` plus a random token written into
 * the record it linked. Unlock removes the lock path only if it still holds
 * that token, so an object whose lock was broken and re-taken by someone
 * else cannot remove the new holder's lock. (The file's inode number is not
 * enough: a broken lock's inode is free for the next file at once.) */
#include "RLBase.h"

#include <crunloop/RLDistributedLock.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct RLDistributedLock {
    rl__object base;
    pthread_mutex_t mu; /* guards held, token */
    char *path;
    char *dir;
    long name_max;      /* longest file name the directory takes */
    bool held;
    char token[33];     /* 128 random bits, hex, in the record we linked */
} RLDistributedLock;

static bool can_destroy(void *obj);
static void finalize(void *obj);

static const rl__class distributed_lock_class = {
    .name = "RLDistributedLock",
    .finalize = finalize,
    .can_destroy = can_destroy,
};

static _Atomic unsigned long g_unique_counter;

/* ---- owner records ---- */

static void host_name(char *buf, size_t size) {
    if (gethostname(buf, size) != 0)
        snprintf(buf, size, "localhost");
    buf[size - 1] = '\0';
}

static void boot_id(char *buf, size_t size) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f)
        return;
    if (fgets(buf, (int)size, f))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

/* The process state letter and start time (field 22, clock ticks since
 * boot) of /proc/<pid>/stat. The command name (field 2) may hold spaces and
 * parentheses, so parsing starts after its last ')'. */
static bool proc_stat(pid_t pid, char *state, uint64_t *start_ticks) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return false;
    p++;
    /* After ')': field 3 (state) is the first token, field 22 the 20th. */
    char *save = NULL;
    char *tok = strtok_r(p, " ", &save);
    for (int field = 3; tok; field++, tok = strtok_r(NULL, " ", &save)) {
        if (field == 3)
            *state = tok[0];
        if (field == 22) {
            *start_ticks = strtoull(tok, NULL, 10);
            return true;
        }
    }
    return false;
}

static void owner_fill_self(RLDistributedLockOwner *o) {
    memset(o, 0, sizeof *o);
    host_name(o->hostName, sizeof o->hostName);
    o->pid = (int32_t)getpid();
    char state;
    if (!proc_stat(getpid(), &state, &o->processStartTicks))
        o->processStartTicks = 0;
    boot_id(o->bootID, sizeof o->bootID);
    o->lockDate = RLAbsoluteTimeGetCurrent();
}

static int owner_format(const RLDistributedLockOwner *o, const char *token, char *buf, size_t size) {
    return snprintf(buf, size,
                    "RLDistributedLock 1\nhost %s\npid %d\nstart %llu\nboot %s\ndate %.6f\ntoken %s\n",
                    o->hostName, (int)o->pid, (unsigned long long)o->processStartTicks, o->bootID,
                    o->lockDate, token);
}

/* Parses a record; the token (if token is not NULL) into token[33]. */
static bool owner_parse(char *text, RLDistributedLockOwner *o, char *token) {
    if (token)
        token[0] = '\0';
    memset(o, 0, sizeof *o);
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, "RLDistributedLock 1") != 0)
        return false;
    unsigned seen = 0;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *value = strchr(line, ' ');
        if (!value)
            continue;
        *value++ = '\0';
        if (strcmp(line, "host") == 0) {
            snprintf(o->hostName, sizeof o->hostName, "%s", value);
            seen |= 1;
        } else if (strcmp(line, "pid") == 0) {
            o->pid = (int32_t)strtol(value, NULL, 10);
            seen |= 2;
        } else if (strcmp(line, "start") == 0) {
            o->processStartTicks = strtoull(value, NULL, 10);
        } else if (strcmp(line, "boot") == 0) {
            snprintf(o->bootID, sizeof o->bootID, "%s", value);
        } else if (strcmp(line, "date") == 0) {
            o->lockDate = strtod(value, NULL);
        } else if (strcmp(line, "token") == 0 && token) {
            snprintf(token, 33, "%s", value);
        }
    }
    return seen == 3;
}

/* ---- helpers ---- */

static RLDistributedLock *checked(RLDistributedLockRef lock, const char *fn) {
    return rl__object_check(lock, &distributed_lock_class, fn) ? (RLDistributedLock *)lock : NULL;
}

/* A name no other process or thread on any host can pick: host + pid +
 * thread + counter, after as much of the lock's own file name as still
 * fits the directory's name limit (so that a lock whose name is near the
 * limit still works; the prefix only helps a human tell whose it is). Same
 * directory as the lock, because link cannot cross file systems. */
static bool unique_path(const char *path, const char *dir, long name_max, char *out, size_t size) {
    char host[65];
    host_name(host, sizeof host);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    unsigned long n = atomic_fetch_add_explicit(&g_unique_counter, 1, memory_order_relaxed);
    char suffix[160];
    int slen = snprintf(suffix, sizeof suffix, ".%s.%d.%ld.%lu.tmp", host, (int)getpid(),
                        (long)syscall(SYS_gettid), n);
    if (slen <= 0 || (size_t)slen >= sizeof suffix || slen > name_max)
        return false;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t keep = strlen(base);
    if (keep > (size_t)(name_max - slen))
        keep = (size_t)(name_max - slen);
    int len = snprintf(out, size, "%s/%.*s%s", dir, (int)keep, base, suffix);
    return len > 0 && (size_t)len < size;
}

/* 128 bits no other lock holder will draw. getrandom() cannot fail for 16
 * bytes once the pool is ready; if it does, time and address still make a
 * collision between live holders practically impossible. */
static void make_token(char out[33]) {
    unsigned char bytes[16];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        uint64_t b = (uint64_t)(uintptr_t)out ^ ((uint64_t)getpid() << 32) ^
                     atomic_fetch_add_explicit(&g_unique_counter, 1, memory_order_relaxed);
        memcpy(bytes, &a, 8);
        memcpy(bytes + 8, &b, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

/* What a file type is called in messages. */
static const char *file_kind(mode_t mode) {
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* Opens the file at the lock path for reading, never blocking: O_NONBLOCK
 * because opening a FIFO waits for a writer (anyone who can write the
 * directory could otherwise hang the holder), O_NOFOLLOW because a lock
 * file is never a symbolic link. Returns the descriptor; -1 with errno set
 * if it cannot be opened; -2 with *kind set if it is not a regular file
 * (a FIFO, a device, a socket, a symbolic link): no lock file of ours. */
static int open_lock_file(const char *path, const char **kind) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ELOOP) {
            *kind = "a symbolic link";
            return -2;
        }
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        *kind = file_kind(st.st_mode);
        close(fd);
        return -2;
    }
    return fd;
}

/* Reads the lock file's text (at most size-1 bytes). -1 with errno set;
 * -2 with *kind set for a file that is not a regular file. */
static ssize_t read_lock_file(const char *path, char *buf, size_t size, const char **kind) {
    int fd = open_lock_file(path, kind);
    if (fd < 0)
        return fd;
    ssize_t n;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    int err = errno;
    close(fd);
    if (n < 0) {
        errno = err;
        return -1;
    }
    buf[n] = '\0';
    return n;
}

/* A short "held by host pid N" (or what is there instead of a lock file)
 * for busy messages; best effort. */
static void describe_holder(const char *path, char *buf, size_t size) {
    buf[0] = '\0';
    char text[1024];
    const char *kind = NULL;
    ssize_t n = read_lock_file(path, text, sizeof text, &kind);
    if (n == -2) {
        snprintf(buf, size, " by %s, not a lock file", kind);
        return;
    }
    if (n <= 0)
        return;
    RLDistributedLockOwner o;
    if (owner_parse(text, &o, NULL))
        snprintf(buf, size, " by %s pid %d", o.hostName, (int)o.pid);
}

/* ---- lifecycle ---- */

RLDistributedLockRef RLDistributedLockCreate(const char *path) {
    const char *fn = __func__;
    if (!path) {
        rl__fail(kRLErrorInvalidArgument, fn, "NULL path");
        return NULL;
    }
    size_t len = strlen(path);
    if (len == 0 || len >= PATH_MAX - 128 || path[len - 1] == '/') {
        rl__fail(kRLErrorInvalidArgument, fn, "path \"%s\" is empty, too long or a directory name", path);
        return NULL;
    }
    char *dir = strdup(path);
    char *copy = strdup(path);
    if (!dir || !copy) {
        free(dir);
        free(copy);
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';

    struct stat st;
    char probe[PATH_MAX];
    int fd;
    long name_max;
    if (stat(dir, &st) != 0) {
        rl__fail_errno(errno, fn, "directory \"%s\" of lock \"%s\" is not usable", dir, path);
        goto fail;
    }
    if (!S_ISDIR(st.st_mode)) {
        rl__fail_errno(ENOTDIR, fn, "\"%s\" (directory of lock \"%s\") is not a directory", dir, path);
        goto fail;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rl__fail(kRLErrorInvalidArgument, fn, "lock path \"%s\" is a directory", path);
        goto fail;
    }
    errno = 0;
    name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0)
        name_max = NAME_MAX; /* no limit reported: the usual one */
    /* Prove the directory writable the way TryLock will write it: access()
     * would say yes to root on a read-only mount of some file systems and
     * knows nothing of ACLs on NFS. */
    if (!unique_path(path, dir, name_max, probe, sizeof probe)) {
        rl__fail(kRLErrorInvalidArgument, fn, "lock path \"%s\" is too long", path);
        goto fail;
    }
    fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
        /* The directory exists (stat said so) but refuses new names, as
         * /proc does: that is a permission problem, not a missing path. */
        rl__fail(kRLErrorPermission, fn,
                 "directory \"%s\" of lock \"%s\" does not accept new files (%s)", dir, path,
                 strerror(ENOENT));
        goto fail;
    }
    if (fd < 0) {
        rl__fail_errno(errno, fn, "cannot create files in \"%s\" (directory of lock \"%s\")", dir, path);
        goto fail;
    }
    close(fd);
    unlink(probe);

    RLDistributedLock *lock = rl__object_alloc(&distributed_lock_class, sizeof *lock, fn);
    if (!lock)
        goto fail;
    pthread_mutex_init(&lock->mu, NULL);
    lock->path = copy;
    lock->dir = dir;
    lock->name_max = name_max;
    return lock;

fail:
    free(dir);
    free(copy);
    return NULL;
}

static bool can_destroy(void *obj) {
    RLDistributedLock *lock = obj;
    pthread_mutex_lock(&lock->mu);
    bool held = lock->held;
    pthread_mutex_unlock(&lock->mu);
    if (held)
        return rl__fail(kRLErrorBusy, "RLRelease", "RLDistributedLock \"%s\" is still locked; unlock it first",
                        lock->path);
    return true;
}

static void finalize(void *obj) {
    RLDistributedLock *lock = obj;
    pthread_mutex_destroy(&lock->mu);
    free(lock->path);
    free(lock->dir);
}

const char *RLDistributedLockGetPath(RLDistributedLockRef ref) {
    RLDistributedLock *lock = checked(ref, __func__);
    return lock ? lock->path : NULL;
}

/* ---- locking ---- */

/* Writes the owner record into a new unique file; returns its path in tmp
 * and its identity in *st. */
static bool write_record(RLDistributedLock *lock, const char *token, char *tmp, size_t size,
                         const char *fn) {
    if (!unique_path(lock->path, lock->dir, lock->name_max, tmp, size))
        return rl__fail(kRLErrorInvalidArgument, fn, "lock path \"%s\" is too long", lock->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return rl__fail_errno(errno, fn, "cannot create \"%s\"", tmp);
    RLDistributedLockOwner self;
    owner_fill_self(&self);
    char text[1024];
    int len = owner_format(&self, token, text, sizeof text);
    size_t want = len < 0 ? 0 : (size_t)len < sizeof text ? (size_t)len : sizeof text - 1;
    bool ok = write(fd, text, want) == (ssize_t)want;
    int err = errno;
    /* close() is what pushes the data to an NFS server (close-to-open). */
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        unlink(tmp);
        return rl__fail_errno(err ? err : EIO, fn, "cannot write the owner record to \"%s\"", tmp);
    }
    return true;
}

bool RLDistributedLockTryLock(RLDistributedLockRef ref) {
    const char *fn = __func__;
    RLDistributedLock *lock = checked(ref, fn);
    if (!lock)
        return false;
    pthread_mutex_lock(&lock->mu);
    if (lock->held) {
        pthread_mutex_unlock(&lock->mu);
        return rl__fail(kRLErrorExists, fn, "this lock object already holds \"%s\"", lock->path);
    }
    char tmp[PATH_MAX];
    char token[33];
    make_token(token);
    if (!write_record(lock, token, tmp, sizeof tmp, fn)) {
        pthread_mutex_unlock(&lock->mu);
        return false;
    }
    bool linked = link(tmp, lock->path) == 0;
    int err = errno;
    if (!linked) {
        struct stat st;
        linked = stat(tmp, &st) == 0 && st.st_nlink == 2;
    }
    unlink(tmp);
    if (!linked) {
        pthread_mutex_unlock(&lock->mu);
        if (err == EEXIST) {
            char holder[320];
            describe_holder(lock->path, holder, sizeof holder);
            return rl__fail(kRLErrorBusy, fn, "\"%s\" is locked%s", lock->path, holder);
        }
        return rl__fail_errno(err, fn, "cannot link \"%s\"", lock->path);
    }
    lock->held = true;
    memcpy(lock->token, token, sizeof token);
    pthread_mutex_unlock(&lock->mu);
    return true;
}

bool RLDistributedLockUnlock(RLDistributedLockRef ref) {
    const char *fn = __func__;
    RLDistributedLock *lock = checked(ref, fn);
    if (!lock)
        return false;
    pthread_mutex_lock(&lock->mu);
    if (!lock->held) {
        pthread_mutex_unlock(&lock->mu);
        return rl__fail(kRLErrorNotLocked, fn, "this lock object does not hold \"%s\"", lock->path);
    }
    char text[1024], token[33];
    RLDistributedLockOwner o;
    const char *kind = NULL;
    ssize_t n = read_lock_file(lock->path, text, sizeof text, &kind);
    if (n == -1 && errno != ENOENT) {
        int err = errno;
        pthread_mutex_unlock(&lock->mu);
        return rl__fail_errno(err, fn, "cannot read \"%s\"", lock->path);
    }
    if (n == -2) {
        /* Our record was replaced by something that is no lock file. */
        lock->held = false;
        pthread_mutex_unlock(&lock->mu);
        return rl__fail(kRLErrorNotOwner, fn, "\"%s\" was replaced by %s; nothing removed", lock->path, kind);
    }
    if (n < 0 || !owner_parse(text, &o, token) || strcmp(token, lock->token) != 0) {
        /* Broken by someone else (and maybe re-taken): not ours to remove. */
        lock->held = false;
        pthread_mutex_unlock(&lock->mu);
        return rl__fail(kRLErrorNotOwner, fn, "\"%s\" was broken by another process; nothing removed",
                        lock->path);
    }
    if (unlink(lock->path) != 0 && errno != ENOENT) {
        int err = errno;
        pthread_mutex_unlock(&lock->mu);
        return rl__fail_errno(err, fn, "cannot remove \"%s\"", lock->path);
    }
    lock->held = false;
    pthread_mutex_unlock(&lock->mu);
    return true;
}

bool RLDistributedLockBreakLock(RLDistributedLockRef ref) {
    const char *fn = __func__;
    RLDistributedLock *lock = checked(ref, fn);
    if (!lock)
        return false;
    pthread_mutex_lock(&lock->mu);
    if (unlink(lock->path) != 0) {
        int err = errno;
        pthread_mutex_unlock(&lock->mu);
        if (err == ENOENT)
            return rl__fail(kRLErrorNotLocked, fn, "\"%s\" is not locked", lock->path);
        return rl__fail_errno(err, fn, "cannot remove \"%s\"", lock->path);
    }
    lock->held = false;
    pthread_mutex_unlock(&lock->mu);
    return true;
}

bool RLDistributedLockIsHeld(RLDistributedLockRef ref) {
    RLDistributedLock *lock = checked(ref, __func__);
    if (!lock)
        return false;
    pthread_mutex_lock(&lock->mu);
    bool held = lock->held;
    pthread_mutex_unlock(&lock->mu);
    return held;
}

/* ---- inspecting the holder ---- */

RLAbsoluteTime RLDistributedLockCopyLockDate(RLDistributedLockRef ref) {
    const char *fn = __func__;
    RLDistributedLock *lock = checked(ref, fn);
    if (!lock)
        return NAN;
    struct stat st;
    if (stat(lock->path, &st) != 0) {
        if (errno == ENOENT)
            rl__fail(kRLErrorNotLocked, fn, "\"%s\" is not locked", lock->path);
        else
            rl__fail_errno(errno, fn, "cannot read \"%s\"", lock->path);
        return NAN;
    }
    return (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec * 1e-9 - kRLAbsoluteTimeIntervalSince1970;
}

bool RLDistributedLockCopyOwner(RLDistributedLockRef ref, RLDistributedLockOwner *out) {
    const char *fn = __func__;
    RLDistributedLock *lock = checked(ref, fn);
    if (!lock)
        return false;
    if (!out)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL outOwner");
    char text[1024];
    const char *kind = NULL;
    ssize_t n = read_lock_file(lock->path, text, sizeof text, &kind);
    if (n == -2)
        return rl__fail(kRLErrorInvalidState, fn, "\"%s\" is %s, not an RLDistributedLock file", lock->path,
                        kind);
    if (n < 0) {
        if (errno == ENOENT)
            return rl__fail(kRLErrorNotLocked, fn, "\"%s\" is not locked", lock->path);
        return rl__fail_errno(errno, fn, "cannot read \"%s\"", lock->path);
    }
    RLDistributedLockOwner o;
    if (!owner_parse(text, &o, NULL))
        return rl__fail(kRLErrorInvalidState, fn, "\"%s\" holds no RLDistributedLock owner record",
                        lock->path);
    *out = o;
    return true;
}

RLDistributedLockOwnerState RLDistributedLockOwnerGetState(const RLDistributedLockOwner *owner) {
    if (!owner) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL owner");
        return kRLDistributedLockOwnerStateUnknown;
    }
    char host[kRLDistributedLockHostNameMax];
    host_name(host, sizeof host);
    if (strncmp(host, owner->hostName, sizeof host) != 0)
        return kRLDistributedLockOwnerStateUnknown;
    char boot[sizeof owner->bootID];
    boot_id(boot, sizeof boot);
    if (owner->bootID[0] && boot[0] && strcmp(boot, owner->bootID) != 0)
        return kRLDistributedLockOwnerStateDead; /* recorded before a reboot */
    if (owner->pid <= 0)
        return kRLDistributedLockOwnerStateUnknown;
    if (kill((pid_t)owner->pid, 0) != 0 && errno == ESRCH)
        return kRLDistributedLockOwnerStateDead;
    char state;
    uint64_t start;
    if (!proc_stat((pid_t)owner->pid, &state, &start))
        return kRLDistributedLockOwnerStateAlive; /* kill() says it exists */
    /* A zombie has exited: it can never unlock. A different start time
     * means the pid now names another process. */
    if (state == 'Z' || state == 'X')
        return kRLDistributedLockOwnerStateDead;
    if (owner->processStartTicks != 0 && start != owner->processStartTicks)
        return kRLDistributedLockOwnerStateDead;
    return kRLDistributedLockOwnerStateAlive;
}
