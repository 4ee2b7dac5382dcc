# The `atomio` command (tools/, man/atomio.1): probe, bench, verify, dump, recover.
# build/atomio is built by `make`; build/san/atomio (ASan+UBSan) for `make check`,
# whose test/t_cli_*.sh scripts run both.
CLI_SRCS := $(wildcard tools/*.c)
CLI_HDRS := $(wildcard tools/*.h)

$(BUILD)/atomio: $(CLI_SRCS) $(CLI_HDRS) $(BUILD)/libatomio.a | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itools $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_SRCS) $(BUILD)/libatomio.a $(LIBS) -lm
$(BUILD)/san/atomio: $(CLI_SRCS) $(CLI_HDRS) $(BUILD)/san/libatomio.a | $(BUILD)/san/test
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itools $(SAN_FLAGS) $(LDFLAGS) -o $@ $(CLI_SRCS) $(BUILD)/san/libatomio.a $(LIBS) -lm

ALL_EXTRA += $(BUILD)/atomio
CHECK_DEPS += $(BUILD)/atomio $(BUILD)/san/atomio

# `make install` also installs the command and its man page.
.PHONY: install-cli uninstall-cli
install: install-cli
uninstall: uninstall-cli
install-cli: $(BUILD)/atomio
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(BUILD)/atomio $(DESTDIR)$(BINDIR)/
	install -m 644 man/atomio.1 $(DESTDIR)$(MANDIR)/man1/
uninstall-cli:
	rm -f $(DESTDIR)$(BINDIR)/atomio $(DESTDIR)$(MANDIR)/man1/atomio.1

# The speed targets in one table (docs/PERFORMANCE.md, "Speed at the defaults"):
# `make bench-targets [BENCH_DIR=/var/tmp] [REPS=3] [SECS=60] [LOG_SIZE=1G]`, about 10 minutes.
.PHONY: bench-targets
bench-targets: $(BUILD)/atomio
	BENCH_DIR=$(BENCH_DIR) ATOMIO=$(BUILD)/atomio scripts/bench-targets.sh
