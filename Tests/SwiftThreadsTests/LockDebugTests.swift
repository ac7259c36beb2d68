import Testing
import SwiftThreads

/// Turns the detector on with a handler collecting reports for the body's
/// duration. Other suites may run meanwhile, so checks select reports by
/// lock name rather than comparing global counts.
private func withDetector(_ body: (_ reports: @escaping () -> [RLLockDebug.Report]) -> Void) {
    let wasEnabled = RLLockDebug.isEnabled
    let collected = SharedBox<[RLLockDebug.Report]>([])
    let collectedLock = RLSpinLock()
    RLLockDebug.setReportHandler { report in
        collectedLock.withLock { collected.value.append(report) }
    }
    RLLockDebug.isEnabled = true
    defer {
        RLLockDebug.setReportHandler(nil)
        RLLockDebug.isEnabled = wasEnabled
    }
    body { collectedLock.withLock { collected.value } }
}

@Suite(.serialized) struct LockDebugTests {
    @Test func reportsADeliberateABBAWithoutDeadlocking() {
        withDetector { reports in
            #expect(RLLockDebug.isEnabled)
            let a = RLLock(name: "SwiftABBA-A")
            let b = RLLock(name: "SwiftABBA-B")
            func abba() -> [RLLockDebug.Report] {
                reports().filter { $0.heldLockName.contains("SwiftABBA-B") }
            }
            // A then B on one thread, later B then A on another: never at
            // the same time, so nothing deadlocks, but the orders conflict.
            let before = RLLockDebug.reportCount
            onThreads(1) { _ in a.withLock { b.withLock {} } }
            #expect(abba().isEmpty)
            onThreads(1) { _ in b.withLock { a.withLock {} } }
            #expect(RLLockDebug.reportCount > before)
            let found = abba()
            #expect(found.count == 1)
            // Names come decorated with the lock's address: "'SwiftABBA-A' (lock 0x...)".
            #expect(found.first?.acquiringLockName.contains("SwiftABBA-A") == true)
            #expect(found.first?.pathLength == 1)
            #expect(found.first?.description.contains("SwiftABBA-A") == true)
            // Reported once per pair.
            onThreads(1) { _ in b.withLock { a.withLock {} } }
            #expect(abba().count == 1)
        }
    }

    @Test func reportsNameTheSwiftSourceLine() {
        withDetector { reports in
            let a = RLLock(name: "SwiftSite-A")
            let b = RLRecursiveLock(name: "SwiftSite-B")
            onThreads(1) { _ in
                a.lock()
                b.withLock {}
                a.unlock()
            }
            let lineB = SharedBox<UInt>(0)
            let lineA = SharedBox<UInt>(0)
            onThreads(1) { _ in
                lineB.value = #line; b.lock()
                lineA.value = #line; a.withLock {}
                b.unlock()
            }
            let found = reports().filter { $0.heldLockName.contains("SwiftSite-B") }
            #expect(found.count == 1)
            let file = "LockDebugTests.swift"
            #expect(found.first?.heldLockWhere.hasSuffix("\(file):\(lineB.value)") == true)
            #expect(found.first?.acquiringLockWhere.hasSuffix("\(file):\(lineA.value)") == true)
            #expect(found.first?.description.contains("\(file):\(lineA.value)") == true)

            // synchronized and the read/write forms name their lines too.
            final class Token: Sendable {}
            let token = Token()
            let rw = RLReadWriteLock(name: "SwiftSite-RW")
            synchronized(token) { rw.withWriteLock {} }
            let syncLine: UInt = #line; rw.withWriteLock { synchronized(token) {} }
            let syncReport = reports().filter { $0.heldLockName.contains("SwiftSite-RW") }
            #expect(syncReport.count == 1)
            #expect(syncReport.first?.heldLockWhere.hasSuffix("\(file):\(syncLine)") == true)
            #expect(syncReport.first?.acquiringLockWhere.hasSuffix("\(file):\(syncLine)") == true)
        }
    }

    @Test func readersTakingTwoLocksInBothOrdersAreNotReported() {
        withDetector { reports in
            let a = RLReadWriteLock(name: "SwiftReaders-A")
            let b = RLReadWriteLock(name: "SwiftReaders-B")
            onThreads(1) { _ in a.withReadLock { b.withReadLock {} } }
            onThreads(1) { _ in b.withReadLock { a.withReadLock {} } }
            func involving(_ name: String) -> Int {
                reports().filter { $0.heldLockName.contains(name) || $0.acquiringLockName.contains(name) }.count
            }
            #expect(involving("SwiftReaders-") == 0)
            // A writer on each side of the junction: a real deadlock.
            let c = RLReadWriteLock(name: "SwiftWriters-C")
            let d = RLReadWriteLock(name: "SwiftWriters-D")
            onThreads(1) { _ in c.withWriteLock { d.withReadLock {} } }
            onThreads(1) { _ in d.withWriteLock { c.withReadLock {} } }
            #expect(involving("SwiftWriters-") == 1)
        }
    }

    @Test func synchronizedObjectsTakePartAndCanBeForgotten() {
        final class Token: Sendable {}
        withDetector { reports in
            func involving(_ name: String) -> Int {
                reports().filter { $0.heldLockName.contains(name) || $0.acquiringLockName.contains(name) }.count
            }
            // A monitor and a lock taken in both orders: an inversion.
            let kept = Token()
            let first = RLLock(name: "SwiftSyncOrder-kept")
            synchronized(kept) { first.withLock {} }
            first.withLock { synchronized(kept) {} }
            #expect(involving("SwiftSyncOrder-kept") == 1)

            // The same with the monitor's edges forgotten in between: the
            // second order is new, not an inversion.
            let forgotten = Token()
            let second = RLLock(name: "SwiftSyncOrder-forgotten")
            synchronized(forgotten) { second.withLock {} }
            #expect(RLLockDebug.forget(forgotten))
            second.withLock { synchronized(forgotten) {} }
            #expect(involving("SwiftSyncOrder-forgotten") == 0)
        }
    }

    @Test func resetForgetsReportedPairs() {
        withDetector { reports in
            let a = RLLock(name: "SwiftReset-A")
            let b = RLLock(name: "SwiftReset-B")
            a.withLock { b.withLock {} }
            b.withLock { a.withLock {} }
            #expect(reports().filter { $0.heldLockName.contains("SwiftReset-B") }.count == 1)
            RLLockDebug.reset()
            a.withLock { b.withLock {} }
            b.withLock { a.withLock {} }
            #expect(reports().filter { $0.heldLockName.contains("SwiftReset-B") }.count == 2)
        }
    }
}
