import Testing
import SwiftThreads

/// An object whose lifetime the leak tests watch through a weak reference.
final class LeakCanary: Sendable {
    func touch() {}
}

@Suite struct TimerTests {
    @Test func doesNotFireAtCreation() {
        let fired = onFreshLoopThread { () -> [Int] in
            let log = LoopEventLog<Int>()
            let timer = RLTimer.scheduledTimer(withTimeInterval: 1000, repeats: true) { _ in log.append(1) }
            let atCreation = log.count
            _ = try? RLRunLoop.current.run(mode: .default, for: 0)
            let afterPass = log.count
            timer.invalidate()
            return [atCreation, afterPass]
        }
        #expect(fired == [0, 0])
    }

    @Test func oneShotFiresOnceThenIsInvalid() {
        let (count, valid, result) = onFreshLoopThread { () -> (Int, Bool, RLRunLoop.RunResult?) in
            let log = LoopEventLog<Int>()
            let timer = RLTimer.scheduledTimer(withTimeInterval: 0.001, repeats: false) { _ in log.append(1) }
            let result = try? RLRunLoop.current.run(mode: .default, for: 30)
            return (log.count, timer.isValid, result)
        }
        #expect(count == 1)
        #expect(!valid)
        #expect(result == .finished)
    }

    @Test func repeatingTimerRunsUntilInvalidated() {
        let (count, result) = onFreshLoopThread { () -> (Int, RLRunLoop.RunResult?) in
            let log = LoopEventLog<Int>()
            RLTimer.scheduledTimer(withTimeInterval: 0.001, repeats: true) { timer in
                log.append(1)
                if log.count == 3 { timer.invalidate() }
            }
            let result = try? RLRunLoop.current.run(mode: .default, for: 30)
            return (log.count, result)
        }
        #expect(count == 3)
        #expect(result == .finished)
    }

    @Test func dueTimersFireInFireDateOrder() {
        let order = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let log = LoopEventLog<String>()
            let now = RLTime.now
            for (name, offset) in [("b", -1.0), ("a", -3.0), ("c", -2.0)] {
                loop.add(RLTimer(fire: now + offset, interval: 0, repeats: false) { _ in log.append(name) },
                         forMode: .default)
            }
            _ = try? loop.run(mode: .default, for: 30)
            return log.values
        }
        #expect(order == ["a", "c", "b"])
    }

    @Test func blockReceivesTheTimerItself() {
        // A timer whose wrapper was dropped still gets a usable timer.
        let dropped = onFreshLoopThread { () -> Bool in
            let seen = LoopSlot<Bool>()
            RLTimer.scheduledTimer(withTimeInterval: 0.001, repeats: true) { t in
                seen.set(t.isValid && t.repeats)
                t.invalidate()
            }
            _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            return seen.value == true
        }
        #expect(dropped)
        // The object passed to the block is the caller's wrapper while held.
        let identical = onFreshLoopThread { () -> Bool in
            let match = LoopSlot<Bool>()
            let box = LoopSlot<ObjectIdentifier>()
            let timer = RLTimer(fire: RLTime.now - 1, interval: 0, repeats: false) { t in
                match.set(box.value == ObjectIdentifier(t))
            }
            box.set(ObjectIdentifier(timer))
            RLRunLoop.current.add(timer, forMode: .default)
            _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            return match.value == true
        }
        #expect(identical)
    }

    @Test func fireCallsTheBlockNow() {
        let log = LoopEventLog<String>()
        let oneShot = RLTimer(timeInterval: 1000, repeats: false) { _ in log.append("once") }
        oneShot.fire()
        #expect(log.values == ["once"])
        #expect(!oneShot.isValid)
        oneShot.fire()
        #expect(log.values == ["once"])

        let repeating = RLTimer(timeInterval: 1000, repeats: true) { _ in log.append("again") }
        let date = repeating.fireDate
        repeating.fire()
        #expect(repeating.isValid)
        #expect(repeating.fireDate == date)
        repeating.invalidate()
        repeating.fire()
        #expect(log.values == ["once", "again"])
    }

    @Test func properties() {
        let oneShot = RLTimer(timeInterval: 10, repeats: false) { _ in }
        #expect(oneShot.timeInterval == 0)
        #expect(!oneShot.repeats)
        let repeating = RLTimer(timeInterval: 2.5, repeats: true) { _ in }
        #expect(repeating.timeInterval == 2.5)
        #expect(repeating.repeats)
        let clamped = RLTimer(timeInterval: -1, repeats: true) { _ in }
        #expect(clamped.timeInterval > 0)
        let odd = [RLTimer(fire: .nan, interval: .nan, repeats: true) { _ in },
                   RLTimer(fire: .infinity, interval: .infinity, repeats: true) { _ in },
                   RLTimer(fire: -.infinity, interval: -.infinity, repeats: false) { _ in }]
        #expect(odd.allSatisfy { $0.isValid && $0.fireDate.isFinite })

        #expect(repeating.tolerance == 0)
        repeating.tolerance = 0.5
        #expect(repeating.tolerance == 0.5)
        repeating.tolerance = 100
        #expect(repeating.tolerance == 1.25)
        repeating.tolerance = -1
        #expect(repeating.tolerance == 1.25)

        let date = RLTime.now + 5000
        repeating.fireDate = date
        #expect(abs(repeating.fireDate - date) < 1e-6)
        #expect(oneShot.isValid)
        #expect(oneShot.invalidate())
        #expect(oneShot.invalidate())
        #expect(!oneShot.isValid)
    }

    @Test func movingTheFireDateEarlierFiresIt() {
        let count = onFreshLoopThread { () -> Int in
            let log = LoopEventLog<Int>()
            let timer = RLTimer.scheduledTimer(withTimeInterval: 100_000, repeats: false) { _ in log.append(1) }
            timer.fireDate = RLTime.now - 1
            _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            return log.count
        }
        #expect(count == 1)
    }

    @Test func addingAnInvalidatedTimerFails() {
        let (added, code) = onFreshLoopThread { () -> (Bool, RLError.Code) in
            let timer = RLTimer(timeInterval: 1, repeats: false) { _ in }
            timer.invalidate()
            RLError.clear()
            let added = RLRunLoop.current.add(timer, forMode: .default)
            return (added, RLError.last().code)
        }
        #expect(!added)
        #expect(code != .none)
    }

    @Test func aTimerBelongsToOneRunLoop() {
        let (thread, loop) = startLoopThread()
        let timer = RLTimer(timeInterval: 1000, repeats: false) { _ in }
        #expect(loop.add(timer, forMode: .default))
        let second = onFreshLoopThread { RLRunLoop.current.add(timer, forMode: .default) }
        #expect(!second)
        #expect(loop.add(timer, forMode: testCustomMode))
        timer.invalidate()
        loop.stop()
        thread.join()
    }

    @Test func firesInACommonMode() {
        let count = onFreshLoopThread { () -> Int in
            let loop = RLRunLoop.current
            loop.addCommonMode(testCustomMode)
            let log = LoopEventLog<Int>()
            loop.add(RLTimer(fire: RLTime.now - 1, interval: 0, repeats: false) { _ in log.append(1) },
                     forMode: .common)
            _ = try? loop.run(mode: testCustomMode, for: 30)
            return log.count
        }
        #expect(count == 1)
    }

    @Test func invalidateFromAnotherThreadWhileTheLoopSleeps() {
        let log = LoopEventLog<Int>()
        let timerSlot = LoopSlot<RLTimer>()
        let (thread, loop) = startLoopThreadWith { loop in
            let timer = RLTimer(fire: RLTime.now + 10_000, interval: 0, repeats: false) { _ in log.append(1) }
            loop.add(timer, forMode: .default)
            timerSlot.set(timer)
        }
        let timer = timerSlot.value!
        #expect(timer.invalidate())
        #expect(!timer.isValid)
        #expect(!loop.contains(timer, forMode: .default))
        loop.stop()
        thread.join()
        #expect(log.count == 0)
    }

    @Test func invalidatedTimerFreesItsClosure() {
        let freed = onFreshLoopThread { () -> [Bool] in
            var results: [Bool] = []
            weak var scheduledCanary: LeakCanary?
            do {
                let canary = LeakCanary()
                scheduledCanary = canary
                let timer = RLTimer.scheduledTimer(withTimeInterval: 1000, repeats: true) { _ in canary.touch() }
                timer.invalidate()
            }
            results.append(scheduledCanary == nil)

            weak var firedCanary: LeakCanary?
            do {
                let canary = LeakCanary()
                firedCanary = canary
                RLTimer.scheduledTimer(withTimeInterval: 0.001, repeats: true) { timer in
                    canary.touch()
                    timer.invalidate()
                }
                _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            }
            results.append(firedCanary == nil)

            weak var unscheduledCanary: LeakCanary?
            do {
                let canary = LeakCanary()
                unscheduledCanary = canary
                _ = RLTimer(timeInterval: 1, repeats: false) { _ in canary.touch() }
            }
            results.append(unscheduledCanary == nil)
            return results
        }
        #expect(freed == [true, true, true])
    }

    @Test func scheduledTimerIsFreedWhenItsThreadExits() {
        let weakCanary = LoopSlot<WeakLeakCanary>()
        onFreshLoopThread { () -> Bool in
            let canary = LeakCanary()
            weakCanary.set(WeakLeakCanary(canary))
            RLTimer.scheduledTimer(withTimeInterval: 1000, repeats: true) { _ in canary.touch() }
            return true
        }
        #expect(weakCanary.value?.canary == nil)
    }
}

struct WeakLeakCanary: Sendable {
    weak var canary: LeakCanary?
    init(_ canary: LeakCanary) { self.canary = canary }
}

/// Like `startLoopThread`, with `setUp` run on the loop thread first.
func startLoopThreadWith(_ setUp: @escaping @Sendable (RLRunLoop) -> Void) -> (RunLoopTestThread, RLRunLoop) {
    let loopSlot = LoopSlot<RLRunLoop>()
    let thread = RunLoopTestThread {
        let loop = RLRunLoop.current
        let keep = keepLoopAlive(loop)
        setUp(loop)
        loopSlot.set(loop)
        _ = try? loop.run(mode: .default, for: 60)
        keep.invalidate()
    }
    _ = loopEventually { loopSlot.value?.isWaiting == true }
    return (thread, loopSlot.value!)
}
