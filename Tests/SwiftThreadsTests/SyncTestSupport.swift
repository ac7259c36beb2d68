// Helpers for the synchronization tests: real threads (pthreads), a shared
// mutable box for state the lock under test protects, and the stress size.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftThreads

/// Mutable state shared between test threads. `@unchecked Sendable` on
/// purpose: the lock under test is what makes the accesses safe, and TSan
/// checks that it does.
final class SharedBox<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

private final class ThreadJob: Sendable {
    let index: Int
    let body: @Sendable (Int) -> Void
    init(index: Int, body: @escaping @Sendable (Int) -> Void) {
        self.index = index
        self.body = body
    }
}

/// Starts `count` threads running `body(index)` and returns once all of
/// them have ended (pthread_join: everything they wrote is visible after).
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    var threads: [pthread_t] = []
    for index in 0..<count {
        let job = Unmanaged.passRetained(ThreadJob(index: index, body: body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            let job = Unmanaged<ThreadJob>.fromOpaque(context!).takeRetainedValue()
            job.body(job.index)
            return nil
        }, job)
        precondition(rc == 0, "pthread_create: \(rc)")
        threads.append(thread)
    }
    for thread in threads { pthread_join(thread, nil) }
}

/// Runs `body` on one other thread and returns what it returned.
func onOtherThread<T>(_ body: @escaping @Sendable () -> T) -> T {
    let result = SharedBox<T?>(nil)
    onThreads(1) { _ in result.value = body() }
    return result.value!
}

/// Operations per thread in the stress tests: 1e6 in a plain run (8 threads
/// x 1e6 = 8e6 per lock kind), fewer under a sanitizer or valgrind
/// (RL_TEST_SCALE set, as `make check-tsan` does) or when RL_STRESS_OPS
/// says so.
let stressOpsPerThread: Int = {
    if let s = getenv("RL_STRESS_OPS"), let n = Int(String(cString: s)), n > 0 { return n }
    if let s = getenv("RL_TEST_SCALE"), s.pointee != 0 { return 20_000 }
    return 1_000_000
}()

let stressThreads = 8

/// The calling thread's last library error code.
var lastCode: RLError.Code { RLError.last().code }

/// A directory of its own under /tmp for file-based tests.
func makeTempDirectory(_ tag: String) -> String {
    var template = Array("/tmp/SwiftThreadsTests-\(tag)-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(made != nil, "mkdtemp failed")
    return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Removes a file if it exists.
func removeFile(_ path: String) { unlink(path) }

/// Removes an empty directory.
func removeDirectory(_ path: String) { rmdir(path) }

struct TestFailure: Error, Equatable {}

/// Stops a worker from a `defer` of async test code, which cannot await
/// `shutdownGracefully()`: the blocking `stop()`, from a synchronous
/// function on purpose (a test's cleanup, where blocking is harmless).
func stopInDefer(_ worker: RLWorkerThread) {
    try? worker.stop()
}
