// RLAsyncChannel.swift — hands values from run-loop callouts (any thread)
// to one `async` consumer, for the overlay's async sequences.
//
// Unlike AsyncStream, a producer may merge a value into one still queued
// (signal counts add up the way the kernel coalesces a pending signal), so
// the queue stays as short as the number of distinct things it carries;
// and the consumer's end — a cancelled task, an iterator dropped after
// `break`, or `terminate()` — runs one cleanup closure exactly once.

/// A single-consumer queue from callouts to `async` code.
final class RLAsyncChannel<Element: Sendable>: @unchecked Sendable {
    private let mutex = ThreadsMutex()
    private var queue: [Element] = []
    private var head = 0
    private var finished = false
    private var failure: (any Error)?
    private var waiter: CheckedContinuation<Result<Element, any Error>?, Never>?
    private var onTermination: (@Sendable () -> Void)?

    /// `onTermination` runs once, on the thread that ends the channel
    /// (producer or consumer), with no lock held.
    init(onTermination: (@Sendable () -> Void)? = nil) {
        self.onTermination = onTermination
    }

    deinit {
        // A channel nobody ended (never iterated, or dropped with its
        // iterator) still cleans up after itself.
        onTermination?()
    }

    /// Queues `element`, or merges it into a queued one when `merge`
    /// returns true for it. False once the channel has ended (nothing is
    /// queued then).
    @discardableResult
    func send(_ element: Element, merge: ((inout Element) -> Bool)? = nil) -> Bool {
        let wake: CheckedContinuation<Result<Element, any Error>?, Never>? = mutex.locked {
            if finished { return nil }
            if let waiter {
                self.waiter = nil
                return waiter
            }
            if let merge {
                for index in head..<queue.count where merge(&queue[index]) { return nil }
            }
            queue.append(element)
            return nil
        }
        guard let wake else { return mutex.locked { !finished } }
        wake.resume(returning: .success(element))
        return true
    }

    /// Ends the channel: the consumer gets what is queued, then nil (or
    /// `error`, once).
    func finish(throwing error: (any Error)? = nil) {
        end(error)
    }

    /// Ends the channel from the consumer's side: nothing queued is
    /// delivered any more.
    func terminate() {
        end(nil, dropQueued: true)
    }

    private func end(_ error: (any Error)?, dropQueued: Bool = false) {
        let (wake, cleanup) = mutex.locked {
            () -> (CheckedContinuation<Result<Element, any Error>?, Never>?, (@Sendable () -> Void)?) in
            if dropQueued {
                queue = []
                head = 0
            }
            if !finished {
                finished = true
                failure = error
            }
            let wake = waiter
            waiter = nil
            let cleanup = onTermination
            onTermination = nil
            return (wake, cleanup)
        }
        cleanup?()
        if let wake { wake.resume(returning: takeEnd()) }
    }

    /// The next element, nil at the end, the error once. A cancelled task
    /// ends the channel.
    func next() async -> Result<Element, any Error>? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Element, any Error>?, Never>) in
                let ready: Result<Element, any Error>?? = mutex.locked {
                    if head < queue.count {
                        let element = queue[head]
                        head += 1
                        if head == queue.count {
                            queue.removeAll(keepingCapacity: true)
                            head = 0
                        }
                        return .some(.success(element))
                    }
                    if finished { return .some(takeEndLocked()) }
                    waiter = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            terminate()
        }
    }

    private func takeEnd() -> Result<Element, any Error>? {
        mutex.locked { takeEndLocked() }
    }

    private func takeEndLocked() -> Result<Element, any Error>? {
        guard let error = failure else { return nil }
        failure = nil
        return .failure(error)
    }

    var isFinished: Bool { mutex.locked { finished } }
}
