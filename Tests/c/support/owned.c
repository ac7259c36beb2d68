#include "owned.h"

#include "testutil.h"

void owned_run(void *arg) {
    owned *o = arg;
    assert_int_equal(atomic_load(&o->released), 0);
    atomic_fetch_add(&o->ran, 1);
}

void owned_release(void *arg) {
    owned *o = arg;
    if (atomic_load(&o->ran))
        atomic_store(&o->released_after_run, 1);
    atomic_fetch_add(&o->released, 1);
}
