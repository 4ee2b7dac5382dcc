#!/bin/sh
# Mutation test of the SQLite VFS's kill and process tests: each mutant is
# a file of sqlite/ with one defence removed (test/sqlite/mutate.sh), linked into
# the test that must catch it (mk/sqlite.mk, SQ_VFS_MUTANTS), which must then
# fail:
#   hotmem           t_sqlite_journal: a hot journal of a unix-VFS writer that
#                    died is not rolled back when kept in memory
#   readycommit      t_sqlite_journal: a group synced for a commit that then
#                    failed is committed at the unlock, corrupt
#   supermem         t_sqlite_xattach --super: the super-journal kept in memory
#                    beside a journal of the unix VFS that names it
#   nomembers        t_sqlite_xattach --super: our journals left in memory
#                    beside an on-disk super-journal
#   noopendrop       t_sqlite_wal --part 6: a log left beside a WAL database
#                    by locking_mode=EXCLUSIVE
#   nosetdrop        t_sqlite_wal --part 7: journal_mode=WAL over two databases
#                    keeps the stores, so that a second process waits forever
#   nosettle         t_sqlite_writers --part3: a reader does not wait for the
#                    store to settle and reads a group a killed writer left
#                    half home
#   noturns          t_sqlite_turns --part2: a writer that releases the write
#                    lock never hands it to a sleeper, so the first writer
#                    keeps it and the others starve
#   bcnochain        t_sqlite_syncnormal: the diff's base cache kept across
#                    another process's commit, so a byte changed back is not
#                    logged and the row keeps the other process's value
# Not here since the store is shared (every reader joins it): noswitchdrop
# and norecoverremove of test/sqlite/mutate.sh.  Their defences stay, but
# t_sqlite_wal no longer fails without them: another process that opens the
# WAL checkpoints the store before it drops its handle (wal_drop_store), so
# no live group outlives the switch, and nobody needs the exclusive lock to
# recover a log beside a WAL database any more.
# (Each test, unmutated, passes in make check: that is the control.)
# Environment: ATOMIO_SEED (default 1).
cd "$(dirname "$0")/.." || exit 1
seed=${ATOMIO_SEED:-1}
echo "sqlite VFS mutants: seed $seed (ATOMIO_SEED=$seed to repeat)"
tmp=$(mktemp -d /var/tmp/atomio-sqvmut-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
while read -r m t args; do
	bin=build/mutants/$t-$m
	[ -x "$bin" ] || { echo "sqlite VFS mutants: $bin missing (make test-bins)"; exit 1; }
	start=$(date +%s.%N)
	# shellcheck disable=SC2086
	out=$(ATOMIO_SEED=$seed ATOMIO_TEST_DIR=$tmp timeout -k 5 120 "$bin" $args 2>&1)
	rc=$?
	t_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ]; then
		why=$(echo "$out" | grep -v '^\[sqlite log' | grep -v '^seed ' | tail -n 1 | cut -c1-150)
		echo "mutant $m ($t $args): caught (${t_s}s): $why"
	else
		echo "mutant $m ($t $args): NOT caught (${t_s}s, exit $rc)"
		echo "$out" | tail -n 5
		fail=1
	fi
	rm -rf "${tmp:?}"/*
done <<LIST
hotmem t_sqlite_journal
readycommit t_sqlite_journal
supermem t_sqlite_xattach --super
nomembers t_sqlite_xattach --super
noopendrop t_sqlite_wal --part 6
nosetdrop t_sqlite_wal --part 7
nosettle t_sqlite_writers --part3
noturns t_sqlite_turns --part2
bcnochain t_sqlite_syncnormal
LIST
exit $fail
