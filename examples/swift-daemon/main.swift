// swiftthreads-daemon — the skeleton of a long-running service in Swift:
// Unix signals handled on the main run loop, worker threads stopped with
// the worker lifecycle.
//
//   - SIGTERM and SIGINT stop it cleanly: the job timer goes, each worker is
//     stopped (RLWorkerThread.stop() returns once its thread has run the
//     jobs queued before, run its will-exit handler and exited), the main
//     loop returns, and the process exits with status 0. The signal sources
//     stay until the process exits: a second stop signal (Ctrl-C twice, a
//     service manager's SIGTERM after a Ctrl-C) is read and ignored.
//     Invalidating the last source of SIGTERM would restore its default
//     action, and one arriving during the shutdown would end the process
//     half-way (status 143).
//   - SIGHUP reloads: the configuration generation goes up and the workers
//     are restarted with it (stop() returns when the old thread is gone,
//     start() when the new one is ready for work).
//
// The signals arrive as ordinary callouts on the main thread: each
// RLSignalSource reads its signal from a signalfd in the main loop, so no
// code runs in a signal handler and the closures may do anything. The
// sources are made first, before any other thread exists, so every thread
// inherits the blocked signals and only the main loop sees them (see
// RLSignalSource). For `async` code, RLSignals is the same as an
// AsyncSequence (`for await signal in signals`); swiftthreads-echo-client
// uses it.
//
// Meanwhile a timer on the main loop hands a job to the workers in turn.
//
//   swiftthreads-daemon            a job every 1 s
//   swiftthreads-daemon --tour     a job every 0.2 s
//   swiftthreads-daemon --fast     a job every 20 ms (tests)
// It runs until a signal stops it: `kill -HUP PID`, `kill PID` or Ctrl-C.
// It prints the same lines as examples/c/daemon_skeleton.c, which the same
// check verifies (scripts/example-checks.sh).
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ExampleSupport
import SwiftThreads

/// The service. It lives on the main thread (it is not `Sendable`): its
/// signal sources and its job timer are on the main run loop, and their
/// closures reach it through an `RLThreadBound`, which checks that they run
/// there. The workers print their own lines from their own threads.
final class Daemon {
    private let workers: [RLWorkerThread]
    private let jobInterval: RLTimeInterval
    /// Valid until the process exits (see the top of the file).
    private var signalSources: [RLSignalSource] = []
    private var jobTimer: RLTimer?
    /// The configuration's generation; SIGHUP reloads it.
    private var generation = 1
    private(set) var reloads = 0
    private var nextWorker = 0
    private(set) var jobsSent = 0
    /// Counted on the workers.
    let jobsDone = RLAtomicInt32(0)
    private(set) var isStopping = false

    init(workerCount: Int, jobInterval: RLTimeInterval) {
        self.jobInterval = jobInterval
        workers = (1...workerCount).map { RLWorkerThread(name: "worker-\($0)") }
    }

    private static func threadName() -> String { RLThread.current.name ?? "?" }

    // MARK: Setting up (main, before the run loop)

    /// Watches SIGTERM, SIGINT and SIGHUP on the main loop. Call first,
    /// while this is the only thread.
    func watchSignals() throws(RLError) {
        // Held strongly: the sources, like the daemon, last until exit.
        let daemon = RLThreadBound(self)
        for signal in [SIGTERM, SIGINT, SIGHUP] {
            let source = try RLSignalSource(signal: signal) { _, delivery in
                daemon.value.handle(delivery)
            }
            signalSources.append(source)
            guard RLRunLoop.main.add(source, forMode: .default) else { throw RLError.last() }
        }
    }

    /// Gives each worker its will-exit handler and starts it.
    func startWorkers() throws {
        for worker in workers {
            try worker.addWillExitHandler { thread in
                say("  [\(thread.name ?? "?")] will-exit handler: the worker thread is finishing")
            }
        }
        try startEachWorker()
    }

    /// The timer that sends a job every `jobInterval`, on the main loop.
    func scheduleJobs() {
        let daemon = RLThreadBound(self) // released when the timer is invalidated
        let timer = RLTimer(timeInterval: jobInterval, repeats: true) { _ in daemon.value.sendJob() }
        RLRunLoop.main.add(timer, forMode: .default)
        jobTimer = timer
    }

    // MARK: The workers

    private func startEachWorker() throws(RLError) {
        for (index, worker) in workers.enumerated() {
            try worker.start() // returns once the worker's run loop is ready
            say("  [main] worker-\(index + 1) started (configuration \(generation))")
        }
    }

    /// Each stop() returns once that worker's thread is gone: its queued
    /// jobs ran, its will-exit handler ran, it was joined.
    private func stopEachWorker() throws(RLError) {
        for (index, worker) in workers.enumerated() {
            try worker.stop()
            say("  [main] worker-\(index + 1) stopped")
        }
    }

    private func sendJob() {
        jobsSent += 1
        let number = jobsSent
        let generation = generation
        let done = jobsDone
        let worker = workers[nextWorker]
        nextWorker = (nextWorker + 1) % workers.count
        do {
            try worker.async {
                say("  [\(Daemon.threadName())] job \(number) (configuration \(generation))")
                _ = done.increment()
            }
        } catch {
            say("  [main] job \(number) not sent: \(error)")
            jobsSent -= 1
        }
    }

    // MARK: Signals (main thread)

    private func handle(_ delivery: RLSignal) {
        let name = [SIGTERM: "SIGTERM", SIGINT: "SIGINT", SIGHUP: "SIGHUP"][delivery.signal] ?? "signal \(delivery.signal)"
        say("  [\(Daemon.threadName())] \(name) received"
            + (delivery.count > 1 ? " (\(delivery.count) deliveries merged)" : ""))
        guard !isStopping else { return }
        do {
            if delivery.signal == SIGHUP {
                try reload()
            } else {
                try shutDown()
            }
        } catch {
            say("  [main] \(name) could not be handled: \(error)")
            exit(1)
        }
    }

    private func reload() throws(RLError) {
        generation += 1
        reloads += 1
        say("  [main] reload: configuration \(generation); restarting the workers")
        try stopEachWorker()
        try startEachWorker()
        say("  [main] reload done")
    }

    private func shutDown() throws(RLError) {
        isStopping = true
        say("  [main] stopping: no more jobs; stopping the workers")
        jobTimer?.invalidate()
        try stopEachWorker()
        // The signal sources stay valid: see the top of the file.
        RLRunLoop.main.stop()
    }
}

// MARK: - Main

func main() -> Int32 {
    try? RLThread.current.setName("main")
    let daemon = Daemon(workerCount: 2, jobInterval: Pace.pick(1.0, tour: 0.2, fast: 0.02))
    do {
        // First the signal sources, while this is the only thread: the
        // threads started later inherit the blocked signals.
        try daemon.watchSignals()
        try daemon.startWorkers()
    } catch {
        say("swiftthreads-daemon: cannot start: \(error)")
        return 1
    }
    daemon.scheduleJobs()

    say("swiftthreads-daemon: ready (pid \(getpid()), \(Pace.current.rawValue) pace): "
        + "SIGHUP reloads, SIGTERM or SIGINT stops")
    // Returns once shutDown() stops the loop.
    RLRunLoop.main.run()
    guard daemon.isStopping else {
        say("swiftthreads-daemon: the main loop ended without a stop signal")
        return 1
    }
    let done = Int(daemon.jobsDone.load())
    say("swiftthreads-daemon: stopped cleanly: \(daemon.jobsSent) jobs sent, \(done) done, \(daemon.reloads) reloads")
    return done == daemon.jobsSent ? 0 : 1
}

exit(main())
