import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The Duration forms of the interval-taking calls (RLDurations.swift,
// RLConcurrency.swift): same behaviour and errors as the Double forms.

@Suite("Duration forms")
struct DurationTests {
    @Test func socketFormsTakeADuration() throws {
        let server = try RLSocket(callBackTypes: .accept)
        defer { server.invalidate() }
        try server.setAddress(.ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let client = try RLSocket(callBackTypes: .read)
        defer { client.invalidate() }
        // Unconnected: the send fails as the Double form's does.
        #expect(throws: RLError.self) { try client.send(bytes: [1], timeout: .seconds(1)) }
        try client.connect(to: .ipv4(loopbackPort: port), timeout: .seconds(10))
        #expect(client.peerAddress?.port == port)
        try client.send(RLData([1, 2, 3]), timeout: .seconds(10))
        try client.send(bytes: [4, 5], timeout: .seconds(10))
        // .zero is a plain blocking connect: a refused one throws the errno.
        let refused = try RLSocket(callBackTypes: .read)
        defer { refused.invalidate() }
        do {
            try refused.connect(to: .ipv4(loopbackPort: unusedLoopbackPort()), timeout: .zero)
            Issue.record("connect to an unused port succeeded")
        } catch {
            #expect(error.systemErrno == ECONNREFUSED)
        }
    }

    @Test func socketPortStallTimeoutTakesADuration() throws {
        let local = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        defer { local.invalidate() }
        try local.setStallTimeout(.milliseconds(1500))
        #expect(throws: RLError.self) { try local.setStallTimeout(.zero) }
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) { try local.setStallTimeout(.seconds(-1)) }
        #expect(lastCode == .invalidArgument)
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: local.tcpPort)
        defer { remote.invalidate() }
        #expect(throws: RLError.self) { try remote.setStallTimeout(.seconds(1)) }
        #expect(lastCode == .invalidState)
    }

    /// The locks' timed forms: a Duration waits that long and fails with
    /// `.timedOut` while another thread holds the lock.
    @Test func timedLockFormsTakeADuration() throws {
        let rw = RLReadWriteLock()
        let condition = RLCondition()
        let conditionLock = RLConditionLock(condition: 0)
        #expect(rw.readLock(timeout: .seconds(1)))
        #expect(rw.unlock())
        #expect(rw.writeLock(timeout: .seconds(1)))
        #expect(rw.unlock())
        #expect(condition.lock(timeout: .seconds(1)))
        #expect(condition.unlock())
        #expect(conditionLock.lock(timeout: .seconds(1)))
        #expect(conditionLock.unlock())
        // Held elsewhere: each times out.
        let held = ThrShared(false), release = ThrShared(false)
        let holder = try thrStartJoinable {
            rw.writeLock()
            condition.lock()
            conditionLock.lock()
            held.set(true)
            while !release.get { usleep(1_000) }
            conditionLock.unlock()
            condition.unlock()
            rw.unlock()
        }
        while !held.get { usleep(1_000) }
        #expect(!rw.readLock(timeout: .milliseconds(5)))
        #expect(lastCode == .timedOut)
        #expect(!rw.writeLock(timeout: .milliseconds(5)))
        #expect(lastCode == .timedOut)
        #expect(!condition.lock(timeout: .milliseconds(5)))
        #expect(lastCode == .timedOut)
        #expect(!conditionLock.lock(timeout: .milliseconds(5)))
        #expect(lastCode == .timedOut)
        release.set(true)
        try holder.join()
    }

    /// Points in time are RLAbsoluteTime: every call that takes a deadline
    /// takes `RLTime.after(_:)` of a Duration (the wait ends there).
    @Test func everyDeadlineTakesRLTimeAfterADuration() throws {
        let soon: @Sendable () -> RLAbsoluteTime = { RLTime.after(.milliseconds(5)) }
        let lock = RLLock(), recursive = RLRecursiveLock(), condition = RLCondition()
        let conditionLock = RLConditionLock(condition: 0), rw = RLReadWriteLock()
        #expect(lock.lock(before: soon()))
        #expect(recursive.lock(before: soon()))
        #expect(condition.lock(before: soon()))
        #expect(!condition.wait(until: soon()))     // nobody signals: times out
        #expect(conditionLock.lock(before: soon()))
        #expect(conditionLock.unlock())
        #expect(!conditionLock.lock(whenCondition: 1, before: soon()))
        #expect(rw.readLock(before: soon()))
        #expect(rw.unlock())
        #expect(rw.writeLock(before: soon()))
        #expect(rw.unlock())
        #expect(condition.unlock())
        #expect(recursive.unlock())
        #expect(lock.unlock())
        let start = RLTime.now
        RLThread.sleep(until: soon())
        #expect(RLTime.now >= start)
        let port = RLPort()
        defer { port.invalidate() }
        try port.send(msgid: 1, before: soon())
        #expect(port.send(before: soon(), msgid: 2, components: nil, from: nil, reserved: 0))
        let fired = ThrShared(false)
        let thread = try thrStartJoinable { () -> Bool in
            let loop = RLRunLoop.current
            let timer = RLTimer(fire: RLTime.after(.milliseconds(1)), interval: .zero, repeats: false) { _ in
                fired.set(true)
            }
            _ = loop.add(timer, forMode: .default)
            loop.run(until: RLTime.after(.seconds(30)))  // returns once the timer is done
            return loop.run(mode: .default, before: soon())  // nothing left: false at once
        }
        #expect(try thread.join(as: Bool.self) == false)
        #expect(fired.get)
    }

    @Test func timerFormsTakeADuration() throws {
        let timer = RLTimer(fire: RLTime.now + 600, interval: .milliseconds(250), repeats: true) { _ in }
        #expect(timer.interval == .milliseconds(250))
        #expect(abs(timer.timeInterval - 0.25) < 1e-9)
        timer.setTolerance(.milliseconds(100))
        #expect(abs(timer.tolerance - 0.1) < 1e-9)
        // Clamped to half the interval, as the Double form.
        timer.setTolerance(.seconds(10))
        #expect(abs(timer.tolerance - 0.125) < 1e-9)
        timer.invalidate()
        let once = RLTimer(timeInterval: .seconds(600), repeats: false) { _ in }
        #expect(once.interval == .zero)
        #expect(once.fireDate > RLTime.now + 500)
        once.invalidate()
    }

    @Test func aScheduledDurationTimerFires() throws {
        let fired = ThrShared(0)
        let thread = try thrStartJoinable {
            RLTimer.scheduledTimer(withTimeInterval: .milliseconds(1), repeats: false) { _ in
                fired.withLock { $0 += 1 }
            }
            RLRunLoop.current.run(until: RLTime.now + 30)   // returns once the timer is done
        }
        try thread.join()
        #expect(fired.get == 1)
    }

    @Test func messagePortFormsTakeADuration() async throws {
        let worker = RLWorkerThread(name: "duration-server")
        try worker.start()
        defer { stopInDefer(worker) }
        let name = "swift.test.\(getpid()).duration"
        let server = try thrBlockingSync(worker) { () throws -> RLMessagePort in
            let port = try RLMessagePort(local: name) { _, data in data.map { $0.map { $0 + 1 } } }
            RLRunLoop.current.add(port, forMode: .common)
            return port
        }
        defer { server.invalidate() }
        try server.setStallTimeout(.seconds(5))
        #expect(thrCode { try server.setStallTimeout(Duration.zero) } == .invalidArgument)

        let remote = try RLMessagePort(remote: name)
        defer { remote.invalidate() }
        #expect(thrCode { try remote.setStallTimeout(.seconds(5)) } == .invalidState)
        #expect(try await remote.request(msgid: 1, data: [1, 2], timeout: .seconds(30)) == [2, 3])
        #expect(try blockingRequest(remote, [5], timeout: .seconds(30)) == [6])
        try remote.send(msgid: 2, data: [9], timeout: .seconds(30))
        // The Double form's errors: an invalid port fails the same way.
        remote.invalidate()
        do {
            _ = try await remote.request(msgid: 1, timeout: .seconds(1))
            Issue.record("a request on an invalid port succeeded")
        } catch {
            #expect(error.code == .isInvalid)
        }
    }
}

/// The blocking Duration form (noasync) from a plain function.
private func blockingRequest(_ remote: RLMessagePort, _ data: [UInt8], timeout: Duration) throws -> [UInt8]? {
    try remote.sendRequest(msgid: 1, data: data, sendTimeout: timeout, receiveTimeout: timeout)
}
