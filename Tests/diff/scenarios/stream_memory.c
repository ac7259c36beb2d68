/* Memory streams scheduled in the default mode (the toolchain's CF has no
 * bound pair): the order of open, bytes-available, can-accept and end
 * events, a client that reads 3 bytes per event, and the statuses at each
 * step. */
#include "diff.h"

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

static int read_on_event = 1;

static void on_read(CFReadStreamRef s, CFStreamEventType t, void *info) {
    (void)info;
    trace("read: %s (status %ld)", name(t), (long)CFReadStreamGetStatus(s));
    if (t == kCFStreamEventHasBytesAvailable && read_on_event) {
        UInt8 buf[3];
        CFIndex n = CFReadStreamRead(s, buf, sizeof buf);
        trace("read: got %ld bytes, more: %d", (long)n, CFReadStreamHasBytesAvailable(s));
    }
}

static void on_write(CFWriteStreamRef s, CFStreamEventType t, void *info) {
    (void)info;
    trace("write: %s (status %ld)", name(t), (long)CFWriteStreamGetStatus(s));
}

void scenario(void) {
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFReadStreamRef r = NULL;
    CFWriteStreamRef w = NULL;
    r = CFReadStreamCreateWithBytesNoCopy(NULL, (const UInt8 *)"abcdefgh", 8, kCFAllocatorNull);
    w = CFWriteStreamCreateWithAllocatedBuffers(NULL, NULL);
    trace("created: read %d write %d, status %ld %ld", r != NULL, w != NULL, (long)CFReadStreamGetStatus(r),
          (long)CFWriteStreamGetStatus(w));
    CFStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    CFOptionFlags all = kCFStreamEventOpenCompleted | kCFStreamEventHasBytesAvailable |
                        kCFStreamEventCanAcceptBytes | kCFStreamEventErrorOccurred | kCFStreamEventEndEncountered;
    trace("set client: %d %d", CFReadStreamSetClient(r, all, on_read, &ctx),
          CFWriteStreamSetClient(w, all, on_write, &ctx));
    CFReadStreamScheduleWithRunLoop(r, rl, kCFRunLoopDefaultMode);
    CFWriteStreamScheduleWithRunLoop(w, rl, kCFRunLoopDefaultMode);
    trace("open: %d %d", CFReadStreamOpen(r), CFWriteStreamOpen(w));
    trace("status after open: %ld %ld", (long)CFReadStreamGetStatus(r), (long)CFWriteStreamGetStatus(w));
    run_mode("run after open", kCFRunLoopDefaultMode, 0.1, false);
    run_mode("run again", kCFRunLoopDefaultMode, 0.1, false);

    trace("-- write and close");
    trace("can accept: %d", CFWriteStreamCanAcceptBytes(w));
    CFIndex n = CFWriteStreamWrite(w, (const UInt8 *)"abcdef", 6);
    trace("wrote %ld, can accept: %d", (long)n, CFWriteStreamCanAcceptBytes(w));
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    run_mode("run", kCFRunLoopDefaultMode, 0.1, false);
    trace("read status: %ld", (long)CFReadStreamGetStatus(r));
    UInt8 buf[4];
    trace("read at end: %ld", (long)CFReadStreamRead(r, buf, sizeof buf));
    CFReadStreamClose(r);
    CFWriteStreamClose(w);
    trace("status after close: %ld %ld", (long)CFReadStreamGetStatus(r), (long)CFWriteStreamGetStatus(w));
    trace("read after close: %ld", (long)CFReadStreamRead(r, buf, sizeof buf));
    trace("write after close: %ld", (long)CFWriteStreamWrite(w, buf, 1));
    CFRelease(r);
    CFRelease(w);
}
