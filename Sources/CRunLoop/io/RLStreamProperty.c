/* RLStreamProperty.c — stream properties (CFReadStreamCopyProperty and
 * friends): the names, what type each value has, and the checks every
 * backend would otherwise repeat — the stream, the name, whether this
 * stream has the property, read-only, the value's type. The backend
 * (RLStreamInternal.h) then reads or changes its own state. */
#include "RLDataInternal.h"
#include "RLNumberInternal.h"
#include "RLStreamInternal.h"
#include <crunloop/RLData.h>
#include <crunloop/RLNumber.h>
#include <crunloop/RLStream.h>

#include <string.h>

const RLStreamPropertyKey kRLStreamPropertyAppendToFile = "kRLStreamPropertyAppendToFile";
const RLStreamPropertyKey kRLStreamPropertyFileCurrentOffset = "kRLStreamPropertyFileCurrentOffset";
const RLStreamPropertyKey kRLStreamPropertyDataWritten = "kRLStreamPropertyDataWritten";
const RLStreamPropertyKey kRLStreamPropertySocketNativeHandle = "kRLStreamPropertySocketNativeHandle";
const RLStreamPropertyKey kRLStreamPropertyShouldCloseNativeSocket = "kRLStreamPropertyShouldCloseNativeSocket";

enum value_type { VALUE_BOOLEAN, VALUE_NUMBER, VALUE_DATA };

static const struct {
    const RLStreamPropertyKey *name; /* the exported constant (its text is the name) */
    enum value_type type;
    bool read_only;
} props[RL_PROP_COUNT] = {
    [RL_PROP_APPEND_TO_FILE] = {&kRLStreamPropertyAppendToFile, VALUE_BOOLEAN, false},
    [RL_PROP_FILE_CURRENT_OFFSET] = {&kRLStreamPropertyFileCurrentOffset, VALUE_NUMBER, false},
    [RL_PROP_DATA_WRITTEN] = {&kRLStreamPropertyDataWritten, VALUE_DATA, true},
    [RL_PROP_SOCKET_NATIVE_HANDLE] = {&kRLStreamPropertySocketNativeHandle, VALUE_DATA, true},
    [RL_PROP_SHOULD_CLOSE_NATIVE] = {&kRLStreamPropertyShouldCloseNativeSocket, VALUE_BOOLEAN, false},
};

static const char *type_name(enum value_type t) {
    return t == VALUE_BOOLEAN ? "an RLBoolean" : t == VALUE_NUMBER ? "an RLNumber" : "an RLData";
}

/* What a value is, for an error message, reading no more of it than the
 * type checks below do. */
static const char *value_kind(RLTypeRef v) {
    if (rl__is_boolean(v))
        return "an RLBoolean";
    if (rl__is_number(v))
        return "an RLNumber";
    if (rl__is_data(v))
        return "an RLData";
    return "not an RLBoolean, RLNumber or RLData";
}

RLTypeRef rl__boolean_copy(bool value) { return RLRetain(value ? kRLBooleanTrue : kRLBooleanFalse); }

/* The stream and the property it names, checked: the stream has it. */
static rl__stream *lookup(const void *ref, bool is_read, const char *name, rl__prop *out, const char *fn) {
    rl__stream *s = rl__stream_check(ref, is_read, fn);
    if (!s)
        return NULL;
    if (!name)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL property name"), NULL;
    int p = 0;
    while (p < RL_PROP_COUNT && strcmp(name, *props[p].name) != 0)
        p++;
    if (p == RL_PROP_COUNT)
        return rl__fail(kRLErrorNotFound, fn, "unknown stream property \"%s\"", name), NULL;
    unsigned has = s->ops->properties ? s->ops->properties(s) : 0;
    if (!(has & RL_PROP_BIT(p)))
        return rl__fail(kRLErrorNotFound, fn, "%s is not a property of a %s %s stream", name, s->ops->kind,
                        is_read ? "read" : "write"),
               NULL;
    *out = (rl__prop)p;
    return s;
}

/* Copies a property of a stream of that direction (the public Copy
 * calls and the older RLWriteStreamCopyDataWritten). */
static RLTypeRef stream_copy_property(const void *ref, bool is_read, const char *name, const char *fn) {
    rl__prop p;
    rl__stream *s = lookup(ref, is_read, name, &p, fn);
    return s ? s->ops->copy_property(s, p, fn) : NULL;
}

static bool set_property(const void *ref, bool is_read, const char *name, RLTypeRef value, const char *fn) {
    rl__prop p;
    rl__stream *s = lookup(ref, is_read, name, &p, fn);
    if (!s)
        return false;
    if (props[p].read_only)
        return rl__fail(kRLErrorInvalidArgument, fn, "%s is read-only", name);
    if (!value)
        return rl__fail(kRLErrorInvalidArgument, fn, "NULL value for %s", name);
    rl__prop_value v = {0};
    switch (props[p].type) {
    case VALUE_BOOLEAN:
        if (!rl__is_boolean(value))
            return rl__fail(kRLErrorInvalidArgument, fn, "%s takes %s; the value is %s", name,
                            type_name(props[p].type), value_kind(value));
        v.boolean = value == kRLBooleanTrue;
        break;
    case VALUE_NUMBER:
        if (!rl__is_number(value))
            return rl__fail(kRLErrorInvalidArgument, fn, "%s takes %s; the value is %s", name,
                            type_name(props[p].type), value_kind(value));
        (void)RLNumberGetValue(value, kRLNumberSInt64Type, &v.integer); /* every number fits */
        break;
    case VALUE_DATA: /* only read-only properties hold data */
        break;
    }
    return s->ops->set_property(s, p, &v, fn);
}

RLTypeRef RLReadStreamCopyProperty(RLReadStreamRef s, RLStreamPropertyKey name) {
    return stream_copy_property(s, true, name, __func__);
}

RLTypeRef RLWriteStreamCopyProperty(RLWriteStreamRef s, RLStreamPropertyKey name) {
    return stream_copy_property(s, false, name, __func__);
}

bool RLReadStreamSetProperty(RLReadStreamRef s, RLStreamPropertyKey name, RLTypeRef value) {
    return set_property(s, true, name, value, __func__);
}

bool RLWriteStreamSetProperty(RLWriteStreamRef s, RLStreamPropertyKey name, RLTypeRef value) {
    return set_property(s, false, name, value, __func__);
}

RLDataRef RLWriteStreamCopyDataWritten(RLWriteStreamRef s) {
    return stream_copy_property(s, false, kRLStreamPropertyDataWritten, __func__);
}
