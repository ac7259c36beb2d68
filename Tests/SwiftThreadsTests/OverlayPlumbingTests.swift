import Testing
@testable import SwiftThreads
import CRunLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The overlay's shared plumbing: the wrapper registry every unique wrapper
// goes through, the callback box every C context points to, and the one
// protocol RLRunLoop's add/remove/contains take.

/// A wrapper for the registry tests: counts how many were made and are
/// alive per key, and leaves the registry in its deinit as real wrappers do.
private final class Probe: @unchecked Sendable {
    let key: UInt
    let registry: RLWrapperRegistry<Probe, ProbeState>
    let state: ProbeState?
    let made: RLAtomicInt64

    init(key: UInt, registry: RLWrapperRegistry<Probe, ProbeState>, state: ProbeState?, made: RLAtomicInt64) {
        self.key = key
        self.registry = registry
        self.state = state
        self.made = made
        _ = made.add(1)
    }

    deinit { registry.forget(key) }
}

/// A companion: shared by the wrappers of one key.
private final class ProbeState: @unchecked Sendable {
    let key: UInt
    let registry: RLWrapperRegistry<Probe, ProbeState>
    init(key: UInt, registry: RLWrapperRegistry<Probe, ProbeState>) {
        self.key = key
        self.registry = registry
    }
    deinit { registry.forget(key) }
}

private func probe(_ key: UInt, in registry: RLWrapperRegistry<Probe, ProbeState>, made: RLAtomicInt64) -> Probe {
    registry.wrapper(for: key) { state in
        (Probe(key: key, registry: registry, state: state, made: made), state, true)
    }
}

@Suite struct WrapperRegistryTests {
    @Test func concurrentLookupsOfALiveWrapperAllGetIt() {
        let registry = RLWrapperRegistry<Probe, ProbeState>()
        let made = RLAtomicInt64(0)
        let held = (0..<8).map { probe(UInt($0 + 1), in: registry, made: made) }
        #expect(made.load() == 8)
        let mismatches = RLAtomicInt64(0)
        onThreads(8) { thread in
            for round in 0..<2_000 {
                let key = UInt((thread + round) % 8 + 1)
                let found = probe(key, in: registry, made: made)
                if found !== held[Int(key) - 1] { _ = mismatches.add(1) }
            }
        }
        #expect(mismatches.load() == 0)
        #expect(made.load() == 8)
        #expect(registry.count == 8)
        withExtendedLifetime(held) {}
    }

    @Test func entriesGoWithTheirLastWrapperUnderConcurrentLookups() {
        let registry = RLWrapperRegistry<Probe, ProbeState>()
        let made = RLAtomicInt64(0)
        // Nobody keeps the wrappers: each lookup may make one and drop it
        // while another thread looks the same key up.
        onThreads(8) { thread in
            for round in 0..<2_000 {
                let found = probe(UInt((thread * 7 + round) % 4 + 1), in: registry, made: made)
                #expect(found.key >= 1 && found.key <= 4)
            }
        }
        #expect(made.load() >= 4)
        #expect(registry.count == 0)
    }

    @Test func aCompanionOutlivesItsWrapperAndIsHandedToTheNext() {
        let registry = RLWrapperRegistry<Probe, ProbeState>()
        let made = RLAtomicInt64(0)
        let state = ProbeState(key: 7, registry: registry)
        registry.record(7, wrapper: nil, companion: state)
        var first: Probe? = probe(7, in: registry, made: made)
        #expect(first?.state === state)
        first = nil
        #expect(registry.count == 1)          // the companion keeps the entry
        let second = probe(7, in: registry, made: made)
        #expect(second.state === state)
        #expect(made.load() == 2)
        #expect(registry.companion(for: 7) === state)
        withExtendedLifetime(second) {}
    }

    @Test func aWrapperNotRecordedIsNotReused() {
        let registry = RLWrapperRegistry<Probe, ProbeState>()
        let made = RLAtomicInt64(0)
        let passing = registry.wrapper(for: 3) { state in
            (Probe(key: 3, registry: registry, state: state, made: made), state, false)
        }
        let next = probe(3, in: registry, made: made)
        #expect(passing !== next)
        #expect(made.load() == 2)
    }

    @Test func runLoopAndThreadWrappersStayUniqueAcrossThreads() {
        let loop = RLRunLoop.main
        let thread = RLThread.main
        let mismatches = RLAtomicInt64(0)
        onThreads(4) { _ in
            for _ in 0..<500 where RLRunLoop.main !== loop || RLThread.main !== thread {
                _ = mismatches.add(1)
            }
        }
        #expect(mismatches.load() == 0)
    }
}

// MARK: - Callback boxes

/// Counts its deinits.
private final class Sentinel: Sendable {
    let deinits: RLAtomicInt64
    init(_ deinits: RLAtomicInt64) { self.deinits = deinits }
    deinit { _ = deinits.add(1) }
}

private final class CountedBox: RLCallbackBox<RLTimer>, @unchecked Sendable {
    let deinits: RLAtomicInt64
    init(_ deinits: RLAtomicInt64) { self.deinits = deinits }
    deinit { _ = deinits.add(1) }
}

@Suite struct CallbackBoxTests {
    @Test func contextRetainAndReleaseBalance() {
        let deinits = RLAtomicInt64(0)
        var box: CountedBox? = CountedBox(deinits)
        let info = box!.info
        #expect(CountedBox.from(info) === box)
        #expect(box!.isInfo(UnsafeRawPointer(info)))
        // What a C object does with its context: retain once when made,
        // release once when freed.
        #expect(rlBoxRetain(UnsafeRawPointer(info)) == UnsafeRawPointer(info))
        #expect(rlBoxRetain(info) == info)
        box = nil
        #expect(deinits.load() == 0)
        rlBoxRelease(info)
        #expect(deinits.load() == 0)
        rlBoxRelease(UnsafeRawPointer(info))
        #expect(deinits.load() == 1)
    }

    @Test func aFreedTimerReleasesItsClosureExactlyOnce() {
        let deinits = RLAtomicInt64(0)
        let (firedWithOwner, aliveWhileHeld) = onFreshLoopThread { () -> (Bool, Bool) in
            let sentinel = Sentinel(deinits)
            let seen = LoopEventLog<ObjectIdentifier>()
            var timer: RLTimer? = RLTimer(timeInterval: 60, repeats: false) { timer in
                withExtendedLifetime(sentinel) {}
                seen.append(ObjectIdentifier(timer))
            }
            RLRunLoop.current.add(timer!, forMode: .default)
            timer!.fire()   // a one-shot: called with this wrapper, then invalidated
            let owner = seen.values == [ObjectIdentifier(timer!)]
            let alive = deinits.load() == 0
            // The wrapper goes; the C timer (invalid, out of every loop) is
            // freed with it, and with it the box and its closure.
            timer = nil
            _ = try? RLRunLoop.current.run(mode: .default, for: 0)
            return (owner, alive)
        }
        #expect(firedWithOwner)
        #expect(aliveWhileHeld)
        #expect(deinits.load() == 1)
    }

    @Test func aScheduledTimerKeepsItsClosureUntilItFires() {
        let deinits = RLAtomicInt64(0)
        let (aliveBeforeFiring, firedOnce) = onFreshLoopThread { () -> (Bool, Bool) in
            let fired = RLAtomicInt64(0)
            do {
                let sentinel = Sentinel(deinits)
                let timer = RLTimer(timeInterval: 0, repeats: false) { _ in
                    withExtendedLifetime(sentinel) {}
                    _ = fired.add(1)
                }
                RLRunLoop.current.add(timer, forMode: .default)
            }
            // The user's wrapper is gone; the loop keeps the C timer, which
            // keeps the box.
            let alive = deinits.load() == 0
            let deadline = RLTime.now + 30
            while fired.load() == 0 && RLTime.now < deadline {
                _ = try? RLRunLoop.current.run(mode: .default, for: 1, returnAfterSourceHandled: true)
            }
            return (alive, fired.load() == 1)
        }
        #expect(aliveBeforeFiring)
        #expect(firedOnce)
        #expect(deinits.load() == 1)
    }
}

// MARK: - Owned C references

@Suite struct OwnedRefTests {
    @Test func aReferenceTakenIsReleasedOnceWithItsOwner() {
        let timer = RLTimer(timeInterval: 60, repeats: false) { _ in }
        let object = UnsafeRawPointer(timer.ref)
        let before = RLGetRetainCount(object)
        var counts: [RLIndex] = []
        do {
            let taken = OwnedRef(retaining: timer.ref)
            let takenOwns = taken.owned
            #expect(takenOwns)
            counts.append(RLGetRetainCount(object))
            let adopted = OwnedRef(adopting: OpaquePointer(RLRetain(object)!))
            let adoptedOwns = adopted.owned
            #expect(adoptedOwns)
            counts.append(RLGetRetainCount(object))
        }
        counts.append(RLGetRetainCount(object))
        #expect(counts == [before + 1, before + 2, before])
        timer.invalidate()
    }
}

// MARK: - RLRunLoopSchedulable

private let schedulableCounter = RLAtomicInt64(0)

@Suite struct RunLoopSchedulableTests {
    /// add, contains, remove and contains again of one object, through the
    /// generic entry points, in a mode of its own.
    private func addContainsRemove(_ item: some RLRunLoopSchedulable, on loop: RLRunLoop) -> [Bool] {
        let mode = RLRunLoop.Mode("schedulable.\(schedulableCounter.add(1))")
        return [loop.contains(item, forMode: mode), loop.add(item, forMode: mode), loop.contains(item, forMode: mode),
                loop.remove(item, forMode: mode), loop.contains(item, forMode: mode)]
    }

    @Test func everyKindIsAddedRemovedAndFound() throws {
        let results = onFreshLoopThread { () -> [String: [Bool]] in
            let loop = RLRunLoop.current
            var fds: [Int32] = [0, 0]
            precondition(pipe(&fds) == 0)
            defer { close(fds[0]); close(fds[1]) }
            let signal = __libc_current_sigrtmin() + 9
            let name = "swift.test.\(getpid()).schedulable.\(schedulableCounter.add(1))"
            let items: [(String, any RLRunLoopSchedulable)] = [
                ("timer", RLTimer(timeInterval: 60, repeats: false) { _ in }),
                ("observer", try! RLObserver(activities: .entry) { _, _ in }),
                ("source", RLRunLoopSource { }),
                ("descriptor", try! RLFileDescriptorSource(fileDescriptor: fds[0]) { _, _ in }),
                ("socket", try! RLSocket(callBackTypes: .read) { _, _ in }),
                ("signal", try! RLSignalSource(signal: signal) { _, _ in }),
                ("port", RLPort()),
                ("socket port", try! RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")),
                ("message port", try! RLMessagePort(local: name) { _, _ in nil }),
            ]
            var results: [String: [Bool]] = [:]
            for (kind, item) in items { results[kind] = addContainsRemove(item, on: loop) }
            for (_, item) in items {
                switch item {
                case let timer as RLTimer: timer.invalidate()
                case let observer as RLObserver: observer.invalidate()
                case let source as RLRunLoopSource: source.invalidate()
                case let descriptor as RLFileDescriptorSource: descriptor.invalidate()
                case let socket as RLSocket: socket.invalidate()
                case let source as RLSignalSource: source.invalidate()
                case let port as RLPort: port.invalidate()
                case let port as RLMessagePort: port.invalidate()
                default: break
                }
            }
            return results
        }
        #expect(results.count == 9)
        for (kind, result) in results {
            #expect(result == [false, true, true, true, false], "\(kind)")
        }
    }

    @Test func invalidObjectsAreRefused() {
        let results = onFreshLoopThread { () -> [Bool] in
            let loop = RLRunLoop.current
            let timer = RLTimer(timeInterval: 60, repeats: false) { _ in }
            timer.invalidate()
            let socket = try! RLSocket(callBackTypes: .read) { _, _ in }
            socket.invalidate()
            let port = RLPort()
            port.invalidate()
            return [loop.add(timer, forMode: .default), loop.add(socket, forMode: .default),
                    loop.contains(socket, forMode: .default), loop.add(port, forMode: .default)]
        }
        #expect(results == [false, false, false, false])
    }
}
