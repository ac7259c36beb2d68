/*
 * SwiftThreadsShims.h — what the Swift overlay (SwiftThreads) needs from C
 * and cannot say in Swift. Internal to the overlay: not installed, not API.
 */
#ifndef SWIFTTHREADS_SHIMS_H
#define SWIFTTHREADS_SHIMS_H

/*
 * A hand-off ThreadSanitizer cannot see. An object made on one thread and
 * passed to another through Swift's AsyncStream is queued under the
 * concurrency runtime's own futex lock, which ThreadSanitizer does not
 * watch: when the consumer was not already waiting, it reports the
 * consumer's reads of the object as racing with the producer's writes in
 * its initializer. The producer calls publish(object) once the object is
 * complete and before it hands it on; every reader calls received(object)
 * before it reads. Without ThreadSanitizer (this file's .c compiled without
 * -fsanitize=thread) both do nothing.
 */
void rl_swift_handoff_publish(const void *object);
void rl_swift_handoff_received(const void *object);

#endif
