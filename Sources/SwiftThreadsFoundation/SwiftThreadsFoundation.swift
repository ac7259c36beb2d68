// Foundation's `Date` for every SwiftThreads API that takes or gives a date.
// SwiftThreads itself does not depend on Foundation: its dates are
// `RLAbsoluteTime`, seconds since 2001-01-01 UTC, the same number as
// `Date.timeIntervalSinceReferenceDate`, so each overload here converts
// without arithmetic. Import Foundation, SwiftThreads and this module
// together: the overloads differ by parameter type (`Date` against
// `Double`), so no call is ambiguous. A date-typed property is a `Date`
// here (`timer.fireDate`, as in Foundation): its `RLAbsoluteTime` form in
// SwiftThreads is `@_disfavoredOverload`, so where both are visible the
// `Date` one wins unless the context asks for a number, and code that
// imports only SwiftThreads sees the number alone.
//
// Linked into a program, this module also posts
// `Port.didBecomeInvalidNotification` for every RLPort that becomes
// invalid (SwiftThreads finds `RLFoundationHooks` by name at run time).
public import Foundation
@_spi(Foundation) public import SwiftThreads

// MARK: Conversions

extension Date {
    /// The date of an `RLAbsoluteTime` (seconds since 2001-01-01 UTC).
    public init(rlAbsoluteTime time: RLAbsoluteTime) {
        self.init(timeIntervalSinceReferenceDate: time)
    }

    /// This date as an `RLAbsoluteTime`.
    public var rlAbsoluteTime: RLAbsoluteTime { timeIntervalSinceReferenceDate }
}

extension RLTime {
    /// The current date (`Date()`), from the library's clock.
    public static var nowDate: Date { Date(rlAbsoluteTime: now) }
}

// MARK: Run loops and timers

extension RLRunLoop {
    /// ``RLRunLoop/run(until:)`` with a `Date` (`RunLoop.run(until:)`).
    public func run(until limitDate: Date) { run(until: limitDate.rlAbsoluteTime) }

    /// ``RLRunLoop/run(mode:before:)`` with a `Date` (`RunLoop.run(mode:before:)`).
    @discardableResult
    public func run(mode: Mode, before limitDate: Date) -> Bool {
        run(mode: mode, before: limitDate.rlAbsoluteTime)
    }

    /// The next timer's fire date in `mode` as a `Date`, nil when there is
    /// none (Foundation's `limitDate(forMode:)` without running anything).
    public func limitDate(forMode mode: Mode) -> Date? {
        nextTimerFireDate(in: mode).map(Date.init(rlAbsoluteTime:))
    }
}

extension RLTimer {
    /// A timer that first fires at `date` (`Timer(fire:interval:repeats:block:)`).
    public convenience init(fire date: Date, interval: TimeInterval, repeats: Bool,
                            block: @escaping @Sendable (RLTimer) -> Void) {
        self.init(fire: date.rlAbsoluteTime, interval: interval, repeats: repeats, block: block)
    }

    /// The next fire date as a `Date` (Foundation's `Timer.fireDate`);
    /// setting it moves the timer, earlier or later, from any thread. An
    /// invalidated timer reads the reference date (its `RLAbsoluteTime` 0).
    public var fireDate: Date {
        get { Date(rlAbsoluteTime: rlFireDate) }
        set { rlFireDate = newValue.rlAbsoluteTime }
    }

    /// ``fireDate`` under its earlier name.
    public var fireDateAsDate: Date {
        get { fireDate }
        set { fireDate = newValue }
    }
}

// MARK: Threads

extension RLThread {
    /// Sleeps the calling thread until `date` (`Thread.sleep(until:)`).
    public static func sleep(until date: Date) { sleep(until: date.rlAbsoluteTime) }
}

// MARK: Locks and conditions

extension RLLock {
    /// `NSLock.lock(before:)`: false if `date` passed first.
    public func lock(before limit: Date) -> Bool { lock(before: limit.rlAbsoluteTime) }
}

extension RLRecursiveLock {
    /// `NSRecursiveLock.lock(before:)`: false if `date` passed first.
    public func lock(before limit: Date) -> Bool { lock(before: limit.rlAbsoluteTime) }
}

extension RLCondition {
    /// Takes the condition's lock, giving up at `limit`.
    public func lock(before limit: Date) -> Bool { lock(before: limit.rlAbsoluteTime) }

    /// `NSCondition.wait(until:)`: false if `limit` passed without a signal.
    public func wait(until limit: Date) -> Bool { wait(until: limit.rlAbsoluteTime) }
}

extension RLConditionLock {
    /// `NSConditionLock.lock(before:)`.
    public func lock(before limit: Date) -> Bool { lock(before: limit.rlAbsoluteTime) }

    /// `NSConditionLock.lock(whenCondition:before:)`.
    public func lock(whenCondition condition: Int, before limit: Date) -> Bool {
        lock(whenCondition: condition, before: limit.rlAbsoluteTime)
    }
}

extension RLReadWriteLock {
    /// A shared lock, giving up at `limit`.
    public func readLock(before limit: Date) -> Bool { readLock(before: limit.rlAbsoluteTime) }

    /// An exclusive lock, giving up at `limit`.
    public func writeLock(before limit: Date) -> Bool { writeLock(before: limit.rlAbsoluteTime) }
}

extension RLDistributedLock {
    /// When the current lock file was created, by any holder, as a `Date`
    /// (`NSDistributedLock.lockDate`); nil when nobody holds the lock.
    public var lockDate: Date? { rlLockDate.map(Date.init(rlAbsoluteTime:)) }

    /// ``lockDate`` under its earlier name.
    public var lockDateAsDate: Date? { lockDate }
}

extension RLDistributedLock.Owner {
    /// When the holder took the lock, by its clock, as a `Date`.
    public var lockDate: Date { Date(rlAbsoluteTime: rlLockDate) }
}

// MARK: Quality of service

extension RLQualityOfService {
    /// The class of a Foundation `QualityOfService` (same cases).
    public init(_ qualityOfService: QualityOfService) {
        switch qualityOfService {
        case .userInteractive: self = .userInteractive
        case .userInitiated: self = .userInitiated
        case .utility: self = .utility
        case .background: self = .background
        default: self = .default
        }
    }
}

extension QualityOfService {
    /// The Foundation value of an ``RLQualityOfService`` (same cases).
    public init(_ qualityOfService: RLQualityOfService) {
        switch qualityOfService {
        case .userInteractive: self = .userInteractive
        case .userInitiated: self = .userInitiated
        case .utility: self = .utility
        case .background: self = .background
        case .default: self = .default
        }
    }
}

// MARK: Ports

extension RLPort {
    /// ``RLPort/send(before:components:from:reserved:)`` with a `Date`
    /// (`Port.send(before:components:from:reserved:)`). Disfavored against
    /// the `NSMutableArray` form, which takes the same components, so that
    /// `components: nil` is not ambiguous.
    @_disfavoredOverload
    public func send(before limitDate: Date, components: [RLPortComponent]?, from receivePort: RLPort?,
                     reserved headerSpaceReserved: Int) -> Bool {
        send(before: limitDate.rlAbsoluteTime, components: components, from: receivePort,
             reserved: headerSpaceReserved)
    }

    /// ``RLPort/send(before:msgid:components:from:reserved:)`` with a `Date`
    /// (`Port.send(before:msgid:components:from:reserved:)`); disfavored as
    /// the one above.
    @_disfavoredOverload
    public func send(before limitDate: Date, msgid msgID: Int, components: [RLPortComponent]?,
                     from receivePort: RLPort?, reserved headerSpaceReserved: Int) -> Bool {
        send(before: limitDate.rlAbsoluteTime, msgid: msgID, components: components, from: receivePort,
             reserved: headerSpaceReserved)
    }
}

extension RLPort {
    /// Foundation's `Port.didBecomeInvalidNotification`: posted (object:
    /// the port, on the thread that invalidated it, after the port's
    /// invalidation handler) when an RLPort or RLSocketPort becomes invalid
    /// — by `invalidate()`, by its last reference going, or for a remote
    /// socket port by its peer going.
    public static var didBecomeInvalidNotification: NSNotification.Name { Port.didBecomeInvalidNotification }

    /// `Port.send(before:components:from:reserved:)` with Foundation's
    /// components: `Data` / `NSData` and ports (`RLPort`, or an
    /// ``RLPortComponent``).
    ///
    /// - Returns: false, with nothing sent and `RLError.last()` cleared, if
    ///   a component is of another kind; else as
    ///   ``RLPort/send(before:components:from:reserved:)``.
    public func send(before limitDate: Date, components: NSMutableArray?, from receivePort: RLPort?,
                     reserved headerSpaceReserved: Int) -> Bool {
        send(before: limitDate, msgid: 0, components: components, from: receivePort, reserved: headerSpaceReserved)
    }

    /// `Port.send(before:msgid:components:from:reserved:)` with
    /// Foundation's components (see ``send(before:components:from:reserved:)``).
    public func send(before limitDate: Date, msgid msgID: Int, components: NSMutableArray?,
                     from receivePort: RLPort?, reserved headerSpaceReserved: Int) -> Bool {
        guard let parts = RLPortComponent.components(of: components) else { return false }
        return send(before: limitDate.rlAbsoluteTime, msgid: msgID, components: parts, from: receivePort,
                    reserved: headerSpaceReserved)
    }
}

extension RLPortComponent {
    /// The components of a Foundation component array; nil for an element
    /// that is neither data nor a port.
    static func components(of array: NSArray?) -> [RLPortComponent]? {
        guard let array else { return [] }
        var parts: [RLPortComponent] = []
        for element in array {
            switch element {
            case let data as Data: parts.append(.bytes(data))
            case let data as NSData: parts.append(.bytes(Data(referencing: data)))
            case let port as RLPort: parts.append(.port(port))
            case let part as RLPortComponent: parts.append(part)
            default:
                // The C library never saw it: no error of its is left to mislead.
                RLError.clear()
                return nil
            }
        }
        return parts
    }
}

/// A component seen as `AnyHashable` is its `Data` or its port, as the
/// components of a Foundation `PortMessage` are
/// (`message.components as? [AnyHashable] == [data as NSData]`).
extension RLPortComponent: _HasCustomAnyHashableRepresentation {
    public func _toCustomAnyHashable() -> AnyHashable? {
        switch self {
        case .data(let data): return AnyHashable(Data(data))
        case .port(let port): return AnyHashable(port)
        }
    }
}

/// Found by SwiftThreads at run time (by its mangled name): what this
/// module adds to ports.
@_spi(Foundation)
public enum RLFoundationHooks: RLFoundationHooksProtocol {
    public static func portDidBecomeInvalid(_ port: RLPort) {
        NotificationCenter.default.post(name: Port.didBecomeInvalidNotification, object: port)
    }
}

extension RLPortMessage {
    /// ``RLPortMessage/send(before:)`` with a `Date` (`PortMessage.send(before:)`).
    public func send(before date: Date) -> Bool { send(before: date.rlAbsoluteTime) }
}

extension RLSocketPort {
    /// `SocketPort(protocolFamily:socketType:protocol:address:)` with the
    /// socket address as `Data`.
    public convenience init?(protocolFamily family: Int32, socketType type: Int32, protocol: Int32, address: Data) {
        self.init(protocolFamily: family, socketType: type, protocol: `protocol`, address: [UInt8](address))
    }

    /// `SocketPort(remoteWithProtocolFamily:socketType:protocol:address:)`
    /// with the socket address as `Data`.
    public convenience init?(remoteWithProtocolFamily family: Int32, socketType type: Int32, protocol: Int32,
                             address: Data) {
        self.init(remoteWithProtocolFamily: family, socketType: type, protocol: `protocol`, address: [UInt8](address))
    }

    /// ``RLSocketPort/address`` as `Data` (Foundation's `address`).
    public var addressData: Data { Data(address) }
}
