internal import CRunLoop

/// Runs an initializer exactly once, however many threads ask
/// (`pthread_once`, `dispatch_once`), over C's `RLOnceToken`.
///
///     static let setUp = RLOnce()
///     setUp.perform { loadTables() }
///
/// The first caller runs `body` on its own thread; concurrent callers sleep
/// until it has finished and then see everything it wrote. Later calls cost
/// one load and never run their body.
public final class RLOnce: @unchecked Sendable {
    // @unchecked: the token is only touched through RLOnceRun, which is
    // thread-safe; its address never changes.
    private let token: UnsafeMutablePointer<RLOnceToken>

    public init() {
        token = .allocate(capacity: 1)
        token.initialize(to: RLOnceToken(rl_state: 0, rl_runner: 0))
    }

    deinit {
        token.deinitialize(count: 1)
        token.deallocate()
    }

    /// Runs `body` unless this once already ran; returns when it has run
    /// (here or on another thread): `true`. `false` with `.wouldDeadlock`
    /// when called from inside its own `body` (which would wait for itself).
    ///
    /// A `body` that throws still counts as the one run; its error is
    /// rethrown to this caller only.
    @discardableResult
    public func perform<E: Error>(_ body: () throws(E) -> Void) throws(E) -> Bool {
        var failure: E?
        let ran = withoutActuallyEscaping(body) { body in
            var call: () -> Void = {
                do throws(E) { try body() } catch { failure = error }
            }
            return withUnsafeMutablePointer(to: &call) { callPtr in
                RLOnceRun(token, { context in
                    context!.assumingMemoryBound(to: (() -> Void).self).pointee()
                }, callPtr)
            }
        }
        if let failure { throw failure }
        return ran
    }
}
