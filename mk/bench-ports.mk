# bench-ports: local ports against perform requests, message ports against
# a raw Unix-socket ping-pong (bench/bench_ports.c). BPO_ROUNDS, BPO_QUICK.
BENCH_PORTS := $(BUILD)/bench/bench_ports

.PHONY: bench-ports
bench-ports: $(BENCH_PORTS) ## local ports vs perform requests, message ports vs a raw Unix-socket ping-pong
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/ports.csv
	@BENCH_CSV=$(BENCH_RESULTS)/ports.csv $(BENCH_PORTS)

$(BENCH_PORTS): bench/bench_ports.c bench/bench_results.h $(HDRS) $(STATIC_LIB)
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)
BENCH_TARGETS += bench-ports
