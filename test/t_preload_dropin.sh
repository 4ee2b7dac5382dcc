#!/bin/sh
# The preload library as a drop-in (issue 34): everyday paths a program
# takes must behave as the file would without the library.  Each case of
# test/preload/dropin.c runs under the library in a directory of its own;
# where files are left behind, they are checked again after the process
# exited, without the library.  Deterministic; a few seconds.
set -eu
SO=${PRELOAD_SO:-build/libatomio_preload.so}
B=build/preload-test/dropin
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f $SO ] && [ -x $B ] || fail "not built: $SO $B"
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-preload-dropin-XXXXXX")
trap '[ -n "${ATOMIO_KEEP:-}" ] || rm -rf "$T"' EXIT
SOP=$(realpath $SO)

# run CASE MODE [after]: MODE is default, group, or shared (ATOMIO_SHARED=1,
# accepted and ignored since the one mode of issue 36: the same as default)
run() {
	c=$1 mode=$2
	d="$T/$c-$mode"
	mkdir "$d"
	case $mode in
	group) env="ATOMIO_GROUP=1" ;;
	race-*) env="ATOMIO_PRELOAD_TEST_WDELAY=300 MALLOC_PERTURB_=165" ;;
	shared) env="ATOMIO_SHARED=1" ;;
	*) env="ATOMIO_X=0" ;;
	esac
	env $env ATOMIO_LOG="$d/log" ATOMIO_FILES='*.db' LD_PRELOAD=$SOP $B $c "$d" >"$d/out" 2>"$d/err" ||
		{ cat "$d/out" "$d/err"; fail "$c ($mode mode)"; }
	if [ "${3:-}" = after ]; then
		# recovered by a process under the library, then read without it
		env $env ATOMIO_LOG="$d/log" ATOMIO_FILES='*.db' LD_PRELOAD=$SOP /bin/true
		$B check "$d" $c || { cat "$d/err"; fail "$c ($mode mode): the files after exit"; }
	fi
	echo "$c ($mode): ok"
}

for mode in default group; do
	run fdclose $mode after
	run rawclose $mode after
	run storefd $mode after
	run hole $mode
done
run hole shared
run vfork group after
run vfork default after
run setfl default
run exitlast default
run stat group
run stat default
for mode in default group; do
	run mprotect $mode
	run spawn $mode
	run execveat $mode after
	run unseen $mode
done

run alias group after
run alias default after
run cancel group
run cancel default
run estale group
run estale default
run emfile group
run forkrename default
run forkrename group
run renameshared default after
run renameother default after
run unlinkother default after
run closerace race-default
run rwstarve default
run rwstarve group
run bigwrites default
for mode in default group shared; do
	run falloc $mode
done
mkdir "$T/falloc-plain"
$B falloc "$T/falloc-plain" >/dev/null || fail "falloc without the library"

# ATOMIO_FILES through a symlinked directory protects the files in it; a
# relative pattern with a slash, and a standard stream redirected into a
# protected file (whose stdio writes the library cannot see), are said.
mkdir "$T/real"
ln -s "$T/real" "$T/lnk"
ATOMIO_LOG="$T/real/log" ATOMIO_FILES="$T/lnk/*.db" ATOMIO_STATS="$T/real/stats" LD_PRELOAD=$SOP \
	$B hole "$T/lnk" >"$T/real/out" 2>"$T/real/err" || { cat "$T/real/err"; fail "hole through a symlinked pattern"; }
grep -q 'commits=[1-9]' "$T/real/stats" || { cat "$T/real/stats"; fail "a pattern through a symlinked directory protected nothing"; }
echo "pattern through a symlinked directory: ok"
ATOMIO_LOG="$T/real/log2" ATOMIO_FILES="rel/*.db" LD_PRELOAD=$SOP /bin/true 2>"$T/real/err2"
grep -q '^atomio_preload: rel/\*\.db: ATOMIO_FILES: .*relative one matches nothing' "$T/real/err2" ||
	{ cat "$T/real/err2"; fail "no warning for a relative pattern"; }
echo "relative pattern: warned"
ATOMIO_LOG="$T/real/log3" ATOMIO_FILES='*.db' LD_PRELOAD=$SOP /bin/true >>"$T/real/std.db" 2>"$T/real/err3"
grep -q "^atomio_preload: $T/real/std.db: standard output is this protected file" "$T/real/err3" ||
	{ cat "$T/real/err3"; fail "no warning for stdout redirected into a protected file"; }
echo "stdout into a protected file: warned"

# The same as Python's subprocess does it (vfork, close_range, dup2, exec)
if command -v python3 >/dev/null 2>&1; then
	d="$T/py"
	mkdir "$d"
	ATOMIO_GROUP=1 ATOMIO_LOG="$d/log" ATOMIO_FILES='*.db' LD_PRELOAD=$SOP python3 - "$d" <<'PY' >"$d/out" 2>"$d/err" ||
import os, subprocess, sys
p = os.path.join(sys.argv[1], "a.db")
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"A" * 4096)
st, fs = os.stat(p).st_size, os.fstat(fd).st_size
assert st == fs == 4096, ("stat and fstat before the sync", st, fs)
subprocess.run(["true"], check=True)
os.write(fd, b"B" * 4096)
os.fsync(fd)
st, fs = os.stat(p).st_size, os.fstat(fd).st_size
assert st == fs == 8192, (st, fs)
os.close(fd)
print("python: ok")
PY
		{ cat "$d/out" "$d/err"; fail "python3 subprocess"; }
	$B check "$d" vfork || { cat "$d/err"; fail "python3 subprocess: the file after exit"; }
	echo "python3 subprocess (group): ok"
else
	echo "python3 subprocess: skipped (no python3)"
fi
echo ok
