/* test_observer.c — observers: order, activity filters, one-shot observers,
 * invalidation from callouts, no re-entry while firing, context balance. */
#include "testutil.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void named_cb(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    rl_trace_addf("%s:%s", (const char *)info, rl_trace_activity_name(a));
}

static RLRunLoopObserverRef make(const char *name, RLOptionFlags acts, bool repeats, RLIndex order,
                                 RLRunLoopObserverCallBack cb) {
    RLRunLoopObserverContext c = {0, (void *)name, NULL, NULL, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, acts, repeats, order, cb, &c);
    assert_non_null(o);
    return o;
}

static void done(RLRunLoopObserverRef o) {
    RLRunLoopObserverInvalidate(o);
    assert_true(RLRelease(o));
}

static void test_order_and_filters(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("Obs");
    RLRunLoopObserverRef b = make("b", kRLRunLoopEntry | kRLRunLoopExit, true, 2, named_cb);
    RLRunLoopObserverRef a = make("a", kRLRunLoopEntry | kRLRunLoopBeforeSources, true, 1, named_cb);
    RLRunLoopObserverRef c = make("c", kRLRunLoopAllActivities, true, 3, named_cb);
    assert_true(RLRunLoopAddObserver(rl, b, "Obs"));
    assert_true(RLRunLoopAddObserver(rl, c, "Obs"));
    assert_true(RLRunLoopAddObserver(rl, a, "Obs"));
    assert_true(RLRunLoopAddObserver(rl, a, "Obs")); /* twice: still once */
    assert_int_equal(RLRunLoopRunInMode("Obs", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("a:E b:E c:E c:BT a:BS c:BS b:X c:X");
    assert_int_equal(RLRunLoopObserverGetOrder(a), 1);
    assert_int_equal(RLRunLoopObserverGetActivities(b), kRLRunLoopEntry | kRLRunLoopExit);
    assert_true(RLRunLoopObserverDoesRepeat(a));
    done(a);
    done(b);
    done(c);
    rl_test_unkeep(k);
}

static void test_one_shot_observer(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("Once");
    RLRunLoopObserverRef o = make("o", kRLRunLoopAllActivities, false, 0, named_cb);
    assert_false(RLRunLoopObserverDoesRepeat(o));
    assert_true(RLRunLoopAddObserver(rl, o, "Once"));
    assert_int_equal(RLRunLoopRunInMode("Once", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("o:E");
    assert_false(RLRunLoopObserverIsValid(o));
    assert_false(RLRunLoopContainsObserver(rl, o, "Once"));
    done(o);
    rl_test_unkeep(k);
}

/* A one-shot observer gives its context back right after its own callout,
 * before the next observer of the same activity is called (as CF, which
 * invalidates it there). */
static void traced_release(const void *info) { rl_trace_addf("%s:released", (const char *)info); }

static void test_one_shot_release_right_after_its_callout(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("OnceRel");
    RLRunLoopObserverContext c1 = {0, (void *)"first", NULL, traced_release, NULL};
    RLRunLoopObserverContext c2 = {0, (void *)"second", NULL, traced_release, NULL};
    RLRunLoopObserverRef first = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeSources, false, 1, named_cb, &c1);
    RLRunLoopObserverRef second = RLRunLoopObserverCreate(NULL, kRLRunLoopBeforeSources, true, 2, named_cb, &c2);
    assert_true(RLRunLoopAddObserver(rl, first, "OnceRel"));
    assert_true(RLRunLoopAddObserver(rl, second, "OnceRel"));
    rl_trace_clear();
    assert_int_equal(RLRunLoopRunInMode("OnceRel", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("first:BS first:released second:BS");
    assert_false(RLRunLoopObserverIsValid(first));
    assert_true(RLRelease(first));
    done(second);
    assert_trace("first:BS first:released second:BS second:released");
    rl_test_unkeep(k);
}

static RLRunLoopObserverRef other_obs;

static void kill_other(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    rl_trace_add("killer");
    RLRunLoopObserverInvalidate(other_obs);
    RLRunLoopObserverInvalidate(o);
}

static void test_invalidate_from_callout(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("Kill");
    RLRunLoopObserverRef killer = make("k", kRLRunLoopEntry, true, 0, kill_other);
    other_obs = make("victim", kRLRunLoopAllActivities, true, 1, named_cb);
    assert_true(RLRunLoopAddObserver(rl, killer, "Kill"));
    assert_true(RLRunLoopAddObserver(rl, other_obs, "Kill"));
    assert_int_equal(RLRunLoopRunInMode("Kill", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("killer");
    done(killer);
    done(other_obs);
    rl_test_unkeep(k);
}

static int depth;

static void nesting_cb(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    named_cb(o, a, info);
    if (a == kRLRunLoopEntry && depth++ == 0)
        RLRunLoopRunInMode("Nest", 0, false); /* this observer is firing: not called inside */
}

static void test_no_reentry_while_firing(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("Nest");
    depth = 0;
    RLRunLoopObserverRef o = make("n", kRLRunLoopEntry | kRLRunLoopExit, true, 0, nesting_cb);
    assert_true(RLRunLoopAddObserver(rl, o, "Nest"));
    assert_int_equal(RLRunLoopRunInMode("Nest", 0, false), kRLRunLoopRunTimedOut);
    assert_trace("n:E n:X");
    done(o);
    rl_test_unkeep(k);
}

static int o_retains, o_releases;
static const void *o_retain(const void *i) {
    o_retains++;
    return i;
}
static void o_release(const void *i) { o_releases++; }

static void test_context_balance(void **state) {
    o_retains = o_releases = 0;
    RLRunLoopObserverContext c = {0, (void *)"x", o_retain, o_release, NULL};
    RLRunLoopObserverRef o = RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, named_cb, &c);
    assert_int_equal(o_retains, 1);
    RLRunLoopObserverContext got;
    assert_true(RLRunLoopObserverGetContext(o, &got));
    assert_string_equal((const char *)got.info, "x");
    assert_true(RLRunLoopAddObserver(RLRunLoopGetCurrent(), o, kRLRunLoopCommonModes));
    assert_true(RLRunLoopRemoveObserver(RLRunLoopGetCurrent(), o, kRLRunLoopCommonModes));
    assert_int_equal(RLGetRetainCount(o), 1);
    assert_true(RLRelease(o));
    assert_int_equal(o_releases, 1);
}

static RLRunLoopObserverRef drop_victim;

static void drop_cb(RLRunLoopObserverRef o, RLRunLoopActivity a, void *info) {
    named_cb(o, a, info);
    /* Out of the mode and the test's references given up, for this
     * observer and for the next one of the same pass: only the pass keeps
     * them alive now. */
    assert_true(RLRunLoopRemoveObserver(RLRunLoopGetCurrent(), o, "Drop"));
    assert_true(RLRelease(o));
    assert_true(RLRunLoopRemoveObserver(RLRunLoopGetCurrent(), drop_victim, "Drop"));
    assert_true(RLRelease(drop_victim));
}

static void test_remove_and_release_from_callout(void **state) {
    o_retains = o_releases = 0;
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopSourceRef k = rl_test_keep_mode("Drop");
    RLRunLoopObserverContext c1 = {0, (void *)"d", o_retain, o_release, NULL};
    RLRunLoopObserverContext c2 = {0, (void *)"v", o_retain, o_release, NULL};
    RLRunLoopObserverRef d = RLRunLoopObserverCreate(NULL, kRLRunLoopEntry, true, 0, drop_cb, &c1);
    drop_victim = RLRunLoopObserverCreate(NULL, kRLRunLoopEntry | kRLRunLoopExit, true, 1, named_cb, &c2);
    assert_true(RLRunLoopAddObserver(rl, d, "Drop"));
    assert_true(RLRunLoopAddObserver(rl, drop_victim, "Drop"));
    assert_int_equal(RLRunLoopRunInMode("Drop", 0, false), kRLRunLoopRunTimedOut);
    /* As CF: an observer collected for an activity is still called if it is
     * valid, though removed meanwhile; both are freed once the pass is done
     * with them (and the victim is no longer in the mode at Exit). */
    assert_trace("d:E v:E");
    assert_int_equal(o_releases, 2);
    rl_test_unkeep(k);
}

static void *add_to_other_loop(void *arg) {
    RLRunLoopRef mine = RLRunLoopGetCurrent();
    bool ok = RLRunLoopAddObserver(mine, (RLRunLoopObserverRef)arg, kRLRunLoopDefaultMode);
    if (ok) {
        RLRunLoopRemoveObserver(mine, (RLRunLoopObserverRef)arg, kRLRunLoopDefaultMode);
        return (void *)2;
    }
    return RLErrorGetLast().code == kRLErrorInvalidState ? (void *)1 : NULL;
}

static void test_observer_belongs_to_one_loop(void **state) {
    RLRunLoopRef rl = RLRunLoopGetCurrent();
    RLRunLoopObserverRef o = make("o", kRLRunLoopAllActivities, true, 0, named_cb);
    assert_true(RLRunLoopAddObserver(rl, o, "Mine"));
    assert_true(RLRunLoopAddObserver(rl, o, "Also mine"));
    assert_ptr_equal(rl_test_on_other_thread(add_to_other_loop, o), (void *)1);
    assert_true(RLRunLoopContainsObserver(rl, o, "Mine"));
    /* Out of every mode of this loop, it may join another. */
    assert_true(RLRunLoopRemoveObserver(rl, o, "Mine"));
    assert_ptr_equal(rl_test_on_other_thread(add_to_other_loop, o), (void *)1);
    assert_true(RLRunLoopRemoveObserver(rl, o, "Also mine"));
    assert_ptr_equal(rl_test_on_other_thread(add_to_other_loop, o), (void *)2);
    done(o);
}

#if __BLOCKS__
static void test_handler_block(void **state) {
    RLRunLoopSourceRef k = rl_test_keep_mode("HB");
    __block int entries = 0, exits = 0;
    RLRunLoopObserverRef o = RLRunLoopObserverCreateWithHandler(
        NULL, kRLRunLoopEntry | kRLRunLoopExit, true, 0, ^(RLRunLoopObserverRef obs, RLRunLoopActivity a) {
            if (a == kRLRunLoopEntry)
                entries++;
            else
                exits++;
        });
    assert_true(RLRunLoopAddObserver(RLRunLoopGetCurrent(), o, "HB"));
    RLRunLoopRunInMode("HB", 0, false);
    RLRunLoopRunInMode("HB", 0, false);
    assert_int_equal(entries, 2);
    assert_int_equal(exits, 2);
    done(o);
    rl_test_unkeep(k);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_order_and_filters, rl_trace_setup),
        cmocka_unit_test_setup(test_one_shot_observer, rl_trace_setup),
        cmocka_unit_test_setup(test_one_shot_release_right_after_its_callout, rl_trace_setup),
        cmocka_unit_test_setup(test_invalidate_from_callout, rl_trace_setup),
        cmocka_unit_test_setup(test_no_reentry_while_firing, rl_trace_setup),
        cmocka_unit_test_setup(test_context_balance, rl_trace_setup),
        cmocka_unit_test_setup(test_remove_and_release_from_callout, rl_trace_setup),
        cmocka_unit_test_setup(test_observer_belongs_to_one_loop, rl_trace_setup),
#if __BLOCKS__
        cmocka_unit_test_setup(test_handler_block, rl_trace_setup),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
