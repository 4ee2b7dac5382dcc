#!/bin/sh
# Build SQLite's amalgamation from Debian's own source package with
# SQLITE_ENABLE_BATCH_ATOMIC_WRITE (Debian's libsqlite3 lacks it), link the
# atomio VFS and its tests against it, and run them: t_sqlite_batch (skipped
# with Debian's library) and t_sqlite_crash in journal_mode=DELETE, where a
# batch-atomic SQLite commits through SQLITE_FCNTL_COMMIT_ATOMIC_WRITE.
#
# Not part of `make check` (it downloads the source package and compiles
# SQLite, about a minute): run `make check-sqlite-batch`.
# Needs: apt-get source access (scripts/sqlite-source.sh), tclsh (package tcl) to build
# the amalgamation.
set -eu
top=$(pwd)
out=${BUILD:-build}/sqlite-batch
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -f "$out/bld/sqlite3.c" ]; then
	if ! command -v tclsh >/dev/null 2>&1; then
		echo "sqlite-batch-atomic: needs tclsh (apt-get install tcl)" >&2
		exit 77
	fi
	srcdir=$(scripts/sqlite-source.sh "$out")
	mkdir -p "$out/bld"
	(cd "$out/bld" && "$srcdir/configure" --disable-tcl >/dev/null && make -s sqlite3.c >/dev/null)
fi
CC=${CC:-cc}
W="-std=c11 -D_GNU_SOURCE -pthread -Wall -Wextra -Werror -Wno-unused-parameter"
# The HAVE_* macros are what Debian's build gets from configure (pread,
# fdatasync, usleep: without it SQLite's busy handler sleeps whole seconds).
$CC -O2 -g -DSQLITE_ENABLE_BATCH_ATOMIC_WRITE -DSQLITE_THREADSAFE=1 -DSQLITE_ENABLE_COLUMN_METADATA \
	-DHAVE_PREAD -DHAVE_PWRITE -DHAVE_FDATASYNC -DHAVE_USLEEP -DHAVE_LOCALTIME_R -DHAVE_GMTIME_R \
	-c -o "$out/sqlite3.o" "$out/bld/sqlite3.c"
make -s build/libatomio.a
for t in t_sqlite_batch t_sqlite_crash; do
	$CC $W -O2 -g -DATOMIO_DEBUG -I"$out/bld" -Iinclude -Isrc -Isqlite -Itest -o "$out/$t" \
		"test/sqlite/$t.c" $(for f in vfs db io lock group store wal journal sysio pend turns; do echo "sqlite/$f.c"; done) "$out/sqlite3.o" build/libatomio.a \
		-lxxhash -llz4 -luring -ldl -lm -pthread
done
echo "sqlite-batch-atomic: SQLite $(grep -m1 '#define SQLITE_VERSION ' "$out/bld/sqlite3.h" | awk '{print $3}') with SQLITE_ENABLE_BATCH_ATOMIC_WRITE"
"$out/t_sqlite_batch"
echo "t_sqlite_batch: passed"
SQ_JOURNAL=DELETE SQ_KILL_MS=200 "$out/t_sqlite_crash"
echo "t_sqlite_crash (journal_mode=DELETE, batch-atomic commits): passed"
cd "$top"
