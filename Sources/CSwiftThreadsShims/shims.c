/* shims.c — SwiftThreadsShims.h's functions. */
#include "SwiftThreadsShims.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RL_SHIMS_TSAN 1
#endif
#endif
#if !defined(RL_SHIMS_TSAN) && defined(__SANITIZE_THREAD__) /* gcc's spelling */
#define RL_SHIMS_TSAN 1
#endif

#ifdef RL_SHIMS_TSAN
/* ThreadSanitizer's annotation entry points (its runtime defines them). */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);

void rl_swift_handoff_publish(const void *object) { __tsan_release((void *)object); }
void rl_swift_handoff_received(const void *object) { __tsan_acquire((void *)object); }
#else
void rl_swift_handoff_publish(const void *object) { (void)object; }
void rl_swift_handoff_received(const void *object) { (void)object; }
#endif
