/* CFNumber and CFBoolean values: what each type code stores and gives
 * back, which conversions CFNumberGetValue calls exact (true) and what it
 * stores when they are not (false), whether a number is a floating-point
 * one, and comparisons between integers and floating-point numbers. (Not
 * CFNumberGetType or CFNumberGetByteSize: CF on Linux reports a 32-bit
 * type for small CFIndex and long long values, after its storage; ours
 * reports the creation type's own — Tests/c/test_number.c.) */
#include "diff.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static const char *type_name(CFNumberType t) {
    static const char *names[] = {"?",      "SInt8",  "SInt16", "SInt32",   "SInt64",  "Float32",
                                  "Float64", "Char",   "Short",  "Int",      "Long",    "LongLong",
                                  "Float",   "Double", "CFIndex", "NSInteger", "CGFloat"};
    return t >= 1 && t <= 16 ? names[t] : "?";
}

/* Every read of n as each type: "type=value/ok". */
static void read_all(const char *label, CFNumberRef n) {
    char line[1024];
    int at = snprintf(line, sizeof line, "%s: float %d |", label, (int)CFNumberIsFloatType(n));
    for (CFNumberType t = 1; t <= 16; t++) {
        union {
            int8_t i8; int16_t i16; int32_t i32; int64_t i64; float f; double d; char c; short s; int i;
            long l; long long ll; CFIndex x;
        } u;
        memset(&u, 0, sizeof u);
        Boolean ok = CFNumberGetValue(n, t, &u);
        char v[64];
        switch (t) {
        case kCFNumberSInt8Type: snprintf(v, sizeof v, "%d", u.i8); break;
        case kCFNumberSInt16Type: snprintf(v, sizeof v, "%d", u.i16); break;
        case kCFNumberSInt32Type: snprintf(v, sizeof v, "%d", u.i32); break;
        case kCFNumberSInt64Type: snprintf(v, sizeof v, "%lld", (long long)u.i64); break;
        case kCFNumberFloat32Type: case kCFNumberFloatType: snprintf(v, sizeof v, "%.9g", u.f); break;
        case kCFNumberFloat64Type: case kCFNumberDoubleType: case kCFNumberCGFloatType:
            snprintf(v, sizeof v, "%.17g", u.d); break;
        case kCFNumberCharType: snprintf(v, sizeof v, "%d", (int)u.c); break;
        case kCFNumberShortType: snprintf(v, sizeof v, "%d", u.s); break;
        case kCFNumberIntType: snprintf(v, sizeof v, "%d", u.i); break;
        case kCFNumberLongType: case kCFNumberNSIntegerType: snprintf(v, sizeof v, "%ld", u.l); break;
        case kCFNumberLongLongType: snprintf(v, sizeof v, "%lld", u.ll); break;
        case kCFNumberCFIndexType: snprintf(v, sizeof v, "%ld", (long)u.x); break;
        }
        at += snprintf(line + at, sizeof line - (size_t)at, " %s=%s/%d", type_name(t), v, (int)ok);
    }
    trace("%s", line);
}

static CFNumberRef make(CFNumberType t, const void *p) {
    CFNumberRef n = CFNumberCreate(NULL, t, p);
    if (!n) trace("create %s: NULL", type_name(t));
    return n;
}

#define SHOW(label, type, ctype, value)                                                                              \
    do {                                                                                                             \
        ctype v_ = (value);                                                                                          \
        CFNumberRef n_ = make(type, &v_);                                                                            \
        if (n_) {                                                                                                    \
            read_all(label, n_);                                                                                     \
            CFRelease(n_);                                                                                           \
        }                                                                                                            \
    } while (0)

static const char *cmp_name(CFComparisonResult r) {
    return r == kCFCompareLessThan ? "<" : r == kCFCompareGreaterThan ? ">" : "=";
}

void scenario(void) {
    trace("booleans: true %d false %d", (int)CFBooleanGetValue(kCFBooleanTrue), (int)CFBooleanGetValue(kCFBooleanFalse));
    SHOW("int 42", kCFNumberIntType, int, 42);
    SHOW("sint8 -5", kCFNumberSInt8Type, int8_t, -5);
    SHOW("char 65", kCFNumberCharType, char, 65);
    SHOW("short -300", kCFNumberShortType, short, -300);
    SHOW("long 300", kCFNumberLongType, long, 300);
    SHOW("sint32 70000", kCFNumberSInt32Type, int32_t, 70000);
    SHOW("sint64 2^53+1", kCFNumberSInt64Type, int64_t, (1LL << 53) + 1);
    SHOW("sint64 max", kCFNumberSInt64Type, int64_t, INT64_MAX);
    SHOW("sint64 min", kCFNumberSInt64Type, int64_t, INT64_MIN);
    SHOW("cfindex -1", kCFNumberCFIndexType, CFIndex, -1);
    SHOW("cfindex 2^40", kCFNumberCFIndexType, CFIndex, (CFIndex)1 << 40);
    SHOW("nsinteger -7", kCFNumberNSIntegerType, long, -7);
    SHOW("longlong 5", kCFNumberLongLongType, long long, 5);
    SHOW("sint16 -2", kCFNumberSInt16Type, int16_t, -2);
    SHOW("double 3.75", kCFNumberDoubleType, double, 3.75);
    SHOW("double -3.75", kCFNumberDoubleType, double, -3.75);
    SHOW("double 0.1", kCFNumberFloat64Type, double, 0.1);
    SHOW("double 1e20", kCFNumberDoubleType, double, 1e20);
    SHOW("double -1e20", kCFNumberDoubleType, double, -1e20);
    SHOW("double 2^40", kCFNumberDoubleType, double, 1099511627776.0);
    SHOW("float 2.5", kCFNumberFloatType, float, 2.5f);
    SHOW("float32 0.1", kCFNumberFloat32Type, float, 0.1f);
    SHOW("cgfloat 7", kCFNumberCGFloatType, double, 7.0);
    SHOW("double 1e300", kCFNumberDoubleType, double, 1e300);
    SHOW("double -0", kCFNumberDoubleType, double, -0.0);
    SHOW("double inf", kCFNumberDoubleType, double, INFINITY);

    int a = 3, b = 4;
    double c = 3.0, d = 3.5, e = -1e300;
    CFNumberRef na = make(kCFNumberIntType, &a), nb = make(kCFNumberIntType, &b);
    CFNumberRef nc = make(kCFNumberDoubleType, &c), nd = make(kCFNumberDoubleType, &d);
    CFNumberRef ne = make(kCFNumberDoubleType, &e);
    trace("compare 3 ? 4: %s; 4 ? 3: %s; 3 ? 3.0: %s; 3 ? 3.5: %s; 3.5 ? 4: %s; -1e300 ? 3: %s; 3 ? 3: %s",
          cmp_name(CFNumberCompare(na, nb, NULL)), cmp_name(CFNumberCompare(nb, na, NULL)),
          cmp_name(CFNumberCompare(na, nc, NULL)), cmp_name(CFNumberCompare(na, nd, NULL)),
          cmp_name(CFNumberCompare(nd, nb, NULL)), cmp_name(CFNumberCompare(ne, na, NULL)),
          cmp_name(CFNumberCompare(na, na, NULL)));
    CFRelease(na); CFRelease(nb); CFRelease(nc); CFRelease(nd); CFRelease(ne);
}
