/*
 * threaded_parser.c — the tutorial's "Threaded XML Parser with Delegation",
 * in C, with expat (Debian's libexpat1-dev) doing the XML.
 *
 * The pattern:
 *   1. A parser is created with a delegate (callbacks and their context)
 *      and remembers the thread that created it.
 *   2. It parses on a background thread, reading the document through an
 *      RLReadStream: a file stream, or a socket stream to an HTTP server.
 *   3. It never calls the delegate directly: every report (started,
 *      progress, finished, failed) is performed on the creating thread
 *      (RLThreadPerformWithRelease, not waiting), so the delegate runs
 *      where it lives and needs no locks.
 *   4. Meanwhile the creating thread runs its run loop, which stays
 *      responsive: a repeating timer keeps ticking all through the parse,
 *      and the program counts the ticks that fell between the parser's
 *      first report and its last.
 *
 * The document is a catalog of books that the program writes itself. It
 * is parsed three times: from a file, from a small HTTP server that the
 * program runs on a thread of its own on 127.0.0.1 (never the network),
 * and once more from a broken copy, to show the failure report.
 *
 * The parser pauses briefly after each chunk it reads, as a slow disk or
 * network would make it wait, so that the progress can be watched; the
 * pace changes only that pause and the timer's interval.
 *
 *   threaded_parser            0.1 s per chunk, 0.05 s ticks
 *   threaded_parser --tour     0.03 s per chunk
 *   threaded_parser --fast     5 ms per chunk, 1 ms ticks (tests)
 */
#include "example_support.h"

#include <expat.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

enum { kBooks = 500, kChunk = 4096 };

/* ---- the parser and its delegate ---- */

typedef struct CatalogSummary {
    int books;
    double totalPrice;
    char priciest[64];
    double priciestPrice;
} CatalogSummary;

typedef struct Parser Parser;

/* Every callback runs on the thread that created the parser, from its
 * run loop. */
typedef struct ParserDelegate {
    void (*parserDidStart)(Parser *parser, const char *source, void *info);
    void (*parserDidMakeProgress)(Parser *parser, double fraction, int books, void *info);
    void (*parserDidFinish)(Parser *parser, const CatalogSummary *summary, void *info);
    void (*parserDidFail)(Parser *parser, const char *message, void *info);
    void *info;
} ParserDelegate;

struct Parser {
    char *url;                  /* a file path, or http://127.0.0.1:PORT/PATH */
    ParserDelegate delegate;
    RLThreadRef delegateThread; /* retained: the thread that created the parser */
    RLTimeInterval chunkPause;
    /* Below: the background thread's own. */
    XML_Parser xml;
    CatalogSummary summary;
    char text[64]; /* the character data of the element being read */
    size_t textLength;
    bool inText;
    char title[64]; /* the current book's */
};

/* One report on its way to the delegate's thread. */
typedef enum ReportKind { kReportStart, kReportProgress, kReportFinish, kReportFail } ReportKind;
typedef struct Report {
    Parser *parser;
    ReportKind kind;
    double fraction;
    int books;
    CatalogSummary summary;
    char message[160];
} Report;

/* Runs on the delegate's thread. */
static void deliver_report(void *arg) {
    Report *report = arg;
    Parser *parser = report->parser;
    ParserDelegate *d = &parser->delegate;
    switch (report->kind) {
    case kReportStart: d->parserDidStart(parser, parser->url, d->info); break;
    case kReportProgress: d->parserDidMakeProgress(parser, report->fraction, report->books, d->info); break;
    case kReportFinish: d->parserDidFinish(parser, &report->summary, d->info); break;
    case kReportFail: d->parserDidFail(parser, report->message, d->info); break;
    }
}

/* Runs on the background thread: hands a copy of the report to the
 * delegate's thread and goes on at once. The perform request owns the
 * copy and frees it after delivery. */
static void post_report(Parser *parser, Report report) {
    Report *copy = malloc(sizeof *copy);
    if (!copy) {
        fprintf(stderr, "threaded_parser: out of memory\n");
        exit(1);
    }
    report.parser = parser;
    *copy = report;
    EXAMPLE_CHECK(RLThreadPerformWithRelease(parser->delegateThread, deliver_report, copy, free, NULL, false));
}

/* ---- expat's callbacks (background thread) ---- */

static void on_start(void *userData, const XML_Char *name, const XML_Char **attributes) {
    Parser *parser = userData;
    (void)attributes;
    parser->inText = strcmp(name, "title") == 0 || strcmp(name, "price") == 0;
    parser->textLength = 0;
}

static void on_text(void *userData, const XML_Char *s, int length) {
    Parser *parser = userData;
    if (!parser->inText) return;
    size_t room = sizeof parser->text - 1 - parser->textLength;
    size_t take = (size_t)length < room ? (size_t)length : room;
    memcpy(parser->text + parser->textLength, s, take);
    parser->textLength += take;
}

static void on_end(void *userData, const XML_Char *name) {
    Parser *parser = userData;
    CatalogSummary *summary = &parser->summary;
    parser->text[parser->textLength] = '\0';
    if (strcmp(name, "book") == 0) {
        summary->books++;
    } else if (strcmp(name, "title") == 0) {
        snprintf(parser->title, sizeof parser->title, "%s", parser->text);
    } else if (strcmp(name, "price") == 0) {
        double price = strtod(parser->text, NULL);
        summary->totalPrice += price;
        if (price > summary->priciestPrice) {
            summary->priciestPrice = price;
            snprintf(summary->priciest, sizeof summary->priciest, "%s", parser->title);
        }
    }
    parser->inText = false;
}

/* ---- reading the document (background thread) ---- */

/* Opens the document as a read stream; for http:// URLs, sends the
 * request and reads the response head, leaving the body in *body (its
 * first bytes) and *length (the Content-Length). NULL and *error set if
 * it cannot. */
static RLReadStreamRef open_document(Parser *parser, char *body, size_t *bodyLength, long *length,
                                     char *error, size_t errorSize) {
    *bodyLength = 0;
    *length = -1;
    unsigned port = 0;
    char path[128];
    if (sscanf(parser->url, "http://127.0.0.1:%u%127s", &port, path) != 2) {
        RLReadStreamRef file = RLReadStreamCreateWithFilePath(NULL, parser->url);
        if (!file || !RLReadStreamOpen(file)) {
            snprintf(error, errorSize, "cannot open %s: %s", parser->url, RLErrorGetLast().message);
            if (file) RLRelease(file);
            return NULL;
        }
        struct stat st;
        if (stat(parser->url, &st) == 0) *length = (long)st.st_size;
        return file;
    }
    /* The stream pair connects without blocking a run loop; Read and Write
     * block this thread, which is what a background parser wants. */
    RLReadStreamRef in;
    RLWriteStreamRef out;
    EXAMPLE_CHECK(RLStreamCreatePairWithSocketToHost(NULL, "127.0.0.1", port, &in, &out));
    EXAMPLE_CHECK(RLReadStreamOpen(in));
    EXAMPLE_CHECK(RLWriteStreamOpen(out));
    char request[256];
    int n = snprintf(request, sizeof request, "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%u\r\n\r\n", path, port);
    if (RLWriteStreamWrite(out, (const uint8_t *)request, n) != n) {
        RLStreamError e = RLWriteStreamGetError(out);
        snprintf(error, errorSize, "cannot send the request: %s", strerror((int)e.error));
        RLRelease(out);
        RLRelease(in);
        return NULL;
    }
    RLWriteStreamClose(out);
    RLRelease(out);
    /* The response head: up to the empty line. */
    char head[2048];
    size_t got = 0;
    char *end = NULL;
    while (!end && got < sizeof head - 1) {
        RLIndex r = RLReadStreamRead(in, (uint8_t *)head + got, (RLIndex)(sizeof head - 1 - got));
        if (r <= 0) break;
        got += (size_t)r;
        head[got] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    int status = 0;
    if (!end || sscanf(head, "HTTP/1.%*d %d", &status) != 1 || status != 200) {
        snprintf(error, errorSize, "bad HTTP response (status %d)", status);
        RLRelease(in);
        return NULL;
    }
    const char *cl = strstr(head, "Content-Length: ");
    if (cl) *length = strtol(cl + 16, NULL, 10);
    *bodyLength = got - (size_t)(end + 4 - head);
    memcpy(body, end + 4, *bodyLength);
    return in;
}

/* Feeds bytes to expat; false (and the message) if the document is not
 * well-formed. */
static bool feed(Parser *parser, const char *bytes, size_t length, bool last, char *error, size_t errorSize) {
    if (XML_Parse(parser->xml, bytes, (int)length, last) != XML_STATUS_ERROR) return true;
    snprintf(error, errorSize, "%s at line %lu", XML_ErrorString(XML_GetErrorCode(parser->xml)),
             (unsigned long)XML_GetCurrentLineNumber(parser->xml));
    return false;
}

static void *parse_in_background(void *arg) {
    Parser *parser = arg;
    post_report(parser, (Report){.kind = kReportStart});
    parser->xml = XML_ParserCreate(NULL);
    EXAMPLE_CHECK(parser->xml != NULL);
    XML_SetUserData(parser->xml, parser);
    XML_SetElementHandler(parser->xml, on_start, on_end);
    XML_SetCharacterDataHandler(parser->xml, on_text);

    char chunk[kChunk];
    char error[160] = "";
    size_t first = 0;
    long length = -1;
    RLReadStreamRef stream = open_document(parser, chunk, &first, &length, error, sizeof error);
    bool ok = stream != NULL;
    long done = 0;
    if (ok && first > 0) {
        ok = feed(parser, chunk, first, false, error, sizeof error);
        done += (long)first;
    }
    while (ok) {
        RLIndex n = RLReadStreamRead(stream, (uint8_t *)chunk, sizeof chunk);
        if (n < 0) {
            snprintf(error, sizeof error, "read failed: %s", strerror((int)RLReadStreamGetError(stream).error));
            ok = false;
            break;
        }
        ok = feed(parser, chunk, (size_t)n, n == 0, error, sizeof error);
        if (n == 0 || !ok) break;
        done += (long)n;
        post_report(parser, (Report){.kind = kReportProgress,
                                     .fraction = length > 0 ? (double)done / (double)length : 0,
                                     .books = parser->summary.books});
        RLThreadSleepForTimeInterval(parser->chunkPause);
    }
    if (stream) {
        RLReadStreamClose(stream);
        RLRelease(stream);
    }
    XML_ParserFree(parser->xml);
    if (ok) {
        post_report(parser, (Report){.kind = kReportFinish, .summary = parser->summary});
    } else {
        Report report = {.kind = kReportFail};
        snprintf(report.message, sizeof report.message, "%s", error);
        post_report(parser, report);
    }
    return NULL;
}

static Parser *parser_create(const char *url, ParserDelegate delegate, RLTimeInterval chunkPause) {
    Parser *parser = calloc(1, sizeof *parser);
    EXAMPLE_CHECK(parser != NULL);
    parser->url = strdup(url);
    parser->delegate = delegate;
    parser->delegateThread = (RLThreadRef)RLRetain(RLThreadGetCurrent());
    parser->chunkPause = chunkPause;
    return parser;
}

/* Call after the last report was delivered. */
static void parser_destroy(Parser *parser) {
    RLRelease(parser->delegateThread);
    free(parser->url);
    free(parser);
}

/* A detached, named background thread; it ends after its last report. */
static void parser_start(Parser *parser) {
    RLThreadRef thread = RLThreadCreate(NULL, parse_in_background, parser);
    EXAMPLE_CHECK(thread != NULL);
    EXAMPLE_CHECK(RLThreadSetName(thread, "parser"));
    EXAMPLE_CHECK(RLThreadStart(thread));
    RLRelease(thread);
}

/* ---- the document and the HTTP server ---- */

/* The catalog, as text (malloc'ed). Book 217 is the most expensive. */
static char *make_catalog(size_t *length, bool broken) {
    size_t cap = 256 + kBooks * 160;
    char *xml = malloc(cap);
    EXAMPLE_CHECK(xml != NULL);
    size_t n = (size_t)snprintf(xml, cap, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<catalog>\n");
    for (int i = 1; i <= kBooks; i++) {
        double price = i == 217 ? 99.5 : 5 + (i * 37 % 50);
        n += (size_t)snprintf(xml + n, cap - n,
                              "  <book id=\"%d\"><title>Run Loops, volume %d</title>"
                              "<author>A. Writer</author><price>%.2f</price></book>\n",
                              i, i, price);
        if (broken && i == kBooks / 2) n += (size_t)snprintf(xml + n, cap - n, "  <book><title>unclosed</book>\n");
    }
    n += (size_t)snprintf(xml + n, cap - n, "</catalog>\n");
    *length = n;
    return xml;
}

typedef struct HttpServer {
    int listener;
    unsigned port;
    const char *body;
    size_t bodyLength;
    int served;
} HttpServer;

/* Serves one request (the parser's) and ends: a plain blocking server is
 * enough for one client. */
static void *http_serve_one(void *arg) {
    HttpServer *server = arg;
    int client = accept(server->listener, NULL, NULL);
    if (client < 0) return NULL;
    char request[1024];
    size_t got = 0;
    while (got < sizeof request - 1) {
        ssize_t r = read(client, request + got, sizeof request - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        request[got] = '\0';
        if (strstr(request, "\r\n\r\n")) break;
    }
    request[got] = '\0';
    char head[256];
    bool found = strncmp(request, "GET /catalog.xml ", 17) == 0;
    int n = found ? snprintf(head, sizeof head,
                             "HTTP/1.0 200 OK\r\nContent-Type: application/xml\r\nContent-Length: %zu\r\n\r\n",
                             server->bodyLength)
                  : snprintf(head, sizeof head, "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    bool sent = write(client, head, (size_t)n) == n;
    for (size_t off = 0; sent && found && off < server->bodyLength;) {
        ssize_t w = write(client, server->body + off, server->bodyLength - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(client);
    server->served++;
    return NULL;
}

static RLThreadRef http_server_start(HttpServer *server) {
    server->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t size = sizeof address;
    if (server->listener < 0 || bind(server->listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(server->listener, 4) != 0 || getsockname(server->listener, (struct sockaddr *)&address, &size) != 0) {
        fprintf(stderr, "threaded_parser: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        exit(1);
    }
    server->port = ntohs(address.sin_port);
    RLThreadRef thread = RLThreadCreate(NULL, http_serve_one, server);
    EXAMPLE_CHECK(thread != NULL);
    EXAMPLE_CHECK(RLThreadSetName(thread, "http-server"));
    EXAMPLE_CHECK(RLThreadSetJoinable(thread, true));
    EXAMPLE_CHECK(RLThreadStart(thread));
    return thread;
}

/* ---- the delegate: the main thread's controller ---- */

typedef struct Controller {
    RLThreadRef home;
    int ticks;          /* the main loop's timer, all along */
    int ticksAtStart;   /* when parserDidStart arrived */
    int ticksDuring;    /* between parserDidStart and the last report */
    int progressReports;
    int callsElsewhere; /* delegate calls on another thread: must stay 0 */
    bool finished;
    bool failed;
    CatalogSummary summary;
    char failure[160];
} Controller;

static void tick(RLRunLoopTimerRef timer, void *info) {
    (void)timer;
    ((Controller *)info)->ticks++;
}

static void check_thread(Controller *controller) {
    if (RLThreadGetCurrent() != controller->home) controller->callsElsewhere++;
}

static void did_start(Parser *parser, const char *source, void *info) {
    Controller *controller = info;
    (void)parser;
    check_thread(controller);
    controller->ticksAtStart = controller->ticks;
    printf("  [main] parserDidStart: %s\n", source);
}

static void did_make_progress(Parser *parser, double fraction, int books, void *info) {
    Controller *controller = info;
    (void)parser;
    check_thread(controller);
    controller->progressReports++;
    int width = 30, filled = (int)(fraction * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';
    printf("  [main] progress [%s] %5.1f%%  %3d books  (timer ticks so far: %d)\n", bar, fraction * 100, books,
           controller->ticks);
    fflush(stdout);
}

static void parse_ended(Controller *controller) {
    controller->ticksDuring = controller->ticks - controller->ticksAtStart;
    /* The result is in: the main loop may return. */
    EXAMPLE_CHECK(RLRunLoopStop(RLRunLoopGetCurrent()));
}

static void did_finish(Parser *parser, const CatalogSummary *summary, void *info) {
    Controller *controller = info;
    (void)parser;
    check_thread(controller);
    controller->finished = true;
    controller->summary = *summary;
    printf("  [main] parserDidFinish: %d books, total price %.2f, most expensive: %s (%.2f)\n", summary->books,
           summary->totalPrice, summary->priciest, summary->priciestPrice);
    parse_ended(controller);
}

static void did_fail(Parser *parser, const char *message, void *info) {
    Controller *controller = info;
    (void)parser;
    check_thread(controller);
    controller->failed = true;
    snprintf(controller->failure, sizeof controller->failure, "%s", message);
    printf("  [main] parserDidFail: %s\n", message);
    parse_ended(controller);
}

/* Parses url on a background thread while this thread's run loop runs a
 * ticking timer; returns once the delegate has the outcome. */
static Controller parse_with_delegate(const char *url, RLTimeInterval tickInterval, RLTimeInterval chunkPause) {
    Controller controller = {.home = RLThreadGetCurrent()};
    RLRunLoopTimerContext timerContext = {.version = 0, .info = &controller};
    RLRunLoopTimerRef timer = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() + tickInterval, tickInterval, 0,
                                                   0, tick, &timerContext);
    EXAMPLE_CHECK(timer != NULL);
    EXAMPLE_CHECK(RLRunLoopAddTimer(RLRunLoopGetCurrent(), timer, kRLRunLoopDefaultMode));

    ParserDelegate delegate = {.parserDidStart = did_start,
                               .parserDidMakeProgress = did_make_progress,
                               .parserDidFinish = did_finish,
                               .parserDidFail = did_fail,
                               .info = &controller};
    Parser *parser = parser_create(url, delegate, chunkPause);
    parser_start(parser);
    printf("  [main] parser started; running the main run loop (a timer ticks every %g s)\n", tickInterval);
    while (!controller.finished && !controller.failed) RLRunLoopRun();

    EXAMPLE_CHECK(RLRunLoopTimerInvalidate(timer));
    RLRelease(timer);
    parser_destroy(parser);
    printf("  [main] the timer ticked %d times while the parser worked (%d progress reports): %s\n",
           controller.ticksDuring, controller.progressReports,
           controller.ticksDuring > 0 ? "the main loop stayed responsive" : "THE MAIN LOOP WAS BLOCKED");
    return controller;
}

int main(int argc, char **argv) {
    example_init(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    RLTimeInterval tickInterval = example_pick(0.05, 0.02, 0.001);
    RLTimeInterval chunkPause = example_pick(0.1, 0.03, 0.005);
    printf("threaded_parser: expat on a background thread, reports performed on the main thread (%s pace)\n",
           example_pace_name());
    EXAMPLE_CHECK(RLThreadSetName(RLThreadGetCurrent(), "main"));

    size_t length;
    char *catalog = make_catalog(&length, false);
    char path[] = "/tmp/threaded_parser_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, catalog, length) != (ssize_t)length || close(fd) != 0) {
        fprintf(stderr, "threaded_parser: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("the document: a catalog of %d books, %zu bytes\n", kBooks, length);

    printf("--- from a file ---\n");
    Controller fromFile = parse_with_delegate(path, tickInterval, chunkPause);
    unlink(path);

    printf("--- from a local HTTP server ---\n");
    HttpServer server = {.body = catalog, .bodyLength = length};
    RLThreadRef serverThread = http_server_start(&server);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/catalog.xml", server.port);
    Controller fromHttp = parse_with_delegate(url, tickInterval, chunkPause);
    EXAMPLE_CHECK(RLThreadJoin(serverThread, NULL));
    RLRelease(serverThread);
    close(server.listener);

    printf("--- from a broken document ---\n");
    size_t brokenLength;
    char *broken = make_catalog(&brokenLength, true);
    char brokenPath[] = "/tmp/threaded_parser_XXXXXX";
    fd = mkstemp(brokenPath);
    if (fd < 0 || write(fd, broken, brokenLength) != (ssize_t)brokenLength || close(fd) != 0) {
        fprintf(stderr, "threaded_parser: cannot write %s: %s\n", brokenPath, strerror(errno));
        return 1;
    }
    Controller fromBroken = parse_with_delegate(brokenPath, tickInterval, chunkPause);
    unlink(brokenPath);
    free(broken);
    free(catalog);

    bool same = fromFile.finished && fromHttp.finished && fromFile.summary.books == fromHttp.summary.books &&
                fromFile.summary.totalPrice == fromHttp.summary.totalPrice;
    int elsewhere = fromFile.callsElsewhere + fromHttp.callsElsewhere + fromBroken.callsElsewhere;
    bool responsive = fromFile.ticksDuring > 0 && fromHttp.ticksDuring > 0;
    printf("file and HTTP gave the same catalog: %s\n", same ? "yes" : "NO");
    printf("every delegate call ran on the main thread: %s\n", elsewhere == 0 ? "yes" : "NO");
    printf("the broken document was reported as a failure: %s\n", fromBroken.failed ? "yes" : "NO");
    bool ok = same && elsewhere == 0 && responsive && fromBroken.failed && server.served == 1;
    printf("threaded_parser: %s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
