/*
 * RLMessagePort.c — named message ports over Unix-domain sockets
 * (RLMessagePort.h has the contract, rl_wire.h the frames, rl_conn.h the
 * serving and the part shared with socket ports).
 *
 * A local port listens on an abstract-namespace socket, served by an
 * rl__server: the listening socket (and any further names it is registered
 * under) and its clients' connections are watched by the run loops its
 * source is in, each as a source of its own in the same modes. Requests
 * are answered on the connection they came on; a client must be this user
 * or admitted by the access policy.
 *
 * A remote port is one connection. Its requests are serialized by
 * `send_mu`; its reader keeps a partly read frame between calls, and a
 * reply that arrives after its request timed out is recognized by its
 * sequence number and dropped. While a request with a reply mode waits, the
 * caller's run loop runs in that mode with the connection as one of its
 * sources (unless the mode has nothing else: then poll alone). Its
 * invalidation callback listens on a second, silent connection: the local
 * port closing it is the only event that ever comes on it, so watching it
 * never races with a request.
 */
#include "rl_fork.h"
#include "RLDataInternal.h"
#include "rl_conn.h"
#include "rl_fuzz.h"
#include "rl_weak.h"

#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLMessagePort.h>
#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { RL_MP_NAME_MAX = 255 };

struct RLMessagePort {
    rl__object base;
    rl__netport np; /* validity, context, limit, server, source; np.mu guards the state below */
    bool remote;
    char *name; /* changed only by SetName, under g_reg.mu and np.mu */
    /* Names SetName replaced: GetName handed them out under the Get rule
     * (valid while the caller holds the port), so they go with the port. */
    struct old_name {
        struct old_name *next;
        char *name;
    } *old_names;
    RLMessagePortCallBack callout;
    RLMessagePortAccessPolicy policy;
    /* remote */
    pthread_mutex_t send_mu; /* one request at a time */
    int cfd;
    uint32_t seq;
    rl__wire_reader rd;
    int watch_fd; /* the silent connection of the invalidation callback, or -1 */
    RLFileDescriptorRef watch;
    /* Waiting for a reply in the caller's run loop (replyMode): cfd as a
     * source, made at the first such wait, in the loop only during one;
     * send_mu guards them. */
    RLFileDescriptorRef reply_fd;
    RLRunLoopSourceRef reply_src;
    _Atomic bool reply_ready; /* set by reply_fd's callout on the waiting thread */
    bool waiting;             /* np.mu: a sender runs its loop for a reply ... */
    pthread_t waiter;         /* ... on this thread */
    pid_t pid; /* the process that made it: a fork's child does not find its parent's ports */
};
RL__NETPORT_CHECK(struct RLMessagePort);
_Static_assert(sizeof(RLMessagePortContext) == sizeof(rl__netport_context), "context layouts differ");

/* ---- the process's ports by name (CF returns an existing port) ---- */

static rl__netport_registry g_reg = {PTHREAD_MUTEX_INITIALIZER, NULL};

static struct RLMessagePort *reg_find_locked(const char *name, bool remote) {
    for (rl__netport *np = g_reg.head; np; np = np->reg_next) {
        struct RLMessagePort *p = rl__netport_object(np);
        if (p->remote == remote && p->pid == getpid() && p->name && strcmp(p->name, name) == 0 &&
            rl__netport_is_valid(np))
            return p;
    }
    return NULL;
}

/* ---- names and sockets ---- */

static bool name_ok(const char *name, const char *fn) {
    if (!name)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL name");
    size_t n = strlen(name);
    if (n == 0 || n > RL_MP_NAME_MAX)
        return rl__fail(kRLErrorInvalidArgument, fn, "a port name has 1 to %d bytes, not %zu", RL_MP_NAME_MAX, n);
    return true;
}

/* "\0crunloop.<uid>.<name>"; a name that does not fit is replaced by its
 * 64-bit FNV-1a hash (and its first bytes, for people reading ss -x). */
static socklen_t name_address(const char *name, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    char *p = a->sun_path + 1;
    size_t room = sizeof a->sun_path - 1;
    int n = snprintf(p, room, "crunloop.%u.%s", (unsigned)geteuid(), name);
    if (n < 0 || (size_t)n >= room) {
        uint64_t h = 1469598103934665603ull;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
            h = (h ^ *c) * 1099511628211ull;
        n = snprintf(p, room, "crunloop.%u.#%016llx.%.40s", (unsigned)geteuid(), (unsigned long long)h, name);
    }
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* What messages call the port: its name, or "(anonymous)". */
static const char *label(const struct RLMessagePort *mp) { return mp->name ? mp->name : "(anonymous)"; }

static bool peer_creds(int fd, struct ucred *uc) {
    socklen_t len = sizeof *uc;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, uc, &len) == 0;
}

/* ---- objects ---- */

static void mp_finalize(void *obj) {
    struct RLMessagePort *mp = obj;
    rl__netport_finalize(&mp->np);
    rl__wire_reader_free(&mp->rd);
    free(mp->name);
    for (struct old_name *o = mp->old_names, *next; o; o = next) {
        next = o->next;
        free(o->name);
        free(o);
    }
    pthread_mutex_destroy(&mp->send_mu);
}

static bool mp_can_destroy(void *obj);

static char *mp_describe(const void *obj) {
    struct RLMessagePort *mp = (struct RLMessagePort *)obj;
    char why[128] = "";
    size_t dropped = rl__netport_dropped(&mp->np, why, sizeof why);
    pthread_mutex_lock(&mp->np.mu);
    char *s = NULL;
    int r = asprintf(&s, "<RLMessagePort %p>{%s %s%s%s%s, dropped %zu connection(s)%s%s}", obj,
                     mp->remote ? "remote" : "local", mp->name ? "\"" : "", label(mp), mp->name ? "\"" : "",
                     mp->np.life.valid ? "" : ", invalid", dropped,
                     dropped ? ", last: " : "", dropped ? why : "");
    pthread_mutex_unlock(&mp->np.mu);
    return r < 0 ? NULL : s;
}

static const rl__class message_port_class = {"RLMessagePort", mp_finalize, mp_can_destroy, mp_describe};

RLTypeID RLMessagePortGetTypeID(void) { return rl__type_id(&message_port_class); }

static bool mp_ok(RLMessagePortRef mp, const char *fn) {
    return rl__object_check(mp, &message_port_class, fn);
}

static struct RLMessagePort *mp_new(const char *name, bool remote, const char *fn) {
    struct RLMessagePort *mp = rl__object_alloc(&message_port_class, sizeof *mp, fn);
    if (!mp)
        return NULL;
    pthread_mutex_init(&mp->send_mu, NULL);
    mp->remote = remote;
    mp->cfd = mp->watch_fd = -1;
    mp->pid = getpid();
    rl__wire_reader_init(&mp->rd, RL_WIRE_MAX_BODY);
    mp->name = name ? strdup(name) : NULL;
    if (!rl__netport_init(&mp->np, mp) || (name && !mp->name)) {
        RLRelease(mp); /* not valid yet: nothing to tear down */
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    return mp;
}

/* ---- serving (local ports, on the run loop's thread) ---- */

/* Writes (or queues) a reply frame on c. False: the connection broke. */
static bool send_reply(rl__conn *c, int32_t msgid, uint32_t seq, RLDataRef reply) {
    rl__wire_comp comp = {RL_WIRE_DATA, 0, NULL};
    uint32_t n = 0;
    if (reply) {
        comp.len = (uint32_t)RLDataGetLength(reply);
        comp.bytes = RLDataGetBytePtr(reply);
        n = 1;
    }
    size_t len = rl__wire_size(&comp, n);
    uint8_t *buf = malloc(len);
    if (!buf)
        return false;
    rl__wire_encode(buf, RL_WIRE_REPLY, msgid, seq, &comp, n);
    bool ok = rl__conn_write(c, buf, len);
    free(buf);
    return ok;
}

static void release_owner(void *body) { free(body); }

/* Runs one request; false if the connection must go. */
static bool dispatch(void *owner, rl__conn *c, rl__wire_frame *f, const char **why) {
    struct RLMessagePort *mp = owner;
    if (f->h.kind == RL_WIRE_HELLO) { /* a remote port's silent watch connection */
        rl__wire_frame_free(f);
        return true;
    }
    if ((f->h.kind != RL_WIRE_REQUEST && f->h.kind != RL_WIRE_ONEWAY) || f->h.ncomp > 1 ||
        (f->h.ncomp == 1 && f->comps[0].type != RL_WIRE_DATA)) {
        *why = "unexpected frame for a message port";
        rl__wire_frame_free(f);
        return false;
    }
    RLDataRef data = NULL;
    if (f->h.ncomp == 1) {
        /* The frame's body becomes the data's bytes: no copy. */
        data = rl__data_slice(f->comps[0].bytes, f->comps[0].len, f->body, NULL, release_owner);
        if (!data) {
            *why = "out of memory";
            rl__wire_frame_free(f);
            return false;
        }
        f->body = NULL;
    }
    rl__wire_frame_free(f);
    RLMessagePortCallBack callout = mp->callout;
    RLDataRef reply = callout ? callout(mp, f->h.msgid, data, mp->np.ctx.info) : NULL;
    if (data)
        RLRelease(data);
    bool ok = true;
    if (f->h.kind == RL_WIRE_REQUEST) {
        ok = send_reply(c, f->h.msgid, f->h.seq, reply);
        if (!ok)
            *why = "could not send the reply";
    }
    if (reply)
        RLRelease(reply);
    return ok;
}

/* A client is served only if it is this user, or the access policy
 * admits it. */
static bool admit(void *owner, rl__conn *c, char *why, size_t n) {
    struct RLMessagePort *mp = owner;
    struct ucred uc = {0, (uid_t)-1, (gid_t)-1};
    if (!peer_creds(c->fd, &uc)) {
        snprintf(why, n, "no peer credentials");
        return false;
    }
    c->uid = uc.uid;
    c->gid = uc.gid;
    c->pid = uc.pid;
    if (uc.uid == geteuid())
        return true;
    pthread_mutex_lock(&mp->np.mu);
    RLMessagePortAccessPolicy policy = mp->policy;
    pthread_mutex_unlock(&mp->np.mu);
    if (policy && policy(mp, uc.uid, uc.gid, uc.pid, mp->np.ctx.info))
        return true;
    snprintf(why, n, "uid %u refused", (unsigned)uc.uid);
    return false;
}

static const void *callout_of(const void *owner) {
    return (const void *)((const struct RLMessagePort *)owner)->callout;
}

static const rl__server_ops mp_server_ops = {admit, dispatch, {kRLCalloutPort, callout_of, NULL}};

/* ---- public: creating ---- */

static int try_listen(const struct sockaddr_un *a, socklen_t alen) {
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        return -errno;
    if (bind(lfd, (const struct sockaddr *)a, alen) < 0 || listen(lfd, SOMAXCONN) < 0) {
        int err = errno;
        close(lfd);
        return -err;
    }
    return lfd;
}

/* Whether the socket bound to the address refuses connections: an
 * invalidated port's listener (shut down) that a process forked before the
 * invalidation still holds, or a socket that is bound but not listening. */
static bool address_refuses(const struct sockaddr_un *a, socklen_t alen) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int r;
    while ((r = connect(fd, (const struct sockaddr *)a, alen)) < 0 && errno == EINTR)
        ;
    bool refused = r < 0 && errno == ECONNREFUSED;
    close(fd);
    return refused;
}

/* How long a create waits for a dead name to be let go of (seconds). */
#define RL_MP_DEAD_NAME_WAIT 2.0

/* A listening socket under `name`, or -errno (EADDRINUSE: taken).
 *
 * A child forked while the port was valid has a copy of its listening
 * socket until its atfork handler closes it (fork_child), which it does
 * before anything else, but only once the scheduler runs it; invalidation
 * shuts the socket down, so that copy accepts nothing meanwhile. A name
 * held only by such a dead socket is waited for, briefly. */
static int listen_as(const char *name) {
    struct sockaddr_un a;
    socklen_t alen = name_address(name, &a);
    double give_up = 0;
    for (;;) {
        int lfd = try_listen(&a, alen);
        if (lfd != -EADDRINUSE || !address_refuses(&a, alen))
            return lfd;
        double now = RLMonotonicTimeGetCurrent();
        if (give_up == 0)
            give_up = now + RL_MP_DEAD_NAME_WAIT;
        else if (now >= give_up)
            return lfd;
        usleep(2000);
    }
}

/* A listening socket with a name the kernel picks (autobind): an
 * anonymous port is never looked up by it, only by the names the name
 * server gives it. Or -errno. */
static int listen_anonymous(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        return -errno;
    if (bind(lfd, (struct sockaddr *)&a, sizeof(sa_family_t)) < 0 || listen(lfd, SOMAXCONN) < 0) {
        int err = errno;
        close(lfd);
        return -err;
    }
    return lfd;
}

RLMessagePortRef RLMessagePortCreateLocal(RLAllocatorRef allocator, const char *name, RLMessagePortCallBack callout,
                                          const RLMessagePortContext *context, bool *shouldFreeInfo) {
    if (shouldFreeInfo)
        *shouldFreeInfo = true;
    if (name && !name_ok(name, __func__)) /* NULL: an anonymous port, as CF */
        return NULL;
    if (!rl__netport_check_context(context, __func__))
        return NULL;
    pthread_mutex_lock(&g_reg.mu);
    struct RLMessagePort *old = name ? reg_find_locked(name, false) : NULL;
    if (old) { /* as CF: the process's port of that name, retained */
        RLRetain(old);
        pthread_mutex_unlock(&g_reg.mu);
        return old;
    }
    struct RLMessagePort *mp = mp_new(name, false, __func__);
    if (!mp) {
        pthread_mutex_unlock(&g_reg.mu);
        return NULL;
    }
    int lfd = name ? listen_as(name) : listen_anonymous();
    int err = lfd < 0 ? -lfd : rl__netport_listen(&mp->np, lfd, &mp_server_ops, mp);
    if (err) {
        pthread_mutex_unlock(&g_reg.mu);
        mp->np.life.valid = false;
        RLRelease(mp);
        if (err == EADDRINUSE)
            return rl__fail(kRLErrorExists, __func__, "the name \"%s\" is taken by another process's port", name),
                   NULL;
        return rl__fail_errno(err, __func__, "cannot listen as \"%s\"", name ? name : "(anonymous)"), NULL;
    }
    mp->callout = callout;
    rl__netport_set_context(&mp->np, context);
    rl__registry_add_locked(&g_reg, &mp->np);
    pthread_mutex_unlock(&g_reg.mu);
    /* The retain callback is user code: called with no lock held. The
     * port has no source yet, so nothing calls out with info meanwhile. */
    rl__netport_retain_context(&mp->np);
    if (shouldFreeInfo)
        *shouldFreeInfo = false;
    return mp;
}

/* Connects to `name`'s local port and checks that its owner is this user. */
static int connect_to(const char *name, const char *fn) {
    struct sockaddr_un a;
    socklen_t alen = name_address(name, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return rl__fail_errno(errno, fn, "socket"), -1;
    while (connect(fd, (struct sockaddr *)&a, alen) < 0) {
        if (errno == EINTR)
            continue;
        int err = errno;
        close(fd);
        if (err == ECONNREFUSED || err == ENOENT)
            return rl__fail(kRLErrorNotFound, fn, "no message port named \"%s\"", name), -1;
        return rl__fail_errno(err, fn, "cannot connect to \"%s\"", name), -1;
    }
    struct ucred uc;
    if (!peer_creds(fd, &uc) || uc.uid != geteuid()) {
        close(fd);
        return rl__fail(kRLErrorPermission, fn, "the port named \"%s\" belongs to another user (uid %u); refused",
                        name, (unsigned)uc.uid), -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        int err = errno;
        close(fd);
        return rl__fail_errno(err, fn, "fcntl"), -1;
    }
    return fd;
}

static void invalidate(struct RLMessagePort *mp);

static RLMessagePortRef create_remote(const char *name, const char *fn) {
    if (!name_ok(name, fn))
        return NULL;
    pthread_mutex_lock(&g_reg.mu);
    struct RLMessagePort *old = reg_find_locked(name, true);
    if (old) {
        RLRetain(old);
        pthread_mutex_unlock(&g_reg.mu);
        return old;
    }
    pthread_mutex_unlock(&g_reg.mu);
    int fd = connect_to(name, fn);
    if (fd < 0)
        return NULL;
    struct RLMessagePort *mp = mp_new(name, true, fn);
    if (!mp) {
        close(fd);
        return NULL;
    }
    mp->cfd = fd;
    pthread_mutex_lock(&g_reg.mu);
    rl__registry_add_locked(&g_reg, &mp->np);
    pthread_mutex_unlock(&g_reg.mu);
    return mp;
}

RLMessagePortRef RLMessagePortCreateRemote(RLAllocatorRef allocator, const char *name) {
    return create_remote(name, __func__);
}

/* ---- the name server ----
 *
 * A name is a listening socket in the abstract namespace, so registering
 * a further name for a local port is one more listening socket in the
 * port's server: the kernel keeps the table, frees a name with its socket
 * (a crashed process leaves nothing behind), and refuses a name that is
 * taken. This process's extra names are listed here, so that they can be
 * removed by name. */

typedef struct mp_alias {
    char *name;
    struct RLMessagePort *port; /* not retained: the entry goes when the port is invalidated */
    rl__conn *listener;
    struct mp_alias *next;
} mp_alias;

static pthread_mutex_t g_alias_mu = PTHREAD_MUTEX_INITIALIZER; /* taken before a server's lock */
static mp_alias *g_aliases;

static mp_alias **alias_find_locked(const char *name) {
    mp_alias **pp = &g_aliases;
    while (*pp && ((*pp)->port->pid != getpid() || strcmp((*pp)->name, name) != 0))
        pp = &(*pp)->next;
    return pp;
}

/* The port is being invalidated: its extra names go with its server. */
static void aliases_forget(struct RLMessagePort *mp) {
    pthread_mutex_lock(&g_alias_mu);
    for (mp_alias **pp = &g_aliases; *pp;) {
        mp_alias *a = *pp;
        if (a->port != mp) {
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        free(a->name);
        free(a);
    }
    pthread_mutex_unlock(&g_alias_mu);
}

bool RLMessagePortNameServerRegisterPort(RLMessagePortRef mp, const char *name) {
    if (!mp_ok(mp, __func__) || !name_ok(name, __func__))
        return false;
    if (mp->remote)
        return rl__fail(kRLErrorInvalidState, __func__, "\"%s\" is a remote port: only a local port can be registered",
                        label(mp));
    pthread_mutex_lock(&g_alias_mu);
    if (!rl__netport_is_valid(&mp->np)) {
        pthread_mutex_unlock(&g_alias_mu);
        return rl__fail(kRLErrorInvalidObject, __func__, "the port %s is invalid", label(mp));
    }
    mp_alias *old = *alias_find_locked(name);
    if ((mp->name && strcmp(name, mp->name) == 0) || (old && old->port == mp)) {
        pthread_mutex_unlock(&g_alias_mu);
        return true; /* registered already */
    }
    int lfd = old ? -EADDRINUSE : listen_as(name);
    mp_alias *a = lfd >= 0 ? calloc(1, sizeof *a) : NULL;
    char *copy = a ? strdup(name) : NULL;
    rl__conn *l = copy ? rl__server_add_listener(&mp->np.srv, lfd) : NULL;
    int err = lfd < 0 ? -lfd : !copy ? ENOMEM : !l ? errno : 0;
    if (err) {
        pthread_mutex_unlock(&g_alias_mu);
        if (lfd >= 0 && !copy)
            close(lfd);
        free(copy);
        free(a);
        if (err == EADDRINUSE)
            return rl__fail(kRLErrorExists, __func__, "the name \"%s\" is taken by another port", name);
        return rl__fail_errno(err, __func__, "cannot listen as \"%s\"", name);
    }
    *a = (mp_alias){copy, mp, l, g_aliases};
    g_aliases = a;
    pthread_mutex_unlock(&g_alias_mu);
    return true;
}

/* CF's rename of a local port: the port listens under the new name and no
 * longer under the old one. Refused while any port of this process has the
 * name (CF: while the process's port table has it), or another process's
 * port listens under it (the kernel says so). */
bool RLMessagePortSetName(RLMessagePortRef mp, const char *name) {
    if (!mp_ok(mp, __func__) || !name_ok(name, __func__))
        return false;
    if (mp->remote)
        return rl__fail(kRLErrorInvalidState, __func__, "\"%s\" is a remote port: only a local port can be renamed",
                        mp->name);
    pthread_mutex_lock(&g_alias_mu);
    bool alias = *alias_find_locked(name) != NULL;
    pthread_mutex_unlock(&g_alias_mu);
    pthread_mutex_lock(&g_reg.mu);
    if (!rl__netport_is_valid(&mp->np)) {
        pthread_mutex_unlock(&g_reg.mu);
        return rl__fail(kRLErrorInvalidObject, __func__, "the port \"%s\" is invalid", mp->name);
    }
    if (strcmp(name, mp->name) == 0) {
        pthread_mutex_unlock(&g_reg.mu);
        return true; /* its name already */
    }
    if (alias || reg_find_locked(name, false)) {
        pthread_mutex_unlock(&g_reg.mu);
        return rl__fail(kRLErrorExists, __func__, "the name \"%s\" is taken by another port", name);
    }
    struct old_name *old = malloc(sizeof *old);
    char *copy = strdup(name);
    int lfd = old && copy ? listen_as(name) : -ENOMEM;
    int err = lfd < 0 ? -lfd : rl__server_replace_listener(&mp->np.srv, lfd);
    if (err) {
        pthread_mutex_unlock(&g_reg.mu);
        free(old);
        free(copy);
        if (err == EADDRINUSE)
            return rl__fail(kRLErrorExists, __func__, "the name \"%s\" is taken by another process's port", name);
        return rl__fail_errno(err, __func__, "cannot listen as \"%s\"", name);
    }
    pthread_mutex_lock(&mp->np.mu);
    *old = (struct old_name){mp->old_names, mp->name};
    mp->old_names = old;
    mp->name = copy;
    pthread_mutex_unlock(&mp->np.mu);
    pthread_mutex_unlock(&g_reg.mu);
    return true;
}

RLMessagePortRef RLMessagePortNameServerCopyPort(const char *name) { return create_remote(name, __func__); }

bool RLMessagePortNameServerRemovePort(const char *name) {
    if (!name_ok(name, __func__))
        return false;
    pthread_mutex_lock(&g_alias_mu);
    mp_alias **pp = alias_find_locked(name), *a = *pp;
    if (a) {
        *pp = a->next;
        rl__server_remove_listener(&a->port->np.srv, a->listener); /* the name is free */
        pthread_mutex_unlock(&g_alias_mu);
        free(a->name);
        free(a);
        return true;
    }
    pthread_mutex_unlock(&g_alias_mu);
    /* A port's own name lasts as long as the port. */
    pthread_mutex_lock(&g_reg.mu);
    struct RLMessagePort *own = reg_find_locked(name, false);
    if (own)
        RLRetain(own);
    pthread_mutex_unlock(&g_reg.mu);
    if (!own)
        return rl__fail(kRLErrorNotFound, __func__, "this process has no port registered as \"%s\"", name);
    invalidate(own);
    RLRelease(own);
    return true;
}

/* ---- public: state ---- */

bool RLMessagePortIsRemote(RLMessagePortRef mp) { return mp_ok(mp, __func__) && mp->remote; }

const char *RLMessagePortGetName(RLMessagePortRef mp) { return mp_ok(mp, __func__) ? mp->name : NULL; }

bool RLMessagePortGetContext(RLMessagePortRef mp, RLMessagePortContext *context) {
    return mp_ok(mp, __func__) && rl__netport_get_context(&mp->np, context, __func__);
}

bool RLMessagePortIsValid(RLMessagePortRef mp) {
    return mp_ok(mp, __func__) && rl__netport_is_valid(&mp->np);
}

RLMessagePortInvalidationCallBack RLMessagePortGetInvalidationCallBack(RLMessagePortRef mp) {
    return mp_ok(mp, __func__) ? (RLMessagePortInvalidationCallBack)rl__netport_get_inval(&mp->np) : NULL;
}

bool RLMessagePortSetAccessPolicy(RLMessagePortRef mp, RLMessagePortAccessPolicy policy) {
    if (!mp_ok(mp, __func__))
        return false;
    if (mp->remote)
        return rl__fail(kRLErrorInvalidState, __func__, "a remote port has no access policy (it connects, it does not accept)");
    pthread_mutex_lock(&mp->np.mu);
    mp->policy = policy;
    pthread_mutex_unlock(&mp->np.mu);
    return true;
}

bool RLMessagePortSetMessageLimit(RLMessagePortRef mp, RLIndex bytes) {
    if (!mp_ok(mp, __func__) || !rl__netport_set_limit(&mp->np, bytes, __func__))
        return false;
    pthread_mutex_lock(&mp->np.mu);
    mp->rd.max_body = (uint32_t)bytes;
    pthread_mutex_unlock(&mp->np.mu);
    return true;
}

bool RLMessagePortSetStallTimeout(RLMessagePortRef mp, RLTimeInterval seconds) {
    return mp_ok(mp, __func__) && rl__netport_set_stall(&mp->np, mp->remote, seconds, __func__);
}

/* ---- invalidation ---- */

/* The connection goes (send_mu held): its reply source first. */
static void drop_connection_locked(struct RLMessagePort *mp) {
    if (mp->reply_fd) {
        RLFileDescriptorInvalidate(mp->reply_fd); /* out of every loop */
        RLRelease(mp->reply_fd);
        RLRelease(mp->reply_src);
        mp->reply_fd = NULL;
        mp->reply_src = NULL;
    }
    /* Changed under both locks: invalidate reads it under np.mu alone. */
    pthread_mutex_lock(&mp->np.mu);
    int fd = mp->cfd;
    mp->cfd = -1;
    pthread_mutex_unlock(&mp->np.mu);
    if (fd >= 0)
        close(fd);
}

/* Tears the port down; calls the invalidation callback once (outside the
 * lock). Safe from any thread, and from the port's own callouts. */
static void invalidate(struct RLMessagePort *mp) {
    if (!rl__netport_begin_invalidate(&mp->np))
        return;
    pthread_mutex_lock(&mp->np.mu);
    /* Called from code that a sender's wait for its reply runs on this
     * thread (its send_mu is held below us): that sender drops the
     * connection when its wait ends, as it sees the port invalid. */
    bool nested = mp->waiting && pthread_equal(mp->waiter, pthread_self());
    RLFileDescriptorRef watch = mp->watch;
    mp->watch = NULL;
    /* A sender waiting on it wakes up (it is closed with send_mu held);
     * not in a fork()'s child, where the connection is also the parent's. */
    if (mp->cfd >= 0 && mp->pid == getpid())
        shutdown(mp->cfd, SHUT_RDWR);
    pthread_mutex_unlock(&mp->np.mu);
    rl__registry_remove(&g_reg, &mp->np);
    aliases_forget(mp);
    RLMessagePortInvalidationCallBack cb = (RLMessagePortInvalidationCallBack)rl__netport_finish_invalidate(&mp->np);
    if (watch) {
        RLFileDescriptorInvalidate(watch);
        RLRelease(watch);
    }
    if (!nested) {
        pthread_mutex_lock(&mp->send_mu);
        drop_connection_locked(mp);
        pthread_mutex_unlock(&mp->send_mu);
    }
    if (cb)
        cb(mp, mp->np.ctx.info);
    /* As CF: the info is released after the callback, once (the port's
     * finalizer finds nothing left to release). */
    rl__netport_end_invalidate(&mp->np);
}

static bool mp_can_destroy(void *obj) {
    struct RLMessagePort *mp = obj;
    invalidate(mp);
    return true;
}

bool RLMessagePortInvalidate(RLMessagePortRef mp) {
    if (!mp_ok(mp, __func__))
        return false;
    RLRetain(mp);
    invalidate(mp);
    RLRelease(mp);
    return true;
}

static void watch_ready(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    char b[64];
    ssize_t n = recv(RLFileDescriptorGetNativeDescriptor(f), b, sizeof b, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
        RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
        return; /* nothing is ever sent on it; ignore */
    }
    struct RLMessagePort *mp = rl__weak_get(info);
    if (!mp)
        return;
    invalidate(mp);
    RLRelease(mp);
}

bool RLMessagePortSetInvalidationCallBack(RLMessagePortRef mp, RLMessagePortInvalidationCallBack callout) {
    if (!mp_ok(mp, __func__))
        return false;
    if (!rl__netport_set_inval(&mp->np, (rl__netport_fn)callout)) {
        if (callout) /* CF calls it at once on an invalid port */
            callout(mp, mp->np.ctx.info);
        return true;
    }
    pthread_mutex_lock(&mp->np.mu);
    bool want_watch = mp->remote && callout && mp->watch_fd < 0;
    pthread_mutex_unlock(&mp->np.mu);
    if (!want_watch)
        return true;
    int fd = connect_to(mp->name, __func__);
    if (fd < 0) { /* the local port is gone already */
        RLRetain(mp);
        invalidate(mp);
        RLRelease(mp);
        return true;
    }
    uint8_t hello[RL_WIRE_HEADER];
    rl__wire_encode(hello, RL_WIRE_HELLO, 0, 0, NULL, 0);
    size_t sent;
    (void)rl__write_all(fd, hello, sizeof hello, rl__deadline_after(1), &sent);
    RLFileDescriptorContext ctx = {0, mp->np.link, rl__weak_retain, rl__weak_release, NULL};
    RLFileDescriptorRef w = RLFileDescriptorCreate(NULL, fd, true, watch_ready, &ctx);
    RLRunLoopSourceRef s = w ? RLFileDescriptorCreateRunLoopSource(NULL, w, 0) : NULL;
    if (!s) {
        if (w) {
            RLFileDescriptorInvalidate(w);
            RLRelease(w);
        } else {
            close(fd);
        }
        return false;
    }
    RLFileDescriptorEnableCallBacks(w, kRLFileDescriptorReadCallBack);
    pthread_mutex_lock(&mp->np.mu);
    bool still = mp->np.life.valid && mp->watch == NULL;
    if (still) {
        mp->watch = w;
        mp->watch_fd = fd;
    }
    pthread_mutex_unlock(&mp->np.mu);
    if (still)
        RLRunLoopAddSource(RLRunLoopGetCurrent(), s, kRLRunLoopCommonModes);
    else {
        RLFileDescriptorInvalidate(w);
        RLRelease(w);
    }
    RLRelease(s);
    return true;
}

/* ---- run-loop source ---- */

RLRunLoopSourceRef RLMessagePortCreateRunLoopSource(RLAllocatorRef allocator, RLMessagePortRef mp, RLIndex order) {
    return mp_ok(mp, __func__) ? rl__netport_create_source(&mp->np, mp->remote, order, __func__) : NULL;
}

/* ---- sending ---- */

/* The send failed half-way or the connection broke: the stream cannot be
 * trusted any more, so the port becomes invalid. */
static int32_t broke(struct RLMessagePort *mp, int32_t code, const char *fn, const char *why) {
    drop_connection_locked(mp); /* also when the port was invalidated while we waited */
    pthread_mutex_unlock(&mp->send_mu);
    RLRetain(mp);
    invalidate(mp);
    RLRelease(mp);
    rl__fail(code == kRLMessagePortSendTimeout ? kRLErrorTimedOut : kRLErrorInvalidState, fn,
             "port \"%s\": %s", mp->name, why);
    return code;
}

static void reply_readable(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    struct RLMessagePort *mp = info; /* alive: its sender waits for this */
    atomic_store_explicit(&mp->reply_ready, true, memory_order_relaxed);
}

enum { WAIT_READY, WAIT_TIMEOUT, WAIT_INVALID, WAIT_POLL };

/* Runs the calling thread's loop `rl` in `mode` until the connection is
 * readable, the deadline passes or the port is invalidated (send_mu held).
 * As CF: sources, timers and ports of the mode are served meanwhile, so two
 * threads or processes that ask each other in that mode both get their
 * answers. WAIT_POLL: the loop cannot watch the connection, wait without. */
static int wait_in_loop(struct RLMessagePort *mp, RLRunLoopRef rl, RLRunLoopMode mode, double deadline) {
    if (!mp->reply_fd) {
        RLFileDescriptorContext ctx = {0, mp, NULL, NULL, NULL};
        mp->reply_fd = RLFileDescriptorCreate(NULL, mp->cfd, false, reply_readable, &ctx);
        mp->reply_src = mp->reply_fd ? RLFileDescriptorCreateRunLoopSource(NULL, mp->reply_fd, -100) : NULL;
        if (!mp->reply_src) {
            if (mp->reply_fd) {
                RLFileDescriptorInvalidate(mp->reply_fd);
                RLRelease(mp->reply_fd);
                mp->reply_fd = NULL;
            }
            return WAIT_POLL;
        }
    }
    atomic_store_explicit(&mp->reply_ready, false, memory_order_relaxed);
    if (!RLRunLoopAddSource(rl, mp->reply_src, mode) ||
        !RLFileDescriptorEnableCallBacks(mp->reply_fd, kRLFileDescriptorReadCallBack)) {
        RLRunLoopRemoveSource(rl, mp->reply_src, mode);
        return WAIT_POLL;
    }
    pthread_mutex_lock(&mp->np.mu);
    mp->waiting = true; /* never nested: send_mu is ours */
    mp->waiter = pthread_self();
    pthread_mutex_unlock(&mp->np.mu);
    int res;
    for (;;) {
        if (atomic_load_explicit(&mp->reply_ready, memory_order_relaxed)) {
            res = WAIT_READY;
            break;
        }
        if (!rl__netport_is_valid(&mp->np)) {
            res = WAIT_INVALID;
            break;
        }
        double left = deadline - RLMonotonicTimeGetCurrent();
        if (!(left > 0)) {
            res = WAIT_TIMEOUT;
            break;
        }
        /* Stopped (RLRunLoopStop) or a source handled: look and go on. */
        if (RLRunLoopRunInMode(mode, left, true) == kRLRunLoopRunFinished &&
            !atomic_load_explicit(&mp->reply_ready, memory_order_relaxed) && rl__netport_is_valid(&mp->np)) {
            res = WAIT_POLL; /* the source left the mode behind our back */
            break;
        }
    }
    pthread_mutex_lock(&mp->np.mu);
    mp->waiting = false;
    pthread_mutex_unlock(&mp->np.mu);
    if (mp->reply_fd) {
        if (res != WAIT_READY)
            RLFileDescriptorDisableCallBacks(mp->reply_fd, kRLFileDescriptorReadCallBack);
        RLRunLoopRemoveSource(rl, mp->reply_src, mode);
    }
    return res;
}

/* Waits for the reply with sequence number `seq` and hands it over
 * (send_mu held; unlocked on every return). */
static int32_t receive_reply(struct RLMessagePort *mp, uint32_t seq, RLRunLoopRef rl, RLRunLoopMode replyMode,
                             bool in_loop, double rcv_deadline, RLDataRef *returnData, const char *fn) {
    for (;;) {
        /* Wait for the fd unless a reply was read ahead already: right
         * after the send a read would only say EAGAIN. */
        if (!rl__read_pending(&mp->rd) && in_loop) {
            int w = wait_in_loop(mp, rl, replyMode, rcv_deadline);
            if (w == WAIT_POLL) {
                in_loop = false;
                continue;
            }
            if (w == WAIT_TIMEOUT) {
                pthread_mutex_unlock(&mp->send_mu);
                rl__fail(kRLErrorTimedOut, fn, "port \"%s\": no reply in time", mp->name);
                return kRLMessagePortReceiveTimeout;
            }
            if (w == WAIT_INVALID) { /* invalidated while we waited (perhaps by what the loop ran) */
                drop_connection_locked(mp);
                pthread_mutex_unlock(&mp->send_mu);
                rl__fail(kRLErrorInvalidState, fn, "port \"%s\" was invalidated while waiting for the reply",
                         mp->name);
                return kRLMessagePortBecameInvalidError;
            }
        } else if (!rl__read_pending(&mp->rd)) {
            struct pollfd p = {mp->cfd, POLLIN, 0};
            int pr = poll(&p, 1, rl__ms_left(rcv_deadline));
            if (pr == 0) {
                pthread_mutex_unlock(&mp->send_mu);
                rl__fail(kRLErrorTimedOut, fn, "port \"%s\": no reply in time", mp->name);
                return kRLMessagePortReceiveTimeout;
            }
            if (pr < 0)
                continue; /* EINTR: wait again */
        }
        rl__wire_frame f;
        const char *why = NULL;
        int r = rl__read_frame(mp->cfd, &mp->rd, &f, &why);
        if (r < 0)
            return broke(mp, kRLMessagePortBecameInvalidError, fn, why);
        if (r == 1) {
            /* As strict as the local side is with a request: a reply,
             * with at most one component, and that one data (a port
             * component is a name, not reply bytes). */
            if (f.h.kind != RL_WIRE_REPLY || f.h.ncomp > 1 || (f.h.ncomp == 1 && f.comps[0].type != RL_WIRE_DATA)) {
                rl__wire_frame_free(&f);
                return broke(mp, kRLMessagePortTransportError, fn, "malformed reply from the local port");
            }
            if (f.h.seq != seq) { /* the late reply of a request that timed out */
                rl__wire_frame_free(&f);
                continue;
            }
            /* As CF: a callout's NULL arrives as empty data. */
            RLDataRef reply = NULL;
            if (f.h.ncomp == 1) {
                reply = rl__data_slice(f.comps[0].bytes, f.comps[0].len, f.body, NULL, release_owner);
                if (reply)
                    f.body = NULL;
            } else if (returnData) {
                reply = RLDataCreate(NULL, NULL, 0);
            }
            rl__wire_frame_free(&f);
            pthread_mutex_unlock(&mp->send_mu);
            if (returnData)
                *returnData = reply;
            else if (reply)
                RLRelease(reply);
            return kRLMessagePortSuccess;
        }
    }
}

/* What rl__send needs of a message port (rl_conn.h). */
typedef struct mp_request {
    int32_t msgid;
    RLDataRef data;
    bool want_reply;
    uint32_t seq; /* set when the frame is made */
} mp_request;

/* The connection, made when the remote was; invalid, none (send_mu held). */
static int mp_send_conn(void *port, double deadline) {
    (void)deadline;
    struct RLMessagePort *mp = port;
    if (mp->cfd >= 0 && !rl__netport_is_valid(&mp->np))
        drop_connection_locked(mp); /* invalidated by what a wait of ours ran */
    if (mp->cfd < 0) {
        pthread_mutex_unlock(&mp->send_mu);
        rl__fail(kRLErrorInvalidObject, "RLMessagePortSendRequest", "port \"%s\" is invalid", mp->name);
    }
    return mp->cfd;
}

/* The request's frame, with the next sequence number if a reply is
 * wanted (send_mu held: the numbers go out in order). */
static uint8_t *mp_send_frame(void *port, void *arg, size_t *len) {
    struct RLMessagePort *mp = port;
    mp_request *req = arg;
    req->seq = req->want_reply ? ++mp->seq : 0;
    if (req->want_reply && req->seq == 0)
        req->seq = ++mp->seq; /* 0 means "no reply" */
    RLDataRef data = req->data;
    rl__wire_comp comp = {RL_WIRE_DATA, data ? (uint32_t)RLDataGetLength(data) : 0,
                         data ? RLDataGetBytePtr(data) : NULL};
    *len = rl__wire_size(&comp, data ? 1 : 0);
    uint8_t *frame = malloc(*len);
    if (frame)
        rl__wire_encode(frame, req->want_reply ? RL_WIRE_REQUEST : RL_WIRE_ONEWAY, req->msgid, req->seq, &comp,
                        data ? 1 : 0);
    return frame;
}

int32_t RLMessagePortSendRequest(RLMessagePortRef mp, int32_t msgid, RLDataRef data, RLTimeInterval sendTimeout,
                                 RLTimeInterval rcvTimeout, RLRunLoopMode replyMode, RLDataRef *returnData) {
    if (returnData)
        *returnData = NULL;
    if (!mp_ok(mp, __func__))
        return kRLMessagePortIsInvalid;
    if (!mp->remote) {
        rl__fail(kRLErrorInvalidState, __func__, "\"%s\" is a local port: send through a remote port", label(mp));
        return kRLMessagePortIsInvalid;
    }
    if (data && !rl__is_data(data)) {
        rl__fail(kRLErrorInvalidObject, __func__, "data %p is not a live RLData", (const void *)data);
        return kRLMessagePortTransportError;
    }
    if (isnan(sendTimeout) || isnan(rcvTimeout)) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NaN timeout");
        return kRLMessagePortTransportError;
    }
    double send_deadline = rl__deadline_after(sendTimeout);
    double rcv_deadline = rl__deadline_after(rcvTimeout);
    size_t len = data ? (size_t)RLDataGetLength(data) : 0;
    pthread_mutex_lock(&mp->np.mu);
    uint32_t limit = mp->np.limit;
    pthread_mutex_unlock(&mp->np.mu);
    if (len > limit) {
        rl__fail(kRLErrorInvalidArgument, __func__, "%zu bytes exceed the port's limit of %u", len, limit);
        return kRLMessagePortTransportError;
    }
    /* What the loop runs while this thread waits for a reply on this port
     * cannot send on it: one request at a time, and this one is ours. */
    pthread_mutex_lock(&mp->np.mu);
    bool nested = mp->waiting && pthread_equal(mp->waiter, pthread_self());
    pthread_mutex_unlock(&mp->np.mu);
    if (nested) {
        rl__fail(kRLErrorInvalidState, __func__,
                 "port \"%s\": this thread waits for a reply on it already (a request from what its loop runs meanwhile)",
                 mp->name);
        return kRLMessagePortTransportError;
    }
    bool want_reply = replyMode != NULL;
    mp_request req = {msgid, data, want_reply, 0};
    rl__send_job sd = {.mu = &mp->send_mu, .port = mp, .conn = mp_send_conn, .make = mp_send_frame, .arg = &req};
    size_t sent;
    int err;
    switch (rl__send(&sd, send_deadline, &sent, &err)) {
    case RL_SEND_SENT:
        break;
    case RL_SEND_BUSY: /* we waited for our turn no longer than the send may take */
        rl__fail(kRLErrorTimedOut, __func__, "port \"%s\": another request is still in flight", mp->name);
        return kRLMessagePortSendTimeout;
    case RL_SEND_STOPPED:
        return kRLMessagePortIsInvalid;
    case RL_SEND_NOMEM:
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
        return kRLMessagePortTransportError;
    case RL_SEND_TIMEOUT:
        if (sent == 0) {
            pthread_mutex_unlock(&mp->send_mu);
            rl__fail(kRLErrorTimedOut, __func__, "port \"%s\": the receiver is not reading", mp->name);
            return kRLMessagePortSendTimeout;
        }
        return broke(mp, kRLMessagePortSendTimeout, __func__, "send timed out part-way (the port is now invalid)");
    case RL_SEND_BROKE:
        return broke(mp, kRLMessagePortBecameInvalidError, __func__, strerror(err));
    }
    uint32_t seq = req.seq;
    if (!want_reply) {
        pthread_mutex_unlock(&mp->send_mu);
        return kRLMessagePortSuccess;
    }
    if (!(rcvTimeout > 0)) { /* sent; the reply is not waited for (dropped when it comes) */
        pthread_mutex_unlock(&mp->send_mu);
        rl__fail(kRLErrorTimedOut, __func__, "port \"%s\": no time to wait for the reply", mp->name);
        return kRLMessagePortReceiveTimeout;
    }
    /* As CF, the caller's loop runs in replyMode while the reply is
     * awaited, if that mode has anything to run; else the connection
     * alone is waited on, which is the same but cheaper. */
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    bool in_loop = rl && !RLRunLoopIsFinished(rl, replyMode);
    /* Held while the loop runs: what it runs may release the caller's
     * reference (as CF retains the port for the wait). */
    if (in_loop)
        RLRetain(mp);
    int32_t rc = receive_reply(mp, seq, rl, replyMode, in_loop, rcv_deadline, returnData, __func__);
    if (in_loop)
        RLRelease(mp);
    return rc;
}

/* fork(): the registry's and the name server's locks are held across it
 * (rl_fork.c; they are taken before the object pool's, under which a port
 * is made), so a child forked while another thread registers a port or a
 * name finds the lists consistent and the locks free. */
static void fork_prepare(void) {
    pthread_mutex_lock(&g_reg.mu);
    pthread_mutex_lock(&g_alias_mu);
}
static void fork_parent(void) {
    pthread_mutex_unlock(&g_alias_mu);
    pthread_mutex_unlock(&g_reg.mu);
}
static void fork_child(void) {
    /* The child lets go of its parent's names at once, even if it never
     * calls the library again: else a child that merely lives on (holding
     * the listening sockets) would keep a name its parent invalidated
     * alive and taken. Its copies of the ports learn that their names are
     * not theirs (pid) and never listen again. */
    for (rl__netport *np = g_reg.head; np; np = np->reg_next)
        if (np->serving)
            rl__server_drop_listeners_in_child(&np->srv);
    pthread_mutex_unlock(&g_alias_mu);
    pthread_mutex_unlock(&g_reg.mu);
}

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_MSGPORT, fork_prepare, fork_parent, fork_child);
}

/* For the fuzz harness (rl_fuzz.h). */
bool rl__message_port_dispatch(RLMessagePortRef local, rl__conn *c, rl__wire_frame *f, const char **why) {
    return dispatch(local, c, f, why);
}
