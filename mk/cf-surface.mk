# The CF surface (scripts/check-cf-surface.sh): every function and exported
# constant of the toolchain's CFRunLoop.h, CFSocket.h, CFStream.h and
# CFMessagePort.h is mapped by include/crunloop/cf_compat.h onto a name the
# library exports, or listed with its reason in
# scripts/cf-surface-exclusions.txt. Checked on the clang build (the one
# check-exports uses), which has the block APIs too.
.PHONY: check-cf-surface
check-cf-surface: deps ## every CFRunLoop/CFSocket/CFStream/CFMessagePort.h function is mapped by cf_compat.h and exported
	@$(MAKE) --no-print-directory -s lib CC=clang BUILD=build/clang-exports VARIANT= SAN= PLAIN=
	@scripts/check-cf-surface.sh build/clang-exports/libcrunloop.so

CHECK_EXTRA += check-cf-surface
