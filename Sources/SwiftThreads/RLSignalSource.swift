internal import CRunLoop

/// One delivery of a watched Unix signal: its number and how many times it
/// arrived since the previous delivery.
///
/// A standard signal (`SIGINT`, `SIGUSR1`, …) sent again while it is still
/// pending merges into one in the kernel, so ``count`` is at least 1 and at
/// most the number sent; realtime signals (`SIGRTMIN`…`SIGRTMAX`, sent with
/// `sigqueue`) queue, so every one sent is counted.
public struct RLSignal: Sendable, Hashable, CustomStringConvertible {
    /// The signal number (`SIGINT`, `SIGTERM`, …).
    public let signal: Int32
    /// Deliveries merged into this one (at least 1).
    public let count: Int

    public init(signal: Int32, count: Int) {
        self.signal = signal
        self.count = count
    }

    public var description: String { "signal \(signal) ×\(count)" }
}

/// A Unix signal delivered as an ordinary run-loop callout
/// (`RLSignalSourceRef`; no Apple API has it — libdispatch's signal sources
/// are the nearest): no code runs in a signal handler; the loop reads the
/// signal from a `signalfd` and calls the closure on its own thread.
///
///     // First thing in main, before any thread is started:
///     let interrupt = try RLSignalSource(signal: SIGINT) { _, delivery in
///         print("interrupted \(delivery.count) time(s)")
///         RLRunLoop.main.stop()
///     }
///     RLRunLoop.main.add(interrupt, forMode: .default)
///     RLRunLoop.main.run()
///     interrupt.invalidate()
///
/// Add the source to the run loops and modes that should hear the signal;
/// several sources (in one loop or several) may watch the same signal, and
/// each sees every delivery. For `async` code, ``RLSignals`` is the same
/// thing as an `AsyncSequence`.
///
/// **The signal mask.** A `signalfd` only sees a signal that every thread
/// blocks; a thread that leaves it unblocked takes the signal itself (and,
/// while the signal is watched, ignores it: it is lost for the sources).
/// Making a source blocks its signal in the calling thread, and threads
/// started afterwards inherit that. So make the first source for a signal
/// on the main thread before starting other threads (`RLThread`, workers,
/// anything that calls `pthread_create`), or block the signal yourself in
/// threads that exist already. The worker threads of Swift's concurrency
/// pool (libdispatch) block every such signal. When the last source of a
/// signal is invalidated, the disposition from before the first one is
/// restored, and the signal is unblocked again in the invalidating thread
/// if the thread that made the first source had it unblocked before; a
/// delivery still pending then was sent while it was watched and is
/// dropped, not delivered with the restored disposition.
///
/// Not allowed (`RLError` `.invalidArgument`): `SIGKILL`, `SIGSTOP` (they
/// cannot be caught) and `SIGSEGV`, `SIGBUS`, `SIGFPE`, `SIGILL` (raised by
/// the faulting thread, which cannot wait for a run loop).
///
/// Lifetime: the source watches until it is invalidated (the loop holds
/// it); ``invalidate()`` it when done, which also frees the closure. Every
/// member may be used from any thread.
public final class RLSignalSource: @unchecked Sendable {
    /// The one C reference this wrapper owns.
    private let reference: OwnedRef
    var ref: RLSignalSourceRef { reference.pointer }
    private let box: SignalBox

    /// Starts watching `signal`; `handler` runs on the thread of each run
    /// loop the source is added to (``RLRunLoop/add(_:forMode:)``),
    /// with the deliveries since the previous call.
    ///
    /// - Throws: `RLError` `.invalidArgument` for a signal that cannot be
    ///   watched; the error of `signalfd(2)` otherwise.
    public init(signal: Int32,
                handler: @escaping @Sendable (RLSignalSource, RLSignal) -> Void) throws(RLError) {
        let box = SignalBox(handler: handler)
        let created = box.withContextInfo { info in
            var context = RLSignalSourceContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease,
                                                copyDescription: nil)
            return RLSignalSourceCreate(nil, signal, rlSignalCallout, &context)
        }
        guard let created else { throw RLError.last() }
        reference = OwnedRef(adopting: created)
        self.box = box
        box.owner = self
    }

    fileprivate init(retaining ref: RLSignalSourceRef, box: SignalBox) {
        reference = OwnedRef(retaining: ref)
        self.box = box
    }

    /// The watched signal.
    public var signal: Int32 { RLSignalSourceGetSignal(ref) }

    /// False once invalidated.
    public var isValid: Bool { RLSignalSourceIsValid(ref) }

    /// Stops watching: no callout after it returns (except one already
    /// running on another thread), the source leaves every run loop and the
    /// closure is freed; the last source of a signal restores its
    /// disposition and mask (see the type's discussion). Idempotent; may be
    /// called from the closure.
    @discardableResult
    public func invalidate() -> Bool {
        let done = RLSignalSourceInvalidate(ref)
        // The closure (and what it captured) goes now, not when the last
        // wrapper does.
        if done { box.clear() }
        return done
    }

    /// The source's run-loop source (one per signal source; `order` counts
    /// on the first call only), or nil once invalidated.
    /// ``RLRunLoop/add(_:forMode:)`` accepts the signal source directly.
    public func makeRunLoopSource(order: Int = 0) -> RLRunLoopSource? {
        guard let source = RLSignalSourceCreateRunLoopSource(nil, ref, RLIndex(order)) else { return nil }
        return RLRunLoopSource(adopting: source)
    }
}

extension RLSignalSource: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLSignalSource" }
}

extension RLSignalSource: RLRunLoopSchedulable {
    /// Through the source's run-loop source: its deliveries are handed to
    /// its closure on the loop's thread.
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        runLoop.membership(membership, of: makeRunLoopSource(), mode: mode)
    }
}

/// Unix signals as an `AsyncSequence` of ``RLSignal``s, read by a run loop.
///
///     // First thing in main, before any thread is started (see the mask
///     // rule in RLSignalSource):
///     let signals = try RLSignals([SIGINT, SIGTERM, SIGHUP], runLoop: worker.runLoop!)
///     for await delivery in signals {
///         if delivery.signal == SIGHUP { reload() } else { break }
///     }
///
/// Making the sequence makes one ``RLSignalSource`` per signal, on the
/// calling thread (so the calling thread's mask is what the mask rule of
/// ``RLSignalSource`` is about), and adds them to `runLoop` in `mode`: that
/// loop must be running for signals to arrive (a worker thread's loop, or
/// the main loop of a program that runs it). Signals that arrive before
/// the iteration starts wait for it.
///
/// A consumer slower than the signals does not make a queue grow: while a
/// delivery of a signal is waiting to be taken, later deliveries of the
/// same signal add to its ``RLSignal/count``, as the kernel merges a pending
/// signal.
///
/// The sequence is single-pass: one iteration takes every delivery. It ends
/// — its sources invalidated and removed from the loop — when the iterating
/// task is cancelled, when the loop is left (`break`, the iterator dropped),
/// on ``cancel()``, or, if it is never iterated, when it is dropped.
/// Ending it restores each signal's disposition as
/// ``RLSignalSource/invalidate()`` does, so end it on the thread that made
/// it (with ``cancel()``) where the mask matters.
public final class RLSignals: AsyncSequence, Sendable {
    public typealias Element = RLSignal
    public typealias Failure = Never

    private let channel: RLAsyncChannel<RLSignal>
    private let iterated = ThreadsMutexProtected(false)

    /// Starts watching `signals` (duplicates count once) on `runLoop` in
    /// `mode`.
    ///
    /// - Throws: `RLError` as ``RLSignalSource/init(signal:handler:)`` for
    ///   the first signal that cannot be watched (none is watched then), or
    ///   `.invalidArgument` for an empty list.
    public init(_ signals: [Int32], runLoop: RLRunLoop,
                mode: RLRunLoop.Mode = .default) throws(RLError) {
        guard !signals.isEmpty else {
            throw RLError(code: .invalidArgument, message: "RLSignals: no signal to watch")
        }
        var unique: [Int32] = []
        for signal in signals where !unique.contains(signal) { unique.append(signal) }
        let sources = SignalSources()
        let channel = RLAsyncChannel<RLSignal>(onTermination: { sources.invalidateAll() })
        for signal in unique {
            let source: RLSignalSource
            do {
                source = try RLSignalSource(signal: signal) { [weak channel] _, delivery in
                    // Merges into a queued delivery of the same signal.
                    channel?.send(delivery) { queued in
                        guard queued.signal == delivery.signal else { return false }
                        queued = RLSignal(signal: queued.signal, count: queued.count + delivery.count)
                        return true
                    }
                }
            } catch {
                sources.invalidateAll()
                channel.finish()
                throw error
            }
            sources.append(source)
            guard runLoop.add(source, forMode: mode) else {
                let error = RLError.last()
                sources.invalidateAll()
                channel.finish()
                throw error
            }
        }
        self.channel = channel
    }

    /// ``init(_:runLoop:mode:)`` with the signals listed.
    public convenience init(_ signals: Int32..., runLoop: RLRunLoop,
                            mode: RLRunLoop.Mode = .default) throws(RLError) {
        try self.init(signals, runLoop: runLoop, mode: mode)
    }

    deinit {
        // An iteration in progress owns the end (`for await … in try
        // RLSignals(…)` drops the sequence as soon as it has its iterator).
        if !iterated.withLock({ $0 }) { channel.terminate() }
    }

    /// Ends the sequence: its sources are invalidated, an iteration in
    /// progress ends after the deliveries already queued. Idempotent.
    public func cancel() {
        channel.finish()
    }

    /// The one iteration of the sequence (a second one ends at once).
    public func makeAsyncIterator() -> Iterator {
        let first = iterated.withLock { started -> Bool in
            defer { started = true }
            return !started
        }
        return Iterator(handle: first ? IterationHandle(channel: channel) : nil)
    }

    public struct Iterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = RLSignal
        public typealias Failure = Never

        fileprivate let handle: IterationHandle?

        /// The next delivery, or nil once the sequence has ended.
        public mutating func next() async -> RLSignal? {
            guard let handle, case .success(let delivery)? = await handle.channel.next() else { return nil }
            return delivery
        }
    }

    /// Ends the channel when the last copy of the iterator goes (a loop
    /// left with `break`).
    fileprivate final class IterationHandle: Sendable {
        let channel: RLAsyncChannel<RLSignal>
        init(channel: RLAsyncChannel<RLSignal>) { self.channel = channel }
        deinit { channel.terminate() }
    }
}

// MARK: - Support

/// The closure of one C signal source, shared by its Swift wrappers (which
/// keep it alive while a callout may still run) and the C source's context.
final class SignalBox: RLCallbackBox<RLSignalSource>, @unchecked Sendable {
    private let mutex = ThreadsMutex()
    private var _handler: (@Sendable (RLSignalSource, RLSignal) -> Void)?

    init(handler: @escaping @Sendable (RLSignalSource, RLSignal) -> Void) {
        _handler = handler
    }

    var handler: (@Sendable (RLSignalSource, RLSignal) -> Void)? { mutex.locked { _handler } }

    func clear() { mutex.locked { _handler = nil } }
}

/// The sources of one ``RLSignals``.
private final class SignalSources: Sendable {
    private let list = ThreadsMutexProtected<[RLSignalSource]>([])

    func append(_ source: RLSignalSource) { list.withLock { $0.append(source) } }

    func invalidateAll() {
        let sources = list.withLock { list -> [RLSignalSource] in
            defer { list = [] }
            return list
        }
        for source in sources { source.invalidate() }
    }
}

private func rlSignalCallout(_ source: RLSignalSourceRef?, _ signum: Int32, _ count: RLIndex,
                             _ info: UnsafeMutableRawPointer?) {
    guard let source, let info else { return }
    let box = SignalBox.from(info)
    guard let handler = box.handler else { return }
    handler(box.wrapper { RLSignalSource(retaining: source, box: box) }, RLSignal(signal: signum, count: Int(count)))
}
