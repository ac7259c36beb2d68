import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Run-loop test support (shared by the run-loop, timer, observer,
// source and file-descriptor suites)
//
// Every test that runs a loop does so on a fresh pthread: each thread has its
// own run loop, so no state leaks between tests and no Swift-concurrency pool
// thread is blocked while a loop waits. Waits are bounded only to keep a
// broken build from hanging; no test asserts how long anything takes.

/// A pthread running `body`; `join()` waits for it.
final class RunLoopTestThread: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: @Sendable () -> Void

    init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
        let arg = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { arg in
            let me = Unmanaged<RunLoopTestThread>.fromOpaque(arg!).takeRetainedValue()
            me.body()
            return nil
        }, arg)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    func join() { pthread_join(thread, nil) }
}

/// Written by one thread before `join()`, read after it.
final class RunLoopTestResult<T: Sendable>: @unchecked Sendable {
    var value: T?
}

/// Runs `body` on a new thread (with its own, fresh run loop) and returns
/// its result once the thread has exited.
@discardableResult
func onFreshLoopThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    let result = RunLoopTestResult<T>()
    let thread = RunLoopTestThread { result.value = body() }
    thread.join()
    return result.value!
}

/// A pthread mutex: ThreadSanitizer understands it (it does not see
/// `Synchronization.Mutex`'s futex hand-off).
final class RunLoopTestLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    init() { pthread_mutex_init(mutex, nil) }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }
}

/// A thread-safe append-only record of events.
final class LoopEventLog<T: Sendable>: @unchecked Sendable {
    private let lock = RunLoopTestLock()
    private var items: [T] = []
    func append(_ item: T) { lock.locked { items.append(item) } }
    var values: [T] { lock.locked { items } }
    var count: Int { lock.locked { items.count } }
}

/// A thread-safe slot for handing one value between threads.
final class LoopSlot<T: Sendable>: @unchecked Sendable {
    private let lock = RunLoopTestLock()
    private var storage: T?
    func set(_ value: T) { lock.locked { storage = value } }
    var value: T? { lock.locked { storage } }
}

/// Polls `condition` until it holds; false after a generous bound.
func loopEventually(_ condition: () -> Bool) -> Bool {
    let deadline = RLTime.now + 30
    while !condition() {
        if RLTime.now > deadline { return false }
        usleep(200)
    }
    return true
}

/// A timer that never fires, to keep `mode` from being empty.
@discardableResult
func keepLoopAlive(_ loop: RLRunLoop, mode: RLRunLoop.Mode = .default) -> RLTimer {
    let timer = RLTimer(fire: RLTime.distantFuture, interval: 0, repeats: false) { _ in }
    loop.add(timer, forMode: mode)
    return timer
}

/// Starts a thread whose run loop runs in the default mode (kept alive by a
/// timer) until `stop()`; returns the thread and its loop once it sleeps.
func startLoopThread(result: LoopSlot<RLRunLoop.RunResult>? = nil) -> (RunLoopTestThread, RLRunLoop) {
    let loopSlot = LoopSlot<RLRunLoop>()
    let thread = RunLoopTestThread {
        let loop = RLRunLoop.current
        let timer = keepLoopAlive(loop)
        loopSlot.set(loop)
        let outcome = try? loop.run(mode: .default, for: 60)
        if let outcome { result?.set(outcome) }
        timer.invalidate()
    }
    _ = loopEventually { loopSlot.value?.isWaiting == true }
    return (thread, loopSlot.value!)
}

let testCustomMode = RLRunLoop.Mode("RunLoopTests.custom")

@Suite struct RunLoopTests {
    @Test func modeNamesAndEquality() {
        #expect(RLRunLoop.Mode.default.rawValue == "kCFRunLoopDefaultMode")
        #expect(RLRunLoop.Mode.common.rawValue == "kCFRunLoopCommonModes")
        // The C names stand for the same modes.
        #expect(RLRunLoop.Mode("kRLRunLoopDefaultMode") == .default)
        #expect(RLRunLoop.Mode(rawValue: "kRLRunLoopCommonModes") == .common)
        #expect(RLRunLoop.Mode("x") == RLRunLoop.Mode(rawValue: "x"))
        #expect(RLRunLoop.Mode("x") != RLRunLoop.Mode("y"))
        #expect(Set([RLRunLoop.Mode("x"), RLRunLoop.Mode("x"), .default]).count == 2)
    }

    @Test func currentIsOnePerThread() {
        let (same, notMain, identical) = onFreshLoopThread { () -> (Bool, Bool, Bool) in
            let a = RLRunLoop.current
            let b = RLRunLoop.current
            return (a == b, a != RLRunLoop.main, a === b)
        }
        #expect(same)
        #expect(notMain)
        #expect(identical)
        let first = onFreshLoopThread { RLRunLoop.current }
        let second = onFreshLoopThread { RLRunLoop.current }
        #expect(first != second)
        #expect(RLRunLoop.main == RLRunLoop.main)
    }

    @Test func emptyModeFinishesAtOnce() throws {
        let results = onFreshLoopThread { () -> [RLRunLoop.RunResult?] in
            let loop = RLRunLoop.current
            let r1 = try? loop.run(mode: RLRunLoop.Mode("empty"), for: 30)
            let r2 = try? loop.run(mode: .default, for: .seconds(30))
            return [r1, r2]
        }
        #expect(results == [.finished, .finished])
        let (ranBefore, returned) = onFreshLoopThread { () -> (Bool, Bool) in
            let loop = RLRunLoop.current
            let ran = loop.run(mode: .default, before: RLTime.now + 30)
            loop.run(until: RLTime.now + 30)
            loop.run()
            return (ran, true)
        }
        #expect(!ranBefore)
        #expect(returned)
    }

    @Test func runBeforeIsTrueWhenItRanTheModesLastTimer() {
        // Foundation's rule: false only when the mode had nothing to run when
        // the call started; a call that fired the mode's last one-shot timer
        // (and so left the mode empty) ran, and returns true.
        let (ran, fired, ranEmpty) = onFreshLoopThread { () -> (Bool, Int, Bool) in
            let loop = RLRunLoop.current
            let mode = RLRunLoop.Mode("LastTimer")
            let counter = LoopSlot<Int>()
            counter.set(0)
            let timer = RLTimer(fire: RLTime.now - 1, interval: 0, repeats: false) { _ in
                counter.set((counter.value ?? 0) + 1)
            }
            loop.add(timer, forMode: mode)
            let ran = loop.run(mode: mode, before: RLTime.now + 30)
            let ranEmpty = loop.run(mode: mode, before: RLTime.now + 30)
            return (ran, counter.value ?? 0, ranEmpty)
        }
        #expect(ran)
        #expect(fired == 1)
        #expect(!ranEmpty)
    }

    @Test func invalidRunsThrow() {
        let codes = onFreshLoopThread { () -> [RLError.Code?] in
            let loop = RLRunLoop.current
            keepLoopAlive(loop)
            func code(_ body: () throws -> RLRunLoop.RunResult) -> RLError.Code? {
                do { _ = try body(); return nil } catch let error as RLError { return error.code } catch {
                    return .unknown
                }
            }
            return [
                code { try loop.run(mode: .common, for: 0) },
                code { try loop.run(mode: RLRunLoop.Mode(""), for: 0) },
                code { try loop.run(mode: .default, for: .nan) },
                code { try RLRunLoop.main.run(mode: .default, for: 0) },
            ]
        }
        #expect(codes[0] != nil && codes[0] != RLError.Code.none)
        #expect(codes[1] != nil && codes[1] != RLError.Code.none)
        #expect(codes[2] != nil && codes[2] != RLError.Code.none)
        #expect(codes[3] == RLError.Code.wrongThread)
        let ranOther = onFreshLoopThread { RLRunLoop.main.run(mode: .default, before: RLTime.now) }
        #expect(!ranOther)
    }

    @Test func timesOutAndPollsWithNonPositiveSeconds() {
        let results = onFreshLoopThread { () -> [RLRunLoop.RunResult?] in
            let loop = RLRunLoop.current
            let timer = keepLoopAlive(loop)
            defer { timer.invalidate() }
            return [try? loop.run(mode: .default, for: 0),
                    try? loop.run(mode: .default, for: -1),
                    try? loop.run(mode: .default, for: 0.001)]
        }
        #expect(results == [.timedOut, .timedOut, .timedOut])
    }

    @Test func stopWhenNotRunningIsIgnored() {
        // CoreFoundation's rule: only a running loop can be stopped.
        let result = onFreshLoopThread { () -> RLRunLoop.RunResult? in
            let loop = RLRunLoop.current
            let timer = keepLoopAlive(loop)
            defer { timer.invalidate() }
            #expect(loop.stop())
            return try? loop.run(mode: .default, for: 0)
        }
        #expect(result == .timedOut)
    }

    @Test func stopFromInsideTheLoop() {
        let result = onFreshLoopThread { () -> RLRunLoop.RunResult? in
            let loop = RLRunLoop.current
            let timer = keepLoopAlive(loop)
            defer { timer.invalidate() }
            loop.perform(inModes: [.default]) { RLRunLoop.current.stop() }
            return try? loop.run(mode: .default, for: 30)
        }
        #expect(result == .stopped)
    }

    @Test func stopEndsOnlyTheInnermostRun() {
        let results = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let keep = [keepLoopAlive(loop), keepLoopAlive(loop, mode: testCustomMode)]
            defer { keep.forEach { $0.invalidate() } }
            let log = LoopEventLog<String>()
            loop.perform(inModes: [.default]) {
                let inner = RLRunLoop.current
                inner.perform(inModes: [testCustomMode]) { RLRunLoop.current.stop() }
                let r = try? inner.run(mode: testCustomMode, for: 30)
                log.append("inner \(r.map { "\($0)" } ?? "error")")
                log.append("mode \(inner.currentMode?.rawValue ?? "none")")
                inner.stop()
            }
            let outer = try? loop.run(mode: .default, for: 30)
            log.append("outer \(outer.map { "\($0)" } ?? "error")")
            return log.values
        }
        #expect(results == ["inner stopped", "mode \(RLRunLoop.Mode.default.rawValue)", "outer stopped"])
    }

    @Test func runUntilReturnsOnStopAndRunBeforeReportsSources() {
        let (stopped, handled) = onFreshLoopThread { () -> (Bool, Bool) in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            defer { keep.invalidate() }
            loop.perform(inModes: [.default]) { RLRunLoop.current.stop() }
            loop.run(until: RLTime.now + 30)   // returns on stop, not after 30 s
            let source = RLRunLoopSource {}
            loop.add(source, forMode: .default)
            source.signal()
            let handled = loop.run(mode: .default, before: RLTime.now + 30)
            source.invalidate()
            return (true, handled)
        }
        #expect(stopped)
        #expect(handled)
    }

    @Test func stopFromAnotherThread() {
        let result = LoopSlot<RLRunLoop.RunResult>()
        let (thread, loop) = startLoopThread(result: result)
        #expect(loop.isWaiting)
        #expect(loop.stop())
        thread.join()
        #expect(result.value == .stopped)
        #expect(!loop.isWaiting)
    }

    @Test func performFromAnotherThreadWithWakeUp() {
        let result = LoopSlot<RLRunLoop.RunResult>()
        let (thread, loop) = startLoopThread(result: result)
        let ranOnLoopThread = LoopSlot<Bool>()
        #expect(loop.perform {
            ranOnLoopThread.set(RLRunLoop.current == loop)
            RLRunLoop.current.stop()
        })
        #expect(loop.wakeUp())
        thread.join()
        #expect(ranOnLoopThread.value == true)
        #expect(result.value == .stopped)
    }

    @Test func performBlocksRunInFIFOOrder() {
        let order = onFreshLoopThread { () -> [Int] in
            let loop = RLRunLoop.current
            let log = LoopEventLog<Int>()
            for i in 0..<50 { loop.perform(inModes: [.default]) { log.append(i) } }
            _ = try? loop.run(mode: .default, for: 0)
            return log.values
        }
        #expect(order == Array(0..<50))
    }

    @Test func performRunsOnlyInItsModes() {
        let (afterDefault, afterCustom, afterBoth) = onFreshLoopThread { () -> ([String], [String], [String]) in
            let loop = RLRunLoop.current
            let keep = [keepLoopAlive(loop), keepLoopAlive(loop, mode: testCustomMode)]
            defer { keep.forEach { $0.invalidate() } }
            let log = LoopEventLog<String>()
            loop.perform(inModes: [testCustomMode]) { log.append("custom") }
            loop.perform(inModes: [.default, testCustomMode]) { log.append("either") }
            _ = try? loop.run(mode: .default, for: 0)
            let afterDefault = log.values
            _ = try? loop.run(mode: testCustomMode, for: 0)
            let afterCustom = log.values
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: testCustomMode, for: 0)
            return (afterDefault, afterCustom, log.values)
        }
        #expect(afterDefault == ["either"])
        #expect(afterCustom == ["either", "custom"])
        #expect(afterBoth == ["either", "custom"])
    }

    @Test func performWithNoModesFails() {
        let loop = onFreshLoopThread { RLRunLoop.current }
        #expect(!loop.perform(inModes: []) {})
    }

    @Test func commonModesAndCurrentMode() {
        let (modes, seen, outside) = onFreshLoopThread { () -> ([RLRunLoop.Mode], [RLRunLoop.Mode?], RLRunLoop.Mode?) in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop, mode: testCustomMode)
            defer { keep.invalidate() }
            loop.addCommonMode(testCustomMode)
            let seen = LoopEventLog<RLRunLoop.Mode?>()
            loop.perform { seen.append(RLRunLoop.current.currentMode) }
            _ = try? loop.run(mode: testCustomMode, for: 0)
            return (loop.allModes, seen.values, loop.currentMode)
        }
        #expect(modes.contains(testCustomMode))
        #expect(modes.contains(.default))
        #expect(seen == [testCustomMode])
        #expect(outside == nil)
    }

    @Test func nextTimerFireDate() {
        let (none, next) = onFreshLoopThread { () -> (RLAbsoluteTime?, RLAbsoluteTime?) in
            let loop = RLRunLoop.current
            let none = loop.nextTimerFireDate(in: .default)
            let date = RLTime.now + 1000
            let later = RLTimer(fire: date + 500, interval: 0, repeats: false) { _ in }
            let sooner = RLTimer(fire: date, interval: 0, repeats: false) { _ in }
            loop.add(later, forMode: .default)
            loop.add(sooner, forMode: .default)
            let next = loop.nextTimerFireDate(in: .default).map { $0 - date }
            later.invalidate()
            sooner.invalidate()
            return (none, next)
        }
        #expect(none == nil)
        #expect(next.map { abs($0) < 1e-3 } == true)
    }

    @Test func performAndWaitReturnsTheValue() async throws {
        let (thread, loop) = startLoopThread()
        let onLoop = try await loop.performAndWait { RLRunLoop.current == loop }
        #expect(onLoop)
        let value = try await loop.performAndWait(inModes: [.default]) { 6 * 7 }
        #expect(value == 42)
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await loop.performAndWait { () throws -> Int in throw Boom() }
        }
        loop.stop()
        thread.join()
    }

    @Test(.timeLimit(.minutes(1)))
    func performAndWaitFailsWhenTheLoopIsGone() async {
        // Queued but never run (the thread exits without running the mode),
        // or refused because the loop is already gone: either way an error,
        // never a hang or a leaked continuation.
        let loopSlot = LoopSlot<RLRunLoop>()
        let queued = LoopSlot<Bool>()
        let thread = RunLoopTestThread {
            loopSlot.set(RLRunLoop.current)
            _ = loopEventually { queued.value == true }
        }
        _ = loopEventually { loopSlot.value != nil }
        let loop = loopSlot.value!
        let task = Task { try await loop.performAndWait(inModes: [testCustomMode]) { 1 } }
        await Task.yield()
        queued.set(true)
        thread.join()
        await #expect(throws: RLError.self) { try await task.value }
        await #expect(throws: RLError.self) { try await loop.performAndWait { 2 } }
    }

    @Test func addRemoveContainsAcrossThreads() {
        let (thread, loop) = startLoopThread()
        let timer = RLTimer(fire: RLTime.distantFuture, interval: 0, repeats: false) { _ in }
        #expect(loop.add(timer, forMode: testCustomMode))
        #expect(loop.contains(timer, forMode: testCustomMode))
        #expect(!loop.contains(timer, forMode: .default))
        #expect(loop.remove(timer, forMode: testCustomMode))
        #expect(!loop.contains(timer, forMode: testCustomMode))
        loop.stop()
        thread.join()
    }
}
