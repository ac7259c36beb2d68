/* rl_resolver.h — host-name lookups off every run loop's thread: one
 * process-wide resolver thread (rl_resolver.c) runs the blocking
 * getaddrinfo for each queued lookup in turn. Private.
 *
 * Its lock is a leaf: nothing is taken under it, and `done` is called with
 * no resolver lock held. */
#ifndef CRUNLOOP_RL_RESOLVER_H
#define CRUNLOOP_RL_RESOLVER_H

#include "internal.h"

#include <netdb.h>

typedef struct rl__lookup rl__lookup;

/* One lookup, embedded in its owner, who fills host, service and done and
 * keeps the record (and what host and service point to) alive until done
 * has been called. */
struct rl__lookup {
    const char *host, *service;
    /* On the resolver thread: eai is getaddrinfo's result (0 or an EAI_*
     * code); res (NULL on failure) is the caller's, to freeaddrinfo. */
    void (*done)(rl__lookup *l, int eai, struct addrinfo *res);
    rl__lookup *next; /* the resolver's queue */
};

/* Queues l for a TCP (SOCK_STREAM) lookup of any address family; 0, or an
 * errno if the resolver thread cannot be started (then done is never
 * called). Starts the thread on first use, and again in a child of fork(). */
RL__HIDDEN int rl__resolver_lookup(rl__lookup *l);

#endif /* CRUNLOOP_RL_RESOLVER_H */
