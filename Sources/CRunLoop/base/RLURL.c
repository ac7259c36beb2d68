/* RLURL.c — file URLs (RLURL.h): a path as given and the absolute path it
 * resolves to, both fixed at creation. */
#include "RLBase.h"
#include "RLURLInternal.h"
#include <crunloop/RLString.h>
#include <crunloop/RLURL.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct RLURL {
    rl__object base;
    bool directory;
    char *given;    /* the path as created, no trailing '/' (but "/") */
    char *absolute; /* given, or the working directory + '/' + given */
};

static void url_finalize(void *obj) {
    struct RLURL *u = obj;
    free(u->given);
    free(u->absolute);
}

static char *url_describe(const void *obj) {
    const struct RLURL *u = obj;
    char *s = NULL;
    if (asprintf(&s, "<RLURL %p>{file://%s%s}", obj, u->absolute, u->directory && strcmp(u->absolute, "/") ? "/" : "") < 0)
        return NULL;
    return s;
}

static const rl__class url_class = {"RLURL", url_finalize, NULL, url_describe};

RLTypeID RLURLGetTypeID(void) { return rl__type_id(&url_class); }

/* A copy of path[0..len) without trailing slashes (keeping a lone "/"). */
static char *trimmed(const char *path, size_t len) {
    while (len > 1 && path[len - 1] == '/')
        len--;
    return strndup(path, len);
}

static RLURLRef url_new(const char *path, size_t len, bool isDirectory, const char *fn) {
    if (memchr(path, '\0', len))
        return rl__fail(kRLErrorInvalidArgument, fn, "path has a NUL byte"), NULL;
    char *given = trimmed(path, len), *absolute = NULL;
    if (!given)
        return rl__fail(kRLErrorNoMemory, fn, "no memory"), NULL;
    if (given[0] == '/') {
        absolute = strdup(given);
    } else {
        char *cwd = getcwd(NULL, 0);
        if (!cwd) {
            int err = errno;
            free(given);
            return rl__fail_errno(err, fn, "cannot resolve the relative path against the working directory"), NULL;
        }
        if (asprintf(&absolute, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", given) < 0)
            absolute = NULL;
        free(cwd);
    }
    if (!absolute) {
        free(given);
        return rl__fail(kRLErrorNoMemory, fn, "no memory"), NULL;
    }
    struct RLURL *u = rl__object_alloc(&url_class, sizeof *u, fn);
    if (!u) {
        free(given);
        free(absolute);
        return NULL;
    }
    u->directory = isDirectory;
    u->given = given;
    u->absolute = absolute;
    return u;
}

RLURLRef RLURLCreateFromFileSystemRepresentation(RLAllocatorRef allocator, const uint8_t *buffer, RLIndex bufLen,
                                                 bool isDirectory) {
    (void)allocator;
    if (!buffer || bufLen <= 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, "buffer %p with length %ld", (const void *)buffer,
                        (long)bufLen),
               NULL;
    return url_new((const char *)buffer, (size_t)bufLen, isDirectory, __func__);
}

RLURLRef RLURLCreateWithFileSystemPath(RLAllocatorRef allocator, RLStringRef filePath, RLURLPathStyle pathStyle,
                                       bool isDirectory) {
    (void)allocator;
    if (!filePath || !*filePath)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL or empty path"), NULL;
    if (pathStyle != kRLURLPOSIXPathStyle)
        return rl__fail(kRLErrorInvalidArgument, __func__, "path style %ld: only kRLURLPOSIXPathStyle",
                        (long)pathStyle),
               NULL;
    return url_new(filePath, strlen(filePath), isDirectory, __func__);
}

static const struct RLURL *checked(RLURLRef url, const char *fn) {
    return rl__object_check(url, &url_class, fn) ? url : NULL;
}

bool RLURLGetFileSystemRepresentation(RLURLRef url, bool resolveAgainstBase, uint8_t *buffer, RLIndex maxBufLen) {
    const struct RLURL *u = checked(url, __func__);
    if (!u)
        return false;
    const char *path = resolveAgainstBase ? u->absolute : u->given;
    size_t need = strlen(path) + 1;
    if (!buffer || maxBufLen < 0 || (size_t)maxBufLen < need)
        return rl__fail(kRLErrorInvalidArgument, __func__, "buffer %p of %ld bytes for a path of %zu",
                        (void *)buffer, (long)maxBufLen, need);
    memcpy(buffer, path, need);
    return true;
}

RLStringRef RLURLCopyFileSystemPath(RLURLRef url, RLURLPathStyle pathStyle) {
    const struct RLURL *u = checked(url, __func__);
    if (!u)
        return NULL;
    if (pathStyle != kRLURLPOSIXPathStyle)
        return rl__fail(kRLErrorInvalidArgument, __func__, "path style %ld: only kRLURLPOSIXPathStyle",
                        (long)pathStyle),
               NULL;
    return RLStringCreateWithCString(NULL, u->given, kRLStringEncodingUTF8);
}

bool RLURLHasDirectoryPath(RLURLRef url) {
    const struct RLURL *u = checked(url, __func__);
    return u && u->directory;
}

const char *rl__url_path(RLURLRef url, const char *fn) {
    const struct RLURL *u = checked(url, fn);
    return u ? u->absolute : NULL;
}
