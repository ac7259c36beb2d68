/*
 * RLSocket.h — BSD sockets as run-loop sources, after CoreFoundation's
 * CFSocket (same names with the RL prefix, same callback types and flag
 * values, same callback arguments).
 *
 * CoreFoundation on Linux watches every CFSocket from one select() helper
 * thread (so no socket numbered 1024 or above works) and hands readiness to
 * the loop through a version-0 source. An RLSocket is watched by the epoll
 * set of each run loop its source is in (RLFileDescriptor.h): no helper
 * thread, no limit on fd numbers, and the callbacks run on the loop's thread
 * in the pass that saw the readiness.
 *
 * Callback types (one of Read, Accept, Data, plus Connect and/or Write):
 *   - Read: the socket is readable; the callback reads it. data is NULL.
 *     On a stream whose peer has closed, one final Read callback comes
 *     (reading returns 0) and no more after it; the socket stays valid
 *     (as in CF: the program invalidates it).
 *   - Accept: a listening socket has a connection; it is accepted (close on
 *     exec) and data points to its native fd (an int), address is the
 *     peer's address. The callback owns the fd. Every pending connection
 *     is accepted in one wake, one callback each, while the callback stays
 *     enabled and the loop would still serve the socket (as for Data). The listening fd is switched to non-blocking so that
 *     accepting never blocks the loop. When accept fails for want of
 *     descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), the
 *     connections stay queued and the listener rests for 0.1 s (a timer in
 *     the loop and mode that saw the failure) before trying again, instead
 *     of waking the loop again at once.
 *   - Data: whatever is readable is read in one wake and passed as an
 *     RLDataRef (data), with the sender's (or peer's) address. A datagram
 *     socket: one datagram (an error it reports, such as ECONNREFUSED
 *     after an ICMP port unreachable, comes as an empty data, as in CF;
 *     the socket stays valid). A stream: every byte queued, in chunks, one
 *     callback each, each handed over as soon as it is read (so an echo
 *     goes out while the next chunk is read): the first of up to 64 KiB;
 *     a chunk that fills its buffer is followed by another, of 128 KiB
 *     when no other fd waits in the same pass, 64 KiB when some do. At most 2 MiB per wake; the rest comes on the next
 *     pass. The next chunk of a wake comes only while the callback is
 *     still enabled and the loop would still serve the socket: a callback
 *     that disables Data, invalidates the socket, removes its source from
 *     the mode or stops the run gets no more in that wake (the bytes stay
 *     queued). End of stream or a read error is an empty RLData, once;
 *     then, as with CFSocket, the socket is invalidated as soon as that
 *     callback returns (RLSocketIsValid false, the fd closed if
 *     kRLSocketCloseOnInvalidate, the context's info released, the source
 *     gone from every loop). A program that still wants to write clears
 *     kRLSocketCloseOnInvalidate and wraps the fd in a new socket. An
 *     empty datagram is just that: the socket stays valid.
 *   - Connect: a background connect (RLSocketConnectToAddress with a
 *     negative timeout) finished; data is NULL on success or points to the
 *     error (an int32 errno value). Sent once.
 *   - Write: the connected socket can take more bytes. data is NULL.
 * address and data are valid during the callback only (retain or copy).
 * In one wake the callbacks come in the order Connect, Read/Accept/Data,
 * Write.
 *
 * Flags (RLSocketGet/SetSocketFlags, CF's values): a callback type whose
 * "automatically re-enable" flag is clear is disabled after it is delivered
 * until RLSocketEnableCallBacks. The default is CF's: Read, Accept and Data
 * re-enabled, Write not, and kRLSocketCloseOnInvalidate (only the type the socket was
 * made with among Read, Accept and Data: RLSocketGetSocketFlags shows it).
 *
 * Lifetime: as with CFSocket, a socket stays alive until it is invalidated,
 * even when the caller releases its last reference (the loop may still
 * deliver callbacks). Always RLSocketInvalidate it, then RLRelease it.
 * Invalidate before closing the native fd yourself.
 *
 * Differences from CFSocket: RLSocketCreateWithNative on an fd that already
 * has a socket makes a second object (CF returns the first one): do not
 * do it. Functions that return void in CF return bool (false: misuse,
 * see RLErrorGetLast()). No name registry (CFSocketRegisterValue…).
 */
#ifndef CRUNLOOP_RLSOCKET_H
#define CRUNLOOP_RLSOCKET_H

#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>

#include <stdint.h>

RL_EXTERN_C_BEGIN

typedef struct RLSocket *RLSocketRef;
typedef int RLSocketNativeHandle;

/* CFSocketError. */
typedef RLIndex RLSocketError;
enum {
    kRLSocketSuccess = 0,
    kRLSocketError = -1,
    kRLSocketTimeout = -2,
};

/* CFSocketCallBackType. */
typedef RLOptionFlags RLSocketCallBackType;
enum {
    kRLSocketNoCallBack = 0,
    kRLSocketReadCallBack = 1,
    kRLSocketAcceptCallBack = 2,
    kRLSocketDataCallBack = 3,
    kRLSocketConnectCallBack = 4,
    kRLSocketWriteCallBack = 8,
};

/* Socket flags. */
enum {
    kRLSocketAutomaticallyReenableReadCallBack = 1,
    kRLSocketAutomaticallyReenableAcceptCallBack = 2,
    kRLSocketAutomaticallyReenableDataCallBack = 3,
    kRLSocketAutomaticallyReenableWriteCallBack = 8,
    kRLSocketLeaveErrors = 64, /* kept for CF: no pending error is cleared before a Read callback, with or without */
    kRLSocketCloseOnInvalidate = 128,
};

typedef void (*RLSocketCallBack)(RLSocketRef s, RLSocketCallBackType type, RLDataRef RL_NULLABLE address,
                                 const void *RL_NULLABLE data, void *RL_NULLABLE info);

typedef struct RLSocketContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLSocketContext;

/* The type ID of sockets. */
RL_EXPORT RLTypeID RLSocketGetTypeID(void);

/* A new socket (close on exec). protocolFamily <= 0 means PF_INET,
 * socketType <= 0 SOCK_STREAM, protocol <= 0 TCP for streams and UDP for
 * datagrams (CF's defaults). callout may be NULL (no callbacks). Create
 * rule. NULL (error set) for unknown callback types, a context version
 * other than 0, or when socket(2) fails. */
RL_EXPORT RLSocketRef RL_NULLABLE RLSocketCreate(RLAllocatorRef RL_NULLABLE allocator, int32_t protocolFamily,
                                                 int32_t socketType, int32_t protocol,
                                                 RLOptionFlags callBackTypes, RLSocketCallBack RL_NULLABLE callout,
                                                 const RLSocketContext *RL_NULLABLE context);
/* Wraps an open socket (connected, listening or neither). Create rule.
 * NULL (error set) if sock is not an open socket. */
RL_EXPORT RLSocketRef RL_NULLABLE RLSocketCreateWithNative(RLAllocatorRef RL_NULLABLE allocator,
                                                           RLSocketNativeHandle sock, RLOptionFlags callBackTypes,
                                                           RLSocketCallBack RL_NULLABLE callout,
                                                           const RLSocketContext *RL_NULLABLE context);

/* CFSocketSignature, field for field: the socket's family, type and
 * protocol (<= 0: the defaults of RLSocketCreate) and an address, a struct
 * sockaddr in an RLData (the caller's; the functions below copy what they
 * keep). */
typedef struct RLSocketSignature {
    int32_t protocolFamily;
    int32_t socketType;
    int32_t protocol;
    RLDataRef RL_NULLABLE address;
} RLSocketSignature;

/* RLSocketCreate with the signature's family, type and protocol, then
 * RLSocketSetAddress to its address (bound; a stream also listens).
 * Create rule. NULL (error set) for a NULL signature or address, an
 * address that is no socket address, the arguments RLSocketCreate refuses,
 * or when socket, bind or listen fails (kRLErrorSystem, the errno in
 * systemErrno: EAFNOSUPPORT, EADDRINUSE...); nothing is left open then,
 * and a context retained was released again. */
RL_EXPORT RLSocketRef RL_NULLABLE RLSocketCreateWithSocketSignature(RLAllocatorRef RL_NULLABLE allocator,
                                                                    const RLSocketSignature *signature,
                                                                    RLOptionFlags callBackTypes,
                                                                    RLSocketCallBack RL_NULLABLE callout,
                                                                    const RLSocketContext *RL_NULLABLE context);
/* RLSocketCreate with the signature's family, type and protocol, then
 * RLSocketConnectToAddress to its address with `timeout` (CF's meaning:
 * > 0 waits that long at most, 0 is a plain blocking connect, < 0 returns
 * at once while the connect goes on in the background, its result coming
 * to the Connect callback). Create rule. NULL (error set, nothing left
 * open, the context released again) as for the function above, for a NaN
 * timeout, and when the connect fails (kRLErrorSystem: ECONNREFUSED,
 * ENETUNREACH...) or does not finish in time (kRLErrorTimedOut). */
RL_EXPORT RLSocketRef RL_NULLABLE RLSocketCreateConnectedToSocketSignature(
    RLAllocatorRef RL_NULLABLE allocator, const RLSocketSignature *signature, RLOptionFlags callBackTypes,
    RLSocketCallBack RL_NULLABLE callout, const RLSocketContext *RL_NULLABLE context, RLTimeInterval timeout);

/* Binds the socket to address (a struct sockaddr in an RLData) and, for a
 * stream, listens (backlog 256), as CFSocketSetAddress does. */
RL_EXPORT RLSocketError RLSocketSetAddress(RLSocketRef s, RLDataRef address);

/* Connects to address. timeout > 0: waits at most that long
 * (kRLSocketTimeout; the socket's blocking mode is restored). timeout == 0:
 * a plain blocking connect. timeout < 0: starts the connect in the
 * background and returns kRLSocketSuccess; the Connect callback reports
 * the result (the socket stays non-blocking). kRLSocketError with the
 * error set (its systemErrno is the connect error) otherwise. */
RL_EXPORT RLSocketError RLSocketConnectToAddress(RLSocketRef s, RLDataRef address, RLTimeInterval timeout);

/* Sends all of data (to address, or to the peer when address is NULL).
 * timeout > 0 bounds the whole send (kRLSocketTimeout: part of the data
 * may have been sent); otherwise the call blocks until everything is
 * sent. Never raises SIGPIPE. */
RL_EXPORT RLSocketError RLSocketSendData(RLSocketRef s, RLDataRef RL_NULLABLE address, RLDataRef data,
                                         RLTimeInterval timeout);

/* Re-arms or mutes callback types (only those the socket was made with;
 * others fail with kRLErrorInvalidArgument). A disabled type is not lost:
 * enabling it again delivers the readiness that is still there. */
RL_EXPORT bool RLSocketEnableCallBacks(RLSocketRef s, RLOptionFlags callBackTypes);
RL_EXPORT bool RLSocketDisableCallBacks(RLSocketRef s, RLOptionFlags callBackTypes);

/* The flags above; 0 (error set) for a bad object. */
RL_EXPORT RLOptionFlags RLSocketGetSocketFlags(RLSocketRef s);
/* false (error set, nothing changed) for unknown flag bits. */
RL_EXPORT bool RLSocketSetSocketFlags(RLSocketRef s, RLOptionFlags flags);

/* Stops every callback, removes the socket's source from every loop,
 * closes the fd if kRLSocketCloseOnInvalidate, releases the context info.
 * Idempotent; may be called from the socket's own callback or from any
 * thread. While a loop is in the socket's callbacks (the caller's own, or
 * another thread's), the close waits until that callback returns, so the
 * library never reads from a number that a new open may have reused. */
RL_EXPORT bool RLSocketInvalidate(RLSocketRef s);
RL_EXPORT bool RLSocketIsValid(RLSocketRef s);

/* The native fd, or -1 (error set) once invalidated. */
RL_EXPORT RLSocketNativeHandle RLSocketGetNative(RLSocketRef s);
/* The local / peer address (getsockname / getpeername). Create rule; NULL
 * (error set) when invalidated or, for the peer, not connected. */
RL_EXPORT RLDataRef RL_NULLABLE RLSocketCopyAddress(RLSocketRef s);
RL_EXPORT RLDataRef RL_NULLABLE RLSocketCopyPeerAddress(RLSocketRef s);
RL_EXPORT bool RLSocketGetContext(RLSocketRef s, RLSocketContext *context);

/* The socket's run-loop source (one per socket; a second call returns the
 * same source retained again). Create rule. Add it to one or more loops. */
RL_EXPORT RLRunLoopSourceRef RL_NULLABLE RLSocketCreateRunLoopSource(RLAllocatorRef RL_NULLABLE allocator,
                                                                     RLSocketRef s, RLIndex order);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSOCKET_H */
