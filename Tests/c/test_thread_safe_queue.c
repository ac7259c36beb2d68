/* test_thread_safe_queue.c — the guide's producer/consumer queue over an
 * RLConditionLock (NO_DATA / HAS_DATA): enqueue, blocking dequeue and
 * tryDequeue, with several producers and consumers; every item must be
 * received exactly once. */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { NO_DATA = 0, HAS_DATA = 1 };

typedef struct node {
    struct node *next;
    long value;
} node;

typedef struct ThreadSafeQueue {
    RLConditionLockRef lock;
    node *head, *tail;
} ThreadSafeQueue;

static void tsq_init(ThreadSafeQueue *q) {
    q->lock = RLConditionLockCreateWithCondition(NO_DATA);
    assert_non_null(q->lock);
    q->head = q->tail = NULL;
}

static void tsq_destroy(ThreadSafeQueue *q) {
    assert_null(q->head);
    assert_true(RLRelease(q->lock));
}

/* The producer needs no particular condition, only the lock. */
static void tsq_enqueue(ThreadSafeQueue *q, long value) {
    node *n = malloc(sizeof *n);
    assert_non_null(n);
    n->next = NULL;
    n->value = value;
    assert_true(RLConditionLockLock(q->lock));
    if (q->tail)
        q->tail->next = n;
    else
        q->head = n;
    q->tail = n;
    assert_true(RLConditionLockUnlockWithCondition(q->lock, HAS_DATA));
}

/* Called with the lock held and the queue non-empty. */
static long tsq_take_and_unlock(ThreadSafeQueue *q) {
    node *n = q->head;
    q->head = n->next;
    if (!q->head)
        q->tail = NULL;
    long value = n->value;
    free(n);
    assert_true(RLConditionLockUnlockWithCondition(q->lock, q->head ? HAS_DATA : NO_DATA));
    return value;
}

static long tsq_dequeue(ThreadSafeQueue *q) {
    assert_true(RLConditionLockLockWhenCondition(q->lock, HAS_DATA));
    return tsq_take_and_unlock(q);
}

static bool tsq_try_dequeue(ThreadSafeQueue *q, long *value) {
    if (!RLConditionLockTryLockWhenCondition(q->lock, HAS_DATA))
        return false;
    *value = tsq_take_and_unlock(q);
    return true;
}

static void test_single_thread_fifo(void **state) {
    ThreadSafeQueue q;
    tsq_init(&q);
    long v = 0;
    assert_false(tsq_try_dequeue(&q, &v));
    assert_rl_error(kRLErrorInvalidState); /* free, but NO_DATA */
    for (long i = 1; i <= 5; i++)
        tsq_enqueue(&q, i);
    RLIndex c;
    assert_true(RLConditionLockGetCondition(q.lock, &c));
    assert_int_equal(c, HAS_DATA);
    assert_true(tsq_try_dequeue(&q, &v));
    assert_int_equal(v, 1);
    for (long i = 2; i <= 5; i++)
        assert_int_equal(tsq_dequeue(&q), i);
    assert_true(RLConditionLockGetCondition(q.lock, &c));
    assert_int_equal(c, NO_DATA);
    assert_false(tsq_try_dequeue(&q, &v));
    RLErrorClear();
    tsq_destroy(&q);
}

enum { PRODUCERS = 3, BLOCKING_CONSUMERS = 2, TRYING_CONSUMERS = 2, CONSUMERS = BLOCKING_CONSUMERS + TRYING_CONSUMERS };
#define DONE_MARKER (-1L)

typedef struct shared {
    ThreadSafeQueue q;
    long per_producer;
    _Atomic int *seen; /* how often each value arrived */
    _Atomic long received;
} shared;

typedef struct role {
    shared *s;
    int index;
} role;

static void *producer(void *arg) {
    role *r = arg;
    for (long i = 0; i < r->s->per_producer; i++)
        tsq_enqueue(&r->s->q, r->index * r->s->per_producer + i);
    return NULL;
}

static void record(shared *s, long v) {
    atomic_fetch_add(&s->seen[v], 1);
    atomic_fetch_add(&s->received, 1);
}

static void *blocking_consumer(void *arg) {
    role *r = arg;
    for (;;) {
        long v = tsq_dequeue(&r->s->q);
        if (v == DONE_MARKER)
            return NULL;
        record(r->s, v);
    }
}

static void *trying_consumer(void *arg) {
    role *r = arg;
    for (;;) {
        long v;
        if (!tsq_try_dequeue(&r->s->q, &v)) {
            RLErrorClear();
            sched_yield(); /* the machine is shared: let producers run */
            continue;
        }
        if (v == DONE_MARKER)
            return NULL;
        record(r->s, v);
    }
}

static void test_producers_and_consumers(void **state) {
    shared s;
    tsq_init(&s.q);
    s.per_producer = rl_test_iters(100000);
    long total = PRODUCERS * s.per_producer;
    s.seen = calloc((size_t)total, sizeof *s.seen);
    assert_non_null(s.seen);
    atomic_init(&s.received, 0);

    pthread_t prod[PRODUCERS], cons[CONSUMERS];
    role roles[PRODUCERS + CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) {
        roles[PRODUCERS + i] = (role){&s, i};
        assert_int_equal(pthread_create(&cons[i], NULL, i < BLOCKING_CONSUMERS ? blocking_consumer : trying_consumer,
                                        &roles[PRODUCERS + i]),
                         0);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        roles[i] = (role){&s, i};
        assert_int_equal(pthread_create(&prod[i], NULL, producer, &roles[i]), 0);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(prod[i], NULL);
    /* One marker per consumer, queued after every real item. */
    for (int i = 0; i < CONSUMERS; i++)
        tsq_enqueue(&s.q, DONE_MARKER);
    for (int i = 0; i < CONSUMERS; i++)
        pthread_join(cons[i], NULL);

    assert_int_equal(atomic_load(&s.received), total);
    for (long v = 0; v < total; v++)
        if (atomic_load(&s.seen[v]) != 1)
            fail_msg("item %ld received %d times", v, atomic_load(&s.seen[v]));
    free(s.seen);
    tsq_destroy(&s.q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_thread_fifo),
        cmocka_unit_test(test_producers_and_consumers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
