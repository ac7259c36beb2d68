# Loop health. bench-health: what loop health costs — loop passes and perform requests
# with health off, a slow-callout threshold set (none crossed), a handler
# set too, and timing histograms on; ratios against "off" in the same
# rounds (bench/bench_health.c). HB_ROUNDS= rounds (default 9).
BENCH_HEALTH := $(BUILD)/bench/bench_health

BENCH_TARGETS += bench-health

.PHONY: bench-health
bench-health: $(BENCH_HEALTH) ## loop health's cost: passes and performs with it off, a threshold, a handler, timing on
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/health.csv
	@BENCH_CSV=$(BENCH_RESULTS)/health.csv $(BENCH_HEALTH)

$(BENCH_HEALTH): bench/bench_health.c bench/bench_results.h $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 -pthread -o $@ $< $(STATIC_LIB) $(LIBS) -lm

# The loop's USDT probes are all in the library's ELF notes (rl_probes.h).
.PHONY: check-probes
check-probes: $(SHARED_LIB) ## the loop's USDT probes (crunloop:*) are in libcrunloop.so's ELF notes
	@scripts/check-probes.sh $(SHARED_LIB)
CHECK_EXTRA += check-probes
