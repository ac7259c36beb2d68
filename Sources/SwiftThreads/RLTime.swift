internal import CRunLoop

/// Seconds since 2001-01-01 00:00:00 UTC: C's `RLAbsoluteTime`, and the same
/// number as Foundation's `Date.timeIntervalSinceReferenceDate`, so a `Date`
/// converts without arithmetic:
///
///     lock.lock(before: date.timeIntervalSinceReferenceDate)
///     Date(timeIntervalSinceReferenceDate: RLTime.now)
///
/// Timed waits convert the date to the monotonic clock on entry, so changing
/// the wall clock never stretches or shortens a wait in progress.
public typealias RLAbsoluteTime = Double

/// A duration in seconds: C's `RLTimeInterval`, Foundation's `TimeInterval`.
public typealias RLTimeInterval = Double

/// The clock behind `RLAbsoluteTime`, with no dependency on Foundation.
public enum RLTime {
    /// The wall-clock time now (`RLAbsoluteTimeGetCurrent`, `Date.now`).
    public static var now: RLAbsoluteTime { RLAbsoluteTimeGetCurrent() }

    /// The date `duration` after now: the deadline of a timed wait written
    /// as "at most this long" (`lock(before: RLTime.after(.milliseconds(5)))`).
    public static func after(_ duration: Duration) -> RLAbsoluteTime {
        now + duration.rlSeconds
    }

    /// A date later than any wait will reach (`Date.distantFuture`).
    public static let distantFuture: RLAbsoluteTime = 63_113_904_000
}

extension Duration {
    /// The duration as `Double` seconds (attosecond resolution rounded).
    var rlSeconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) * 1e-18
    }
}
