internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

// Local ports: Foundation's `Port` (NSMachPort) and `PortMessage` over the C
// `RLPortRef` / `RLPortMessageRef` (RLPort.h) — messages between the threads
// of one process, delivered by a run loop.

/// A message's identifier, the one type of `msgid` throughout SwiftThreads:
/// ``RLPortMessage/msgid``, ``RLPort``'s and ``RLSocketPort``'s sends, and
/// ``RLMessagePort``'s requests and handler.
///
/// `UInt32`, Foundation's `PortMessage.msgid`, so that ported Foundation
/// code compiles unchanged. CoreFoundation's `CFMessagePort` passes an
/// `SInt32` (`Int32`): an ``RLMessagePort`` carries the same 32 bits, so a
/// CF peer's negative `msgid` arrives as its bit pattern
/// (`RLMessageID(bitPattern: -1)` is `0xFFFF_FFFF`), and `Int32(bitPattern:)`
/// gives it back. The `Int32` forms of ``RLMessagePort``'s calls remain,
/// deprecated.
public typealias RLMessageID = UInt32

/// Receives the messages of an ``RLPort`` (Foundation's `PortDelegate`).
///
/// `handle(_:)` runs on the thread of the run loop the port is in. As with
/// Foundation, the delegate need not be `Sendable`: it is bound to that
/// loop's thread instead, checked at run time. The first message handed to
/// it binds it to the thread that delivers it; a message delivered on
/// another thread's loop while it is set and that thread lives stops the
/// process (a delegate called on two threads is a data race). Setting a
/// delegate again (or nil) unbinds it, as does the end of its thread. The
/// port holds its delegate weakly, as Foundation does.
public protocol RLPortDelegate: AnyObject {
    func handle(_ message: RLPortMessage)
}

/// One part of a port message: bytes or a port (Foundation's `NSData` and
/// `NSPort` components).
public enum RLPortComponent: Sendable, Hashable {
    case data(RLData)
    case port(RLPort)

    /// A data component holding a copy of `bytes`.
    public static func bytes<Bytes: Sequence>(_ bytes: Bytes) -> RLPortComponent where Bytes.Element == UInt8 {
        .data(RLData(bytes))
    }

    /// The bytes of a data component, or nil for a port.
    public var data: RLData? {
        if case .data(let data) = self { return data }
        return nil
    }

    /// The port of a port component, or nil for data.
    public var port: RLPort? {
        if case .port(let port) = self { return port }
        return nil
    }

    /// The C object (borrowed: valid while the component is).
    var rawRef: UnsafeRawPointer {
        switch self {
        case .data(let data): return UnsafeRawPointer(data.ref)
        case .port(let port): return UnsafeRawPointer(port.ref)
        }
    }

    /// Wraps a component of a C message: an RLPort, an RLSocketPort or an
    /// RLData.
    init(component ref: UnsafeRawPointer) {
        if let type = RLGetTypeName(ref), strcmp(type, "RLPort") == 0 {
            self = .port(RLPort.wrapper(for: OpaquePointer(ref)))
        } else if let type = RLGetTypeName(ref), strcmp(type, "RLSocketPort") == 0 {
            self = .port(RLSocketPort.socketWrapper(for: OpaquePointer(ref)))
        } else {
            self = .data(RLData(retaining: OpaquePointer(ref)))
        }
    }
}

/// A port that receives messages on a run loop: Foundation's `Port`
/// (`NSMachPort`) over `RLPortRef`.
///
/// Add the port to a run loop (``RLRunLoop/add(_:forMode:)``, or
/// ``schedule(in:forMode:)``); every message sent to it from any thread is
/// handed, one at a time and in each sender's order, on that loop's thread,
/// to exactly one receiver:
///
/// 1. the open ``messages`` sequence, if one is being iterated;
/// 2. else the closure of ``init(handler:)`` / ``setHandler(_:)``;
/// 3. else the delegate (``setDelegate(_:)``);
/// 4. else it is dropped, as by a Foundation port without a delegate.
///
/// Sending (``send(before:msgid:components:from:reserved:)``, or
/// ``RLPortMessage/send(before:)``) queues the message: the port queues at
/// most ``setQueueLimit(_:)`` messages (1024 by default); a sender that finds
/// it full waits until there is room or its limit date passes, then fails.
/// A message is never dropped once its send succeeded, and the bytes of its
/// data components are never copied on the way.
///
/// Differences from Foundation, on purpose:
/// - **The run loop does not keep the port alive.** A port lives while
///   anyone holds it: your references, a message that carries it, or the
///   peer that kept it from a message's `sendPort` (the guide's check-in
///   protocol). When the last reference goes, the port is invalidated:
///   queued messages are released and waiting senders fail.
/// - Dates are `RLAbsoluteTime` (see docs/swift-mapping.md).
///
/// As in Foundation, `RLRunLoop.add(_:forMode:)` and
/// `remove(_:forMode:)` call the port's ``schedule(in:forMode:)`` and
/// ``remove(from:forMode:)`` — once per loop and mode: adding a port to a
/// mode it is in already does not call `schedule` again, and removing it
/// from a mode it is not in does not call `remove`. A subclass overrides
/// them to watch or replace what the loop does (calling `super` to have the
/// port's messages delivered); the loop remembers the modes until the port
/// is removed, invalidated or freed.
///
/// `RLPort` is an open class, as `Port` is. The `RLPort` objects that
/// messages carry (`sendPort`, `receivePort`, port components) are the
/// objects you made while you hold them — instances of your subclass —
/// otherwise new `RLPort` wrappers of the same port; `==` compares the
/// underlying ports. Every member may be used from any thread. A subclass
/// restates the conformance (`class MyPort: RLPort, @unchecked Sendable`,
/// as Swift asks) and keeps its own state safe to use from several threads.
open class RLPort: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// The one C reference this wrapper owns (see ``wrapper(for:)``): an
    /// `RLPortRef`, or for an ``RLSocketPort`` its
    /// `RLSocketPortRef`. Each kind overrides the members below that reach
    /// the C object (`isValid`, `invalidate()`, `postMessage`, `membership`,
    /// the queue), so no `RLPort…` function is called with a socket port.
    final var ref: OpaquePointer { reference.pointer }
    private let reference: OwnedRef
    /// The receivers; shared by every wrapper of this C port.
    let box: PortBox

    /// A new, valid port with no receiver yet.
    public init() {
        let box = PortBox()
        let created = box.withContextInfo { info in
            var context = RLPortContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease,
                                        copyDescription: nil)
            return RLPortCreate(nil, rlPortCallout, &context)
        }
        guard let created else { fatalError("RLPort: \(RLError.last())") }
        RLPortSetInvalidationCallBack(created, rlPortInvalidated)
        reference = OwnedRef(adopting: created)
        self.box = box
        RLPort.register(self)
    }

    /// A new port whose messages go to `handler` (on the run loop's thread).
    public convenience init(handler: @escaping @Sendable (RLPortMessage) -> Void) {
        self.init()
        setHandler(handler)
    }

    /// Wraps a C port that came from C (a message's port), or one a
    /// subclass made (``RLSocketPort``).
    /// Takes over the caller's reference to `ref`, or with `retaining`
    /// takes one of its own.
    init(wrapping ref: OpaquePointer, box: PortBox, retaining: Bool) {
        reference = retaining ? OwnedRef(retaining: ref) : OwnedRef(adopting: ref)
        self.box = box
    }

    deinit {
        // The release (after this) may finalize the C port, which calls
        // back into Swift (the invalidation callback, the box's deinit).
        portRegistry.forget(RLPort.key(ref))
    }

    /// False for a wrapper made while its C port is being destroyed.
    final var isOwning: Bool { reference.owned }

    // MARK: Receivers

    /// Sets the object that handles the port's messages (held weakly), as
    /// `Port.setDelegate(_:)`. A closure handler or an open ``messages``
    /// sequence takes precedence.
    open func setDelegate(_ anObject: (any RLPortDelegate)?) { box.setDelegate(anObject) }

    /// The delegate, if it is still alive.
    open func delegate() -> (any RLPortDelegate)? { box.delegate }

    /// Sets (or, with nil, clears) the closure that receives the port's
    /// messages on the run loop's thread; it takes precedence over the
    /// delegate.
    public func setHandler(_ handler: (@Sendable (RLPortMessage) -> Void)?) { box.setHandler(handler) }

    /// The port's messages, as an asynchronous sequence:
    /// ``messages(bufferingPolicy:)`` with its default bound.
    ///
    /// Each access makes a new sequence, which receives every message from
    /// then on (ahead of the closure handler and the delegate) until it is
    /// dropped or cancelled; a newer sequence takes over and the older one
    /// ends. The sequence ends when the port is invalidated. The port must
    /// still be in a running run loop: the loop's thread takes messages off
    /// the port and hands them to the sequence.
    ///
    /// **Bounded:** the sequence holds at most ``defaultMessagesBufferLimit``
    /// (1024) messages its consumer has not taken yet; while it is full, new
    /// arrivals are dropped, counted in ``droppedMessageCount``. (The loop
    /// thread cannot wait for a consumer without stopping everything else it
    /// serves.) For lossless flow control, where senders wait instead (the
    /// port's own queue limit, ``setQueueLimit(_:)``), receive with a
    /// closure handler or a delegate; or choose another policy with
    /// ``messages(bufferingPolicy:)``, `.unbounded` included.
    public var messages: AsyncStream<RLPortMessage> {
        messages(bufferingPolicy: .bufferingOldest(RLPort.defaultMessagesBufferLimit))
    }

    /// How many untaken messages ``messages`` holds: 1024, the port's own
    /// default queue limit.
    public static let defaultMessagesBufferLimit = 1024

    /// The port's messages as ``messages`` delivers them, buffered by
    /// `bufferingPolicy`: `.bufferingOldest(n)` keeps the first `n` untaken
    /// messages and drops new arrivals, `.bufferingNewest(n)` keeps the
    /// last `n` and drops the oldest, `.unbounded` drops nothing (a consumer
    /// slower than its senders makes the buffer grow). Every message
    /// dropped is counted in ``droppedMessageCount``.
    public func messages(bufferingPolicy: AsyncStream<RLPortMessage>.Continuation.BufferingPolicy)
        -> AsyncStream<RLPortMessage> {
        let box = box
        return AsyncStream(bufferingPolicy: bufferingPolicy) { continuation in box.installStream(continuation) }
    }

    /// Messages the port's ``messages`` sequences dropped because they were
    /// full, since the port was made (shared by every wrapper of the port).
    public var droppedMessageCount: Int { box.droppedMessageCount }

    // MARK: Life

    /// False once the port is invalidated (`RLPortIsValid`).
    open var isValid: Bool { RLPortIsValid(ref) }

    /// Invalidates the port: no more sends, queued messages released, the
    /// port removed from every run loop, waiting senders woken (they fail),
    /// the ``messages`` sequence ended and the invalidation handler called.
    /// Idempotent.
    open func invalidate() { RLPortInvalidate(ref) }

    /// Sets the closure called once when the port becomes invalid
    /// (Foundation posts `Port.didBecomeInvalidNotification`); on a port that
    /// is invalid already it is called at once, as CoreFoundation does.
    public func setInvalidationHandler(_ handler: (@Sendable (RLPort) -> Void)?) {
        if let handler, box.setInvalidationHandler(handler) { handler(self) }
    }

    // MARK: Run loops

    /// Adds the port to `mode` of `runLoop` (`Port.schedule(in:forMode:)`):
    /// its messages are handled on that loop's thread when it runs in
    /// `mode`. `RLRunLoop.add(_:forMode:)` calls this; an override that
    /// calls `super` gets the port's messages delivered, one that does not
    /// keeps them from the loop. On failure (an invalid port or mode, a
    /// remote socket port) the port is not added and `RLError.last()` says
    /// why.
    open func schedule(in runLoop: RLRunLoop, forMode mode: RLRunLoop.Mode) {
        box.recordScheduled(in: runLoop, mode: mode)
        if !mode.withCString({ membership(.add, in: runLoop.ref, mode: $0) }) {
            box.forgetScheduled(in: runLoop, mode: mode)
        }
    }

    /// Removes the port from `mode` of `runLoop`
    /// (`Port.remove(from:forMode:)`); `RLRunLoop.remove(_:forMode:)` calls
    /// this. Removing a port that is not there is harmless.
    open func remove(from runLoop: RLRunLoop, forMode mode: RLRunLoop.Mode) {
        box.forgetScheduled(in: runLoop, mode: mode)
        _ = mode.withCString { membership(.remove, in: runLoop.ref, mode: $0) }
    }

    // MARK: Queue

    /// At most `messages` (>= 1) queued; senders to a full port wait
    /// (`RLPortSetQueueLimit`). Lowering it below what is queued keeps those.
    ///
    /// - Throws: `RLError` `.invalidArgument` for less than 1.
    public func setQueueLimit(_ messages: Int) throws(RLError) { try applyQueueLimit(messages) }

    /// Messages queued now, not yet taken by a run loop (a snapshot).
    public var queuedCount: Int { currentQueuedCount }

    func applyQueueLimit(_ messages: Int) throws(RLError) {
        guard RLPortSetQueueLimit(ref, RLIndex(messages)) else { throw RLError.last() }
    }

    var currentQueuedCount: Int { max(Int(RLPortGetQueuedCount(ref)), 0) }

    // MARK: Sending (Foundation's shape)

    /// Foundation's headerless ports reserve nothing: 0.
    open var reservedSpaceLength: Int { 0 }

    /// Sends a message with id 0 to this port; replies go to `receivePort`
    /// (Foundation's `send(before:components:from:reserved:)`).
    open func send(before limitDate: RLAbsoluteTime, components: [RLPortComponent]?, from receivePort: RLPort?,
                   reserved headerSpaceReserved: Int) -> Bool {
        send(before: limitDate, msgid: 0, components: components, from: receivePort, reserved: headerSpaceReserved)
    }

    /// Sends a message to this port; replies go to `receivePort`. Waits for
    /// room in the port's queue until `limitDate` (a date in the past: does
    /// not wait). `msgID` is kept to its low 32 bits, as Foundation's Mach
    /// ports do; `headerSpaceReserved` is ignored.
    ///
    /// - Returns: false, with `RLError.last()` set, if the queue stayed full
    ///   until `limitDate` (`.timedOut`) or the port is invalid
    ///   (`.invalidObject`); nothing was sent then.
    open func send(before limitDate: RLAbsoluteTime, msgid msgID: Int, components: [RLPortComponent]?,
                   from receivePort: RLPort?, reserved headerSpaceReserved: Int) -> Bool {
        postMessage(msgid: RLMessageID(truncatingIfNeeded: msgID), components: components ?? [], replyPort: receivePort,
                    before: limitDate)
    }

    // MARK: Sending (Swift)

    /// Sends `components` with `msgid` to this port; the receiver answers
    /// through `replyPort` (its message's `sendPort`). Waits for room in the
    /// port's queue until `limitDate`.
    ///
    /// - Throws: `RLError` `.timedOut` if the queue stayed full until
    ///   `limitDate`, `.invalidObject` for an invalid port, `.invalidArgument`
    ///   for a NaN date. Nothing was sent then.
    public func send(_ components: [RLPortComponent] = [], msgid: RLMessageID = 0, replyPort: RLPort? = nil,
                     before limitDate: RLAbsoluteTime = RLTime.distantFuture) throws(RLError) {
        guard postMessage(msgid: msgid, components: components, replyPort: replyPort, before: limitDate) else {
            throw RLError.last()
        }
    }

    /// ``send(_:msgid:replyPort:before:)`` waiting at most `timeout` for room.
    public func send(_ components: [RLPortComponent] = [], msgid: RLMessageID = 0, replyPort: RLPort? = nil,
                     timeout: Duration) throws(RLError) {
        try send(components, msgid: msgid, replyPort: replyPort, before: RLTime.after(timeout))
    }

    /// Sends one message to this port (false with the C error set). Each
    /// kind of port sends its own way (``RLSocketPort`` over TCP).
    func postMessage(msgid: RLMessageID, components: [RLPortComponent], replyPort: RLPort?,
                     before limitDate: RLAbsoluteTime) -> Bool {
        let refs: [RLTypeRef?] = components.map { $0.rawRef }
        // The components and the reply port are retained by the C message;
        // until then these references keep them alive.
        return withExtendedLifetime((components, replyPort)) {
            refs.withUnsafeBufferPointer { list in
                RLPortSendBeforeDate(ref, limitDate, msgid, list.baseAddress, RLIndex(list.count), replyPort?.ref)
            }
        }
    }

    /// What `RLRunLoop.add`, `remove` and `contains` do with this port in
    /// `mode` of `loop` (each kind of port has its own run-loop source).
    func membership(_ op: RLRunLoop.Membership, in loop: RLRunLoopRef, mode: UnsafePointer<CChar>) -> Bool {
        switch op {
        case .add: return RLRunLoopAddPort(loop, ref, mode)
        case .remove: return RLRunLoopRemovePort(loop, ref, mode)
        case .contains: return RLRunLoopContainsPort(loop, ref, mode)
        }
    }

    // MARK: Identity

    /// Two ports are equal when they wrap the same C port.
    public static func == (lhs: RLPort, rhs: RLPort) -> Bool { lhs.ref == rhs.ref }
    public func hash(into hasher: inout Hasher) { hasher.combine(RLPort.key(ref)) }

    open var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLPort" }

    static func key(_ ref: OpaquePointer) -> UInt { PortRegistry.key(ref) }

    /// Records `port` as its C port's wrapper, with its box.
    static func register(_ port: RLPort) {
        let key = key(port.ref)
        port.box.key = key
        portRegistry.record(key, wrapper: port, companion: port.box)
    }

    /// Entries in the wrapper registry (for tests: it must not grow with
    /// ports that are gone).
    static var registeredCount: Int { portRegistry.count }

    /// The live wrapper of `ref` (the object made in Swift, of its own
    /// class), or a new `RLPort` retaining `ref` that shares the port's
    /// receivers.
    ///
    /// If `ref` can no longer be retained (it is being destroyed: the
    /// invalidation callback of its last release) the wrapper does not own
    /// it and is not registered; it is only meaningful during that callback.
    static func wrapper(for ref: RLPortRef) -> RLPort {
        portRegistry.wrapper(for: key(ref)) { old in
            // An entry left by a port that was freed (and its address
            // reused) has a box that is not this port's context.
            let known = old.flatMap { $0.isContext(of: ref) ? $0 : nil }
            let port = RLPort(wrapping: ref, box: known ?? PortBox(), retaining: true)
            return (port, known, port.isOwning)
        }
    }
}

/// A message between ports: Foundation's `PortMessage`.
///
/// As in Foundation, ``sendPort`` is where ``send(before:)`` sends the
/// message and ``receivePort`` where replies go. A message a port received
/// has them the other way round, seen from the receiver: its ``sendPort`` is
/// the sender's reply port (send the answer there) and its ``receivePort``
/// the port it arrived on — so sending a received message answers it.
///
/// `Sendable`: the ports and components never change; ``msgid`` may be set
/// from any thread.
public final class RLPortMessage: @unchecked Sendable, CustomStringConvertible {
    /// Where ``send(before:)`` sends the message.
    public var sendPort: RLPort? { received(); return _sendPort }
    /// Where replies to the message go.
    public var receivePort: RLPort? { received(); return _receivePort }
    /// The message's data and ports, in order.
    public var components: [RLPortComponent]? { received(); return _components }

    // The getters above and msgid's first tell ThreadSanitizer that the
    // message was handed over (every init ends by publishing it): a message
    // the loop thread made reaches an async consumer through AsyncStream,
    // whose queue ThreadSanitizer does not see (HandOff, Plumbing.swift).
    private let _sendPort: RLPort?
    private let _receivePort: RLPort?
    private let _components: [RLPortComponent]?
    private let mutex = ThreadsMutex()
    private var _msgid: RLMessageID

    /// A message to `sendPort` whose replies go to `replyPort`, with id 0
    /// (Foundation's `init(sendPort:receivePort:components:)`).
    public init(sendPort: RLPort?, receivePort replyPort: RLPort?, components: [RLPortComponent]?) {
        _sendPort = sendPort
        _receivePort = replyPort
        _components = components
        _msgid = 0
        publish()
    }

    /// Foundation's other spelling, `init(send:receive:components:)`.
    public convenience init(send sendPort: RLPort?, receive replyPort: RLPort?, components: [RLPortComponent]?) {
        self.init(sendPort: sendPort, receivePort: replyPort, components: components)
    }

    /// A message as the C port delivered it (valid during the call).
    init(received message: RLPortMessageRef) {
        _msgid = RLPortMessageGetMsgid(message)
        let count = max(Int(RLPortMessageGetComponentCount(message)), 0)
        _components = (0..<count).compactMap { index in
            RLPortMessageGetComponent(message, RLIndex(index)).map { RLPortComponent(component: $0) }
        }
        _sendPort = RLPortMessageGetSendPort(message).map { RLPort.wrapper(for: $0) }
        _receivePort = RLPortMessageGetReceivePort(message).map { RLPort.wrapper(for: $0) }
        publish()
    }

    /// A message a socket port received (its parts wrapped already).
    init(msgid: RLMessageID, sendPort: RLPort?, receivePort: RLPort?, components: [RLPortComponent]) {
        _msgid = msgid
        _sendPort = sendPort
        _receivePort = receivePort
        _components = components
        publish()
    }

    deinit { received() }

    private func publish() { HandOff.publish(self) }
    private func received() { HandOff.received(self) }

    /// The message's identifier (0 unless set).
    public var msgid: RLMessageID {
        get { received(); return mutex.locked { _msgid } }
        set { received(); mutex.locked { _msgid = newValue } }
    }

    /// Sends the message to ``sendPort``, replies to ``receivePort``,
    /// through ``RLPort/send(before:msgid:components:from:reserved:)`` of
    /// the send port (so a subclass's override is used). False if there is
    /// no send port (`RLError.last()` is not set then), or as that method.
    public func send(before date: RLAbsoluteTime) -> Bool {
        guard let sendPort else { return false }
        return sendPort.send(before: date, msgid: Int(msgid), components: components, from: receivePort, reserved: 0)
    }

    public var description: String {
        "RLPortMessage(msgid: \(msgid), \(components?.count ?? 0) component(s))"
    }
}

extension RLPort: RLRunLoopSchedulable {
    /// Foundation's `RunLoop.add(_:forMode:)` and `remove(_:forMode:)` for
    /// a `Port`, and a test of membership.
    ///
    /// `.add` calls the port's ``schedule(in:forMode:)`` — whose own
    /// implementation adds it (`RLRunLoopAddPort`), so that its messages
    /// are handled on the loop's thread when it runs in `mode` — unless the
    /// port is in `mode` of that loop already (true then). Unlike
    /// Foundation, the loop does not keep the port alive. False if
    /// `schedule` left an `RLError` (`RLError.last()`): the port's own
    /// `schedule` does for an invalid port or mode.
    ///
    /// `.remove` calls the port's ``remove(from:forMode:)`` if it was added
    /// to `mode` of that loop; otherwise only makes sure the C loop does not
    /// have it there: removing a port that is not there is harmless (true).
    /// False if `remove(from:forMode:)` left an `RLError`, or (with
    /// `RLError.last()`) for an invalid mode.
    ///
    /// An ``RLSocketPort`` is added as its listening socket's source: a local
    /// one receives on the loop (and, as in Foundation, listens from then on
    /// until it is invalidated); a remote one receives nothing and is refused.
    public func runLoopMembership(_ membership: RLRunLoop.Membership, in runLoop: RLRunLoop,
                                  mode: RLRunLoop.Mode) -> Bool {
        switch membership {
        case .add:
            guard box.recordScheduled(in: runLoop, mode: mode) else { return true }
            RLErrorClear()
            schedule(in: runLoop, forMode: mode)
            guard RLErrorGetLast().code.rawValue == 0 else {
                box.forgetScheduled(in: runLoop, mode: mode)
                return false
            }
            return true
        case .remove:
            guard box.isScheduled(in: runLoop, mode: mode) else {
                return mode.withCString { self.membership(.remove, in: runLoop.ref, mode: $0) }
            }
            RLErrorClear()
            remove(from: runLoop, forMode: mode)
            box.forgetScheduled(in: runLoop, mode: mode)
            return RLErrorGetLast().code.rawValue == 0
        case .contains:
            return mode.withCString { self.membership(.contains, in: runLoop.ref, mode: $0) }
        }
    }
}

// MARK: - Support

/// The receivers of one C port, shared by all its Swift wrappers; the C
/// port owns it (its context's info) and hands it to the callbacks. (A
/// remote ``RLSocketPort`` has no C context: its wrappers share its box
/// through the registry.)
final class PortBox: RLCallbackBox<RLPort>, @unchecked Sendable {
    /// What receives one message, taken under the lock and called outside.
    enum Receiver {
        case stream(AsyncStream<RLPortMessage>.Continuation)
        case handler(@Sendable (RLPortMessage) -> Void)
        case delegate(any RLPortDelegate)
    }

    private let mutex = ThreadsMutex()
    private weak var _delegate: (any RLPortDelegate)?
    /// The thread the delegate is bound to: the first that delivered to it
    /// (nil until then, or again once it finished).
    private var delegateThread: RLThread?
    /// The loops and modes `RLRunLoop.add` / `schedule` put the port in
    /// (Foundation's run loop's record of its ports): `add` calls
    /// `schedule` only for a mode not recorded, `remove` calls `remove`
    /// only for one that is. Holds the loop wrappers, not the port.
    private var scheduled: [ObjectIdentifier: (loop: RLRunLoop, modes: Set<RLRunLoop.Mode>)] = [:]
    private var handler: (@Sendable (RLPortMessage) -> Void)?
    private var stream: (id: UInt64, continuation: AsyncStream<RLPortMessage>.Continuation)?
    private var nextStreamID: UInt64 = 0
    private var invalidationHandler: (@Sendable (RLPort) -> Void)?
    private var invalidated = false
    /// The registry key of the C port whose context this is (0: none); set
    /// once, before the port is shared.
    var key: UInt = 0
    /// Socket ports: whether the port's run-loop source was made (a source
    /// keeps a local socket port listening), and the remote port a local
    /// one sends to itself through.
    private var _hasSource = false
    private var loopback: RLPort?

    var hasSource: Bool { mutex.locked { _hasSource } }

    /// Socket ports: the most components a message may carry, as last set
    /// through any wrapper of the C port (the C library has no getter).
    private var _maxComponents = Int(RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS)

    var maxComponents: Int { mutex.locked { _maxComponents } }

    /// Sets the C port's limit and records it, under the box's lock so that
    /// the recorded value is the one the C port has.
    func setMaxComponents(_ count: Int, on ref: OpaquePointer) -> Bool {
        mutex.locked {
            guard RLSocketPortSetMaxComponents(ref, RLIndex(count)) else { return false }
            _maxComponents = count
            return true
        }
    }

    func markHasSource() { mutex.locked { _hasSource = true } }

    /// The cached loopback port while it is valid, else what `make` makes
    /// (called with the box's lock held: it must not call user code).
    func cachedLoopback(_ make: () -> RLPort?) -> RLPort? {
        mutex.locked {
            if let loopback, loopback.isValid { return loopback }
            loopback = make()
            return loopback
        }
    }

    deinit {
        // The C port is gone (it released its context): forget its entry
        // unless a new port took the address meanwhile.
        if key != 0 { portRegistry.forget(key) }
    }

    var delegate: (any RLPortDelegate)? { mutex.locked { _delegate } }

    func setDelegate(_ delegate: (any RLPortDelegate)?) {
        // The thread wrapper is released outside the lock.
        let unbound: RLThread? = mutex.locked {
            _delegate = delegate
            defer { delegateThread = nil }
            return delegateThread
        }
        withExtendedLifetime(unbound) {}
    }

    /// Binds the delegate to the calling thread if it is not bound to a
    /// thread that is still alive; false if it is bound to another one.
    private func delegateIsBoundHere() -> Bool {
        let me = RLThread.current
        let (bound, previous) = mutex.locked { () -> (Bool, RLThread?) in
            if let thread = delegateThread, thread == me { return (true, nil) }
            if let thread = delegateThread, !thread.isFinished { return (false, nil) }
            defer { delegateThread = me }
            return (true, delegateThread)
        }
        withExtendedLifetime(previous) {}
        return bound
    }

    // MARK: Run-loop records

    /// Records that the port is in `mode` of `loop`; false if it was
    /// recorded already.
    @discardableResult
    func recordScheduled(in loop: RLRunLoop, mode: RLRunLoop.Mode) -> Bool {
        mutex.locked {
            if invalidated { return true }
            let id = ObjectIdentifier(loop)
            var entry = scheduled[id] ?? (loop, [])
            guard entry.modes.insert(mode).inserted else { return false }
            scheduled[id] = entry
            return true
        }
    }

    /// Whether the port is recorded in `mode` of `loop`.
    func isScheduled(in loop: RLRunLoop, mode: RLRunLoop.Mode) -> Bool {
        mutex.locked { scheduled[ObjectIdentifier(loop)]?.modes.contains(mode) ?? false }
    }

    /// Forgets that the port is in `mode` of `loop`. The loop wrapper is
    /// released outside the lock.
    func forgetScheduled(in loop: RLRunLoop, mode: RLRunLoop.Mode) {
        let released: RLRunLoop? = mutex.locked {
            let id = ObjectIdentifier(loop)
            guard var entry = scheduled[id] else { return nil }
            entry.modes.remove(mode)
            if entry.modes.isEmpty {
                scheduled[id] = nil
                return entry.loop
            }
            scheduled[id] = entry
            return nil
        }
        withExtendedLifetime(released) {}
    }

    func setHandler(_ handler: (@Sendable (RLPortMessage) -> Void)?) { mutex.locked { self.handler = handler } }

    /// Messages a full ``RLPort/messages`` sequence dropped.
    private var dropped = 0
    var droppedMessageCount: Int { mutex.locked { dropped } }

    /// Hands one message to its receiver; `make` wraps the C message only
    /// when there is one (a port without receivers drops what it gets).
    func deliver(_ make: () -> RLPortMessage) {
        guard let receiver else { return }
        let message = make()
        switch receiver {
        case .stream(let continuation):
            if case .dropped = continuation.yield(message) { mutex.locked { dropped += 1 } }
        case .handler(let handler): handler(message)
        case .delegate(let delegate):
            precondition(delegateIsBoundHere(),
                         "RLPort: a message for the delegate of \(key) arrived on another thread than the one its "
                         + "messages were handled on (a delegate is bound to its port's run-loop thread)")
            delegate.handle(message)
        }
    }

    /// Who gets the next message, or nil to drop it.
    var receiver: Receiver? {
        mutex.locked {
            if let stream { return .stream(stream.continuation) }
            if let handler { return .handler(handler) }
            if let delegate = _delegate { return .delegate(delegate) }
            return nil
        }
    }

    /// Makes `continuation` the one that receives messages; the previous one
    /// ends. On an invalid port it ends at once.
    func installStream(_ continuation: AsyncStream<RLPortMessage>.Continuation) {
        let (id, previous, invalid) = mutex.locked { () -> (UInt64, AsyncStream<RLPortMessage>.Continuation?, Bool) in
            if invalidated { return (0, nil, true) }
            nextStreamID += 1
            let previous = stream?.continuation
            stream = (nextStreamID, continuation)
            return (nextStreamID, previous, false)
        }
        // finish() runs onTermination, which takes the lock: outside it.
        previous?.finish()
        if invalid {
            continuation.finish()
            return
        }
        continuation.onTermination = { [weak self] _ in self?.removeStream(id) }
    }

    private func removeStream(_ id: UInt64) {
        mutex.locked { if stream?.id == id { stream = nil } }
    }

    /// Stores the handler; true if the port is invalid already (the caller
    /// calls it at once).
    func setInvalidationHandler(_ handler: @escaping @Sendable (RLPort) -> Void) -> Bool {
        mutex.locked {
            if invalidated { return true }
            invalidationHandler = handler
            return false
        }
    }

    /// The port became invalid: what to end and whom to tell.
    func markInvalidated() -> (AsyncStream<RLPortMessage>.Continuation?, (@Sendable (RLPort) -> Void)?) {
        typealias Ends = (stream: AsyncStream<RLPortMessage>.Continuation?, handler: (@Sendable (RLPort) -> Void)?,
                          loops: [ObjectIdentifier: (loop: RLRunLoop, modes: Set<RLRunLoop.Mode>)])
        let ends = mutex.locked { () -> Ends in
            invalidated = true
            defer {
                stream = nil
                invalidationHandler = nil
                scheduled = [:]
            }
            return (stream?.continuation, invalidationHandler, scheduled)
        }
        // The loop wrappers go outside the lock (a last release calls C).
        withExtendedLifetime(ends.loops) {}
        return (ends.stream, ends.handler)
    }

    /// Whether this box is `ref`'s context (made by Swift for that port).
    func isContext(of ref: RLPortRef) -> Bool {
        var context = RLPortContext()
        return RLPortGetContext(ref, &context) && isInfo(context.info)
    }
}

/// C port (an `RLPortRef` or `RLSocketPortRef`) → its wrapper while one is
/// alive, and its box (none for a port made in C).
typealias PortRegistry = RLWrapperRegistry<RLPort, PortBox>
let portRegistry = PortRegistry()

private func rlPortCallout(_ port: RLPortRef?, _ message: RLPortMessageRef?, _ info: UnsafeMutableRawPointer?) {
    guard let message, let info else { return }
    PortBox.from(info).deliver { RLPortMessage(received: message) }
}

private func rlPortInvalidated(_ port: RLPortRef?, _ info: UnsafeMutableRawPointer?) {
    guard let port, let info else { return }
    let (stream, handler) = PortBox.from(info).markInvalidated()
    stream?.finish()
    rlTellInvalidated(handler, { RLPort.wrapper(for: port) })
}

/// Calls a port's invalidation handler, then what SwiftThreadsFoundation
/// does (posts `Port.didBecomeInvalidNotification`) if it is linked.
func rlTellInvalidated(_ handler: (@Sendable (RLPort) -> Void)?, _ wrapper: () -> RLPort) {
    let hooks = rlFoundationHooks
    guard handler != nil || hooks != nil else { return }
    let port = wrapper()
    handler?(port)
    hooks?.portDidBecomeInvalid(port)
}

// MARK: - SwiftThreadsFoundation

/// What SwiftThreadsFoundation adds to ports when it is linked into the
/// program. SwiftThreads does not depend on Foundation: it finds the
/// conforming type of that module by its name, at run time.
@_spi(Foundation)
public protocol RLFoundationHooksProtocol {
    /// The port became invalid (after its invalidation handler ran).
    static func portDidBecomeInvalid(_ port: RLPort)
}

/// SwiftThreadsFoundation's `RLFoundationHooks` (its mangled name), if the
/// program has that module. (A metatype of a protocol without requirements
/// on state: immutable, safe to share.)
nonisolated(unsafe) let rlFoundationHooks: (any RLFoundationHooksProtocol.Type)? =
    _typeByName("22SwiftThreadsFoundation17RLFoundationHooksO") as? any RLFoundationHooksProtocol.Type
