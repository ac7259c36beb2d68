# bench-memory: the memory table — RSS growth per timer (100,000 in one
# loop), per sleeping loop thread (200, 64 KB stacks, one timer each) and
# per idle connection that echoed a byte (4,000), each measured in a fresh
# process (the bench runs itself again per measurement, median of
# BM_ROUNDS=3), ours against CoreFoundation (Swift toolchain), libuv, GLib
# and a raw epoll server (bench/bench_memory*.c). The connection row uses
# bench_echo's servers for ours and CF (bench_echo_cf.c); the "shipped" row
# the installed crunloop-echo-server's code (bench_memory_example.c). Like
# bench_runloop_cf.c, bench_memory_cf.c is built twice: with the toolchain's
# clang and -DBM_CF against CF, with $(CC) against ours. CF_*, UV_*, GLIB_*
# come from mk/bench-runloop.mk. BM_ONLY=, BM_PEERS=, BM_QUICK=1.
BENCH_MEMORY := $(BUILD)/bench/bench_memory
BENCH_MEMORY_OBJ := $(BUILD)/bench/obj
BENCH_MEMORY_OBJS := $(BENCH_MEMORY_OBJ)/bench_memory.o $(BENCH_MEMORY_OBJ)/bench_memory_rl.o \
                     $(BENCH_MEMORY_OBJ)/bench_memory_cf.o $(BENCH_MEMORY_OBJ)/bench_echo_rl.o \
                     $(BENCH_MEMORY_OBJ)/bench_echo_cf.o $(BENCH_MEMORY_OBJ)/bench_memory_example.o
BENCH_MEMORY_FLAGS = $(CPPFLAGS) $(CFLAGS) -O2 -pthread

BENCH_TARGETS += bench-memory

.PHONY: bench-memory
bench-memory: $(BENCH_MEMORY) ## memory table: RSS per timer, sleeping loop thread, idle connection vs CF, libuv, GLib, epoll (BM_ONLY=, BM_PEERS=)
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/memory.csv
	@BENCH_CSV=$(BENCH_RESULTS)/memory.csv $(BENCH_MEMORY)

$(BENCH_MEMORY): $(BENCH_MEMORY_OBJS) $(STATIC_LIB)
	@$(call say,CC,$@)
	$(Q)$(CC) $(LDFLAGS) -pthread -o $@ $(BENCH_MEMORY_OBJS) $(STATIC_LIB) $(LIBS) $(UV_LIBS) $(GLIB_LIBS) $(CF_LIBS) -lm

$(BENCH_MEMORY_OBJ)/bench_memory.o: bench/bench_memory.c bench/bench_memory.h bench/bench_echo.h bench/bench_results.h Tests/c/support/rssutil.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_MEMORY_FLAGS) $(UV_CFLAGS) $(GLIB_CFLAGS) -c -o $@ $<

$(BENCH_MEMORY_OBJ)/bench_memory_example.o: bench/bench_memory_example.c bench/bench_memory.h examples/c/echo_server.c $(EXAMPLE_HDRS) $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_MEMORY_FLAGS) -c -o $@ $<

$(BENCH_MEMORY_OBJ)/bench_memory_rl.o: bench/bench_memory_cf.c bench/bench_memory.h $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_MEMORY_FLAGS) -c -o $@ $<

$(BENCH_MEMORY_OBJ)/bench_memory_cf.o: bench/bench_memory_cf.c bench/bench_memory.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CF_CC) $(CF_CFLAGS) -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -DBM_CF -pthread -c -o $@ $<
