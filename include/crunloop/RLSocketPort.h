/*
 * RLSocketPort.h — ports across hosts over TCP (NSSocketPort), as
 * run-loop sources.
 *
 * A local socket port listens on a TCP port (IPv4 or IPv6) and hands every
 * message it receives to its handler on the thread of the run loop its
 * source is in. A remote socket port names a host and TCP port and sends
 * messages to the local port listening there. A message is what RLPort
 * carries: a 32-bit id, components — RLData buffers and socket ports, in
 * order — and, optionally, the sender's reply port. On the receiving side
 * every port in a message (the reply port included) arrives as a remote
 * socket port naming the same listening port, so a handler answers by
 * sending to the message's send port.
 *
 * Transport: one TCP connection per remote port (opened on its first send,
 * with a non-blocking connect bounded by the send's limit date, reused
 * after), framed as message ports frame theirs (Sources/CRunLoop/ports/rl_wire.h).
 * Component 0 of a frame is the reply port (empty when there is none); a
 * port travels as "host:port" text ("[v6]:port" for IPv6). A local port
 * bound to every address travels as "*:port", which the receiver reads as
 * "the address this connection came from": the reply reaches the sender by
 * the route the message took, whatever the sender's own idea of its name.
 * Receivers check frames as message ports do: a malformed or oversized
 * frame, a message with more components than the port takes
 * (RLSocketPortSetMaxComponents), or a peer that stalls mid-frame, loses
 * its connection (counted, with the reason, in the port's description) and
 * everyone else is served.
 *
 * Names: creating a remote port resolves its host with getaddrinfo in the
 * calling thread (its IPv4 addresses are tried first, then its IPv6 ones,
 * as Foundation's SocketPort does) (it may block that thread on DNS; it never blocks a run
 * loop: ports that arrive in messages carry numeric addresses). Remote
 * ports are shared: creating one for an address the process already has a
 * valid remote port for returns that port, retained, so replies to one
 * sender reuse one connection. The reply port of a message stays alive
 * (held by the receiving port) while the connection the message came on
 * lasts, so a handler's replies to it go out on one connection, in the
 * order sent, even when the handler lets go of the message's ports.
 *
 * Delivery (as NSSocketPort): a send that returns true handed the whole
 * message to the kernel, in order after the same port's earlier sends; it
 * does not say that the handler ran. A remote port whose peer goes away
 * (connection closed or refused) becomes invalid: the send fails, the
 * invalidation callback runs, and a new remote port for that address may be
 * created once the peer is back. That holds also when the peer closes (FIN)
 * or resets (RST) the connection while its listener stays open: the next
 * send fails with kRLErrorInvalidState and the port never reconnects on its
 * own (a receiver that drops a connection, e.g. for a bad frame, so ends
 * its sender's remote port).
 *
 * Security: none beyond the frame checks. A TCP port accepts any host that
 * can reach it; bind a local port to a loopback address to keep others out.
 *
 * Thread-safety: every function may be called from any thread; a remote
 * port's sends are serialized. The handler runs with no lock held and may
 * send, invalidate or release.
 */
#ifndef CRUNLOOP_RLSOCKETPORT_H
#define CRUNLOOP_RLSOCKETPORT_H

#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>

#include <stdint.h>

RL_EXTERN_C_BEGIN

typedef struct RLSocketPort *RLSocketPortRef;

typedef struct RLSocketPortContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLSocketPortContext;

/* Handles one message on the receiving loop's thread: `count` components
 * (each an RLDataRef or a remote RLSocketPortRef; Get rule, valid for the
 * call: retain one to keep it) and the sender's reply port (a remote port,
 * or NULL). */
typedef void (*RLSocketPortCallBack)(RLSocketPortRef local, uint32_t msgid, const RLTypeRef RL_NONNULL *RL_NULLABLE components,
                                     RLIndex count, RLSocketPortRef RL_NULLABLE sendPort, void *RL_NULLABLE info);
/* Called once when the port becomes invalid. */
typedef void (*RLSocketPortInvalidationCallBack)(RLSocketPortRef port, void *RL_NULLABLE info);

/* A local port listening on `tcpPort` (0: any free port; RLSocketPortGetPort
 * says which) of `address` (a numeric address of `family`, or NULL for
 * every address). family: AF_INET, or AF_INET6 (which also takes IPv4
 * clients when address is NULL). Create rule. NULL (error set):
 * kRLErrorExists if the TCP port is in use, kRLErrorInvalidArgument for a
 * bad family, address or context, or the socket's errno. A port without a
 * handler drops what it receives. */
RL_EXPORT RLSocketPortRef RL_NULLABLE RLSocketPortCreateLocal(RLAllocatorRef RL_NULLABLE allocator, int family,
                                                              const char *RL_NULLABLE address, uint16_t tcpPort,
                                                              RLSocketPortCallBack RL_NULLABLE callout,
                                                              const RLSocketPortContext *RL_NULLABLE context);

/* A remote port for `host` (a name or a numeric IPv4/IPv6 address) and
 * `tcpPort` (1..65535). Resolves the host in this thread (see above);
 * connects on the first send. Create rule. NULL (error set):
 * kRLErrorNotFound if the host does not resolve, kRLErrorInvalidArgument. */
RL_EXPORT RLSocketPortRef RL_NULLABLE RLSocketPortCreateRemote(RLAllocatorRef RL_NULLABLE allocator,
                                                               const char *RL_NULLABLE host, uint16_t tcpPort);

RL_EXPORT bool RLSocketPortIsRemote(RLSocketPortRef RL_NULLABLE port);
RL_EXPORT bool RLSocketPortIsValid(RLSocketPortRef RL_NULLABLE port);
/* The TCP port: the one a local port listens on, or a remote port's
 * target. 0 (error set) for a bad object. */
RL_EXPORT uint16_t RLSocketPortGetPort(RLSocketPortRef RL_NULLABLE port);
/* AF_INET or AF_INET6 (a remote port: of the address it uses), or -1. */
RL_EXPORT int RLSocketPortGetProtocolFamily(RLSocketPortRef RL_NULLABLE port);
/* The port's socket address (a struct sockaddr_in or sockaddr_in6, as
 * NSSocketPort's `address`). Create rule; NULL (error set) for a bad object. */
RL_EXPORT RLDataRef RL_NULLABLE RLSocketPortCopyAddress(RLSocketPortRef RL_NULLABLE port);
RL_EXPORT bool RLSocketPortGetContext(RLSocketPortRef RL_NULLABLE port, RLSocketPortContext *RL_NULLABLE context);

/* Closes the port: a local port stops listening (its TCP port is free at
 * once) and drops its clients; a remote port disconnects. Calls the
 * invalidation callback once, then releases the context's info (once,
 * as a message port does). Idempotent; false only for a bad object. */
RL_EXPORT bool RLSocketPortInvalidate(RLSocketPortRef RL_NULLABLE port);
/* As CF: on an already invalid port the callback is called at once. */
RL_EXPORT bool RLSocketPortSetInvalidationCallBack(RLSocketPortRef RL_NULLABLE port,
                                                   RLSocketPortInvalidationCallBack RL_NULLABLE callout);
/* The largest message the port accepts (local) or sends (remote), in
 * bytes of frame body (default and maximum 64 MiB, minimum 64). */
RL_EXPORT bool RLSocketPortSetMessageLimit(RLSocketPortRef RL_NULLABLE port, RLIndex bytes);
/* The most components (reply port not counted) a message may carry, by
 * default; and the most a port can be set to take (a frame body of at most
 * 64 MiB holds at most this many 8-byte component headers, reply port
 * included). */
#define RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS 4096
#define RL_SOCKET_PORT_MAX_COMPONENTS_LIMIT 8388607
/* The most components a message may carry: a local port drops the
 * connection of a sender whose message has more (on the message's header,
 * before its body is read; counted, with the reason, in the port's
 * description; the sender's remote port then fails its next send with
 * kRLErrorInvalidState); a remote port refuses to send more
 * (kRLErrorInvalidArgument, nothing sent). count: 0 ..
 * RL_SOCKET_PORT_MAX_COMPONENTS_LIMIT (default
 * RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS); it applies from the next message
 * on, on connections already open too, and may be set on an invalid port
 * (to no effect). Receiving a message costs time linear in its size
 * whatever the limit. False (error set): kRLErrorInvalidArgument for a
 * count out of range or a NULL port, kRLErrorInvalidObject for an object
 * that is not a live socket port. */
RL_EXPORT bool RLSocketPortSetMaxComponents(RLSocketPortRef RL_NULLABLE port, RLIndex count);
/* Local ports: how long a client may take to finish a message it began
 * (seconds, default 10) before the port drops it. */
RL_EXPORT bool RLSocketPortSetStallTimeout(RLSocketPortRef RL_NULLABLE local, RLTimeInterval seconds);

/* The run-loop source of a local port (Create rule; one per port: later
 * calls return it again, retained). Messages are received on the thread of
 * each run loop the source is in, in its modes (as a message port's). From
 * now on the port keeps itself alive until it is invalidated (as a message
 * port does): releasing it does not stop it; RLSocketPortInvalidate does.
 * NULL (error set) for a remote or invalid port. */
RL_EXPORT RLRunLoopSourceRef RL_NULLABLE RLSocketPortCreateRunLoopSource(RLAllocatorRef RL_NULLABLE allocator,
                                                                         RLSocketPortRef RL_NULLABLE local,
                                                                         RLIndex order);

/* Sends a message through a remote port: msgid, `count` components (each
 * an RLData or an RLSocketPort; may be NULL when count is 0) and the reply
 * port (a socket port, local or remote, or NULL). Connecting and writing
 * wait until limitDate (RLAbsoluteTime; in the past: do not wait). False
 * (error set): kRLErrorTimedOut (nothing was sent, or the connection was
 * reset because only part was: either way the receiver sees nothing),
 * kRLErrorNotFound (nobody listens there: the port is now invalid),
 * kRLErrorInvalidState (the peer broke the connection: the port is now
 * invalid), kRLErrorInvalidObject (an invalid port or component),
 * kRLErrorInvalidArgument (a local port, NaN date, too large). */
RL_EXPORT bool RLSocketPortSendBeforeDate(RLSocketPortRef RL_NULLABLE remote, RLAbsoluteTime limitDate, uint32_t msgid,
                                          const RLTypeRef RL_NULLABLE *RL_NULLABLE components, RLIndex count,
                                          RLSocketPortRef RL_NULLABLE replyPort);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSOCKETPORT_H */
