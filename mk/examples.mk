# The C examples under examples/c, built against the static library.
#   make examples          build them into $(BUILD)/examples/
#   make check-examples    run the self-checking ones (cf_listings: the
#                          guide's CF run-loop listings through cf_compat.h)
EXAMPLE_SRCS := $(sort $(wildcard examples/c/*.c))
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/c/%.c=$(BUILD)/examples/%)

.PHONY: examples check-examples

examples: $(EXAMPLE_BINS)

$(BUILD)/examples/%: examples/c/%.c $(HDRS) $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

check-examples: $(BUILD)/examples/cf_listings
	@timeout 60 $(BUILD)/examples/cf_listings > $(BUILD)/examples/cf_listings.out 2>&1; rc=$$?; \
	  cat $(BUILD)/examples/cf_listings.out; \
	  if [ $$rc -eq 0 ] && tail -1 $(BUILD)/examples/cf_listings.out | grep -qx 'cf_listings: OK'; then \
	    echo "1 passed, 0 failed"; else echo "cf_listings failed (exit $$rc)"; echo "0 passed, 1 failed"; exit 1; fi

CHECK_EXTRA += check-examples
DEMO_TARGETS += check-examples
