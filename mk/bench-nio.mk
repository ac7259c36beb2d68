# bench-nio: the Swift run-loop rows against swift-nio's EventLoop and
# Foundation's RunLoop (bench/nio, its own package: the library keeps no
# dependency on NIO). Release build in bench/nio/.build; the first one
# builds swift-nio (a few minutes). NIOB_QUICK=1, NIOB_ROUNDS=N.
.PHONY: bench-nio
bench-nio: ## Swift run loops: ours vs swift-nio EventLoop vs Foundation (execute, scheduleTask, round trip, idle CPU)
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/nio.csv
	@$(call say,SWIFT,building bench/nio in release mode (swift-nio the first time: minutes) ...)
	$(Q)cd bench/nio && $(SWIFTPM) build -c release $(if $(filter 1,$(V)),,> $(CURDIR)/$(BENCH_RESULTS)/nio-build.log 2>&1 \
	  || { tail -30 $(CURDIR)/$(BENCH_RESULTS)/nio-build.log; exit 1; })
	$(Q)cd bench/nio && NIOB_CSV=$(CURDIR)/$(BENCH_RESULTS)/nio.csv $(SWIFTPM) run -q -c release --skip-build swiftthreads-nio-bench
BENCH_TARGETS += bench-nio

# bench-memory-swift: the Swift overlay's memory rows (bench/nio's
# swiftthreads-memory-bench): RSS growth per RLTimer, per sleeping
# RLWorkerThread and per idle RLSocket connection, against Foundation's
# Timer/Thread and swift-nio's scheduled task, event-loop thread and
# channel; a fresh process per measurement, median of MEMB_ROUNDS=3.
# MEMB_QUICK=1, MEMB_ONLY=timer,thread,conn.
.PHONY: bench-memory-swift
bench-memory-swift: ## Swift memory table: RSS per RLTimer, RLWorkerThread, RLSocket connection vs Foundation and swift-nio
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/memory-swift.csv
	@$(call say,SWIFT,building bench/nio in release mode (swift-nio the first time: minutes) ...)
	$(Q)cd bench/nio && $(SWIFTPM) build -c release --product swiftthreads-memory-bench $(if $(filter 1,$(V)),,> $(CURDIR)/$(BENCH_RESULTS)/memory-swift-build.log 2>&1 \
	  || { tail -30 $(CURDIR)/$(BENCH_RESULTS)/memory-swift-build.log; exit 1; })
	$(Q)cd bench/nio && MEMB_CSV=$(CURDIR)/$(BENCH_RESULTS)/memory-swift.csv $(SWIFTPM) run -q -c release --skip-build swiftthreads-memory-bench
BENCH_TARGETS += bench-memory-swift
