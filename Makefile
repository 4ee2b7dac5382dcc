# atomio — see README.md.  `make` builds the library; `make check` runs the tests
# (normal build and ASan+UBSan build) and ends with "N passed, N failed".

# The default goal is `all`, whatever the fragments in mk/ define first.
.DEFAULT_GOAL := all

PREFIX ?= /usr/local
CC ?= cc
BUILD := build

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
TEST_HDRS := $(wildcard test/*.h test/support/*.h)

TEST_SCRIPTS := $(wildcard test/t_*.sh)

EXAMPLES := $(BUILD)/demo

# Feature fragments (tools, fuzzing, SQLite VFS, ...) add targets here and may
# append to: ALL_EXTRA (built by `make`), CHECK_BINS (test programs run by
# `make check`), CHECK_DEPS (built before the tests run).
ALL_EXTRA :=
CHECK_BINS :=
CHECK_DEPS :=
-include $(sort $(wildcard mk/*.mk))

.PHONY: all lib check test-bins install demo clean deps
all: lib $(EXAMPLES) $(ALL_EXTRA)

# Debian packages the build needs (installed when missing; see scripts/deps.sh).
deps: $(BUILD)/.deps
$(BUILD)/.deps: scripts/deps.sh | $(BUILD)
	scripts/deps.sh
	touch $@
lib: $(BUILD)/libatomio.a $(BUILD)/libatomio.so $(BUILD)/atomio.pc

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h) include/atomio.h | $(BUILD)/obj
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -fPIC -c -o $@ $<
$(BUILD)/san/obj/%.o: src/%.c $(wildcard src/*.h) include/atomio.h | $(BUILD)/san/obj
	$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) -c -o $@ $<

$(BUILD)/libatomio.a: $(LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/san/libatomio.a: $(SAN_OBJS)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/libatomio.so: $(LIB_OBJS) src/libatomio.map
	$(CC) -shared -Wl,-soname,libatomio.so.0 -Wl,--version-script=src/libatomio.map -o $@ $(LIB_OBJS) $(LIBS)

$(BUILD)/atomio.pc: Makefile | $(BUILD)
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: atomio\nDescription: atomic write groups over a checksummed redo log\nVersion: 0.1\nRequires.private: libxxhash liburing liblz4\nLibs: -L$${libdir} -latomio\nLibs.private: -lxxhash -llz4 -luring -pthread\nCflags: -I$${includedir}\n' '$(PREFIX)' > $@

$(BUILD) $(BUILD)/obj $(BUILD)/san/obj $(BUILD)/test $(BUILD)/san/test:
	mkdir -p $@

$(BUILD)/test/%: test/%.c $(TEST_SUPPORT) $(TEST_HDRS) $(BUILD)/libatomio.a | $(BUILD)/test
	$(CC) $(BASE_CFLAGS) -Itest $(CFLAGS) -DATOMIO_DEBUG -o $@ $< $(TEST_SUPPORT) $(BUILD)/libatomio.a $(LIBS)
$(BUILD)/san/test/%: test/%.c $(TEST_SUPPORT) $(TEST_HDRS) $(BUILD)/san/libatomio.a | $(BUILD)/san/test
	$(CC) $(BASE_CFLAGS) -Itest $(SAN_FLAGS) -o $@ $< $(TEST_SUPPORT) $(BUILD)/san/libatomio.a $(LIBS)

$(BUILD)/demo: examples/demo.c $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)

test-bins: $(TEST_BINS) $(SAN_TEST_BINS) $(CHECK_DEPS)

# The whole suite: every test in both builds, one summary line at the end.
check: deps
	$(MAKE) -j2 all test-bins
	@test/run.sh $(TEST_BINS) $(SAN_TEST_BINS) $(CHECK_BINS) $(TEST_SCRIPTS)
demo: deps
	$(MAKE) all
	$(BUILD)/atomio bench --plot $(BUILD)/demo.svg

install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/atomio.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libatomio.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libatomio.so $(DESTDIR)$(PREFIX)/lib/libatomio.so.0
	ln -sf libatomio.so.0 $(DESTDIR)$(PREFIX)/lib/libatomio.so
	install -m 644 $(BUILD)/atomio.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/

clean:
	rm -rf $(BUILD)
