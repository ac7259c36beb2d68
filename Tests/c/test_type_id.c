/* test_type_id.c — RLGetTypeID and each family's GetTypeID (CFGetTypeID
 * and the …GetTypeID functions of CFRunLoop.h, CFSocket.h, CFStream.h,
 * CFMessagePort.h). */
#include "testutil.h"
#include "stale.h"

#include <stdio.h>
#include <unistd.h>

static void noop_timer(RLRunLoopTimerRef t, void *info) {
    (void)t;
    (void)info;
}
static void noop_observer(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    (void)o;
    (void)a;
    (void)info;
}
static void noop_perform(void *info) { (void)info; }

static void test_each_object_has_its_types_id(void **state) {
    (void)state;
    RLTypeID ids[] = {RLRunLoopGetTypeID(),     RLRunLoopSourceGetTypeID(), RLRunLoopTimerGetTypeID(),
                      RLRunLoopObserverGetTypeID(), RLSocketGetTypeID(),    RLReadStreamGetTypeID(),
                      RLWriteStreamGetTypeID(), RLMessagePortGetTypeID(),   RLErrorGetTypeID(),
                      RLURLGetTypeID(),         RLStringGetTypeID()};
    size_t n = sizeof ids / sizeof ids[0];
    for (size_t i = 0; i < n; i++) {
        assert_true(ids[i] != 0);
        for (size_t j = 0; j < i; j++)
            assert_true(ids[i] != ids[j]);
    }

    assert_true(RLGetTypeID(RLRunLoopGetCurrent()) == RLRunLoopGetTypeID());

    RLRunLoopSourceContext sc = {0};
    sc.perform = noop_perform;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(NULL, 0, &sc);
    assert_true(RLGetTypeID(src) == RLRunLoopSourceGetTypeID());
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, 0, 0, 0, 0, noop_timer, NULL);
    assert_true(RLGetTypeID(t) == RLRunLoopTimerGetTypeID());
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, noop_observer, NULL);
    assert_true(RLGetTypeID(o) == RLRunLoopObserverGetTypeID());
    RLSocketRef sock = RLSocketCreate(NULL, 0, 0, 0, 0, NULL, NULL);
    assert_true(RLGetTypeID(sock) == RLSocketGetTypeID());
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"x", 1);
    assert_true(RLGetTypeID(r) == RLReadStreamGetTypeID());
    RLWriteStreamRef w = RLWriteStreamCreateWithAllocatedBuffers(NULL, NULL);
    assert_true(RLGetTypeID(w) == RLWriteStreamGetTypeID());
    char name[64];
    snprintf(name, sizeof name, "rl.test.typeid.%d", (int)getpid());
    RLMessagePortRef port = RLMessagePortCreateLocal(NULL, name, NULL, NULL, NULL);
    assert_non_null(port);
    assert_true(RLGetTypeID(port) == RLMessagePortGetTypeID());
    RLStringRef str = RLStringCreateWithCString(NULL, "s", kRLStringEncodingUTF8);
    assert_true(RLGetTypeID(str) == RLStringGetTypeID());
    /* every object of a type shares the ID */
    RLReadStreamRef r2 = RLReadStreamCreateWithFilePath(NULL, "/tmp/x");
    assert_true(RLGetTypeID(r2) == RLGetTypeID(r));

    assert_true(RLRelease(r2));
    assert_true(RLRelease(str));
    assert_true(RLMessagePortInvalidate(port));
    assert_true(RLRelease(port));
    assert_true(RLRelease(w));
    assert_true(RLRelease(r));
    assert_true(RLSocketInvalidate(sock));
    assert_true(RLRelease(sock));
    assert_true(RLRelease(o));
    assert_true(RLRelease(t));
    assert_true(RLRelease(src));
}

static bool stale_type_id(const void *obj) { return RLGetTypeID(obj) == 0; }

static void test_misuse(void **state) {
    (void)state;
    assert_int_equal(RLGetTypeID(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    /* a plain C string is not an object */
    assert_int_equal(RLGetTypeID("literal"), 0);
    assert_rl_error(kRLErrorInvalidObject);
    /* released */
    RLReadStreamRef r = RLReadStreamCreateWithBytes(NULL, (const uint8_t *)"x", 1);
    assert_true(RLRelease(r));
    rl_test_stale(stale_type_id, r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_object_has_its_types_id),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
