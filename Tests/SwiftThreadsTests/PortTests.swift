import Testing
@testable import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Local ports (RLPort, RLPortMessage) and message ports (RLMessagePort).
// Ports receive on run loops that run on fresh pthreads (RunLoopTests.swift
// support); waits are bounded only to keep a broken build from hanging.

private enum Msg {
    static let checkIn: UInt32 = 100
    static let work: UInt32 = 101
    static let result: UInt32 = 102
    static let quit: UInt32 = 103
}

private func u32Bytes(_ value: UInt32) -> RLPortComponent {
    withUnsafeBytes(of: value.littleEndian) { .bytes($0) }
}

private func u32(_ component: RLPortComponent?) -> UInt32? {
    guard let data = component?.data, data.count == 4 else { return nil }
    return UInt32(littleEndian: data.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
}

/// Runs the calling thread's loop in the default mode until `condition`
/// holds (false after a generous bound).
private func runUntil(_ condition: () -> Bool) -> Bool {
    let deadline = RLTime.now + 30
    while !condition() {
        if RLTime.now > deadline { return false }
        _ = RLRunLoop.current.run(mode: .default, before: RLTime.now + 0.5)
    }
    return true
}

/// A port subclass, as a program may make (Foundation's `Port` is open).
final class TaggedPort: RLPort, @unchecked Sendable {
    let tag: String
    init(tag: String) {
        self.tag = tag
        super.init()
    }
}

// MARK: - The guide's check-in protocol

/// The main thread's side (Listing 3-14): keeps the worker's port from the
/// check-in, then collects results.
private final class MainSide: RLPortDelegate, @unchecked Sendable {
    private let lock = RunLoopTestLock()
    private var _workerPort: RLPort?
    private var _results: [UInt32] = []
    let checks = LoopEventLog<Bool>()
    weak var mainPort: RLPort?

    var workerPort: RLPort? { lock.locked { _workerPort } }
    var results: [UInt32] { lock.locked { _results } }

    func handle(_ message: RLPortMessage) {
        checks.append(message.receivePort === mainPort)
        switch message.msgid {
        case Msg.checkIn:
            // The worker's port arrives as the object the worker made.
            checks.append(message.sendPort is TaggedPort)
            lock.locked { _workerPort = message.sendPort }
        case Msg.result:
            checks.append(message.sendPort === workerPort)
            if let value = u32(message.components?.first) { lock.locked { _results.append(value) } }
        default:
            checks.append(false)
        }
    }
}

/// The worker's side (Listings 3-15, 3-16): squares numbers and answers
/// through the message's send port.
private final class WorkerSide: RLPortDelegate, @unchecked Sendable {
    private let lock = RunLoopTestLock()
    private var _shouldExit = false
    weak var myPort: RLPort?
    let sendFailures = LoopEventLog<UInt32>()

    var shouldExit: Bool { lock.locked { _shouldExit } }

    func handle(_ message: RLPortMessage) {
        switch message.msgid {
        case Msg.work:
            let value = u32(message.components?.first) ?? 0
            let ok = message.sendPort?.send(before: RLTime.now + 5, msgid: Int(Msg.result),
                                            components: [u32Bytes(value * value)], from: myPort, reserved: 0)
            if ok != true { sendFailures.append(value) }
        case Msg.quit:
            lock.locked { _shouldExit = true }
        default:
            break
        }
    }
}

@Suite struct PortTests {
    @Test func checkInProtocolBetweenThreads() {
        let (results, checks, workerFailures) = onFreshLoopThread { () -> ([UInt32], [Bool], [UInt32]) in
            let main = MainSide()
            let mainPort = RLPort()
            main.mainPort = mainPort
            mainPort.setDelegate(main)
            #expect(RLRunLoop.current.add(mainPort, forMode: .default))
            let worker = WorkerSide()
            let workerThread = RunLoopTestThread { [mainPort] in
                // Listing 3-16: the worker's own port, and a check-in whose
                // reply port is it.
                let myPort = TaggedPort(tag: "worker")
                worker.myPort = myPort
                myPort.setDelegate(worker)
                RLRunLoop.current.add(myPort, forMode: .default)
                let checkIn = RLPortMessage(sendPort: mainPort, receivePort: myPort, components: nil)
                checkIn.msgid = Msg.checkIn
                #expect(checkIn.sendPort === mainPort)
                #expect(checkIn.receivePort === myPort)
                #expect(checkIn.send(before: RLTime.now))
                #expect(runUntil { worker.shouldExit })
                myPort.invalidate()
            }
            #expect(runUntil { main.workerPort != nil })
            let workerPort = main.workerPort!
            for n in 1...20 as ClosedRange<UInt32> {
                #expect(workerPort.send(before: RLTime.now + 5, msgid: Int(Msg.work), components: [u32Bytes(n)],
                                        from: mainPort, reserved: 0))
            }
            #expect(runUntil { main.results.count == 20 })
            #expect(workerPort.send(before: RLTime.now + 5, msgid: Int(Msg.quit), components: nil, from: nil,
                                    reserved: 0))
            workerThread.join()
            mainPort.invalidate()
            return (main.results, main.checks.values, worker.sendFailures.values)
        }
        #expect(results == (1...20).map { $0 * $0 })
        #expect(!checks.isEmpty && checks.allSatisfy { $0 })
        #expect(workerFailures.isEmpty)
    }

    // MARK: Receivers

    @Test func closureHandlerKeepsEachSendersOrder() {
        let senders = 4, perSender = 500
        let received = LoopEventLog<(Int, Int)>()
        let port = RLPort { message in
            let sender = Int(message.msgid)
            let seq = Int(u32(message.components?.first) ?? 0)
            received.append((sender, seq))
        }
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        onThreads(senders) { sender in
            for seq in 0..<perSender {
                try! port.send([u32Bytes(UInt32(seq))], msgid: UInt32(sender), before: RLTime.now + 30)
            }
        }
        #expect(loopEventually { received.count == senders * perSender })
        loop.stop()
        thread.join()
        port.invalidate()
        let values = received.values
        #expect(values.count == senders * perSender)
        for sender in 0..<senders {
            #expect(values.filter { $0.0 == sender }.map(\.1) == Array(0..<perSender))
        }
    }

    @Test func receiversTakePrecedenceAndDelegateIsWeak() {
        final class Delegate: RLPortDelegate, @unchecked Sendable {
            let log: LoopEventLog<String>
            init(_ log: LoopEventLog<String>) { self.log = log }
            func handle(_ message: RLPortMessage) { log.append("delegate \(message.msgid)") }
        }
        let log = onFreshLoopThread { () -> [String] in
            let log = LoopEventLog<String>()
            let port = RLPort()
            RLRunLoop.current.add(port, forMode: .default)
            let delegate = Delegate(log)
            port.setDelegate(delegate)
            #expect(port.delegate() === delegate)
            try? port.send(msgid: 1)
            #expect(runUntil { log.count == 1 })
            port.setHandler { message in log.append("handler \(message.msgid)") }
            try? port.send(msgid: 2)
            #expect(runUntil { log.count == 2 })
            port.setHandler(nil)
            try? port.send(msgid: 3)
            #expect(runUntil { log.count == 3 })
            port.invalidate()
            return log.values
        }
        #expect(log == ["delegate 1", "handler 2", "delegate 3"])

        let port = RLPort()
        do {
            let delegate = Delegate(LoopEventLog<String>())
            port.setDelegate(delegate)
        }
        #expect(port.delegate() == nil)
    }

    @Test func asyncSequenceDeliversInOrderAndEndsOnInvalidate() async throws {
        let port = RLPort()
        let messages = port.messages
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        for i in 0..<200 {
            try port.send([.bytes([UInt8(i % 256)])], msgid: UInt32(i), before: RLTime.now + 30)
        }
        var ids: [UInt32] = []
        var bytesMatch = true
        for await message in messages {
            ids.append(message.msgid)
            bytesMatch = bytesMatch && message.components?.first?.data == RLData([UInt8(message.msgid % 256)])
            if ids.count == 200 { port.invalidate() }
        }
        // Reaching here means invalidation ended the sequence.
        #expect(ids == (0..<200).map { UInt32($0) })
        #expect(bytesMatch)
        // A sequence made from an invalid port ends at once.
        var after = 0
        for await _ in port.messages { after += 1 }
        #expect(after == 0)
        loop.stop()
        thread.join()
    }

    /// Messages the loop thread made and queued before the consumer asked
    /// for them: the consumer reads what another thread wrote with no wait
    /// in between, only the sequence's own hand-off (`swift test
    /// --sanitize=thread` reported these reads as races until RLPortMessage
    /// told ThreadSanitizer about the hand-off).
    /// A consumer that waits for each message as the loop thread makes it,
    /// and asks for the next one: each message is handed over at the moment
    /// the consumer suspends (or is about to). ThreadSanitizer saw no order
    /// between the loop thread's writes and the consumer's reads then (the
    /// concurrency runtime's resume is not visible to it) until RLPortMessage
    /// published itself (SwiftThreadsShims.h). The bytes must be whole.
    @Test func messagesHandedToAWaitingConsumerOneByOneAreWhole() async throws {
        let port = RLPort()
        let messages = port.messages
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        try await expectHandedOneByOne(messages, invalidating: port) { next in
            try port.send([.bytes([UInt8(next % 256), 7])], msgid: next, before: RLTime.now + 30)
        }
        loop.stop()
        thread.join()
    }

    @Test func messagesQueuedBeforeTheConsumerAsksAreWholeWhenRead() async throws {
        let port = RLPort()
        let messages = port.messages
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        for i in 1...20 { try port.send([.bytes([UInt8(i), 7])], msgid: UInt32(i), before: RLTime.now + 30) }
        usleep(200_000)  // the loop thread delivers them meanwhile (not needed to pass)
        await expectQueuedWhole(messages, receivedOn: port)
        loop.stop()
        thread.join()
    }

    @Test func aNewerSequenceTakesOverFromTheOlderOne() async throws {
        let port = RLPort()
        let first = port.messages
        let second = port.messages
        var firstCount = 0
        for await _ in first { firstCount += 1 }  // ended by the second
        #expect(firstCount == 0)
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        try port.send(msgid: 9)
        var iterator = second.makeAsyncIterator()
        let message = await iterator.next()
        #expect(message?.msgid == 9)
        port.invalidate()
        #expect(await iterator.next() == nil)
        loop.stop()
        thread.join()
    }

    @Test func portsWorkFromActors() async throws {
        actor Inbox {
            let port = RLPort()
            private var stream: AsyncStream<RLPortMessage>?
            func open(on loop: RLRunLoop) {
                stream = port.messages
                loop.add(port, forMode: .default)
            }
            func take(_ count: Int) async -> [UInt32] {
                var out: [UInt32] = []
                guard let stream else { return out }
                for await message in stream {
                    out.append(message.msgid)
                    if out.count == count { break }
                }
                return out
            }
        }
        let (thread, loop) = startLoopThreadWith { _ in }
        let inbox = Inbox()
        await inbox.open(on: loop)
        let port = inbox.port  // Sendable: sent from outside the actor
        for i in 1...10 { try port.send(msgid: UInt32(i)) }
        #expect(await inbox.take(10) == Array(1...10))
        port.invalidate()
        loop.stop()
        thread.join()
    }

    // MARK: Messages

    @Test func receivedMessageAnswersItsSenderAndCarriesPorts() {
        let checks = onFreshLoopThread { () -> [String: Bool] in
            let results = LoopSlot<[String: Bool]>()
            let a = RLPort(), b = RLPort(), carried = TaggedPort(tag: "carried")
            a.setHandler { message in
                var r: [String: Bool] = [:]
                r["carried port is the same object"] = message.components?.first?.port === carried
                r["carried subclass"] = (message.components?.first?.port as? TaggedPort)?.tag == "carried"
                r["bytes"] = message.components?.last?.data.map(Array.init) == [1, 2, 3]
                r["receivePort is a"] = message.receivePort === a
                r["sendPort is b"] = message.sendPort === b
                r["msgid"] = message.msgid == 7
                results.set(r)
                // Sending a received message answers it: to b, replies to a.
                message.msgid = 8
                r["answer sent"] = message.send(before: RLTime.now + 5)
                results.set(r)
            }
            let answered = LoopSlot<Bool>()
            b.setHandler { message in
                answered.set(message.msgid == 8 && message.sendPort === a && message.receivePort === b)
            }
            RLRunLoop.current.add(a, forMode: .default)
            RLRunLoop.current.add(b, forMode: .default)
            let message = RLPortMessage(send: a, receive: b, components: [.port(carried), .bytes([1, 2, 3])])
            #expect(message.msgid == 0)
            message.msgid = 7
            #expect(message.send(before: RLTime.now + 5))
            #expect(runUntil { answered.value != nil })
            var r = results.value ?? [:]
            r["answer arrived"] = answered.value == true
            a.invalidate()
            b.invalidate()
            return r
        }
        #expect(checks.count == 8)
        for (name, ok) in checks { #expect(ok, "\(name)") }
    }

    @Test func wideMsgidsKeepTheirLow32Bits() {
        let ids = onFreshLoopThread { () -> [UInt32] in
            let log = LoopEventLog<UInt32>()
            let port = RLPort { log.append($0.msgid) }
            RLRunLoop.current.add(port, forMode: .default)
            #expect(port.send(before: RLTime.now, msgid: Int(UInt32.max) + 2, components: nil, from: nil, reserved: 0))
            #expect(port.send(before: RLTime.now, msgid: -1, components: nil, from: nil, reserved: 0))
            #expect(port.send(before: RLTime.now, components: [], from: nil, reserved: 0))
            #expect(runUntil { log.count == 3 })
            port.invalidate()
            return log.values
        }
        #expect(ids == [1, UInt32.max, 0])
    }

    // MARK: Queue and invalidation

    @Test func fullQueueTimesOutThenDrainsInOrder() throws {
        let log = LoopEventLog<UInt32>()
        let port = RLPort { log.append($0.msgid) }
        try port.setQueueLimit(2)
        try port.send(msgid: 1, before: RLTime.now)
        try port.send(msgid: 2, before: RLTime.now)
        #expect(port.queuedCount == 2)
        #expect(throws: RLError.self) { try port.send(msgid: 3, timeout: .milliseconds(20)) }
        #expect(!port.send(before: RLTime.now, msgid: 3, components: nil, from: nil, reserved: 0))
        #expect(lastCode == .timedOut)
        // A sender that waits for room gets in once the loop drains.
        let waiter = RunLoopTestThread { try! port.send(msgid: 3, before: RLTime.now + 30) }
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        waiter.join()
        #expect(loopEventually { log.count == 3 })
        #expect(log.values == [1, 2, 3])
        loop.stop()
        thread.join()
        port.invalidate()
    }

    @Test func invalidationReleasesQueueWakesSendersAndTellsOnce() throws {
        let port = RLPort()
        try port.setQueueLimit(1)
        let data = RLData([9, 9, 9])
        try port.send([.data(data)], msgid: 1)
        let calls = LoopEventLog<Bool>()
        port.setInvalidationHandler { invalid in calls.append(invalid == port && !invalid.isValid) }
        let senderError = LoopSlot<RLError.Code>()
        let sender = RunLoopTestThread {
            do {
                try port.send(msgid: 2, before: RLTime.now + 30)
                senderError.set(.none)
            } catch let error as RLError {
                senderError.set(error.code)
            } catch {
                senderError.set(.unknown)
            }
        }
        usleep(20_000)
        port.invalidate()
        port.invalidate()
        sender.join()
        #expect(senderError.value == .invalidObject)
        #expect(calls.values == [true])
        #expect(!port.isValid)
        #expect(port.queuedCount == 0)
        // Set on an invalid port, the handler is called at once.
        port.setInvalidationHandler { _ in calls.append(true) }
        #expect(calls.count == 2)
    }

    @Test func droppingTheLastReferenceInvalidates() {
        let calls = LoopEventLog<Bool>()
        do {
            let port = RLPort()
            port.setInvalidationHandler { invalid in calls.append(!invalid.isValid) }
        }
        #expect(calls.values == [true])
    }

    @Test func portsThatAreGoneLeaveNothingInTheRegistry() {
        let before = RLPort.registeredCount
        do {
            // All alive at once, so that no address is reused while they are.
            let ports = (0..<1_000).map { _ in RLPort() }
            #expect(RLPort.registeredCount >= before + 1_000 - 100)
            _ = ports.map { RLPortMessage(sendPort: $0, receivePort: nil, components: [.port($0)]) }
        }
        // Other tests make ports meanwhile; a leak would be 1,000 entries.
        #expect(RLPort.registeredCount < before + 100)
    }

    @Test func aPortKeptByAPeerStillDeliversToItsHandler() {
        let got = onFreshLoopThread { () -> Bool in
            let received = LoopSlot<Bool>()
            var held: RLPort?
            do {
                let port = RLPort { received.set($0.msgid == 5) }
                RLRunLoop.current.add(port, forMode: .default)
                held = RLPortMessage(sendPort: nil, receivePort: port, components: nil).receivePort
            }
            guard let held else { return false }
            try? held.send(msgid: 5)
            _ = runUntil { received.value != nil }
            held.invalidate()
            return received.value == true
        }
        #expect(got)
    }

    // MARK: Misuse

    @Test func misuseFailsClearly() {
        let port = RLPort()
        port.invalidate()
        #expect(!port.isValid)
        do {
            try port.send(msgid: 1)
            Issue.record("a send to an invalid port succeeded")
        } catch {
            #expect(error.code == .invalidObject)
        }
        #expect(!port.send(before: RLTime.now + 1, components: nil, from: nil, reserved: 0))
        #expect(lastCode == .invalidObject)
        let loopResult = onFreshLoopThread { () -> (Bool, RLError.Code) in
            let added = RLRunLoop.current.add(port, forMode: .default)
            return (added, lastCode)
        }
        #expect(loopResult.0 == false)
        #expect(loopResult.1 == .invalidObject)

        let live = RLPort()
        #expect(throws: RLError.self) { try live.setQueueLimit(0) }
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) { try live.send(msgid: 1, before: .nan) }
        #expect(lastCode == .invalidArgument)
        #expect(live.queuedCount == 0)
        // No send port: nothing to send to.
        #expect(!RLPortMessage(sendPort: nil, receivePort: live, components: nil).send(before: RLTime.now))
        // Removing a port that was never added is harmless, as with sources.
        let removed = onFreshLoopThread { RLRunLoop.current.remove(live, forMode: .default) }
        #expect(removed)
        #expect(live.reservedSpaceLength == 0)
        #expect(live != port)
        #expect(live.description.contains("RLPort"))
        live.invalidate()
    }

    @Test func scheduleAndRemoveAreFoundationsForms() {
        let (inAfterSchedule, inAfterRemove) = onFreshLoopThread { () -> (Bool, Bool) in
            let port = RLPort()
            let loop = RLRunLoop.current
            port.schedule(in: loop, forMode: testCustomMode)
            let a = loop.contains(port, forMode: testCustomMode)
            port.remove(from: loop, forMode: testCustomMode)
            let b = loop.contains(port, forMode: testCustomMode)
            port.invalidate()
            return (a, b)
        }
        #expect(inAfterSchedule)
        #expect(!inAfterRemove)
    }

    @Test func dataIsAnImmutableByteCollection() {
        let data: RLData = [1, 2, 3]
        #expect(Array(data) == [1, 2, 3])
        #expect(data == RLData([1, 2, 3]))
        #expect(data != RLData([1, 2]))
        #expect(data.hashValue == RLData([1, 2, 3]).hashValue)
        #expect(RLData().isEmpty)
        #expect(RLData("hi".utf8).count == 2)
        #expect(data.withUnsafeBytes { $0.count } == 3)
        #expect(RLPortComponent.bytes([7]).data == [7])
        #expect(RLPortComponent.bytes([7]).port == nil)
    }
}

// MARK: - Message ports

private let messagePortCounter = RLAtomicInt64(0)

private func uniqueName(_ what: String) -> String {
    "swift.test.\(getpid()).\(what).\(messagePortCounter.add(1))"
}

private enum Req {
    static let echo: RLMessageID = 1
    static let upper: RLMessageID = 2
    static let held: RLMessageID = 3
    static let count: RLMessageID = 4
    static let invalidate: RLMessageID = 6
    static let empty: RLMessageID = 7
}

/// A local message port served by its own run-loop thread.
private final class Server: @unchecked Sendable {
    let name: String
    let oneWay: LoopEventLog<RLMessageID>
    let sawNilData: LoopEventLog<Bool>
    let portSlot: LoopSlot<RLMessagePort>
    /// Requests `Req.held` that have begun, and releases given to them.
    let holds = LoopEventLog<Bool>()
    let releases = LoopEventLog<Bool>()
    private let thread: RunLoopTestThread
    private let loop: RLRunLoop

    init(_ what: String) throws {
        let name = uniqueName(what)
        self.name = name
        let oneWay = LoopEventLog<RLMessageID>(), sawNilData = LoopEventLog<Bool>(), portSlot = LoopSlot<RLMessagePort>()
        self.oneWay = oneWay
        self.sawNilData = sawNilData
        self.portSlot = portSlot
        let holds = holds, releases = releases
        let port = try RLMessagePort(local: name) { msgid, data in
            switch msgid {
            case Req.echo:
                sawNilData.append(data == nil)
                return data
            case Req.upper:
                return data.map { $0.map { $0 >= 97 && $0 <= 122 ? $0 - 32 : $0 } }
            case Req.held:
                // Answers only once the test releases it: a reply that is
                // late for certain, with no timing assumption.
                holds.append(true)
                let mine = holds.count
                _ = loopEventually { releases.count >= mine }
                return Array("late".utf8)
            case Req.count:
                oneWay.append(msgid)
                return nil
            case Req.invalidate:
                portSlot.value?.invalidate()
                return nil
            case Req.empty:
                return []
            default:
                return nil
            }
        }
        portSlot.set(port)
        (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
    }

    var port: RLMessagePort { portSlot.value! }

    /// Waits until `count` held requests have begun.
    func waitForHolds(_ count: Int) -> Bool { loopEventually { holds.count >= count } }

    /// Lets the oldest held request answer.
    func release() { releases.append(true) }

    func stop() {
        loop.stop()
        thread.join()
        port.invalidate()
    }
}

/// The result code `body` failed with (nil: it succeeded).
private func requestCode(_ body: () throws -> Void) -> RLMessagePort.RequestError.Code? {
    do {
        try body()
        return nil
    } catch let error as RLMessagePort.RequestError {
        return error.code
    } catch {
        Issue.record("not a RequestError: \(error)")
        return nil
    }
}

/// The deprecated `Int32` forms of RLMessagePort's calls, reached through a
/// protocol so that calling them here warns of nothing.
private protocol Int32MessageIDCalls {
    func makeLocal(_ name: String, seen: LoopEventLog<Int32>) throws -> RLMessagePort
    func exercise(_ remote: RLMessagePort) async throws -> [[UInt8]?]
}

private struct DeprecatedInt32Forms: Int32MessageIDCalls {
    @available(*, deprecated)
    func makeLocal(_ name: String, seen: LoopEventLog<Int32>) throws -> RLMessagePort {
        try RLMessagePort(local: name) { (msgid: Int32, data: [UInt8]?) in
            seen.append(msgid)
            return data
        }
    }

    @available(*, deprecated)
    func exercise(_ remote: RLMessagePort) async throws -> [[UInt8]?] {
        let minus: Int32 = -1, seven: Int32 = 7
        var replies: [[UInt8]?] = []
        try remote.send(msgid: minus, data: [1], timeout: 5)
        try remote.send(msgid: minus, data: [2], timeout: .seconds(5))
        replies.append(try await remote.request(msgid: seven, data: [3], timeout: 5))
        replies.append(try await remote.request(msgid: seven, data: [4], timeout: .seconds(5)))
        replies.append(try await remote.sendRequest(msgid: seven, data: [5], timeout: 5))
        replies.append(try blocking(remote, msgid: Int32.min))
        return replies
    }

    /// Synchronous: the blocking forms are not for async code.
    @available(*, deprecated)
    private func blocking(_ remote: RLMessagePort, msgid: Int32) throws -> [UInt8]? {
        var all: [UInt8] = []
        all += try remote.sendRequest(msgid: msgid, data: [6], timeout: 5) ?? []
        all += try remote.sendRequest(msgid: msgid, data: [7], timeout: .seconds(5)) ?? []
        all += try remote.sendRequest(msgid: msgid, data: [8], sendTimeout: 5, receiveTimeout: 5) ?? []
        all += try remote.sendRequest(msgid: msgid, data: [9], sendTimeout: .seconds(5),
                                      receiveTimeout: .seconds(5)) ?? []
        return all
    }
}

@Suite struct MessagePortTests {
    /// One msgid type, RLMessageID (UInt32, Foundation's): a message port
    /// carries all 32 bits, so CoreFoundation's negative SInt32 ids arrive
    /// as their bit patterns, and the deprecated Int32 forms pass the same
    /// bits both ways.
    @Test func msgidIsAnRLMessageIDCarryingAll32Bits() async throws {
        let name = uniqueName("msgid")
        let seen = LoopEventLog<RLMessageID>()
        let local = try RLMessagePort(local: name) { msgid, data in
            seen.append(msgid)
            return data
        }
        let (thread, loop) = startLoopThreadWith { loop in loop.add(local, forMode: .default) }
        let remote = try RLMessagePort(remote: name)
        try remote.send(msgid: RLMessageID.max, data: [1], timeout: .seconds(5))
        #expect(try await remote.request(msgid: RLMessageID(bitPattern: Int32.min), data: [2],
                                         timeout: .seconds(5)) == [2])
        #expect(try await remote.request(msgid: 0, timeout: .seconds(5)) == [])
        let forms: any Int32MessageIDCalls = DeprecatedInt32Forms()
        let replies = try await forms.exercise(remote)
        #expect(replies == [[3], [4], [5], [6, 7, 8, 9]])
        #expect(seen.values == [RLMessageID.max, 0x8000_0000, 0, RLMessageID.max, RLMessageID.max, 7, 7, 7]
                + Array(repeating: 0x8000_0000, count: 4))
        loop.stop()
        thread.join()
        local.invalidate()

        // A handler of the Int32 form sees the same bits as CF's SInt32.
        let seen32 = LoopEventLog<Int32>()
        let name32 = uniqueName("msgid32")
        let local32 = try forms.makeLocal(name32, seen: seen32)
        let (thread32, loop32) = startLoopThreadWith { loop in loop.add(local32, forMode: .default) }
        let remote32 = try RLMessagePort(remote: name32)
        #expect(try await remote32.request(msgid: RLMessageID.max, data: [1], timeout: .seconds(5)) == [1])
        #expect(try await remote32.request(msgid: 5, timeout: .seconds(5)) == [])
        #expect(seen32.values == [-1, 5])
        // A literal picks the RLMessageID form; a msgid of the wrong type
        // is the caller's to convert (this line would not compile with an
        // Int).
        let id: RLMessageID = 9
        try remote32.send(msgid: id, timeout: .seconds(5))
        #expect(loopEventually { seen32.values == [-1, 5, 9] })
        loop32.stop()
        thread32.join()
        local32.invalidate()
    }

    @Test func requestAndReplyBetweenThreads() throws {
        let server = try Server("rr")
        let remote = try RLMessagePort(remote: server.name)
        #expect(remote.isRemote)
        #expect(!server.port.isRemote)
        #expect(remote.name == server.name)
        #expect(try remote.sendRequest(msgid: Req.upper, data: Array("hello, port".utf8), timeout: 5)
                == Array("HELLO, PORT".utf8))
        // No data in, nil data seen; a handler's nil reply arrives empty, as
        // with CFMessagePort, and so does [].
        #expect(try remote.sendRequest(msgid: Req.echo, data: nil, timeout: 5) == [])
        #expect(server.sawNilData.values == [true])
        #expect(try remote.sendRequest(msgid: Req.empty, timeout: 5) == [])
        // One-way messages arrive in order and exactly once, before a later request.
        for _ in 0..<200 { try remote.send(msgid: Req.count, data: [1], timeout: 5) }
        _ = try remote.sendRequest(msgid: Req.echo, data: [1], timeout: 5)
        #expect(server.oneWay.count == 200)
        // A second remote for the name is the same port.
        let again = try RLMessagePort(remote: server.name)
        #expect(again == remote)
        remote.invalidate()
        #expect(!again.isValid)
        server.stop()
    }

    /// Listing 3-17's flow: the worker makes its own local port and checks
    /// in with its name through the main thread's port; the main thread then
    /// sends it requests through a remote port made from that name.
    @Test func messagePortCheckInBetweenThreads() throws {
        let (squares, quitSeen) = try onFreshLoopThread { () -> Result<([UInt8], Bool), RLError> in
            let workerName = LoopSlot<String>()
            let mainName = uniqueName("main")
            let main: RLMessagePort
            do throws(RLError) {
                main = try RLMessagePort(local: mainName) { msgid, data in
                    if msgid == 100, let data { workerName.set(String(decoding: data, as: UTF8.self)) }
                    return nil
                }
            } catch {
                return .failure(error)
            }
            RLRunLoop.current.add(main, forMode: .default)
            let quit = LoopSlot<Bool>()
            let worker = RunLoopTestThread {
                let name = uniqueName("worker")
                guard let mine = try? RLMessagePort(local: name, handler: { msgid, data in
                    switch msgid {
                    case 101: return data.map { $0.map { $0 * $0 } }
                    case 103: quit.set(true); return nil
                    default: return nil
                    }
                }), let toMain = try? RLMessagePort(remote: mainName) else { return }
                RLRunLoop.current.add(mine, forMode: .default)
                try? toMain.send(msgid: 100, data: Array(name.utf8), timeout: 5)
                _ = runUntil { quit.value == true }
                mine.invalidate()
            }
            _ = runUntil { workerName.value != nil }
            var squares: [UInt8] = []
            if let name = workerName.value, let toWorker = try? RLMessagePort(remote: name) {
                for n: UInt8 in 1...5 {
                    squares += (try? toWorker.sendRequest(msgid: 101, data: [n], timeout: 5)) ?? []
                }
                try? toWorker.send(msgid: 103, timeout: 5)
            }
            worker.join()
            main.invalidate()
            return .success((squares, quit.value == true))
        }.get()
        #expect(squares == [1, 4, 9, 16, 25])
        #expect(quitSeen)
    }

    @Test func asyncRequestsFromTasksAndActors() async throws {
        actor Client {
            let remote: RLMessagePort
            init(_ remote: RLMessagePort) { self.remote = remote }
            func upper(_ text: String) async throws -> String {
                let reply = try await remote.request(msgid: Req.upper, data: Array(text.utf8), timeout: 10)
                return String(decoding: reply ?? [], as: UTF8.self)
            }
        }
        let server = try Server("async")
        let remote = try RLMessagePort(remote: server.name)
        let reply = try await remote.request(msgid: Req.echo, data: [4, 5, 6], timeout: 10)
        #expect(reply == [4, 5, 6])
        let client = Client(remote)
        let replies = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<20 { group.addTask { try await client.upper("task \(i)") } }
            var all: [String] = []
            for try await reply in group { all.append(reply) }
            return all.sorted()
        }
        #expect(replies == (0..<20).map { "TASK \($0)" }.sorted())
        // Errors come back typed.
        do {
            _ = try await remote.request(msgid: Req.held, timeout: 0.05)
            Issue.record("a held reply did not time out")
        } catch {
            #expect(error.code == .receiveTimeout)
            #expect(error.error.code == .timedOut)
        }
        server.release()
        server.stop()
    }

    @Test func everyResultCode() throws {
        let server = try Server("codes")
        let remote = try RLMessagePort(remote: server.name)
        // receiveTimeout: a reply held back; and a request not waited for.
        #expect(requestCode { _ = try remote.sendRequest(msgid: Req.held, data: nil, sendTimeout: 5, receiveTimeout: 0.05) }
                == .receiveTimeout)
        server.release()
        #expect(requestCode { _ = try remote.sendRequest(msgid: Req.echo, data: [1], sendTimeout: 5, receiveTimeout: 0) }
                == .receiveTimeout)
        // The late replies are dropped: the next request gets its own.
        #expect(try remote.sendRequest(msgid: Req.echo, data: [2], timeout: 5) == [2])
        // sendTimeout: another request of this port is still in flight.
        let inFlightReply = LoopSlot<[UInt8]>()
        let inFlight = RunLoopTestThread {
            let reply = try? remote.sendRequest(msgid: Req.held, data: nil, sendTimeout: 5, receiveTimeout: 30)
            inFlightReply.set(reply ?? [])
        }
        #expect(server.waitForHolds(2))
        #expect(requestCode { _ = try remote.sendRequest(msgid: Req.echo, data: [3], sendTimeout: 0.01, receiveTimeout: 5) }
                == .sendTimeout)
        server.release()
        inFlight.join()
        #expect(inFlightReply.value == Array("late".utf8))
        // transportError: over the sender's limit, nothing sent; a NaN timeout.
        try remote.setMessageLimit(64)
        #expect(requestCode { _ = try remote.sendRequest(msgid: Req.echo, data: Array(repeating: 1, count: 65), timeout: 5) }
                == .transportError)
        #expect(lastCode == .invalidArgument)
        #expect(requestCode { try remote.send(msgid: Req.count, timeout: .nan) } == .transportError)
        #expect(remote.isValid)
        // becameInvalid: the local port goes away during the request.
        #expect(requestCode { _ = try remote.sendRequest(msgid: Req.invalidate, timeout: 5) } == .becameInvalid)
        #expect(!remote.isValid)
        // isInvalid: the remote is invalid now; a local port cannot send.
        #expect(requestCode { _ = try remote.sendRequest(msgid: Req.echo, timeout: 1) } == .isInvalid)
        #expect(requestCode { try server.port.send(msgid: Req.echo, timeout: 1) } == .isInvalid)
        #expect(lastCode == .invalidState)
        server.stop()
    }

    @Test func remoteHearsItsLocalPortGoAway() throws {
        let server = try Server("gone")
        let (calls, stillValid) = onFreshLoopThread { () -> (Int, Bool) in
            let calls = LoopEventLog<Bool>()
            guard let remote = try? RLMessagePort(remote: server.name) else { return (-1, true) }
            remote.setInvalidationHandler { port in calls.append(port == remote) }
            server.port.invalidate()
            _ = runUntil { calls.count == 1 }
            // Set on an invalid port, the handler is called at once.
            remote.setInvalidationHandler { _ in calls.append(true) }
            return (calls.values.filter { $0 }.count, remote.isValid)
        }
        #expect(calls == 2)
        #expect(!stillValid)
        // The name is free again at once.
        let again = try RLMessagePort(local: server.name) { _, _ in nil }
        again.invalidate()
        server.stop()
    }

    @Test func namesAndMisuse() throws {
        let name = uniqueName("names")
        let local = try RLMessagePort(local: name) { _, data in data }
        // Taken in this process: an error (CoreFoundation would return the
        // existing port and ignore the new handler).
        do {
            _ = try RLMessagePort(local: name) { _, _ in nil }
            Issue.record("a taken name was accepted")
        } catch {
            #expect(error.code == .exists)
        }
        #expect(local.isValid)
        #expect(throws: RLError.self) { try RLMessagePort(remote: uniqueName("nobody")) }
        #expect(lastCode == .notFound)
        for bad in ["", String(repeating: "n", count: 300), "a\u{0}b"] {
            do {
                _ = try RLMessagePort(remote: bad)
                Issue.record("remote name \(bad.debugDescription) was accepted")
            } catch {
                #expect(error.code == .invalidArgument)
            }
            do {
                _ = try RLMessagePort(local: bad) { _, _ in nil }
                Issue.record("local name \(bad.debugDescription) was accepted")
            } catch {
                #expect(error.code == .invalidArgument)
            }
        }
        let remote = try RLMessagePort(remote: name)
        #expect(remote.makeRunLoopSource() == nil)
        #expect(lastCode == .invalidState)
        let added = onFreshLoopThread { RLRunLoop.current.add(remote, forMode: .default) }
        #expect(!added)
        #expect(throws: RLError.self) { try remote.setAccessPolicy { _ in true } }
        #expect(throws: RLError.self) { try remote.setStallTimeout(1) }
        #expect(throws: RLError.self) { try local.setStallTimeout(0) }
        #expect(throws: RLError.self) { try local.setMessageLimit(10) }
        try local.setAccessPolicy { _ in false }
        try local.setAccessPolicy(nil)
        try local.setStallTimeout(2)
        #expect(local.description.contains(name))
        local.invalidate()
        local.invalidate()
        #expect(!local.isValid)
        #expect(local.makeRunLoopSource() == nil)
        #expect(lastCode == .invalidObject)
    }

    /// Ports made and dropped on several threads at once: a dropped port's
    /// state prunes the registry while other threads drop theirs. The prune
    /// briefly holds each live entry; if that was the entry's last holder,
    /// its state goes after the registry's lock is let go, not under it (a
    /// second prune under the same lock was a self-deadlock).
    @Test func portsDroppedOnManyThreadsAtOnce() {
        let threads = 4, perThread = 3000
        let finished = RLAtomicInt64(0), failures = RLAtomicInt64(0)
        var workers: [RunLoopTestThread] = []
        for t in 0..<threads {
            workers.append(RunLoopTestThread {
                var live: [RLMessagePort] = []
                for i in 0..<perThread {
                    guard let port = try? RLMessagePort(local: uniqueName("churn\(t).\(i)"), handler: { _, _ in nil })
                    else {
                        _ = failures.add(1)
                        continue
                    }
                    live.append(port)
                    if live.count > 64 { live.removeFirst() }
                }
                live.removeAll()
                _ = finished.add(1)
            })
        }
        // Joined only once all have finished: a deadlocked thread would hang
        // the suite. The bound only keeps a deadlock from hanging it
        // (sanitizer builds are slow).
        let deadline = RLTime.now + 300
        while finished.load() < Int64(threads) && RLTime.now < deadline { usleep(1000) }
        #expect(finished.load() == Int64(threads), "threads stuck dropping ports")
        if finished.load() == Int64(threads) { for worker in workers { worker.join() } }
        #expect(failures.load() == 0)
    }

    @Test func droppingALocalPortFreesItsName() throws {
        let name = uniqueName("drop")
        do { _ = try RLMessagePort(local: name) { _, _ in nil } }
        let again = try RLMessagePort(local: name) { _, _ in nil }
        again.invalidate()
    }
}

// The two hand-off scenarios, shared by PortTests and SocketPortTests.

/// Sends message 0 with `send`, then each next one once the consumer has
/// read the last (300 in all), so each is handed to a consumer that waits;
/// every message must come whole and in order.
func expectHandedOneByOne(_ messages: AsyncStream<RLPortMessage>, invalidating port: RLPort,
                          send: (UInt32) throws -> Void) async throws {
    let rounds: UInt32 = 300
    try send(0)
    var next: UInt32 = 0
    var whole = true
    for await message in messages {
        whole = whole && message.msgid == next && message.components == [.bytes([UInt8(next % 256), 7])]
        next += 1
        if next == rounds { port.invalidate(); continue }
        try send(next)
    }
    #expect(next == rounds)
    #expect(whole)
}

/// Reads the 20 messages queued on `port` (ids 1...20, bytes [id, 7]),
/// changing each one's id, and ends the sequence by invalidating the port.
func expectQueuedWhole(_ messages: AsyncStream<RLPortMessage>, receivedOn port: RLPort) async {
    var seen: [String] = []
    for await message in messages {
        message.msgid += 100
        seen.append("\(message.msgid) \(message.components ?? []) \(message.receivePort === port) \(message)")
        if seen.count == 20 { port.invalidate() }
    }
    #expect(seen == (1...20).map {
        "\(100 + $0) \([RLPortComponent.bytes([UInt8($0), 7])]) true RLPortMessage(msgid: \(100 + $0), 1 component(s))"
    })
}
