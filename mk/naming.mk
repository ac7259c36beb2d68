# One way to name (scripts/check-naming.py states the rule in its header):
# static and plain inside a file, rl__ for what another file uses, declared
# in a header of the room that defines it; base/internal.h declares base
# things only. scripts/fix-naming.py makes the mechanical fixes
# (scripts/naming-renames.txt holds names chosen where the plain one was
# taken); run it again after merging work that adds names.
.PHONY: check-naming fix-naming test-naming

check-naming: ## every file-local name static and plain, every rl__ name shared and declared in its room's header
	@python3 scripts/check-naming.py

fix-naming: ## rename, make static and move declarations so that check-naming passes (what it cannot do, it lists)
	@python3 scripts/fix-naming.py

CHECK_EXTRA += check-naming

test-naming: ## the naming tools on a made-up tree: each break found, the fixes compile, a second run changes nothing
	@scripts/test-naming.sh

CHECK_EXTRA += test-naming
