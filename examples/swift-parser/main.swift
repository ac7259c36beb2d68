// swiftthreads-threaded-parser — the Cocoa tutorial's "Threaded XML Parser
// with Delegation" in Swift, with Foundation's XMLParser (the tutorial's
// NSXMLParser; libxml2's SAX parser underneath) doing the XML:
//
//   1. A CatalogParser is created with a delegate and remembers the thread
//      that created it (CatalogParser.swift).
//   2. It parses on a background RLThread, pulling the document through an
//      RLInputStream: a file stream, or a socket stream to an HTTP server.
//   3. It never calls the delegate directly: every report (started,
//      progress, finished, failed) is performed on the creating thread
//      (RLThreadBound.perform, not waiting), so the delegate runs where it
//      lives and needs no locks, nor `Sendable`.
//   4. Meanwhile the creating thread runs its run loop, which stays
//      responsive: a repeating RLTimer keeps ticking all through the parse,
//      and the program counts the ticks between the first report and the
//      last.
//
// The document, a catalog of 500 books that the program writes itself, is
// parsed three times: from a file, from a small HTTP server the program
// runs on 127.0.0.1 (LocalHTTPServer.swift; never the network), and from a
// broken copy, to show the failure report. The checks at the end decide
// the exit status; the last line is "swiftthreads-threaded-parser: OK".
//
//   swiftthreads-threaded-parser          0.1 s per chunk, 0.05 s ticks
//   swiftthreads-threaded-parser --tour   0.03 s per chunk, 0.02 s ticks
//   swiftthreads-threaded-parser --fast   5 ms per chunk, 1 ms ticks (tests)
//   swiftthreads-threaded-parser [--fast] FILE|URL
//                                         parses that one document instead
//                                         (a URL on 127.0.0.1 or localhost
//                                         only); exit status 1 if it fails
import Foundation
import ExampleSupport
import SwiftThreads

// MARK: - The delegate: the main thread's controller

final class ParseController: CatalogParserDelegate {
    let home = RLThread.current
    /// The main loop's timer ticks, all along. The timer fires on this
    /// thread; the counter is atomic only because a timer's closure is
    /// `@Sendable`.
    let ticks = RLAtomicInt32(0)
    private var ticksAtStart = 0
    /// Ticks between parserDidStart and the last report.
    private(set) var ticksDuring = 0
    private(set) var progressReports = 0
    /// Delegate calls on another thread than `home`: must stay 0.
    private(set) var callsElsewhere = 0
    private(set) var outcome: Result<CatalogSummary, CatalogParseError>?

    private func checkThread() {
        if RLThread.current != home { callsElsewhere += 1 }
    }

    func parserDidStart(_ parser: CatalogParser) {
        checkThread()
        ticksAtStart = Int(ticks.load())
        say("  [main] parserDidStart: \(parser.source)")
    }

    func parser(_ parser: CatalogParser, didMakeProgress fraction: Double, books: Int) {
        checkThread()
        progressReports += 1
        let width = 30
        let filled = Int(fraction * Double(width) + 0.5)
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        say(String(format: "  [main] progress [%@] %5.1f%%  %3d books  (timer ticks so far: %d)",
                   bar, fraction * 100, books, ticks.load()))
    }

    func parser(_ parser: CatalogParser, didFinish summary: CatalogSummary) {
        checkThread()
        say(String(format: "  [main] parserDidFinish: %d books, total price %.2f, most expensive: %@ (%.2f)",
                   summary.books, summary.totalPrice, summary.priciest, summary.priciestPrice))
        ended(.success(summary))
    }

    func parser(_ parser: CatalogParser, didFailWith error: CatalogParseError) {
        checkThread()
        say("  [main] parserDidFail: \(error)")
        ended(.failure(error))
    }

    private func ended(_ result: Result<CatalogSummary, CatalogParseError>) {
        ticksDuring = Int(ticks.load()) - ticksAtStart
        outcome = result
        // The result is in: the main loop may return.
        RLRunLoop.current.stop()
    }

    var summary: CatalogSummary? { try? outcome?.get() }
    var failed: Bool { if case .failure? = outcome { return true } else { return false } }
}

/// Parses `source` on a background thread while this thread's run loop runs
/// a ticking timer; returns once the delegate has the outcome.
func parseWithDelegate(_ source: String, tick: RLTimeInterval, chunkPause: RLTimeInterval) -> ParseController {
    let controller = ParseController()
    let ticks = controller.ticks
    let timer = RLTimer(timeInterval: tick, repeats: true) { _ in _ = ticks.increment() }
    RLRunLoop.current.add(timer, forMode: .default)

    let parser = CatalogParser(source: source, delegate: controller, chunkPause: chunkPause)
    do {
        try parser.start()
    } catch {
        say("cannot start the parser thread: \(error)")
        exit(1)
    }
    say("  [main] parser started; running the main run loop (a timer ticks every \(tick) s)")
    while controller.outcome == nil {
        RLRunLoop.current.run()
    }
    timer.invalidate()
    say("  [main] the timer ticked \(controller.ticksDuring) times while the parser worked "
        + "(\(controller.progressReports) progress reports): "
        + (controller.ticksDuring > 0 ? "the main loop stayed responsive" : "the parse was over before the first tick"))
    return controller
}

// MARK: - The document

let bookCount = 500

/// The catalog as XML text. Book 217 is the most expensive; a broken copy
/// has an unclosed element half-way.
func makeCatalog(broken: Bool) -> String {
    var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<catalog>\n"
    for i in 1...bookCount {
        let price = i == 217 ? 99.5 : Double(5 + i * 37 % 50)
        xml += String(format: "  <book id=\"%d\"><title>Run Loops, volume %d</title>"
                      + "<author>A. Writer</author><price>%.2f</price></book>\n", i, i, price)
        if broken && i == bookCount / 2 { xml += "  <book><title>unclosed</book>\n" }
    }
    xml += "</catalog>\n"
    return xml
}

/// Writes `text` to a new temporary file; its path.
func writeTemporaryFile(_ text: String) -> String {
    let path = FileManager.default.temporaryDirectory
        .appendingPathComponent("swiftthreads-parser-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).xml").path
    do {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    } catch {
        say("cannot write \(path): \(error)")
        exit(1)
    }
    return path
}

// MARK: - Main

func main() -> Int32 {
    let tick = Pace.pick(0.05, tour: 0.02, fast: 0.001)
    let chunkPause = Pace.pick(0.1, tour: 0.03, fast: 0.005)
    say("swiftthreads-threaded-parser: XMLParser on a background thread, reports performed on the main thread "
        + "(\(Pace.current.rawValue) pace)")
    try? RLThread.current.setName("main")

    // One document of the user's.
    if let source = CommandLine.arguments.dropFirst().first(where: { !$0.hasPrefix("--") }) {
        return parseWithDelegate(source, tick: tick, chunkPause: chunkPause).failed ? 1 : 0
    }

    let catalog = makeCatalog(broken: false)
    say("the document: a catalog of \(bookCount) books, \(catalog.utf8.count) bytes")

    say("--- from a file ---")
    let path = writeTemporaryFile(catalog)
    let fromFile = parseWithDelegate(path, tick: tick, chunkPause: chunkPause)
    try? FileManager.default.removeItem(atPath: path)

    say("--- from a local HTTP server ---")
    let server: LocalHTTPServer
    do {
        server = try LocalHTTPServer(path: "/catalog.xml", body: Array(catalog.utf8))
    } catch {
        say("cannot start the HTTP server on 127.0.0.1: \(error)")
        return 1
    }
    let fromHTTP = parseWithDelegate("http://127.0.0.1:\(server.port)/catalog.xml", tick: tick, chunkPause: chunkPause)
    let served = server.requestsServed
    server.stop()

    say("--- from a broken document ---")
    let brokenPath = writeTemporaryFile(makeCatalog(broken: true))
    let fromBroken = parseWithDelegate(brokenPath, tick: tick, chunkPause: chunkPause)
    try? FileManager.default.removeItem(atPath: brokenPath)

    let same = fromFile.summary != nil && fromFile.summary == fromHTTP.summary
    let elsewhere = fromFile.callsElsewhere + fromHTTP.callsElsewhere + fromBroken.callsElsewhere
    let responsive = fromFile.ticksDuring > 0 && fromHTTP.ticksDuring > 0
    say("file and HTTP gave the same catalog: \(same ? "yes" : "NO")")
    say("every delegate call ran on the main thread: \(elsewhere == 0 ? "yes" : "NO")")
    say("the broken document was reported as a failure: \(fromBroken.failed ? "yes" : "NO")")
    say("the HTTP server answered \(served) request\(served == 1 ? "" : "s")")
    let ok = same && elsewhere == 0 && responsive && fromBroken.failed && served == 1
    say("swiftthreads-threaded-parser: \(ok ? "OK" : "FAILED")")
    return ok ? 0 : 1
}

exit(main())
