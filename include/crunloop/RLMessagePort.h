/*
 * RLMessagePort.h — named message ports between threads and between
 * processes (CFMessagePort), as run-loop sources.
 *
 * A local port is created under a name and answers requests: its callout
 * runs on the thread of the run loop its source was added to, gets the
 * message id and data, and returns the reply data (or NULL). A remote port
 * is obtained by name, from any thread of any process of the same user, and
 * sends requests to it: one-way, or waiting for the reply.
 *
 * Transport: a stream Unix-domain socket in Linux's abstract namespace
 * named "crunloop.<uid>.<name>" (a long name is shortened to a hash), and
 * framed messages (Sources/CRunLoop/ports/rl_wire.h). Why the abstract
 * namespace: a name is freed by the kernel the moment its port's socket
 * closes, so a crashed process never leaves a stale name behind, and there
 * is no directory to create, secure or clean. Security: both ends check the
 * other's credentials (SO_PEERCRED). A remote port talks only to a local
 * port owned by the same user, so another user who takes a name first can
 * deny it but never impersonate it; a local port accepts only clients of
 * the same user unless its access policy (RLMessagePortSetAccessPolicy)
 * admits others. Frames larger than the port's limit (default 64 MiB),
 * malformed frames and peers that stall mid-frame lose their connection,
 * and the port keeps serving everyone else.
 *
 * Differences from CFMessagePort on Darwin, where CF's defines behaviour:
 *   - While SendRequest waits for a reply it runs the caller's run loop in
 *     replyMode, as Darwin, but only if that mode has a source, timer or
 *     perform request when the wait begins (else it waits on the
 *     connection alone, which serves nothing either way, at less cost).
 *     What the loop runs meanwhile may not send on the same remote port
 *     (refused at once: kRLMessagePortTransportError, kRLErrorInvalidState;
 *     Darwin lets such requests interleave). A local port whose callout
 *     sent the request is served meanwhile too (a peer that asks back is
 *     answered), as a nested run serves a port on Darwin.
 *   - A local port answers a client's requests one after another and reads
 *     no more of them while its replies wait to be written (the client is
 *     not reading): the loop then watches that client only for room to
 *     write, and serves everyone else.
 *   - A remote port notices that its local port went away when it next
 *     sends, or, once it has an invalidation callback, from the run loop
 *     of the thread that set the callback (common modes).
 *   - Names are per user (the uid is part of the socket's name).
 * Thread-safety: every function may be called from any thread; a remote
 * port serializes its requests (one in flight at a time).
 */
#ifndef CRUNLOOP_RLMESSAGEPORT_H
#define CRUNLOOP_RLMESSAGEPORT_H

#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>

#include <sys/types.h>

RL_EXTERN_C_BEGIN

typedef struct RLMessagePort *RLMessagePortRef;

/* SendRequest results (CFMessagePort's values). */
enum {
    kRLMessagePortSuccess = 0,
    kRLMessagePortSendTimeout = -1,
    kRLMessagePortReceiveTimeout = -2,
    kRLMessagePortIsInvalid = -3,
    kRLMessagePortTransportError = -4,
    kRLMessagePortBecameInvalidError = -5,
};

typedef struct RLMessagePortContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLMessagePortContext;

/* Answers one request on the local port's run-loop thread. `data` is valid
 * for the call (retain it to keep it). Return the reply (Create rule: the
 * port releases it after sending) or NULL for an empty reply (the sender
 * gets empty data, as with CF). */
typedef RLDataRef RL_NULLABLE (*RLMessagePortCallBack)(RLMessagePortRef local, int32_t msgid,
                                                       RLDataRef RL_NULLABLE data, void *RL_NULLABLE info);
/* Called once when the port becomes invalid (by RLMessagePortInvalidate,
 * or for a remote port, when its local port goes away). */
typedef void (*RLMessagePortInvalidationCallBack)(RLMessagePortRef port, void *RL_NULLABLE info);
/* Whether a local port takes a client of another user (uid, gid, pid from
 * SO_PEERCRED). Runs on the port's run-loop thread. */
typedef bool (*RLMessagePortAccessPolicy)(RLMessagePortRef local, uid_t uid, gid_t gid, pid_t pid,
                                          void *RL_NULLABLE info);

/* The type ID of message ports. */
RL_EXPORT RLTypeID RLMessagePortGetTypeID(void);

/* A local port listening under `name` (1..255 bytes, no NUL). Create rule.
 * NULL (error set) if the name is taken by a live port of any process
 * (kRLErrorExists), invalid, or the socket fails. *shouldFreeInfo (may be
 * NULL) is set true when the call failed and the context's info was not
 * kept: the caller then frees it, as with CF. The context's retain is
 * called on success, its release once, when the port is invalidated (by
 * RLMessagePortInvalidate or the last release), after the invalidation
 * callback.
 * A NULL name makes an anonymous port, as CF: a new one each time, with no
 * name (RLMessagePortGetName is NULL), so no remote port finds it; it can
 * be scheduled and invalidated, and RLMessagePortNameServerRegisterPort
 * gives it names under which its source then serves requests (where CF
 * has CFMessagePortSetName). */
RL_EXPORT RLMessagePortRef RL_NULLABLE RLMessagePortCreateLocal(RLAllocatorRef RL_NULLABLE allocator,
                                                                const char *RL_NULLABLE name,
                                                                RLMessagePortCallBack RL_NULLABLE callout,
                                                                const RLMessagePortContext *RL_NULLABLE context,
                                                                bool *RL_NULLABLE shouldFreeInfo);

/* A remote port connected to the local port named `name` (of this user).
 * Create rule. NULL (error set: kRLErrorNotFound if no such port is
 * listening, kRLErrorPermission if its owner is another user). */
RL_EXPORT RLMessagePortRef RL_NULLABLE RLMessagePortCreateRemote(RLAllocatorRef RL_NULLABLE allocator,
                                                                 const char *RL_NULLABLE name);

RL_EXPORT bool RLMessagePortIsRemote(RLMessagePortRef RL_NULLABLE port);
/* The port's name (valid while the caller holds the port), or NULL (an
 * anonymous port, or a bad object: error set). */
RL_EXPORT const char *RL_NULLABLE RLMessagePortGetName(RLMessagePortRef RL_NULLABLE port);
/* Renames a local port (CF's SetName): it listens under `name` from now
 * on, and its old name is free at once. Names GetName returned before stay
 * valid while the port lives. True if renamed, or if `name` is its name
 * already. False (error set, nothing changed) for a remote port
 * (kRLErrorInvalidState), an invalidated one (kRLErrorInvalidObject), a
 * name as CreateLocal refuses (kRLErrorInvalidArgument), or a name another
 * port of this process has, as its name or registered with the name
 * server, or another process's port listens under (kRLErrorExists). */
RL_EXPORT bool RLMessagePortSetName(RLMessagePortRef RL_NULLABLE port, const char *RL_NULLABLE name);
RL_EXPORT bool RLMessagePortGetContext(RLMessagePortRef RL_NULLABLE port, RLMessagePortContext *RL_NULLABLE context);
RL_EXPORT bool RLMessagePortIsValid(RLMessagePortRef RL_NULLABLE port);
/* Closes the port: a local port stops listening (its name is free at once)
 * and drops its clients; a remote port disconnects. Calls the invalidation
 * callback once, then the context's release. Idempotent; false only for a
 * bad object.
 * fork(): a child lets go of its parent's listening sockets as it starts
 * (atfork), whatever it does next, and an invalidated port's socket is
 * shut down, so a dead name never accepts a connection, in any process. A
 * create of the name waits (up to 2 s) for a child that has not run yet;
 * a child made without fork()'s handlers (a raw clone) keeps the name
 * taken, though dead, until it exits. */
RL_EXPORT bool RLMessagePortInvalidate(RLMessagePortRef RL_NULLABLE port);
RL_EXPORT RLMessagePortInvalidationCallBack RL_NULLABLE
RLMessagePortGetInvalidationCallBack(RLMessagePortRef RL_NULLABLE port);
/* Sets the callback. On an already invalid port it is called at once (as
 * CF does). For a remote port, the calling thread's run loop watches the
 * connection in common modes from now on, so the callback runs there when
 * the local port goes away. */
RL_EXPORT bool RLMessagePortSetInvalidationCallBack(RLMessagePortRef RL_NULLABLE port,
                                                    RLMessagePortInvalidationCallBack RL_NULLABLE callout);

/* Local ports: which clients of other users to take (NULL: none). */
RL_EXPORT bool RLMessagePortSetAccessPolicy(RLMessagePortRef RL_NULLABLE local,
                                            RLMessagePortAccessPolicy RL_NULLABLE policy);
/* The largest message body the port accepts or sends (bytes; default and
 * maximum 64 MiB, minimum 64). */
RL_EXPORT bool RLMessagePortSetMessageLimit(RLMessagePortRef RL_NULLABLE port, RLIndex bytes);

/* Local ports: how long a client may take to finish a frame it began
 * (seconds, default 10) before the port drops it. A client that is quiet
 * between frames is never dropped. */
RL_EXPORT bool RLMessagePortSetStallTimeout(RLMessagePortRef RL_NULLABLE local, RLTimeInterval seconds);

/* Sends `data` (may be NULL) with `msgid` to the remote port. sendTimeout
 * bounds the send, rcvTimeout the wait for the reply (seconds; <= 0: do not
 * wait — as CF, a request whose reply is not waited for still goes out).
 * With replyMode NULL the message is one-way; otherwise the calling
 * thread's run loop runs in replyMode until the reply comes, the timeout
 * passes or the port is invalidated (kRLMessagePortBecameInvalidError), so
 * its timers, sources and local ports in that mode are served meanwhile
 * (see the differences above). On success with replyMode,
 * *returnData (may be NULL to ignore it) gets the reply (Create rule; empty
 * data when the callout returned NULL, as CF). An answer that is not a
 * well-formed reply (another kind of frame, more than one component, or a
 * component that is not data, such as a port's name) is a
 * kRLMessagePortTransportError: the connection is dropped, the remote port
 * invalidated, *returnData gets nothing. Returns a kRLMessagePort*
 * code; an error other than Success also leaves the thread's error. */
RL_EXPORT int32_t RLMessagePortSendRequest(RLMessagePortRef RL_NULLABLE remote, int32_t msgid,
                                           RLDataRef RL_NULLABLE data, RLTimeInterval sendTimeout,
                                           RLTimeInterval rcvTimeout, RLRunLoopMode RL_NULLABLE replyMode,
                                           RLDataRef RL_NULLABLE *RL_NULLABLE returnData);

/* The run-loop source of a local port (Create rule; one source per port:
 * later calls return it again, retained). Requests are answered on the
 * thread of each run loop the source is in, in its modes (the port's
 * listening socket and each client's connection are sources of those loops
 * in those modes, and a timer there stands for the stall timeout while a
 * client is mid-message). From now on the port keeps itself alive until it
 * is invalidated, as CF's source keeps its port: the caller may release both
 * once the source is added, and the port serves on; RLMessagePortInvalidate
 * ends it. NULL (error set) for a remote or invalid port. */
RL_EXPORT RLRunLoopSourceRef RL_NULLABLE RLMessagePortCreateRunLoopSource(RLAllocatorRef RL_NULLABLE allocator,
                                                                          RLMessagePortRef RL_NULLABLE local,
                                                                          RLIndex order);

/* ---- the name server (NSMessagePortNameServer) ----
 *
 * Names are per user and live in the same abstract namespace as port
 * names: a local port is registered under the name it was created with
 * for as long as it is valid, and may be registered under more names (each
 * one more listening socket of the port, served like its own). Lookup
 * returns a remote port, from any process of the user. A name vanishes
 * with the port (invalidated, or its process gone: nothing stale is left),
 * and a name that any port of any process holds cannot be taken. */

/* Registers a valid local port under `name` too. True if it now answers
 * to it (also when it already did). False (error set): kRLErrorExists
 * (another port holds the name), kRLErrorInvalidState (a remote port),
 * kRLErrorInvalidObject, kRLErrorInvalidArgument (a bad name). */
RL_EXPORT bool RLMessagePortNameServerRegisterPort(RLMessagePortRef RL_NULLABLE local, const char *RL_NULLABLE name);
/* A remote port for the port registered as `name` (Create rule), as
 * RLMessagePortCreateRemote. NULL (error set: kRLErrorNotFound, ...). */
RL_EXPORT RLMessagePortRef RL_NULLABLE RLMessagePortNameServerCopyPort(const char *RL_NULLABLE name);
/* Removes a name this process registered: an extra name is dropped (the
 * port stays valid and keeps its other names); a port's own name goes with
 * the port, which is invalidated. False (error set): kRLErrorNotFound if no
 * port of this process holds the name, kRLErrorInvalidArgument. */
RL_EXPORT bool RLMessagePortNameServerRemovePort(const char *RL_NULLABLE name);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLMESSAGEPORT_H */
