internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A port that carries messages over TCP, between processes and hosts:
/// Foundation's `SocketPort` over `RLSocketPortRef` (RLSocketPort.h).
///
/// A **local** socket port listens on a TCP port; add it to a run loop and
/// every message that arrives is handed, on that loop's thread, to its
/// receiver — the open ``RLPort/messages`` sequence, else the closure
/// handler, else the delegate — as for any ``RLPort``:
///
///     let server = RLSocketPort(tcpPort: 0)!          // any free TCP port
///     server.setDelegate(myDelegate)
///     RLRunLoop.current.add(server, forMode: .default)
///
/// A **remote** socket port names a host and TCP port and sends to the local
/// port listening there:
///
///     let peer = RLSocketPort(remoteWithTCPPort: server.tcpPort, host: "127.0.0.1")!
///     peer.send(before: RLTime.now + 5, msgid: 7, components: [.bytes(bytes)], from: server, reserved: 0)
///
/// A message's components are ``RLData`` and socket ports. On the receiving
/// side every port in a message — its ``RLPortMessage/sendPort`` (the `from:`
/// port of the send) included — arrives as a remote socket port for the port
/// it names, so a handler answers by sending to `message.sendPort`, or with
/// `message.send(before:)`. A local port bound to every address travels as
/// "the address this connection came from", so the answer takes the route
/// the message came by.
///
/// Sending to a local port (the guide's check-in protocol hands a thread the
/// other thread's port object) goes to it over loopback.
///
/// Differences from Foundation on Linux (see docs/swift-mapping.md for the
/// whole list, and `SocketPortDifferentialTests` for the cases checked
/// against it):
/// - The `from:` port of a send reaches the receiver as the message's
///   `sendPort` (Foundation on Linux drops it: its `sendPort` names the
///   receiver's own TCP port); messages of any size up to the message limit
///   arrive, back to back or not.
/// - A remote port is shared: two remote ports for one address are the same
///   C port (`==`, as in Foundation), and invalidating one invalidates both.
///   A send that finds nobody listening makes the remote port invalid.
/// - Addresses are `[UInt8]` (`import SwiftThreadsFoundation` adds the
///   `Data` forms); there is no `socket` property and no datagram port.
/// - As in Foundation, a local port added to a run loop listens until it is
///   invalidated, even if nobody holds it any more.
///
/// Every member may be used from any thread.
open class RLSocketPort: RLPort, @unchecked Sendable {
    /// The address family of a local port.
    public enum Family: Sendable {
        /// IPv4 (`AF_INET`).
        case ipv4
        /// IPv6 (`AF_INET6`); bound to every address, it takes IPv4 clients too.
        case ipv6

        var cValue: Int32 { self == .ipv4 ? AF_INET : AF_INET6 }
    }

    // MARK: Creating (Foundation's shapes)

    /// A local port on any free TCP port of every IPv4 address
    /// (`SocketPort()`). Stops the program if the system has no free port,
    /// as Foundation does; ``init(listeningOnTCPPort:family:address:)``
    /// throws instead.
    public convenience override init() {
        guard let made = RLSocketPort.makeLocal(family: AF_INET, address: nil, tcpPort: 0) else {
            fatalError("RLSocketPort: \(RLError.last())")
        }
        self.init(adopting: made.ref, box: made.box)
    }

    /// A local port listening on `port` (0: any free port, see ``tcpPort``)
    /// of every IPv4 address (`SocketPort(tcpPort:)`). Nil, with
    /// `RLError.last()`, if the port is in use (`.exists`).
    public convenience init?(tcpPort port: UInt16) {
        guard let made = RLSocketPort.makeLocal(family: AF_INET, address: nil, tcpPort: port) else { return nil }
        self.init(adopting: made.ref, box: made.box)
    }

    /// A local port listening on the socket address `address` (a
    /// `sockaddr_in` or `sockaddr_in6`, as Foundation's `address`; the
    /// any-address listens on every address). Only TCP streams: nil, with
    /// `RLError.last()` `.invalidArgument`, for another `type` or `protocol`,
    /// a family that is not the address's, or a malformed address.
    public init?(protocolFamily family: Int32, socketType type: Int32, protocol: Int32, address: [UInt8]) {
        guard let parsed = RLSocketPort.parse(family: family, type: type, protocol: `protocol`, address: address),
              let made = RLSocketPort.makeLocal(family: parsed.family, address: parsed.host, tcpPort: parsed.port)
        else { return nil }
        super.init(wrapping: made.ref, box: made.box, retaining: false)
        finishInit()
    }

    /// A remote port for `host` (a name or a numeric address; nil or empty:
    /// this host's IPv4 loopback) and TCP `port`
    /// (`SocketPort(remoteWithTCPPort:host:)`). IPv4 addresses are preferred,
    /// as Foundation does. The name is resolved in the calling thread; the
    /// connection is made by the first send. Nil, with `RLError.last()`, if
    /// the host does not resolve (`.notFound`) or `port` is 0.
    public convenience init?(remoteWithTCPPort port: UInt16, host hostName: String?) {
        let host = hostName.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        guard let ref = RLSocketPort.makeRemote(host: host, tcpPort: port) else { return nil }
        self.init(adopting: ref, box: nil)
    }

    /// A remote port for the socket address `address` (a `sockaddr_in` or
    /// `sockaddr_in6`), as Foundation's
    /// `init(remoteWithProtocolFamily:socketType:protocol:address:)` — which
    /// cannot fail there; here a malformed address, another socket type, or
    /// TCP port 0 gives nil (`RLError.last()` `.invalidArgument`).
    public init?(remoteWithProtocolFamily family: Int32, socketType type: Int32, protocol: Int32, address: [UInt8]) {
        guard let parsed = RLSocketPort.parse(family: family, type: type, protocol: `protocol`, address: address),
              let ref = RLSocketPort.makeRemote(host: parsed.host ?? (parsed.family == AF_INET ? "0.0.0.0" : "::"),
                                                tcpPort: parsed.port)
        else { return nil }
        super.init(wrapping: ref, box: RLSocketPort.sharedBox(for: ref), retaining: false)
        finishInit()
    }

    // MARK: Creating (Swift)

    /// A local port listening on `tcpPort` (0: any free port) of `address`
    /// (a numeric address of `family`; nil: every address).
    ///
    /// - Throws: `RLError` `.exists` if the TCP port is in use,
    ///   `.invalidArgument` for an address that is not numeric or not this
    ///   host's, a system error.
    public init(listeningOnTCPPort tcpPort: UInt16 = 0, family: Family = .ipv4, address: String? = nil) throws(RLError) {
        guard let made = RLSocketPort.makeLocal(family: family.cValue, address: address, tcpPort: tcpPort) else {
            throw RLError.last()
        }
        super.init(wrapping: made.ref, box: made.box, retaining: false)
        finishInit()
    }

    /// A remote port for `host` (a name or a numeric IPv4/IPv6 address) and
    /// `tcpPort`; the name is resolved in the calling thread.
    ///
    /// - Throws: `RLError` `.notFound` if the host does not resolve,
    ///   `.invalidArgument` for an empty host or TCP port 0.
    public init(remoteHost host: String, tcpPort: UInt16) throws(RLError) {
        guard let ref = RLSocketPort.makeRemote(host: host, tcpPort: tcpPort) else { throw RLError.last() }
        super.init(wrapping: ref, box: RLSocketPort.sharedBox(for: ref), retaining: false)
        finishInit()
    }

    /// Wraps a C socket port this wrapper owns a reference to; `box` is the
    /// local port's context, or nil for a remote port (its shared box).
    private convenience init(adopting ref: OpaquePointer, box: PortBox?) {
        self.init(wrapping: ref, box: box ?? RLSocketPort.sharedBox(for: ref), retaining: false)
        finishInit()
    }

    /// The designated initializer every other one ends in.
    override init(wrapping ref: OpaquePointer, box: PortBox, retaining: Bool) {
        super.init(wrapping: ref, box: box, retaining: retaining)
    }

    /// Registers the wrapper and watches the port's invalidation (after
    /// registering: on an invalid port the callback runs at once and looks
    /// the box up).
    private func finishInit() {
        RLPort.register(self)
        RLSocketPortSetInvalidationCallBack(ref, rlSocketPortInvalidated)
    }

    private static func makeLocal(family: Int32, address: String?, tcpPort: UInt16) -> (ref: OpaquePointer, box: PortBox)? {
        if let address, address.utf8.contains(0) { return nil }
        let box = PortBox()
        let created = box.withContextInfo { info -> RLSocketPortRef? in
            var context = RLSocketPortContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease,
                                              copyDescription: nil)
            if let address {
                return address.withCString { RLSocketPortCreateLocal(nil, family, $0, tcpPort, rlSocketPortCallout, &context) }
            }
            return RLSocketPortCreateLocal(nil, family, nil, tcpPort, rlSocketPortCallout, &context)
        }
        guard let created else { return nil }
        return (created, box)
    }

    private static func makeRemote(host: String, tcpPort: UInt16) -> OpaquePointer? {
        if host.utf8.contains(0) { return nil }
        return host.withCString { RLSocketPortCreateRemote(nil, $0, tcpPort) }
    }

    /// The box shared by the wrappers of a remote port (which has no C
    /// context): the registered one while a wrapper keeps it, else new.
    static func sharedBox(for ref: OpaquePointer) -> PortBox {
        portRegistry.companion(for: RLPort.key(ref)) ?? PortBox()
    }

    /// The numeric host of a socket address: nil if malformed, .some(nil)
    /// for the any-address.
    static func numericHost(of address: [UInt8]) -> String?? {
        guard address.count >= MemoryLayout<sa_family_t>.size else { return nil }
        let family = address.withUnsafeBytes { Int32($0.loadUnaligned(as: sa_family_t.self)) }
        #if canImport(Glibc)
        let stream = Int32(SOCK_STREAM.rawValue)
        #else
        let stream = Int32(SOCK_STREAM)
        #endif
        guard let parsed = parse(family: family, type: stream, protocol: 0, address: address) else { return nil }
        return .some(parsed.host)
    }

    /// A socket address's family, numeric host (nil for the any-address)
    /// and port; nil if malformed (the C library never saw it: its last
    /// error is cleared rather than left to mislead).
    private static func parse(family: Int32, type: Int32, protocol: Int32,
                              address: [UInt8]) -> (family: Int32, host: String?, port: UInt16)? {
        let tcp = Int32(IPPROTO_TCP)
        #if canImport(Glibc)
        let stream = Int32(SOCK_STREAM.rawValue)
        #else
        let stream = Int32(SOCK_STREAM)
        #endif
        guard type == stream, `protocol` == tcp || `protocol` == 0,
              address.count >= MemoryLayout<sa_family_t>.size else {
            RLError.clear()
            return nil
        }
        let addressFamily = address.withUnsafeBytes { Int32($0.loadUnaligned(as: sa_family_t.self)) }
        guard addressFamily == family else {
            RLError.clear()
            return nil
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch family {
        case AF_INET where address.count >= MemoryLayout<sockaddr_in>.size:
            let sin = address.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in.self) }
            var addr = sin.sin_addr
            let port = UInt16(bigEndian: sin.sin_port)
            if addr.s_addr == 0 { return (family, nil, port) }
            inet_ntop(AF_INET, &addr, &text, socklen_t(text.count))
            return (family, cText(text), port)
        case AF_INET6 where address.count >= MemoryLayout<sockaddr_in6>.size:
            let sin6 = address.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in6.self) }
            var addr = sin6.sin6_addr
            let port = UInt16(bigEndian: sin6.sin6_port)
            let any = withUnsafeBytes(of: &addr) { $0.allSatisfy { $0 == 0 } }
            if any { return (family, nil, port) }
            inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count))
            return (family, cText(text), port)
        default:
            RLError.clear()
            return nil
        }
    }

    // MARK: Wrappers of C ports

    /// The live wrapper of the C socket port `ref` (the object made in
    /// Swift, of its own class), or a new `RLSocketPort` retaining it that
    /// shares its receivers (a local port's context, or a remote port's
    /// registered box). If `ref` can no longer be retained (its last
    /// release is invalidating it) the wrapper does not own it and is only
    /// meaningful during that callback.
    static func socketWrapper(for ref: OpaquePointer) -> RLSocketPort {
        let key = RLPort.key(ref)
        var isNew = false
        let port = portRegistry.wrapper(for: key, reuse: { $0 is RLSocketPort }) { old in
            // A box left by a freed port whose address was reused is not
            // this one's: a local port's box must be its context.
            let local = !RLSocketPortIsRemote(ref)
            let known = old.flatMap { box in !local || box.isSocketContext(of: ref) ? box : nil }
            let box = known ?? PortBox()
            let port = RLSocketPort(wrapping: ref, box: box, retaining: true)
            if port.isOwning { box.key = key }
            isNew = port.isOwning
            return (port, box, port.isOwning)
        } as! RLSocketPort
        // Outside the registry's lock: on an invalid port the callback runs
        // at once and takes that lock.
        if isNew { RLSocketPortSetInvalidationCallBack(ref, rlSocketPortInvalidated) }
        return port
    }

    // MARK: State

    /// False once invalidated — by ``invalidate()``, by the last reference
    /// going, or for a remote port, when a send found its peer gone.
    open override var isValid: Bool { RLSocketPortIsValid(ref) }

    /// Closes the port: a local port stops listening (its TCP port is free
    /// at once), leaves its run loops and drops its clients; a remote port
    /// disconnects (for every wrapper of it). The ``RLPort/messages``
    /// sequence ends and the invalidation handler is called once. Idempotent.
    open override func invalidate() { RLSocketPortInvalidate(ref) }

    /// Whether this port names another (sends) rather than listens.
    public var isRemote: Bool { RLSocketPortIsRemote(ref) }

    /// The TCP port: the one a local port listens on, or a remote port's.
    public var tcpPort: UInt16 { RLSocketPortGetPort(ref) }

    /// `AF_INET` or `AF_INET6` (of the address a remote port uses).
    open var protocolFamily: Int32 { RLSocketPortGetProtocolFamily(ref) }

    /// `SOCK_STREAM`: socket ports are TCP streams.
    open var socketType: Int32 {
        #if canImport(Glibc)
        Int32(SOCK_STREAM.rawValue)
        #else
        Int32(SOCK_STREAM)
        #endif
    }

    /// `IPPROTO_TCP`.
    open var `protocol`: Int32 { Int32(IPPROTO_TCP) }

    /// The port's socket address: the bytes of a `sockaddr_in` or
    /// `sockaddr_in6` (Foundation's `address`, there as `Data`).
    open var address: [UInt8] {
        guard let data = RLSocketPortCopyAddress(ref) else { return [] }
        return Array(RLData(adopting: data))
    }

    /// The largest message the port accepts (local) or sends (remote), in
    /// bytes of frame body: 64 to 64 MiB (the default).
    ///
    /// - Throws: `RLError` `.invalidArgument` outside that range.
    public func setMessageLimit(_ bytes: Int) throws(RLError) {
        guard RLSocketPortSetMessageLimit(ref, RLIndex(bytes)) else { throw RLError.last() }
    }

    /// The most components (the reply port not counted) a message may
    /// carry (default ``defaultMaxComponents``, 4096). A
    /// local port drops a message with more, and the connection it came on
    /// (the sender's remote port then fails its next send); a remote port
    /// refuses to send one (`RLError` `.invalidArgument`, nothing sent).
    /// Set it with ``setMaxComponents(_:)``; every wrapper of one port sees
    /// the same value.
    public var maxComponents: Int { box.maxComponents }

    /// The default of ``maxComponents`` (4096).
    public static let defaultMaxComponents = Int(RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS)

    /// The most ``maxComponents`` may be (8388607: a frame body of at most
    /// 64 MiB holds no more component headers).
    public static let maxComponentsLimit = Int(RL_SOCKET_PORT_MAX_COMPONENTS_LIMIT)

    /// Sets ``maxComponents``: 0 to ``maxComponentsLimit``. It applies from the next
    /// message on, on connections already open too; on an invalidated port
    /// it is accepted and has no effect.
    ///
    /// - Throws: `RLError` `.invalidArgument` for a count out of range (the
    ///   limit is then unchanged).
    public func setMaxComponents(_ count: Int) throws(RLError) {
        guard box.setMaxComponents(count, on: ref) else { throw RLError.last() }
    }

    /// Local ports: how long a client may take to finish a message it began
    /// (seconds, default 10) before the port drops its connection.
    ///
    /// - Throws: `RLError` `.invalidArgument` for a value that is not
    ///   positive and finite, `.invalidState` for a remote port.
    public func setStallTimeout(_ seconds: RLTimeInterval) throws(RLError) {
        guard RLSocketPortSetStallTimeout(ref, seconds) else { throw RLError.last() }
    }

    // MARK: What differs from local ports

    /// A socket port has no queue of its own (the kernel's socket buffers
    /// are its queue, and a send waits for room in them until its date).
    override func applyQueueLimit(_ messages: Int) throws(RLError) {
        throw RLError(code: .invalidState,
                      message: "RLSocketPort: a socket port has no queue; a send waits for room in the socket")
    }

    override var currentQueuedCount: Int { 0 }

    /// Sends over TCP. A remote port sends to its peer; a local port to
    /// itself, over loopback (through the remote port for its own address).
    override func postMessage(msgid: RLMessageID, components: [RLPortComponent], replyPort: RLPort?,
                              before limitDate: RLAbsoluteTime) -> Bool {
        let target: OpaquePointer
        var loopback: RLSocketPort?
        if isRemote {
            target = ref
        } else {
            guard let own = box.loopbackRemote(of: self) else { return false }
            loopback = own
            target = own.ref
        }
        let refs: [RLTypeRef?] = components.map { $0.rawRef }
        // The C call encodes everything before it returns: these references
        // keep the components and the ports alive until then.
        return withExtendedLifetime((components, replyPort, loopback)) {
            refs.withUnsafeBufferPointer { list in
                RLSocketPortSendBeforeDate(target, limitDate, msgid, list.baseAddress, RLIndex(list.count),
                                           replyPort?.ref)
            }
        }
    }

    /// A local port's run-loop source; a remote port has none (false, with
    /// `RLError.last()`). Removing or asking about a port that never had a
    /// source does not make one (a source keeps a local port listening).
    override func membership(_ op: RLRunLoop.Membership, in loop: RLRunLoopRef, mode: UnsafePointer<CChar>) -> Bool {
        // Removing a port that was never added is harmless (as for sources).
        if op != .add && !box.hasSource { return op == .remove }
        guard let source = RLSocketPortCreateRunLoopSource(nil, ref, 0) else { return false }
        defer { RLRelease(UnsafeRawPointer(source)) }
        box.markHasSource()
        switch op {
        case .add: return RLRunLoopAddSource(loop, source, mode)
        case .remove: return RLRunLoopRemoveSource(loop, source, mode)
        case .contains: return RLRunLoopContainsSource(loop, source, mode)
        }
    }
}

// MARK: - Support

/// The text of a NUL-terminated C character buffer.
private func cText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension PortBox {
    /// Whether this box is the context of the local socket port `ref`
    /// (made by Swift for that port).
    func isSocketContext(of ref: OpaquePointer) -> Bool {
        var context = RLSocketPortContext()
        return RLSocketPortGetContext(ref, &context) && isInfo(context.info)
    }

    /// The remote port a local socket port sends to itself through: for
    /// its own address, or the loopback address when it listens on every
    /// address. Made on first use, remade once invalid.
    func loopbackRemote(of local: RLSocketPort) -> RLSocketPort? {
        cachedLoopback { () -> RLPort? in
            let family = local.protocolFamily
            let bytes = local.address
            var host = family == AF_INET6 ? "::1" : "127.0.0.1"
            if let parsed = RLSocketPort.numericHost(of: bytes), let bound = parsed { host = bound }
            return try? RLSocketPort(remoteHost: host, tcpPort: local.tcpPort)
        } as? RLSocketPort
    }
}

/// A local socket port's message: wraps its parts and hands it to the
/// receiver of the port's box.
private func rlSocketPortCallout(_ local: RLSocketPortRef?, _ msgid: UInt32,
                                 _ components: UnsafePointer<RLTypeRef?>?, _ count: RLIndex,
                                 _ sendPort: RLSocketPortRef?, _ info: UnsafeMutableRawPointer?) {
    guard let local, let info else { return }
    PortBox.from(info).deliver {
        let parts = (0..<max(Int(count), 0)).compactMap { index in
            components?[index].map { RLPortComponent(component: $0) }
        }
        return RLPortMessage(msgid: msgid, sendPort: sendPort.map { RLSocketPort.socketWrapper(for: $0) },
                             receivePort: RLSocketPort.socketWrapper(for: local), components: parts)
    }
}

/// A socket port became invalid: end its sequence, tell its handler. A
/// remote port has no context: its box is the registered one.
private func rlSocketPortInvalidated(_ port: RLSocketPortRef?, _ info: UnsafeMutableRawPointer?) {
    guard let port else { return }
    let box: PortBox? = info.map { PortBox.from($0) } ?? portRegistry.companion(for: RLPort.key(port))
    guard let box else { return }
    let (stream, handler) = box.markInvalidated()
    stream?.finish()
    rlTellInvalidated(handler, { RLSocketPort.socketWrapper(for: port) })
}
