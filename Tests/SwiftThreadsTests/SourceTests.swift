import Testing
import SwiftThreads

@Suite struct SourceTests {
    @Test func signalledSourcePerformsOnRun() {
        let (result, count) = onFreshLoopThread { () -> (RLRunLoop.RunResult?, Int) in
            let loop = RLRunLoop.current
            let log = LoopEventLog<Int>()
            let source = RLRunLoopSource { log.append(1) }
            loop.add(source, forMode: .default)
            source.signal()
            let result = try? loop.run(mode: .default, for: 30, returnAfterSourceHandled: true)
            source.invalidate()
            return (result, log.count)
        }
        #expect(result == .handledSource)
        #expect(count == 1)
    }

    @Test func scheduleAndCancelReportLoopAndMode() {
        let (events, loop) = onFreshLoopThread { () -> ([String], RLRunLoop) in
            let loop = RLRunLoop.current
            let log = LoopEventLog<String>()
            let source = RLRunLoopSource(
                schedule: { rl, mode in log.append("schedule \(mode.rawValue) \(rl == RLRunLoop.current)") },
                cancel: { rl, mode in log.append("cancel \(mode.rawValue) \(rl == RLRunLoop.current)") },
                perform: {})
            loop.add(source, forMode: testCustomMode)
            #expect(loop.contains(source, forMode: testCustomMode))
            loop.remove(source, forMode: testCustomMode)
            #expect(!loop.contains(source, forMode: testCustomMode))
            return (log.values, loop)
        }
        #expect(loop != RLRunLoop.main)
        #expect(events == ["schedule \(testCustomMode.rawValue) true", "cancel \(testCustomMode.rawValue) true"])
    }

    @Test func signalIsHeldUntilItsModeRuns() {
        let (afterDefault, afterCustom) = onFreshLoopThread { () -> (Int, Int) in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let log = LoopEventLog<Int>()
            let source = RLRunLoopSource { log.append(1) }
            loop.add(source, forMode: testCustomMode)
            source.signal()
            _ = try? loop.run(mode: .default, for: 0)
            let afterDefault = log.count
            _ = try? loop.run(mode: testCustomMode, for: 30, returnAfterSourceHandled: true)
            source.invalidate()
            keep.invalidate()
            return (afterDefault, log.count)
        }
        #expect(afterDefault == 0)
        #expect(afterCustom == 1)
    }

    @Test func lowerOrderPerformsFirst() {
        let order = onFreshLoopThread { () -> [Int] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let log = LoopEventLog<Int>()
            let sources = [5, 1, 3].map { n in RLRunLoopSource(order: n) { log.append(n) } }
            for source in sources {
                loop.add(source, forMode: .default)
                source.signal()
            }
            #expect(sources.map(\.order) == [5, 1, 3])
            _ = try? loop.run(mode: .default, for: 0)
            sources.forEach { $0.invalidate() }
            keep.invalidate()
            return log.values
        }
        #expect(order == [1, 3, 5])
    }

    @Test func signalAndWakeUpFromAnotherThread() {
        let performedOn = LoopSlot<RLRunLoop>()
        let sourceSlot = LoopSlot<RLRunLoopSource>()
        let (thread, loop) = startLoopThreadWith { loop in
            let source = RLRunLoopSource { performedOn.set(RLRunLoop.current); RLRunLoop.current.stop() }
            loop.add(source, forMode: .default)
            sourceSlot.set(source)
        }
        let source = sourceSlot.value!
        #expect(source.signal())
        #expect(loop.wakeUp())
        thread.join()
        #expect(performedOn.value == loop)
        source.invalidate()
    }

    @Test func invalidateCancelsAndDisablesTheSource() {
        let (events, valid, signalled, added) = onFreshLoopThread { () -> ([String], Bool, Bool, Bool) in
            let loop = RLRunLoop.current
            let log = LoopEventLog<String>()
            let source = RLRunLoopSource(cancel: { _, mode in log.append("cancel \(mode.rawValue)") },
                                         perform: { log.append("perform") })
            loop.add(source, forMode: .default)
            #expect(source.isValid)
            #expect(source.invalidate())
            #expect(source.invalidate())
            let signalled = source.signal()
            let added = loop.add(source, forMode: .default)
            _ = try? loop.run(mode: .default, for: 0)
            return (log.values, source.isValid, signalled, added)
        }
        #expect(events == ["cancel \(RLRunLoop.Mode.default.rawValue)"])
        #expect(!valid)
        #expect(!signalled)
        #expect(!added)
    }

    @Test func threadExitCancelsItsSources() {
        let log = LoopEventLog<String>()
        onFreshLoopThread { () -> Bool in
            let source = RLRunLoopSource(cancel: { _, mode in log.append("cancel \(mode.rawValue)") },
                                         perform: {})
            RLRunLoop.current.add(source, forMode: testCustomMode)
            return true
        }
        #expect(log.values == ["cancel \(testCustomMode.rawValue)"])
    }

    @Test func cancelAtThreadExitMayUseTheRunLoop() {
        let log = LoopEventLog<String>()
        onFreshLoopThread { () -> Bool in
            let source = RLRunLoopSource(cancel: { rl, mode in
                log.append("\(mode.rawValue) \(rl.allModes.isEmpty ? "no modes" : "modes") \(rl.isWaiting)")
                rl.wakeUp()
            }, perform: {})
            RLRunLoop.current.add(source, forMode: .default)
            return true
        }
        #expect(log.count == 1)
        #expect(log.values.first?.hasPrefix(RLRunLoop.Mode.default.rawValue) == true)
    }

    @Test func invalidatedSourceFreesItsClosures() {
        let freed = onFreshLoopThread { () -> Bool in
            weak var weakCanary: LeakCanary?
            do {
                let canary = LeakCanary()
                weakCanary = canary
                let source = RLRunLoopSource(schedule: { _, _ in canary.touch() },
                                             cancel: { _, _ in canary.touch() },
                                             perform: { canary.touch() })
                RLRunLoop.current.add(source, forMode: .default)
                source.signal()
                _ = try? RLRunLoop.current.run(mode: .default, for: 0)
                source.invalidate()
            }
            return weakCanary == nil
        }
        #expect(freed)
    }
}
