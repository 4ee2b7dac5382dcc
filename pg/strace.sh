#!/bin/bash
# What PostgreSQL 15 does to its relation files, process by process:
#   pg/strace.sh
# A cluster on the real disk (OUT/pg-strace, default /tmp/cutfs) with data
# checksums, full_page_writes=off (the atomio mode's settings), traced
# from its postmaster down with strace -f -ff -y (every process to a file of
# its own, descriptors shown with their paths) while it:
#   starts; runs pgbench (TPC-B-like, 2 clients, PG_STRACE_SECS, default 10 s)
#   with autovacuum every second; CREATE TABLE AS, CREATE INDEX, DROP TABLE,
#   VACUUM FULL, TRUNCATE, VACUUM, CREATE DATABASE, DROP DATABASE,
#   CHECKPOINT; an immediate stop (a crash); a start (crash recovery by the
#   startup process); a clean stop.
# The processes' roles come from the server's log (log_line_prefix names
# the backend type; log_connections, log_autovacuum_min_duration=0), else
# from ps, sampled every 0.1 s (a process seen with neither is "child?").  Prints the summary of
# pg/strace-summary.py: for every system call on a file under base/ or
# global/, by role: how many, sizes, flags; the raw traces stay in
# OUT/pg-strace/trace.PID.
set -eu
OUT=${OUT:-/tmp/cutfs}
SECS=${PG_STRACE_SECS:-10}
command -v strace >/dev/null || { echo "SKIP: strace is not installed (make pg-deps)" >&2; exit 77; }
[ -x /usr/lib/postgresql/15/bin/postgres ] || { echo "SKIP: PostgreSQL 15 is not installed (make pg-deps)" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (the server runs as postgres)" >&2; exit 77; }
export PG_D=$OUT/pg-strace PG_SHARED=16MB PG_SCALE=${PG_SCALE:-4}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
SAMPLER=""; STRACE_PID=""
cleanup() {
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
	pg_kill
	true
}
trap cleanup EXIT
rm -rf "$PG_D"; mkdir -p "$PG_D"
pg_mode off "$PG_D/data"
pg_initdb
chmod 755 "$PG_D"
# the traced server: strace (as root) runs postgres as the user postgres
strace_start() {
	strace -f -ff -y -s 16 -tt -o "$PG_D/trace" -e trace=%file,%desc,%memory,fsync,fdatasync,sync_file_range,fallocate \
		setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- \
		"$PG_BIN/postgres" -D "$PG_DATA" $(pg_mode_opts) -c log_connections=on -c log_autovacuum_min_duration=0 \
		>>"$PG_D/server.log" 2>&1 &
	STRACE_PID=$!
	PG_PID=$STRACE_PID
	pg_wait_ready || die "the traced server does not start"
	# the postmaster is strace's child (setpriv execs it)
	PG_PID=$(pgrep -o -P "$PG_PID" || echo "$PG_PID")
}
( while :; do ps -e -o pid=,args= | grep 'postgres' >> "$PG_D/roles.raw"; sleep 0.1; done ) &
SAMPLER=$!
: > "$PG_D/server.log"
strace_start
as_pg "$PG_BIN/pgbench" -h "$PG_SOCK" -U postgres -c 2 -T "$SECS" -n bench > "$PG_D/pgbench.log" 2>&1
pg_sql -c "CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 100000) g" >/dev/null
pg_sql -c "CREATE INDEX t_v ON t (v)" >/dev/null
pg_sql -c "DROP TABLE t" >/dev/null
pg_sql -c "VACUUM FULL pgbench_tellers" >/dev/null
pg_sql -c "TRUNCATE pgbench_history" >/dev/null
pg_sql -c "VACUUM pgbench_accounts" >/dev/null
pg_sql -c "CREATE TABLE tt AS SELECT g AS id FROM generate_series(1, 200000) g; DELETE FROM tt WHERE id > 1000" >/dev/null
pg_sql -c "VACUUM tt" >/dev/null    # truncates the emptied tail: ftruncate
pg_sql -d postgres -c "CREATE DATABASE scratch" >/dev/null
pg_sql -d postgres -c "DROP DATABASE scratch" >/dev/null
pg_sql -c "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = 0" >/dev/null
pg_sql -c "CHECKPOINT" >/dev/null
pg_sql -c "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 70 = 0" >/dev/null
as_pg "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m immediate >/dev/null
wait "$STRACE_PID" 2>/dev/null || true   # strace ends with the last traced process
strace_start
pg_stop
wait "$STRACE_PID" 2>/dev/null || true
kill "$SAMPLER" 2>/dev/null; SAMPLER=""
python3 "$HERE/strace-summary.py" "$PG_D" "$PG_DATA"
