internal import CRunLoop

/// A timer that calls a closure on a run loop: Foundation's block-based
/// `Timer` over `RLRunLoopTimerRef`.
///
/// Differences from Foundation on Linux, on purpose:
/// - it never fires at creation: the first fire is at its fire date;
/// - it does not leak: invalidating it (or removing it from its run loop)
///   and dropping the last reference frees the closure and everything it
///   captured;
/// - ``tolerance`` works (the timer fires within
///   `[fireDate, fireDate + tolerance]`; at most half the interval for a
///   repeating timer) and lets the loop coalesce wake-ups.
///
/// A repeating timer stays on its grid `fireDate + k * interval`; after a
/// late or missed fire it fires once and continues at the next grid point.
///
/// The closure runs on the thread of the run loop the timer is in, so it is
/// `@Sendable`. A scheduled timer is retained by its run loop: keeping the
/// returned object is only needed to invalidate or adjust it later. The
/// `RLTimer` passed to the closure is the object you created while you hold
/// it, otherwise a new wrapper of the same C timer.
public final class RLTimer: @unchecked Sendable {
    /// The one C reference this wrapper owns.
    private let reference: OwnedRef
    var ref: RLRunLoopTimerRef { reference.pointer }
    private let box: TimerBox

    /// Creates a timer that first fires at `date` (an absolute time, seconds
    /// since 2001: `Date.timeIntervalSinceReferenceDate`) and, if `repeats`,
    /// every `interval` seconds after. Add it to a run loop with
    /// `RLRunLoop.add(_:forMode:)`.
    ///
    /// As with Foundation, a repeating timer with an interval that is not
    /// positive (or NaN) uses 0.0001 s; a non-repeating timer ignores
    /// `interval`. A NaN date means now; an infinite date or interval means
    /// `RLTime.distantFuture` (never, in practice).
    public init(fire date: RLAbsoluteTime, interval: RLTimeInterval, repeats: Bool,
                block: @escaping @Sendable (RLTimer) -> Void) {
        let box = TimerBox(block: block)
        // Foundation's clamp for a repeating timer, and no value the C call
        // rejects (NaN): an infinite interval or date means "never".
        let period: RLTimeInterval = repeats ? (interval > 0 ? min(interval, RLTime.distantFuture) : 0.0001) : 0
        let fireDate = date.isNaN || date == -.infinity ? RLTime.now : min(date, RLTime.distantFuture)
        let created = box.withContextInfo { info in
            var context = RLRunLoopTimerContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease,
                                                copyDescription: nil)
            return RLRunLoopTimerCreate(nil, fireDate, period, 0, 0, rlTimerCallout, &context)
        }
        guard let created else { fatalError("RLTimer: \(RLError.last())") }
        reference = OwnedRef(adopting: created)
        self.box = box
        box.owner = self
    }

    /// Creates a timer that first fires `interval` seconds from now
    /// (Foundation's `init(timeInterval:repeats:block:)`).
    public convenience init(timeInterval interval: RLTimeInterval, repeats: Bool,
                            block: @escaping @Sendable (RLTimer) -> Void) {
        self.init(fire: RLTime.now + (interval.isNaN ? 0 : max(interval, 0)),
                  interval: interval, repeats: repeats, block: block)
    }

    /// Wraps a C timer, taking one new reference (for callouts that run after
    /// the user dropped the original wrapper).
    fileprivate init(retaining ref: RLRunLoopTimerRef, box: TimerBox) {
        reference = OwnedRef(retaining: ref)
        self.box = box
    }

    /// Creates a timer and schedules it on the current thread's run loop in
    /// the default mode; it first fires `interval` seconds from now.
    @discardableResult
    public static func scheduledTimer(withTimeInterval interval: RLTimeInterval, repeats: Bool,
                                      block: @escaping @Sendable (RLTimer) -> Void) -> RLTimer {
        let timer = RLTimer(timeInterval: interval, repeats: repeats, block: block)
        RLRunLoop.current.add(timer, forMode: .default)
        return timer
    }

    /// The next fire date (seconds since 2001). Setting it moves the timer,
    /// earlier or later, from any thread or from inside its own closure.
    /// Reads 0 for an invalidated timer.
    ///
    /// Where SwiftThreadsFoundation is imported, `fireDate` is a `Date`, as
    /// in Foundation; this `RLAbsoluteTime` form is disfavored there (used
    /// only where the context asks for a number).
    @_disfavoredOverload
    public var fireDate: RLAbsoluteTime {
        get { RLRunLoopTimerGetNextFireDate(ref) }
        set { RLRunLoopTimerSetNextFireDate(ref, newValue) }
    }

    /// The repeat interval; 0 for a non-repeating timer.
    public var timeInterval: RLTimeInterval {
        RLRunLoopTimerDoesRepeat(ref) ? RLRunLoopTimerGetInterval(ref) : 0
    }

    /// Whether the timer repeats.
    public var repeats: Bool { RLRunLoopTimerDoesRepeat(ref) }

    /// How late the timer may fire to save wake-ups, in seconds (default 0).
    /// Negative or NaN values are ignored; a repeating timer's tolerance is
    /// clamped to half its interval.
    public var tolerance: RLTimeInterval {
        get { max(RLRunLoopTimerGetTolerance(ref), 0) }
        set { RLRunLoopTimerSetTolerance(ref, newValue) }
    }

    /// False once the timer is invalidated (or a non-repeating timer fired).
    public var isValid: Bool { RLRunLoopTimerIsValid(ref) }

    /// Calls the closure now, on the calling thread, without changing the
    /// schedule of a repeating timer; a non-repeating timer is then
    /// invalidated (Foundation's `fire()`). Does nothing once invalid.
    public func fire() {
        guard isValid else { return }
        box.block(self)
        if !repeats { invalidate() }
    }

    /// Stops the timer for good and removes it from its run loop; once the
    /// run loop and you drop it, the closure is freed. Idempotent; safe from
    /// any thread and from inside the closure.
    @discardableResult
    public func invalidate() -> Bool { RLRunLoopTimerInvalidate(ref) }
}

extension RLTimer: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLTimer" }
}

/// The timer's closure, handed to C as the context's `info`.
final class TimerBox: RLCallbackBox<RLTimer>, @unchecked Sendable {
    let block: @Sendable (RLTimer) -> Void

    init(block: @escaping @Sendable (RLTimer) -> Void) { self.block = block }
}

private func rlTimerCallout(_ timer: RLRunLoopTimerRef?, _ info: UnsafeMutableRawPointer?) {
    guard let timer, let info else { return }
    let box = TimerBox.from(info)
    box.block(box.wrapper { RLTimer(retaining: timer, box: box) })
}
