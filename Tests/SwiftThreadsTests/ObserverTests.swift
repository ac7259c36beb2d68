import Testing
import SwiftThreads

@Suite struct ObserverTests {
    @Test func activityOrderOfAnIterationWokenBySource() throws {
        // CoreFoundation's order: entry, then per iteration before-timers,
        // before-sources, before-waiting / after-waiting around the sleep;
        // the signalled source is performed in the next iteration, and with
        // returnAfterSourceHandled the run exits after it.
        let log = LoopEventLog<RLObserver.Activity>()
        let result = LoopSlot<RLRunLoop.RunResult>()
        let sourceSlot = LoopSlot<RLRunLoopSource>()
        let observerSlot = LoopSlot<RLObserver>()
        let loopSlot = LoopSlot<RLRunLoop>()
        let thread = RunLoopTestThread {
            let loop = RLRunLoop.current
            let source = RLRunLoopSource { log.append([]) }
            let observer = try! RLObserver(activities: .allActivities) { _, activity in log.append(activity) }
            loop.add(source, forMode: .default)
            loop.add(observer, forMode: .default)
            sourceSlot.set(source)
            observerSlot.set(observer)
            loopSlot.set(loop)
            if let r = try? loop.run(mode: .default, for: 60, returnAfterSourceHandled: true) { result.set(r) }
            observer.invalidate()
            source.invalidate()
        }
        #expect(loopEventually { loopSlot.value?.isWaiting == true })
        sourceSlot.value!.signal()
        loopSlot.value!.wakeUp()
        thread.join()
        #expect(result.value == .handledSource)
        // `[]` marks the source's perform.
        #expect(log.values == [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting,
                               .beforeTimers, .beforeSources, [], .exit])
    }

    @Test func activityOrderOfAnIterationWokenByTimer() {
        // A due one-shot timer: CoreFoundation fires timers after waking,
        // and the run finishes once the mode is empty. `[]` marks the timer.
        let log = onFreshLoopThread { () -> [RLObserver.Activity] in
            let loop = RLRunLoop.current
            let log = LoopEventLog<RLObserver.Activity>()
            let observer = try! RLObserver(activities: .allActivities) { _, activity in log.append(activity) }
            loop.add(observer, forMode: .default)
            loop.add(RLTimer(fire: RLTime.now - 1, interval: 0, repeats: false) { _ in log.append([]) },
                     forMode: .default)
            _ = try? loop.run(mode: .default, for: 30)
            observer.invalidate()
            return log.values
        }
        #expect(log == [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, [], .exit])
    }

    @Test func entryAndExitFramePassesThatDoNotWait() {
        let passes = onFreshLoopThread { () -> [RLObserver.Activity] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let log = LoopEventLog<RLObserver.Activity>()
            let observer = try! RLObserver(activities: [.entry, .exit]) { _, activity in log.append(activity) }
            loop.add(observer, forMode: .default)
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            observer.invalidate()
            keep.invalidate()
            return log.values
        }
        #expect(passes == [.entry, .exit, .entry, .exit])
    }

    @Test func nonRepeatingObserverIsCalledOnce() {
        let (count, valid) = onFreshLoopThread { () -> (Int, Bool) in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let log = LoopEventLog<Int>()
            let observer = try! RLObserver(activities: .entry, repeats: false) { _, _ in log.append(1) }
            #expect(!observer.repeats)
            loop.add(observer, forMode: .default)
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            keep.invalidate()
            return (log.count, observer.isValid)
        }
        #expect(count == 1)
        #expect(!valid)
    }

    @Test func lowerOrderIsCalledFirst() {
        let order = onFreshLoopThread { () -> [Int] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let log = LoopEventLog<Int>()
            let observers = try! [7, 1, 4].map { n in
                try RLObserver(activities: .entry, order: n) { observer, _ in log.append(observer.order) }
            }
            for observer in observers { loop.add(observer, forMode: .default) }
            _ = try? loop.run(mode: .default, for: 0)
            observers.forEach { $0.invalidate() }
            keep.invalidate()
            return log.values
        }
        #expect(order == [1, 4, 7])
    }

    @Test func properties() throws {
        let observer = try RLObserver(activities: [.beforeWaiting, .afterWaiting], repeats: true, order: 3) { _, _ in }
        #expect(observer.activities == [.beforeWaiting, .afterWaiting])
        #expect(observer.repeats)
        #expect(observer.order == 3)
        #expect(observer.isValid)
        #expect(observer.invalidate())
        #expect(observer.invalidate())
        #expect(!observer.isValid)
        #expect(RLObserver.Activity.entry.rawValue == 1)
        #expect(RLObserver.Activity.exit.rawValue == 0x80)
    }

    @Test func emptyActivitiesIsAnError() {
        #expect(throws: RLError.self) {
            _ = try RLObserver(activities: []) { _, _ in }
        }
    }

    @Test func invalidateFromInsideTheHandler() {
        let (count, same) = onFreshLoopThread { () -> (Int, Bool) in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let log = LoopEventLog<Int>()
            let identity = LoopSlot<ObjectIdentifier>()
            let sameObject = LoopSlot<Bool>()
            let observer = try! RLObserver(activities: .entry) { observer, _ in
                log.append(1)
                sameObject.set(identity.value == ObjectIdentifier(observer))
                observer.invalidate()
            }
            identity.set(ObjectIdentifier(observer))
            loop.add(observer, forMode: .default)
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            keep.invalidate()
            return (log.count, sameObject.value == true)
        }
        #expect(count == 1)
        #expect(same)
    }

    @Test func addRemoveContains() {
        let (thread, loop) = startLoopThread()
        let observer = try! RLObserver(activities: .entry) { _, _ in }
        #expect(loop.add(observer, forMode: testCustomMode))
        #expect(loop.contains(observer, forMode: testCustomMode))
        #expect(!loop.contains(observer, forMode: .default))
        #expect(loop.remove(observer, forMode: testCustomMode))
        #expect(!loop.contains(observer, forMode: testCustomMode))
        observer.invalidate()
        #expect(!loop.add(observer, forMode: testCustomMode))
        loop.stop()
        thread.join()
    }

    @Test func addingToTheLoopOfAFinishedThreadFails() {
        let loop = onFreshLoopThread { RLRunLoop.current }
        let observer = try! RLObserver(activities: .entry) { _, _ in }
        #expect(!loop.add(observer, forMode: .default))
    }

    @Test func invalidatedObserverFreesItsClosure() {
        let freed = onFreshLoopThread { () -> Bool in
            weak var weakCanary: LeakCanary?
            do {
                let canary = LeakCanary()
                weakCanary = canary
                let observer = try! RLObserver(activities: .allActivities) { _, _ in canary.touch() }
                RLRunLoop.current.add(observer, forMode: .default)
                _ = try? RLRunLoop.current.run(mode: .default, for: 0)
                observer.invalidate()
            }
            return weakCanary == nil
        }
        #expect(freed)
    }
}
