# pg/lib.sh (bash): sourced by pg/crash.sh and pg/bench.sh.
# One PostgreSQL 15 cluster (Debian's) in a directory of its own: PG_D/sock
# (its Unix socket; no TCP), PG_D/server.log; its data directory PG_DATA (on
# cutfs or on the real disk).  The server runs as the user postgres
# (PostgreSQL refuses root), the harness as root.
#   MODE  fpw      full_page_writes=on (stock)
#         lz4      full_page_writes=on, wal_compression=lz4 (stock, compressed images)
#         off      full_page_writes=off, nothing else: torn pages are possible
#         atomio   full_page_writes=off under LD_PRELOAD=$PRELOAD, the relation
#                  files under base/ and global/ protected, pg_wal not
# Settings common to all modes (pg_conf), and why:
#   initdb --data-checksums   every page of every fork carries a checksum:
#                             what pg_checksums, the server and pg/torn.c test
#   synchronous_commit=on, fsync=on   a COMMIT returns once its WAL is durable:
#                             an acknowledged transaction must survive
#   wal_sync_method=fdatasync (the default on Linux): WAL written with
#                             pwrite, made durable with fdatasync
#   listen_addresses=''       Unix socket only
# The crash harness makes pages leave shared buffers often (PG_SHARED 16MB,
# autovacuum every second, checkpoints every 30 s or 64MB of WAL); the
# benchmark sets its own sizes (pg/bench.sh).
set -eu
PG_D=${PG_D:?}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_SOCK=$PG_D/sock
PG_USER=postgres
PRELOAD=${PRELOAD:-}
PG_PID=""
PG_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "FAIL: $*" >&2; exit 1; }

# as_pg CMD...: run CMD as the user postgres, in this process (exec, so
# that $! of a backgrounded as_pg is the command's own pid)
as_pg() { setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- "$@"; }

# pg_mode MODE DATA: choose the mode and the data directory
pg_mode() {
	PG_MODE=$1; PG_DATA=$2
	case $PG_MODE in
	fpw|lz4|off) ;;
	atomio)
		[ -n "$PRELOAD" ] && [ -f "$PRELOAD" ] || die "mode atomio needs PRELOAD=path/to/libatomio_preload.so" ;;
	*) die "unknown mode $PG_MODE (fpw, lz4, off, atomio)" ;;
	esac
	mkdir -p "$PG_SOCK"
	chown "$PG_USER:" "$PG_D" "$PG_SOCK"
}

# The mode's settings, as postgres -c options.
pg_mode_opts() {
	case $PG_MODE in
	fpw) echo "-c full_page_writes=on -c wal_compression=off" ;;
	lz4) echo "-c full_page_writes=on -c wal_compression=lz4" ;;
	off|atomio) echo "-c full_page_writes=off -c wal_compression=off" ;;
	esac
}

# The preload library's environment (mode atomio): its log beside the data
# directory, on the same filesystem; the relation files (names that start
# with a digit: 16384, 16384_fsm, 16384_vm.1, ...) of every database and of
# global/ protected.  Not protected: pg_wal (checksummed records, a torn tail
# ends recovery), pg_control and pg_filenode.map (512-byte, sector-atomic by
# design, written in place and fsynced), pg_internal.init (rebuilt when
# missing), base/pgsql_tmp (temporary files), temporary relations (t3_16384).
pg_env() {
	if [ "$PG_MODE" = atomio ]; then
		echo "LD_PRELOAD=$PRELOAD ATOMIO_LOG=$(dirname "$PG_DATA")/atomio.log" \
			"ATOMIO_LOG_SIZE=${PG_ATOMIO_LOG_SIZE:-256M}" ${ATOMIO_LAZY_MS:+ATOMIO_LAZY_MS=$ATOMIO_LAZY_MS} \
			"ATOMIO_FILES=$PG_DATA/base/[0-9]*/[0-9]*:$PG_DATA/global/[0-9]*" \
			"ATOMIO_STATS=$PG_D/atomio.stats"
	fi
}

# pg_initdb [SCALE]: a cluster with data checksums, pgbench's tables at
# SCALE (default PG_SCALE or 4), the ledger table, amcheck (in every
# database) and pg_visibility;
# autovacuum has set the visibility map (VACUUM), then a clean stop.
pg_initdb() {
	scale=${1:-${PG_SCALE:-4}}
	mkdir -p "$PG_DATA"; chown "$PG_USER:" "$PG_DATA"
	setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- env $(pg_env) \
		"$PG_BIN/initdb" --data-checksums --auth=trust -U postgres -E UTF8 --locale=C -D "$PG_DATA" \
		>"$PG_D/initdb.log" 2>&1 || { tail "$PG_D/initdb.log"; die "initdb"; }
	cat >>"$PG_DATA/postgresql.conf" <<CONF
# pg/lib.sh
listen_addresses = ''
unix_socket_directories = '$PG_SOCK'
max_connections = 30
shared_buffers = ${PG_SHARED:-16MB}
checkpoint_timeout = ${PG_CKPT_TIMEOUT:-30s}
max_wal_size = ${PG_MAX_WAL:-64MB}
min_wal_size = 32MB
synchronous_commit = on
fsync = on
restart_after_crash = on
autovacuum_naptime = ${PG_AV_NAPTIME:-1s}
autovacuum_vacuum_scale_factor = 0.01
autovacuum_vacuum_insert_scale_factor = 0.01
autovacuum_analyze_scale_factor = 0.05
log_min_messages = warning
log_checkpoints = on
log_line_prefix = '%m [%p] %b '
CONF
	sync "$PG_DATA/postgresql.conf"   # on cutfs, unsynced data is lost at the unmount
	pg_start || { tail "$PG_D/server.log"; die "the fresh cluster does not start"; }
	pg_sql -d postgres -c "CREATE DATABASE bench" >/dev/null
	as_pg "$PG_BIN/pgbench" -h "$PG_SOCK" -U postgres -i -q -s "$scale" bench >"$PG_D/pgbench-init.log" 2>&1 \
		|| { tail "$PG_D/pgbench-init.log"; die "pgbench -i"; }
	pg_sql -c "CREATE TABLE ledger (run int NOT NULL, client int NOT NULL, n int NOT NULL, PRIMARY KEY (run, client, n));
		CREATE EXTENSION amcheck; CREATE EXTENSION pg_visibility" >/dev/null
	pg_sql -c "VACUUM ANALYZE" >/dev/null
	# pg_amcheck --all checks every database with amcheck installed
	pg_sql -d postgres -c "CREATE EXTENSION amcheck" >/dev/null
	pg_sql -d template1 -c "CREATE EXTENSION amcheck" >/dev/null
	pg_stop
}

# pg_start: start the server (crash recovery), wait until it answers; 1 if
# it does not (it died, or PG_START_TIMEOUT, default 300 s, passed).
pg_start() {
	: >> "$PG_D/server.log"
	chown "$PG_USER:" "$PG_D/server.log"
	# the preload library's environment set by env, as postgres (after
	# setpriv): root's setpriv would load the library too, and its recovery
	# before main would find the log owned by another user
	setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups -- env $(pg_env) \
		"$PG_BIN/postgres" -D "$PG_DATA" $(pg_mode_opts) ${PG_OPTS:-} >>"$PG_D/server.log" 2>&1 &
	PG_PID=$!
	echo "$PG_PID" > "$PG_D/postmaster.harness"
	pg_wait_ready || { pg_kill; return 1; }
}

# pg_wait_ready: until the server accepts connections; 1 if the postmaster
# died or PG_START_TIMEOUT passed
pg_wait_ready() {
	for _ in $(seq 1 $(( ${PG_START_TIMEOUT:-300} * 10 ))); do
		if "$PG_BIN/pg_isready" -q -h "$PG_SOCK" -d bench 2>/dev/null; then
			return 0
		fi
		kill -0 "$PG_PID" 2>/dev/null || { wait "$PG_PID" 2>/dev/null || true; PG_PID=""; return 1; }
		sleep 0.1
	done
	return 1
}

# pg_stop: fast shutdown (a shutdown checkpoint writes every dirty page)
pg_stop() {
	[ -n "$PG_PID" ] || return 0
	kill -INT "$PG_PID" 2>/dev/null || true
	wait "$PG_PID" 2>/dev/null || true
	rm -f "$PG_D/postmaster.harness"
	PG_PID=""
}

# The postmaster's children (backends, checkpointer, background writer,
# walwriter, autovacuum, startup), by pid.
pg_children() { [ -n "$PG_PID" ] && ps -o pid= --ppid "$PG_PID" 2>/dev/null | tr -d ' ' || true; }

# pg_kill: SIGKILL the postmaster and every child at once (a crash without
# power loss: what the processes wrote is in the page cache); wait until
# every one is gone, so that the next start finds no process attached to
# the old shared memory.
pg_kill() {
	# a server started in a subshell (pg_initdb in one): its pid from the file
	[ -n "$PG_PID" ] || { PG_PID=$(cat "$PG_D/postmaster.harness" 2>/dev/null || true); \
		[ -n "$PG_PID" ] && kill -0 "$PG_PID" 2>/dev/null || { PG_PID=""; return 0; }; }
	kids=$(pg_children)
	kill -9 "$PG_PID" $kids 2>/dev/null || true
	wait "$PG_PID" 2>/dev/null || true
	for p in "$PG_PID" $kids; do
		for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
	done
	rm -f "$PG_D/postmaster.harness"
	PG_PID=""
}

# pg_kill_child PICK: SIGKILL one child of the postmaster, the PICK-th
# (modulo their number); prints "pid (what it was)".  The postmaster then
# kills the others and recovers in place (restart_after_crash).
pg_kill_child() {
	pick=$1
	kids=$(pg_children)
	set -- $kids
	[ $# -gt 0 ] || { echo "none"; return 0; }
	i=$(( pick % $# + 1 ))
	victim=${!i}
	what=$(tr '\0' ' ' < "/proc/$victim/cmdline" 2>/dev/null | cut -c1-60)
	kill -9 "$victim" 2>/dev/null || true
	echo "$victim ($what)"
}

# pg_sql ARGS: psql as postgres on the database bench (unless -d is given)
pg_sql() { "$PG_BIN/psql" -h "$PG_SOCK" -U postgres -X -A -t -q -v ON_ERROR_STOP=1 -d bench "$@"; }
