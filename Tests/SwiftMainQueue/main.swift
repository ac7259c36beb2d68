// The main dispatch queue on RLRunLoop.main, from Swift: a program whose
// main thread runs `RLRunLoop.main.run(until:)` gets `DispatchQueue.main`,
// `Task { @MainActor in ... }` and `await MainActor.run { }` served by it, as
// a Foundation program gets them from `RunLoop.main`. Not a Swift Testing
// suite: `swift test` runs suites off the main thread. Run by
// scripts/run-swift-tests.sh --demo (make check-swift-demo); every check
// prints one line and the last line is "swiftthreads-main-queue: OK".
//
// No `await` at the top level: top-level async code would hand the main
// thread to dispatch_main(), and no run loop could serve the queue then.
import Dispatch
import Glibc
import SwiftThreads

@MainActor final class Log {
    var lines: [String] = []
    func add(_ s: String) { lines.append(s) }
}

let log = Log()
let loop = RLRunLoop.main
var failures = 0

@MainActor func check(_ ok: Bool, _ what: String) {
    print("\(ok ? "ok" : "FAIL"): \(what)")
    if !ok { failures += 1 }
}

@Sendable func onMainThread() -> Bool { RLThread.isMainThread }

/// Runs the main loop in its default mode until `done()` (at most 10 s).
@MainActor func runMain(until done: () -> Bool) -> Bool {
    let end = RLTime.now + 10
    while !done() && RLTime.now < end {
        loop.run(until: min(end, RLTime.now + 0.5))
    }
    return done()
}

check(onMainThread() && RLRunLoop.current === loop, "the program runs on the main thread, whose loop is RLRunLoop.main")

// DispatchQueue.main.async from the main thread: FIFO.
for i in 1...3 {
    DispatchQueue.main.async { log.add("async \(i) main=\(onMainThread())") }
}
check(runMain { log.lines.count == 3 } && log.lines == (1...3).map { "async \($0) main=true" },
      "DispatchQueue.main.async blocks run on the main thread, in order")

// From another thread, while the loop sleeps.
log.lines = []
DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) {
    DispatchQueue.main.async { log.add("from a global queue main=\(onMainThread())") }
}
check(runMain { !log.lines.isEmpty } && log.lines == ["from a global queue main=true"],
      "a block queued from another thread wakes the main loop")

// Task { @MainActor in ... }
log.lines = []
Task { @MainActor in log.add("task main=\(onMainThread())") }
check(runMain { !log.lines.isEmpty } && log.lines == ["task main=true"], "Task { @MainActor in ... } runs")

// await MainActor.run { } from a detached task.
log.lines = []
Task.detached {
    let here = onMainThread()
    let there = await MainActor.run { () -> Bool in
        log.add("MainActor.run")
        return onMainThread()
    }
    await MainActor.run { log.add("detached main=\(here) MainActor.run main=\(there)") }
}
check(runMain { log.lines.count == 2 } && log.lines == ["MainActor.run", "detached main=false MainActor.run main=true"],
      "await MainActor.run { } from a detached task runs on the main thread")

// The main queue is a source of the default mode: never empty, a run
// times out instead of finishing, and serving counts as a handled source.
check((try? loop.run(mode: .default, for: 0.01)) == .timedOut, "the main thread's default mode is never empty")
DispatchQueue.main.async { log.add("handled") }
check((try? loop.run(mode: .default, for: 5, returnAfterSourceHandled: true)) == .handledSource,
      "serving the main queue is a handled source")

if failures == 0 {
    print("swiftthreads-main-queue: OK")
} else {
    print("swiftthreads-main-queue: \(failures) failed")
    exit(1)
}
