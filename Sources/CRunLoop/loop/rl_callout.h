/*
 * rl_callout.h — private: how the slow-callout report (rl_health.h) names
 * the callouts a library object makes through an fd object of its own: a
 * socket, a port, a signal source (rl__fd_set_owner). Alone so that those
 * rooms need nothing else of the loop's.
 */
#ifndef CRUNLOOP_RL_CALLOUT_H
#define CRUNLOOP_RL_CALLOUT_H

typedef struct rl__callout_owner {
    int kind;                                   /* an RLCalloutKind */
    const void *(*function)(const void *owner); /* the program's callout; may be NULL */
} rl__callout_owner;

#endif /* CRUNLOOP_RL_CALLOUT_H */
