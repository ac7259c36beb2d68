# bench-ports: local ports against perform requests, message ports against
# a raw Unix-socket ping-pong and a D-Bus method call through a private
# dbus-daemon (bench/bench_ports.c). BPO_ROUNDS, BPO_QUICK, BPO_ONLY.
# The D-Bus row needs libdbus-1-dev (scripts/setup-deps.sh installs it);
# without it the bench builds and says why the row is missing.
BENCH_PORTS := $(BUILD)/bench/bench_ports
BPO_DBUS_FLAGS := $(shell pkg-config --exists dbus-1 2>/dev/null && echo -DBPO_DBUS $$(pkg-config --cflags dbus-1))
BPO_DBUS_LIBS := $(shell pkg-config --exists dbus-1 2>/dev/null && pkg-config --libs dbus-1)

# BENCH_PORTS_SWIFT=0 leaves out the Swift half (RLSocketPort vs Foundation's
# SocketPort, bench/swift/Ports.swift: a release build of swiftthreads-bench).
BENCH_PORTS_SWIFT ?= 1

.PHONY: bench-ports bench-ports-c bench-ports-swift
bench-ports: bench-ports-c $(if $(filter 1,$(BENCH_PORTS_SWIFT)),bench-ports-swift) ## ports: local vs perform, message ports vs raw socket and D-Bus, RLSocketPort vs Foundation

bench-ports-c: $(BENCH_PORTS) ## the C half of bench-ports
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/ports.csv
	@BENCH_CSV=$(BENCH_RESULTS)/ports.csv $(BENCH_PORTS)

bench-ports-swift: ## RLSocketPort vs Foundation's SocketPort (release build in .build/bench-release)
	@$(call say,SWIFT,building swiftthreads-bench in release mode (the first build takes minutes) ...)
	$(Q)$(SWIFTPM) build -c release --scratch-path .build/bench-release --product swiftthreads-bench \
	  $(if $(filter 1,$(V)),,> $(BUILD)/bench-swift-build.log 2>&1 || { tail -30 $(BUILD)/bench-swift-build.log; exit 1; })
	$(Q)BSW_ONLY=ports $(SWIFTPM) run -q -c release --skip-build --scratch-path .build/bench-release swiftthreads-bench

$(BENCH_PORTS): bench/bench_ports.c bench/bench_results.h $(HDRS) $(STATIC_LIB)
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 $(BPO_DBUS_FLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS) $(BPO_DBUS_LIBS)
BENCH_TARGETS += bench-ports
