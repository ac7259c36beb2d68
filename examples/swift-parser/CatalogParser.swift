// The threaded parser and its delegate protocol: Foundation's XMLParser
// (libxml2's SAX parser underneath) runs on a background RLThread, and every
// report goes back to the thread that created the parser by performing on
// it (RLThreadBound.perform), so the delegate runs where it lives and needs
// no locks.
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import ExampleSupport
import SwiftThreads

/// What a catalog holds, as the parser counted it.
struct CatalogSummary: Sendable, Equatable {
    var books = 0
    var totalPrice = 0.0
    var priciest = ""
    var priciestPrice = 0.0
}

/// Why a parse failed.
struct CatalogParseError: Error, CustomStringConvertible {
    let description: String
}

/// The parser's reports. Every method is called on the thread that created
/// the parser, from its run loop (a perform request), in the order the
/// parser made them; the thread must run its loop for them to arrive.
protocol CatalogParserDelegate: AnyObject {
    func parserDidStart(_ parser: CatalogParser)
    /// `fraction` of the document (0…1; 0 if its length is unknown) has
    /// been parsed, with `books` books in it so far.
    func parser(_ parser: CatalogParser, didMakeProgress fraction: Double, books: Int)
    func parser(_ parser: CatalogParser, didFinish summary: CatalogSummary)
    func parser(_ parser: CatalogParser, didFailWith error: CatalogParseError)
}

/// The delegate, held weakly as Cocoa holds delegates.
private struct WeakDelegate {
    weak var delegate: (any CatalogParserDelegate)?
}

/// Parses a book catalog on a background thread: from a file, or from an
/// `http://127.0.0.1:PORT/PATH` URL (a local server only).
///
/// The parser reads its document in small chunks and pauses `chunkPause`
/// after each, as a slow disk or network would make it wait, so that the
/// progress can be watched.
final class CatalogParser: Sendable {
    let source: String
    /// Bound to the thread that created the parser: the background thread
    /// carries it, but only that thread reaches the delegate.
    private let delegate: RLThreadBound<WeakDelegate>
    private let chunkPause: RLTimeInterval

    /// The calling thread is the delegate's: the reports go to it.
    init(source: String, delegate: any CatalogParserDelegate, chunkPause: RLTimeInterval) {
        self.source = source
        self.delegate = RLThreadBound(WeakDelegate(delegate: delegate))
        self.chunkPause = chunkPause
    }

    /// Starts the parse on a new detached thread named "parser"; it ends
    /// after its last report (finished or failed).
    func start() throws(RLError) {
        let thread = RLThread { [self] in parseInBackground() }
        try thread.setName("parser")
        try thread.start()
    }

    // MARK: The background thread

    /// Performs `deliver` on the delegate's thread (queued on its run loop;
    /// this thread goes on at once).
    private func report(_ deliver: @escaping @Sendable (any CatalogParserDelegate, CatalogParser) -> Void) {
        do {
            try delegate.perform { [self] bound in
                if let delegate = bound.delegate { deliver(delegate, self) }
            }
        } catch {
            // The delegate's thread has ended: nobody is left to tell.
            say("  [parser] a report was lost: \(error)")
        }
    }

    private func parseInBackground() {
        report { $0.parserDidStart($1) }
        do {
            let summary = try parse(try Document(opening: source))
            report { $0.parser($1, didFinish: summary) }
        } catch {
            let failure = error as? CatalogParseError ?? CatalogParseError(description: "\(error)")
            report { $0.parser($1, didFailWith: failure) }
        }
    }

    private func parse(_ document: Document) throws -> CatalogSummary {
        let counter = CatalogCounter()
        let input = PacedInputStream(document: document, chunkSize: 4096, pause: chunkPause) { [self] parsed in
            // XMLParser asks for the next chunk once it has parsed the
            // previous ones: the count covers `parsed` bytes.
            let fraction = document.length.map { Double(parsed) / Double(max($0, 1)) } ?? 0
            let books = counter.summary.books
            report { $0.parser($1, didMakeProgress: fraction, books: books) }
        }
        let xml = XMLParser(stream: input)
        xml.delegate = counter
        if xml.parse() { return counter.summary }
        if let failure = counter.failure { throw failure }
        throw CatalogParseError(description: xml.parserError.map { "\($0)" } ?? "the parse failed")
    }
}

// MARK: - SAX callbacks

/// XMLParser's delegate, on the parser thread: counts the books, sums the
/// prices and remembers the most expensive title.
private final class CatalogCounter: NSObject, XMLParserDelegate {
    private(set) var summary = CatalogSummary()
    /// The first error libxml2 reported, with where it was.
    private(set) var failure: CatalogParseError?
    private var text = ""
    private var title = ""

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes attributeDict: [String: String]) {
        text = ""
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        text += string
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?) {
        switch elementName {
        case "book":
            summary.books += 1
        case "title":
            title = text
        case "price":
            let price = Double(text) ?? 0
            summary.totalPrice += price
            if price > summary.priciestPrice {
                summary.priciestPrice = price
                summary.priciest = title
            }
        default:
            break
        }
        text = ""
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: Error) {
        guard failure == nil else { return }
        // The code is libxml2's (xmlParserErrors: 76 is a tag name
        // mismatch). It is printed as a number: on Linux the raw values of
        // XMLParser.ErrorCode (swift-corelibs-foundation) are shifted from
        // libxml2's in this range — 76 reads as standaloneValueError and
        // tagNameMismatchError is 74 — and the NSError has no message.
        let code = (parseError as NSError).code
        failure = CatalogParseError(
            description: "not well-formed (XMLParser error \(code)) at line \(parser.lineNumber)")
    }
}

// MARK: - Reading the document

/// An open document: an RLInputStream (a file stream, or the body of an
/// HTTP response on a socket stream), the body bytes that arrived with the
/// response head, and the length if known.
private struct Document {
    let stream: RLInputStream
    let head: [UInt8]
    let length: Int?

    /// Opens a file path, or an http:// URL on this machine.
    init(opening source: String) throws(CatalogParseError) {
        if source.hasPrefix("http://") {
            self = try Document.fetch(source)
            return
        }
        guard let stream = RLInputStream(fileAtPath: source) else {
            throw CatalogParseError(description: "no file name")
        }
        stream.open()
        if let error = stream.streamError {
            throw CatalogParseError(description: "cannot open \(source): \(error)")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: source)[.size]) as? Int
        self.init(stream: stream, head: [], length: size)
    }

    private init(stream: RLInputStream, head: [UInt8], length: Int?) {
        self.stream = stream
        self.head = head
        self.length = length
    }

    /// GET over a socket stream pair. The streams are not scheduled on a
    /// run loop: their reads and writes block this (background) thread,
    /// which is what it wants.
    private static func fetch(_ source: String) throws(CatalogParseError) -> Document {
        guard let url = URL(string: source), let host = url.host, let port = url.port else {
            throw CatalogParseError(description: "not a URL with a port: \(source)")
        }
        guard ["127.0.0.1", "localhost", "::1"].contains(host) else {
            throw CatalogParseError(description: "only servers on this machine are fetched, not \(host)")
        }
        let streams: (input: RLInputStream, output: RLOutputStream)
        do {
            streams = try RLStream.streamsToHost(name: host, port: port)
        } catch {
            throw CatalogParseError(description: "cannot make streams to \(host):\(port): \(error)")
        }
        streams.input.open()
        streams.output.open()
        let path = url.path.isEmpty ? "/" : url.path
        let request = Array("GET \(path) HTTP/1.0\r\nHost: \(host):\(port)\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBufferPointer {
                streams.output.write($0.baseAddress!, maxLength: $0.count)
            }
            guard n > 0 else {
                throw CatalogParseError(description: "cannot send the request: \(streams.output.streamError.map { "\($0)" } ?? "closed")")
            }
            sent += n
        }
        streams.output.close() // the server reads the end of the request

        // The response head, up to the empty line; what follows it is body.
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        let blank = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil && received.count < 16384 {
            let n = streams.input.read(&buffer, maxLength: buffer.count)
            guard n > 0 else { break }
            received += buffer[..<n]
            headEnd = received.indices.dropLast(3).first { received[$0..<$0 + 4].elementsEqual(blank) }
        }
        guard let headEnd else {
            throw CatalogParseError(description: "no HTTP response head: \(streams.input.streamError.map { "\($0)" } ?? "ended")")
        }
        let lines = String(decoding: received[..<headEnd], as: UTF8.self).split(separator: "\r\n")
        let status = lines.first?.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        guard status == 200 else {
            throw CatalogParseError(description: "HTTP status \(status.map(String.init) ?? "?") for \(path)")
        }
        let contentLength = lines.dropFirst().lazy.compactMap { line -> Int? in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
            return Int(parts[1].trimmingCharacters(in: .whitespaces))
        }.first
        return Document(stream: streams.input, head: Array(received[(headEnd + 4)...]), length: contentLength)
    }
}

/// The input XMLParser pulls from (`XMLParser(stream:)`): the document in
/// chunks of at most `chunkSize` bytes, a pause before each chunk after the
/// first, and `willReadMore` told how many bytes the parser has had (and so
/// has parsed) each time it comes back for more.
private final class PacedInputStream: InputStream {
    private let document: Document
    private let chunkSize: Int
    private let pause: RLTimeInterval
    private let willReadMore: (_ parsedBytes: Int) -> Void
    private var headOffset = 0
    private var handedOver = 0
    private var status: Stream.Status = .notOpen

    init(document: Document, chunkSize: Int, pause: RLTimeInterval,
         willReadMore: @escaping (_ parsedBytes: Int) -> Void) {
        self.document = document
        self.chunkSize = chunkSize
        self.pause = pause
        self.willReadMore = willReadMore
        super.init(data: Data())
    }

    // The document stream is open already (Document opened it).
    override func open() { status = .open }

    override func close() {
        document.stream.close()
        status = .closed
    }

    override var streamStatus: Stream.Status { status }
    override var streamError: Error? { document.stream.streamError }
    override var hasBytesAvailable: Bool { status == .open }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        if handedOver > 0 {
            willReadMore(handedOver)
            RLThread.sleep(forTimeInterval: pause)
        }
        let wanted = min(len, chunkSize)
        let n: Int
        if headOffset < document.head.count {
            n = min(wanted, document.head.count - headOffset)
            document.head.withUnsafeBufferPointer { head in
                buffer.update(from: head.baseAddress! + headOffset, count: n)
            }
            headOffset += n
        } else {
            n = document.stream.read(buffer, maxLength: wanted)
        }
        if n < 0 {
            status = .error
        } else if n == 0 {
            status = .atEnd
        } else {
            handedOver += n
        }
        return n
    }
}
