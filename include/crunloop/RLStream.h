/*
 * RLStream.h — CoreFoundation's CFReadStream / CFWriteStream under the RL
 * prefix: byte streams over memory, files, an in-memory bound pair and TCP
 * sockets, polled or driven by run-loop events.
 *
 * What a caller may rely on:
 *   - Status values and event flags are CF's (kRLStreamStatusNotOpen 0 …
 *     kRLStreamStatusError 7; kRLStreamEventOpenCompleted 1 …
 *     kRLStreamEventEndEncountered 16).
 *   - Events reach the client only on a run loop the stream is scheduled on,
 *     in a mode it is scheduled in, and only those named in SetClient.
 *     HasBytesAvailable (CanAcceptBytes) is reported once and then again
 *     only after the client has read (written), as CF does. Events that
 *     happen before the stream is scheduled wait until it is. A readiness
 *     event that no longer holds when its turn comes (the bytes were read
 *     outside the callback meanwhile) is not delivered, and the next
 *     readiness is reported.
 *   - A stream may be scheduled in several modes and several run loops;
 *     scheduling it again in a mode it is already in changes nothing.
 *   - Read and Write block when nothing can be transferred (CF semantics);
 *     use HasBytesAvailable / CanAcceptBytes or the events to avoid it.
 *   - Socket streams never block a run loop's thread: connect is
 *     non-blocking; numeric addresses need no lookup, and host names are
 *     resolved by one process-wide resolver thread (started on first use,
 *     shared by every stream) that hands the addresses back to the stream.
 *   - Where CF returns void, the RL function returns bool: false (with
 *     RLErrorGetLast() set, nothing changed) reports misuse.
 *   - Thread safety: status, events, clients and scheduling may be used from
 *     any thread; one stream's Read (or Write) calls must not run on two
 *     threads at once. The client callback runs with no library lock held
 *     and may close, unschedule or release the stream.
 * Create rule: release what a Create function returns (RLRelease).
 */
#ifndef CRUNLOOP_RLSTREAM_H
#define CRUNLOOP_RLSTREAM_H

#include <crunloop/RLData.h>
#include <crunloop/RLNumber.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLSocket.h>
#include <crunloop/RLString.h>
#include <crunloop/RLURL.h>
#include <crunloop/RLError.h>

#include <stdint.h>

RL_EXTERN_C_BEGIN

typedef struct RLReadStream *RLReadStreamRef;
typedef struct RLWriteStream *RLWriteStreamRef;

/* The type IDs of read and write streams. */
RL_EXPORT RLTypeID RLReadStreamGetTypeID(void);
RL_EXPORT RLTypeID RLWriteStreamGetTypeID(void);

typedef RL_ENUM(RLIndex, RLStreamStatus) {
    kRLStreamStatusNotOpen = 0,
    kRLStreamStatusOpening = 1, /* a socket is still resolving or connecting */
    kRLStreamStatusOpen = 2,
    kRLStreamStatusReading = 3,
    kRLStreamStatusWriting = 4,
    kRLStreamStatusAtEnd = 5,   /* no further bytes can be read / written */
    kRLStreamStatusClosed = 6,
    kRLStreamStatusError = 7,
};

typedef RL_OPTIONS(RLOptionFlags, RLStreamEventType) {
    kRLStreamEventNone = 0,
    kRLStreamEventOpenCompleted = 1,
    kRLStreamEventHasBytesAvailable = 2,
    kRLStreamEventCanAcceptBytes = 4,
    kRLStreamEventErrorOccurred = 8,
    kRLStreamEventEndEncountered = 16,
};

/* Error domains (CF's numbers): POSIX errno values, and getaddrinfo's EAI_*
 * codes for name resolution (CFNetwork's kCFStreamErrorDomainNetDB). */
enum {
    kRLStreamErrorDomainCustom = -1,
    kRLStreamErrorDomainPOSIX = 1,
    kRLStreamErrorDomainNetDB = 12,
};

/* CFStreamError: what made a stream fail ({0, 0}: no error). */
typedef struct RLStreamError {
    RLIndex domain;
    int32_t error;
} RLStreamError;

typedef struct RLStreamClientContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    void *RL_NULLABLE (*RL_NULLABLE retain)(void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(void *RL_NULLABLE info);
} RLStreamClientContext;

typedef void (*RLReadStreamClientCallBack)(RLReadStreamRef stream, RLStreamEventType type, void *RL_NULLABLE info);
typedef void (*RLWriteStreamClientCallBack)(RLWriteStreamRef stream, RLStreamEventType type, void *RL_NULLABLE info);

/* ---- creating streams (Create rule; NULL, error set, on bad input) ---- */

/* Reads a copy of `length` bytes. */
RL_EXPORT RLReadStreamRef RL_NULLABLE RLReadStreamCreateWithBytes(RLAllocatorRef RL_NULLABLE alloc,
                                                                  const uint8_t *RL_NULLABLE bytes, RLIndex length);
/* Reads the caller's `length` bytes in place (CF's NoCopy): they must stay
 * unchanged until the stream is freed, which then gives them to
 * bytesDeallocator — NULL means free() (malloc'ed bytes become the
 * stream's), kRLAllocatorNull means the caller keeps them and the stream
 * frees nothing. Any other allocator is refused (kRLErrorInvalidArgument)
 * rather than guessed at. NULL (error set) for NULL bytes with a length
 * above 0 or a negative length; the bytes are then still the caller's. */
RL_EXPORT RLReadStreamRef RL_NULLABLE RLReadStreamCreateWithBytesNoCopy(RLAllocatorRef RL_NULLABLE alloc,
                                                                        const uint8_t *RL_NULLABLE bytes,
                                                                        RLIndex length,
                                                                        RLAllocatorRef RL_NULLABLE bytesDeallocator);
/* Collects what is written in memory; see RLWriteStreamCopyDataWritten.
 * bufferAllocator is accepted for CF's signature and may be NULL. */
RL_EXPORT RLWriteStreamRef RL_NULLABLE RLWriteStreamCreateWithAllocatedBuffers(RLAllocatorRef RL_NULLABLE alloc,
                                                                              RLAllocatorRef RL_NULLABLE bufferAllocator);
/* Writes into the caller's buffer of bufferCapacity bytes, from its start
 * (the caller keeps the buffer, which must outlive the stream). As CF: a
 * Write that does not fit in the space left fails whole (-1, status Error,
 * POSIX ENOMEM, nothing written); CanAcceptBytes is false once the buffer
 * is full, and a stream opened with no space reports EndEncountered
 * instead of CanAcceptBytes. NULL (error set) for a NULL buffer with a
 * capacity above 0, or a negative capacity. */
RL_EXPORT RLWriteStreamRef RL_NULLABLE RLWriteStreamCreateWithBuffer(RLAllocatorRef RL_NULLABLE alloc,
                                                                    uint8_t *RL_NULLABLE buffer,
                                                                    RLIndex bufferCapacity);
/* Everything written so far to a stream from
 * RLWriteStreamCreateWithAllocatedBuffers: the same as
 * RLWriteStreamCopyProperty(stream, kRLStreamPropertyDataWritten). Create
 * rule; NULL (error set) for another kind of stream. */
RL_EXPORT RLDataRef RL_NULLABLE RLWriteStreamCopyDataWritten(RLWriteStreamRef stream);

/* File streams from a file URL (RLURL.h), as CF's. Open opens the file;
 * the write stream creates it if missing (mode 0666 & ~umask) and
 * truncates it, or, with kRLStreamPropertyAppendToFile set to
 * kRLBooleanTrue before Open, keeps its bytes and writes after them.
 * kRLStreamPropertyFileCurrentOffset set before Open starts there. A file
 * that cannot be opened (or sought to that offset) makes Open fail with
 * the errno in the stream's error. The stream keeps the path, not the
 * URL. NULL (error set) for a NULL or released URL. */
RL_EXPORT RLReadStreamRef RL_NULLABLE RLReadStreamCreateWithFile(RLAllocatorRef RL_NULLABLE alloc,
                                                                 RLURLRef RL_NULLABLE fileURL);
RL_EXPORT RLWriteStreamRef RL_NULLABLE RLWriteStreamCreateWithFile(RLAllocatorRef RL_NULLABLE alloc,
                                                                   RLURLRef RL_NULLABLE fileURL);
/* The same from a path (not in CF; a relative path is opened relative to
 * the working directory at Open). NULL (error set) for a NULL or empty
 * path. */
RL_EXPORT RLReadStreamRef RL_NULLABLE RLReadStreamCreateWithFilePath(RLAllocatorRef RL_NULLABLE alloc,
                                                                     const char *RL_NULLABLE path);
RL_EXPORT RLWriteStreamRef RL_NULLABLE RLWriteStreamCreateWithFilePath(RLAllocatorRef RL_NULLABLE alloc,
                                                                       const char *RL_NULLABLE path);

/* An in-memory pipe: bytes written to *writeStream are read from
 * *readStream, at most transferBufferSize bytes in flight (a full buffer
 * makes CanAcceptBytes false and Write block). Closing the write stream
 * makes the reader reach its end after the buffered bytes; writing after
 * the reader closed fails with EPIPE. Returns false (both outputs NULL)
 * for NULL outputs or a size below 1. */
RL_EXPORT bool RLStreamCreateBoundPair(RLAllocatorRef RL_NULLABLE alloc, RLReadStreamRef RL_NULLABLE *RL_NULLABLE readStream,
                                       RLWriteStreamRef RL_NULLABLE *RL_NULLABLE writeStream, RLIndex transferBufferSize);

/* Streams over a connected socket the caller owns: the library makes it
 * non-blocking and never closes it (CF's default for
 * kCFStreamPropertyShouldCloseNativeSocket); closing the write stream
 * shuts the socket's sending side down. Either output may be NULL (not
 * both). */
RL_EXPORT bool RLStreamCreatePairWithSocket(RLAllocatorRef RL_NULLABLE alloc, int sock,
                                            RLReadStreamRef RL_NULLABLE *RL_NULLABLE readStream,
                                            RLWriteStreamRef RL_NULLABLE *RL_NULLABLE writeStream);
/* Streams over a TCP connection to host:port, made when either stream is
 * opened: Open returns true with status Opening; OpenCompleted (or
 * ErrorOccurred, with the errno or EAI_* code) follows. The library owns
 * and closes this socket when both streams are closed or released. */
RL_EXPORT bool RLStreamCreatePairWithSocketToHost(RLAllocatorRef RL_NULLABLE alloc, const char *host, uint32_t port,
                                                  RLReadStreamRef RL_NULLABLE *RL_NULLABLE readStream,
                                                  RLWriteStreamRef RL_NULLABLE *RL_NULLABLE writeStream);
/* Streams over a new socket made and connected as the signature says
 * (RLSocket.h: family, type and protocol, <= 0 for the defaults; a stream
 * socket only) when either stream is opened: Open returns true with
 * status Opening; OpenCompleted (or ErrorOccurred, with the errno of
 * socket or connect) follows. The library owns and closes the socket when
 * both streams are closed or released. The address is copied. Returns
 * false (outputs NULL, error set) for a NULL signature or address, an
 * address that is no socket address, a type other than SOCK_STREAM, or
 * both outputs NULL. */
RL_EXPORT bool RLStreamCreatePairWithPeerSocketSignature(RLAllocatorRef RL_NULLABLE alloc,
                                                         const RLSocketSignature *signature,
                                                         RLReadStreamRef RL_NULLABLE *RL_NULLABLE readStream,
                                                         RLWriteStreamRef RL_NULLABLE *RL_NULLABLE writeStream);

/* ---- using them ---- */

/* kRLStreamStatus…; kRLStreamStatusError (error set) for a bad object. */
RL_EXPORT RLStreamStatus RLReadStreamGetStatus(RLReadStreamRef stream);
RL_EXPORT RLStreamStatus RLWriteStreamGetStatus(RLWriteStreamRef stream);
/* The stream's failure ({0, 0} if none; {kRLStreamErrorDomainCustom, 0},
 * thread error set, for a bad object). */
RL_EXPORT RLStreamError RLReadStreamGetError(RLReadStreamRef stream);
RL_EXPORT RLStreamError RLWriteStreamGetError(RLWriteStreamRef stream);
/* CF's CopyError: the stream's failure as an error object (Create rule:
 * RLRelease it), or NULL when the stream has no error (thread error
 * untouched) or on misuse (thread error set). Domains: a POSIX failure is
 * kRLErrorDomainPOSIX with the errno; a name-resolution failure
 * (kRLStreamErrorDomainNetDB) is "kCFStreamErrorDomainNetDB" with the
 * EAI_* code; any other is CF's "BogusCFStreamErrorCompatibilityDomain"
 * with the stream error's code (CF on Linux does the same, and also
 * records the stream domain in a dictionary this library does not have). */
RL_EXPORT RLErrorRef RL_NULLABLE RLReadStreamCopyError(RLReadStreamRef stream);
RL_EXPORT RLErrorRef RL_NULLABLE RLWriteStreamCopyError(RLWriteStreamRef stream);

/* Only from kRLStreamStatusNotOpen. False with the stream's error set if it
 * fails at once (a file that does not exist). */
RL_EXPORT bool RLReadStreamOpen(RLReadStreamRef stream);
RL_EXPORT bool RLWriteStreamOpen(RLWriteStreamRef stream);
/* Status Closed; no event is delivered afterwards. Closing a closed stream
 * does nothing; false only for a bad object. */
RL_EXPORT bool RLReadStreamClose(RLReadStreamRef stream);
RL_EXPORT bool RLWriteStreamClose(RLWriteStreamRef stream);

/* Bytes read (> 0), 0 at the end, -1 on failure: the stream's own error
 * (status Error, ErrorOccurred) or misuse (not open, closed, after an error,
 * NULL buffer: thread error set). */
RL_EXPORT RLIndex RLReadStreamRead(RLReadStreamRef stream, uint8_t *buffer, RLIndex bufferLength);
/* Bytes written (> 0), 0 if bufferLength is 0, -1 on failure as Read
 * (a stream at its end included: kRLErrorInvalidState, as CF's -1). */
RL_EXPORT RLIndex RLWriteStreamWrite(RLWriteStreamRef stream, const uint8_t *buffer, RLIndex bufferLength);
/* The stream's own buffered bytes, read in place (CF's GetBuffer): for a
 * memory read stream (RLReadStreamCreateWithBytes…), a pointer to the
 * next min(maxBytesToRead, left) bytes, which count as read, with that
 * number in *numBytesRead; taking the last bytes makes the status AtEnd
 * (EndEncountered), as CF. Other streams have no buffer to lend: NULL with
 * *numBytesRead 0, and the caller uses Read. The pointer stays valid while
 * the stream lives. NULL with 0 at the end. NULL with *numBytesRead -1
 * (CF's answer) and the thread error set (kRLErrorInvalidState) on a
 * stream that is not open, closed or failed; NULL with the thread error
 * set (and *numBytesRead -1 when it is not NULL) for a bad stream, a NULL
 * numBytesRead or a negative maxBytesToRead. */
RL_EXPORT const uint8_t *RL_NULLABLE RLReadStreamGetBuffer(RLReadStreamRef stream, RLIndex maxBytesToRead,
                                                           RLIndex *RL_NULLABLE numBytesRead);
/* Can a Read (Write) proceed without blocking? False unless the stream is
 * open (CF: false at the end, after an error, before open). */
RL_EXPORT bool RLReadStreamHasBytesAvailable(RLReadStreamRef stream);
RL_EXPORT bool RLWriteStreamCanAcceptBytes(RLWriteStreamRef stream);

/* Sets (replaces) the client: events in `streamEvents` are delivered to
 * callback. A NULL callback or context removes the client (CF). The
 * context is copied and its retain called on info. */
RL_EXPORT bool RLReadStreamSetClient(RLReadStreamRef stream, RLOptionFlags streamEvents,
                                     RLReadStreamClientCallBack RL_NULLABLE callback,
                                     RLStreamClientContext *RL_NULLABLE context);
RL_EXPORT bool RLWriteStreamSetClient(RLWriteStreamRef stream, RLOptionFlags streamEvents,
                                      RLWriteStreamClientCallBack RL_NULLABLE callback,
                                      RLStreamClientContext *RL_NULLABLE context);

/* Delivers the stream's events on runLoop while it runs in mode. The stream
 * keeps runLoop retained while scheduled. Scheduling twice in one mode is a
 * no-op that returns true (CF ignores it). */
RL_EXPORT bool RLReadStreamScheduleWithRunLoop(RLReadStreamRef stream, RLRunLoopRef runLoop, RLRunLoopMode mode);
RL_EXPORT bool RLWriteStreamScheduleWithRunLoop(RLWriteStreamRef stream, RLRunLoopRef runLoop, RLRunLoopMode mode);
/* False with kRLErrorNotFound if the stream is not scheduled there. */
RL_EXPORT bool RLReadStreamUnscheduleFromRunLoop(RLReadStreamRef stream, RLRunLoopRef runLoop, RLRunLoopMode mode);
RL_EXPORT bool RLWriteStreamUnscheduleFromRunLoop(RLWriteStreamRef stream, RLRunLoopRef runLoop, RLRunLoopMode mode);

/* ---- properties (CFReadStreamCopyProperty and friends) ----
 *
 * A property is named by a string; the names below are the ones streams
 * know, compared by content. Values are objects: RLBoolean, RLNumber
 * (RLNumber.h) or RLData.
 *
 *   kRLStreamPropertyAppendToFile (file write streams; RLBoolean): true
 *       makes Open keep the file's bytes and write after them (O_APPEND:
 *       every write goes to the end, also when another writer grew the
 *       file); false (the default) truncates. Set only before Open
 *       (kRLErrorInvalidState after). Setting true drops an offset set
 *       before. Readable (CF's copy returns NULL).
 *   kRLStreamPropertyFileCurrentOffset (file read and write streams;
 *       RLNumber, bytes from the start): before Open, setting it makes
 *       Open start there (a write stream still truncates first, unless
 *       appending, as in CF); on an open stream, setting it seeks. Reading
 *       it gives the position of an open stream, the offset set for one
 *       not yet open, and the last position of a closed one; it fails
 *       (NULL, kRLErrorInvalidState) before Open when nothing was set, and
 *       on an appending stream, whose writes go to the end wherever that
 *       is (CF returns NULL in those cases). Negative offsets are refused.
 *   kRLStreamPropertyDataWritten (memory write streams; RLData, read-only):
 *       everything written so far, at any time.
 *   kRLStreamPropertySocketNativeHandle (socket streams; RLData holding the
 *       socket's int, read-only): the socket, once there is one — a pair
 *       made over a socket always, a pair to a host once connected.
 *   kRLStreamPropertyShouldCloseNativeSocket (socket streams; RLBoolean):
 *       whether the socket is closed when both streams of the pair are
 *       gone. Defaults: false for RLStreamCreatePairWithSocket, true for
 *       RLStreamCreatePairWithSocketToHost. Readable and settable at any
 *       time; it is one setting for both streams of the pair.
 *
 * Misuse fails with the error set: a NULL stream or name
 * (kRLErrorInvalidArgument); an object that is not a stream of the
 * function's direction (kRLErrorInvalidObject); a name the stream does not have — unknown, or
 * a property of another kind of stream (kRLErrorNotFound); a NULL value or
 * one of the wrong type, a negative offset, or setting a read-only property
 * (kRLErrorInvalidArgument); setting when the stream's state forbids it
 * (kRLErrorInvalidState). A failed set changes nothing. */
typedef RLStringRef RLStreamPropertyKey;

/* "kRLStreamPropertyAppendToFile" and so on: the name of each constant. */
RL_EXPORT const RLStreamPropertyKey kRLStreamPropertyAppendToFile;
RL_EXPORT const RLStreamPropertyKey kRLStreamPropertyFileCurrentOffset;
RL_EXPORT const RLStreamPropertyKey kRLStreamPropertyDataWritten;
RL_EXPORT const RLStreamPropertyKey kRLStreamPropertySocketNativeHandle;
RL_EXPORT const RLStreamPropertyKey kRLStreamPropertyShouldCloseNativeSocket;

/* The property's value (Copy rule: RLRelease it; the booleans too), or
 * NULL with the error set. */
RL_EXPORT RLTypeRef RL_NULLABLE RLReadStreamCopyProperty(RLReadStreamRef stream,
                                                         RLStreamPropertyKey RL_NULLABLE propertyName);
RL_EXPORT RLTypeRef RL_NULLABLE RLWriteStreamCopyProperty(RLWriteStreamRef stream,
                                                          RLStreamPropertyKey RL_NULLABLE propertyName);
/* Sets the property (the stream keeps what it needs; the caller keeps its
 * reference to value). True if the stream took it; false, error set and
 * nothing changed, otherwise (CF's false). */
RL_EXPORT bool RLReadStreamSetProperty(RLReadStreamRef stream, RLStreamPropertyKey RL_NULLABLE propertyName,
                                       RLTypeRef RL_NULLABLE propertyValue);
RL_EXPORT bool RLWriteStreamSetProperty(RLWriteStreamRef stream, RLStreamPropertyKey RL_NULLABLE propertyName,
                                        RLTypeRef RL_NULLABLE propertyValue);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSTREAM_H */
