/* RLLockDebug.c — lock-order (deadlock) detector. PLACEHOLDER: the hooks
 * below only exist so that the lock files link; the detector itself is
 * being written (owner: lockdep helper). */
#include "internal.h"

_Atomic int rl__lockdep_on = 0;

void rl__lockdep_will_acquire(const void *lock, const char *name, const void *where) {
    (void)lock; (void)name; (void)where;
}
void rl__lockdep_acquired(const void *lock, const char *name, const void *where) {
    (void)lock; (void)name; (void)where;
}
void rl__lockdep_released(const void *lock) { (void)lock; }
void rl__lockdep_forget(const void *lock) { (void)lock; }
