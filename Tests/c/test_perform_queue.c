/* test_perform_queue.c — the perform queue's storage (rl_pqueue.c): many
 * requests spanning chunks, requests for other modes kept (and compacted)
 * across passes and nested runs, a thread ending inside a long batch, and
 * several producers into several modes at once. */
#include "owned.h"
#include "testutil.h"

#include <crunloop/RLThread.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A request that records itself: seq numbers per "lane" must come in
 * order. */
typedef struct lane {
    long next;      /* the seq expected next */
    long ran;       /* how many ran */
    long disorder;  /* how many came out of order */
} lane;

typedef struct req {
    lane *lane;
    long seq;
} req;

static void req_run(void *arg) {
    req *r = arg;
    if (r->seq != r->lane->next)
        r->lane->disorder++;
    r->lane->next = r->seq + 1;
    r->lane->ran++;
}

static void test_requests_across_many_chunks_keep_order_per_mode(void **state) {
    /* 4 modes interleaved, with and without a prefix slot (named, common,
     * default), so that prefixes and their requests straddle chunk ends;
     * each mode then runs exactly its own, in order. */
    enum { PER = 5000 };
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef kd = rl_test_keep_mode(kRLRunLoopDefaultMode), ka = rl_test_keep_mode("QA"),
                       kb = rl_test_keep_mode("QB");
    const char *modes[4] = {kRLRunLoopDefaultMode, "QA", kRLRunLoopCommonModes, "QB"};
    lane lanes[4] = {{0}};
    req *reqs = calloc(4 * PER, sizeof *reqs);
    assert_non_null(reqs);
    for (long i = 0; i < PER; i++) {
        for (int m = 0; m < 4; m++) {
            req *r = &reqs[i * 4 + m];
            *r = (req){&lanes[m], i};
            assert_true(RLRunLoopPerformFunction(rl, modes[m], req_run, r));
        }
    }
    assert_int_equal(RLRunLoopRunInMode("QA", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(lanes[1].ran, PER);
    assert_int_equal(lanes[0].ran + lanes[2].ran + lanes[3].ran, 0);
    /* The default mode is common: default and common requests run. */
    assert_int_equal(RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(lanes[0].ran, PER);
    assert_int_equal(lanes[2].ran, PER);
    assert_int_equal(lanes[3].ran, 0);
    /* Requests queued now come after the kept ones. */
    for (long i = PER; i < PER + 10; i++) {
        req *r = malloc(sizeof *r);
        *r = (req){&lanes[3], i};
        assert_true(RLRunLoopPerformFunctionWithRelease(rl, "QB", req_run, r, free));
    }
    assert_int_equal(RLRunLoopRunInMode("QB", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(lanes[3].ran, PER + 10);
    for (int m = 0; m < 4; m++)
        assert_int_equal(lanes[m].disorder, 0);
    /* Nothing left: the modes are empty again once the keepers go. */
    rl_test_unkeep(kd);
    rl_test_unkeep(ka);
    rl_test_unkeep(kb);
    assert_int_equal(RLRunLoopRunInMode("QA", 0, false), kRLRunLoopRunFinished);
    assert_int_equal(RLRunLoopRunInMode("QB", 0, false), kRLRunLoopRunFinished);
    free(reqs);
}

/* ---- nested runs keep what they do not run, oldest first ---- */

static lane nested_lane;
static req nested_reqs[8];

static void nested_outer(void *arg) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    /* Queued inside: 3 for NY (run by the nested run below), 1 for NZ. */
    nested_reqs[4] = (req){&nested_lane, 100};
    nested_reqs[5] = (req){&nested_lane, 101};
    assert_true(RLRunLoopPerformFunction(rl, "NZ", req_run, &nested_reqs[4]));
    assert_true(RLRunLoopPerformFunction(rl, "NY", req_run, &nested_reqs[5]));
    assert_int_equal(RLRunLoopRunInMode("NY", 0, false), kRLRunLoopRunTimedOut);
}

static void test_nested_run_sees_only_newer_requests(void **state) {
    /* As CF (diff scenario blocks_kept): the outer pass holds its requests,
     * so the nested run in NY runs only the NY request queued inside it;
     * afterwards the outer pass's kept NY requests come before the NZ one
     * the nested run kept. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef kx = rl_test_keep_mode("NX"), ky = rl_test_keep_mode("NY"), kz = rl_test_keep_mode("NZ");
    nested_lane = (lane){.next = 0};
    nested_reqs[0] = (req){&nested_lane, 0};
    nested_reqs[1] = (req){&nested_lane, 1};
    assert_true(RLRunLoopPerformFunction(rl, "NY", req_run, &nested_reqs[0]));
    assert_true(RLRunLoopPerformFunction(rl, "NX", nested_outer, NULL));
    assert_true(RLRunLoopPerformFunction(rl, "NY", req_run, &nested_reqs[1]));
    assert_int_equal(RLRunLoopRunInMode("NX", 0, false), kRLRunLoopRunTimedOut);
    /* Only the request queued inside ran (seq 101), out of turn. */
    assert_int_equal(nested_lane.ran, 1);
    assert_int_equal(nested_lane.next, 102);
    nested_lane = (lane){.next = 0};
    assert_int_equal(RLRunLoopRunInMode("NY", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(nested_lane.ran, 2);
    assert_int_equal(nested_lane.disorder, 0);
    nested_lane = (lane){.next = 100};
    assert_int_equal(RLRunLoopRunInMode("NZ", 0, false), kRLRunLoopRunTimedOut);
    assert_int_equal(nested_lane.ran, 1);
    assert_int_equal(nested_lane.disorder, 0);
    rl_test_unkeep(kx);
    rl_test_unkeep(ky);
    rl_test_unkeep(kz);
}

/* ---- a thread that ends inside a long batch ---- */

enum { EXIT_N = 2000, EXIT_AT = 700 };
static owned exit_owned[EXIT_N];
static owned exit_kept[EXIT_N / 4];

static void run_then_exit(void *arg) {
    owned_run(arg);
    RLThreadExit();
}

static void *exit_inside_a_batch(void *unused) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    for (int i = 0; i < EXIT_N; i++) {
        void (*fn)(void *) = i == EXIT_AT ? run_then_exit : owned_run;
        assert_true(RLRunLoopPerformFunctionWithRelease(rl, kRLRunLoopDefaultMode, fn, &exit_owned[i], owned_release));
        if (i % 4 == 0)
            assert_true(RLRunLoopPerformFunctionWithRelease(rl, "elsewhere", owned_run, &exit_kept[i / 4],
                                                            owned_release));
    }
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 10, false);
    fail_msg("RLThreadExit returned");
    return NULL;
}

static void test_thread_exit_inside_a_long_batch_releases_everything_once(void **state) {
    memset(exit_owned, 0, sizeof exit_owned);
    memset(exit_kept, 0, sizeof exit_kept);
    rl_test_on_other_thread(exit_inside_a_batch, NULL);
    for (int i = 0; i < EXIT_N; i++) {
        assert_int_equal(atomic_load(&exit_owned[i].ran), i <= EXIT_AT ? 1 : 0);
        assert_int_equal(atomic_load(&exit_owned[i].released), 1);
    }
    for (int i = 0; i < EXIT_N / 4; i++) {
        assert_int_equal(atomic_load(&exit_kept[i].ran), 0);
        assert_int_equal(atomic_load(&exit_kept[i].released), 1);
    }
}

/* ---- several producers, several modes, a loop switching modes ---- */

enum { PRODUCERS = 4, PER_PRODUCER = 40000 };

typedef struct producer {
    RLRunLoopRef rl;
    lane lanes[2]; /* default, "PQ" */
    long issued[2];
    req *reqs;
    _Atomic bool *done;
} producer;

static void *produce(void *arg) {
    producer *p = arg;
    for (long i = 0; i < PER_PRODUCER; i++) {
        int m = (i % 3 == 0);
        req *r = &p->reqs[i];
        *r = (req){&p->lanes[m], p->issued[m]++};
        if (!RLRunLoopPerformFunction(p->rl, m ? "PQ" : kRLRunLoopDefaultMode, req_run, r))
            abort();
        RLRunLoopWakeUp(p->rl);
    }
    atomic_store(p->done, true);
    RLRunLoopWakeUp(p->rl);
    return NULL;
}

static void test_producers_into_two_modes(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef kd = rl_test_keep_mode(kRLRunLoopDefaultMode), kq = rl_test_keep_mode("PQ");
    producer ps[PRODUCERS];
    _Atomic bool done[PRODUCERS];
    pthread_t t[PRODUCERS];
    for (int k = 0; k < PRODUCERS; k++) {
        atomic_init(&done[k], false);
        ps[k] = (producer){.rl = rl, .done = &done[k]};
        ps[k].reqs = calloc(PER_PRODUCER, sizeof(req));
        assert_non_null(ps[k].reqs);
        assert_int_equal(pthread_create(&t[k], NULL, produce, &ps[k]), 0);
    }
    /* Alternate between the modes until every producer is done, then drain
     * both once more. */
    for (int round = 0;; round++) {
        bool all = true;
        for (int k = 0; k < PRODUCERS; k++)
            all = all && atomic_load(&done[k]);
        RLRunLoopRunInMode(round % 2 ? "PQ" : kRLRunLoopDefaultMode, 0.001, false);
        if (all && round % 2)
            break;
    }
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false);
    RLRunLoopRunInMode("PQ", 0, false);
    for (int k = 0; k < PRODUCERS; k++) {
        pthread_join(t[k], NULL);
        long nq = (PER_PRODUCER + 2) / 3;
        assert_int_equal(ps[k].lanes[1].ran, nq);
        assert_int_equal(ps[k].lanes[0].ran, PER_PRODUCER - nq);
        assert_int_equal(ps[k].lanes[0].disorder, 0);
        assert_int_equal(ps[k].lanes[1].disorder, 0);
        free(ps[k].reqs);
    }
    rl_test_unkeep(kd);
    rl_test_unkeep(kq);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_across_many_chunks_keep_order_per_mode),
        cmocka_unit_test(test_nested_run_sees_only_newer_requests),
        cmocka_unit_test(test_thread_exit_inside_a_long_batch_releases_everything_once),
        cmocka_unit_test(test_producers_into_two_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
