/* test_port.c — local ports and port messages (RLPort.h): the guide's
 * check-in protocol between threads, order and exactly-once delivery from
 * many senders, the bounded queue, invalidation with messages queued, and
 * misuse. */
#include "testutil.h"

#include <crunloop/RLPort.h>

#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MSG_CHECKIN = 100, MSG_WORK = 101, MSG_RESULT = 102, MSG_QUIT = 103 };

static RLDataRef u32_data(uint32_t v) { return RLDataCreate(NULL, (const uint8_t *)&v, sizeof v); }
static uint32_t data_u32(RLTypeRef d) {
    uint32_t v;
    memcpy(&v, RLDataGetBytePtr((RLDataRef)d), sizeof v);
    return v;
}

/* ---- the check-in protocol (Listings 3-12 to 3-15) ---- */

typedef struct checkin {
    RLPortRef main_port;
    RLPortRef worker_port; /* kept by the main thread from the check-in */
    uint32_t results, sum;
    bool worker_quit;
} checkin;

static void worker_handle(RLPortRef port, RLPortMessageRef m, void *info) {
    switch (RLPortMessageGetMsgid(m)) {
    case MSG_WORK: {
        /* square the number and answer through the message's send port */
        uint32_t v = data_u32(RLPortMessageGetComponent(m, 0));
        RLDataRef r = u32_data(v * v);
        RLTypeRef comps[] = {r};
        assert_true(RLPortSendBeforeDate(RLPortMessageGetSendPort(m), RLAbsoluteTimeGetCurrent() + 5, MSG_RESULT,
                                         comps, 1, port));
        RLRelease(r);
        break;
    }
    case MSG_QUIT:
        *(bool *)info = true;
        break;
    }
}

static void *worker_main(void *arg) {
    RLPortRef main_port = arg;
    bool quit = false;
    RLPortContext ctx = {0, &quit, NULL, NULL, NULL};
    RLPortRef mine = RLPortCreate(NULL, worker_handle, &ctx);
    assert_true(RLRunLoopAddPort(RLRunLoopGetCurrent(), mine, kRLRunLoopDefaultMode));
    assert_true(RLRunLoopContainsPort(RLRunLoopGetCurrent(), mine, kRLRunLoopDefaultMode));
    /* check in: an empty message whose send port is ours */
    assert_true(RLPortSendBeforeDate(main_port, RLAbsoluteTimeGetCurrent() + 5, MSG_CHECKIN, NULL, 0, mine));
    while (!quit)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, true);
    assert_true(RLRunLoopRemovePort(RLRunLoopGetCurrent(), mine, kRLRunLoopDefaultMode));
    RLPortInvalidate(mine);
    RLRelease(mine);
    return NULL;
}

static void main_handle(RLPortRef port, RLPortMessageRef m, void *info) {
    checkin *c = info;
    switch (RLPortMessageGetMsgid(m)) {
    case MSG_CHECKIN:
        assert_null(c->worker_port);
        assert_ptr_equal(RLPortMessageGetReceivePort(m), port);
        c->worker_port = (RLPortRef)RLRetain(RLPortMessageGetSendPort(m));
        break;
    case MSG_RESULT:
        c->results++;
        c->sum += data_u32(RLPortMessageGetComponent(m, 0));
        assert_ptr_equal(RLPortMessageGetSendPort(m), c->worker_port);
        break;
    }
}

static void test_checkin_protocol_between_threads(void **state) {
    checkin c = {0};
    RLPortContext ctx = {0, &c, NULL, NULL, NULL};
    c.main_port = RLPortCreate(NULL, main_handle, &ctx);
    assert_true(RLRunLoopAddPort(RLRunLoopGetCurrent(), c.main_port, kRLRunLoopDefaultMode));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, worker_main, c.main_port), 0);
    for (int i = 0; i < 100 && !c.worker_port; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, true);
    assert_non_null(c.worker_port);
    uint32_t want = 0;
    for (uint32_t v = 1; v <= 100; v++) {
        RLDataRef d = u32_data(v);
        RLTypeRef comps[] = {d};
        assert_true(RLPortSendBeforeDate(c.worker_port, RLAbsoluteTimeGetCurrent() + 5, MSG_WORK, comps, 1,
                                         c.main_port));
        RLRelease(d);
        want += v * v;
    }
    for (int i = 0; i < 200 && c.results < 100; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, true);
    assert_int_equal(c.results, 100);
    assert_int_equal(c.sum, want);
    assert_true(RLPortSendBeforeDate(c.worker_port, RLAbsoluteTimeGetCurrent() + 5, MSG_QUIT, NULL, 0, NULL));
    pthread_join(t, NULL);
    assert_false(RLPortIsValid(c.worker_port));
    /* the worker invalidated its port: sending to it now fails at once */
    assert_rl_fails(RLPortSendBeforeDate(c.worker_port, RLAbsoluteTimeGetCurrent() + 5, MSG_WORK, NULL, 0, NULL),
                    kRLErrorInvalidObject);
    RLRelease(c.worker_port);
    RLRunLoopRemovePort(RLRunLoopGetCurrent(), c.main_port, kRLRunLoopDefaultMode);
    RLRelease(c.main_port);
}

/* ---- many senders: order per sender, exactly once ---- */

enum { SENDERS = 4 };

typedef struct flood {
    RLPortRef port;
    uint32_t next[SENDERS];
    uint32_t total;
    uint32_t per_sender;
    bool in_order;
} flood;

static void flood_handle(RLPortRef port, RLPortMessageRef m, void *info) {
    flood *f = info;
    uint32_t sender = RLPortMessageGetMsgid(m);
    uint32_t seq = data_u32(RLPortMessageGetComponent(m, 0));
    if (seq != f->next[sender])
        f->in_order = false;
    f->next[sender] = seq + 1;
    f->total++;
}

typedef struct sender_arg {
    flood *f;
    uint32_t id;
} sender_arg;

static void *sender_main(void *arg) {
    sender_arg *a = arg;
    for (uint32_t i = 0; i < a->f->per_sender; i++) {
        RLDataRef d = u32_data(i);
        RLTypeRef comps[] = {d};
        /* the queue is small: senders wait for room, nothing is dropped */
        if (!RLPortSendBeforeDate(a->f->port, RLAbsoluteTimeGetCurrent() + 30, a->id, comps, 1, NULL))
            fail_msg("send %u of sender %u failed: %s", i, a->id, RLErrorGetLast().message);
        RLRelease(d);
    }
    return NULL;
}

static void test_many_senders_in_order_exactly_once(void **state) {
    flood f = {.in_order = true, .per_sender = (uint32_t)rl_test_iters(20000)};
    RLPortContext ctx = {0, &f, NULL, NULL, NULL};
    f.port = RLPortCreate(NULL, flood_handle, &ctx);
    assert_true(RLPortSetQueueLimit(f.port, 16));
    RLRunLoopAddPort(RLRunLoopGetCurrent(), f.port, kRLRunLoopDefaultMode);
    pthread_t t[SENDERS];
    sender_arg args[SENDERS];
    for (uint32_t i = 0; i < SENDERS; i++) {
        args[i] = (sender_arg){&f, i};
        pthread_create(&t[i], NULL, sender_main, &args[i]);
    }
    double until = rl_test_now() + 60;
    while (f.total < SENDERS * f.per_sender && rl_test_now() < until)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, false);
    for (int i = 0; i < SENDERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(f.total, SENDERS * f.per_sender);
    assert_true(f.in_order);
    assert_int_equal(RLPortGetQueuedCount(f.port), 0);
    RLRelease(f.port); /* the last release takes it out of the loop */
}

/* ---- the bounded queue and invalidation ---- */

static int inval_calls;
static void on_invalid(RLPortRef p, void *info) { inval_calls++; }

typedef struct blocked {
    RLPortRef port;
    bool result;
    RLErrorCode code;
} blocked;

static void *blocked_sender(void *arg) {
    blocked *b = arg;
    b->result = RLPortSendBeforeDate(b->port, RLAbsoluteTimeGetCurrent() + 30, 7, NULL, 0, NULL);
    b->code = RLErrorGetLast().code;
    return NULL;
}

static void count_handle(RLPortRef port, RLPortMessageRef m, void *info) { (*(int *)info)++; }

static void test_full_queue_times_out_then_drains(void **state) {
    int handled = 0;
    RLPortContext ctx = {0, &handled, NULL, NULL, NULL};
    RLPortRef p = RLPortCreate(NULL, count_handle, &ctx);
    assert_true(RLPortSetQueueLimit(p, 2));
    assert_true(RLPortSendBeforeDate(p, 0, 1, NULL, 0, NULL)); /* date in the past: no wait needed */
    assert_true(RLPortSendBeforeDate(p, 0, 2, NULL, 0, NULL));
    assert_rl_fails(RLPortSendBeforeDate(p, 0, 3, NULL, 0, NULL), kRLErrorTimedOut);
    assert_rl_fails(RLPortSendBeforeDate(p, RLAbsoluteTimeGetCurrent() + 0.05, 3, NULL, 0, NULL), kRLErrorTimedOut);
    assert_int_equal(RLPortGetQueuedCount(p), 2);
    /* a sender that waits gets in once the loop drains the queue */
    blocked b = {.port = p};
    pthread_t t;
    pthread_create(&t, NULL, blocked_sender, &b);
    RLRunLoopAddPort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode);
    for (int i = 0; i < 100 && handled < 3; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, false);
    pthread_join(t, NULL);
    assert_true(b.result);
    assert_int_equal(handled, 3);
    RLRunLoopRemovePort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode);
    RLRelease(p);
}

static void test_invalidate_with_messages_queued(void **state) {
    RLPortRef p = RLPortCreate(NULL, count_handle, NULL);
    RLPortRef reply = RLPortCreate(NULL, NULL, NULL);
    assert_true(RLPortSetQueueLimit(p, 3));
    RLDataRef d = u32_data(42);
    RLTypeRef comps[] = {d, reply};
    for (int i = 0; i < 3; i++)
        assert_true(RLPortSendBeforeDate(p, 0, 1, comps, 2, reply));
    assert_int_equal(RLGetRetainCount(d), 4);
    inval_calls = 0;
    assert_true(RLPortSetInvalidationCallBack(p, on_invalid));
    blocked b = {.port = p};
    pthread_t t;
    pthread_create(&t, NULL, blocked_sender, &b);
    usleep(50000); /* let it block (if it has not yet, it finds the port invalid: same outcome) */
    assert_true(RLPortInvalidate(p));
    pthread_join(t, NULL);
    assert_false(b.result);
    assert_int_equal(b.code, kRLErrorInvalidObject);
    assert_int_equal(inval_calls, 1);
    assert_int_equal(RLGetRetainCount(d), 1); /* queued messages released */
    assert_int_equal(RLPortGetQueuedCount(p), 0);
    assert_true(RLPortInvalidate(p));
    assert_int_equal(inval_calls, 1);
    assert_true(RLPortSetInvalidationCallBack(p, on_invalid)); /* invalid: called at once */
    assert_int_equal(inval_calls, 2);
    assert_rl_fails(RLPortCreateRunLoopSource(NULL, p, 0), kRLErrorInvalidObject);
    assert_rl_fails(RLRunLoopAddPort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode), kRLErrorInvalidObject);
    RLRelease(d);
    RLRelease(reply);
    RLRelease(p);
}

typedef struct stopper {
    int handled;
} stopper;

static void invalidate_on_first(RLPortRef port, RLPortMessageRef m, void *info) {
    (*(int *)info)++;
    RLPortInvalidate(port);
}

static void test_handler_invalidates_its_port(void **state) {
    int handled = 0;
    RLPortContext ctx = {0, &handled, NULL, NULL, NULL};
    RLPortRef p = RLPortCreate(NULL, invalidate_on_first, &ctx);
    RLDataRef d = u32_data(1);
    RLTypeRef comps[] = {d};
    for (int i = 0; i < 5; i++)
        RLPortSendBeforeDate(p, 0, 1, comps, 1, NULL);
    RLRunLoopAddPort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode);
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.2, false);
    rl_test_unkeep(keep);
    assert_int_equal(handled, 1); /* the rest were released, not delivered */
    assert_int_equal(RLGetRetainCount(d), 1);
    assert_false(RLRunLoopContainsPort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode));
    RLRelease(d);
    RLRelease(p);
}

/* The context's life, as for every object that owns a context
 * (rl_fdobj.h) and as CFMachPort: its info is released by the
 * invalidation, once, after the invalidation callback, not when the last
 * reference goes; a handler that invalidates its port still has the info
 * until the end of its batch. */
typedef struct life {
    int refs;       /* retains minus releases of the info */
    int inval_refs; /* refs seen by the invalidation callback */
    int after_refs; /* refs seen by the handler after it invalidated */
} life;

static const void *life_retain(const void *info) {
    ((life *)info)->refs++;
    return info;
}
static void life_release(const void *info) { ((life *)info)->refs--; }
static void life_on_invalid(RLPortRef p, void *info) { ((life *)info)->inval_refs = ((life *)info)->refs; }
static void life_invalidate_in_handler(RLPortRef port, RLPortMessageRef m, void *info) {
    RLPortInvalidate(port);
    ((life *)info)->after_refs = ((life *)info)->refs;
}

static void test_invalidation_releases_the_context_once(void **state) {
    life l = {0};
    RLPortContext ctx = {0, &l, life_retain, life_release, NULL};
    RLPortRef p = RLPortCreate(NULL, count_handle, &ctx);
    assert_int_equal(l.refs, 1);
    assert_true(RLPortSetInvalidationCallBack(p, life_on_invalid));
    RLRetain(p); /* still held elsewhere */
    assert_true(RLPortInvalidate(p));
    assert_int_equal(l.inval_refs, 1); /* the callback first, with the info alive */
    assert_int_equal(l.refs, 0);       /* then released, though p lives on */
    assert_true(RLPortInvalidate(p));
    RLRelease(p);
    RLRelease(p);
    assert_int_equal(l.refs, 0); /* once */

    /* Released by the last reference when never invalidated. */
    life k = {0};
    RLPortContext kc = {0, &k, life_retain, life_release, NULL};
    RLRelease(RLPortCreate(NULL, count_handle, &kc));
    assert_int_equal(k.refs, 0);

    /* A handler that invalidates its port keeps the info for its call. */
    life h = {0};
    RLPortContext hc = {0, &h, life_retain, life_release, NULL};
    RLPortRef q = RLPortCreate(NULL, life_invalidate_in_handler, &hc);
    assert_true(RLPortSendBeforeDate(q, 0, 1, NULL, 0, NULL));
    RLRunLoopAddPort(RLRunLoopGetCurrent(), q, kRLRunLoopDefaultMode);
    RLRunLoopSourceRef keep = rl_test_keep_mode(kRLRunLoopDefaultMode);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.2, true);
    rl_test_unkeep(keep);
    assert_int_equal(h.after_refs, 1);
    assert_int_equal(h.refs, 0);
    RLRelease(q);
    assert_int_equal(h.refs, 0);
}

/* A handler that keeps every third message (retains it) and checks the
 * others while they are valid: what a handler keeps must stay as it was
 * delivered, whatever the port does with the messages after it. */
typedef struct keeper {
    RLPortMessageRef kept[64];
    int nkept, seen;
    bool parts_ok;
} keeper;

static void keep_some(RLPortRef port, RLPortMessageRef m, void *info) {
    keeper *k = info;
    uint32_t id = RLPortMessageGetMsgid(m);
    RLIndex n = RLPortMessageGetComponentCount(m);
    bool ok = RLPortMessageGetReceivePort(m) == port && n == (RLIndex)(id % 7);
    for (RLIndex i = 0; ok && i < n; i++)
        ok = data_u32(RLPortMessageGetComponent(m, i)) == id * 100 + (uint32_t)i;
    k->parts_ok = k->parts_ok && ok;
    k->seen++;
    if (id % 3 == 0 && k->nkept < 64)
        k->kept[k->nkept++] = (RLPortMessageRef)RLRetain(m);
}

static void test_kept_messages_stay_as_delivered(void **state) {
    keeper k = {.parts_ok = true};
    RLPortContext ctx = {0, &k, NULL, NULL, NULL};
    RLPortRef p = RLPortCreate(NULL, keep_some, &ctx);
    RLPortRef reply = RLPortCreate(NULL, NULL, NULL);
    assert_true(RLPortSetQueueLimit(p, 200));
    /* 0 to 6 components: with and without an array of their own */
    enum { N = 150 };
    for (uint32_t id = 0; id < N; id++) {
        RLTypeRef comps[6];
        RLIndex n = id % 7;
        for (RLIndex i = 0; i < n; i++)
            comps[i] = u32_data(id * 100 + (uint32_t)i);
        assert_true(RLPortSendBeforeDate(p, 0, id, comps, n, id % 2 ? reply : NULL));
        for (RLIndex i = 0; i < n; i++)
            RLRelease(comps[i]);
    }
    RLRunLoopAddPort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode);
    for (int i = 0; i < 100 && k.seen < N; i++)
        RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0.1, true);
    assert_int_equal(k.seen, N);
    assert_true(k.parts_ok);
    assert_int_equal(k.nkept, N / 3);
    /* The port goes; the messages kept still name it, and it is alive for them. */
    RLRunLoopRemovePort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode);
    RLPortInvalidate(p);
    RLRelease(p);
    for (int j = 0; j < k.nkept; j++) {
        RLPortMessageRef m = k.kept[j];
        uint32_t id = RLPortMessageGetMsgid(m);
        assert_int_equal(id % 3, 0);
        assert_int_equal(RLPortMessageGetComponentCount(m), id % 7);
        for (RLIndex i = 0; i < (RLIndex)(id % 7); i++)
            assert_int_equal(data_u32(RLPortMessageGetComponent(m, i)), id * 100 + (uint32_t)i);
        assert_ptr_equal(RLPortMessageGetSendPort(m), id % 2 ? reply : NULL);
        assert_true(RLGetRetainCount(RLPortMessageGetReceivePort(m)) >= 1);
        assert_false(RLPortIsValid(RLPortMessageGetReceivePort(m)));
        assert_int_equal(RLGetRetainCount(m), 1);
    }
    for (int j = 0; j < k.nkept; j++)
        assert_true(RLRelease(k.kept[j]));
    assert_int_equal(RLGetRetainCount(reply), 1);
    RLRelease(reply);
}

static void test_messages(void **state) {
    RLPortRef a = RLPortCreate(NULL, NULL, NULL), b = RLPortCreate(NULL, NULL, NULL);
    RLDataRef d = u32_data(9);
    RLTypeRef comps[] = {d, a};
    /* Foundation's orientation: to b, replies to a */
    RLPortMessageRef m = RLPortMessageCreate(NULL, b, a, comps, 2);
    assert_non_null(m);
    assert_int_equal(RLPortMessageGetMsgid(m), 0);
    assert_true(RLPortMessageSetMsgid(m, 77));
    assert_int_equal(RLPortMessageGetMsgid(m), 77);
    assert_int_equal(RLPortMessageGetComponentCount(m), 2);
    assert_ptr_equal(RLPortMessageGetComponent(m, 0), d);
    assert_ptr_equal(RLPortMessageGetComponent(m, 1), a);
    assert_rl_fails(RLPortMessageGetComponent(m, 2), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortMessageGetComponent(m, -1), kRLErrorInvalidArgument);
    assert_ptr_equal(RLPortMessageGetSendPort(m), b);
    assert_ptr_equal(RLPortMessageGetReceivePort(m), a);
    assert_true(RLPortMessageSendBeforeDate(m, 0));
    assert_true(RLPortMessageSendBeforeDate(m, 0)); /* a message may be sent more than once */
    assert_int_equal(RLPortGetQueuedCount(b), 2);
    assert_int_equal(RLPortGetQueuedCount(a), 0);
    char *desc = RLCopyDescription(m);
    assert_non_null(strstr(desc, "msgid = 77"));
    free(desc);
    desc = RLCopyDescription(b);
    assert_non_null(strstr(desc, "2 queued"));
    free(desc);
    RLPortMessageRef nowhere = RLPortMessageCreate(NULL, NULL, a, NULL, 0);
    assert_rl_fails(RLPortMessageSendBeforeDate(nowhere, 0), kRLErrorInvalidState);
    RLRelease(nowhere);
    RLRelease(m);
    RLRelease(d);
    RLRelease(a);
    RLRelease(b); /* releases the queued messages with it */
}

static const void *count_retain(const void *info) {
    (*(int *)info)++;
    return info;
}
static void count_release(const void *info) { (*(int *)info)--; }

static void test_misuse(void **state) {
    RLPortContext bad = {1, NULL, NULL, NULL, NULL};
    assert_rl_fails(RLPortCreate(NULL, NULL, &bad), kRLErrorInvalidArgument);
    int refs = 0;
    RLPortContext ctx = {0, &refs, count_retain, count_release, NULL};
    RLPortRef p = RLPortCreate(NULL, count_handle, &ctx);
    assert_int_equal(refs, 1);
    RLPortContext got;
    assert_true(RLPortGetContext(p, &got));
    assert_ptr_equal(got.info, &refs);
    assert_rl_fails(RLPortGetContext(p, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortGetContext(NULL, &got), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortSetQueueLimit(p, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortSetQueueLimit(NULL, 5), kRLErrorInvalidArgument);
    assert_int_equal(RLPortGetQueuedCount(NULL), -1);
    assert_false(RLPortIsValid(NULL));
    assert_rl_fails(RLPortInvalidate(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortSetInvalidationCallBack(NULL, on_invalid), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortCreateRunLoopSource(NULL, NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddPort(RLRunLoopGetCurrent(), NULL, kRLRunLoopDefaultMode), kRLErrorInvalidArgument);
    assert_rl_fails(RLRunLoopAddPort(NULL, p, kRLRunLoopDefaultMode), kRLErrorInvalidArgument);
    assert_true(RLRunLoopRemovePort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode)); /* harmless, as for sources */
    assert_rl_fails(RLRunLoopRemovePort(RLRunLoopGetCurrent(), NULL, kRLRunLoopDefaultMode), kRLErrorInvalidArgument);
    assert_false(RLRunLoopContainsPort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode));
    assert_rl_fails(RLPortSendBeforeDate(NULL, 0, 1, NULL, 0, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortSendBeforeDate(p, 0.0 / 0.0, 1, NULL, 0, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortSendBeforeDate(p, 0, 1, NULL, 2, NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortSendBeforeDate(p, 0, 1, NULL, -1, NULL), kRLErrorInvalidArgument);
    long not_obj[8] = {0};
    RLTypeRef bad_comps[] = {not_obj};
    assert_rl_fails(RLPortSendBeforeDate(p, 0, 1, bad_comps, 1, NULL), kRLErrorInvalidObject);
    RLTypeRef lock_comp[] = {RLRunLoopGetCurrent()}; /* a live object, but not data or a port */
    assert_rl_fails(RLPortSendBeforeDate(p, 0, 1, lock_comp, 1, NULL), kRLErrorInvalidObject);
    assert_rl_fails(RLPortSendBeforeDate(p, 0, 1, NULL, 0, (RLPortRef)not_obj), kRLErrorInvalidObject);
    assert_int_equal(RLPortGetQueuedCount(p), 0); /* nothing half-sent */
    assert_rl_fails(RLPortMessageCreate(NULL, (RLPortRef)not_obj, NULL, NULL, 0), kRLErrorInvalidObject);
    assert_rl_fails(RLPortMessageCreate(NULL, NULL, NULL, bad_comps, 1), kRLErrorInvalidObject);
    assert_int_equal(RLPortMessageGetMsgid(NULL), 0);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLPortMessageSetMsgid(NULL, 1), kRLErrorInvalidArgument);
    assert_int_equal(RLPortMessageGetComponentCount(NULL), -1);
    assert_rl_fails(RLPortMessageGetComponent(NULL, 0), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortMessageGetSendPort(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortMessageGetReceivePort(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLPortMessageSendBeforeDate(NULL, 0), kRLErrorInvalidArgument);
    RLRelease(p);
    assert_int_equal(refs, 0);
}

#if __BLOCKS__
static void test_block_handler(void **state) {
    __block int got = 0;
    RLPortRef p = RLPortCreateWithHandler(NULL, ^(RLPortMessageRef m) {
        got += (int)RLPortMessageGetMsgid(m);
    });
    RLRunLoopAddPort(RLRunLoopGetCurrent(), p, kRLRunLoopDefaultMode);
    RLPortSendBeforeDate(p, 0, 5, NULL, 0, NULL);
    RLPortSendBeforeDate(p, 0, 6, NULL, 0, NULL);
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1, true);
    assert_int_equal(got, 11);
    RLRelease(p);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkin_protocol_between_threads),
        cmocka_unit_test(test_many_senders_in_order_exactly_once),
        cmocka_unit_test(test_full_queue_times_out_then_drains),
        cmocka_unit_test(test_invalidate_with_messages_queued),
        cmocka_unit_test(test_handler_invalidates_its_port),
        cmocka_unit_test(test_invalidation_releases_the_context_once),
        cmocka_unit_test(test_kept_messages_stay_as_delivered),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_misuse),
#if __BLOCKS__
        cmocka_unit_test(test_block_handler),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
