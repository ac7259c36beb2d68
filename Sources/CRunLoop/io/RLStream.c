/* RLStream.c — read and write streams (CFReadStream / CFWriteStream): the
 * object every backend shares — status, error, client, the run loops it is
 * scheduled on — and the public calls, which reach the backend (memory,
 * file, bound pair, socket; RLStreamInternal.h) through its operations.
 * Events are kept as pending bits and delivered by a version-0 run-loop
 * source that the stream adds to every (loop, mode) it is scheduled in;
 * the backends only post bits, from any thread. */
#include "RLStreamInternal.h"
#include "RLLockDebugInternal.h"

#include <crunloop/RLRunLoopSource.h>
#include <crunloop/RLRunLoop.h>
#include <crunloop/RLStream.h>

#include <stdlib.h>
#include <string.h>

static void stream_finalize(void *obj);
static const rl__class read_class = {"RLReadStream", stream_finalize, NULL, NULL};
static const rl__class write_class = {"RLWriteStream", stream_finalize, NULL, NULL};

RLTypeID RLReadStreamGetTypeID(void) { return rl__type_id(&read_class); }
RLTypeID RLWriteStreamGetTypeID(void) { return rl__type_id(&write_class); }

/* ---- the object ---- */

rl__stream *rl__stream_new(bool is_read, const rl__stream_ops *ops, const char *fn) {
    rl__stream *s = rl__object_alloc(is_read ? &read_class : &write_class, sizeof *s + ops->state_size, fn);
    if (!s)
        return NULL;
    s->is_read = is_read;
    s->ops = ops;
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

rl__stream *rl__stream_check(const void *ref, bool is_read, const char *fn) {
    if (!rl__object_check(ref, is_read ? &read_class : &write_class, fn))
        return NULL;
    return (rl__stream *)ref;
}

void rl__stream_lock(rl__stream *s) {
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_take(RL_LOCKCLASS_STREAM, __builtin_return_address(0));
    pthread_mutex_lock(&s->lock);
}

void rl__stream_unlock(rl__stream *s) {
    pthread_mutex_unlock(&s->lock);
    if (RL__UNLIKELY(rl__lockclass_on()))
        rl__lockclass_drop(RL_LOCKCLASS_STREAM);
}

static bool opened(RLStreamStatus st) { return st != kRLStreamStatusClosed && st != kRLStreamStatusNotOpen; }

static void stream_finalize(void *obj) {
    rl__stream *s = obj;
    if (opened(s->status) && s->ops->close)
        s->ops->close(s);
    if (s->source) {
        RLRunLoopSourceInvalidate(s->source);
        RLRelease(s->source);
    }
    for (size_t i = 0; i < s->nscheds; i++) {
        if (s->ops->unscheduled)
            s->ops->unscheduled(s, s->scheds[i].rl, s->scheds[i].mode);
        RLRelease(s->scheds[i].rl);
        free(s->scheds[i].mode);
    }
    free(s->scheds);
    if (s->ctx.release)
        s->ctx.release(s->ctx.info);
    if (s->ops->finalize)
        s->ops->finalize(s);
    pthread_mutex_destroy(&s->lock);
}

/* ---- events ---- */

/* HasBytes/CanAccept are dropped unless armed: they are re-armed by the
 * client's next Read/Write, so each readiness is reported once. */
void rl__stream_post_locked(rl__stream *s, RLOptionFlags ev) {
    if (!opened(s->status))
        return;
    if (ev & (kRLStreamEventHasBytesAvailable | kRLStreamEventCanAcceptBytes)) {
        if (!s->armed)
            ev &= ~(RLOptionFlags)(kRLStreamEventHasBytesAvailable | kRLStreamEventCanAcceptBytes);
        else
            s->armed = false;
    }
    if (!ev)
        return;
    s->pending |= ev;
    if (s->source) {
        RLRunLoopSourceSignal(s->source);
        for (size_t i = 0; i < s->nscheds; i++)
            RLRunLoopWakeUp(s->scheds[i].rl);
    }
}

void rl__stream_post(rl__stream *s, RLOptionFlags ev) {
    rl__stream_lock(s);
    rl__stream_post_locked(s, ev);
    rl__stream_unlock(s);
}

/* Status Error with {domain, err}, and ErrorOccurred. */
static void stream_fail_locked(rl__stream *s, RLIndex domain, int err) {
    s->status = kRLStreamStatusError;
    s->error = (RLStreamError){domain, err};
    rl__stream_post_locked(s, kRLStreamEventErrorOccurred);
}

void rl__stream_fail(rl__stream *s, RLIndex domain, int err) {
    rl__stream_lock(s);
    stream_fail_locked(s, domain, err);
    rl__stream_unlock(s);
}

void rl__stream_open_finished_locked(rl__stream *s, RLIndex domain, int err) {
    if (s->status != kRLStreamStatusOpening)
        return;
    if (err) {
        stream_fail_locked(s, domain, err);
        return;
    }
    s->status = kRLStreamStatusOpen;
    s->armed = true;
    rl__stream_post_locked(s, kRLStreamEventOpenCompleted);
}

static const RLOptionFlags event_order[] = {kRLStreamEventOpenCompleted, kRLStreamEventHasBytesAvailable,
                                            kRLStreamEventCanAcceptBytes, kRLStreamEventErrorOccurred,
                                            kRLStreamEventEndEncountered};

static void rearm(rl__stream *s);

/* A readiness event whose readiness is gone by its turn (the bytes were
 * read, or the room used, outside the callback after the event was posted)
 * would make the client's Read or Write block; and since posting it used
 * the stream's arming, the next readiness would not be reported either. It
 * is dropped and the stream re-armed instead. */
static bool still_ready(rl__stream *s, RLOptionFlags bit) {
    if (!(bit & (kRLStreamEventHasBytesAvailable | kRLStreamEventCanAcceptBytes)) || s->ops->ready(s))
        return true;
    rearm(s);
    return false;
}

/* The source's perform, on a loop's thread: one callback per pending event,
 * each checked again just before it runs (an earlier callback may have
 * closed the stream or changed the client). Events the callbacks cause (a
 * Read that finds more bytes) are delivered in the same perform, before
 * other sources, as CF does; a long chain yields to the loop after a
 * bounded number of rounds. */
static void stream_perform(void *info) {
    rl__stream *s = info;
    RLRetain(s);
    for (int round = 0;; round++) {
        rl__stream_lock(s);
        RLOptionFlags ev = s->pending;
        if (ev && round == 1000) {
            RLRunLoopSourceSignal(s->source); /* the rest on the next pass */
            ev = 0;
        } else {
            s->pending = 0;
        }
        rl__stream_unlock(s);
        if (!ev)
            break;
        for (size_t i = 0; i < sizeof event_order / sizeof event_order[0]; i++) {
            RLOptionFlags bit = event_order[i];
            if (!(ev & bit))
                continue;
            rl__stream_lock(s);
            bool deliver = s->callback && (s->client_events & bit) && s->status != kRLStreamStatusClosed;
            void (*cb)(void) = s->callback;
            void *cinfo = s->ctx.info;
            rl__stream_unlock(s);
            if (!deliver || !still_ready(s, bit))
                continue;
            if (s->is_read)
                ((RLReadStreamClientCallBack)cb)((RLReadStreamRef)s, bit, cinfo);
            else
                ((RLWriteStreamClientCallBack)cb)((RLWriteStreamRef)s, bit, cinfo);
        }
    }
    RLRelease(s);
}

/* ---- readiness ---- */

/* Reports what an armed open stream can do now: its end, or readiness. */
static void report_ready(rl__stream *s) {
    if (s->is_read && s->ops->exhausted && s->ops->exhausted(s)) {
        rl__stream_lock(s);
        if (s->status == kRLStreamStatusOpen) {
            s->status = kRLStreamStatusAtEnd;
            rl__stream_post_locked(s, kRLStreamEventEndEncountered);
        }
        rl__stream_unlock(s);
        return;
    }
    if (s->ops->ready(s))
        rl__stream_post(s, s->is_read ? kRLStreamEventHasBytesAvailable : kRLStreamEventCanAcceptBytes);
    else if (s->ops->watch)
        s->ops->watch(s);
}

void rl__stream_recheck(rl__stream *s) {
    rl__stream_lock(s);
    bool armed = s->armed;
    rl__stream_unlock(s);
    if (armed)
        report_ready(s);
}

/* After open and after each Read/Write: re-arm the readiness event and
 * report it at once if the backend is ready. */
static void rearm(rl__stream *s) {
    rl__stream_lock(s);
    if (s->status != kRLStreamStatusOpen) {
        rl__stream_unlock(s);
        return;
    }
    s->armed = true;
    rl__stream_unlock(s);
    report_ready(s);
}

/* ---- status, errors ---- */

static RLStreamStatus get_status(const void *ref, bool is_read, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s)
        return kRLStreamStatusError;
    if (s->ops->poll_status) /* polled progress for unscheduled streams */
        s->ops->poll_status(s);
    rl__stream_lock(s);
    RLStreamStatus st = s->status;
    rl__stream_unlock(s);
    return st;
}

RLStreamStatus RLReadStreamGetStatus(RLReadStreamRef s) { return get_status(s, true, __func__); }
RLStreamStatus RLWriteStreamGetStatus(RLWriteStreamRef s) { return get_status(s, false, __func__); }

static RLStreamError get_error(const void *ref, bool is_read, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s)
        return (RLStreamError){kRLStreamErrorDomainCustom, 0};
    rl__stream_lock(s);
    RLStreamError e = s->error;
    rl__stream_unlock(s);
    return e;
}

RLStreamError RLReadStreamGetError(RLReadStreamRef s) { return get_error(s, true, __func__); }
RLStreamError RLWriteStreamGetError(RLWriteStreamRef s) { return get_error(s, false, __func__); }

/* CF's mapping from a stream error to an error object (CFStream.c on
 * Linux, without CFNetwork), with NetDB named rather than bogus. */
static RLErrorRef copy_error(const void *ref, bool is_read, const char *fn) {
    if (!rl__stream_check(ref, is_read, fn))
        return NULL;
    RLStreamError e = get_error(ref, is_read, fn);
    if (e.domain == 0 && e.error == 0)
        return NULL;
    RLErrorDomain domain = e.domain == kRLStreamErrorDomainPOSIX   ? kRLErrorDomainPOSIX
                           : e.domain == kRLStreamErrorDomainNetDB ? "kCFStreamErrorDomainNetDB"
                                                                   : "BogusCFStreamErrorCompatibilityDomain";
    return RLErrorCreate(NULL, domain, e.error, NULL);
}

RLErrorRef RLReadStreamCopyError(RLReadStreamRef s) { return copy_error(s, true, __func__); }
RLErrorRef RLWriteStreamCopyError(RLWriteStreamRef s) { return copy_error(s, false, __func__); }

static bool readiness(const void *ref, bool is_read, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s)
        return false;
    RLStreamStatus st = get_status(ref, is_read, fn);
    if (st != kRLStreamStatusOpen)
        return false; /* CF: only an open stream has bytes or room */
    return s->ops->ready(s);
}

bool RLReadStreamHasBytesAvailable(RLReadStreamRef s) { return readiness(s, true, __func__); }
bool RLWriteStreamCanAcceptBytes(RLWriteStreamRef s) { return readiness(s, false, __func__); }

/* ---- open, close ---- */

static bool stream_open(const void *ref, bool is_read, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s)
        return false;
    rl__stream_lock(s);
    if (s->status != kRLStreamStatusNotOpen) {
        RLStreamStatus st = s->status;
        rl__stream_unlock(s);
        return rl__fail(kRLErrorInvalidState, fn, "stream already opened (status %ld)", (long)st);
    }
    s->status = kRLStreamStatusOpening;
    rl__stream_unlock(s);
    int r = s->ops->open ? s->ops->open(s, fn) : 1;
    if (r < 0)
        return false;
    if (r > 0) {
        rl__stream_lock(s);
        rl__stream_open_finished_locked(s, 0, 0);
        rl__stream_unlock(s);
    }
    rearm(s);
    return true;
}

bool RLReadStreamOpen(RLReadStreamRef s) { return stream_open(s, true, __func__); }
bool RLWriteStreamOpen(RLWriteStreamRef s) { return stream_open(s, false, __func__); }

static bool stream_close(const void *ref, bool is_read, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s)
        return false;
    rl__stream_lock(s);
    RLStreamStatus st = s->status;
    if (st == kRLStreamStatusClosed) {
        rl__stream_unlock(s);
        return true;
    }
    s->status = kRLStreamStatusClosed;
    s->pending = 0;
    rl__stream_unlock(s);
    if (st != kRLStreamStatusNotOpen && s->ops->close)
        s->ops->close(s);
    return true;
}

bool RLReadStreamClose(RLReadStreamRef s) { return stream_close(s, true, __func__); }
bool RLWriteStreamClose(RLWriteStreamRef s) { return stream_close(s, false, __func__); }

/* ---- read, write ---- */

/* What a Read/Write may do in the current status: 1 go on, 0 return 0
 * (a read stream at its end), -1 misuse (error set). Waits for an open in
 * progress. */
static int io_allowed(rl__stream *s, const char *fn) {
    if (s->ops->wait_open)
        s->ops->wait_open(s);
    rl__stream_lock(s);
    RLStreamStatus st = s->status;
    rl__stream_unlock(s);
    if (st == kRLStreamStatusOpen)
        return 1;
    if (st == kRLStreamStatusAtEnd && s->is_read)
        return 0; /* a write stream at its end takes nothing more: -1 (CF) */
    static const char *names[] = {"not open", "opening", "open", "reading", "writing", "at end", "closed", "failed"};
    rl__fail(kRLErrorInvalidState, fn, "stream is %s", names[st]);
    return -1;
}

/* A read stream reached its end (a Read that got 0 bytes, a GetBuffer that
 * took the last ones): status AtEnd and EndEncountered. */
static void reached_end(rl__stream *s) {
    rl__stream_lock(s);
    if (s->status == kRLStreamStatusOpen) {
        s->status = kRLStreamStatusAtEnd;
        rl__stream_post_locked(s, kRLStreamEventEndEncountered);
    }
    rl__stream_unlock(s);
}

RLIndex RLReadStreamRead(RLReadStreamRef ref, uint8_t *buffer, RLIndex length) {
    rl__stream *s = rl__stream_check(ref, true, __func__);
    if (!s)
        return -1;
    if (length < 0 || (!buffer && length > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "buffer %p, length %ld", (void *)buffer, (long)length), -1;
    int ok = io_allowed(s, __func__);
    if (ok <= 0)
        return ok;
    if (length == 0)
        return 0;
    int err = 0;
    ssize_t n = s->ops->read(s, buffer, (size_t)length, &err);
    if (n < 0) {
        rl__stream_fail(s, kRLStreamErrorDomainPOSIX, err);
        return -1;
    }
    if (n == 0) {
        reached_end(s);
        return 0;
    }
    rearm(s);
    return (RLIndex)n;
}

const uint8_t *RLReadStreamGetBuffer(RLReadStreamRef ref, RLIndex maxBytesToRead, RLIndex *numBytesRead) {
    if (numBytesRead)
        *numBytesRead = -1;
    rl__stream *s = rl__stream_check(ref, true, __func__);
    if (!s)
        return NULL;
    if (!numBytesRead || maxBytesToRead < 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, "numBytesRead %p, maxBytesToRead %ld",
                        (void *)numBytesRead, (long)maxBytesToRead),
               NULL;
    int ok = io_allowed(s, __func__);
    if (ok < 0)
        return NULL; /* *numBytesRead -1, as CF */
    *numBytesRead = 0;
    if (ok == 0 || !s->ops->get_buffer)
        return NULL; /* at the end, or nothing to lend (CF: 0) */
    size_t n = 0;
    bool at_end = false;
    const uint8_t *bytes = s->ops->get_buffer(s, (size_t)maxBytesToRead, &n, &at_end);
    *numBytesRead = (RLIndex)n;
    if (at_end)
        reached_end(s);
    else
        rearm(s);
    return bytes;
}

RLIndex RLWriteStreamWrite(RLWriteStreamRef ref, const uint8_t *buffer, RLIndex length) {
    rl__stream *s = rl__stream_check(ref, false, __func__);
    if (!s)
        return -1;
    if (length < 0 || (!buffer && length > 0))
        return rl__fail(kRLErrorInvalidArgument, __func__, "buffer %p, length %ld", (const void *)buffer,
                        (long)length),
               -1;
    int ok = io_allowed(s, __func__);
    if (ok <= 0)
        return ok;
    if (length == 0)
        return 0;
    int err = 0;
    ssize_t n = s->ops->write(s, buffer, (size_t)length, &err);
    if (n < 0) {
        rl__stream_fail(s, kRLStreamErrorDomainPOSIX, err);
        return -1;
    }
    rearm(s);
    return (RLIndex)n;
}

/* ---- client, scheduling ---- */

static bool set_client(const void *ref, bool is_read, RLOptionFlags events, void (*cb)(void),
                       RLStreamClientContext *ctx, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s)
        return false;
    if (ctx && ctx->version != 0)
        return rl__fail(kRLErrorInvalidArgument, fn, "context version %ld (expected 0)", (long)ctx->version);
    RLStreamClientContext fresh = {0};
    if (cb && ctx) {
        fresh = *ctx;
        if (fresh.retain)
            fresh.info = fresh.retain(fresh.info);
    }
    rl__stream_lock(s);
    RLStreamClientContext old = s->ctx;
    s->ctx = fresh;
    s->callback = (cb && ctx) ? cb : NULL;
    s->client_events = (cb && ctx) ? events : 0;
    rl__stream_unlock(s);
    if (old.release)
        old.release(old.info);
    return true;
}

bool RLReadStreamSetClient(RLReadStreamRef s, RLOptionFlags ev, RLReadStreamClientCallBack cb,
                           RLStreamClientContext *ctx) {
    return set_client(s, true, ev, (void (*)(void))cb, ctx, __func__);
}
bool RLWriteStreamSetClient(RLWriteStreamRef s, RLOptionFlags ev, RLWriteStreamClientCallBack cb,
                            RLStreamClientContext *ctx) {
    return set_client(s, false, ev, (void (*)(void))cb, ctx, __func__);
}

static bool mode_ok(RLRunLoopMode mode, const char *fn) {
    if (!mode || !*mode)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL or empty mode");
    return true;
}

static ssize_t find_sched(rl__stream *s, RLRunLoopRef rl, RLRunLoopMode mode) {
    for (size_t i = 0; i < s->nscheds; i++)
        if (s->scheds[i].rl == rl && strcmp(s->scheds[i].mode, mode) == 0)
            return (ssize_t)i;
    return -1;
}

bool rl__stream_is_scheduled(rl__stream *s, RLRunLoopRef rl, RLRunLoopMode mode) {
    rl__stream_lock(s);
    bool there = find_sched(s, rl, mode) >= 0;
    rl__stream_unlock(s);
    return there;
}

void rl__stream_add_to_schedules(rl__stream *s, RLRunLoopSourceRef src) {
    rl__stream_lock(s);
    for (size_t i = 0; i < s->nscheds; i++)
        RLRunLoopAddSource(s->scheds[i].rl, src, s->scheds[i].mode);
    rl__stream_unlock(s);
}

static bool schedule(const void *ref, bool is_read, RLRunLoopRef rl, RLRunLoopMode mode, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s || !rl__object_check(rl, NULL, fn) || !mode_ok(mode, fn))
        return false;
    rl__stream_lock(s);
    if (find_sched(s, rl, mode) >= 0) {
        rl__stream_unlock(s);
        return true;
    }
    if (!s->source) {
        RLRunLoopSourceContext sc = {.version = 0, .info = s, .perform = stream_perform};
        s->source = RLRunLoopSourceCreate(NULL, 0, &sc);
    }
    struct rl__sched *n = s->source ? realloc(s->scheds, (s->nscheds + 1) * sizeof *n) : NULL;
    char *m = n ? strdup(mode) : NULL;
    if (!m) {
        if (n)
            s->scheds = n;
        rl__stream_unlock(s);
        return rl__fail(kRLErrorNoMemory, fn, "no memory");
    }
    s->scheds = n;
    if (!RLRunLoopAddSource(rl, s->source, mode)) {
        free(m);
        rl__stream_unlock(s);
        return false;
    }
    RLRetain(rl);
    s->scheds[s->nscheds++] = (struct rl__sched){rl, m};
    if (s->pending) {
        RLRunLoopSourceSignal(s->source);
        RLRunLoopWakeUp(rl);
    }
    rl__stream_unlock(s);
    if (s->ops->scheduled)
        s->ops->scheduled(s, rl, mode);
    return true;
}

bool RLReadStreamScheduleWithRunLoop(RLReadStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return schedule(s, true, rl, m, __func__);
}
bool RLWriteStreamScheduleWithRunLoop(RLWriteStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return schedule(s, false, rl, m, __func__);
}

static bool unschedule(const void *ref, bool is_read, RLRunLoopRef rl, RLRunLoopMode mode, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s || !rl__object_check(rl, NULL, fn) || !mode_ok(mode, fn))
        return false;
    rl__stream_lock(s);
    ssize_t i = find_sched(s, rl, mode);
    if (i < 0) {
        rl__stream_unlock(s);
        return rl__fail(kRLErrorNotFound, fn, "stream is not scheduled in mode \"%s\" of that run loop", mode);
    }
    struct rl__sched gone = s->scheds[i];
    s->scheds[i] = s->scheds[--s->nscheds];
    RLRunLoopRemoveSource(rl, s->source, mode);
    rl__stream_unlock(s);
    if (s->ops->unscheduled)
        s->ops->unscheduled(s, rl, mode);
    RLRelease(gone.rl);
    free(gone.mode);
    return true;
}

bool RLReadStreamUnscheduleFromRunLoop(RLReadStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return unschedule(s, true, rl, m, __func__);
}
bool RLWriteStreamUnscheduleFromRunLoop(RLWriteStreamRef s, RLRunLoopRef rl, RLRunLoopMode m) {
    return unschedule(s, false, rl, m, __func__);
}
