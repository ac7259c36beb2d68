// RLDurations.swift — `Duration` forms of the calls that take an interval
// as `RLTimeInterval` (Double seconds, Foundation's `TimeInterval`), so
// that Swift code can write every interval as a `Duration`; points in
// time stay `RLAbsoluteTime` (``RLTime/now``, ``RLTime/after(_:)``).
// Each converts to seconds and calls the Double form: same rules, same
// errors.

extension RLTimer {
    /// ``init(fire:interval:repeats:block:)`` with the repeat interval as a
    /// `Duration`.
    public convenience init(fire date: RLAbsoluteTime, interval: Duration, repeats: Bool,
                            block: @escaping @Sendable (RLTimer) -> Void) {
        self.init(fire: date, interval: interval.rlSeconds, repeats: repeats, block: block)
    }

    /// ``init(timeInterval:repeats:block:)`` with a `Duration`: first fires
    /// `interval` from now.
    public convenience init(timeInterval interval: Duration, repeats: Bool,
                            block: @escaping @Sendable (RLTimer) -> Void) {
        self.init(timeInterval: interval.rlSeconds, repeats: repeats, block: block)
    }

    /// ``scheduledTimer(withTimeInterval:repeats:block:)-(RLTimeInterval,_,_)``
    /// with a `Duration`.
    @discardableResult
    public static func scheduledTimer(withTimeInterval interval: Duration, repeats: Bool,
                                      block: @escaping @Sendable (RLTimer) -> Void) -> RLTimer {
        scheduledTimer(withTimeInterval: interval.rlSeconds, repeats: repeats, block: block)
    }

    /// ``timeInterval`` as a `Duration` (zero for a non-repeating timer).
    public var interval: Duration { .seconds(timeInterval) }

    /// Sets ``tolerance`` from a `Duration`.
    public func setTolerance(_ tolerance: Duration) {
        self.tolerance = tolerance.rlSeconds
    }
}

extension RLMessagePort {
    /// ``setStallTimeout(_:)-(RLTimeInterval)`` with a `Duration`.
    public func setStallTimeout(_ timeout: Duration) throws(RLError) {
        try setStallTimeout(timeout.rlSeconds)
    }

    /// ``sendRequest(msgid:data:sendTimeout:receiveTimeout:)-(RLMessageID,_,RLTimeInterval,RLTimeInterval)``
    /// with `Duration`s. Blocks the calling thread: in async code use
    /// ``request(msgid:data:timeout:)-(RLMessageID,_,Duration)``.
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    public func sendRequest(msgid: RLMessageID, data: [UInt8]?, sendTimeout: Duration,
                            receiveTimeout: Duration) throws(RequestError) -> [UInt8]? {
        try sendRequest(msgid: msgid, data: data, sendTimeout: sendTimeout.rlSeconds,
                        receiveTimeout: receiveTimeout.rlSeconds)
    }

    /// ``sendRequest(msgid:data:timeout:)-6u2nv`` with a
    /// `Duration`.
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    public func sendRequest(msgid: RLMessageID, data: [UInt8]? = nil, timeout: Duration) throws(RequestError) -> [UInt8]? {
        try sendRequest(msgid: msgid, data: data, sendTimeout: timeout.rlSeconds, receiveTimeout: timeout.rlSeconds)
    }

    /// ``send(msgid:data:timeout:)-(RLMessageID,_,RLTimeInterval)`` with a `Duration`.
    public func send(msgid: RLMessageID, data: [UInt8]? = nil, timeout: Duration) throws(RequestError) {
        try send(msgid: msgid, data: data, timeout: timeout.rlSeconds)
    }
}

extension RLSocket {
    /// ``connect(to:timeout:)-(_,RLTimeInterval)`` with a `Duration`, with the
    /// same meaning: positive waits at most that long, `.zero` is a plain
    /// blocking connect, negative starts the connect in the background.
    public func connect(to address: Address, timeout: Duration) throws(RLError) {
        try connect(to: address, timeout: timeout.rlSeconds)
    }

    /// ``send(_:to:timeout:)-(_,_,RLTimeInterval)`` with a `Duration`:
    /// positive bounds the whole send; otherwise the call blocks until
    /// everything is sent.
    public func send(_ data: RLData, to address: Address? = nil, timeout: Duration) throws(RLError) {
        try send(data, to: address, timeout: timeout.rlSeconds)
    }

    /// ``send(bytes:to:timeout:)-(_,_,RLTimeInterval)`` with a `Duration`.
    public func send<Bytes: Sequence>(bytes: Bytes, to address: Address? = nil,
                                      timeout: Duration) throws(RLError) where Bytes.Element == UInt8 {
        try send(bytes: bytes, to: address, timeout: timeout.rlSeconds)
    }
}

extension RLSocketPort {
    /// ``setStallTimeout(_:)-(RLTimeInterval)`` with a `Duration`.
    public func setStallTimeout(_ timeout: Duration) throws(RLError) {
        try setStallTimeout(timeout.rlSeconds)
    }
}

extension RLReadWriteLock {
    /// Waits at most `timeout` to share the lock
    /// (``readLock(before:)`` at ``RLTime/after(_:)``).
    @available(*, noasync, message: "blocks the thread; use withReadLock(_:) or withWriteLock(_:)")
    public func readLock(timeout: Duration) -> Bool { readLock(before: RLTime.after(timeout)) }

    /// Waits at most `timeout` to hold the lock alone
    /// (``writeLock(before:)`` at ``RLTime/after(_:)``).
    @available(*, noasync, message: "blocks the thread; use withReadLock(_:) or withWriteLock(_:)")
    public func writeLock(timeout: Duration) -> Bool { writeLock(before: RLTime.after(timeout)) }
}

extension RLCondition {
    /// Waits at most `timeout` for the condition's lock
    /// (``lock(before:)`` at ``RLTime/after(_:)``).
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(timeout: Duration) -> Bool { lock(before: RLTime.after(timeout)) }
}

extension RLConditionLock {
    /// Waits at most `timeout` for the lock, whatever its condition
    /// (``lock(before:)`` at ``RLTime/after(_:)``).
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(timeout: Duration) -> Bool { lock(before: RLTime.after(timeout)) }
}
