// RLMessageIDCompat.swift — the `Int32` (CoreFoundation's `SInt32`) forms
// of RLMessagePort's calls, from before every msgid was an `RLMessageID`
// (`UInt32`, Foundation's `PortMessage.msgid`). Each passes the same 32
// bits (`RLMessageID(bitPattern:)`) to the `RLMessageID` form. They are
// deprecated and disfavoured: a literal msgid picks the `RLMessageID` form.

extension RLMessagePort {
    /// ``init(local:handler:)`` with a handler that takes CoreFoundation's
    /// `Int32` msgid.
    @available(*, deprecated, message: "the handler's msgid is an RLMessageID (UInt32); Int32(bitPattern:) gives CF's SInt32")
    @_disfavoredOverload
    public convenience init(local name: String,
                            handler: @escaping @Sendable (_ msgid: Int32, _ data: [UInt8]?) -> [UInt8]?) throws(RLError) {
        try self.init(local: name) { (msgid: RLMessageID, data: [UInt8]?) in handler(Int32(bitPattern: msgid), data) }
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    @_disfavoredOverload
    public func sendRequest(msgid: Int32, data: [UInt8]?, sendTimeout: RLTimeInterval,
                            receiveTimeout: RLTimeInterval) throws(RequestError) -> [UInt8]? {
        try sendRequest(msgid: RLMessageID(bitPattern: msgid), data: data, sendTimeout: sendTimeout,
                        receiveTimeout: receiveTimeout)
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    @_disfavoredOverload
    public func sendRequest(msgid: Int32, data: [UInt8]? = nil, timeout: RLTimeInterval) throws(RequestError) -> [UInt8]? {
        try sendRequest(msgid: RLMessageID(bitPattern: msgid), data: data, timeout: timeout)
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    @_disfavoredOverload
    public func sendRequest(msgid: Int32, data: [UInt8]?, sendTimeout: Duration,
                            receiveTimeout: Duration) throws(RequestError) -> [UInt8]? {
        try sendRequest(msgid: RLMessageID(bitPattern: msgid), data: data, sendTimeout: sendTimeout,
                        receiveTimeout: receiveTimeout)
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @available(*, noasync, message: "blocks the thread until the reply; use try await request(msgid:data:timeout:)")
    @_disfavoredOverload
    public func sendRequest(msgid: Int32, data: [UInt8]? = nil, timeout: Duration) throws(RequestError) -> [UInt8]? {
        try sendRequest(msgid: RLMessageID(bitPattern: msgid), data: data, timeout: timeout)
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @_disfavoredOverload
    public func send(msgid: Int32, data: [UInt8]? = nil, timeout: RLTimeInterval) throws(RequestError) {
        try send(msgid: RLMessageID(bitPattern: msgid), data: data, timeout: timeout)
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @_disfavoredOverload
    public func send(msgid: Int32, data: [UInt8]? = nil, timeout: Duration) throws(RequestError) {
        try send(msgid: RLMessageID(bitPattern: msgid), data: data, timeout: timeout)
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @_disfavoredOverload
    public func request(msgid: Int32, data: [UInt8]? = nil,
                        timeout: RLTimeInterval) async throws(RequestError) -> [UInt8]? {
        try await request(msgid: RLMessageID(bitPattern: msgid), data: data, timeout: timeout)
    }

    @available(*, deprecated, message: "msgid is an RLMessageID (UInt32): pass RLMessageID(bitPattern: msgid)")
    @_disfavoredOverload
    public func request(msgid: Int32, data: [UInt8]? = nil,
                        timeout: Duration) async throws(RequestError) -> [UInt8]? {
        try await request(msgid: RLMessageID(bitPattern: msgid), data: data, timeout: timeout)
    }

    @available(*, deprecated, renamed: "request(msgid:data:timeout:)")
    @_disfavoredOverload
    public func sendRequest(msgid: Int32, data: [UInt8]? = nil,
                            timeout: RLTimeInterval) async throws(RequestError) -> [UInt8]? {
        try await request(msgid: RLMessageID(bitPattern: msgid), data: data, timeout: timeout)
    }
}
