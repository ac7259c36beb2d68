/* test_stream_property.c — stream properties (CFReadStreamCopyProperty
 * and friends): appending to a file, the file offset of read and write
 * streams, the bytes of a memory stream, a socket stream's native socket
 * and whether it is closed, and every misuse. */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh temporary file holding `text` (NULL: no file at that path). */
static void temp_file(char path[32], const char *text) {
    strcpy(path, "/tmp/rl_prop_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    if (text)
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(close(fd), 0);
    if (!text)
        assert_int_equal(unlink(path), 0);
}

/* The file's bytes, NUL bytes shown as '0'. */
static const char *file_text(const char *path) {
    static char buf[256];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == 0)
            buf[i] = '0';
    buf[n] = 0;
    return buf;
}

static RLNumberRef num(int64_t v) {
    RLNumberRef n = RLNumberCreate(NULL, kRLNumberSInt64Type, &v);
    assert_non_null(n);
    return n;
}

/* The offset a Copy returns; fails the test if it returns none. */
static int64_t read_offset(RLReadStreamRef r) {
    RLTypeRef v = RLReadStreamCopyProperty(r, kRLStreamPropertyFileCurrentOffset);
    assert_non_null(v);
    assert_string_equal(RLGetTypeName(v), "RLNumber");
    int64_t x = -1;
    assert_true(RLNumberGetValue(v, kRLNumberSInt64Type, &x));
    RLRelease(v);
    return x;
}

static int64_t write_offset(RLWriteStreamRef w) {
    RLTypeRef v = RLWriteStreamCopyProperty(w, kRLStreamPropertyFileCurrentOffset);
    assert_non_null(v);
    int64_t x = -1;
    assert_true(RLNumberGetValue(v, kRLNumberSInt64Type, &x));
    RLRelease(v);
    return x;
}

static bool set_w(RLWriteStreamRef w, RLStreamPropertyKey key, RLTypeRef value) {
    return RLWriteStreamSetProperty(w, key, value);
}

static void write_text(RLWriteStreamRef w, const char *text) {
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)text, (RLIndex)strlen(text)), (RLIndex)strlen(text));
}

/* ---- appending ---- */

static void test_append_keeps_existing_bytes(void **state) {
    (void)state;
    char path[32];
    temp_file(path, "hello");
    RLWriteStreamRef w = RLWriteStreamCreateWithFilePath(NULL, path);
    RLTypeRef v = RLWriteStreamCopyProperty(w, kRLStreamPropertyAppendToFile);
    assert_ptr_equal(v, kRLBooleanFalse); /* the default: truncate */
    RLRelease(v);
    assert_true(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue));
    v = RLWriteStreamCopyProperty(w, kRLStreamPropertyAppendToFile);
    assert_ptr_equal(v, kRLBooleanTrue);
    assert_true(RLRelease(v));
    assert_true(RLWriteStreamOpen(w));
    write_text(w, " world");
    assert_true(RLWriteStreamClose(w));
    RLRelease(w);
    assert_string_equal(file_text(path), "hello world");

    /* A second appending stream, while another writer grows the file:
     * every write lands at the end (O_APPEND). */
    w = RLWriteStreamCreateWithFilePath(NULL, path);
    assert_true(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue));
    assert_true(RLWriteStreamOpen(w));
    int other = open(path, O_WRONLY | O_APPEND);
    assert_true(other >= 0);
    assert_int_equal(write(other, "!", 1), 1);
    write_text(w, "?");
    close(other);
    RLRelease(w); /* releasing an open stream closes it */
    assert_string_equal(file_text(path), "hello world!?");
    unlink(path);
}

static void test_append_creates_a_missing_file(void **state) {
    (void)state;
    char path[32];
    temp_file(path, NULL);
    RLWriteStreamRef w = RLWriteStreamCreateWithFilePath(NULL, path);
    assert_true(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue));
    assert_true(RLWriteStreamOpen(w));
    write_text(w, "abc");
    RLRelease(w);
    assert_string_equal(file_text(path), "abc");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    mode_t mask = umask(0);
    umask(mask);
    assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
    unlink(path);
}

static void test_append_false_truncates(void **state) {
    (void)state;
    char path[32];
    temp_file(path, "hello");
    RLWriteStreamRef w = RLWriteStreamCreateWithFilePath(NULL, path);
    assert_true(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue));
    assert_true(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanFalse));
    RLTypeRef v = RLWriteStreamCopyProperty(w, kRLStreamPropertyAppendToFile);
    assert_ptr_equal(v, kRLBooleanFalse);
    RLRelease(v);
    assert_true(RLWriteStreamOpen(w));
    write_text(w, "X");
    RLRelease(w);
    assert_string_equal(file_text(path), "X");
    unlink(path);
}

/* ---- offsets ---- */

static void test_read_offset_before_and_after_open(void **state) {
    (void)state;
    char path[32];
    temp_file(path, "hello world");
    RLReadStreamRef r = RLReadStreamCreateWithFilePath(NULL, path);
    /* Nothing set and not open: no offset (CF returns NULL). */
    assert_null(RLReadStreamCopyProperty(r, kRLStreamPropertyFileCurrentOffset));
    assert_rl_error(kRLErrorInvalidState);
    RLNumberRef six = num(6);
    assert_true(RLReadStreamSetProperty(r, kRLStreamPropertyFileCurrentOffset, six));
    RLRelease(six);
    assert_int_equal(read_offset(r), 6);
    assert_true(RLReadStreamOpen(r));
    assert_int_equal(read_offset(r), 6);
    uint8_t buf[16];
    assert_int_equal(RLReadStreamRead(r, buf, 3), 3);
    assert_memory_equal(buf, "wor", 3);
    assert_int_equal(read_offset(r), 9);
    /* Setting an open stream's offset seeks. */
    RLNumberRef zero = num(0);
    assert_true(RLReadStreamSetProperty(r, kRLStreamPropertyFileCurrentOffset, zero));
    RLRelease(zero);
    assert_int_equal(RLReadStreamRead(r, buf, 5), 5);
    assert_memory_equal(buf, "hello", 5);
    assert_true(RLReadStreamClose(r));
    /* A closed stream reports where it stopped. */
    assert_int_equal(read_offset(r), 5);
    RLRelease(r);

    /* Beyond the end: the first read finds the end. */
    r = RLReadStreamCreateWithFilePath(NULL, path);
    RLNumberRef far = num(99);
    assert_true(RLReadStreamSetProperty(r, kRLStreamPropertyFileCurrentOffset, far));
    RLRelease(far);
    assert_true(RLReadStreamOpen(r));
    assert_int_equal(RLReadStreamRead(r, buf, 5), 0);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    RLRelease(r);
    unlink(path);
}

static void test_write_offset(void **state) {
    (void)state;
    char path[32];
    temp_file(path, "hello");
    RLWriteStreamRef w = RLWriteStreamCreateWithFilePath(NULL, path);
    RLNumberRef two = num(2);
    assert_true(set_w(w, kRLStreamPropertyFileCurrentOffset, two));
    RLRelease(two);
    assert_int_equal(write_offset(w), 2);
    assert_true(RLWriteStreamOpen(w));
    assert_int_equal(write_offset(w), 2);
    write_text(w, "XY");
    assert_int_equal(write_offset(w), 4);
    RLNumberRef one = num(1);
    assert_true(set_w(w, kRLStreamPropertyFileCurrentOffset, one));
    RLRelease(one);
    assert_int_equal(write_offset(w), 1);
    write_text(w, "Z");
    RLRelease(w);
    /* CF's rule: a write stream truncates, then starts at the offset. */
    assert_string_equal(file_text(path), "0ZXY");
    unlink(path);
}

static void test_append_and_offset(void **state) {
    (void)state;
    char path[32];
    temp_file(path, "hello");
    RLNumberRef two = num(2);
    /* Appending first: an offset means nothing and is refused. */
    RLWriteStreamRef w = RLWriteStreamCreateWithFilePath(NULL, path);
    assert_true(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue));
    assert_rl_fails(set_w(w, kRLStreamPropertyFileCurrentOffset, two), kRLErrorInvalidState);
    assert_null(RLWriteStreamCopyProperty(w, kRLStreamPropertyFileCurrentOffset));
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLWriteStreamOpen(w));
    assert_null(RLWriteStreamCopyProperty(w, kRLStreamPropertyFileCurrentOffset));
    assert_rl_error(kRLErrorInvalidState);
    write_text(w, "X");
    RLRelease(w);
    assert_string_equal(file_text(path), "helloX");
    /* Offset first: appending wins and drops it (CF). */
    w = RLWriteStreamCreateWithFilePath(NULL, path);
    assert_true(set_w(w, kRLStreamPropertyFileCurrentOffset, two));
    assert_true(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue));
    assert_true(RLWriteStreamOpen(w));
    write_text(w, "Y");
    RLRelease(w);
    assert_string_equal(file_text(path), "helloXY");
    RLRelease(two);
    unlink(path);
}

/* Another thread reads the offset while this one reads the file and
 * closes it: every answer is a position the reader passed, in order. */
static atomic_int offset_reader_stop;
static void *offset_reader(void *arg) {
    RLReadStreamRef r = arg;
    int64_t last = 0;
    while (!atomic_load(&offset_reader_stop)) {
        RLTypeRef v = RLReadStreamCopyProperty(r, kRLStreamPropertyFileCurrentOffset);
        if (!v)
            continue; /* not open yet */
        int64_t x = -1;
        assert_true(RLNumberGetValue(v, kRLNumberSInt64Type, &x));
        RLRelease(v);
        assert_true(x >= last && x <= 4096);
        last = x;
    }
    return NULL;
}

static void test_offset_read_from_another_thread(void **state) {
    (void)state;
    char path[32];
    static char text[4097];
    memset(text, 'a', 4096);
    temp_file(path, text);
    RLReadStreamRef r = RLReadStreamCreateWithFilePath(NULL, path);
    atomic_store(&offset_reader_stop, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, offset_reader, (void *)r), 0);
    assert_true(RLReadStreamOpen(r));
    uint8_t buf[7];
    RLIndex n, total = 0;
    while ((n = RLReadStreamRead(r, buf, sizeof buf)) > 0)
        total += n;
    assert_int_equal(total, 4096);
    assert_true(RLReadStreamClose(r));
    atomic_store(&offset_reader_stop, 1);
    pthread_join(t, NULL);
    assert_int_equal(read_offset(r), 4096);
    RLRelease(r);
    unlink(path);
}

/* ---- memory streams ---- */

static void test_data_written_is_a_property(void **state) {
    (void)state;
    RLWriteStreamRef w = RLWriteStreamCreateWithAllocatedBuffers(NULL, NULL);
    RLTypeRef d = RLWriteStreamCopyProperty(w, kRLStreamPropertyDataWritten);
    assert_non_null(d); /* before open too, as CF */
    assert_int_equal(RLDataGetLength(d), 0);
    RLRelease(d);
    assert_true(RLWriteStreamOpen(w));
    write_text(w, "abc");
    d = RLWriteStreamCopyProperty(w, kRLStreamPropertyDataWritten);
    assert_string_equal(RLGetTypeName(d), "RLData");
    RLDataRef old = RLWriteStreamCopyDataWritten(w);
    assert_true(RLDataEqual(d, old));
    assert_memory_equal(RLDataGetBytePtr(d), "abc", 3);
    RLRelease(old);
    RLRelease(d);
    assert_true(RLWriteStreamClose(w));
    d = RLWriteStreamCopyProperty(w, kRLStreamPropertyDataWritten);
    assert_int_equal(RLDataGetLength(d), 3);
    RLRelease(d);
    RLRelease(w);
}

/* ---- sockets ---- */

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

static int native_of(RLTypeRef v) {
    assert_non_null(v);
    assert_string_equal(RLGetTypeName(v), "RLData");
    assert_int_equal(RLDataGetLength(v), sizeof(int));
    int fd;
    memcpy(&fd, RLDataGetBytePtr(v), sizeof fd);
    RLRelease(v);
    return fd;
}

static void test_socket_native_handle_and_close(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreatePairWithSocket(NULL, sv[0], &r, &w));
    assert_int_equal(native_of(RLReadStreamCopyProperty(r, kRLStreamPropertySocketNativeHandle)), sv[0]);
    assert_int_equal(native_of(RLWriteStreamCopyProperty(w, kRLStreamPropertySocketNativeHandle)), sv[0]);
    RLTypeRef v = RLReadStreamCopyProperty(r, kRLStreamPropertyShouldCloseNativeSocket);
    assert_ptr_equal(v, kRLBooleanFalse);
    RLRelease(v);
    RLRelease(r);
    RLRelease(w);
    assert_true(fd_open(sv[0])); /* the caller's socket: not closed */

    /* Set on one stream, it holds for the pair: the socket goes with both. */
    assert_true(RLStreamCreatePairWithSocket(NULL, sv[0], &r, &w));
    assert_true(RLReadStreamSetProperty(r, kRLStreamPropertyShouldCloseNativeSocket, kRLBooleanTrue));
    v = RLWriteStreamCopyProperty(w, kRLStreamPropertyShouldCloseNativeSocket);
    assert_ptr_equal(v, kRLBooleanTrue);
    RLRelease(v);
    assert_true(RLReadStreamOpen(r));
    RLRelease(r);
    assert_true(fd_open(sv[0]));
    RLRelease(w);
    assert_false(fd_open(sv[0]));
    close(sv[1]);
}

static void test_socket_to_host_handle_once_connected(void **state) {
    (void)state;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    RLReadStreamRef r;
    RLWriteStreamRef w;
    assert_true(RLStreamCreatePairWithSocketToHost(NULL, "127.0.0.1", ntohs(a.sin_port), &r, &w));
    assert_null(RLReadStreamCopyProperty(r, kRLStreamPropertySocketNativeHandle));
    assert_rl_error(kRLErrorInvalidState); /* no socket before it connects */
    RLTypeRef v = RLWriteStreamCopyProperty(w, kRLStreamPropertyShouldCloseNativeSocket);
    assert_ptr_equal(v, kRLBooleanTrue);
    RLRelease(v);
    assert_true(RLWriteStreamOpen(w));
    double end = rl_test_now() + 10;
    while (RLWriteStreamGetStatus(w) == kRLStreamStatusOpening && rl_test_now() < end)
        usleep(1000);
    assert_int_equal(RLWriteStreamGetStatus(w), kRLStreamStatusOpen);
    int fd = native_of(RLWriteStreamCopyProperty(w, kRLStreamPropertySocketNativeHandle));
    int type = 0;
    socklen_t tl = sizeof type;
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl), 0);
    assert_int_equal(type, SOCK_STREAM);
    /* Keep the socket past the streams. */
    assert_true(RLWriteStreamSetProperty(w, kRLStreamPropertyShouldCloseNativeSocket, kRLBooleanFalse));
    RLRelease(r);
    RLRelease(w);
    assert_true(fd_open(fd));
    close(fd);
    close(l);
}

/* ---- misuse ---- */

static void test_misuse(void **state) {
    (void)state;
    char path[32];
    temp_file(path, "hello");
    RLNumberRef two = num(2), minus = num(-1);
    int one = 1;
    RLNumberRef int_one = RLNumberCreate(NULL, kRLNumberIntType, &one);
    RLDataRef data = RLDataCreate(NULL, (const uint8_t *)"x", 1);
    RLReadStreamRef r = RLReadStreamCreateWithFilePath(NULL, path);
    RLWriteStreamRef w = RLWriteStreamCreateWithFilePath(NULL, path);

    /* NULL or wrong objects */
    assert_rl_fails(RLReadStreamCopyProperty(NULL, kRLStreamPropertyFileCurrentOffset), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamCopyProperty(NULL, kRLStreamPropertyFileCurrentOffset), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamSetProperty(NULL, kRLStreamPropertyFileCurrentOffset, two), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamSetProperty(NULL, kRLStreamPropertyAppendToFile, kRLBooleanTrue),
                    kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamCopyProperty((RLReadStreamRef)w, kRLStreamPropertyFileCurrentOffset),
                    kRLErrorInvalidObject);
    assert_rl_fails(RLWriteStreamSetProperty((RLWriteStreamRef)data, kRLStreamPropertyAppendToFile, kRLBooleanTrue),
                    kRLErrorInvalidObject);
    assert_rl_fails(RLWriteStreamCopyProperty(w, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamSetProperty(w, NULL, kRLBooleanTrue), kRLErrorInvalidArgument);

    /* unknown names */
    assert_rl_fails(RLWriteStreamCopyProperty(w, "kRLStreamPropertyNope"), kRLErrorNotFound);
    assert_rl_fails(RLReadStreamSetProperty(r, "kCFStreamPropertyAppendToFile", kRLBooleanTrue), kRLErrorNotFound);
    assert_rl_fails(RLReadStreamSetProperty(r, "", kRLBooleanTrue), kRLErrorNotFound);

    /* names compare by content */
    char copy[64];
    strcpy(copy, kRLStreamPropertyAppendToFile);
    assert_true(RLWriteStreamSetProperty(w, copy, kRLBooleanFalse));

    /* wrong or missing values: nothing changes */
    assert_rl_fails(set_w(w, kRLStreamPropertyAppendToFile, int_one), kRLErrorInvalidArgument);
    assert_rl_fails(set_w(w, kRLStreamPropertyAppendToFile, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(set_w(w, kRLStreamPropertyAppendToFile, "yes"), kRLErrorInvalidArgument);
    assert_rl_fails(set_w(w, kRLStreamPropertyFileCurrentOffset, kRLBooleanTrue), kRLErrorInvalidArgument);
    assert_rl_fails(set_w(w, kRLStreamPropertyFileCurrentOffset, data), kRLErrorInvalidArgument);
    assert_rl_fails(set_w(w, kRLStreamPropertyFileCurrentOffset, minus), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamSetProperty(r, kRLStreamPropertyFileCurrentOffset, minus), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamSetProperty(r, kRLStreamPropertyFileCurrentOffset, NULL), kRLErrorInvalidArgument);
    RLTypeRef v = RLWriteStreamCopyProperty(w, kRLStreamPropertyAppendToFile);
    assert_ptr_equal(v, kRLBooleanFalse);
    RLRelease(v);
    assert_null(RLReadStreamCopyProperty(r, kRLStreamPropertyFileCurrentOffset));
    assert_rl_error(kRLErrorInvalidState);

    /* properties of another kind of stream */
    assert_rl_fails(RLReadStreamSetProperty(r, kRLStreamPropertyAppendToFile, kRLBooleanTrue), kRLErrorNotFound);
    assert_rl_fails(RLReadStreamCopyProperty(r, kRLStreamPropertyAppendToFile), kRLErrorNotFound);
    assert_rl_fails(RLWriteStreamCopyProperty(w, kRLStreamPropertyDataWritten), kRLErrorNotFound);
    assert_rl_fails(RLReadStreamCopyProperty(r, kRLStreamPropertySocketNativeHandle), kRLErrorNotFound);
    assert_rl_fails(set_w(w, kRLStreamPropertyShouldCloseNativeSocket, kRLBooleanTrue), kRLErrorNotFound);
    RLWriteStreamRef mw = RLWriteStreamCreateWithAllocatedBuffers(NULL, NULL);
    assert_rl_fails(set_w(mw, kRLStreamPropertyAppendToFile, kRLBooleanTrue), kRLErrorNotFound);
    assert_rl_fails(RLWriteStreamCopyProperty(mw, kRLStreamPropertyFileCurrentOffset), kRLErrorNotFound);
    assert_rl_fails(set_w(mw, kRLStreamPropertyDataWritten, data), kRLErrorInvalidArgument); /* read-only */
    RLReadStreamRef mr = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"abc", 3);
    assert_rl_fails(RLReadStreamSetProperty(mr, kRLStreamPropertyFileCurrentOffset, two), kRLErrorNotFound);
    assert_rl_fails(RLReadStreamCopyProperty(mr, kRLStreamPropertyDataWritten), kRLErrorNotFound);
    RLReadStreamRef br;
    RLWriteStreamRef bw;
    assert_true(RLStreamCreateBoundPair(NULL, &br, &bw, 16));
    assert_rl_fails(RLReadStreamCopyProperty(br, kRLStreamPropertyFileCurrentOffset), kRLErrorNotFound);
    assert_rl_fails(RLWriteStreamCopyProperty(bw, kRLStreamPropertySocketNativeHandle), kRLErrorNotFound);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLReadStreamRef sr;
    RLWriteStreamRef sw;
    assert_true(RLStreamCreatePairWithSocket(NULL, sv[0], &sr, &sw));
    assert_rl_fails(RLReadStreamSetProperty(sr, kRLStreamPropertySocketNativeHandle, data), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamSetProperty(sr, kRLStreamPropertyShouldCloseNativeSocket, two),
                    kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamCopyProperty(sw, kRLStreamPropertyAppendToFile), kRLErrorNotFound);
    v = RLReadStreamCopyProperty(sr, kRLStreamPropertyShouldCloseNativeSocket);
    assert_ptr_equal(v, kRLBooleanFalse); /* the failed set changed nothing */
    RLRelease(v);

    /* state: append only before Open; nothing once closed */
    assert_true(RLWriteStreamOpen(w));
    assert_rl_fails(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue), kRLErrorInvalidState);
    assert_true(RLWriteStreamClose(w));
    assert_rl_fails(set_w(w, kRLStreamPropertyAppendToFile, kRLBooleanTrue), kRLErrorInvalidState);
    assert_rl_fails(set_w(w, kRLStreamPropertyFileCurrentOffset, two), kRLErrorInvalidState);
    v = RLWriteStreamCopyProperty(w, kRLStreamPropertyAppendToFile);
    assert_ptr_equal(v, kRLBooleanFalse);
    RLRelease(v);

    RLRelease(sr);
    RLRelease(sw);
    close(sv[0]);
    close(sv[1]);
    RLRelease(br);
    RLRelease(bw);
    RLRelease(mr);
    RLRelease(mw);
    RLRelease(r);
    RLRelease(w);
    RLRelease(data);
    RLRelease(int_one);
    RLRelease(minus);
    RLRelease(two);
    unlink(path);
}

/* A seek that the file cannot do fails the Open (a FIFO has no offset). */
static void test_offset_on_a_file_that_cannot_seek(void **state) {
    (void)state;
    char path[32];
    temp_file(path, NULL);
    assert_int_equal(mkfifo(path, 0600), 0);
    int keep = open(path, O_RDWR); /* a writer, so that opening for reading does not block */
    assert_true(keep >= 0);
    RLReadStreamRef r = RLReadStreamCreateWithFilePath(NULL, path);
    RLNumberRef two = num(2);
    assert_true(RLReadStreamSetProperty(r, kRLStreamPropertyFileCurrentOffset, two));
    assert_false(RLReadStreamOpen(r));
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusError);
    assert_int_equal(RLReadStreamGetError(r).error, ESPIPE);
    RLRelease(r);
    /* Opened without an offset: reading it, or seeking, fails cleanly. */
    r = RLReadStreamCreateWithFilePath(NULL, path);
    assert_true(RLReadStreamOpen(r));
    assert_null(RLReadStreamCopyProperty(r, kRLStreamPropertyFileCurrentOffset));
    assert_rl_error(kRLErrorSystem);
    assert_rl_fails(RLReadStreamSetProperty(r, kRLStreamPropertyFileCurrentOffset, two), kRLErrorSystem);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusOpen);
    RLRelease(r);
    RLRelease(two);
    close(keep);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_keeps_existing_bytes),
        cmocka_unit_test(test_append_creates_a_missing_file),
        cmocka_unit_test(test_append_false_truncates),
        cmocka_unit_test(test_read_offset_before_and_after_open),
        cmocka_unit_test(test_write_offset),
        cmocka_unit_test(test_append_and_offset),
        cmocka_unit_test(test_offset_read_from_another_thread),
        cmocka_unit_test(test_data_written_is_a_property),
        cmocka_unit_test(test_socket_native_handle_and_close),
        cmocka_unit_test(test_socket_to_host_handle_once_connected),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_offset_on_a_file_that_cannot_seek),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
