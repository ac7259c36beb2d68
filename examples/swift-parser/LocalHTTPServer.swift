// A tiny HTTP/1.0 server on 127.0.0.1 (never the network) that serves one
// document: an RLSocket listening on a worker thread's run loop, each
// connection an RLSocket whose data callback collects the request and
// answers it.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftThreads

final class LocalHTTPServer: Sendable {
    let port: UInt16
    private let worker = RLWorkerThread(name: "http-server")
    private let listener: RLSocket
    private let served = RLAtomicInt32(0)

    /// Starts serving `body` at `path` on a free port of 127.0.0.1.
    init(path: String, body: [UInt8], contentType: String = "application/xml") throws {
        try worker.start()
        let served = self.served
        listener = try RLSocket(callBackTypes: .accept) { _, event in
            guard case .accept(let fd, _) = event else { return }
            // This callout and the connection's run on the worker thread.
            let request = RLThreadBound(RequestBytes())
            let connection = try? RLSocket(nativeHandle: fd, callBackTypes: .data) { connection, event in
                guard case .data(let bytes, _) = event else { return }
                request.value.bytes += bytes
                // Wait for the whole head (a client may send it in pieces);
                // an early end is answered as it is.
                guard bytes.isEmpty || request.value.headIsComplete else { return }
                let found = request.value.bytes.starts(with: Array("GET \(path) ".utf8))
                let head = found
                    ? "HTTP/1.0 200 OK\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n\r\n"
                    : "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                // One blocking send of the whole response, then close
                // (HTTP/1.0: the end of the connection is the end of it).
                try? connection.send(bytes: Array(head.utf8) + (found ? body : []))
                connection.invalidate()
                _ = served.increment()
            }
            guard let connection else {
                close(fd)
                return
            }
            RLRunLoop.current.add(connection, forMode: .default)
        }
        try listener.setAddress(.ipv4(loopbackPort: 0))
        port = listener.address?.port ?? 0
        guard let loop = worker.runLoop, loop.add(listener, forMode: .default) else {
            throw RLError.last()
        }
    }

    /// Requests answered so far.
    var requestsServed: Int { Int(served.load()) }

    /// Stops listening and stops the worker (it returns once the thread is
    /// gone).
    func stop() {
        listener.invalidate()
        try? worker.stop()
    }
}

/// One connection's request bytes so far, on the server's worker thread.
private final class RequestBytes {
    var bytes: [UInt8] = []

    var headIsComplete: Bool {
        bytes.count >= 4 && bytes.indices.dropLast(3).contains {
            bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10
        }
    }
}
