/*
 * RLURL.h — CF's CFURL, the part that names files: a file URL made from a
 * path, read back as a path. File streams take one
 * (RLReadStreamCreateWithFile), as CF's do.
 *
 * What a caller may rely on:
 *   - An RLURLRef is an immutable object (Create rule: RLRelease it),
 *     thread-safe to share.
 *   - Only file URLs with POSIX paths: the path is kept as given (bytes,
 *     no percent-encoding), with a relative path resolved against the
 *     working directory at creation (CF makes such a URL relative to the
 *     working directory, which comes to the same file).
 *   - No other scheme, no string form (CFURLGetString), no path
 *     manipulation: those functions do not exist here.
 */
#ifndef CRUNLOOP_RLURL_H
#define CRUNLOOP_RLURL_H

#include <crunloop/RLBase.h>
#include <crunloop/RLString.h>

#include <stdint.h>

RL_EXTERN_C_BEGIN

typedef const struct RLURL *RLURLRef;

/* CFURLPathStyle (CF's values). Only kRLURLPOSIXPathStyle is supported. */
typedef RL_ENUM(RLIndex, RLURLPathStyle){
    kRLURLPOSIXPathStyle = 0,
    kRLURLWindowsPathStyle = 2,
};

/* The type ID of URLs. */
RL_EXPORT RLTypeID RLURLGetTypeID(void);

/* A file URL for the first bufLen bytes of buffer, a path (Create rule).
 * isDirectory is recorded (a directory's path ends with one '/'). NULL
 * (kRLErrorInvalidArgument) for a NULL buffer, bufLen <= 0 or a NUL
 * inside; kRLErrorSystem if a relative path cannot be resolved (getcwd). */
RL_EXPORT RLURLRef RL_NULLABLE RLURLCreateFromFileSystemRepresentation(RLAllocatorRef RL_NULLABLE allocator,
                                                                       const uint8_t *RL_NULLABLE buffer,
                                                                       RLIndex bufLen, bool isDirectory);
/* The same from a string. NULL (kRLErrorInvalidArgument) for a NULL or
 * empty path or a path style other than kRLURLPOSIXPathStyle. */
RL_EXPORT RLURLRef RL_NULLABLE RLURLCreateWithFileSystemPath(RLAllocatorRef RL_NULLABLE allocator,
                                                             RLStringRef RL_NULLABLE filePath,
                                                             RLURLPathStyle pathStyle, bool isDirectory);
/* Copies the path, NUL-terminated, into buffer: the absolute path if
 * resolveAgainstBase (or the path was absolute), else the path as given.
 * False (error set, buffer untouched) for a bad URL, a NULL buffer, or
 * a buffer too small (kRLErrorInvalidArgument). */
RL_EXPORT bool RLURLGetFileSystemRepresentation(RLURLRef RL_NULLABLE url, bool resolveAgainstBase,
                                                uint8_t *RL_NULLABLE buffer, RLIndex maxBufLen);
/* The path as given, without a directory's trailing '/' (Copy rule: a
 * library string). NULL (error set) for a bad URL or a path style other
 * than kRLURLPOSIXPathStyle. */
RL_EXPORT RLStringRef RL_NULLABLE RLURLCopyFileSystemPath(RLURLRef RL_NULLABLE url, RLURLPathStyle pathStyle);
/* Whether the URL names a directory (isDirectory at creation). False
 * (error set) for a bad URL. */
RL_EXPORT bool RLURLHasDirectoryPath(RLURLRef RL_NULLABLE url);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLURL_H */
