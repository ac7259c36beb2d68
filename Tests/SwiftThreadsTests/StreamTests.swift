import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// RLInputStream / RLOutputStream in Foundation's shapes: memory, file,
// bound-pair and socket streams, polled and driven by a delegate on a run
// loop (the Cocoa echo client over loopback), and their misuse.

/// Bytes that are not all alike, so that a reordering would show.
func testPayload(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
}

/// Records a stream's events as "input:openCompleted"-style strings.
final class EventRecorder: RLStreamDelegate, @unchecked Sendable {
    let log = LoopEventLog<String>()
    var onEvent: ((RLStream, RLStream.Event) -> Void)?

    func stream(_ aStream: RLStream, handle eventCode: RLStream.Event) {
        log.append("\(aStream is RLInputStream ? "input" : "output"):\(eventCode)")
        onEvent?(aStream, eventCode)
    }
}

/// The Cocoa tutorial's echo client over RLInputStream / RLOutputStream:
/// writes `payload` when there is space, closes its output when all is
/// sent, reads the echo until the server closes.
final class EchoStreamClient: RLStreamDelegate {
    let input: RLInputStream
    let output: RLOutputStream
    private let payload: [UInt8]
    private var sent = 0
    private(set) var received: [UInt8] = []
    private(set) var events: [String] = []
    private(set) var finished = false

    init(port: UInt16, payload: [UInt8]) {
        var input: RLInputStream?
        var output: RLOutputStream?
        RLStream.getStreamsToHost(withName: "127.0.0.1", port: Int(port), inputStream: &input, outputStream: &output)
        self.input = input!
        self.output = output!
        self.payload = payload
        for stream in [self.input, self.output] as [RLStream] {
            stream.delegate = self
            stream.schedule(in: .current, forMode: .default)
            stream.open()
        }
    }

    func stream(_ aStream: RLStream, handle eventCode: RLStream.Event) {
        switch (aStream === input, eventCode) {
        case (true, .openCompleted):
            events.append("input open")
        case (false, .openCompleted):
            events.append("output open")
        case (true, .hasBytesAvailable):
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = input.read(&buffer, maxLength: buffer.count)
            if n > 0 { received += buffer.prefix(n) }
        case (false, .hasSpaceAvailable):
            guard sent < payload.count else { return }
            let n = payload[sent...].withUnsafeBufferPointer { output.write($0.baseAddress!, maxLength: min($0.count, 8192)) }
            if n > 0 { sent += n }
            if sent == payload.count {
                // The server sees the end after the last byte and closes.
                output.close()
                output.remove(from: .current, forMode: .default)
                events.append("output closed")
            }
        case (true, .endEncountered):
            events.append("input end")
            input.close()
            input.remove(from: .current, forMode: .default)
            finished = true
        case (_, .errorOccurred):
            events.append("error \(aStream.streamError.map { "\($0)" } ?? "?")")
            finished = true
        default:
            break
        }
    }
}

@Suite struct StreamTests {
    @Test func memoryInputStreamPolled() {
        let payload = testPayload(1000)
        let input = RLInputStream(data: RLData(payload))
        #expect(input.streamStatus == .notOpen)
        #expect(!input.hasBytesAvailable)
        input.open()
        #expect(input.streamStatus == .open)
        #expect(input.streamError == nil)
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 300)
        while input.hasBytesAvailable {
            let n = input.read(&buffer, maxLength: buffer.count)
            #expect(n > 0)
            got += buffer.prefix(max(n, 0))
        }
        #expect(got == payload)
        #expect(input.streamStatus == .atEnd)
        #expect(input.read(&buffer, maxLength: buffer.count) == 0)
        input.close()
        #expect(input.streamStatus == .closed)
        input.close()
        #expect(input.streamStatus == .closed)
    }

    @Test func memoryOutputStream() {
        let output = RLOutputStream(toMemory: ())
        #expect(output.dataWrittenToMemory == RLData())
        output.open()
        #expect(output.hasSpaceAvailable)
        let first: [UInt8] = [1, 2, 3]
        #expect(output.write(first, maxLength: 3) == 3)
        #expect(output.write([4, 5], maxLength: 2) == 2)
        #expect(output.dataWrittenToMemory == [1, 2, 3, 4, 5])
        #expect(output.property(forKey: .dataWrittenToMemoryStreamKey) as? RLData == [1, 2, 3, 4, 5])
        #expect(output.property(forKey: RLStream.PropertyKey("other")) == nil)
        #expect(RLOutputStream.toMemory().dataWrittenToMemory == RLData())
        output.close()
        #expect(output.write(first, maxLength: 3) == -1)
        #expect(RLError.last().code == .invalidState)
    }

    @Test func fileStreams() throws {
        let path = "/tmp/swiftthreads-stream-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        let payload = testPayload(10_000)
        let output = try #require(RLOutputStream(toFileAtPath: path, append: false))
        output.open()
        #expect(output.streamStatus == .open)
        var sent = 0
        while sent < payload.count {
            let n = payload[sent...].withUnsafeBufferPointer { output.write($0.baseAddress!, maxLength: $0.count) }
            #expect(n > 0)
            if n <= 0 { break }
            sent += n
        }
        output.close()
        let input = try #require(RLInputStream(fileAtPath: path))
        input.open()
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = input.read(&buffer, maxLength: buffer.count)
            if n <= 0 {
                #expect(n == 0)
                break
            }
            got += buffer.prefix(n)
        }
        #expect(got == payload)
        #expect(input.streamStatus == .atEnd)
        // Not usable.
        #expect(RLOutputStream(toFileAtPath: "", append: false) == nil)
        #expect(RLInputStream(fileAtPath: "") == nil)
    }

    /// The file's bytes as a string.
    private func contents(_ path: String) throws -> String {
        let input = try #require(RLInputStream(fileAtPath: path))
        input.open()
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while case let n = input.read(&buffer, maxLength: buffer.count), n > 0 { got += buffer.prefix(n) }
        return String(decoding: got, as: UTF8.self)
    }

    private func write(_ text: String, to output: RLOutputStream) {
        let bytes = Array(text.utf8)
        #expect(output.write(bytes, maxLength: bytes.count) == bytes.count)
    }

    @Test func outputStreamAppendsToAFile() throws {
        let path = "/tmp/swiftthreads-append-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        // Appending to a missing file creates it.
        let first = try #require(RLOutputStream(toFileAtPath: path, append: true))
        #expect(first.property(forKey: .appendToFileKey) as? Bool == true)
        first.open()
        write("hello", to: first)
        first.close()
        let second = try #require(RLOutputStream(toFileAtPath: path, append: true))
        second.open()
        write(" world", to: second)
        // Appending is chosen before open().
        #expect(second.setProperty(false, forKey: .appendToFileKey) == false)
        #expect(RLError.last().code == .invalidState)
        second.close()
        #expect(try contents(path) == "hello world")
        // append: false truncates.
        let third = try #require(RLOutputStream(toFileAtPath: path, append: false))
        #expect(third.property(forKey: .appendToFileKey) as? Bool == false)
        third.open()
        write("X", to: third)
        third.close()
        #expect(try contents(path) == "X")
    }

    @Test func fileOffsetProperty() throws {
        let path = "/tmp/swiftthreads-offset-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        let output = try #require(RLOutputStream(toFileAtPath: path, append: false))
        output.open()
        write("hello world", to: output)
        #expect(output.property(forKey: .fileCurrentOffsetKey) as? Int == 11)
        output.close()
        let input = try #require(RLInputStream(fileAtPath: path))
        #expect(input.property(forKey: .fileCurrentOffsetKey) == nil) // nothing set, not open
        #expect(input.setProperty(6, forKey: .fileCurrentOffsetKey))
        #expect(input.property(forKey: .fileCurrentOffsetKey) as? Int == 6)
        input.open()
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(input.read(&buffer, maxLength: 5) == 5)
        #expect(String(decoding: buffer.prefix(5), as: UTF8.self) == "world")
        #expect(input.property(forKey: .fileCurrentOffsetKey) as? Int == 11)
        #expect(input.setProperty(0, forKey: .fileCurrentOffsetKey)) // a seek
        #expect(input.read(&buffer, maxLength: 5) == 5)
        #expect(String(decoding: buffer.prefix(5), as: UTF8.self) == "hello")
        // Misuse: wrong types, negative offsets, keys of other streams.
        #expect(input.setProperty(-1, forKey: .fileCurrentOffsetKey) == false)
        #expect(RLError.last().code == .invalidArgument)
        #expect(input.setProperty("3", forKey: .fileCurrentOffsetKey) == false)
        #expect(input.setProperty(true, forKey: .fileCurrentOffsetKey) == false)
        #expect(input.setProperty(true, forKey: .appendToFileKey) == false)
        #expect(RLError.last().code == .notFound)
        #expect(input.property(forKey: .dataWrittenToMemoryStreamKey) == nil)
        #expect(input.property(forKey: RLStream.PropertyKey("nope")) == nil)
        #expect(RLError.last().code == .notFound)
        #expect(input.property(forKey: .fileCurrentOffsetKey) as? Int == 5)
    }

    @Test func socketStreamProperties() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[1]) }
        let (input, output) = try RLStream.streams(withSocket: pair[0])
        #expect(input.property(forKey: .socketNativeHandleKey) as? Int32 == pair[0])
        #expect(output.property(forKey: .shouldCloseNativeSocketKey) as? Bool == false)
        #expect(input.setProperty(pair[0], forKey: .socketNativeHandleKey) == false) // read-only
        #expect(input.setProperty(true, forKey: .shouldCloseNativeSocketKey))
        #expect(output.property(forKey: .shouldCloseNativeSocketKey) as? Bool == true)
        #expect(output.property(forKey: .fileCurrentOffsetKey) == nil)
    }

    @Test func openingAFileThatDoesNotExistFails() throws {
        let input = try #require(RLInputStream(fileAtPath: "/nonexistent/swiftthreads/file"))
        input.open()
        #expect(input.streamStatus == .error)
        #expect(input.streamError == RLStreamError(domain: .posix, code: ENOENT))
        #expect(input.streamError?.description.contains("No such file") == true)
        var buffer = [UInt8](repeating: 0, count: 8)
        // Reading after the error is misuse: -1, and the error stays.
        #expect(input.read(&buffer, maxLength: 8) == -1)
        #expect(input.streamError?.code == ENOENT)
    }

    @Test func delegateEventsOfAMemoryStreamOnARunLoop() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let input = RLInputStream(data: RLData(testPayload(100)))
            let recorder = EventRecorder()
            var total = 0
            recorder.onEvent = { stream, event in
                guard event == .hasBytesAvailable, let input = stream as? RLInputStream else { return }
                var buffer = [UInt8](repeating: 0, count: 64)
                total += max(input.read(&buffer, maxLength: buffer.count), 0)
            }
            input.delegate = recorder
            #expect(input.delegate === recorder)
            input.schedule(in: loop, forMode: .default)
            input.schedule(in: loop, forMode: .default) // twice: no-op
            input.open()
            _ = loop.runUntil { recorder.log.values.last == "input:endEncountered" }
            input.remove(from: loop, forMode: .default)
            input.remove(from: loop, forMode: .default) // not scheduled: no-op
            input.close()
            return recorder.log.values + ["\(total)"]
        }
        #expect(log == ["input:openCompleted", "input:hasBytesAvailable", "input:hasBytesAvailable",
                        "input:endEncountered", "100"])
    }

    @Test func eventsWaitUntilTheStreamIsScheduled() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let input = RLInputStream(data: [1, 2, 3])
            let recorder = EventRecorder()
            input.delegate = recorder
            input.open()
            _ = try? loop.run(mode: .default, for: 0)
            recorder.log.append("scheduling")
            input.schedule(in: loop, forMode: .default)
            _ = loop.runUntil { recorder.log.count == 3 }
            input.close()
            keep.invalidate()
            return recorder.log.values
        }
        #expect(log == ["scheduling", "input:openCompleted", "input:hasBytesAvailable"])
    }

    @Test func readinessThatIsGoneIsNotDelivered() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let (input, output) = try! RLStream.boundStreams(bufferSize: 8)
            let recorder = EventRecorder()
            input.delegate = recorder
            input.schedule(in: loop, forMode: .default)
            input.open()
            output.open()
            _ = output.write([1], maxLength: 1)
            // Read before the loop delivers the event the byte caused: a
            // delegate told of it now would block in its read.
            var buffer = [UInt8](repeating: 0, count: 4)
            #expect(input.read(&buffer, maxLength: 4) == 1)
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            recorder.log.append("wrote 2")
            // New bytes: told, once.
            _ = output.write([2], maxLength: 1)
            _ = loop.runUntil { recorder.log.count == 3 }
            _ = try? loop.run(mode: .default, for: 0)
            input.close()
            output.close()
            keep.invalidate()
            return recorder.log.values
        }
        #expect(log == ["input:openCompleted", "wrote 2", "input:hasBytesAvailable"])
    }

    @Test func aDelegateIsHeldWeakly() {
        let input = RLInputStream(data: [1])
        do {
            let recorder = EventRecorder()
            input.delegate = recorder
            #expect(input.delegate != nil)
        }
        #expect(input.delegate == nil)
    }

    @Test func boundStreams() throws {
        var input: RLInputStream?
        var output: RLOutputStream?
        RLStream.getBoundStreams(withBufferSize: 4, inputStream: &input, outputStream: &output)
        let reader = try #require(input)
        let writer = try #require(output)
        reader.open()
        writer.open()
        #expect(!reader.hasBytesAvailable)
        #expect(writer.hasSpaceAvailable)
        // At most the buffer size goes in at once.
        #expect(writer.write([1, 2, 3, 4, 5, 6], maxLength: 6) == 4)
        #expect(!writer.hasSpaceAvailable)
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(reader.read(&buffer, maxLength: 8) == 4)
        #expect(Array(buffer.prefix(4)) == [1, 2, 3, 4])
        #expect(writer.write([9], maxLength: 1) == 1)
        writer.close()
        #expect(reader.read(&buffer, maxLength: 8) == 1)
        #expect(reader.read(&buffer, maxLength: 8) == 0)
        #expect(reader.streamStatus == .atEnd)
        // The Swift form; writing after the reader closed is EPIPE.
        let pair = try RLStream.boundStreams(bufferSize: 16)
        pair.input.open()
        pair.output.open()
        pair.input.close()
        #expect(pair.output.write([1], maxLength: 1) == -1)
        #expect(pair.output.streamStatus == .error)
        #expect(pair.output.streamError == RLStreamError(domain: .posix, code: EPIPE))
    }

    @Test func theCocoaEchoClientOverLoopback() {
        let server = TestEchoServer()
        defer { server.stop() }
        let payload = testPayload(200_000)
        let port = server.port
        let (events, received) = onFreshLoopThread { () -> ([String], [UInt8]) in
            let client = EchoStreamClient(port: port, payload: payload)
            _ = RLRunLoop.current.runUntil(timeout: .seconds(60)) { client.finished }
            return (client.events, client.received)
        }
        #expect(Set(events.prefix(2)) == ["input open", "output open"])
        #expect(Array(events.dropFirst(2)) == ["output closed", "input end"])
        #expect(received.count == payload.count)
        #expect(received == payload)
    }

    @Test func connectionRefusedIsAnErrorEvent() {
        let port = unusedLoopbackPort()
        let (log, error) = onFreshLoopThread { () -> ([String], RLStreamError?) in
            let pair = try! RLStream.streamsToHost(name: "127.0.0.1", port: Int(port))
            let recorder = EventRecorder()
            pair.input.delegate = recorder
            pair.input.schedule(in: .current, forMode: .default)
            pair.input.open()
            #expect(pair.input.streamStatus == .opening || pair.input.streamStatus == .error)
            _ = RLRunLoop.current.runUntil { recorder.log.count == 1 }
            pair.input.close()
            return (recorder.log.values, pair.input.streamError)
        }
        #expect(log == ["input:errorOccurred"])
        #expect(error == RLStreamError(domain: .posix, code: ECONNREFUSED))
    }

    @Test func streamsOverAnExistingSocket() throws {
        let (mine, theirs) = testSocketPair()
        defer {
            close(mine)
            close(theirs)
        }
        let pair = try RLStream.streams(withSocket: mine)
        pair.input.open()
        pair.output.open()
        #expect(pair.output.write([7, 8, 9], maxLength: 3) == 3)
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(recv(theirs, &buffer, 8, 0) == 3)
        testWrite(theirs, [4, 2])
        #expect(pair.input.read(&buffer, maxLength: 8) == 2)
        #expect(Array(buffer.prefix(2)) == [4, 2])
        // Closing the output shuts the sending side down: the peer reads the end.
        pair.output.close()
        #expect(recv(theirs, &buffer, 8, 0) == 0)
        pair.input.close()
        // The streams never close a socket they were given.
        #expect(inodeOf(mine) != nil)
    }

    @Test func misuse() throws {
        var input: RLInputStream? = RLInputStream(data: [1])
        var output: RLOutputStream? = RLOutputStream(toMemory: ())
        // Bad hosts and ports give no streams (and clear the outputs).
        RLStream.getStreamsToHost(withName: "", port: 80, inputStream: &input, outputStream: &output)
        #expect(input == nil && output == nil)
        for port in [-1, 65536, Int.max] {
            input = RLInputStream(data: [1])
            RLStream.getStreamsToHost(withName: "127.0.0.1", port: port, inputStream: &input, outputStream: nil)
            #expect(input == nil)
        }
        #expect(throws: RLError.self) { _ = try RLStream.streamsToHost(name: "127.0.0.1", port: 70_000) }
        #expect(throws: RLError.self) { _ = try RLStream.streamsToHost(name: "", port: 1) }
        // One side only is fine.
        RLStream.getStreamsToHost(withName: "127.0.0.1", port: 9, inputStream: nil, outputStream: &output)
        #expect(output != nil)
        RLStream.getBoundStreams(withBufferSize: 0, inputStream: &input, outputStream: &output)
        #expect(input == nil && output == nil)
        #expect(throws: RLError.self) { _ = try RLStream.boundStreams(bufferSize: -1) }
        #expect(throws: RLError.self) { _ = try RLStream.streams(withSocket: -1) }
        let pipe = TestPipe()
        defer { pipe.closeBoth() }
        #expect(throws: RLError.self) { _ = try RLStream.streams(withSocket: pipe.readEnd) }

        // Reading or writing a stream that is not open.
        let notOpen = RLInputStream(data: [1, 2])
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect(notOpen.read(&buffer, maxLength: 4) == -1)
        #expect(RLError.last().code == .invalidState)
        notOpen.open()
        notOpen.open() // twice: changes nothing
        #expect(notOpen.streamStatus == .open)
        #expect(notOpen.read(&buffer, maxLength: -1) == -1)
        #expect(RLError.last().code == .invalidArgument)
        #expect(notOpen.read(&buffer, maxLength: 4) == 2) // nothing was lost
        var bufferPointer: UnsafeMutablePointer<UInt8>?
        var length = 0
        #expect(!notOpen.getBuffer(&bufferPointer, length: &length))

        // A stream scheduled in a mode that cannot hold it stays unscheduled.
        let memory = RLInputStream(data: [1])
        memory.schedule(in: RLRunLoop.current, forMode: RLRunLoop.Mode(""))
        memory.remove(from: RLRunLoop.current, forMode: RLRunLoop.Mode(""))
    }

    @Test func closingFromTheHandlerStopsEvents() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let (input, output) = try! RLStream.boundStreams(bufferSize: 64)
            let recorder = EventRecorder()
            recorder.onEvent = { stream, event in
                if event == .hasBytesAvailable {
                    // Closing and unscheduling inside the callback.
                    stream.close()
                    stream.remove(from: .current, forMode: .default)
                }
            }
            input.delegate = recorder
            input.schedule(in: loop, forMode: .default)
            input.open()
            output.open()
            _ = output.write([1], maxLength: 1)
            _ = loop.runUntil { recorder.log.count == 2 }
            _ = output.write([2], maxLength: 1)
            output.close()
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            keep.invalidate()
            return recorder.log.values + ["\(input.streamStatus)"]
        }
        #expect(log == ["input:openCompleted", "input:hasBytesAvailable", "closed"])
    }
}
