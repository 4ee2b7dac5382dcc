#!/bin/sh
# The preload library (man/atomio_preload.7): every interposed call on a
# protected file gives the program the result it must see
# (test/preload/calls.c, which ends by exec'ing itself with an inherited
# protected descriptor); each refusal is one "atomio_preload: PATH: ..."
# line on stderr; the store committed at least the groups the program made;
# and files that do not match pass straight through (no log is even created).
set -eu
SO=build/libatomio_preload.so
B=build/preload-test
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f $SO ] && [ -x $B/calls ] && [ -x $B/prog ] || fail "not built: $SO $B/calls $B/prog"
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-preload-XXXXXX")
trap '[ -n "${ATOMIO_KEEP:-}" ] || rm -rf "$T"' EXIT
SOP=$(realpath $SO)

# 1. every call
mkdir "$T/c"
ATOMIO_LOG="$T/c/log" ATOMIO_FILES='*.p' ATOMIO_STATS="$T/c/stats" LD_PRELOAD=$SOP \
	$B/calls "$T/c" >"$T/out" 2>"$T/err" || { cat "$T/out" "$T/err"; fail "calls exited $?"; }
cat "$T/out"
grep -q '^exec: ok$' "$T/out" || fail "the exec'd image did not finish"
want=$(sed -n 's/^groups //p' "$T/out")
got=$(sed -n 's/.* commits=\([0-9]*\) .*/\1/p' "$T/c/stats" | awk '{ s += $1 } END { print s + 0 }')
echo "groups made by the program: $want; committed by the store: $got"
[ "$got" -ge "$want" ] || fail "the store committed $got groups, the program made $want"
# One line per refusal, each naming the file.
for what in 'fallocate mode 0x3 refused' 'fallocate mode 0x10 refused' 'writable shared mapping refused' \
	'O_DIRECT write not aligned' 'fopen("w") refused' 'fdopen("a") refused' \
	'copy_file_range into a protected file refused' 'sendfile into' 'splice into' \
	'io_submit (Linux AIO) of a write or sync refused'; do
	grep -q "^atomio_preload: $T/c/[a-z]*\.p: $what" "$T/err" || {
		grep -q 'O_DIRECT: not supported' "$T/out" && [ "$what" = 'O_DIRECT write not aligned' ] ||
			{ cat "$T/err"; fail "no stderr line for: $what"; }
	}
done
n=$(grep -vc '^atomio_preload: ' "$T/err" || true)
[ "$n" -eq 0 ] || { cat "$T/err"; fail "$n stderr lines not from the library"; }

# ... and in group mode (ATOMIO_GROUP=1), where the writes between two syncs
# are held back as one group: the program must see the same results.
mkdir "$T/g"
ATOMIO_LOG="$T/g/log" ATOMIO_FILES='*.p' ATOMIO_GROUP=1 ATOMIO_STATS="$T/g/stats" LD_PRELOAD=$SOP \
	$B/calls "$T/g" >"$T/gout" 2>"$T/gerr" || { cat "$T/gout" "$T/gerr"; fail "calls (group mode) exited $?"; }
grep -q '^exec: ok$' "$T/gout" || fail "group mode: the exec'd image did not finish"
grep -q "^atomio_preload: $T/g/k.p: refused: the store belongs to the parent" "$T/gerr" ||
	{ cat "$T/gerr"; fail "group mode: no stderr line for the forked child's write"; }
gc=$(sed -n 's/.* commits=\([0-9]*\) .*/\1/p' "$T/g/stats" | awk '{ s += $1 } END { print s + 0 }')
echo "group mode: $gc groups committed for the same $want writes and size changes"
[ "$gc" -gt 0 ] && [ "$gc" -lt "$want" ] || fail "group mode committed $gc groups (expected 1..$want)"

# 2. pass-through: the same program's writes to a file that does not match
# go straight to the file; the store is never opened, so no log appears.
mkdir "$T/p"
ATOMIO_LOG="$T/p/log" ATOMIO_FILES='*.nomatch:/elsewhere/*' LD_PRELOAD=$SOP \
	$B/prog write "$T/p/data.p" 7 300 >"$T/p/out" || fail "prog (pass-through) exited $?"
[ ! -e "$T/p/log" ] || fail "pass-through run created the log"
$B/prog check "$T/p/data.p" 7 300 300 || fail "pass-through data wrong"
# ... and with the library loaded but not configured.
LD_PRELOAD=$SOP $B/prog write "$T/p/data2.p" 8 100 >/dev/null || fail "unconfigured run exited $?"
$B/prog check "$T/p/data2.p" 8 100 100 || fail "unconfigured run: data wrong"

# 3. the same workload protected, and checked by a process that recovers first
mkdir "$T/w"
ATOMIO_LOG="$T/w/log" ATOMIO_FILES='*.p' ATOMIO_STATS="$T/w/stats" LD_PRELOAD=$SOP \
	$B/prog write "$T/w/data.p" 9 500 >"$T/w/out" || fail "prog (protected) exited $?"
[ -s "$T/w/log" ] || fail "protected run did not create the log"
ATOMIO_LOG="$T/w/log" ATOMIO_FILES='*.p' LD_PRELOAD=$SOP $B/prog check "$T/w/data.p" 9 500 500 ||
	fail "protected run: data wrong"
grep -q 'commits=50[1-9]' "$T/w/stats" || { cat "$T/w/stats"; fail "expected 501+ commits (500 writes + the size)"; }
echo "ok"
