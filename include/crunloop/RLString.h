/*
 * RLString.h — reference-counted strings that are C strings (CFString's
 * small subset that run-loop and message-port code uses).
 *
 * An RLStringRef is a `const char *`: the pointer a Create or Copy function
 * returns points at the string's characters (UTF-8, NUL-terminated, never
 * changing), so it can be printed, passed as a run-loop mode or a port
 * name, or handed to any C function that takes a `const char *`. It is
 * also an object: RLRetain, RLRelease, RLGetRetainCount, RLGetTypeName
 * ("RLString") and RLCopyDescription (the characters, malloc'ed) accept it.
 *
 * What a caller may rely on:
 *   - Create/Copy rule, as for every object: give a string back with
 *     RLRelease, never free(). RLRelease refuses, with an error and
 *     nothing freed, a pointer that is not a live RLString or object: a
 *     string literal, a malloc'ed copy, a string released already.
 *   - The functions that read a string (GetLength, GetBytes, GetCString,
 *     GetCStringPtr, Compare) take any NUL-terminated UTF-8 C string,
 *     library-made or not (a literal, a CFSTR, a mode name).
 *   - Lengths and ranges count UTF-16 code units, as CF's do (a character
 *     outside the Basic Multilingual Plane counts 2); for ASCII text that
 *     is the number of bytes.
 *   - A string never holds a NUL character: creating one from bytes that
 *     contain a NUL (or invalid UTF-8, or non-ASCII bytes said to be ASCII)
 *     fails with kRLErrorInvalidArgument.
 *   - Thread-safe: a string never changes; retain and release from any
 *     thread.
 *
 * How RLRelease tells a string from an object without reading memory it
 * does not own: the library keeps the address of every live string in a
 * registry that RLRelease (and the other generic functions) consult only
 * when the pointer is not a live object; no byte before the pointer is
 * ever read unless the registry knows it. A released string's memory
 * waits a while before it is freed, so a second release is refused
 * cleanly instead of reading freed memory.
 */
#ifndef CRUNLOOP_RLSTRING_H
#define CRUNLOOP_RLSTRING_H

#include <crunloop/RLBase.h>
#include <crunloop/RLData.h>

#include <stdarg.h>
#include <stdint.h>

RL_EXTERN_C_BEGIN

/* A library string: its characters (see the header comment). */
typedef const char *RLStringRef;

/* Encodings (CF's values). Only these two are supported. */
typedef uint32_t RLStringEncoding;
#define kRLStringEncodingASCII ((RLStringEncoding)0x0600)
#define kRLStringEncodingUTF8 ((RLStringEncoding)0x08000100)

/* RLStringCompare's result (CFComparisonResult). */
typedef RL_ENUM(RLIndex, RLComparisonResult){
    kRLCompareLessThan = -1,
    kRLCompareEqualTo = 0,
    kRLCompareGreaterThan = 1,
};

/* RLStringCompare's options (CF's values); others are refused. */
typedef RLOptionFlags RLStringCompareFlags;
#define kRLCompareCaseInsensitive ((RLStringCompareFlags)1)  /* ASCII letters only */
#define kRLCompareNonliteral ((RLStringCompareFlags)16)     /* accepted: strings compare literally anyway */

/* A copy of the NUL-terminated cStr in `encoding`. Create rule. NULL
 * (error set) for NULL, an unsupported encoding or text not in it. */
RL_EXPORT RLStringRef RL_NULLABLE RLStringCreateWithCString(RLAllocatorRef RL_NULLABLE allocator,
                                                            const char *RL_NULLABLE cStr, RLStringEncoding encoding);

/* A string of the numBytes bytes at `bytes` in `encoding`. Create rule.
 * isExternalRepresentation is accepted (a UTF-8 byte-order mark is then
 * skipped). NULL (error set) for bad arguments, a NUL byte, or bytes not
 * valid in the encoding. */
RL_EXPORT RLStringRef RL_NULLABLE RLStringCreateWithBytes(RLAllocatorRef RL_NULLABLE allocator,
                                                          const uint8_t *RL_NULLABLE bytes, RLIndex numBytes,
                                                          RLStringEncoding encoding, bool isExternalRepresentation);

/* A string formatted as by printf (CF's %@ is not supported). formatOptions
 * (CF's CFDictionaryRef) must be NULL. Create rule. NULL (error set) for a
 * NULL format, formatOptions, no memory, or a result that is not text. */
RL_EXPORT RLStringRef RL_NULLABLE RLStringCreateWithFormat(RLAllocatorRef RL_NULLABLE allocator,
                                                           const void *RL_NULLABLE formatOptions,
                                                           const char *RL_NULLABLE format, ...)
    __attribute__((format(printf, 3, 4)));
RL_EXPORT RLStringRef RL_NULLABLE RLStringCreateWithFormatAndArguments(RLAllocatorRef RL_NULLABLE allocator,
                                                                       const void *RL_NULLABLE formatOptions,
                                                                       const char *RL_NULLABLE format,
                                                                       va_list arguments)
    __attribute__((format(printf, 3, 0)));

/* A string with the same characters as `string` (any C string). Create
 * rule: for a library string this is the same string, retained. */
RL_EXPORT RLStringRef RL_NULLABLE RLStringCreateCopy(RLAllocatorRef RL_NULLABLE allocator,
                                                     RLStringRef RL_NULLABLE string);

/* The length in UTF-16 code units; -1 (error set) for NULL or a string
 * that is not valid UTF-8. */
RL_EXPORT RLIndex RLStringGetLength(RLStringRef RL_NULLABLE string);

/* Converts the characters of `range` (UTF-16 units) to `encoding` into
 * buffer (at most maxBufLen bytes; buffer may be NULL to measure only).
 * A character the encoding cannot hold becomes lossByte, or, if lossByte
 * is 0, ends the conversion. Returns the number of UTF-16 units converted
 * and stores the bytes written (or needed) in *usedBufLen (may be NULL).
 * 0 (error set) for NULL, an unsupported encoding or a range outside the
 * string. */
RL_EXPORT RLIndex RLStringGetBytes(RLStringRef RL_NULLABLE string, RLRange range, RLStringEncoding encoding,
                                   uint8_t lossByte, bool isExternalRepresentation, uint8_t *RL_NULLABLE buffer,
                                   RLIndex maxBufLen, RLIndex *RL_NULLABLE usedBufLen);

/* Copies the whole string, NUL-terminated, into buffer. False (error set,
 * nothing promised about buffer) if it does not fit, the encoding cannot
 * hold it, or an argument is bad. */
RL_EXPORT bool RLStringGetCString(RLStringRef RL_NULLABLE string, char *RL_NULLABLE buffer, RLIndex bufferSize,
                                  RLStringEncoding encoding);

/* The characters themselves when they are already in `encoding` (Get
 * rule: valid as long as the string), else NULL (no error: use
 * RLStringGetCString, as with CF). */
RL_EXPORT const char *RL_NULLABLE RLStringGetCStringPtr(RLStringRef RL_NULLABLE string, RLStringEncoding encoding);

/* The type ID of library strings (RLGetTypeID of one; a literal or other
 * plain C string is not an object: 0, error set). */
RL_EXPORT RLTypeID RLStringGetTypeID(void);

/* Orders two strings by UTF-16 code unit (as CF's literal compare).
 * NULL (error set) orders before any string. Unsupported option bits set
 * the error and are ignored. */
RL_EXPORT RLComparisonResult RLStringCompare(RLStringRef RL_NULLABLE a, RLStringRef RL_NULLABLE b,
                                             RLStringCompareFlags options);

RL_EXTERN_C_END

#endif /* CRUNLOOP_RLSTRING_H */
