/* cf_compat.h's message-port side: the guide's Listings 3-17 to 3-19
 * (examples/c/message_ports.c, included here unchanged) compile through it
 * with -Wall -Werror (this program's build adds -Werror, see the
 * Makefile), and CF-named message-port, data and string code runs on
 * RLMessagePort, RLData and RLString. The listings' own run is the
 * message_ports example (make check-examples): they keep their ports and
 * one name string for the life of the program, as on Darwin, so they are
 * not run under this program's leak checks. */
#include "testutil.h"

#define main message_ports_example_main
#include "../../examples/c/message_ports.c"
#undef main

#include <semaphore.h>

static void test_listings_compile_against_cf_compat(void **state) {
    (void)state;
    /* They are here, with CF's types. */
    OSStatus (*spawn)() = MySpawnThread;
    CFMessagePortCallBack handler = MainThreadResponseHandler;
    TaskProc entry = ServerThreadEntryPoint;
    assert_non_null(spawn);
    assert_non_null(handler);
    assert_non_null(entry);
}

/* ---- a server thread in CF names ---- */

typedef struct server {
    char name[64];
    CFMessagePortRef port;
    CFRunLoopRef loop;
    pthread_t thread;
    sem_t ready;
    bool run; /* false: the thread never runs its loop (requests wait) */
    bool let_go; /* release the port once its source is added, as Listing 3-17 */
} server;

static CFDataRef upper_case(CFMessagePortRef local, SInt32 msgid, CFDataRef data, void *info) {
    if (msgid == 2) {
        CFRunLoopStop(CFRunLoopGetCurrent());
        return NULL;
    }
    if (msgid == 3) { /* the server holds no reference: its port ends here */
        CFMessagePortInvalidate(local);
        CFRunLoopStop(CFRunLoopGetCurrent());
        return NULL;
    }
    CFIndex n = CFDataGetLength(data);
    UInt8 *buffer = CFAllocatorAllocate(NULL, n, 0);
    CFDataGetBytes(data, CFRangeMake(0, n), buffer);
    for (CFIndex i = 0; i < n; i++)
        if (buffer[i] >= 'a' && buffer[i] <= 'z')
            buffer[i] = (UInt8)(buffer[i] - 'a' + 'A');
    CFDataRef reply = CFDataCreate(NULL, buffer, n);
    CFAllocatorDeallocate(NULL, buffer);
    return reply;
}

static void *server_main(void *arg) {
    server *s = arg;
    CFMessagePortContext context = {0, s, NULL, NULL, NULL};
    Boolean shouldFreeInfo = TRUE;
    s->port = CFMessagePortCreateLocal(NULL, s->name, &upper_case, &context, &shouldFreeInfo);
    s->loop = CFRunLoopGetCurrent();
    if (s->port && !shouldFreeInfo && s->run) {
        CFRunLoopSourceRef source = CFMessagePortCreateRunLoopSource(NULL, s->port, 0);
        CFRunLoopAddSource(s->loop, source, kCFRunLoopDefaultMode);
        CFRelease(source);
        if (s->let_go)
            CFRelease(s->port);
        sem_post(&s->ready);
        CFRunLoopRun();
    } else {
        sem_post(&s->ready);
    }
    return NULL;
}

static void server_start(server *s, bool run) {
    memset(s, 0, sizeof *s);
    s->run = run;
    snprintf(s->name, sizeof s->name, "test.cf_compat_ports.%d.%d", (int)getpid(), rand());
    sem_init(&s->ready, 0, 0);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
    while (sem_wait(&s->ready) != 0) {
    }
    assert_non_null(s->port);
}

static void server_stop(server *s, CFMessagePortRef remote) {
    if (s->run)
        assert_int_equal(CFMessagePortSendRequest(remote, 2, NULL, 5, 0, NULL, NULL), kCFMessagePortSuccess);
    pthread_join(s->thread, NULL);
    CFMessagePortInvalidate(s->port);
    CFRelease(s->port);
    sem_destroy(&s->ready);
}

static void test_request_and_reply_in_cf_names(void **state) {
    (void)state;
    server s;
    server_start(&s, true);
    CFStringRef name = CFStringCreateWithCString(NULL, s.name, kCFStringEncodingUTF8);
    CFMessagePortRef remote = CFMessagePortCreateRemote(NULL, name);
    CFRelease(name);
    assert_non_null(remote);
    assert_true(CFMessagePortIsRemote(remote));
    assert_true(CFMessagePortIsValid(remote));
    assert_int_equal(CFStringCompare(CFMessagePortGetName(remote), s.name, 0), kCFCompareEqualTo);

    CFStringRef text = CFStringCreateWithFormat(NULL, NULL, CFSTR("hello %s #%d"), "port", 7);
    CFIndex length = CFStringGetLength(text);
    UInt8 bytes[64];
    CFIndex used = 0;
    assert_int_equal(CFStringGetBytes(text, CFRangeMake(0, length), kCFStringEncodingASCII, 0, FALSE, bytes,
                                      sizeof bytes, &used),
                     length);
    CFDataRef request = CFDataCreate(NULL, bytes, used);
    CFDataRef reply = NULL;
    assert_int_equal(CFMessagePortSendRequest(remote, 1, request, 5, 5, kCFRunLoopDefaultMode, &reply),
                     kCFMessagePortSuccess);
    assert_non_null(reply);
    CFStringRef answer =
        CFStringCreateWithBytes(NULL, CFDataGetBytePtr(reply), CFDataGetLength(reply), kCFStringEncodingASCII, FALSE);
    assert_string_equal(answer, "HELLO PORT #7");
    assert_int_equal(CFStringCompare(answer, text, kCFCompareCaseInsensitive), kCFCompareEqualTo);
    CFRelease(answer);
    CFRelease(reply);
    CFRelease(request);
    CFRelease(text);

    server_stop(&s, remote);
    CFMessagePortInvalidate(remote);
    assert_false(CFMessagePortIsValid(remote));
    assert_int_equal(CFMessagePortSendRequest(remote, 1, NULL, 1, 1, kCFRunLoopDefaultMode, NULL),
                     kCFMessagePortIsInvalid);
    CFRelease(remote);
}

/* A local port whose thread never runs its loop: the request goes out,
 * the reply never comes (a generous bound; only the code is checked). */
static void test_receive_timeout_in_cf_names(void **state) {
    (void)state;
    server s;
    server_start(&s, false);
    CFMessagePortRef remote = CFMessagePortCreateRemote(NULL, s.name);
    assert_non_null(remote);
    CFDataRef reply = NULL;
    assert_int_equal(CFMessagePortSendRequest(remote, 1, NULL, 5, 0.2, kCFRunLoopDefaultMode, &reply),
                     kCFMessagePortReceiveTimeout);
    assert_null(reply);
    CFMessagePortInvalidate(remote);
    CFRelease(remote);
    server_stop(&s, NULL);
}

/* Listing 3-17's pattern: the port and its source are released once the
 * source is in the loop, and the port keeps serving (its source keeps it,
 * as CF's does) until it is invalidated — here from its own callout. */
static void test_port_released_after_adding_its_source_serves_on(void **state) {
    (void)state;
    server s;
    memset(&s, 0, sizeof s);
    s.run = true;
    s.let_go = true;
    snprintf(s.name, sizeof s.name, "test.cf_compat_ports.let_go.%d", (int)getpid());
    sem_init(&s.ready, 0, 0);
    assert_int_equal(pthread_create(&s.thread, NULL, server_main, &s), 0);
    while (sem_wait(&s.ready) != 0) {
    }
    CFMessagePortRef remote = CFMessagePortCreateRemote(NULL, s.name);
    assert_non_null(remote);
    CFDataRef request = CFDataCreate(NULL, (const UInt8 *)"abc", 3), reply = NULL;
    assert_int_equal(CFMessagePortSendRequest(remote, 1, request, 5, 5, kCFRunLoopDefaultMode, &reply),
                     kCFMessagePortSuccess);
    assert_memory_equal(CFDataGetBytePtr(reply), "ABC", 3);
    CFRelease(reply);
    CFRelease(request);
    assert_int_equal(CFMessagePortSendRequest(remote, 3, NULL, 5, 0, NULL, NULL), kCFMessagePortSuccess);
    pthread_join(s.thread, NULL);
    sem_destroy(&s.ready);
    CFMessagePortInvalidate(remote);
    CFRelease(remote);
    /* The name is free again: the port is gone. */
    assert_null(CFMessagePortCreateRemote(NULL, s.name));
    assert_rl_error(kRLErrorNotFound);
}

static void test_misuse_in_cf_names(void **state) {
    (void)state;
    assert_null(CFMessagePortCreateRemote(NULL, CFSTR("test.cf_compat_ports.nobody-listens")));
    assert_rl_error(kRLErrorNotFound);
    assert_null(CFAllocatorAllocate(NULL, 0, 0));
    CFAllocatorDeallocate(NULL, NULL);
    CFDataRef d = CFDataCreate(NULL, (const UInt8 *)"abc", 3);
    UInt8 b[4];
    assert_rl_fails(CFDataGetBytes(d, CFRangeMake(2, 2), b), kRLErrorInvalidArgument);
    CFRange r = CFRangeMake(1, 2);
    assert_true(CFDataGetBytes(d, r, b));
    assert_memory_equal(b, "bc", 2);
    CFRelease(d);
    /* The context's info comes back; a NULL port is refused. */
    CFMessagePortContext context;
    assert_rl_fails(CFMessagePortGetContext(NULL, &context), kRLErrorInvalidArgument);
    assert_int_equal(CFMessagePortSendRequest(NULL, 1, NULL, 1, 1, NULL, NULL), kCFMessagePortIsInvalid);
    RLErrorClear();
    /* A literal is no library string: releasing one is refused. */
    assert_rl_fails(CFRelease(CFSTR("com.myapp.MainThread")), kRLErrorInvalidObject);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listings_compile_against_cf_compat),
        cmocka_unit_test(test_request_and_reply_in_cf_names),
        cmocka_unit_test(test_receive_timeout_in_cf_names),
        cmocka_unit_test(test_port_released_after_adding_its_source_serves_on),
        cmocka_unit_test(test_misuse_in_cf_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
