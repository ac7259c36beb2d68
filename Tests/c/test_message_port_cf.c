/* test_message_port_cf.c — message ports behave as CFMessagePort where
 * ported CF code depends on it: anonymous local ports, the
 * context's release at invalidation, an empty reply for a callout's NULL,
 * the caller's run loop served while a request waits for its reply (between
 * threads and between processes), a client that does not read its replies
 * leaves the serving loop idle, and a fork()'s child never keeps a name
 * alive. */
#include "datautil.h"
#include "testutil.h"
#include "rl_conn.h"
#include "rl_wire.h"

#include <crunloop/RLMessagePort.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MSG_ECHO = 1, MSG_NULL = 2, MSG_BIG = 3, MSG_SLOW = 4, MSG_ASK_BACK = 5, MSG_STOP = 6 };
enum { BIG = 256 << 10 };

static void unique_name(char *buf, size_t n, const char *what) {
    static int k;
    snprintf(buf, n, "test.cf.%d.%s.%d", (int)getpid(), what, k++);
}

/* What a port's callout knows: the name of the port it asks back
 * (MSG_ASK_BACK) and how long MSG_SLOW takes. */
typedef struct peer {
    char ask[128];
    int32_t ask_with; /* the message MSG_ASK_BACK sends there (0: MSG_ECHO) */
    _Atomic double slow;
    _Atomic int calls;
} peer;

static RLDataRef answer(RLMessagePortRef local, int32_t msgid, RLDataRef data, void *info) {
    peer *p = info;
    if (p)
        p->calls++;
    switch (msgid) {
    case MSG_ECHO:
        return data ? (RLDataRef)RLRetain(data) : NULL;
    case MSG_NULL:
        return NULL;
    case MSG_BIG: { /* 256 KiB, stamped with the request's first 4 bytes */
        uint8_t *b = calloc(1, BIG);
        if (data && RLDataGetLength(data) >= 4)
            memcpy(b, RLDataGetBytePtr(data), 4);
        RLDataRef r = RLDataCreate(NULL, b, BIG);
        free(b);
        return r;
    }
    case MSG_SLOW:
        usleep((useconds_t)(p->slow * 1e6));
        return rl_test_text("late");
    case MSG_ASK_BACK: { /* a request to p->ask from inside this callout */
        RLMessagePortRef r = RLMessagePortCreateRemote(NULL, p->ask);
        if (!r)
            return rl_test_text("no remote");
        RLDataRef in = rl_test_text("inner"), out = NULL;
        int32_t rc = RLMessagePortSendRequest(r, p->ask_with ? p->ask_with : MSG_ECHO, in, 5, 4,
                                              kRLRunLoopDefaultMode, &out);
        RLRelease(in);
        RLRelease(r);
        if (rc != kRLMessagePortSuccess) {
            char why[64];
            snprintf(why, sizeof why, "inner request: %d", (int)rc);
            return rl_test_text(why);
        }
        return out;
    }
    case MSG_STOP:
        RLRunLoopStop(RLRunLoopGetCurrent());
        return NULL;
    }
    return NULL;
}

/* ---- a local port served by its own thread's loop ---- */

typedef struct server {
    char name[128];
    bool anonymous; /* created without a name */
    peer info;
    RLMessagePortRef port;
    RLRunLoopRef loop;
    pthread_t thread;
    sem_t ready;
    _Atomic bool stop;
    _Atomic long wakeups; /* the loop's kRLRunLoopAfterWaiting passes */
} server;

static void count_wakeup(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) { ((server *)info)->wakeups++; }

static void *server_main(void *arg) {
    server *s = arg;
    RLMessagePortContext ctx = {0, &s->info, NULL, NULL, NULL};
    s->port = RLMessagePortCreateLocal(NULL, s->anonymous ? NULL : s->name, answer, &ctx, NULL);
    assert_non_null(s->port);
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, s->port, 0);
    assert_non_null(src);
    s->loop = RLRunLoopGetCurrent();
    RLRunLoopAddSource(s->loop, src, kRLRunLoopDefaultMode);
    RLRelease(src);
    RLRunLoopObserverContext octx = {0, s, NULL, NULL, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wakeup, &octx);
    RLRunLoopAddObserver(s->loop, o, kRLRunLoopDefaultMode);
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    sem_post(&s->ready);
    while (!s->stop)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 30, false);
    rl_test_unkeep(keep);
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    return NULL;
}

static void server_start(server *s, const char *what, bool anonymous) {
    memset(s, 0, sizeof *s);
    unique_name(s->name, sizeof s->name, what);
    s->anonymous = anonymous;
    sem_init(&s->ready, 0, 0);
    assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
    sem_wait(&s->ready);
}

static void server_stop(server *s) {
    s->stop = true;
    RLRunLoopStop(s->loop);
    pthread_join(s->thread, NULL);
    RLMessagePortInvalidate(s->port);
    RLRelease(s->port);
    sem_destroy(&s->ready);
}

/* A remote port to name, which must be there. */
static RLMessagePortRef remote_to(const char *name) {
    RLMessagePortRef r = RLMessagePortCreateRemote(NULL, name);
    assert_non_null(r);
    return r;
}

/* A named server whose MSG_SLOW takes `slow` seconds, and a remote port
 * to it. */
static RLMessagePortRef slow_server_start(server *s, const char *what, double slow) {
    server_start(s, what, false);
    s->info.slow = slow;
    return remote_to(s->name);
}

/* A MSG_ECHO request of t through r, in the default mode: answered with t. */
static void assert_echoes(RLMessagePortRef r, const char *t) {
    RLDataRef in = rl_test_text(t), out = NULL;
    assert_int_equal(RLMessagePortSendRequest(r, MSG_ECHO, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, t);
    RLRelease(out);
    RLRelease(in);
}

/* ---- 1. anonymous local ports ---- */

static void test_anonymous_local_port(void **state) {
    bool free_info = true;
    int info = 0;
    RLMessagePortContext ctx = {0, &info, NULL, NULL, NULL};
    RLMessagePortRef a = RLMessagePortCreateLocal(NULL, NULL, answer, &ctx, &free_info);
    assert_non_null(a);
    assert_false(free_info);
    assert_null(RLMessagePortGetName(a));
    assert_false(RLMessagePortIsRemote(a));
    assert_true(RLMessagePortIsValid(a));
    /* as CF: an anonymous port is never the process's port "of that name" */
    RLMessagePortRef b = RLMessagePortCreateLocal(NULL, NULL, answer, NULL, NULL);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    char *desc = RLCopyDescription(a);
    assert_non_null(desc);
    free(desc);
    RLMessagePortContext got;
    assert_true(RLMessagePortGetContext(a, &got));
    assert_ptr_equal(got.info, &info);
    /* it can be scheduled, and invalidated */
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, a, 0);
    assert_non_null(src);
    assert_true(RLRunLoopAddSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode));
    assert_true(RLMessagePortInvalidate(a));
    assert_false(RLMessagePortIsValid(a));
    assert_false(RLRunLoopSourceIsValid(src));
    RLRelease(src);
    RLRelease(a);
    RLRelease(b);
    /* Nobody can look it up by a name it does not have; the name server
     * gives it one (as CFMessagePortSetName does), and its source then
     * serves requests to that name. */
    server s;
    server_start(&s, "anon", true);
    assert_null(RLMessagePortGetName(s.port));
    assert_rl_fails(RLMessagePortCreateRemote(NULL, s.name), kRLErrorNotFound);
    assert_true(RLMessagePortNameServerRegisterPort(s.port, s.name));
    RLMessagePortRef r = remote_to(s.name);
    assert_echoes(r, "to the anonymous");
    assert_int_equal(s.info.calls, 1);
    RLMessagePortInvalidate(r);
    RLRelease(r);
    assert_true(RLMessagePortNameServerRemovePort(s.name));
    assert_true(RLMessagePortIsValid(s.port)); /* an extra name goes alone */
    assert_rl_fails(RLMessagePortCreateRemote(NULL, s.name), kRLErrorNotFound);
    server_stop(&s);
}

/* ---- 2. the context's release runs once, at invalidation ---- */

typedef struct counted {
    int refs, retains, releases;
    int refs_seen_by_inval; /* what the invalidation callback saw */
} counted;

static const void *counted_retain(const void *info) {
    counted *c = (counted *)info;
    c->refs++;
    c->retains++;
    return info;
}
static void counted_release(const void *info) {
    counted *c = (counted *)info;
    c->refs--;
    c->releases++;
}
static void counted_invalidated(RLMessagePortRef p, void *info) { ((counted *)info)->refs_seen_by_inval = ((counted *)info)->refs; }

static void test_invalidate_releases_info_once(void **state) {
    for (int anonymous = 0; anonymous < 2; anonymous++) {
        char name[128];
        unique_name(name, sizeof name, "rel");
        counted c = {0};
        RLMessagePortContext ctx = {0, &c, counted_retain, counted_release, NULL};
        RLMessagePortRef p = RLMessagePortCreateLocal(NULL, anonymous ? NULL : name, answer, &ctx, NULL);
        assert_non_null(p);
        assert_int_equal(c.retains, 1);
        assert_true(RLMessagePortSetInvalidationCallBack(p, counted_invalidated));
        RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, p, 0);
        assert_non_null(src);
        assert_true(RLMessagePortInvalidate(p));
        assert_int_equal(c.refs_seen_by_inval, 1); /* the callback still had the info */
        assert_int_equal(c.releases, 1);           /* released at invalidation, as CF */
        assert_int_equal(c.refs, 0);
        assert_true(RLMessagePortInvalidate(p));
        assert_int_equal(c.releases, 1);
        RLRelease(src);
        RLRelease(p);
        assert_int_equal(c.releases, 1); /* and not again when the port goes */
    }
    /* never invalidated: the last release does it, once */
    counted c = {0};
    RLMessagePortContext ctx = {0, &c, counted_retain, counted_release, NULL};
    RLMessagePortRef p = RLMessagePortCreateLocal(NULL, NULL, answer, &ctx, NULL);
    assert_non_null(p);
    RLRelease(p);
    assert_int_equal(c.retains, 1);
    assert_int_equal(c.releases, 1);
    /* a failed create keeps nothing: neither retain nor release */
    counted f = {0};
    RLMessagePortContext fctx = {0, &f, counted_retain, counted_release, NULL};
    bool free_info = false;
    assert_rl_fails(RLMessagePortCreateLocal(NULL, "", answer, &fctx, &free_info), kRLErrorInvalidArgument);
    assert_true(free_info);
    assert_int_equal(f.retains, 0);
    assert_int_equal(f.releases, 0);
}

/* ---- 3. a callout's NULL is an empty reply ---- */

static void test_null_reply_is_empty_data(void **state) {
    server s;
    server_start(&s, "null", false);
    RLMessagePortRef r = remote_to(s.name);
    RLDataRef in = rl_test_text("x"), out = NULL;
    assert_int_equal(RLMessagePortSendRequest(r, MSG_NULL, in, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_non_null(out);
    assert_int_equal(RLDataGetLength(out), 0);
    RLRelease(out);
    /* an empty request echoed: the same */
    out = NULL;
    assert_int_equal(RLMessagePortSendRequest(r, MSG_ECHO, NULL, 5, 5, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_non_null(out);
    assert_int_equal(RLDataGetLength(out), 0);
    RLRelease(out);
    /* returnData NULL: nothing leaks, Success all the same */
    assert_int_equal(RLMessagePortSendRequest(r, MSG_NULL, in, 5, 5, kRLRunLoopDefaultMode, NULL),
                     kRLMessagePortSuccess);
    RLRelease(in);
    RLMessagePortInvalidate(r);
    RLRelease(r);
    server_stop(&s);
}

/* ---- 4. the caller's loop runs in replyMode while it waits ---- */

static void tick(RLRunLoopTimerRef t, void *info) { (*(_Atomic int *)info)++; }

static RLRunLoopTimerRef add_timer(RLRunLoopMode mode, _Atomic int *count) {
    RLRunLoopTimerContext tctx = {0, (void *)count, NULL, NULL, NULL};
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.02, 0.02, 0, 0, tick, &tctx);
    assert_non_null(t);
    RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, mode);
    return t;
}

static void test_reply_mode_serves_timers(void **state) {
    server s;
    RLMessagePortRef r = slow_server_start(&s, "timers", 0.4);
    _Atomic int in_mode = 0, other = 0;
    RLRunLoopMode mode = "test.reply.mode";
    RLRunLoopTimerRef t1 = add_timer(mode, &in_mode), t2 = add_timer("test.other.mode", &other);
    RLDataRef out = NULL;
    assert_int_equal(RLMessagePortSendRequest(r, MSG_SLOW, NULL, 5, 10, mode, &out), kRLMessagePortSuccess);
    assert_data_is(out, "late");
    RLRelease(out);
    assert_true(in_mode >= 2); /* fired while the request waited */
    assert_int_equal(other, 0); /* another mode is not run */
    /* a reply that comes in many pieces, each awaited in the loop */
    size_t n = 4 << 20;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 13);
    RLDataRef big = RLDataCreate(NULL, b, (RLIndex)n);
    assert_int_equal(RLMessagePortSendRequest(r, MSG_ECHO, big, 5, 10, mode, &out), kRLMessagePortSuccess);
    assert_int_equal(RLDataGetLength(out), n);
    assert_memory_equal(RLDataGetBytePtr(out), b, n);
    RLRelease(out);
    RLRelease(big);
    free(b);
    /* a request without replyMode runs nothing */
    int before = in_mode;
    assert_int_equal(RLMessagePortSendRequest(r, MSG_SLOW, NULL, 5, 0, NULL, NULL), kRLMessagePortSuccess);
    assert_int_equal(in_mode, before);
    RLRunLoopTimerInvalidate(t1);
    RLRunLoopTimerInvalidate(t2);
    RLRelease(t1);
    RLRelease(t2);
    RLMessagePortInvalidate(r);
    RLRelease(r);
    server_stop(&s);
}

static void test_reply_wait_honours_timeout_and_sleeps(void **state) {
    server s;
    RLMessagePortRef r = slow_server_start(&s, "tmo", 1.5);
    server me = {0}; /* only its wake-up count */
    RLRunLoopObserverContext octx = {0, &me, NULL, NULL, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAfterWaiting, true, 0, count_wakeup, &octx);
    RLRunLoopMode mode = "test.wait.mode";
    RLRunLoopAddObserver(RLRunLoopGetCurrent(), o, mode);
    RLRunLoopSourceRef keep = rl_test_keep_mode(mode); /* the loop is run, not just the connection waited on */
    double t0 = rl_test_now();
    RLDataRef out = (RLDataRef)1;
    assert_int_equal(RLMessagePortSendRequest(r, MSG_SLOW, NULL, 5, 0.3, mode, &out), kRLMessagePortReceiveTimeout);
    double took = rl_test_now() - t0;
    assert_null(out);
    assert_rl_error(kRLErrorTimedOut);
    assert_true(took >= 0.25);
    assert_true(took < 1.2);
    assert_true(me.wakeups < 10); /* it slept, it did not spin */
    /* the late reply is dropped; the next request gets its own */
    RLDataRef in = rl_test_text("after");
    s.info.slow = 0;
    assert_int_equal(RLMessagePortSendRequest(r, MSG_ECHO, in, 5, 5, mode, &out), kRLMessagePortSuccess);
    assert_data_is(out, "after");
    RLRelease(out);
    RLRelease(in);
    assert_true(RLRunLoopContainsSource(RLRunLoopGetCurrent(), keep, mode));
    rl_test_unkeep(keep);
    RLRunLoopObserverInvalidate(o);
    RLRelease(o);
    RLMessagePortInvalidate(r);
    RLRelease(r);
    server_stop(&s);
}

/* What the loop runs while a request waits may invalidate the remote port
 * (the request ends at once, BecameInvalid) but not send on it (refused at
 * once: it is busy with this thread's request). */
typedef struct nested_ctx {
    RLMessagePortRef remote;
    int32_t nested_rc;
    RLErrorCode nested_err;
    bool invalidate;
    bool release; /* drops the caller's (only) reference instead */
} nested_ctx;

static void nested_timer(RLRunLoopTimerRef t, void *info) {
    nested_ctx *n = info;
    if (n->invalidate) {
        RLMessagePortInvalidate(n->remote);
        return;
    }
    if (n->release) {
        RLRelease(n->remote);
        return;
    }
    n->nested_rc = RLMessagePortSendRequest(n->remote, MSG_ECHO, NULL, 1, 1, "test.nested.mode", NULL);
    n->nested_err = RLErrorGetLast().code;
}

static void test_reply_wait_and_what_its_loop_runs(void **state) {
    server s;
    server_start(&s, "nested", false);
    s.info.slow = 0.5;
    for (int inv = 0; inv < 3; inv++) {
        RLMessagePortRef r = remote_to(s.name);
        nested_ctx n = {r, 99, kRLErrorNone, inv == 1, inv == 2};
        RLRunLoopTimerContext tctx = {0, &n, NULL, NULL, NULL};
        RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + 0.05, 0, 0, 0, nested_timer, &tctx);
        RLRunLoopAddTimer(RLRunLoopGetCurrent(), t, "test.nested.mode");
        double t0 = rl_test_now();
        RLDataRef out = NULL;
        int32_t rc = RLMessagePortSendRequest(r, MSG_SLOW, NULL, 5, 5, "test.nested.mode", &out);
        if (inv == 2) { /* the request kept the port until it was done */
            assert_int_equal(rc, kRLMessagePortSuccess);
            assert_data_is(out, "late");
            RLRelease(out);
            RLRunLoopTimerInvalidate(t);
            RLRelease(t);
            continue;
        }
        if (inv) {
            assert_int_equal(rc, kRLMessagePortBecameInvalidError);
            assert_null(out);
            assert_true(rl_test_now() - t0 < 0.45); /* did not wait for the reply */
            assert_false(RLMessagePortIsValid(r));
            assert_int_equal(RLMessagePortSendRequest(r, MSG_ECHO, NULL, 1, 1, NULL, NULL), kRLMessagePortIsInvalid);
        } else {
            assert_int_equal(rc, kRLMessagePortSuccess);
            assert_data_is(out, "late");
            RLRelease(out);
            assert_int_equal(n.nested_rc, kRLMessagePortTransportError);
            assert_int_equal(n.nested_err, kRLErrorInvalidState);
        }
        RLRunLoopTimerInvalidate(t);
        RLRelease(t);
        RLMessagePortInvalidate(r);
        RLRelease(r);
        usleep(600000); /* the slow callout is done: the next remote is a new one */
    }
    server_stop(&s);
}

/* Another thread invalidates the remote port while its request waits in the
 * loop: the request ends BecameInvalid, soon. */
static void *invalidate_later(void *arg) {
    usleep(100000);
    RLMessagePortInvalidate(arg);
    return NULL;
}

static void test_reply_wait_ends_when_another_thread_invalidates(void **state) {
    server s;
    RLMessagePortRef r = slow_server_start(&s, "othinv", 1.0);
    RLRunLoopSourceRef keep = rl_test_keep_mode("test.inv.mode");
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, invalidate_later, r), 0);
    double t0 = rl_test_now();
    assert_int_equal(RLMessagePortSendRequest(r, MSG_SLOW, NULL, 5, 5, "test.inv.mode", NULL),
                     kRLMessagePortBecameInvalidError);
    assert_true(rl_test_now() - t0 < 0.9);
    pthread_join(th, NULL);
    assert_false(RLMessagePortIsValid(r));
    rl_test_unkeep(keep);
    RLRelease(r);
    usleep(1000000);
    server_stop(&s);
}

/* The main thread's port A; a worker's port B whose callout asks A back.
 * The main thread asks B: both requests are answered because each waiting
 * thread serves its own port meanwhile. */
static void test_two_threads_request_each_other(void **state) {
    char a_name[128];
    unique_name(a_name, sizeof a_name, "mainA");
    peer a_info = {0};
    RLMessagePortContext ctx = {0, &a_info, NULL, NULL, NULL};
    RLMessagePortRef a = RLMessagePortCreateLocal(NULL, a_name, answer, &ctx, NULL);
    assert_non_null(a);
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, a, 0);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    server b;
    server_start(&b, "workerB", false);
    snprintf(b.info.ask, sizeof b.info.ask, "%s", a_name);
    RLMessagePortRef rb = RLMessagePortCreateRemote(NULL, b.name);
    assert_non_null(rb);
    double t0 = rl_test_now();
    for (int i = 0; i < 3; i++) {
        RLDataRef out = NULL;
        assert_int_equal(RLMessagePortSendRequest(rb, MSG_ASK_BACK, NULL, 5, 10, kRLRunLoopDefaultMode, &out),
                         kRLMessagePortSuccess);
        assert_data_is(out, "inner");
        RLRelease(out);
    }
    assert_true(rl_test_now() - t0 < 4); /* no inner request timed out */
    assert_int_equal(a_info.calls, 3);
    RLMessagePortInvalidate(rb);
    RLRelease(rb);
    server_stop(&b);
    RLRunLoopRemoveSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    RLRelease(src);
    RLMessagePortInvalidate(a);
    RLRelease(a);
}

/* Deeper: a third thread asks the main thread's port A, whose callout asks
 * the worker's port B, whose callout asks A back. A's own source must serve
 * the inner request while A's callout waits (as a CF version-1 source does
 * on Darwin: its port is served by the nested run). */
static void *ask_a(void *arg) {
    peer *who = arg;
    RLMessagePortRef r = RLMessagePortCreateRemote(NULL, who->ask);
    RLDataRef out = NULL;
    int32_t rc = r ? RLMessagePortSendRequest(r, MSG_ASK_BACK, NULL, 5, 10, kRLRunLoopDefaultMode, &out) : -99;
    bool ok = rc == kRLMessagePortSuccess && out && RLDataGetLength(out) == 5 &&
              memcmp(RLDataGetBytePtr(out), "inner", 5) == 0;
    if (out)
        RLRelease(out);
    if (r) {
        RLMessagePortInvalidate(r);
        RLRelease(r);
    }
    RLRunLoopStop(RLRunLoopGetMain());
    return ok ? arg : NULL;
}

static void test_a_callout_waiting_for_a_reply_still_serves_its_port(void **state) {
    server b;
    server_start(&b, "chainB", false);
    char a_name[128], a_alias[128];
    unique_name(a_name, sizeof a_name, "chainA");
    unique_name(a_alias, sizeof a_alias, "chainA.alias");
    /* B asks A back by another name: a remote port of its own (the third
     * thread's, busy with its request, would be the same object) */
    snprintf(b.info.ask, sizeof b.info.ask, "%s", a_alias);
    peer a_info = {0};
    snprintf(a_info.ask, sizeof a_info.ask, "%s", b.name); /* A asks B to ask A */
    a_info.ask_with = MSG_ASK_BACK;
    RLMessagePortContext ctx = {0, &a_info, NULL, NULL, NULL};
    RLMessagePortRef a = RLMessagePortCreateLocal(NULL, a_name, answer, &ctx, NULL);
    assert_non_null(a);
    assert_true(RLMessagePortNameServerRegisterPort(a, a_alias));
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, a, 0);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    peer third = {0};
    snprintf(third.ask, sizeof third.ask, "%s", a_name);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, ask_a, &third), 0);
    double t0 = rl_test_now();
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 15, false); /* until the third thread is done */
    void *ok = NULL;
    pthread_join(th, &ok);
    assert_non_null(ok);
    assert_true(rl_test_now() - t0 < 4);
    assert_int_equal(a_info.calls, 2); /* the outer request and B's inner one */
    server_stop(&b);
    RLRunLoopRemoveSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    RLRelease(src);
    RLMessagePortInvalidate(a);
    RLRelease(a);
}

/* The same between two processes: the child's port asks the parent's. */
static void test_two_processes_request_each_other(void **state) {
    char a_name[128], b_name[128];
    unique_name(a_name, sizeof a_name, "procA");
    unique_name(b_name, sizeof b_name, "procB");
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    peer a_info = {0};
    RLMessagePortContext ctx = {0, &a_info, NULL, NULL, NULL};
    RLMessagePortRef a = RLMessagePortCreateLocal(NULL, a_name, answer, &ctx, NULL);
    assert_non_null(a);
    RLRunLoopSourceRef src = RLMessagePortCreateRunLoopSource(NULL, a, 0);
    RLRunLoopAddSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        alarm(20);
        close(pfd[0]);
        static peer b_info;
        snprintf(b_info.ask, sizeof b_info.ask, "%s", a_name);
        RLMessagePortContext bctx = {0, &b_info, NULL, NULL, NULL};
        RLMessagePortRef b = RLMessagePortCreateLocal(NULL, b_name, answer, &bctx, NULL);
        RLRunLoopSourceRef bs = b ? RLMessagePortCreateRunLoopSource(NULL, b, 0) : NULL;
        if (!bs)
            _exit(2);
        RLRunLoopAddSource(RLRunLoopGetCurrent(), bs, kRLRunLoopDefaultMode);
        if (write(pfd[1], "r", 1) != 1)
            _exit(3);
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 15, false); /* until MSG_STOP */
        rl_test_child_exit(b_info.calls >= 2 ? 0 : 4);
    }
    close(pfd[1]);
    char c;
    assert_int_equal(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    RLMessagePortRef rb = RLMessagePortCreateRemote(NULL, b_name);
    assert_non_null(rb);
    RLDataRef out = NULL;
    assert_int_equal(RLMessagePortSendRequest(rb, MSG_ASK_BACK, NULL, 5, 10, kRLRunLoopDefaultMode, &out),
                     kRLMessagePortSuccess);
    assert_data_is(out, "inner");
    RLRelease(out);
    assert_int_equal(a_info.calls, 1);
    assert_int_equal(RLMessagePortSendRequest(rb, MSG_STOP, NULL, 5, 0, NULL, NULL), kRLMessagePortSuccess);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    RLMessagePortInvalidate(rb);
    RLRelease(rb);
    RLRunLoopRemoveSource(RLRunLoopGetCurrent(), src, kRLRunLoopDefaultMode);
    RLRelease(src);
    RLMessagePortInvalidate(a);
    RLRelease(a);
}

/* ---- 5. a client that does not read its replies ---- */

static int raw_connect(const char *name) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "crunloop.%u.%s", (unsigned)geteuid(), name);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void raw_request(int fd, int32_t msgid, uint32_t seq) {
    uint8_t stamp[4];
    memcpy(stamp, &seq, 4);
    rl__wire_comp comp = {RL_WIRE_DATA, 4, stamp};
    uint8_t frame[256];
    size_t len = rl__wire_encode(frame, RL_WIRE_REQUEST, msgid, seq, &comp, 1);
    assert_int_equal(send(fd, frame, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void test_hostile_client_leaves_the_loop_idle(void **state) {
    server s;
    server_start(&s, "hostile", false);
    int fd = raw_connect(s.name);
    assert_true(fd >= 0);
    enum { NBIG = 4, NSMALL = 8 };
    uint32_t seq = 0;
    for (int i = 0; i < NBIG; i++)
        raw_request(fd, MSG_BIG, ++seq); /* 1 MiB of replies: more than the socket holds */
    usleep(200000);
    for (int i = 0; i < NSMALL; i++) {
        raw_request(fd, MSG_ECHO, ++seq); /* more requests, and still no reading */
        usleep(10000);
    }
    usleep(100000);
    long w0 = s.wakeups;
    usleep(1000000);
    long wakeups = s.wakeups - w0;
    /* the loop waits for the client to drain instead of coming back (a
     * loop that spun on the client's requests woke thousands of times) */
    assert_true(wakeups < 20);
    /* everyone else is served meanwhile */
    RLMessagePortRef r = remote_to(s.name);
    assert_echoes(r, "polite");
    RLMessagePortInvalidate(r);
    RLRelease(r);
    /* the hostile client reads at last: every reply, in order */
    rl__wire_reader rd;
    rl__wire_reader_init(&rd, RL_WIRE_MAX_BODY);
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    double deadline = rl_test_now() + 10;
    for (uint32_t want = 1; want <= seq;) {
        rl__wire_frame f;
        const char *why = NULL;
        int got = rl__read_frame(fd, &rd, &f, &why);
        assert_true(got >= 0);
        if (got == 0) {
            assert_true(rl_test_now() < deadline);
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, 100);
            continue;
        }
        assert_int_equal(f.h.kind, RL_WIRE_REPLY);
        assert_int_equal(f.h.seq, want);
        assert_int_equal(f.h.ncomp, 1);
        assert_int_equal(f.comps[0].len, want <= NBIG ? BIG : 4);
        uint32_t stamp;
        memcpy(&stamp, f.comps[0].bytes, 4);
        assert_int_equal(stamp, want);
        rl__wire_frame_free(&f);
        want++;
    }
    rl__wire_reader_free(&rd);
    close(fd);
    server_stop(&s);
}

/* ---- 6. a fork()'s child never keeps a name alive ---- */

static void test_fork_child_does_not_keep_the_name(void **state) {
    char name[128];
    unique_name(name, sizeof name, "forked");
    RLMessagePortRef p = RLMessagePortCreateLocal(NULL, name, answer, NULL, NULL);
    assert_non_null(p);
    char alias[128];
    unique_name(alias, sizeof alias, "forked.alias");
    assert_true(RLMessagePortNameServerRegisterPort(p, alias));
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* touches nothing of the library: holds the fds until told */
        alarm(20);
        close(pfd[1]);
        char c;
        (void)!read(pfd[0], &c, 1);
        rl_test_child_exit(0);
    }
    close(pfd[0]);
    assert_true(RLMessagePortInvalidate(p));
    RLRelease(p);
    /* the names are dead at once: nobody connects to them... */
    assert_rl_fails(RLMessagePortCreateRemote(NULL, name), kRLErrorNotFound);
    assert_rl_fails(RLMessagePortCreateRemote(NULL, alias), kRLErrorNotFound);
    assert_true(raw_connect(name) < 0);
    /* ...and they are free again */
    RLMessagePortRef again = RLMessagePortCreateLocal(NULL, name, answer, NULL, NULL);
    assert_non_null(again);
    RLMessagePortRef other = RLMessagePortCreateLocal(NULL, alias, answer, NULL, NULL);
    assert_non_null(other);
    RLMessagePortInvalidate(other);
    RLRelease(other);
    RLMessagePortInvalidate(again);
    RLRelease(again);
    close(pfd[1]);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
}

/* A child made without fork()'s handlers (a raw clone) still holds the
 * listening socket: the name cannot be taken again until it exits, but it
 * never accepts a connection once the port is invalidated. */
static void test_raw_clone_child_cannot_revive_a_dead_name(void **state) {
    char name[128];
    unique_name(name, sizeof name, "cloned");
    RLMessagePortRef p = RLMessagePortCreateLocal(NULL, name, answer, NULL, NULL);
    assert_non_null(p);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    long child = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    assert_true(child >= 0);
    if (child == 0) {
        char c;
        syscall(SYS_close, pfd[1]);
        syscall(SYS_read, pfd[0], &c, 1L);
        syscall(SYS_exit_group, 0);
    }
    close(pfd[0]);
    assert_true(RLMessagePortInvalidate(p));
    RLRelease(p);
    assert_rl_fails(RLMessagePortCreateRemote(NULL, name), kRLErrorNotFound);
    assert_true(raw_connect(name) < 0);
    close(pfd[1]);
    int status = 0;
    assert_int_equal(waitpid((pid_t)child, &status, 0), (pid_t)child);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anonymous_local_port),
        cmocka_unit_test(test_invalidate_releases_info_once),
        cmocka_unit_test(test_null_reply_is_empty_data),
        cmocka_unit_test(test_reply_mode_serves_timers),
        cmocka_unit_test(test_reply_wait_honours_timeout_and_sleeps),
        cmocka_unit_test(test_reply_wait_and_what_its_loop_runs),
        cmocka_unit_test(test_reply_wait_ends_when_another_thread_invalidates),
        cmocka_unit_test(test_two_threads_request_each_other),
        cmocka_unit_test(test_a_callout_waiting_for_a_reply_still_serves_its_port),
        cmocka_unit_test(test_two_processes_request_each_other),
        cmocka_unit_test(test_hostile_client_leaves_the_loop_idle),
        cmocka_unit_test(test_fork_child_does_not_keep_the_name),
        cmocka_unit_test(test_raw_clone_child_cannot_revive_a_dead_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
