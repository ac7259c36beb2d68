/* test_name_server.c — the message-port name server (RLMessagePort.h):
 * registering a local port under more names, looking names up from this
 * and another process, removing names, names going with their port, and
 * misuse. */
#include "testutil.h"

#include <crunloop/RLMessagePort.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { MSG_ECHO = 1 };

static void unique_name(char *buf, size_t n, const char *what) {
    static int k;
    snprintf(buf, n, "test.ns.%d.%s.%d", (int)getpid(), what, k++);
}

static RLDataRef echo(RLMessagePortRef local, int32_t msgid, RLDataRef data, void *info) {
    return data ? (RLDataRef)RLRetain(data) : NULL;
}

/* A local port served by a thread of its own, so that this thread's
 * requests (which wait without running the loop) are answered. */
typedef struct served {
    char name[128];
    RLMessagePortRef port;
    RLWorkerThreadRef worker;
} served;

static void add_source(void *info) {
    served *s = info;
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, s->port, 0);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    RLRelease(src);
}

static void serve_start(served *s, const char *what) {
    unique_name(s->name, sizeof s->name, what);
    s->port = RLMessagePortCreateLocal(NULL, s->name, echo, NULL, NULL);
    assert_non_null(s->port);
    s->worker = RLWorkerThreadCreate(NULL, "name-server-test");
    assert_non_null(s->worker);
    assert_true(RLWorkerThreadStart(s->worker));
    assert_true(RLWorkerThreadPerformSync(s->worker, add_source, s));
}

/* A served port, registered under one more name (into alias). */
static void serve_with_alias(served *s, const char *what, char *alias, size_t n) {
    serve_start(s, what);
    unique_name(alias, n, "alias");
    assert_true(RLMessagePortNameServerRegisterPort(s->port, alias));
}

static void serve_stop(served *s) {
    RLMessagePortInvalidate(s->port);
    assert_true(RLWorkerThreadStop(s->worker));
    RLRelease(s->worker);
    RLRelease(s->port);
}

/* A round trip through a remote port for `name`: true if the echo came back. */
static bool round_trip(const char *name) {
    RLMessagePortRef r = RLMessagePortNameServerCopyPort(name);
    if (!r)
        return false;
    RLDataRef in = RLDataCreate(NULL, (const uint8_t *)"ping", 4), out = NULL;
    int32_t rc = RLMessagePortSendRequest(r, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out);
    bool ok = rc == kRLMessagePortSuccess && out && RLDataGetLength(out) == 4 &&
              memcmp(RLDataGetBytePtr(out), "ping", 4) == 0;
    RLRelease(in);
    if (out)
        RLRelease(out);
    RLRelease(r);
    return ok;
}

static void test_register_lookup_remove(void **state) {
    served s;
    serve_start(&s, "main");
    char alias[128], other[128];
    unique_name(alias, sizeof alias, "alias");
    unique_name(other, sizeof other, "other");
    /* a port answers to its own name without registering */
    assert_true(round_trip(s.name));
    assert_true(RLMessagePortNameServerRegisterPort(s.port, s.name));
    /* nobody holds the alias yet */
    assert_null(RLMessagePortNameServerCopyPort(alias));
    assert_rl_error(kRLErrorNotFound);
    assert_true(RLMessagePortNameServerRegisterPort(s.port, alias));
    assert_true(RLMessagePortNameServerRegisterPort(s.port, alias)); /* again: fine */
    assert_true(round_trip(alias));
    assert_true(RLMessagePortNameServerRegisterPort(s.port, other));
    assert_true(round_trip(other));
    /* removing an extra name leaves the port and its other names */
    assert_true(RLMessagePortNameServerRemovePort(alias));
    assert_null(RLMessagePortNameServerCopyPort(alias));
    assert_rl_error(kRLErrorNotFound);
    assert_true(RLMessagePortIsValid(s.port));
    assert_true(round_trip(s.name));
    assert_true(round_trip(other));
    assert_rl_fails(RLMessagePortNameServerRemovePort(alias), kRLErrorNotFound);
    /* a removed name is free for others */
    RLMessagePortRef taker = RLMessagePortCreateLocal(NULL, alias, echo, NULL, NULL);
    assert_non_null(taker);
    /* and a name someone holds cannot be registered */
    assert_rl_fails(RLMessagePortNameServerRegisterPort(s.port, alias), kRLErrorExists);
    RLMessagePortInvalidate(taker);
    RLRelease(taker);
    /* removing the port's own name invalidates it, and its extra names go too */
    assert_true(RLMessagePortNameServerRemovePort(s.name));
    assert_false(RLMessagePortIsValid(s.port));
    assert_null(RLMessagePortNameServerCopyPort(other));
    assert_rl_error(kRLErrorNotFound);
    assert_rl_fails(RLMessagePortNameServerRemovePort(other), kRLErrorNotFound);
    serve_stop(&s);
}

static void test_invalidation_frees_every_name(void **state) {
    served s;
    char alias[128];
    serve_with_alias(&s, "inval", alias, sizeof alias);
    assert_true(RLMessagePortInvalidate(s.port));
    assert_null(RLMessagePortNameServerCopyPort(alias));
    assert_rl_error(kRLErrorNotFound);
    /* the name is free at once */
    RLMessagePortRef again = RLMessagePortCreateLocal(NULL, alias, echo, NULL, NULL);
    assert_non_null(again);
    RLMessagePortInvalidate(again);
    RLRelease(again);
    assert_rl_fails(RLMessagePortNameServerRegisterPort(s.port, alias), kRLErrorInvalidObject);
    serve_stop(&s);
}

/* In another process: the alias answers, and cannot be taken or removed. */
static bool lookup_child(void *arg) {
    const char *alias = arg;
    bool ok = round_trip(alias);
    char own[128];
    unique_name(own, sizeof own, "child");
    RLMessagePortRef mine = RLMessagePortCreateLocal(NULL, own, echo, NULL, NULL);
    ok = ok && mine && !RLMessagePortNameServerRegisterPort(mine, alias) && RLErrorGetLast().code == kRLErrorExists;
    ok = ok && !RLMessagePortNameServerRemovePort(alias) && RLErrorGetLast().code == kRLErrorNotFound;
    if (mine) {
        RLMessagePortInvalidate(mine);
        RLRelease(mine);
    }
    return ok;
}

static void test_lookup_from_another_process(void **state) {
    served s;
    char alias[128];
    serve_with_alias(&s, "proc", alias, sizeof alias);
    /* rl_test_in_child: a child that passes execs /bin/true rather than
     * exit, so that valgrind's leak check (make check-leak) never scans a
     * fork()ed copy of this process, where what the server thread held in
     * its registers at the fork (a perform queue's chunk on its way back
     * to the pool) would look lost. */
    rl_test_in_child(lookup_child, alias, "lookup from another process");
    assert_true(round_trip(alias)); /* still ours */
    serve_stop(&s);
}

static void test_misuse(void **state) {
    char name[128];
    unique_name(name, sizeof name, "misuse");
    assert_rl_fails(RLMessagePortNameServerRegisterPort(NULL, name), kRLErrorInvalidArgument);
    RLDataRef notport = RLDataCreate(NULL, (const uint8_t *)"x", 1);
    assert_rl_fails(RLMessagePortNameServerRegisterPort((RLMessagePortRef)notport, name), kRLErrorInvalidObject);
    RLRelease(notport);
    RLMessagePortRef local = RLMessagePortCreateLocal(NULL, name, echo, NULL, NULL);
    assert_rl_fails(RLMessagePortNameServerRegisterPort(local, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortNameServerRegisterPort(local, ""), kRLErrorInvalidArgument);
    char longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    assert_rl_fails(RLMessagePortNameServerRegisterPort(local, longname), kRLErrorInvalidArgument);
    RLMessagePortRef remote = RLMessagePortNameServerCopyPort(name);
    assert_non_null(remote);
    assert_true(RLMessagePortIsRemote(remote));
    char alias[128];
    unique_name(alias, sizeof alias, "alias");
    assert_rl_fails(RLMessagePortNameServerRegisterPort(remote, alias), kRLErrorInvalidState);
    RLRelease(remote);
    assert_rl_fails(RLMessagePortNameServerCopyPort(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortNameServerCopyPort(""), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortNameServerRemovePort(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLMessagePortNameServerRemovePort(longname), kRLErrorInvalidArgument);
    RLMessagePortInvalidate(local);
    RLRelease(local);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_lookup_remove),
        cmocka_unit_test(test_invalidation_frees_every_name),
        cmocka_unit_test(test_lookup_from_another_process),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
