// Foundation's `Date` for every SwiftThreads API that takes or gives a date.
// SwiftThreads itself does not depend on Foundation: its dates are
// `RLAbsoluteTime`, seconds since 2001-01-01 UTC, the same number as
// `Date.timeIntervalSinceReferenceDate`, so each overload here converts
// without arithmetic. Import Foundation, SwiftThreads and this module
// together: the overloads differ by parameter type (`Date` against
// `Double`), so no call is ambiguous.
import Foundation
public import SwiftThreads

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

    /// ``RLTimer/fireDate`` as a `Date` (Foundation's `Timer.fireDate`);
    /// setting it moves the timer.
    public var fireDateAsDate: Date {
        get { Date(rlAbsoluteTime: fireDate) }
        set { fireDate = newValue.rlAbsoluteTime }
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
    /// ``RLDistributedLock/lockDate`` as a `Date` (`NSDistributedLock.lockDate`).
    public var lockDateAsDate: Date? { lockDate.map(Date.init(rlAbsoluteTime:)) }
}

// MARK: Ports

extension RLPort {
    /// ``RLPort/send(before:components:from:reserved:)`` with a `Date`
    /// (`Port.send(before:components:from:reserved:)`).
    public func send(before limitDate: Date, components: [RLPortComponent]?, from receivePort: RLPort?,
                     reserved headerSpaceReserved: Int) -> Bool {
        send(before: limitDate.rlAbsoluteTime, components: components, from: receivePort,
             reserved: headerSpaceReserved)
    }

    /// ``RLPort/send(before:msgid:components:from:reserved:)`` with a `Date`
    /// (`Port.send(before:msgid:components:from:reserved:)`).
    public func send(before limitDate: Date, msgid msgID: Int, components: [RLPortComponent]?,
                     from receivePort: RLPort?, reserved headerSpaceReserved: Int) -> Bool {
        send(before: limitDate.rlAbsoluteTime, msgid: msgID, components: components, from: receivePort,
             reserved: headerSpaceReserved)
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
