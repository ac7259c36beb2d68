internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

// Byte streams: Foundation's `Stream`, `InputStream` and `OutputStream`
// (and `StreamDelegate`) over the C `RLReadStreamRef` / `RLWriteStreamRef`
// (RLStream.h, CoreFoundation's CFReadStream / CFWriteStream), for code
// ported from Foundation. The async sequences for new code are in
// RLStreamSequences.swift.

/// Receives a stream's events on the thread of the run loop it is
/// scheduled on: Foundation's `StreamDelegate`.
///
/// The stream holds its delegate weakly, as Foundation does. Implementing
/// the method is optional (it does nothing by default).
public protocol RLStreamDelegate: AnyObject {
    func stream(_ aStream: RLStream, handle eventCode: RLStream.Event)
}

extension RLStreamDelegate {
    public func stream(_ aStream: RLStream, handle eventCode: RLStream.Event) {}
}

/// Why a stream failed: CoreFoundation's `CFStreamError` (a domain and a
/// code), as a Swift error. Foundation reports it as an `NSError` in
/// `NSPOSIXErrorDomain` (or `kCFErrorDomainCFNetwork` for name lookups).
public struct RLStreamError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of ``code`` (CoreFoundation's numbers).
    public struct Domain: RawRepresentable, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// kRLStreamErrorDomainCustom
        public static let custom = Domain(rawValue: -1)
        /// kRLStreamErrorDomainPOSIX: ``RLStreamError/code`` is an `errno`
        /// value.
        public static let posix = Domain(rawValue: 1)
        /// kRLStreamErrorDomainNetDB: ``RLStreamError/code`` is a
        /// `getaddrinfo` `EAI_*` code (the host name could not be resolved).
        public static let netDB = Domain(rawValue: 12)
    }

    public let domain: Domain
    public let code: Int32

    public init(domain: Domain, code: Int32) {
        self.domain = domain
        self.code = code
    }

    init(_ error: CRunLoop.RLStreamError) {
        self.init(domain: Domain(rawValue: error.domain), code: error.error)
    }

    /// `strerror` or `gai_strerror` of the code.
    public var description: String {
        switch domain {
        case .posix: return "\(String(cString: strerror(code))) (errno \(code))"
        case .netDB: return "\(String(cString: gai_strerror(code))) (getaddrinfo \(code))"
        default: return "stream error \(code) in domain \(domain.rawValue)"
        }
    }
}

/// A byte stream: Foundation's `Stream`, the common part of
/// ``RLInputStream`` and ``RLOutputStream``.
///
/// The life of a stream, as in Foundation: set a ``delegate``,
/// ``schedule(in:forMode:)`` it on a run loop, ``open()`` it; the delegate's
/// `stream(_:handle:)` then runs on that loop's thread with each
/// ``Event``; ``close()`` it and ``remove(from:forMode:)`` it when done.
/// Or poll it (``RLInputStream/hasBytesAvailable``,
/// ``RLOutputStream/hasSpaceAvailable``) without a run loop.
///
/// `.hasBytesAvailable` (`.hasSpaceAvailable`) comes once and then again
/// only after the stream was read (written), as with Foundation: read in
/// the handler. Reads and writes block when nothing can move, as
/// Foundation's do; the events (or the polls) say when they will not.
///
/// Differences from Foundation, on purpose:
/// - Scheduling a socket stream never blocks the loop: connecting is
///   non-blocking and host names are resolved off the loop's thread.
/// - A stream is not `Sendable` (as Foundation's are not): use it from one
///   thread at a time — normally the thread of the run loop it is
///   scheduled on. The async sequences (``events(on:forMode:)``,
///   ``RLInputStream/chunks(on:forMode:maxLength:)``) hand its events and
///   bytes to `async` code safely.
/// - The classes cannot be subclassed, and a stream without a delegate is
///   its own delegate in Foundation only: here its events go nowhere.
public class RLStream: CustomStringConvertible {
    /// Foundation's `Stream.Status` (CoreFoundation's values).
    public enum Status: UInt, Sendable {
        case notOpen = 0
        /// A socket stream is still resolving its host or connecting.
        case opening = 1
        case open = 2
        case reading = 3
        case writing = 4
        /// No further bytes can be read (written).
        case atEnd = 5
        case closed = 6
        /// The stream failed: see ``RLStream/streamError``.
        case error = 7
    }

    /// Foundation's `Stream.Event`, with its names (CoreFoundation's
    /// values: `hasSpaceAvailable` is `kRLStreamEventCanAcceptBytes`).
    public struct Event: OptionSet, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// The stream opened (a socket stream: it connected).
        public static let openCompleted = Event(rawValue: 1)
        /// A read will not block.
        public static let hasBytesAvailable = Event(rawValue: 2)
        /// A write will not block.
        public static let hasSpaceAvailable = Event(rawValue: 4)
        /// The stream failed: see ``RLStream/streamError``.
        public static let errorOccurred = Event(rawValue: 8)
        /// The end of the stream was reached.
        public static let endEncountered = Event(rawValue: 16)

        public var description: String {
            let names: [(Event, String)] = [(.openCompleted, "openCompleted"), (.hasBytesAvailable, "hasBytesAvailable"),
                                            (.hasSpaceAvailable, "hasSpaceAvailable"), (.errorOccurred, "errorOccurred"),
                                            (.endEncountered, "endEncountered")]
            let parts = names.filter { contains($0.0) }.map { $0.1 }
            return parts.isEmpty ? "[]" : parts.joined(separator: "|")
        }
    }

    /// Foundation's `Stream.PropertyKey`: the properties of the C streams
    /// (`RLStream.h`). A key made from a C property name
    /// (`"kRLStreamPropertyAppendToFile"`) works too.
    public struct PropertyKey: RawRepresentable, Sendable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }

        /// What was written to a memory stream (``RLOutputStream/init(toMemory:)``),
        /// as an ``RLData``; read-only.
        public static let dataWrittenToMemoryStreamKey = PropertyKey("NSStreamDataWrittenToMemoryStreamKey")
        /// A file stream's position in bytes, as an `Int` (Foundation's
        /// `fileCurrentOffsetKey`): set before ``RLStream/open()`` to start
        /// there, or on an open stream to seek. None before `open()` unless
        /// set, and none for an output stream that appends.
        public static let fileCurrentOffsetKey = PropertyKey("NSStreamFileCurrentOffsetKey")
        /// Whether a file output stream appends, as a `Bool`; set before
        /// ``RLStream/open()`` (``RLOutputStream/init(toFileAtPath:append:)``
        /// sets it).
        public static let appendToFileKey = PropertyKey("kRLStreamPropertyAppendToFile")
        /// A socket stream's socket, as an `Int32`, once it is connected
        /// (CoreFoundation's `kCFStreamPropertySocketNativeHandle`); read-only.
        public static let socketNativeHandleKey = PropertyKey("kRLStreamPropertySocketNativeHandle")
        /// Whether the socket is closed when both streams of the pair are
        /// gone, as a `Bool` (CoreFoundation's
        /// `kCFStreamPropertyShouldCloseNativeSocket`): false for
        /// ``RLStream/streams(withSocket:)``, true for a pair to a host.
        public static let shouldCloseNativeSocketKey = PropertyKey("kRLStreamPropertyShouldCloseNativeSocket")

        /// The C property name.
        var cName: String {
            switch self {
            case .dataWrittenToMemoryStreamKey: String(cString: kRLStreamPropertyDataWritten)
            case .fileCurrentOffsetKey: String(cString: kRLStreamPropertyFileCurrentOffset)
            default: rawValue
            }
        }
    }

    /// The C stream (one reference, shared with the async sequences).
    let stream: CStream
    /// Delegate, sequences and schedules; the C stream's client context.
    let box: StreamBox

    init(adopting stream: CStream) {
        self.stream = stream
        self.box = StreamBox()
        box.owner = self
        stream.setClient(box)
    }

    // MARK: Opening and closing

    /// Opens the stream (Foundation's `open()`). A socket stream starts
    /// connecting: `.openCompleted` (or `.errorOccurred`) follows. A stream
    /// that cannot be opened (a file that does not exist) has status
    /// ``Status/error`` and a ``streamError`` afterwards; opening twice
    /// changes nothing.
    public func open() { _ = stream.open() }

    /// Closes the stream; no event is delivered afterwards. Closing a
    /// socket's output stream shuts its sending side down (the peer reads
    /// the end).
    public func close() { _ = stream.close() }

    // MARK: State

    /// Receives the stream's events (held weakly, as in Foundation).
    public var delegate: (any RLStreamDelegate)? {
        get { box.delegate }
        set { box.delegate = newValue }
    }

    public var streamStatus: Status { Status(rawValue: stream.status) ?? .error }

    /// Why the stream failed, or nil.
    public var streamError: RLStreamError? { stream.error }

    /// The value of `key`, or nil (Foundation's `property(forKey:)`): a
    /// `Bool`, an `Int`, an ``RLData`` or, for
    /// ``PropertyKey/socketNativeHandleKey``, an `Int32`. Nil when this
    /// kind of stream has no such property or it has no value now
    /// (`RLError.last()` says which).
    public func property(forKey key: PropertyKey) -> (any Sendable)? {
        guard let value = stream.copyProperty(key.cName) else { return nil }
        defer { RLRelease(value) }
        switch String(cString: RLGetTypeName(value)) {
        case "RLBoolean":
            return RLBooleanGetValue(OpaquePointer(value))
        case "RLNumber":
            var number: Int64 = 0
            _ = RLNumberGetValue(OpaquePointer(value), .sInt64Type, &number)
            return Int(number)
        case "RLData":
            let data = RLData(retaining: OpaquePointer(value))
            guard key == .socketNativeHandleKey, data.count == MemoryLayout<Int32>.size else { return data }
            return data.withUnsafeBytes { $0.loadUnaligned(as: Int32.self) }
        default:
            return nil
        }
    }

    /// Sets the property `key` (Foundation's `setProperty(_:forKey:)`): a
    /// `Bool` or an integer, as the property takes. True if the stream took
    /// it; false if not — an unknown key, a value of the wrong type, a
    /// setting the stream's state forbids (`RLError.last()` says which) —
    /// and nothing changed.
    @discardableResult
    public func setProperty(_ property: Any?, forKey key: PropertyKey) -> Bool {
        switch property {
        case let flag as Bool:
            return stream.setProperty(key.cName, UnsafeRawPointer(flag ? kRLBooleanTrue : kRLBooleanFalse))
        case let integer as any BinaryInteger:
            guard var wide = Int64(exactly: integer), let number = RLNumberCreate(nil, .sInt64Type, &wide) else {
                return stream.setProperty(key.cName, nil)
            }
            defer { RLRelease(UnsafeRawPointer(number)) }
            return stream.setProperty(key.cName, UnsafeRawPointer(number))
        case let data as RLData:
            return stream.setProperty(key.cName, UnsafeRawPointer(data.ref))
        default:
            return stream.setProperty(key.cName, nil) // refused: NULL value
        }
    }

    // MARK: Run loops

    /// Delivers the stream's events on `aRunLoop` while it runs in `mode`
    /// (Foundation's `schedule(in:forMode:)`). A stream may be scheduled in
    /// several modes and loops; scheduling it again where it is changes
    /// nothing. The run loop is kept alive while the stream is scheduled.
    public func schedule(in aRunLoop: RLRunLoop, forMode mode: RLRunLoop.Mode) {
        box.schedule(stream, on: aRunLoop, mode: mode, bySequence: false)
    }

    /// Stops delivering events on `aRunLoop` in `mode` (Foundation's
    /// `remove(from:forMode:)`). While an async sequence of the stream uses
    /// that loop and mode, the stream stays scheduled there until it ends.
    public func remove(from aRunLoop: RLRunLoop, forMode mode: RLRunLoop.Mode) {
        box.unschedule(stream, from: aRunLoop, mode: mode, bySequence: false)
    }

    public var description: String {
        rlCopyDescription(UnsafeRawPointer(stream.pointer)) ?? (stream.isInput ? "RLInputStream" : "RLOutputStream")
    }

    // MARK: Making streams (Foundation's class methods)

    /// Makes a pair of streams over one TCP connection to `hostname`:`port`
    /// (Foundation's `getStreamsToHost(withName:port:inputStream:outputStream:)`).
    ///
    /// Nothing happens until either stream is opened: it then resolves the
    /// name (off the loop's thread; a numeric address needs no lookup) and
    /// connects without blocking; `.openCompleted` or `.errorOccurred`
    /// follows. The connection is closed when both streams are closed or
    /// gone. Either pointer may be nil. On bad input (an empty name, a port
    /// outside 0…65535) both results are nil.
    public class func getStreamsToHost(withName hostname: String, port: Int,
                                       inputStream: UnsafeMutablePointer<RLInputStream?>?,
                                       outputStream: UnsafeMutablePointer<RLOutputStream?>?) {
        inputStream?.pointee = nil
        outputStream?.pointee = nil
        guard let port = UInt32(exactly: port) else { return }
        let (read, write) = makePair(input: inputStream != nil, output: outputStream != nil) { readOut, writeOut in
            hostname.withCString { RLStreamCreatePairWithSocketToHost(nil, $0, port, readOut, writeOut) }
        }
        inputStream?.pointee = read
        outputStream?.pointee = write
    }

    /// Makes a pair of streams joined in memory: what is written to the
    /// output is read from the input, at most `bufferSize` bytes in flight
    /// (Foundation's `getBoundStreams(withBufferSize:inputStream:outputStream:)`).
    /// Closing the output makes the input reach its end after the buffered
    /// bytes. Both results are nil for a size below 1.
    public class func getBoundStreams(withBufferSize bufferSize: Int,
                                      inputStream: UnsafeMutablePointer<RLInputStream?>?,
                                      outputStream: UnsafeMutablePointer<RLOutputStream?>?) {
        inputStream?.pointee = nil
        outputStream?.pointee = nil
        guard inputStream != nil, outputStream != nil, let size = try? boundStreams(bufferSize: bufferSize) else {
            return
        }
        inputStream?.pointee = size.input
        outputStream?.pointee = size.output
    }

    // MARK: Making streams (Swift)

    /// ``getStreamsToHost(withName:port:inputStream:outputStream:)`` as a
    /// throwing call returning both streams.
    ///
    /// - Throws: `RLError` `.invalidArgument` for an empty name or a port
    ///   outside 0…65535. Resolution and connection errors come later,
    ///   through the streams.
    public static func streamsToHost(name hostname: String,
                                     port: Int) throws(RLError) -> (input: RLInputStream, output: RLOutputStream) {
        guard let port = UInt32(exactly: port) else {
            throw RLError(code: .invalidArgument, message: "RLStream.streamsToHost: port \(port) is out of range")
        }
        let (read, write) = makePair(input: true, output: true) { readOut, writeOut in
            hostname.withCString { RLStreamCreatePairWithSocketToHost(nil, $0, port, readOut, writeOut) }
        }
        guard let read, let write else { throw RLError.last() }
        return (read, write)
    }

    /// ``getBoundStreams(withBufferSize:inputStream:outputStream:)`` as a
    /// throwing call returning both streams.
    ///
    /// - Throws: `RLError` `.invalidArgument` for a size below 1.
    public static func boundStreams(bufferSize: Int) throws(RLError) -> (input: RLInputStream, output: RLOutputStream) {
        let (read, write) = makePair(input: true, output: true) { readOut, writeOut in
            RLStreamCreateBoundPair(nil, readOut, writeOut, RLIndex(bufferSize))
        }
        guard let read, let write else { throw RLError.last() }
        return (read, write)
    }

    /// Streams over a connected socket you own (CoreFoundation's
    /// `CFStreamCreatePairWithSocket`): the socket is made non-blocking and
    /// never closed by the streams (close it after both are closed);
    /// closing the output stream shuts its sending side down. An accepted
    /// connection of an ``RLSocket`` server is one.
    ///
    /// - Throws: `RLError` if `nativeHandle` is not a socket.
    public static func streams(withSocket nativeHandle: Int32) throws(RLError)
        -> (input: RLInputStream, output: RLOutputStream) {
        let (read, write) = makePair(input: true, output: true) { readOut, writeOut in
            RLStreamCreatePairWithSocket(nil, nativeHandle, readOut, writeOut)
        }
        guard let read, let write else { throw RLError.last() }
        return (read, write)
    }

    private static func makePair(
        input: Bool, output: Bool,
        _ create: (UnsafeMutablePointer<RLReadStreamRef?>?, UnsafeMutablePointer<RLWriteStreamRef?>?) -> Bool
    ) -> (RLInputStream?, RLOutputStream?) {
        var read: RLReadStreamRef?
        var write: RLWriteStreamRef?
        let ok = withUnsafeMutablePointer(to: &read) { readOut in
            withUnsafeMutablePointer(to: &write) { writeOut in
                create(input ? readOut : nil, output ? writeOut : nil)
            }
        }
        guard ok else { return (nil, nil) }
        return (read.map { RLInputStream(adopting: CStream(input: $0)) },
                write.map { RLOutputStream(adopting: CStream(output: $0)) })
    }
}

@available(*, unavailable, message: "a stream is used from one thread at a time; hand its bytes or events to other code through its async sequences")
extension RLStream: Sendable {}

/// A stream to read bytes from: Foundation's `InputStream` over
/// `RLReadStreamRef`, made from bytes in memory, a file, a bound pair or a
/// socket.
public final class RLInputStream: RLStream {
    /// Reads a copy of `data` (Foundation's `init(data:)`).
    public init(data: RLData) {
        let created = data.withUnsafeBytes { raw in
            RLReadStreamCreateWithBytes(nil, raw.bindMemory(to: UInt8.self).baseAddress, RLIndex(raw.count))
        }
        guard let created else { fatalError("RLInputStream: \(RLError.last())") }
        super.init(adopting: CStream(input: created))
    }

    /// Reads the file at `path`, opened by ``RLStream/open()`` (Foundation's
    /// `init?(fileAtPath:)`); nil for an empty path. A file that cannot be
    /// opened makes `open()` fail with its `errno` in ``RLStream/streamError``.
    public init?(fileAtPath path: String) {
        guard let created = path.withCString({ RLReadStreamCreateWithFilePath(nil, $0) }) else { return nil }
        super.init(adopting: CStream(input: created))
    }

    override init(adopting stream: CStream) {
        super.init(adopting: stream)
    }

    /// Reads up to `len` bytes into `buffer` (Foundation's
    /// `read(_:maxLength:)`): the number read, 0 at the end, -1 on failure
    /// (the stream's ``RLStream/streamError``, or misuse: a stream that is
    /// not open, `RLError.last()`). Blocks while nothing is there yet.
    public func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        Int(RLReadStreamRead(stream.pointer, buffer, RLIndex(len)))
    }

    /// Foundation's `getBuffer(_:length:)`: these streams have no internal
    /// buffer to lend, so it returns false, as Foundation's file and socket
    /// streams do; use ``read(_:maxLength:)``.
    public func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
                          length len: UnsafeMutablePointer<Int>) -> Bool {
        false
    }

    /// True if a read will not block: the stream is open and has bytes (or
    /// its end) to give.
    public var hasBytesAvailable: Bool { RLReadStreamHasBytesAvailable(stream.pointer) }
}

/// A stream to write bytes to: Foundation's `OutputStream` over
/// `RLWriteStreamRef`, into memory, a file, a bound pair or a socket.
public final class RLOutputStream: RLStream {
    /// Collects what is written in memory (Foundation's `init(toMemory:)`);
    /// read it back with ``dataWrittenToMemory``.
    public init(toMemory: ()) {
        guard let created = RLWriteStreamCreateWithAllocatedBuffers(nil, nil) else {
            fatalError("RLOutputStream: \(RLError.last())")
        }
        super.init(adopting: CStream(output: created))
    }

    /// Foundation's `OutputStream.toMemory()`.
    public static func toMemory() -> RLOutputStream { RLOutputStream(toMemory: ()) }

    /// Writes the file at `path` (Foundation's
    /// `init?(toFileAtPath:append:)`), created if missing by
    /// ``RLStream/open()`` (mode 0666 minus the umask). With `append:
    /// false` the file is truncated; with `true` its bytes are kept and
    /// every write goes to its end. Nil for an empty path.
    public init?(toFileAtPath path: String, append shouldAppend: Bool) {
        guard let created = path.withCString({ RLWriteStreamCreateWithFilePath(nil, $0) }) else { return nil }
        if shouldAppend {
            // A stream not yet opened always takes it.
            _ = RLWriteStreamSetProperty(created, kRLStreamPropertyAppendToFile, UnsafeRawPointer(kRLBooleanTrue))
        }
        super.init(adopting: CStream(output: created))
    }

    override init(adopting stream: CStream) {
        super.init(adopting: stream)
    }

    /// Writes up to `len` bytes of `buffer` (Foundation's
    /// `write(_:maxLength:)`): the number written, which may be fewer; -1
    /// on failure (the stream's ``RLStream/streamError``, or misuse).
    /// Blocks while nothing can be written.
    public func write(_ buffer: UnsafePointer<UInt8>, maxLength len: Int) -> Int {
        Int(RLWriteStreamWrite(stream.pointer, buffer, RLIndex(len)))
    }

    /// True if a write will not block.
    public var hasSpaceAvailable: Bool { RLWriteStreamCanAcceptBytes(stream.pointer) }

    /// Everything written so far to a memory stream, nil for other kinds
    /// (Foundation's `dataWrittenToMemoryStreamKey` property).
    public var dataWrittenToMemory: RLData? {
        RLWriteStreamCopyDataWritten(stream.pointer).map { RLData(adopting: $0) }
    }
}

// MARK: - Support

/// One reference to a C read or write stream, shared by the Swift stream
/// and its async sequences (which may outlive it).
final class CStream: @unchecked Sendable {
    let isInput: Bool
    let pointer: OpaquePointer

    init(input: RLReadStreamRef) {
        isInput = true
        pointer = input
    }

    init(output: RLWriteStreamRef) {
        isInput = false
        pointer = output
    }

    deinit {
        // The C stream releases its client context (the box) when freed.
        RLRelease(UnsafeRawPointer(pointer))
    }

    var status: UInt {
        let status = isInput ? RLReadStreamGetStatus(pointer) : RLWriteStreamGetStatus(pointer)
        return UInt(bitPattern: status.rawValue)
    }

    var error: RLStreamError? {
        let error = isInput ? RLReadStreamGetError(pointer) : RLWriteStreamGetError(pointer)
        return error.domain != 0 || error.error != 0 ? RLStreamError(error) : nil
    }

    func open() -> Bool { isInput ? RLReadStreamOpen(pointer) : RLWriteStreamOpen(pointer) }

    /// One owned reference to the property's value, or nil (error set).
    func copyProperty(_ name: String) -> UnsafeRawPointer? {
        name.withCString { isInput ? RLReadStreamCopyProperty(pointer, $0) : RLWriteStreamCopyProperty(pointer, $0) }
    }

    func setProperty(_ name: String, _ value: UnsafeRawPointer?) -> Bool {
        name.withCString {
            isInput ? RLReadStreamSetProperty(pointer, $0, value) : RLWriteStreamSetProperty(pointer, $0, value)
        }
    }

    func close() -> Bool { isInput ? RLReadStreamClose(pointer) : RLWriteStreamClose(pointer) }

    var isReady: Bool { isInput ? RLReadStreamHasBytesAvailable(pointer) : RLWriteStreamCanAcceptBytes(pointer) }

    func schedule(_ runLoop: RLRunLoop, _ mode: RLRunLoop.Mode) -> Bool {
        mode.withCString { name in
            isInput ? RLReadStreamScheduleWithRunLoop(pointer, runLoop.ref, name)
                    : RLWriteStreamScheduleWithRunLoop(pointer, runLoop.ref, name)
        }
    }

    func unschedule(_ runLoop: RLRunLoop, _ mode: RLRunLoop.Mode) -> Bool {
        mode.withCString { name in
            isInput ? RLReadStreamUnscheduleFromRunLoop(pointer, runLoop.ref, name)
                    : RLWriteStreamUnscheduleFromRunLoop(pointer, runLoop.ref, name)
        }
    }

    /// Makes `box` the client of every event.
    func setClient(_ box: StreamBox) {
        let events = RLOptionFlags(RLStream.Event([.openCompleted, .hasBytesAvailable, .hasSpaceAvailable,
                                                   .errorOccurred, .endEncountered]).rawValue)
        box.withContextInfo { info in
            var context = RLStreamClientContext(version: 0, info: info, retain: rlBoxRetain, release: rlBoxRelease,
                                                copyDescription: nil)
            if isInput {
                _ = RLReadStreamSetClient(pointer, events, rlReadStreamClient, &context)
            } else {
                _ = RLWriteStreamSetClient(pointer, events, rlWriteStreamClient, &context)
            }
        }
    }
}

/// What one C stream tells Swift about: its delegate or the async sequence
/// that took its events over, and where it is scheduled. Owned by the C
/// stream (its client context); calls come from the loops' threads.
final class StreamBox: RLCallbackBox<RLStream>, @unchecked Sendable {
    /// One receiver of events that is not the delegate (an async sequence).
    struct Subscriber {
        let id: UInt64
        let deliver: @Sendable (RLStream.Event) -> Void
        let ended: @Sendable () -> Void
    }

    private struct ScheduleKey: Hashable {
        let loop: UInt
        let mode: RLRunLoop.Mode
    }

    private struct ScheduleEntry {
        let runLoop: RLRunLoop
        var byUser: Bool
        var sequences: Int
    }

    private let mutex = ThreadsMutex()
    private weak var _delegate: (any RLStreamDelegate)?
    private var subscriber: Subscriber?
    private var nextID: UInt64 = 0
    private var schedules: [ScheduleKey: ScheduleEntry] = [:]

    var delegate: (any RLStreamDelegate)? {
        get { mutex.locked { _delegate } }
        set { mutex.locked { _delegate = newValue } }
    }

    /// Makes `deliver` the receiver of the stream's events (ahead of the
    /// delegate) until `unsubscribe`; the previous subscriber is told it
    /// ended.
    func subscribe(deliver: @escaping @Sendable (RLStream.Event) -> Void,
                   ended: @escaping @Sendable () -> Void) -> UInt64 {
        let previous = mutex.locked { () -> Subscriber? in
            nextID += 1
            defer { subscriber = Subscriber(id: nextID, deliver: deliver, ended: ended) }
            return subscriber
        }
        previous?.ended()
        return mutex.locked { nextID }
    }

    func unsubscribe(_ id: UInt64) {
        mutex.locked { if subscriber?.id == id { subscriber = nil } }
    }

    /// Schedules the C stream on `runLoop` in `mode` unless it is there
    /// already for the user or a sequence; keeps count of both. False (with
    /// `RLError.last()`) if the C call failed (an invalid mode): nothing is
    /// counted then.
    @discardableResult
    func schedule(_ stream: CStream, on runLoop: RLRunLoop, mode: RLRunLoop.Mode, bySequence: Bool) -> Bool {
        let key = ScheduleKey(loop: UInt(bitPattern: Int(bitPattern: runLoop.ref)), mode: mode)
        return mutex.locked {
            var entry = schedules[key] ?? ScheduleEntry(runLoop: runLoop, byUser: false, sequences: 0)
            let isNew = !entry.byUser && entry.sequences == 0
            if bySequence { entry.sequences += 1 } else { entry.byUser = true }
            if isNew && !stream.schedule(runLoop, mode) { return false }
            schedules[key] = entry
            return true
        }
    }

    /// Undoes one ``schedule(_:on:mode:bySequence:)``; the C stream leaves
    /// the loop and mode when neither the user nor a sequence needs it.
    func unschedule(_ stream: CStream, from runLoop: RLRunLoop, mode: RLRunLoop.Mode, bySequence: Bool) {
        let key = ScheduleKey(loop: UInt(bitPattern: Int(bitPattern: runLoop.ref)), mode: mode)
        mutex.locked {
            guard var entry = schedules[key] else { return }
            if bySequence { entry.sequences = max(entry.sequences - 1, 0) } else { entry.byUser = false }
            if entry.byUser || entry.sequences > 0 {
                schedules[key] = entry
            } else {
                schedules[key] = nil
                _ = stream.unschedule(entry.runLoop, mode)
            }
        }
    }

    /// An event from the C stream, on a loop's thread.
    func deliver(_ event: RLStream.Event) {
        let (current, delegate) = mutex.locked { () -> (Subscriber?, (any RLStreamDelegate)?) in
            (self.subscriber, self.subscriber == nil ? self._delegate : nil)
        }
        if let current {
            current.deliver(event)
        } else if let delegate, let owner {
            delegate.stream(owner, handle: event)
        }
    }
}

private func rlReadStreamClient(_ stream: RLReadStreamRef?, _ type: RLStreamEventType, _ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    StreamBox.from(info).deliver(RLStream.Event(rawValue: UInt(type.rawValue)))
}

private func rlWriteStreamClient(_ stream: RLWriteStreamRef?, _ type: RLStreamEventType, _ info: UnsafeMutableRawPointer?) {
    guard let info else { return }
    StreamBox.from(info).deliver(RLStream.Event(rawValue: UInt(type.rawValue)))
}
