/* RLErrorObject.c — RLErrorRef, CF's CFErrorRef: an immutable domain and
 * code (RLError.h). Streams make them for RLReadStreamCopyError. */
#include "RLBase.h"
#include <crunloop/RLString.h>

#include <stdio.h>
#include <string.h>

const RLErrorDomain kRLErrorDomainPOSIX = "NSPOSIXErrorDomain";
const RLErrorDomain kRLErrorDomainOSStatus = "NSOSStatusErrorDomain";
const RLErrorDomain kRLErrorDomainMach = "NSMachErrorDomain";
const RLErrorDomain kRLErrorDomainCocoa = "NSCocoaErrorDomain";

struct RLErrorObject {
    rl__object base;
    RLStringRef domain; /* a library string, owned */
    RLIndex code;
};

static void error_finalize(void *obj) { RLRelease(((struct RLErrorObject *)obj)->domain); }

static char *error_describe(const void *obj) {
    const struct RLErrorObject *e = obj;
    char *s = NULL;
    if (asprintf(&s, "<RLErrorObject %p>{domain = %s, code = %ld}", obj, e->domain, (long)e->code) < 0)
        return NULL;
    return s;
}

static const rl__class error_class = {"RLErrorObject", error_finalize, NULL, error_describe};

RLTypeID RLErrorGetTypeID(void) { return rl__type_id(&error_class); }

RLErrorRef RLErrorCreate(RLAllocatorRef allocator, RLErrorDomain domain, RLIndex code, const void *userInfo) {
    (void)allocator;
    if (!domain || !*domain)
        return rl__fail(kRLErrorInvalidArgument, __func__, "NULL or empty domain"), NULL;
    if (userInfo)
        return rl__fail(kRLErrorInvalidArgument, __func__, "userInfo must be NULL (no dictionaries here)"), NULL;
    RLStringRef copy = RLStringCreateWithCString(NULL, domain, kRLStringEncodingUTF8);
    if (!copy)
        return NULL; /* invalid UTF-8 or no memory: error set */
    struct RLErrorObject *e = rl__object_alloc(&error_class, sizeof *e, __func__);
    if (!e) {
        RLRelease(copy);
        return NULL;
    }
    e->domain = copy;
    e->code = code;
    return e;
}

static const struct RLErrorObject *checked(RLErrorRef err, const char *fn) {
    return rl__object_check(err, &error_class, fn) ? err : NULL;
}

RLErrorDomain RLErrorGetDomain(RLErrorRef err) {
    const struct RLErrorObject *e = checked(err, __func__);
    return e ? e->domain : NULL;
}

RLIndex RLErrorGetCode(RLErrorRef err) {
    const struct RLErrorObject *e = checked(err, __func__);
    return e ? e->code : 0;
}

RLStringRef RLErrorCopyDescription(RLErrorRef err) {
    const struct RLErrorObject *e = checked(err, __func__);
    if (!e)
        return NULL;
    if (strcmp(e->domain, kRLErrorDomainPOSIX) == 0 && e->code > 0 && e->code < 4096) {
        char buf[128];
        const char *text = strerror_r((int)e->code, buf, sizeof buf);
        return RLStringCreateWithFormat(NULL, NULL, "The operation couldn't be completed. %s", text);
    }
    return RLStringCreateWithFormat(NULL, NULL, "The operation couldn't be completed. (%s error %ld.)", e->domain,
                                    (long)e->code);
}
