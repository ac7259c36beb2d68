# bench-runloop: the run-loop table — ours against
# CoreFoundation's run loop (from the Swift toolchain), libuv and GLib, in one
# process (bench/bench_runloop*.c). Each peer is its own translation unit
# because CF's headers and ours cannot meet in one file. Always -O2, against
# the static library of $(BUILD). CF and ours run one source,
# bench_runloop_cf.c, written against CF's API: built with -DBRL_CF against
# CoreFoundation (with the toolchain's clang whatever CC is: CF's headers
# compile only with clang), and with $(CC) against ours via cf_compat.h.
# The executable exports its epoll_wait (bench_runloop.c wraps it to time the
# wake-up path [h]), so that the shared libraries' calls reach it as well.
BENCH_RUNLOOP := $(BUILD)/bench/bench_runloop
BENCH_RUNLOOP_OBJ := $(BUILD)/bench/obj
BENCH_RUNLOOP_PEERS := rl cf uv glib
BENCH_RUNLOOP_OBJS := $(BENCH_RUNLOOP_PEERS:%=$(BENCH_RUNLOOP_OBJ)/bench_runloop_%.o) \
                      $(BENCH_RUNLOOP_OBJ)/bench_runloop.o
BENCH_RUNLOOP_FLAGS = $(CPPFLAGS) $(CFLAGS) -O2 -pthread

CF_CC ?= $(SWIFT_PREFIX)/bin/clang
CF_CFLAGS := -I$(SWIFT_PREFIX)/lib/swift -fblocks
CF_LIBS := -L$(SWIFT_LIBDIR) -Wl,-rpath,$(SWIFT_LIBDIR) -lFoundation -lBlocksRuntime
UV_CFLAGS := $(shell pkg-config --cflags libuv 2>/dev/null)
UV_LIBS := $(shell pkg-config --libs libuv 2>/dev/null || echo -luv)
GLIB_CFLAGS := $(shell pkg-config --cflags glib-2.0 2>/dev/null)
GLIB_LIBS := $(shell pkg-config --libs glib-2.0 2>/dev/null || echo -lglib-2.0)

BENCH_TARGETS += bench-runloop

.PHONY: bench-runloop
bench-runloop: $(BENCH_RUNLOOP) ## run-loop table: ours vs CoreFoundation, libuv, GLib (BRL_ONLY=, BRL_PEERS=)
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/runloop.csv
	@BENCH_CSV=$(BENCH_RESULTS)/runloop.csv $(BENCH_RUNLOOP)

$(BENCH_RUNLOOP): $(BENCH_RUNLOOP_OBJS) $(STATIC_LIB)
	@$(call say,CC,$@)
	$(Q)$(CC) $(LDFLAGS) -pthread -Wl,--export-dynamic-symbol=epoll_wait -o $@ $(BENCH_RUNLOOP_OBJS) $(STATIC_LIB) $(LIBS) $(UV_LIBS) $(GLIB_LIBS) $(CF_LIBS) -ldl -lm

$(BENCH_RUNLOOP_OBJ)/bench_runloop.o: bench/bench_runloop.c bench/bench_runloop.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_RUNLOOP_FLAGS) -c -o $@ $<

$(BENCH_RUNLOOP_OBJ)/bench_runloop_rl.o: bench/bench_runloop_cf.c bench/bench_runloop.h $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_RUNLOOP_FLAGS) -c -o $@ $<

$(BENCH_RUNLOOP_OBJ)/bench_runloop_cf.o: bench/bench_runloop_cf.c bench/bench_runloop.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CF_CC) $(CF_CFLAGS) -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -DBRL_CF -pthread -c -o $@ $<

$(BENCH_RUNLOOP_OBJ)/bench_runloop_uv.o: bench/bench_runloop_uv.c bench/bench_runloop.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_RUNLOOP_FLAGS) $(UV_CFLAGS) -c -o $@ $<

$(BENCH_RUNLOOP_OBJ)/bench_runloop_glib.o: bench/bench_runloop_glib.c bench/bench_runloop.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_RUNLOOP_FLAGS) $(GLIB_CFLAGS) -c -o $@ $<
