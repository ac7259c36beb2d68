# bench-thread: the thread and perform rows — RLThread against raw
# pthreads (create->entry latency, create+join) and the perform round trip
# onto a worker against CoreFoundation's run loop (bench/bench_thread*.c),
# then the same from Swift against Foundation's Thread/RunLoop
# (bench/swift, `swiftthreads-bench`, built in release mode in its own
# scratch folder; the first build takes a few minutes). Always -O2, against
# the static library of $(BUILD). The CF peer is built with the toolchain's
# clang (CF's headers need it), like bench_runloop_cf.c.
# BENCH_THREAD_SWIFT=0 leaves the Swift half out.
BENCH_THREAD := $(BUILD)/bench/bench_thread
BENCH_THREAD_OBJ := $(BUILD)/bench/obj
BENCH_THREAD_SWIFT ?= 1

BTH_CF_CC ?= $(SWIFT_PREFIX)/bin/clang
BTH_CF_CFLAGS := -I$(SWIFT_PREFIX)/lib/swift -fblocks
BTH_CF_LIBS := -L$(SWIFT_LIBDIR) -Wl,-rpath,$(SWIFT_LIBDIR) -lFoundation -lBlocksRuntime

BENCH_TARGETS += bench-thread

.PHONY: bench-thread bench-thread-c bench-thread-swift
bench-thread: bench-thread-c $(if $(filter 1,$(BENCH_THREAD_SWIFT)),bench-thread-swift) ## threads and perform: C vs pthreads and CF, Swift vs Foundation

bench-thread-c: $(BENCH_THREAD) ## the C half of bench-thread
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/thread.csv
	@BENCH_CSV=$(BENCH_RESULTS)/thread.csv $(BENCH_THREAD)

bench-thread-swift: ## the Swift half of bench-thread (release build in .build/bench-release)
	@$(call say,SWIFT,building swiftthreads-bench in release mode (the first build takes minutes) ...)
	$(Q)$(SWIFTPM) build -c release --scratch-path .build/bench-release --product swiftthreads-bench \
	  $(if $(filter 1,$(V)),,> $(BUILD)/bench-swift-build.log 2>&1 || { tail -30 $(BUILD)/bench-swift-build.log; exit 1; })
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/thread-swift.csv
	$(Q)BENCH_CSV=$(BENCH_RESULTS)/thread-swift.csv $(SWIFTPM) run -q -c release --skip-build --scratch-path .build/bench-release swiftthreads-bench

$(BENCH_THREAD): $(BENCH_THREAD_OBJ)/bench_thread.o $(BENCH_THREAD_OBJ)/bench_thread_cf.o $(STATIC_LIB)
	@$(call say,CC,$@)
	$(Q)$(CC) $(LDFLAGS) -pthread -o $@ $(BENCH_THREAD_OBJ)/bench_thread.o $(BENCH_THREAD_OBJ)/bench_thread_cf.o \
	  $(STATIC_LIB) $(LIBS) $(BTH_CF_LIBS) -lm

$(BENCH_THREAD_OBJ)/bench_thread.o: bench/bench_thread.c bench/bench_thread_peers.h bench/bench_results.h $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -O2 -pthread -c -o $@ $<

$(BENCH_THREAD_OBJ)/bench_thread_cf.o: bench/bench_thread_cf.c bench/bench_thread_peers.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(BTH_CF_CC) $(BTH_CF_CFLAGS) -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -pthread \
	  -c -o $@ $<
