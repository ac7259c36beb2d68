/* test_array.c — RLArray, the array of mode names of CFRunLoopPerformBlock's
 * array form: copies, reads, misuse; and the cf_compat form itself. */
#include "testutil.h"

#include <crunloop/cf_compat.h>

#include <string.h>

static void test_create_copies_and_reads(void **state) {
    (void)state;
    char a[] = "first";
    const char *values[] = {a, "second", ""};
    RLArrayRef arr = RLArrayCreate(NULL, values, 3);
    assert_non_null(arr);
    a[0] = 'X'; /* copied: the array does not see it */
    assert_int_equal(RLArrayGetCount(arr), 3);
    assert_string_equal(RLArrayGetValueAtIndex(arr, 0), "first");
    assert_string_equal(RLArrayGetValueAtIndex(arr, 1), "second");
    assert_string_equal(RLArrayGetValueAtIndex(arr, 2), "");
    const char *const *all = RLArrayGetValues(arr);
    assert_non_null(all);
    assert_string_equal(all[1], "second");
    RLRelease(arr);

    RLArrayRef empty = RLArrayCreate(NULL, NULL, 0);
    assert_non_null(empty);
    assert_int_equal(RLArrayGetCount(empty), 0);
    assert_non_null(RLArrayGetValues(empty));
    RLRelease(empty);
}

static void test_misuse(void **state) {
    (void)state;
    const char *values[] = {"a", NULL};
    assert_null(RLArrayCreate(NULL, values, -1));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLArrayCreate(NULL, NULL, 1));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLArrayCreate(NULL, values, 2));
    assert_rl_error(kRLErrorInvalidArgument);

    assert_int_equal(RLArrayGetCount(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLArrayGetValues(NULL));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    assert_int_equal(RLArrayGetCount((RLArrayRef)(const void *)rl), -1);
    assert_rl_error(kRLErrorInvalidObject);

    RLArrayRef arr = RLArrayCreate(NULL, values, 1);
    assert_non_null(arr);
    assert_null(RLArrayGetValueAtIndex(arr, 1));
    assert_rl_error(kRLErrorInvalidArgument);
    assert_null(RLArrayGetValueAtIndex(arr, -1));
    assert_rl_error(kRLErrorInvalidArgument);
    RLRelease(arr);
}

#if __BLOCKS__
static void test_cf_perform_block_forms(void **state) {
    (void)state;
    CFRunLoopRef rl = CFRunLoopGetCurrent();
    CFArrayRef modes = CFArrayCreate(kCFAllocatorDefault, (const void *[]){CFSTR("CA"), CFSTR("CB")}, 2,
                                     &kCFTypeArrayCallBacks);
    assert_non_null(modes);
    __block int ran = 0;
    assert_true(CFRunLoopPerformBlock(rl, modes, ^{ ran++; }));
    assert_true(CFRunLoopPerformBlock(rl, CFSTR("CB"), ^{
        int tens = 10, ones = 0; /* commas inside the block: the macro keeps them */
        ran += tens + ones;
    }));
    RLRunLoopSourceRef keep = rl_test_keep_mode("CB");
    CFRunLoopRunInMode(CFSTR("CB"), 0, false);
    rl_test_unkeep(keep);
    assert_int_equal(ran, 11);
    keep = rl_test_keep_mode("CA");
    CFRunLoopRunInMode(CFSTR("CA"), 0, false);
    rl_test_unkeep(keep);
    assert_int_equal(ran, 11); /* ran once, in CB */
    CFRelease(modes);

    /* Not an array: refused, nothing queued. */
    assert_false(RLCFRunLoopPerformBlockInArray(rl, (CFArrayRef)(const void *)rl, ^{ ran = -1; }));
    assert_rl_error(kRLErrorInvalidObject);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_copies_and_reads),
        cmocka_unit_test(test_misuse),
#if __BLOCKS__
        cmocka_unit_test(test_cf_perform_block_forms),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
