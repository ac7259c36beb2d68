internal import CRunLoop

/// How much a thread's work matters to the user: Foundation's
/// `QualityOfService`, with its cases in its order (and the raw values of
/// swift-corelibs-foundation, 0 to 4; Darwin's differ).
///
/// Linux has no quality-of-service classes; a class is a scheduling
/// priority (``RLThread/setPriority(_:)``), that is a nice value of the one
/// thread (`setpriority(PRIO_PROCESS, tid)`, the `SCHED_OTHER` policy):
///
/// | Class              | `priority` | nice |
/// |--------------------|-----------:|-----:|
/// | `.userInteractive` | 0.75       | -10  |
/// | `.userInitiated`   | 0.625      | -5   |
/// | `.default`         | 0.5        | 0    |
/// | `.utility`         | 10/38 below 0.5 | 10 |
/// | `.background`      | 0.0        | 19   |
///
/// As for any priority, a nice value below what the process may take
/// (`RLIMIT_NICE`; without `CAP_SYS_NICE` usually its current one) is
/// clamped to the lowest it may take, so the two classes above `.default`
/// only have an effect where the system grants it; and an unprivileged
/// thread cannot come back down from a higher nice value. Darwin's other
/// effects of a class (I/O throttling, timer coalescing, core choice) have
/// no counterpart.
public enum RLQualityOfService: Int, Sendable, CaseIterable {
    case userInteractive
    case userInitiated
    case utility
    case background
    case `default`

    /// The nice value of the class (see the table above).
    public var niceValue: Int32 {
        switch self {
        case .userInteractive: return -10
        case .userInitiated: return -5
        case .default: return 0
        case .utility: return 10
        case .background: return 19
        }
    }

    /// The ``RLThread/priority`` of the class: the one whose nice value is
    /// ``niceValue`` (0.5 is nice 0, 1.0 is -20, 0.0 is 19).
    public var threadPriority: Double {
        let nice = Double(niceValue)
        return nice <= 0 ? 0.5 - nice / 40 : 0.5 - nice / 38
    }

    /// The class whose ``threadPriority`` is nearest to `priority` (the
    /// higher class on a tie); `.default` for NaN.
    public init(threadPriority priority: Double) {
        guard !priority.isNaN else {
            self = .default
            return
        }
        let ordered: [RLQualityOfService] = [.userInteractive, .userInitiated, .default, .utility, .background]
        self = ordered.min { abs($0.threadPriority - priority) < abs($1.threadPriority - priority) } ?? .default
    }
}

extension RLThread {
    /// The thread's quality of service (Foundation's
    /// `Thread.qualityOfService`): a scheduling priority, see
    /// ``RLQualityOfService`` for the mapping. Set it before ``start()`` or
    /// while the thread runs, from any thread; setting it sets
    /// ``priority`` to the class's ``RLQualityOfService/threadPriority``.
    /// Reads the class nearest to the thread's ``priority``: `.default` for
    /// a thread whose priority was never set, the class set otherwise.
    public var qualityOfService: RLQualityOfService {
        get { RLQualityOfService(threadPriority: priority) }
        set {
            // A class's priority is always in 0...1: the C call cannot
            // refuse it.
            _ = RLThreadSetPriority(ref, newValue.threadPriority)
        }
    }
}
