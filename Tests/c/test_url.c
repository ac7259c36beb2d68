/* test_url.c — file URLs (RLURL.h) and the file streams made from them. */
#include "testutil.h"
#include "stale.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_url_from_representation_and_path(void **state) {
    (void)state;
    const char *p = "/tmp/some dir/file.txt";
    RLURLRef u = RLURLCreateFromFileSystemRepresentation(NULL, (const uint8_t *)p, (RLIndex)strlen(p), false);
    assert_non_null(u);
    assert_string_equal(RLGetTypeName(u), "RLURL");
    assert_true(RLGetTypeID(u) == RLURLGetTypeID());
    uint8_t buf[PATH_MAX];
    assert_true(RLURLGetFileSystemRepresentation(u, true, buf, sizeof buf));
    assert_string_equal((char *)buf, p);
    RLStringRef s = RLURLCopyFileSystemPath(u, kRLURLPOSIXPathStyle);
    assert_string_equal(s, p);
    assert_true(RLRelease(s));
    assert_false(RLURLHasDirectoryPath(u));
    assert_true(RLRelease(u));

    /* only bufLen bytes count */
    u = RLURLCreateFromFileSystemRepresentation(NULL, (const uint8_t *)"/tmp/abcdef", 6, false);
    assert_true(RLURLGetFileSystemRepresentation(u, false, buf, sizeof buf));
    assert_string_equal((char *)buf, "/tmp/a");
    assert_true(RLRelease(u));

    /* a directory: the trailing '/' is not part of the path (CF) */
    u = RLURLCreateWithFileSystemPath(NULL, "/tmp/dir/", kRLURLPOSIXPathStyle, true);
    assert_true(RLURLHasDirectoryPath(u));
    s = RLURLCopyFileSystemPath(u, kRLURLPOSIXPathStyle);
    assert_string_equal(s, "/tmp/dir");
    assert_true(RLRelease(s));
    assert_true(RLRelease(u));
    u = RLURLCreateWithFileSystemPath(NULL, "/", kRLURLPOSIXPathStyle, true);
    assert_true(RLURLGetFileSystemRepresentation(u, true, buf, sizeof buf));
    assert_string_equal((char *)buf, "/");
    assert_true(RLRelease(u));
}

static void test_relative_path_resolves_against_the_working_directory(void **state) {
    (void)state;
    char cwd[PATH_MAX], want[PATH_MAX + 16];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(want, sizeof want, "%s/rel/x", cwd);
    RLURLRef u = RLURLCreateWithFileSystemPath(NULL, "rel/x", kRLURLPOSIXPathStyle, false);
    assert_non_null(u);
    uint8_t buf[PATH_MAX + 16];
    assert_true(RLURLGetFileSystemRepresentation(u, true, buf, sizeof buf));
    assert_string_equal((char *)buf, want);
    assert_true(RLURLGetFileSystemRepresentation(u, false, buf, sizeof buf));
    assert_string_equal((char *)buf, "rel/x");
    RLStringRef s = RLURLCopyFileSystemPath(u, kRLURLPOSIXPathStyle);
    assert_string_equal(s, "rel/x");
    assert_true(RLRelease(s));
    assert_true(RLRelease(u));
}

static void test_file_streams_from_a_url(void **state) {
    (void)state;
    char path[] = "/tmp/rl_url_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    RLURLRef u = RLURLCreateFromFileSystemRepresentation(NULL, (const uint8_t *)path, (RLIndex)strlen(path), false);
    RLWriteStreamRef w = RLWriteStreamCreateWithFile(NULL, u);
    RLReadStreamRef r = RLReadStreamCreateWithFile(NULL, u);
    /* the streams keep the path: the URL may go */
    assert_true(RLRelease(u));
    assert_non_null(w);
    assert_non_null(r);
    assert_true(RLWriteStreamOpen(w));
    assert_int_equal(RLWriteStreamWrite(w, (const uint8_t *)"by url", 6), 6);
    assert_true(RLWriteStreamClose(w));
    assert_true(RLReadStreamOpen(r));
    uint8_t b[16];
    assert_int_equal(RLReadStreamRead(r, b, sizeof b), 6);
    assert_memory_equal(b, "by url", 6);
    assert_true(RLRelease(r));
    assert_true(RLRelease(w));
    unlink(path);

    /* a URL to nothing: Open fails with ENOENT, as with a path */
    u = RLURLCreateWithFileSystemPath(NULL, "/nonexistent/dir/file", kRLURLPOSIXPathStyle, false);
    r = RLReadStreamCreateWithFile(NULL, u);
    assert_true(RLRelease(u));
    assert_false(RLReadStreamOpen(r));
    RLErrorRef e = RLReadStreamCopyError(r);
    assert_string_equal(RLErrorGetDomain(e), kRLErrorDomainPOSIX);
    assert_int_equal(RLErrorGetCode(e), ENOENT);
    assert_true(RLRelease(e));
    assert_true(RLRelease(r));
}

static bool stale_stream_from(const void *u) { return RLWriteStreamCreateWithFile(NULL, u) == NULL; }
static bool stale_has_directory(const void *u) { return !RLURLHasDirectoryPath(u); }
static bool stale_path(const void *u) { return RLURLCopyFileSystemPath(u, kRLURLPOSIXPathStyle) == NULL; }

static void test_misuse(void **state) {
    (void)state;
    assert_rl_fails(RLURLCreateFromFileSystemRepresentation(NULL, NULL, 3, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLURLCreateFromFileSystemRepresentation(NULL, (const uint8_t *)"/x", 0, false),
                    kRLErrorInvalidArgument);
    assert_rl_fails(RLURLCreateFromFileSystemRepresentation(NULL, (const uint8_t *)"/a\0b", 4, false),
                    kRLErrorInvalidArgument);
    assert_rl_fails(RLURLCreateWithFileSystemPath(NULL, NULL, kRLURLPOSIXPathStyle, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLURLCreateWithFileSystemPath(NULL, "", kRLURLPOSIXPathStyle, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLURLCreateWithFileSystemPath(NULL, "C:\\x", kRLURLWindowsPathStyle, false),
                    kRLErrorInvalidArgument);
    uint8_t buf[8];
    assert_rl_fails(RLURLGetFileSystemRepresentation(NULL, true, buf, sizeof buf), kRLErrorInvalidArgument);
    assert_rl_fails(RLURLCopyFileSystemPath(NULL, kRLURLPOSIXPathStyle), kRLErrorInvalidArgument);
    assert_rl_fails(RLURLHasDirectoryPath(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLReadStreamCreateWithFile(NULL, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLWriteStreamCreateWithFile(NULL, NULL), kRLErrorInvalidArgument);

    RLURLRef u = RLURLCreateWithFileSystemPath(NULL, "/tmp/a/longer/path", kRLURLPOSIXPathStyle, false);
    /* too small a buffer: refused, buffer untouched */
    memset(buf, 'z', sizeof buf);
    assert_rl_fails(RLURLGetFileSystemRepresentation(u, true, buf, sizeof buf), kRLErrorInvalidArgument);
    assert_int_equal(buf[0], 'z');
    assert_rl_fails(RLURLGetFileSystemRepresentation(u, true, NULL, 100), kRLErrorInvalidArgument);
    assert_rl_fails(RLURLCopyFileSystemPath(u, kRLURLWindowsPathStyle), kRLErrorInvalidArgument);

    /* wrong type: a stream or a string is not a URL */
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"x", 1);
    assert_rl_fails(RLURLCopyFileSystemPath((RLURLRef)r, kRLURLPOSIXPathStyle), kRLErrorInvalidObject);
    assert_rl_fails(RLReadStreamCreateWithFile(NULL, (RLURLRef)r), kRLErrorInvalidObject);
    assert_true(RLRelease(r));

    /* released */
    assert_true(RLRelease(u));
    rl_test_stale(stale_stream_from, u);
    rl_test_stale(stale_has_directory, u);
    rl_test_stale(stale_path, u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_from_representation_and_path),
        cmocka_unit_test(test_relative_path_resolves_against_the_working_directory),
        cmocka_unit_test(test_file_streams_from_a_url),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
