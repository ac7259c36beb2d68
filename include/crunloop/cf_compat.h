/*
 * cf_compat.h — CoreFoundation run-loop names on top of CRunLoop.
 *
 * Include this header (it is not part of crunloop.h) instead of
 * <CoreFoundation/CoreFoundation.h> and CF run-loop code — the listings of
 * Apple's "Run Loops" chapter, the usual "CFRunLoopRun until CFRunLoopStop"
 * worker-thread pattern — compiles on Linux unchanged and runs on CRunLoop:
 *
 *     #include <crunloop/cf_compat.h>
 *     CFRunLoopSourceContext context = {0, NULL, NULL, NULL, NULL, NULL, NULL,
 *                                       schedule, cancel, perform};
 *     CFRunLoopSourceRef source = CFRunLoopSourceCreate(NULL, 0, &context);
 *     CFRunLoopAddSource(CFRunLoopGetCurrent(), source, kCFRunLoopDefaultMode);
 *     SInt32 result = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 10, true);
 *
 * Every name below is a plain alias (a typedef or a macro) of its RL
 * counterpart, so the code calls CRunLoop directly: no wrapper, no copy.
 * Do not include it together with the real CoreFoundation headers.
 *
 * What maps:
 *   - types: CFRunLoopRef, CFRunLoopSourceRef, CFRunLoopTimerRef,
 *     CFRunLoopObserverRef, their Context structs and CallBack types,
 *     CFRunLoopRunResult, CFRunLoopActivity, CFRunLoopMode, CFTypeRef,
 *     CFAllocatorRef, CFIndex, CFOptionFlags, CFHashCode, CFTimeInterval,
 *     CFAbsoluteTime, CFRange, Boolean, SInt8…SInt64, UInt8…UInt64,
 *     OSStatus, and `nil` (as MacTypes.h gives it to C code on Darwin);
 *   - constants: kCFRunLoopDefaultMode, kCFRunLoopCommonModes, the
 *     kCFRunLoopRun… result codes, the activity bits, kCFAllocatorDefault
 *     (and the other allocator names, all NULL but kCFAllocatorNull,
 *     "do not free"), TRUE/FALSE;
 *   - every function that the toolchain's CFRunLoop.h, CFSocket.h,
 *     CFStream.h and CFMessagePort.h declare, except those listed in
 *     scripts/cf-surface-exclusions.txt with the reason
 *     (scripts/check-cf-surface.sh checks it in `make check`);
 *   - CFTypeID, CFGetTypeID and every …GetTypeID of those headers;
 *   - CFError (RLError.h): CFErrorRef, CFErrorCreate (userInfo NULL),
 *     CFErrorGetDomain, CFErrorGetCode, CFErrorCopyDescription, the
 *     kCFErrorDomain… names — what CFReadStreamCopyError returns;
 *   - CFURL for files (RLURL.h): CFURLCreateFromFileSystemRepresentation,
 *     CFURLCreateWithFileSystemPath (kCFURLPOSIXPathStyle),
 *     CFURLGetFileSystemRepresentation, CFURLCopyFileSystemPath,
 *     CFURLHasDirectoryPath — what the file streams take;
 *   - every CFRunLoop…, CFRunLoopSource…, CFRunLoopTimer… and
 *     CFRunLoopObserver… function, the CFFileDescriptor… API, the CFSocket…
 *     and CFReadStream…/CFWriteStream… APIs (sections at the end),
 *     CFAbsoluteTimeGetCurrent, CFRetain, CFRelease, CFGetRetainCount,
 *     CFAllocatorAllocate/CFAllocatorDeallocate (malloc/free), CFRangeMake;
 *   - CFMessagePort (RLMessagePort.h): CreateLocal, CreateRemote,
 *     SendRequest with CF's result codes (kCFMessagePortSuccess …
 *     kCFMessagePortBecameInvalidError), CreateRunLoopSource, Invalidate,
 *     IsValid, IsRemote, GetName, SetName, GetContext, Get/SetInvalidationCallBack,
 *     the Context, CallBack and InvalidationCallBack types;
 *   - CFData (RLData.h): CFDataCreate, CFDataGetLength, CFDataGetBytePtr,
 *     CFDataGetBytes;
 *   - CFBoolean and CFNumber (RLNumber.h): kCFBooleanTrue, kCFBooleanFalse,
 *     CFBooleanGetValue, CFNumberCreate, CFNumberGetValue, CFNumberGetType,
 *     CFNumberGetByteSize, CFNumberIsFloatType, CFNumberCompare and the
 *     kCFNumber…Type codes — the values of stream properties;
 *   - stream properties: CFReadStreamCopyProperty, CFWriteStreamCopyProperty,
 *     CFReadStreamSetProperty, CFWriteStreamSetProperty, and
 *     kCFStreamPropertyAppendToFile, kCFStreamPropertyFileCurrentOffset,
 *     kCFStreamPropertyDataWritten, kCFStreamPropertySocketNativeHandle,
 *     kCFStreamPropertyShouldCloseNativeSocket;
 *   - CFString, a subset (RLString.h): CFSTR, CFStringCreateWithCString,
 *     CFStringCreateWithBytes, CFStringCreateWithFormat (printf formats),
 *     CFStringCreateWithFormatAndArguments, CFStringCreateCopy,
 *     CFStringGetLength, CFStringGetBytes, CFStringGetCString,
 *     CFStringGetCStringPtr, CFStringCompare (with kCFCompareCaseInsensitive),
 *     kCFStringEncodingASCII and kCFStringEncodingUTF8;
 *   - CFArray of strings (RLArray.h): CFArrayCreate (the callbacks are
 *     ignored; the strings are copied), CFArrayGetCount,
 *     CFArrayGetValueAtIndex, CFRelease — what CFRunLoopCopyAllModes
 *     returns and CFRunLoopPerformBlock takes.
 *
 * Ownership is CF's: what a Create or Copy function returns is released
 * with CFRelease — CFRunLoopCopyCurrentMode's string and
 * CFRunLoopCopyAllModes' array included; a Get function's result is not.
 *
 * What differs (the RL types show through):
 *   - CFStringRef and CFRunLoopMode are `const char *` (UTF-8). A string a
 *     Create/Copy function returns is a library string (RLString.h): a C
 *     string that is also an object, released with CFRelease. CFSTR("…")
 *     is the literal itself; every function that reads a string takes a
 *     literal or any C string, but CFRelease of a literal is refused with
 *     an error (CF lets it pass). The default mode's name is
 *     "kRLRunLoopDefaultMode", not "kCFRunLoopDefaultMode".
 *   - CFStringCreateWithFormat takes printf formats: CF's %@ does not
 *     exist, and formatOptions must be NULL. Only ASCII and UTF-8
 *     encodings; a string never holds a NUL character.
 *   - The strings of a CFArray belong to it (CFArrayGetValueAtIndex is a
 *     Get function): CFRetain of one fails; copy it with
 *     CFStringCreateCopy to keep it beyond the array.
 *   - A context's copyDescription returns a malloc'ed `char *`, not a
 *     CFStringRef; callbacks written as returning CFStringRef do not match.
 *   - Functions that return void in CF return bool here (false: misuse, see
 *     RLErrorGetLast()); CFRunLoopRun returns its result code. Callers that
 *     ignore the result are unaffected.
 *   - Boolean is C `bool`, not unsigned char; TRUE/FALSE and true/false work.
 *   - CFRunLoopPerformBlock takes, as CF's, one mode (kCFRunLoopCommonModes
 *     included) or a CFArrayRef of modes; the array form is chosen by the
 *     argument's static type (C11 _Generic; overloads in C++), so pass the
 *     array as a CFArrayRef, not cast to CFTypeRef. The function-pointer
 *     twins are RLRunLoopPerformFunction and RLRunLoopPerformFunctionInModes.
 *   - CFMessagePortSendRequest does not run the caller's run loop while it
 *     waits for a reply (see RLMessagePort.h); port names are per user.
 *   - Allocators are accepted and ignored (pass NULL or kCFAllocatorDefault),
 *     except a deallocator that takes over memory: CFReadStreamCreateWithBytesNoCopy's
 *     frees with free() for NULL, nothing for kCFAllocatorNull, and refuses
 *     any other allocator.
 *   - CFTypeID values differ from CF's and may change from run to run:
 *     compare them (CFGetTypeID(x) == CFRunLoopGetTypeID()), do not store
 *     them.
 *   - CFURL is file paths only (POSIX style); CFError has no user-info
 *     dictionary (CFErrorCreate's userInfo must be NULL).
 *   - Timer tolerance works (Darwin semantics), unlike CF on Linux.
 *   - CFNumberGetType reports the sized type of the creation's type code
 *     (CF on Linux a 32-bit one for small CFIndex and long long values).
 *     Setting a stream property to a value of the wrong
 *     type, or a negative file offset, fails (CF accepts some of them);
 *     kCFStreamPropertyAppendToFile can be read back (CF's copy returns
 *     NULL). See RLStream.h for each property.
 *
 * What does not map (no counterpart in CRunLoop, so such code does not
 * compile): version-1 sources (CFRunLoopSourceContext1, Mach ports),
 * CFMachPort, CFMessagePortSetDispatchQueue, CFString
 * beyond the above, CFDictionary, CFMutableData, CFArray beyond the above
 * and the rest of CoreFoundation, CFURL beyond file paths,
 * CFEqual/CFHash/CFCopyDescription, Objective-C toll-free bridging.
 */
#ifndef CRUNLOOP_CF_COMPAT_H
#define CRUNLOOP_CF_COMPAT_H

#include <crunloop/crunloop.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

RL_EXTERN_C_BEGIN

/* ---- Base types ------------------------------------------------------ */

typedef RLTypeRef CFTypeRef;
typedef RLAllocatorRef CFAllocatorRef;
typedef RLIndex CFIndex;
typedef RLOptionFlags CFOptionFlags;
typedef RLHashCode CFHashCode;
typedef RLTimeInterval CFTimeInterval;
typedef RLAbsoluteTime CFAbsoluteTime;
typedef bool Boolean;
typedef int8_t SInt8;
typedef uint8_t UInt8;
typedef int16_t SInt16;
typedef uint16_t UInt16;
typedef int32_t SInt32;
typedef uint32_t UInt32;
typedef int64_t SInt64;
typedef uint64_t UInt64;

/* CF's status type (MacTypes.h), as the guide's listings return it. */
typedef SInt32 OSStatus;
#ifndef nil
/* The null object pointer CF code on Darwin gets from MacTypes.h. */
#define nil NULL
#endif

#ifndef TRUE
#define TRUE true
#endif
#ifndef FALSE
#define FALSE false
#endif

/* CFRange (RLData.h). */
typedef RLRange CFRange;
#define CFRangeMake RLRangeMake

#define kCFAllocatorDefault ((RLAllocatorRef)NULL)
#define kCFAllocatorSystemDefault ((RLAllocatorRef)NULL)
#define kCFAllocatorMalloc ((RLAllocatorRef)NULL)
/* "Do not free" (RLBase.h): told from NULL by the deallocator parameters
 * (CFReadStreamCreateWithBytesNoCopy's), ignored elsewhere. */
#define kCFAllocatorNull kRLAllocatorNull
#define kCFAbsoluteTimeIntervalSince1970 kRLAbsoluteTimeIntervalSince1970

#define CFAbsoluteTimeGetCurrent RLAbsoluteTimeGetCurrent
#define CFRetain RLRetain
#define CFRelease RLRelease
#define CFGetRetainCount RLGetRetainCount

/* Memory from an allocator (malloc/free; the allocator and hint are
 * ignored). NULL for a size <= 0, as CF. */
static inline void *CFAllocatorAllocate(CFAllocatorRef allocator, CFIndex size, CFOptionFlags hint) {
    (void)allocator;
    (void)hint;
    return size > 0 ? malloc((size_t)size) : NULL;
}
static inline void CFAllocatorDeallocate(CFAllocatorRef allocator, void *ptr) {
    if (allocator != kRLAllocatorNull) /* CF's null allocator frees nothing */
        free(ptr);
}

/* Type IDs (RLBase.h): compare them, do not store them (the values may
 * change between runs). Each object family's …GetTypeID is mapped in its
 * section. */
typedef RLTypeID CFTypeID;
#define CFGetTypeID RLGetTypeID

/* ---- Strings (RLString.h) -------------------------------------------- */

/* A CFStringRef is an RLStringRef: a `const char *` to UTF-8 text. Those a
 * Create/Copy function returns are library strings, released with
 * CFRelease; every reading function also takes a plain C string. */
typedef RLStringRef CFStringRef;
/* A string constant from a literal, as CF's CFSTR: the literal itself (not
 * a library string: do not CFRelease it — it is refused with an error). */
#define CFSTR(cStr) ("" cStr "")

typedef RLStringEncoding CFStringEncoding;
#define kCFStringEncodingASCII kRLStringEncodingASCII
#define kCFStringEncodingUTF8 kRLStringEncodingUTF8

typedef RLComparisonResult CFComparisonResult;
#define kCFCompareLessThan kRLCompareLessThan
#define kCFCompareEqualTo kRLCompareEqualTo
#define kCFCompareGreaterThan kRLCompareGreaterThan
typedef RLStringCompareFlags CFStringCompareFlags;
#define kCFCompareCaseInsensitive kRLCompareCaseInsensitive
#define kCFCompareNonliteral kRLCompareNonliteral

/* CF's formatOptions is a CFDictionaryRef; only NULL is accepted. */
typedef const void *CFDictionaryRef;

#define CFStringCreateWithCString RLStringCreateWithCString
#define CFStringCreateWithBytes RLStringCreateWithBytes
#define CFStringCreateWithFormat RLStringCreateWithFormat
#define CFStringCreateWithFormatAndArguments RLStringCreateWithFormatAndArguments
#define CFStringCreateCopy RLStringCreateCopy
#define CFStringGetLength RLStringGetLength
#define CFStringGetBytes RLStringGetBytes
#define CFStringGetCString RLStringGetCString
#define CFStringGetCStringPtr RLStringGetCStringPtr
#define CFStringCompare RLStringCompare
#define CFStringGetTypeID RLStringGetTypeID

/* ---- Data (RLData.h) ------------------------------------------------- */

typedef RLDataRef CFDataRef;
#define CFDataCreate RLDataCreate
#define CFDataGetLength RLDataGetLength
#define CFDataGetBytePtr RLDataGetBytePtr
#define CFDataGetBytes RLDataGetBytes

/* ---- Booleans and numbers (RLNumber.h) -------------------------------- */

typedef RLBooleanRef CFBooleanRef;
#define kCFBooleanTrue kRLBooleanTrue
#define kCFBooleanFalse kRLBooleanFalse
#define CFBooleanGetValue RLBooleanGetValue

typedef RLNumberRef CFNumberRef;
typedef RLNumberType CFNumberType;
#define kCFNumberSInt8Type kRLNumberSInt8Type
#define kCFNumberSInt16Type kRLNumberSInt16Type
#define kCFNumberSInt32Type kRLNumberSInt32Type
#define kCFNumberSInt64Type kRLNumberSInt64Type
#define kCFNumberFloat32Type kRLNumberFloat32Type
#define kCFNumberFloat64Type kRLNumberFloat64Type
#define kCFNumberCharType kRLNumberCharType
#define kCFNumberShortType kRLNumberShortType
#define kCFNumberIntType kRLNumberIntType
#define kCFNumberLongType kRLNumberLongType
#define kCFNumberLongLongType kRLNumberLongLongType
#define kCFNumberFloatType kRLNumberFloatType
#define kCFNumberDoubleType kRLNumberDoubleType
#define kCFNumberCFIndexType kRLNumberCFIndexType
#define kCFNumberNSIntegerType kRLNumberNSIntegerType
#define kCFNumberCGFloatType kRLNumberCGFloatType
#define CFNumberCreate RLNumberCreate
#define CFNumberGetValue RLNumberGetValue
#define CFNumberGetType RLNumberGetType
#define CFNumberGetByteSize RLNumberGetByteSize
#define CFNumberIsFloatType RLNumberIsFloatType
#define CFNumberCompare RLNumberCompare

/* ---- Arrays (of strings only) --------------------------------------- */

typedef RLArrayRef CFArrayRef;
/* CF's callbacks argument; accepted and ignored (the strings are copied). */
typedef struct CFArrayCallBacks {
    CFIndex version;
    const void *retain;
    const void *release;
    const void *copyDescription;
    const void *equal;
} CFArrayCallBacks;
static const CFArrayCallBacks kCFTypeArrayCallBacks = {0, NULL, NULL, NULL, NULL};

static inline CFArrayRef CFArrayCreate(CFAllocatorRef allocator, const void **values, CFIndex numValues,
                                       const CFArrayCallBacks *callBacks) {
    (void)callBacks;
    return RLArrayCreate(allocator, (const char *const *)values, numValues);
}
#define CFArrayGetCount RLArrayGetCount
#define CFArrayGetValueAtIndex RLArrayGetValueAtIndex

/* ---- Run loops ------------------------------------------------------- */

typedef RLRunLoopRef CFRunLoopRef;
typedef RLRunLoopSourceRef CFRunLoopSourceRef;
typedef RLRunLoopObserverRef CFRunLoopObserverRef;
typedef RLRunLoopTimerRef CFRunLoopTimerRef;
typedef RLRunLoopMode CFRunLoopMode;
typedef RLRunLoopRunResult CFRunLoopRunResult;
typedef RLRunLoopActivity CFRunLoopActivity;

#define kCFRunLoopRunFinished kRLRunLoopRunFinished
#define kCFRunLoopRunStopped kRLRunLoopRunStopped
#define kCFRunLoopRunTimedOut kRLRunLoopRunTimedOut
#define kCFRunLoopRunHandledSource kRLRunLoopRunHandledSource

#define kCFRunLoopEntry kRLRunLoopEntry
#define kCFRunLoopBeforeTimers kRLRunLoopBeforeTimers
#define kCFRunLoopBeforeSources kRLRunLoopBeforeSources
#define kCFRunLoopBeforeWaiting kRLRunLoopBeforeWaiting
#define kCFRunLoopAfterWaiting kRLRunLoopAfterWaiting
#define kCFRunLoopExit kRLRunLoopExit
#define kCFRunLoopAllActivities kRLRunLoopAllActivities

#define kCFRunLoopDefaultMode kRLRunLoopDefaultMode
#define kCFRunLoopCommonModes kRLRunLoopCommonModes

#define CFRunLoopGetTypeID RLRunLoopGetTypeID
#define CFRunLoopGetCurrent RLRunLoopGetCurrent
#define CFRunLoopGetMain RLRunLoopGetMain
#define CFRunLoopRun RLRunLoopRun
#define CFRunLoopRunInMode RLRunLoopRunInMode
#define CFRunLoopCopyCurrentMode RLRunLoopCopyCurrentMode
#define CFRunLoopAddCommonMode RLRunLoopAddCommonMode
#define CFRunLoopGetNextTimerFireDate RLRunLoopGetNextTimerFireDate
#define CFRunLoopIsWaiting RLRunLoopIsWaiting
#define CFRunLoopWakeUp RLRunLoopWakeUp
#define CFRunLoopStop RLRunLoopStop
#if __BLOCKS__ && !defined(__cplusplus)
/* One mode or a CFArrayRef of modes, as CF's (see the header comment). The
 * block is the variadic part: a block literal's own commas stay in it. */
#define CFRunLoopPerformBlock(rl, mode, ...)                                                          \
    _Generic((mode), CFArrayRef: RLCFRunLoopPerformBlockInArray, default: RLRunLoopPerformBlock)((rl), (mode), \
                                                                                               __VA_ARGS__)
#endif
#define CFRunLoopContainsSource RLRunLoopContainsSource
#define CFRunLoopAddSource RLRunLoopAddSource
#define CFRunLoopRemoveSource RLRunLoopRemoveSource
#define CFRunLoopContainsObserver RLRunLoopContainsObserver
#define CFRunLoopAddObserver RLRunLoopAddObserver
#define CFRunLoopRemoveObserver RLRunLoopRemoveObserver
#define CFRunLoopContainsTimer RLRunLoopContainsTimer
#define CFRunLoopAddTimer RLRunLoopAddTimer
#define CFRunLoopRemoveTimer RLRunLoopRemoveTimer

#if __BLOCKS__
/* CFRunLoopPerformBlock's array form: one request for all the modes. */
static inline bool RLCFRunLoopPerformBlockInArray(CFRunLoopRef rl, CFArrayRef modes, void (^block)(void)) {
    CFIndex count = RLArrayGetCount(modes);
    if (count < 0)
        return false; /* not an array (error set) */
    return RLRunLoopPerformBlockInModes(rl, RLArrayGetValues(modes), count, block);
}
#endif

#define CFRunLoopCopyAllModes RLRunLoopCopyAllModes

/* ---- Sources --------------------------------------------------------- */

typedef RLRunLoopSourceContext CFRunLoopSourceContext;

#define CFRunLoopSourceGetTypeID RLRunLoopSourceGetTypeID
#define CFRunLoopSourceCreate RLRunLoopSourceCreate
#define CFRunLoopSourceGetOrder RLRunLoopSourceGetOrder
#define CFRunLoopSourceInvalidate RLRunLoopSourceInvalidate
#define CFRunLoopSourceIsValid RLRunLoopSourceIsValid
#define CFRunLoopSourceGetContext RLRunLoopSourceGetContext
#define CFRunLoopSourceSignal RLRunLoopSourceSignal

/* ---- Observers ------------------------------------------------------- */

typedef RLRunLoopObserverContext CFRunLoopObserverContext;
typedef RLRunLoopObserverCallBack CFRunLoopObserverCallBack;

#define CFRunLoopObserverGetTypeID RLRunLoopObserverGetTypeID
#define CFRunLoopObserverCreate RLRunLoopObserverCreate
#if __BLOCKS__
#define CFRunLoopObserverCreateWithHandler RLRunLoopObserverCreateWithHandler
#endif
#define CFRunLoopObserverGetActivities RLRunLoopObserverGetActivities
#define CFRunLoopObserverDoesRepeat RLRunLoopObserverDoesRepeat
#define CFRunLoopObserverGetOrder RLRunLoopObserverGetOrder
#define CFRunLoopObserverInvalidate RLRunLoopObserverInvalidate
#define CFRunLoopObserverIsValid RLRunLoopObserverIsValid
#define CFRunLoopObserverGetContext RLRunLoopObserverGetContext

/* ---- Timers ---------------------------------------------------------- */

typedef RLRunLoopTimerContext CFRunLoopTimerContext;
typedef RLRunLoopTimerCallBack CFRunLoopTimerCallBack;

#define CFRunLoopTimerGetTypeID RLRunLoopTimerGetTypeID
#define CFRunLoopTimerCreate RLRunLoopTimerCreate
#if __BLOCKS__
#define CFRunLoopTimerCreateWithHandler RLRunLoopTimerCreateWithHandler
#endif
#define CFRunLoopTimerGetNextFireDate RLRunLoopTimerGetNextFireDate
#define CFRunLoopTimerSetNextFireDate RLRunLoopTimerSetNextFireDate
#define CFRunLoopTimerGetInterval RLRunLoopTimerGetInterval
#define CFRunLoopTimerDoesRepeat RLRunLoopTimerDoesRepeat
#define CFRunLoopTimerGetOrder RLRunLoopTimerGetOrder
#define CFRunLoopTimerInvalidate RLRunLoopTimerInvalidate
#define CFRunLoopTimerIsValid RLRunLoopTimerIsValid
#define CFRunLoopTimerGetContext RLRunLoopTimerGetContext
#define CFRunLoopTimerGetTolerance RLRunLoopTimerGetTolerance
#define CFRunLoopTimerSetTolerance RLRunLoopTimerSetTolerance

/* ---- File descriptors (Darwin's CFFileDescriptor) -------------------- */

typedef RLFileDescriptorRef CFFileDescriptorRef;
typedef RLFileDescriptorNativeDescriptor CFFileDescriptorNativeDescriptor;
typedef RLFileDescriptorCallBack CFFileDescriptorCallBack;
typedef RLFileDescriptorContext CFFileDescriptorContext;

#define kCFFileDescriptorReadCallBack kRLFileDescriptorReadCallBack
#define kCFFileDescriptorWriteCallBack kRLFileDescriptorWriteCallBack

#define CFFileDescriptorCreate RLFileDescriptorCreate
#define CFFileDescriptorGetNativeDescriptor RLFileDescriptorGetNativeDescriptor
#define CFFileDescriptorGetContext RLFileDescriptorGetContext
#define CFFileDescriptorEnableCallBacks RLFileDescriptorEnableCallBacks
#define CFFileDescriptorDisableCallBacks RLFileDescriptorDisableCallBacks
#define CFFileDescriptorInvalidate RLFileDescriptorInvalidate
#define CFFileDescriptorIsValid RLFileDescriptorIsValid
#define CFFileDescriptorCreateRunLoopSource RLFileDescriptorCreateRunLoopSource

/* ---- Errors (RLError.h: RLErrorRef) ---------------------------------- */
/* A CFErrorRef is an RLErrorRef: an immutable domain and code, what
 * CFReadStreamCopyError returns. No user-info dictionary: CFErrorCreate's
 * userInfo must be NULL. CFErrorCopyDescription's string is a library
 * string (CFRelease it). */

typedef RLErrorRef CFErrorRef;
typedef RLErrorDomain CFErrorDomain;
#define kCFErrorDomainPOSIX kRLErrorDomainPOSIX
#define kCFErrorDomainOSStatus kRLErrorDomainOSStatus
#define kCFErrorDomainMach kRLErrorDomainMach
#define kCFErrorDomainCocoa kRLErrorDomainCocoa
#define CFErrorGetTypeID RLErrorGetTypeID
#define CFErrorCreate RLErrorCreate
#define CFErrorGetDomain RLErrorGetDomain
#define CFErrorGetCode RLErrorGetCode
#define CFErrorCopyDescription RLErrorCopyDescription

/* ---- File URLs (RLURL.h) ---------------------------------------------- */
/* CFURL's file-path part, what file streams take: POSIX paths only. */

typedef RLURLRef CFURLRef;
typedef RLURLPathStyle CFURLPathStyle;
#define kCFURLPOSIXPathStyle kRLURLPOSIXPathStyle
#define kCFURLWindowsPathStyle kRLURLWindowsPathStyle
#define CFURLGetTypeID RLURLGetTypeID
#define CFURLCreateFromFileSystemRepresentation RLURLCreateFromFileSystemRepresentation
#define CFURLCreateWithFileSystemPath RLURLCreateWithFileSystemPath
#define CFURLGetFileSystemRepresentation RLURLGetFileSystemRepresentation
#define CFURLCopyFileSystemPath RLURLCopyFileSystemPath
#define CFURLHasDirectoryPath RLURLHasDirectoryPath

/* ---- Streams (CFReadStream / CFWriteStream) -------------------------- */
/* CFStreamCreatePairWithSocketToHost takes a C string for CF's CFString
 * (a CFSTR literal works). */

typedef RLReadStreamRef CFReadStreamRef;
typedef RLWriteStreamRef CFWriteStreamRef;
typedef RLStreamStatus CFStreamStatus;
typedef RLStreamEventType CFStreamEventType;
typedef RLStreamError CFStreamError;
typedef RLStreamClientContext CFStreamClientContext;
typedef RLReadStreamClientCallBack CFReadStreamClientCallBack;
typedef RLWriteStreamClientCallBack CFWriteStreamClientCallBack;

#define kCFStreamStatusNotOpen kRLStreamStatusNotOpen
#define kCFStreamStatusOpening kRLStreamStatusOpening
#define kCFStreamStatusOpen kRLStreamStatusOpen
#define kCFStreamStatusReading kRLStreamStatusReading
#define kCFStreamStatusWriting kRLStreamStatusWriting
#define kCFStreamStatusAtEnd kRLStreamStatusAtEnd
#define kCFStreamStatusClosed kRLStreamStatusClosed
#define kCFStreamStatusError kRLStreamStatusError
#define kCFStreamEventNone kRLStreamEventNone
#define kCFStreamEventOpenCompleted kRLStreamEventOpenCompleted
#define kCFStreamEventHasBytesAvailable kRLStreamEventHasBytesAvailable
#define kCFStreamEventCanAcceptBytes kRLStreamEventCanAcceptBytes
#define kCFStreamEventErrorOccurred kRLStreamEventErrorOccurred
#define kCFStreamEventEndEncountered kRLStreamEventEndEncountered
#define kCFStreamErrorDomainCustom kRLStreamErrorDomainCustom
#define kCFStreamErrorDomainPOSIX kRLStreamErrorDomainPOSIX

#define CFReadStreamGetTypeID RLReadStreamGetTypeID
#define CFWriteStreamGetTypeID RLWriteStreamGetTypeID
#define CFReadStreamCreateWithBytesNoCopy RLReadStreamCreateWithBytesNoCopy
#define CFWriteStreamCreateWithBuffer RLWriteStreamCreateWithBuffer
#define CFWriteStreamCreateWithAllocatedBuffers RLWriteStreamCreateWithAllocatedBuffers
#define CFReadStreamCreateWithFile RLReadStreamCreateWithFile
#define CFWriteStreamCreateWithFile RLWriteStreamCreateWithFile
#define CFStreamCreateBoundPair RLStreamCreateBoundPair
#define CFStreamCreatePairWithSocket RLStreamCreatePairWithSocket
#define CFStreamCreatePairWithSocketToHost RLStreamCreatePairWithSocketToHost
#define CFReadStreamGetStatus RLReadStreamGetStatus
#define CFWriteStreamGetStatus RLWriteStreamGetStatus
#define CFReadStreamGetError RLReadStreamGetError
#define CFWriteStreamGetError RLWriteStreamGetError
#define CFReadStreamCopyError RLReadStreamCopyError
#define CFWriteStreamCopyError RLWriteStreamCopyError
#define CFReadStreamGetBuffer RLReadStreamGetBuffer
#define CFReadStreamOpen RLReadStreamOpen
#define CFWriteStreamOpen RLWriteStreamOpen
#define CFReadStreamClose RLReadStreamClose
#define CFWriteStreamClose RLWriteStreamClose
#define CFReadStreamRead RLReadStreamRead
#define CFWriteStreamWrite RLWriteStreamWrite
#define CFReadStreamHasBytesAvailable RLReadStreamHasBytesAvailable
#define CFWriteStreamCanAcceptBytes RLWriteStreamCanAcceptBytes
#define CFReadStreamSetClient RLReadStreamSetClient
#define CFWriteStreamSetClient RLWriteStreamSetClient
#define CFReadStreamScheduleWithRunLoop RLReadStreamScheduleWithRunLoop
#define CFWriteStreamScheduleWithRunLoop RLWriteStreamScheduleWithRunLoop
#define CFReadStreamUnscheduleFromRunLoop RLReadStreamUnscheduleFromRunLoop
#define CFWriteStreamUnscheduleFromRunLoop RLWriteStreamUnscheduleFromRunLoop

typedef RLStreamPropertyKey CFStreamPropertyKey;
#define kCFStreamPropertyAppendToFile kRLStreamPropertyAppendToFile
#define kCFStreamPropertyFileCurrentOffset kRLStreamPropertyFileCurrentOffset
#define kCFStreamPropertyDataWritten kRLStreamPropertyDataWritten
#define kCFStreamPropertySocketNativeHandle kRLStreamPropertySocketNativeHandle
#define kCFStreamPropertyShouldCloseNativeSocket kRLStreamPropertyShouldCloseNativeSocket
#define CFReadStreamCopyProperty RLReadStreamCopyProperty
#define CFWriteStreamCopyProperty RLWriteStreamCopyProperty
#define CFReadStreamSetProperty RLReadStreamSetProperty
#define CFWriteStreamSetProperty RLWriteStreamSetProperty

/* ---- Message ports (RLMessagePort.h) --------------------------------- */

typedef RLMessagePortRef CFMessagePortRef;
/* The context's copyDescription returns a malloc'ed `char *`, not a
 * CFStringRef (as for the run-loop contexts). */
typedef RLMessagePortContext CFMessagePortContext;
typedef RLMessagePortCallBack CFMessagePortCallBack;
typedef RLMessagePortInvalidationCallBack CFMessagePortInvalidationCallBack;

#define kCFMessagePortSuccess kRLMessagePortSuccess
#define kCFMessagePortSendTimeout kRLMessagePortSendTimeout
#define kCFMessagePortReceiveTimeout kRLMessagePortReceiveTimeout
#define kCFMessagePortIsInvalid kRLMessagePortIsInvalid
#define kCFMessagePortTransportError kRLMessagePortTransportError
#define kCFMessagePortBecameInvalidError kRLMessagePortBecameInvalidError

#define CFMessagePortGetTypeID RLMessagePortGetTypeID
#define CFMessagePortCreateLocal RLMessagePortCreateLocal
#define CFMessagePortCreateRemote RLMessagePortCreateRemote
#define CFMessagePortIsRemote RLMessagePortIsRemote
#define CFMessagePortGetName RLMessagePortGetName
#define CFMessagePortSetName RLMessagePortSetName
#define CFMessagePortGetContext RLMessagePortGetContext
#define CFMessagePortIsValid RLMessagePortIsValid
#define CFMessagePortInvalidate RLMessagePortInvalidate
#define CFMessagePortGetInvalidationCallBack RLMessagePortGetInvalidationCallBack
#define CFMessagePortSetInvalidationCallBack RLMessagePortSetInvalidationCallBack
#define CFMessagePortSendRequest RLMessagePortSendRequest
#define CFMessagePortCreateRunLoopSource RLMessagePortCreateRunLoopSource

RL_EXTERN_C_END

#if __BLOCKS__ && defined(__cplusplus)
/* C++: CFRunLoopPerformBlock's two forms as overloads (no _Generic). */
static inline bool CFRunLoopPerformBlock(CFRunLoopRef rl, CFRunLoopMode mode, void (^block)(void)) {
    return RLRunLoopPerformBlock(rl, mode, block);
}
static inline bool CFRunLoopPerformBlock(CFRunLoopRef rl, CFArrayRef modes, void (^block)(void)) {
    return RLCFRunLoopPerformBlockInArray(rl, modes, block);
}
#endif

/* ---- CFSocket (RLSocket.h) ------------------------------------------- */
/* CFSocket's names over RLSocket; addresses and data are RLData, so the
 * CFData calls a socket program needs map here too (guarded: another
 * section may map them as well). CFSocketInvalidate, Enable/Disable and
 * SetSocketFlags return bool instead of void. Not mapped: the socket
 * name-registry functions (scripts/cf-surface-exclusions.txt). */
#include <crunloop/RLSocket.h>

RL_EXTERN_C_BEGIN

typedef RLDataRef CFDataRef;
#ifndef CFDataCreate
#define CFDataCreate RLDataCreate
#endif
#ifndef CFDataGetLength
#define CFDataGetLength RLDataGetLength
#endif
#ifndef CFDataGetBytePtr
#define CFDataGetBytePtr RLDataGetBytePtr
#endif

typedef RLSocketRef CFSocketRef;
typedef RLSocketNativeHandle CFSocketNativeHandle;
typedef RLSocketError CFSocketError;
typedef RLSocketCallBackType CFSocketCallBackType;
typedef RLSocketCallBack CFSocketCallBack;
typedef RLSocketContext CFSocketContext;

#define kCFSocketSuccess kRLSocketSuccess
#define kCFSocketError kRLSocketError
#define kCFSocketTimeout kRLSocketTimeout
#define kCFSocketNoCallBack kRLSocketNoCallBack
#define kCFSocketReadCallBack kRLSocketReadCallBack
#define kCFSocketAcceptCallBack kRLSocketAcceptCallBack
#define kCFSocketDataCallBack kRLSocketDataCallBack
#define kCFSocketConnectCallBack kRLSocketConnectCallBack
#define kCFSocketWriteCallBack kRLSocketWriteCallBack
#define kCFSocketAutomaticallyReenableReadCallBack kRLSocketAutomaticallyReenableReadCallBack
#define kCFSocketAutomaticallyReenableAcceptCallBack kRLSocketAutomaticallyReenableAcceptCallBack
#define kCFSocketAutomaticallyReenableDataCallBack kRLSocketAutomaticallyReenableDataCallBack
#define kCFSocketAutomaticallyReenableWriteCallBack kRLSocketAutomaticallyReenableWriteCallBack
#define kCFSocketLeaveErrors kRLSocketLeaveErrors
#define kCFSocketCloseOnInvalidate kRLSocketCloseOnInvalidate

#define CFSocketGetTypeID RLSocketGetTypeID
#define CFSocketCreate RLSocketCreate
#define CFSocketCreateWithNative RLSocketCreateWithNative
#define CFSocketSetAddress RLSocketSetAddress
#define CFSocketConnectToAddress RLSocketConnectToAddress
#define CFSocketSendData RLSocketSendData
#define CFSocketEnableCallBacks RLSocketEnableCallBacks
#define CFSocketDisableCallBacks RLSocketDisableCallBacks
#define CFSocketGetSocketFlags RLSocketGetSocketFlags
#define CFSocketSetSocketFlags RLSocketSetSocketFlags
#define CFSocketInvalidate RLSocketInvalidate
#define CFSocketIsValid RLSocketIsValid
#define CFSocketGetNative RLSocketGetNative
#define CFSocketCopyAddress RLSocketCopyAddress
#define CFSocketCopyPeerAddress RLSocketCopyPeerAddress
#define CFSocketGetContext RLSocketGetContext
#define CFSocketCreateRunLoopSource RLSocketCreateRunLoopSource

/* Socket signatures (CFStreamCreatePairWithPeerSocketSignature returns
 * bool, as the other stream pair functions do). */
typedef RLSocketSignature CFSocketSignature;
#define CFSocketCreateWithSocketSignature RLSocketCreateWithSocketSignature
#define CFSocketCreateConnectedToSocketSignature RLSocketCreateConnectedToSocketSignature
#define CFStreamCreatePairWithPeerSocketSignature RLStreamCreatePairWithPeerSocketSignature

RL_EXTERN_C_END

#endif /* CRUNLOOP_CF_COMPAT_H */
