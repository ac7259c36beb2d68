/*
 * producer_consumer.c — the tutorial's ThreadSafeQueue over a condition lock
 * (NSConditionLock), in C.
 *
 * The queue's RLConditionLock carries one of two conditions: kNoData or
 * kHasData. The three operations:
 *   enqueue      take the lock whatever the condition, add, and unlock
 *                with kHasData — always succeeds;
 *   dequeue      wait until the lock is free *and* the condition is
 *                kHasData, take the first element, unlock with kHasData if
 *                any remain, else kNoData — blocks while the queue is empty;
 *   tryDequeue   take the lock only if it is free right now; if the
 *                condition is kHasData take the first element — never blocks,
 *                reports "nothing" when the queue is empty or busy.
 *
 * Part 1 is the tutorial's run: the main thread enqueues 0..4, a second
 * thread dequeues five times and has to wait for each value.
 * Part 2 puts several producers and consumers (two blocking, one polling
 * with tryDequeue) on one queue and checks that every item arrived once.
 */
#include "example_support.h"

enum { kNoData = 0, kHasData = 1 };

/* ---- the queue ---- */

typedef struct ThreadSafeQueue {
    RLConditionLockRef lock; /* guards everything below */
    long *elements;          /* a ring buffer */
    size_t capacity, head, count;
} ThreadSafeQueue;

static void queue_init(ThreadSafeQueue *q) {
    q->lock = RLConditionLockCreateWithCondition(kNoData);
    EXAMPLE_CHECK(q->lock != NULL);
    EXAMPLE_CHECK(RLConditionLockSetName(q->lock, "ThreadSafeQueue"));
    q->capacity = 16;
    q->elements = malloc(q->capacity * sizeof *q->elements);
    q->head = q->count = 0;
}

static void queue_destroy(ThreadSafeQueue *q) {
    EXAMPLE_CHECK(RLRelease(q->lock));
    free(q->elements);
}

/* Call with the lock held. */
static void queue_push_locked(ThreadSafeQueue *q, long value) {
    if (q->count == q->capacity) {
        long *grown = malloc(2 * q->capacity * sizeof *grown);
        for (size_t i = 0; i < q->count; i++) grown[i] = q->elements[(q->head + i) % q->capacity];
        free(q->elements);
        q->elements = grown;
        q->head = 0;
        q->capacity *= 2;
    }
    q->elements[(q->head + q->count) % q->capacity] = value;
    q->count++;
}

/* Call with the lock held and count > 0. */
static long queue_pop_locked(ThreadSafeQueue *q) {
    long value = q->elements[q->head];
    q->head = (q->head + 1) % q->capacity;
    q->count--;
    return value;
}

static void enqueue(ThreadSafeQueue *q, long value) {
    EXAMPLE_CHECK(RLConditionLockLock(q->lock));
    queue_push_locked(q, value);
    EXAMPLE_CHECK(RLConditionLockUnlockWithCondition(q->lock, kHasData));
}

static long dequeue(ThreadSafeQueue *q) {
    EXAMPLE_CHECK(RLConditionLockLockWhenCondition(q->lock, kHasData));
    long value = queue_pop_locked(q);
    EXAMPLE_CHECK(RLConditionLockUnlockWithCondition(q->lock, q->count > 0 ? kHasData : kNoData));
    return value;
}

/* True and *value set if an element was taken; false at once otherwise. */
static bool try_dequeue(ThreadSafeQueue *q, long *value) {
    if (!RLConditionLockTryLock(q->lock)) return false; /* busy: someone else is in */
    bool taken = false;
    RLIndex condition = kNoData;
    EXAMPLE_CHECK(RLConditionLockGetCondition(q->lock, &condition));
    if (condition == kHasData) {
        *value = queue_pop_locked(q);
        taken = true;
    }
    EXAMPLE_CHECK(RLConditionLockUnlockWithCondition(q->lock, q->count > 0 ? kHasData : kNoData));
    return taken;
}

/* ---- part 1: the tutorial's run ---- */

static ThreadSafeQueue part1_queue;

static void *part1_consumer(void *arg) {
    for (int i = 0; i < 5; i++) {
        printf("dequeue -%ld\n", dequeue(&part1_queue));
        RLThreadSleepForTimeInterval(0.001);
    }
    return NULL;
}

static void part1(void) {
    printf("--- part 1: main enqueues 0..4, one thread dequeues (it waits while the queue is empty) ---\n");
    queue_init(&part1_queue);
    RLThreadRef consumer = RLThreadCreate(NULL, part1_consumer, NULL);
    EXAMPLE_CHECK(consumer != NULL);
    EXAMPLE_CHECK(RLThreadSetJoinable(consumer, true));
    EXAMPLE_CHECK(RLThreadStart(consumer));
    for (long i = 0; i < 5; i++) {
        enqueue(&part1_queue, i);
        printf("enqueue +%ld\n", i);
        RLThreadSleepForTimeInterval(0.001);
    }
    EXAMPLE_CHECK(RLThreadJoin(consumer, NULL));
    RLRelease(consumer);
    queue_destroy(&part1_queue);
}

/* ---- part 2: several producers and consumers ---- */

enum { kProducers = 3, kBlockingConsumers = 2, kItemsPerProducer = 2000 };
#define kStop (-1L) /* one per consumer, after all items: "no more work" */

typedef struct Consumer {
    ThreadSafeQueue *queue;
    int id;
    bool polling;                    /* uses tryDequeue instead of dequeue */
    long received, sum, emptyPolls;
    long lastSeen[kProducers];       /* last item seen from each producer */
    bool inOrder;                    /* items of each producer arrived in order */
} Consumer;

typedef struct Producer {
    ThreadSafeQueue *queue;
    int id;
} Producer;

/* Producer p makes items p*N+1 ... p*N+N: all distinct, their total known. */
static void *produce(void *arg) {
    Producer *producer = arg;
    for (long i = 1; i <= kItemsPerProducer; i++) enqueue(producer->queue, (long)producer->id * kItemsPerProducer + i);
    return NULL;
}

static void consume_item(Consumer *consumer, long item) {
    int from = (int)((item - 1) / kItemsPerProducer);
    /* One queue is FIFO and one consumer takes items one after another, so
     * the items it gets from any one producer must come in that producer's
     * order. */
    if (item <= consumer->lastSeen[from]) consumer->inOrder = false;
    consumer->lastSeen[from] = item;
    consumer->received++;
    consumer->sum += item;
}

static void *consume(void *arg) {
    Consumer *consumer = arg;
    for (;;) {
        long item;
        if (consumer->polling) {
            if (!try_dequeue(consumer->queue, &item)) {
                /* Nothing there (or the lock was busy): do something else
                 * for a moment and look again. */
                consumer->emptyPolls++;
                RLThreadSleepForTimeInterval(0.0002);
                continue;
            }
        } else {
            item = dequeue(consumer->queue);
        }
        if (item == kStop) return NULL;
        consume_item(consumer, item);
    }
}

static void part2(void) {
    enum { kConsumers = kBlockingConsumers + 1 };
    printf("--- part 2: %d producers x %d items, %d blocking consumers + 1 polling with tryDequeue ---\n", kProducers,
           kItemsPerProducer, kBlockingConsumers);
    ThreadSafeQueue queue;
    queue_init(&queue);

    Consumer consumers[kConsumers];
    RLThreadRef consumerThreads[kConsumers];
    for (int c = 0; c < kConsumers; c++) {
        consumers[c] = (Consumer){.queue = &queue, .id = c, .polling = c == kBlockingConsumers, .inOrder = true};
        consumerThreads[c] = RLThreadCreate(NULL, consume, &consumers[c]);
        EXAMPLE_CHECK(consumerThreads[c] != NULL);
        EXAMPLE_CHECK(RLThreadSetJoinable(consumerThreads[c], true));
        EXAMPLE_CHECK(RLThreadStart(consumerThreads[c]));
    }
    Producer producers[kProducers];
    RLThreadRef producerThreads[kProducers];
    for (int p = 0; p < kProducers; p++) {
        producers[p] = (Producer){.queue = &queue, .id = p};
        producerThreads[p] = RLThreadCreate(NULL, produce, &producers[p]);
        EXAMPLE_CHECK(producerThreads[p] != NULL);
        EXAMPLE_CHECK(RLThreadSetJoinable(producerThreads[p], true));
        EXAMPLE_CHECK(RLThreadStart(producerThreads[p]));
    }
    for (int p = 0; p < kProducers; p++) {
        EXAMPLE_CHECK(RLThreadJoin(producerThreads[p], NULL));
        RLRelease(producerThreads[p]);
    }
    /* Every item is queued; one stop marker per consumer ends them. */
    for (int c = 0; c < kConsumers; c++) enqueue(&queue, kStop);
    for (int c = 0; c < kConsumers; c++) {
        EXAMPLE_CHECK(RLThreadJoin(consumerThreads[c], NULL));
        RLRelease(consumerThreads[c]);
    }

    long produced = (long)kProducers * kItemsPerProducer;
    long expectedSum = produced * (produced + 1) / 2;
    long received = 0, sum = 0;
    bool inOrder = true;
    for (int c = 0; c < kConsumers; c++) {
        printf("consumer %d (%s): %ld items", c, consumers[c].polling ? "tryDequeue" : "dequeue",
               consumers[c].received);
        if (consumers[c].polling) printf(", found the queue empty or busy %ld times", consumers[c].emptyPolls);
        printf("\n");
        received += consumers[c].received;
        sum += consumers[c].sum;
        inOrder = inOrder && consumers[c].inOrder;
    }
    printf("produced %ld items, sum %ld\n", produced, expectedSum);
    printf("consumed %ld items, sum %ld\n", received, sum);
    printf("every consumer saw each producer's items in order: %s\n", inOrder ? "yes" : "NO");
    bool ok = received == produced && sum == expectedSum && inOrder && queue.count == 0;
    printf("totals match: %s\n", ok ? "yes" : "NO");
    queue_destroy(&queue);
    if (!ok) exit(1);
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    printf("producer_consumer: ThreadSafeQueue over RLConditionLock (%s pace)\n", example_pace_name());
    part1();
    part2();
    return 0;
}
