/*
 * RLPort.h — local ports (NSMachPort / NSPortMessage): messages between
 * the threads of one process, delivered as a run-loop source.
 *
 * A port receives: give it a handler, add it to a run loop in some modes
 * (RLRunLoopAddPort, or its source), and every message sent to it is
 * handed to the handler on that loop's thread, one at a time, in the order
 * each sender sent them. A message carries a 32-bit id and components —
 * RLData buffers and RLPorts, in order — plus, optionally, the sender's own
 * port for replies (the guide's check-in protocol: a worker sends the main
 * thread a message whose send port is its own, and the main thread talks
 * to the worker through it from then on).
 *
 * Costs: components are retained, never copied (an RLData holds the one
 * copy of its bytes); a send takes the port's lock once, allocates nothing
 * once the port's queue has grown to the traffic, and wakes the receiving
 * loop only when its queue was empty and the loop sleeps (wake-ups are
 * coalesced, so a loop that is awake costs the sender no system call).
 * The message a handler gets is valid for the call: once the handler
 * returns without having retained it, the same object may carry the next
 * message (retain it to keep it, as the Get rule says).
 *
 * Back-pressure: a port queues at most its limit of messages (default
 * 1024, RLPortSetQueueLimit). A send to a full port waits until there is
 * room or its limit date passes, then returns false (kRLErrorTimedOut); a
 * message is never dropped once a send returned true. Invalidating a port
 * releases the messages still queued, wakes the senders that wait for room
 * (false, kRLErrorInvalidObject) and calls its invalidation callback, so
 * whoever holds the port hears of it.
 *
 * Thread-safety: every function may be called from any thread. The
 * handler runs with no lock held and may send, invalidate or release.
 */
#ifndef CRUNLOOP_RLPORT_H
#define CRUNLOOP_RLPORT_H

#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>

#include <stdint.h>

RL_EXTERN_C_BEGIN

typedef struct RLPort *RLPortRef;
typedef struct RLPortMessage *RLPortMessageRef;

typedef struct RLPortContext {
    RLIndex version; /* 0 */
    void *RL_NULLABLE info;
    const void *RL_NULLABLE (*RL_NULLABLE retain)(const void *RL_NULLABLE info);
    void (*RL_NULLABLE release)(const void *RL_NULLABLE info);
    char *RL_NULLABLE (*RL_NULLABLE copyDescription)(const void *RL_NULLABLE info);
} RLPortContext;

/* Handles one message on the receiving loop's thread. The message is valid
 * for the call (retain it to keep it). */
typedef void (*RLPortCallBack)(RLPortRef port, RLPortMessageRef message, void *RL_NULLABLE info);
typedef void (*RLPortInvalidationCallBack)(RLPortRef port, void *RL_NULLABLE info);

/* A new port (Create rule). A port without a handler drops what it
 * receives (as an NSPort without a delegate). NULL (error set) for a bad
 * context version or no memory. */
RL_EXPORT RLPortRef RL_NULLABLE RLPortCreate(RLAllocatorRef RL_NULLABLE allocator, RLPortCallBack RL_NULLABLE callout,
                                             const RLPortContext *RL_NULLABLE context);
#if __BLOCKS__
/* The same with a block handler (copied; released with the port). */
RL_EXPORT RLPortRef RL_NULLABLE RLPortCreateWithHandler(RLAllocatorRef RL_NULLABLE allocator,
                                                        void (^RL_NULLABLE handler)(RLPortMessageRef message));
#endif

RL_EXPORT bool RLPortGetContext(RLPortRef RL_NULLABLE port, RLPortContext *RL_NULLABLE context);
/* At most `messages` (>= 1) queued; lowering it below what is queued keeps
 * those, and makes senders wait until the queue drains below it. */
RL_EXPORT bool RLPortSetQueueLimit(RLPortRef RL_NULLABLE port, RLIndex messages);
/* Messages queued now (a snapshot), or -1 (error set). */
RL_EXPORT RLIndex RLPortGetQueuedCount(RLPortRef RL_NULLABLE port);

RL_EXPORT bool RLPortIsValid(RLPortRef RL_NULLABLE port);
/* Invalidates: no more sends, queued messages released, its source
 * removed from every loop, waiting senders woken, the invalidation
 * callback called (once), then the context's info released (once, as
 * CFMachPort does; a handler running meanwhile keeps it until its batch
 * ends). Idempotent; false only for a bad object. */
RL_EXPORT bool RLPortInvalidate(RLPortRef RL_NULLABLE port);
/* As CF: on an invalid port the callback is called at once. */
RL_EXPORT bool RLPortSetInvalidationCallBack(RLPortRef RL_NULLABLE port,
                                             RLPortInvalidationCallBack RL_NULLABLE callout);

/* The port's run-loop source (Create rule; one per port, later calls
 * return it again retained). NULL (error set) for an invalid port. */
RL_EXPORT RLRunLoopSourceRef RL_NULLABLE RLPortCreateRunLoopSource(RLAllocatorRef RL_NULLABLE allocator,
                                                                   RLPortRef RL_NULLABLE port, RLIndex order);
/* [NSRunLoop addPort:forMode:]: the port's source, in `mode` of rl. */
RL_EXPORT bool RLRunLoopAddPort(RLRunLoopRef RL_NULLABLE rl, RLPortRef RL_NULLABLE port, RLRunLoopMode RL_NULLABLE mode);
RL_EXPORT bool RLRunLoopRemovePort(RLRunLoopRef RL_NULLABLE rl, RLPortRef RL_NULLABLE port,
                                   RLRunLoopMode RL_NULLABLE mode);
RL_EXPORT bool RLRunLoopContainsPort(RLRunLoopRef RL_NULLABLE rl, RLPortRef RL_NULLABLE port,
                                     RLRunLoopMode RL_NULLABLE mode);

/* Sends a message to `port`: msgid, `count` components (each an RLData or
 * an RLPort; retained, not copied; may be NULL when count is 0) and the
 * sender's reply port (may be NULL). Waits for room until limitDate
 * (RLAbsoluteTime; a date in the past: do not wait). False (error set):
 * kRLErrorTimedOut (full until then), kRLErrorInvalidObject (invalid port
 * or component), kRLErrorInvalidArgument. */
RL_EXPORT bool RLPortSendBeforeDate(RLPortRef RL_NULLABLE port, RLAbsoluteTime limitDate, uint32_t msgid,
                                    const RLTypeRef RL_NULLABLE *RL_NULLABLE components, RLIndex count,
                                    RLPortRef RL_NULLABLE replyPort);

/* ---- messages (NSPortMessage) ---- */

/* A message to send to sendPort whose replies go to receivePort (either
 * may be NULL), as NSPortMessage's initWithSendPort:receivePort:components:,
 * with a copy of the component list (the components are retained). Create
 * rule. A message a port received has them seen from the receiver, as in
 * Foundation: its send port is the sender's reply port (send the answer
 * there) and its receive port the port it arrived on. */
RL_EXPORT RLPortMessageRef RL_NULLABLE RLPortMessageCreate(RLAllocatorRef RL_NULLABLE allocator,
                                                           RLPortRef RL_NULLABLE sendPort,
                                                           RLPortRef RL_NULLABLE receivePort,
                                                           const RLTypeRef RL_NULLABLE *RL_NULLABLE components,
                                                           RLIndex count);
RL_EXPORT uint32_t RLPortMessageGetMsgid(RLPortMessageRef RL_NULLABLE message);
RL_EXPORT bool RLPortMessageSetMsgid(RLPortMessageRef RL_NULLABLE message, uint32_t msgid);
/* The number of components, or -1 (error set). */
RL_EXPORT RLIndex RLPortMessageGetComponentCount(RLPortMessageRef RL_NULLABLE message);
/* Component i: an RLDataRef or an RLPortRef (Get rule: valid while the
 * message is). NULL (error set) if i is out of range. */
RL_EXPORT RLTypeRef RL_NULLABLE RLPortMessageGetComponent(RLPortMessageRef RL_NULLABLE message, RLIndex i);
/* Get rule; NULL when there is none (no error). */
RL_EXPORT RLPortRef RL_NULLABLE RLPortMessageGetSendPort(RLPortMessageRef RL_NULLABLE message);
RL_EXPORT RLPortRef RL_NULLABLE RLPortMessageGetReceivePort(RLPortMessageRef RL_NULLABLE message);
/* Sends the message to its send port, replies to its receive port, as
 * RLPortSendBeforeDate; so sending a received message answers its sender. */
RL_EXPORT bool RLPortMessageSendBeforeDate(RLPortMessageRef RL_NULLABLE message, RLAbsoluteTime limitDate);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLPORT_H */
