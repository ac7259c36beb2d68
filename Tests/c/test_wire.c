/* test_wire.c — port message frames (rl_wire.c): what is encoded is read
 * back the same however the stream is cut, and every malformed frame is
 * refused with its reason before anything in it is trusted. */
#include "testutil.h"

#include "rl_wire.h"

#include <stdlib.h>
#include <string.h>

/* Feeds `len` bytes into r, `step` at a time (0: as much as wanted); stops
 * at the first complete frame (returned through f) or error. */
static rl__wire_error feed(rl__wire_reader *r, const uint8_t *bytes, size_t len, size_t step, size_t *used,
                          bool *complete, rl__wire_frame *f) {
    size_t pos = 0;
    *complete = false;
    while (pos < len) {
        uint8_t *at;
        size_t want;
        rl__wire_want(r, &at, &want);
        assert_true(want > 0);
        size_t n = step && want > step ? step : want;
        if (n > len - pos)
            n = len - pos;
        memcpy(at, bytes + pos, n);
        pos += n;
        bool done;
        rl__wire_error e = rl__wire_got(r, n, &done);
        if (e) {
            *used = pos;
            return e;
        }
        if (done) {
            rl__wire_take(r, f);
            *complete = true;
            break;
        }
    }
    *used = pos;
    return RL_WIRE_OK;
}

static size_t encode(uint8_t **out, rl__wire_kind kind, int32_t msgid, uint32_t seq, const rl__wire_comp *c,
                     uint32_t n) {
    size_t len = rl__wire_size(c, n);
    *out = malloc(len);
    assert_int_equal(rl__wire_encode(*out, kind, msgid, seq, c, n), len);
    return len;
}

static void test_round_trip_in_any_read_sizes(void **state) {
    const uint8_t big[3000] = {[0] = 1, [2999] = 2};
    rl__wire_comp c[] = {{RL_WIRE_DATA, 5, (const uint8_t *)"hello"},
                        {RL_WIRE_DATA, 0, NULL},
                        {RL_WIRE_PORT, 6, (const uint8_t *)"worker"},
                        {RL_WIRE_DATA, sizeof big, big}};
    uint8_t *bytes;
    size_t len = encode(&bytes, RL_WIRE_REQUEST, -42, 77, c, 4);
    assert_int_equal(len, RL_WIRE_HEADER + 4 * RL_WIRE_CHEADER + 5 + 6 + sizeof big);
    for (size_t step = 0; step < 30; step++) {
        rl__wire_reader r;
        rl__wire_reader_init(&r, RL_WIRE_MAX_BODY);
        assert_true(rl__wire_idle(&r));
        rl__wire_frame f;
        size_t used;
        bool complete;
        assert_int_equal(feed(&r, bytes, len, step, &used, &complete, &f), RL_WIRE_OK);
        assert_true(complete);
        assert_int_equal(used, len);
        assert_true(rl__wire_idle(&r));
        assert_int_equal(f.h.kind, RL_WIRE_REQUEST);
        assert_int_equal(f.h.msgid, -42);
        assert_int_equal(f.h.seq, 77);
        assert_int_equal(f.h.ncomp, 4);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(f.comps[i].type, c[i].type);
            assert_int_equal(f.comps[i].len, c[i].len);
            if (c[i].len)
                assert_memory_equal(f.comps[i].bytes, c[i].bytes, c[i].len);
        }
        rl__wire_frame_free(&f);
        rl__wire_reader_free(&r);
    }
    free(bytes);
}

static void test_frames_back_to_back_and_empty_bodies(void **state) {
    uint8_t *a, *b;
    size_t la = encode(&a, RL_WIRE_ONEWAY, 1, 0, NULL, 0);
    rl__wire_comp c = {RL_WIRE_PORT, 3, (const uint8_t *)"abc"};
    size_t lb = encode(&b, RL_WIRE_HELLO, 2, 0, &c, 1);
    assert_int_equal(la, RL_WIRE_HEADER);
    uint8_t *both = malloc(la + lb);
    memcpy(both, a, la);
    memcpy(both + la, b, lb);
    rl__wire_reader r;
    rl__wire_reader_init(&r, 1024);
    rl__wire_frame f;
    size_t used;
    bool complete;
    assert_int_equal(feed(&r, both, la + lb, 7, &used, &complete, &f), RL_WIRE_OK);
    assert_true(complete);
    assert_int_equal(used, la);
    assert_int_equal(f.h.kind, RL_WIRE_ONEWAY);
    assert_int_equal(f.h.ncomp, 0);
    rl__wire_frame_free(&f);
    assert_int_equal(feed(&r, both + used, la + lb - used, 7, &used, &complete, &f), RL_WIRE_OK);
    assert_true(complete);
    assert_int_equal(f.h.kind, RL_WIRE_HELLO);
    assert_int_equal(f.comps[0].len, 3);
    rl__wire_frame_free(&f);
    rl__wire_reader_free(&r);
    free(a);
    free(b);
    free(both);
}

/* Patches one header field of a valid frame and expects `want`. */
static void expect_refused(size_t off, uint32_t value, int width, uint32_t limit, rl__wire_error want) {
    rl__wire_comp c[] = {{RL_WIRE_DATA, 4, (const uint8_t *)"abcd"}, {RL_WIRE_PORT, 2, (const uint8_t *)"pq"}};
    uint8_t *bytes;
    size_t len = encode(&bytes, RL_WIRE_REQUEST, 5, 9, c, 2);
    for (int i = 0; i < width; i++)
        bytes[off + i] = (uint8_t)(value >> (8 * i));
    rl__wire_reader r;
    rl__wire_reader_init(&r, limit);
    rl__wire_frame f;
    size_t used;
    bool complete;
    assert_int_equal(feed(&r, bytes, len, 0, &used, &complete, &f), want);
    assert_false(complete);
    assert_string_not_equal(rl__wire_error_text(want), "no error");
    rl__wire_reader_free(&r);
    free(bytes);
}

static void test_malformed_frames_are_refused(void **state) {
    expect_refused(0, 0x41414141, 4, 1024, RL_WIRE_BAD_MAGIC);
    expect_refused(4, 2, 1, 1024, RL_WIRE_BAD_VERSION);
    expect_refused(5, 0, 1, 1024, RL_WIRE_BAD_KIND);
    expect_refused(5, 9, 1, 1024, RL_WIRE_BAD_KIND);
    expect_refused(6, 1, 2, 1024, RL_WIRE_BAD_FLAGS);
    /* body larger than the receiver takes: refused from the header alone */
    expect_refused(0, RL_WIRE_MAGIC, 4, 8, RL_WIRE_TOO_BIG);
    expect_refused(20, 0xffffffffu, 4, RL_WIRE_MAX_BODY, RL_WIRE_TOO_BIG);
    /* more components than bytes to hold them: no huge array is allocated */
    expect_refused(16, 1000000, 4, 1024, RL_WIRE_TOO_MANY_COMPONENTS);
    /* components that do not fill the body exactly */
    expect_refused(16, 1, 4, 1024, RL_WIRE_LONG_BODY);
    /* a component's length past the end, its type, its padding */
    expect_refused(RL_WIRE_HEADER + 4, 1000, 4, 1024, RL_WIRE_SHORT_BODY);
    expect_refused(RL_WIRE_HEADER, 7, 1, 1024, RL_WIRE_BAD_COMPONENT);
    expect_refused(RL_WIRE_HEADER + 2, 1, 1, 1024, RL_WIRE_BAD_COMPONENT);
}

/* A reader with a component limit refuses a header over it, before the
 * body is allocated or read; one at the limit is read whole. */
static void test_component_limit(void **state) {
    rl__wire_comp c[] = {{RL_WIRE_PORT, 0, NULL}, {RL_WIRE_DATA, 2, (const uint8_t *)"ab"}, {RL_WIRE_DATA, 0, NULL}};
    uint8_t *bytes;
    size_t len = encode(&bytes, RL_WIRE_ONEWAY, 1, 0, c, 3);
    rl__wire_reader r;
    rl__wire_reader_init(&r, 1024);
    atomic_store(&r.max_comps, 2);
    rl__wire_frame f;
    size_t used;
    bool complete;
    assert_int_equal(feed(&r, bytes, len, 0, &used, &complete, &f), RL_WIRE_COMPONENT_LIMIT);
    assert_false(complete);
    assert_int_equal(used, RL_WIRE_HEADER); /* nothing of the body */
    assert_null(r.body);
    rl__wire_reader_free(&r);
    rl__wire_reader_init(&r, 1024);
    atomic_store(&r.max_comps, 3);
    assert_int_equal(feed(&r, bytes, len, 0, &used, &complete, &f), RL_WIRE_OK);
    assert_true(complete);
    assert_int_equal(f.h.ncomp, 3);
    rl__wire_frame_free(&f);
    rl__wire_reader_free(&r);
    free(bytes);
}

static void test_error_texts_are_distinct(void **state) {
    for (int a = RL_WIRE_OK; a <= RL_WIRE_COMPONENT_LIMIT; a++)
        for (int b = a + 1; b <= RL_WIRE_COMPONENT_LIMIT; b++)
            assert_string_not_equal(rl__wire_error_text((rl__wire_error)a), rl__wire_error_text((rl__wire_error)b));
    assert_string_equal(rl__wire_error_text((rl__wire_error)999), "unknown frame error");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_in_any_read_sizes),
        cmocka_unit_test(test_frames_back_to_back_and_empty_bodies),
        cmocka_unit_test(test_malformed_frames_are_refused),
        cmocka_unit_test(test_component_limit),
        cmocka_unit_test(test_error_texts_are_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
