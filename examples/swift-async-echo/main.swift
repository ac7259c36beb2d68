// swiftthreads-async-echo — a TCP echo server for async code: RLAsyncServer
// (a listening socket as an async sequence of connections) and
// RLAsyncConnection (async reads, writes with backpressure), served by a
// worker thread's run loop.
//
//   swiftthreads-async-echo PORT   serve 127.0.0.1:PORT until Ctrl-C
//   swiftthreads-async-echo        serve a free port to clients of its own:
//                                  four clients at once, each line echoed;
//                                  then a client that reads late, to show
//                                  the writer held back by the watermarks
//
// The server is the README's: one task per connection, echoing each chunk
// as it is read; the peer's close ends its read sequence, and the task then
// half-closes its side.
import ExampleSupport
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Serves every connection of `server` until the server closes; returns
/// how many it served.
func serve(_ server: RLAsyncServer) async throws -> Int {
    try await withThrowingTaskGroup(of: Void.self) { connections in
        var served = 0
        for try await connection in server {
            served += 1
            connections.addTask {
                for try await chunk in connection.inbound {
                    try await connection.write(chunk)   // waits while the peer lags
                }
                connection.shutdownWrite()              // the peer is done: so are we
            }
        }
        try await connections.waitForAll()
        return served
    }
}

/// One client: sends its lines, half-closes, reads everything back.
func client(_ number: Int, port: UInt16) async throws -> Bool {
    let connection = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
    let lines = (1...3).map { "client \(number), line \($0)\n" }
    async let echoed: [UInt8] = {
        var all: [UInt8] = []
        for try await chunk in connection.inbound { all += chunk }
        return all
    }()
    for line in lines { try await connection.write(line) }
    connection.shutdownWrite()
    return try await echoed == Array(lines.joined().utf8)
}

let arguments = CommandLine.arguments.dropFirst().filter { !$0.hasPrefix("--") }
if let text = arguments.first {
    // Serve a given port until a signal.
    guard let port = UInt16(text) else {
        say("usage: swiftthreads-async-echo [PORT]")
        exit(2)
    }
    let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: port))
    say("swiftthreads-async-echo: listening on \(server.address!); Ctrl-C stops it")
    let served = try await serve(server)
    say("swiftthreads-async-echo: served \(served) connections")
    exit(0)
}

let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
let port = server.address!.port!
say("swiftthreads-async-echo: listening on 127.0.0.1, a free port (\(Pace.current.rawValue) pace)")
let serving = Task { try await serve(server) }

// Four clients at once.
let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
    for number in 1...4 { group.addTask { (number, try await client(number, port: port)) } }
    var results: [Int: Bool] = [:]
    for try await (number, ok) in group { results[number] = ok }
    return results
}
for number in 1...4 {
    say("  [client \(number)] 3 lines sent, echoed back whole: \(results[number] == true ? "yes" : "no")")
}

// Backpressure: a client that does not read while 16 MiB come back. Its
// own connection stops reading past 16 KiB buffered, the kernel's buffers
// fill, the server's echo waits, so the server stops reading, and at last
// the client's writes are held back; reading lets everything through.
let late = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port), highWatermark: 16 * 1024,
                                               lowWatermark: 4 * 1024)
let block = (0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
let chunks = (0..<256).map { index -> [UInt8] in
    var chunk = block
    chunk[0] = UInt8(index)
    return chunk
}
let sender = Task {
    for chunk in chunks { try await late.write(chunk) }
    late.shutdownWrite()
}
var heldBack = false
for _ in 0..<3000 where !heldBack {
    heldBack = !late.isWritable
    if !heldBack { try await Task.sleep(for: .milliseconds(10)) }
}
say("  [late client] not reading: its writes were held back by the watermarks: \(heldBack ? "yes" : "no")")
var echoed: [UInt8] = []
echoed.reserveCapacity(chunks.count * block.count)
for try await chunk in late.inbound { echoed.append(contentsOf: chunk) }
try await sender.value
let whole = echoed.count == chunks.count * block.count && chunks.indices.allSatisfy { index in
    echoed.withUnsafeBytes { all in
        chunks[index].withUnsafeBytes { memcmp(all.baseAddress! + index * block.count, $0.baseAddress!, $0.count) == 0 }
    }
}
say("  [late client] reading: all 16 MiB came back whole: \(whole ? "yes" : "no")")

server.close()
let served = try await serving.value
say("  [server] served \(served) connections")
let ok = results.values.allSatisfy { $0 } && results.count == 4 && heldBack && whole && served == 5
say("swiftthreads-async-echo: \(ok ? "OK" : "FAILED")")
exit(ok ? 0 : 1)
