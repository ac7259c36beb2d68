internal import CRunLoop

/// The lock-order (potential deadlock) detector over C's `RLLockDebug…`
/// functions: with it on, every RL lock records the order in which threads
/// take locks, and a lock-order inversion that could deadlock (A then B
/// here, B then A elsewhere) is reported once, even when the run itself
/// did not deadlock. Off by default; `RL_LOCK_DEBUG=1` in the environment
/// or `RLLockDebug.isEnabled = true` turns it on.
///
/// Acquisitions made through the Swift wrappers are located at the wrapper
/// method (the C library sees its caller's return address), so a Swift
/// report tells locks apart by their names: name the locks you care about.
public enum RLLockDebug {
    /// Whether the detector runs (`RLLockDebugSetEnabled` / `IsEnabled`).
    public static var isEnabled: Bool {
        get { RLLockDebugIsEnabled() }
        set { RLLockDebugSetEnabled(newValue) }
    }

    /// Inversions reported since start or the last `reset()`.
    public static var reportCount: Int { RLLockDebugGetReportCount() }

    /// Forgets every recorded order, reported pair and the report count
    /// (`RLLockDebugReset`). For tests.
    public static func reset() { RLLockDebugReset() }

    /// Forgets the order edges of an object used with `synchronized`, whose
    /// address may be reused once it is freed (`RLLockDebugForgetLock`).
    @discardableResult
    public static func forget(_ object: AnyObject) -> Bool {
        RLLockDebugForgetLock(RLSync.address(of: object))
    }

    /// One reported inversion: the reporting thread holds `heldLockName`
    /// and is taking `acquiringLockName`, while an earlier acquisition took
    /// them (through `pathLength` order edges) the other way round.
    public struct Report: Sendable {
        public let heldLockName: String
        public let heldLockWhere: String
        public let acquiringLockName: String
        public let acquiringLockWhere: String
        public let pathLength: Int
        /// The full text the detector prints to stderr without a handler.
        public let description: String
    }

    /// Sends reports to `handler` (on the thread that provoked each one)
    /// instead of stderr; `nil` restores stderr.
    public static func setReportHandler(_ handler: (@Sendable (Report) -> Void)?) {
        // One permanent C trampoline reads the current closure under the
        // overlay's lock (Plumbing.swift; not an RL lock), so replacing
        // the handler never frees a closure a report is still running.
        let install = handlerStore.withLock { current -> Bool in
            current = handler
            return handler != nil
        }
        if install {
            RLLockDebugSetReportHandler({ report, _ in
                guard let report else { return }
                RLLockDebug.deliver(report.pointee)
            }, nil)
        } else {
            RLLockDebugSetReportHandler(nil, nil)
        }
    }

    private static let handlerStore = ThreadsMutexProtected<(@Sendable (Report) -> Void)?>(nil)

    private static func deliver(_ r: RLLockDebugReport) {
        guard let handler = handlerStore.withLock({ $0 }) else { return }
        func text(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
        handler(Report(heldLockName: text(r.heldLockName),
                       heldLockWhere: text(r.heldLockWhereSymbol),
                       acquiringLockName: text(r.acquiringLockName),
                       acquiringLockWhere: text(r.acquiringLockWhereSymbol),
                       pathLength: Int(r.pathLength),
                       description: text(r.description)))
    }
}
