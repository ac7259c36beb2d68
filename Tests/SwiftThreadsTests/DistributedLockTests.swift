#if canImport(Glibc)
import Glibc
#endif
import Testing
import SwiftThreads

@Suite struct DistributedLockTests {
    @Test func badPathsThrow() {
        #expect { try RLDistributedLock(path: "/nonexistent-dir-\(getpid())/x.lock") } throws: {
            ($0 as? RLError)?.code == .notFound
        }
        #expect { try RLDistributedLock(path: "") } throws: {
            ($0 as? RLError)?.code == .invalidArgument
        }
        let dir = makeTempDirectory("dlock-bad")
        defer { removeDirectory(dir) }
        #expect { try RLDistributedLock(path: dir) } throws: {
            ($0 as? RLError)?.code == .invalidArgument
        }
    }

    @Test func tryLockUnlockAndOwner() throws {
        let dir = makeTempDirectory("dlock")
        let path = dir + "/job.lock"
        defer { removeFile(path); removeDirectory(dir) }
        let a = try RLDistributedLock(path: path)
        let b = try RLDistributedLock(path: path)
        #expect(a.path == path)
        #expect(a.lockDate == nil)
        #expect(a.owner == nil)
        #expect(lastCode == .notLocked)
        #expect(!a.isHeld)

        let before = RLTime.now
        #expect(a.tryLock())
        #expect(a.isHeld)
        #expect(!a.tryLock())
        #expect(lastCode == .exists)
        #expect(!b.tryLock())
        #expect(lastCode == .busy)
        #expect(!b.isHeld)

        let owner = try #require(b.owner)
        #expect(owner.pid == getpid())
        #expect(owner.state == .alive)
        #expect(!owner.hostName.isEmpty)
        #expect(!owner.bootID.isEmpty)
        #expect(owner.lockDate >= before - 1)
        #expect(b.lockDate != nil)

        #expect(!b.unlock())
        #expect(lastCode == .notLocked)
        #expect(throws: RLError.self) { try b.checkedUnlock() }
        #expect(a.unlock())
        #expect(!a.isHeld)
        #expect(b.tryLock())
        #expect(b.unlock())
        #expect(!b.breakLock())
        #expect(lastCode == .notLocked)
    }

    @Test func breakLockTakesItAway() throws {
        let dir = makeTempDirectory("dlock-break")
        let path = dir + "/job.lock"
        defer { removeFile(path); removeDirectory(dir) }
        let a = try RLDistributedLock(path: path)
        let b = try RLDistributedLock(path: path)
        #expect(a.tryLock())
        #expect(b.breakLock())
        #expect(b.tryLock())
        // a's lock file is gone: its unlock must not remove b's.
        #expect(!a.unlock())
        #expect(lastCode == .notOwner)
        #expect(b.owner?.pid == getpid())
        #expect(b.isHeld)
        #expect(b.unlock())
    }

    @Test func anyThreadMayUnlock() throws {
        let dir = makeTempDirectory("dlock-thread")
        let path = dir + "/job.lock"
        defer { removeFile(path); removeDirectory(dir) }
        let lock = try RLDistributedLock(path: path)
        #expect(lock.tryLock())
        #expect(onOtherThread { lock.unlock() })
        #expect(!lock.isHeld)
    }

    @Test func droppingAHoldingObjectUnlocks() throws {
        let dir = makeTempDirectory("dlock-drop")
        let path = dir + "/job.lock"
        defer { removeFile(path); removeDirectory(dir) }
        do {
            let lock = try RLDistributedLock(path: path)
            #expect(lock.tryLock())
        }
        let again = try RLDistributedLock(path: path)
        #expect(again.tryLock())
        #expect(again.unlock())
    }

    @Test func threadsWithTheirOwnObjectsExcludeEachOther() throws {
        let dir = makeTempDirectory("dlock-race")
        let path = dir + "/job.lock"
        defer { removeFile(path); removeDirectory(dir) }
        let counter = SharedBox(0)
        let inside = RLAtomicInt32()
        let overlaps = RLAtomicInt32()
        let perThread = 200
        onThreads(8) { _ in
            let lock = try! RLDistributedLock(path: path)
            var done = 0
            while done < perThread {
                guard lock.tryLock() else { sched_yield(); continue }
                if inside.increment() != 1 { overlaps.increment() }
                counter.value += 1
                inside.decrement()
                lock.unlock()
                done += 1
            }
        }
        #expect(counter.value == 8 * perThread)
        #expect(overlaps.load() == 0)
    }

    @Test func aDeadOwnerIsRecognisedAndBroken() async throws {
        // A child process takes the lock and exits without unlocking; the
        // path is derived from the parent's pid so the child can find it.
        let path = "/tmp/SwiftThreadsTests-dead-owner-\(getpid()).lock"
        removeFile(path)
        defer { removeFile(path) }
        await #expect(processExitsWith: .success) {
            let path = "/tmp/SwiftThreadsTests-dead-owner-\(getppid()).lock"
            let lock = try! RLDistributedLock(path: path)
            guard lock.tryLock() else { exit(1) }
            _exit(0)  // dies holding it
        }
        let lock = try RLDistributedLock(path: path)
        #expect(!lock.tryLock())
        #expect(lastCode == .busy)
        let owner = try #require(lock.owner)
        #expect(owner.pid != getpid())
        #expect(owner.state == .dead)
        #expect(lock.breakLock())
        #expect(lock.tryLock())
        #expect(lock.unlock())
    }
}
