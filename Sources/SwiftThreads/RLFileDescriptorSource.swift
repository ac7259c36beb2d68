internal import CRunLoop

/// Watches a file descriptor for read or write readiness on a run loop
/// (`RLFileDescriptorRef`, after Darwin's `CFFileDescriptor`, which
/// CoreFoundation on Linux lacks). Works for sockets, pipes, ttys, eventfds
/// and signalfds; the loop never reads or writes the descriptor itself.
///
/// Callbacks are one-shot per enable: after the closure is called for
/// `.read` (or `.write`), call ``enableCallBacks(_:)`` again to hear about the
/// next readiness — usually from inside the closure, after draining.
///
///     let watcher = try RLFileDescriptorSource(fileDescriptor: fd) { source, types in
///         // read from fd until EAGAIN ...
///         source.enableCallBacks(.read)
///     }
///     watcher.enableCallBacks(.read)
///     RLRunLoop.current.add(watcher, forMode: .default)
///
/// The closure runs on the run loop's thread, so it is `@Sendable`. The
/// `RLFileDescriptorSource` passed to it is the object you created while you
/// hold it, otherwise a new wrapper of the same C object.
public final class RLFileDescriptorSource: @unchecked Sendable {
    /// Readiness kinds (`kRLFileDescriptorReadCallBack`, `…WriteCallBack`).
    public struct CallBackTypes: OptionSet, Sendable, Hashable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// kRLFileDescriptorReadCallBack: readable (or at end of file).
        public static let read = CallBackTypes(rawValue: 1 << 0)
        /// kRLFileDescriptorWriteCallBack: writable.
        public static let write = CallBackTypes(rawValue: 1 << 1)
    }

    /// The one C reference this wrapper owns.
    private let reference: OwnedRef
    var ref: RLFileDescriptorRef { reference.pointer }
    private let box: DescriptorBox

    /// Creates a watcher for `fileDescriptor`; no callback is armed until
    /// ``enableCallBacks(_:)``.
    ///
    /// - Parameters:
    ///   - fileDescriptor: the descriptor to watch (any kind: socket, pipe,
    ///     eventfd, terminal, ...).
    ///   - closeOnInvalidate: close the descriptor when the watcher is
    ///     invalidated or destroyed.
    ///   - order: the order of its run-loop source (lower is performed
    ///     first).
    ///   - callBack: called on the thread of the run loop it is scheduled
    ///     in, with this watcher and the armed conditions that occurred;
    ///     re-arm with ``enableCallBacks(_:)`` to hear again.
    /// - Throws: `RLError` for a negative or closed descriptor.
    public init(fileDescriptor: Int32, closeOnInvalidate: Bool = false, order: Int = 0,
                callBack: @escaping @Sendable (RLFileDescriptorSource, CallBackTypes) -> Void) throws(RLError) {
        let box = DescriptorBox(callBack: callBack, order: order)
        let created = box.withContextInfo { info in
            var context = RLFileDescriptorContext(version: 0, info: info, retain: rlBoxRetain,
                                                  release: rlBoxRelease, copyDescription: nil)
            return RLFileDescriptorCreate(nil, fileDescriptor, closeOnInvalidate, rlDescriptorCallout, &context)
        }
        guard let created else { throw RLError.last() }
        reference = OwnedRef(adopting: created)
        self.box = box
        box.owner = self
    }

    fileprivate init(retaining ref: RLFileDescriptorRef, box: DescriptorBox) {
        reference = OwnedRef(retaining: ref)
        self.box = box
    }

    /// The watched descriptor, or -1 once invalidated.
    public var fileDescriptor: Int32 {
        let fd = RLFileDescriptorGetNativeDescriptor(ref)
        return isValid ? fd : -1
    }

    public var isValid: Bool { RLFileDescriptorIsValid(ref) }

    /// Arms the closure for the next readiness of each kind in `types`.
    /// Regular files and `/dev/null` are always ready (as `poll` says).
    /// Returns `false` (with `RLError.last()` set) once the run loop found
    /// that the descriptor was closed behind this object's back (or its number
    /// reused): invalidate the object before closing its descriptor.
    @discardableResult
    public func enableCallBacks(_ types: CallBackTypes) -> Bool {
        RLFileDescriptorEnableCallBacks(ref, RLOptionFlags(types.rawValue))
    }

    /// Disarms the callbacks in `types`.
    @discardableResult
    public func disableCallBacks(_ types: CallBackTypes) -> Bool {
        RLFileDescriptorDisableCallBacks(ref, RLOptionFlags(types.rawValue))
    }

    /// Stops watching, removes the source from its run loops and closes the
    /// descriptor if `closeOnInvalidate` was set. Idempotent.
    @discardableResult
    public func invalidate() -> Bool { RLFileDescriptorInvalidate(ref) }

    /// The run-loop source of this descriptor (one per descriptor: every call
    /// wraps the same C source), or nil once invalidated.
    /// `RLRunLoop.add(_:forMode:)` accepts the descriptor directly.
    public func makeRunLoopSource() -> RLRunLoopSource? {
        guard let source = RLFileDescriptorCreateRunLoopSource(nil, ref, RLIndex(box.order)) else { return nil }
        return RLRunLoopSource(adopting: source)
    }
}

extension RLFileDescriptorSource: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLFileDescriptorSource" }
}

final class DescriptorBox: RLCallbackBox<RLFileDescriptorSource>, @unchecked Sendable {
    let callBack: @Sendable (RLFileDescriptorSource, RLFileDescriptorSource.CallBackTypes) -> Void
    let order: Int

    init(callBack: @escaping @Sendable (RLFileDescriptorSource, RLFileDescriptorSource.CallBackTypes) -> Void,
         order: Int) {
        self.callBack = callBack
        self.order = order
    }
}

private func rlDescriptorCallout(_ descriptor: RLFileDescriptorRef?, _ types: RLOptionFlags,
                                 _ info: UnsafeMutableRawPointer?) {
    guard let descriptor, let info else { return }
    let box = DescriptorBox.from(info)
    box.callBack(box.wrapper { RLFileDescriptorSource(retaining: descriptor, box: box) }, RLFileDescriptorSource.CallBackTypes(rawValue: UInt(types)))
}
