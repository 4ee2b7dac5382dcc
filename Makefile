# atomio — see README.md.  `make` builds the library; `make check` runs the tests
# (normal build and ASan+UBSan build) and ends with "N passed, N failed".
# On a fresh machine without make: ./make.sh demo, ./make.sh check.

# The default goal is `all`, whatever the fragments in mk/ define first.
.DEFAULT_GOAL := all

# Installation directories, as liburing's: PREFIX, LIBDIR (multiarch on
# Debian: where ld.so and pkg-config look), INCLUDEDIR, MANDIR, BINDIR;
# DESTDIR stages an install (packaging).
PREFIX ?= /usr/local
CC ?= cc
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
LIBDIR ?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
BINDIR ?= $(PREFIX)/bin
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
BUILD := build

# libatomio.so.$(VERSION) is the real file, libatomio.so.$(SOMAJOR) its
# soname (what programs load), libatomio.so the link for -latomio.
VERSION := $(shell sed -n 's/^\#define ATOMIO_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$$/\2/p' include/atomio.h | paste -sd.)
SOMAJOR := 0
SONAME := libatomio.so.$(SOMAJOR)

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -pthread -Iinclude -Isrc $(WARN)
CFLAGS ?= -O2 -g
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -DATOMIO_DEBUG -DATOMIO_SAN
LIBS := -lxxhash -llz4 -luring -pthread

LIB_SRCS := $(wildcard src/*.c)
LIB_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
SAN_OBJS := $(patsubst src/%.c,$(BUILD)/san/obj/%.o,$(LIB_SRCS))

TEST_SRCS := $(wildcard test/t_*.c)
TEST_NAMES := $(patsubst test/%.c,%,$(TEST_SRCS))
TEST_BINS := $(addprefix $(BUILD)/test/,$(TEST_NAMES))
SAN_TEST_BINS := $(addprefix $(BUILD)/san/test/,$(TEST_NAMES))
TEST_SUPPORT := $(wildcard test/support/*.c)
TEST_SUPPORT_LIB := $(BUILD)/test/libsupport.a
SAN_TEST_SUPPORT_LIB := $(BUILD)/san/test/libsupport.a
TEST_HDRS := $(wildcard test/*.h test/support/*.h)

TEST_SCRIPTS := $(wildcard test/t_*.sh)

EXAMPLES := $(BUILD)/demo

# CPPFLAGS and LDFLAGS are the caller's (dpkg-buildflags sets both): every
# compile and link line below passes them on.

# Feature fragments (tools, fuzzing, SQLite VFS, ...) add targets here and may
# append to: ALL_EXTRA (built by `make`), CHECK_BINS (test programs run by
# `make check`), CHECK_DEPS (built before the tests run).
ALL_EXTRA :=
CHECK_BINS :=
CHECK_DEPS :=
-include $(sort $(wildcard mk/*.mk))

.PHONY: all lib check test-bins install uninstall demo clean deps
all: lib $(EXAMPLES) $(ALL_EXTRA)

# Debian packages (installed when missing; see scripts/deps.sh): deps-demo
# for the library, the command and the demo; deps for the tests and fuzzing.
.PHONY: deps-demo
deps: $(BUILD)/.deps
deps-demo: $(BUILD)/.deps-demo
$(BUILD)/.deps: scripts/deps.sh | $(BUILD)
	sh scripts/deps.sh check
	touch $@
$(BUILD)/.deps-demo: scripts/deps.sh | $(BUILD)
	sh scripts/deps.sh demo
	touch $@
lib: $(BUILD)/libatomio.a $(BUILD)/libatomio.so.$(VERSION) $(BUILD)/$(SONAME) $(BUILD)/libatomio.so

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) include/atomio.h | $(BUILD)/obj
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) -fPIC -c -o $@ $<
$(BUILD)/san/obj/%.o: src/%.c $(wildcard src/*.h) include/atomio.h | $(BUILD)/san/obj
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(SAN_FLAGS) -c -o $@ $<

$(BUILD)/libatomio.a: $(LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/san/libatomio.a: $(SAN_OBJS)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/libatomio.so.$(VERSION): $(LIB_OBJS) src/libatomio.map
	$(CC) -shared $(CFLAGS) $(LDFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=src/libatomio.map \
		-o $@ $(LIB_OBJS) $(LIBS)
$(BUILD)/$(SONAME): $(BUILD)/libatomio.so.$(VERSION)
	ln -sf libatomio.so.$(VERSION) $@
$(BUILD)/libatomio.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

# pkg-config files are written at install time, for the directories of
# that install (a .pc built earlier would keep an earlier PREFIX).
PC_SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g'

$(BUILD) $(BUILD)/obj $(BUILD)/san/obj $(BUILD)/test $(BUILD)/san/test:
	mkdir -p $@

# The tests' support code (test/support: the crash simulator, the fault
# backend, ...) is compiled once per build into an archive, not into every
# test program.
$(BUILD)/test/support $(BUILD)/san/test/support:
	mkdir -p $@
$(BUILD)/test/support/%.o: test/support/%.c $(TEST_HDRS) $(wildcard src/*.h) include/atomio.h | $(BUILD)/test/support
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(CFLAGS) -DATOMIO_DEBUG -c -o $@ $<
$(BUILD)/san/test/support/%.o: test/support/%.c $(TEST_HDRS) $(wildcard src/*.h) include/atomio.h | $(BUILD)/san/test/support
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(SAN_FLAGS) -c -o $@ $<
$(TEST_SUPPORT_LIB): $(patsubst test/support/%.c,$(BUILD)/test/support/%.o,$(TEST_SUPPORT))
	rm -f $@ && ar rcs $@ $^
$(SAN_TEST_SUPPORT_LIB): $(patsubst test/support/%.c,$(BUILD)/san/test/support/%.o,$(TEST_SUPPORT))
	rm -f $@ && ar rcs $@ $^

$(BUILD)/test/%: test/%.c $(TEST_SUPPORT_LIB) $(TEST_HDRS) $(BUILD)/libatomio.a | $(BUILD)/test
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(CFLAGS) $(LDFLAGS) -DATOMIO_DEBUG -o $@ $< $(TEST_SUPPORT_LIB) $(BUILD)/libatomio.a $(LIBS)
$(BUILD)/san/test/%: test/%.c $(SAN_TEST_SUPPORT_LIB) $(TEST_HDRS) $(BUILD)/san/libatomio.a | $(BUILD)/san/test
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(SAN_FLAGS) $(LDFLAGS) -o $@ $< $(SAN_TEST_SUPPORT_LIB) $(BUILD)/san/libatomio.a $(LIBS)

$(BUILD)/demo: examples/demo.c $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)

test-bins: $(TEST_BINS) $(SAN_TEST_BINS) $(CHECK_DEPS)

# The whole suite: every test in both builds, one summary line at the end.
check: deps
	$(MAKE) -j2 all test-bins
	@test/run.sh $(TEST_BINS) $(SAN_TEST_BINS) $(CHECK_BINS) $(TEST_SCRIPTS)
# The demo builds only what it runs (the library and the command), so that
# it needs only deps-demo's packages.
demo: deps-demo
	$(MAKE) lib $(BUILD)/atomio
	$(BUILD)/atomio bench --plot $(BUILD)/demo.svg

# The library, its header, pkg-config file and man pages (the command and
# the SQLite extension: mk/cli.mk, mk/sqlite.mk).  `make uninstall` with the
# same variables removes what this installed.
MAN3 := $(wildcard man/*.3)
MAN7 := $(wildcard man/*.7)
install: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 644 include/atomio.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libatomio.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libatomio.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libatomio.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libatomio.so
	$(PC_SUBST) atomio.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/atomio.pc
	$(if $(MAN3),install -m 644 $(MAN3) $(DESTDIR)$(MANDIR)/man3/)
	$(if $(MAN7),install -m 644 $(MAN7) $(DESTDIR)$(MANDIR)/man7/)
uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/atomio.h $(DESTDIR)$(LIBDIR)/libatomio.a \
		$(DESTDIR)$(LIBDIR)/libatomio.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) \
		$(DESTDIR)$(LIBDIR)/libatomio.so $(DESTDIR)$(PKGCONFIGDIR)/atomio.pc \
		$(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(MAN3))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(MAN7)))

# The README's two commands on a clean Debian 12 minbase chroot (root,
# mmdebstrap), then the Debian packages built, checked by lintian and
# installed there, and a program linked with pkg-config atomio.
.PHONY: fresh-machine
fresh-machine:
	sh scripts/fresh-machine.sh

clean:
	rm -rf $(BUILD)
