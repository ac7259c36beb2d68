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
