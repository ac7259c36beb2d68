/* test_stream_memory.c — memory streams over the caller's bytes
 * (RLReadStreamCreateWithBytesNoCopy), into the caller's buffer
 * (RLWriteStreamCreateWithBuffer), and lending bytes in place
 * (RLReadStreamGetBuffer), with CF's statuses and events. */
#include "testutil.h"
#include "stale.h"
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MODE "MemoryStreamTest"
#define ALL_EVENTS                                                                                     \
    (kRLStreamEventOpenCompleted | kRLStreamEventHasBytesAvailable | kRLStreamEventCanAcceptBytes |   \
     kRLStreamEventErrorOccurred | kRLStreamEventEndEncountered)

static const char *ev_name(RLStreamEventType t) {
    switch (t) {
    case kRLStreamEventOpenCompleted: return "open";
    case kRLStreamEventHasBytesAvailable: return "bytes";
    case kRLStreamEventCanAcceptBytes: return "space";
    case kRLStreamEventErrorOccurred: return "error";
    case kRLStreamEventEndEncountered: return "end";
    default: return "?";
    }
}

static void write_cb(RLWriteStreamRef s, RLStreamEventType t, void *info) {
    (void)s;
    (void)info;
    rl_trace_addf("w:%s", ev_name(t));
}

/* Takes up to 3 bytes in place per HasBytesAvailable. */
static void lend_cb(RLReadStreamRef s, RLStreamEventType t, void *info) {
    (void)info;
    rl_trace_addf("r:%s", ev_name(t));
    if (t == kRLStreamEventHasBytesAvailable) {
        RLIndex n = -2;
        const uint8_t *p = RLReadStreamGetBuffer(s, 3, &n);
        rl_trace_addf("%.*s", (int)(n > 0 ? n : 0), p ? (const char *)p : "");
    }
}

static void run_a_little(void) {
    for (int i = 0; i < 5; i++)
        RLRunLoopRunInMode(MODE, 0.01, false);
}

static void test_no_copy_reads_the_callers_bytes(void **state) {
    (void)state;
    /* kRLAllocatorNull: the bytes stay the caller's */
    uint8_t bytes[] = "abcdef";
    RLReadStreamRef r = RLReadStreamCreateWithBytesNoCopy(NULL, bytes, 6, kRLAllocatorNull);
    assert_non_null(r);
    assert_true(RLReadStreamOpen(r));
    RLIndex n = 0;
    const uint8_t *p = RLReadStreamGetBuffer(r, 2, &n);
    assert_ptr_equal(p, bytes); /* in place: not a copy */
    assert_int_equal(n, 2);
    uint8_t b[8];
    assert_int_equal(RLReadStreamRead(r, b, sizeof b), 4);
    assert_memory_equal(b, "cdef", 4);
    assert_true(RLRelease(r));
    assert_int_equal(bytes[0], 'a'); /* still ours, not freed */

    /* NULL deallocator: the stream frees them (malloc'ed; ASan and
     * valgrind would report a leak otherwise) */
    uint8_t *heap = malloc(4);
    memcpy(heap, "wxyz", 4);
    r = RLReadStreamCreateWithBytesNoCopy(NULL, heap, 4, NULL);
    assert_true(RLReadStreamOpen(r));
    assert_int_equal(RLReadStreamRead(r, b, sizeof b), 4);
    assert_memory_equal(b, "wxyz", 4);
    assert_true(RLRelease(r));

    /* empty */
    r = RLReadStreamCreateWithBytesNoCopy(NULL, NULL, 0, kRLAllocatorNull);
    assert_true(RLReadStreamOpen(r));
    assert_int_equal(RLReadStreamRead(r, b, sizeof b), 0);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    assert_true(RLRelease(r));
}

static void test_get_buffer_lends_in_place_and_ends_as_cf(void **state) {
    (void)state;
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"12345", 5);
    RLIndex n = 0;
    /* not open: NULL, -1 (CF) */
    assert_null(RLReadStreamGetBuffer(r, 5, &n));
    assert_int_equal(n, -1);
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLReadStreamOpen(r));
    const uint8_t *p = RLReadStreamGetBuffer(r, 2, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(p, "12", 2);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusOpen);
    /* 0 bytes asked: nothing taken, still open */
    assert_non_null(RLReadStreamGetBuffer(r, 0, &n));
    assert_int_equal(n, 0);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusOpen);
    /* taking the last bytes ends the stream (CF) */
    p = RLReadStreamGetBuffer(r, 10, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "345", 3);
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    assert_null(RLReadStreamGetBuffer(r, 10, &n));
    assert_int_equal(n, 0);
    assert_true(RLReadStreamClose(r));
    assert_null(RLReadStreamGetBuffer(r, 10, &n));
    assert_int_equal(n, -1);
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLRelease(r));

    /* a stream with no buffer of its own: NULL, 0 — read it instead */
    RLReadStreamRef pr;
    RLWriteStreamRef pw;
    assert_true(RLStreamCreateBoundPair(NULL, &pr, &pw, 16));
    assert_true(RLReadStreamOpen(pr));
    assert_true(RLWriteStreamOpen(pw));
    assert_int_equal(RLWriteStreamWrite(pw, (const uint8_t *)"xy", 2), 2);
    n = -2;
    assert_null(RLReadStreamGetBuffer(pr, 10, &n));
    assert_int_equal(n, 0);
    uint8_t b[4];
    assert_int_equal(RLReadStreamRead(pr, b, sizeof b), 2);
    assert_true(RLRelease(pr));
    assert_true(RLRelease(pw));
}

static void test_get_buffer_in_the_client_callback(void **state) {
    (void)state;
    RLReadStreamRef r = RLReadStreamCreateWithBytesNoCopy(NULL, (const uint8_t *)"abcdefgh", 8, kRLAllocatorNull);
    RLStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    assert_true(RLReadStreamSetClient(r, ALL_EVENTS, lend_cb, &ctx));
    assert_true(RLReadStreamScheduleWithRunLoop(r, RLRunLoopGetCurrent(), MODE));
    assert_true(RLReadStreamOpen(r));
    run_a_little();
    assert_trace("r:open r:bytes abc r:bytes def r:bytes gh r:end");
    assert_int_equal(RLReadStreamGetStatus(r), kRLStreamStatusAtEnd);
    assert_true(RLReadStreamUnscheduleFromRunLoop(r, RLRunLoopGetCurrent(), MODE));
    assert_true(RLRelease(r));
}

static void test_write_into_the_callers_buffer(void **state) {
    (void)state;
    uint8_t buf[8];
    memset(buf, '.', sizeof buf);
    RLWriteStreamRef w = RLWriteStreamCreateWithBuffer(NULL, buf, 5);
    RLStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    assert_true(RLWriteStreamSetClient(w, ALL_EVENTS, write_cb, &ctx));
    assert_true(RLWriteStreamScheduleWithRunLoop(w, RLRunLoopGetCurrent(), MODE));
    assert_true(RLWriteStreamOpen(w));
    run_a_little();
    assert_true(RLWriteStreamCanAcceptBytes(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"abc", 3), 3);
    run_a_little();
    assert_memory_equal(buf, "abc..", 5);
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"de", 2), 2);
    run_a_little();
    /* full: no room, no CanAcceptBytes, still open (CF) */
    assert_memory_equal(buf, "abcde...", 8);
    assert_false(RLWriteStreamCanAcceptBytes(w));
    assert_int_equal(RLWriteStreamGetStatus(w), kRLStreamStatusOpen);
    /* the buffer's data is not a property: it is in the buffer */
    assert_rl_fails(RLWriteStreamCopyProperty(w, kRLStreamPropertyDataWritten), kRLErrorNotFound);
    /* one more byte: the write fails whole with ENOMEM (CF) */
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"f", 1), -1);
    assert_int_equal(RLWriteStreamGetStatus(w), kRLStreamStatusError);
    assert_int_equal(RLWriteStreamGetError(w).domain, kRLStreamErrorDomainPOSIX);
    assert_int_equal(RLWriteStreamGetError(w).error, ENOMEM);
    run_a_little();
    assert_memory_equal(buf, "abcde...", 8);
    assert_trace("w:open w:space w:space w:error");
    assert_true(RLWriteStreamUnscheduleFromRunLoop(w, RLRunLoopGetCurrent(), MODE));
    assert_true(RLRelease(w));

    /* a write that does not fit the room left writes nothing */
    w = RLWriteStreamCreateWithBuffer(NULL, buf, 4);
    assert_true(RLWriteStreamOpen(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"12345", 5), -1);
    assert_memory_equal(buf, "abcd", 4);
    assert_true(RLRelease(w));
}

static void test_write_into_no_room_ends_at_open(void **state) {
    (void)state;
    RLWriteStreamRef w = RLWriteStreamCreateWithBuffer(NULL, NULL, 0);
    assert_non_null(w);
    RLStreamClientContext ctx = {0, NULL, NULL, NULL, NULL};
    assert_true(RLWriteStreamSetClient(w, ALL_EVENTS, write_cb, &ctx));
    assert_true(RLWriteStreamScheduleWithRunLoop(w, RLRunLoopGetCurrent(), MODE));
    assert_true(RLWriteStreamOpen(w));
    run_a_little();
    assert_trace("w:open w:end");
    assert_int_equal(RLWriteStreamGetStatus(w), kRLStreamStatusAtEnd);
    assert_false(RLWriteStreamCanAcceptBytes(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"x", 1), -1); /* CF: -1 */
    assert_rl_error(kRLErrorInvalidState);
    assert_true(RLWriteStreamUnscheduleFromRunLoop(w, RLRunLoopGetCurrent(), MODE));
    assert_true(RLRelease(w));
}

static bool stale_get_buffer(const void *r) {
    RLIndex n = 7;
    return RLReadStreamGetBuffer((RLReadStreamRef)r, 1, &n) == NULL && n == -1;
}
static bool stale_write(const void *w) { return RLWriteStreamWrite((RLWriteStreamRef)w, (const uint8_t *)"x", 1) == -1; }

static void test_misuse(void **state) {
    (void)state;
    uint8_t b[4];
    int alloc = 0;
    assert_rl_fails(RLReadStreamCreateWithBytesNoCopy(NULL, NULL, 3, kRLAllocatorNull), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamCreateWithBytesNoCopy(NULL, b, -1, kRLAllocatorNull), kRLErrorInvalidArgument);
    /* an allocator the library cannot call: refused, the bytes stay ours */
    assert_rl_fails(RLReadStreamCreateWithBytesNoCopy(NULL, b, 4, &alloc), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamCreateWithBuffer(NULL, NULL, 4), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamCreateWithBuffer(NULL, b, -1), kRLErrorInvalidArgument);

    RLIndex n = 7;
    assert_null(RLReadStreamGetBuffer(NULL, 1, &n));
    assert_int_equal(n, -1);
    assert_rl_error(kRLErrorInvalidArgument);
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"abc", 3);
    assert_true(RLReadStreamOpen(r));
    assert_rl_fails(RLReadStreamGetBuffer(r, 1, NULL), kRLErrorInvalidArgument);
    assert_null(RLReadStreamGetBuffer(r, -1, &n));
    assert_int_equal(n, -1);
    assert_rl_error(kRLErrorInvalidArgument);
    /* a write stream is not a read stream */
    RLWriteStreamRef w = RLWriteStreamCreateWithBuffer(NULL, b, sizeof b);
    assert_null(RLReadStreamGetBuffer((RLReadStreamRef)w, 1, &n));
    assert_rl_error(kRLErrorInvalidObject);
    assert_true(RLRelease(w));
    /* nothing was taken by the failed calls */
    assert_int_equal(RLReadStreamRead(r, b, sizeof b), 3);
    assert_true(RLRelease(r));
    /* released */
    rl_test_stale(stale_get_buffer, r);
    rl_test_stale(stale_write, w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_copy_reads_the_callers_bytes, rl_trace_setup),
        cmocka_unit_test_setup(test_get_buffer_lends_in_place_and_ends_as_cf, rl_trace_setup),
        cmocka_unit_test_setup(test_get_buffer_in_the_client_callback, rl_trace_setup),
        cmocka_unit_test_setup(test_write_into_the_callers_buffer, rl_trace_setup),
        cmocka_unit_test_setup(test_write_into_no_room_ends_at_open, rl_trace_setup),
        cmocka_unit_test_setup(test_misuse, rl_trace_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
