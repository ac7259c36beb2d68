// What the Swift examples share (swiftthreads-threaded-parser,
// swiftthreads-daemon, swiftthreads-echo-client): their pace and
// whole-line output.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftThreads

/// How fast an example runs; the pace changes intervals only, never what
/// it does or prints (apart from the line that names the pace), as with the
/// C examples:
///
///     EXAMPLE                              full: the pace to watch
///     … --tour  (or RL_EXAMPLE_TOUR=1)     tour: quicker (`make demo`)
///     … --fast  (or RL_EXAMPLE_FAST=1)     fast: as quick as it goes (tests)
///
/// Each example's own header gives its intervals at each pace.
public enum Pace: String, Sendable {
    case full, tour, fast

    public static let current: Pace = {
        if flag("--fast", "RL_EXAMPLE_FAST") { return .fast }
        if flag("--tour", "RL_EXAMPLE_TOUR") { return .tour }
        return .full
    }()

    /// `full` seconds, or the value for the current pace.
    public static func pick(_ full: RLTimeInterval, tour: RLTimeInterval, fast: RLTimeInterval) -> RLTimeInterval {
        switch current {
        case .full: return full
        case .tour: return tour
        case .fast: return fast
        }
    }

    private static func flag(_ argument: String, _ variable: String) -> Bool {
        if CommandLine.arguments.contains(argument) { return true }
        guard let value = getenv(variable) else { return false }
        let text = String(cString: value)
        return !text.isEmpty && text != "0"
    }
}

/// Writes `line` and a newline to standard output in one write(2), so that
/// lines printed by several threads never mix and a test reading the
/// output sees each line as soon as it is printed.
public func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(1, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }
}
