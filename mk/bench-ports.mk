# bench-ports: local ports against perform requests, message ports against
# a raw Unix-socket ping-pong and a D-Bus method call through a private
# dbus-daemon (bench/bench_ports.c). BPO_ROUNDS, BPO_QUICK, BPO_ONLY.
# The D-Bus row needs libdbus-1-dev (scripts/setup-deps.sh installs it);
# without it the bench builds and says why the row is missing.
BENCH_PORTS := $(BUILD)/bench/bench_ports
BPO_DBUS_FLAGS := $(shell pkg-config --exists dbus-1 2>/dev/null && echo -DBPO_DBUS $$(pkg-config --cflags dbus-1))
BPO_DBUS_LIBS := $(shell pkg-config --exists dbus-1 2>/dev/null && pkg-config --libs dbus-1)

.PHONY: bench-ports
bench-ports: $(BENCH_PORTS) ## local ports vs perform requests, message ports vs a raw Unix-socket ping-pong and D-Bus
	$(BENCH_PORTS)

$(BENCH_PORTS): bench/bench_ports.c $(HDRS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -O2 $(BPO_DBUS_FLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS) $(BPO_DBUS_LIBS)
BENCH_TARGETS += bench-ports
