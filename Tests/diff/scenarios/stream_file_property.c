/* File and memory stream properties: appending keeps a file's bytes (and
 * creates a missing file), false truncates; the file offset of read and
 * write streams before Open, after Open, after reads and writes, set on an
 * open stream (a seek) and after Close; appending and an offset together;
 * which settings each stream refuses. CF's answers are the oracle, except
 * where RLStream.h documents a deliberate difference (reading
 * kCFStreamPropertyAppendToFile back, values of the wrong type, the offset
 * of a closed stream), which is not traced here. */
#include "diff.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static const char *path_of(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void put(const char *name, const char *text) {
    FILE *f = fopen(path_of(name), "w");
    fputs(text, f);
    fclose(f);
}

/* The file's bytes, NUL bytes as '0'. */
static const char *contents(const char *name) {
    static char b[128];
    FILE *f = fopen(path_of(name), "rb");
    if (!f)
        return "(missing)";
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (!b[i])
            b[i] = '0';
    b[n] = 0;
    return b;
}

static CFWriteStreamRef writer(const char *name) {
    const char *p = path_of(name);
    CFURLRef u = CFURLCreateFromFileSystemRepresentation(NULL, (const UInt8 *)p, (CFIndex)strlen(p), false);
    CFWriteStreamRef w = CFWriteStreamCreateWithFile(NULL, u);
    CFRelease(u);
    return w;
}

static CFReadStreamRef reader(const char *name) {
    const char *p = path_of(name);
    CFURLRef u = CFURLCreateFromFileSystemRepresentation(NULL, (const UInt8 *)p, (CFIndex)strlen(p), false);
    CFReadStreamRef r = CFReadStreamCreateWithFile(NULL, u);
    CFRelease(u);
    return r;
}

/* An offset as text: "none" when the copy returns NULL. */
static const char *offset_str(CFTypeRef v) {
    static char b[32];
    if (!v)
        return "none";
    SInt64 x = -1;
    CFNumberGetValue((CFNumberRef)v, kCFNumberSInt64Type, &x);
    CFRelease(v);
    snprintf(b, sizeof b, "%lld", (long long)x);
    return b;
}

static const char *woff(CFWriteStreamRef w) {
    return offset_str(CFWriteStreamCopyProperty(w, kCFStreamPropertyFileCurrentOffset));
}

static const char *roff(CFReadStreamRef r) {
    return offset_str(CFReadStreamCopyProperty(r, kCFStreamPropertyFileCurrentOffset));
}

static CFNumberRef num(SInt64 v) { return CFNumberCreate(NULL, kCFNumberSInt64Type, &v); }

static void write_str(CFWriteStreamRef w, const char *s) {
    trace("write \"%s\": %ld", s, (long)CFWriteStreamWrite(w, (const UInt8 *)s, (CFIndex)strlen(s)));
}

void scenario(void) {
    strcpy(dir, "/tmp/rl_diff_prop_XXXXXX");
    if (!mkdtemp(dir)) {
        trace("mkdtemp failed");
        return;
    }
    CFNumberRef two = num(2), zero = num(0), six = num(6), far = num(99);

    trace("-- append");
    put("f", "hello");
    CFWriteStreamRef w = writer("f");
    trace("set append: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyAppendToFile, kCFBooleanTrue));
    trace("offset of an appending stream: %s", woff(w));
    trace("open: %d", CFWriteStreamOpen(w));
    trace("offset of an appending stream, open: %s", woff(w));
    write_str(w, " world");
    trace("set append after open: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyAppendToFile, kCFBooleanFalse));
    CFWriteStreamClose(w);
    trace("set append after close: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyAppendToFile, kCFBooleanFalse));
    CFRelease(w);
    trace("file: %s", contents("f"));

    w = writer("missing");
    trace("append to a missing file: set %d", CFWriteStreamSetProperty(w, kCFStreamPropertyAppendToFile, kCFBooleanTrue));
    trace("open: %d", CFWriteStreamOpen(w));
    write_str(w, "abc");
    CFWriteStreamClose(w);
    CFRelease(w);
    trace("file: %s", contents("missing"));

    w = writer("f");
    trace("set append false: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyAppendToFile, kCFBooleanFalse));
    CFWriteStreamOpen(w);
    write_str(w, "X");
    CFWriteStreamClose(w);
    CFRelease(w);
    trace("file: %s", contents("f"));

    trace("-- write offset");
    put("f", "hello");
    w = writer("f");
    trace("offset before open: %s", woff(w));
    trace("set offset 2: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyFileCurrentOffset, two));
    trace("offset before open: %s", woff(w));
    trace("open: %d", CFWriteStreamOpen(w));
    trace("offset after open: %s", woff(w));
    write_str(w, "XY");
    trace("offset after write: %s", woff(w));
    trace("set offset 0 while open: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyFileCurrentOffset, zero));
    trace("offset: %s", woff(w));
    write_str(w, "Z");
    /* CF's offset after Close is the last one a copy or set saw while the
     * stream was open (ours is where the stream stopped): copy it first. */
    trace("offset before close: %s", woff(w));
    CFWriteStreamClose(w);
    trace("offset after close: %s", woff(w));
    CFRelease(w);
    trace("file: %s", contents("f"));

    trace("-- append and offset");
    put("f", "hello");
    w = writer("f");
    trace("set append: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyAppendToFile, kCFBooleanTrue));
    trace("then offset: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyFileCurrentOffset, two));
    CFWriteStreamOpen(w);
    write_str(w, "X");
    CFWriteStreamClose(w);
    CFRelease(w);
    trace("file: %s", contents("f"));
    w = writer("f");
    trace("set offset: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyFileCurrentOffset, two));
    trace("then append: %d", CFWriteStreamSetProperty(w, kCFStreamPropertyAppendToFile, kCFBooleanTrue));
    trace("offset: %s", woff(w));
    CFWriteStreamOpen(w);
    write_str(w, "Y");
    CFWriteStreamClose(w);
    CFRelease(w);
    trace("file: %s", contents("f"));

    trace("-- read offset");
    put("f", "hello world");
    CFReadStreamRef r = reader("f");
    trace("offset before open: %s", roff(r));
    trace("set offset 6: %d", CFReadStreamSetProperty(r, kCFStreamPropertyFileCurrentOffset, six));
    trace("offset: %s", roff(r));
    trace("set append on a read stream: %d",
          CFReadStreamSetProperty(r, kCFStreamPropertyAppendToFile, kCFBooleanTrue));
    trace("open: %d", CFReadStreamOpen(r));
    trace("offset after open: %s", roff(r));
    UInt8 buf[16];
    CFIndex n = CFReadStreamRead(r, buf, 3);
    trace("read %ld: %.*s", (long)n, (int)(n > 0 ? n : 0), buf);
    trace("offset after read: %s", roff(r));
    trace("set offset 0 while open: %d", CFReadStreamSetProperty(r, kCFStreamPropertyFileCurrentOffset, zero));
    n = CFReadStreamRead(r, buf, 5);
    trace("read %ld: %.*s", (long)n, (int)(n > 0 ? n : 0), buf);
    trace("offset before close: %s", roff(r));
    CFReadStreamClose(r);
    trace("offset after close: %s", roff(r));
    CFRelease(r);

    r = reader("f");
    trace("set offset 99: %d", CFReadStreamSetProperty(r, kCFStreamPropertyFileCurrentOffset, far));
    trace("open: %d", CFReadStreamOpen(r));
    n = CFReadStreamRead(r, buf, 5);
    trace("read past the end: %ld, status %ld", (long)n, (long)CFReadStreamGetStatus(r));
    CFRelease(r);

    trace("-- memory streams");
    CFWriteStreamRef m = CFWriteStreamCreateWithAllocatedBuffers(NULL, NULL);
    CFTypeRef d = CFWriteStreamCopyProperty(m, kCFStreamPropertyDataWritten);
    trace("data before open: %ld bytes", d ? (long)CFDataGetLength((CFDataRef)d) : -1L);
    if (d)
        CFRelease(d);
    CFWriteStreamOpen(m);
    write_str(m, "abc");
    d = CFWriteStreamCopyProperty(m, kCFStreamPropertyDataWritten);
    trace("data: %ld bytes: %.*s", d ? (long)CFDataGetLength((CFDataRef)d) : -1L,
          d ? (int)CFDataGetLength((CFDataRef)d) : 0, d ? (const char *)CFDataGetBytePtr((CFDataRef)d) : "");
    trace("set data written: %d", CFWriteStreamSetProperty(m, kCFStreamPropertyDataWritten, d));
    if (d)
        CFRelease(d);
    trace("offset of a memory stream: %s", woff(m));
    trace("set append on a memory stream: %d",
          CFWriteStreamSetProperty(m, kCFStreamPropertyAppendToFile, kCFBooleanTrue));
    CFWriteStreamClose(m);
    d = CFWriteStreamCopyProperty(m, kCFStreamPropertyDataWritten);
    trace("data after close: %ld bytes", d ? (long)CFDataGetLength((CFDataRef)d) : -1L);
    if (d)
        CFRelease(d);
    CFRelease(m);
    w = writer("f");
    trace("data written of a file stream: %s", CFWriteStreamCopyProperty(w, kCFStreamPropertyDataWritten) ? "some" : "none");
    CFRelease(w);

    CFRelease(two);
    CFRelease(zero);
    CFRelease(six);
    CFRelease(far);
    unlink(path_of("f"));
    unlink(path_of("missing"));
    rmdir(dir);
}
