#!/bin/sh
# The preload library against SIGKILL: a plain POSIX program
# (test/preload/prog.c) writes its workload to a protected file through the
# library (a 256 KiB log, so it wraps and checkpoints), and is killed at a
# seeded moment.  A second process under the library recovers the store
# before main and checks the file with the oracle (test/preload/rec.h): every
# write whose sync returned is there, no slot is torn, none is newer than
# the writes the program could have issued.
# Then the same in group mode (ATOMIO_GROUP=1): the file must be exactly as
# one group boundary (a sync) left it, at or after the last sync that returned.
#   PRELOAD_KILL_ROUNDS (default 30, and half as many in group mode),
#   PRELOAD_KILL_SEED (default $ATOMIO_SEED, else 1)
set -eu
. test/store_lib.sh
SO=build/libatomio_preload.so
P=build/preload-test/prog
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f $SO ] && [ -x $P ] || fail "not built: $SO $P"
ROUNDS=${PRELOAD_KILL_ROUNDS:-30}
SEED=${PRELOAD_KILL_SEED:-${ATOMIO_SEED:-1}}
echo "seed $SEED (ATOMIO_SEED=$SEED to repeat), $ROUNDS rounds + $((ROUNDS / 2)) in group mode (PRELOAD_KILL_SEED, PRELOAD_KILL_ROUNDS)"
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-preload-kill-XXXXXX")
trap '[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$T"' EXIT
SOP=$(realpath $SO)
recovered=0 killed=0 synced_total=0
N=1000000
GROUP_ROUNDS=$((ROUNDS / 2))
r=1
while [ $r -le $((ROUNDS + GROUP_ROUNDS)) ]; do
	d="$T/r$r"
	mkdir "$d"
	seed=$((SEED * 1000 + r))
	if [ $r -gt "$ROUNDS" ]; then
		group=1 how="checkg $d/data.p $seed $N"
	else
		group=0 how="check $d/data.p $seed"
	fi
	delay=$(awk -v s="$seed" 'BEGIN { srand(s); printf "%.3f", 0.02 + rand() * 0.3 }')
	ATOMIO_LOG="$d/log" ATOMIO_FILES='*.p' ATOMIO_LOG_SIZE=256K ATOMIO_GROUP=$group LD_PRELOAD=$SOP \
		$P write "$d/data.p" $seed $N >"$d/out" 2>"$d/err" &
	pid=$!
	sleep "$delay"
	kill -9 $pid 2>/dev/null && killed=$((killed + 1))
	wait $pid 2>/dev/null || true
	grep -q '^done' "$d/out" && fail "round $r: the writer finished before the kill"
	synced=$(sed -n 's/^synced //p' "$d/out" | tail -n 1)
	synced=${synced:-0}
	ATOMIO_LOG="$d/log" ATOMIO_FILES='*.p' ATOMIO_STATS="$d/stats" LD_PRELOAD=$SOP \
		$P $how -1 "$synced" 2>"$d/cerr" ||
		{ cat "$d/cerr" "$d/err"; fail "round $r (seed $seed, group $group, killed after ${delay}s, $synced synced)"; }
	g=$(sed -n 's/.*groups_recovered=\([0-9]*\).*/\1/p' "$d/stats" | awk '{ s += $1 } END { print s + 0 }')
	recovered=$((recovered + g))
	synced_total=$((synced_total + synced))
	[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$d"
	r=$((r + 1))
done
echo "$killed kills, $synced_total synced writes checked, $recovered groups replayed by recovery"
[ "$killed" -eq $((ROUNDS + GROUP_ROUNDS)) ] || fail "only $killed of $((ROUNDS + GROUP_ROUNDS)) rounds were killed"
[ "$recovered" -gt 0 ] || fail "no round needed recovery: the kills missed the writes"
echo ok
