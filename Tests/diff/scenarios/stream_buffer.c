/* Memory streams over the caller's memory: a read stream over bytes it
 * does not copy, lending them in place (GetBuffer: counts, statuses, the
 * end), a write stream into a fixed buffer (full buffer, a write that does
 * not fit, the error as a CFError), one with no room at all; the type IDs;
 * file URLs and a file stream made from one. */
#include "diff.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* CF logs, with a time stamp, on stderr the first time a stream error
 * becomes a CFError (it looks for CFNetwork, absent on Linux): kept out of
 * the trace. */
static CFErrorRef copy_error_quietly(CFReadStreamRef r, CFWriteStreamRef w) {
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0)
        dup2(null, 2);
    CFErrorRef e = r ? CFReadStreamCopyError(r) : CFWriteStreamCopyError(w);
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    if (null >= 0)
        close(null);
    return e;
}

static const char *name(CFStreamEventType t) {
    switch (t) {
    case kCFStreamEventOpenCompleted: return "OpenCompleted";
    case kCFStreamEventHasBytesAvailable: return "HasBytesAvailable";
    case kCFStreamEventCanAcceptBytes: return "CanAcceptBytes";
    case kCFStreamEventErrorOccurred: return "ErrorOccurred";
    case kCFStreamEventEndEncountered: return "EndEncountered";
    default: return "?";
    }
}

static void on_read(CFReadStreamRef s, CFStreamEventType t, void *info) {
    (void)info;
    trace("read: %s (status %ld)", name(t), (long)CFReadStreamGetStatus(s));
    if (t == kCFStreamEventHasBytesAvailable) {
        CFIndex n = -2;
        const UInt8 *p = CFReadStreamGetBuffer(s, 3, &n);
        trace("read: lent %ld '%.*s', status %ld", (long)n, (int)(n > 0 ? n : 0), p ? (const char *)p : "",
              (long)CFReadStreamGetStatus(s));
    }
}

static void on_write(CFWriteStreamRef s, CFStreamEventType t, void *info) {
    (void)info;
    trace("write: %s (status %ld)", name(t), (long)CFWriteStreamGetStatus(s));
}

static const char *error_str(CFErrorRef e) {
    static char b[160];
    if (!e)
        return "(no error)";
    char d[96] = "?";
    CFStringGetCString(CFErrorGetDomain(e), d, sizeof d, kCFStringEncodingUTF8);
    snprintf(b, sizeof b, "%s %ld", d, (long)CFErrorGetCode(e));
    return b;
}

static void lend(CFReadStreamRef r, CFIndex max) {
    CFIndex n = -2;
    const UInt8 *p = CFReadStreamGetBuffer(r, max, &n);
    trace("get buffer %ld: %s %ld '%.*s', status %ld", (long)max, p ? "bytes" : "NULL", (long)n,
          (int)(p && n > 0 ? n : 0), p ? (const char *)p : "", (long)CFReadStreamGetStatus(r));
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    CFOptionFlags all = kCFStreamEventOpenCompleted | kCFStreamEventHasBytesAvailable |
                        kCFStreamEventCanAcceptBytes | kCFStreamEventErrorOccurred | kCFStreamEventEndEncountered;

    trace("-- type ids");
    CFReadStreamRef r = CFReadStreamCreateWithBytesNoCopy(NULL, (const UInt8 *)"abcdefgh", 8, kCFAllocatorNull);
    CFWriteStreamRef w = CFWriteStreamCreateWithAllocatedBuffers(NULL, NULL);
    trace("read stream %d, write stream %d, differ %d, run loop %d", CFGetTypeID(r) == CFReadStreamGetTypeID(),
          CFGetTypeID(w) == CFWriteStreamGetTypeID(), CFReadStreamGetTypeID() != CFWriteStreamGetTypeID(),
          CFGetTypeID(rl) == CFRunLoopGetTypeID());
    CFRelease(w);

    trace("-- lending, polled");
    lend(r, 4);
    trace("copy error before open: %s", error_str(copy_error_quietly(r, NULL)));
    trace("open: %d", CFReadStreamOpen(r));
    lend(r, 3);
    lend(r, 0);
    UInt8 one[1];
    trace("read 1: %ld", (long)CFReadStreamRead(r, one, 1));
    lend(r, 4);
    lend(r, 4);
    CFReadStreamClose(r);
    lend(r, 4);
    CFRelease(r);

    trace("-- lending in the client");
    r = CFReadStreamCreateWithBytesNoCopy(NULL, (const UInt8 *)"abcdefgh", 8, kCFAllocatorNull);
    CFReadStreamSetClient(r, all, on_read, &ctx);
    CFReadStreamScheduleWithRunLoop(r, rl, kCFRunLoopDefaultMode);
    trace("open: %d", CFReadStreamOpen(r));
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    CFReadStreamUnscheduleFromRunLoop(r, rl, kCFRunLoopDefaultMode);
    CFRelease(r);

    trace("-- writing into a buffer");
    UInt8 buf[8];
    memset(buf, '.', sizeof buf);
    w = CFWriteStreamCreateWithBuffer(NULL, buf, 5);
    CFWriteStreamSetClient(w, all, on_write, &ctx);
    CFWriteStreamScheduleWithRunLoop(w, rl, kCFRunLoopDefaultMode);
    trace("open: %d", CFWriteStreamOpen(w));
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    trace("wrote %ld", (long)CFWriteStreamWrite(w, (const UInt8 *)"abc", 3));
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    trace("wrote %ld", (long)CFWriteStreamWrite(w, (const UInt8 *)"de", 2));
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    trace("buffer '%.8s', can accept %d, status %ld, copy error: %s", (const char *)buf, CFWriteStreamCanAcceptBytes(w),
          (long)CFWriteStreamGetStatus(w), error_str(copy_error_quietly(NULL, w)));
    CFTypeRef data = CFWriteStreamCopyProperty(w, kCFStreamPropertyDataWritten);
    trace("data written property: %s", data ? "some" : "none");
    if (data)
        CFRelease(data);
    trace("wrote %ld", (long)CFWriteStreamWrite(w, (const UInt8 *)"f", 1));
    CFErrorRef e = copy_error_quietly(NULL, w);
    trace("status %ld, error %ld/%d, copy error: %s", (long)CFWriteStreamGetStatus(w),
          (long)CFWriteStreamGetError(w).domain, (int)CFWriteStreamGetError(w).error, error_str(e));
    if (e)
        CFRelease(e);
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    trace("buffer '%.8s'", (const char *)buf);
    CFWriteStreamUnscheduleFromRunLoop(w, rl, kCFRunLoopDefaultMode);
    CFRelease(w);

    trace("-- a write that does not fit");
    w = CFWriteStreamCreateWithBuffer(NULL, buf, 4);
    CFWriteStreamOpen(w);
    trace("wrote %ld, status %ld, buffer '%.8s'", (long)CFWriteStreamWrite(w, (const UInt8 *)"12345", 5),
          (long)CFWriteStreamGetStatus(w), (const char *)buf);
    CFRelease(w);

    trace("-- no room at all");
    w = CFWriteStreamCreateWithBuffer(NULL, buf, 0);
    CFWriteStreamSetClient(w, all, on_write, &ctx);
    CFWriteStreamScheduleWithRunLoop(w, rl, kCFRunLoopDefaultMode);
    trace("open: %d", CFWriteStreamOpen(w));
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    trace("status %ld, can accept %d, wrote %ld", (long)CFWriteStreamGetStatus(w), CFWriteStreamCanAcceptBytes(w),
          (long)CFWriteStreamWrite(w, (const UInt8 *)"x", 1));
    CFWriteStreamUnscheduleFromRunLoop(w, rl, kCFRunLoopDefaultMode);
    CFRelease(w);

    trace("-- file URLs");
    CFURLRef u = CFURLCreateWithFileSystemPath(NULL, CFSTR("/tmp/no/such/dir/"), kCFURLPOSIXPathStyle, true);
    UInt8 path[256];
    trace("representation: %d '%s'", CFURLGetFileSystemRepresentation(u, true, path, sizeof path), (const char *)path);
    CFStringRef s = CFURLCopyFileSystemPath(u, kCFURLPOSIXPathStyle);
    char sb[256] = "";
    CFStringGetCString(s, sb, sizeof sb, kCFStringEncodingUTF8);
    trace("path: '%s', directory %d, url type %d", sb, CFURLHasDirectoryPath(u), CFGetTypeID(u) == CFURLGetTypeID());
    CFRelease(s);
    CFRelease(u);
    const char *file = "/tmp/no/such/dir/file";
    u = CFURLCreateFromFileSystemRepresentation(NULL, (const UInt8 *)file, (CFIndex)strlen(file), false);
    trace("too small a buffer: %d", CFURLGetFileSystemRepresentation(u, true, path, 5));
    r = CFReadStreamCreateWithFile(NULL, u);
    CFRelease(u);
    trace("open: %d, status %ld", CFReadStreamOpen(r), (long)CFReadStreamGetStatus(r));
    e = copy_error_quietly(r, NULL);
    trace("copy error: %s", error_str(e));
    if (e)
        CFRelease(e);
    CFRelease(r);
}
