#!/bin/sh
# The preload's lazy groups between processes (issue 36, the one mode:
# docs/plans/36-lazy-groups.md section 5; test/preload/lazy.c).  Process A
# writes N records of 4 KiB to a protected file with no sync and waits.
# Process B, started after A's writes returned, opens the file read-only and
# must see every record at once: pread, read at the position, fstat, stat by
# path, lseek(SEEK_END) (B joins the store A holds, and reads through its
# index while A's groups are not home).  B's fsync must make A's records
# durable: B and then A are SIGKILLed and the store's shared state removed
# (nothing of the store lives on but its log, as after a power cut; B first,
# as a survivor commits a killed process's groups), and a process that
# recovers the store finds every record.  ATOMIO_LAZY_MS=60000,
# so no flush by the delay comes between: only B's fsync can have made them
# durable.  A second round kills A first: B reads the records again and
# exits, and its ATOMIO_STATS line must show a store sync (and, where the
# store committed lazily, reads that overlaid the pending groups).  A third
# round, without B's fsync, is the control: where the store commits lazily
# the records must be lost with both processes (with a store that commits
# durably, as the stubs of step 0 did, they survive).  Deterministic; a few
# seconds.  PRELOAD_LAZY_RECS (default 64).
set -eu
. test/store_lib.sh
SO=build/libatomio_preload.so
P=build/preload-test/lazy
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f $SO ] && [ -x $P ] || fail "not built: $SO $P"
N=${PRELOAD_LAZY_RECS:-64}
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-preload-lazy-XXXXXX")
a= b=
cleanup() {
	[ -z "$a" ] || kill -9 "$a" 2>/dev/null || true
	[ -z "$b" ] || kill -9 "$b" 2>/dev/null || true
	[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$T"
}
trap cleanup EXIT
SOP=$(realpath $SO)

# under DIR CMD...: CMD under the library, on DIR's store, in place of the
# calling (sub)shell: started as "(under ...) &", $! is the program itself,
# which a kill must reach
under() {
	_d=$1
	shift
	exec env ATOMIO_LOG="$_d/log" ATOMIO_FILES='*.p' ATOMIO_LOG_SIZE=4M ATOMIO_LAZY_MS=60000 LD_PRELOAD="$SOP" "$@"
}

# wait_line FILE LINE: until FILE has LINE (10 s at most)
wait_line() {
	_i=0
	until grep -qx "$2" "$1" 2>/dev/null; do
		_i=$((_i + 1))
		[ $_i -le 200 ] || return 1
		sleep 0.05
	done
}

# round NAME SYNC END: END is bfirst (B SIGKILLed, then A: nothing of the
# store lives on but its log), or exit (A SIGKILLed, B reads again, then
# exits: a survivor)
round() {
	d="$T/$1" sync=$2 end=$3
	mkdir "$d"
	(under "$d" $P write "$d" "$N") >"$d/a.out" 2>"$d/a.err" &
	a=$!
	wait_line "$d/a.out" written || { cat "$d/a.err"; fail "$1: A did not write"; }
	mkfifo "$d/b.in"
	(under "$d" env ATOMIO_STATS="$d/stats" $P read "$d" "$N" "$sync") <"$d/b.in" >"$d/b.out" 2>"$d/b.err" &
	b=$!
	exec 3>"$d/b.in"
	wait_line "$d/b.out" "read ok" || { cat "$d/b.err"; fail "$1: B did not see A's writes at once"; }
	[ "$sync" = 0 ] || wait_line "$d/b.out" synced || { cat "$d/b.err"; fail "$1: B's fsync"; }
	if [ "$end" = bfirst ]; then
		kill -9 $b
		wait $b 2>/dev/null || true
		exec 3>&-
		b=
	fi
	kill -9 $a
	wait $a 2>/dev/null || true
	a=
	if [ "$end" = exit ]; then
		echo again >&3
		wait_line "$d/b.out" "reread ok" || { cat "$d/b.err"; fail "$1: B's reads after A was killed"; }
		exec 3>&-
		wait $b || { cat "$d/b.err"; fail "$1: B exited $?"; }
		b=
	fi
	# Both killed: the store's shared state (in /dev/shm) goes too, as at a
	# power cut or reboot, so that only what is durable in the log counts
	# (a process opening the store would otherwise join the dead ones'
	# state and commit their lazy groups from it).
	[ "$end" != bfirst ] || rm_store_state "$d"
	# A killed process's descriptors (the log's flock) may outlive it by a
	# few milliseconds (io_uring): the checker must find the store free.
	_i=0
	until flock -n -x "$d/log" true; do
		_i=$((_i + 1))
		[ $_i -le 200 ] || fail "$1: the log is still locked 10 s after the kills"
		sleep 0.05
	done
	# recovered before main by the checking process (nobody holds the store)
	got=0
	(under "$d" $P check "$d" "$N") >"$d/check" 2>&1 || got=$?
}

round sync 1 bfirst
[ $got -eq 0 ] || { cat "$T/sync/check"; fail "B's fsync did not make A's records durable"; }
echo "A wrote $N records, B read them at once, B's fsync made them durable: B then A killed, all $N recovered"

round exit 1 exit
[ $got -eq 0 ] || { cat "$T/exit/check"; fail "after B's fsync and exit: records lost"; }
echo "A killed after B's fsync: B read the records again and exited; all $N recovered"
line=$(cat "$T/exit/stats")
echo "B's counters: lazy_commits=${line#* lazy_commits=}" | sed 's/^/  /'
v() { echo "$line" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
[ "$(v syncs)" -ge 1 ] || fail "B's fsync made no store sync (syncs=$(v syncs))"
lazy=$(v lazy_commits)
if [ "$lazy" -gt 0 ]; then
	[ "$(v lazy_reads)" -gt 0 ] || fail "the store committed lazily, but B's reads overlaid nothing"
fi

# The control: the same without B's fsync.  Where the store commits lazily
# and nothing else flushed in round 2 (no delay, no pressure), the records
# are lost with both processes: round 1 then proves B's fsync.
round nosync 0 bfirst
echo "without B's fsync, B then A killed: $(cat "$T/nosync/check" 2>/dev/null || true)$([ $got -eq 0 ] && echo "all $N records survived")"
if [ "$lazy" -gt 0 ] && [ "$(v flush_delay)" = 0 ] && [ "$(v flush_press)" = 0 ]; then
	[ $got -ne 0 ] || fail "lazy commits, but without a sync every record survived both kills: round 1 proves nothing"
fi
echo ok
