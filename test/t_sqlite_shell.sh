#!/bin/sh
# The atomio VFS in Debian's sqlite3 shell: `.load build/atomio_sqlite`,
# file:DB?vfs=atomio, a round trip, the log beside the database (mode 0600),
# WAL declined as SQLite documents it (the pragma answers the mode kept,
# here delete), a second shell refused (SQLITE_BUSY) while the
# first holds the database for writing, and the plain shell reading the result.
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

out=$(q "PRAGMA journal_mode=MEMORY" "CREATE TABLE t(x INTEGER)" \
	"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) INSERT INTO t SELECT i FROM c" \
	"SELECT sum(x) FROM t" "PRAGMA atomio_stats")
echo "$out"
echo "$out" | grep -qx "500500" || fail "round trip: $out"
echo "$out" | grep -q "writer=1 commits=2" || fail "stats: $out"
[ "$(stat -c %a "$db-atomio")" = 600 ] || fail "log mode $(stat -c %a "$db-atomio")"

out=$(q "PRAGMA journal_mode=WAL")
[ "$out" = delete ] || fail "journal_mode=WAL: expected the kept mode (delete), got: $out"

# A first shell holds a write transaction, fed through a FIFO.
mkfifo "$fifo"
sqlite3 -batch -cmd ".load $ext" -cmd ".open file:$db?vfs=atomio" :memory: <"$fifo" >"$dir/first.out" 2>&1 &
pid=$!
exec 7>"$fifo"
printf 'PRAGMA journal_mode=MEMORY;\nBEGIN IMMEDIATE;\nINSERT INTO t VALUES(1000000);\nSELECT 1;\n' >&7
for i in $(seq 100); do grep -q '^1$' "$dir/first.out" 2>/dev/null && break; sleep 0.05; done
grep -q '^1$' "$dir/first.out" || fail "first shell did not start: $(cat "$dir/first.out")"
out=$(q "PRAGMA journal_mode=MEMORY" "INSERT INTO t VALUES(7)")
echo "$out" | grep -q "database is locked" || fail "second writer not refused: $out"
out=$(q "SELECT sum(x) FROM t")
[ "$out" = 500500 ] || fail "second shell read: $out"
printf 'COMMIT;\n.quit\n' >&7
exec 7>&-
wait "$pid" || fail "first shell: $(cat "$dir/first.out")"
out=$(q "PRAGMA journal_mode=MEMORY" "INSERT INTO t VALUES(7)" "SELECT sum(x) FROM t" "PRAGMA integrity_check")
echo "$out" | grep -qx 1500507 || fail "after the first shell quit: $out"
echo "$out" | grep -qx ok || fail "integrity: $out"

# Debian's plain shell reads the database as it is.
out=$(sqlite3 "$db" "SELECT count(*), sum(x) FROM t" 2>&1)
[ "$out" = "1002|1500507" ] || fail "plain shell: $out"
echo "PASS"
