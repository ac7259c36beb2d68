# Fuzzing with libFuzzer (the Swift toolchain's clang ships it), under ASan
# and UBSan. Each Tests/fuzz/fuzz_NAME.c is one target with a checked-in
# seed corpus in Tests/fuzz/corpus/NAME/; new inputs found go to
# build/fuzz/corpus/NAME, which is not committed. Targets link the library
# built once with the same sanitizers (build/fuzz/libcrunloop-fuzz.a); what
# they call that no public function reaches is declared in
# Sources/CRunLoop/base/rl_fuzz.h.
#   make fuzz                       every target for FUZZ_SECONDS (default 60) each
#   make fuzz FUZZ_SECONDS=10       a shorter run
#   make fuzz FUZZ=wire             one target
#   make fuzz-smoke                 every target for 20 s (CI: .ci/run)
FUZZ_CC ?= $(SWIFT_PREFIX)/bin/clang
FUZZ_SECONDS ?= 60
FUZZ_ALL := $(patsubst Tests/fuzz/fuzz_%.c,%,$(wildcard Tests/fuzz/fuzz_*.c))
FUZZ ?= $(FUZZ_ALL)
FUZZ_BUILD := build/fuzz
FUZZ_COMMON := -g -O1 -fno-sanitize-recover=undefined -Iinclude $(RL_INCLUDES) -D_GNU_SOURCE -std=gnu11 -fblocks
FUZZ_FLAGS := -fsanitize=fuzzer,address,undefined $(FUZZ_COMMON)
FUZZ_LIB_FLAGS := -fsanitize=fuzzer-no-link,address,undefined $(FUZZ_COMMON)
FUZZ_OBJS := $(SRCS:Sources/CRunLoop/%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_LIB := $(FUZZ_BUILD)/libcrunloop-fuzz.a
FUZZ_BINS := $(FUZZ:%=$(FUZZ_BUILD)/fuzz_%)

$(FUZZ_BUILD)/obj/%.o: Sources/CRunLoop/%.c $(HDRS) mk/fuzz.mk
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_LIB_FLAGS) -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_OBJS)
	@$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: Tests/fuzz/fuzz_%.c $(FUZZ_LIB) $(HDRS) $(wildcard Tests/fuzz/*.h)
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -fuse-ld=lld -o $@ $< $(FUZZ_LIB) -lBlocksRuntime -lbsd -luring -lpthread -lm

.PHONY: fuzz check-fuzz fuzz-smoke
fuzz: $(FUZZ_BINS) ## libFuzzer targets (Tests/fuzz) under ASan+UBSan, FUZZ_SECONDS each (FUZZ=name for one)
	@set -e; for t in $(FUZZ); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  echo "fuzz $$t: $(FUZZ_SECONDS) s"; \
	  $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -max_len=65536 \
	    $(FUZZ_BUILD)/corpus/$$t Tests/fuzz/corpus/$$t 2>$(FUZZ_BUILD)/fuzz_$$t.log \
	    || { tail -40 $(FUZZ_BUILD)/fuzz_$$t.log; echo "fuzz $$t: FAILED (crash input in the log above)"; exit 1; }; \
	  grep -E "stat::number_of_executed_units" $(FUZZ_BUILD)/fuzz_$$t.log | sed "s/^/fuzz $$t: /"; \
	done

# A short run in `make check`: every target, a few seconds each.
check-fuzz: ## every fuzz target for a few seconds (part of make check)
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(or $(CHECK_FUZZ_SECONDS),5)
CHECK_EXTRA += check-fuzz

# CI's run: every target long enough to get past its seeds (about 2 minutes
# in all with the library's build).
fuzz-smoke: ## every fuzz target for 20 s (FUZZ_SMOKE_SECONDS=), a step of .ci/run
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(or $(FUZZ_SMOKE_SECONDS),20)
