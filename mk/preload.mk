# The preload library (issue 16): build/libatomio_preload.so, loaded with
# LD_PRELOAD, gives unmodified programs atomic writes to the files that
# ATOMIO_FILES names (man/atomio_preload.7).  libatomio is linked in, hidden.
# Tests: test/t_preload*.sh and test/t_preload_sim (make check).
PRELOAD_SRCS := $(wildcard preload/*.c) sqlite/pend.c
PRELOAD_OBJS := $(patsubst %.c,$(BUILD)/preload/%.o,$(notdir $(PRELOAD_SRCS)))
PRELOAD_SO := $(BUILD)/libatomio_preload.so
# The wrappers define libc's names, some of which no header declares
# (__open_2, __read_chk, ...).
PRELOAD_CFLAGS := $(BASE_CFLAGS) -Ipreload -Isqlite -Wno-missing-prototypes -fvisibility=hidden

$(BUILD)/preload:
	mkdir -p $@
$(BUILD)/preload/%.o: preload/%.c preload/preload.h preload/trace.h $(wildcard src/*.h) include/atomio.h | $(BUILD)/preload
	$(CC) $(PRELOAD_CFLAGS) $(CPPFLAGS) $(CFLAGS) -fPIC -c -o $@ $<
# Group mode keeps its pending group in the SQLite VFS's structure.
$(BUILD)/preload/pend.o: sqlite/pend.c sqlite/pend.h | $(BUILD)/preload
	$(CC) $(PRELOAD_CFLAGS) $(CPPFLAGS) $(CFLAGS) -fPIC -c -o $@ $<
$(PRELOAD_SO): $(PRELOAD_OBJS) $(LIB_OBJS) preload/libatomio_preload.map
	$(CC) -shared $(CFLAGS) $(LDFLAGS) -Wl,-soname,libatomio_preload.so -Wl,--version-script=preload/libatomio_preload.map -o $@ $(PRELOAD_OBJS) $(LIB_OBJS) $(LIBS) -ldl

ALL_EXTRA += $(PRELOAD_SO)

# Test programs: plain POSIX C, no atomio header, no atomio library; they get
# atomio only by being run under the preload library.  calls is built with
# _FORTIFY_SOURCE so that its reads are glibc's checked forms (its own
# flags: the caller's CPPFLAGS could set another level).
PRELOAD_TEST_BINS := $(BUILD)/preload-test/calls $(BUILD)/preload-test/prog $(BUILD)/preload-test/shared
PRELOAD_TEST_BINS += $(BUILD)/preload-test/posix
PRELOAD_TEST_BINS += $(BUILD)/preload-test/dropin
PRELOAD_TEST_BINS += $(BUILD)/preload-test/lazy
$(BUILD)/preload-test:
	mkdir -p $@
$(BUILD)/preload-test/calls: test/preload/calls.c | $(BUILD)/preload-test
	$(CC) -std=gnu11 -O2 -D_FORTIFY_SOURCE=2 $(WARN) -pthread -o $@ $<
$(BUILD)/preload-test/shared: test/preload/shared.c | $(BUILD)/preload-test
	$(CC) -std=gnu11 $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WARN) -o $@ $<
$(BUILD)/preload-test/posix: test/preload/posix.c | $(BUILD)/preload-test
	$(CC) -std=gnu11 $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WARN) -pthread -o $@ $<
$(BUILD)/preload-test/dropin: test/preload/dropin.c | $(BUILD)/preload-test
	$(CC) -std=gnu11 $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WARN) -o $@ $<
$(BUILD)/preload-test/lazy: test/preload/lazy.c | $(BUILD)/preload-test
	$(CC) -std=gnu11 $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WARN) -o $@ $<
$(BUILD)/preload-test/prog: test/preload/prog.c test/preload/rec.h | $(BUILD)/preload-test
	$(CC) -std=gnu11 $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WARN) -o $@ $<
CHECK_DEPS += $(PRELOAD_SO) $(PRELOAD_TEST_BINS)

# Side by side: plain files, the library on unmatched files, protected files.
$(BUILD)/bench-preload: examples/bench-preload.c | $(BUILD)
	$(CC) -std=gnu11 $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WARN) -o $@ $<
ALL_EXTRA += $(BUILD)/bench-preload
.PHONY: bench-preload
bench-preload: $(PRELOAD_SO) $(BUILD)/bench-preload
	scripts/bench-preload.sh

# `make install` also installs the library and its man page; `make uninstall` removes them.
# PRELOADDIR: where LD_PRELOAD finds it (the Debian package keeps it out of
# the linker's directories, in LIBDIR/atomio: it is no library to link).
PRELOADDIR ?= $(LIBDIR)
.PHONY: install-preload uninstall-preload
install: install-preload
uninstall: uninstall-preload
install-preload: $(PRELOAD_SO)
	install -d $(DESTDIR)$(PRELOADDIR) $(DESTDIR)$(MANDIR)/man7
	install -m 755 $(PRELOAD_SO) $(DESTDIR)$(PRELOADDIR)/
	install -m 644 man/atomio_preload.7 $(DESTDIR)$(MANDIR)/man7/
uninstall-preload:
	rm -f $(DESTDIR)$(PRELOADDIR)/$(notdir $(PRELOAD_SO)) $(DESTDIR)$(MANDIR)/man7/atomio_preload.7

# The model-based exerciser (issue 34): test/preload/pfsx.c, run by
# test/t_preload_fsx.sh (a short deterministic slice in make check) and by
# `make preload-fsx` (the long run: PFSX_SEEDS, PFSX_OPS, PFSX_KILLS, PFSX_SEED,
# PFSX_X; the script's head says what each means).
$(BUILD)/preload-test/pfsx: test/preload/pfsx.c | $(BUILD)/preload-test
	$(CC) -std=gnu11 $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(WARN) -o $@ $<
CHECK_DEPS += $(BUILD)/preload-test/pfsx
.PHONY: preload-fsx
preload-fsx: $(PRELOAD_SO) $(BUILD)/preload-test/pfsx
	PFSX_LONG=1 nice -n 10 test/t_preload_fsx.sh
