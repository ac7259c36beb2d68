# CRunLoop + SwiftThreads — build, test, bench, install.
#
#   make                 libcrunloop.a, libcrunloop.so, crunloop.pc (clang by default)
#   make check           installs missing Debian packages, runs C tests and `swift test`
#   make CC=gcc check-c  the C tests built with gcc (no block APIs)
#   make check-asan      C tests under ASan+UBSan (LeakSanitizer included)
#   make check-tsan      C tests under ThreadSanitizer
#   make check-leak      C tests under valgrind memcheck (leaks are errors)
#   make check-lockdep   C tests with the lock-order detector on (RL_LOCK_DEBUG=1)
#   make bench           benchmark tables against pthreads / C11 / CF / libuv / GLib
#   make demo            a tour of the examples
#   make install PREFIX=/usr/local
#
# Extra rules for parts of the project live in mk/*.mk.

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
# (Sources/CRunLoop/internal.h); `make bench-tricks` shows what each buys.
PLAIN ?=
BUILD ?= build/$(CC_NAME)$(VARIANT)$(if $(filter 1,$(PLAIN)),-plain)

OPT ?= -O2
SAN ?=
CPPFLAGS += -Iinclude -ISources/CRunLoop -D_GNU_SOURCE
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
LIBS := -lbsd -lpthread -lm
PC_LIBS_PRIVATE := -lbsd -lpthread -lm
ifeq ($(IS_CLANG),1)
CFLAGS += -fblocks
BLOCKS_LIBS := -L$(SWIFT_LIBDIR) -Wl,-rpath,$(SWIFT_LIBDIR) -lBlocksRuntime
LIBS += $(BLOCKS_LIBS)
PC_LIBS_PRIVATE += $(BLOCKS_LIBS)
endif

SRCS := $(sort $(wildcard Sources/CRunLoop/*.c))
OBJS := $(SRCS:Sources/CRunLoop/%.c=$(BUILD)/obj/%.o)
HDRS := $(wildcard include/crunloop/*.h) $(wildcard Sources/CRunLoop/*.h)
STATIC_LIB := $(BUILD)/libcrunloop.a
SHARED_LIB := $(BUILD)/libcrunloop.so

TEST_SRCS := $(sort $(wildcard Tests/c/test_*.c))
TEST_BINS := $(TEST_SRCS:Tests/c/%.c=$(BUILD)/tests/%)
TEST_SUPPORT := $(wildcard Tests/c/support/*.c)
TEST_LIBS := -lcmocka
# The toolchain clang's TSan runtime refers to libdispatch symbols.
TSAN_EXTRA_LIBS := $(if $(IS_CLANG),-L$(SWIFT_LIBDIR) -ldispatch)

.PHONY: FORCE all lib deps check check-c check-swift check-asan check-tsan check-leak check-lockdep \
        check-install check-exports check-sanitizers check-swift-tsan check-swift-asan bench demo install clean

all: lib $(BUILD)/crunloop.pc
lib: $(STATIC_LIB) $(SHARED_LIB)

deps:
	@scripts/setup-deps.sh

# Objects depend on the compiler and flags they were built with, so reusing
# a BUILD folder with another CC or sanitizer rebuilds instead of mixing.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW := $(CC) $(CPPFLAGS) $(CFLAGS)
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || printf '%s' '$(FLAGS_NOW)' > $(FLAGS_STAMP); })

$(BUILD)/obj/%.o: Sources/CRunLoop/%.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(STATIC_LIB): $(OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED_LIB): $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libcrunloop.so.0 $(LDFLAGS) -o $@ $^ $(LIBS)

# Regenerated every time, so it always carries the PREFIX of this call.
# No -fblocks in Cflags: the block APIs sit behind __BLOCKS__, so gcc users
# get the function-pointer API and clang users add -fblocks themselves.
$(BUILD)/crunloop.pc: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: crunloop' 'Description: Run loops, threads, perform requests and locks (CoreFoundation-style) for Linux' \
	  'Version: $(VERSION)' 'Cflags: -I$${includedir}' \
	  'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lcrunloop $(PC_LIBS_PRIVATE)' > $@

FORCE:

$(BUILD)/tests/%: Tests/c/%.c $(TEST_SUPPORT) $(wildcard Tests/c/support/*.h) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -ITests/c/support $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT) $(STATIC_LIB) $(TEST_LIBS) $(LIBS)

# The guide's message-port listings (examples/c/message_ports.c, included
# unchanged by this test) must compile through cf_compat.h with -Werror.
$(BUILD)/tests/test_cf_compat_ports: private CFLAGS += -Werror
$(BUILD)/tests/test_cf_compat_ports: examples/c/message_ports.c

# The C tests, one cmocka program per Tests/c/test_*.c. TEST_RUNNER prefixes
# each run (valgrind for check-leak); TESTS=name limits the run to some.
TESTS ?=
check-c: deps $(TEST_BINS)
	@BUILD=$(BUILD) TEST_RUNNER="$(TEST_RUNNER)" scripts/run-c-tests.sh $(TESTS)

# PLAIN=1 carries over to SwiftPM as a C define, in its own build folder.
SWIFT_ARGS := $(if $(filter 1,$(PLAIN)),--scratch-path .build/plain -Xcc -DRL_PLAIN=1)
check-swift: deps
	$(SWIFTPM) build --build-tests $(SWIFT_ARGS)
	$(SWIFTPM) test $(SWIFT_ARGS)
	RL_EXAMPLE_FAST=1 $(SWIFTPM) run $(SWIFT_ARGS) swiftthreads-demo > $(CURDIR)/.build/swiftthreads-demo.out 2>&1 \
	  || { cat .build/swiftthreads-demo.out; echo "swiftthreads-demo failed"; exit 1; }
	@echo "swiftthreads-demo (fast): ok"

# The Swift examples, at a readable pace.
demo-swift: deps
	@echo "==== Swift: swift run swiftthreads-demo ===="
	@$(SWIFTPM) run -q swiftthreads-demo

# Fragments in mk/*.mk append to these: CHECK_EXTRA (more test targets run
# by `make check`), BENCH_TARGETS (tables printed by `make bench`) and
# DEMO_TARGETS (the tour run by `make demo`).
CHECK_EXTRA ?=
BENCH_TARGETS ?=
DEMO_TARGETS ?=

check: deps
	$(MAKE) check-c
	$(if $(strip $(CHECK_EXTRA)),$(MAKE) $(CHECK_EXTRA))
	$(MAKE) check-swift

bench: deps
	@$(if $(strip $(BENCH_TARGETS)),$(MAKE) --no-print-directory $(BENCH_TARGETS),echo "no benchmarks yet")

demo: deps
	@$(if $(strip $(DEMO_TARGETS)),$(MAKE) --no-print-directory $(DEMO_TARGETS),echo "no demo yet")

check-asan: deps
	RL_TEST_SCALE=asan $(MAKE) check-c VARIANT=-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

check-tsan: deps
	RL_TEST_SCALE=tsan $(MAKE) check-c VARIANT=-tsan OPT=-O1 SAN="-fsanitize=thread" TEST_LIBS="-lcmocka $(TSAN_EXTRA_LIBS)"

# The C tests with the lock-order detector on (RLLockDebug.h): every RL lock
# and the run loop's own locks report to it, and a program that triggers a
# report fails (scripts/run-c-tests.sh).
check-lockdep: deps
	RL_LOCK_DEBUG=1 $(MAKE) check-c

check-leak: deps
	RL_TEST_SCALE=valgrind $(MAKE) check-c VARIANT=-valgrind OPT="-O2 -gdwarf-4" TEST_RUNNER="valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=99"

# The Swift tests under the sanitizers, each in its own build folder. Extra
# SwiftPM build folders live inside .build: the C target's path is the
# package root, and SwiftPM fails a rebuild ("unknown build description")
# when the folder it writes is elsewhere under that root.
# XCTest's runner leaks a few bytes of its own at exit (not our code): the
# suppression file names those frames only.
check-swift-tsan: deps
	RL_TEST_SCALE=tsan $(SWIFTPM) test --scratch-path .build/tsan --sanitize=thread

check-swift-asan: deps
	RL_TEST_SCALE=asan LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan-swift.supp \
	  $(SWIFTPM) test --scratch-path .build/asan --sanitize=address

check-sanitizers: check-asan check-tsan check-leak check-lockdep check-swift-tsan check-swift-asan

install: all
	install -d $(DESTDIR)$(PREFIX)/include/crunloop $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/crunloop/*.h $(DESTDIR)$(PREFIX)/include/crunloop/
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/libcrunloop.so.$(VERSION)
	ln -sf libcrunloop.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libcrunloop.so.0
	ln -sf libcrunloop.so.0 $(DESTDIR)$(PREFIX)/lib/libcrunloop.so
	install -m 644 $(BUILD)/crunloop.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/

clean:
	rm -rf build

-include $(sort $(wildcard mk/*.mk))

# The exported symbols are exactly the documented API (the list is kept in
# scripts/exported-symbols.txt). Checked on the clang build, which has the
# block APIs too.
check-exports: deps
	@$(MAKE) --no-print-directory -s lib CC=clang BUILD=build/clang-exports VARIANT= SAN= PLAIN=
	@scripts/check-exports.sh build/clang-exports/libcrunloop.so
CHECK_EXTRA += check-exports

# `make install` + pkg-config from a program outside the tree.
check-install: deps lib
	@BUILD=$(BUILD) scripts/check-install.sh
CHECK_EXTRA += check-install

# After the fragments, so the C tour comes first.
DEMO_TARGETS += demo-swift
