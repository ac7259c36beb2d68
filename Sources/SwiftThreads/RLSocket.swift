internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A BSD socket whose readiness is delivered on a run loop: CoreFoundation's
/// `CFSocket` over the C `RLSocketRef` (Foundation has no socket class).
///
/// Make it with the kinds of callbacks wanted (``CallBackTypes``: one of
/// `.read`, `.accept`, `.data`, plus `.connect` and/or `.write`) and a
/// closure; add it to a run loop (``RLRunLoop/add(_:forMode:)``); the
/// closure then runs on that loop's thread with an ``Event``:
///
///     // An echo server on 127.0.0.1, any free port.
///     let server = try RLSocket(callBackTypes: .accept) { _, event in
///         guard case .accept(let fd, _) = event else { return }
///         // the closure owns fd: wrap it in another RLSocket (.data) or in
///         // streams (RLStream.streams(withSocket:)), or close it.
///     }
///     try server.setAddress(.ipv4(loopbackPort: 0))
///     RLRunLoop.current.add(server, forMode: .default)
///     print("listening on", server.address!.port!)
///
/// Unlike CoreFoundation on Linux, which watches every socket from one
/// `select()` helper thread (no fd above 1023), the loop's own epoll set
/// watches the socket: no helper thread and no limit on fd numbers.
///
/// Lifetime, as with `CFSocket`: the socket stays alive, and keeps calling
/// its closure, until it is invalidated — dropping the last Swift reference
/// does not stop it. Always ``invalidate()`` it when done; invalidating
/// closes the descriptor if the flags say ``Flags/closeOnInvalidate`` (the
/// default), and frees the closure.
///
/// Every member may be used from any thread (the C functions are
/// thread-safe), so the object is `Sendable`; the closure runs on the
/// loop's thread, so it is `@Sendable`. The `RLSocket` passed to it is the
/// object you made while you hold it, otherwise a new wrapper of the same
/// C socket.
public final class RLSocket: @unchecked Sendable {
    /// Kinds of callbacks (`RLSocketCallBackType`, CoreFoundation's values).
    ///
    /// `.read`, `.accept` and `.data` are not independent bits: they are the
    /// values 1, 2 and 3 of the low two bits, as in `CFSocketCallBackType`,
    /// so a socket has one of them; `.connect` and `.write` combine with
    /// any of them.
    public struct CallBackTypes: OptionSet, Sendable, Hashable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// kRLSocketReadCallBack: the socket is readable; the closure reads
        /// it from ``RLSocket/nativeHandle``.
        public static let read = CallBackTypes(rawValue: 1)
        /// kRLSocketAcceptCallBack: a listening socket has a connection,
        /// accepted for you (``Event/accept(_:address:)``).
        public static let accept = CallBackTypes(rawValue: 2)
        /// kRLSocketDataCallBack: what is readable is read for you
        /// (``Event/data(_:from:)``).
        public static let data = CallBackTypes(rawValue: 3)
        /// kRLSocketConnectCallBack: a background connect finished.
        public static let connect = CallBackTypes(rawValue: 4)
        /// kRLSocketWriteCallBack: the connected socket can take more bytes.
        public static let write = CallBackTypes(rawValue: 8)
    }

    /// Socket flags (CoreFoundation's values). The default is `Read`,
    /// `Accept` and `Data` re-enabled after each callback, `Write` not, and
    /// ``closeOnInvalidate``.
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// kRLSocketAutomaticallyReenableReadCallBack
        public static let automaticallyReenableReadCallBack = Flags(rawValue: 1)
        /// kRLSocketAutomaticallyReenableAcceptCallBack
        public static let automaticallyReenableAcceptCallBack = Flags(rawValue: 2)
        /// kRLSocketAutomaticallyReenableDataCallBack
        public static let automaticallyReenableDataCallBack = Flags(rawValue: 3)
        /// kRLSocketAutomaticallyReenableWriteCallBack
        public static let automaticallyReenableWriteCallBack = Flags(rawValue: 8)
        /// kRLSocketLeaveErrors: kept for CF; a pending error (a reset) is
        /// never cleared before a read callback, with or without it.
        public static let leaveErrors = Flags(rawValue: 64)
        /// kRLSocketCloseOnInvalidate: ``RLSocket/invalidate()`` closes the
        /// descriptor.
        public static let closeOnInvalidate = Flags(rawValue: 128)
    }

    /// What happened, handed to the socket's closure on the loop's thread.
    public enum Event: Sendable {
        /// The socket is readable (`.read`); read it yourself. On a stream
        /// whose peer closed, one last `.read` comes (a read returns 0).
        case read
        /// A connection was accepted (`.accept`): its native descriptor,
        /// now owned by the closure (wrap it or close it), and the peer's
        /// address.
        case accept(Int32, address: Address?)
        /// What was readable (`.data`), with the sender's address: one
        /// datagram, or a chunk of what is queued on a stream (everything
        /// queued is read in the same wake, chunk after chunk, each handed
        /// over as soon as it is read; see RLSocket.h). An empty buffer
        /// means the stream ended (or failed): it comes once, no `.data`
        /// follows it, and the socket is invalidated once the closure
        /// returns, as a `CFSocket` is (on a datagram socket an empty
        /// buffer is an empty datagram or an error, and nothing ends).
        case data(RLData, from: Address?)
        /// A background connect finished (`.connect`): `nil` on success,
        /// otherwise its `errno` value.
        case connect(error: Int32?)
        /// The connected socket can take more bytes (`.write`).
        case write

        /// The callback type of the event.
        public var type: CallBackTypes {
            switch self {
            case .read: return .read
            case .accept: return .accept
            case .data: return .data
            case .connect: return .connect
            case .write: return .write
            }
        }
    }

    /// The one C reference this wrapper owns.
    private let reference: OwnedRef
    var ref: RLSocketRef { reference.pointer }
    private let box: SocketBox

    /// Creates a socket (close on exec) that calls `callBack` for the kinds
    /// in `callBackTypes`: `RLSocketCreate`. Values `<= 0` take
    /// CoreFoundation's defaults: `PF_INET`, `SOCK_STREAM`, and TCP for a
    /// stream or UDP for a datagram socket; so the defaults make a TCP
    /// socket over IPv4.
    ///
    /// - Throws: `RLError` for unknown callback types or when `socket(2)`
    ///   fails (its `errno` in `systemErrno`).
    public init(protocolFamily: Int32 = 0, socketType: Int32 = 0, protocol: Int32 = 0,
                callBackTypes: CallBackTypes,
                callBack: (@Sendable (RLSocket, Event) -> Void)? = nil) throws(RLError) {
        let box = SocketBox(callBack: callBack)
        let created = box.withContextInfo { info in
            var context = box.context(info)
            return RLSocketCreate(nil, protocolFamily, socketType, `protocol`, RLOptionFlags(callBackTypes.rawValue),
                                  callBack == nil ? nil : rlSocketCallout, &context)
        }
        guard let created else { throw RLError.last() }
        reference = OwnedRef(adopting: created)
        self.box = box
        box.owner = self
    }

    /// Wraps an open socket (connected, listening or neither):
    /// `RLSocketCreateWithNative`. The socket takes over the descriptor as
    /// far as ``Flags/closeOnInvalidate`` says (set by default).
    ///
    /// - Throws: `RLError` if `nativeHandle` is not an open socket, or for
    ///   unknown callback types.
    public init(nativeHandle: Int32, callBackTypes: CallBackTypes,
                callBack: (@Sendable (RLSocket, Event) -> Void)? = nil) throws(RLError) {
        let box = SocketBox(callBack: callBack)
        let created = box.withContextInfo { info in
            var context = box.context(info)
            return RLSocketCreateWithNative(nil, nativeHandle, RLOptionFlags(callBackTypes.rawValue),
                                            callBack == nil ? nil : rlSocketCallout, &context)
        }
        guard let created else { throw RLError.last() }
        reference = OwnedRef(adopting: created)
        self.box = box
        box.owner = self
    }

    fileprivate init(retaining ref: RLSocketRef, box: SocketBox) {
        reference = OwnedRef(retaining: ref)
        self.box = box
    }

    // MARK: Addresses and connections

    /// Binds the socket to `address` and, for a stream, listens (backlog
    /// 256): `RLSocketSetAddress`, CoreFoundation's `CFSocketSetAddress`.
    ///
    /// - Throws: `RLError` (the `errno` of `bind` or `listen` in
    ///   `systemErrno`), or `.invalidObject` once invalidated.
    public func setAddress(_ address: Address) throws(RLError) {
        let result = withExtendedLifetime(address) { RLSocketSetAddress(ref, address.bytes.ref) }
        guard result == kRLSocketSuccess else { throw RLError.last() }
    }

    /// Connects to `address` (`RLSocketConnectToAddress`).
    ///
    /// - Parameters:
    ///   - address: the peer's address.
    ///   - timeout: `> 0` waits at most that long; `0` is a plain blocking
    ///     connect; `< 0` starts the connect in the background and returns at
    ///     once — the `.connect` event reports the result (the socket must
    ///     have been made with ``CallBackTypes/connect`` to hear it).
    /// - Throws: `RLError` `.timedOut` when the connect did not finish in
    ///   time; otherwise the error of `connect` (`systemErrno`, e.g.
    ///   `ECONNREFUSED`), or `.invalidState` while a background connect is
    ///   under way.
    public func connect(to address: Address, timeout: RLTimeInterval) throws(RLError) {
        let result = withExtendedLifetime(address) { RLSocketConnectToAddress(ref, address.bytes.ref, timeout) }
        guard result == kRLSocketSuccess else { throw RLError.last() }
    }

    /// Sends every byte of `data` (to `address`, or to the connected peer
    /// when nil): `RLSocketSendData`. Never raises `SIGPIPE`.
    ///
    /// - Parameters:
    ///   - data: the bytes to send.
    ///   - address: where to (a datagram socket), or nil for the connected
    ///     peer.
    ///   - timeout: `> 0` bounds the whole send; otherwise the call blocks
    ///     until everything is sent.
    /// - Throws: `RLError` `.timedOut` (part of the data may have been sent)
    ///   or the error of `send` (`systemErrno`, e.g. `EPIPE`).
    public func send(_ data: RLData, to address: Address? = nil, timeout: RLTimeInterval = 0) throws(RLError) {
        let result = withExtendedLifetime((data, address)) {
            RLSocketSendData(ref, address?.bytes.ref, data.ref, timeout)
        }
        guard result == kRLSocketSuccess else { throw RLError.last() }
    }

    /// ``send(_:to:timeout:)-(_,_,RLTimeInterval)`` of a copy of `bytes`.
    public func send<Bytes: Sequence>(bytes: Bytes, to address: Address? = nil,
                                      timeout: RLTimeInterval = 0) throws(RLError) where Bytes.Element == UInt8 {
        try send(RLData(bytes), to: address, timeout: timeout)
    }

    /// The local address (`getsockname`), or nil once invalidated.
    public var address: Address? {
        RLSocketCopyAddress(ref).map { Address(bytes: RLData(adopting: $0)) }
    }

    /// The peer's address (`getpeername`), or nil when not connected or
    /// once invalidated.
    public var peerAddress: Address? {
        RLSocketCopyPeerAddress(ref).map { Address(bytes: RLData(adopting: $0)) }
    }

    // MARK: Callbacks and flags

    /// Re-arms callback types (only among those the socket was made with).
    /// A disabled type loses nothing: enabling it again delivers the
    /// readiness that is still there.
    ///
    /// - Returns: false (with `RLError.last()`) for types the socket was
    ///   not made with, or once invalidated.
    @discardableResult
    public func enableCallBacks(_ types: CallBackTypes) -> Bool {
        RLSocketEnableCallBacks(ref, RLOptionFlags(types.rawValue))
    }

    /// Mutes callback types until ``enableCallBacks(_:)``.
    @discardableResult
    public func disableCallBacks(_ types: CallBackTypes) -> Bool {
        RLSocketDisableCallBacks(ref, RLOptionFlags(types.rawValue))
    }

    /// The socket's flags (`RLSocketGetSocketFlags`).
    public var flags: Flags { Flags(rawValue: UInt(RLSocketGetSocketFlags(ref))) }

    /// Replaces the socket's flags (`RLSocketSetSocketFlags`). A callback
    /// type whose "automatically re-enable" flag is clear is disabled after
    /// each delivery until ``enableCallBacks(_:)``.
    ///
    /// - Throws: `RLError` `.invalidArgument` for bits that are no flag
    ///   (nothing changes then).
    public func setFlags(_ flags: Flags) throws(RLError) {
        guard RLSocketSetSocketFlags(ref, RLOptionFlags(flags.rawValue)) else { throw RLError.last() }
    }

    // MARK: Life

    /// Stops every callback, removes the socket from every run loop, closes
    /// the descriptor if ``Flags/closeOnInvalidate`` is set and frees the
    /// closure (`RLSocketInvalidate`). Idempotent; may be called from the
    /// closure or from any thread.
    @discardableResult
    public func invalidate() -> Bool {
        let done = RLSocketInvalidate(ref)
        // The closure (and what it captured) goes now, not when the last
        // wrapper does; a callback running on another thread finishes with
        // its own reference to it.
        if done { box.clear() }
        return done
    }

    public var isValid: Bool { RLSocketIsValid(ref) }

    /// The native descriptor, or -1 once invalidated.
    public var nativeHandle: Int32 {
        RLSocketGetNative(ref)
    }

    /// The socket's run-loop source (one per socket: every call wraps the
    /// same C source; `order` counts on the first call only), or nil once
    /// invalidated. ``RLRunLoop/add(_:forMode:)`` accepts the socket
    /// directly.
    public func makeRunLoopSource(order: Int = 0) -> RLRunLoopSource? {
        guard let source = RLSocketCreateRunLoopSource(nil, ref, RLIndex(order)) else { return nil }
        return RLRunLoopSource(adopting: source)
    }
}

extension RLSocket: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLSocket" }
}

extension RLSocket: Hashable {
    /// Two wrappers are equal when they wrap the same C socket.
    public static func == (lhs: RLSocket, rhs: RLSocket) -> Bool { lhs.ref == rhs.ref }
    public func hash(into hasher: inout Hasher) { hasher.combine(UInt(bitPattern: Int(bitPattern: ref))) }
}

// MARK: - Addresses

extension RLSocket {
    /// A socket address: the bytes of a `struct sockaddr` (CoreFoundation
    /// passes them as `CFData`), with constructors for IPv4, IPv6 and Unix
    /// domain addresses so that no `sockaddr` needs to be built by hand.
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        /// The `struct sockaddr` bytes.
        public let bytes: RLData

        /// Wraps the bytes of a `struct sockaddr` as they are (the C calls
        /// reject bytes too short to be one).
        public init(bytes: RLData) { self.bytes = bytes }

        /// An IPv4 address from its dotted text (`"127.0.0.1"`) and a port,
        /// or nil if `host` is not an IPv4 address (no name lookup).
        public init?(ipv4 host: String, port: UInt16) {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            guard inet_pton(AF_INET, host, &sin.sin_addr) == 1 else { return nil }
            bytes = withUnsafeBytes(of: sin) { RLData($0) }
        }

        /// An IPv6 address from its text (`"::1"`) and a port, or nil if
        /// `host` is not an IPv6 address.
        public init?(ipv6 host: String, port: UInt16) {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, host, &sin6.sin6_addr) == 1 else { return nil }
            bytes = withUnsafeBytes(of: sin6) { RLData($0) }
        }

        /// A Unix-domain address, or nil if the path does not fit (108 bytes
        /// with its terminating zero).
        public init?(unixPath path: String) {
            var sun = sockaddr_un()
            sun.sun_family = sa_family_t(AF_UNIX)
            let utf8 = Array(path.utf8)
            let capacity = MemoryLayout.size(ofValue: sun.sun_path)
            guard !utf8.isEmpty, utf8.count < capacity else { return nil }
            withUnsafeMutableBytes(of: &sun.sun_path) { raw in
                raw.copyBytes(from: utf8)
            }
            let length = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + utf8.count + 1
            bytes = withUnsafeBytes(of: sun) { RLData($0.prefix(length)) }
        }

        /// 127.0.0.1 at `port` (0: any free port when binding).
        public static func ipv4(loopbackPort port: UInt16) -> Address {
            Address(ipv4: "127.0.0.1", port: port)!
        }

        /// The address family (`AF_INET`, `AF_INET6`, `AF_UNIX`, …), or
        /// `AF_UNSPEC` for bytes too short to hold one.
        public var family: Int32 {
            guard bytes.count >= MemoryLayout<sa_family_t>.size else { return AF_UNSPEC }
            return Int32(bytes.withUnsafeBytes { $0.loadUnaligned(as: sa_family_t.self) })
        }

        /// The port of an IPv4 or IPv6 address, else nil.
        public var port: UInt16? {
            switch family {
            case AF_INET where bytes.count >= MemoryLayout<sockaddr_in>.size:
                return UInt16(bigEndian: bytes.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in.self).sin_port })
            case AF_INET6 where bytes.count >= MemoryLayout<sockaddr_in6>.size:
                return UInt16(bigEndian: bytes.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in6.self).sin6_port })
            default:
                return nil
            }
        }

        /// The host of an IPv4 or IPv6 address as text (`"127.0.0.1"`,
        /// `"::1"`), the path of a Unix-domain address, else nil.
        public var host: String? {
            switch family {
            case AF_INET where bytes.count >= MemoryLayout<sockaddr_in>.size:
                var sin = bytes.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in.self) }
                return Address.text(AF_INET, &sin.sin_addr)
            case AF_INET6 where bytes.count >= MemoryLayout<sockaddr_in6>.size:
                var sin6 = bytes.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in6.self) }
                return Address.text(AF_INET6, &sin6.sin6_addr)
            case AF_UNIX:
                let offset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)!
                let path = bytes.dropFirst(offset).prefix { $0 != 0 }
                return String(decoding: path, as: UTF8.self)
            default:
                return nil
            }
        }

        private static func text(_ family: Int32, _ address: UnsafeRawPointer) -> String? {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            guard inet_ntop(family, address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
            let text = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            return String(decoding: text, as: UTF8.self)
        }

        /// `127.0.0.1:8080`, `[::1]:8080`, the path of a Unix address, or a
        /// byte count for anything else.
        public var description: String {
            switch (family, host, port) {
            case (AF_INET, let host?, let port?): return "\(host):\(port)"
            case (AF_INET6, let host?, let port?): return "[\(host)]:\(port)"
            case (AF_UNIX, let path?, _): return path
            default: return "RLSocket.Address(\(bytes.count) bytes)"
            }
        }
    }
}

// MARK: - Run loops

extension RLSocket: RLRunLoopSchedulable {
    /// Through the socket's run-loop source: its callbacks then run on the
    /// loop's thread. A socket may be in several loops and modes.
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        runLoop.membership(membership, of: makeRunLoopSource(), mode: mode)
    }
}

// MARK: - Support

/// The closure of one C socket, shared by its Swift wrappers (which keep
/// it alive while a callback may still run) and the C socket's context.
final class SocketBox: RLCallbackBox<RLSocket>, @unchecked Sendable {
    private let mutex = ThreadsMutex()
    private var _callBack: (@Sendable (RLSocket, RLSocket.Event) -> Void)?

    init(callBack: (@Sendable (RLSocket, RLSocket.Event) -> Void)?) {
        _callBack = callBack
    }

    var callBack: (@Sendable (RLSocket, RLSocket.Event) -> Void)? { mutex.locked { _callBack } }

    func clear() { mutex.locked { _callBack = nil } }

    func context(_ info: UnsafeMutableRawPointer) -> RLSocketContext {
        RLSocketContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease, copyDescription: nil)
    }
}

private func rlSocketCallout(_ socket: RLSocketRef?, _ type: RLSocketCallBackType, _ address: RLDataRef?,
                             _ data: UnsafeRawPointer?, _ info: UnsafeMutableRawPointer?) {
    guard let socket, let info else { return }
    let box = SocketBox.from(info)
    guard let callBack = box.callBack else { return }
    // The address and data are the callback's only: wrap them with a
    // reference of their own.
    let from = address.map { RLSocket.Address(bytes: RLData(retaining: $0)) }
    let event: RLSocket.Event
    switch RLSocket.CallBackTypes(rawValue: UInt(type)) {
    case .read: event = .read
    case .accept:
        guard let data else { return }
        event = .accept(data.load(as: Int32.self), address: from)
    case .data:
        guard let data else { return }
        event = .data(RLData(retaining: OpaquePointer(data)), from: from)
    case .connect: event = .connect(error: data.map { $0.load(as: Int32.self) })
    case .write: event = .write
    default: return
    }
    callBack(box.wrapper { RLSocket(retaining: socket, box: box) }, event)
}
