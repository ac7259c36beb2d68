/* RLString: library strings that are C strings and objects, and the run
 * loop's Copy functions that return them (CF code releases those with
 * CFRelease through cf_compat.h). */
#include "testutil.h"

#include <crunloop/cf_compat.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Asserts that `call` fails with `code` and a message containing `text`. */
#define assert_fails_saying(call, code, text)                                                   \
    do {                                                                                        \
        assert_false(call);                                                                     \
        const char *m_ = RLErrorGetLast().message;                                              \
        if (!strstr(m_, (text)))                                                                \
            fail_msg("error message \"%s\" does not contain \"%s\"", m_, (text));               \
        assert_rl_error(code);                                                                  \
    } while (0)

/* ---- the run loop's Copy functions, as CF code writes them ---- */

static bool released_ok;
static char seen_mode[64];

static void perform_copy_mode(void *info) {
    CFStringRef mode = CFRunLoopCopyCurrentMode(CFRunLoopGetCurrent());
    snprintf(seen_mode, sizeof seen_mode, "%s", mode ? mode : "(null)");
    RLErrorClear();
    released_ok = CFRelease(mode);
}

static void test_cf_release_of_copy_current_mode(void **state) {
    (void)state;
    CFRunLoopSourceContext ctx = {0};
    ctx.perform = perform_copy_mode;
    CFRunLoopSourceRef src = CFRunLoopSourceCreate(NULL, 0, &ctx);
    CFRunLoopAddSource(CFRunLoopGetCurrent(), src, CFSTR("StringMode"));
    CFRunLoopSourceSignal(src);
    assert_int_equal(CFRunLoopRunInMode(CFSTR("StringMode"), 1, true), kCFRunLoopRunHandledSource);
    assert_string_equal(seen_mode, "StringMode");
    assert_true(released_ok);
    assert_int_equal(RLErrorGetLast().code, kRLErrorNone);
    CFRunLoopSourceInvalidate(src);
    CFRelease(src);
    /* Not running: NULL, no error. */
    RLErrorClear();
    assert_null(CFRunLoopCopyCurrentMode(CFRunLoopGetCurrent()));
    assert_int_equal(RLErrorGetLast().code, kRLErrorNone);
}

static void test_cf_copy_all_modes_is_an_array(void **state) {
    (void)state;
    RLRunLoopSourceRef keep = rl_test_keep_mode("AllModesA");
    CFArrayRef modes = CFRunLoopCopyAllModes(CFRunLoopGetCurrent());
    assert_non_null(modes);
    CFIndex n = CFArrayGetCount(modes);
    bool has_default = false, has_a = false;
    for (CFIndex i = 0; i < n; i++) {
        CFStringRef m = CFArrayGetValueAtIndex(modes, i);
        has_default |= CFStringCompare(m, kCFRunLoopDefaultMode, 0) == kCFCompareEqualTo;
        has_a |= CFStringCompare(m, CFSTR("AllModesA"), 0) == kCFCompareEqualTo;
        /* An element is the array's (Get rule): releasing it is refused
         * and changes nothing. */
        assert_rl_fails(CFRelease(m), kRLErrorInvalidObject);
        assert_null(CFRetain(m));
        assert_rl_error(kRLErrorInvalidObject);
    }
    assert_true(has_default && has_a);
    assert_int_equal(CFArrayGetCount(modes), n);
    RLErrorClear();
    assert_true(CFRelease(modes));
    assert_int_equal(RLErrorGetLast().code, kRLErrorNone);
    rl_test_unkeep(keep);
}

/* ---- the plain C way ---- */

static void perform_plain(void *info) {
    RLStringRef mode = RLRunLoopCopyCurrentMode(RLRunLoopGetCurrent());
    snprintf(seen_mode, sizeof seen_mode, "%s", mode);
    assert_int_equal(RLGetRetainCount(mode), 1);
    assert_string_equal(RLGetTypeName(mode), "RLString");
    char *d = RLCopyDescription(mode);
    assert_string_equal(d, "PlainMode");
    free(d);
    assert_ptr_equal(RLRetain(mode), mode);
    assert_int_equal(RLGetRetainCount(mode), 2);
    assert_true(RLRelease(mode));
    released_ok = RLRelease(mode);
}

static void test_plain_c_caller_releases_with_rlrelease(void **state) {
    (void)state;
    RLRunLoopSourceContext ctx = {0};
    ctx.perform = perform_plain;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &ctx);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, "PlainMode"));
    RLRunLoopSourceSignal(src);
    released_ok = false;
    assert_int_equal(RLRunLoopRunInMode("PlainMode", 1, true), kRLRunLoopRunHandledSource);
    assert_true(released_ok);
    assert_string_equal(seen_mode, "PlainMode");
    RLRunLoopSourceInvalidate(src);
    RLRelease(src);
}

/* ---- misuse ---- */

static void test_double_release_is_refused(void **state) {
    (void)state;
    RLStringRef s = RLStringCreateWithCString(NULL, "twice", kRLStringEncodingUTF8);
    assert_non_null(s);
    assert_true(RLRelease(s));
    assert_fails_saying(RLRelease(s), kRLErrorInvalidObject, "already released");
    assert_null(RLRetain(s));
    assert_rl_error(kRLErrorInvalidObject);
    assert_int_equal(RLGetRetainCount(s), -1);
}

/* A literal's characters, at an 8-aligned address (the case that reads
 * like an object's first bytes) and at an odd one. */
static const char aligned_literal[] __attribute__((aligned(8))) = "kCFRunLoopDefaultMode";

static void test_release_of_foreign_strings_is_refused(void **state) {
    (void)state;
    assert_rl_fails(CFRelease(CFSTR("not a library string")), kRLErrorInvalidObject);
    assert_rl_fails(RLRelease(aligned_literal), kRLErrorInvalidObject);
    assert_rl_fails(RLRelease(aligned_literal + 1), kRLErrorInvalidObject);
    assert_null(RLRetain(aligned_literal + 3));
    assert_rl_error(kRLErrorInvalidObject);
    char *copy = strdup("a malloc'ed copy");
    assert_rl_fails(RLRelease(copy), kRLErrorInvalidObject);
    assert_string_equal(copy, "a malloc'ed copy");
    free(copy);
    /* One character past a live string's start is not the string. */
    RLStringRef s = RLStringCreateWithCString(NULL, "inside a longer string", kRLStringEncodingASCII);
    assert_rl_fails(RLRelease(s + 8), kRLErrorInvalidObject);
    assert_int_equal(RLGetRetainCount(s), 1);
    assert_true(RLRelease(s));
    assert_rl_fails(RLRelease(NULL), kRLErrorInvalidArgument);
}

/* A string whose text starts with the bytes of a live object's magic is
 * still a string, and objects still work while it exists. */
static void test_text_that_looks_like_an_object(void **state) {
    (void)state;
    uint32_t magic = 0x524c4f42u; /* an object's first word, see internal.h */
    char text[16] = {0};
    memcpy(text, &magic, 4);
    strcat(text, "-tail");
    RLStringRef s = RLStringCreateWithCString(NULL, text, kRLStringEncodingASCII);
    assert_non_null(s);
    assert_string_equal(RLGetTypeName(s), "RLString");
    assert_ptr_equal(RLRetain(s), s);
    assert_int_equal(RLGetRetainCount(s), 2);
    RLDataRef d = RLDataCreate(NULL, (const uint8_t *)"x", 1);
    assert_string_equal(RLGetTypeName(d), "RLData");
    assert_true(RLRelease(d));
    /* Where a particular kind of object is expected, it is refused. */
    assert_rl_fails(RLRunLoopSourceSignal((RLRunLoopSourceRef)(uintptr_t)s), kRLErrorInvalidObject);
    assert_true(RLRelease(s));
    assert_true(RLRelease(s));
    assert_rl_fails(RLRelease(s), kRLErrorInvalidObject);
    /* The magic and nothing else: the checks stay inside the string. */
    text[4] = '\0';
    RLStringRef shortest = RLStringCreateWithCString(NULL, text, kRLStringEncodingASCII);
    assert_rl_fails(RLRunLoopSourceSignal((RLRunLoopSourceRef)(uintptr_t)shortest), kRLErrorInvalidObject);
    assert_int_equal(RLGetRetainCount(shortest), 1);
    assert_true(RLRelease(shortest));
}

/* ---- creating and reading ---- */

static void test_create_and_read(void **state) {
    (void)state;
    CFStringRef f = CFStringCreateWithFormat(NULL, NULL, CFSTR("com.MyApp.Thread-%d"), 42);
    assert_string_equal(f, "com.MyApp.Thread-42");
    assert_int_equal(CFStringGetLength(f), 19);
    UInt8 buf[32];
    CFIndex used = 0;
    assert_int_equal(CFStringGetBytes(f, CFRangeMake(4, 5), kCFStringEncodingASCII, 0, FALSE, buf, sizeof buf, &used),
                     5);
    assert_int_equal(used, 5);
    assert_memory_equal(buf, "MyApp", 5);
    CFStringRef g = CFStringCreateWithBytes(NULL, buf, used, kCFStringEncodingASCII, FALSE);
    assert_string_equal(g, "MyApp");
    assert_int_equal(CFStringCompare(g, CFSTR("MyApp"), 0), kCFCompareEqualTo);
    assert_int_equal(CFStringCompare(g, CFSTR("myapp"), 0), kCFCompareLessThan);
    assert_int_equal(CFStringCompare(g, CFSTR("myapp"), kCFCompareCaseInsensitive), kCFCompareEqualTo);
    assert_int_equal(CFStringCompare(CFSTR("b"), g, 0), kCFCompareGreaterThan);
    char cbuf[8];
    assert_true(CFStringGetCString(g, cbuf, sizeof cbuf, kCFStringEncodingUTF8));
    assert_string_equal(cbuf, "MyApp");
    assert_rl_fails(CFStringGetCString(f, cbuf, sizeof cbuf, kCFStringEncodingUTF8), kRLErrorInvalidArgument);
    assert_ptr_equal(CFStringGetCStringPtr(g, kCFStringEncodingASCII), g);
    CFStringRef same = CFStringCreateCopy(NULL, g);
    assert_ptr_equal(same, g);
    assert_int_equal(RLGetRetainCount(g), 2);
    CFRelease(same);
    CFRelease(g);
    CFRelease(f);
}

static void test_utf8_counts_utf16_units(void **state) {
    (void)state;
    /* "é" (2 bytes, 1 unit), "€" (3 bytes, 1 unit), U+1F600 (4 bytes, 2 units). */
    const char *text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";
    RLStringRef s = RLStringCreateWithBytes(NULL, (const uint8_t *)text, (RLIndex)strlen(text),
                                            kRLStringEncodingUTF8, false);
    assert_non_null(s);
    assert_int_equal(RLStringGetLength(s), 6);
    uint8_t buf[32];
    RLIndex used;
    /* ASCII stops at the first character it cannot hold, or substitutes. */
    assert_int_equal(RLStringGetBytes(s, RLRangeMake(0, 6), kRLStringEncodingASCII, 0, false, buf, 32, &used), 1);
    assert_int_equal(used, 1);
    assert_int_equal(RLStringGetBytes(s, RLRangeMake(0, 6), kRLStringEncodingASCII, '?', false, buf, 32, &used), 6);
    assert_int_equal(used, 6);
    assert_memory_equal(buf, "a????z", 6);
    /* UTF-8 copies; a range cutting the pair in half substitutes its halves. */
    assert_int_equal(RLStringGetBytes(s, RLRangeMake(1, 4), kRLStringEncodingUTF8, 0, false, buf, 32, &used), 4);
    assert_int_equal(used, 9);
    assert_int_equal(RLStringGetBytes(s, RLRangeMake(4, 2), kRLStringEncodingUTF8, '#', false, buf, 32, &used), 2);
    assert_memory_equal(buf, "#z", 2);
    /* Measuring only (NULL buffer), and a buffer too small to finish. */
    assert_int_equal(RLStringGetBytes(s, RLRangeMake(0, 6), kRLStringEncodingUTF8, 0, false, NULL, 0, &used), 6);
    assert_int_equal(used, 11);
    assert_int_equal(RLStringGetBytes(s, RLRangeMake(0, 6), kRLStringEncodingUTF8, 0, false, buf, 3, &used), 2);
    assert_int_equal(used, 3);
    assert_null(RLStringGetCStringPtr(s, kRLStringEncodingASCII));
    /* U+E000 orders after U+1F600 in UTF-16 (surrogates come first). */
    assert_int_equal(RLStringCompare("\xee\x80\x80", "\xf0\x9f\x98\x80", 0), kRLCompareGreaterThan);
    assert_true(RLRelease(s));
}

static void test_create_misuse(void **state) {
    (void)state;
    const uint8_t nul[] = {'a', 0, 'b'};
    assert_fails_saying(RLStringCreateWithBytes(NULL, nul, 3, kRLStringEncodingUTF8, false), kRLErrorInvalidArgument,
                        "NUL");
    const uint8_t high[] = {'a', 0xe9};
    assert_rl_fails(RLStringCreateWithBytes(NULL, high, 2, kRLStringEncodingASCII, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLStringCreateWithBytes(NULL, high, 2, kRLStringEncodingUTF8, false), kRLErrorInvalidArgument);
    const uint8_t overlong[] = {0xc0, 0xaf};
    assert_rl_fails(RLStringCreateWithBytes(NULL, overlong, 2, kRLStringEncodingUTF8, false), kRLErrorInvalidArgument);
    const uint8_t surrogate[] = {0xed, 0xa0, 0x80};
    assert_rl_fails(RLStringCreateWithBytes(NULL, surrogate, 3, kRLStringEncodingUTF8, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLStringCreateWithBytes(NULL, NULL, 2, kRLStringEncodingUTF8, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLStringCreateWithBytes(NULL, high, -1, kRLStringEncodingUTF8, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLStringCreateWithBytes(NULL, high, 1, 0x0201 /* Latin-1 */, false), kRLErrorInvalidArgument);
    assert_rl_fails(RLStringCreateWithCString(NULL, NULL, kRLStringEncodingUTF8), kRLErrorInvalidArgument);
    assert_rl_fails(RLStringCreateWithFormat(NULL, NULL, NULL), kRLErrorInvalidArgument);
    int dict = 0;
    assert_rl_fails(RLStringCreateWithFormat(NULL, &dict, "x"), kRLErrorInvalidArgument);
    assert_int_equal(RLStringGetLength(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(RLStringGetLength("\xff"), -1);
    RLIndex used = 7;
    assert_int_equal(RLStringGetBytes("abc", RLRangeMake(2, 2), kRLStringEncodingUTF8, 0, false, NULL, 0, &used), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_int_equal(used, 0);
    char b[4];
    assert_rl_fails(RLStringGetCString("caf\xc3\xa9", b, sizeof b, kRLStringEncodingASCII), kRLErrorInvalidArgument);
    assert_rl_fails(RLStringGetCString(NULL, b, sizeof b, kRLStringEncodingASCII), kRLErrorInvalidArgument);
    assert_int_equal(RLStringCompare(NULL, "a", 0), kRLCompareLessThan);
    assert_rl_error(kRLErrorInvalidArgument);
    RLErrorClear();
    assert_int_equal(RLStringCompare("a", "a", 64 /* numerically */), kRLCompareEqualTo);
    assert_rl_error(kRLErrorInvalidArgument);
    /* An empty string is a string. */
    RLStringRef e = RLStringCreateWithBytes(NULL, NULL, 0, kRLStringEncodingUTF8, false);
    assert_string_equal(e, "");
    assert_int_equal(RLStringGetLength(e), 0);
    assert_true(RLRelease(e));
}

/* Many live strings at once (the registry grows and rehashes), released
 * in an order unlike creation (its deleted slots are reused). */
static void test_many_live_strings(void **state) {
    (void)state;
    enum { N = 20000 };
    RLStringRef *all = calloc(N, sizeof *all);
    assert_non_null(all);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            all[i] = RLStringCreateWithFormat(NULL, NULL, "s%d", i);
            assert_non_null(all[i]);
        }
        for (int i = 0; i < N; i++)
            assert_int_equal(RLGetRetainCount(all[(i * 7919) % N]), 1);
        for (int i = 0; i < N; i++)
            assert_true(RLRelease(all[(i * 7919) % N]));
    }
    free(all);
}

/* ---- threads and fork ---- */

enum { THREADS = 4, ROUNDS = 2000 };

static void *churn(void *arg) {
    RLStringRef mine[8];
    for (int r = 0; r < ROUNDS; r++) {
        mine[r % 8] = RLStringCreateWithFormat(NULL, NULL, "t%ld-%d", (long)(intptr_t)arg, r);
        if (!mine[r % 8] || !RLRetain(mine[r % 8]) || !RLRelease(mine[r % 8]))
            return (void *)1;
        if (r % 8 == 7)
            for (int k = 0; k < 8; k++)
                if (!RLRelease(mine[k]))
                    return (void *)1;
    }
    return NULL;
}

static void test_threads_create_and_release(void **state) {
    (void)state;
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_null(r);
    }
}

/* A string made on one thread is released on another. */
static void *release_it(void *s) { return RLRelease(s) ? NULL : (void *)1; }

static void test_release_on_another_thread(void **state) {
    (void)state;
    RLStringRef s = RLStringCreateWithCString(NULL, "travels", kRLStringEncodingUTF8);
    pthread_t t;
    void *r;
    assert_int_equal(pthread_create(&t, NULL, release_it, (void *)s), 0);
    assert_int_equal(pthread_join(t, &r), 0);
    assert_null(r);
}

/* fork() while other threads make and release strings: the child can make
 * and release its own (the registry's lock is fork-safe), and the strings
 * it inherited are still strings. */
static void test_fork_while_churning(void **state) {
    (void)state;
    RLStringRef inherited = RLStringCreateWithCString(NULL, "inherited", kRLStringEncodingUTF8);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    for (int k = 0; k < 5; k++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            RLStringRef s = RLStringCreateWithCString(NULL, "child", kRLStringEncodingUTF8);
            bool ok = s && RLRelease(s) && RLGetRetainCount(inherited) == 1 && RLRelease(inherited);
            /* Success ends in exec (rl_test_child_exit): a leak checker
             * checks every process at exit, and this child holds the strings
             * the parent's other threads had made (threads it does not have). */
            rl_test_child_exit(ok ? 0 : 1);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_true(RLRelease(inherited));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cf_release_of_copy_current_mode),
        cmocka_unit_test(test_cf_copy_all_modes_is_an_array),
        cmocka_unit_test(test_plain_c_caller_releases_with_rlrelease),
        cmocka_unit_test(test_double_release_is_refused),
        cmocka_unit_test(test_release_of_foreign_strings_is_refused),
        cmocka_unit_test(test_text_that_looks_like_an_object),
        cmocka_unit_test(test_create_and_read),
        cmocka_unit_test(test_utf8_counts_utf16_units),
        cmocka_unit_test(test_create_misuse),
        cmocka_unit_test(test_many_live_strings),
        cmocka_unit_test(test_threads_create_and_release),
        cmocka_unit_test(test_release_on_another_thread),
        cmocka_unit_test(test_fork_while_churning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
