# Fuzzing with libFuzzer (the Swift toolchain's clang ships it), under ASan
# and UBSan. Each Tests/fuzz/fuzz_NAME.c is one target with a checked-in
# seed corpus in Tests/fuzz/corpus/NAME/; new inputs found go to
# build/fuzz/corpus/NAME, which is not committed.
#   make fuzz                       every target for FUZZ_SECONDS (default 60) each
#   make fuzz FUZZ_SECONDS=10       what `make check` runs (briefly)
#   make fuzz FUZZ=wire             one target
FUZZ_CC ?= $(SWIFT_PREFIX)/bin/clang
FUZZ_SECONDS ?= 60
FUZZ_ALL := $(patsubst Tests/fuzz/fuzz_%.c,%,$(wildcard Tests/fuzz/fuzz_*.c))
FUZZ ?= $(FUZZ_ALL)
FUZZ_BUILD := build/fuzz
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -Iinclude -ISources/CRunLoop -D_GNU_SOURCE -std=gnu11 -fblocks

.PHONY: fuzz check-fuzz
fuzz: ## libFuzzer targets (Tests/fuzz) under ASan+UBSan, FUZZ_SECONDS each (FUZZ=name for one)
	@mkdir -p $(FUZZ_BUILD)
	@set -e; for t in $(FUZZ); do \
	  src=Tests/fuzz/fuzz_$$t.c; \
	  lib_srcs=$$(sed -n 's|^ \* fuzz-sources: ||p' $$src); \
	  $(FUZZ_CC) $(FUZZ_FLAGS) -o $(FUZZ_BUILD)/fuzz_$$t $$src $$lib_srcs -lbsd -lpthread -lm \
	    > $(FUZZ_BUILD)/fuzz_$$t.build.log 2>&1 || { cat $(FUZZ_BUILD)/fuzz_$$t.build.log; exit 1; }; \
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
