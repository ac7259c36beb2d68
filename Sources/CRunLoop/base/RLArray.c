/* RLArray.c — immutable arrays of C strings (RLArray.h). One allocation:
 * the object, the pointers, then the strings they point at. */
#include "RLBase.h"
#include <crunloop/RLArray.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct RLArray {
    rl__object base;
    RLIndex count;
    const char **values; /* into the same allocation */
};

static const rl__class array_class = {"RLArray", NULL, NULL, NULL};

RLArrayRef RLArrayCreate(RLAllocatorRef allocator, const char *const *values, RLIndex count) {
    (void)allocator;
    if (count < 0) {
        rl__fail(kRLErrorInvalidArgument, __func__, "negative count %ld", (long)count);
        return NULL;
    }
    if (count > 0 && !values) {
        rl__fail(kRLErrorInvalidArgument, __func__, "NULL values");
        return NULL;
    }
    size_t bytes = sizeof(struct RLArray) + (size_t)count * sizeof(char *);
    for (RLIndex i = 0; i < count; i++) {
        if (!values[i]) {
            rl__fail(kRLErrorInvalidArgument, __func__, "NULL string at index %ld", (long)i);
            return NULL;
        }
        size_t len = strlen(values[i]) + 1;
        if (bytes > SIZE_MAX - len) {
            rl__fail(kRLErrorNoMemory, __func__, "out of memory");
            return NULL;
        }
        bytes += len;
    }
    struct RLArray *a = rl__object_alloc(&array_class, bytes, __func__);
    if (!a)
        return NULL;
    a->count = count;
    a->values = (const char **)(a + 1);
    char *store = (char *)(a->values + count);
    for (RLIndex i = 0; i < count; i++) {
        size_t len = strlen(values[i]) + 1;
        memcpy(store, values[i], len);
        a->values[i] = store;
        store += len;
    }
    return a;
}

RLIndex RLArrayGetCount(RLArrayRef array) {
    if (!rl__object_check(array, &array_class, __func__))
        return -1;
    return array->count;
}

const char *RLArrayGetValueAtIndex(RLArrayRef array, RLIndex index) {
    if (!rl__object_check(array, &array_class, __func__))
        return NULL;
    if (index < 0 || index >= array->count) {
        rl__fail(kRLErrorInvalidArgument, __func__, "index %ld out of range [0, %ld)", (long)index,
                 (long)array->count);
        return NULL;
    }
    return array->values[index];
}

const char *const *RLArrayGetValues(RLArrayRef array) {
    if (!rl__object_check(array, &array_class, __func__))
        return NULL;
    return array->values;
}
