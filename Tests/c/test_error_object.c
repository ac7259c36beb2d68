/* test_error_object.c — RLErrorRef (CF's CFErrorRef, RLError.h) and the
 * stream calls that hand one out (RLReadStreamCopyError). */
#include "testutil.h"
#include "stale.h"

#include <errno.h>
#include <string.h>

static void test_create_and_read_back(void **state) {
    (void)state;
    char domain[] = "MyDomain";
    RLErrorRef e = RLErrorCreate(NULL, domain, 42, NULL);
    assert_non_null(e);
    domain[0] = 'X'; /* the domain was copied */
    assert_string_equal(RLErrorGetDomain(e), "MyDomain");
    assert_int_equal(RLErrorGetCode(e), 42);
    assert_true(RLGetTypeID(e) == RLErrorGetTypeID());
    assert_string_equal(RLGetTypeName(e), "RLErrorObject");
    RLStringRef d = RLErrorCopyDescription(e);
    assert_non_null(d);
    assert_non_null(strstr(d, "MyDomain"));
    assert_non_null(strstr(d, "42"));
    assert_true(RLRelease(d));
    assert_true(RLRelease(e));

    /* CF's domain names and values */
    assert_string_equal(kRLErrorDomainPOSIX, "NSPOSIXErrorDomain");
    assert_string_equal(kRLErrorDomainOSStatus, "NSOSStatusErrorDomain");
    assert_string_equal(kRLErrorDomainMach, "NSMachErrorDomain");
    assert_string_equal(kRLErrorDomainCocoa, "NSCocoaErrorDomain");
    e = RLErrorCreate(NULL, kRLErrorDomainPOSIX, ENOENT, NULL);
    d = RLErrorCopyDescription(e);
    assert_non_null(strstr(d, strerror(ENOENT)));
    assert_true(RLRelease(d));
    assert_true(RLRelease(e));
}

static void test_stream_errors_become_error_objects(void **state) {
    (void)state;
    /* no error: NULL, and no thread error either */
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"x", 1);
    RLErrorClear();
    assert_null(RLReadStreamCopyError(r));
    assert_rl_error(kRLErrorNone);
    assert_true(RLRelease(r));

    /* a POSIX failure */
    r = RLReadStreamCreateWithFilePath(NULL, "/nonexistent/dir/file");
    assert_false(RLReadStreamOpen(r));
    RLErrorRef e = RLReadStreamCopyError(r);
    assert_non_null(e);
    assert_string_equal(RLErrorGetDomain(e), kRLErrorDomainPOSIX);
    assert_int_equal(RLErrorGetCode(e), ENOENT);
    /* each copy is a new object the caller owns */
    RLErrorRef again = RLReadStreamCopyError(r);
    assert_non_null(again);
    assert_int_equal(RLGetRetainCount(again), 1);
    assert_true(RLRelease(again));
    assert_true(RLRelease(e));
    assert_true(RLRelease(r));

    /* a write stream's failure */
    uint8_t buf[2];
    RLWriteStreamRef w = RLWriteStreamCreateWithBuffer(NULL, buf, sizeof buf);
    assert_true(RLWriteStreamOpen(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"abc", 3), -1);
    e = RLWriteStreamCopyError(w);
    assert_string_equal(RLErrorGetDomain(e), "NSPOSIXErrorDomain");
    assert_int_equal(RLErrorGetCode(e), ENOMEM);
    assert_true(RLRelease(e));
    assert_true(RLRelease(w));
}

static bool stale_domain(const void *e) { return RLErrorGetDomain(e) == NULL; }
static bool stale_code(const void *e) { return RLErrorGetCode(e) == 0; }
static bool stale_description(const void *e) { return RLErrorCopyDescription(e) == NULL; }
static bool stale_release(const void *e) { return !RLRelease(e); }
static bool stale_copy_error(const void *r) { return RLReadStreamCopyError((RLReadStreamRef)r) == NULL; }

static void test_misuse(void **state) {
    (void)state;
    assert_rl_fails(RLErrorCreate(NULL, NULL, 1, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLErrorCreate(NULL, "", 1, NULL), kRLErrorInvalidArgument);
    int dict = 0;
    assert_rl_fails(RLErrorCreate(NULL, "D", 1, &dict), kRLErrorInvalidArgument);
    assert_rl_fails(RLErrorGetDomain(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLErrorGetCode(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLErrorCopyDescription(NULL), kRLErrorInvalidArgument);

    /* wrong type */
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"x", 1);
    assert_rl_fails(RLErrorGetDomain((RLErrorRef)r), kRLErrorInvalidObject);
    RLErrorRef other = RLErrorCreate(NULL, "D", 1, NULL);
    assert_rl_fails(RLReadStreamCopyError((RLReadStreamRef)other), kRLErrorInvalidObject);
    assert_true(RLRelease(other));
    assert_rl_fails(RLWriteStreamCopyError((RLWriteStreamRef)r), kRLErrorInvalidObject);
    assert_true(RLRelease(r));

    /* released */
    RLErrorRef e = RLErrorCreate(NULL, "D", 7, NULL);
    assert_true(RLRelease(e));
    rl_test_stale(stale_domain, e);
    rl_test_stale(stale_code, e);
    rl_test_stale(stale_description, e);
    rl_test_stale(stale_release, e);
    rl_test_stale(stale_copy_error, r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_and_read_back),
        cmocka_unit_test(test_stream_errors_become_error_objects),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
