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
