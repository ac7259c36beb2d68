internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

// RLAsyncSocket.swift — TCP servers and connections for async code, served
// by a run loop: RLAsyncServer (a listening RLSocket as an async sequence
// of connections) and RLAsyncConnection (async reads, async writes with
// backpressure by watermarks, as swift-nio's NIOAsyncChannel).

/// The run loop that serves a server and its connections: a given one, or
/// an ``RLWorkerThread`` of its own, which stops when the last server or
/// connection that uses it is gone.
final class RLAsyncLoopHost: Sendable {
    let loop: RLRunLoop
    private let worker: RLWorkerThread?

    init(runLoop: RLRunLoop?) throws(RLError) {
        if let runLoop {
            loop = runLoop
            worker = nil
            return
        }
        let worker = RLWorkerThread(name: "RLAsyncSocket")
        try worker.start()
        guard let loop = worker.runLoop else {
            throw RLError(code: .invalidState, message: "RLAsyncSocket: the worker thread has no run loop")
        }
        self.loop = loop
        self.worker = worker
    }
}

/// Closes a descriptor nobody else owns.
private func closeDescriptor(_ fd: Int32) { _ = close(fd) }

/// Whether a TCP connection that reads its end was reset rather than
/// closed: the socket's run-loop callout peeks at the stream before the
/// read callback, which takes a pending `ECONNRESET` away (the read then
/// returns 0), but the connection's state tells: `TCP_CLOSE` after a reset,
/// `TCP_CLOSE_WAIT` after an orderly close (asked only while this end has
/// not shut its writing, after which an orderly close ends in `TCP_CLOSE`
/// too).
private func wasReset(_ fd: Int32) -> Bool {
    // struct tcp_info starts with its tcpi_state byte; TCP_INFO is 11 and
    // TCP_CLOSE 7 (linux/tcp.h).
    var info = [UInt8](repeating: 0, count: 256)
    var length = socklen_t(info.count)
    guard getsockopt(fd, Int32(IPPROTO_TCP), 11, &info, &length) == 0, length >= 1 else { return false }
    return info[0] == 7
}

/// The error of a failed system call, as an `RLError` (`.system`).
func rlSystemError(_ call: String, _ err: Int32) -> RLError {
    RLError(code: .system, systemErrno: err, message: "\(call): \(String(cString: strerror(err))) (errno \(err))")
}

// MARK: - Server

/// A TCP server for async code: a listening ``RLSocket`` as an
/// `AsyncSequence` of ``RLAsyncConnection``s, served on a run loop.
///
///     let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
///     for try await connection in server {
///         Task {
///             for try await chunk in connection.inbound {
///                 try await connection.write(chunk)
///             }
///             connection.shutdownWrite()
///         }
///     }
///
/// The sockets are watched by a run loop: the one given (it must be
/// running, on its own thread), or by default a worker thread of the
/// server's own (``RLWorkerThread``), which lives as long as the server or
/// any of its connections. The loop only moves bytes; your code runs in
/// your tasks.
///
/// - Connections are accepted as they come and queued for the sequence; at
///   most ``maxQueuedConnections`` wait there: beyond, the server stops
///   accepting (the kernel's backlog holds the rest) until the sequence
///   takes one.
/// - The sequence has one consumer. It ends (returns nil) once the server
///   is closed; cancelling the task that waits in it closes the server.
/// - Closing the server (``close()``, cancellation, or dropping the last
///   reference) stops listening and closes the connections not yet taken;
///   connections already taken live on.
public final class RLAsyncServer: AsyncSequence, Sendable {
    public typealias Element = RLAsyncConnection

    /// Connections accepted but not yet taken, at most (then accepting
    /// pauses).
    public static let maxQueuedConnections = 64

    private let host: RLAsyncLoopHost
    private let socket: RLSocket
    private let core: ServerCore
    /// The high watermark of the connections accepted.
    public let highWatermark: Int
    /// The low watermark of the connections accepted.
    public let lowWatermark: Int

    /// Listens on `address` (a stream socket bound with `SO_REUSEADDR`,
    /// backlog 256).
    ///
    /// - Parameters:
    ///   - address: where to listen (`.ipv4(loopbackPort: 0)`: any free
    ///     port on 127.0.0.1, see ``address``).
    ///   - runLoop: the running loop that serves the sockets; nil starts a
    ///     worker thread for them.
    ///   - highWatermark: a connection's `write(_:)`
    ///     suspends once more than this many bytes wait unsent, and its
    ///     socket is no longer read once more than this many bytes wait
    ///     unread in ``RLAsyncConnection/inbound``.
    ///   - lowWatermark: ... until they fall to this many.
    /// - Throws: `RLError` `.invalidArgument` for watermarks that are not
    ///   `0 <= low <= high`, `high >= 1`; the error of `socket`, `bind` or
    ///   `listen` (`systemErrno`, e.g. `EADDRINUSE`).
    public init(listeningOn address: RLSocket.Address, runLoop: RLRunLoop? = nil,
                highWatermark: Int = 64 * 1024, lowWatermark: Int = 16 * 1024) throws(RLError) {
        try RLAsyncConnection.checkWatermarks(high: highWatermark, low: lowWatermark)
        let host = try RLAsyncLoopHost(runLoop: runLoop)
        let core = ServerCore()
        let family = address.family == AF_UNSPEC ? AF_INET : address.family
        let socket = try RLSocket(protocolFamily: family, socketType: 0, callBackTypes: .accept) {
            [weak core] socket, event in
            guard case .accept(let fd, _) = event else { return }
            guard let core else {
                closeDescriptor(fd)
                return
            }
            core.accepted(fd, listener: socket)
        }
        do throws(RLError) {
            try socket.setAddress(address)
        } catch {
            socket.invalidate()
            throw error
        }
        self.host = host
        self.socket = socket
        self.core = core
        self.highWatermark = highWatermark
        self.lowWatermark = lowWatermark
        core.configure(host: host, high: highWatermark, low: lowWatermark)
        host.loop.add(socket, forMode: .common)
    }

    deinit { close() }

    /// The address the server listens on (with the port the system chose
    /// for port 0), or nil once closed.
    public var address: RLSocket.Address? { socket.address }

    /// Stops listening, ends the sequence and closes the connections not
    /// yet taken. Idempotent.
    public func close() {
        socket.invalidate()
        core.close()
    }

    /// False once closed.
    public var isOpen: Bool { socket.isValid }

    public func makeAsyncIterator() -> Iterator { Iterator(server: self) }

    /// Waits for the next connection.
    public struct Iterator: AsyncIteratorProtocol {
        let server: RLAsyncServer

        /// The next connection, or nil once the server is closed. A
        /// cancelled task closes the server and gets nil.
        ///
        /// - Throws: `RLError` `.invalidState` if another task is waiting
        ///   on the same server.
        public mutating func next() async throws -> RLAsyncConnection? {
            let server = server
            return try await withTaskCancellationHandler {
                try await server.core.next(listener: server.socket)
            } onCancel: {
                server.close()
            }
        }
    }
}

/// The server's queue of accepted connections (shared with the socket's
/// callback, which holds it weakly).
private final class ServerCore: @unchecked Sendable {
    private let mutex = ThreadsMutex()
    private var host: RLAsyncLoopHost?
    private var high = 0, low = 0
    private var queue: [RLAsyncConnection] = []
    private var waiter: CheckedContinuation<RLAsyncConnection?, any Error>?
    private var closed = false
    private var paused = false

    func configure(host: RLAsyncLoopHost, high: Int, low: Int) {
        mutex.locked {
            self.host = host
            self.high = high
            self.low = low
        }
    }

    /// On the loop's thread: a new connection (the descriptor is ours).
    func accepted(_ fd: Int32, listener: RLSocket) {
        let (host, high, low, closed) = mutex.locked { (self.host, self.high, self.low, self.closed) }
        guard let host, !closed else {
            closeDescriptor(fd)
            return
        }
        let connection: RLAsyncConnection
        do {
            connection = try RLAsyncConnection(acceptedHandle: fd, host: host, high: high, low: low)
        } catch {
            // Not a socket we can watch: nothing to hand on.
            return
        }
        let wake: CheckedContinuation<RLAsyncConnection?, any Error>? = mutex.locked {
            if self.closed { return nil }
            if let waiter {
                self.waiter = nil
                return waiter
            }
            queue.append(connection)
            if queue.count >= RLAsyncServer.maxQueuedConnections && !paused {
                paused = true
                listener.disableCallBacks(.accept)
            }
            return nil
        }
        if let wake {
            wake.resume(returning: connection)
        } else if mutex.locked({ self.closed }) {
            connection.close()
        }
    }

    func next(listener: RLSocket) async throws -> RLAsyncConnection? {
        let connection = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<RLAsyncConnection?, any Error>) in
            let ready: Result<RLAsyncConnection?, any Error>? = mutex.locked {
                if !queue.isEmpty {
                    let connection = queue.removeFirst()
                    if paused && !closed {
                        paused = false
                        listener.enableCallBacks(.accept)
                    }
                    return .success(connection)
                }
                if closed { return .success(nil) }
                if waiter != nil {
                    return .failure(RLError(code: .invalidState,
                                            message: "RLAsyncServer: another task is waiting for a connection"))
                }
                waiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
        // Ordered after the loop thread that made the connection (it took
        // the lock since), for ThreadSanitizer.
        mutex.locked {}
        return connection
    }

    func close() {
        let (wake, dropped) = mutex.locked {
            () -> (CheckedContinuation<RLAsyncConnection?, any Error>?, [RLAsyncConnection]) in
            closed = true
            let wake = waiter
            waiter = nil
            let dropped = queue
            queue = []
            return (wake, dropped)
        }
        wake?.resume(returning: nil)
        for connection in dropped { connection.close() }
    }
}

// MARK: - Connection

/// A TCP connection for async code: an `AsyncSequence` of the bytes read
/// (``inbound``) and async writes with backpressure, served on a run loop
/// (that of the ``RLAsyncServer`` that accepted it, or of
/// ``connect(to:runLoop:highWatermark:lowWatermark:)``).
///
/// Backpressure, as swift-nio's `NIOAsyncChannel`, by two watermarks:
/// - **Writes.** `write(_:)` queues its bytes and sends what the socket
///   takes at once; the rest goes out as the socket drains. Once more than
///   the high watermark waits unsent, the connection is not writable
///   (``isWritable``) and every write suspends until what waits falls to
///   the low watermark.
/// - **Reads.** The socket is read as bytes arrive, into ``inbound``; once
///   more than the high watermark waits there unread, the socket is no
///   longer read (the peer's sends then block, TCP's own flow control)
///   until the consumer brings it down to the low watermark.
///
/// Ends and errors:
/// - The peer's close ends ``inbound`` (its iteration returns nil); a
///   failed read (e.g. `ECONNRESET`) throws its `RLError` there, once.
/// - A failed send throws its `RLError` from the write that finds it, and
///   from every write after it.
/// - ``shutdownWrite()`` half-closes: the peer reads the end once what is
///   queued is sent. ``close()`` closes at once: unsent bytes are dropped,
///   ``inbound`` ends, suspended writes throw.
/// - Cancelling a task that is reading ``inbound`` or suspended in a write
///   closes the connection (the write throws `CancellationError`).
/// - Once written shut and read to its end, the connection releases its
///   socket by itself; dropping the last reference closes it, but after
///   ``shutdownWrite()`` only once the bytes still queued are sent (or
///   sending them fails).
public final class RLAsyncConnection: Sendable {
    let core: ConnectionCore
    private let host: RLAsyncLoopHost

    /// The bytes read, chunk by chunk, in order (one consumer).
    public let inbound: Inbound

    init(acceptedHandle fd: Int32, host: RLAsyncLoopHost, high: Int, low: Int) throws(RLError) {
        let core = ConnectionCore(high: high, low: low)
        let socket: RLSocket
        do throws(RLError) {
            socket = try RLSocket(nativeHandle: fd, callBackTypes: [.read, .write]) { [weak core] _, event in
                core?.handle(event)
            }
        } catch {
            closeDescriptor(fd)
            throw error
        }
        core.attach(socket)
        self.core = core
        self.host = host
        self.inbound = Inbound(core: core)
        host.loop.add(socket, forMode: .common)
    }

    private init(core: ConnectionCore, host: RLAsyncLoopHost) {
        self.core = core
        self.host = host
        self.inbound = Inbound(core: core)
    }

    deinit { core.detach(host: host) }

    static func checkWatermarks(high: Int, low: Int) throws(RLError) {
        guard high >= 1, low >= 0, low <= high else {
            throw RLError(code: .invalidArgument,
                          message: "RLAsyncSocket: watermarks must be 0 <= low <= high, high >= 1 (got low \(low), high \(high))")
        }
    }

    /// Connects to `address` and returns the connection once connected.
    ///
    /// - Parameters:
    ///   - address: the server's address.
    ///   - runLoop: the running loop that serves the socket; nil starts a
    ///     worker thread for it (stopped when the connection is gone).
    ///   - highWatermark: as ``RLAsyncServer``'s: writes suspend, and reads
    ///     pause, past this many bytes.
    ///   - lowWatermark: ...until they fall to this many.
    /// - Throws: `RLError` `.invalidArgument` for bad watermarks; the error
    ///   of `connect` (`systemErrno`, e.g. `ECONNREFUSED`);
    ///   `CancellationError` if the task is cancelled meanwhile (the socket
    ///   is closed).
    public static func connect(to address: RLSocket.Address, runLoop: RLRunLoop? = nil,
                               highWatermark: Int = 64 * 1024, lowWatermark: Int = 16 * 1024)
        async throws -> RLAsyncConnection {
        try checkWatermarks(high: highWatermark, low: lowWatermark)
        let host = try RLAsyncLoopHost(runLoop: runLoop)
        let core = ConnectionCore(high: highWatermark, low: lowWatermark)
        let family = address.family == AF_UNSPEC ? AF_INET : address.family
        let socket = try RLSocket(protocolFamily: family, socketType: 0,
                                  callBackTypes: [.read, .connect, .write]) { [weak core] _, event in
            core?.handle(event)
        }
        core.attach(socket)
        let connection = RLAsyncConnection(core: core, host: host)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                core.awaitConnect(continuation)
                host.loop.add(socket, forMode: .common)
                do {
                    try socket.connect(to: address, timeout: -1)
                } catch {
                    core.connectFinished(error: error)
                }
            }
        } onCancel: {
            core.close()
        }
        try Task.checkCancellation()
        return connection
    }

    // MARK: Writing

    /// Queues `bytes` to send, then waits while the connection is not
    /// writable (more than the high watermark unsent, until it falls to the
    /// low one). An empty write only waits.
    ///
    /// - Throws: the `RLError` of a failed send (`systemErrno`, e.g.
    ///   `EPIPE`, `ECONNRESET`); `RLError` `.invalidState` after
    ///   ``shutdownWrite()``, `.invalidObject` once closed;
    ///   `CancellationError` if the task is cancelled (the connection is
    ///   closed).
    public func write<Bytes: Sequence>(_ bytes: Bytes) async throws where Bytes.Element == UInt8 {
        let core = core
        let array = Array(bytes)
        do {
            try await withTaskCancellationHandler {
                try await core.write(array)
            } onCancel: {
                core.close()
            }
        } catch {
            // The close that cancelling made fails the write: say why.
            try Task.checkCancellation()
            throw error
        }
        try Task.checkCancellation()
    }

    /// `write(_:)` of a string's UTF-8 bytes.
    public func write(_ string: String) async throws {
        try await write(Array(string.utf8))
    }

    /// Bytes queued and not yet sent.
    public var queuedByteCount: Int { core.queuedByteCount }

    /// False while more than the high watermark waits unsent (until it
    /// falls to the low one): a write now would suspend.
    public var isWritable: Bool { core.isWritable }

    /// Half-closes: once every queued byte is sent, the peer reads the end
    /// of the stream (`shutdown(SHUT_WR)`); ``inbound`` goes on. Writes
    /// after this throw. Idempotent.
    public func shutdownWrite() { core.shutdownWrite() }

    /// Closes now: stops reading and writing, drops the unsent bytes, ends
    /// ``inbound`` and fails suspended writes. Idempotent.
    public func close() { core.close() }

    /// False once closed, or released after both directions ended.
    public var isOpen: Bool { core.isOpen }

    /// The local address, or nil once closed.
    public var localAddress: RLSocket.Address? { core.socketIfOpen?.address }

    /// The peer's address, or nil once closed.
    public var peerAddress: RLSocket.Address? { core.socketIfOpen?.peerAddress }

    // MARK: Reading

    /// The bytes the connection reads, as an `AsyncSequence` of chunks (of
    /// at most 64 KiB each). It ends at the peer's close; a failed read
    /// throws its `RLError` once; cancelling the task that iterates it
    /// closes the connection. One consumer at a time.
    public struct Inbound: AsyncSequence, Sendable {
        public typealias Element = [UInt8]
        let core: ConnectionCore

        public func makeAsyncIterator() -> Iterator { Iterator(core: core) }

        public struct Iterator: AsyncIteratorProtocol {
            let core: ConnectionCore

            /// The next chunk, or nil at the end (the peer closed, or the
            /// connection was closed or its task cancelled).
            ///
            /// - Throws: the `RLError` of a failed read (once); `RLError`
            ///   `.invalidState` if another task is reading.
            public mutating func next() async throws -> [UInt8]? {
                let core = core
                return try await withTaskCancellationHandler {
                    try await core.read()
                } onCancel: {
                    core.close()
                }
            }
        }

        /// Bytes read from the socket and not yet taken.
        public var bufferedByteCount: Int { core.bufferedByteCount }
    }
}

/// The state of one connection, touched by its tasks and by the socket's
/// callback on the loop's thread. System calls on the descriptor are made
/// under the lock, so that a close cannot free the descriptor under them;
/// continuations are resumed after it is released.
final class ConnectionCore: @unchecked Sendable {
    typealias Writer = CheckedContinuation<Void, any Error>
    typealias Reader = CheckedContinuation<[UInt8]?, any Error>

    private static let readSize = 64 * 1024

    private let mutex = ThreadsMutex()
    private let high: Int
    private let low: Int
    private var socket: RLSocket?
    private var fd: Int32 = -1
    private var closed = false

    // Reading.
    private var chunks: [[UInt8]] = []
    private var chunkHead = 0
    private var buffered = 0
    private var readEnded = false
    private var readError: (any Error)?
    private var reader: Reader?
    private var readPaused = false

    // Writing.
    private var pending: [[UInt8]] = []
    private var pendingHead = 0
    private var pendingOffset = 0
    private var queued = 0
    private var writable = true
    private var writers: [Writer] = []
    private var writeError: (any Error)?
    private var writeArmed = false
    private var shutdownRequested = false
    private var shutDown = false

    // Connecting.
    private var connectWaiter: CheckedContinuation<Void, any Error>?

    /// Set when the connection's last reference went while a
    /// shutdownWrite's bytes still waited unsent: the core keeps itself
    /// and the loop's host alive until they are sent, then closes.
    private var lingering: (ConnectionCore, RLAsyncLoopHost)?

    init(high: Int, low: Int) {
        self.high = high
        self.low = low
    }

    func attach(_ socket: RLSocket) {
        // Reads see the socket's pending error (a reset) themselves.
        try? socket.setFlags(socket.flags.union(.leaveErrors))
        mutex.locked {
            self.socket = socket
            self.fd = socket.nativeHandle
        }
    }

    var socketIfOpen: RLSocket? { mutex.locked { closed ? nil : socket } }
    var isOpen: Bool { mutex.locked { !closed } }
    var queuedByteCount: Int { mutex.locked { queued } }
    var isWritable: Bool { mutex.locked { writable && !closed } }
    var bufferedByteCount: Int { mutex.locked { buffered } }

    /// On the loop's thread.
    func handle(_ event: RLSocket.Event) {
        switch event {
        case .read: readable()
        case .write: drained()
        case .connect(let error): connectFinished(error: error.map { rlSystemError("connect", $0) })
        default: break
        }
    }

    // MARK: Connect

    func awaitConnect(_ continuation: CheckedContinuation<Void, any Error>) {
        let closedAlready = mutex.locked { () -> Bool in
            if closed { return true }
            connectWaiter = continuation
            return false
        }
        if closedAlready { continuation.resume(throwing: CancellationError()) }
    }

    func connectFinished(error: (any Error)?) {
        let waiter = mutex.locked { () -> CheckedContinuation<Void, any Error>? in
            defer { connectWaiter = nil }
            return connectWaiter
        }
        guard let waiter else { return }
        if let error {
            close()
            waiter.resume(throwing: error)
        } else {
            waiter.resume()
        }
    }

    // MARK: Reading

    private func readable() {
        var wake: Reader?
        var result: Result<[UInt8]?, any Error>?
        var release: RLSocket?
        mutex.locked {
            guard !closed, !readEnded, fd >= 0 else { return }
            while buffered <= high {
                var err: Int32 = 0
                var n = 0
                let chunk = [UInt8](unsafeUninitializedCapacity: Self.readSize) { buffer, count in
                    repeat {
                        n = recv(fd, buffer.baseAddress, Self.readSize, Int32(MSG_DONTWAIT))
                        err = n < 0 ? errno : 0
                    } while n < 0 && err == EINTR
                    count = max(n, 0)
                }
                if n > 0 {
                    // A short read keeps only its bytes.
                    chunks.append(n < Self.readSize / 2 ? Array(chunk[...]) : chunk)
                    buffered += n
                    continue
                }
                if n < 0 && (err == EAGAIN || err == EWOULDBLOCK) { break }
                readEnded = true
                if n < 0 {
                    readError = rlSystemError("recv", err)
                } else if !shutDown && wasReset(fd) {
                    readError = rlSystemError("recv", ECONNRESET)
                }
                release = releaseIfDoneLocked()
                break
            }
            if buffered > high && !readEnded && !readPaused {
                readPaused = true
                socket?.disableCallBacks(.read)
            }
            if let reader, let taken = takeLocked() {
                wake = reader
                self.reader = nil
                result = taken
            }
        }
        if let wake, let result { wake.resume(with: result) }
        release?.invalidate()
    }

    /// What a reader gets now, or nil to wait (under the lock).
    private func takeLocked() -> Result<[UInt8]?, any Error>? {
        if chunkHead < chunks.count {
            let chunk = chunks[chunkHead]
            chunkHead += 1
            if chunkHead == chunks.count {
                chunks.removeAll(keepingCapacity: true)
                chunkHead = 0
            }
            buffered -= chunk.count
            if readPaused && buffered <= low && !closed {
                readPaused = false
                socket?.enableCallBacks(.read)
            }
            return .success(chunk)
        }
        if readEnded || closed {
            if let error = readError {
                readError = nil
                return .failure(error)
            }
            return .success(nil)
        }
        return nil
    }

    func read() async throws -> [UInt8]? {
        let chunk = try await withCheckedThrowingContinuation { (continuation: Reader) in
            let ready: Result<[UInt8]?, any Error>? = mutex.locked {
                if let taken = takeLocked() { return taken }
                if reader != nil {
                    return .failure(RLError(code: .invalidState,
                                            message: "RLAsyncConnection: another task is reading the connection"))
                }
                reader = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
        // The chunk was made under the lock: taking it again orders this
        // thread after its maker for ThreadSanitizer, which does not see
        // the continuation's hand-off.
        mutex.locked {}
        return chunk
    }

    // MARK: Writing

    func write(_ bytes: [UInt8]) async throws {
        let (failure, wake, release, wait) = mutex.locked { () -> ((any Error)?, [Writer], RLSocket?, Bool) in
            if closed {
                return (RLError(code: .invalidObject, message: "RLAsyncConnection: the connection is closed"),
                        [], nil, false)
            }
            if let writeError { return (writeError, [], nil, false) }
            if shutdownRequested {
                return (RLError(code: .invalidState, message: "RLAsyncConnection: writing was shut down"),
                        [], nil, false)
            }
            if !bytes.isEmpty {
                pending.append(bytes)
                queued += bytes.count
            }
            let (wake, release) = flushLocked()
            if let writeError { return (writeError, wake, release, false) }
            if queued > high { writable = false }
            return (nil, wake, release, !writable)
        }
        for writer in wake { writer.resume() }
        release?.invalidate()
        if let failure { throw failure }
        guard wait else { return }
        try await withCheckedThrowingContinuation { (continuation: Writer) in
            let ready: Result<Void, any Error>? = mutex.locked {
                if closed {
                    return .failure(RLError(code: .invalidObject, message: "RLAsyncConnection: the connection is closed"))
                }
                if let writeError { return .failure(writeError) }
                if writable { return .success(()) }
                writers.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// On the loop's thread: the socket takes bytes again.
    private func drained() {
        let (wake, release, finished) = mutex.locked { () -> ([Writer], RLSocket?, (ConnectionCore, RLAsyncLoopHost)?) in
            writeArmed = false
            let (wake, release) = flushLocked()
            var finished: (ConnectionCore, RLAsyncLoopHost)?
            if lingering != nil && (shutDown || writeError != nil || closed) {
                finished = lingering
                lingering = nil
            }
            return (wake, release, finished)
        }
        for writer in wake { writer.resume() }
        release?.invalidate()
        if finished != nil { close() }
        _ = finished
    }

    /// The connection's last reference is gone. Closing now would drop
    /// the bytes a ``shutdownWrite()`` left queued (the peer would read an
    /// orderly end after a lost tail): while there are such bytes the core
    /// lives on, with the loop that sends them, until they are sent (or
    /// the send fails), and closes then. Otherwise it closes now.
    func detach(host: RLAsyncLoopHost) {
        let linger = mutex.locked { () -> Bool in
            guard !closed, shutdownRequested, !shutDown, writeError == nil else { return false }
            lingering = (self, host)
            return true
        }
        if !linger { close() }
    }

    /// Sends what the socket takes (under the lock); returns the writers to
    /// wake and a socket to release.
    private func flushLocked() -> ([Writer], RLSocket?) {
        guard !closed, fd >= 0, writeError == nil else { return ([], nil) }
        while pendingHead < pending.count {
            let chunk = pending[pendingHead]
            var err: Int32 = 0
            let n = chunk.withUnsafeBytes { raw -> Int in
                var n: Int
                repeat {
                    n = send(fd, raw.baseAddress! + pendingOffset, raw.count - pendingOffset,
                             Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
                    err = n < 0 ? errno : 0
                } while n < 0 && err == EINTR
                return n
            }
            if n >= 0 {
                pendingOffset += n
                queued -= n
                if pendingOffset == chunk.count {
                    pendingHead += 1
                    pendingOffset = 0
                }
                continue
            }
            if err == EAGAIN || err == EWOULDBLOCK {
                if !writeArmed {
                    writeArmed = true
                    socket?.enableCallBacks(.write)
                }
                break
            }
            // The connection failed: what is queued is lost; every writer
            // hears it.
            writeError = rlSystemError("send", err)
            pending = []
            pendingHead = 0
            pendingOffset = 0
            queued = 0
            let wake = writers
            writers = []
            return (wake, nil)
        }
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingHead = 0
        }
        var release: RLSocket?
        if queued == 0 && shutdownRequested && !shutDown {
            shutDown = true
            _ = shutdown(fd, Int32(SHUT_WR))
            release = releaseIfDoneLocked()
        }
        if !writable && queued <= low {
            writable = true
            let wake = writers
            writers = []
            return (wake, release)
        }
        return ([], release)
    }

    func shutdownWrite() {
        let (wake, release) = mutex.locked { () -> ([Writer], RLSocket?) in
            if closed || shutdownRequested { return ([], nil) }
            shutdownRequested = true
            return flushLocked()
        }
        for writer in wake { writer.resume() }
        release?.invalidate()
    }

    /// Both directions are over: the socket goes (its buffered bytes stay
    /// readable). Under the lock; the caller invalidates what it returns.
    private func releaseIfDoneLocked() -> RLSocket? {
        guard shutDown && readEnded && !closed else { return nil }
        closed = true
        fd = -1
        return socket
    }

    // MARK: Close

    func close() {
        var kept: (ConnectionCore, RLAsyncLoopHost)?
        let (socket, reader, writers, connect) = mutex.locked {
            () -> (RLSocket?, Reader?, [Writer], CheckedContinuation<Void, any Error>?) in
            kept = lingering
            lingering = nil
            let wasOpen = !closed
            closed = true
            fd = -1
            chunks = []
            chunkHead = 0
            buffered = 0
            readError = nil
            pending = []
            pendingHead = 0
            pendingOffset = 0
            queued = 0
            defer {
                self.reader = nil
                self.writers = []
                self.connectWaiter = nil
            }
            return (wasOpen ? self.socket : nil, self.reader, self.writers, connectWaiter)
        }
        socket?.invalidate()
        reader?.resume(returning: nil)
        let closedError = RLError(code: .invalidObject, message: "RLAsyncConnection: the connection is closed")
        for writer in writers { writer.resume(throwing: closedError) }
        connect?.resume(throwing: CancellationError())
        _ = kept
    }
}
