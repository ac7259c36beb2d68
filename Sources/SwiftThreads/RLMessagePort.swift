internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A named port for requests and replies between threads and between
/// processes of the same user: CoreFoundation's `CFMessagePort` over
/// `RLMessagePortRef` (RLMessagePort.h). CoreFoundation on Linux has none.
///
/// A **local** port listens under a name and answers each request with its
/// closure, on the thread of the run loop it was added to:
///
///     let server = try RLMessagePort(local: "com.example.echo") { msgid, data in data }
///     RLRunLoop.current.add(server, forMode: .default)
///
/// A **remote** port, made from the name in any thread or process of the
/// same user, sends requests and waits for the reply — blocking
/// (``sendRequest(msgid:data:sendTimeout:receiveTimeout:)-(RLMessageID,_,RLTimeInterval,_)``), or suspending
/// (``request(msgid:data:timeout:)-(RLMessageID,_,RLTimeInterval)``), or one-way
/// (``send(msgid:data:timeout:)-(RLMessageID,_,RLTimeInterval)``). Failures throw ``RequestError``, which
/// carries CoreFoundation's result code.
///
/// Names are per user; a port lives while you hold it (dropping the last
/// reference invalidates it and frees its name). Two remote ports made for
/// the same name share one connection and one invalidation handler, as
/// CoreFoundation returns the same object. Every member may be used from
/// any thread.
public final class RLMessagePort: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// A failed request: CoreFoundation's `CFMessagePortSendRequest` result
    /// and the C library's reason.
    public struct RequestError: Error, Equatable, Sendable, CustomStringConvertible {
        /// `kCFMessagePort…` result codes (the same values).
        public enum Code: Int32, Sendable {
            /// kCFMessagePortSendTimeout: the request could not be sent in
            /// time (the receiver is not reading, or another request of this
            /// port was still in flight).
            case sendTimeout = -1
            /// kCFMessagePortReceiveTimeout: sent, but no reply in time.
            case receiveTimeout = -2
            /// kCFMessagePortIsInvalid: the port is invalid, or local.
            case isInvalid = -3
            /// kCFMessagePortTransportError: nothing was sent (too large for
            /// the port's limit, a NaN timeout), or the reply was malformed.
            case transportError = -4
            /// kCFMessagePortBecameInvalidError: the connection broke during
            /// the request; the port is invalid now.
            case becameInvalid = -5
        }

        public let code: Code
        /// The C library's error for the failure.
        public let error: RLError

        public init(code: Code, error: RLError) {
            self.code = code
            self.error = error
        }

        public var description: String { "\(code) (\(code.rawValue)): \(error.message)" }
    }

    /// The credentials of a client of another user (`SO_PEERCRED`).
    public struct Peer: Sendable, Hashable {
        public let uid: UInt32
        public let gid: UInt32
        public let pid: Int32
    }

    /// The one C reference this wrapper owns (none for a wrapper made
    /// during the port's last release).
    private let reference: OwnedRef
    var ref: RLMessagePortRef { reference.pointer }
    let box: MessagePortBox

    /// A local port listening under `name`; `handler` answers each request
    /// with its msgid and data (nil for none), on the thread of the run loop
    /// the port is in, and returns the reply (nil for an empty reply: the
    /// sender gets an empty array, as with CFMessagePort).
    ///
    /// - Throws: `RLError` `.exists` if a live port of any process of this
    ///   user has the name — also one of this process, where
    ///   CoreFoundation would return that port and ignore the new callout; `.invalidArgument` for an empty name, one longer
    ///   than 255 bytes or one containing NUL; a system error.
    public init(local name: String,
                handler: @escaping @Sendable (_ msgid: RLMessageID, _ data: [UInt8]?) -> [UInt8]?) throws(RLError) {
        try RLMessagePort.checkName(name)
        let box = MessagePortBox(handler: handler)
        // When the C library does not keep the box (shouldFreeInfo), Swift
        // frees it.
        var notKept = false
        let created = box.withContextInfo { info in
            var context = RLMessagePortContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease,
                                               copyDescription: nil)
            return name.withCString { RLMessagePortCreateLocal(nil, $0, rlMessagePortCallout, &context, &notKept) }
        }
        guard let created else { throw RLError.last() }
        if notKept {
            // CoreFoundation hands back this process's port of that name and
            // ignores the new callout; a Swift handler silently ignored
            // would be a trap, so this is an error.
            RLRelease(UnsafeRawPointer(created))
            throw RLError(code: .exists,
                          message: "RLMessagePort: the name \"\(name)\" is taken by a local port of this process")
        }
        reference = OwnedRef(adopting: created)
        self.box = box
        box.key = RLMessagePort.key(created)
        messagePortRegistry.record(box.key, wrapper: nil, companion: box)
    }

    /// A remote port connected to the local port named `name` (of this
    /// user).
    ///
    /// - Throws: `RLError` `.notFound` if no port listens under the name,
    ///   `.permission` if its owner is another user, `.invalidArgument` for a
    ///   bad name.
    public init(remote name: String) throws(RLError) {
        try RLMessagePort.checkName(name)
        guard let created = name.withCString({ RLMessagePortCreateRemote(nil, $0) }) else { throw RLError.last() }
        reference = OwnedRef(adopting: created)
        // The C library returns the same remote object for a name: share
        // its Swift state with the wrappers made before.
        let key = RLMessagePort.key(created)
        box = messagePortRegistry.companion(for: key) {
            let box = MessagePortBox(handler: nil)
            box.key = key
            return box
        }
    }

    private init(wrapping ref: RLMessagePortRef, box: MessagePortBox) {
        reference = OwnedRef(retaining: ref)
        self.box = box
    }

    private static func checkName(_ name: String) throws(RLError) {
        if name.utf8.contains(0) {
            throw RLError(code: .invalidArgument, message: "RLMessagePort: the name contains a NUL byte")
        }
    }

    static func key(_ ref: RLMessagePortRef) -> UInt { MessagePortRegistry.key(ref) }

    // MARK: State

    /// The port's name.
    public var name: String {
        guard let name = RLMessagePortGetName(ref) else { return "" }
        return String(cString: name)
    }

    public var isRemote: Bool { RLMessagePortIsRemote(ref) }

    /// False once invalidated — by ``invalidate()``, or for a remote port,
    /// when the connection to its local port broke.
    public var isValid: Bool { RLMessagePortIsValid(ref) }

    /// Closes the port: a local port stops listening (its name is free at
    /// once) and drops its clients; a remote port disconnects. Calls the
    /// invalidation handler once. Idempotent.
    public func invalidate() { RLMessagePortInvalidate(ref) }

    /// Sets the closure called once when the port becomes invalid; on a
    /// port that is invalid already it is called at once (as
    /// CoreFoundation does). For a remote port, the calling thread's run
    /// loop watches the connection from now on (common modes), so the
    /// closure runs there when the local port goes away — set it on a
    /// thread that runs its loop.
    public func setInvalidationHandler(_ handler: (@Sendable (RLMessagePort) -> Void)?) {
        box.setInvalidationHandler(handler)
        RLMessagePortSetInvalidationCallBack(ref, handler == nil ? nil : rlMessagePortInvalidated)
    }

    /// Local ports: which clients of other users to take (nil: none, the
    /// default). Runs on the port's run-loop thread.
    ///
    /// - Throws: `RLError` `.invalidState` for a remote port.
    public func setAccessPolicy(_ policy: (@Sendable (Peer) -> Bool)?) throws(RLError) {
        box.setPolicy(policy)
        guard RLMessagePortSetAccessPolicy(ref, policy == nil ? nil : rlMessagePortPolicy) else {
            box.setPolicy(nil)
            throw RLError.last()
        }
    }

    /// The largest message body the port sends or accepts (bytes; 64 to
    /// 64 MiB, the default).
    ///
    /// - Throws: `RLError` `.invalidArgument` outside that range.
    public func setMessageLimit(_ bytes: Int) throws(RLError) {
        guard RLMessagePortSetMessageLimit(ref, RLIndex(bytes)) else { throw RLError.last() }
    }

    /// Local ports: how long a client may take to finish a message it began
    /// (seconds, default 10) before the port drops it.
    ///
    /// - Throws: `RLError` `.invalidArgument` for a value that is not
    ///   positive and finite, `.invalidState` for a remote port.
    public func setStallTimeout(_ seconds: RLTimeInterval) throws(RLError) {
        guard RLMessagePortSetStallTimeout(ref, seconds) else { throw RLError.last() }
    }

    /// The local port's run-loop source (one per port: every call wraps the
    /// same C source; `order` counts the first time). nil, with
    /// `RLError.last()`, for a remote or invalid port.
    /// `RLRunLoop.add(_:forMode:)` takes the port directly.
    public func makeRunLoopSource(order: Int = 0) -> RLRunLoopSource? {
        guard let source = RLMessagePortCreateRunLoopSource(nil, ref, RLIndex(order)) else { return nil }
        return RLRunLoopSource(adopting: source)
    }

    // MARK: Requests

    /// Sends a request and waits for the reply, blocking the calling thread
    /// (`CFMessagePortSendRequest` with a reply mode). `sendTimeout` bounds
    /// the send, `receiveTimeout` the wait for the reply (seconds; <= 0: the
    /// request is sent and the reply not waited for — ``RequestError/Code/receiveTimeout``).
    /// A remote port sends one request at a time: a concurrent caller waits
    /// for its turn within its `sendTimeout`. The calling thread's run loop
    /// is not run meanwhile (the request waits in a mode of its own).
    ///
    /// - Returns: the reply; empty (never nil) when the handler returned
    ///   nil, as with CFMessagePort.
    /// - Throws: ``RequestError`` with CoreFoundation's result code.
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    public func sendRequest(msgid: RLMessageID, data: [UInt8]?, sendTimeout: RLTimeInterval,
                            receiveTimeout: RLTimeInterval) throws(RequestError) -> [UInt8]? {
        try request(msgid: msgid, data: data, sendTimeout: sendTimeout, receiveTimeout: receiveTimeout,
                    wantsReply: true)
    }

    /// ``sendRequest(msgid:data:sendTimeout:receiveTimeout:)-(RLMessageID,_,RLTimeInterval,_)`` with one
    /// timeout for both.
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    public func sendRequest(msgid: RLMessageID, data: [UInt8]? = nil, timeout: RLTimeInterval) throws(RequestError) -> [UInt8]? {
        try sendRequest(msgid: msgid, data: data, sendTimeout: timeout, receiveTimeout: timeout)
    }

    /// Sends a one-way message: no reply is asked for
    /// (`CFMessagePortSendRequest` with no reply mode).
    ///
    /// - Throws: ``RequestError`` with CoreFoundation's result code.
    public func send(msgid: RLMessageID, data: [UInt8]? = nil, timeout: RLTimeInterval) throws(RequestError) {
        _ = try request(msgid: msgid, data: data, sendTimeout: timeout, receiveTimeout: 0, wantsReply: false)
    }

    /// Sends a request and suspends until the reply comes; no thread of the
    /// caller's executor blocks. The blocking part runs on a thread of the
    /// port's own, one request after another in the order they were made;
    /// `timeout` bounds the send and the wait for the reply, from when the
    /// request's turn comes. Cancelling the task does not stop a request
    /// that was sent: it ends by its reply or its timeout.
    ///
    /// - Returns: the reply; empty (never nil) when the handler returned
    ///   nil, as with CFMessagePort.
    /// - Throws: ``RequestError`` with CoreFoundation's result code.
    ///
    /// A name of its own, not an `async` overload of the blocking
    /// ``sendRequest(msgid:data:timeout:)-6u2nv``: in top-level code (a script's
    /// `main.swift`) the compiler picks the synchronous overload of a name
    /// even under `await`, which would block the main thread.
    public func request(msgid: RLMessageID, data: [UInt8]? = nil,
                        timeout: RLTimeInterval) async throws(RequestError) -> [UInt8]? {
        let worker: RLWorkerThread
        do {
            worker = try box.requestThread()
        } catch {
            throw RequestError(code: .transportError, error: error)
        }
        do {
            return try await worker.run { () throws(RequestError) -> [UInt8]? in
                try self.sendRequest(msgid: msgid, data: data, sendTimeout: timeout, receiveTimeout: timeout)
            }
        } catch let error as RequestError {
            throw error
        } catch {
            let reason = error as? RLError ?? RLError(code: .unknown, message: "\(error)")
            throw RequestError(code: .transportError, error: reason)
        }
    }

    /// The former name of ``request(msgid:data:timeout:)-(RLMessageID,_,RLTimeInterval)``, kept for source
    /// compatibility; top-level code picks the blocking overload instead.
    @available(*, deprecated, renamed: "request(msgid:data:timeout:)")
    public func sendRequest(msgid: RLMessageID, data: [UInt8]? = nil,
                            timeout: RLTimeInterval) async throws(RequestError) -> [UInt8]? {
        try await request(msgid: msgid, data: data, timeout: timeout)
    }

    /// ``request(msgid:data:timeout:)`` with the timeout as a `Duration`.
    public func request(msgid: RLMessageID, data: [UInt8]? = nil,
                        timeout: Duration) async throws(RequestError) -> [UInt8]? {
        try await request(msgid: msgid, data: data, timeout: timeout.rlSeconds)
    }

    private static let replyMode = "SwiftThreads.RLMessagePort.reply"

    private func request(msgid: RLMessageID, data: [UInt8]?, sendTimeout: RLTimeInterval, receiveTimeout: RLTimeInterval,
                         wantsReply: Bool) throws(RequestError) -> [UInt8]? {
        let payload = data.map { RLData($0) }
        var reply: RLDataRef?
        // A mode nothing else is in: the C call then waits for the reply
        // alone instead of running the thread's loop in it (as it does for
        // CF code that names a mode with sources), so a request never runs
        // the caller's sources, nor the next request queued on the port's
        // worker thread.
        let code = withExtendedLifetime(payload) {
            Self.replyMode.withCString { mode in
                RLMessagePortSendRequest(ref, Int32(bitPattern: msgid), payload?.ref, sendTimeout, receiveTimeout,
                                         wantsReply ? mode : nil, &reply)
            }
        }
        guard code == 0 else {
            let reason = RLError.last()
            throw RequestError(code: RequestError.Code(rawValue: code) ?? .transportError, error: reason)
        }
        return reply.map { Array(RLData(adopting: $0)) }
    }

    // MARK: Identity

    /// Two ports are equal when they wrap the same C port.
    public static func == (lhs: RLMessagePort, rhs: RLMessagePort) -> Bool { lhs.ref == rhs.ref }
    public func hash(into hasher: inout Hasher) { hasher.combine(RLMessagePort.key(ref)) }

    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLMessagePort" }

    /// A wrapper of `ref` for a callback (its box found in the registry).
    fileprivate static func callbackWrapper(for ref: RLMessagePortRef, box: MessagePortBox) -> RLMessagePort {
        RLMessagePort(wrapping: ref, box: box)
    }
}

// MARK: - Support

/// The Swift state of one C message port, shared by its wrappers: the
/// request handler (a local port's C context info), the invalidation
/// handler, the access policy, and the thread that runs async requests.
final class MessagePortBox: RLCallbackBox<RLMessagePort>, @unchecked Sendable {
    let handler: (@Sendable (RLMessageID, [UInt8]?) -> [UInt8]?)?
    private let mutex = ThreadsMutex()
    private var invalidationHandler: (@Sendable (RLMessagePort) -> Void)?
    private var policy: (@Sendable (RLMessagePort.Peer) -> Bool)?
    private var worker: RLWorkerThread?

    /// The registry key of its C port, set once before the box is shared.
    var key: UInt = 0

    init(handler: (@Sendable (RLMessageID, [UInt8]?) -> [UInt8]?)?) { self.handler = handler }

    deinit {
        // The C port is gone: its entry goes unless a new port took the
        // address meanwhile.
        if key != 0 { messagePortRegistry.forget(key) }
    }

    func setInvalidationHandler(_ handler: (@Sendable (RLMessagePort) -> Void)?) {
        mutex.locked { invalidationHandler = handler }
    }

    /// The handler, taken once: the port becomes invalid once.
    func takeInvalidationHandler() -> (@Sendable (RLMessagePort) -> Void)? {
        mutex.locked {
            defer { invalidationHandler = nil }
            return invalidationHandler
        }
    }

    func setPolicy(_ policy: (@Sendable (RLMessagePort.Peer) -> Bool)?) { mutex.locked { self.policy = policy } }

    var currentPolicy: (@Sendable (RLMessagePort.Peer) -> Bool)? { mutex.locked { policy } }

    /// The running thread of async requests, started on first use; stopped
    /// when the box goes.
    func requestThread() throws(RLError) -> RLWorkerThread {
        let outcome = mutex.locked { () -> Result<RLWorkerThread, RLError> in
            if let worker { return .success(worker) }
            let made = RLWorkerThread(name: "RLMessagePort requests")
            do throws(RLError) {
                try made.start()
            } catch {
                return .failure(error)
            }
            worker = made
            return .success(made)
        }
        return try outcome.get()
    }
}

/// C message port → its Swift state (so that remote wrappers of one C
/// object, and callbacks without context, find it).
/// (Wrappers are not recorded: each `init(remote:)` makes its own, sharing
/// the box.)
typealias MessagePortRegistry = RLWrapperRegistry<RLMessagePort, MessagePortBox>
let messagePortRegistry = MessagePortRegistry()

private func messagePortBox(_ port: RLMessagePortRef) -> MessagePortBox? {
    messagePortRegistry.companion(for: RLMessagePort.key(port))
}

private func rlMessagePortCallout(_ local: RLMessagePortRef?, _ msgid: Int32, _ data: RLDataRef?,
                                  _ info: UnsafeMutableRawPointer?) -> RLDataRef? {
    guard let info else { return nil }
    guard let handler = MessagePortBox.from(info).handler else { return nil }
    let bytes = data.map { Array(RLData(retaining: $0)) }
    guard let reply = handler(RLMessageID(bitPattern: msgid), bytes) else { return nil }
    // Create rule: the C port releases the reply after sending it.
    return reply.withUnsafeBufferPointer { RLDataCreate(nil, $0.baseAddress, RLIndex($0.count)) }
}

private func rlMessagePortInvalidated(_ port: RLMessagePortRef?, _ info: UnsafeMutableRawPointer?) {
    guard let port, let box = messagePortBox(port), let handler = box.takeInvalidationHandler() else { return }
    handler(RLMessagePort.callbackWrapper(for: port, box: box))
}

private func rlMessagePortPolicy(_ local: RLMessagePortRef?, _ uid: uid_t, _ gid: gid_t, _ pid: pid_t,
                                 _ info: UnsafeMutableRawPointer?) -> Bool {
    guard let info else { return false }
    guard let policy = MessagePortBox.from(info).currentPolicy else { return false }
    return policy(RLMessagePort.Peer(uid: UInt32(uid), gid: UInt32(gid), pid: Int32(pid)))
}
