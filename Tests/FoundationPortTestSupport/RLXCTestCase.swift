// The XCTestCase that swift-corelibs-foundation's tests in
// Tests/FoundationPortTests derive from (FoundationNames.swift names it
// `XCTestCase` there): XCTest's, with `expectation(description:)` and
// `waitForExpectations(timeout:)` of its own. XCTest's wait runs
// Foundation's run loop, which never runs an RLRunLoop, and is isolated to
// the main actor (Swift 6 refuses it from a test method); this one runs
// the calling thread's RLRunLoop until every expectation is fulfilled.
// Being declared on a subclass, these win over XCTest's overloads.
public import XCTest
import SwiftThreads
import Foundation

/// An expectation that any thread may fulfill.
public final class RLTestExpectation: @unchecked Sendable, CustomStringConvertible {
    public let description: String
    private let lock = NSLock()
    private var fulfilled = false

    init(description: String) { self.description = description }

    /// Marks the expectation fulfilled (again: no effect).
    public func fulfill() {
        lock.lock()
        fulfilled = true
        lock.unlock()
    }

    var isFulfilled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return fulfilled
    }
}

open class RLXCTestCase: XCTestCase {
    private var pending: [RLTestExpectation] = []
    private var knownIssueSeen = false

    /// Tests of Foundation's that fail over SwiftThreads for a known
    /// reason (test name → reason). Their failures are reported as known
    /// issues instead of failures, as Swift Testing's `withKnownIssue`
    /// does; such a test that does not fail fails ("fixed? remove it").
    public static let knownIssues: [String: String] = [:]

    private var knownIssue: String? { RLXCTestCase.knownIssues[name] }

    open override func setUp() {
        super.setUp()
        knownIssueSeen = false
    }

    open override func recordFailure(withDescription description: String, inFile filePath: String,
                                     atLine lineNumber: Int, expected: Bool) {
        if let reason = knownIssue {
            knownIssueSeen = true
            print("\(filePath):\(lineNumber): known issue in \(name): \(description) (\(reason))")
            return
        }
        super.recordFailure(withDescription: description, inFile: filePath, atLine: lineNumber, expected: expected)
    }

    open override func tearDown() {
        if knownIssue != nil && !knownIssueSeen {
            super.recordFailure(withDescription: "\(name) passed: its known issue is fixed; remove it from "
                                + "RLXCTestCase.knownIssues", inFile: #filePath, atLine: #line, expected: true)
        }
        super.tearDown()
    }

    /// A new expectation that the next ``waitForExpectations(timeout:)``
    /// waits for.
    public func expectation(description: String) -> RLTestExpectation {
        let expectation = RLTestExpectation(description: description)
        pending.append(expectation)
        return expectation
    }

    /// Runs the calling thread's RLRunLoop (default mode) until every
    /// expectation made since the last wait is fulfilled, or `timeout`
    /// seconds passed: then the test fails, naming those not fulfilled.
    public func waitForExpectations(timeout: TimeInterval, file: StaticString = #filePath, line: UInt = #line) {
        let waited = pending
        pending = []
        let deadline = RLTime.now + timeout
        let loop = RLRunLoop.current
        while waited.contains(where: { !$0.isFulfilled }) && RLTime.now < deadline {
            // Short slices: a fulfillment from another thread is seen soon.
            if !loop.run(mode: .default, before: min(deadline, RLTime.now + 0.05)) {
                RLThread.sleep(forTimeInterval: 0.005)
            }
        }
        let missed = waited.filter { !$0.isFulfilled }.map(\.description)
        if !missed.isEmpty {
            XCTFail("Expectations not fulfilled within \(timeout) s: \(missed)", file: file, line: line)
        }
    }
}
