// swiftthreads-port-checkin — the Threading Programming Guide's port-based
// worker (Listings 3-12 to 3-15, "Configuring a Port-Based Input Source")
// in Swift, with RLPort where the guide uses NSMachPort; the Swift twin of
// examples/c/port_checkin.c, and it prints the same lines:
//
//   - the main thread makes its port, adds it to its run loop and starts a
//     worker thread, handing it the port (launchThread, Listing 3-12);
//   - the worker makes its own port, adds it to its run loop and sends a
//     check-in message to the main thread's port, with its own port as the
//     message's reply port (Listings 3-14 and 3-15);
//   - the main thread's handler keeps that port (Listing 3-13) and from
//     then on sends the worker jobs through it; the worker answers each job
//     through the reply port of the job's message;
//   - a last message tells the worker to exit; its thread ends.
//
// Every message crosses threads as a run-loop callout: each side's state is
// touched by its own thread only, and the replies come back in the order
// of the jobs. The pace changes nothing here (the flags are accepted, as by
// every example).
import ExampleSupport
import SwiftThreads

enum Message {
    static let checkin: UInt32 = 100, job: UInt32 = 101, result: UInt32 = 102, exit: UInt32 = 103
}
let jobs = 5

/// State that only one thread touches (its run loop's callouts), handed to
/// the `@Sendable` port handlers.
final class Confined<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

// MARK: The worker (Listings 3-14, 3-15)

func launchThread(with distantPort: RLPort) {
    let exit = Confined(false)
    // sendCheckinMessage: (Listing 3-15): our own port, in our run loop...
    let myPort = RLPort { message in
        switch message.msgid {
        case Message.job:
            let job = message.components?.first?.data.map { String(decoding: $0, as: UTF8.self) } ?? "?"
            do {
                try message.sendPort?.send([.bytes(Array("\(job) done".utf8))], msgid: Message.result,
                                           replyPort: message.receivePort, timeout: .seconds(5))
            } catch {
                say("  [worker] cannot answer: \(error)")
            }
        case Message.exit:
            say("  [worker] exit message: leaving the run loop")
            exit.value = true
        default:
            break
        }
    }
    RLRunLoop.current.add(myPort, forMode: .default)
    // ...and the check-in message, whose reply port is ours.
    say("  [worker] checking in with the main thread")
    do {
        try distantPort.send(msgid: Message.checkin, replyPort: myPort, timeout: .seconds(5))
    } catch {
        say("  [worker] check-in failed: \(error)")
        return
    }
    while !exit.value {
        _ = try? RLRunLoop.current.run(mode: .default, for: 10, returnAfterSourceHandled: true)
    }
    myPort.invalidate()
}

// MARK: The main thread (Listings 3-12, 3-13)

say("port check-in (Listings 3-12 to 3-15), \(Pace.current.rawValue) pace")
let distantPort = Confined<RLPort?>(nil)  // the worker's port, from its check-in
let results = Confined(0)

// Listing 3-12, launchThread: our port, in our run loop, handed to the new
// thread.
let myPort = RLPort { message in
    switch message.msgid {
    case Message.checkin:
        // Listing 3-13: keep the worker's port for later use.
        distantPort.value = message.sendPort
        say("  [main] check-in received: the worker's port is kept")
    case Message.result:
        let text = message.components?.first?.data.map { String(decoding: $0, as: UTF8.self) } ?? "?"
        say("  [main] \(text)")
        results.value += 1
    default:
        break
    }
}
RLRunLoop.current.add(myPort, forMode: .default)
let worker = RLThread(returning: { launchThread(with: myPort) })
try worker.setName("worker")
try worker.start()

while distantPort.value == nil {
    try RLRunLoop.current.run(mode: .default, for: 10, returnAfterSourceHandled: true)
}
guard let workerPort = distantPort.value else { fatalError("no check-in") }
for i in 1...jobs {
    try workerPort.send([.bytes(Array("job \(i)".utf8))], msgid: Message.job, replyPort: myPort, timeout: .seconds(5))
    say("  [main] sent job \(i)")
}
while results.value < jobs {
    try RLRunLoop.current.run(mode: .default, for: 10, returnAfterSourceHandled: true)
}

try workerPort.send(msgid: Message.exit, timeout: .seconds(5))
_ = try worker.join()
say("  [main] worker gone; its port is \(workerPort.isValid ? "still valid" : "invalid")")
RLRunLoop.current.remove(myPort, forMode: .default)
myPort.invalidate()
say("port check-in: done (\(results.value) results)")
