# bench-multiloop: K threads, each with its own run loop (bench/bench_multiloop*.c):
# timer add+remove, perform to itself, source signal+perform, K = 1, 2, 4, 8,
# ours against CoreFoundation (toolchain) and libuv in one process. Always -O2,
# against the static library of $(BUILD); the CF peer is built with the
# toolchain's clang, as in mk/bench-runloop.mk (whose CF_* and UV_* it uses).
BENCH_MULTILOOP := $(BUILD)/bench/bench_multiloop
BENCH_MULTILOOP_OBJ := $(BUILD)/bench/obj
BENCH_MULTILOOP_OBJS := $(BENCH_MULTILOOP_OBJ)/bench_multiloop.o $(BENCH_MULTILOOP_OBJ)/bench_multiloop_rl.o \
                        $(BENCH_MULTILOOP_OBJ)/bench_multiloop_cf.o $(BENCH_MULTILOOP_OBJ)/bench_multiloop_uv.o

BENCH_TARGETS += bench-multiloop

.PHONY: bench-multiloop
bench-multiloop: $(BENCH_MULTILOOP) ## K threads each on its own run loop (K = 1, 2, 4, 8), ours vs the peers
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/multiloop.csv
	@BENCH_CSV=$(BENCH_RESULTS)/multiloop.csv $(BENCH_MULTILOOP)

$(BENCH_MULTILOOP): $(BENCH_MULTILOOP_OBJS) $(STATIC_LIB)
	@$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -pthread -o $@ $(BENCH_MULTILOOP_OBJS) $(STATIC_LIB) $(LIBS) $(UV_LIBS) $(CF_LIBS) -lm

$(BENCH_MULTILOOP_OBJ)/bench_multiloop.o: bench/bench_multiloop.c bench/bench_multiloop.h bench/bench_results.h
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 -pthread -c -o $@ $<

$(BENCH_MULTILOOP_OBJ)/bench_multiloop_rl.o: bench/bench_multiloop_cf.c bench/bench_multiloop.h $(HDRS)
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 -pthread -c -o $@ $<

$(BENCH_MULTILOOP_OBJ)/bench_multiloop_cf.o: bench/bench_multiloop_cf.c bench/bench_multiloop.h
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CF_CC) $(CF_CFLAGS) -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -DBRL_CF -pthread -c -o $@ $<

$(BENCH_MULTILOOP_OBJ)/bench_multiloop_uv.o: bench/bench_multiloop_uv.c bench/bench_multiloop.h
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 -pthread $(UV_CFLAGS) -c -o $@ $<
