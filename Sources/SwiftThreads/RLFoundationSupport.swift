// The `RLAbsoluteTime` forms of the date-typed properties under names of
// their own, for SwiftThreadsFoundation: there its `Date` properties of the
// same names shadow these (a module's own declarations shadow those of the
// modules it imports), so it reaches the numbers through these.

extension RLTimer {
    package var rlFireDate: RLAbsoluteTime {
        get { fireDate }
        set { fireDate = newValue }
    }
}

extension RLDistributedLock {
    package var rlLockDate: RLAbsoluteTime? { lockDate }
}

extension RLDistributedLock.Owner {
    package var rlLockDate: RLAbsoluteTime { lockDate }
}
