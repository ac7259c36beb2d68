internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A thread's run loop: Foundation's `RunLoop` over the C `RLRunLoopRef`.
///
/// Every thread has exactly one run loop, created on first use of
/// ``current``. The object is `Sendable` because the C functions behind
/// everything except running are thread-safe: ``stop()``, ``wakeUp()``,
/// ``perform(inModes:block:)``, `add`/`remove`/`contains`, ``isWaiting``,
/// ``currentMode`` and ``allModes`` may be called from any thread, which is
/// how other threads hand work to a run-loop thread.
///
/// Running (``run()``, ``run(mode:before:)``, ``run(until:)``,
/// ``run(mode:for:returnAfterSourceHandled:)-(_,RLTimeInterval,_)``) only means something on the
/// loop's own thread: called on another thread's loop, the `run` forms do
/// nothing (`false`, or `RLError.Code.wrongThread` for the throwing form).
///
/// Identity: while any wrapper of a thread's loop is alive, ``current`` (and
/// the run loop handed to source callbacks) returns that same object, so
/// `===` works as with Foundation; `==` compares the underlying C loops.
public final class RLRunLoop: @unchecked Sendable {
    /// The one C reference this wrapper owns (see `wrapper(for:)`).
    private let reference: OwnedRef
    var ref: RLRunLoopRef { reference.pointer }

    private init(retaining ref: RLRunLoopRef) {
        reference = OwnedRef(retaining: ref)
    }

    deinit {
        // The last release (after this) may tear the loop down and call
        // back into Swift (source cancel callouts look wrappers up).
        RLRunLoop.registry.forget(RLRunLoop.key(ref))
    }

    // MARK: Wrapper registry (one Swift object per C loop while alive)

    private static let registry = RLWrapperRegistry<RLRunLoop, AnyObject>()

    private static func key(_ ref: RLRunLoopRef) -> UInt { RLWrapperRegistry<RLRunLoop, AnyObject>.key(ref) }

    /// The wrapper of `ref`, retaining it for the wrapper's lifetime.
    ///
    /// If the C loop can no longer be retained (it is being destroyed, e.g. a
    /// cancel callout during thread-exit teardown) the wrapper is not owning
    /// and not cached; it is only meaningful for the duration of the callout.
    static func wrapper(for ref: RLRunLoopRef) -> RLRunLoop {
        registry.wrapper(for: key(ref)) { _ in
            let loop = RLRunLoop(retaining: ref)
            return (loop, nil, loop.reference.owned)
        }
    }

    // MARK: Getting a run loop

    /// The calling thread's run loop (`RLRunLoopGetCurrent`), created on first
    /// use. It is torn down when its thread exits; a wrapper kept beyond that
    /// stays safe to call (calls then fail or find nothing to do).
    public static var current: RLRunLoop {
        guard let ref = RLRunLoopGetCurrent() else {
            fatalError("RLRunLoop.current: \(RLError.last())")
        }
        return wrapper(for: ref)
    }

    /// The main thread's run loop (`RLRunLoopGetMain`).
    ///
    /// As CoreFoundation's, it serves the main dispatch queue in its common
    /// modes: while the main thread runs it (``run(until:)``, or any run of
    /// the default or a common mode), `DispatchQueue.main` blocks,
    /// `Task { @MainActor in ... }` and `await MainActor.run { }` run there,
    /// and its default mode is never empty, so only ``stop()`` or the date
    /// end ``run(until:)``.
    public static var main: RLRunLoop {
        guard let ref = RLRunLoopGetMain() else {
            fatalError("RLRunLoop.main: \(RLError.last())")
        }
        return wrapper(for: ref)
    }

    var isCurrentThreadLoop: Bool {
        RLRunLoopGetCurrent() == ref
    }

    // MARK: Modes

    /// A run-loop mode name (`RLRunLoopMode`, Foundation's `RunLoop.Mode`).
    /// Modes are compared by their string.
    ///
    /// The two predefined modes have Foundation's names, as code written
    /// for Foundation expects: ``default`` is `"kCFRunLoopDefaultMode"` and
    /// ``common`` `"kCFRunLoopCommonModes"` — the C library's
    /// `kRLRunLoopDefaultMode` and `kRLRunLoopCommonModes`, whose names a
    /// mode made from them takes (`Mode("kRLRunLoopDefaultMode") == .default`).
    public struct Mode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String

        public init(rawValue: String) { self.rawValue = Mode.foundationName(of: rawValue) }
        public init(_ rawValue: String) { self.init(rawValue: rawValue) }

        /// `kRLRunLoopDefaultMode`, named `"kCFRunLoopDefaultMode"`.
        public static let `default` = Mode(rawValue: "kCFRunLoopDefaultMode")
        /// `kRLRunLoopCommonModes`, named `"kCFRunLoopCommonModes"`: the
        /// pseudo-mode standing for every common mode (see
        /// ``RLRunLoop/addCommonMode(_:)``). Items may be added to it; a
        /// loop cannot run in it.
        public static let common = Mode(rawValue: "kCFRunLoopCommonModes")

        public var description: String { rawValue }

        /// The name the C library knows the mode by.
        var cName: String {
            switch rawValue {
            case "kCFRunLoopDefaultMode": return String(cString: kRLRunLoopDefaultMode)
            case "kCFRunLoopCommonModes": return String(cString: kRLRunLoopCommonModes)
            default: return rawValue
            }
        }

        /// Foundation's name of a predefined mode given its C name.
        private static func foundationName(of name: String) -> String {
            if name == String(cString: kRLRunLoopDefaultMode) { return "kCFRunLoopDefaultMode" }
            if name == String(cString: kRLRunLoopCommonModes) { return "kCFRunLoopCommonModes" }
            return name
        }

        /// The C name, to `body`: a predefined mode's is the C library's
        /// constant (no string made: adding a timer to the default mode
        /// allocates nothing more, and its frames stay shallow on a loop
        /// thread's stack).
        func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
            switch rawValue {
            case "kCFRunLoopDefaultMode": return try body(kRLRunLoopDefaultMode)
            case "kCFRunLoopCommonModes": return try body(kRLRunLoopCommonModes)
            default: return try rawValue.withCString(body)
            }
        }
    }

    /// The mode the loop is running in, or nil when it is not running
    /// (`RLRunLoopCopyCurrentMode`).
    public var currentMode: Mode? {
        guard let cString = RLRunLoopCopyCurrentMode(ref) else { return nil }
        defer { _ = RLRelease(cString) }
        return Mode(rawValue: String(cString: cString))
    }

    /// Every mode the loop knows (`RLRunLoopCopyAllModes`).
    public var allModes: [Mode] {
        guard let array = RLRunLoopCopyAllModes(ref) else { return [] }
        defer { _ = RLRelease(UnsafeRawPointer(array)) }
        var modes: [Mode] = []
        for index in 0..<max(RLArrayGetCount(array), 0) {
            if let name = RLArrayGetValueAtIndex(array, index) {
                modes.append(Mode(rawValue: String(cString: name)))
            }
        }
        return modes
    }

    /// Makes `mode` common: everything added to ``Mode/common``, now or
    /// later, is also in `mode` (`RLRunLoopAddCommonMode`).
    @discardableResult
    public func addCommonMode(_ mode: Mode) -> Bool {
        mode.withCString { RLRunLoopAddCommonMode(ref, $0) }
    }

    // MARK: Running

    /// Why ``RLRunLoop/run(mode:for:returnAfterSourceHandled:)-(_,RLTimeInterval,_)`` returned
    /// (`RLRunLoopRunResult`, CoreFoundation's values).
    public enum RunResult: Int32, Sendable {
        /// kRLRunLoopRunFinished: the mode has no sources or timers.
        case finished = 1
        /// kRLRunLoopRunStopped: ``RLRunLoop/stop()`` was called.
        case stopped = 2
        /// kRLRunLoopRunTimedOut: the time limit passed.
        case timedOut = 3
        /// kRLRunLoopRunHandledSource: a source was handled and
        /// `returnAfterSourceHandled` was true.
        case handledSource = 4
    }

    /// Runs the loop in `mode` for at most `seconds` (`RLRunLoopRunInMode`;
    /// `seconds <= 0`: one pass without waiting). Must be called on the loop's
    /// own thread.
    ///
    /// - Throws: `RLError` with `.wrongThread` when this is not the calling
    ///   thread's loop; the C error for ``Mode/common``, an empty mode or a
    ///   NaN interval.
    @discardableResult
    @available(*, noasync, message: "runs the loop, blocking the thread; run loops belong to threads: use an RLWorkerThread (its TaskExecutor, run(_:)) or performAndWait(inModes:_:)")
    public func run(mode: Mode, for seconds: RLTimeInterval,
                    returnAfterSourceHandled: Bool = false) throws(RLError) -> RunResult {
        guard isCurrentThreadLoop else {
            throw RLError(code: .wrongThread,
                          message: "RLRunLoop.run: not the calling thread's run loop")
        }
        // A run that cannot start (a bad mode or interval) returns
        // kRLRunLoopRunFinished with the thread's error set: cleared first,
        // so that an older error is not taken for this call's.
        RLErrorClear()
        let code = mode.withCString { RLRunLoopRunInMode($0, seconds, returnAfterSourceHandled) }
        guard let result = RunResult(rawValue: code.rawValue) else { throw RLError.last() }
        if result == .finished && RLErrorGetLast().code.rawValue != 0 { throw RLError.last() }
        return result
    }

    /// ``run(mode:for:returnAfterSourceHandled:)`` with a `Duration`.
    @discardableResult
    @available(*, noasync, message: "runs the loop, blocking the thread; run loops belong to threads: use an RLWorkerThread (its TaskExecutor, run(_:)) or performAndWait(inModes:_:)")
    public func run(mode: Mode, for duration: Duration,
                    returnAfterSourceHandled: Bool = false) throws(RLError) -> RunResult {
        try run(mode: mode, for: duration.rlSeconds, returnAfterSourceHandled: returnAfterSourceHandled)
    }

    /// Foundation's `run(mode:before:)`: runs the loop once in `mode`,
    /// returning after the first source is handled or at `limitDate`.
    ///
    /// - Returns: false if the loop could not run — `mode` had no sources,
    ///   timers or queued requests when the call started, the mode is
    ///   invalid, or this is not the calling thread's loop; true otherwise,
    ///   Foundation's rule: also when the run handled the mode's last
    ///   one-shot timer and so ended with the mode empty, or was stopped.
    @discardableResult
    @available(*, noasync, message: "runs the loop, blocking the thread; run loops belong to threads: use an RLWorkerThread (its TaskExecutor, run(_:)) or performAndWait(inModes:_:)")
    public func run(mode: Mode, before limitDate: RLAbsoluteTime) -> Bool {
        guard isCurrentThreadLoop else { return false }
        if mode.withCString({ RLRunLoopIsFinished(ref, $0) }) { return false }
        return (try? run(mode: mode, for: limitDate - RLTime.now, returnAfterSourceHandled: true)) != nil
    }

    /// Runs the loop in the default mode until ``stop()`` is called or the
    /// default mode has no sources or timers left (`RLRunLoopRun`).
    ///
    /// Unlike Foundation's `RunLoop.run()`, which cannot be stopped, this
    /// returns on ``stop()`` (CoreFoundation's `CFRunLoopRun`). Does nothing
    /// when called on another thread's loop.
    @available(*, noasync, message: "runs the loop, blocking the thread; run loops belong to threads: use an RLWorkerThread (its TaskExecutor, run(_:)) or performAndWait(inModes:_:)")
    public func run() {
        guard isCurrentThreadLoop else { return }
        _ = RLRunLoopRun()
    }

    /// Runs the loop in the default mode until `limitDate`, ``stop()``, or
    /// until the default mode has no sources or timers left.
    ///
    /// Unlike Foundation, ``stop()`` ends the whole call (Foundation only
    /// ends one inner pass and keeps running). Does nothing when called on
    /// another thread's loop.
    @available(*, noasync, message: "runs the loop, blocking the thread; run loops belong to threads: use an RLWorkerThread (its TaskExecutor, run(_:)) or performAndWait(inModes:_:)")
    public func run(until limitDate: RLAbsoluteTime) {
        repeat {
            guard let result = try? run(mode: .default, for: limitDate - RLTime.now) else { return }
            switch result {
            case .finished, .stopped, .timedOut: return
            case .handledSource: break
            }
        } while limitDate > RLTime.now
    }

    /// Makes the innermost running `run` of this loop return
    /// ``RunResult/stopped``. As with CoreFoundation, a loop that is not
    /// running is not affected. Safe from any thread (`RLRunLoopStop`).
    @discardableResult
    public func stop() -> Bool { RLRunLoopStop(ref) }

    /// Wakes the loop if it is waiting; coalesced. Safe from any thread
    /// (`RLRunLoopWakeUp`).
    @discardableResult
    public func wakeUp() -> Bool { RLRunLoopWakeUp(ref) }

    /// True while the loop is blocked waiting for an event.
    public var isWaiting: Bool { RLRunLoopIsWaiting(ref) }

    /// The earliest fire date of the valid timers in `mode`, or nil if there
    /// are none (`RLRunLoopGetNextTimerFireDate`; Foundation's
    /// `limitDate(forMode:)` without running anything).
    public func nextTimerFireDate(in mode: Mode) -> RLAbsoluteTime? {
        let date = mode.withCString { RLRunLoopGetNextTimerFireDate(ref, $0) }
        return date == 0 ? nil : date
    }

    // MARK: Perform

    /// Queues `block` to run once on the loop's thread, the next time the
    /// loop runs in one of `modes` (FIFO). Safe from any thread. Like
    /// Foundation (and CF), this does not wake the loop: call ``wakeUp()``.
    ///
    /// With several modes the block is queued once and runs once, in
    /// whichever of them the loop runs first (`RLRunLoopPerformBlockInModes`).
    ///
    /// - Returns: false if `modes` is empty or a mode is invalid.
    @discardableResult
    public func perform(inModes modes: [Mode], block: @escaping @Sendable () -> Void) -> Bool {
        rlWithModeList(modes) { list in RLRunLoopPerformBlockInModes(ref, list, modes.count, block) }
    }

    /// Queues `block` in the common modes (Foundation's `perform(_:)`).
    @discardableResult
    public func perform(_ block: @escaping @Sendable () -> Void) -> Bool {
        perform(inModes: [.common], block: block)
    }

    /// Runs `body` on the loop's thread (in `modes`), wakes the loop, and
    /// suspends until it has run, returning its result or rethrowing its
    /// error.
    ///
    /// The loop's thread must be running the loop in one of `modes`; if the
    /// loop is torn down (its thread exits) before running `body`, this
    /// throws `RLError` with `.invalidState`. Never `await` this for the
    /// calling thread's own loop from code that blocks that thread.
    @discardableResult
    public func performAndWait<T: Sendable>(inModes modes: [Mode] = [.common],
                                            _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await AsyncPerformRequest.outcome(
            of: body, unrunMessage: "RLRunLoop.performAndWait: the run loop was torn down before the work ran"
        ) { request in
            if perform(inModes: modes, block: { request.run() }) {
                wakeUp()
            } else {
                request.fail(RLError.last())
            }
        }
    }

    // MARK: Timers, observers, sources, ports

    /// What `add`, `remove` and `contains` ask of an ``RLRunLoopSchedulable``.
    public enum Membership: Sendable, Hashable {
        /// Put the object in the mode (`add(_:forMode:)`).
        case add
        /// Take it out of the mode (`remove(_:forMode:)`).
        case remove
        /// Whether it is in the mode (`contains(_:forMode:)`).
        case contains
    }

    /// Adds `item` — a timer, observer, source, file-descriptor source,
    /// socket, signal source, port or message port — to `mode` (or to every
    /// common mode, for ``Mode/common``). Safe from any thread.
    ///
    /// Each kind's rules are those of its type: a timer belongs to one run
    /// loop at a time (adding it to another, or adding an invalidated one,
    /// fails); a source's schedule callback runs on the calling thread; a
    /// port's ``RLPort/schedule(in:forMode:)`` is called as in Foundation;
    /// an object that is scheduled through its run-loop source (descriptor,
    /// socket, signal and message port) is refused once invalidated, and a
    /// remote message or socket port is refused.
    ///
    /// - Returns: false on misuse, with `RLError.last()` saying why.
    @discardableResult
    public func add(_ item: some RLRunLoopSchedulable, forMode mode: Mode) -> Bool {
        item.runLoopMembership(.add, in: self, mode: mode)
    }

    /// Removes `item` from `mode`. Removing what is not there is harmless.
    ///
    /// - Returns: false on misuse (an invalid object or mode), with
    ///   `RLError.last()` saying why.
    @discardableResult
    public func remove(_ item: some RLRunLoopSchedulable, forMode mode: Mode) -> Bool {
        item.runLoopMembership(.remove, in: self, mode: mode)
    }

    /// Whether `item` is in `mode` of this loop.
    public func contains(_ item: some RLRunLoopSchedulable, forMode mode: Mode) -> Bool {
        item.runLoopMembership(.contains, in: self, mode: mode)
    }

    /// `membership` for an object scheduled through its run-loop source
    /// (false, without a source: the object is invalid or remote).
    func membership(_ membership: Membership, of source: RLRunLoopSource?, mode: Mode) -> Bool {
        source?.runLoopMembership(membership, in: self, mode: mode) ?? false
    }
}

/// What a run loop can hold in its modes, and so what
/// ``RLRunLoop/add(_:forMode:)``, ``RLRunLoop/remove(_:forMode:)`` and
/// ``RLRunLoop/contains(_:forMode:)`` take: ``RLTimer``, ``RLObserver``,
/// ``RLRunLoopSource``, ``RLFileDescriptorSource``, ``RLSocket``,
/// ``RLSignalSource``, ``RLPort`` (and ``RLSocketPort``) and
/// ``RLMessagePort``.
///
/// Code that schedules several kinds alike can take
/// `some RLRunLoopSchedulable` or `[any RLRunLoopSchedulable]`. A type of
/// your own conforms by forwarding to an object that does (the loop holds
/// C objects only).
public protocol RLRunLoopSchedulable: AnyObject, Sendable {
    /// Carries out `membership` for this object in `mode` of `runLoop`:
    /// what ``RLRunLoop/add(_:forMode:)`` (`.add`), `remove` and `contains`
    /// call; call those rather than this.
    func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                           mode: RLRunLoop.Mode) -> Bool
}

extension RLTimer: RLRunLoopSchedulable {
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        mode.withCString { name in
            switch membership {
            case .add: RLRunLoopAddTimer(runLoop.ref, ref, name)
            case .remove: RLRunLoopRemoveTimer(runLoop.ref, ref, name)
            case .contains: RLRunLoopContainsTimer(runLoop.ref, ref, name)
            }
        }
    }
}

extension RLObserver: RLRunLoopSchedulable {
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        mode.withCString { name in
            switch membership {
            case .add: RLRunLoopAddObserver(runLoop.ref, ref, name)
            case .remove: RLRunLoopRemoveObserver(runLoop.ref, ref, name)
            case .contains: RLRunLoopContainsObserver(runLoop.ref, ref, name)
            }
        }
    }
}

extension RLRunLoopSource: RLRunLoopSchedulable {
    /// Its schedule callback runs on this (the calling) thread the first
    /// time it enters a mode of the loop.
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        mode.withCString { name in
            switch membership {
            case .add: RLRunLoopAddSource(runLoop.ref, ref, name)
            case .remove: RLRunLoopRemoveSource(runLoop.ref, ref, name)
            case .contains: RLRunLoopContainsSource(runLoop.ref, ref, name)
            }
        }
    }
}

extension RLFileDescriptorSource: RLRunLoopSchedulable {
    /// Through the descriptor's run-loop source.
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        runLoop.membership(membership, of: makeRunLoopSource(), mode: mode)
    }
}

extension RLMessagePort: RLRunLoopSchedulable {
    /// Through the local port's run-loop source: its requests are answered
    /// on the loop's thread. False (with `RLError.last()`) for a remote or
    /// invalid port.
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        runLoop.membership(membership, of: makeRunLoopSource(), mode: mode)
    }
}

extension RLRunLoop: Hashable {
    /// Two wrappers are equal when they wrap the same C run loop.
    public static func == (lhs: RLRunLoop, rhs: RLRunLoop) -> Bool { lhs.ref == rhs.ref }
    public func hash(into hasher: inout Hasher) { hasher.combine(RLRunLoop.key(ref)) }
}

extension RLRunLoop: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLRunLoop" }
}

/// `RLCopyDescription` as a Swift string (the C string is freed).
func rlCopyDescription(_ object: UnsafeRawPointer) -> String? {
    guard let cString = RLCopyDescription(object) else { return nil }
    defer { free(cString) }
    return String(cString: cString)
}


