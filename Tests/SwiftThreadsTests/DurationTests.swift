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
