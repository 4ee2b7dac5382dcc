# SQLite VFS (issue 6): sqlite/, include/atomio_sqlite.h, test/sqlite/.
#   build/atomio_sqlite.so       loadable extension (.load build/atomio_sqlite)
#   build/libatomio_sqlite.a     for C programs: atomio_sqlite_register()
#   make bench-sqlite            atomio VFS vs WAL vs DELETE (not part of check)
#   make bench-sqlite-modes      each journal mode as applications ask for it (Python, sqlite3 shell)
#   make bench-sqlite-readers    readers beside a writer, WAL against the default mode
#   make bench-sqlite-writers    P writer processes: the default mode against WAL and DELETE
#   make check-sqlite-sim        t_sqlite_sim (power cuts in two-database transactions) at length

SQ_SRCS := sqlite/vfs.c sqlite/db.c sqlite/io.c sqlite/lock.c sqlite/group.c sqlite/store.c sqlite/wal.c \
	sqlite/journal.c sqlite/sysio.c sqlite/pend.c sqlite/turns.c
SQ_HDRS := $(wildcard sqlite/*.h) include/atomio_sqlite.h include/atomio.h
SQ_CFLAGS := $(BASE_CFLAGS) -Isqlite
SQ_EXT_OBJS := $(patsubst sqlite/%.c,$(BUILD)/sqlite/ext/%.o,$(SQ_SRCS) sqlite/ext.c)
SQ_LIB_OBJS := $(patsubst sqlite/%.c,$(BUILD)/sqlite/lib/%.o,$(SQ_SRCS))
SQ_SAN_OBJS := $(patsubst sqlite/%.c,$(BUILD)/san/sqlite/%.o,$(SQ_SRCS))
SQ_TEST_SRCS := $(wildcard test/sqlite/t_*.c)
SQ_TEST_NAMES := $(patsubst test/sqlite/%.c,%,$(SQ_TEST_SRCS))
SQ_TESTS := $(addprefix $(BUILD)/sqlite/,$(SQ_TEST_NAMES))
SQ_SAN_TESTS := $(addprefix $(BUILD)/san/sqlite/,$(SQ_TEST_NAMES))
SQ_TEST_HDRS := $(wildcard test/sqlite/*.h) $(TEST_HDRS)
SQ_LIBS := -lsqlite3 $(LIBS)

ALL_EXTRA += $(BUILD)/atomio_sqlite.so $(BUILD)/libatomio_sqlite.a $(BUILD)/bench-sqlite
CHECK_DEPS += $(SQ_TESTS) $(SQ_SAN_TESTS) $(BUILD)/atomio_sqlite.so
CHECK_BINS += $(SQ_TESTS) $(SQ_SAN_TESTS)

$(BUILD)/sqlite/ext $(BUILD)/sqlite/lib $(BUILD)/san/sqlite:
	mkdir -p $@

$(BUILD)/sqlite/ext/%.o: sqlite/%.c $(SQ_HDRS) | $(BUILD)/sqlite/ext
	$(CC) $(SQ_CFLAGS) $(CPPFLAGS) $(CFLAGS) -fPIC -DATOMIO_SQLITE_EXTENSION -c -o $@ $<
$(BUILD)/sqlite/lib/%.o: sqlite/%.c $(SQ_HDRS) | $(BUILD)/sqlite/lib
	$(CC) $(SQ_CFLAGS) $(CPPFLAGS) $(CFLAGS) -fPIC -c -o $@ $<
$(BUILD)/san/sqlite/%.o: sqlite/%.c $(SQ_HDRS) | $(BUILD)/san/sqlite
	$(CC) $(SQ_CFLAGS) $(CPPFLAGS) $(SAN_FLAGS) -c -o $@ $<

# The extension carries libatomio inside (hidden), so it loads into any
# SQLite process with nothing else installed but libxxhash.
$(BUILD)/atomio_sqlite.so: $(SQ_EXT_OBJS) $(LIB_OBJS) sqlite/libatomio_sqlite.map
	$(CC) -shared $(CFLAGS) $(LDFLAGS) -Wl,--version-script=sqlite/libatomio_sqlite.map -o $@ $(SQ_EXT_OBJS) $(LIB_OBJS) $(LIBS)
$(BUILD)/libatomio_sqlite.a: $(SQ_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/san/libatomio_sqlite.a: $(SQ_SAN_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/sqlite/t_%: test/sqlite/t_%.c $(SQ_TEST_HDRS) $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a | $(BUILD)/sqlite/lib
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest -Isqlite $(CFLAGS) $(LDFLAGS) -DATOMIO_DEBUG -o $@ $< $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a $(SQ_LIBS)
$(BUILD)/san/sqlite/t_%: test/sqlite/t_%.c $(SQ_TEST_HDRS) $(BUILD)/san/libatomio_sqlite.a $(BUILD)/san/libatomio.a | $(BUILD)/san/sqlite
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest -Isqlite $(SAN_FLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/san/libatomio_sqlite.a $(BUILD)/san/libatomio.a $(SQ_LIBS)

# t_sqlite_sim replays its run into the crash simulator: it links the test
# support (test/support/simfs.c), as test/t_*.c do.
$(BUILD)/sqlite/t_sqlite_sim: test/sqlite/t_sqlite_sim.c $(SQ_TEST_HDRS) $(TEST_SUPPORT_LIB) preload/trace.h $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a | $(BUILD)/sqlite/lib
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(CFLAGS) $(LDFLAGS) -DATOMIO_DEBUG -o $@ $< $(TEST_SUPPORT_LIB) $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a $(SQ_LIBS)
$(BUILD)/san/sqlite/t_sqlite_sim: test/sqlite/t_sqlite_sim.c $(SQ_TEST_HDRS) $(SAN_TEST_SUPPORT_LIB) preload/trace.h $(BUILD)/san/libatomio_sqlite.a $(BUILD)/san/libatomio.a | $(BUILD)/san/sqlite
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(SAN_FLAGS) $(LDFLAGS) -o $@ $< $(SAN_TEST_SUPPORT_LIB) $(BUILD)/san/libatomio_sqlite.a $(BUILD)/san/libatomio.a $(SQ_LIBS)

# The simulator test at length (not part of check, which runs it with its
# defaults: 25 transactions, up to 6 images per crash point; this: about
# 5 minutes, SQLITE_SIM_ARGS= for another length or ATOMIO_SEED= another seed).
SQLITE_SIM_ARGS ?= --tx 200 --images 12
.PHONY: check-sqlite-sim
check-sqlite-sim: deps
	$(MAKE) $(BUILD)/sqlite/t_sqlite_sim
	$(BUILD)/sqlite/t_sqlite_sim $(SQLITE_SIM_ARGS)

# Mutants of the VFS (test/sqlite/mutate.sh): one file of sqlite/ with one
# defence removed, linked in front of the library (in place of that file's
# object in libatomio_sqlite.a); test/t_sqlite_sim_mutants.sh checks
# that t_sqlite_sim catches each of SQ_MUTANTS (transactions over several
# databases, WAL's syncs), test/t_sqlite_vfs_mutants.sh that the test named
# before each of SQ_VFS_MUTANTS (TEST:MUTANT) catches it (journals in memory,
# WAL without a live group).
SQ_MUTANTS := separate nomarker nodirsync earlyunmark nockpt nopreckpt walnosync walnodirsync fulllazy lzbase
SQ_MUTANT_BINS := $(addprefix $(BUILD)/mutants/t_sqlite_sim-,$(SQ_MUTANTS))
CHECK_DEPS += $(SQ_MUTANT_BINS)
SQ_VFS_MUTANTS := t_sqlite_journal:hotmem t_sqlite_journal:readycommit t_sqlite_xattach:supermem t_sqlite_xattach:nomembers \
	t_sqlite_wal:noopendrop t_sqlite_wal:nosetdrop \
	t_sqlite_writers:nosettle t_sqlite_turns:noturns t_sqlite_syncnormal:bcnochain
define SQ_VFS_MUTANT
$$(BUILD)/mutants/$(1)-$(2): test/sqlite/$(1).c $$(SQ_TEST_HDRS) $$(BUILD)/mutants/sqlite-vfs-$(2).o $$(BUILD)/libatomio_sqlite.a $$(BUILD)/libatomio.a
	$$(CC) $$(BASE_CFLAGS) $$(CPPFLAGS) -Itest -Isqlite $$(CFLAGS) $$(LDFLAGS) -DATOMIO_DEBUG -o $$@ $$< $$(BUILD)/mutants/sqlite-vfs-$(2).o $$(BUILD)/libatomio_sqlite.a $$(BUILD)/libatomio.a $$(SQ_LIBS)
CHECK_DEPS += $$(BUILD)/mutants/$(1)-$(2)
endef
$(foreach p,$(SQ_VFS_MUTANTS),$(eval $(call SQ_VFS_MUTANT,$(word 1,$(subst :, ,$(p))),$(word 2,$(subst :, ,$(p))))))
$(BUILD)/mutants/sqlite-vfs-%.c: test/sqlite/mutate.sh $(SQ_SRCS) | $(BUILD)/mutants
	test/sqlite/mutate.sh $* > $@.tmp && mv $@.tmp $@
$(BUILD)/mutants/sqlite-vfs-%.o: $(BUILD)/mutants/sqlite-vfs-%.c $(SQ_HDRS)
	$(CC) $(SQ_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/mutants/t_sqlite_sim-%: test/sqlite/t_sqlite_sim.c $(SQ_TEST_HDRS) $(TEST_SUPPORT_LIB) preload/trace.h $(BUILD)/mutants/sqlite-vfs-%.o $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(CFLAGS) $(LDFLAGS) -DATOMIO_DEBUG -o $@ $< $(TEST_SUPPORT_LIB) $(BUILD)/mutants/sqlite-vfs-$*.o $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a $(SQ_LIBS)
.PRECIOUS: $(BUILD)/mutants/sqlite-vfs-%.c $(BUILD)/mutants/sqlite-vfs-%.o

$(BUILD)/bench-sqlite: examples/bench-sqlite.c examples/bench_sqlite.h $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a $(SQ_LIBS)

.PHONY: bench-sqlite
bench-sqlite: deps
	$(MAKE) $(BUILD)/bench-sqlite
	$(BUILD)/bench-sqlite $(BENCH_SQLITE_ARGS)

# Readers beside a writer, each in a process of its own, in WAL and in the
# VFS's default mode (BENCH_READERS_ARGS="-r 4 -s 5"; not part of check).
ALL_EXTRA += $(BUILD)/bench-sqlite-readers
$(BUILD)/bench-sqlite-readers: examples/bench-sqlite-readers.c examples/bench_sqlite.h $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a $(SQ_LIBS)
.PHONY: bench-sqlite-readers
bench-sqlite-readers: deps
	$(MAKE) $(BUILD)/bench-sqlite-readers
	$(BUILD)/bench-sqlite-readers $(BENCH_READERS_ARGS)

ALL_EXTRA += $(BUILD)/bench-sqlite-writers
$(BUILD)/bench-sqlite-writers: examples/bench-sqlite-writers.c examples/bench_sqlite.h $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a $(SQ_LIBS)
.PHONY: bench-sqlite-writers
bench-sqlite-writers: deps
	$(MAKE) $(BUILD)/bench-sqlite-writers
	$(BUILD)/bench-sqlite-writers $(BENCH_WRITERS_ARGS)

# The journal modes as applications ask for them, through Debian's SQLite
# (Python's sqlite3 module, or the sqlite3 shell with BENCH_MODES_ARGS=
# "--client cli"): vfs=atomio with no pragma, with MEMORY and with WAL,
# against the unix VFS's WAL and default (issue 25's table; not part of check).
.PHONY: bench-sqlite-modes
bench-sqlite-modes: $(BUILD)/atomio_sqlite.so
	python3 scripts/bench-sqlite-modes.py --ext $(BUILD)/atomio_sqlite.so $(BENCH_MODES_ARGS)

# SQLite built from Debian's source with SQLITE_ENABLE_BATCH_ATOMIC_WRITE:
# the VFS used natively through SQLITE_FCNTL_*_ATOMIC_WRITE (downloads and
# compiles SQLite; not part of check).
.PHONY: check-sqlite-batch
check-sqlite-batch: deps
	scripts/sqlite-batch-atomic.sh

# `make install`: the extension (where Debian keeps SQLite's loadable
# modules), the header, the static library and atomio_sqlite.pc.
SQ_EXTDIR ?= $(LIBDIR)/sqlite3
.PHONY: install-sqlite uninstall-sqlite
install: install-sqlite
uninstall: uninstall-sqlite
install-sqlite: $(BUILD)/atomio_sqlite.so $(BUILD)/libatomio_sqlite.a
	install -d $(DESTDIR)$(SQ_EXTDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 $(BUILD)/atomio_sqlite.so $(DESTDIR)$(SQ_EXTDIR)/
	install -m 644 include/atomio_sqlite.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libatomio_sqlite.a $(DESTDIR)$(LIBDIR)/
	$(PC_SUBST) atomio_sqlite.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/atomio_sqlite.pc
uninstall-sqlite:
	rm -f $(DESTDIR)$(SQ_EXTDIR)/atomio_sqlite.so $(DESTDIR)$(INCLUDEDIR)/atomio_sqlite.h \
		$(DESTDIR)$(LIBDIR)/libatomio_sqlite.a $(DESTDIR)$(PKGCONFIGDIR)/atomio_sqlite.pc

# SQLite's own test suite (Debian's source) under the unix VFS and under
# atomio as the default VFS, compared file by file (issue 17; downloads and
# compiles SQLite and runs for a long while; not part of check).
.PHONY: check-sqlite-suite
check-sqlite-suite: deps
	scripts/sqlite-suite.sh

# The multi-connection exerciser (test/sqlite/t_sqlite_x.c, issue 35) at
# length, niced (make check runs its short slice with the defaults; this:
# minutes a seed): SQLITE_X_ARGS= for its options
# (--tx, --rounds, --writers, --kills, ..., --no-large-multi,
# --no-fork-close, --no-unix-main),
# SQLITE_X_SEEDS= the seeds, one run each; then power cuts on cutfs
# (test/t_sqlite_cutfs.sh, make check runs 3 rounds) for each seed.
SQLITE_X_ARGS ?= --kinds dwDmWs --tx 1500 --rounds 6 --writers 3 --readers 2 --conns 3 --kills 3
SQLITE_X_SEEDS ?= 1 2 3
# and the power cuts on cutfs (test/t_sqlite_cutfs.sh), SQCUT_ROUNDS a seed
SQCUT_ROUNDS ?= 40
.PHONY: sqlite-x
sqlite-x: deps
	$(MAKE) $(BUILD)/sqlite/t_sqlite_x
	for s in $(SQLITE_X_SEEDS); do ATOMIO_SEED=$$s nice -n 10 $(BUILD)/sqlite/t_sqlite_x $(SQLITE_X_ARGS) || exit 1; done
	$(MAKE) $(BUILD)/cutfs $(BUILD)/sqlite/sqcut
	for s in $(SQLITE_X_SEEDS); do SQCUT_SEED=$$s SQCUT_ROUNDS=$(SQCUT_ROUNDS) nice -n 10 test/t_sqlite_cutfs.sh || exit 1; done

# sqcut (test/sqlite/sqcut.c): the SQLite workload of t_sqlite_cutfs.sh,
# power cuts on cutfs (issue 35): not a test itself.
$(BUILD)/sqlite/sqcut: test/sqlite/sqcut.c $(SQ_TEST_HDRS) $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a | $(BUILD)/sqlite/lib
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest -Isqlite $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio_sqlite.a $(BUILD)/libatomio.a $(SQ_LIBS)
CHECK_DEPS += $(BUILD)/sqlite/sqcut
ALL_EXTRA += $(BUILD)/sqlite/sqcut
