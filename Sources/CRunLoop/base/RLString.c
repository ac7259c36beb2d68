/* RLString.c — reference-counted strings whose pointer is their own
 * characters (RLString.h).
 *
 * A string is one malloc'ed block: a small header, then the characters.
 * Callers hold the address of the characters, so nothing can find the
 * header by looking at the pointer alone without risking a read of memory
 * before an arbitrary user pointer. Instead every live string's address is
 * in a registry (an open-addressing hash set), and the header is computed
 * only for an address the registry knows. The generic object functions of
 * RLBase.c ask the registry (through the table this file hands them with
 * its first string, rl__object_set_string_ops) only when a pointer is not
 * a live object, so objects pay nothing.
 *
 * The registry stores addresses disguised (xor a constant), so a leaked
 * string is still reported as lost by leak checkers. A released string is
 * not freed at once: it waits in a short ring (where leak checkers see it
 * as reachable) with its first bytes cleared, so a second release reads
 * memory that is still the library's and is refused with an error.
 */
#include "RLBase.h"
#include "rl_fork.h"
#include <crunloop/RLString.h>
#include <crunloop/RLData.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct string_head {
    _Atomic long rc;
    size_t bytes; /* UTF-8 bytes, without the NUL */
    uint64_t pad; /* keeps chars 8-aligned (objects are; the magic check reads 4 bytes) */
    char chars[];
} string_head;

_Static_assert(offsetof(string_head, chars) % 8 == 0, "characters must be 8-aligned");

#define RL_STRING_DISGUISE ((uintptr_t)0x5a5a5a5a5a5a5a5aull)
#define RL_STRING_EMPTY ((uintptr_t)0)
#define RL_STRING_GONE ((uintptr_t)1) /* a deleted slot (tombstone) */
enum { RL_STRING_RING = 64 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *g_slots; /* disguised addresses, EMPTY or GONE */
static size_t g_cap, g_live, g_used; /* used = live + tombstones */
static string_head *g_ring[RL_STRING_RING]; /* released, waiting to be freed */
static size_t g_ring_next;

/* fork(): the registry's lock is held across it (rl_fork.c), so a child
 * forked while another thread makes or releases a string finds the
 * registry consistent and the lock free. */
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void fork_child(void) { pthread_mutex_unlock(&g_mu); }

/* Takes this file's place in the lock order held across fork() (rl_fork.h). */
__attribute__((constructor)) static void fork_register(void) {
    rl__fork_register(RL_FORK_STRING, fork_prepare, fork_parent, fork_child);
}

static size_t key_hash(uintptr_t key) {
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17);
}

static uintptr_t disguised_key(const void *chars) { return (uintptr_t)chars ^ RL_STRING_DISGUISE; }

/* The slot holding key, or the slot to insert it in (first tombstone on
 * its path, else the empty slot that ends it). Caller holds g_mu; g_cap > 0. */
static size_t find_slot(uintptr_t key, bool *found) {
    size_t mask = g_cap - 1, i = key_hash(key) & mask, tomb = SIZE_MAX;
    for (;;) {
        uintptr_t s = g_slots[i];
        if (s == key) {
            *found = true;
            return i;
        }
        if (s == RL_STRING_EMPTY) {
            *found = false;
            return tomb != SIZE_MAX ? tomb : i;
        }
        if (s == RL_STRING_GONE && tomb == SIZE_MAX)
            tomb = i;
        i = (i + 1) & mask;
    }
}

static bool registry_grow(void) {
    size_t cap = g_cap ? g_cap * 2 : 64;
    if (g_live * 4 < g_cap) /* mostly tombstones: rebuild at the same size */
        cap = g_cap;
    uintptr_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    uintptr_t *old = g_slots;
    size_t oldcap = g_cap;
    g_slots = slots;
    g_cap = cap;
    g_used = g_live;
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i] > RL_STRING_GONE) {
            bool found;
            g_slots[find_slot(old[i], &found)] = old[i];
        }
    }
    free(old);
    return true;
}

static bool registry_add(const void *chars) {
    pthread_mutex_lock(&g_mu);
    bool ok = true;
    if ((g_used + 1) * 2 > g_cap)
        ok = registry_grow();
    if (ok) {
        bool found;
        uintptr_t key = disguised_key(chars);
        size_t i = find_slot(key, &found);
        if (g_slots[i] == RL_STRING_EMPTY)
            g_used++;
        g_slots[i] = key;
        g_live++;
    }
    pthread_mutex_unlock(&g_mu);
    return ok;
}

static bool string_known(const void *p) {
    if (!p)
        return false;
    pthread_mutex_lock(&g_mu);
    bool found = false;
    if (g_cap)
        (void)find_slot(disguised_key(p), &found);
    pthread_mutex_unlock(&g_mu);
    return found;
}

/* Was p a string that was released and still waits in the ring? */
static bool recently_released(const void *p) {
    bool seen = false;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < RL_STRING_RING && !seen; i++)
        seen = g_ring[i] && g_ring[i]->chars == p;
    pthread_mutex_unlock(&g_mu);
    return seen;
}

static string_head *header_of(const void *chars) {
    return (string_head *)(void *)((char *)(uintptr_t)chars - offsetof(string_head, chars));
}

static bool objectlike(const char *chars) {
    uint32_t first;
    memcpy(&first, chars, sizeof first);
    return first == RL__MAGIC_ALIVE;
}

/* ---- UTF-8 ---- */

/* Decodes one code point at s[*i] (s has n bytes); false for invalid UTF-8
 * (overlong forms, surrogates, beyond U+10FFFF, truncated). */
static bool utf8_next(const unsigned char *s, size_t n, size_t *i, uint32_t *cp) {
    unsigned char c = s[*i];
    if (c < 0x80) {
        *cp = c;
        *i += 1;
        return true;
    }
    size_t len;
    uint32_t v, min;
    if ((c & 0xe0) == 0xc0) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return false;
    }
    if (n - *i < len)
        return false;
    for (size_t k = 1; k < len; k++) {
        if ((s[*i + k] & 0xc0) != 0x80)
            return false;
        v = (v << 6) | (s[*i + k] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return false;
    *cp = v;
    *i += len;
    return true;
}

/* True if s[0, n) is valid UTF-8 without NUL; *units gets its UTF-16 length. */
static bool utf8_valid(const char *s, size_t n, size_t *units) {
    size_t i = 0, u = 0;
    while (i < n) {
        uint32_t cp;
        if (s[i] == '\0' || !utf8_next((const unsigned char *)s, n, &i, &cp))
            return false;
        u += cp >= 0x10000 ? 2 : 1;
    }
    if (units)
        *units = u;
    return true;
}

static bool encoding_ok(RLStringEncoding encoding, const char *fn) {
    if (encoding == kRLStringEncodingASCII || encoding == kRLStringEncodingUTF8)
        return true;
    return rl__fail(kRLErrorInvalidArgument, fn, "unsupported encoding 0x%x (ASCII and UTF-8 only)",
                    (unsigned)encoding);
}

/* ---- creation and destruction ---- */

/* A new string holding bytes[0, n), already checked as UTF-8 without NUL. */
/* What RLBase.c calls for strings (defined below the generic functions). */
static const rl__string_ops string_ops;

static RLStringRef string_new(const char *bytes, size_t n, const char *fn) {
    /* At least an object header's worth: a string passed where an object
     * is expected is looked at as one (magic, class) before it is refused,
     * and those reads must stay inside the block. */
    size_t room = n + 1 < sizeof(rl__object) ? sizeof(rl__object) : n + 1;
    if (n > (size_t)INT32_MAX * 64) {
        rl__fail(kRLErrorInvalidArgument, fn, "string too long (%zu bytes)", n);
        return NULL;
    }
    string_head *s = calloc(1, sizeof *s + room);
    if (!s) {
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    atomic_init(&s->rc, 1);
    s->bytes = n;
    memcpy(s->chars, bytes, n);
    if (!registry_add(s->chars)) {
        free(s);
        rl__fail(kRLErrorNoMemory, fn, "out of memory");
        return NULL;
    }
    if (objectlike(s->chars))
        atomic_fetch_add_explicit(&rl__string_objectlike, 1, memory_order_relaxed);
    rl__object_set_string_ops(&string_ops);
    return s->chars;
}

/* The last reference went: out of the registry, into the ring. */
static void string_destroy(string_head *s) {
    if (objectlike(s->chars))
        atomic_fetch_sub_explicit(&rl__string_objectlike, 1, memory_order_relaxed);
    pthread_mutex_lock(&g_mu);
    bool found;
    size_t i = find_slot(disguised_key(s->chars), &found);
    if (found) {
        g_slots[i] = RL_STRING_GONE;
        g_live--;
    }
    memset(s->chars, 0, 4); /* never reads as an object's magic again */
    string_head *out = g_ring[g_ring_next];
    g_ring[g_ring_next] = s;
    g_ring_next = (g_ring_next + 1) % RL_STRING_RING;
    pthread_mutex_unlock(&g_mu);
    free(out);
}

/* ---- the generic object functions on strings (called by RLBase.c,
 * through string_ops, for a pointer string_known accepted, or to explain a
 * refusal) ---- */

static bool string_release(const void *p, const char *fn) {
    string_head *s = header_of(p);
    long rc = atomic_load_explicit(&s->rc, memory_order_relaxed);
    do {
        if (rc <= 0)
            return rl__fail(kRLErrorInvalidObject, fn, "%p was already released", p);
    } while (!atomic_compare_exchange_weak_explicit(&s->rc, &rc, rc - 1, memory_order_release,
                                                    memory_order_relaxed));
    if (rc == 1) {
        (void)atomic_load_explicit(&s->rc, memory_order_acquire);
        string_destroy(s);
    }
    return true;
}

static bool string_retain(const void *p, const char *fn) {
    string_head *s = header_of(p);
    long rc = atomic_load_explicit(&s->rc, memory_order_relaxed);
    do {
        if (rc <= 0)
            return rl__fail(kRLErrorInvalidObject, fn, "%p was already released", p);
    } while (!atomic_compare_exchange_weak_explicit(&s->rc, &rc, rc + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

static long string_retain_count(const void *p) {
    return atomic_load_explicit(&header_of(p)->rc, memory_order_relaxed);
}

static bool string_explain_released(const void *p, const char *fn) {
    if (!p || !recently_released(p))
        return false;
    rl__fail(kRLErrorInvalidObject, fn, "%p is a string that was already released", p);
    return true;
}

static RLTypeID string_type_id(void);

static const rl__string_ops string_ops = {
    .known = string_known,
    .retain = string_retain,
    .release = string_release,
    .retain_count = string_retain_count,
    .explain_released = string_explain_released,
    .type_id = string_type_id,
};

/* ---- public API ---- */

RLStringRef RLStringCreateWithBytes(RLAllocatorRef allocator, const uint8_t *bytes, RLIndex numBytes,
                                    RLStringEncoding encoding, bool isExternalRepresentation) {
    (void)allocator;
    if (numBytes < 0 || (numBytes > 0 && !bytes)) {
        rl__fail(kRLErrorInvalidArgument, __func__, numBytes < 0 ? "negative length %ld" : "NULL bytes (length %ld)",
                 (long)numBytes);
        return NULL;
    }
    if (!encoding_ok(encoding, __func__))
        return NULL;
    const char *s = (const char *)bytes;
    size_t n = (size_t)numBytes;
    if (isExternalRepresentation && encoding == kRLStringEncodingUTF8 && n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
        s += 3, n -= 3;
    if (memchr(s ? s : "", '\0', n)) {
        rl__fail(kRLErrorInvalidArgument, __func__, "the bytes contain a NUL (an RLString is a C string)");
        return NULL;
    }
    if (encoding == kRLStringEncodingASCII) {
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)s[i] >= 0x80) {
                rl__fail(kRLErrorInvalidArgument, __func__, "byte %zu (0x%02x) is not ASCII", i, (unsigned char)s[i]);
                return NULL;
            }
        }
    } else if (!utf8_valid(s, n, NULL)) {
        rl__fail(kRLErrorInvalidArgument, __func__, "the bytes are not valid UTF-8");
        return NULL;
    }
    return string_new(n ? s : "", n, __func__);
}

RLStringRef RLStringCreateWithCString(RLAllocatorRef allocator, const char *cStr, RLStringEncoding encoding) {
    if (!cStr) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL string");
        return NULL;
    }
    return RLStringCreateWithBytes(allocator, (const uint8_t *)cStr, (RLIndex)strlen(cStr), encoding, false);
}

RLStringRef RLStringCreateWithFormatAndArguments(RLAllocatorRef allocator, const void *formatOptions,
                                                 const char *format, va_list arguments) {
    (void)allocator;
    if (!format || formatOptions) {
        rl__fail(kRLErrorInvalidArgument, __func__, !format ? "NULL format" : "formatOptions must be NULL");
        return NULL;
    }
    char *text = NULL;
    int n = vasprintf(&text, format, arguments);
    if (n < 0) {
        rl__fail(kRLErrorNoMemory, __func__, "out of memory formatting \"%s\"", format);
        return NULL;
    }
    RLStringRef s = NULL;
    if (!utf8_valid(text, (size_t)n, NULL))
        rl__fail(kRLErrorInvalidArgument, __func__, "the formatted text is not valid UTF-8 or holds a NUL");
    else
        s = string_new(text, (size_t)n, __func__);
    free(text);
    return s;
}

RLStringRef RLStringCreateWithFormat(RLAllocatorRef allocator, const void *formatOptions, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    RLStringRef s = RLStringCreateWithFormatAndArguments(allocator, formatOptions, format, ap);
    va_end(ap);
    return s;
}

RLStringRef RLStringCreateCopy(RLAllocatorRef allocator, RLStringRef string) {
    (void)allocator;
    if (!string) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL string");
        return NULL;
    }
    if (string_known(string) && string_retain(string, __func__))
        return string;
    return RLStringCreateWithCString(NULL, string, kRLStringEncodingUTF8);
}

RLIndex RLStringGetLength(RLStringRef string) {
    if (!string) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL string");
        return -1;
    }
    size_t units;
    if (!utf8_valid(string, strlen(string), &units)) {
        rl__fail(kRLErrorInvalidArgument, __func__, "not valid UTF-8");
        return -1;
    }
    return (RLIndex)units;
}

RLIndex RLStringGetBytes(RLStringRef string, RLRange range, RLStringEncoding encoding, uint8_t lossByte,
                         bool isExternalRepresentation, uint8_t *buffer, RLIndex maxBufLen, RLIndex *usedBufLen) {
    (void)isExternalRepresentation; /* no byte-order mark for these encodings */
    if (usedBufLen)
        *usedBufLen = 0;
    RLIndex length = RLStringGetLength(string);
    if (length < 0 || !encoding_ok(encoding, __func__))
        return 0;
    if (range.location < 0 || range.length < 0 || range.location > length || range.length > length - range.location) {
        rl__fail(kRLErrorInvalidArgument, __func__, "range {%ld, %ld} outside the string (length %ld)",
                 (long)range.location, (long)range.length, (long)length);
        return 0;
    }
    if (maxBufLen < 0) {
        rl__fail(kRLErrorInvalidArgument, __func__, "negative buffer length %ld", (long)maxBufLen);
        return 0;
    }
    const unsigned char *s = (const unsigned char *)string;
    size_t n = strlen(string), i = 0;
    RLIndex unit = 0, done = 0, used = 0, end = range.location + range.length;
    while (i < n && unit < end) {
        size_t at = i;
        uint32_t cp;
        (void)utf8_next(s, n, &i, &cp); /* valid: GetLength checked it */
        RLIndex width = cp >= 0x10000 ? 2 : 1;
        if (unit + width <= range.location) {
            unit += width;
            continue;
        }
        /* Half of a surrogate pair (the range starts or ends inside one)
         * is a character no byte encoding holds. */
        bool half = unit < range.location || unit + width > end;
        if (half)
            width = 1;
        const unsigned char *out = s + at;
        size_t outn = i - at;
        const uint8_t loss[2] = {lossByte, lossByte};
        if (half || (encoding == kRLStringEncodingASCII && cp >= 0x80)) {
            if (!lossByte)
                break;
            out = loss, outn = (size_t)width; /* one per UTF-16 unit, as CF */
        }
        if (buffer) {
            if (used + (RLIndex)outn > maxBufLen)
                break;
            memcpy(buffer + used, out, outn);
        }
        used += (RLIndex)outn;
        done += width;
        unit = unit < range.location ? range.location + 1 : unit + width;
    }
    if (usedBufLen)
        *usedBufLen = used;
    return done;
}

bool RLStringGetCString(RLStringRef string, char *buffer, RLIndex bufferSize, RLStringEncoding encoding) {
    if (!string || !buffer || bufferSize <= 0)
        return rl__fail(kRLErrorInvalidArgument, __func__, !string ? "NULL string" : "no buffer (size %ld)",
                        (long)bufferSize);
    if (!encoding_ok(encoding, __func__))
        return false;
    size_t n = strlen(string);
    if (!utf8_valid(string, n, NULL))
        return rl__fail(kRLErrorInvalidArgument, __func__, "not valid UTF-8");
    if (encoding == kRLStringEncodingASCII) {
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)string[i] >= 0x80)
                return rl__fail(kRLErrorInvalidArgument, __func__, "the string is not ASCII");
    }
    if (n + 1 > (size_t)bufferSize)
        return rl__fail(kRLErrorInvalidArgument, __func__, "needs %zu bytes, the buffer has %ld", n + 1,
                        (long)bufferSize);
    memcpy(buffer, string, n + 1);
    return true;
}

/* Strings are not rl__objects and have no class: this byte's address
 * stands for their type. */
static const char string_type;

RLTypeID RLStringGetTypeID(void) { return rl__type_id(&string_type); }
static RLTypeID string_type_id(void) { return RLStringGetTypeID(); }

const char *RLStringGetCStringPtr(RLStringRef string, RLStringEncoding encoding) {
    if (!string) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL string");
        return NULL;
    }
    if (encoding == kRLStringEncodingUTF8)
        return string;
    if (encoding == kRLStringEncodingASCII) {
        for (const unsigned char *p = (const unsigned char *)string; *p; p++)
            if (*p >= 0x80)
                return NULL;
        return string;
    }
    return NULL;
}

/* UTF-16 code-unit order of code points: below the surrogates, then the
 * supplementary planes (their units are surrogates), then U+E000..U+FFFF. */
static uint64_t utf16_rank(uint32_t cp) {
    if (cp < 0xd800)
        return cp;
    if (cp >= 0x10000)
        return 0x100000000ull + cp;
    return 0x200000000ull + cp;
}

static uint32_t fold(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp; }

RLComparisonResult RLStringCompare(RLStringRef a, RLStringRef b, RLStringCompareFlags options) {
    if (!a || !b) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL string");
        return a == b ? kRLCompareEqualTo : (!a ? kRLCompareLessThan : kRLCompareGreaterThan);
    }
    if (options & ~(kRLCompareCaseInsensitive | kRLCompareNonliteral))
        rl__fail(kRLErrorInvalidArgument, __func__, "unsupported options 0x%lx (ignored)",
                 (unsigned long)(options & ~(kRLCompareCaseInsensitive | kRLCompareNonliteral)));
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t nx = strlen(a), ny = strlen(b), i = 0, j = 0;
    while (i < nx && j < ny) {
        uint32_t cx, cy;
        if (!utf8_next(x, nx, &i, &cx))
            cx = x[i++]; /* not UTF-8: compare the byte */
        if (!utf8_next(y, ny, &j, &cy))
            cy = y[j++];
        if (options & kRLCompareCaseInsensitive)
            cx = fold(cx), cy = fold(cy);
        if (cx != cy)
            return utf16_rank(cx) < utf16_rank(cy) ? kRLCompareLessThan : kRLCompareGreaterThan;
    }
    if (i < nx)
        return kRLCompareGreaterThan;
    if (j < ny)
        return kRLCompareLessThan;
    return kRLCompareEqualTo;
}
