// swiftthreads-demo — a short tour of SwiftThreads: the Threading
// Programming Guide's and the tutorials' examples, in Swift.
//
//   swift run swiftthreads-demo              every section, at the tutorials' pace (about 20 s)
//   RL_EXAMPLE_TOUR=1 swift run swiftthreads-demo   (or --tour) what `make demo`
//                                             runs after the C tour: only what Swift
//                                             adds (closures, async/await, actors on
//                                             a worker), at the C tour's pace
//   RL_EXAMPLE_FAST=1 swift run swiftthreads-demo   (or --fast) every section as
//                                             fast as possible, for tests
//
// Sections: 1. countdown timer, 2. two threads interleaving (with and
// without sleeping, and synchronized), 3. producer/consumer over a
// condition lock, 4. a worker posting progress to the main run loop,
// 5. a delegate told on its own thread, 6. the worker thread's synchronous
// start and stop, and an actor running on it, 7. the guide's Listing 2-3
// (an exit flag in the thread dictionary, set by an input source),
// 8. async/await over run loops (values back from workers, a timer as an
// AsyncStream).
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftThreads

// MARK: - Support

enum Demo {
    static let fast: Bool = flag("--fast", "RL_EXAMPLE_FAST")
    /// The `make demo` tour: the sections that show what Swift adds, at the
    /// C tour's pace.
    static let tour: Bool = !fast && flag("--tour", "RL_EXAMPLE_TOUR")

    static func flag(_ argument: String, _ variable: String) -> Bool {
        if CommandLine.arguments.contains(argument) { return true }
        guard let value = getenv(variable) else { return false }
        let text = String(cString: value)
        return !text.isEmpty && text != "0"
    }

    /// `normal` seconds at the tutorials' pace, `quick` in fast mode,
    /// `touring` (default: `normal`) in the tour.
    static func pace(_ normal: RLTimeInterval, fast quick: RLTimeInterval,
                     tour touring: RLTimeInterval? = nil) -> RLTimeInterval {
        fast ? quick : tour ? (touring ?? normal) : normal
    }

    /// Sections are numbered in the order they run (the tour runs some).
    static let sectionsShown = Locked(0)

    static func heading(_ number: Int, _ title: String) {
        let shown = sectionsShown.withLock { value -> Int in value += 1; return value }
        say("\n=== \(shown). \(title) ===")
    }

    /// Prints a whole line at once (lines from several threads never mix).
    static func say(_ line: String) {
        write(line + "\n")
    }

    /// Writes to standard output unbuffered, so that threads' output appears
    /// in the order it was written.
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(1, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }
                offset += n
            }
        }
    }

    static func check(_ condition: Bool, _ what: String) {
        if !condition {
            say("FAILED: \(what)")
            exit(1)
        }
    }

    /// Runs the main thread's run loop until `stop()` is called on it; a
    /// timer that never fires keeps the loop from returning at once while
    /// it waits for perform requests.
    static func runMainLoopUntilStopped() {
        let keepAlive = RLTimer(fire: RLTime.distantFuture, interval: 0, repeats: false) { _ in }
        RLRunLoop.main.add(keepAlive, forMode: .default)
        RLRunLoop.main.run()
        keepAlive.invalidate()
    }
}

/// A value shared between threads, guarded by a lock.
final class Locked<Value>: @unchecked Sendable {
    private let lock = RLLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
    var get: Value { withLock { $0 } }
}

// MARK: - 1. Countdown timer

/// The tutorial's countdown: a repeating timer on the main run loop counts
/// 10 → 1 once a second, then invalidates itself and stops the loop. (The
/// main loop's default mode never runs empty in a Swift program: as with
/// CoreFoundation, the main dispatch queue is one of its sources.)
func countdown() {
    Demo.heading(1, "Countdown timer (RLTimer on the main run loop)")
    let remaining = Locked(10)
    let interval = Demo.pace(1, fast: 0.001, tour: 0.2)   // the C tour's pace
    let timer = RLTimer.scheduledTimer(withTimeInterval: interval, repeats: true) { timer in
        let value = remaining.withLock { value -> Int in
            defer { value -= 1 }
            return value
        }
        Demo.say("  \(value)")
        if value == 1 {
            Demo.say("  liftoff — invalidating the timer")
            timer.invalidate()
            RLRunLoop.current.stop()
        }
    }
    // Returns when the timer stops it.
    RLRunLoop.current.run()
    Demo.check(!timer.isValid && remaining.get == 0, "the countdown reached 0")
}

// MARK: - 2. Two threads interleaving

/// The tutorial's two threads writing to one terminal: the main thread
/// prints "Main thread x = N" lines, a second thread "[My]" one character at
/// a time.
func interleaving() {
    Demo.heading(2, "Two threads interleaving (sleep, synchronized)")
    let common = Locked(0) // the object both threads synchronize on
    for (round, title, sleeps, synchronizes) in [
        (1, "without sleeping: one thread often prints everything first", false, false),
        (2, "with sleep(forTimeInterval: 0.001): characters land between lines", true, false),
        (3, "with sleeping and synchronized(common): every line whole", true, true),
    ] {
        Demo.say("--- round \(round): \(title) ---")
        @Sendable func group(_ body: () -> Void) {
            if synchronizes { synchronized(common, body) } else { body() }
        }
        let second = RLThread {
            for _ in 0..<5 {
                group {
                    for character in "[My]\n" {
                        Demo.write(String(character))
                        if sleeps { RLThread.sleep(forTimeInterval: 0.001) }
                    }
                }
            }
        }
        try! second.setJoinable(true)
        try! second.start()
        for x in 0..<5 {
            group { Demo.write("Main thread x = \(x)\n") }
            if sleeps { RLThread.sleep(forTimeInterval: 0.001) }
        }
        try! second.join()
    }
}

// MARK: - 3. Producer and consumer

/// The tutorial's ThreadSafeQueue: an `RLConditionLock` whose condition
/// says whether the queue has data.
final class ThreadSafeQueue<Element: Sendable>: @unchecked Sendable {
    private static var noData: Int { 0 }
    private static var hasData: Int { 1 }
    private let lock = RLConditionLock(condition: 0, name: "ThreadSafeQueue")
    private var elements: [Element] = []

    /// Always succeeds: takes the lock whatever the condition.
    func enqueue(_ element: Element) {
        lock.lock()
        elements.append(element)
        lock.unlock(withCondition: Self.hasData)
    }

    /// Blocks until there is an element.
    func dequeue() -> Element {
        lock.lock(whenCondition: Self.hasData)
        let element = elements.removeFirst()
        lock.unlock(withCondition: elements.isEmpty ? Self.noData : Self.hasData)
        return element
    }

    /// Never blocks: nil when empty (or busy).
    func tryDequeue() -> Element? {
        guard lock.tryLock() else { return nil }
        guard !elements.isEmpty else {
            lock.unlock(withCondition: Self.noData)
            return nil
        }
        let element = elements.removeFirst()
        lock.unlock(withCondition: elements.isEmpty ? Self.noData : Self.hasData)
        return element
    }
}

func producerConsumer() {
    Demo.heading(3, "Producer and consumer (ThreadSafeQueue over RLConditionLock)")
    let queue = ThreadSafeQueue<Int>()
    let consumer = RLThread(returning: { () -> [Int] in
        var got: [Int] = []
        for _ in 0..<5 {
            let value = queue.dequeue()
            Demo.say("  consumer got \(value)")
            got.append(value)
        }
        return got
    })
    try! consumer.setJoinable(true)
    try! consumer.start()
    for value in 0..<5 {
        RLThread.sleep(forTimeInterval: Demo.pace(0.1, fast: 0.001))
        Demo.say("  producer enqueues \(value)")
        queue.enqueue(value)
    }
    let got = try! consumer.join(as: [Int].self)
    Demo.check(got == [0, 1, 2, 3, 4], "the consumer got 0...4 in order")
    Demo.check(queue.tryDequeue() == nil, "the queue is empty")

    // Several producers and consumers: every item arrives exactly once.
    let producers = 3, perProducer = 1_000
    let received = Locked<[Int]>([])
    let threads = (0..<producers).map { p in
        RLThread { for i in 0..<perProducer { queue.enqueue(p * perProducer + i) } }
    } + (0..<2).map { _ in
        RLThread {
            for _ in 0..<(producers * perProducer / 2) {
                let value = queue.dequeue()
                received.withLock { $0.append(value) }
            }
        }
    }
    for thread in threads {
        try! thread.setJoinable(true)
        try! thread.start()
    }
    for thread in threads { try! thread.join() }
    let all = received.get.sorted()
    Demo.check(all == Array(0..<(producers * perProducer)), "every item arrived once")
    Demo.say("  \(producers) producers, 2 consumers: all \(all.count) items arrived exactly once")
}

// MARK: - 4. Progress bar

/// The tutorial's threaded progress bar: a worker thread does the slow part
/// and, after each step, asks the main thread to redraw
/// (`performOnMain`, no waiting). Only the main thread draws.
func progressBar() {
    Demo.heading(4, "Worker posting progress to the main run loop")
    let steps = 40
    let onTerminal = isatty(1) != 0
    let redraws = Locked(0)
    let allOnMain = Locked(true)
    let job = RLThread {
        for step in 1...steps {
            RLThread.sleep(forTimeInterval: Demo.pace(0.05, fast: 0.0005))
            try RLThread.performOnMain {
                // Runs on the main thread, inside its run loop.
                redraws.withLock { $0 += 1 }
                if !RLThread.isMainThread { allOnMain.withLock { $0 = false } }
                let bar = String(repeating: "#", count: step) + String(repeating: ".", count: steps - step)
                let line = "  [\(bar)] \(step * 100 / steps)%"
                if onTerminal {
                    Demo.write("\r" + line + (step == steps ? "\n" : ""))
                } else {
                    Demo.say(line)
                }
                if step == steps { RLRunLoop.main.stop() }
            }
        }
    }
    try! job.start()
    Demo.runMainLoopUntilStopped()
    Demo.check(redraws.get == steps && allOnMain.get, "every redraw ran on the main thread")
    Demo.say("  \(steps) redraws, all on the main thread; the worker never waited for one")
}

// MARK: - 5. Delegate on its own thread

/// A background job that tells its delegate the result on the thread that
/// started it (the tutorial's threaded parser with a delegate).
final class WordCountJob: Sendable {
    let text: String
    /// The thread that created the job: where the delegate lives.
    let delegateThread: RLThread
    let delegate: @Sendable ([(String, Int)]) -> Void

    init(text: String, delegate: @escaping @Sendable ([(String, Int)]) -> Void) {
        self.text = text
        self.delegateThread = RLThread.current
        self.delegate = delegate
    }

    func start() throws {
        try RLThread.detachNewThread { [self] in
            var counts: [String: Int] = [:]
            for word in text.split(whereSeparator: { !$0.isLetter }) { counts[word.lowercased(), default: 0] += 1 }
            let top = counts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(3).map { ($0.key, $0.value) }
            Demo.say("  job finished on a background thread; performing the result on its delegate's thread")
            // Not a direct call: the delegate runs on its own thread.
            try delegateThread.perform { self.delegate(top) }
        }
    }
}

func delegateOnItsOwnThread() {
    Demo.heading(5, "A delegate told on its own thread")
    let text = "a run loop waits for events and runs the code that handles them. a thread that runs a "
        + "run loop sleeps while nothing happens and wakes when a source is signalled or a request is "
        + "performed on it. slow work goes to another thread and the result comes back through the run loop."

    /// Starts a job from the calling thread and runs this thread's loop until
    /// the delegate was told.
    @Sendable func runJob() {
        let delivered = Locked(false)
        let job = WordCountJob(text: text) { top in
            let words = top.map { "\($0.0) ×\($0.1)" }.joined(separator: ", ")
            let here = RLThread.isMainThread ? "the main thread" : RLThread.current.name ?? "?"
            Demo.say("  delegate told on \(here): \(words)")
            delivered.withLock { $0 = true }
            RLRunLoop.current.stop()
        }
        try! job.start()
        let keepAlive = RLTimer(fire: RLTime.distantFuture, interval: 0, repeats: false) { _ in }
        RLRunLoop.current.add(keepAlive, forMode: .default)
        while !delivered.get { RLRunLoop.current.run() }
        keepAlive.invalidate()
    }

    Demo.say("  job started from the main thread:")
    runJob()
    Demo.say("  job started from thread ui-2:")
    let ui2 = RLThread { runJob() }
    ui2.name = "ui-2"
    try! ui2.setJoinable(true)
    try! ui2.start()
    try! ui2.join()
}

// MARK: - 6. Worker start and stop

/// An actor whose methods run on a worker thread.
actor Tally {
    let worker: RLWorkerThread
    private var total = 0
    init(worker: RLWorkerThread) { self.worker = worker }
    nonisolated var unownedExecutor: UnownedSerialExecutor { worker.asUnownedSerialExecutor() }

    func add(_ amount: Int) -> String {
        total += amount
        return "added \(amount) on \(RLThread.current.name ?? "?"), total \(total)"
    }
}

func workerStartStop() async {
    Demo.heading(6, "The worker thread: start returns when ready, stop when gone")
    let worker = RLWorkerThread(name: "demo-worker")
    try! worker.addWillExitHandler { thread in
        Demo.say("  will-exit handler on \(thread.name ?? "?") (its run loop is already torn down)")
    }
    for round in 1...2 {
        try! worker.start()
        Demo.say("  round \(round): start() returned; the worker's run loop is running: \(worker.isRunning)")
        for i in 1...3 {
            try! worker.async { Demo.say("  async work \(i) on \(RLThread.current.name ?? "?")") }
        }
        // sync blocks the calling thread (noasync): called from a plain
        // function, as a thread would; async code awaits run(_:) below.
        func blockingSum() -> Int { try! worker.sync { (1...100).reduce(0, +) } }
        let sum = blockingSum()
        Demo.say("  sync work returned \(sum)")
        let name = try! await worker.run { RLThread.current.name ?? "?" }
        Demo.say("  await worker.run { ... } returned \"\(name)\"")
        if round == 2 {
            let tally = Tally(worker: worker)
            for amount in [1, 2, 3] { Demo.say("  actor: \(await tally.add(amount))") }
        }
        try! await worker.shutdownGracefully()
        Demo.say("  round \(round): shutdownGracefully() returned; running: \(worker.isRunning)")
    }
}

// MARK: - 7. Listing 2-3: an exit flag in the thread dictionary

/// The guide's Listing 2-3: a long job, done in chunks, runs its run loop
/// once (without waiting) after each chunk so that its input source can be
/// handled, then checks the "ThreadShouldExitNow" flag in its thread
/// dictionary. The source's handler — run on the job's thread when the main
/// thread signals it — sets the flag.
func listing2_3() {
    Demo.heading(7, "Listing 2-3: checking for an exit condition during a long job")
    let totalChunks = 100_000, signalAfter = 5
    let chunksDone = Locked(0)
    let sourceAndLoop = Locked<(RLRunLoopSource, RLRunLoop)?>(nil)
    let job = RLThread(returning: { () -> Int in
        let me = RLThread.current
        me["ThreadShouldExitNow"] = false
        let exitSource = RLRunLoopSource {
            // Runs on this thread, inside its run loop.
            Demo.say("  input source: exit requested; setting ThreadShouldExitNow")
            RLThread.current["ThreadShouldExitNow"] = true
        }
        let loop = RLRunLoop.current
        loop.add(exitSource, forMode: .default)
        sourceAndLoop.withLock { $0 = (exitSource, loop) }
        var done = 0
        while done < totalChunks {
            RLThread.sleep(forTimeInterval: Demo.pace(0.05, fast: 0.001)) // one chunk of work
            done += 1
            chunksDone.withLock { $0 = done }
            // Handle whatever arrived, without waiting.
            _ = try? loop.run(mode: .default, for: 0)
            if me.value(forKey: "ThreadShouldExitNow", as: Bool.self) == true { break }
        }
        loop.remove(exitSource, forMode: .default)
        return done
    })
    try! job.setJoinable(true)
    try! job.start()
    while chunksDone.get < signalAfter { RLThread.sleep(forTimeInterval: 0.001) }
    if let (source, loop) = sourceAndLoop.get {
        Demo.say("  main thread: the job did \(chunksDone.get) chunks; signalling its input source")
        source.signal()
        loop.wakeUp()
    }
    let done = try! job.join(as: Int.self) ?? 0
    Demo.check(done < totalChunks, "the job stopped early")
    Demo.say("  the job left its loop after \(done) of \(totalChunks) chunks")
}

// MARK: - 8. async/await over run loops

/// What Swift adds on top of the C tour: values computed on other threads'
/// run loops come back to `async` code without blocking a thread, and a
/// run-loop timer feeds an `AsyncStream`.
func asyncOverRunLoops() async {
    Demo.heading(8, "async/await: values back from workers, a timer as an AsyncStream")
    let left = RLWorkerThread(name: "left"), right = RLWorkerThread(name: "right")
    try! left.start()
    try! right.start()
    // Two workers at once; neither await blocks a thread.
    let sums = (Task { try await left.run { (1...1_000).reduce(0, +) } },
                Task { try await right.run { (1_001...2_000).reduce(0, +) } })
    let (a, b) = (try! await sums.0.value, try! await sums.1.value)
    Demo.say("  await left.run { … } = \(a), await right.run { … } = \(b): \(a + b) in all")

    // A repeating timer on the left worker's run loop, read as an async sequence.
    let ticks = AsyncStream<Int> { continuation in
        let count = Locked(0)
        let timer = RLTimer(fire: RLTime.now, interval: Demo.pace(0.3, fast: 0.001, tour: 0.2), repeats: true) { timer in
            let n = count.withLock { value -> Int in value += 1; return value }
            continuation.yield(n)
            if n == 3 {
                timer.invalidate()
                continuation.finish()
            }
        }
        try! left.sync { _ = RLRunLoop.current.add(timer, forMode: .common) }
    }
    for await tick in ticks {
        Demo.say("  for await tick in timerStream: tick \(tick) (fired on the left worker's run loop)")
    }
    try! await left.shutdownGracefully()
    try! await right.shutdownGracefully()
    Demo.say("  both workers stopped; every value arrived through await")
}

// MARK: - Tour

if Demo.tour {
    // `make demo` ran the C tour just before: show what Swift adds.
    Demo.say("SwiftThreads tour: closures, async/await and actors on a worker (the C tour showed the rest;")
    Demo.say("`swift run swiftthreads-demo` runs every section)")
    countdown()
    delegateOnItsOwnThread()
    await workerStartStop()
    await asyncOverRunLoops()
} else {
    Demo.say("SwiftThreads demo\(Demo.fast ? " (fast)" : "")")
    countdown()
    interleaving()
    producerConsumer()
    progressBar()
    delegateOnItsOwnThread()
    await workerStartStop()
    listing2_3()
    await asyncOverRunLoops()
}
Demo.say("\nDone.")
