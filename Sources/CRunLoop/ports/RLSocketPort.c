/*
 * RLSocketPort.c — ports over TCP (RLSocketPort.h has the contract,
 * rl_wire.h the frames, rl_conn.h the serving).
 *
 * A local port is an rl__server around a listening TCP socket: the run loops
 * its source is in watch the socket and every connection. Frames are
 * one-way; component 0 is the reply port, the rest are the message's. A
 * frame's body is shared by the RLData components cut from it (one copy,
 * from the kernel).
 *
 * A remote port is an address list (resolved once, at creation) and at
 * most one connection, opened by the first send and kept. Its sends are
 * serialized by `send_mu`. The receiving side never writes on a
 * connection, so anything readable on it means the peer closed it: each
 * send looks first, so a peer that went away between sends is noticed
 * before a message is written into a dead connection. A closed (or reset)
 * connection is never reopened behind the caller's back: the send fails
 * and the port becomes invalid, as the header says.
 */
#include "rl_fork.h"
#include "RLDataInternal.h"
#include "rl_conn.h"
#include "rl_fuzz.h"
#include "rl_weak.h"

#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLSocketPort.h>
#include <crunloop/RLData.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

enum { RL_SP_MAX_ADDRS = 8, RL_SP_TEXT = INET6_ADDRSTRLEN + 16 };

struct RLSocketPort {
    rl__object base;
    rl__netport np; /* validity, context, limit, server, source; np.mu guards the state below */
    bool remote;
    bool wildcard; /* a local port bound to every address */
    RLSocketPortCallBack callout;
    /* local: the bound address; remote: the addresses to try, in order */
    struct sockaddr_storage addrs[RL_SP_MAX_ADDRS];
    socklen_t addrlens[RL_SP_MAX_ADDRS];
    int naddrs;
    int cur; /* the address in use (remote: the one connected last) */
    /* remote */
    pthread_mutex_t send_mu; /* one send at a time */
    int fd; /* changed with send_mu and np.mu held (conn_set): invalidate shuts it down under np.mu */
    char host[256]; /* as given, for descriptions */
    pid_t pid; /* whose connection fd is (np.mu): a fork's child does not use or cut its parent's */
    /* most components a message may carry (the reply port not counted):
     * received (local) or sent (remote) */
    _Atomic uint32_t max_comps;
    struct RLSocketPort *reg_next; /* in its registry bucket (g_reg.mu) */
};
RL__NETPORT_CHECK(struct RLSocketPort);
_Static_assert(sizeof(RLSocketPortContext) == sizeof(rl__netport_context), "context layouts differ");

/* ---- the process's remote ports by address ----
 *
 * A hash table keyed by a port's first address, with a per-process random
 * seed: a message may carry tens of thousands of ports, each looked up and
 * later removed, so each step must cost the same however many ports the
 * process holds (a list made one large message cost quadratic time). */

static struct {
    pthread_mutex_t mu;
    struct RLSocketPort **buckets;
    size_t nbuckets, count;
    uint64_t seed;
} g_reg = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

static uint64_t mix(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The bucket of an address (what same_addr compares, seeded). */
static size_t addr_bucket(const struct sockaddr_storage *a) {
    uint64_t h = mix(g_reg.seed, &a->ss_family, sizeof a->ss_family);
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a;
        h = mix(h, &x->sin_port, sizeof x->sin_port);
        h = mix(h, &x->sin_addr, sizeof x->sin_addr);
    } else {
        const struct sockaddr_in6 *x = (const void *)a;
        h = mix(h, &x->sin6_port, sizeof x->sin6_port);
        h = mix(h, &x->sin6_addr, sizeof x->sin6_addr);
        h = mix(h, &x->sin6_scope_id, sizeof x->sin6_scope_id);
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)(h & (g_reg.nbuckets - 1));
}

static struct RLSocketPort *reg_find_locked(const struct sockaddr_storage *a) {
    if (!g_reg.nbuckets)
        return NULL;
    for (struct RLSocketPort *p = g_reg.buckets[addr_bucket(a)]; p; p = p->reg_next) {
        /* order: the registry's lock, then a port's */
        if (!same_addr(&p->addrs[0], a))
            continue;
        pthread_mutex_lock(&p->np.mu);
        bool mine = p->pid == getpid() && p->np.life.valid;
        pthread_mutex_unlock(&p->np.mu);
        if (mine)
            return p;
    }
    return NULL;
}

/* Room for one more (doubling: amortized constant). False if memory is short. */
static bool reg_grow_locked(void) {
    if (g_reg.count < g_reg.nbuckets)
        return true;
    size_t n = g_reg.nbuckets ? 2 * g_reg.nbuckets : 64;
    struct RLSocketPort **nb = calloc(n, sizeof *nb);
    if (!nb)
        return g_reg.nbuckets > 0; /* longer chains, still correct */
    if (!g_reg.nbuckets) {
        uint64_t seed;
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
            seed = (uint64_t)(uintptr_t)nb ^ (uint64_t)getpid() << 32;
        g_reg.seed = seed | 1;
    }
    struct RLSocketPort **old = g_reg.buckets;
    size_t oldn = g_reg.nbuckets;
    g_reg.buckets = nb;
    g_reg.nbuckets = n;
    for (size_t i = 0; i < oldn; i++)
        for (struct RLSocketPort *p = old[i], *next; p; p = next) {
            next = p->reg_next;
            size_t b = addr_bucket(&p->addrs[0]);
            p->reg_next = nb[b];
            nb[b] = p;
        }
    free(old);
    return true;
}

static bool reg_add_locked(struct RLSocketPort *sp) {
    if (!reg_grow_locked())
        return false;
    size_t b = addr_bucket(&sp->addrs[0]);
    sp->reg_next = g_reg.buckets[b];
    g_reg.buckets[b] = sp;
    g_reg.count++;
    return true;
}

static void reg_remove(struct RLSocketPort *sp) {
    pthread_mutex_lock(&g_reg.mu);
    if (g_reg.nbuckets)
        for (struct RLSocketPort **pp = &g_reg.buckets[addr_bucket(&sp->addrs[0])]; *pp; pp = &(*pp)->reg_next)
            if (*pp == sp) {
                *pp = sp->reg_next;
                g_reg.count--;
                break;
            }
    pthread_mutex_unlock(&g_reg.mu);
}

/* ---- addresses as text ---- */

static uint16_t addr_port(const struct sockaddr_storage *a) {
    return ntohs(a->ss_family == AF_INET ? ((const struct sockaddr_in *)(const void *)a)->sin_port
                                         : ((const struct sockaddr_in6 *)(const void *)a)->sin6_port);
}

/* "1.2.3.4:80", "[::1]:80", or with host "*" for a wildcard local port. */
static void addr_text(const struct sockaddr_storage *a, socklen_t len, bool wildcard, char *out, size_t n) {
    char host[NI_MAXHOST] = "?";
    if (!wildcard && getnameinfo((const struct sockaddr *)a, len, host, sizeof host, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(host, sizeof host, "?");
    if (wildcard)
        snprintf(out, n, "*:%u", addr_port(a));
    else if (a->ss_family == AF_INET6)
        snprintf(out, n, "[%s]:%u", host, addr_port(a));
    else
        snprintf(out, n, "%s:%u", host, addr_port(a));
}

/* Fills sp->addrs from getaddrinfo's answer for host:port (flags: e.g.
 * numeric only). 0, or a getaddrinfo error. */
static int resolve(struct RLSocketPort *sp, const char *host, uint16_t port, int flags) {
    char serv[8];
    snprintf(serv, sizeof serv, "%u", port);
    struct addrinfo hints = {.ai_flags = flags | AI_NUMERICSERV | AI_ADDRCONFIG, .ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP};
    struct addrinfo *res = NULL;
    int r = getaddrinfo(host, serv, &hints, &res);
    if (r == EAI_BADFLAGS || (r != 0 && (flags & AI_NUMERICHOST))) {
        /* AI_ADDRCONFIG hides loopback-only families in a bare namespace:
         * numeric addresses need no such filter. */
        hints.ai_flags &= ~AI_ADDRCONFIG;
        r = getaddrinfo(host, serv, &hints, &res);
    }
    if (r != 0)
        return r;
    /* IPv4 addresses first, then IPv6, each in the resolver's order: what
     * Foundation's SocketPort (and Darwin's) prefer, so that a remote port
     * for a name such as "localhost" has the same `address` there and here.
     * A peer listening on IPv6 only is still reached: a refused address
     * moves the connect on to the next. */
    sp->naddrs = 0;
    const int families[2] = {AF_INET, AF_INET6};
    for (int f = 0; f < 2; f++)
        for (struct addrinfo *ai = res; ai && sp->naddrs < RL_SP_MAX_ADDRS; ai = ai->ai_next) {
            if (ai->ai_family != families[f] || ai->ai_addrlen > sizeof sp->addrs[0])
                continue;
            memcpy(&sp->addrs[sp->naddrs], ai->ai_addr, ai->ai_addrlen);
            sp->addrlens[sp->naddrs++] = ai->ai_addrlen;
        }
    freeaddrinfo(res);
    return sp->naddrs ? 0 : EAI_NONAME;
}

/* ---- objects ---- */

static void sp_finalize(void *obj) {
    struct RLSocketPort *sp = obj;
    rl__netport_finalize(&sp->np);
    pthread_mutex_destroy(&sp->send_mu);
}

static bool sp_can_destroy(void *obj);

static char *sp_describe(const void *obj) {
    struct RLSocketPort *sp = (struct RLSocketPort *)obj;
    char why[128] = "", where[RL_SP_TEXT];
    size_t dropped = rl__netport_dropped(&sp->np, why, sizeof why);
    pthread_mutex_lock(&sp->np.mu);
    addr_text(&sp->addrs[sp->cur], sp->addrlens[sp->cur], sp->wildcard, where, sizeof where);
    char *s = NULL;
    int r = asprintf(&s, "<RLSocketPort %p>{%s %s%s%s%s%s, dropped %zu connection(s)%s%s}", obj,
                     sp->remote ? "remote" : "local", where, sp->remote ? " (" : "", sp->remote ? sp->host : "",
                     sp->remote ? ")" : "", sp->np.life.valid ? "" : ", invalid", dropped, dropped ? ", last: " : "",
                     dropped ? why : "");
    pthread_mutex_unlock(&sp->np.mu);
    return r < 0 ? NULL : s;
}

static const rl__class socket_port_class = {"RLSocketPort", sp_finalize, sp_can_destroy, sp_describe};

static bool sp_ok(RLSocketPortRef sp, const char *fn) { return rl__object_check(sp, &socket_port_class, fn); }

static bool is_sockport(const void *obj) {
    const rl__object *o = obj;
    return o && atomic_load_explicit(&o->magic, memory_order_relaxed) == RL__MAGIC_ALIVE &&
           rl__is_class(o, &socket_port_class);
}

static struct RLSocketPort *sp_new(bool remote, const char *fn) {
    struct RLSocketPort *sp = rl__object_alloc(&socket_port_class, sizeof *sp, fn);
    if (!sp)
        return NULL;
    pthread_mutex_init(&sp->send_mu, NULL);
    sp->remote = remote;
    sp->fd = -1;
    sp->pid = getpid();
    atomic_init(&sp->max_comps, RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS);
    if (!rl__netport_init(&sp->np, sp)) {
        RLRelease(sp); /* not valid yet: nothing to tear down */
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    return sp;
}

/* The process's remote port for sp's first address, or sp itself (now
 * registered). Consumes sp when an existing one is returned. */
static struct RLSocketPort *reg_add_or_find(struct RLSocketPort *sp, const char *fn) {
    pthread_mutex_lock(&g_reg.mu);
    struct RLSocketPort *old = reg_find_locked(&sp->addrs[0]);
    if (old || !reg_add_locked(sp)) {
        if (old)
            RLRetain(old);
        pthread_mutex_unlock(&g_reg.mu);
        sp->np.life.valid = false; /* never connected: nothing to tear down */
        RLRelease(sp);
        if (!old)
            rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return old;
    }
    pthread_mutex_unlock(&g_reg.mu);
    return sp;
}

/* ---- receiving (local ports, on the run loop's thread) ---- */

/* A frame's body, shared by the RLData components cut from it. */
typedef struct sp_body {
    _Atomic long rc;
    uint8_t *bytes;
} sp_body;

static void body_retain(void *p) { atomic_fetch_add_explicit(&((sp_body *)p)->rc, 1, memory_order_relaxed); }
static void body_release(void *p) {
    sp_body *b = p;
    if (atomic_fetch_sub_explicit(&b->rc, 1, memory_order_acq_rel) == 1) {
        free(b->bytes);
        free(b);
    }
}

/* A numeric IPv4 or IPv6 address (no scope: those go to getaddrinfo) as
 * sp's one address, with no system call; false if host is not one. */
static bool numeric_addr(struct RLSocketPort *sp, const char *host, uint16_t port) {
    memset(&sp->addrs[0], 0, sizeof sp->addrs[0]);
    struct sockaddr_in *in = (void *)&sp->addrs[0];
    struct sockaddr_in6 *in6 = (void *)&sp->addrs[0];
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        sp->addrlens[0] = sizeof *in;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        sp->addrlens[0] = sizeof *in6;
    } else {
        return false;
    }
    sp->naddrs = 1;
    return true;
}

/* A port component ("host:port", "[v6]:port", "*:port") as a remote port;
 * "*" is the address the connection came from. NULL if malformed. */
static RLSocketPortRef decode_port(const rl__wire_comp *comp, const rl__conn *c) {
    char text[RL_SP_TEXT];
    if (comp->len == 0 || comp->len >= sizeof text || memchr(comp->bytes, 0, comp->len))
        return NULL;
    memcpy(text, comp->bytes, comp->len);
    text[comp->len] = 0;
    char *colon = strrchr(text, ':');
    if (!colon || colon == text)
        return NULL;
    *colon = 0;
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || colon[1] == 0 || port == 0 || port > 65535)
        return NULL;
    char *host = text;
    char peer[128];
    if (strcmp(host, "*") == 0) {
        if (getnameinfo((const struct sockaddr *)&c->addr, c->addrlen, peer, sizeof peer, NULL, 0, NI_NUMERICHOST))
            return NULL;
        host = peer;
    } else if (host[0] == '[') {
        size_t n = strlen(host);
        if (n < 3 || host[n - 1] != ']')
            return NULL;
        host[n - 1] = 0;
        host++;
    }
    struct RLSocketPort *sp = sp_new(true, "RLSocketPort");
    if (!sp)
        return NULL;
    snprintf(sp->host, sizeof sp->host, "%s", host);
    /* Numeric only: a run loop never waits for DNS. */
    if (!numeric_addr(sp, host, (uint16_t)port) && resolve(sp, host, (uint16_t)port, AI_NUMERICHOST) != 0) {
        sp->np.life.valid = false;
        RLRelease(sp);
        return NULL;
    }
    return reg_add_or_find(sp, "RLSocketPort");
}

static void release_all(RLTypeRef *objs, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (objs[i])
            RLRelease(objs[i]);
}

/* Hands one message to the handler; false if the connection must go. */
/* A remote reply port named by a frame from c stays alive while c is
 * connected (c->kept, the last one named), so the registry finds it for
 * the next frame that names it: replies to a client go out on one
 * connection, in the order they are sent, not on a connection opened (and
 * closed) per reply, whose replies could be served in any order by the
 * client's loop. A local port is not kept: it would keep itself alive
 * through its own server. */
static void keep_reply_port(rl__conn *c, RLTypeRef port) {
    if (!port || port == c->kept || !((struct RLSocketPort *)port)->remote)
        return;
    RLRetain(port);
    if (c->kept)
        RLRelease(c->kept);
    c->kept = port;
}

static bool dispatch(void *owner, rl__conn *c, rl__wire_frame *f, const char **why) {
    struct RLSocketPort *sp = owner;
    if (f->h.kind != RL_WIRE_ONEWAY || f->h.ncomp == 0 || f->comps[0].type != RL_WIRE_PORT) {
        *why = "unexpected frame for a socket port";
        rl__wire_frame_free(f);
        return false;
    }
    /* The server refuses such a frame on its header; this catches one that
     * began before the limit was lowered. */
    uint32_t max = atomic_load_explicit(&sp->max_comps, memory_order_relaxed);
    if (f->h.ncomp - 1 > max) {
        /* The server copies the reason before this thread dispatches again. */
        static _Thread_local char text[96];
        snprintf(text, sizeof text, "a message of %u components exceeds the port's limit of %u", f->h.ncomp - 1, max);
        *why = text;
        rl__wire_frame_free(f);
        return false;
    }
    sp_body *body = malloc(sizeof *body);
    RLTypeRef *objs = calloc(f->h.ncomp, sizeof *objs);
    if (!body || !objs) {
        free(body);
        free(objs);
        rl__wire_frame_free(f);
        *why = "out of memory";
        return false;
    }
    atomic_init(&body->rc, 1);
    body->bytes = f->body;
    f->body = NULL;
    bool ok = true;
    for (uint32_t i = 0; ok && i < f->h.ncomp; i++) {
        const rl__wire_comp *comp = &f->comps[i];
        if (i == 0 && comp->len == 0)
            continue; /* no reply port */
        if (comp->type == RL_WIRE_DATA)
            objs[i] = rl__data_slice(comp->bytes, comp->len, body, body_retain, body_release);
        else
            objs[i] = decode_port(comp, c);
        if (!objs[i]) {
            ok = false;
            *why = comp->type == RL_WIRE_DATA ? "out of memory" : "malformed port component";
        }
    }
    uint32_t ncomp = f->h.ncomp;
    int32_t msgid = f->h.msgid;
    rl__wire_frame_free(f);
    body_release(body);
    keep_reply_port(c, ok ? objs[0] : NULL);
    if (ok) {
        RLSocketPortCallBack callout = sp->callout;
        if (callout)
            callout(sp, (uint32_t)msgid, ncomp > 1 ? objs + 1 : NULL, (RLIndex)(ncomp - 1), (RLSocketPortRef)objs[0],
                    sp->np.ctx.info);
    }
    release_all(objs, ncomp);
    free(objs);
    return ok;
}

static bool admit(void *owner, rl__conn *c, char *why, size_t n) {
    int one = 1;
    /* Messages are written whole: no need to wait for more to fill a segment. */
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
        snprintf(why, n, "TCP_NODELAY: %s", strerror(errno));
        return false;
    }
    return true;
}

static const void *callout_of(const void *owner) {
    return (const void *)((const struct RLSocketPort *)owner)->callout;
}

static const rl__server_ops sp_server_ops = {admit, dispatch, {kRLCalloutPort, callout_of, NULL}};

/* For the fuzz harness (rl_fuzz.h). */
bool rl__socket_port_dispatch(RLSocketPortRef local, rl__conn *c, rl__wire_frame *f, const char **why) {
    return dispatch(local, c, f, why);
}

/* ---- public: creating ---- */

RLSocketPortRef RLSocketPortCreateLocal(RLAllocatorRef allocator, int family, const char *address, uint16_t tcpPort,
                                        RLSocketPortCallBack callout, const RLSocketPortContext *context) {
    if (family != AF_INET && family != AF_INET6)
        return rl__fail(kRLErrorInvalidArgument, __func__, "family %d is neither AF_INET nor AF_INET6", family), NULL;
    if (!rl__netport_check_context(context, __func__))
        return NULL;
    struct sockaddr_storage a;
    memset(&a, 0, sizeof a);
    socklen_t alen;
    if (family == AF_INET) {
        struct sockaddr_in *in = (void *)&a;
        in->sin_family = AF_INET;
        in->sin_port = htons(tcpPort);
        in->sin_addr.s_addr = htonl(INADDR_ANY);
        alen = sizeof *in;
        if (address && inet_pton(AF_INET, address, &in->sin_addr) != 1)
            return rl__fail(kRLErrorInvalidArgument, __func__, "\"%s\" is not a numeric IPv4 address", address), NULL;
    } else {
        struct sockaddr_in6 *in6 = (void *)&a;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(tcpPort);
        in6->sin6_addr = in6addr_any;
        alen = sizeof *in6;
        if (address && inet_pton(AF_INET6, address, &in6->sin6_addr) != 1)
            return rl__fail(kRLErrorInvalidArgument, __func__, "\"%s\" is not a numeric IPv6 address", address), NULL;
    }
    struct RLSocketPort *sp = sp_new(false, __func__);
    if (!sp)
        return NULL;
    sp->wildcard = address == NULL;
    int lfd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    int err = lfd < 0 ? errno : 0, one = 1, zero = 0;
    /* SO_REUSEADDR: a port number is reusable at once after its port is
     * invalidated (its old connections linger in TIME_WAIT). */
    if (!err && setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        err = errno;
    if (!err && family == AF_INET6 && setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, address ? &one : &zero, sizeof one) < 0)
        err = errno;
    if (!err && (bind(lfd, (struct sockaddr *)&a, alen) < 0 || listen(lfd, SOMAXCONN) < 0))
        err = errno;
    sp->addrlens[0] = sizeof sp->addrs[0];
    if (!err && getsockname(lfd, (struct sockaddr *)&sp->addrs[0], &sp->addrlens[0]) < 0)
        err = errno;
    sp->naddrs = 1;
    if (err && lfd >= 0)
        close(lfd);
    if (!err)
        err = rl__netport_listen(&sp->np, lfd, &sp_server_ops, sp);
    if (err) {
        sp->np.life.valid = false;
        RLRelease(sp);
        if (err == EADDRINUSE)
            return rl__fail(kRLErrorExists, __func__, "TCP port %u is in use", tcpPort), NULL;
        if (err == EADDRNOTAVAIL)
            return rl__fail(kRLErrorInvalidArgument, __func__, "\"%s\" is not an address of this host", address),
                   NULL;
        return rl__fail_errno(err, __func__, "cannot listen on TCP port %u", tcpPort), NULL;
    }
    rl__server_set_max_comps(&sp->np.srv, RL_SOCKET_PORT_DEFAULT_MAX_COMPONENTS + 1); /* + the reply port */
    sp->callout = callout;
    rl__netport_set_context(&sp->np, context);
    rl__netport_retain_context(&sp->np);
    return sp;
}

RLSocketPortRef RLSocketPortCreateRemote(RLAllocatorRef allocator, const char *host, uint16_t tcpPort) {
    if (!host || !*host)
        return rl__fail(kRLErrorInvalidArgument, __func__, "%s host", host ? "empty" : "NULL"), NULL;
    if (strlen(host) >= sizeof ((struct RLSocketPort *)0)->host)
        return rl__fail(kRLErrorInvalidArgument, __func__, "host name longer than 255 bytes"), NULL;
    if (tcpPort == 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, "TCP port 0 names no remote port"), NULL;
    struct RLSocketPort *sp = sp_new(true, __func__);
    if (!sp)
        return NULL;
    snprintf(sp->host, sizeof sp->host, "%s", host);
    int r = resolve(sp, host, tcpPort, 0);
    if (r != 0) {
        sp->np.life.valid = false;
        RLRelease(sp);
        return rl__fail(kRLErrorNotFound, __func__, "cannot resolve \"%s\": %s", host, gai_strerror(r)), NULL;
    }
    return reg_add_or_find(sp, __func__);
}

/* ---- public: state ---- */

bool RLSocketPortIsRemote(RLSocketPortRef sp) { return sp_ok(sp, __func__) && sp->remote; }

bool RLSocketPortIsValid(RLSocketPortRef sp) { return sp_ok(sp, __func__) && rl__netport_is_valid(&sp->np); }

uint16_t RLSocketPortGetPort(RLSocketPortRef sp) { return sp_ok(sp, __func__) ? addr_port(&sp->addrs[0]) : 0; }

int RLSocketPortGetProtocolFamily(RLSocketPortRef sp) {
    if (!sp_ok(sp, __func__))
        return -1;
    pthread_mutex_lock(&sp->np.mu);
    int f = sp->addrs[sp->cur].ss_family;
    pthread_mutex_unlock(&sp->np.mu);
    return f;
}

RLDataRef RLSocketPortCopyAddress(RLSocketPortRef sp) {
    if (!sp_ok(sp, __func__))
        return NULL;
    pthread_mutex_lock(&sp->np.mu);
    struct sockaddr_storage a = sp->addrs[sp->cur];
    socklen_t len = sp->addrlens[sp->cur];
    pthread_mutex_unlock(&sp->np.mu);
    return RLDataCreate(NULL, (const uint8_t *)&a, (RLIndex)len);
}

bool RLSocketPortGetContext(RLSocketPortRef sp, RLSocketPortContext *context) {
    return sp_ok(sp, __func__) && rl__netport_get_context(&sp->np, context, __func__);
}

bool RLSocketPortSetMessageLimit(RLSocketPortRef sp, RLIndex bytes) {
    return sp_ok(sp, __func__) && rl__netport_set_limit(&sp->np, bytes, __func__);
}

bool RLSocketPortSetMaxComponents(RLSocketPortRef sp, RLIndex count) {
    if (!sp_ok(sp, __func__))
        return false;
    if (count < 0 || count > RL_SOCKET_PORT_MAX_COMPONENTS_LIMIT)
        return rl__fail(kRLErrorInvalidArgument, __func__, "component limit %ld is outside [0, %ld]", (long)count,
                        (long)RL_SOCKET_PORT_MAX_COMPONENTS_LIMIT);
    atomic_store_explicit(&sp->max_comps, (uint32_t)count, memory_order_relaxed);
    if (!sp->remote && sp->np.serving)
        rl__server_set_max_comps(&sp->np.srv, (uint32_t)count + 1); /* + the reply port */
    return true;
}

bool RLSocketPortSetStallTimeout(RLSocketPortRef sp, RLTimeInterval seconds) {
    return sp_ok(sp, __func__) && rl__netport_set_stall(&sp->np, sp->remote, seconds, __func__);
}

/* ---- invalidation ---- */

/* Replaces the remote's connection (send_mu held). A connection made
 * while the port was being invalidated is shut down at once, so the send
 * that made it fails instead of waiting for its date. */
static void conn_set(struct RLSocketPort *sp, int fd) {
    pthread_mutex_lock(&sp->np.mu);
    int old = sp->fd;
    sp->fd = fd;
    if (fd >= 0 && !sp->np.life.valid)
        shutdown(fd, SHUT_RDWR);
    pthread_mutex_unlock(&sp->np.mu);
    if (old >= 0 && old != fd)
        close(old);
}

/* Tears the port down; calls the invalidation callback once (outside the
 * lock). Safe from any thread, and from the port's own handler. */
static void invalidate(struct RLSocketPort *sp) {
    if (!rl__netport_begin_invalidate(&sp->np))
        return;
    pthread_mutex_lock(&sp->np.mu);
    /* A send in progress wakes up and fails; it closes the fd. Not in a
     * fork's child whose copy still shares its parent's connection:
     * shutting it down would cut the parent's. */
    if (sp->fd >= 0 && sp->pid == getpid())
        shutdown(sp->fd, SHUT_RDWR);
    pthread_mutex_unlock(&sp->np.mu);
    if (sp->remote)
        reg_remove(sp);
    RLSocketPortInvalidationCallBack cb = (RLSocketPortInvalidationCallBack)rl__netport_finish_invalidate(&sp->np);
    if (cb)
        cb(sp, sp->np.ctx.info);
    rl__netport_end_invalidate(&sp->np);
}

static bool sp_can_destroy(void *obj) {
    struct RLSocketPort *sp = obj;
    invalidate(sp);
    conn_set(sp, -1); /* no sender is left: it would hold a reference */
    return true;
}

bool RLSocketPortInvalidate(RLSocketPortRef sp) {
    if (!sp_ok(sp, __func__))
        return false;
    RLRetain(sp);
    invalidate(sp);
    /* A sender in the middle of a send closes the connection itself. */
    if (sp->remote && pthread_mutex_trylock(&sp->send_mu) == 0) {
        conn_set(sp, -1);
        pthread_mutex_unlock(&sp->send_mu);
    }
    RLRelease(sp);
    return true;
}

bool RLSocketPortSetInvalidationCallBack(RLSocketPortRef sp, RLSocketPortInvalidationCallBack callout) {
    if (!sp_ok(sp, __func__))
        return false;
    if (!rl__netport_set_inval(&sp->np, (rl__netport_fn)callout) && callout)
        callout(sp, sp->np.ctx.info); /* as CF: at once on an invalid port */
    return true;
}

/* ---- run-loop source ---- */

RLRunLoopSourceRef RLSocketPortCreateRunLoopSource(RLAllocatorRef allocator, RLSocketPortRef sp, RLIndex order) {
    return sp_ok(sp, __func__) ? rl__netport_create_source(&sp->np, sp->remote, order, __func__) : NULL;
}

/* ---- sending ---- */

/* Whether the open connection is still good: the receiver never writes,
 * so anything readable is its end of the stream (or a reset). */
static bool conn_alive(int fd) {
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    int r;
    while ((r = poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    return r == 0;
}

/* Connects to one of sp's addresses by `deadline`. The fd, or -1 with
 * *err: ECONNREFUSED if every address refused, ETIMEDOUT, or another errno. */
static int connect_any(struct RLSocketPort *sp, double deadline, int *err) {
    bool refused = true;
    *err = ECONNREFUSED;
    for (int i = 0; i < sp->naddrs; i++) {
        int fd = socket(sp->addrs[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0) {
            *err = errno;
            refused = false;
            continue;
        }
        int e = 0;
        if (connect(fd, (struct sockaddr *)&sp->addrs[i], sp->addrlens[i]) < 0) {
            e = errno;
            if (e == EINPROGRESS || e == EINTR) {
                struct pollfd p = {fd, POLLOUT, 0};
                int r;
                while ((r = poll(&p, 1, rl__ms_left(deadline))) < 0 && errno == EINTR) {
                }
                socklen_t len = sizeof e;
                if (r == 0)
                    e = ETIMEDOUT;
                else if (r < 0)
                    e = errno;
                else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
                    e = errno;
            }
        }
        int one = 1;
        if (e == 0 && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
            e = errno;
        if (e == 0) {
            pthread_mutex_lock(&sp->np.mu);
            sp->cur = i;
            pthread_mutex_unlock(&sp->np.mu);
            return fd;
        }
        close(fd);
        if (e != ECONNREFUSED)
            refused = false;
        *err = e;
        if (e == ETIMEDOUT)
            break; /* the time is spent */
    }
    if (refused)
        *err = ECONNREFUSED;
    return -1;
}

/* The text of a port component: how the receiver reaches `p`. */
static void port_text(struct RLSocketPort *p, char *out, size_t n) {
    pthread_mutex_lock(&p->np.mu);
    addr_text(&p->addrs[p->cur], p->addrlens[p->cur], p->wildcard, out, n);
    pthread_mutex_unlock(&p->np.mu);
}

/* The peer is gone: the send fails and the port becomes invalid. */
static bool peer_gone(struct RLSocketPort *sp, RLErrorCode code, const char *fn, const char *why) {
    conn_set(sp, -1);
    pthread_mutex_unlock(&sp->send_mu);
    if (!rl__netport_is_valid(&sp->np))
        return rl__fail(kRLErrorInvalidObject, fn, "%s: the port was invalidated during the send", sp->host);
    RLRetain(sp);
    invalidate(sp);
    RLRelease(sp);
    char where[RL_SP_TEXT];
    port_text(sp, where, sizeof where);
    return rl__fail(code, fn, "%s (%s): %s; the port is now invalid", sp->host, where, why);
}

/* The connection to send on (send_mu held): the one kept since the last
 * send if it is still good, else a new one; -1 (send_mu let go, error set)
 * if the port is invalid or the peer cannot be reached. */
static int sp_send_conn(void *port, double deadline) {
    static const char fn[] = "RLSocketPortSendBeforeDate";
    struct RLSocketPort *sp = port;
    if (!rl__netport_is_valid(&sp->np)) {
        conn_set(sp, -1);
        pthread_mutex_unlock(&sp->send_mu);
        return rl__fail(kRLErrorInvalidObject, fn, "the port is invalid"), -1;
    }
    if (sp->fd >= 0 && sp->pid != getpid()) { /* a fork's child: the connection is its parent's */
        conn_set(sp, -1);                      /* closes this process's copy only */
        pthread_mutex_lock(&sp->np.mu);
        sp->pid = getpid();
        pthread_mutex_unlock(&sp->np.mu);
    }
    if (sp->fd >= 0 && !conn_alive(sp->fd)) /* the peer closed or reset it since the last send */
        return peer_gone(sp, kRLErrorInvalidState, fn, "the peer closed the connection"), -1;
    if (sp->fd < 0) {
        int err;
        conn_set(sp, connect_any(sp, deadline, &err));
        if (sp->fd < 0) {
            if (err == ECONNREFUSED)
                return peer_gone(sp, kRLErrorNotFound, fn, "nobody listens there (connection refused)"), -1;
            pthread_mutex_unlock(&sp->send_mu);
            if (err == ETIMEDOUT)
                return rl__fail(kRLErrorTimedOut, fn, "%s: cannot connect before the limit date", sp->host), -1;
            return rl__fail_errno(err, fn, "cannot connect to %s", sp->host), -1;
        }
    }
    return sp->fd;
}

bool RLSocketPortSendBeforeDate(RLSocketPortRef sp, RLAbsoluteTime limitDate, uint32_t msgid,
                                const RLTypeRef *components, RLIndex count, RLSocketPortRef replyPort) {
    if (!sp_ok(sp, __func__))
        return false;
    if (!sp->remote)
        return rl__fail(kRLErrorInvalidArgument, __func__, "a local port receives: send through a remote port");
    if (isnan(limitDate))
        return rl__fail(kRLErrorInvalidArgument, __func__, "NaN limit date");
    if (count < 0 || count > (RLIndex)(RL_WIRE_MAX_BODY / RL_WIRE_CHEADER) - 1)
        return rl__fail(kRLErrorInvalidArgument, __func__, "component count %ld out of range", (long)count);
    if (count > 0 && !components)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL components with count %ld", (long)count);
    uint32_t max = atomic_load_explicit(&sp->max_comps, memory_order_relaxed);
    if ((uint64_t)count > max)
        return rl__fail(kRLErrorInvalidArgument, __func__, "%ld components exceed the port's limit of %u", (long)count,
                        max);
    if (replyPort && !sp_ok(replyPort, __func__))
        return false;
    for (RLIndex i = 0; i < count; i++)
        if (!rl__is_data(components[i]) && !is_sockport(components[i]))
            return rl__fail(kRLErrorInvalidObject, __func__,
                            "component %ld (%p) is neither a live RLData nor an RLSocketPort", (long)i, components[i]);
    if (!RLSocketPortIsValid(sp))
        return rl__fail(kRLErrorInvalidObject, __func__, "the port is invalid");
    /* Component 0 is the reply port; ports travel as text. */
    uint32_t n = (uint32_t)count + 1;
    rl__wire_comp *comps = calloc(n, sizeof *comps);
    char(*texts)[RL_SP_TEXT] = calloc(n, sizeof *texts);
    if (!comps || !texts) {
        free(comps);
        free(texts);
        return rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        RLTypeRef obj = i == 0 ? (RLTypeRef)replyPort : components[i - 1];
        comps[i].type = RL_WIRE_PORT;
        if (obj && rl__is_data(obj)) {
            comps[i] = (rl__wire_comp){RL_WIRE_DATA, (uint32_t)RLDataGetLength(obj), RLDataGetBytePtr(obj)};
        } else if (obj) {
            port_text((struct RLSocketPort *)obj, texts[i], sizeof texts[i]);
            comps[i].len = (uint32_t)strlen(texts[i]);
            comps[i].bytes = (const uint8_t *)texts[i];
        }
    }
    size_t flen = rl__wire_size(comps, n);
    pthread_mutex_lock(&sp->np.mu);
    uint32_t limit = sp->np.limit;
    pthread_mutex_unlock(&sp->np.mu);
    uint8_t *frame = flen - RL_WIRE_HEADER <= limit ? malloc(flen) : NULL;
    if (frame)
        rl__wire_encode(frame, RL_WIRE_ONEWAY, (int32_t)msgid, 0, comps, n);
    free(comps);
    free(texts);
    if (!frame) {
        if (flen - RL_WIRE_HEADER > limit)
            return rl__fail(kRLErrorInvalidArgument, __func__, "a message of %zu bytes exceeds the port's limit of %u",
                            flen - RL_WIRE_HEADER, limit);
        return rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    }
    double deadline = RLMonotonicTimeGetCurrent() + (limitDate - RLAbsoluteTimeGetCurrent());
    rl__send_job sd = {.mu = &sp->send_mu, .port = sp, .conn = sp_send_conn, .frame = frame, .len = flen};
    size_t sent;
    int err;
    rl__send_result r = rl__send(&sd, deadline, &sent, &err);
    free(frame);
    switch (r) {
    case RL_SEND_SENT:
        pthread_mutex_unlock(&sp->send_mu);
        return true;
    case RL_SEND_BUSY:
        return rl__fail(kRLErrorTimedOut, __func__, "another send through this port is still in progress");
    case RL_SEND_STOPPED:
    case RL_SEND_NOMEM: /* the frame was made already */
        return false;
    case RL_SEND_TIMEOUT:
        if (sent > 0) /* the stream is mid-frame: the receiver drops it whole */
            conn_set(sp, -1);
        pthread_mutex_unlock(&sp->send_mu);
        if (!rl__netport_is_valid(&sp->np))
            return rl__fail(kRLErrorInvalidObject, __func__, "%s: the port was invalidated during the send", sp->host);
        return rl__fail(kRLErrorTimedOut, __func__, "%s: the receiver is not reading", sp->host);
    case RL_SEND_BROKE:
        break;
    }
    return peer_gone(sp, kRLErrorInvalidState, __func__, strerror(err));
}

/* fork(): the registry's lock is held across it (rl_fork.c), so a child
 * forked while another thread registers a port finds the list consistent
 * and the lock free. */
static void fork_prepare(void) { pthread_mutex_lock(&g_reg.mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_reg.mu); }
static void fork_child(void) { pthread_mutex_unlock(&g_reg.mu); }

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_SOCKPORT, fork_prepare, fork_parent, fork_child);
}
