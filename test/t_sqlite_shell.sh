#!/bin/sh
# The atomio VFS in Debian's sqlite3 shell: `.load build/atomio_sqlite`,
# file:DB?vfs=atomio, a round trip with no pragma (SQLite's default journal
# mode: one group per commit, no -journal file), the log beside the database
# (mode 0600), a second shell refused (SQLITE_BUSY) while the first holds the
# database for writing, WAL (the log removed, a second shell reading beside a
# first one's open write transaction, back to delete: the log again), a
# database and its log copied while open and put back (read and written
# again), and the plain shell reading the result.
set -u
command -v sqlite3 >/dev/null 2>&1 || { echo "SKIP: no sqlite3 shell"; exit 77; }
ext=build/atomio_sqlite
[ -f "$ext.so" ] || { echo "FAIL: $ext.so not built"; exit 1; }
dir=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-t-shell-XXXXXX")
fifo="$dir/fifo"
trap 'exec 7>&- 2>/dev/null; rm -rf "$dir"' EXIT
db="$dir/t.db"
fail() { echo "FAIL: $*"; exit 1; }
# (":memory:" is the shell's FILENAME argument; -cmd .open replaces it)
q() { sqlite3 -batch -cmd ".load $ext" -cmd ".open file:$db?vfs=atomio" -cmd ".timeout 0" :memory: "$@" 2>&1; }

out=$(q "CREATE TABLE t(x INTEGER)" \
	"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) INSERT INTO t SELECT i FROM c" \
	"SELECT sum(x) FROM t" "PRAGMA journal_mode" "PRAGMA atomio_stats")
echo "$out"
echo "$out" | grep -qx "500500" || fail "round trip: $out"
echo "$out" | grep -qx "delete" || fail "journal mode: $out"
echo "$out" | grep -q "writer=1 commits=2" || fail "stats: $out"
[ "$(stat -c %a "$db-atomio")" = 600 ] || fail "log mode $(stat -c %a "$db-atomio")"
[ -e "$db-journal" ] && fail "a journal on disk"

# writer SQL N: a shell kept open on the database, fed through a FIFO (fd 7,
# pid in $pid): it runs SQL, then prints N, which is waited for.
writer() {
	rm -f "$fifo"
	mkfifo "$fifo"
	sqlite3 -batch -cmd ".load $ext" -cmd ".open file:$db?vfs=atomio" :memory: <"$fifo" >"$dir/first.out" 2>&1 &
	pid=$!
	exec 7>"$fifo"
	printf '%bSELECT %s;\n' "$1" "$2" >&7
	for i in $(seq 100); do grep -q "^$2\$" "$dir/first.out" 2>/dev/null && break; sleep 0.05; done
	grep -q "^$2\$" "$dir/first.out" || fail "the writing shell did not start: $(cat "$dir/first.out")"
}

# A first shell holds a write transaction.
writer 'BEGIN IMMEDIATE;\nINSERT INTO t VALUES(1000000);\n' 1
out=$(q "INSERT INTO t VALUES(7)")
echo "$out" | grep -q "database is locked" || fail "second writer not refused: $out"
out=$(q "SELECT sum(x) FROM t")
[ "$out" = 500500 ] || fail "second shell read: $out"
printf 'COMMIT;\n.quit\n' >&7
exec 7>&-
wait "$pid" || fail "first shell: $(cat "$dir/first.out")"
out=$(q "INSERT INTO t VALUES(7)" "SELECT sum(x) FROM t" "PRAGMA integrity_check")
echo "$out" | grep -qx 1500507 || fail "after the first shell quit: $out"
echo "$out" | grep -qx ok || fail "integrity: $out"

# WAL: the log goes; a second shell reads beside a first one's open write
# transaction (it would get "database is locked" in a rollback mode); back
# to delete, the log is made again.
out=$(q "PRAGMA journal_mode=WAL")
[ "$out" = wal ] || fail "journal_mode=WAL: $out"
[ -e "$db-atomio" ] && fail "a log beside a WAL database"
writer 'BEGIN IMMEDIATE;\nINSERT INTO t VALUES(1000000);\n' 3
out=$(q "SELECT sum(x) FROM t")
[ "$out" = 1500507 ] || fail "a reader beside a WAL writer: $out"
printf 'ROLLBACK;\n.quit\n' >&7
exec 7>&-
wait "$pid" || fail "the WAL writer: $(cat "$dir/first.out")"
out=$(q "PRAGMA journal_mode=DELETE" "INSERT INTO t VALUES(0)")
[ "$out" = delete ] || fail "journal_mode=DELETE: $out"
[ -e "$db-atomio" ] || fail "no log after WAL"

# Copied while open, with groups in the log, and put back, the log last (so
# newer than the database: not taken for an earlier file's): the copy of the
# database holds every group of the copy of the log, the VFS accepts it
# (ATOMIO_ACCEPT_COPIES) and reads it.
writer 'INSERT INTO t VALUES(2000001);\nINSERT INTO t VALUES(2000002);\n' 2
cp "$db" "$dir/db.copy"
cp "$db-atomio" "$dir/log.copy"
printf '.quit\n' >&7
exec 7>&-
wait "$pid" || fail "writer: $(cat "$dir/first.out")"
if [ -x build/atomio ]; then
	n=$(build/atomio dump --json "$dir/log.copy" | jq '.records | length')
	[ "$n" -gt 0 ] || fail "the copy of the log holds no group ($n): the case is not tested"
fi
rm -f "$db" "$db-atomio"
cp "$dir/db.copy" "$db"
sleep 0.01
cp "$dir/log.copy" "$db-atomio"
out=$(q "SELECT sum(x) FROM t" "PRAGMA integrity_check")
echo "$out" | grep -qx 5500510 || fail "the copies put back: $out"
echo "$out" | grep -qx ok || fail "integrity of the copies: $out"
out=$(q "DELETE FROM t WHERE x > 1500000" "SELECT sum(x) FROM t")
echo "$out" | grep -qx 1500507 || fail "writing the copies: $out"

# Debian's plain shell reads the database as it is.
out=$(sqlite3 "$db" "SELECT count(*), sum(x) FROM t" 2>&1)
[ "$out" = "1003|1500507" ] || fail "plain shell: $out"
echo "PASS"
