internal import CRunLoop

/// A closure called at chosen points of each run-loop iteration:
/// `RLRunLoopObserverRef` (CoreFoundation's `CFRunLoopObserver`; Foundation
/// has no Swift counterpart).
///
/// In one pass of the loop the activities come in CoreFoundation's order:
/// entry, then per iteration before-timers, before-sources, (before-waiting,
/// after-waiting when the loop sleeps), and exit when the run returns.
/// Observers with a lower ``order`` are called first.
///
/// The closure runs on the thread of the run loop it observes, so it is
/// `@Sendable`. The `RLObserver` passed to it is the object you created
/// while you hold it, otherwise a new wrapper of the same C observer; use it
/// (rather than capturing the observer) to invalidate from inside the
/// closure without a reference cycle.
public final class RLObserver: @unchecked Sendable {
    /// Points of a run-loop iteration (`RLRunLoopActivity`, CF's bits).
    public struct Activity: OptionSet, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// kRLRunLoopEntry: a run starts.
        public static let entry = Activity(rawValue: 1 << 0)
        /// kRLRunLoopBeforeTimers: about to fire due timers.
        public static let beforeTimers = Activity(rawValue: 1 << 1)
        /// kRLRunLoopBeforeSources: about to perform signalled sources.
        public static let beforeSources = Activity(rawValue: 1 << 2)
        /// kRLRunLoopBeforeWaiting: about to sleep.
        public static let beforeWaiting = Activity(rawValue: 1 << 5)
        /// kRLRunLoopAfterWaiting: woke up.
        public static let afterWaiting = Activity(rawValue: 1 << 6)
        /// kRLRunLoopExit: a run returns.
        public static let exit = Activity(rawValue: 1 << 7)
        /// kRLRunLoopAllActivities.
        public static let allActivities = Activity(rawValue: 0x0FFF_FFFF)

        public var description: String {
            let names: [(Activity, String)] = [
                (.entry, "entry"), (.beforeTimers, "beforeTimers"), (.beforeSources, "beforeSources"),
                (.beforeWaiting, "beforeWaiting"), (.afterWaiting, "afterWaiting"), (.exit, "exit"),
            ]
            let found = names.filter { contains($0.0) }.map(\.1)
            return found.isEmpty ? "Activity(rawValue: \(rawValue))" : found.joined(separator: "|")
        }
    }

    /// The one C reference this wrapper owns.
    private let reference: OwnedRef
    var ref: RLRunLoopObserverRef { reference.pointer }
    private let box: ObserverBox

    /// Creates an observer; add it to a run loop with
    /// `RLRunLoop.add(_:forMode:)`. A non-repeating observer is invalidated
    /// after its first call.
    ///
    /// - Throws: `RLError` (`.invalidArgument`) when `activities` is empty.
    public init(activities: Activity, repeats: Bool = true, order: Int = 0,
                handler: @escaping @Sendable (RLObserver, Activity) -> Void) throws(RLError) {
        let box = ObserverBox(handler: handler)
        let created = box.withContextInfo { info in
            var context = RLRunLoopObserverContext(version: 0, info: info, retain: rlBoxRetain,
                                                   release: rlBoxRelease, copyDescription: nil)
            return RLRunLoopObserverCreate(nil, RLOptionFlags(activities.rawValue), repeats, RLIndex(order),
                                           rlObserverCallout, &context)
        }
        guard let created else { throw RLError.last() }
        reference = OwnedRef(adopting: created)
        self.box = box
        box.owner = self
    }

    fileprivate init(retaining ref: RLRunLoopObserverRef, box: ObserverBox) {
        reference = OwnedRef(retaining: ref)
        self.box = box
    }

    /// The activities this observer is called for (empty once invalid).
    public var activities: Activity {
        Activity(rawValue: UInt(RLRunLoopObserverGetActivities(ref)))
    }

    /// Whether the observer stays valid after its first call.
    public var repeats: Bool { RLRunLoopObserverDoesRepeat(ref) }

    /// Observers with a lower order are called first.
    public var order: Int { Int(RLRunLoopObserverGetOrder(ref)) }

    public var isValid: Bool { RLRunLoopObserverIsValid(ref) }

    /// Removes the observer from every run loop; it is never called again.
    /// Idempotent; safe from any thread and from inside the handler.
    @discardableResult
    public func invalidate() -> Bool { RLRunLoopObserverInvalidate(ref) }
}

extension RLObserver: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLObserver" }
}

final class ObserverBox: RLCallbackBox<RLObserver>, @unchecked Sendable {
    let handler: @Sendable (RLObserver, RLObserver.Activity) -> Void

    init(handler: @escaping @Sendable (RLObserver, RLObserver.Activity) -> Void) {
        self.handler = handler
    }
}

private func rlObserverCallout(_ observer: RLRunLoopObserverRef?, _ activity: RLRunLoopActivity,
                               _ info: UnsafeMutableRawPointer?) {
    guard let observer, let info else { return }
    let box = ObserverBox.from(info)
    box.handler(box.wrapper { RLObserver(retaining: observer, box: box) }, RLObserver.Activity(rawValue: UInt(activity.rawValue)))
}
