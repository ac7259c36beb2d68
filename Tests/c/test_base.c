/* test_base.c — object model, clocks and the thread-local error. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "RLBase.h"

#if defined(__SANITIZE_ADDRESS__)
#define RL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL_TEST_ASAN 1
#endif
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RL_TEST_VALGRIND 1
#endif
#endif

/* Whether a checked build (AddressSanitizer, valgrind) watches memory: a
 * stale access is then its report, not our error. */
static bool memory_checked(void) {
#ifdef RL_TEST_ASAN
    return true;
#elif defined(RL_TEST_VALGRIND)
    return RUNNING_ON_VALGRIND != 0;
#else
    return false;
#endif
}

static void test_error_starts_empty_and_clears(void **state) {
    RLErrorClear();
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorNone);
    assert_string_equal(e.message, "");
    assert_string_equal(RLErrorCodeGetName(kRLErrorNotOwner), "kRLErrorNotOwner");
    assert_string_equal(RLErrorCodeGetName((RLErrorCode)9999), "kRLErrorUnknown");
}

static void test_misuse_of_object_functions(void **state) {
    assert_rl_fails(RLRetain(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLRelease(NULL), kRLErrorInvalidArgument);
    assert_int_equal(RLGetRetainCount(NULL), -1);
    assert_rl_error(kRLErrorInvalidArgument);
    assert_rl_fails(RLGetTypeName(NULL), kRLErrorInvalidArgument);
    assert_rl_fails(RLCopyDescription(NULL), kRLErrorInvalidArgument);

    /* Something that is not a CRunLoop object is refused, not trusted. */
    long not_an_object[8] = {0};
    assert_rl_fails(RLRetain(not_an_object), kRLErrorInvalidObject);
    assert_rl_fails(RLRelease(not_an_object), kRLErrorInvalidObject);
}

static void *error_in_thread(void *arg) {
    (void)arg;
    RLRelease(NULL);
    return (void *)(intptr_t)RLErrorGetLast().code;
}

static void test_error_is_thread_local(void **state) {
    RLErrorClear();
    pthread_t t;
    void *res = NULL;
    assert_int_equal(pthread_create(&t, NULL, error_in_thread, NULL), 0);
    pthread_join(t, &res);
    assert_int_equal((intptr_t)res, kRLErrorInvalidArgument);
    assert_int_equal(RLErrorGetLast().code, kRLErrorNone);
}

/* A thread's message buffer is made on its first error (not kept in every
 * thread's TLS, on its stack): without memory for it the error keeps its
 * code and errno, its message is the code's name; the next error, with
 * memory, has its full message. */
static void *error_without_message_memory(void *arg) {
    (void)arg;
    atomic_store(&rl__faults, RL_FAULT_ERROR_MESSAGE);
    RLRelease(NULL);
    atomic_store(&rl__faults, 0);
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorInvalidArgument);
    assert_string_equal(e.message, "kRLErrorInvalidArgument");
    RLErrorClear();
    assert_int_equal(RLErrorGetLast().code, kRLErrorNone);
    assert_string_equal(RLErrorGetLast().message, "");
    RLRelease(NULL);
    e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorInvalidArgument);
    assert_true(strncmp(e.message, "RLRelease: ", 11) == 0);
    RLErrorClear();
    assert_string_equal(RLErrorGetLast().message, "");
    return NULL;
}

static void test_error_message_without_memory(void **state) {
    rl_test_on_other_thread(error_without_message_memory, NULL);
}

/* Threads that failed and exited: each one's message buffer goes with it
 * (LeakSanitizer and valgrind in the checked builds), also one made again
 * by an error after the thread's key destructors began. */
static pthread_key_t late_key;

static void late_error(void *arg) {
    (void)arg;
    RLRelease(NULL); /* after the buffer's destructor, or before: either way freed */
}

static void *fail_and_exit(void *arg) {
    RLRelease(NULL);
    assert_int_equal(RLErrorGetLast().code, kRLErrorInvalidArgument);
    if (arg)
        pthread_setspecific(late_key, arg);
    return NULL;
}

static void test_error_messages_of_exited_threads_are_freed(void **state) {
    assert_int_equal(pthread_key_create(&late_key, late_error), 0);
    for (int i = 0; i < 64; i++) {
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, fail_and_exit, (i & 1) ? (void *)1 : NULL), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
    }
    pthread_key_delete(late_key);
}

static void test_success_keeps_last_error(void **state) {
    RLRelease(NULL);
    (void)RLAbsoluteTimeGetCurrent();
    assert_rl_error(kRLErrorInvalidArgument);
}

static void test_clocks(void **state) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double unix_now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    double abs_now = RLAbsoluteTimeGetCurrent();
    assert_true(fabs(abs_now + kRLAbsoluteTimeIntervalSince1970 - unix_now) < 1.0);
    double m1 = RLMonotonicTimeGetCurrent();
    double m2 = RLMonotonicTimeGetCurrent();
    assert_true(m2 >= m1);
}

/* ---- stale pointers and references the library keeps ---- */

static void nop_timer(RLRunLoopTimerRef t, void *info) {}
static void nop_observer(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {}

/* One object of each size family: malloc-sized locks and pooled run-loop
 * objects used to differ. */
static RLTypeRef make_kind(int kind) {
    switch (kind) {
    case 0: return RLLockCreate();
    case 1: return RLRunLoopTimerCreate(NULL, 1e9, 0, 0, 0, nop_timer, NULL);
    case 2: return RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, nop_observer, NULL);
    default: return RLConditionCreate();
    }
}
enum { NKINDS = 4 };

/* Releases `stale` (already released; `live` may have taken its memory)
 * and checks that the release was refused and `live` is intact. Under
 * AddressSanitizer the stale read is reported instead: the release runs in
 * a child process, which must die. */
static void assert_stale_release_refused(RLTypeRef stale, RLTypeRef live) {
    if (memory_checked()) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            RLRelease(stale); /* AddressSanitizer ends the child here */
#ifdef RL_TEST_VALGRIND
            if (VALGRIND_COUNT_ERRORS > 0)
                _exit(1); /* valgrind reported the stale read */
#endif
            _exit(0); /* not reported: the parent fails the test */
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    } else {
        assert_rl_fails(RLRelease(stale), kRLErrorInvalidObject);
        assert_rl_fails(RLRetain(stale), kRLErrorInvalidObject);
    }
    assert_int_equal(RLGetRetainCount(live), 1);
    assert_non_null(RLGetTypeName(live));
}

static void test_stale_release_after_reuse_is_refused(void **state) {
    for (int kind = 0; kind < NKINDS; kind++) {
        RLTypeRef a = make_kind(kind);
        assert_non_null(a);
        assert_true(RLRelease(a));
        /* The next object of the same class: malloc and a plain free list
         * hand it a's memory, and the stale release then destroyed it. */
        RLTypeRef b = make_kind(kind);
        assert_non_null(b);
        assert_stale_release_refused(a, b);
        assert_true(RLRelease(b));
    }
}

static void test_stale_release_after_churn_is_refused(void **state) {
    /* Some other objects of the class were made and released in between. */
    for (int kind = 0; kind < NKINDS; kind++) {
        RLTypeRef a = make_kind(kind);
        assert_true(RLRelease(a));
        for (int i = 0; i < 16; i++)
            assert_true(RLRelease(make_kind(kind)));
        RLTypeRef live[16];
        for (int i = 0; i < 16; i++)
            live[i] = make_kind(kind);
        assert_stale_release_refused(a, live[0]);
        for (int i = 0; i < 16; i++) {
            assert_int_equal(RLGetRetainCount(live[i]), 1);
            assert_true(RLRelease(live[i]));
        }
    }
}

/* Objects made on one thread, released on another (which keeps what it
 * releases for a while before the class's quarantine sees it), and churn on
 * a third: a stale release on a fourth is still refused. */
typedef struct {
    int kind;
    RLTypeRef obj;
} kind_obj;

static void *make_on_thread(void *arg) {
    kind_obj *k = arg;
    k->obj = make_kind(k->kind);
    return NULL;
}

static void *release_on_thread(void *arg) {
    assert_true(RLRelease(((kind_obj *)arg)->obj));
    return NULL;
}

static void *churn_on_thread(void *arg) {
    for (int i = 0; i < 16; i++)
        assert_true(RLRelease(make_kind(((kind_obj *)arg)->kind)));
    return NULL;
}

static void test_stale_release_across_threads_is_refused(void **state) {
    for (int kind = 0; kind < NKINDS; kind++) {
        kind_obj k = {kind, NULL};
        rl_test_on_other_thread(make_on_thread, &k);
        assert_non_null(k.obj);
        rl_test_on_other_thread(release_on_thread, &k);
        rl_test_on_other_thread(churn_on_thread, &k);
        RLTypeRef live[16];
        for (int i = 0; i < 16; i++)
            live[i] = make_kind(kind);
        assert_stale_release_refused(k.obj, live[0]);
        for (int i = 0; i < 16; i++) {
            assert_int_equal(RLGetRetainCount(live[i]), 1);
            assert_true(RLRelease(live[i]));
        }
    }
}

/* A Get-rule result: the caller holds no reference, so releasing it is
 * refused and the object is unchanged; a reference the caller took with
 * RLRetain is the caller's to release. */
static void assert_get_rule_release_refused(RLTypeRef obj) {
    assert_non_null(obj);
    RLIndex before = RLGetRetainCount(obj);
    assert_true(before >= 1);
    assert_rl_fails(RLRelease(obj), kRLErrorNotOwner);
    assert_int_equal(RLGetRetainCount(obj), before);
    assert_ptr_equal(RLRetain(obj), obj);
    assert_true(RLRelease(obj));
    assert_rl_fails(RLRelease(obj), kRLErrorNotOwner);
    assert_int_equal(RLGetRetainCount(obj), before);
}

static void *get_rule_objects_of_this_thread(void *arg) {
    assert_get_rule_release_refused(RLRunLoopGetCurrent());
    assert_get_rule_release_refused(RLThreadGetCurrent());
    /* They still work. */
    assert_true(RLRunLoopWakeUp(RLRunLoopGetCurrent()));
    char *name = RLThreadCopyName(RLThreadGetCurrent());
    assert_non_null(name);
    free(name);
    return NULL;
}

typedef struct {
    sem_t released; /* the creator gave its reference back */
    sem_t done;
} library_thread_arg;

static void *library_thread_entry(void *p) {
    library_thread_arg *a = p;
    while (sem_wait(&a->released) != 0) {}
    /* Only the thread's own reference is left, and it is the library's. */
    get_rule_objects_of_this_thread(NULL);
    sem_post(&a->done);
    return NULL;
}

static void test_get_rule_objects_refuse_release(void **state) {
    /* Main thread: its loop and RLThread, and the Get-main forms. */
    get_rule_objects_of_this_thread(NULL);
    assert_get_rule_release_refused(RLRunLoopGetMain());
    assert_get_rule_release_refused(RLThreadGetMain());
    /* A thread the library did not create (its objects are made on demand
     * and dropped when it exits: they must survive the refused releases). */
    rl_test_on_other_thread(get_rule_objects_of_this_thread, NULL);
    /* A thread the library created, once its creator let go of it. */
    library_thread_arg a;
    assert_int_equal(sem_init(&a.released, 0, 0), 0);
    assert_int_equal(sem_init(&a.done, 0, 0), 0);
    RLThreadRef t = RLThreadCreate(NULL, library_thread_entry, &a);
    assert_non_null(t);
    assert_true(RLThreadStart(t));
    assert_true(RLRelease(t));
    sem_post(&a.released);
    while (sem_wait(&a.done) != 0) {}
    sem_destroy(&a.released);
    sem_destroy(&a.done);
}


static int fired;
static void count_fire(RLRunLoopTimerRef t, void *info) { fired++; }
static void nothing(void *info) {}
static void observe(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {}

/* What a run loop keeps is the loop's: a caller who releases an object
 * once too often while a loop holds it is refused, and the loop's
 * reference goes only with the membership. */
static void test_loop_references_refuse_extra_release(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopTimerRef t = RLRunLoopTimerCreate(NULL, RLAbsoluteTimeGetCurrent() - 1, 0, 0, 0, count_fire, NULL);
    assert_true(RLRunLoopAddTimer(rl, t, kRLRunLoopDefaultMode));
    assert_int_equal(RLGetRetainCount(t), 2);
    assert_true(RLRelease(t));                          /* the caller's own */
    assert_rl_fails(RLRelease(t), kRLErrorNotOwner);     /* the loop's: refused */
    assert_int_equal(RLGetRetainCount(t), 1);
    fired = 0;
    RLRunLoopRunInMode(kRLRunLoopDefaultMode, 0, false); /* still alive, fires, and the loop lets go */
    assert_int_equal(fired, 1);

    RLRunLoopSourceContext sc = {0};
    sc.perform = nothing;
    RLRunLoopSourceRef s = RLRunLoopSourceCreate(NULL, 0, &sc);
    assert_true(RLRunLoopAddSource(rl, s, kRLRunLoopCommonModes)); /* common item + membership */
    assert_int_equal(RLGetRetainCount(s), 3);
    assert_true(RLRelease(s)); /* the caller's one reference */
    assert_rl_fails(RLRelease(s), kRLErrorNotOwner);
    assert_rl_fails(RLRelease(s), kRLErrorNotOwner);
    assert_int_equal(RLGetRetainCount(s), 2);
    /* removed from the common modes: the loop lets go of both, and the
     * source goes (valgrind and ASan check that nothing is left) */
    assert_true(RLRunLoopRemoveSource(rl, s, kRLRunLoopCommonModes));

    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopAllActivities, true, 0, observe, NULL);
    assert_non_null(o);
    assert_true(RLRunLoopAddObserver(rl, o, kRLRunLoopDefaultMode));
    assert_true(RLRelease(o));
    assert_rl_fails(RLRelease(o), kRLErrorNotOwner);
    assert_true(RLRunLoopObserverInvalidate(o)); /* the loop drops it: freed now (valgrind checks) */
}

/* An object's header is 16 bytes: its class is kept as the low 32 bits of
 * the class's address, with where its memory is from (the pool, malloc, a
 * part of another object's block). Every kind of object keeps its class
 * and type ID, is told from objects of other classes (a clear error naming
 * both), and is freed the way it was made (AddressSanitizer, valgrind). */
static void objects_of_every_allocation_keep_their_class(void) {
    assert_int_equal(sizeof(rl__object), 16);
    uint8_t big[4096] = {1};
    RLDataRef pooled = RLDataCreate(NULL, big, 16);  /* a pool block */
    RLDataRef heaped = RLDataCreate(NULL, big, sizeof big); /* over RL_POOL_MAX: malloc */
    assert_non_null(pooled);
    assert_non_null(heaped);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    RLSocketRef sock = RLSocketCreateWithNative(NULL, sv[0], kRLSocketReadCallBack, NULL, NULL);
    assert_non_null(sock);
    RLRunLoopSourceRef part = RLSocketCreateRunLoopSource(NULL, sock, 0); /* in the socket's block */
    assert_non_null(part);
    const void *objs[] = {pooled, heaped, sock, part, kRLBooleanTrue};
    const char *names[] = {"RLData", "RLData", "RLSocket", "RLRunLoopSource", "RLBoolean"};
    for (size_t i = 0; i < sizeof objs / sizeof *objs; i++) {
        assert_string_equal(RLGetTypeName(objs[i]), names[i]);
        for (size_t j = 0; j < sizeof objs / sizeof *objs; j++)
            assert_true((RLGetTypeID(objs[i]) == RLGetTypeID(objs[j])) == !strcmp(names[i], names[j]));
        char *d = RLCopyDescription(objs[i]);
        assert_non_null(d);
        assert_non_null(strstr(d, names[i]));
        free(d);
    }
    assert_int_equal(RLGetTypeID(sock), RLSocketGetTypeID());
    assert_int_equal(RLGetTypeID(part), RLRunLoopSourceGetTypeID());
    assert_int_equal(RLGetTypeID(kRLBooleanFalse), RLGetTypeID(kRLBooleanTrue));
    /* Taken for another class: refused, both classes named. */
    assert_rl_fails(RLDataGetLength((RLDataRef)(const void *)part) == 16, kRLErrorInvalidObject);
    assert_false(RLRunLoopSourceIsValid((RLRunLoopSourceRef)(const void *)kRLBooleanTrue));
    RLError e = RLErrorGetLast();
    assert_int_equal(e.code, kRLErrorInvalidObject);
    assert_non_null(strstr(e.message, "RLBoolean"));
    assert_non_null(strstr(e.message, "RLRunLoopSource"));
    RLErrorClear();
    assert_int_equal(RLDataGetLength(heaped), sizeof big);
    RLRelease(part);
    RLSocketInvalidate(sock);
    RLRelease(sock);
    RLRelease(pooled);
    RLRelease(heaped);
    close(sv[1]);
}

static void test_objects_of_every_allocation_keep_their_class(void **state) {
    (void)state;
    objects_of_every_allocation_keep_their_class();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_starts_empty_and_clears),
        cmocka_unit_test(test_misuse_of_object_functions),
        cmocka_unit_test(test_error_is_thread_local),
        cmocka_unit_test(test_error_message_without_memory),
        cmocka_unit_test(test_error_messages_of_exited_threads_are_freed),
        cmocka_unit_test(test_success_keeps_last_error),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_stale_release_after_reuse_is_refused),
        cmocka_unit_test(test_stale_release_after_churn_is_refused),
        cmocka_unit_test(test_stale_release_across_threads_is_refused),
        cmocka_unit_test(test_get_rule_objects_refuse_release),
        cmocka_unit_test(test_loop_references_refuse_extra_release),
        cmocka_unit_test(test_objects_of_every_allocation_keep_their_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
