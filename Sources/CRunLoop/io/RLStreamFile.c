/* RLStreamFile.c — file streams: the file is opened by Open and closed by
 * Close. A read stream reads it from the start; a write stream creates it
 * if missing and truncates it, or appends (kRLStreamPropertyAppendToFile).
 * kRLStreamPropertyFileCurrentOffset moves where Open starts, or seeks an
 * open stream. A file is always ready, as in CF: Read and Write go
 * straight to read(2) and write(2). */
#include "RLStreamInternal.h"
#include "RLURLInternal.h"
#include <crunloop/RLNumber.h>
#include <crunloop/RLStream.h>
#include <crunloop/RLURL.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct file {
    char *path;
    /* Guarded by the stream lock, so that another thread may read the
     * offset while the stream is used and closed; Read and Write use fd
     * unlocked (one thread reads or writes a stream at a time, and fd
     * changes only on that thread's Open and Close). */
    int fd;          /* -1 until opened, and after Close */
    bool append;     /* O_APPEND instead of O_TRUNC (write streams) */
    bool has_offset; /* offset holds: set before Open, or where Close left it */
    int64_t offset;
} file;

static file *fil(rl__stream *s) { return (file *)s->state; }

static int file_open(rl__stream *s, const char *fn) {
    file *f = fil(s);
    rl__stream_lock(s);
    bool append = f->append, seek = f->has_offset && !f->append;
    off_t start = (off_t)f->offset;
    rl__stream_unlock(s);
    int flags = s->is_read ? O_RDONLY : O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC);
    int fd = open(f->path, flags | O_CLOEXEC, 0666);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0 && seek && lseek(fd, start, SEEK_SET) < 0) {
        err = errno;
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        rl__stream_fail(s, kRLStreamErrorDomainPOSIX, err);
        if (seek)
            rl__fail_errno(err, fn, "cannot open %s at offset %lld", f->path, (long long)start);
        else
            rl__fail_errno(err, fn, "cannot open %s", f->path);
        return -1;
    }
    rl__stream_lock(s);
    f->fd = fd;
    rl__stream_unlock(s);
    return 1;
}

static ssize_t file_io(rl__stream *s, void *buf, size_t n, int *err) {
    for (;;) {
        ssize_t r = s->is_read ? read(fil(s)->fd, buf, n) : write(fil(s)->fd, buf, n);
        if (r >= 0)
            return r;
        if (errno != EINTR) {
            *err = errno;
            return -1;
        }
    }
}

static ssize_t file_read(rl__stream *s, uint8_t *buf, size_t n, int *err) { return file_io(s, buf, n, err); }

static ssize_t file_write(rl__stream *s, const uint8_t *buf, size_t n, int *err) {
    return file_io(s, (void *)buf, n, err);
}

static bool file_ready(rl__stream *s) {
    (void)s;
    return true;
}

/* Remembers where the stream stopped, for the offset of a closed stream
 * (CF reports it too). */
static void file_close(rl__stream *s) {
    file *f = fil(s);
    rl__stream_lock(s);
    int fd = f->fd;
    f->fd = -1;
    if (fd >= 0 && !f->append) {
        off_t at = lseek(fd, 0, SEEK_CUR);
        f->has_offset = at >= 0;
        f->offset = at;
    }
    rl__stream_unlock(s);
    if (fd >= 0)
        close(fd); /* nothing to report to: the bytes were written already (no buffering here) */
}

static void file_finalize(rl__stream *s) { free(fil(s)->path); }

/* ---- properties ---- */

static unsigned file_properties(rl__stream *s) {
    unsigned p = RL_PROP_BIT(RL_PROP_FILE_CURRENT_OFFSET);
    return s->is_read ? p : p | RL_PROP_BIT(RL_PROP_APPEND_TO_FILE);
}

static RLTypeRef copy_offset(rl__stream *s, const char *fn) {
    file *f = fil(s);
    rl__stream_lock(s);
    if (f->append) {
        rl__stream_unlock(s);
        return rl__fail(kRLErrorInvalidState, fn, "an appending stream has no offset: each write goes to the end"),
               NULL;
    }
    int64_t at = f->offset;
    int err = 0;
    bool known = f->has_offset;
    if (f->fd >= 0) {
        off_t cur = lseek(f->fd, 0, SEEK_CUR);
        err = cur < 0 ? errno : 0;
        known = cur >= 0;
        at = cur;
    }
    rl__stream_unlock(s);
    if (err)
        return rl__fail_errno(err, fn, "cannot read the offset of %s", f->path), NULL;
    if (!known)
        return rl__fail(kRLErrorInvalidState, fn, "no offset: the stream is not open and none was set"), NULL;
    return RLNumberCreate(NULL, kRLNumberSInt64Type, &at);
}

static RLTypeRef file_copy_property(rl__stream *s, rl__prop p, const char *fn) {
    if (p == RL_PROP_FILE_CURRENT_OFFSET)
        return copy_offset(s, fn);
    rl__stream_lock(s);
    bool append = fil(s)->append;
    rl__stream_unlock(s);
    return rl__boolean_copy(append);
}

/* Before Open: where Open starts. Open: seeks. Later: refused. */
static bool set_offset(rl__stream *s, int64_t at, const char *fn) {
    file *f = fil(s);
    if (at < 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "negative offset %lld", (long long)at);
    rl__stream_lock(s);
    if (f->append) {
        rl__stream_unlock(s);
        return rl__fail(kRLErrorInvalidState, fn, "an appending stream writes at the end: no offset to set");
    }
    if (s->status == kRLStreamStatusNotOpen) {
        f->offset = at;
        f->has_offset = true;
        rl__stream_unlock(s);
        return true;
    }
    if (f->fd < 0) {
        RLStreamStatus st = s->status;
        rl__stream_unlock(s);
        return rl__fail(kRLErrorInvalidState, fn, "the file is not open (status %ld)", (long)st);
    }
    int err = lseek(f->fd, (off_t)at, SEEK_SET) < 0 ? errno : 0;
    rl__stream_unlock(s);
    if (err)
        return rl__fail_errno(err, fn, "cannot seek %s to %lld", f->path, (long long)at);
    return true;
}

static bool file_set_property(rl__stream *s, rl__prop p, const rl__prop_value *v, const char *fn) {
    if (p == RL_PROP_FILE_CURRENT_OFFSET)
        return set_offset(s, v->integer, fn);
    rl__stream_lock(s);
    if (s->status != kRLStreamStatusNotOpen) {
        RLStreamStatus st = s->status;
        rl__stream_unlock(s);
        return rl__fail(kRLErrorInvalidState, fn, "appending is chosen before Open (status %ld)", (long)st);
    }
    fil(s)->append = v->boolean;
    if (v->boolean)
        fil(s)->has_offset = false; /* CF: appending drops an offset set before */
    rl__stream_unlock(s);
    return true;
}

static const rl__stream_ops file_ops = {
    .kind = "file",
    .state_size = sizeof(file),
    .open = file_open,
    .read = file_read,
    .write = file_write,
    .ready = file_ready,
    .close = file_close,
    .finalize = file_finalize,
    .properties = file_properties,
    .copy_property = file_copy_property,
    .set_property = file_set_property,
};

static rl__stream *file_new(bool is_read, const char *path, const char *fn) {
    if (!path || !*path)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL or empty path"), NULL;
    rl__stream *s = rl__stream_new(is_read, &file_ops, fn);
    if (!s)
        return NULL;
    fil(s)->fd = -1;
    fil(s)->path = strdup(path);
    if (!fil(s)->path) {
        RLRelease(s);
        return rl__fail(kRLErrorNoMemory, fn, "no memory"), NULL;
    }
    return s;
}

RLReadStreamRef RLReadStreamCreateWithFilePath(RLAllocatorRef alloc, const char *path) {
    (void)alloc;
    return (RLReadStreamRef)file_new(true, path, __func__);
}

RLWriteStreamRef RLWriteStreamCreateWithFilePath(RLAllocatorRef alloc, const char *path) {
    (void)alloc;
    return (RLWriteStreamRef)file_new(false, path, __func__);
}

RLReadStreamRef RLReadStreamCreateWithFile(RLAllocatorRef alloc, RLURLRef fileURL) {
    (void)alloc;
    const char *path = rl__url_path(fileURL, __func__);
    return path ? (RLReadStreamRef)file_new(true, path, __func__) : NULL;
}

RLWriteStreamRef RLWriteStreamCreateWithFile(RLAllocatorRef alloc, RLURLRef fileURL) {
    (void)alloc;
    const char *path = rl__url_path(fileURL, __func__);
    return path ? (RLWriteStreamRef)file_new(false, path, __func__) : NULL;
}
