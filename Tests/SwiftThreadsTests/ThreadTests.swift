import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Thread test support (shared by the thread, perform and worker suites)
//
// Waits are bounded only so that a broken build fails instead of hanging;
// no test asserts how long anything takes.

/// A value shared between test threads, guarded by a pthread mutex.
final class ThrShared<Value>: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var value: Value

    init(_ value: Value) {
        self.value = value
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body(&value)
    }

    var get: Value { withLock { $0 } }
    func set(_ newValue: Value) { withLock { $0 = newValue } }
}

/// An ordered record of events from several threads.
final class ThrLog: @unchecked Sendable {
    private let events = ThrShared<[String]>([])
    func add(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.get }
}

/// Polls `condition` until true or until a generous bound passes.
@discardableResult
func thrEventually(_ seconds: Double = 20, _ condition: () -> Bool) -> Bool {
    let deadline = RLTime.now + seconds
    while !condition() {
        if RLTime.now > deadline { return false }
        RLThread.sleep(forTimeInterval: 0.001)
    }
    return true
}

/// A gate a thread waits at until another opens it (bounded wait).
final class ThrGate: Sendable {
    private let opened = ThrShared(false)
    func open() { opened.set(true) }
    var isOpen: Bool { opened.get }
    @discardableResult
    func wait() -> Bool { thrEventually { opened.get } }
}

/// The kernel thread id of the calling thread.
func thrTid() -> Int32 {
    // /proc/thread-self links to "<pid>/task/<tid>" (gettid is not imported).
    var buffer = [CChar](repeating: 0, count: 64)
    let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    precondition(n > 0, "readlink /proc/thread-self failed")
    let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return Int32(link.split(separator: "/").last!)!
}

/// Whether the kernel still lists thread `tid` in this process.
func thrTaskExists(_ tid: Int32) -> Bool { access("/proc/self/task/\(tid)", F_OK) == 0 }

/// How many threads of the process the kernel lists under `name` (their
/// comm, as RLThread sets it from the thread's name: at most 15 bytes).
func thrTaskCount(named name: String) -> Int {
    guard let dir = opendir("/proc/self/task") else { return -1 }
    defer { closedir(dir) }
    var count = 0
    while let entry = readdir(dir) {
        let tid = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard tid != "." && tid != "..", let file = fopen("/proc/self/task/\(tid)/comm", "r") else { continue }
        var buffer = [CChar](repeating: 0, count: 64)
        let line = fgets(&buffer, Int32(buffer.count), file) != nil
            ? String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        fclose(file)
        if line == name { count += 1 }
    }
    return count
}

/// Counts instances alive, to see when the library releases a value.
final class ThrCanary: Sendable {
    let onDeinit: @Sendable () -> Void
    init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
    deinit { onDeinit() }
}

struct ThrTestError: Error, Equatable {
    let tag: Int
}

func thrCode(_ body: () throws -> Void) -> RLError.Code? {
    do {
        try body()
        return nil
    } catch let error as RLError {
        return error.code
    } catch {
        return .unknown
    }
}

/// A started joinable thread running `body`.
func thrStartJoinable<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> RLThread {
    let thread = RLThread(returning: body)
    try thread.setJoinable(true)
    try thread.start()
    return thread
}

// MARK: - Tests

@Suite("RLThread")
struct ThreadTests {
    @Test func startRunsBodyOnNewThreadAndJoinReturnsResult() throws {
        let testTid = thrTid()
        let thread = try thrStartJoinable { () -> Int32 in thrTid() }
        let tid = try thread.join(as: Int32.self)
        #expect(tid != nil)
        #expect(tid != testTid)
        #expect(thread.isFinished)
        #expect(!thread.isExecuting)
    }

    @Test func voidBodyJoinsToUnit() throws {
        let ran = ThrShared(false)
        let thread = RLThread { ran.set(true) }
        try thread.setJoinable(true)
        try thread.start()
        let result = try thread.join()
        #expect(result is Void)
        #expect(ran.get)
    }

    @Test func thrownErrorIsRethrownByJoinKeptAndHandled() throws {
        let handled = ThrShared<[Int]>([])
        let handlerThread = ThrShared<Int32>(0)
        let thread = RLThread { throw ThrTestError(tag: 7) }
        thread.errorHandler = { error in
            handled.withLock { $0.append((error as? ThrTestError)?.tag ?? -1) }
            handlerThread.set(thrTid())
        }
        try thread.setJoinable(true)
        try thread.start()
        #expect(throws: ThrTestError(tag: 7)) { try thread.join() }
        #expect(handled.get == [7])
        #expect(handlerThread.get != thrTid())
        #expect((thread.error as? ThrTestError)?.tag == 7)
    }

    @Test func detachedThreadErrorIsReportedToHandler() throws {
        let handled = ThrShared(false)
        let thread = RLThread { throw ThrTestError(tag: 1) }
        thread.errorHandler = { _ in handled.set(true) }
        try thread.start()
        #expect(thrEventually { handled.get })
        #expect(thrEventually { thread.isFinished })
        #expect(thread.error is ThrTestError)
    }

    @Test func detachNewThreadRuns() throws {
        let ran = ThrShared<Int32>(0)
        try RLThread.detachNewThread { ran.set(thrTid()) }
        #expect(thrEventually { ran.get != 0 })
        #expect(ran.get != thrTid())
    }

    @Test func stackSizeRules() throws {
        let thread = RLThread(returning: { () -> Int in 1 })
        #expect(thread.stackSize == 512 * 1024)
        #expect(thrCode { try thread.setStackSize(8 * 1024) } == .invalidArgument)
        #expect(thrCode { try thread.setStackSize(20 * 1024 + 1) } == .invalidArgument)
        #expect(thrCode { try thread.setStackSize(-4096) } == .invalidArgument)
        #expect(thread.stackSize == 512 * 1024)
        try thread.setStackSize(RLThread.minimumStackSize)
        #expect(thread.stackSize == 16 * 1024)
        try thread.setStackSize(256 * 1024)
        #expect(thread.stackSize == 256 * 1024)
        try thread.setJoinable(true)
        try thread.start()
        #expect(thrCode { try thread.setStackSize(64 * 1024) } == .invalidState)
        #expect(try thread.join(as: Int.self) == 1)
    }

    @Test func bodyRunsWithConfiguredSmallStack() throws {
        let thread = RLThread(returning: { () -> Int in
            // Some recursion on a small stack still works.
            func depth(_ n: Int) -> Int { n == 0 ? 0 : 1 + depth(n - 1) }
            return depth(100)
        })
        try thread.setStackSize(64 * 1024)
        try thread.setJoinable(true)
        try thread.start()
        #expect(try thread.join(as: Int.self) == 100)
    }

    @Test func namesBeforeAndAfterStartReadFromOtherThreads() throws {
        let gate = ThrGate()
        let seenInside = ThrShared<[String?]>([])
        let thread = RLThread {
            seenInside.withLock { $0.append(RLThread.current.name) }
            gate.wait()
            seenInside.withLock { $0.append(RLThread.current.name) }
        }
        #expect(thread.name == nil)
        let longName = "a-thread-name-longer-than-fifteen-bytes-ünïcode"
        thread.name = longName
        #expect(thread.name == longName)
        try thread.setJoinable(true)
        try thread.start()
        // Read from this (another) thread while it runs.
        #expect(thrEventually { seenInside.get.count == 1 })
        #expect(thread.name == longName)
        try thread.setName("renamed")
        // Read from a third thread.
        let third = try thrStartJoinable { thread.name }
        #expect(try third.join(as: String.self) == "renamed")
        #expect(RLThread.current.name != "renamed")
        gate.open()
        try thread.join()
        #expect(seenInside.get == [longName, "renamed"])
        thread.name = nil
        #expect(thread.name == nil)
    }

    @Test func priority() throws {
        let thread = RLThread {}
        #expect(thread.priority == 0.5)
        try thread.setPriority(0.25)
        #expect(thread.priority == 0.25)
        #expect(thrCode { try thread.setPriority(1.5) } == .invalidArgument)
        #expect(thrCode { try thread.setPriority(-0.1) } == .invalidArgument)
        #expect(thrCode { try thread.setPriority(.nan) } == .invalidArgument)
        #expect(thread.priority == 0.25)
        try thread.setJoinable(true)
        try thread.start()
        try thread.join()
    }

    @Test func startTwiceFails() throws {
        let thread = RLThread {}
        try thread.setJoinable(true)
        try thread.start()
        #expect(thrCode { try thread.start() } == .invalidState)
        try thread.join()
    }

    @Test func joinMisuse() throws {
        let unstarted = RLThread {}
        try unstarted.setJoinable(true)
        #expect(thrCode { try unstarted.join() } == .invalidState)

        let gate = ThrGate()
        let detached = RLThread { gate.wait() }
        try detached.start()
        #expect(!detached.isJoinable)
        #expect(thrCode { try detached.join() } == .invalidState)
        #expect(thrCode { try detached.setJoinable(true) } == .invalidState)
        gate.open()

        let joinable = try thrStartJoinable { () -> RLError.Code? in
            thrCode { try RLThread.current.join() }
        }
        #expect(try joinable.join(as: RLError.Code?.self) == .some(.wouldDeadlock))
        #expect(thrCode { try joinable.join() } == .invalidState)

        #expect(thrCode { try RLThread.main.join() } == .invalidState)
    }

    @Test func cancelledBeforeStartNeverRunsBody() throws {
        let ran = ThrShared(false)
        let thread = RLThread { ran.set(true) }
        try thread.setJoinable(true)
        thread.cancel()
        #expect(thread.isCancelled)
        #expect(!thread.isFinished)
        try thread.start()
        #expect(thread.isFinished)
        #expect(try thread.join() == nil)
        #expect(!ran.get)
    }

    @Test func cooperativeCancellationAndStates() throws {
        let started = ThrGate()
        let thread = RLThread(returning: { () -> Int in
            started.open()
            var loops = 0
            while !RLThread.current.isCancelled {
                loops += 1
                RLThread.sleep(forTimeInterval: 0.001)
            }
            return loops
        })
        #expect(!thread.isExecuting && !thread.isFinished && !thread.isCancelled)
        try thread.setJoinable(true)
        try thread.start()
        started.wait()
        #expect(thread.isExecuting)
        #expect(!thread.isFinished)
        thread.cancel()
        thread.cancel() // idempotent
        #expect(try thread.join(as: Int.self) != nil)
        #expect(thread.isCancelled && thread.isFinished && !thread.isExecuting)
    }

    @Test func currentIsTheSameObjectAndMainIsKnown() throws {
        let thread = RLThread(returning: { () -> [Bool] in
            [RLThread.current == RLThread.current, RLThread.isMainThread, RLThread.current.isMainThread,
             RLThread.main.isMainThread, RLThread.current != RLThread.main]
        })
        let identical = ThrShared(false)
        let holder = ThrShared<RLThread?>(thread)
        let check = RLThread {
            identical.set(RLThread.current === holder.get)
        }
        holder.set(check)
        try check.setJoinable(true)
        try check.start()
        try check.join()
        #expect(identical.get)

        try thread.setJoinable(true)
        try thread.start()
        #expect(try thread.join(as: [Bool].self) == [true, false, false, true, true])
        #expect(RLThread.isMultiThreaded)
    }

    @Test func foreignThreadGetsAnRLThread() throws {
        var pthread = pthread_t()
        let rc = pthread_create(&pthread, nil, { _ in
            let me = RLThread.current
            me.name = "foreign"
            foreignResult.set((me.isExecuting, me == RLThread.current, me.name))
            return nil
        }, nil)
        #expect(rc == 0)
        pthread_join(pthread, nil)
        let seen = foreignResult.get
        #expect(seen?.0 == true)
        #expect(seen?.1 == true)
        #expect(seen?.2 == "foreign")
    }

    @Test func mainAndForeignThreadsReadTheKernelsName() throws {
        // The main thread: the kernel's name (the process name cut to 15
        // bytes), as Foundation's Thread.main.name reads it.
        var comm = [CChar](repeating: 0, count: 32)
        let fd = open("/proc/self/task/\(getpid())/comm", O_RDONLY)
        #expect(fd >= 0)
        let n = read(fd, &comm, comm.count - 1)
        close(fd)
        #expect(n > 0)
        let kernelName = String(decoding: comm[0..<max(n, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .split(separator: "\n").first.map(String.init)
        #expect(kernelName != nil)
        #expect(RLThread.main.name == kernelName)

        // A thread we did not create, named behind our back (what
        // pthread_setname_np does, which Glibc's module does not import).
        var pthread = pthread_t()
        let rc = pthread_create(&pthread, nil, { _ in
            let fd = open("/proc/thread-self/comm", O_WRONLY)
            if fd >= 0 {
                _ = write(fd, "named-by-pthrd", 14)
                close(fd)
            }
            foreignName.set(RLThread.current.name)
            return nil
        }, nil)
        #expect(rc == 0)
        pthread_join(pthread, nil)
        #expect(foreignName.get == "named-by-pthrd")
    }

    @Test func willBecomeMultiThreaded() throws {
        let ran = ThrShared(0)
        do {
            try RLThread.addWillBecomeMultiThreadedHandler { ran.withLock { $0 += 1 } }
            // Added in time: a start (ours or a concurrent test's) runs it once.
            let thread = try thrStartJoinable {}
            try thread.join()
            #expect(thrEventually { ran.get == 1 })
        } catch let error as RLError {
            #expect(error.code == .invalidState)
            #expect(RLThread.isMultiThreaded)
            #expect(ran.get == 0)
        }
        #expect(RLThread.isMultiThreaded)
        #expect(thrCode { try RLThread.addWillBecomeMultiThreadedHandler {} } == .invalidState)
    }

    @Test func willExitHandlersRunInOrderOnExitingThreadAfterRunLoopCleanup() throws {
        let log = ThrLog()
        let gate = ThrGate()
        let thread = RLThread {
            // A delayed request that never fires: the run loop teardown
            // releases it (and the canary it holds) before the handlers run.
            let canary = ThrCanary { log.add("run loop cleaned up") }
            _ = try RLThread.perform(after: 3600) { _ = canary }
            gate.wait()
            RLThread.current["value"] = ThrCanary { log.add("dictionary value released") }
            log.add("body returned")
        }
        let global = try RLThread.addWillExitHandlerForAllThreads { exiting in
            if exiting == thread { log.add("global handler") }
        }
        defer { try? RLThread.removeWillExitHandler(global) }
        try thread.addWillExitHandler { exiting in
            log.add("handler 1 on \(exiting == RLThread.current ? "exiting thread" : "other thread")")
            log.add("value still there: \(exiting["value"] != nil)")
            log.add("finished: \(exiting.isFinished)")
        }
        let removed = try thread.addWillExitHandler { _ in log.add("removed handler") }
        try thread.addWillExitHandler { _ in log.add("handler 2") }
        try RLThread.removeWillExitHandler(removed)
        #expect(thrCode { try RLThread.removeWillExitHandler(removed) } == .notFound)
        try thread.setJoinable(true)
        try thread.start()
        gate.open()
        try thread.join()
        #expect(log.all == ["body returned", "run loop cleaned up", "handler 1 on exiting thread",
                            "value still there: true", "finished: false", "handler 2", "global handler",
                            "dictionary value released"])
        #expect(thrCode { try thread.addWillExitHandler { _ in } } == .invalidState)
    }

    @Test func exitStillRunsCleanup() throws {
        let log = ThrLog()
        let thread = RLThread {
            log.add("before exit")
            RLThread.exit()
        }
        try thread.addWillExitHandler { _ in log.add("will exit") }
        try thread.setJoinable(true)
        try thread.start()
        #expect(try thread.join() == nil)
        #expect(log.all == ["before exit", "will exit"])
        #expect(thread.isFinished)
    }

    @Test func threadDictionary() throws {
        let released = ThrShared(0)
        let gate = ThrGate()
        let setInside = ThrGate()
        let thread = RLThread {
            RLThread.current["inside"] = 42
            setInside.open()
            gate.wait()
        }
        thread["outside"] = "hello"
        thread.setValue(ThrCanary { released.withLock { $0 += 1 } }, forKey: "canary")
        try thread.setJoinable(true)
        try thread.start()
        setInside.wait()
        #expect(thread.value(forKey: "inside", as: Int.self) == 42)
        #expect(thread["outside"] as? String == "hello")
        #expect(thread.value(forKey: "outside", as: Int.self) == nil)
        #expect(thread["missing"] == nil)
        // Replacing releases the old value.
        thread["canary"] = ThrCanary { released.withLock { $0 += 10 } }
        #expect(released.get == 1)
        #expect(thread.removeValue(forKey: "outside"))
        #expect(!thread.removeValue(forKey: "outside"))
        gate.open()
        try thread.join()
        // Values are released when the thread exits.
        #expect(released.get == 11)
    }

    @Test func threadDictionaryReadsRaceWithWrites() throws {
        let thread = RLThread {}
        let writers = (0..<2).map { w in
            RLThread {
                for i in 0..<2_000 { thread["k"] = ThrCanary { _ = w + i } }
            }
        }
        let readers = (0..<2).map { _ in
            RLThread(returning: { () -> Int in
                var seen = 0
                for _ in 0..<2_000 where thread["k"] is ThrCanary { seen += 1 }
                return seen
            })
        }
        for t in writers + readers {
            try t.setJoinable(true)
            try t.start()
        }
        for t in writers + readers { try t.join() }
        #expect(thread["k"] is ThrCanary)
    }

    @Test func bodiesAreReleased() throws {
        let released = ThrShared(0)
        do {
            // Never started.
            let canary = ThrCanary { released.withLock { $0 += 1 } }
            _ = RLThread { _ = canary }
        }
        #expect(released.get == 1)
        do {
            // Joinable, started, never joined.
            let canary = ThrCanary { released.withLock { $0 += 1 } }
            let gate = ThrGate()
            let thread = RLThread { _ = canary; gate.open() }
            try thread.setJoinable(true)
            try thread.start()
            gate.wait()
        }
        do {
            // Detached, wrapper dropped while it runs.
            let canary = ThrCanary { released.withLock { $0 += 1 } }
            try RLThread.detachNewThread { _ = canary }
        }
        #expect(thrEventually { released.get == 3 })
    }

    @Test func sleep() throws {
        RLThread.sleep(forTimeInterval: 0.002)
        RLThread.sleep(forTimeInterval: -1)
        RLThread.sleep(forTimeInterval: .nan)
        RLThread.sleep(for: .milliseconds(2))
        let date = RLTime.now + 0.005
        RLThread.sleep(until: date)
        // Never returns early (a millisecond of slack for wall-clock steps).
        #expect(RLTime.now >= date - 0.001)
    }

    @Test func manyThreadsStartedAndJoined() throws {
        let total = ThrShared(0)
        for _ in 0..<20 {
            var batch: [RLThread] = []
            for i in 0..<50 {
                let t = RLThread { total.withLock { $0 += i } }
                try t.setJoinable(true)
                try t.start()
                batch.append(t)
            }
            for t in batch { try t.join() }
        }
        #expect(total.get == 20 * (0..<50).reduce(0, +))
    }
}

/// Where the foreign-thread test's pthread leaves what it saw.
let foreignResult = ThrShared<(Bool, Bool, String?)?>(nil)
/// The name a pthread named with pthread_setname_np reads for itself.
let foreignName = ThrShared<String?>(nil)
