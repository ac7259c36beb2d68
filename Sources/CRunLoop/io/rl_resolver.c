/* rl_resolver.c — the resolver thread (rl_resolver.h): started on first
 * use, it takes queued lookups one at a time, runs getaddrinfo and hands
 * the answer to the lookup's owner. Neither a loop's thread nor a thread
 * per lookup is used. (glibc's getaddrinfo_a would do the same with its
 * own threads, which the thread sanitizer cannot follow.) */
#include "rl_resolver.h"
#include "rl_fork.h"
#include "rl_lockclass.h"
#include "RLLockDebugInternal.h"

#include <netinet/in.h>
#include <resolv.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t resolver_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t resolver_cond = PTHREAD_COND_INITIALIZER;
static rl__lookup *queue_head, **queue_tail = &queue_head;
static pid_t resolver_pid; /* the process whose resolver thread runs */

static void resolver_lock_take(void) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_RESOLVER, __builtin_return_address(0));
    pthread_mutex_lock(&resolver_lock);
}

static void resolver_lock_drop(void) {
    pthread_mutex_unlock(&resolver_lock);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_RESOLVER);
}

/* Held across fork() (slot RL_FORK_RESOLVER: a leaf, last), so the child
 * never finds it taken by the resolver thread, which the child does not
 * have. The child's copy of the queue holds the parent's lookups (their
 * owners' inherited copies fail on their own): it starts empty, and its
 * first lookup starts a resolver thread of its own (resolver_pid). The
 * condition variable may hold the parent's waiter: made anew. */
static void fork_prepare(void) {
    if (pthread_mutex_lock(&resolver_lock))
        abort();
}
static void fork_parent(void) { (void)pthread_mutex_unlock(&resolver_lock); }
static void fork_child(void) {
    queue_head = NULL;
    queue_tail = &queue_head;
    (void)pthread_cond_init(&resolver_cond, NULL);
    (void)pthread_mutex_unlock(&resolver_lock);
}

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_RESOLVER, fork_prepare, fork_parent, fork_child);
}

static void *resolver_main(void *arg) {
    (void)arg;
    for (;;) {
        resolver_lock_take();
        while (!queue_head)
            pthread_cond_wait(&resolver_cond, &resolver_lock);
        rl__lookup *l = queue_head;
        queue_head = l->next;
        if (!queue_head)
            queue_tail = &queue_head;
        resolver_lock_drop();
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        int r = getaddrinfo(l->host, l->service, &hints, &res);
        /* Drop this thread's resolver state between requests: glibc keeps
         * the parsed resolv.conf attached to the thread's _res until the
         * thread exits, and this thread never does, so the process would
         * hold it (and leak it at exit) for nothing. The next request
         * re-attaches the current configuration, picking up any change. */
        res_nclose(&_res);
        l->done(l, r, r == 0 ? res : NULL);
    }
    return NULL;
}

int rl__resolver_lookup(rl__lookup *l) {
    resolver_lock_take();
    if (resolver_pid != getpid()) { /* first use, or a child of fork(): no thread here yet */
        queue_head = NULL;
        queue_tail = &queue_head;
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&t, &attr, resolver_main, NULL);
        pthread_attr_destroy(&attr);
        if (err) {
            resolver_lock_drop();
            return err;
        }
        resolver_pid = getpid();
    }
    l->next = NULL;
    *queue_tail = l;
    queue_tail = &l->next;
    pthread_cond_signal(&resolver_cond);
    resolver_lock_drop();
    return 0;
}
