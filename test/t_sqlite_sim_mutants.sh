#!/bin/sh
# Mutation test of t_sqlite_sim: each mutant is the SQLite VFS with one
# defence removed (test/sqlite/mutate.sh): of its transactions over several
# databases (the one group itself, the markers, their directory's sync,
# keeping them until the group is home everywhere, the checkpoint that makes
# it so, and checkpointing the other databases' own logs first), run in the
# pair run; of WAL mode (a checkpoint's sync of the database, a new WAL's
# directory sync), run in the WAL run.  Each must make t_sqlite_sim report a
# failure: databases recovered from a power cut that are not as after one
# transaction, a torn database, or an ATTACHed database that reads otherwise
# alone than with its partner.  (Each run's trace is its own, so there is no
# replay of the failing image on the real VFS for a control: that is
# t_sqlite_sim itself, which must pass.)
# Environment: ATOMIO_SEED (default 1), SQ_MUTANT_TX (transactions per
# run, default 12: every mutant has failed within the first 6).
cd "$(dirname "$0")/.." || exit 1
seed=${ATOMIO_SEED:-1}
echo "sqlite mutants: seed $seed (ATOMIO_SEED=$seed to repeat)"
tmp=$(mktemp -d /var/tmp/atomio-sqmut-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
for m in separate nomarker nodirsync earlyunmark nockpt nopreckpt walnosync walnodirsync fulllazy lzbase; do
	bin=build/mutants/t_sqlite_sim-$m
	[ -x "$bin" ] || { echo "sqlite mutants: $bin missing (make test-bins)"; exit 1; }
	case $m in wal*) only=wal ;; fulllazy | lzbase) only=normal ;; *) only=pair ;; esac
	start=$(date +%s.%N)
	out=$(ATOMIO_SEED=$seed ATOMIO_TEST_DIR=$tmp "$bin" --tx "${SQ_MUTANT_TX:-12}" --only $only 2>&1)
	rc=$?
	t=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	if [ $rc -eq 1 ] && echo "$out" | grep -q 'SQLITE-SIM FAILED'; then
		echo "mutant $m: caught (${t}s): $(echo "$out" | grep -A1 -m1 'SQLITE-SIM FAILED' | tail -n 1 | cut -c1-160)"
	else
		echo "mutant $m: NOT caught (${t}s, exit $rc)"
		echo "$out" | tail -n 5
		fail=1
	fi
	rm -rf "${tmp:?}"/*
done
exit $fail
