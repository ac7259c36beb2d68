# The C examples under examples/c, built against the static library.
#   make examples          build them into $(BUILD)/examples/
#   make check-examples    run every example in its fast mode (RL_EXAMPLE_FAST=1)
#                          and check what it prints (scripts/run-examples.sh;
#                          cf_listings, the guide's CF run-loop listings through
#                          cf_compat.h, checks itself and must end "cf_listings: OK")
#   make demo-examples     the tour run by `make demo`: each example at a
#                          readable pace (RL_EXAMPLE_TOUR=1), a few seconds each
#   EXAMPLES="countdown sync_tour" limits check-examples / demo-examples to some.
EXAMPLE_SRCS := $(sort $(wildcard examples/c/*.c))
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/c/%.c=$(BUILD)/examples/%)
EXAMPLE_HDRS := $(wildcard examples/c/*.h)
EXAMPLES ?=

.PHONY: examples check-examples demo-examples install-examples

examples: $(EXAMPLE_BINS) ## build the C examples into $(BUILD)/examples

$(BUILD)/examples/%: examples/c/%.c $(HDRS) $(EXAMPLE_HDRS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	@$(call say,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(EXAMPLE_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(EXAMPLE_LIBS) $(LIBS)

# loop_health's report names its slow callout: dladdr sees a program's
# functions only when they are exported (-rdynamic).
$(BUILD)/examples/loop_health: LDFLAGS += -rdynamic

# Examples that use another library get its flags from pkg-config (the
# Debian package is in scripts/setup-deps.sh).
$(BUILD)/examples/threaded_parser: EXAMPLE_CFLAGS = $(shell pkg-config --cflags expat)
$(BUILD)/examples/threaded_parser: EXAMPLE_LIBS = $(shell pkg-config --libs expat)

check-examples: $(EXAMPLE_BINS) ## run every C example in its fast mode and check its output
	@BUILD=$(BUILD) scripts/run-examples.sh $(EXAMPLES)

demo-examples: $(EXAMPLE_BINS) ## the C part of `make demo`
	@BUILD=$(BUILD) scripts/run-examples.sh --demo $(EXAMPLES)

CHECK_EXTRA += check-examples
DEMO_TARGETS += demo-examples

# Tests/c/test_echo.c includes the echo examples unchanged, to run them in
# its own process (and under the sanitizers).
$(BUILD)/tests/test_echo: examples/c/echo_server.c examples/c/echo_client.c $(EXAMPLE_HDRS)

# `make install` installs the echo pair as commands (statically linked
# against the library, so they run wherever they are copied).
install: install-examples
install-examples: $(BUILD)/examples/echo_server $(BUILD)/examples/echo_client ## the part of `make install` that puts crunloop-echo-server and crunloop-echo-client in $(DESTDIR)$(PREFIX)/bin
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/examples/echo_server $(DESTDIR)$(PREFIX)/bin/crunloop-echo-server
	install -m 755 $(BUILD)/examples/echo_client $(DESTDIR)$(PREFIX)/bin/crunloop-echo-client
