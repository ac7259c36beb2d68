import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The async side of streams: an input stream's chunks and bytes, a stream's
// events, and what ending an iteration does (the stream leaves the loop,
// its delegate gets the events again).

/// Hands a stream that is not `Sendable` to one other task; the test makes
/// sure only that task uses it meanwhile.
final class HandOver<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Waits in `async` code until `condition` holds (false after a generous
/// bound).
func asyncEventually(_ condition: () -> Bool) async -> Bool {
    let deadline = RLTime.now + 30
    while !condition() {
        if RLTime.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}

@Suite struct StreamSequenceTests {
    @Test func chunksOfAMemoryStream() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let payload = testPayload(100_000)
        let input = RLInputStream(data: RLData(payload))
        var got: [UInt8] = []
        var chunks = 0
        for try await chunk in input.chunks(on: loop, maxLength: 4096) {
            #expect(!chunk.isEmpty && chunk.count <= 4096)
            got += chunk
            chunks += 1
        }
        #expect(got == payload)
        #expect(chunks >= payload.count / 4096)
        // Opened for you, left at its end, not closed.
        #expect(input.streamStatus == .atEnd)
    }

    @Test func bytesOfABoundPairWrittenByAnotherThread() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let (input, output) = try RLStream.boundStreams(bufferSize: 1000)
        let payload = testPayload(30_000)
        let writerSide = HandOver(output)
        let writer = RunLoopTestThread {
            let output = writerSide.value
            output.open()
            var sent = 0
            while sent < payload.count {
                // Blocks while the buffer is full: the reader makes room.
                let n = payload[sent...].withUnsafeBufferPointer {
                    output.write($0.baseAddress!, maxLength: min($0.count, 777))
                }
                if n <= 0 { break }
                sent += n
            }
            output.close()
        }
        var got: [UInt8] = []
        got.reserveCapacity(payload.count)
        for try await byte in input.bytes(on: loop) { got.append(byte) }
        writer.join()
        #expect(got.count == payload.count)
        #expect(got == payload)
    }

    @Test func eventsOfAStream() async {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let input = RLInputStream(data: RLData(testPayload(500)))
        let recorder = EventRecorder()
        input.delegate = recorder
        let events = input.events(on: loop)
        input.open()
        var seen: [RLStream.Event] = []
        var total = 0
        for await event in events {
            seen.append(event)
            if event == .hasBytesAvailable {
                var buffer = [UInt8](repeating: 0, count: 1000)
                total += input.read(&buffer, maxLength: buffer.count)
            }
            if event == .endEncountered { break }
        }
        #expect(seen == [.openCompleted, .hasBytesAvailable, .endEncountered])
        #expect(total == 500)
        // The sequence had the events, not the delegate.
        #expect(recorder.log.values.isEmpty)
    }

    @Test func cancellingTheIterationTakesTheStreamOffTheLoop() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let (input, output) = try RLStream.boundStreams(bufferSize: 64)
        let recorder = EventRecorder()
        input.delegate = recorder
        output.open()
        let received = RLAtomicInt32(0)
        let readerSide = HandOver(input)
        let reader = Task {
            for try await chunk in readerSide.value.chunks(on: loop) { received.add(Int32(chunk.count)) }
            return Task.isCancelled
        }
        _ = output.write([1], maxLength: 1)
        #expect(await asyncEventually { received.load() == 1 })
        reader.cancel()
        // The iteration ends with nil (no error) once cancelled.
        #expect(try await reader.value)
        // Off the loop: a new byte reaches nobody (the open the sequence did
        // may have reached the delegate, if the loop was delivering it as
        // the iteration ended)...
        _ = output.write([2], maxLength: 1)
        try await Task.sleep(for: .milliseconds(50))
        #expect(recorder.log.values.filter { $0 != "input:openCompleted" }.isEmpty)
        // ...until the stream is scheduled again: then its delegate has it
        // (after the open the sequence did, if the sequence ended before
        // the loop had delivered that), once.
        input.schedule(in: loop, forMode: .default)
        #expect(await asyncEventually { recorder.log.values.last == "input:hasBytesAvailable" })
        #expect(recorder.log.values.filter { $0 != "input:openCompleted" } == ["input:hasBytesAvailable"])
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect(input.read(&buffer, maxLength: 4) == 1 && buffer[0] == 2)
        input.remove(from: loop, forMode: .default)
        output.close()
    }

    @Test func leavingTheLoopEndsTheIterationAndKeepsTheUsersSchedule() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let (input, output) = try RLStream.boundStreams(bufferSize: 64)
        let recorder = EventRecorder()
        input.delegate = recorder
        // Scheduled and opened by its owner, whose delegate was told of
        // bytes it did not read.
        input.schedule(in: loop, forMode: .default)
        input.open()
        output.open()
        _ = output.write([1, 2, 3], maxLength: 3)
        #expect(await asyncEventually { recorder.log.count == 2 })
        // The sequence reads them all the same.
        for try await chunk in input.chunks(on: loop) {
            #expect(chunk == [1, 2, 3])
            break
        }
        // Still scheduled after the loop was left: the delegate has the
        // events again.
        _ = output.write([4], maxLength: 1)
        #expect(await asyncEventually { recorder.log.count == 3 })
        #expect(recorder.log.values == ["input:openCompleted", "input:hasBytesAvailable", "input:hasBytesAvailable"])
        input.remove(from: loop, forMode: .default)
        output.close()
        input.close()
    }

    @Test func aNewerSequenceTakesOver() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let input = RLInputStream(data: [1, 2, 3])
        let older = input.events(on: loop)
        let newer = input.events(on: loop)
        // The older one ended when the newer one was made.
        var olderEvents: [RLStream.Event] = []
        for await event in older { olderEvents.append(event) }
        #expect(olderEvents.isEmpty)
        input.open()
        var iterator = newer.makeAsyncIterator()
        #expect(await iterator.next() == .openCompleted)
    }

    @Test func aFailingStreamThrowsItsError() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let missing = try #require(RLInputStream(fileAtPath: "/nonexistent/swiftthreads/chunks"))
        do {
            for try await _ in missing.chunks(on: loop) { Issue.record("a chunk from a missing file") }
            Issue.record("no error from a missing file")
        } catch let error as RLStreamError {
            #expect(error == RLStreamError(domain: .posix, code: ENOENT))
        }
        // Refused connection: the error comes through the loop.
        let port = unusedLoopbackPort()
        let (input, _) = try RLStream.streamsToHost(name: "127.0.0.1", port: Int(port))
        do {
            for try await _ in input.chunks(on: loop) { Issue.record("a chunk from nowhere") }
            Issue.record("no error from a refused connection")
        } catch let error as RLStreamError {
            #expect(error == RLStreamError(domain: .posix, code: ECONNREFUSED))
        }
        // A mode that cannot hold the stream: an error for the chunks, an
        // empty sequence of events.
        let memory = RLInputStream(data: [1])
        do {
            for try await _ in memory.chunks(on: loop, forMode: RLRunLoop.Mode("")) { Issue.record("a chunk") }
            Issue.record("no error for an empty mode")
        } catch let error as RLError {
            #expect(error.code == .invalidArgument)
        }
        #expect(memory.streamStatus == .notOpen)
        var events = 0
        for await _ in memory.events(on: loop, forMode: RLRunLoop.Mode("")) { events += 1 }
        #expect(events == 0)
        // A stream closed by its owner ends the sequence quietly.
        let closed = RLInputStream(data: [1])
        closed.open()
        closed.close()
        var count = 0
        for try await _ in closed.chunks(on: loop) { count += 1 }
        #expect(count == 0)
    }

    @Test func twoTasksCannotReadOneIteratorAtOnce() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let (input, output) = try RLStream.boundStreams(bufferSize: 16)
        output.open()
        let iterator = HandOver(input.chunks(on: loop).makeAsyncIterator())
        let first = Task { () -> [UInt8]? in
            var copy = iterator.value
            return try await copy.next()
        }
        // Wait until the first task is inside next() (it subscribed: the
        // stream is open), then call next() on a copy from here.
        #expect(await asyncEventually { input.streamStatus == .open })
        var second = iterator.value
        do {
            _ = try await second.next()
            Issue.record("a second next() at once was allowed")
        } catch let error as RLError {
            #expect(error.code == .busy)
        }
        _ = output.write([5], maxLength: 1)
        #expect(try await first.value == [5])
        output.close()
    }

    @Test func echoOverLoopbackWithAsyncSequences() async throws {
        let server = TestEchoServer()
        defer { server.stop() }
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let (input, output) = try RLStream.streamsToHost(name: "127.0.0.1", port: Int(server.port))
        let payload = testPayload(100_000)
        let outputSide = HandOver(output)
        let writer = Task { () -> Int in
            let output = outputSide.value
            let events = output.events(on: loop)
            output.open()
            var sent = 0
            for await event in events {
                if event.contains(.errorOccurred) { break }
                guard event.contains(.hasSpaceAvailable) else { continue }
                let n = payload[sent...].withUnsafeBufferPointer {
                    output.write($0.baseAddress!, maxLength: min($0.count, 16_384))
                }
                if n <= 0 { break }
                sent += n
                if sent == payload.count { break }
            }
            output.close()
            return sent
        }
        var received: [UInt8] = []
        for try await chunk in input.chunks(on: loop) { received += chunk }
        #expect(await writer.value == payload.count)
        #expect(received == payload)
        input.close()
    }
}
