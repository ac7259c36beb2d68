/*
 * rl_fuzz.h — the entry points the fuzz harnesses (Tests/fuzz) call to
 * reach what parses input from other processes and hosts without a
 * network in between. Private; nothing else calls them.
 *
 * Each hands one frame (taken from an rl__wire_reader, owned by the callee
 * as ops->dispatch owns it) to a local port's receiving code, as if it had
 * arrived on connection c, and returns what that code returned: false means
 * the server would drop c, with *why saying why.
 */
#ifndef CRUNLOOP_RL_FUZZ_H
#define CRUNLOOP_RL_FUZZ_H

#include "rl_conn.h"

#include <crunloop/RLMessagePort.h>
#include <crunloop/RLSocketPort.h>

/* RLSocketPort.c: a one-way message, its port components ("host:port",
 * "[v6]:port", "*:port") decoded against c->addr. */
RL__HIDDEN bool rl__socket_port_dispatch(RLSocketPortRef local, rl__conn *c, rl__wire_frame *f, const char **why);
/* RLMessagePort.c: a request, one-way message or hello; a request's reply
 * is written to c->fd. */
RL__HIDDEN bool rl__message_port_dispatch(RLMessagePortRef local, rl__conn *c, rl__wire_frame *f, const char **why);

#endif /* CRUNLOOP_RL_FUZZ_H */
