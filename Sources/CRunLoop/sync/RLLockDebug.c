/* RLLockDebug.c — the lock-order (potential deadlock) detector.
 *
 * Data:
 *   - per thread, a stack of the locks it holds (kind, address, where taken,
 *     a copy of the name), kept in a heap block found through a __thread
 *     pointer: acquire and release touch only this stack, no global lock;
 *   - for the process, a directed graph with one node per lock seen while
 *     another was held and an edge A -> B for "B taken while A held",
 *     remembering where each end was taken and whether each end was a read
 *     (shared) hold. A cycle is a deadlock only if no lock on it is both
 *     entered and held shared by its neighbours: two readers do not block
 *     each other, so a read-read junction breaks the cycle (Linux lockdep's
 *     "strong path" rule for recursive readers) — unless that lock has ever
 *     been taken for writing: RLReadWriteLock lets a waiting writer block
 *     new readers, so with writers queued on every lock of a reader-only
 *     cycle the readers deadlock behind them. The search walks
 *     (lock, entered-shared) states; an edge that would close a strong cycle
 *     is the inversion being reported, and is not added, so the next
 *     inversion on the same pair needs no special casing. Weak cycles
 *     (reader-reader only) may exist; the search marks visited states, so
 *     it terminates anyway.
 *   - per thread, the explicit call site (file, line) that
 *     RLLockDebugSetCallSite left for the next acquisition.
 * One plain pthread mutex (g_mu, never instrumented) guards the graph, the
 * set of reported pairs, the handler and the list of thread stacks. It is
 * held only for table work, never while a report is printed or the handler
 * runs, so a handler may take RL locks and nothing here can deadlock or
 * block a lock operation for longer than that table work. */
#include "rl_fork.h"
#include "RLLockDebugInternal.h"
#include <crunloop/RLLockDebug.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic int rl__lockdep_on = 0;

enum {
    RL__HELD_MAX = 48,     /* as Linux lockdep's MAX_LOCK_DEPTH */
    RL__NAME_MAX = 64,     /* names are copied, truncated, into held entries */
    RL__PATH_SHOWN = 8,    /* steps of the earlier path printed in a report */
    RL__SYMBOL_MAX = 256,
};

/* ---- per-thread held stacks ---- */

/* Where a lock was taken: the return address into the caller, and the
 * explicit source position when the caller named one. */
typedef struct lock_site {
    const void *addr;
    const char *file; /* static storage, or NULL */
    int line;
} lock_site;

typedef struct held_entry {
    rl__lockdep_kind kind;
    bool shared; /* held as a reader */
    const void *lock;
    lock_site where;
    char name[RL__NAME_MAX];
} held_entry;

typedef struct held_locks {
    struct held_locks *prev, *next; /* all stacks, so none looks leaked */
    unsigned epoch;
    int depth;                         /* may exceed RL__HELD_MAX: counted, not stored */
    held_entry e[RL__HELD_MAX];
} held_locks;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static held_locks *g_stacks;
/* Bumped each time debugging is switched on, so that stacks recorded before
 * it was switched off (whose releases were never seen) are discarded. */
static _Atomic unsigned g_epoch = 1;

unsigned rl__lockdep_epoch(void) { return atomic_load_explicit(&g_epoch, memory_order_relaxed); }
static __thread held_locks *t_stack;
static __thread lock_site t_callsite; /* addr unused: file and line only */
static pthread_key_t g_stack_key;
static pthread_once_t g_stack_key_once = PTHREAD_ONCE_INIT;

static void stack_destroy(void *p) {
    held_locks *s = p;
    pthread_mutex_lock(&g_mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        g_stacks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&g_mu);
    if (t_stack == s)
        t_stack = NULL;
    free(s);
}

static void stack_key_create(void) {
    (void)pthread_key_create(&g_stack_key, stack_destroy);
}

static held_locks *held_stack(void) {
    held_locks *s = t_stack;
    if (RL__UNLIKELY(s == NULL)) {
        s = calloc(1, sizeof *s);
        if (!s)
            return NULL; /* debugging degrades; the lock still works */
        pthread_once(&g_stack_key_once, stack_key_create);
        pthread_setspecific(g_stack_key, s);
        pthread_mutex_lock(&g_mu);
        s->next = g_stacks;
        if (g_stacks)
            g_stacks->prev = s;
        g_stacks = s;
        pthread_mutex_unlock(&g_mu);
        t_stack = s;
    }
    unsigned epoch = atomic_load_explicit(&g_epoch, memory_order_relaxed);
    if (s->epoch != epoch) {
        s->epoch = epoch;
        s->depth = 0;
    }
    return s;
}

static int held_count(const held_locks *s) {
    return s->depth < RL__HELD_MAX ? s->depth : RL__HELD_MAX;
}

static int held_find(const held_locks *s, rl__lockdep_kind kind, const void *lock) {
    for (int i = held_count(s) - 1; i >= 0; i--)
        if (s->e[i].lock == lock && s->e[i].kind == kind)
            return i;
    return -1;
}

static void copy_name(char *dst, const char *src) {
    if (!src) {
        dst[0] = '\0';
        return;
    }
    size_t n = strnlen(src, RL__NAME_MAX - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ---- the order graph ---- */

typedef struct lock_node lock_node;

typedef struct order_edge {
    lock_node *to;
    bool from_shared;   /* the `from` lock was held as a reader */
    bool to_shared;     /* `to` was taken as a reader */
    lock_site from_where; /* where the `from` lock had been taken */
    lock_site to_where;   /* where `to` was then taken */
} order_edge;

struct lock_node {
    lock_node *hnext;
    rl__lockdep_kind kind;
    bool written; /* taken exclusively through a shared-capable lock */
    const void *lock;
    char name[RL__NAME_MAX];
    order_edge *out;
    size_t nout, capout;
    lock_node **in; /* predecessors, so forgetting a lock is proportional to its edges */
    size_t nin, capin;
    /* Search state, per "entered shared" flag (0 or 1): */
    unsigned long seen[2];   /* generation */
    lock_node *prev[2];       /* the node we came from ... */
    unsigned char pstate[2]; /* ... in this state ... */
    order_edge *via[2];        /* ... over this edge (NULL: the start) */
};

typedef struct node_pair {
    const lock_node *a, *b;
} node_pair;

static lock_node **g_buckets;
static size_t g_nbuckets;
static _Atomic size_t g_nnodes;
static unsigned long g_generation;
static node_pair *g_reported;
static size_t g_nreported, g_capreported;
static _Atomic long g_report_count;

static RLLockDebugReportHandler g_handler;
static void *g_handler_info;
#if __BLOCKS__
typedef void (^report_block)(const RLLockDebugReport *report);
static report_block g_block;
#endif

static size_t node_hash(rl__lockdep_kind kind, const void *lock) {
    uintptr_t x = (uintptr_t)lock;
    x ^= x >> 17;
    x *= (uintptr_t)0x9e3779b97f4a7c15ull;
    return (size_t)(x ^ (x >> 29) ^ (uintptr_t)kind);
}

static lock_node *node_find(rl__lockdep_kind kind, const void *lock) {
    if (g_nbuckets == 0)
        return NULL;
    for (lock_node *n = g_buckets[node_hash(kind, lock) & (g_nbuckets - 1)]; n; n = n->hnext)
        if (n->lock == lock && n->kind == kind)
            return n;
    return NULL;
}

static bool table_grow(void) {
    size_t nb = g_nbuckets ? g_nbuckets * 2 : 64;
    lock_node **b = calloc(nb, sizeof *b);
    if (!b)
        return false;
    for (size_t i = 0; i < g_nbuckets; i++) {
        lock_node *n = g_buckets[i];
        while (n) {
            lock_node *next = n->hnext;
            size_t h = node_hash(n->kind, n->lock) & (nb - 1);
            n->hnext = b[h];
            b[h] = n;
            n = next;
        }
    }
    free(g_buckets);
    g_buckets = b;
    g_nbuckets = nb;
    return true;
}

/* Finds or makes the node; refreshes its name when one is given (locks may
 * be renamed). NULL only when out of memory. */
static lock_node *node_get(rl__lockdep_kind kind, const void *lock, const char *name) {
    lock_node *n = node_find(kind, lock);
    if (!n) {
        size_t count = atomic_load_explicit(&g_nnodes, memory_order_relaxed);
        if (count + 1 > g_nbuckets && !table_grow() && g_nbuckets == 0)
            return NULL;
        n = calloc(1, sizeof *n);
        if (!n)
            return NULL;
        n->kind = kind;
        n->lock = lock;
        size_t h = node_hash(kind, lock) & (g_nbuckets - 1);
        n->hnext = g_buckets[h];
        g_buckets[h] = n;
        atomic_store_explicit(&g_nnodes, count + 1, memory_order_relaxed);
    }
    if (name && name[0] && strncmp(n->name, name, RL__NAME_MAX - 1) != 0)
        copy_name(n->name, name);
    return n;
}

static order_edge *edge_find(lock_node *from, const lock_node *to, bool from_shared, bool to_shared) {
    for (size_t i = 0; i < from->nout; i++)
        if (from->out[i].to == to && from->out[i].from_shared == from_shared &&
            from->out[i].to_shared == to_shared)
            return &from->out[i];
    return NULL;
}

static bool grow(void **array, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 4;
    void *p = realloc(*array, nc * elem);
    if (!p)
        return false;
    *array = p;
    *cap = nc;
    return true;
}

static void edge_add(lock_node *from, lock_node *to, bool from_shared, bool to_shared, lock_site from_where,
                     lock_site to_where) {
    if (!grow((void **)&from->out, &from->capout, from->nout + 1, sizeof *from->out) ||
        !grow((void **)&to->in, &to->capin, to->nin + 1, sizeof *to->in))
        return; /* out of memory: the edge is not learned, nothing breaks */
    from->out[from->nout++] = (order_edge){to, from_shared, to_shared, from_where, to_where};
    to->in[to->nin++] = from;
}

typedef struct visit {
    lock_node *n;
    unsigned char state; /* 1: entered as a reader */
} visit;

/* Breadth-first search for a strong path from `from` (about to be taken,
 * shared if from_shared) to `to` (held, shared if to_shared): one on which
 * no lock is entered by one edge and held by the next both as a reader,
 * and which does not reach `to` as a reader when `to` is read-held.
 * Breadth-first, so a report shows the shortest earlier chain. Returns the
 * state in which `to` was reached (0 or 1), or -1; the path is then
 * readable backwards through prev/pstate/via. */
static int path_exists(lock_node *from, bool from_shared, lock_node *to, bool to_shared) {
    size_t count = atomic_load_explicit(&g_nnodes, memory_order_relaxed);
    visit *queue = malloc(2 * count * sizeof *queue);
    if (!queue)
        return -1;
    unsigned long gen = ++g_generation;
    size_t head = 0, tail = 0;
    unsigned char s0 = from_shared;
    from->seen[s0] = gen;
    from->prev[s0] = NULL;
    from->via[s0] = NULL;
    queue[tail++] = (visit){from, s0};
    int found = -1;
    while (head < tail && found < 0) {
        visit v = queue[head++];
        for (size_t i = 0; i < v.n->nout; i++) {
            order_edge *e = &v.n->out[i];
            if (v.state && e->from_shared && !v.n->written)
                continue; /* reader after reader, no writer to queue between */
            lock_node *m = e->to;
            unsigned char st = e->to_shared;
            if (m->seen[st] == gen)
                continue;
            m->seen[st] = gen;
            m->prev[st] = v.n;
            m->pstate[st] = v.state;
            m->via[st] = e;
            if (m == to && !(st && to_shared && !to->written)) {
                found = st;
                break;
            }
            queue[tail++] = (visit){m, st};
        }
    }
    free(queue);
    return found;
}

static bool pair_reported(const lock_node *a, const lock_node *b) {
    for (size_t i = 0; i < g_nreported; i++)
        if ((g_reported[i].a == a && g_reported[i].b == b) ||
            (g_reported[i].a == b && g_reported[i].b == a))
            return true;
    return false;
}

static void pair_remember(const lock_node *a, const lock_node *b) {
    if (grow((void **)&g_reported, &g_capreported, g_nreported + 1, sizeof *g_reported))
        g_reported[g_nreported++] = (node_pair){a, b};
}

static void remove_in(lock_node *n, const lock_node *pred) {
    for (size_t i = 0; i < n->nin; i++)
        if (n->in[i] == pred) {
            n->in[i] = n->in[--n->nin];
            return;
        }
}

static void remove_out(lock_node *n, const lock_node *succ) {
    for (size_t i = 0; i < n->nout; i++)
        if (n->out[i].to == succ) {
            n->out[i] = n->out[--n->nout];
            return;
        }
}

static void node_free(lock_node *n) {
    free(n->out);
    free(n->in);
    free(n);
}

static void node_forget(lock_node *n) {
    for (size_t i = 0; i < n->nin; i++)
        remove_out(n->in[i], n);
    for (size_t i = 0; i < n->nout; i++)
        remove_in(n->out[i].to, n);
    for (size_t i = 0; i < g_nreported;)
        if (g_reported[i].a == n || g_reported[i].b == n)
            g_reported[i] = g_reported[--g_nreported];
        else
            i++;
    lock_node **pp = &g_buckets[node_hash(n->kind, n->lock) & (g_nbuckets - 1)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    atomic_fetch_sub_explicit(&g_nnodes, 1, memory_order_relaxed);
    node_free(n);
}

/* ---- reports ---- */

typedef struct report_step {
    char from[RL__NAME_MAX + 48], to[RL__NAME_MAX + 48];
    lock_site from_where, to_where;
} report_step;

/* Everything a report needs, copied out of the graph under g_mu so that it
 * can be formatted and delivered after g_mu is released. */
typedef struct pending_report {
    struct pending_report *next;
    const void *held_lock, *acq_lock;
    char held_name[RL__NAME_MAX + 48], acq_name[RL__NAME_MAX + 48];
    lock_site held_where, acq_where;
    int path_length;
    int shown;
    report_step steps[RL__PATH_SHOWN];
} pending_report;

static const char *kind_word(rl__lockdep_kind kind) {
    switch (kind) {
    case RL__LOCKDEP_SPIN: return "RLSpinLock";
    case RL__LOCKDEP_SYNC: return "@synchronized";
    case RL__LOCKDEP_LOCK: break;
    }
    return "lock";
}

static void display_name(char *buf, size_t size, rl__lockdep_kind kind, const void *lock,
                         const char *name, bool shared) {
    const char *word = kind_word(kind);
    const char *fmt = kind == RL__LOCKDEP_SYNC ? "%s(%p)" : "%s %p";
    const char *mode = shared ? " for reading" : "";
    char plain[48];
    snprintf(plain, sizeof plain, fmt, word, lock);
    if (name && name[0])
        snprintf(buf, size, "'%s' (%s)%s", name, plain, mode);
    else
        snprintf(buf, size, "%s%s", plain, mode);
}

/* "File.swift:42" when the caller named its call site, else the return
 * address symbolized: "function+0x12 (libx.so)". */
static void symbolize(char *buf, size_t size, lock_site site) {
    Dl_info info;
    const void *where = site.addr;
    if (site.file) {
        snprintf(buf, size, "%s:%d", site.file, site.line);
        return;
    }
    if (!where) {
        snprintf(buf, size, "(unknown)");
        return;
    }
    if (dladdr(where, &info) && info.dli_fname) {
        const char *file = strrchr(info.dli_fname, '/');
        file = file ? file + 1 : info.dli_fname;
        if (info.dli_sname && info.dli_saddr)
            snprintf(buf, size, "%s+0x%lx (%s)", info.dli_sname,
                     (unsigned long)((const char *)where - (const char *)info.dli_saddr), file);
        else
            snprintf(buf, size, "%s+0x%lx", file,
                     (unsigned long)((const char *)where - (const char *)info.dli_fbase));
        return;
    }
    snprintf(buf, size, "%p", where);
}

/* A growable string for the description. */
typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void text_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->len;
        int n = t->s ? vsnprintf(t->s + t->len, room, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && (size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t nc = t->cap ? t->cap * 2 : 1024;
        if (n >= 0 && nc < t->len + (size_t)n + 1)
            nc = t->len + (size_t)n + 1;
        char *p = realloc(t->s, nc);
        if (!p)
            return;
        t->s = p;
        t->cap = nc;
        if (t->len == 0)
            t->s[0] = '\0';
    }
}

static void deliver(const pending_report *p) {
    char held_sym[RL__SYMBOL_MAX], acq_sym[RL__SYMBOL_MAX];
    char prior_held_sym[RL__SYMBOL_MAX], prior_acq_sym[RL__SYMBOL_MAX];
    symbolize(held_sym, sizeof held_sym, p->held_where);
    symbolize(acq_sym, sizeof acq_sym, p->acq_where);
    symbolize(prior_held_sym, sizeof prior_held_sym, p->steps[0].from_where);
    symbolize(prior_acq_sym, sizeof prior_acq_sym, p->steps[0].to_where);

    text t = {0};
    text_add(&t, "RLLockDebug: possible deadlock: lock-order inversion\n");
    text_add(&t, "  thread %ld holds %s, taken at %s,\n", (long)syscall(SYS_gettid), p->held_name,
             held_sym);
    text_add(&t, "  and is taking %s at %s;\n", p->acq_name, acq_sym);
    text_add(&t, "  earlier the opposite order was seen (%d step%s):\n", p->path_length,
             p->path_length == 1 ? "" : "s");
    for (int i = 0; i < p->shown; i++) {
        char fw[RL__SYMBOL_MAX], tw[RL__SYMBOL_MAX];
        symbolize(fw, sizeof fw, p->steps[i].from_where);
        symbolize(tw, sizeof tw, p->steps[i].to_where);
        text_add(&t, "    %s, taken at %s, was held while taking %s at %s\n", p->steps[i].from, fw,
                 p->steps[i].to, tw);
    }
    if (p->shown < p->path_length)
        text_add(&t, "    ... %d more step(s)\n", p->path_length - p->shown);
    text_add(&t, "  Two threads taking these locks in these orders can deadlock.\n");

    RLLockDebugReport r = {
        .heldLock = p->held_lock,
        .heldLockName = p->held_name,
        .heldLockWhere = p->held_where.addr,
        .heldLockWhereSymbol = held_sym,
        .acquiringLock = p->acq_lock,
        .acquiringLockName = p->acq_name,
        .acquiringLockWhere = p->acq_where.addr,
        .acquiringLockWhereSymbol = acq_sym,
        .priorHeldWhere = p->steps[0].from_where.addr,
        .priorHeldWhereSymbol = prior_held_sym,
        .priorAcquireWhere = p->steps[0].to_where.addr,
        .priorAcquireWhereSymbol = prior_acq_sym,
        .pathLength = p->path_length,
        .description = t.s ? t.s : "RLLockDebug: possible deadlock: lock-order inversion\n",
    };

    atomic_fetch_add_explicit(&g_report_count, 1, memory_order_relaxed);
    pthread_mutex_lock(&g_mu);
    RLLockDebugReportHandler handler = g_handler;
    void *info = g_handler_info;
#if __BLOCKS__
    report_block block = g_block ? (report_block)_Block_copy(g_block) : NULL;
#endif
    pthread_mutex_unlock(&g_mu);
#if __BLOCKS__
    if (block) {
        block(&r);
        _Block_release(block);
    } else
#endif
    if (handler)
        handler(&r, info);
    else
        fputs(r.description, stderr);
    free(t.s);
}

/* One step back along the path the search left: to the node (and state)
 * the search came from. */
static void path_back(lock_node **n, int *st) {
    lock_node *cur = *n;
    int s = *st;
    *st = cur->pstate[s];
    *n = cur->prev[s];
}

/* Fills a pending report for "holding A (entry h), taking B at where", with
 * the path B -> ... -> A that path_exists() left in the nodes, A reached in
 * state `state`. */
static pending_report *pending_make(const held_entry *h, lock_node *a, int state, lock_node *b, bool shared,
                                 lock_site where) {
    pending_report *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->held_lock = a->lock;
    p->acq_lock = b->lock;
    display_name(p->held_name, sizeof p->held_name, a->kind, a->lock, h->name[0] ? h->name : a->name,
                 h->shared);
    display_name(p->acq_name, sizeof p->acq_name, b->kind, b->lock, b->name, shared);
    p->held_where = h->where;
    p->acq_where = where;
    /* The search stored the path backwards (A.prev ... B); count, then fill
     * the first steps in forward order. Only the start has no `via`. */
    int len = 0;
    lock_node *n = a;
    int st = state;
    while (n->via[st]) {
        path_back(&n, &st);
        len++;
    }
    p->path_length = len;
    p->shown = len < RL__PATH_SHOWN ? len : RL__PATH_SHOWN;
    int idx = len - 1;
    for (n = a, st = state; n->via[st]; idx--) {
        const order_edge *e = n->via[st];
        lock_node *to = n;
        path_back(&n, &st);
        if (idx >= RL__PATH_SHOWN)
            continue;
        report_step *s = &p->steps[idx];
        display_name(s->from, sizeof s->from, n->kind, n->lock, n->name, e->from_shared);
        display_name(s->to, sizeof s->to, to->kind, to->lock, to->name, e->to_shared);
        s->from_where = e->from_where;
        s->to_where = e->to_where;
    }
    return p;
}

/* ---- hooks ---- */

/* The site of the acquisition in progress: the return address, and the
 * call site named by RLLockDebugSetCallSite, if any. */
static lock_site site_now(const void *where) {
    return (lock_site){where, t_callsite.file, t_callsite.line};
}

/* As the _kind hooks, saying whether the lock is taken shared (a read
 * lock): two shared holds do not block each other, so an order cycle whose
 * every junction between two threads is reader-reader is not reported. */
static void lockdep_will_acquire_mode(rl__lockdep_kind kind, const void *lock, const char *name,
                                   const void *where, bool shared) {
    if (!rl__lockdep_enabled())
        return;
    held_locks *s = held_stack();
    if (!s)
        return;
    int n = held_count(s);
    /* Nothing held: no order to learn. Already held: a recursive entry
     * orders nothing new (and would make A -> A). */
    if (n == 0 || held_find(s, kind, lock) >= 0)
        return;
    lock_site site = site_now(where);

    pending_report *reports = NULL, **tail = &reports;
    pthread_mutex_lock(&g_mu);
    lock_node *b = node_get(kind, lock, name);
    for (int i = 0; b && i < n; i++) {
        const held_entry *h = &s->e[i];
        if (held_find(s, h->kind, h->lock) != i)
            continue; /* a recursive re-entry of an earlier lock */
        lock_node *a = node_get(h->kind, h->lock, h->name);
        if (!a || edge_find(a, b, h->shared, shared))
            continue;
        int state = path_exists(b, shared, a, h->shared);
        if (state >= 0) {
            if (pair_reported(a, b))
                continue;
            pair_remember(a, b);
            pending_report *p = pending_make(h, a, state, b, shared, site);
            if (p) {
                *tail = p;
                tail = &p->next;
            }
            continue;
        }
        edge_add(a, b, h->shared, shared, h->where, site);
    }
    pthread_mutex_unlock(&g_mu);

    while (reports) {
        pending_report *next = reports->next;
        deliver(reports);
        free(reports);
        reports = next;
    }
}

static void lockdep_acquired_mode(rl__lockdep_kind kind, const void *lock, const char *name,
                               const void *where, bool shared) {
    if (!rl__lockdep_enabled())
        return;
    lock_site site = site_now(where);
    t_callsite = (lock_site){0};
    held_locks *s = held_stack();
    if (!s)
        return;
    if (s->depth < RL__HELD_MAX) {
        held_entry *h = &s->e[s->depth];
        h->kind = kind;
        h->shared = shared;
        h->lock = lock;
        h->where = site;
        copy_name(h->name, name);
    }
    s->depth++;
}

void rl__lockdep_will_acquire_kind(rl__lockdep_kind kind, const void *lock, const char *name,
                                   const void *where) {
    lockdep_will_acquire_mode(kind, lock, name, where, false);
}

void rl__lockdep_acquired_kind(rl__lockdep_kind kind, const void *lock, const char *name,
                               const void *where) {
    lockdep_acquired_mode(kind, lock, name, where, false);
}

void rl__lockdep_released_kind(rl__lockdep_kind kind, const void *lock) {
    held_locks *s = t_stack;
    if (!s || s->epoch != atomic_load_explicit(&g_epoch, memory_order_relaxed))
        return;
    int i = held_find(s, kind, lock);
    if (i < 0) {
        /* Taken beyond the tracked depth, or before debugging was on. */
        if (s->depth > RL__HELD_MAX)
            s->depth--;
        return;
    }
    int n = held_count(s);
    memmove(&s->e[i], &s->e[i + 1], (size_t)(n - i - 1) * sizeof s->e[0]);
    s->depth--;
}

void rl__lockdep_will_acquire(const void *lock, const char *name, const void *where) {
    rl__lockdep_will_acquire_kind(RL__LOCKDEP_LOCK, lock, name, where);
}

void rl__lockdep_acquired(const void *lock, const char *name, const void *where) {
    rl__lockdep_acquired_kind(RL__LOCKDEP_LOCK, lock, name, where);
}

void rl__lockdep_released(const void *lock) {
    rl__lockdep_released_kind(RL__LOCKDEP_LOCK, lock);
}

void rl__lockdep_will_acquire_shared(const void *lock, const char *name, const void *where) {
    lockdep_will_acquire_mode(RL__LOCKDEP_LOCK, lock, name, where, true);
}

void rl__lockdep_acquired_shared(const void *lock, const char *name, const void *where) {
    lockdep_acquired_mode(RL__LOCKDEP_LOCK, lock, name, where, true);
}

void rl__lockdep_write_acquired(const void *lock, const char *name, const void *where) {
    if (!rl__lockdep_enabled())
        return;
    pthread_mutex_lock(&g_mu);
    lock_node *n = node_get(RL__LOCKDEP_LOCK, lock, name);
    if (n)
        n->written = true;
    pthread_mutex_unlock(&g_mu);
    lockdep_acquired_mode(RL__LOCKDEP_LOCK, lock, name, where, false);
}

void RLLockDebugSetCallSite(const char *file, int line) {
    if (!rl__lockdep_enabled())
        return;
    t_callsite = (lock_site){NULL, file, file ? line : 0};
}

void rl__lockdep_forget(const void *lock) {
    /* Called by every lock's destructor, debugging on or off: an empty graph
     * costs one load. */
    if (atomic_load_explicit(&g_nnodes, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&g_mu);
    for (int k = RL__LOCKDEP_LOCK; k <= RL__LOCKDEP_SYNC; k++) {
        lock_node *n = node_find((rl__lockdep_kind)k, lock);
        if (n)
            node_forget(n);
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---- public API ---- */

void RLLockDebugSetEnabled(bool enabled) {
    pthread_mutex_lock(&g_mu);
    bool was = atomic_load_explicit(&rl__lockdep_on, memory_order_relaxed) != 0;
    if (enabled && !was)
        atomic_fetch_add_explicit(&g_epoch, 1, memory_order_relaxed);
    atomic_store_explicit(&rl__lockdep_on, enabled ? 1 : 0, memory_order_relaxed);
    pthread_mutex_unlock(&g_mu);
}

bool RLLockDebugIsEnabled(void) {
    return rl__lockdep_enabled();
}

void RLLockDebugSetReportHandler(RLLockDebugReportHandler handler, void *info) {
    pthread_mutex_lock(&g_mu);
    g_handler = handler;
    g_handler_info = info;
#if __BLOCKS__
    report_block old = g_block;
    g_block = NULL;
#endif
    pthread_mutex_unlock(&g_mu);
#if __BLOCKS__
    if (old)
        _Block_release(old);
#endif
}

#if __BLOCKS__
void RLLockDebugSetReportBlock(void (^block)(const RLLockDebugReport *report)) {
    report_block copy = block ? (report_block)_Block_copy(block) : NULL;
    pthread_mutex_lock(&g_mu);
    report_block old = g_block;
    g_block = copy;
    g_handler = NULL;
    g_handler_info = NULL;
    pthread_mutex_unlock(&g_mu);
    if (old)
        _Block_release(old);
}
#endif

long RLLockDebugGetReportCount(void) {
    return atomic_load_explicit(&g_report_count, memory_order_relaxed);
}

void RLLockDebugReset(void) {
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nbuckets; i++) {
        lock_node *n = g_buckets[i];
        while (n) {
            lock_node *next = n->hnext;
            node_free(n);
            n = next;
        }
    }
    free(g_buckets);
    g_buckets = NULL;
    g_nbuckets = 0;
    atomic_store_explicit(&g_nnodes, 0, memory_order_relaxed);
    free(g_reported);
    g_reported = NULL;
    g_nreported = g_capreported = 0;
    atomic_store_explicit(&g_report_count, 0, memory_order_relaxed);
    pthread_mutex_unlock(&g_mu);
}

bool RLLockDebugForgetLock(const void *lock) {
    if (!lock)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL lock");
    rl__lockdep_forget(lock);
    return true;
}

/* ---- load time ---- */

/* A child forked while another thread was inside the detector would inherit
 * g_mu locked; holding it across fork() (rl_fork.c, last in its order: the
 * detector runs inside lock operations) makes the copy consistent. */
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void fork_child(void) { pthread_mutex_unlock(&g_mu); }

__attribute__((constructor)) static void lockdebug_load(void) {
    const char *env = getenv("RL_LOCK_DEBUG");
    if (env && env[0] && strcmp(env, "0") != 0)
        RLLockDebugSetEnabled(true);
}

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_LOCKDEP, fork_prepare, fork_parent, fork_child);
}
