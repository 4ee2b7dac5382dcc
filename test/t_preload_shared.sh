#!/bin/sh
# The preload library's one mode (issue 36: every process joins the store;
# no ATOMIO_SHARED=1 needed), as PostgreSQL uses it: test/preload/shared.c forks NPROC processes from a parent that wrote
# first; they read and write the same protected files (each read must be the
# newest write of any process), extend, truncate, create and unlink files,
# fsync what others wrote; one is SIGKILLed and a new one forked meanwhile,
# then all of them are killed at once.  A process under the library then
# recovers the store before main and the checker finds every page whole and
# at its acknowledged (or in-flight) version.  Bounded by write counts.
#   PRELOAD_SHARED_ROUNDS (default 3), PRELOAD_SHARED_WRITES (default 3000),
#   PRELOAD_SHARED_SEED (default $ATOMIO_SEED, else 1)
set -eu
. test/store_lib.sh
SO=build/libatomio_preload.so
P=build/preload-test/shared
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f $SO ] && [ -x $P ] || fail "not built: $SO $P"
ROUNDS=${PRELOAD_SHARED_ROUNDS:-3}
WRITES=${PRELOAD_SHARED_WRITES:-3000}
SEED=${PRELOAD_SHARED_SEED:-${ATOMIO_SEED:-1}}
echo "seed $SEED (ATOMIO_SEED=$SEED to repeat), $ROUNDS rounds of $WRITES writes (PRELOAD_SHARED_SEED, _ROUNDS, _WRITES)"
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-preload-shared-XXXXXX")
trap '[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$T"' EXIT
SOP=$(realpath $SO)
r=1
while [ "$r" -le "$ROUNDS" ]; do
	d="$T/r$r"
	mkdir "$d"
	seed=$((SEED * 1000 + r))
	nproc=$((3 + r % 3))
	# a small log: it laps and checkpoints under the processes
	ATOMIO_LOG="$d/log" ATOMIO_FILES='*.p' ATOMIO_LOG_SIZE=1M LD_PRELOAD=$SOP \
		$P run "$d" $nproc "$WRITES" $seed >"$d/out" 2>"$d/err" ||
		{ cat "$d/out" "$d/err"; fail "round $r (seed $seed, $nproc processes): the run"; }
	sed "s/^/round $r: /" "$d/out"
	ATOMIO_LOG="$d/log" ATOMIO_FILES='*.p' ATOMIO_STATS="$d/stats" LD_PRELOAD=$SOP \
		$P check "$d" >"$d/cout" 2>"$d/cerr" ||
		{ cat "$d/cout" "$d/cerr" "$d/err"; fail "round $r (seed $seed): the check after recovery"; }
	sed "s/^/round $r: /" "$d/cout"
	[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$d"
	r=$((r + 1))
done
echo ok
