import Testing
import SwiftThreads

@Suite struct ConditionLockTests {
    @Test func conditionAndPlainLocking() {
        let lock = RLConditionLock(condition: 5, name: "stage")
        #expect(lock.condition == 5)
        #expect(lock.name == "stage")
        #expect(RLConditionLock().condition == 0)
        #expect(lock.lock())
        #expect(!lock.lock())
        #expect(lastCode == .wouldDeadlock)
        #expect(lock.unlock())
        #expect(lock.condition == 5)
        #expect(lock.tryLock())
        #expect(lock.unlock(withCondition: 9))
        #expect(lock.condition == 9)
        #expect(!lock.unlock())
        #expect(lastCode == .notLocked)
        #expect(!lock.unlock(withCondition: 1))
        #expect(lastCode == .notLocked)
        #expect(lock.condition == 9)
    }

    @Test func whenConditionForms() {
        let lock = RLConditionLock(condition: 1)
        #expect(lock.lock(whenCondition: 1))
        #expect(lock.unlock())
        #expect(!lock.tryLock(whenCondition: 2))
        #expect(lastCode == .invalidState)
        #expect(lock.tryLock(whenCondition: 1))
        let (took, code) = onOtherThread { (lock.tryLock(whenCondition: 1), lastCode) }
        #expect(!took)
        #expect(code == .busy)
        let (unlocked, ownerCode) = onOtherThread { (lock.unlock(withCondition: 3), lastCode) }
        #expect(!unlocked)
        #expect(ownerCode == .notOwner)
        #expect(lock.unlock(withCondition: 2))
        #expect(!lock.lock(whenCondition: 7, before: RLTime.now))
        #expect(lastCode == .timedOut)
        #expect(!lock.lock(whenCondition: 7, timeout: .milliseconds(1)))
        #expect(lastCode == .timedOut)
        // A timed-out wait leaves the lock free.
        #expect(onOtherThread { lock.tryLock() && lock.unlock() })
        #expect(lock.lock(whenCondition: 2, before: RLTime.distantFuture))
        #expect(!lock.lock(before: RLTime.now))
        #expect(lock.unlock())
        #expect(lock.lock(before: RLTime.now))
        #expect(lock.unlock())
    }

    @Test func withLockWhenConditionSetsTheNextCondition() {
        let lock = RLConditionLock(condition: 0)
        let r = lock.withLock(whenCondition: 0) { (result: "a", newCondition: 1) }
        #expect(r == "a")
        #expect(lock.condition == 1)
        #expect(throws: TestFailure.self) {
            try lock.withLock(whenCondition: 1) { () throws -> (result: Int, newCondition: Int) in
                throw TestFailure()
            }
        }
        #expect(lock.condition == 1)
        #expect(lock.tryLock())
        #expect(lock.unlock())
    }

    @Test func threadsRunInConditionOrder() {
        // Thread i waits for condition i and hands over to i+1: the order is
        // fixed whatever the scheduler does.
        let lock = RLConditionLock(condition: 0)
        let order = SharedBox<[Int]>([])
        let count = 8
        onThreads(count) { i in
            let me = count - 1 - i  // start them in reverse
            lock.lock(whenCondition: me)
            order.value.append(me)
            lock.unlock(withCondition: me + 1)
        }
        #expect(order.value == Array(0..<count))
        #expect(lock.condition == count)
    }
}

/// The guide's producer/consumer queue over a condition lock: `enqueue`
/// never blocks, `dequeue` blocks until there is an element, `tryDequeue`
/// never blocks.
final class ThreadSafeQueue<Element: Sendable>: @unchecked Sendable {
    // @unchecked: `items` is only touched with `lock` held.
    private static var noData: Int { 0 }
    private static var hasData: Int { 1 }
    private let lock = RLConditionLock(condition: ThreadSafeQueue.noData)
    private var items: [Element] = []
    private var head = 0

    func enqueue(_ element: Element) {
        lock.lock()
        items.append(element)
        lock.unlock(withCondition: Self.hasData)
    }

    func dequeue() -> Element {
        lock.lock(whenCondition: Self.hasData)
        let element = take()
        lock.unlock(withCondition: head < items.count ? Self.hasData : Self.noData)
        return element
    }

    func tryDequeue() -> Element? {
        guard lock.tryLock(whenCondition: Self.hasData) else { return nil }
        let element = take()
        lock.unlock(withCondition: head < items.count ? Self.hasData : Self.noData)
        return element
    }

    private func take() -> Element {
        let element = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
        return element
    }
}

@Suite struct ThreadSafeQueueTests {
    @Test func fifoOnOneThread() {
        let queue = ThreadSafeQueue<Int>()
        #expect(queue.tryDequeue() == nil)
        queue.enqueue(1)
        queue.enqueue(2)
        #expect(queue.dequeue() == 1)
        #expect(queue.tryDequeue() == 2)
        #expect(queue.tryDequeue() == nil)
    }

    @Test func producersAndConsumersExchangeEveryItemOnce() {
        let queue = ThreadSafeQueue<Int>()
        let producers = 4, consumers = 4, perProducer = 5_000
        let total = producers * perProducer
        // One box per consumer: threads never write the same variable.
        let received = (0..<consumers).map { _ in SharedBox<[Int]>([]) }
        onThreads(producers + consumers) { i in
            if i < producers {
                for k in 0..<perProducer { queue.enqueue(i * perProducer + k) }
            } else {
                var mine: [Int] = []
                // Blocking dequeue for a fixed share, tryDequeue for nothing
                // extra: every consumer takes exactly its share.
                for _ in 0..<(total / consumers) {
                    if let v = queue.tryDequeue() { mine.append(v) } else { mine.append(queue.dequeue()) }
                }
                received[i - producers].value = mine
            }
        }
        let all = received.flatMap { $0.value }
        #expect(all.count == total)
        #expect(Set(all).count == total)
        #expect(all.reduce(0, +) == (0..<total).reduce(0, +))
        // Each producer's items come out in the order it put them in.
        for consumer in received {
            for p in 0..<producers {
                let fromP = consumer.value.filter { $0 / perProducer == p }
                #expect(fromP == fromP.sorted())
            }
        }
        #expect(queue.tryDequeue() == nil)
    }
}
