# Differential tests against CoreFoundation (Tests/diff, scripts/run-diff-tests.sh).
#   make check-diff                  every scenario, CF's trace vs ours
#   make check-diff DIFF=obs_poll    some scenarios only
# Built in their own tree (DIFF_BUILD) with the toolchain's clang, which
# CoreFoundation's headers need.
DIFF_BUILD ?= build/diff$(if $(filter 1,$(PLAIN)),-plain)
DIFF ?=

.PHONY: check-diff
check-diff: ## CF-vs-ours differential scenarios (Tests/diff; DIFF=name runs some)
	@PLAIN=$(PLAIN) BUILD=$(DIFF_BUILD) scripts/run-diff-tests.sh $(DIFF)

CHECK_EXTRA += check-diff

# Our side built with sanitizers (CF's side is not instrumented).
.PHONY: check-diff-asan check-diff-tsan
check-diff-asan: ## the differential tests, our side under ASan+UBSan
	@PLAIN=$(PLAIN) DIFF_SAN=asan scripts/run-diff-tests.sh $(DIFF)
check-diff-tsan: ## the differential tests, our side under TSan
	@PLAIN=$(PLAIN) DIFF_SAN=tsan scripts/run-diff-tests.sh $(DIFF)

# Randomized differential test (Tests/diff/fuzz, scripts/fuzz-diff.sh):
# seeded programs of run-loop operations, CF's trace vs ours per seed.
#   make fuzz-diff N=100000            a long run (seeds SEED.., default 1)
#   make fuzz-diff N=1 SEED=1234       one seed (then: scripts/fuzz-diff.sh
#                                      show 1234 / shrink 1234)
#   make check-fuzz-diff               the short fixed budget make check runs
# FUZZ_JOBS=n runs n batches at once (default 2).
N ?= 10000
SEED ?= 1
FUZZ_CHECK_N ?= 2000

.PHONY: fuzz-diff check-fuzz-diff
fuzz-diff: ## random CF-vs-ours scenarios (N=, SEED=)
	@scripts/fuzz-diff.sh $(N) $(SEED)
check-fuzz-diff: ## a short run of fuzz-diff (part of make check)
	@scripts/fuzz-diff.sh $(FUZZ_CHECK_N) 1

CHECK_EXTRA += check-fuzz-diff
