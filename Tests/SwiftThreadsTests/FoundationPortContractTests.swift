// What a Foundation `Port` subclass, delegate or observer relies on, over
// RLPort: the run loop calls schedule/remove, a delegate need not be
// Sendable, invalidation is posted as Foundation's notification, components
// come as Foundation's, dates read as `Date`. Foundation's own tests of the
// same run in the FoundationPortTests target.
import Foundation
@_spi(Foundation) import SwiftThreads
@_spi(Foundation) import SwiftThreadsFoundation
import Testing

/// A port that records what the run loop asks of it; `forward` passes the
/// calls on to RLPort's own implementation.
private final class RecordingPort: RLPort, @unchecked Sendable {
    let forward: Bool
    private let lock = RLLock()
    private var _calls: [String] = []

    init(forward: Bool) {
        self.forward = forward
        super.init()
    }

    var calls: [String] { lock.withLock { _calls } }

    override func schedule(in runLoop: RLRunLoop, forMode mode: RLRunLoop.Mode) {
        lock.withLock { _calls.append("schedule \(mode.rawValue)") }
        if forward { super.schedule(in: runLoop, forMode: mode) }
    }

    override func remove(from runLoop: RLRunLoop, forMode mode: RLRunLoop.Mode) {
        lock.withLock { _calls.append("remove \(mode.rawValue)") }
        if forward { super.remove(from: runLoop, forMode: mode) }
    }
}

/// A delegate that is not Sendable: it counts on the thread that calls it.
private final class CountingDelegate: RLPortDelegate {
    var count = 0
    func handle(_ message: RLPortMessage) { count += 1 }
}

private let other = RLRunLoop.Mode("FoundationPortContractTests.other")

/// The calling thread's nice value (Linux: of this one thread).
private func currentNice() -> Int32 {
    getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
}

@Suite struct FoundationPortContractTests {
    // MARK: schedule / remove

    @Test func theLoopCallsScheduleAndRemoveOncePerMode() {
        let calls = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let port = RecordingPort(forward: false)
            #expect(loop.add(port, forMode: .default))
            #expect(loop.add(port, forMode: .default))      // in it already: not again
            #expect(loop.add(port, forMode: other))
            #expect(loop.remove(port, forMode: other))
            #expect(loop.remove(port, forMode: other))      // not in it: not called
            #expect(loop.add(port, forMode: other))
            // Its schedule kept the port from the loop: nothing added in C.
            #expect(!loop.contains(port, forMode: .default))
            port.invalidate()
            return port.calls
        }
        #expect(calls == ["schedule kCFRunLoopDefaultMode", "schedule \(other.rawValue)", "remove \(other.rawValue)",
                          "schedule \(other.rawValue)"])
    }

    @Test func anOverrideThatCallsSuperIsAddedAndDelivered() {
        let (calls, inLoop, delivered, removed) = onFreshLoopThread { () -> ([String], Bool, Bool, Bool) in
            let loop = RLRunLoop.current
            let got = LoopEventLog<UInt32>()
            let port = RecordingPort(forward: true)
            port.setHandler { got.append($0.msgid) }
            #expect(loop.add(port, forMode: .default))
            let inLoop = loop.contains(port, forMode: .default)
            try? port.send(msgid: 5)
            let delivered = runLoopUntil { got.count == 1 }
            #expect(loop.remove(port, forMode: .default))
            let removed = !loop.contains(port, forMode: .default)
            port.invalidate()
            return (port.calls, inLoop, delivered, removed)
        }
        #expect(calls == ["schedule kCFRunLoopDefaultMode", "remove kCFRunLoopDefaultMode"])
        #expect(inLoop && delivered && removed)
    }

    @Test func aFailedScheduleIsNotRemembered() {
        let (first, second, code, calls) = onFreshLoopThread { () -> (Bool, Bool, RLError.Code, [String]) in
            let loop = RLRunLoop.current
            let port = RecordingPort(forward: true)
            port.invalidate()
            let first = loop.add(port, forMode: .default)
            let code = lastCode
            // Not recorded: the next add asks the port again (and fails again).
            let second = loop.add(port, forMode: .default)
            // Nothing recorded either: remove does not call the port.
            #expect(loop.remove(port, forMode: .default))
            return (first, second, code, port.calls)
        }
        #expect(!first && !second)
        #expect(code == .invalidObject)
        #expect(calls == ["schedule kCFRunLoopDefaultMode", "schedule kCFRunLoopDefaultMode"])
    }

    @Test func badModesAndPortsAreRefusedByThePortsOwnSchedule() {
        let (added, addCode, removed, removeCode) = onFreshLoopThread { () -> (Bool, RLError.Code, Bool, RLError.Code) in
            let loop = RLRunLoop.current
            let port = RLPort()
            let added = loop.add(port, forMode: RLRunLoop.Mode(""))
            let addCode = lastCode
            // Nothing was recorded: removing goes to the C library, which
            // refuses the mode too.
            let removed = loop.remove(port, forMode: RLRunLoop.Mode(""))
            let removeCode = lastCode
            port.invalidate()
            return (added, addCode, removed, removeCode)
        }
        #expect(!added && !removed)
        #expect(addCode == .invalidArgument && removeCode == .invalidArgument)
        // Foundation's component forms on an invalid port.
        let dead = RLPort()
        dead.invalidate()
        #expect(!dead.send(before: Date(timeIntervalSinceNow: 1), components: nil, from: nil, reserved: 0))
        #expect(lastCode == .invalidObject)
        #expect(!dead.send(before: Date(timeIntervalSinceNow: 1), msgid: 2, components: [.bytes([1])], from: nil,
                           reserved: 0))
        #expect(lastCode == .invalidObject)
        let parts: [RLPortComponent] = [.bytes([1])]
        #expect(!dead.send(before: Date(timeIntervalSinceNow: 1), components: parts, from: nil, reserved: 0))
        #expect(lastCode == .invalidObject)
    }

    @Test func invalidationForgetsTheModesAndTheLoopKeepsNoPort() {
        let (calls, gone) = onFreshLoopThread { () -> ([String], Bool) in
            let loop = RLRunLoop.current
            let port = RecordingPort(forward: false)
            #expect(loop.add(port, forMode: .default))
            port.invalidate()
            // Forgotten: asked again (an invalid port's own schedule would fail).
            #expect(loop.add(port, forMode: .default))
            let calls = port.calls
            weak var weakPort: RecordingPort?
            do {
                let temporary = RecordingPort(forward: true)
                weakPort = temporary
                #expect(loop.add(temporary, forMode: .default))
            }
            return (calls, weakPort == nil)
        }
        #expect(calls == ["schedule kCFRunLoopDefaultMode", "schedule kCFRunLoopDefaultMode"])
        #expect(gone)
    }

    // MARK: Delegates

    @Test func aDelegateNeedNotBeSendable() {
        let count = onFreshLoopThread { () -> Int in
            let port = RLPort()
            let delegate = CountingDelegate()
            port.setDelegate(delegate)
            RLRunLoop.current.add(port, forMode: .default)
            for id in 1...3 as ClosedRange<UInt32> { try? port.send(msgid: id) }
            _ = runLoopUntil { delegate.count == 3 }
            port.invalidate()
            return delegate.count
        }
        #expect(count == 3)
    }

    @Test func settingTheDelegateAgainRebindsIt() throws {
        let port = RLPort()
        // Handed from thread to thread on purpose (the test's sequencing
        // keeps the uses apart).
        nonisolated(unsafe) let delegate = CountingDelegate()
        // Bound to a first loop thread by its first message...
        let first = onFreshLoopThread { () -> Bool in
            port.setDelegate(delegate)
            RLRunLoop.current.add(port, forMode: .default)
            try? port.send(msgid: 1)
            let got = runLoopUntil { delegate.count == 1 }
            RLRunLoop.current.remove(port, forMode: .default)
            // ...and unbound by setting it again.
            port.setDelegate(delegate)
            return got
        }
        let second = onFreshLoopThread { () -> Bool in
            RLRunLoop.current.add(port, forMode: .default)
            try? port.send(msgid: 2)
            let got = runLoopUntil { delegate.count == 2 }
            RLRunLoop.current.remove(port, forMode: .default)
            return got
        }
        #expect(first && second)
        port.invalidate()
    }

    @Test func aDelegateOutlivesItsFirstThread() {
        let port = RLPort()
        // Handed from thread to thread on purpose: the first is gone when
        // the second uses it.
        nonisolated(unsafe) let delegate = CountingDelegate()
        port.setDelegate(delegate)
        for round in 1...2 {
            let got = onFreshLoopThread { () -> Bool in
                RLRunLoop.current.add(port, forMode: .default)
                try? port.send(msgid: UInt32(round))
                let got = runLoopUntil { delegate.count == round }
                RLRunLoop.current.remove(port, forMode: .default)
                return got
            }
            #expect(got)
        }
        port.invalidate()
    }

    @Test func aDelegateCalledOnASecondThreadStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let port = RLPort()
            let delegate = CountingDelegate()
            port.setDelegate(delegate)
            RLRunLoop.current.add(port, forMode: .default)
            try? port.send(msgid: 1)
            _ = runLoopUntil { delegate.count == 1 }
            RLRunLoop.current.remove(port, forMode: .default)
            // The same delegate, now handed a message on another thread.
            _ = onFreshLoopThread { () -> Bool in
                RLRunLoop.current.add(port, forMode: .default)
                try? port.send(msgid: 2)
                return runLoopUntil { false }
            }
        }
    }

    // MARK: Foundation's notification and components

    @Test func invalidationIsPostedAsFoundationsNotification() throws {
        #expect(_mangledTypeName(RLFoundationHooks.self) == "22SwiftThreadsFoundation17RLFoundationHooksO")
        #expect(RLPort.didBecomeInvalidNotification == Port.didBecomeInvalidNotification)
        let seen = LoopEventLog<ObjectIdentifier>()
        let port = RLPort()
        let socket = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let center = NotificationCenter.default
        let tokens = [port, socket].map { watched in
            center.addObserver(forName: Port.didBecomeInvalidNotification, object: watched, queue: nil) { note in
                seen.append(ObjectIdentifier(note.object as AnyObject))
            }
        }
        defer { for token in tokens { center.removeObserver(token) } }
        port.invalidate()
        port.invalidate()   // once only
        socket.invalidate()
        #expect(seen.values == [ObjectIdentifier(port), ObjectIdentifier(socket)])

        // A port freed while valid is posted too (object: a wrapper of it).
        let anyPort = LoopEventLog<Bool>()
        let token = center.addObserver(forName: Port.didBecomeInvalidNotification, object: nil, queue: nil) { note in
            anyPort.append(note.object is RLPort)
        }
        defer { center.removeObserver(token) }
        do { _ = RLPort() }
        #expect(anyPort.values.contains(true))
    }

    @Test func foundationComponentsAreSentAndSeenAsFoundations() {
        let got = LoopEventLog<[RLPortComponent]>()
        let port = RLPort { message in got.append(message.components ?? []) }
        let reply = RLPort()
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        let data = Data("I cannot weave".utf8)
        #expect(port.send(before: Date(timeIntervalSinceNow: 5), components: NSMutableArray(array: [data, reply]),
                          from: nil, reserved: 0))
        #expect(port.send(before: Date(timeIntervalSinceNow: 5), msgid: 3,
                          components: NSMutableArray(array: [data as NSData]), from: reply, reserved: 0))
        #expect(loopEventually { got.count == 2 })
        let seen = got.values.map { $0.map { AnyHashable($0) } }
        let expected: [[AnyHashable]] = [[data as NSData, reply], [data]]
        #expect(seen == expected)
        // Anything else is refused and nothing is sent.
        #expect(!port.send(before: Date(timeIntervalSinceNow: 5), components: NSMutableArray(array: [data, "text"]),
                           from: nil, reserved: 0))
        #expect(lastCode == .none)
        #expect(port.queuedCount == 0)
        loop.stop()
        thread.join()
        port.invalidate()
        reply.invalidate()
        #expect(got.count == 2)
    }

    // MARK: Dates

    @Test func datePropertiesAreDates() throws {
        let timer = RLTimer(fire: Date(timeIntervalSinceNow: 60), interval: 0, repeats: false) { _ in }
        let date = timer.fireDate
        #expect(abs(date.timeIntervalSinceNow - 60) < 30)
        timer.fireDate = date.addingTimeInterval(10)
        #expect(abs(timer.fireDate.timeIntervalSince(date) - 10) < 1e-3)
        let number: RLAbsoluteTime = timer.fireDate    // the number, where asked for
        #expect(abs(number - date.timeIntervalSinceReferenceDate - 10) < 1e-3)
        #expect(timer.fireDateAsDate == timer.fireDate)
        timer.invalidate()
        #expect(timer.fireDate == Date(timeIntervalSinceReferenceDate: 0))

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("FoundationPortContract-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let lock = try RLDistributedLock(path: dir.appendingPathComponent("x.lock").path)
        #expect(lock.lockDate == nil)
        #expect(lock.tryLock())
        let locked = try #require(lock.lockDate)
        #expect(abs(locked.timeIntervalSinceNow) < 600)
        #expect(lock.lockDateAsDate == locked)
        #expect(lock.unlock())
    }

    // MARK: Quality of service

    @Test func qualityOfServiceMapsOntoNiceValues() throws {
        let foundation: [QualityOfService] = [.userInteractive, .userInitiated, .utility, .background, .default]
        #expect(RLQualityOfService.allCases.map(\.rawValue) == foundation.map(\.rawValue))
        for qos in RLQualityOfService.allCases {
            #expect(RLQualityOfService(threadPriority: qos.threadPriority) == qos)
            #expect(RLQualityOfService(QualityOfService(qos)) == qos)
        }
        #expect(RLQualityOfService.background.threadPriority == 0)
        #expect(RLQualityOfService.default.threadPriority == 0.5)
        #expect(RLQualityOfService(threadPriority: 0.55) == .default)
        // Out of range or NaN: the nearest class, or the default.
        #expect(RLQualityOfService(threadPriority: 7) == .userInteractive)
        #expect(RLQualityOfService(threadPriority: -1) == .background)
        #expect(RLQualityOfService(threadPriority: .nan) == .default)

        // Before start: the thread starts at nice 19.
        let background = RLThread(returning: { currentNice() })
        #expect(background.qualityOfService == .default)
        background.qualityOfService = .background
        #expect(background.qualityOfService == .background)
        #expect(background.priority == 0)
        try background.setJoinable(true)
        try background.start()
        #expect(try background.join(as: Int32.self) == 19)
    }

    @Test func qualityOfServiceOfARunningThread() throws {
        let base = currentNice()
        let gate = RLConditionLock(condition: 0)
        let thread = RLThread(returning: { () -> [Int32] in
            // Set by the thread itself...
            gate.lock()
            RLThread.current.qualityOfService = .utility
            let utility = currentNice()
            // ...then by another thread while this one runs.
            gate.unlock(withCondition: 1)
            gate.lock(whenCondition: 2)
            let background = currentNice()
            gate.unlock()
            return [utility, background]
        })
        try thread.setJoinable(true)
        try thread.start()
        gate.lock(whenCondition: 1)
        #expect(thread.qualityOfService == .utility)
        thread.qualityOfService = .background
        gate.unlock(withCondition: 2)
        let nices = try #require(try thread.join(as: [Int32].self))
        // An unprivileged thread cannot go below its creator's nice value.
        #expect(nices == [max(10, base), 19])

        // Above the default: granted only to a privileged process, else the
        // thread keeps the lowest nice value it may take.
        let eager = RLThread(returning: { () -> Int32 in
            RLThread.current.qualityOfService = .userInteractive
            return currentNice()
        })
        try eager.setJoinable(true)
        try eager.start()
        let nice = try #require(try eager.join(as: Int32.self))
        #expect(nice == -10 || nice == base)
        // A finished thread keeps what was set; nothing else happens.
        eager.qualityOfService = .utility
        #expect(eager.qualityOfService == .utility || eager.qualityOfService == .userInteractive)
    }
}

/// Runs the calling thread's loop until `condition` holds (false after a
/// generous bound).
private func runLoopUntil(_ condition: () -> Bool) -> Bool {
    let deadline = RLTime.now + 30
    while !condition() {
        if RLTime.now > deadline { return false }
        _ = try? RLRunLoop.current.run(mode: .default, for: 0.05, returnAfterSourceHandled: true)
    }
    return true
}
