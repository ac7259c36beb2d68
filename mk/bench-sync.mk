# bench-sync: the synchronization toolkit against raw pthreads / C11 atomics
# (bench/bench_sync.c), linked with the static library of $(BUILD). Always
# -O2, whatever OPT the library was built with, so that the peers are
# compiled the way a user would compile them. `make bench` depends on it.
BENCH_SYNC := $(BUILD)/bench/bench_sync

.PHONY: bench-sync
bench-sync: $(BENCH_SYNC) ## locks, conditions and atomics vs raw pthreads and C11 atomics
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/sync.csv
	@BENCH_CSV=$(BENCH_RESULTS)/sync.csv $(BENCH_SYNC)

$(BENCH_SYNC): bench/bench_sync.c bench/bench_results.h $(HDRS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)
BENCH_TARGETS += bench-sync
