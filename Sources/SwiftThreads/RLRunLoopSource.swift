internal import CRunLoop

/// A run-loop input source (`RLRunLoopSourceRef`): a custom, signalled
/// (version-0) source backed by closures, or the source of an
/// ``RLFileDescriptorSource``.
///
/// A custom source is the guide's "custom input source": another thread
/// calls ``signal()`` and then `RLRunLoop.wakeUp()` on the loop; the loop
/// calls `perform` on its own thread the next time it runs in a mode that
/// contains the source. A signal is kept until then.
///
/// The closures may run on several threads (schedule on the adding thread,
/// perform on the loop's thread, cancel on the removing or exiting thread),
/// so they are `@Sendable`. They are freed when the source is gone from every
/// run loop and you drop it; capture the source itself only weakly.
public final class RLRunLoopSource: @unchecked Sendable {
    /// The one C reference this wrapper owns.
    private let reference: OwnedRef
    var ref: RLRunLoopSourceRef { reference.pointer }

    /// Creates a custom source.
    ///
    /// - Parameters:
    ///   - order: sources with a lower order are performed first.
    ///   - schedule: called on the adding thread when the source is added to
    ///     a mode of a run loop.
    ///   - cancel: called when the source is removed from a mode, invalidated
    ///     while scheduled, or the loop's thread exits.
    ///   - perform: called on the loop's thread once per signal.
    public init(order: Int = 0,
                schedule: (@Sendable (RLRunLoop, RLRunLoop.Mode) -> Void)? = nil,
                cancel: (@Sendable (RLRunLoop, RLRunLoop.Mode) -> Void)? = nil,
                perform: @escaping @Sendable () -> Void) {
        let box = SourceBox(schedule: schedule, cancel: cancel, perform: perform)
        let created = box.withContextInfo { info in
            var context = RLRunLoopSourceContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease,
                                                 copyDescription: nil, equal: nil, hash: nil,
                                                 schedule: rlSourceSchedule, cancel: rlSourceCancel,
                                                 perform: rlSourcePerform)
            return RLRunLoopSourceCreate(nil, RLIndex(order), &context)
        }
        guard let created else { fatalError("RLRunLoopSource: \(RLError.last())") }
        reference = OwnedRef(adopting: created)
    }

    /// Takes over one reference the caller owns (Create rule).
    init(adopting ref: RLRunLoopSourceRef) {
        reference = OwnedRef(adopting: ref)
    }

    /// Sources with a lower order are performed first.
    public var order: Int { Int(RLRunLoopSourceGetOrder(ref)) }

    public var isValid: Bool { RLRunLoopSourceIsValid(ref) }

    /// Marks the source ready to perform. Safe from any thread. Does not wake
    /// the loop: call `RLRunLoop.wakeUp()` afterwards, as with CoreFoundation.
    @discardableResult
    public func signal() -> Bool { RLRunLoopSourceSignal(ref) }

    /// Removes the source from every run loop and mode (calling `cancel`) and
    /// makes it unusable. Idempotent.
    @discardableResult
    public func invalidate() -> Bool { RLRunLoopSourceInvalidate(ref) }
}

extension RLRunLoopSource: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLRunLoopSource" }
}

/// A custom source's closures (its wrapper is never needed by them).
final class SourceBox: RLCallbackBox<RLRunLoopSource>, @unchecked Sendable {
    let schedule: (@Sendable (RLRunLoop, RLRunLoop.Mode) -> Void)?
    let cancel: (@Sendable (RLRunLoop, RLRunLoop.Mode) -> Void)?
    let perform: @Sendable () -> Void

    init(schedule: (@Sendable (RLRunLoop, RLRunLoop.Mode) -> Void)?,
         cancel: (@Sendable (RLRunLoop, RLRunLoop.Mode) -> Void)?,
         perform: @escaping @Sendable () -> Void) {
        self.schedule = schedule
        self.cancel = cancel
        self.perform = perform
    }
}

private func sourceBox(_ info: UnsafeMutableRawPointer?) -> SourceBox? {
    info.map { SourceBox.from($0) }
}

private func rlSourceSchedule(_ info: UnsafeMutableRawPointer?, _ rl: RLRunLoopRef?,
                              _ mode: UnsafePointer<CChar>?) {
    guard let box = sourceBox(info), let schedule = box.schedule, let rl, let mode else { return }
    schedule(RLRunLoop.wrapper(for: rl), RLRunLoop.Mode(rawValue: String(cString: mode)))
}

private func rlSourceCancel(_ info: UnsafeMutableRawPointer?, _ rl: RLRunLoopRef?,
                            _ mode: UnsafePointer<CChar>?) {
    guard let box = sourceBox(info), let cancel = box.cancel, let rl, let mode else { return }
    cancel(RLRunLoop.wrapper(for: rl), RLRunLoop.Mode(rawValue: String(cString: mode)))
}

private func rlSourcePerform(_ info: UnsafeMutableRawPointer?) {
    sourceBox(info)?.perform()
}
