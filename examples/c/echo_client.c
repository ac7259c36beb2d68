/*
 * echo_client.c — the Cocoa tutorial's "Echo Client using NSStream and
 * NSRunLoop", in C: RLStreamCreatePairWithSocketToHost (CFStream's
 * CFStreamCreatePairWithSocketToHost) gives a read and a write stream to
 * an echo server; the lines read from stdin go out, and whatever comes back
 * is printed, everything driven by events in the run loop.
 *
 *   echo_client [-v] HOST PORT
 *
 * Try it against examples/c/echo_server.c (or any echo server):
 *
 *   $ echo_server &                       listening on 41234
 *   $ printf 'hello\nworld\n' | echo_client localhost 41234
 *   hello
 *   world
 *
 * It exits (status 0) once stdin has ended and every byte sent has come
 * back; status 1 if the connection fails or ends early (the reason goes to
 * stderr). -v prints the connection and the byte counts on stderr.
 *
 * Nothing here waits on a single thing:
 *   - The host name is resolved and the connection made in the background;
 *     the streams report OpenCompleted (or ErrorOccurred) through the loop.
 *   - stdin is a run-loop source too (RLFileDescriptor): its callback reads
 *     what is there. (A regular file or /dev/null, which epoll cannot
 *     watch, is simply always ready.)
 *   - Writes happen only when the write stream said CanAcceptBytes, so a
 *     write never waits; what it does not take stays queued. Reading stdin
 *     pauses while too much is queued (back-pressure), and resumes when
 *     the queue drains.
 *   - HasBytesAvailable: one Read, printed. Each Read (Write) re-arms the
 *     event, as in CFStream.
 * At the end of stdin, once everything is sent, the write stream is closed:
 * the server sees the end of our data (the socket's sending side is shut
 * down) while its last echoes still come back.
 *
 * The work sits in echo_client_run() so that the tests (Tests/c/test_echo.c)
 * can run the same code with a pipe or a file as its input.
 */
#include "example_support.h"

#include <errno.h>
#include <netdb.h>
#include <unistd.h>

/* Stop reading stdin while this much is waiting to be sent. */
#define ECHO_CLIENT_QUEUE_MAX (256 * 1024)
#define ECHO_CLIENT_CHUNK 65536

typedef struct EchoClient {
    RLRunLoopRef loop;
    const char *host;
    unsigned port;
    RLReadStreamRef from_server;
    RLWriteStreamRef to_server;
    RLFileDescriptorRef input; /* watches input_fd */
    int input_fd;
    FILE *out, *log;
    bool verbose;
    /* Read from the input, not sent yet: queue[start, start + len). */
    uint8_t *queue;
    size_t start, len, cap;
    bool connected;     /* the write stream reported OpenCompleted */
    bool can_write;     /* CanAcceptBytes came and nothing was written since */
    bool input_waiting; /* the input's read callback is enabled */
    bool input_ended;
    bool write_closed;
    unsigned long long sent, received;
    bool done;
    int status;
} EchoClient;

static void client_finish(EchoClient *client, int status) {
    if (client->done)
        return;
    client->done = true;
    client->status = status;
    RLRunLoopStop(client->loop);
}

/* Finished when the input has ended, all of it was sent, and all of it has
 * come back. */
static void client_check_done(EchoClient *client) {
    if (client->connected && client->input_ended && client->len == 0 && client->received >= client->sent)
        client_finish(client, 0);
}

static void client_stream_failed(EchoClient *client, const char *which, RLStreamError error) {
    const char *reason = error.domain == kRLStreamErrorDomainNetDB ? gai_strerror(error.error)
                         : error.domain == kRLStreamErrorDomainPOSIX ? strerror(error.error)
                                                                     : "unknown error";
    if (client->done)
        return; /* both streams report a failed connection: say it once */
    if (client->connected)
        fprintf(client->log, "echo_client: %s: %s\n", which, reason);
    else
        fprintf(client->log, "echo_client: cannot connect to %s port %u: %s\n", client->host, client->port, reason);
    client_finish(client, 1);
}

/* Asks for more input once there is room in the queue. */
static void client_want_input(EchoClient *client) {
    if (client->input_ended || client->input_waiting || client->len >= ECHO_CLIENT_QUEUE_MAX || client->done)
        return;
    if (!RLFileDescriptorEnableCallBacks(client->input, kRLFileDescriptorReadCallBack)) {
        fprintf(client->log, "echo_client: cannot watch the input: %s\n", RLErrorGetLast().message);
        client_finish(client, 1);
        return;
    }
    client->input_waiting = true;
}

/* Writes what is queued if the stream said it can take bytes. One Write per
 * CanAcceptBytes: the Write re-arms the event, which comes again as soon as
 * there is room. */
static void client_send(EchoClient *client) {
    if (client->done || client->write_closed)
        return;
    if (!client->connected) {
        client_want_input(client); /* read ahead meanwhile, up to the queue's limit */
        return;
    }
    if (client->len > 0 && client->can_write) {
        client->can_write = false;
        RLIndex n = RLWriteStreamWrite(client->to_server, client->queue + client->start, (RLIndex)client->len);
        if (n < 0) {
            client_stream_failed(client, "sending", RLWriteStreamGetError(client->to_server));
            return;
        }
        client->start += (size_t)n;
        client->len -= (size_t)n;
        client->sent += (unsigned long long)n;
        if (client->len == 0)
            client->start = 0;
    }
    if (client->len == 0 && client->input_ended) {
        /* All sent: tell the server (it sees the end of our data); its
         * echoes still come in on the read stream. */
        client->write_closed = true;
        RLWriteStreamClose(client->to_server);
        client_check_done(client);
        return;
    }
    client_want_input(client);
}

/* stdin has something (or its end, or it is a file: always ready). */
static void client_input_callback(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)f, (void)types;
    EchoClient *client = info;
    client->input_waiting = false;
    if (client->start > 0 && client->start + client->len + ECHO_CLIENT_CHUNK > client->cap) {
        memmove(client->queue, client->queue + client->start, client->len);
        client->start = 0;
    }
    if (client->len + ECHO_CLIENT_CHUNK > client->cap) {
        size_t cap = client->len + ECHO_CLIENT_CHUNK;
        uint8_t *grown = realloc(client->queue, cap);
        if (!grown) {
            fprintf(client->log, "echo_client: out of memory\n");
            client_finish(client, 1);
            return;
        }
        client->queue = grown;
        client->cap = cap;
    }
    ssize_t n = read(client->input_fd, client->queue + client->start + client->len, ECHO_CLIENT_CHUNK);
    if (n > 0) {
        client->len += (size_t)n;
    } else if (n == 0) {
        client->input_ended = true;
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
        fprintf(client->log, "echo_client: reading the input: %s\n", strerror(errno));
        client_finish(client, 1);
        return;
    }
    client_send(client);
}

static void client_read_stream_callback(RLReadStreamRef stream, RLStreamEventType type, void *info) {
    EchoClient *client = info;
    switch (type) {
    case kRLStreamEventOpenCompleted:
        break;
    case kRLStreamEventHasBytesAvailable: {
        uint8_t buf[ECHO_CLIENT_CHUNK];
        RLIndex n = RLReadStreamRead(stream, buf, sizeof buf);
        if (n > 0) {
            fwrite(buf, 1, (size_t)n, client->out);
            fflush(client->out);
            client->received += (unsigned long long)n;
            client_check_done(client);
        } else if (n < 0) {
            client_stream_failed(client, "receiving", RLReadStreamGetError(stream));
        }
        break; /* n == 0: EndEncountered follows */
    }
    case kRLStreamEventEndEncountered:
        client_check_done(client);
        if (!client->done) {
            fprintf(client->log, "echo_client: the server closed the connection after %llu of %llu bytes%s\n",
                    client->received, client->sent, client->input_ended ? "" : " (input not finished)");
            client_finish(client, 1);
        }
        break;
    case kRLStreamEventErrorOccurred:
        client_stream_failed(client, "receiving", RLReadStreamGetError(stream));
        break;
    default:
        break;
    }
}

static void client_write_stream_callback(RLWriteStreamRef stream, RLStreamEventType type, void *info) {
    EchoClient *client = info;
    switch (type) {
    case kRLStreamEventOpenCompleted:
        client->connected = true;
        if (client->verbose)
            fprintf(client->log, "echo_client: connected to %s port %u\n", client->host, client->port);
        client_send(client);
        break;
    case kRLStreamEventCanAcceptBytes:
        client->can_write = true;
        client_send(client);
        break;
    case kRLStreamEventErrorOccurred:
        client_stream_failed(client, "sending", RLWriteStreamGetError(stream));
        break;
    default:
        break;
    }
}

/* Connects to host:port, sends everything read from input_fd, writes what
 * comes back to out, on the calling thread's run loop. Messages go to log.
 * Returns the exit status. */
static int echo_client_run(const char *host, unsigned port, int input_fd, FILE *out, FILE *log, bool verbose) {
    EchoClient client = {.loop = RLRunLoopGetCurrent(), .host = host, .port = port, .input_fd = input_fd, .out = out, .log = log,
                         .verbose = verbose};
    if (!RLStreamCreatePairWithSocketToHost(NULL, host, port, &client.from_server, &client.to_server)) {
        fprintf(log, "echo_client: %s\n", RLErrorGetLast().message);
        return 1;
    }
    RLStreamClientContext context = {.version = 0, .info = &client};
    RLOptionFlags events = kRLStreamEventOpenCompleted | kRLStreamEventHasBytesAvailable |
                           kRLStreamEventCanAcceptBytes | kRLStreamEventErrorOccurred |
                           kRLStreamEventEndEncountered;
    RLFileDescriptorContext input_context = {.version = 0, .info = &client};
    client.input = RLFileDescriptorCreate(NULL, input_fd, false, client_input_callback, &input_context);
    RLRunLoopSourceRef input_source = client.input ? RLFileDescriptorCreateRunLoopSource(NULL, client.input, 0) : NULL;
    bool ready = input_source && RLRunLoopAddSource(client.loop, input_source, kRLRunLoopDefaultMode) &&
                 RLReadStreamSetClient(client.from_server, events, client_read_stream_callback, &context) &&
                 RLWriteStreamSetClient(client.to_server, events, client_write_stream_callback, &context) &&
                 RLReadStreamScheduleWithRunLoop(client.from_server, client.loop, kRLRunLoopDefaultMode) &&
                 RLWriteStreamScheduleWithRunLoop(client.to_server, client.loop, kRLRunLoopDefaultMode) &&
                 RLReadStreamOpen(client.from_server) && RLWriteStreamOpen(client.to_server);
    if (ready) {
        client_want_input(&client);
        while (!client.done)
            RLRunLoopRunInMode(kRLRunLoopDefaultMode, 1e9, false);
        if (verbose)
            fprintf(log, "echo_client: sent %llu bytes, received %llu\n", client.sent, client.received);
    } else {
        fprintf(log, "echo_client: cannot set up: %s\n", RLErrorGetLast().message);
        client.status = 1;
    }
    RLReadStreamClose(client.from_server);
    RLWriteStreamClose(client.to_server);
    RLReadStreamUnscheduleFromRunLoop(client.from_server, client.loop, kRLRunLoopDefaultMode);
    RLWriteStreamUnscheduleFromRunLoop(client.to_server, client.loop, kRLRunLoopDefaultMode);
    RLRelease(client.from_server);
    RLRelease(client.to_server);
    if (client.input) {
        RLFileDescriptorInvalidate(client.input); /* leaves the loop; stdin stays open */
        RLRelease(client.input);
    }
    if (input_source)
        RLRelease(input_source);
    free(client.queue);
    return client.status;
}

/* The usage text (to stderr with status 2 after a bad argument; to stdout
 * with status 0 for -h). */
static int client_usage(const char *argv0, FILE *to, int status) {
    const char *slash = strrchr(argv0, '/');
    fprintf(to,
            "usage: %s [-v] HOST PORT\n"
            "  sends stdin to the echo server at HOST:PORT and prints what comes back;\n"
            "  exits when stdin has ended and every byte has come back (-v: counts on stderr)\n",
            slash ? slash + 1 : argv0);
    return status;
}

int main(int argc, char **argv) {
    bool verbose = false;
    const char *args[2];
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return client_usage(argv[0], stdout, 0);
        if (strcmp(argv[i], "-v") == 0)
            verbose = true;
        else if (argv[i][0] == '-' || nargs == 2)
            return client_usage(argv[0], stderr, 2);
        else
            args[nargs++] = argv[i];
    }
    if (nargs != 2)
        return client_usage(argv[0], stderr, 2);
    char *end;
    unsigned long port = strtoul(args[1], &end, 10);
    if (*end || end == args[1] || port == 0 || port > 65535)
        return client_usage(argv[0], stderr, 2);
    return echo_client_run(args[0], (unsigned)port, STDIN_FILENO, stdout, stderr, verbose);
}
