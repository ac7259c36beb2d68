internal import CRunLoop

// Streams for `async` code: a stream's events, and an input stream's bytes,
// as async sequences. The stream is scheduled on a run loop that runs
// somewhere (a worker thread's, say); its thread only forwards events, and
// the iterating task reads. Ending an iteration (cancelling its task,
// leaving the loop, dropping the iterator) takes the stream off the loop
// again if the sequence had put it there.

extension RLStream {
    /// The stream's events as an asynchronous sequence.
    ///
    /// Schedules the stream on `runLoop` in `mode` (which must run for
    /// events to come) and takes its events over from the delegate until the
    /// sequence ends: when the iterating task is cancelled, when the loop
    /// that iterates is left, when the sequence is dropped, or when another
    /// sequence of the same stream takes over (the older one then ends).
    /// The sequence then removes the stream from `runLoop` unless the stream
    /// was scheduled there already. The stream is not opened for you: open
    /// it after making the sequence, so that `.openCompleted` is seen.
    ///
    ///     let (input, output) = try RLStream.streamsToHost(name: "127.0.0.1", port: port)
    ///     let events = output.events(on: worker.runLoop!)
    ///     output.open()
    ///     for await event in events where event.contains(.hasSpaceAvailable) {
    ///         _ = output.write(message, maxLength: message.count)
    ///         break
    ///     }
    ///
    /// Events wait in the sequence until taken (they are few: readiness is
    /// reported again only after a read or a write). A mode that cannot be
    /// scheduled in (an empty name) gives a sequence that ends at once.
    public func events(on runLoop: RLRunLoop, forMode mode: RLRunLoop.Mode = .default) -> AsyncStream<Event> {
        let stream = stream, box = box
        return AsyncStream(bufferingPolicy: .unbounded) { continuation in
            // Scheduled before subscribing, so that a sequence replacing
            // another on the same loop never leaves it for a moment. A mode
            // that cannot hold it (an empty name) ends the sequence at once.
            guard box.schedule(stream, on: runLoop, mode: mode, bySequence: true) else {
                continuation.finish()
                return
            }
            let id = box.subscribe(deliver: { continuation.yield($0) }, ended: { continuation.finish() })
            continuation.onTermination = { _ in
                // Off the loop first: events still pending then wait in the
                // stream instead of reaching the delegate meanwhile.
                box.unschedule(stream, from: runLoop, mode: mode, bySequence: true)
                box.unsubscribe(id)
            }
        }
    }
}

extension RLInputStream {
    /// The stream's bytes, in chunks of at most `maxLength`, as an
    /// asynchronous sequence that ends at the end of the stream and throws
    /// its ``RLStreamError`` if it fails.
    ///
    ///     let worker = RLWorkerThread(name: "io")
    ///     try worker.start()
    ///     for try await chunk in input.chunks(on: worker.runLoop!) {
    ///         received.append(contentsOf: chunk)
    ///     }
    ///
    /// The first call to `next()` opens the stream if it is not open yet and
    /// schedules it on `runLoop` in `mode`, which must run: that loop's
    /// thread only forwards the stream's events, and each `next()` reads on
    /// the task's own thread once bytes are there, so a read never blocks —
    /// and nothing is read ahead of the consumer. Until the iteration ends,
    /// the stream's events go to it instead of the delegate; do not read the
    /// stream yourself meanwhile. The iteration ends at the end of the
    /// stream, on its error, when the task is cancelled, when the loop is
    /// left or the iterator dropped, or when another sequence of the stream
    /// takes over; the stream then leaves `runLoop` unless it was scheduled
    /// there already. The stream is not closed: close it when done. Events
    /// the iteration caused but did not take (the open it did, say) reach
    /// the delegate when the stream runs on a loop again, except
    /// `.hasBytesAvailable` once the bytes are gone.
    public func chunks(on runLoop: RLRunLoop, forMode mode: RLRunLoop.Mode = .default,
                       maxLength: Int = 64 * 1024) -> Chunks {
        Chunks(stream: stream, box: box, runLoop: runLoop, mode: mode, maxLength: max(maxLength, 1))
    }

    /// The stream's bytes one at a time (``chunks(on:forMode:maxLength:)``
    /// flattened), like Foundation's `FileHandle.AsyncBytes`.
    public func bytes(on runLoop: RLRunLoop, forMode mode: RLRunLoop.Mode = .default) -> AsyncBytes {
        AsyncBytes(chunks: chunks(on: runLoop, forMode: mode))
    }

    /// The chunks of an input stream: see
    /// ``RLInputStream/chunks(on:forMode:maxLength:)``.
    public struct Chunks: AsyncSequence {
        public typealias Element = [UInt8]
        public typealias Failure = any Error

        fileprivate let stream: CStream
        fileprivate let box: StreamBox
        fileprivate let runLoop: RLRunLoop
        fileprivate let mode: RLRunLoop.Mode
        fileprivate let maxLength: Int

        public func makeAsyncIterator() -> Iterator {
            Iterator(reader: ChunkReader(stream: stream, box: box, runLoop: runLoop, mode: mode,
                                         maxLength: maxLength))
        }

        public struct Iterator: AsyncIteratorProtocol, Sendable {
            public typealias Element = [UInt8]
            public typealias Failure = any Error

            fileprivate let reader: ChunkReader

            /// The next chunk (never empty), nil at the end of the stream or
            /// once the iteration was ended.
            ///
            /// - Throws: the stream's ``RLStreamError`` when it fails;
            ///   `RLError` `.busy` if another copy of this iterator is in
            ///   `next()` at the same time, or the C error if the stream
            ///   cannot be scheduled in the mode (an empty name).
            public mutating func next() async throws -> [UInt8]? {
                try await reader.next()
            }
        }
    }

    /// The bytes of an input stream: see ``RLInputStream/bytes(on:forMode:)``.
    public struct AsyncBytes: AsyncSequence {
        public typealias Element = UInt8
        public typealias Failure = any Error

        fileprivate let chunks: Chunks

        public func makeAsyncIterator() -> Iterator {
            Iterator(chunks: chunks.makeAsyncIterator())
        }

        public struct Iterator: AsyncIteratorProtocol, Sendable {
            public typealias Element = UInt8
            public typealias Failure = any Error

            fileprivate var chunks: Chunks.Iterator
            private var chunk: [UInt8] = []
            private var index = 0

            fileprivate init(chunks: Chunks.Iterator) { self.chunks = chunks }

            public mutating func next() async throws -> UInt8? {
                if index == chunk.count {
                    guard let next = try await chunks.next() else { return nil }
                    chunk = next
                    index = 0
                }
                defer { index += 1 }
                return chunk[index]
            }
        }
    }
}

/// One iteration of ``RLInputStream/Chunks``: waits for the stream's
/// events (forwarded by the run loop's thread) and reads on the iterating
/// task's thread.
private final class ChunkReader: @unchecked Sendable {
    private let stream: CStream
    private let box: StreamBox
    private let runLoop: RLRunLoop
    private let mode: RLRunLoop.Mode
    private let maxLength: Int

    private let mutex = ThreadsMutex()
    private var started = false
    private var ended = false
    private var inNext = false
    private var subscription: UInt64 = 0
    /// An event came since the reader last looked at the stream.
    private var woken = false
    private var waiter: CheckedContinuation<Void, Never>?

    init(stream: CStream, box: StreamBox, runLoop: RLRunLoop, mode: RLRunLoop.Mode, maxLength: Int) {
        self.stream = stream
        self.box = box
        self.runLoop = runLoop
        self.mode = mode
        self.maxLength = maxLength
    }

    deinit {
        // The iterator was dropped (a loop left with `break`).
        end()
    }

    func next() async throws -> [UInt8]? {
        let (entered, first) = mutex.locked { () -> (Bool, Bool) in
            if inNext { return (false, false) }
            inNext = true
            defer { started = true }
            return (true, !started)
        }
        guard entered else {
            throw RLError(code: .busy, message: "RLInputStream.chunks: next() called from two tasks at once")
        }
        defer { mutex.locked { inNext = false } }
        if first { try start() }
        while true {
            if mutex.locked({ ended }) { return nil }
            switch RLStream.Status(rawValue: stream.status) {
            case .open?:
                if stream.isReady { return try readChunk() }
            case .opening?, .reading?, .writing?:
                break
            case .error?:
                let error = stream.error
                end()
                if let error { throw error }
                return nil
            case .atEnd?, .closed?, .notOpen?, nil:
                // Closed by its owner, or never opened because open failed
                // at once (that is status .error, above).
                end()
                return nil
            }
            await waitForEvent()
        }
    }

    /// Schedules the stream, takes its events and opens it if needed.
    private func start() throws(RLError) {
        guard box.schedule(stream, on: runLoop, mode: mode, bySequence: true) else {
            let error = RLError.last()
            mutex.locked { ended = true }
            throw error
        }
        let id = box.subscribe(deliver: { [weak self] _ in self?.wake() }, ended: { [weak self] in self?.end() })
        let unscheduleNow = mutex.locked { () -> Bool in
            subscription = id
            return ended
        }
        if unscheduleNow {
            // Ended (cancelled) before it had subscribed.
            box.unsubscribe(id)
            box.unschedule(stream, from: runLoop, mode: mode, bySequence: true)
            return
        }
        if RLStream.Status(rawValue: stream.status) == .notOpen { _ = stream.open() }
    }

    /// Reads once; the stream said it has bytes (or its end), so this does
    /// not block.
    private func readChunk() throws -> [UInt8]? {
        var got = 0
        let chunk = [UInt8](unsafeUninitializedCapacity: maxLength) { buffer, count in
            got = Int(RLReadStreamRead(stream.pointer, buffer.baseAddress!, RLIndex(maxLength)))
            count = max(got, 0)
        }
        if got > 0 { return chunk }
        let error = got < 0 ? (stream.error.map { $0 as any Error } ?? RLError.last()) : nil
        end()
        if let error { throw error }
        return nil
    }

    private func wake() {
        let waiting = mutex.locked { () -> CheckedContinuation<Void, Never>? in
            defer { waiter = nil }
            if waiter == nil { woken = true }
            return waiter
        }
        waiting?.resume()
    }

    /// Returns after the next event, or at once if one came since the last
    /// look, or when the iteration ends (its task cancelled).
    private func waitForEvent() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = mutex.locked { () -> Bool in
                    if woken || ended {
                        woken = false
                        return true
                    }
                    waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            end()
        }
    }

    /// Ends the iteration (once): no more events, the stream off the loop
    /// if the sequence put it there, a waiting `next()` resumed.
    private func end() {
        let (first, wasStarted, id, waiting) = mutex.locked {
            () -> (Bool, Bool, UInt64, CheckedContinuation<Void, Never>?) in
            let first = !ended
            ended = true
            defer { waiter = nil }
            return (first, subscription != 0, subscription, waiter)
        }
        if first && wasStarted {
            // Off the loop first: events still pending then wait in the
            // stream instead of reaching the delegate meanwhile.
            box.unschedule(stream, from: runLoop, mode: mode, bySequence: true)
            box.unsubscribe(id)
        }
        waiting?.resume()
    }
}
