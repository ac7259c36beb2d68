# bench-tricks: what each speed trick buys — the rows it is for, measured
# with the trick on and off in the same run (scripts/bench-tricks.py; each
# variant is built in build/tricks/NAME). TRICKS_ROUNDS=N, TRICKS_ONLY=POOL,...
.PHONY: bench-tricks
bench-tricks: ## what each speed trick buys: its rows with the trick on and off (TRICKS_ONLY=, TRICKS_ROUNDS=)
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/tricks.csv
	@BENCH_CSV=$(BENCH_RESULTS)/tricks.csv scripts/bench-tricks.py
BENCH_TARGETS += bench-tricks
