import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A pipe whose ends are closed on deinit unless handed over.
final class TestPipe: Sendable {
    let readEnd: Int32
    let writeEnd: Int32

    init() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0)
        readEnd = fds[0]
        writeEnd = fds[1]
    }

    func write(_ byte: UInt8 = 0x2A) {
        var value = byte
        precondition(Glibc.write(writeEnd, &value, 1) == 1)
    }

    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        _ = read(readEnd, &buffer, buffer.count)
    }

    func closeBoth() {
        close(readEnd)
        close(writeEnd)
    }
}

/// The inode behind `fd`, or nil if it is closed. Tests compare inodes, not
/// just openness: a closed number may be reused at once by a parallel test.
func inodeOf(_ fd: Int32) -> UInt? {
    var info = stat()
    return fstat(fd, &info) == 0 ? UInt(info.st_ino) : nil
}

@Suite struct FileDescriptorSourceTests {
    @Test func readReadinessOnAPipe() throws {
        let events = onFreshLoopThread { () -> [RLFileDescriptorSource.CallBackTypes] in
            let pipe = TestPipe()
            defer { pipe.closeBoth() }
            let log = LoopEventLog<RLFileDescriptorSource.CallBackTypes>()
            let watcher = try! RLFileDescriptorSource(fileDescriptor: pipe.readEnd) { _, types in
                log.append(types)
                pipe.drain()
                RLRunLoop.current.stop()
            }
            #expect(watcher.fileDescriptor == pipe.readEnd)
            #expect(watcher.enableCallBacks(.read))
            #expect(RLRunLoop.current.add(watcher, forMode: .default))
            #expect(RLRunLoop.current.contains(watcher, forMode: .default))
            pipe.write()
            _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            watcher.invalidate()
            return log.values
        }
        #expect(events == [.read])
    }

    @Test func callbacksAreOneShotUntilEnabledAgain() {
        let counts = onFreshLoopThread { () -> [Int] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let pipe = TestPipe()
            defer { pipe.closeBoth() }
            let log = LoopEventLog<Int>()
            let watcher = try! RLFileDescriptorSource(fileDescriptor: pipe.readEnd) { _, _ in
                log.append(1)
                RLRunLoop.current.stop()
            }
            watcher.enableCallBacks(.read)
            loop.add(watcher, forMode: .default)
            pipe.write()
            _ = try? loop.run(mode: .default, for: 30)
            let first = log.count
            // Still readable (not drained), but not re-enabled: no callback.
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            let unarmed = log.count
            watcher.enableCallBacks(.read)
            _ = try? loop.run(mode: .default, for: 30)
            let rearmed = log.count
            watcher.invalidate()
            keep.invalidate()
            return [first, unarmed, rearmed]
        }
        #expect(counts == [1, 1, 2])
    }

    @Test func writeReadinessAndReenableFromTheCallback() {
        let events = onFreshLoopThread { () -> [RLFileDescriptorSource.CallBackTypes] in
            let loop = RLRunLoop.current
            let pipe = TestPipe()
            defer { pipe.closeBoth() }
            let log = LoopEventLog<RLFileDescriptorSource.CallBackTypes>()
            let watcher = try! RLFileDescriptorSource(fileDescriptor: pipe.writeEnd) { source, types in
                log.append(types)
                if log.count < 3 { source.enableCallBacks(.write) } else { RLRunLoop.current.stop() }
            }
            watcher.enableCallBacks(.write)
            loop.add(watcher, forMode: .default)
            _ = try? loop.run(mode: .default, for: 30)
            watcher.invalidate()
            return log.values
        }
        #expect(events == [.write, .write, .write])
    }

    @Test func disabledCallbacksDoNotFire() {
        let count = onFreshLoopThread { () -> Int in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let pipe = TestPipe()
            defer { pipe.closeBoth() }
            let log = LoopEventLog<Int>()
            let watcher = try! RLFileDescriptorSource(fileDescriptor: pipe.readEnd) { _, _ in log.append(1) }
            watcher.enableCallBacks(.read)
            #expect(watcher.disableCallBacks(.read))
            loop.add(watcher, forMode: .default)
            pipe.write()
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            watcher.invalidate()
            keep.invalidate()
            return log.count
        }
        #expect(count == 0)
    }

    @Test func badDescriptorsAreErrors() {
        #expect(throws: RLError.self) {
            _ = try RLFileDescriptorSource(fileDescriptor: -1) { _, _ in }
        }
        // A number far above any descriptor the tests open (a just-closed
        // one could be reused at once by a parallel test).
        let closed: Int32 = 999_983
        #expect(inodeOf(closed) == nil)
        #expect(throws: RLError.self) {
            _ = try RLFileDescriptorSource(fileDescriptor: closed) { _, _ in }
        }
    }

    @Test func closeOnInvalidate() throws {
        let pipe = TestPipe()
        let pipeInode = inodeOf(pipe.readEnd)
        #expect(pipeInode != nil)
        let closing = try RLFileDescriptorSource(fileDescriptor: pipe.readEnd, closeOnInvalidate: true) { _, _ in }
        let keeping = try RLFileDescriptorSource(fileDescriptor: pipe.writeEnd) { _, _ in }
        #expect(closing.isValid)
        #expect(closing.invalidate())
        #expect(closing.invalidate())
        #expect(!closing.isValid)
        #expect(closing.fileDescriptor == -1)
        #expect(inodeOf(pipe.readEnd) != pipeInode)
        #expect(keeping.invalidate())
        #expect(inodeOf(pipe.writeEnd) == pipeInode)
        close(pipe.writeEnd)
        #expect(!keeping.enableCallBacks(.read))
        #expect(closing.makeRunLoopSource() == nil)
    }

    @Test func invalidateRemovesItFromTheRunLoop() throws {
        let (before, after) = onFreshLoopThread { () -> (Bool, Bool) in
            let pipe = TestPipe()
            defer { pipe.closeBoth() }
            let watcher = try! RLFileDescriptorSource(fileDescriptor: pipe.readEnd) { _, _ in }
            let source = watcher.makeRunLoopSource()!
            RLRunLoop.current.add(source, forMode: .default)
            let before = RLRunLoop.current.contains(source, forMode: .default)
            watcher.invalidate()
            return (before, RLRunLoop.current.contains(source, forMode: .default))
        }
        #expect(before)
        #expect(!after)
    }

    @Test func invalidatedWatcherFreesItsClosure() {
        let freed = onFreshLoopThread { () -> Bool in
            let pipe = TestPipe()
            defer { pipe.closeBoth() }
            weak var weakCanary: LeakCanary?
            do {
                let canary = LeakCanary()
                weakCanary = canary
                let watcher = try! RLFileDescriptorSource(fileDescriptor: pipe.readEnd) { source, _ in
                    canary.touch()
                    RLRunLoop.current.stop()
                }
                watcher.enableCallBacks(.read)
                RLRunLoop.current.add(watcher, forMode: .default)
                pipe.write()
                _ = try? RLRunLoop.current.run(mode: .default, for: 30)
                watcher.invalidate()
            }
            return weakCanary == nil
        }
        #expect(freed)
    }
}
