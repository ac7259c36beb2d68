/* RLSignalSource.c — signals as run-loop callouts. Each source owns a
 * signalfd for its signal, watched (through an fd source) in every loop and
 * mode its run-loop source is in. The first watcher to wake reads the
 * queued signals and adds their count to every watcher of that signal,
 * signalling their version-0 sources and waking their loops: a signal is
 * dequeued once by the kernel but seen by all watchers.
 *
 * Process-wide state (the watchers of each signal, the saved disposition
 * and mask) sits behind one mutex: it is touched when a source is created,
 * invalidated or reads a signal, never on a loop's path otherwise. */
#include "RLBase.h"
#include "rl_health.h"
#include "rl_fdobj.h"
#include "rl_fork.h"
#include "rl_lockclass.h"
#include "rl_loop.h"
#include "rl_poll.h"
#include "RLLockDebugInternal.h"

#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoopSource.h>
#include <crunloop/RLSignalSource.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLRunLoopHealth.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct RLSignalSource {
    rl__object base;
    int signum;
    int sfd; /* its signalfd (made through the kernel seam, rl_poll.h); closed with `life` */
    RLSignalSourceCallBack callout;
    RLSignalSourceContext ctx;
    RLFileDescriptorRef fdobj; /* watches sfd */
    RLRunLoopSourceRef fdsrc;  /* fdobj's source: follows src into loops and modes */
    /* Below: guarded by sig_lock. */
    RLRunLoopSourceRef src; /* the user's source (version 0), made on demand */
    /* Valid until invalidated; then the signalfd is closed and the
     * context's info released, once, after the callouts running on loops'
     * threads that were handed the info (rl_fdobj.h). */
    rl__fdobj life;
    RLIndex pending;            /* deliveries not yet handed to the callout */
    RLRunLoopRef *loops;        /* the loops src is scheduled in, once per mode (retained) */
    size_t nloops, caploops;
    struct RLSignalSource *next; /* the next watcher of the same signal */
};

/* The release of s's info (rl__fdobj_releaser): its context's. */
static rl__fdobj_release_fn sig_releaser(const rl__fdobj *o) {
    const struct RLSignalSource *s = (const void *)((const char *)o - offsetof(struct RLSignalSource, life));
    return s->ctx.release;
}

/* Per signal: its watchers and what to restore when the last one goes. */
typedef struct sig_slot {
    struct RLSignalSource *watchers;
    struct sigaction old_action;
    bool was_blocked; /* in the thread that created the first watcher */
} sig_slot;

static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static sig_slot sig_slots[_NSIG];

static void sig_lock_take(void) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_SIGNAL, __builtin_return_address(0));
    int e = pthread_mutex_lock(&sig_lock);
    if (e)
        abort(); /* only EINVAL/EDEADLK, both impossible for this static mutex */
}

static void sig_lock_drop(void) {
    (void)pthread_mutex_unlock(&sig_lock);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_SIGNAL);
}

/* Held across fork() so that the child's copy is never locked by a thread
 * that does not exist there (rl_fork.c, whose slot order fixes the order of
 * the global locks itself: not reported to the lock-order detector). */
static void fork_prepare(void) {
    if (pthread_mutex_lock(&sig_lock))
        abort();
}
static void fork_parent(void) { (void)pthread_mutex_unlock(&sig_lock); }
static void fork_child(void) { (void)pthread_mutex_unlock(&sig_lock); }

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_SIGNAL, fork_prepare, fork_parent, fork_child);
}

/* Runs instead of the default action in a thread that did not block the
 * signal: the process neither dies nor discards the signal forever. */
static void sig_nop(int signum) { (void)signum; }

static void sig_finalize(void *obj) {
    struct RLSignalSource *s = obj;
    /* Valid sources are held by their fd object and run-loop source, so a
     * source only gets here invalidated (or from a failed creation). */
    if (s->fdsrc)
        RLRelease(s->fdsrc);
    if (s->fdobj)
        RLRelease(s->fdobj);
    if (s->src)
        RLRelease(s->src);
    for (size_t i = 0; i < s->nloops; i++)
        RLRelease(s->loops[i]);
    free(s->loops);
    if (s->life.fd >= 0) /* not invalidated: a creation that failed part-way */
        close(s->life.fd);
    rl__fdobj_finalize(&s->life, sig_releaser);
}

static char *sig_describe(const void *obj) {
    const struct RLSignalSource *s = obj;
    sig_lock_take();
    bool valid = rl__fdobj_valid(&s->life);
    RLIndex pending = s->pending;
    sig_lock_drop();
    char *out = NULL;
    if (asprintf(&out, "<RLSignalSource %p signal %d (%s) pending %ld%s>", obj, s->signum, strsignal(s->signum),
                 (long)pending, valid ? "" : " invalid") < 0)
        out = NULL;
    return out;
}

static const rl__class signal_source_class = {"RLSignalSource", sig_finalize, NULL, sig_describe};

static bool sig_ok(RLSignalSourceRef s, const char *fn) { return rl__object_check(s, &signal_source_class, fn); }

/* Adds `n` deliveries to every watcher of signum and collects them, retained,
 * with their loops, for waking after the lock is dropped (lock held). */
typedef struct sig_waker {
    RLRunLoopSourceRef src;
    RLRunLoopRef *loops;
    size_t nloops;
} sig_waker;

static size_t sig_fan_out_locked(struct RLSignalSource *reader, RLIndex n, sig_waker **out) {
    size_t count = 0;
    for (struct RLSignalSource *w = sig_slots[reader->signum].watchers; w; w = w->next)
        count++;
    sig_waker *wk = calloc(count ? count : 1, sizeof *wk);
    size_t k = 0;
    for (struct RLSignalSource *w = sig_slots[reader->signum].watchers; w; w = w->next) {
        w->pending += n;
        if (w == reader)
            continue; /* its callout runs right away, in the reading callout */
        if (!wk || !w->src)
            continue; /* not in any loop yet: the count waits in pending */
        wk[k].src = (RLRunLoopSourceRef)RLRetain(w->src);
        wk[k].loops = w->nloops ? malloc(w->nloops * sizeof *wk[k].loops) : NULL;
        for (size_t i = 0; wk[k].loops && i < w->nloops; i++)
            wk[k].loops[wk[k].nloops++] = (RLRunLoopRef)RLRetain(w->loops[i]);
        k++;
    }
    *out = wk;
    return k;
}

static void sig_wake(sig_waker *wk, size_t k) {
    for (size_t i = 0; i < k; i++) {
        (void)RLRunLoopSourceSignal(wk[i].src);
        for (size_t j = 0; j < wk[i].nloops; j++) {
            (void)RLRunLoopWakeUp(wk[i].loops[j]);
            RLRelease(wk[i].loops[j]);
        }
        free(wk[i].loops);
        RLRelease(wk[i].src);
    }
    free(wk);
}

/* Dequeues every signal s's signalfd shows the calling thread (its own
 * and the process's) and returns how many (sig_lock held). */
static RLIndex sig_drain_locked(struct RLSignalSource *s) { return (RLIndex)rl__poll_signalfd_drain(s->sfd); }

/* The slow-callout report names a signal source's callouts as its own. */
static const void *sig_callout_of(const void *owner) {
    return (const void *)((const struct RLSignalSource *)owner)->callout;
}
static const rl__callout_owner sig_how = {kRLCalloutSignal, sig_callout_of, NULL};

/* A callout that began while s was valid (busy counted, s retained) is
 * over (lock not held). */
static void sig_callout_done(struct RLSignalSource *s) {
    rl__fdobj_end end;
    sig_lock_take();
    rl__fdobj_leave(&s->life, &end, sig_releaser);
    sig_lock_drop();
    rl__fdobj_finish(&end); /* what an invalidation meanwhile left to the last callout */
    RLRelease(s); /* taken with rl__fdobj_enter */
}

/* The signalfd is readable: dequeue everything and hand the count out. The
 * reader's own callout runs here, so that the run that woke for the signal
 * is the one that delivers it (a run returning after one handled source
 * has delivered it); the other watchers are signalled. */
static void sig_fd_callout(RLFileDescriptorRef f, RLOptionFlags types, void *info) {
    (void)types;
    struct RLSignalSource *s = info;
    RLIndex n = 0, mine = 0;
    sig_waker *wk = NULL;
    size_t k = 0;
    sig_lock_take();
    if (rl__fdobj_valid(&s->life)) {
        n = sig_drain_locked(s);
        if (n)
            k = sig_fan_out_locked(s, n, &wk);
        mine = s->pending; /* with what others handed over meanwhile */
        s->pending = 0;
        if (mine > 0 && rl__fdobj_enter(&s->life))
            RLRetain(s); /* the callout may invalidate and release it */
    }
    bool valid = rl__fdobj_valid(&s->life);
    sig_lock_drop();
    if (wk)
        sig_wake(wk, k);
    if (valid)
        (void)RLFileDescriptorEnableCallBacks(f, kRLFileDescriptorReadCallBack);
    if (mine > 0) {
        s->callout(s, s->signum, mine, s->ctx.info);
        sig_callout_done(s);
    }
}

/* The user's source was signalled: run the callout with what is pending. */
static void sig_perform(void *info) {
    struct RLSignalSource *s = info;
    sig_lock_take();
    RLIndex n = rl__fdobj_valid(&s->life) ? s->pending : 0;
    s->pending = 0;
    if (n > 0 && rl__fdobj_enter(&s->life))
        RLRetain(s); /* the callout may invalidate and release it */
    sig_lock_drop();
    if (n > 0) {
        s->callout(s, s->signum, n, s->ctx.info);
        sig_callout_done(s);
    }
}

/* On the loop's thread, once its source has joined the loop from another
 * thread: a signal sent to the loop's thread alone (pthread_kill, tgkill)
 * and pending there before the signalfd was watched is visible to that
 * thread only (the check epoll makes when the fd is added runs on the
 * adding thread), and a second one merges into it without waking anyone;
 * so the loop's thread reads once for itself. What it finds is handed to
 * the watchers' sources, as any delivery, so it reaches the callout as a
 * handled source of the run. */
static void sig_look_on_loop_thread(void *info) {
    struct RLSignalSource *s = info;
    RLIndex n = 0;
    sig_waker *wk = NULL;
    size_t k = 0;
    RLRunLoopSourceRef mine = NULL;
    sig_lock_take();
    if (rl__fdobj_valid(&s->life)) {
        n = sig_drain_locked(s);
        if (n)
            k = sig_fan_out_locked(s, n, &wk);
        if (s->pending > 0 && s->src)
            mine = (RLRunLoopSourceRef)RLRetain(s->src);
    }
    sig_lock_drop();
    if (wk)
        sig_wake(wk, k);
    if (mine) {
        (void)RLRunLoopSourceSignal(mine);
        RLRelease(mine);
    }
}
static void sig_look_done(void *info) { RLRelease(info); }

/* The user's source joins a mode of rl: the signalfd's source follows. */
static void sig_schedule(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    struct RLSignalSource *s = info;
    sig_lock_take();
    bool ok = rl__fdobj_valid(&s->life);
    if (ok && s->nloops == s->caploops) {
        size_t cap = s->caploops ? s->caploops * 2 : 2;
        RLRunLoopRef *a = realloc(s->loops, cap * sizeof *a);
        if (a) {
            s->loops = a;
            s->caploops = cap;
        }
    }
    if (ok && s->nloops < s->caploops)
        s->loops[s->nloops++] = (RLRunLoopRef)RLRetain(rl);
    bool pending = s->pending > 0;
    sig_lock_drop();
    if (!ok)
        return;
    (void)RLRunLoopAddSource(rl, s->fdsrc, mode);
    if (rl__tls != rl &&
        RLRunLoopPerformFunctionWithRelease(rl, mode, sig_look_on_loop_thread, (void *)RLRetain(s), sig_look_done))
        (void)RLRunLoopWakeUp(rl);
    if (pending) {
        /* Counted before the source was in any loop. */
        (void)RLRunLoopSourceSignal(s->src);
        (void)RLRunLoopWakeUp(rl);
    }
}

static void sig_cancel(void *info, RLRunLoopRef rl, RLRunLoopMode mode) {
    struct RLSignalSource *s = info;
    RLRunLoopRef gone = NULL;
    sig_lock_take();
    for (size_t i = 0; i < s->nloops; i++) {
        if (s->loops[i] == rl) {
            gone = s->loops[i];
            s->loops[i] = s->loops[--s->nloops];
            break;
        }
    }
    sig_lock_drop();
    (void)RLRunLoopRemoveSource(rl, s->fdsrc, mode);
    if (gone)
        RLRelease(gone);
}

static const void *sig_retain_cb(const void *info) { return RLRetain(info); }
static void sig_release_cb(const void *info) { RLRelease(info); }

static bool signal_watchable(int signum, const char *fn) {
    if (signum <= 0 || signum >= _NSIG)
        return rl__fail(kRLErrorInvalidArgument, fn, "%d is not a signal number", signum);
    switch (signum) {
    case SIGKILL:
    case SIGSTOP:
        return rl__fail(kRLErrorInvalidArgument, fn, "signal %d (%s) cannot be caught", signum, strsignal(signum));
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
        return rl__fail(kRLErrorInvalidArgument, fn,
                        "signal %d (%s) is raised by the faulting thread and cannot wait for a run loop", signum,
                        strsignal(signum));
    default:
        break;
    }
    if (signum > 31 && signum < SIGRTMIN)
        return rl__fail(kRLErrorInvalidArgument, fn, "signal %d is reserved by the C library", signum);
    return true;
}

/* Makes s a watcher of its signal: the first one saves the disposition and
 * installs the no-op handler. The caller blocked the signal already. */
static bool sig_register(struct RLSignalSource *s, bool was_blocked, const char *fn) {
    sig_slot *slot = &sig_slots[s->signum];
    sig_lock_take();
    if (!slot->watchers) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = sig_nop;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(s->signum, &sa, &slot->old_action) < 0) {
            int e = errno;
            sig_lock_drop();
            return rl__fail_errno(e, fn, "sigaction(%d)", s->signum);
        }
        slot->was_blocked = was_blocked;
    }
    s->next = slot->watchers;
    slot->watchers = s;
    sig_lock_drop();
    return true;
}

RLSignalSourceRef RLSignalSourceCreate(RLAllocatorRef allocator, int signum, RLSignalSourceCallBack callout,
                                       const RLSignalSourceContext *context) {
    (void)allocator;
    const char *fn = __func__;
    if (!signal_watchable(signum, fn))
        return NULL;
    if (!callout)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL callout"), NULL;
    if (context && context->version != 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "context version %ld is not supported (use 0)",
                        (long)context->version),
               NULL;
    int sfd = rl__poll_signalfd_open(signum);
    if (sfd < 0) {
        rl__fail_errno(errno, fn, "signalfd(%d)", signum);
        return NULL;
    }
    struct RLSignalSource *s = rl__object_alloc(&signal_source_class, sizeof *s, fn);
    if (!s) {
        close(sfd);
        return NULL;
    }
    s->signum = signum;
    s->callout = callout;
    s->sfd = sfd;
    rl__fdobj_init(&s->life, sfd); /* valid; not seen by anyone until registered below */
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, signum);
    int e = pthread_sigmask(SIG_BLOCK, &one, &old);
    if (e) {
        rl__fail_errno(e, fn, "pthread_sigmask");
        RLRelease(s);
        return NULL;
    }
    bool was_blocked = sigismember(&old, signum) == 1;
    RLFileDescriptorContext fctx = {0, s, sig_retain_cb, sig_release_cb, NULL};
    s->fdobj = RLFileDescriptorCreate(NULL, s->sfd, false, sig_fd_callout, &fctx);
    if (s->fdobj)
        rl__fd_set_owner(s->fdobj, s, &sig_how);
    if (s->fdobj)
        s->fdsrc = RLFileDescriptorCreateRunLoopSource(NULL, s->fdobj, 0);
    if (!s->fdsrc || !RLFileDescriptorEnableCallBacks(s->fdobj, kRLFileDescriptorReadCallBack) ||
        !sig_register(s, was_blocked, fn)) {
        if (s->fdobj)
            (void)RLFileDescriptorInvalidate(s->fdobj);
        if (!was_blocked)
            (void)pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        RLRelease(s);
        return NULL;
    }
    if (context) {
        s->ctx = *context;
        if (s->ctx.retain)
            s->ctx.info = (void *)s->ctx.retain(s->ctx.info);
        rl__fdobj_set_context(&s->life, s->ctx.info, s->ctx.release);
    }
    return s;
}

RLRunLoopSourceRef RLSignalSourceCreateRunLoopSource(RLAllocatorRef allocator, RLSignalSourceRef s, RLIndex order) {
    const char *fn = __func__;
    if (!sig_ok(s, fn))
        return NULL;
    sig_lock_take();
    bool valid = rl__fdobj_valid(&s->life);
    RLRunLoopSourceRef have = valid && s->src ? (RLRunLoopSourceRef)RLRetain(s->src) : NULL;
    sig_lock_drop();
    if (!valid)
        return rl__fail(kRLErrorInvalidObject, fn, "the signal source has been invalidated"), NULL;
    if (have)
        return have;
    RLRunLoopSourceContext ctx = {0};
    ctx.info = s;
    ctx.retain = sig_retain_cb;
    ctx.release = sig_release_cb;
    ctx.schedule = sig_schedule;
    ctx.cancel = sig_cancel;
    ctx.perform = sig_perform;
    RLRunLoopSourceRef src = RLRunLoopSourceCreate(allocator, order, &ctx);
    if (!src)
        return NULL;
    sig_lock_take();
    RLRunLoopSourceRef other = s->src;
    if (!other && rl__fdobj_valid(&s->life))
        s->src = (RLRunLoopSourceRef)RLRetain(src);
    valid = rl__fdobj_valid(&s->life);
    if (other)
        RLRetain(other);
    sig_lock_drop();
    if (other || !valid) {
        /* Another thread made one meanwhile, or invalidated s. */
        (void)RLRunLoopSourceInvalidate(src);
        RLRelease(src);
        if (!valid && !other)
            return rl__fail(kRLErrorInvalidObject, fn, "the signal source has been invalidated"), NULL;
        return other;
    }
    return src;
}

bool RLRunLoopAddSignalSource(RLRunLoopRef rl, RLSignalSourceRef s, RLRunLoopMode mode) {
    RLRunLoopSourceRef src = RLSignalSourceCreateRunLoopSource(NULL, s, 0);
    if (!src)
        return false;
    bool ok = RLRunLoopAddSource(rl, src, mode);
    RLRelease(src);
    return ok;
}

int RLSignalSourceGetSignal(RLSignalSourceRef s) { return sig_ok(s, __func__) ? s->signum : 0; }

bool RLSignalSourceGetContext(RLSignalSourceRef s, RLSignalSourceContext *context) {
    if (!sig_ok(s, __func__))
        return false;
    if (!context)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL context");
    *context = s->ctx;
    return true;
}

/* Takes every pending delivery of signum (the process's and the calling
 * thread's) without running anything for it. */
static void sig_drop_pending(int signum) {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signum);
    const struct timespec now = {0, 0};
    int saved = errno;
    for (;;) {
        int r = sigtimedwait(&one, NULL, &now);
        if (r != signum && !(r < 0 && errno == EINTR))
            break; /* EAGAIN: none left */
    }
    errno = saved;
}

bool RLSignalSourceInvalidate(RLSignalSourceRef s) {
    const char *fn = __func__;
    if (!sig_ok(s, fn))
        return false;
    RLRetain(s); /* the fd object and the source release theirs below */
    sig_slot *slot = &sig_slots[s->signum];
    bool ok = true;
    sig_lock_take();
    rl__fdobj_end end;
    bool was = rl__fdobj_invalidate(&s->life, RL_FDOBJ_CLOSE, &end, sig_releaser);
    if (was) {
        s->pending = 0;
        for (struct RLSignalSource **p = &slot->watchers; *p; p = &(*p)->next) {
            if (*p == s) {
                *p = s->next;
                break;
            }
        }
        s->next = NULL;
        /* The last watcher restores under the lock, so that a new first
         * watcher saves the real previous disposition, not our handler. */
        if (!slot->watchers) {
            /* Deliveries still pending were sent while the signal was
             * watched and belong to the watchers: with none left they are
             * dropped here, while the signal is still blocked and caught,
             * instead of meeting the restored disposition when it is
             * unblocked below (SIGTERM's default would end the process).
             * Left alone where it stays blocked, as it was before. */
            if (!slot->was_blocked)
                sig_drop_pending(s->signum);
            if (sigaction(s->signum, &slot->old_action, NULL) < 0)
                ok = rl__fail_errno(errno, fn, "sigaction(%d) could not restore the disposition", s->signum);
            if (!slot->was_blocked) {
                sigset_t one;
                sigemptyset(&one);
                sigaddset(&one, s->signum);
                int e = pthread_sigmask(SIG_UNBLOCK, &one, NULL);
                if (e)
                    ok = rl__fail_errno(e, fn, "pthread_sigmask");
            }
        }
    }
    RLRunLoopSourceRef src = was ? s->src : NULL;
    if (was)
        s->src = NULL; /* src's context holds s: drop our side of the cycle */
    sig_lock_drop();
    if (was) {
        if (src) {
            (void)RLRunLoopSourceInvalidate(src); /* cancels: the fd source leaves those modes */
            RLRelease(src);
        }
        (void)RLFileDescriptorInvalidate(s->fdobj); /* out of every loop before its fd closes */
    }
    rl__fdobj_finish(&end); /* the signalfd closed, the info released (or left to the last callout) */
    RLRelease(s);
    return ok;
}

bool RLSignalSourceIsValid(RLSignalSourceRef s) {
    if (!sig_ok(s, __func__))
        return false;
    sig_lock_take();
    bool v = rl__fdobj_valid(&s->life);
    sig_lock_drop();
    return v;
}
