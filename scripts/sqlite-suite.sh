#!/bin/sh
# SQLite's own test suite on atomio (make check-sqlite-suite; not part of
# make check: it downloads Debian's sqlite3 source, builds two testfixtures
# and runs for a long while).
#
# Both testfixtures come from the same source and flags, the ones SQLite's
# own `make testfixture` uses, with -DSQLITE_EXTRA_INIT=atomio_suite_init
# (test/sqlite/suite/init.c): in "atomio" that registers the atomio VFS as
# the default, in "unix" it does nothing.  Every file of
# test/sqlite/suite/files.txt runs under both, each in a directory of its
# own, with a time limit; then a table: tests and errors per VFS (also in
# build/sqlite-suite/table.txt).
#
# Fails when a file that passes under unix does not pass under atomio
# (errors, an abort or a timeout), unless the file is in
# test/sqlite/suite/bydesign.txt, which says why.
#
# Environment: SUITE_FILES (names, instead of files.txt), SUITE_TIMEOUT
# (seconds per file and VFS, default 300), SUITE_JOBS (files run at once,
# default 2), SUITE_VFS (default "unix atomio").
# Needs: apt-get source access (scripts/sqlite-source.sh), tcl-dev, zlib.
set -eu
top=$(pwd)
out=${BUILD:-build}/sqlite-suite
mkdir -p "$out"
out=$(cd "$out" && pwd)
tcl=$(dirname "$(ls /usr/lib/tcl8.*/tclConfig.sh /usr/lib/tclConfig.sh 2>/dev/null | head -n 1)")
if [ "$tcl" = . ]; then
	echo "SKIP sqlite-suite: needs Tcl's development files (apt-get install tcl-dev)"
	exit 77
fi
srcdir=$(scripts/sqlite-source.sh "$out")
bld=$out/bld
if [ ! -f "$bld/Makefile" ]; then
	mkdir -p "$bld"
	(cd "$bld" && "$srcdir/configure" --with-tcl="$tcl" >configure.log 2>&1) || {
		cat "$bld/configure.log"
		exit 1
	}
fi
make -s build/libatomio.a
CC=${CC:-cc}
W="-std=c11 -D_GNU_SOURCE -pthread -Wall -Wextra -Werror -Wno-unused-parameter"
(cd "$bld" && make -s sqlite3.h >/dev/null)
# obj SRC OUT FLAGS...: compile, keeping the old object (and so the linked
# testfixture) when nothing changed
obj() {
	src=$1 o=$2
	shift 2
	$CC $W -O2 -g -I"$bld" -Iinclude -Isrc -Isqlite "$@" -c -o "$o.new" "$src"
	if cmp -s "$o.new" "$o"; then rm -f "$o.new"; else mv "$o.new" "$o"; fi
}
obj test/sqlite/suite/init.c "$out/init-unix.o"
obj test/sqlite/suite/init.c "$out/init-atomio.o" -DSUITE_ATOMIO
# the VFS's files (mk/sqlite.mk, SQ_SRCS)
vfs_objs=
for f in vfs db io lock group store wal journal sysio pend turns; do
	obj "sqlite/$f.c" "$out/$f.o"
	vfs_objs="$vfs_objs $out/$f.o"
done
# tf VFS "OBJECTS" "LIBRARIES": link testfixture-VFS (again when an object
# changed)
tf() {
	v=$1
	if [ ! -x "$out/testfixture-$v" ] || [ -n "$(find $2 -newer "$out/testfixture-$v")" ]; then
		rm -f "$bld/testfixture"
		(cd "$bld" && make -s testfixture OPTS=-DSQLITE_EXTRA_INIT=atomio_suite_init \
			TLIBS="$2 $3 -lm -lz" >"$out/build-$v.log" 2>&1) || {
			tail -n 30 "$out/build-$v.log"
			exit 1
		}
		mv "$bld/testfixture" "$out/testfixture-$v"
	fi
}
tf unix "$out/init-unix.o" ""
tf atomio "$out/init-atomio.o$vfs_objs $top/build/libatomio.a" "-lxxhash -llz4 -luring -pthread"

files=${SUITE_FILES:-$(grep -v '^#' test/sqlite/suite/files.txt)}
vfses=${SUITE_VFS:-unix atomio}
limit=${SUITE_TIMEOUT:-300}
res=$out/res
rm -rf "$res" "$out/run"
mkdir -p "$res"
for f in $files; do
	for v in $vfses; do
		echo "$v $f"
	done
done | xargs -P "${SUITE_JOBS:-2}" -L 1 sh -c '
	out=$1 src=$2 limit=$3 v=$4 f=$5
	d=$out/run/$v/$f
	mkdir -p "$d"
	cd "$d"
	start=$(date +%s)
	rc=0
	timeout -k 10 "$limit" "$out/testfixture-$v" "$src/test/$f.test" >log 2>&1 </dev/null || rc=$?
	secs=$(( $(date +%s) - start ))
	line=$(grep -a -E "^[0-9]+ errors out of [0-9]+ tests" log | tail -n 1)
	if [ -n "$line" ]; then
		set -- $line
		st=ok
		[ "$1" = 0 ] || st=fail
		echo "$st $5 $1 $secs" >"$out/res/$v.$f"
	elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo "timeout - - $secs" >"$out/res/$v.$f"
	else
		echo "abort - - $secs" >"$out/res/$v.$f"
	fi
	cd "$out/run/$v" && [ "$(cat "$out/res/$v.$f" | cut -d" " -f1)" = ok ] && rm -rf "$f"
	exit 0
' sh "$out" "$srcdir" "$limit" || true

bydesign=test/sqlite/suite/bydesign.txt
bad=0
nf=0
# The table, also kept in $out/table.txt (for the issue's closing note).
{
printf '%-18s | %-8s %6s %6s %5s | %-8s %6s %6s %5s | %s\n' file unix tests errors secs atomio tests errors secs note
for f in $files; do
	nf=$((nf + 1))
	set -- $(cat "$res/unix.$f" 2>/dev/null || echo "- - - -")
	us=$1 ut=$2 ue=$3 usec=$4
	set -- $(cat "$res/atomio.$f" 2>/dev/null || echo "- - - -")
	as=$1 at=$2 ae=$3 asec=$4
	note=""
	if [ "$us" = - ] || [ "$as" = - ]; then
		note="NOT RUN"
		bad=$((bad + 1))
	elif [ "$us" = ok ] && [ "$as" != ok ]; then
		if grep -q "^$f " "$bydesign" 2>/dev/null; then
			note="by design"
		else
			note="REGRESSION"
			bad=$((bad + 1))
		fi
	elif [ "$ut" != - ] && [ "$at" != - ] && [ "$ut" != "$at" ]; then
		note="tests differ"
	fi
	printf '%-18s | %-8s %6s %6s %5s | %-8s %6s %6s %5s | %s\n' "$f" "$us" "$ut" "$ue" "$usec" "$as" "$at" "$ae" "$asec" "$note"
done
for v in $vfses; do
	printf '%s: ' "$v"
	cat "$res"/"$v".* 2>/dev/null | awk '{n[$1]++; if ($2 != "-") {t += $2; e += $3}}
		END {printf "%d tests, %d errors;", t, e; for (s in n) printf " %s %d", s, n[s]; print ""}'
done
} >"$out/table.txt"
cat "$out/table.txt"
echo "the table: $out/table.txt; logs of files that did not pass: $out/run/<vfs>/<file>/log"
if [ "$bad" -gt 0 ]; then
	echo "sqlite-suite: $bad of $nf files pass under unix but not under atomio"
	exit 1
fi
echo "sqlite-suite: every file that passes under unix passes under atomio (or is by design)"
