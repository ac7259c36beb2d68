/*
 * rl_fdtab.c — a loop's fd registrations: the table from fd number to the
 * fd sources on it (rl__fdreg, runloop_internal.h; it spans the loop's
 * lowest to highest watched fd, fd_reg), what the kernel backend watches
 * for (rl_poll.h: epoll's events and flags, which the io_uring backend
 * keeps too)
 * each (the union of what those sources want, armed under a tag: one-shot,
 * or persistent while the callouts keep it enabled),
 * the checks that tell a closed or reused number from the file a source
 * was made for, and turning what the backend reports into the callouts to
 * make.
 * Under the loop lock (and a source's item lock where said). Low in the
 * run-loop files: it calls the locking protocol (rl_lock.c) only.
 */
#include "rl_fdtab.h"
#include "rl_span.h"
#include "rl_lock.h"
#include "rl_loop.h"
#include "rl_poll.h"
#include <crunloop/RLFileDescriptor.h>
#include <crunloop/RLRunLoop.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

/* A persistent registration is checked against the kernel (re-armed as it
 * is) after this many deliveries: a number closed behind the loop's back
 * while its callouts keep enabling it is found out within as many. */
enum { RL_FD_CHECK_RUNS = 64 };
_Static_assert(RL_FD_CHECK_RUNS < 256, "runs is a byte");

/* What the loop watches a fd for, two bits (rl__fdreg's want1, armed,
 * fired; a block's wishes): the only epoll events it asks for. */
enum {
    /* EPOLLIN and EPOLLRDHUP: the peer's hang-up asked for too, so that a
     * report says whether the stream may have ended (rl__fd_fire.quiet). */
    RL_FDW_READ = 1,
    RL_FDW_WRITE = 2, /* EPOLLOUT */
};

/* The epoll events for what w says. */
static inline uint32_t fdw_events(uint32_t w) {
    return (w & RL_FDW_READ ? EPOLLIN | EPOLLRDHUP : 0) | (w & RL_FDW_WRITE ? EPOLLOUT : 0);
}

/* Most sources on a fd a block holds: as many as before the counts moved
 * into the block (16 bits each in the entry). */
enum { RL_FD_MAX_SRCS = UINT16_MAX };

/* The sources on r and their wishes (rl__fdreg): in the entry while there
 * is one at most (`many` clear), else in its block (sources, then
 * wishes). */
static inline struct RLRunLoopSource **reg_srcs(rl__fdreg *r) {
    return r->many ? r->srcs.many->src : &r->srcs.one;
}
static inline uint8_t *blk_want(rl__fdsrcs *b) { return (uint8_t *)(b->src + b->cap); }
/* How many sources are on r. */
static inline uint32_t reg_n(const rl__fdreg *r) { return r->many ? r->srcs.many->n : r->srcs.one != NULL; }
/* At least as many as there are sources on r, and cheaper: one for the
 * entry's (which may be none). */
static inline uint32_t reg_most(const rl__fdreg *r) { return RL__UNLIKELY(r->many) ? r->srcs.many->n : 1; }
/* Whether s is the one source on r. */
static inline bool reg_alone(const rl__fdreg *r, const struct RLRunLoopSource *s) {
    return r->many ? r->srcs.many->n == 1 && r->srcs.many->src[0] == s : r->srcs.one == s;
}
/* The wish of r's i-th source. */
static inline uint32_t reg_want_at(rl__fdreg *r, uint32_t i) {
    return r->many ? blk_want(r->srcs.many)[i] : r->want1;
}
static inline void reg_set_want(rl__fdreg *r, uint32_t i, uint32_t w) {
    if (r->many)
        blk_want(r->srcs.many)[i] = (uint8_t)w;
    else
        r->want1 = (uint8_t)w;
}

/* What src wants the loop to watch its fd for (RL_FDW_*). The loop lock
 * and src's item lock held. */
static uint32_t fd_desired(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    rl__fdstate *f = rl__fdst(src);
    if (!src->valid || !rl__peek(f->valid) || rl__peek(f->stale) || !rl->armed_mode)
        return 0;
    if (!rl__memb_in_mode(src, RL_KIND_SOURCE, rl->armed_mode))
        return 0;
    /* Types a kept callout is making are off until it returns. */
    RLOptionFlags enabled = atomic_load_explicit(&f->enabled, memory_order_relaxed) & ~f->firing;
    uint32_t w = 0;
    if (enabled & kRLFileDescriptorReadCallBack)
        w |= RL_FDW_READ;
    if (enabled & kRLFileDescriptorWriteCallBack)
        w |= RL_FDW_WRITE;
    return w;
}

/* The union of what the sources on r want: their wishes as last read under
 * each one's item lock (rl_fd_update), so no other source's lock is needed. */
static uint32_t fd_want(RLRunLoopRef rl, rl__fdreg *r) {
    (void)rl;
    if (!r->many) /* one source, mostly (none: 0) */
        return r->want1;
    rl__fdsrcs *b = r->srcs.many;
    const uint8_t *w = blk_want(b);
    uint32_t want = 0;
    for (uint32_t i = 0; i < b->n; i++)
        want |= w[i];
    return want;
}

/* 0, or the errno of the failed registration (rl__poll_ctl: epoll_ctl,
 * or the io_uring backend's poll request). */
static int fd_ctl(RLRunLoopRef rl, int op, int fd, uint32_t events, uint32_t gen) {
    if (RL__UNLIKELY(!rl__of_this_process(rl)))
        return 0; /* a fork() child never touches its parent's kernel set */
    rl->nctl++;
    return rl__poll_ctl(&rl->kern, op, fd, events, gen);
}

/* The events to give the kernel for `want`: one-shot unless persistent. */
static uint32_t fd_flags(const rl__fdreg *r, uint32_t want) {
    return r->level ? fdw_events(want) : fdw_events(want) | EPOLLONESHOT;
}

static void fd_set_armed(RLRunLoopRef rl, rl__fdreg *r, uint32_t armed) {
    if ((r->armed == 0) != (armed == 0)) {
        if (armed) {
            rl->nfd_armed++;
            rl->nalways += r->always;
        } else {
            rl->nfd_armed--;
            rl->nalways -= r->always;
        }
    }
    r->armed = (uint8_t)armed;
}

/* The objects on r (but `fresh`) no longer name the file they were made
 * for, or cannot be watched (err): they are not watched again, and say so
 * when enabled (RLFileDescriptor.c). */
static void fd_mark_stale(rl__fdreg *r, struct RLRunLoopSource *fresh, int err) {
    for (uint32_t i = 0, n = reg_n(r); i < n; i++) {
        rl__fdstate *f = rl__fdst(reg_srcs(r)[i]);
        if (reg_srcs(r)[i] != fresh && !rl__peek(f->stale)) {
            rl__poke(f->stale, (uint8_t)err);
            atomic_store_explicit(&f->enabled, 0, memory_order_relaxed);
            reg_set_want(r, i, 0);
        }
    }
}

/* Marks stale the objects on r made for another file than fd names now
 * (the number was closed and reused behind their backs). */
static void fd_check_identity(rl__fdreg *r, int fd) {
    struct stat st;
    int err = fstat(fd, &st) == 0 ? 0 : errno;
    for (uint32_t i = 0, n = reg_n(r); i < n; i++) {
        rl__fdstate *f = rl__fdst(reg_srcs(r)[i]);
        if (!rl__peek(f->stale) && (err || f->dev != rl__fd_dev32(st.st_dev) || f->ino != st.st_ino)) {
            rl__poke(f->stale, (uint8_t)(err ? err : ENOENT));
            atomic_store_explicit(&f->enabled, 0, memory_order_relaxed);
            reg_set_want(r, i, 0);
        }
    }
}

/* Adds fd to the backend's set, under a new tag, for what its objects that
 * still name its file want. */
static void fd_add(RLRunLoopRef rl, rl__fdreg *r, int fd) {
    fd_check_identity(r, fd);
    uint32_t want = fd_want(rl, r);
    if (want == 0)
        return;
    uint32_t gen = ++rl->fdgen ? rl->fdgen : ++rl->fdgen;
    uint32_t events = fdw_events(want) | EPOLLONESHOT;
    int err = fd_ctl(rl, EPOLL_CTL_ADD, fd, events, gen);
    if (err == EEXIST) /* in the set under a tag given up on: take it over */
        err = fd_ctl(rl, EPOLL_CTL_MOD, fd, events, gen);
    r->level = false;
    r->runs = 0;
    if (err == 0) {
        r->gen = gen;
        fd_set_armed(rl, r, want);
    } else if (err == EPERM) {
        /* A file that is always ready (poll says so; epoll refuses it). */
        r->always = true;
        fd_set_armed(rl, r, want);
    } else {
        /* EBADF: the fd is closed. ENOMEM, ENOSPC (the user's watch limit):
         * the loop cannot watch it. Reported, never silently dropped. */
        fd_mark_stale(r, NULL, err);
    }
}

/* fd's registration, NULL when the table has none (a negative fd
 * included). The table covers the fds from fdlo to fdlo + nfdtab - 1 and
 * grows at either end: a loop in a process with many fds open watches a
 * few high numbers, and holds records for those, not for every number
 * below them (a loop thread watching one fd numbered 600 held 29 KiB). */
static inline rl__fdreg *fd_reg(RLRunLoopRef rl, int fd) {
    uint32_t i = (uint32_t)fd - rl->fdlo;
    return i < rl->nfdtab ? &rl->fdtab[i] : NULL;
}

/* The fd of the table's i-th record. */
static inline int fd_at(RLRunLoopRef rl, size_t i) { return (int)(rl->fdlo + (uint32_t)i); }

/* Room in the table for fd (>= 0), as rl_span.h grows such a table.
 * False: out of memory (nothing changed). */
static bool fd_room(RLRunLoopRef rl, int fd) {
    if (fd_reg(rl, fd))
        return true;
    void *t = rl->fdtab;
    if (!rl__span_room(&t, &rl->fdlo, &rl->nfdtab, sizeof *rl->fdtab, fd))
        return false;
    rl->fdtab = t;
    return true;
}

/* Brings the kernel in line with what fd should be watched for (the union
 * over its sources). `verify`: ask the kernel even if nothing changed,
 * because `fresh`, a new object on this fd number, joins: an error then
 * says that the registration was made for a file the number no longer
 * names (ENOENT: closed and reused; EBADF: closed), and the objects
 * there before are stale. Loop lock held. */
static void fd_sync_ex(RLRunLoopRef rl, int fd, bool verify, struct RLRunLoopSource *fresh) {
    rl__fdreg *r = fd_reg(rl, fd);
    if (!r)
        return;
    if (r->postponed && !verify)
        return; /* delivered in this pass: settled after its callouts (fd_settle) */
    uint32_t want = fd_want(rl, r);
    if (r->always) {
        if (!verify || want == 0) {
            fd_set_armed(rl, r, want);
            return;
        }
        /* Does epoll still refuse what the number names now? */
        fd_set_armed(rl, r, 0);
        r->always = false;
        fd_add(rl, r, fd);
        if (r->always || r->gen == 0)
            return;
        fd_mark_stale(r, fresh, ENOENT); /* a watchable file now: not the one they were made for */
        verify = false;
        want = fd_want(rl, r);
        if (want == r->armed)
            return;
    }
    if (want == r->armed && !verify)
        return;
    if (r->gen == 0) {
        if (want)
            fd_add(rl, r, fd);
        return;
    }
    int err = 0;
    if (want) {
        err = fd_ctl(rl, EPOLL_CTL_MOD, fd, fd_flags(r, want), r->gen);
        if (err == 0)
            r->runs = 0;
    } else if (r->armed || verify) {
        /* Nobody listens: out of the set, not left armed with no events
         * (epoll would still report hang-ups). A one-shot registration the
         * kernel disarmed after reporting stays, to be re-armed cheaply. */
        err = fd_ctl(rl, EPOLL_CTL_DEL, fd, 0, 0);
        if (err == 0) {
            r->gen = 0;
            r->level = false;
        }
    }
    if (err == 0) {
        fd_set_armed(rl, r, want);
        return;
    }
    /* Whatever the kernel still holds under the old tag is ignored by its
     * tag: a one-shot registration reports at most once more; a persistent
     * one may report on, and the loop replaces its kernel set if it does
     * (rl__fd_note_events). */
    if (r->level && r->armed)
        rl->lost_level = true;
    r->level = false;
    r->gen = 0;
    fd_set_armed(rl, r, 0);
    fd_mark_stale(r, err == ENOENT || err == EBADF ? fresh : NULL, err);
    fd_add(rl, r, fd);
}

static void fd_sync(RLRunLoopRef rl, int fd) { fd_sync_ex(rl, fd, false, NULL); }

/* Files src under its fd. False: out of memory (nothing changed). src's
 * item lock held. */
bool rl__fd_register(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = rl__source_is_fd(src) ? rl__fdst(src)->fd : -1;
    if (fd < 0)
        return true;
    if (!fd_room(rl, fd))
        return false;
    rl__fdreg *r = fd_reg(rl, fd);
    uint32_t n = reg_n(r);
    for (uint32_t i = 0; i < n; i++) {
        if (reg_srcs(r)[i] == src)
            return true;
    }
    if (n == (r->many ? r->srcs.many->cap : 1)) {
        if (n == RL_FD_MAX_SRCS)
            return false;
        /* A (bigger) block of sources, then wishes: the entry's one, or
         * the old block's, move in. */
        uint32_t cap = n * 2u > RL_FD_MAX_SRCS ? RL_FD_MAX_SRCS : n * 2u;
        rl__fdsrcs *b = malloc(rl__fdsrcs_bytes(cap));
        if (!b)
            return false;
        b->n = n;
        b->cap = cap;
        for (uint32_t i = 0; i < n; i++) {
            b->src[i] = reg_srcs(r)[i];
            blk_want(b)[i] = (uint8_t)reg_want_at(r, i);
        }
        if (r->many)
            free(r->srcs.many);
        r->srcs.many = b;
        r->many = true;
        r->want1 = 0;
    }
    reg_srcs(r)[n] = src; /* one source: srcs.one set, the count with it */
    reg_set_want(r, n, fd_desired(rl, src));
    if (r->many)
        r->srcs.many->n = n + 1;
    /* The number may have been closed and reused since the object (or the
     * others on it) were made. The kernel's registration, if there is one,
     * is asked too: it tells apart files that share an identity (eventfds). */
    fd_check_identity(r, fd);
    if (r->gen != 0 || r->always)
        fd_sync_ex(rl, fd, true, src);
    return true;
}

void rl__fd_unregister(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = rl__source_is_fd(src) ? rl__fdst(src)->fd : -1;
    rl__fdreg *r = fd_reg(rl, fd);
    if (!r)
        return;
    for (uint32_t i = 0, n = reg_n(r); i < n; i++) {
        if (reg_srcs(r)[i] == src) {
            if (r->many) {
                rl__fdsrcs *b = r->srcs.many;
                memmove(&b->src[i], &b->src[i + 1], (n - i - 1) * sizeof *b->src);
                memmove(&blk_want(b)[i], &blk_want(b)[i + 1], n - i - 1);
                b->n--;
            } else {
                r->srcs.one = NULL;
                r->want1 = 0;
            }
            /* The union of the others; none left: out of the set (errors
             * mean it is gone already). */
            fd_sync_ex(rl, fd, n == 1 && r->gen != 0, NULL);
            if (n == 1) {
                /* Nothing held for a number nobody watches. */
                if (r->many)
                    free(r->srcs.many);
                r->srcs.one = NULL;
                r->many = false;
                r->want1 = 0;
                fd_set_armed(rl, r, 0);
                r->gen = 0;
                r->always = false;
                r->level = false;
                if (r->postponed) {
                    r->postponed = false;
                    rl->npostponed--;
                }
            }
            return;
        }
    }
}

/* Re-reads what src wants (fd_desired: src's item lock held) and re-arms
 * its fd. */
void rl__fd_update(RLRunLoopRef rl, struct RLRunLoopSource *src) {
    int fd = rl__source_is_fd(src) ? rl__fdst(src)->fd : -1;
    rl__fdreg *r = fd_reg(rl, fd);
    if (!r)
        return;
    for (uint32_t i = 0, n = reg_n(r); i < n; i++) {
        if (reg_srcs(r)[i] == src) {
            reg_set_want(r, i, fd_desired(rl, src));
            fd_sync(rl, fd);
            return;
        }
    }
}

/* Reads every wish on r again, under each source's item lock in turn (the
 * armed mode changed; a callout enabled its own fd and left them as they
 * were; a report nobody served). Loop lock held. */
static void fd_reread(RLRunLoopRef rl, rl__fdreg *r) {
    struct RLRunLoopSource **srcs = reg_srcs(r); /* fixed while the loop lock is held */
    for (uint32_t i = 0, n = reg_n(r); i < n; i++) {
        rl__olock_lock(&srcs[i]->lock);
        reg_set_want(r, i, fd_desired(rl, srcs[i]));
        rl__olock_unlock(&srcs[i]->lock);
    }
}

/* The armed mode changed: every source's wish is read again, each under its
 * item lock in turn. Loop lock held, no item lock. */
void rl__fd_sync_all(RLRunLoopRef rl) {
    for (size_t i = 0; i < rl->nfdtab; i++) {
        rl__fdreg *r = &rl->fdtab[i];
        if (!reg_n(r))
            continue;
        fd_reread(rl, r);
        fd_sync(rl, fd_at(rl, i));
    }
}

/* Right after the wait: each reported one-shot registration is disarmed
 * now (what it had armed is kept in `fired`), and a report under a tag the
 * loop gave up on (left behind by a closed fd) is blanked, to be ignored.
 * If such a report may come from a persistent registration, the loop moves
 * to a new kernel set (rl__poll_renew) before it waits again. Loop lock held. */
void rl__fd_note_events(RLRunLoopRef rl, struct epoll_event *ev, int n) {
    for (int i = 0; i < n; i++) {
        int fd = rl__ev_fd(&ev[i]);
        uint32_t gen = rl__ev_gen(&ev[i]);
        if (gen == 0)
            continue; /* the loop's own eventfd or timerfd */
        rl__fdreg *r = fd_reg(rl, fd);
        if (r && r->gen == gen) {
            if (!r->level) {
                r->fired = r->armed;
                fd_set_armed(rl, r, 0);
            }
        } else {
            ev[i].events = 0;
            if (rl->lost_level)
                rl->rebuild = true;
        }
    }
}

/* After the callouts of a pass, fd's registration (delivered to, and left
 * as it was meanwhile) is brought in line with what its sources want now.
 * A one-shot registration whose callouts enabled again just what it had
 * armed becomes persistent: the owner keeps the fd enabled, so the next
 * wake-ups need no re-arming. A persistent one that stays as it is costs
 * nothing, but every RL_FD_CHECK_RUNS deliveries the kernel is asked
 * again (a closed number is found out). Loop lock held. */
static void fd_settle(RLRunLoopRef rl, int fd) {
    rl__fdreg *r = fd_reg(rl, fd);
    if (!r)
        return;
    if (!r->postponed)
        return;
    r->postponed = false;
    rl->npostponed--;
    fd_reread(rl, r);
    uint32_t want = fd_want(rl, r);
    if (r->level && want == r->armed) {
        if (++r->runs >= RL_FD_CHECK_RUNS)
            fd_sync_ex(rl, fd, true, NULL);
        return;
    }
    if (!r->level && !r->always && r->gen != 0 && r->armed == 0 && want != 0 && want == r->fired)
        r->level = true; /* armed persistent by the sync below */
    fd_sync(rl, fd);
}

/* Whether s is in some loop but `except`. Its lock held. */
static bool src_elsewhere(struct RLRunLoopSource *s, RLRunLoopRef except) {
    rl__memb *m;
    RL_ITEMQ_FOREACH(m, &s->membs)
        if (rl__memb_rl(m) != except)
            return true;
    return false;
}

/* Ends the firing of a kept callout: its types may be delivered and
 * watched for again. Returns whether the source is in a loop but rl now
 * (it joined one during the callout), and whether its enabled types are
 * still what the loop took. */
static bool fd_kept_end(RLRunLoopRef rl, rl__fd_fire *fire, bool *same) {
    struct RLRunLoopSource *s = fire->src;
    rl__fdstate *f = rl__fdst(s);
    rl__olock_lock(&s->lock);
    f->firing &= ~fire->types;
    bool elsewhere = rl && src_elsewhere(s, rl);
    *same = atomic_load_explicit(&f->enabled, memory_order_relaxed) == fire->enabled_at;
    rl__olock_unlock(&s->lock);
    return elsewhere;
}

/* rl__fd_after_callout (rl_fdtab.h). */
void rl__fd_after_callout(RLRunLoopRef rl, rl__fd_fire *fire) {
    int fd = fire->fd;
    rl__fdreg *r = fd_reg(rl, fd);
    if (fire->kept) {
        bool same;
        fire->rearm_others = fd_kept_end(rl, fire, &same);
        /* Untouched: the owner left enabled what it got, and nothing
         * re-armed the fd meanwhile (a run nested in the callout that
         * found it firing, another thread's change, a new source on the
         * number). Otherwise the wishes are read again, firing over. */
        if (!r || (same && reg_alone(r, fire->src) && r->gen == fire->gen_at && r->level &&
                   r->armed == fire->armed_at))
            return;
        fd_reread(rl, r);
        fd_sync(rl, fd);
        return;
    }
    if (!r)
        return;
    if (r->postponed) {
        fd_settle(rl, fd);
        return;
    }
    fd_reread(rl, r); /* settled already, by a run nested in a callout */
    fd_sync(rl, fd);
}

void rl__fd_after_callout_in_child(rl__fd_fire *fire) {
    bool same;
    if (fire->kept)
        (void)fd_kept_end(NULL, fire, &same);
}

/* The loop moves to a new kernel set holding its eventfd and timerfd, and
 * its fds are registered there afresh, for one of two reasons:
 * - A persistent registration left behind by a closed fd reported: epoll
 *   keys it by a number that is closed or names another file now, so no
 *   epoll_ctl can reach it. The new set is an epoll set under the same fd
 *   number (dup3); the old one, and the leftover with it, goes with its
 *   last reference.
 * - A loop on the default backend asked for the ring (a socket's callout:
 *   rl__poll_wants_upgrade): the new set is an io_uring (rl__poll_upgrade),
 *   the epoll set and any leftover in it are closed.
 * Loop lock held, on the loop's thread, before it waits. */
static void fd_rebuild(RLRunLoopRef rl) {
    bool upgrade = rl__poll_wants_upgrade(&rl->kern);
    rl->rebuild = false;
    if (!rl__of_this_process(rl))
        return;
    if (upgrade ? rl__poll_upgrade(&rl->kern) != 0 : rl__poll_renew(&rl->kern) != 0)
        return; /* a leftover: tried again at its next report; the ring: never again */
    rl->lost_level = false;
    rl->mainq_armed = false; /* added to the new set before the wait (rl__mainq_arm) */
    for (size_t i = 0; i < rl->nfdtab; i++) {
        rl__fdreg *r = &rl->fdtab[i];
        if (reg_n(r) == 0 || r->always || r->gen == 0)
            continue;
        r->gen = 0;
        r->level = false;
        fd_set_armed(rl, r, 0);
        fd_sync(rl, fd_at(rl, i)); /* added again (postponed ones after their callouts) */
    }
}

/* Before the loop waits: the fds still postponed (a run nested in a
 * callout waits before the outer pass settles them) are settled, and a
 * leftover that reported is got rid of, or the loop moves to the ring its
 * sockets asked for (fd_rebuild). Loop lock held. */
void rl__fd_before_wait(RLRunLoopRef rl) {
    for (size_t i = 0; rl->npostponed && i < rl->nfdtab; i++)
        fd_settle(rl, fd_at(rl, i));
    if (RL__UNLIKELY(rl->rebuild || rl__poll_wants_upgrade(&rl->kern)))
        fd_rebuild(rl);
}

/* Re-arms the fd of s in every loop s is in but `except`. No lock held. */
void rl__fd_resync_except(struct RLRunLoopSource *s, RLRunLoopRef except) {
    rl__olock_lock(&s->lock);
    /* Most sources are in one loop: the one making the callout, here
     * left out, so that there is nothing to do (checked before anything
     * is collected). */
    if (!src_elsewhere(s, except)) {
        rl__olock_unlock(&s->lock);
        return;
    }
    rl__loopset ls;
    rl__loopset_init(&ls);
    rl__loopset_collect(&ls, s, except);
    rl__olock_unlock(&s->lock);
    for (size_t i = 0; i < ls.n; i++) {
        RLRunLoopRef rl = ls.a[i];
        rl__loop_lock(rl);
        rl__olock_lock(&s->lock);
        rl__fd_update(rl, s);
        rl__olock_unlock(&s->lock);
        rl__loop_unlock(rl);
    }
    rl__loopset_free(&ls);
}

/* The common case is a callout enabling its own fd again: its loop, this
 * thread's, reads every wish again after the callouts, so only the
 * source's other loops (usually none) are re-armed now. */
void rl__source_fd_resync(struct RLRunLoopSource *s) {
    rl__fd_resync_except(s, rl__fd_callout_running(s) ? rl__tls : NULL);
}

/* One of the loop's counters, read under its lock (for the tests). */
static unsigned long fd_counter(RLRunLoopRef rl, const unsigned long *counter) {
    rl__loop_lock(rl);
    unsigned long n = *counter;
    rl__loop_unlock(rl);
    return n;
}

unsigned long rl__fd_ctl_calls(RLRunLoopRef rl) { return fd_counter(rl, &rl->nctl); }

unsigned long rl__fd_kept_calls(RLRunLoopRef rl) { return fd_counter(rl, &rl->nkept); }

size_t rl__fd_table_bytes(RLRunLoopRef rl, size_t *blocks) {
    rl__loop_lock(rl);
    size_t n = rl->nfdtab * sizeof *rl->fdtab, nb = 0;
    for (size_t i = 0; i < rl->nfdtab; i++) {
        if (rl->fdtab[i].many) {
            n += malloc_usable_size(rl->fdtab[i].srcs.many);
            nb++;
        }
    }
    rl__loop_unlock(rl);
    if (blocks)
        *blocks = nb;
    return n;
}

/* ---- from epoll's reports to callouts ---- */

/* Whether the types of f just reported on r may be kept: left enabled,
 * and the registration as it is, through the callout, instead of turned
 * off before it and on again after (the one-shot way). For a source alone
 * on its fd (nsrcs: how many are on r) and in one loop (checked by the
 * caller), whose owner enables again after each callout what it got
 * (f->kept), on a persistent registration that is not due for its
 * identity check. The fd object marks them firing meanwhile: no loop
 * delivers them or watches for them (fd_desired) until the callout
 * returns, so a run nested in it, or another loop the source joins
 * meanwhile, does not call it again inside itself, nor spin on the ready
 * fd. Source's item lock held. */
static bool fd_keepable(const rl__fdreg *r, uint32_t nsrcs, rl__fdstate *f, RLOptionFlags types) {
    return RL_TRICK_KEPT && nsrcs == 1 && r->level && !r->always && r->gen != 0 && r->armed != 0 && !r->postponed &&
           r->runs + 1 < RL_FD_CHECK_RUNS &&
           (types & ~atomic_load_explicit(&f->kept, memory_order_relaxed)) == 0;
}

/* Turns an epoll event into the callbacks to deliver, for each source on
 * fd (r: its registration; at most max) whose enabled callbacks match;
 * one-shot: the delivered types are disabled before the callout (each
 * enabled type goes to one loop only, should the source be in several).
 * Returns how many went to out; the caller re-arms the fd in the source's
 * other loops, and settles it here after the callouts. Loop lock held. */
static size_t fd_take(RLRunLoopRef rl, rl__mode *m, rl__fdreg *r, int fd, uint32_t events, rl__fd_fire *out,
                      size_t max) {
    RLOptionFlags ready = 0;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
        ready |= kRLFileDescriptorReadCallBack;
    /* The kernel said no hang-up and no error (an always-ready file's
     * "report" is made up here, so it says nothing). */
    bool quiet = !r->always && !(events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP));
    /* A hang-up is told to the write side too, as poll(2) and select(2)
     * do (a write there fails at once): the kernel reports it whatever
     * was asked, so a file that hung up with only its write callback
     * enabled would otherwise be reported again at every wait and never
     * delivered (a loop spinning at full speed). */
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        ready |= kRLFileDescriptorWriteCallBack;
    size_t n = 0;
    bool settle = false;
    struct RLRunLoopSource **srcs = reg_srcs(r); /* fixed while the loop lock is held */
    for (uint32_t i = 0, nsrcs = reg_n(r); i < nsrcs && n < max; i++) {
        struct RLRunLoopSource *s = srcs[i];
        rl__fdstate *f = rl__fdst(s);
        RLOptionFlags types = ready & atomic_load_explicit(&f->enabled, memory_order_relaxed);
        if (!types)
            continue;
        rl__olock_lock(&s->lock);
        bool elsewhere = false, kept = false;
        RLOptionFlags enabled_at = 0;
        if (s->valid && rl__peek(f->valid) && rl__memb_in_mode(s, RL_KIND_SOURCE, m)) {
            types &= ~f->firing; /* a kept callout of s is making them: not again */
            elsewhere = types && src_elsewhere(s, rl);
            if (types && !elsewhere && fd_keepable(r, nsrcs, f, types)) {
                kept = true;
                f->firing |= types;
                enabled_at = atomic_load_explicit(&f->enabled, memory_order_relaxed);
                r->runs++;
                rl->nkept++;
            } else if (types) {
                types &= atomic_fetch_and_explicit(&f->enabled, ~types, memory_order_relaxed);
                reg_set_want(r, i, fd_desired(rl, s));
            }
        } else {
            types = 0;
        }
        rl__olock_unlock(&s->lock);
        if (!types)
            continue;
        rl__retain_raw(s);
        out[n] = (rl__fd_fire){.src = s, .types = types, .fd = fd, .elsewhere = elsewhere, .kept = kept,
                              .quiet = quiet, .enabled_at = enabled_at, .gen_at = r->gen, .armed_at = r->armed};
        settle |= !kept;
        n++;
    }
    if (n > 0) {
        if (settle && !r->postponed) {
            r->postponed = true;
            rl->npostponed++;
        }
        return n;
    }
    if (r->level) {
        /* Reported, nobody served: a wish read before another loop took
         * the readiness. Read again, so that the loop does not spin. */
        fd_reread(rl, r);
    }
    fd_sync(rl, fd);
    return 0;
}

/* Room in *fire (inline buffer inl at first) for need entries. */
static bool fd_fire_reserve(rl__fd_fire **fire, rl__fd_fire *inl, size_t *cap, size_t n, size_t need) {
    if (need <= *cap)
        return true;
    size_t c = *cap * 2 > need ? *cap * 2 : need;
    rl__fd_fire *a = *fire == inl ? malloc(c * sizeof *a) : realloc(*fire, c * sizeof *a);
    if (!a)
        return false;
    if (*fire == inl)
        memcpy(a, inl, n * sizeof *a);
    *fire = a;
    *cap = c;
    return true;
}

/* Turns the events of one epoll_wait (and the always-ready fds) into the
 * callouts to make in mode m: into *fire (inl, of *cap entries, at
 * first; grown on the heap if need be), each source retained. With
 * stop_after_handle, one at most; the other reported fds are re-armed.
 * Returns how many. Loop lock held. */
size_t rl__fd_collect(RLRunLoopRef rl, rl__mode *m, struct epoll_event *ev, int nev, uint64_t wait_no,
                      bool stop_after_handle, rl__fd_fire **fire, rl__fd_fire *inl, size_t *cap) {
    size_t n = 0;
    bool later = rl->nwaits != wait_no;
    for (int i = 0; i < nev; i++) {
        int fd = rl__ev_fd(&ev[i]);
        if (rl__ev_gen(&ev[i]) == 0)
            continue; /* the loop's own eventfd or timerfd */
        if (stop_after_handle && n == 1) {
            fd_sync(rl, fd); /* re-armed: it reports again */
            continue;
        }
        rl__fdreg *q = fd_reg(rl, fd);
        /* `later`: the loop has waited again since this event (in a run
         * nested in an earlier callout of the pass). A persistent
         * registration reported to that wait too, if the fd was still
         * ready: this report may have been served already. */
        if (!q || (later && q->level))
            continue;
        size_t k = reg_most(q);
        if (!fd_fire_reserve(fire, inl, cap, n, n + k))
            k = *cap - n; /* out of memory: the rest stay enabled and report again */
        n += fd_take(rl, m, q, fd, ev[i].events, *fire + n, stop_after_handle ? 1 : k);
    }
    /* Always-ready fds (epoll refuses them) are ready whenever armed. */
    for (size_t i = 0; rl->nalways && i < rl->nfdtab; i++) {
        rl__fdreg *r = &rl->fdtab[i];
        if (!r->always || !r->armed || (stop_after_handle && n == 1))
            continue;
        size_t k = reg_most(r);
        if (!fd_fire_reserve(fire, inl, cap, n, n + k))
            k = *cap - n;
        n += fd_take(rl, m, r, fd_at(rl, i), fdw_events(r->armed), *fire + n, stop_after_handle ? 1 : k);
    }
    return n;
}
