/* RLStreamFile.c — file streams: the file is opened by Open (a read stream
 * reads it from the start; a write stream creates or truncates it) and
 * closed by Close. A file is always ready, as in CF: Read and Write go
 * straight to read(2) and write(2). */
#include "RLStreamInternal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct file {
    char *path;
    int fd; /* -1 until opened, and after Close */
} file;

static file *fil(rl__stream *s) { return (file *)s->state; }

static int file_open(rl__stream *s, const char *fn) {
    file *f = fil(s);
    int fd = s->is_read ? open(f->path, O_RDONLY | O_CLOEXEC)
                        : open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        rl__stream_fail(s, kRLStreamErrorDomainPOSIX, err);
        rl__fail_errno(err, fn, "cannot open %s", f->path);
        return -1;
    }
    f->fd = fd;
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

static void file_close(rl__stream *s) {
    file *f = fil(s);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

static void file_finalize(rl__stream *s) { free(fil(s)->path); }

static const rl__stream_ops file_ops = {
    .state_size = sizeof(file),
    .open = file_open,
    .read = file_read,
    .write = file_write,
    .ready = file_ready,
    .close = file_close,
    .finalize = file_finalize,
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

RLReadStreamRef RLReadStreamCreateWithFile(RLAllocatorRef alloc, const char *path) {
    (void)alloc;
    return (RLReadStreamRef)file_new(true, path, __func__);
}

RLWriteStreamRef RLWriteStreamCreateWithFile(RLAllocatorRef alloc, const char *path) {
    (void)alloc;
    return (RLWriteStreamRef)file_new(false, path, __func__);
}
