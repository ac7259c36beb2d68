# CRunLoop + SwiftThreads — build, test, bench, install.
#
# `make help` lists every target with a line each (the "## " comments on the
# rules, here and in mk/*.mk). Builds are quiet; V=1 shows the commands.
# Extra rules for parts of the project live in mk/*.mk.

MAKEFLAGS += --no-print-directory
.DEFAULT_GOAL := all

# Quiet recipes: `$(call say,CC,file)` prints a short line, $(Q) hides the
# command; V=1 prints the commands instead.
V ?= 0
ifeq ($(V),1)
Q :=
say = :
else ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
Q := @
say = :
else
Q := @
say = printf '  %-8s %s\n' '$(1)' '$(2)'
endif
export V

ifeq ($(origin CC),default)
CC := clang
endif
SWIFT ?= swift
# SwiftPM picks up CC/CFLAGS from the environment, and make exports the ones
# given on its command line: `make CC=gcc check` must not hand gcc to
# SwiftPM (which needs clang for blocks and its target flags).
SWIFTPM = env -u CC -u CFLAGS -u CPPFLAGS -u LDFLAGS -u MAKEFLAGS $(SWIFT)
SWIFT_BIN := $(shell command -v $(SWIFT) 2>/dev/null)
SWIFT_PREFIX := $(patsubst %/bin/swift,%,$(SWIFT_BIN))
SWIFT_LIBDIR := $(SWIFT_PREFIX)/lib/swift/linux
PREFIX ?= /usr/local
VERSION := 0.1.0

CC_NAME := $(notdir $(firstword $(CC)))
IS_CLANG := $(shell $(CC) --version 2>/dev/null | grep -q clang && echo 1)
VARIANT ?=
# PLAIN=1 builds the same library without its speed tricks (object slabs,
# the block copier, spinning before sleeping, request pacing): malloc/free,
# Block_copy, plain futex/epoll waits. Each trick is one RL_PLAIN_* switch
# (Sources/CRunLoop/base/internal.h); `make bench-tricks` shows what each buys.
PLAIN ?=
BUILD ?= build/$(CC_NAME)$(VARIANT)$(if $(filter 1,$(PLAIN)),-plain)

OPT ?= -O2
SAN ?=
# The core's rooms, one folder each (docs/architecture.md): a file includes
# another room's private header by its bare name.
RL_ROOMS := base sync kernel queue loop perform thread io ports
RL_SRC_DIRS := $(RL_ROOMS:%=Sources/CRunLoop/%)
RL_INCLUDES := $(RL_SRC_DIRS:%=-I%)
CPPFLAGS += -Iinclude $(RL_INCLUDES) -D_GNU_SOURCE
ifeq ($(PLAIN),1)
CPPFLAGS += -DRL_PLAIN=1
endif
# Extra defines for the library, e.g. RL_DEFS=-DRL_TRICK_POOL=0 (one trick
# off; scripts/bench-tricks.py builds such variants in build/tricks/).
RL_DEFS ?=
CPPFLAGS += $(RL_DEFS)
CFLAGS ?= $(OPT) -g
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -fPIC -fvisibility=hidden $(SAN)
LDFLAGS += $(SAN)
# Thread-local variables through TLS descriptors: in the shared library the
# default model calls __tls_get_addr on every access (a lock's read holds,
# the object pool's caches, the current loop), which made libcrunloop.so's
# RLReadWriteLock read lock+unlock 10-12 ns against 5.5 ns linked statically
# (8.2 ns with descriptors), timer create+release 32-47 ns against 28.
# Unlike initial-exec, it leaves the library loadable with dlopen. Not with
# the sanitizers, which track dynamic TLS through __tls_get_addr.
ifeq ($(shell uname -m),x86_64)
ifeq ($(strip $(SAN)),)
CFLAGS += -mtls-dialect=gnu2
endif
endif
LIBS := -lbsd -luring -lpthread -lm
# Blocks (clang only) use Debian's BlocksRuntime (libblocksruntime-dev), so
# the installed library and crunloop.pc name no Swift toolchain path and a
# static link needs nothing at run time. SwiftPM builds (Package.swift) link
# the toolchain's copy instead, as Foundation and Dispatch do. A program that
# ends up with both (a Swift program that also links this libcrunloop.so)
# still uses one runtime for every block: the two export the same symbols
# (_Block_copy, _Block_release, _NSConcrete*Block) with the same block ABI,
# and the dynamic linker binds every reference to those names, from any
# library, to the first definition in load order. scripts/check-install.sh
# checks those bindings.
BLOCKS_LIBS :=
ifeq ($(IS_CLANG),1)
CFLAGS += -fblocks
BLOCKS_LIBS := -lBlocksRuntime
LIBS += $(BLOCKS_LIBS)
# The Swift toolchain's clang moves code it guesses cold into separate
# functions (-fsplit-cold-code, on by default there): it guessed the short
# paths of adding and removing a timer cold, and the add+remove pair took 279
# instructions instead of 234 (callgrind on a clang build). Off where the
# compiler has the switch.
NO_COLD_SPLIT := $(shell $(CC) -Xclang -fno-split-cold-code -x c -c -o /dev/null /dev/null 2>/dev/null && echo -Xclang -fno-split-cold-code)
CFLAGS += $(NO_COLD_SPLIT)
endif

SRCS := $(sort $(wildcard $(RL_SRC_DIRS:%=%/*.c)))
OBJS := $(SRCS:Sources/CRunLoop/%.c=$(BUILD)/obj/%.o)
HDRS := $(wildcard include/crunloop/*.h) $(wildcard $(RL_SRC_DIRS:%=%/*.h))
STATIC_LIB := $(BUILD)/libcrunloop.a
SHARED_LIB := $(BUILD)/libcrunloop.so

TEST_SRCS := $(sort $(wildcard Tests/c/test_*.c))
TEST_BINS := $(TEST_SRCS:Tests/c/%.c=$(BUILD)/tests/%)
TEST_SUPPORT := $(wildcard Tests/c/support/*.c)
TEST_LIBS := -lcmocka
# The toolchain clang's TSan runtime refers to libdispatch symbols.
# (rpath: the library itself no longer links anything of the toolchain.)
SWIFT_RPATH := -Wl,-rpath,$(SWIFT_LIBDIR)
TSAN_EXTRA_LIBS := $(if $(IS_CLANG),-L$(SWIFT_LIBDIR) $(SWIFT_RPATH) -ldispatch)

.PHONY: FORCE all lib deps check check-c check-swift check-swift-demo check-readme check-docs check-headers check-tree \
        check-asan check-tsan check-leak check-lockdep check-install check-exports check-sanitizers check-bench-chart \
        check-swift-tsan check-swift-asan bench bench-chart demo demo-swift help install clean

all: lib $(BUILD)/crunloop.pc ## libcrunloop.a, libcrunloop.so and crunloop.pc in $(BUILD) (the default)
lib: $(STATIC_LIB) $(SHARED_LIB) ## libcrunloop.a and libcrunloop.so only

deps: ## install the Debian packages the build, tests and benches need (apt-get)
	@scripts/setup-deps.sh

# Objects depend on the compiler and flags they were built with, so reusing
# a BUILD folder with another CC or sanitizer rebuilds instead of mixing.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW := $(CC) $(CPPFLAGS) $(CFLAGS)
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || printf '%s' '$(FLAGS_NOW)' > $(FLAGS_STAMP); })

$(BUILD)/obj/%.o: Sources/CRunLoop/%.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(STATIC_LIB): $(OBJS)
	@mkdir -p $(dir $@); $(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHARED_LIB): $(OBJS)
	@mkdir -p $(dir $@); $(call say,LD,$@)
	$(Q)$(CC) -shared -Wl,-soname,libcrunloop.so.0 -Wl,--build-id $(LDFLAGS) -o $@ $^ $(LIBS)

# Regenerated every time, so it always carries the PREFIX of this call.
# No -fblocks in Cflags: the block APIs sit behind __BLOCKS__, so gcc users
# get the function-pointer API and clang users add -fblocks themselves.
# -lBlocksRuntime (Debian's) is in Libs, not Libs.private, for a clang
# build: a program using ^{ } literals needs it itself.
# libbsd through Requires.private, so that `pkg-config --static` adds what
# libbsd.a needs in turn (-lmd).
$(BUILD)/crunloop.pc: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: crunloop' 'Description: Run loops, threads, perform requests and locks (CoreFoundation-style) for Linux' \
	  'Version: $(VERSION)' 'Requires.private: libbsd' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lcrunloop $(BLOCKS_LIBS)' \
	  'Libs.private: -luring -lpthread -lm' > $@

FORCE:

# test_health checks that reports name callouts by symbol (dladdr reads
# the dynamic symbol table).
$(BUILD)/tests/test_health: LDFLAGS += -rdynamic

$(BUILD)/tests/%: Tests/c/%.c $(TEST_SUPPORT) $(wildcard Tests/c/support/*.h) $(STATIC_LIB)
	@mkdir -p $(dir $@); $(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) -ITests/c/support $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT) $(STATIC_LIB) $(TEST_LIBS) $(LIBS)

# The guide's message-port listings (examples/c/message_ports.c, included
# unchanged by this test) must compile through cf_compat.h with -Werror.
$(BUILD)/tests/test_cf_compat_ports: private CFLAGS += -Werror
$(BUILD)/tests/test_cf_compat_ports: examples/c/message_ports.c

# The main dispatch queue's test is the one C test that links the
# toolchain's libdispatch (the library never does: it finds libdispatch's
# hooks at run time). Without a Swift toolchain it is not built.
$(BUILD)/tests/test_main_queue: private CPPFLAGS += -idirafter $(SWIFT_PREFIX)/lib/swift
$(BUILD)/tests/test_main_queue: private LIBS += -L$(SWIFT_LIBDIR) $(SWIFT_RPATH) -ldispatch
ifeq ($(wildcard $(SWIFT_LIBDIR)/libdispatch.so),)
TEST_BINS := $(filter-out $(BUILD)/tests/test_main_queue,$(TEST_BINS))
endif

# The C tests, one cmocka program per Tests/c/test_*.c. TEST_RUNNER prefixes
# each run (valgrind for check-leak); TESTS=name limits the run to some.
TESTS ?=
check-c: deps $(TEST_BINS) ## the C unit tests (cmocka, Tests/c; TESTS=test_timer runs some)
	@BUILD=$(BUILD) TEST_RUNNER="$(TEST_RUNNER)" scripts/run-c-tests.sh $(TESTS)

# PLAIN=1 carries over to SwiftPM as a C define, in its own build folder.
SWIFT_ARGS := $(if $(filter 1,$(PLAIN)),--scratch-path .build/plain -Xcc -DRL_PLAIN=1)
SWIFTPM_DEBUG := $(if $(filter 1,$(PLAIN)),.build/plain/debug,.build/debug)
check-swift: deps ## `swift test` (SwiftThreads), built quietly
	@SWIFT_ARGS="$(SWIFT_ARGS)" scripts/run-swift-tests.sh

# The Swift examples in their fast mode, each run and its output checked
# (the threaded parser and the daemon with the C examples' checks).
check-swift-demo: deps ## the Swift examples (demo, echo client, threaded parser, daemon) run fast and their output checked
	@SWIFT_ARGS="$(SWIFT_ARGS)" scripts/run-swift-tests.sh --demo

# Every C and Swift block of README.md compiled and run. The Swift blocks
# link against the SwiftPM debug build, so this runs after check-swift.
check-readme: deps lib ## every C and Swift code block of README.md, compiled (-Wall -Werror) and run
	@BUILD=$(BUILD) LIBS="$(LIBS)" SWIFTPM_BUILD=$(SWIFTPM_DEBUG) scripts/check-readme.sh

# The DocC build reuses the debug build of check-swift (about 30 s more).
check-docs: deps ## the SwiftThreads DocC documentation builds with no warnings (swift package generate-documentation)
	@scripts/check-docs.sh

check-tree: ## `make help` covers every target; no comment points at an issue number
	@scripts/check-tree.sh

check-headers: ## the public headers under C11/C17 -pedantic, C23 and C++17 (gcc and clang)
	@scripts/check-headers.sh

# The Swift examples, at a readable pace.
demo-swift: deps ## the Swift part of `make demo`
	@scripts/run-swift-tests.sh --tour

# Fragments in mk/*.mk append to these: CHECK_EXTRA (more test targets run
# by `make check`), BENCH_TARGETS (tables printed by `make bench`) and
# DEMO_TARGETS (the tour run by `make demo`).
CHECK_EXTRA ?=
BENCH_TARGETS ?=
DEMO_TARGETS ?=

# Every part runs even when an earlier one fails; scripts/run-check.sh
# prints each part's PASS/FAIL lines, then a table and one line of totals.
check: deps ## every test: C, CF differential, headers, examples, install, exports, swift test, README, DocC
	@scripts/run-check.sh check-c $(CHECK_EXTRA) check-swift check-swift-demo check-readme check-docs

# Benches that can write their results as CSV put them in BENCH_RESULTS;
# bench-chart draws one chart per group from them (matplotlib: Debian's
# python3-matplotlib, from scripts/setup-deps.sh, or any python3 with it).
BENCH_RESULTS = $(BUILD)/bench/results
comma := ,
BENCH_CHARTS = $(BUILD)/bench/charts
CHART_PYTHON := $(shell for p in /usr/bin/python3 python3; do $$p -c 'import matplotlib' 2>/dev/null && { echo $$p; break; }; done)

bench: deps ## every benchmark table, then one chart per group (SVG+PNG) in build/CC/bench/charts
	@$(if $(strip $(BENCH_TARGETS)),$(MAKE) -k $(BENCH_TARGETS); status=$$?; $(MAKE) bench-chart; exit $$status,echo "no benchmarks yet")

# Every group found in the results gets its chart; a bench of BENCH_TARGETS
# that left no results is named (the script's --expect).
check-bench-chart: deps ## bench-chart on made-up results: missing benches, peers and bad files give messages, not crashes
	@scripts/check-bench-chart.sh
CHECK_EXTRA += check-bench-chart

bench-chart: ## a chart (SVG+PNG) per bench group from the last results in build/CC/bench/results
	@$(if $(CHART_PYTHON),$(CHART_PYTHON) scripts/bench-chart.py $(BENCH_CHARTS) $(BENCH_RESULTS) \
	  --expect $(subst $(eval) ,$(comma),$(strip $(BENCH_TARGETS:bench-%=%))),echo "bench-chart: no python3 with matplotlib (scripts/setup-deps.sh installs python3-matplotlib)")

demo: deps ## a tour of the examples, C then Swift, at a readable pace
	@$(if $(strip $(DEMO_TARGETS)),$(MAKE) $(DEMO_TARGETS),echo "no demo yet")

help: ## this list
	@printf 'make TARGET [V=1] [CC=gcc] [PLAIN=1] ...   (V=1 shows every command)\n\n'
	@awk -F':.*## ' '/^[a-zA-Z0-9_.-]+:.*## / { printf "  %-20s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

check-asan: deps ## the C tests under ASan+UBSan (LeakSanitizer included)
	RL_TEST_SCALE=asan $(MAKE) check-c VARIANT=-asan OPT="-O1 -DRL_LOCKCLASS=1" SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

check-tsan: deps ## the C tests under ThreadSanitizer
	RL_TEST_SCALE=tsan $(MAKE) check-c VARIANT=-tsan OPT="-O1 -DRL_LOCKCLASS=1" SAN="-fsanitize=thread" TEST_LIBS="-lcmocka $(TSAN_EXTRA_LIBS)"

# The C tests with the lock-order detector on (RLLockDebug.h): every RL lock
# and the run loop's own locks report to it, and a program that triggers a
# report fails (scripts/run-c-tests.sh). The library's own locks (loop,
# item, socket, stream...) report only in a build made with RL_LOCKCLASS=1
# (rl_lockclass.h), this one: their two instructions a lock and unlock are
# more than a tenth of a wake-up, and the orders they check are the
# library's, checked here.
check-lockdep: deps ## the C tests with the lock-order detector on (RL_LOCK_DEBUG=1), the library's own locks included
	RL_LOCK_DEBUG=1 $(MAKE) check-c VARIANT=-lockdep OPT="-O2 -DRL_LOCKCLASS=1"

# valgrind runs one thread at a time; --fair-sched=yes hands the CPU round
# robin, so a thread that spins cannot starve the one it is waiting for.
# On the epoll backend: valgrind 3.19 holds its thread lock through
# io_uring_enter (it does not know the call blocks), so a loop asleep on
# io_uring would stop every other thread of the test.
check-leak: deps ## the C tests under valgrind memcheck (leaks are errors; epoll backend)
	RL_BACKEND=epoll RL_TEST_SCALE=valgrind $(MAKE) check-c VARIANT=-valgrind OPT="-O2 -gdwarf-4" TEST_RUNNER="valgrind -q --fair-sched=yes --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=99"

# The Swift tests under the sanitizers, each in its own build folder. Extra
# SwiftPM build folders live inside .build: the C target's path is the
# package root, and SwiftPM fails a rebuild ("unknown build description")
# when the folder it writes is elsewhere under that root.
# XCTest's runner leaks a few bytes of its own at exit (not our code): the
# suppression file names those frames only.
# Each sanitizer run builds, then tests, within SWIFT_TEST_TIMEOUT seconds
# (about 90 s each here); a hung test is named when the run is stopped.
SWIFT_TEST_TIMEOUT ?= 1200
check-swift-tsan: deps ## `swift test` under ThreadSanitizer (.build/tsan)
	RL_TEST_SCALE=tsan scripts/swift-test-timed.sh $(SWIFT_TEST_TIMEOUT) .build/logs/test-tsan.log --tee \
	  $(SWIFTPM) test --scratch-path .build/tsan --sanitize=thread

check-swift-asan: deps ## `swift test` under AddressSanitizer (.build/asan)
	RL_TEST_SCALE=asan LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan-swift.supp \
	  scripts/swift-test-timed.sh $(SWIFT_TEST_TIMEOUT) .build/logs/test-asan.log --tee \
	  $(SWIFTPM) test --scratch-path .build/asan --sanitize=address

check-sanitizers: check-asan check-tsan check-leak check-lockdep check-swift-tsan check-swift-asan ## every sanitizer run above

install: all ## headers, libcrunloop.a/.so, crunloop.pc and the echo examples (bin/crunloop-echo-server, -client) into $(DESTDIR)$(PREFIX)
	install -d $(DESTDIR)$(PREFIX)/include/crunloop $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/crunloop/*.h $(DESTDIR)$(PREFIX)/include/crunloop/
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/libcrunloop.so.$(VERSION)
	ln -sf libcrunloop.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libcrunloop.so.0
	ln -sf libcrunloop.so.0 $(DESTDIR)$(PREFIX)/lib/libcrunloop.so
	install -m 644 $(BUILD)/crunloop.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/

# Everything make and SwiftPM built: build/ (C builds, tests, benches,
# charts), .build/ (SwiftPM, its sanitizer and bench folders) and the NIO
# bench package's own .build.
clean: ## remove what make and SwiftPM built (build/, .build/, bench/nio/.build)
	rm -rf build .build bench/nio/.build

# A bench named on the command line (`make bench-echo`) finds its peers'
# headers and libraries with pkg-config while the mk files are read, so on a
# fresh machine the packages go in before that; `make bench` and `make
# check` install them as a rule and read the mk files again in a sub-make.
ifeq ($(MAKELEVEL),0)
ifneq ($(filter-out bench bench-chart,$(filter bench-%,$(MAKECMDGOALS))),)
ifneq ($(shell scripts/setup-deps.sh >&2 && echo ok),ok)
$(error scripts/setup-deps.sh could not install the packages the benches need)
endif
endif
endif

-include $(sort $(wildcard mk/*.mk))

# The exported symbols are exactly the documented API (the list is kept in
# scripts/exported-symbols.txt). Checked on the clang build, which has the
# block APIs too.
check-exports: deps ## the exported symbols are exactly scripts/exported-symbols.txt
	@$(MAKE) --no-print-directory -s lib CC=clang BUILD=build/clang-exports VARIANT= SAN= PLAIN=
	@scripts/check-exports.sh build/clang-exports/libcrunloop.so
CHECK_EXTRA += check-exports

# `make install` + pkg-config from a program outside the tree.
check-install: deps lib ## install to a temp prefix; gcc and clang programs via pkg-config, shared and static
	@BUILD=$(BUILD) scripts/check-install.sh
CHECK_EXTRA += check-install check-headers check-tree

# After the fragments, so the C tour comes first.
DEMO_TARGETS += demo-swift
