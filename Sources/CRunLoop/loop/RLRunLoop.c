/*
 * RLRunLoop.c — run loops as the program sees them: creation with their
 * kernel objects (one epoll fd, one eventfd and one timerfd per loop,
 * however many modes, made by rl_poll.c), the thread -> loop table
 * (RLRunLoopGetCurrent, RLRunLoopGetMain, a loop made for a thread from
 * another one), teardown when a thread exits (closing its perform
 * queue), the loop's part of fork(), and the public queries of its modes.
 *
 * The top of the loop core: it calls down into memberships (teardown),
 * modes, the perform queue and the loop object (rl_loop.c); the iteration
 * (RLRunLoopRun.c) and RLThread call it, and nothing below calls back up. Where the rest lives: docs/architecture.md.
 */
#include "RLRunLoopMembership.h"
#include "RLRunLoopMode.h"
#include "rl_pqueue.h"
#include "rl_health.h"
#include "rl_heap.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "rl_mainqueue.h"
#include "rl_poll.h"
#include <crunloop/RLArray.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLString.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* public: a loop's modes and next timer                               */

RLStringRef RLRunLoopCopyCurrentMode(RLRunLoopRef rl) {
    if (!rl__check_loop(rl, __func__))
        return NULL;
    rl__loop_lock(rl);
    RLStringRef s = rl->frame ? RLStringCreateWithCString(NULL, rl->frame->mode->name, kRLStringEncodingUTF8) : NULL;
    rl__loop_unlock(rl);
    return s;
}

const char *RLRunLoopGetBackendName(RLRunLoopRef rl) {
    if (!rl__check_loop(rl, __func__))
        return NULL;
    return rl__poll_backend_name(&rl->kern); /* an atomic load: no lock */
}

RLArrayRef RLRunLoopCopyAllModes(RLRunLoopRef rl) {
    if (!rl__check_loop(rl, __func__))
        return NULL;
    RLArrayRef out = NULL;
    rl__loop_lock(rl);
    const char **names = malloc((rl->nmodes + 1) * sizeof *names);
    if (names) {
        for (size_t i = 0; i < rl->nmodes; i++)
            names[i] = rl->modes[i]->name;
        out = RLArrayCreate(NULL, names, (RLIndex)rl->nmodes);
    }
    rl__loop_unlock(rl);
    free(names);
    if (!names)
        rl__fail(kRLErrorNoMemory, __func__, "out of memory");
    return out;
}

RLAbsoluteTime RLRunLoopGetNextTimerFireDate(RLRunLoopRef rl, RLRunLoopMode mode) {
    const char *fn = __func__;
    if (!rl__check_loop(rl, fn) || !rl__mode_name_ok(mode, fn))
        return 0;
    rl__loop_lock(rl);
    rl__mode *m = rl__mode_find(rl, mode);
    RLAbsoluteTime date = 0;
    if (!m || !rl__tset_earliest_fire(&m->timers, &date))
        date = 0;
    rl__loop_unlock(rl);
    return date;
}

/* ------------------------------------------------------------------ */
/* creation, per-thread storage, teardown                              */

static RLRunLoopRef loop_create(pthread_t thread) {
    const char *fn = "RLRunLoopGetCurrent";
    rl__health_init();
    RLRunLoopRef rl = rl__object_alloc(&rl__runloop_class, sizeof *rl, fn);
    if (!rl)
        return NULL;
    rl->thread = thread;
    rl->fork_gen = rl__fork_gen();
    rl->pq.fork_gen = rl->fork_gen;
    rl->armed_at = INFINITY;
    rl->mainq_fd = -1;
    TAILQ_INIT(&rl->homed_observers);
    atomic_init(&rl->ignore_wakeups, 1); /* not running */
    atomic_init(&rl->waker_cpu, -1);
    atomic_init(&rl->cpu, -1);
    rl->kern.epfd = rl->kern.evfd = rl->kern.tfd = -1;
    rl->kern.owner = rl->thread;
    rl->kern.nap_word = &rl->wake_pending;
    if (!rl__poll_open(&rl->kern, fn)) {
        RLRelease(rl); /* the error stays as rl__poll_open set it */
        return NULL;
    }
    /* The default mode exists from the start and is common, as in CF. Its
     * name is the constant, not a copy (rl_loop.c frees the others). */
    rl__loop_lock(rl);
    rl->common = calloc(1, sizeof *rl->common);
    rl__mode *m = NULL;
    if (rl->common) {
        rl->common[0].name = (char *)kRLRunLoopDefaultMode;
        rl->capcommon = rl->ncommon = 1;
        m = rl__mode_get(rl, kRLRunLoopDefaultMode, fn);
    }
    rl__loop_unlock(rl);
    if (!m) {
        RLRelease(rl);
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    return rl;
}

static pthread_t main_thread;
static RLRunLoopRef the_main_loop;
static pthread_mutex_t main_mutex = PTHREAD_MUTEX_INITIALIZER;
static bool main_exited; /* the main thread tore its loop down (RLThreadExit); main_mutex */
static pthread_key_t loop_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

__attribute__((constructor)) static void record_main_thread(void) { main_thread = pthread_self(); }

static void loop_teardown(RLRunLoopRef rl);

static void threadtab_forget_self(RLRunLoopRef mine);

static void key_destructor(void *v) {
    RLRunLoopRef rl = v;
    if (rl__tls == rl)
        rl__bias_disown(rl);
    rl__tls = NULL;
    loop_teardown(rl);
    threadtab_forget_self(rl);
    rl__object_unhold(rl);
}

static bool key_made; /* loop_key exists (set once, under key_once) */

static void make_key(void) { key_made = pthread_key_create(&loop_key, key_destructor) == 0; }

/* ==== BEGIN run loops by thread (lazy loops for RLThread / RLPerform) ====
 * CF's _CFRunLoopGet0(pthread_t): a table from thread to run loop, so that
 * another thread can obtain (creating it if needed) the loop of a thread
 * that has not asked for it yet, and that thread later gets the same loop
 * from RLRunLoopGetCurrent. Threads therefore need no loop up front. The
 * table holds one reference per entry; a thread's entry goes when the
 * thread tears its loop down (rl__runloop_teardown_current_thread or the
 * pthread-key destructor). The main thread's loop is the_main_loop, not in
 * the table. Lock order: table mutex, then a loop lock (loop_create). */
typedef struct thread_entry {
    struct thread_entry *next;
    pthread_t thread;
    RLRunLoopRef rl;
} thread_entry;

enum { RL_THREADTAB_BUCKETS = 256 };
static pthread_mutex_t threadtab_mutex = PTHREAD_MUTEX_INITIALIZER;
static thread_entry *threadtab[RL_THREADTAB_BUCKETS];
static _Atomic size_t threadtab_count; /* lets exiting threads skip the mutex */

static thread_entry **threadtab_link_locked(pthread_t thread) {
    uintptr_t h = (uintptr_t)thread;
    h ^= h >> 12;
    h ^= h >> 21;
    thread_entry **link = &threadtab[h % RL_THREADTAB_BUCKETS];
    while (*link && !pthread_equal((*link)->thread, thread))
        link = &(*link)->next;
    return link;
}

/* The table's loop for `thread` (borrowed), created on first use. */
static RLRunLoopRef threadtab_get(pthread_t thread) {
    pthread_mutex_lock(&threadtab_mutex);
    thread_entry **link = threadtab_link_locked(thread);
    RLRunLoopRef rl = *link ? (*link)->rl : NULL;
    if (!rl) {
        thread_entry *e = malloc(sizeof *e);
        rl = e ? loop_create(thread) : NULL;
        if (rl) {
            rl__object_hold(rl); /* the table's reference */
            e->next = NULL;
            e->thread = thread;
            e->rl = rl;
            *link = e;
            atomic_fetch_add(&threadtab_count, 1);
        } else {
            free(e);
            if (!e)
                rl__fail(kRLErrorNoMemory, "RLRunLoopGetCurrent", "out of memory");
        }
    }
    pthread_mutex_unlock(&threadtab_mutex);
    return rl;
}

/* On a thread that is done with its loop `mine` (torn down already, or
 * NULL): removes the thread's entry and tears down the entry's loop if it
 * is another one (made by another thread after an earlier teardown). */
static void threadtab_forget_self(RLRunLoopRef mine) {
    if (atomic_load(&threadtab_count) == 0)
        return;
    pthread_mutex_lock(&threadtab_mutex);
    thread_entry **link = threadtab_link_locked(pthread_self());
    thread_entry *e = *link;
    if (e) {
        *link = e->next;
        atomic_fetch_sub(&threadtab_count, 1);
    }
    pthread_mutex_unlock(&threadtab_mutex);
    if (!e)
        return;
    if (e->rl != mine)
        loop_teardown(e->rl);
    rl__object_unhold(e->rl);
    free(e);
}

RLRunLoopRef rl__runloop_get_for_thread(pthread_t thread) {
    if (pthread_equal(thread, main_thread))
        return RLRunLoopGetMain();
    return threadtab_get(thread);
}

/* ==== END run loops by thread ==== */

/* ---- fork() (rl_fork.c): the main loop's mutex, the thread table and
 * every loop's lock are held across it. The child never runs an inherited
 * loop (rl__of_this_process), but a timer or observer made in the parent
 * may still have one as its home, and locks it to be refused: so no loop
 * lock may be left held by a thread that does not exist in the child.
 * Taking them all here breaks the one-loop-lock-at-a-time rule safely: no
 * other thread holds two, and this one waits for nothing else while it
 * holds them (raw futex calls, so the lock-order detector sees nothing).
 * Each is taken the whole way, its owner bias revoked (rl__bias_lock_full:
 * a loop's thread inside by the bias is waited for), so the child inherits
 * no bias, and registers for membarrier again (rl__bias_fork_child). */
static thread_entry *inherited_loop;   /* in a fork() child: the parent's loops, kept, never used */
static RLRunLoopRef inherited_mains; /* the same for its main loops (linked by inherited_next) */

/* Every loop the thread table or the main-loop slot knows, each once:
 * lock (true) or unlock (false) it. */
static void fork_each_loop(bool lock) {
    RLRunLoopRef main = the_main_loop;
    bool main_seen = false;
    for (size_t b = 0; b < RL_THREADTAB_BUCKETS; b++)
        for (thread_entry *e = threadtab[b]; e; e = e->next) {
            main_seen = main_seen || e->rl == main;
            if (lock)
                rl__bias_lock_full(e->rl);
            else
                rl__mutex_unlock(&e->rl->lock);
        }
    if (main && !main_seen) {
        if (lock)
            rl__bias_lock_full(main);
        else
            rl__mutex_unlock(&main->lock);
    }
}

static void fork_prepare(void) {
    pthread_mutex_lock(&main_mutex);
    pthread_mutex_lock(&threadtab_mutex);
    fork_each_loop(true);
}

static void fork_parent(void) {
    fork_each_loop(false);
    pthread_mutex_unlock(&threadtab_mutex);
    pthread_mutex_unlock(&main_mutex);
}

/* Keeps a parent's loop referenced (and reachable) in the child: its
 * finalizer must not run here, where its requests are the parent's. */
static void inherited_keep(thread_entry *e) {
    e->next = inherited_loop;
    inherited_loop = e;
}

/* Every loop known so far is the parent's. The forking thread is the
 * child's only thread, and its main thread: GetCurrent and GetMain make it
 * a new loop with its own kernel objects on first use. */
static void fork_child(void) {
    fork_parent();
    rl__bias_fork_child();
    for (size_t b = 0; b < RL_THREADTAB_BUCKETS; b++) {
        while (threadtab[b]) {
            thread_entry *e = threadtab[b];
            threadtab[b] = e->next;
            inherited_keep(e);
        }
    }
    atomic_store(&threadtab_count, 0);
    if (the_main_loop) { /* linked through the loop itself: no allocation in a child handler */
        the_main_loop->inherited_next = inherited_mains;
        inherited_mains = the_main_loop;
        the_main_loop = NULL;
    }
    main_thread = pthread_self();
    /* The thread's reference (rl__tls) stays with the loop, kept above; the
     * key's destructor would tear the parent's loop down when the child's
     * thread ends. */
    if (rl__tls) {
        rl__tls = NULL;
        if (key_made)
            pthread_setspecific(loop_key, NULL);
    }
}

RLRunLoopRef RLRunLoopGetMain(void) {
    pthread_mutex_lock(&main_mutex);
    if (!the_main_loop) {
        the_main_loop = loop_create(main_thread);
        if (the_main_loop) {
            rl__object_hold(the_main_loop); /* kept for the life of the process */
            rl__mainq_attach(the_main_loop); /* the main dispatch queue, as in CF */
        }
        /* Made after the main thread exited: as if torn down with it, so
         * that it refuses requests no thread would run. */
        if (the_main_loop && main_exited)
            loop_teardown(the_main_loop);
    }
    RLRunLoopRef rl = the_main_loop;
    pthread_mutex_unlock(&main_mutex);
    return rl;
}

RLRunLoopRef RLRunLoopGetCurrent(void) {
    if (RL__LIKELY(rl__tls != NULL))
        return rl__tls;
    pthread_once(&key_once, make_key);
    RLRunLoopRef rl;
    if (pthread_equal(pthread_self(), main_thread)) {
        rl = RLRunLoopGetMain();
        if (rl) {
            RLRetain(rl); /* the thread's reference; the global one stays */
            rl__object_hold(rl);
        }
    } else {
        /* The table keeps its reference; this one is the thread's. */
        rl = threadtab_get(pthread_self());
        if (rl) {
            RLRetain(rl);
            rl__object_hold(rl);
        }
    }
    if (!rl)
        return NULL;
    rl__tls = rl;
    pthread_setspecific(loop_key, rl);
    return rl;
}

/* CF's way: every source is removed from every mode (cancel runs here, on
 * the exiting thread), then observers and timers; queued requests are
 * dropped (blocks released). */
static void loop_teardown(RLRunLoopRef rl) {
    rl__defer d;
    rl__defer_init(&d);
    rl__loop_lock(rl);
    atomic_store(&rl->dead, true);
    rl->timer_mode = NULL; /* the timer hot paths take the generic way, which sees `dead` */
    rl__memberships_clear_locked(rl, &d);
    rl__loop_unlock(rl);
    rl__defer_run(&d);

    rl__perform_close(&rl->pq);
}

void rl__runloop_teardown_current_thread(void) {
    RLRunLoopRef rl = rl__tls;
    if (rl) {
        rl__bias_disown(rl);
        rl__tls = NULL;
        pthread_once(&key_once, make_key);
        pthread_setspecific(loop_key, NULL);
        loop_teardown(rl);
    }
    /* Also a loop another thread made for this one (never run here): the
     * main thread's is the main loop. */
    if (pthread_equal(pthread_self(), main_thread)) {
        pthread_mutex_lock(&main_mutex);
        RLRunLoopRef main_loop = the_main_loop;
        main_exited = true;
        pthread_mutex_unlock(&main_mutex);
        if (main_loop && main_loop != rl)
            loop_teardown(main_loop);
    }
    threadtab_forget_self(rl);
    if (rl)
        rl__object_unhold(rl);
}

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_RUNLOOP, fork_prepare, fork_parent, fork_child);
}
