internal import CRunLoop

/// An immutable byte buffer (`RLDataRef`, CoreFoundation's `CFData`): the
/// payload of port messages, with no dependency on Foundation's `Data`.
///
/// Making one copies the bytes once, into the C buffer; after that the
/// buffer is shared, never copied: sending it in a port message hands the
/// receiver the same bytes, and copies of the value share them too. Read it
/// as a collection of `UInt8` (`Array(data)`, `data[0]`, `for byte in data`)
/// or with ``withUnsafeBytes(_:)``. The bytes never change, so the value is
/// `Sendable`.
public struct RLData: Sendable, Hashable, RandomAccessCollection, ExpressibleByArrayLiteral,
    CustomStringConvertible {
    /// Owns one reference to the C buffer.
    final class Storage: @unchecked Sendable {
        let ref: RLDataRef
        let base: UnsafePointer<UInt8>
        let count: Int

        /// Takes over one reference the caller owns (Create rule).
        init(adopting ref: RLDataRef) {
            self.ref = ref
            // Never NULL for a live buffer, even an empty one.
            self.base = RLDataGetBytePtr(ref)!
            self.count = Int(RLDataGetLength(ref))
        }

        deinit { RLRelease(UnsafeRawPointer(ref)) }
    }

    let storage: Storage

    /// A buffer holding a copy of `bytes`.
    public init<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        let array = Array(bytes)
        let created = array.withUnsafeBufferPointer { RLDataCreate(nil, $0.baseAddress, RLIndex($0.count)) }
        guard let created else { fatalError("RLData: \(RLError.last())") }
        storage = Storage(adopting: created)
    }

    public init(arrayLiteral bytes: UInt8...) { self.init(bytes) }

    /// An empty buffer.
    public init() { self.init(EmptyCollection<UInt8>()) }

    /// Wraps a C buffer, taking one new reference (Get rule on the C side).
    init(retaining ref: RLDataRef) {
        RLRetain(UnsafeRawPointer(ref))
        storage = Storage(adopting: ref)
    }

    /// Wraps a C buffer the caller owns (Create rule on the C side).
    init(adopting ref: RLDataRef) {
        storage = Storage(adopting: ref)
    }

    var ref: RLDataRef { storage.ref }

    public var startIndex: Int { 0 }
    public var endIndex: Int { storage.count }

    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < storage.count, "RLData: index \(position) out of range")
        return storage.base[position]
    }

    /// Calls `body` with the bytes (valid only during the call).
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withExtendedLifetime(storage) { () throws(E) -> R in
            try body(UnsafeRawBufferPointer(start: storage.base, count: storage.count))
        }
    }

    /// Two buffers are equal when they hold the same bytes.
    public static func == (lhs: RLData, rhs: RLData) -> Bool {
        lhs.storage === rhs.storage || lhs.elementsEqual(rhs)
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public var description: String { "RLData(\(count) bytes)" }
}
