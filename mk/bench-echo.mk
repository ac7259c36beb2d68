# bench-echo: TCP echo over loopback — our RLSocket server (Data callbacks,
# and Read callbacks: bench_echo_cf.c with -DBEC_READCB) against a server by
# hand on raw epoll, CoreFoundation's CFSocket (Swift toolchain) and libuv's uv_tcp, all driven
# by the same plain-socket clients in one process (bench/bench_echo*.c):
# round trips (1 connection; 16 and 256 at once), throughput, connections
# per second. Always -O2, against the
# static library of $(BUILD). Like bench_runloop_cf.c, bench_echo_cf.c is
# built twice: with the toolchain's clang and -DBEC_CF against CF, and with
# $(CC) against ours through cf_compat.h. CF_*, UV_* come from
# mk/bench-runloop.mk. BEC_ROUNDS=, BEC_QUICK=1, BEC_PEERS=, BEC_ONLY= as in
# the source (BEC_ONLY=rt16,rt256: the round trips on many connections).
# Ours (ours, ours-read) runs on the default kernel backend (epoll, which
# ours's loop leaves for io_uring at its first Data callout; RL_BACKEND=
# changes it); ours-ur and read-ur are the same two servers with
# their loops on io_uring (bench_echo_cf.c built with -DBEC_BACKEND), so
# one run gives both backends' rows side by side.
BENCH_ECHO := $(BUILD)/bench/bench_echo
BENCH_ECHO_OBJ := $(BUILD)/bench/obj
BENCH_ECHO_OBJS := $(BENCH_ECHO_OBJ)/bench_echo.o $(BENCH_ECHO_OBJ)/bench_echo_rl.o \
                   $(BENCH_ECHO_OBJ)/bench_echo_rl_read.o $(BENCH_ECHO_OBJ)/bench_echo_epoll.o \
                   $(BENCH_ECHO_OBJ)/bench_echo_rl_ur.o $(BENCH_ECHO_OBJ)/bench_echo_rl_read_ur.o \
                   $(BENCH_ECHO_OBJ)/bench_echo_cf.o $(BENCH_ECHO_OBJ)/bench_echo_uv.o
BENCH_ECHO_FLAGS = $(CPPFLAGS) $(CFLAGS) -O2 -pthread

BENCH_TARGETS += bench-echo

.PHONY: bench-echo
bench-echo: $(BENCH_ECHO) ## TCP echo over loopback: RLSocket (Data and Read callbacks, epoll and io_uring) vs raw epoll, CF's CFSocket and libuv (round trips on 1, 16 and 256 connections, throughput, connections/s)
	@mkdir -p $(BENCH_RESULTS) && rm -f $(BENCH_RESULTS)/echo.csv
	@BEC_CSV=$(BENCH_RESULTS)/echo.csv $(BENCH_ECHO)

$(BENCH_ECHO): $(BENCH_ECHO_OBJS) $(STATIC_LIB)
	@$(call say,CC,$@)
	$(Q)$(CC) $(LDFLAGS) -pthread -o $@ $(BENCH_ECHO_OBJS) $(STATIC_LIB) $(LIBS) $(UV_LIBS) $(CF_LIBS) -lm

$(BENCH_ECHO_OBJ)/bench_echo.o: bench/bench_echo.c bench/bench_echo.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) -c -o $@ $<

$(BENCH_ECHO_OBJ)/bench_echo_rl.o: bench/bench_echo_cf.c bench/bench_echo.h $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) -c -o $@ $<

$(BENCH_ECHO_OBJ)/bench_echo_rl_read.o: bench/bench_echo_cf.c bench/bench_echo.h $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) -DBEC_READCB -c -o $@ $<

$(BENCH_ECHO_OBJ)/bench_echo_rl_ur.o: bench/bench_echo_cf.c bench/bench_echo.h $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) -DBEC_BACKEND='"io_uring"' -c -o $@ $<

$(BENCH_ECHO_OBJ)/bench_echo_rl_read_ur.o: bench/bench_echo_cf.c bench/bench_echo.h $(HDRS)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) -DBEC_READCB -DBEC_BACKEND='"io_uring"' -c -o $@ $<

$(BENCH_ECHO_OBJ)/bench_echo_epoll.o: bench/bench_echo_epoll.c bench/bench_echo.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) -c -o $@ $<

$(BENCH_ECHO_OBJ)/bench_echo_cf.o: bench/bench_echo_cf.c bench/bench_echo.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CF_CC) $(CF_CFLAGS) -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -DBEC_CF -pthread -c -o $@ $<

$(BENCH_ECHO_OBJ)/bench_echo_uv.o: bench/bench_echo_uv.c bench/bench_echo.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) $(UV_CFLAGS) -c -o $@ $<

# bench-echo-instr: the echo server's user-space instructions (callgrind)
# and system calls (strace) per round trip on 1 connection and on 16 at
# once (one message in flight on each), and per MB over 16 connections:
# both RLSocket styles on both backends, raw epoll and libuv
# (bench/bench_echo_instr.c, scripts/bench-echo-instr.sh): the same on
# every run, so it shows what a
# change to the event path costs where the timed rows cannot. Not part of
# `make bench` (no chart; valgrind, not time). The binary goes to valgrind
# without debug information (valgrind 3.19 cannot read clang 21's DWARF 5).
BENCH_ECHO_INSTR := $(BUILD)/bench/bench_echo_instr

.PHONY: bench-echo-instr
bench-echo-instr: $(BENCH_ECHO_INSTR) ## echo server's instructions (callgrind, single steps) and system calls (strace) per round trip (1 and 16 connections) and per MB: both RLSocket styles on both backends, raw epoll, libuv
	@scripts/bench-echo-instr.sh $(BENCH_ECHO_INSTR)

# bench-echo-profile: where the echo server's CPU goes by kind of work (the
# kernel's TCP send and receive, the wait, sleeps, io_uring's own work,
# other system call work, user space), perf samples of the server thread
# of bench_echo_instr (scripts/bench-echo-profile.py), and the lowest
# CPU per unit any server could reach against raw epoll's: its TCP work and
# user space alone. PROFILE_WORK=rt16 (or rt, rt256, tp16), PROFILE_N=,
# PROFILE_PEERS="ours-ur epoll" (the last one is the reference). Needs perf.
PROFILE_WORK ?= rt16
PROFILE_N ?= $(if $(filter tp%,$(PROFILE_WORK)),3000,300000)
PROFILE_PEERS ?= ours-ur epoll

.PHONY: bench-echo-profile check-bench-profile
bench-echo-profile: $(BENCH_ECHO_INSTR) ## echo server's CPU by kind of work (perf: TCP send/receive, wait, sleep, io_uring, syscalls, user) against raw epoll's, and the floor its TCP work sets (PROFILE_WORK=rt16|rt256|tp16, PROFILE_PEERS=)
	@scripts/bench-echo-profile.py $(BENCH_ECHO_INSTR) $(PROFILE_WORK) $(PROFILE_N) $(PROFILE_PEERS)

check-bench-profile: ## bench-echo-profile's sorting of samples on a made-up perf output
	@scripts/bench-echo-profile.py --self-test
CHECK_EXTRA += check-bench-profile

$(BENCH_ECHO_INSTR): $(BENCH_ECHO_OBJ)/bench_echo_instr.o $(BENCH_ECHO_OBJ)/bench_echo_rl.o \
                     $(BENCH_ECHO_OBJ)/bench_echo_rl_read.o $(BENCH_ECHO_OBJ)/bench_echo_epoll.o \
                     $(BENCH_ECHO_OBJ)/bench_echo_rl_ur.o $(BENCH_ECHO_OBJ)/bench_echo_rl_read_ur.o \
                     $(BENCH_ECHO_OBJ)/bench_echo_uv.o $(STATIC_LIB)
	@$(call say,CC,$@)
	$(Q)$(CC) $(LDFLAGS) -pthread -o $@ $(filter %.o,$^) $(STATIC_LIB) $(LIBS) $(UV_LIBS) -lm
	$(Q)strip --strip-debug $@

$(BENCH_ECHO_OBJ)/bench_echo_instr.o: bench/bench_echo_instr.c bench/bench_echo.h
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(BENCH_ECHO_FLAGS) -c -o $@ $<
